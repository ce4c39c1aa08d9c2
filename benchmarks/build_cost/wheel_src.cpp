//
// benchmarks/build_cost/wheel_src.cpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// asio_wheel's separate compilation (ASIO_WHEEL_SEPARATE_COMPILATION, issue 37): its
// handler-independent code, compiled once for the program. scripts/build_cost compiles it
// only where include/asio_wheel/src.hpp exists, and reports its cost apart.

#include <asio_wheel/src.hpp>
