//
// asio_wheel.hpp
// ~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_HPP
#define ASIO_WHEEL_HPP

#include <asio_wheel/basic_wheel_timer.hpp>
#include <asio_wheel/cancel_after.hpp>
#include <asio_wheel/heartbeat.hpp>
#include <asio_wheel/heartbeat_group.hpp>
#include <asio_wheel/idle_timer.hpp>
#include <asio_wheel/statistics.hpp>
#include <asio_wheel/version.hpp>
#include <asio_wheel/virtual_clock.hpp>
#include <asio_wheel/virtual_time.hpp>
#include <asio_wheel/wheel_timer.hpp>

#endif // ASIO_WHEEL_HPP
