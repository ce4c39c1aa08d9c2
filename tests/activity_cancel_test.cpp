//
// activity_cancel_test.cpp
// ~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// Cancelling an idle_timer's or a heartbeat's operation once the completion of its wheel
// wait has been queued (issue 17, review finding F1). Such a completion used to re-judge the
// timer from its activity mark and wait again if it found a touch() since (or, for a range,
// a higher factor): the cancel() or the slot's emit was forgotten, and the operation hung
// while the peer kept talking. The rule now, stated against Asio's timer first: a
// cancellation is judged when it comes; due then, the wait succeeds (cancel() returns 0, as
// Asio's timer after its expiry); not due, it completes with operation_aborted (cancel()
// returns 1); either way it is never lost.
//
// How the completion is caught queued: on a frozen manual_clock, a companion timer expires
// at the same instant and was started first, so its handler runs first in the same batch
// (each test checks that it did), and does the cancellation there.
//
// Options are written {ping_after, drop_after}, without designators: this file builds as
// C++17 too (scripts/test's cxx17 stage).

#include <asio_wheel/heartbeat.hpp>
#include <asio_wheel/idle_timer.hpp>
#include <asio_wheel/timeout_scale.hpp>
#include <asio_wheel/wheel_timer.hpp>

#include <asio/basic_waitable_timer.hpp>
#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/cancellation_type.hpp>
#include <asio/error.hpp>
#include <asio/io_context.hpp>

#include <doctest/doctest.h>

#include "asio_test_support.hpp"
#include "frozen_run.hpp"
#include "manual_clock.hpp"

#include <chrono>
#include <cstddef>

namespace {

using namespace std::chrono_literals;
using namespace asio_wheel::test;

struct clock_tag;
using tclock = frozen_clock<clock_tag>;
const tclock::time_point t0(frozen_start);
constexpr auto kStill = frozen_still;

struct result {
  int calls = 0;
  asio::error_code ec;
  int event = -1;
};

// Runs `companion_handler` from a companion wheel timer that expires at `at` with the
// subject's wait (started by `start_subject`, after the companion's), then runs the context
// with the clock frozen at `at`, and then past every timeout of the subject.
template <typename StartSubject, typename Between>
void with_completion_queued(asio::io_context& ioc, tclock::time_point at,
                            StartSubject start_subject, const result& r, Between between) {
  asio_wheel::basic_wheel_timer<tclock> companion(ioc, at);
  bool ran = false;
  companion.async_wait([&](asio::error_code) {
    ran = true;
    CHECK(r.calls == 0); // the subject's completion is queued, not run
    between();
  });
  start_subject();
  tclock::set(at);
  CHECK(run_until(ioc, [&] { return ran && r.calls == 1; }));
  run_for(ioc, kStill); // no second call
  CHECK(r.calls == 1);
}

} // namespace

TEST_CASE_TEMPLATE("Asio's rule: cancel() after the wait's completion was queued returns 0, and "
                   "the wait succeeds",
                   Timer, asio::basic_waitable_timer<tclock>,
                   asio_wheel::basic_wheel_timer<tclock>) {
  tclock::reset(t0, /*running=*/false);
  asio::io_context ioc;
  Timer companion(ioc, t0 + 10ms);
  Timer subject(ioc, t0 + 10ms);
  result r;
  std::size_t cancelled = 99;
  companion.async_wait([&](asio::error_code) {
    CHECK(r.calls == 0);
    cancelled = subject.cancel();
  });
  subject.async_wait([&](asio::error_code ec) {
    ++r.calls;
    r.ec = ec;
  });
  tclock::set(t0 + 10ms);
  CHECK(run_until(ioc, [&] { return r.calls == 1; }));
  CHECK(cancelled == 0);
  CHECK(r.ec == kOk);
}

TEST_CASE("idle_timer: cancel() after the completion was queued: idle for its timeout then, it "
          "succeeds (0), even if touched after; touched before, it aborts (1) instead of "
          "waiting again") {
  using idle_t = asio_wheel::basic_idle_timer<tclock>;
  for (int touch_before : {0, 1}) {
    CAPTURE(touch_before);
    tclock::reset(t0, /*running=*/false);
    asio::io_context ioc;
    idle_t idle(ioc, 10ms);
    result r;
    std::size_t cancelled = 99;
    with_completion_queued(
        ioc, t0 + 10ms,
        [&] {
          idle.async_wait([&](asio::error_code ec) {
            ++r.calls;
            r.ec = ec;
          });
        },
        r,
        [&] {
          if (touch_before)
            idle.touch(); // a read: the peer is talking, not idle for 10 ms any more
          cancelled = idle.cancel();
          idle.touch();              // the outcome is fixed at the cancel
          CHECK(idle.cancel() == 0); // nothing left to cancel
        });
    CHECK(cancelled == (touch_before ? 1u : 0u));
    CHECK(r.ec == (touch_before ? kAborted : kOk));
  }
}

TEST_CASE("idle_timer: a slot's emit after the completion was queued, touched before: aborts") {
  using idle_t = asio_wheel::basic_idle_timer<tclock>;
  tclock::reset(t0, /*running=*/false);
  asio::io_context ioc;
  idle_t idle(ioc, 10ms);
  asio::cancellation_signal signal;
  result r;
  with_completion_queued(
      ioc, t0 + 10ms,
      [&] {
        idle.async_wait(asio::bind_cancellation_slot(signal.slot(), [&](asio::error_code ec) {
          ++r.calls;
          r.ec = ec;
        }));
      },
      r,
      [&] {
        idle.touch();
        signal.emit(asio::cancellation_type::terminal);
      });
  CHECK(r.ec == kAborted);
  // The handler left in the slot is inert: an emit now (no wait) does nothing, and a new
  // wait with another slot is not reached through the old one.
  signal.emit(asio::cancellation_type::terminal);
  asio::cancellation_signal other;
  result r2;
  idle.async_wait(asio::bind_cancellation_slot(other.slot(), [&](asio::error_code ec) {
    ++r2.calls;
    r2.ec = ec;
  }));
  signal.emit(asio::cancellation_type::terminal);
  run_for(ioc, kStill);
  CHECK(r2.calls == 0);
  other.emit(asio::cancellation_type::terminal); // still in the wheel: aborted there
  CHECK(run_until(ioc, [&] { return r2.calls == 1; }));
  CHECK(r2.ec == kAborted);
}

