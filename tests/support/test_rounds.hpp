//
// test_rounds.hpp
// ~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_TEST_TEST_ROUNDS_HPP
#define ASIO_WHEEL_TEST_TEST_ROUNDS_HPP

#include <cstdlib>
#include <stdexcept>
#include <string>

namespace asio_wheel::test {

// How many of its random rounds a test runs: all `n`, or n / k (at least 1) when
// ASIO_WHEEL_TEST_ROUNDS_DIVISOR=k. For a platform where what each round does apart from the
// logic under test costs about a thousand times what it costs on Linux: under Wine every io_context
// is a completion port and a timer thread of the wineserver's, and every poll() a call into it
// (tests/CMakeLists.txt sets it there, and the stage lists it). Every Linux stage runs every
// round. A divisor takes rounds of each configuration, never a configuration or a test case.
inline int test_rounds(int n) {
  const char* text = std::getenv("ASIO_WHEEL_TEST_ROUNDS_DIVISOR");
  if (text == nullptr || *text == '\0')
    return n;
  const std::string s(text);
  std::size_t end = 0;
  unsigned long k = 0;
  try {
    k = std::stoul(s, &end);
  } catch (const std::exception&) {
    end = 0;
  }
  if (end != s.size() || k == 0 || k > 1000)
    throw std::invalid_argument("ASIO_WHEEL_TEST_ROUNDS_DIVISOR='" + s +
                                "': expected a whole number from 1 to 1000, e.g. '10'");
  const int reduced = n / static_cast<int>(k);
  return reduced < 1 ? 1 : reduced;
}

} // namespace asio_wheel::test

#endif // ASIO_WHEEL_TEST_TEST_ROUNDS_HPP
