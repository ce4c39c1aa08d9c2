//
// tests/compile_fail/wide_clock.cpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// Must NOT compile, with the library's message (ctest "compile_fail_wide_clock"): a clock
// whose representation is wider than 64 bits, as libc++'s std::chrono::file_clock
// (__int128) is. The wheel counts ticks in 64 bits.

#include <asio_wheel/basic_wheel_timer.hpp>

#include <asio/io_context.hpp>

#include <chrono>
#include <ratio>

struct wide_clock {
  using rep = __int128;
  using period = std::nano;
  using duration = std::chrono::duration<rep, period>;
  using time_point = std::chrono::time_point<wide_clock>;
  static constexpr bool is_steady = false;
  static time_point now() noexcept { return time_point(); }
};

int main() {
  asio::io_context io;
  asio_wheel::basic_wheel_timer<wide_clock> timer(io);
  timer.async_wait([](asio::error_code) {});
}