TEST_CASE("idle_timer: a range: cancel() after the completion was queued, the factor raised "
          "before: aborts (1) instead of waiting again") {
  using idle_t = asio_wheel::basic_idle_timer<tclock>;
  tclock::reset(t0, /*running=*/false);
  asio::io_context ioc;
  auto& scale = asio_wheel::timeout_scale::of(ioc);
  scale.set(0.0); // 10 ms
  idle_t idle(ioc, {10ms, 110ms});
  result r;
  std::size_t cancelled = 99;
  with_completion_queued(
      ioc, t0 + 10ms,
      [&] {
        idle.async_wait([&](asio::error_code ec) {
          ++r.calls;
          r.ec = ec;
        });
      },
      r,
      [&] {
        scale.set(1.0); // as another thread may: 110 ms
        cancelled = idle.cancel();
      });
  CHECK(cancelled == 1);
  CHECK(r.ec == kAborted);
}

TEST_CASE("heartbeat: cancel() after the completion was queued: the event due then (0), or, "
          "touched before, operation_aborted (1) instead of waiting again") {
  using hb_t = asio_wheel::basic_heartbeat<tclock>;
  for (int touch_before : {0, 1}) {
    CAPTURE(touch_before);
    tclock::reset(t0, /*running=*/false);
    asio::io_context ioc;
    hb_t hb(ioc, {10ms, 30ms});
    result r;
    std::size_t cancelled = 99;
    auto next = [&] {
      hb.async_next([&](asio::error_code ec, hb_t::event ev) {
        ++r.calls;
        r.ec = ec;
        r.event = static_cast<int>(ev);
      });
    };
    with_completion_queued(ioc, t0 + 10ms, next, r, [&] {
      if (touch_before)
        hb.touch();
      cancelled = hb.cancel();
      hb.touch();
    });
    CHECK(cancelled == (touch_before ? 1u : 0u));
    CHECK(r.ec == (touch_before ? kAborted : kOk));
    if (!touch_before) {
      CHECK(r.event == static_cast<int>(hb_t::event::ping));
      // The touch after the cancel began a new spell, which pings 10 ms after it, not before.
      r = {};
      next();
      tclock::set(t0 + 19ms);
      run_for(ioc, kStill);
      CHECK(r.calls == 0);
      tclock::set(t0 + 20ms);
      CHECK(run_until(ioc, [&] { return r.calls == 1; }));
      CHECK(r.ec == kOk);
      CHECK(r.event == static_cast<int>(hb_t::event::ping));
    }
  }
}

TEST_CASE("heartbeat: a slot's emit after the completion was queued, touched before: aborts") {
  using hb_t = asio_wheel::basic_heartbeat<tclock>;
  tclock::reset(t0, /*running=*/false);
  asio::io_context ioc;
  hb_t hb(ioc, {10ms, 30ms});
  asio::cancellation_signal signal;
  result r;
  with_completion_queued(
      ioc, t0 + 10ms,
      [&] {
        hb.async_next(
            asio::bind_cancellation_slot(signal.slot(), [&](asio::error_code ec, hb_t::event) {
              ++r.calls;
              r.ec = ec;
            }));
      },
      r,
      [&] {
        hb.touch();
        signal.emit(asio::cancellation_type::partial);
      });
  CHECK(r.ec == kAborted);
}

// A cancellation while the wait is still in the wheel (its ping due, the driver not yet run)
// aborts it: no ping was reported, so the next async_next() reports it, for the emit of a
// slot as for cancel() (before, the emit's judgement marked the ping sent: the next one
// waited for the drop).
TEST_CASE("heartbeat: a cancellation that aborts a wait still in the wheel, its ping due, "
          "leaves the ping to the next async_next(): by cancel() and by a slot's emit") {
  using hb_t = asio_wheel::basic_heartbeat<tclock>;
  for (const bool by_slot : {false, true}) {
    CAPTURE(by_slot);
    tclock::reset(t0, /*running=*/false);
    asio::io_context ioc;
    hb_t hb(ioc, {10ms, 30ms});
    asio::cancellation_signal signal;
    result first, second;
    hb.async_next(
        asio::bind_cancellation_slot(signal.slot(), [&](asio::error_code ec, hb_t::event) {
          ++first.calls;
          first.ec = ec;
          hb.async_next([&](asio::error_code ec2, hb_t::event ev) {
            ++second.calls;
            second.ec = ec2;
            second.event = static_cast<int>(ev);
          });
        }));
    tclock::set(t0 + 15ms); // the ping is due; nothing has run
    if (by_slot)
      signal.emit(asio::cancellation_type::terminal);
    else
      CHECK(hb.cancel() == 1);
    CHECK(run_until(ioc, [&] { return second.calls == 1; }));
    CHECK(first.calls == 1);
    CHECK(first.ec == kAborted);
    CHECK(second.ec == asio::error_code());
    CHECK(second.event == static_cast<int>(hb_t::event::ping));
    hb.cancel();
    run_for(ioc, kStill);
  }
}
