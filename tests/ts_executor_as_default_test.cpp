//
// ts_executor_as_default_test.cpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// Asio's ASIO_USE_TS_EXECUTOR_AS_DEFAULT, defined for this file alone by tests/CMakeLists.txt
// (and, in the separately compiled mode, for the src.hpp it compiles itself, as a program so
// configured must): every I/O object's default executor, asio::any_io_executor, is then the
// Networking TS's polymorphic asio::executor, which has no properties to query and may hold
// a TS executor such as the legacy io_context::strand: code written before Asio 1.17. A
// program built so changes only the timer's type too. Each template case states what
// asio::steady_timer does; the wheel's own facilities follow.
//

#if !defined(ASIO_USE_TS_EXECUTOR_AS_DEFAULT) || !defined(BOOST_ASIO_USE_TS_EXECUTOR_AS_DEFAULT)
#error "tests/CMakeLists.txt defines ASIO_USE_TS_EXECUTOR_AS_DEFAULT (and Boost's) for this file"
#endif

#include <asio_wheel/heartbeat.hpp>
#include <asio_wheel/idle_timer.hpp>
#include <asio_wheel/timeout_scale.hpp>
#include <asio_wheel/virtual_time.hpp>
#include <asio_wheel/wheel_timer.hpp>

#include <asio/error.hpp>
#include <asio/executor.hpp>
#include <asio/io_context.hpp>
#include <asio/io_context_strand.hpp>
#include <asio/steady_timer.hpp>
#include <asio/strand.hpp>
#include <asio/system_executor.hpp>

#include <doctest/doctest.h>

#include "asio_test_support.hpp"

#include <chrono>
#include <future>
#include <memory>
#include <type_traits>

using namespace asio_wheel::test;

TEST_CASE_TEMPLATE("a timer's default executor is asio::executor; a wait completes, cancel() "
                   "aborts it once",
                   Timer, TIMER_TYPES) {
  static_assert(std::is_same_v<typename Timer::executor_type, asio::executor>);
  asio::io_context ioc;
  Timer done(ioc, 1ms);
  Timer cancelled(ioc.get_executor(), 1h);
  int succeeded = 0;
  int aborted = 0;
  done.async_wait([&](const asio_wheel::error_code& ec) { succeeded += !ec; });
  cancelled.async_wait(
      [&](const asio_wheel::error_code& ec) { aborted += ec == asio::error::operation_aborted; });
  CHECK(cancelled.cancel() == 1);
  ioc.run();
  CHECK(succeeded == 1);
  CHECK(aborted == 1);
}

// The system context made first, then asio::executor's hold of the system executor (a
// process-wide object that exit destroys before the system context): a wheel that kept the
// system executor for its home and alarm destroyed them, from the system context's
// shutdown at exit, through that destroyed object (the test binary crashed after its
// last test). Asio's timer holds none there.
TEST_CASE_TEMPLATE("a timer on the system executor, made after the system context: the "
                   "program exits cleanly",
                   Timer, TIMER_TYPES) {
  const asio::system_executor system;
  static_cast<void>(asio::query(system, asio::execution::context));
  Timer t(system, 1ms);
  std::promise<asio_wheel::error_code> done;
  t.async_wait([&](const asio_wheel::error_code& ec) { done.set_value(ec); });
  auto result = done.get_future();
  REQUIRE(result.wait_for(kWatchdog) == std::future_status::ready);
  CHECK_FALSE(result.get());
}

