//
// tests/compile_fail/boost_asio_after.cpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// Must NOT compile, and its first error must say what to do (ctest
// "compile_fail_boost_asio_after"): the library included first (standalone flavour), then
// Boost.Asio, whose executor is given to a timer. boost_asio_first.cpp is the other order.

#include <asio_wheel/wheel_timer.hpp>

#include <boost/asio/io_context.hpp>

#include <chrono>

int main() {
  boost::asio::io_context io;
  asio_wheel::wheel_timer timer(io.get_executor(), std::chrono::seconds(1));
}
