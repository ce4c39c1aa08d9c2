//
// benchmarks/build_cost/asio_src.cpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// Asio's own separate compilation (ASIO_SEPARATE_COMPILATION): its code, compiled once for
// the program. scripts/build_cost reports its cost apart: it is paid once, not per TU.

#include <asio/impl/src.hpp>