// The system executor runs what it is given at once, on the calling thread: a handler bound
// to it runs on a thread of the system context for Asio's timer, and on one of the wheel's
// own pool for the wheel with the TS executor (see the case above), which must not be one
// thread, or a handler that blocks until another timer fires would stop the wheel. Asio's
// timer does this on POSIX only: on Windows (under Wine, in windows-quick) its waits on the
// system context complete from one thread, which the blocked handler holds (the inner wait
// times out), so there the case is the wheel's alone.
#if defined(_WIN32)
#define BLOCKING_HANDLER_TIMER_TYPES asio_wheel::wheel_timer
#else
#define BLOCKING_HANDLER_TIMER_TYPES TIMER_TYPES
#endif
TEST_CASE_TEMPLATE("a handler on the system executor that blocks until another timer of the "
                   "system context fires: it fires",
                   Timer, BLOCKING_HANDLER_TIMER_TYPES) {
  const asio::system_executor system;
  Timer outer_timer(system, 1ms);
  std::promise<bool> outer;
  outer_timer.async_wait([&](const asio_wheel::error_code&) {
    Timer inner_timer(system, 5ms);
    auto inner = std::make_shared<std::promise<void>>();
    inner_timer.async_wait([inner](const asio_wheel::error_code&) { inner->set_value(); });
    outer.set_value(inner->get_future().wait_for(10s) == std::future_status::ready);
  });
  auto result = outer.get_future();
  REQUIRE(result.wait_for(kWatchdog) == std::future_status::ready);
  CHECK(result.get());
}

TEST_CASE_TEMPLATE("a timer on the legacy io_context::strand, or on a strand held by "
                   "asio::executor, completes within that strand",
                   Timer, TIMER_TYPES) {
  asio::io_context ioc;
  asio::io_context::strand legacy(ioc);
  const auto modern = asio::make_strand(ioc);
  Timer on_legacy(legacy, 1ms);
  Timer on_modern(asio::executor(modern), 2ms);
  int in_strand = 0;
  on_legacy.async_wait([&](const asio_wheel::error_code& ec) {
    in_strand += !ec && legacy.running_in_this_thread();
  });
  on_modern.async_wait([&](const asio_wheel::error_code& ec) {
    in_strand += !ec && modern.running_in_this_thread();
  });
  ioc.run();
  CHECK(in_strand == 2);
}

// The wheel finds the io_context behind an asio::executor that holds io_context::strand: not
// found, it would run a thread of its own for the context, which virtual time cannot drive
// (its waits would never complete below), and the first wait's strand decides.
TEST_CASE("virtual time drives a wheel timer and an idle_timer on io_context::strand") {
  asio::io_context ioc;
  asio::io_context::strand legacy(ioc);
  asio_wheel::virtual_time vt(ioc);
  asio_wheel::basic_wheel_timer<asio_wheel::virtual_clock> timer(legacy, 10min);
  asio_wheel::basic_idle_timer<asio_wheel::virtual_clock> idle(legacy, 20min);
  int in_strand = 0;
  timer.async_wait([&](const asio_wheel::error_code& ec) {
    in_strand += !ec && legacy.running_in_this_thread();
  });
  idle.async_wait([&](const asio_wheel::error_code& ec) {
    in_strand += !ec && legacy.running_in_this_thread();
  });
  vt.advance(21min);
  CHECK(in_strand == 2);
}

// idle_timer, heartbeat and timeout_scale find their context through the executor (a scaled
// range joins its context's queues): by query, which asio::executor does not answer, or by
// its context() member.
TEST_CASE("idle_timer, heartbeat and timeout_scale on asio::executor") {
  asio::io_context ioc;
  const asio::executor ex = ioc.get_executor();
  asio_wheel::timeout_scale& scale = asio_wheel::timeout_scale::of(ex);
  CHECK(&scale == &asio_wheel::timeout_scale::of(ioc));
  scale.set(0.0); // ranged timeouts at their minimum
  asio_wheel::idle_timer idle(ex, {1ms, 1h});
  asio_wheel::heartbeat beat(ex, {{1ms, 1h}, {2ms, 2h}});
  int expired = 0;
  idle.async_wait([&](const asio_wheel::error_code& ec) { expired += !ec; });
  beat.async_next(
      [&](const asio_wheel::error_code& ec, asio_wheel::heartbeat::event) { expired += !ec; });
  const auto start = sclock::now();
  ioc.run_for(10s);
  CHECK(expired == 2);
  CHECK(sclock::now() - start < 5s);
}
