//
// wheel_timer.hpp
// ~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_WHEEL_TIMER_HPP
#define ASIO_WHEEL_WHEEL_TIMER_HPP

#include <asio_wheel/basic_wheel_timer.hpp>

#include <chrono>

namespace asio_wheel {

/// Typedef for a timing-wheel timer on std::chrono::steady_clock: the drop-in replacement
/// for asio::steady_timer.
using wheel_timer = basic_wheel_timer<std::chrono::steady_clock>;

} // namespace asio_wheel

#endif // ASIO_WHEEL_WHEEL_TIMER_HPP
