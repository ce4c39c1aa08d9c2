//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// A user's translation unit of a separately compiled program: one timer on each standard
// clock, whose clock classes come from src.cpp. Built as is, the program links and runs; built
// with another value of a configuration macro than src.cpp (tests/CMakeLists.txt), it must
// not link.

#include <asio_wheel/wheel_timer.hpp>

#include <chrono>

int main() {
  asio_wheel::asio::io_context ctx;
  asio_wheel::wheel_timer steady(ctx, std::chrono::milliseconds(1));
  asio_wheel::basic_wheel_timer<std::chrono::system_clock> system(ctx,
                                                                  std::chrono::milliseconds(1));
  int fired = 0;
  steady.async_wait([&fired](const asio_wheel::error_code& ec) { fired += ec ? 0 : 1; });
  system.async_wait([&fired](const asio_wheel::error_code& ec) { fired += ec ? 0 : 1; });
  ctx.run();
  return fired == 2 ? 0 : 1;
}
