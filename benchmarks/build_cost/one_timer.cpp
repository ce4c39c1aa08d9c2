//
// benchmarks/build_cost/one_timer.cpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// The translation unit of issue 37 that scripts/build_cost compiles: one timer, one
// async_wait, the context run. Only what it includes and which timer it declares differ
// between the variants, so that the compile time and object size measured are those of the
// timer: BUILD_COST_TIMER is 0 for asio::steady_timer (the baseline), 1 for
// asio_wheel::wheel_timer from <asio_wheel/wheel_timer.hpp>, 2 for the same from
// <asio_wheel.hpp> (everything).

#ifndef BUILD_COST_TIMER
#error                                                                                             \
    "scripts/build_cost defines BUILD_COST_TIMER (0: steady_timer, 1: wheel_timer, 2: asio_wheel.hpp)"
#endif

#if BUILD_COST_TIMER == 0
#include <asio/steady_timer.hpp>
using timer_type = asio::steady_timer;
#elif BUILD_COST_TIMER == 1
#include <asio_wheel/wheel_timer.hpp>
using timer_type = asio_wheel::wheel_timer;
#elif BUILD_COST_TIMER == 2
#include <asio_wheel.hpp>
using timer_type = asio_wheel::wheel_timer;
#else
#error "BUILD_COST_TIMER: 0, 1 or 2"
#endif

#include <asio/error_code.hpp>
#include <asio/io_context.hpp>

#include <chrono>

int main() {
  asio::io_context ctx;
  timer_type timer(ctx, std::chrono::milliseconds(1));
  int fired = 0;
  timer.async_wait([&fired](const asio::error_code& ec) { fired = ec ? 2 : 1; });
  ctx.run();
  return fired == 1 ? 0 : 1;
}
