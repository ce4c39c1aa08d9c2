//
// tests/toolchain/errors_test.cpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// The library's errors with and without exceptions: each bad input, in a child process,
// must reach the program with its message. With exceptions, as a thrown exception of the
// documented type; without (-fno-exceptions, ASIO_NO_EXCEPTIONS), through the program's
// throw_exception (user_throw_exception.hpp), which the library must call instead of
// returning into the code that failed. Then a run that reports nothing, on a strand of an
// any_io_executor (the executor recognition that uses RTTI when it can: -fno-rtti builds
// take the other path). Exit status 0 when all pass.

#include <asio_wheel.hpp>

#include <asio/any_io_executor.hpp>
#include <asio/io_context.hpp>
#include <asio/strand.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

#include "user_throw_exception.hpp"

namespace {

using namespace std::chrono_literals;

int failures = 0;
int report_fd = -1; // the child's end of the pipe

void report(const std::exception& e) {
  const char* what = e.what();
  (void)!::write(report_fd, what, std::strlen(what));
  ::_exit(0);
}

// Runs `bad` in a child; passes if the child reports an error whose message contains
// `expected` (and then ends without returning into `bad`).
void expect_error(const char* expected, const std::function<void()>& bad) {
  int fds[2];
  if (::pipe(fds) != 0) {
    std::perror("pipe");
    ++failures;
    return;
  }
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(fds[0]);
    report_fd = fds[1];
    user_error_hook = report;
#if defined(__cpp_exceptions)
    try {
      bad();
    } catch (const std::exception& e) {
      report(e);
    }
#else
    bad();
#endif
    ::_exit(1); // returned: no error reported
  }
  ::close(fds[1]);
  std::string message;
  char buffer[512];
  for (ssize_t n; (n = ::read(fds[0], buffer, sizeof buffer)) > 0;)
    message.append(buffer, static_cast<std::size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  const bool ok =
      WIFEXITED(status) && WEXITSTATUS(status) == 0 && message.find(expected) != std::string::npos;
  std::printf("%s: %s\n  reported: %s\n", ok ? "passed" : "FAILED", expected,
              message.empty() ? "(nothing)" : message.c_str());
  failures += !ok;
}

} // namespace

int main() {
  std::printf("errors_test: exceptions %s, RTTI %s\n",
#if defined(__cpp_exceptions)
              "on",
#else
              "off",
#endif
#if defined(__cpp_rtti) || defined(__GXX_RTTI)
              "on"
#else
              "off"
#endif
  );

  expect_error("asio_wheel::idle_timer: the timeout must be positive", [] {
    asio::io_context io;
    asio_wheel::idle_timer idle(io, 0ms);
  });
  expect_error("asio_wheel::heartbeat: need 0 < ping_after < drop_after", [] {
    asio::io_context io;
    asio_wheel::heartbeat beat(io, {2s, 1s});
  });
  expect_error("asio_wheel::heartbeat_group: the event handler is empty", [] {
    asio::io_context io;
    asio_wheel::heartbeat_group group(io, {1s, 2s}, nullptr);
  });
  expect_error("asio_wheel::timeout_scale::set: the factor must be in [0, 1]", [] {
    asio::io_context io;
    asio_wheel::timeout_scale::of(io).set(2.0);
  });
  expect_error("asio_wheel: invalid tick", [] {
    asio::io_context io;
    asio_wheel::wheel_timer::set_tick(io, 0ns);
  });
  expect_error("asio_wheel::cancel_after: the timeout is NaN",
               [] { (void)asio_wheel::cancel_after(std::chrono::duration<double>(std::nan(""))); });

  // Nothing to report: timers on a strand of an any_io_executor, and one aborted.
  asio::io_context io;
  auto strand = asio::make_strand(asio::any_io_executor(io.get_executor()));
  asio_wheel::wheel_timer a(strand, 1ms);
  asio_wheel::wheel_timer b(io, 1h);
  int ok = 0;
  a.async_wait([&](asio::error_code ec) { ok += !ec; });
  b.async_wait([&](asio::error_code ec) { ok += ec == asio::error::operation_aborted; });
  b.cancel();
  io.run();
  std::printf("%s: a run without errors\n", ok == 2 ? "passed" : "FAILED");
  failures += ok != 2;

  std::printf("errors_test: %s\n", failures == 0 ? "passed" : "FAILED");
  return failures == 0 ? 0 : 1;
}
