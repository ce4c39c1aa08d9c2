//
// src.hpp
// ~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_SRC_HPP
#define ASIO_WHEEL_SRC_HPP

/// @file
/// The separately compiled part of asio-wheel. With ASIO_WHEEL_SEPARATE_COMPILATION
/// defined in every translation unit of a program, exactly one of them includes this file
/// (the CMake target asio_wheel::asio_wheel_compiled is such a translation unit, built as a
/// static library): it defines the library's functions that depend on no handler and no
/// executor, and the clock classes of wheel_timer and basic_wheel_timer<system_clock>
/// (std::chrono::steady_clock and system_clock with Asio's wait traits), which the other
/// translation units then do not compile. It composes with Asio's own
/// ASIO_SEPARATE_COMPILATION (or BOOST_ASIO_SEPARATE_COMPILATION), which it does not
/// include: Asio's code is compiled where the program compiles it (asio/impl/src.hpp), or
/// header-only.

#include <asio_wheel/detail/config.hpp>

#if !defined(ASIO_WHEEL_SEPARATE_COMPILATION)
#error                                                                                             \
    "asio_wheel/src.hpp is only for ASIO_WHEEL_SEPARATE_COMPILATION: define it in every translation unit, or do not include this file"
#endif

#define ASIO_WHEEL_DETAIL_SOURCE 1

#include <asio_wheel.hpp>

#include <asio_wheel/detail/impl/handler_executor.ipp>
#include <asio_wheel/detail/impl/wheel_driver.ipp>

ASIO_WHEEL_DETAIL_CLOCK_CLASSES(, std::chrono::steady_clock);
ASIO_WHEEL_DETAIL_CLOCK_CLASSES(, std::chrono::system_clock);

#endif // ASIO_WHEEL_SRC_HPP
