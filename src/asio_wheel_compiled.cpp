//
// src/asio_wheel_compiled.cpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// The one translation unit of asio_wheel::asio_wheel_compiled (and of
// asio_wheel::asio_wheel_boost_compiled): the library's separately compiled part, with
// ASIO_WHEEL_SEPARATE_COMPILATION (which the target defines for it and for its users).

#include <asio_wheel/src.hpp>
