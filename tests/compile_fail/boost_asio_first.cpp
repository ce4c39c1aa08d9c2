//
// tests/compile_fail/boost_asio_first.cpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// Must NOT compile, and its first error must say what to do (ctest
// "compile_fail_boost_asio_first"): Boost.Asio included, then the library, without
// ASIO_WHEEL_USE_BOOST_ASIO (the user linked asio_wheel::asio_wheel, not _boost). Built
// where the flavour under test is standalone Asio and Boost.Asio is found.

#include <boost/asio/io_context.hpp>

#include <asio_wheel/wheel_timer.hpp>

int main() {
  boost::asio::io_context io;
  asio_wheel::wheel_timer timer(io);
}
