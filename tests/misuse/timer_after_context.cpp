//
// tests/misuse/timer_after_context.cpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// Must stop with a message that names the mistake (ctest "misuse_timer_after_context"): a
// timer used after its execution context was destroyed. Undefined behaviour, as with
// asio::steady_timer; a debug build checks it (wheel_timer_impl::live_service), where it
// used to fail an assertion about the wheel's internals (and to hang with NDEBUG).

#include <asio_wheel/wheel_timer.hpp>

#include <asio/io_context.hpp>

#include <chrono>
#include <cstdio>
#include <optional>

int main() {
  std::optional<asio::io_context> context(std::in_place);
  asio_wheel::wheel_timer timer(*context);
  timer.expires_after(std::chrono::milliseconds(1));
  timer.async_wait([](asio::error_code) {});
  context->run();
  context.reset();
  timer.expires_after(std::chrono::seconds(1));
  timer.async_wait([](asio::error_code) {});
  std::puts("not stopped");
  return 0;
}
