//
// detail/min_max.hpp
// ~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_DETAIL_MIN_MAX_HPP
#define ASIO_WHEEL_DETAIL_MIN_MAX_HPP

// std::min and std::max as the library uses them (two values of one type), without
// <algorithm>: from C++20 on that header brings the ranges algorithms, and parsing it cost
// every translation unit that includes a timer more than these two functions are worth
// (issue 37, docs/build_cost.md). Same results as std::min / std::max: on a tie, the first
// argument.

namespace asio_wheel::detail {

template <typename T>
constexpr const T& min_of(const T& a, const T& b) noexcept(noexcept(b < a)) {
  return b < a ? b : a;
}

template <typename T>
constexpr const T& max_of(const T& a, const T& b) noexcept(noexcept(a < b)) {
  return a < b ? b : a;
}

} // namespace asio_wheel::detail

#endif // ASIO_WHEEL_DETAIL_MIN_MAX_HPP
