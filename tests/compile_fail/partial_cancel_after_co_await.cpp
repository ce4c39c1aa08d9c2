//
// tests/compile_fail/partial_cancel_after_co_await.cpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// Must NOT compile, and its first error must say what to do (ctest
// "compile_fail_partial_cancel_after_co_await"): co_await of an operation given the partial
// form, cancel_after(d), which yields a deferred operation that Asio before 1.23 cannot
// co_await (Debian 12's Asio is 1.22). Built only with such an Asio, in C++20; from 1.23 on
// the same code compiles and works (tests/cancel_after_test.cpp).

#include <asio_wheel/cancel_after.hpp>

#include <asio/awaitable.hpp>
#include <asio/steady_timer.hpp>

#include <chrono>

asio::awaitable<void> wait_at_most(asio::steady_timer& timer) {
  co_await timer.async_wait(asio_wheel::cancel_after(std::chrono::milliseconds(10)));
}

int main() {}
