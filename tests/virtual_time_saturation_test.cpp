//
// virtual_time_saturation_test.cpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// A program of its own: it leaves the process-wide virtual clock at time_point::max(), where
// no other test could run.

#include <asio_wheel/basic_wheel_timer.hpp>
#include <asio_wheel/virtual_time.hpp>

#include <asio/io_context.hpp>

#include <doctest/doctest.h>

#include <chrono>

using namespace std::chrono_literals;
using vclock = asio_wheel::virtual_clock;
using vtimer = asio_wheel::basic_wheel_timer<vclock>;

TEST_CASE("advance() and run_for() saturate at the clock's maximum: duration::max() is forever") {
  asio::io_context io;
  asio_wheel::virtual_time vt(io);
  vt.advance(1s); // the clock is past its epoch: now() + max() would overflow
  vtimer t(io, 10s);
  bool done = false;
  t.async_wait([&](const asio::error_code& ec) { done = !ec; });
  vt.advance(vclock::duration::max());
  CHECK(done);
  CHECK(vclock::now() == vclock::time_point::max());
}
