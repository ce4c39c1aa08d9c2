//
// idle_timer_test.cpp
// ~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// asio_wheel::idle_timer and asio_wheel::heartbeat, on one thread (touch() from other
// threads is in idle_timer_mt_test.cpp).
//
// idle_timer: construction counts as activity; async_wait completes once the timeout has
// elapsed since the last touch(), never earlier; touches keep it pending; cancel(),
// per-operation cancellation and destruction abort it; set_timeout() moves a pending wait
// without aborting it; invalid timeouts throw; use_awaitable, deferred and as_tuple work.
//
// heartbeat: event::ping once the peer has been quiet for ping_after (once per quiet
// spell), event::drop once quiet for drop_after; touch() starts a new spell; invalid
// options throw; cancel() aborts.
//
// Timeouts that are ranges, scaled by the context's timeout_scale (issue 17), on a frozen
// manual_clock: timeout_range::at(); timeout_scale::set() rejects factors outside [0, 1];
// a lower factor completes the waits past their new timeout in the next turn, never the
// others; up and down repeatedly over several ranges (several queues); a touch while parked;
// set_timeout() to a range; per-operation cancellation, then a new wait; destruction while
// parked; a fixed timeout never creates the scale; heartbeat pings and drops at scaled
// thresholds; invalid ranges.
//
// Timing. Durations are tens of milliseconds. Never-early checks are exact: every lower
// bound is a time taken *before* the construction or touch() it refers to (the library's
// activity mark is never before the true time), compared with a time taken in the handler.
// Upper bounds are generous (kPrompt). A test whose point is that touches keep a timer
// pending first checks that the touches really were spaced closer than the timeout (a
// preempted test thread can leave a gap); if they were not, it says so and does not assert
// keep-alive, because an idle timer that fires after a real gap is correct.
//
// Heartbeat options are written {ping_after, drop_after}, without designators, and the
// coroutine cases are compiled where Asio has co_await: this file builds as C++17 too
// (scripts/test's cxx17 stage).

#include <asio_wheel/heartbeat.hpp>
#include <asio_wheel/idle_timer.hpp>
#include <asio_wheel/timeout_scale.hpp>

#include <asio/bind_allocator.hpp>
#include <asio/bind_cancellation_slot.hpp>
#include <asio/bind_executor.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/cancellation_type.hpp>
#include <asio/co_spawn.hpp>
#include <asio/error.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <asio/strand.hpp>
#include <asio/system_error.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

#include <doctest/doctest.h>

#include "asio_test_support.hpp"
#include "asio_tokens.hpp"
#include "frozen_run.hpp"
#include "manual_clock.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

namespace {

using namespace std::chrono_literals;
using namespace asio_wheel::test;
using hb_event = asio_wheel::heartbeat::event;

// "Promptly": generous for a noisy 2-core machine, still far below kFar.
constexpr auto kPrompt = 5s;

} // namespace

// =======================================================================================
// idle_timer
// =======================================================================================

TEST_CASE("idle_timer: construction counts as activity") {
  until_premise([&](bool last) {
    asio::io_context ctx;
    const auto before = sclock::now();
    asio_wheel::idle_timer idle(ctx, 300ms);
    const auto after = sclock::now();
    CHECK(idle.timeout() == 300ms);
    // The mark is never before the true time, and at most a coarse clock tick after it.
    CHECK(idle.last_activity() >= before);
    CHECK(idle.last_activity() <= after + 50ms);

    // Idle for longer than the timeout before anyone waits: the wait completes at once (it
    // is measured from the construction, not from async_wait), but never inside async_wait.
    std::this_thread::sleep_for(350ms);
    outcome o;
    const auto waited_at = sclock::now();
    idle.async_wait(record(o));
    CHECK(o.calls == 0);
    const auto r = guarded_run(ctx);
    CHECK_SUCCESS_PROMPTLY_AT(o, before + 300ms);
    CHECK(o.at >= idle.last_activity() + 300ms);
    CHECK_PROMPT(r);
    // Had the timeout counted from async_wait, this would be at least 300 ms; a process
    // stalled that long between the two makes it so too, and is tried again.
    if (o.at - waited_at >= 250ms && !last)
      return false;
    CHECK(o.at - waited_at < 250ms);
    return true;
  });
}

TEST_CASE("idle_timer: completes once the timeout has elapsed with no touch, never before") {
  for (const auto timeout : {1ms, 7ms, 23ms, 60ms}) {
    CAPTURE(timeout);
    asio::io_context ctx;
    const auto before = sclock::now();
    asio_wheel::idle_timer idle(ctx.get_executor(), timeout);
    outcome o;
    idle.async_wait(record(o));
    CHECK(o.calls == 0);
    const auto r = guarded_run(ctx);
    CHECK_SUCCESS_PROMPTLY_AT(o, before + timeout);
    CHECK(o.at >= idle.last_activity() + timeout);
    CHECK_PROMPT(r);
  }
}

TEST_CASE("idle_timer: many timers with different timeouts on one context, none early") {
  asio::io_context ctx;
  constexpr int kCount = 200;
  std::vector<std::unique_ptr<asio_wheel::idle_timer>> timers;
  std::vector<outcome> outcomes(kCount);
  std::vector<sclock::time_point> created(kCount);
  for (int i = 0; i < kCount; ++i) {
    created[i] = sclock::now();
    const auto timeout = std::chrono::milliseconds(1 + (i * 37) % 120);
    timers.push_back(std::make_unique<asio_wheel::idle_timer>(ctx, timeout));
    timers.back()->async_wait(record(outcomes[i]));
  }
  const auto r = guarded_run(ctx);
  for (int i = 0; i < kCount; ++i) {
    CAPTURE(i);
    CHECK_SUCCESS_PROMPTLY_AT(outcomes[i], created[i] + timers[i]->timeout());
  }
  CHECK_PROMPT(r);
}

TEST_CASE("idle_timer: touches keep it pending; it completes a timeout after the last touch, "
          "never before") {
  asio::io_context ctx;
  constexpr auto kTimeout = 150ms;
  constexpr int kTouches = 12; // every timeout/3: 600 ms of activity
  const auto start = sclock::now();
  asio_wheel::idle_timer idle(ctx, kTimeout);
  outcome o;
  idle.async_wait(record(o));
  ticker touches(ctx, kTimeout / 3, kTouches, [&] { idle.touch(); });
  const auto r = guarded_run(ctx);

  REQUIRE(touches.times().size() == static_cast<std::size_t>(kTouches));
  REQUIRE(o.calls == 1);
  CHECK(o.ec == kOk);

  // Never early: measured from the last touch before the completion.
  sclock::time_point last = start;
  for (const auto t : touches.times())
    if (t < o.at)
      last = std::max(last, t);
  CHECK(o.at >= last + kTimeout);
  CHECK(o.at - (last + kTimeout) < kPrompt);

  // Keep-alive: asserted only when the touches really came closer together than the
  // timeout (with margin for the coarse clock of the mark).
  const auto gap = touches.max_gap(start);
  if (gap < kTimeout - 20ms) {
    CHECK(o.at > touches.times().back());
    CHECK(o.at >= touches.times().back() + kTimeout);
  } else {
    MESSAGE("touch gap of " << std::chrono::duration<double, std::milli>(gap).count()
                            << " ms (machine stalled): keep-alive not asserted");
  }
  CHECK_PROMPT(r);
}

TEST_CASE("idle_timer: a touch while pending postpones the completion to timeout after it") {
  asio::io_context ctx;
  constexpr auto kTimeout = 80ms;
  const auto started = sclock::now(); // before the construction, which counts as a touch
  asio_wheel::idle_timer idle(ctx, kTimeout);
  outcome o;
  idle.async_wait(record(o));
  sclock::time_point touched{};
  asio::steady_timer later(ctx, 50ms);
  later.async_wait([&](asio::error_code) {
    touched = sclock::now();
    idle.touch();
  });
  const auto r = guarded_run(ctx);
  REQUIRE(o.calls == 1);
  CHECK(o.ec == kOk);
  // Unless the machine stalled past the first deadline before the touch (seen under Wine on a
  // loaded machine: the 50 ms timer 35 ms late): then the wait completed first, and the touch,
  // the last activity, came after it.
  if (o.at > touched) {
    CHECK(o.at >= touched + kTimeout);
    CHECK(o.at >= idle.last_activity() + kTimeout);
  } else {
    CHECK(o.at >= started + kTimeout);
  }
  CHECK_PROMPT(r);
}

TEST_CASE("idle_timer: a new wait after a completion, and after a touch") {
  asio::io_context ctx;
  constexpr auto kTimeout = 40ms;
  const auto before = sclock::now();
  asio_wheel::idle_timer idle(ctx, kTimeout);
  outcome first, second, third;
  sclock::time_point second_started{}, touched{};
  idle.async_wait([&](asio::error_code ec) {
    record(first)(ec);
    // Still idle: the next wait completes at once (through the timer, not inline).
    second_started = sclock::now();
    idle.async_wait([&](asio::error_code ec2) {
      record(second)(ec2);
      touched = sclock::now();
      idle.touch();
      idle.async_wait(record(third));
    });
    CHECK(second.calls == 0);
  });
  const auto r = guarded_run(ctx);
  CHECK_SUCCESS_PROMPTLY_AT(first, before + kTimeout);
  CHECK_SUCCESS_PROMPTLY_AT(second, before + kTimeout);
  CHECK(second.at - second_started < kPrompt);
  CHECK_SUCCESS_PROMPTLY_AT(third, touched + kTimeout);
  CHECK_PROMPT(r);
}

TEST_CASE("idle_timer: cancel() aborts the pending wait and returns the count") {
  asio::io_context ctx;
  asio_wheel::idle_timer idle(ctx, kFar);
  CHECK(idle.cancel() == 0);
  outcome o;
  idle.async_wait(record(o));
  std::size_t cancelled = 99;
  asio::post(ctx, [&] { cancelled = idle.cancel(); });
  const auto r = guarded_run(ctx);
  CHECK(cancelled == 1);
  CHECK_ABORTED(o);
  CHECK_PROMPT(r);

  // And it can be waited on again.
  ctx.restart();
  idle.set_timeout(20ms);
  outcome again;
  idle.async_wait(record(again));
  const auto r2 = guarded_run(ctx);
  CHECK_SUCCESS_PROMPTLY_AT(again, idle.last_activity() + 20ms);
  CHECK_PROMPT(r2);
}

TEST_CASE("idle_timer: per-operation cancellation aborts the wait (terminal, partial, total)") {
  for (const auto type : {asio::cancellation_type::terminal, asio::cancellation_type::partial,
                          asio::cancellation_type::total}) {
    CAPTURE(static_cast<unsigned>(type));
    asio::cancellation_signal signal; // outlives the wait bound to its slot
    asio::io_context ctx;
    asio_wheel::idle_timer idle(ctx, kFar);
    outcome o;
    idle.async_wait(asio::bind_cancellation_slot(signal.slot(), record(o)));
    asio::post(ctx, [&] { signal.emit(type); });
    const auto r = guarded_run(ctx, kPrompt);
    CHECK_ABORTED(o);
    CHECK_PROMPT(r);
  }
}

TEST_CASE("idle_timer: per-operation cancellation after a lazy re-arm still aborts") {
  asio::cancellation_signal signal;
  asio::io_context ctx;
  constexpr auto kTimeout = 40ms;
  const auto start = sclock::now();
  asio_wheel::idle_timer idle(ctx, kTimeout);
  outcome o;
  idle.async_wait(asio::bind_cancellation_slot(signal.slot(), record(o)));
  // Touch every 10 ms for 200 ms: the wait re-arms itself several times; then cancel.
  ticker touches(ctx, 10ms, 20, [&] { idle.touch(); });
  asio::steady_timer cancel_at(ctx, 150ms);
  cancel_at.async_wait([&](asio::error_code) { signal.emit(asio::cancellation_type::terminal); });
  const auto r = guarded_run(ctx);
  REQUIRE(o.calls == 1);
  if (touches.max_gap(start) < kTimeout - 15ms) // no stall: still pending at 150 ms
    CHECK(o.ec == kAborted);
  else
    MESSAGE("touch gap too long (machine stalled): abort not asserted");
  CHECK_PROMPT(r);
}

TEST_CASE("idle_timer: set_timeout() while pending moves the wait without aborting it") {
  asio::io_context ctx;
  outcome o;
  const auto before = sclock::now();

  SUBCASE("shorter: completes at the new deadline, long before the old one") {
    asio_wheel::idle_timer idle(ctx, kFar);
    idle.async_wait(record(o));
    asio::steady_timer later(ctx, 30ms);
    later.async_wait([&](asio::error_code) { idle.set_timeout(60ms); });
    const auto r = guarded_run(ctx);
    CHECK(idle.timeout() == 60ms);
    CHECK_SUCCESS_PROMPTLY_AT(o, before + 60ms);
    CHECK(o.at >= idle.last_activity() + 60ms);
    CHECK_PROMPT(r);
  }

  SUBCASE("longer: does not complete at the old deadline, completes at the new one") {
    asio_wheel::idle_timer idle(ctx, 40ms);
    idle.async_wait(record(o));
    asio::steady_timer later(ctx, 10ms);
    bool changed = false;
    later.async_wait([&](asio::error_code) {
      if (o.calls == 0) { // not stalled past the old deadline
        idle.set_timeout(150ms);
        changed = true;
      }
    });
    const auto r = guarded_run(ctx);
    if (changed) {
      CHECK_SUCCESS_PROMPTLY_AT(o, before + 150ms);
      CHECK(o.at >= idle.last_activity() + 150ms);
    } else {
      MESSAGE("stalled past the first deadline: set_timeout not exercised");
    }
    CHECK_PROMPT(r);
  }

  SUBCASE("longer, before the context runs") {
    asio_wheel::idle_timer idle(ctx, 40ms);
    idle.async_wait(record(o));
    idle.set_timeout(150ms);
    const auto r = guarded_run(ctx);
    CHECK_SUCCESS_PROMPTLY_AT(o, before + 150ms);
    CHECK_PROMPT(r);
  }

  SUBCASE("to a timeout that has already elapsed since the last touch: completes at once") {
    asio_wheel::idle_timer idle(ctx, kFar);
    idle.async_wait(record(o));
    sclock::time_point changed_at{};
    asio::steady_timer later(ctx, 80ms);
    later.async_wait([&](asio::error_code) {
      changed_at = sclock::now();
      idle.set_timeout(20ms);
    });
    const auto r = guarded_run(ctx);
    CHECK_SUCCESS_PROMPTLY_AT(o, before + 80ms);
    CHECK(o.at >= idle.last_activity() + 20ms);
    CHECK(o.at - changed_at < kPrompt);
    CHECK_PROMPT(r);
  }

  SUBCASE("touches after set_timeout() follow the new timeout") {
    asio_wheel::idle_timer idle(ctx, kFar);
    idle.async_wait(record(o));
    idle.set_timeout(60ms);
    sclock::time_point touched{};
    asio::steady_timer later(ctx, 30ms);
    later.async_wait([&](asio::error_code) {
      touched = sclock::now();
      idle.touch();
    });
    const auto r = guarded_run(ctx);
    REQUIRE(o.calls == 1);
    CHECK(o.ec == kOk);
    if (o.at > touched)
      CHECK(o.at >= touched + 60ms);
    CHECK_PROMPT(r);
  }

  SUBCASE("with no wait pending: the next wait uses the new timeout") {
    asio_wheel::idle_timer idle(ctx, kFar);
    idle.set_timeout(30ms);
    idle.async_wait(record(o));
    const auto r = guarded_run(ctx);
    CHECK_SUCCESS_PROMPTLY_AT(o, before + 30ms);
    CHECK_PROMPT(r);
  }
}

TEST_CASE("idle_timer: an invalid timeout throws std::invalid_argument") {
  asio::io_context ctx;
  CHECK_THROWS_AS(asio_wheel::idle_timer(ctx, 0ms), std::invalid_argument);
  CHECK_THROWS_AS(asio_wheel::idle_timer(ctx, -1ms), std::invalid_argument);
  CHECK_THROWS_AS(asio_wheel::idle_timer(ctx.get_executor(), sclock::duration::zero()),
                  std::invalid_argument);
  CHECK_THROWS_AS(asio_wheel::idle_timer(ctx.get_executor(), sclock::duration::min()),
                  std::invalid_argument);
  CHECK_NOTHROW(asio_wheel::idle_timer(ctx, sclock::duration(1)));
  CHECK_NOTHROW(asio_wheel::idle_timer(ctx, sclock::duration::max()));

  // set_timeout(): throws, and the timer keeps its timeout and its pending wait.
  asio_wheel::idle_timer idle(ctx, 30ms);
  outcome o;
  idle.async_wait(record(o));
  CHECK_THROWS_AS(idle.set_timeout(0ms), std::invalid_argument);
  CHECK_THROWS_AS(idle.set_timeout(-5s), std::invalid_argument);
  CHECK(idle.timeout() == 30ms);
  const auto r = guarded_run(ctx);
  CHECK_SUCCESS_PROMPTLY_AT(o, idle.last_activity() + 30ms);
  CHECK_PROMPT(r);
}

TEST_CASE("idle_timer: a huge timeout saturates instead of overflowing; cancel ends it") {
  asio::io_context ctx;
  asio_wheel::idle_timer idle(ctx, sclock::duration::max());
  outcome o;
  idle.async_wait(record(o));
  asio::steady_timer later(ctx, 30ms);
  later.async_wait([&](asio::error_code) { idle.cancel(); });
  const auto r = guarded_run(ctx);
  CHECK_ABORTED(o); // not completed by an overflowed (past) deadline
  CHECK_PROMPT(r);
}

TEST_CASE("idle_timer: destroying it with a wait pending aborts the wait") {
  asio::io_context ctx;
  auto idle = std::make_unique<asio_wheel::idle_timer>(ctx, kFar);
  outcome o;
  idle->async_wait(record(o));
  asio::post(ctx, [&] { idle.reset(); });
  const auto r = guarded_run(ctx);
  CHECK_ABORTED(o);
  CHECK_PROMPT(r);
}

TEST_CASE("idle_timer and heartbeat: the handler's executor and allocator are used, also "
          "across a lazy re-arm") {
  asio::io_context ctx;
  auto strand = asio::make_strand(ctx);
  alloc_stats st;
  counting_allocator<int> alloc(st);
  bool on_strand = false;
  int calls = 0;
  asio::error_code result = asio::error::would_block;
  std::size_t allocs_seen = 0, deallocs_seen = 0;
  auto check = [&](const asio::error_code& ec) {
    ++calls;
    result = ec;
    on_strand = strand.running_in_this_thread();
    allocs_seen = st.allocs;
    deallocs_seen = st.deallocs;
  };
  // A touch soon after the start makes the first wheel deadline pass with recent activity:
  // the wait re-arms itself once before it completes.
  // Whether the touch came before the first deadline (300 ms after the start): a process
  // stalled past it completes the wait without a re-arm, rightly.
  bool touched_in_time = false;
  SUBCASE("idle_timer") {
    asio_wheel::idle_timer idle(ctx, 300ms);
    idle.async_wait(asio::bind_executor(strand, asio::bind_allocator(alloc, check)));
    asio::steady_timer toucher(ctx, 60ms);
    toucher.async_wait([&](asio::error_code) {
      touched_in_time = sclock::now() < idle.last_activity() + 300ms;
      idle.touch();
    });
    guarded_run(ctx);
  }
  SUBCASE("heartbeat") {
    asio_wheel::heartbeat hb(ctx, {300ms, 600ms});
    hb.async_next(asio::bind_executor(
        strand,
        asio::bind_allocator(alloc, [&](asio::error_code ec, asio_wheel::heartbeat::event e) {
          check(ec);
          CHECK(e == asio_wheel::heartbeat::event::ping);
        })));
    asio::steady_timer toucher(ctx, 60ms);
    toucher.async_wait([&](asio::error_code) {
      touched_in_time = sclock::now() < hb.last_activity() + 300ms;
      hb.touch();
    });
    guarded_run(ctx);
  }
  CHECK(calls == 1);
  CHECK(result == kOk);
  CHECK(on_strand);
  // One per round of the wheel wait, from the handler's allocator.
  if (touched_in_time)
    CHECK(allocs_seen >= 2);
  else
    CHECK(allocs_seen >= 1);
  CHECK(deallocs_seen == allocs_seen); // all released before the handler ran
}

TEST_CASE("idle_timer: use_awaitable, deferred and as_tuple (the coroutine subcases: C++20)") {
  asio::io_context ctx;
  constexpr auto kTimeout = 30ms;

#if defined(ASIO_HAS_CO_AWAIT)
  SUBCASE("use_awaitable: returns after the timeout") {
    outcome o;
    sclock::time_point before{};
    spawn(ctx, [&]() -> asio::awaitable<void> {
      before = sclock::now();
      asio_wheel::idle_timer idle(co_await asio::this_coro::executor, kTimeout);
      co_await idle.async_wait(asio::use_awaitable);
      ++o.calls;
      o.at = sclock::now();
    });
    const auto r = guarded_run(ctx);
    CHECK_SUCCESS_PROMPTLY_AT(o, before + kTimeout);
    CHECK_PROMPT(r);
  }

  SUBCASE("use_awaitable: cancel() throws operation_aborted") {
    outcome o;
    asio_wheel::idle_timer idle(ctx, kFar);
    spawn(ctx, [&]() -> asio::awaitable<void> {
      try {
        co_await idle.async_wait(asio::use_awaitable);
      } catch (const asio::system_error& e) {
        o.ec = e.code();
      }
      ++o.calls;
    });
    asio::steady_timer later(ctx, 10ms);
    later.async_wait([&](asio::error_code) { idle.cancel(); });
    const auto r = guarded_run(ctx);
    CHECK_ABORTED(o);
    CHECK_PROMPT(r);
  }
#endif

  SUBCASE("deferred, launched with a callback") {
    outcome o;
    const auto before = sclock::now();
    asio_wheel::idle_timer idle(ctx, kTimeout);
    auto op = idle.async_wait(deferred);
    std::move(op)(record(o));
    const auto r = guarded_run(ctx);
    CHECK_SUCCESS_PROMPTLY_AT(o, before + kTimeout);
    CHECK_PROMPT(r);
  }

#if defined(ASIO_HAS_CO_AWAIT)
  SUBCASE("deferred, awaited") {
    outcome o;
    sclock::time_point before{};
    spawn(ctx, [&]() -> asio::awaitable<void> {
      before = sclock::now();
      asio_wheel::idle_timer idle(co_await asio::this_coro::executor, kTimeout);
      auto op = idle.async_wait(deferred);
      co_await std::move(op)(asio::use_awaitable);
      ++o.calls;
      o.at = sclock::now();
    });
    const auto r = guarded_run(ctx);
    CHECK_SUCCESS_PROMPTLY_AT(o, before + kTimeout);
    CHECK_PROMPT(r);
  }
#endif

#if defined(ASIO_HAS_CO_AWAIT)
  SUBCASE("as_tuple(use_awaitable), success then cancellation") {
    outcome ok, aborted;
    sclock::time_point before{};
    asio_wheel::idle_timer* current = nullptr;
    spawn(ctx, [&]() -> asio::awaitable<void> {
      before = sclock::now();
      asio_wheel::idle_timer idle(co_await asio::this_coro::executor, kTimeout);
      current = &idle;
      auto [ec1] = co_await idle.async_wait(as_tuple(asio::use_awaitable));
      record(ok)(ec1);
      idle.set_timeout(kFar);
      idle.touch();
      auto [ec2] = co_await idle.async_wait(as_tuple(asio::use_awaitable));
      record(aborted)(ec2);
      current = nullptr;
    });
    // Cancels the second wait, once it is pending (a stalled process may come here first).
    asio::steady_timer later(ctx, 200ms);
    std::function<void(asio::error_code)> cancel_second = [&](asio::error_code) {
      if (current == nullptr)
        return;
      if (ok.calls == 0) {
        later.expires_after(50ms);
        later.async_wait(cancel_second);
        return;
      }
      current->cancel();
    };
    later.async_wait(cancel_second);
    const auto r = guarded_run(ctx);
    CHECK_SUCCESS_PROMPTLY_AT(ok, before + kTimeout);
    CHECK_ABORTED(aborted);
    CHECK_PROMPT(r);
  }
#endif
}

// =======================================================================================
// heartbeat
// =======================================================================================

namespace {

struct hb_record {
  hb_event ev;
  sclock::time_point at;
};

// Calls async_next repeatedly until an error or a drop; `on_event` may touch the heartbeat.
class hb_driver {
public:
  hb_driver(asio_wheel::heartbeat& hb, std::function<void(hb_event)> on_event = {})
      : hb_(hb), on_event_(std::move(on_event)) {
    next();
  }

  std::vector<hb_record> events;
  asio::error_code error;

  int count(hb_event ev) const {
    return static_cast<int>(std::count_if(events.begin(), events.end(),
                                          [ev](const hb_record& r) { return r.ev == ev; }));
  }

private:
  void next() {
    hb_.async_next([this](asio::error_code ec, hb_event ev) {
      if (ec) {
        error = ec;
        return;
      }
      events.push_back({ev, sclock::now()});
      if (on_event_)
        on_event_(ev);
      if (ev != hb_event::drop)
        next();
    });
  }

  asio_wheel::heartbeat& hb_;
  std::function<void(hb_event)> on_event_;
};

} // namespace

TEST_CASE("heartbeat: one ping after ping_after of silence, then a drop after drop_after") {
  // A judgement that comes after drop_after reports the drop alone: the ping needs the
  // context's thread not held back for drop_after - ping_after (the probe's premise).
  until_premise([&](bool last) {
    asio::io_context ctx;
    const auto before = sclock::now();
    asio_wheel::heartbeat hb(ctx, {40ms, 150ms});
    CHECK(hb.get_options().ping_after == 40ms);
    CHECK(hb.get_options().drop_after == 150ms);
    hb_driver d(hb);
    stall_probe probe(ctx, 200ms);
    const auto r = guarded_run(ctx);
    CHECK(!d.error);
    CHECK_PROMPT(r);
    REQUIRE(!d.events.empty());
    CHECK(d.events.back().ev == hb_event::drop);
    CHECK(d.events.back().at >= before + 150ms);
    CHECK(d.events.back().at >= hb.last_activity() + 150ms);
    CHECK(d.events.back().at - (before + 150ms) < kPrompt);
    if (probe.max_gap() >= 100ms && !last)
      return false;
    REQUIRE(d.events.size() == 2);
    CHECK(d.events[0].ev == hb_event::ping);
    CHECK(d.events[0].at >= before + 40ms);
    CHECK(d.events[0].at >= hb.last_activity() + 40ms);
    return true;
  });
}

TEST_CASE("heartbeat: a touch starts a new quiet spell: pinged again only ping_after after it, "
          "and the drop moves") {
  constexpr auto kPing = 50ms;
  constexpr auto kDrop = 250ms;
  constexpr int kAnswered = 3; // the first pings are answered (touch), then silence
  // Each ping needs its judgement before the spell's drop_after (see the test above).
  until_premise([&](bool last) {
    asio::io_context ctx;
    const auto before = sclock::now();
    asio_wheel::heartbeat hb(ctx, {kPing, kDrop});
    std::vector<sclock::time_point> touches;
    int pings = 0;
    hb_driver d(hb, [&](hb_event ev) {
      if (ev == hb_event::ping && ++pings <= kAnswered) {
        touches.push_back(sclock::now());
        hb.touch(); // the peer answered the ping
      }
    });
    stall_probe probe(ctx, (kAnswered + 1) * kPing + kDrop);
    const auto r = guarded_run(ctx);
    CHECK_PROMPT(r);
    REQUIRE(!d.events.empty());
    CHECK(d.events.back().ev == hb_event::drop);
    if (probe.max_gap() >= kDrop - kPing - 10ms && !last)
      return false;

    REQUIRE(d.events.size() == kAnswered + 2); // kAnswered + 1 pings, then the drop
    CHECK(d.count(hb_event::ping) == kAnswered + 1);
    REQUIRE(touches.size() == static_cast<std::size_t>(kAnswered));
    // Each ping comes ping_after after the start of its spell (construction or last touch).
    CHECK(d.events[0].at >= before + kPing);
    for (int i = 1; i <= kAnswered; ++i) {
      CAPTURE(i);
      CHECK(d.events[i].at >= touches[i - 1] + kPing);
    }
    // The drop comes drop_after after the last touch, not after the construction.
    CHECK(d.events.back().at >= touches.back() + kDrop);
    CHECK(d.events.back().at - (touches.back() + kDrop) < kPrompt);
    return true;
  });
}

TEST_CASE("heartbeat: regular input keeps it quiet; silence then brings the ping and the drop") {
  constexpr auto kPing = 90ms;
  constexpr auto kDrop = 200ms;
  constexpr int kTouches = 15; // every ping_after/3: 450 ms of input
  // Quietness needs the input in time: a stalled process (long input gaps) is tried again.
  until_premise([&](bool last_attempt) {
    asio::io_context ctx;
    const auto start = sclock::now();
    asio_wheel::heartbeat hb(ctx, {kPing, kDrop});
    hb_driver d(hb);
    ticker input(ctx, kPing / 3, kTouches, [&] { hb.touch(); });
    stall_probe probe(ctx, kPing / 3 * kTouches + kDrop + 20ms);
    const auto r = guarded_run(ctx);
    CHECK_PROMPT(r);

    REQUIRE(input.times().size() == static_cast<std::size_t>(kTouches));
    REQUIRE(!d.events.empty());
    CHECK(d.events.back().ev == hb_event::drop);
    // Never early, whatever the scheduling: each event comes at least its threshold after
    // the last touch before it.
    for (const auto& e : d.events) {
      sclock::time_point last = start;
      for (const auto t : input.times())
        if (t < e.at)
          last = std::max(last, t);
      CHECK(e.at >= last + (e.ev == hb_event::ping ? kPing : kDrop));
    }
    // The input came in time, and the ping was judged before the drop was due.
    const bool steady =
        input.max_gap(start) < kPing - 20ms && probe.max_gap() < kDrop - kPing - 10ms;
    if (!steady && !last_attempt)
      return false;
    REQUIRE(d.events.size() == 2);
    CHECK(d.events[0].ev == hb_event::ping);
    CHECK(d.events[0].at > input.times().back());
    CHECK(d.events[0].at >= input.times().back() + kPing);
    CHECK(d.events[1].at >= input.times().back() + kDrop);
    return true;
  });
}

TEST_CASE("heartbeat: invalid options throw std::invalid_argument") {
  asio::io_context ctx;
  using opts = asio_wheel::heartbeat::options;
  CHECK_THROWS_AS(asio_wheel::heartbeat(ctx, opts{0ms, 1s}), std::invalid_argument);
  CHECK_THROWS_AS(asio_wheel::heartbeat(ctx, opts{-1s, 1s}), std::invalid_argument);
  CHECK_THROWS_AS(asio_wheel::heartbeat(ctx, opts{1s, 1s}), std::invalid_argument);
  CHECK_THROWS_AS(asio_wheel::heartbeat(ctx, opts{2s, 1s}), std::invalid_argument);
  CHECK_THROWS_AS(asio_wheel::heartbeat(ctx.get_executor(), opts{1s, 0s}), std::invalid_argument);
  CHECK_NOTHROW(asio_wheel::heartbeat(ctx, opts{sclock::duration(1), sclock::duration(2)}));
  CHECK_NOTHROW(asio_wheel::heartbeat(ctx.get_executor(), opts{1s, sclock::duration::max()}));
}

TEST_CASE("heartbeat: cancel(), per-operation cancellation and destruction abort async_next") {
  asio::cancellation_signal signal; // outlives the wait bound to its slot
  asio::io_context ctx;
  asio::error_code got;
  int calls = 0;
  auto handler = [&](asio::error_code ec, hb_event) {
    ++calls;
    got = ec;
  };

  SUBCASE("cancel()") {
    asio_wheel::heartbeat hb(ctx, {kFar, 2 * kFar});
    CHECK(hb.cancel() == 0);
    hb.async_next(handler);
    std::size_t n = 99;
    asio::post(ctx, [&] { n = hb.cancel(); });
    const auto r = guarded_run(ctx);
    CHECK(n == 1);
    CHECK_PROMPT(r);
  }

  SUBCASE("destruction") {
    auto hb = std::make_unique<asio_wheel::heartbeat>(
        ctx, asio_wheel::heartbeat::options{kFar, 2 * kFar});
    hb->async_next(handler);
    asio::post(ctx, [&] { hb.reset(); });
    const auto r = guarded_run(ctx);
    CHECK_PROMPT(r);
  }

  for (const auto type : {asio::cancellation_type::terminal, asio::cancellation_type::partial,
                          asio::cancellation_type::total}) {
    SUBCASE(("per-operation, type " + std::to_string(static_cast<unsigned>(type))).c_str()) {
      asio_wheel::heartbeat hb(ctx, {kFar, 2 * kFar});
      hb.async_next(asio::bind_cancellation_slot(signal.slot(), handler));
      asio::post(ctx, [&] { signal.emit(type); });
      const auto r = guarded_run(ctx, kPrompt);
      CHECK_PROMPT(r);
    }
  }

  CHECK(calls == 1);
  CHECK(got == kAborted);
}

#if defined(ASIO_HAS_CO_AWAIT)
TEST_CASE("heartbeat: the coroutine loop of the documentation (as_tuple(use_awaitable))") {
  // The ping needs its judgement before drop_after (see the tests above).
  until_premise([&](bool last) {
    asio::io_context ctx;
    std::vector<hb_event> seen;
    const auto before = sclock::now();
    sclock::time_point dropped_at{};
    spawn(ctx, [&]() -> asio::awaitable<void> {
      asio_wheel::heartbeat hb(co_await asio::this_coro::executor, {20ms, 200ms});
      for (;;) {
        auto [ec, ev] = co_await hb.async_next(as_tuple(asio::use_awaitable));
        if (ec)
          break;
        seen.push_back(ev);
        if (ev == hb_event::drop) {
          dropped_at = sclock::now();
          break;
        }
      }
    });
    stall_probe probe(ctx, 250ms);
    const auto r = guarded_run(ctx);
    CHECK_PROMPT(r);
    REQUIRE(!seen.empty());
    CHECK(seen.back() == hb_event::drop);
    CHECK(dropped_at >= before + 200ms);
    if (probe.max_gap() >= 170ms && !last)
      return false;
    REQUIRE(seen.size() == 2);
    CHECK(seen[0] == hb_event::ping);
    return true;
  });
}
#endif // defined(ASIO_HAS_CO_AWAIT)

// =======================================================================================
// Scaled timeouts (issue 17)
// =======================================================================================

TEST_CASE("timeout_range: min + ceil(f * (max - min)), within [min, max]; fixed ranges") {
  using range = asio_wheel::timeout_range<std::chrono::nanoseconds>;
  const range r{10ms, 110ms};
  CHECK(r.at(1.0) == 110ms);
  CHECK(r.at(0.0) == 10ms);
  CHECK(r.at(0.5) == 60ms);
  CHECK(r.at(0.25) == 35ms);
  // Rounded up, to the duration's unit: never below the exact product.
  const range odd{std::chrono::nanoseconds(0), std::chrono::nanoseconds(3)};
  CHECK(odd.at(0.5) == std::chrono::nanoseconds(2));
  CHECK(odd.at(1e-9) == std::chrono::nanoseconds(1));
  CHECK(odd.at(-1.0) == std::chrono::nanoseconds(0)); // clamped, whatever f
  CHECK(odd.at(2.0) == std::chrono::nanoseconds(3));
  CHECK(odd.at(std::nan("")) == std::chrono::nanoseconds(0));
  // A span past 2^53: the double product rounds, the result stays in range.
  const range huge{std::chrono::nanoseconds(1), std::chrono::nanoseconds::max()};
  CHECK(huge.at(1.0) == std::chrono::nanoseconds::max());
  CHECK(huge.at(0.999999999) <= std::chrono::nanoseconds::max());
  CHECK(huge.at(0.5) > std::chrono::nanoseconds::max() / 2 - std::chrono::nanoseconds(1 << 12));
  // A duration is a fixed range, which no factor changes, and compares equal to it.
  const range fixed = 30s;
  CHECK(fixed.is_fixed());
  CHECK(fixed == 30s);
  CHECK(fixed.at(0.0) == 30s);
  CHECK_FALSE(r.is_fixed());
}

TEST_CASE("timeout_scale: one per context, factor 1 at first; set() outside [0, 1] or NaN "
          "throws std::invalid_argument and changes nothing") {
  asio::io_context ctx;
  auto& scale = asio_wheel::timeout_scale::of(ctx);
  CHECK(&scale == &asio_wheel::timeout_scale::of(ctx.get_executor()));
  CHECK(&scale == &asio::use_service<asio_wheel::timeout_scale>(ctx));
  CHECK(scale.factor() == 1.0);
  scale.set(0.25);
  CHECK(scale.factor() == 0.25);
  for (const double bad : {-0.01, 1.01, std::nan(""), std::numeric_limits<double>::infinity(),
                           -std::numeric_limits<double>::infinity()}) {
    CAPTURE(bad);
    try {
      scale.set(bad);
      FAIL("no exception");
    } catch (const std::invalid_argument& e) {
      CHECK(std::string(e.what()).find("must be in [0, 1]") != std::string::npos);
    }
    CHECK(scale.factor() == 0.25);
  }
  scale.set(0.0);
  scale.set(1.0);
  CHECK(scale.factor() == 1.0);
}

namespace {

constexpr auto kStillScaled = frozen_still;
constexpr auto kT0 = frozen_start;

// A handler recording the clock and the context's factor when it ran.
template <typename Clock>
struct scaled_outcome {
  int calls = 0;
  asio::error_code ec;
  typename Clock::time_point at{};
  double factor = -1;
};

template <typename Clock>
auto record_scaled(scaled_outcome<Clock>& o, asio_wheel::timeout_scale& scale) {
  return [&o, &scale](asio::error_code ec) {
    ++o.calls;
    o.ec = ec;
    o.at = Clock::now();
    o.factor = scale.factor();
  };
}

} // namespace

TEST_CASE("idle_timer: a range: a lowered factor completes the waits past their new timeout "
          "in the next turn, never the others") {
  struct tag;
  using clock = frozen_clock<tag>;
  using idle_t = asio_wheel::basic_idle_timer<clock>;
  const clock::time_point t0(kT0);
  clock::reset(t0, /*running=*/false);
  asio::io_context ioc;
  auto& scale = asio_wheel::timeout_scale::of(ioc);
  idle_t a(ioc, {10ms, 110ms});
  clock::set(t0 + 20ms);
  idle_t b(ioc, {10ms, 110ms});
  CHECK(a.get_timeout() == idle_t::range{10ms, 110ms});
  scaled_outcome<clock> oa, ob;
  a.async_wait(record_scaled(oa, scale));
  b.async_wait(record_scaled(ob, scale));
  clock::set(t0 + 60ms);
  run_for(ioc, kStillScaled);
  CHECK(oa.calls + ob.calls == 0); // 110 ms at factor 1
  CHECK(a.timeout() == 110ms);

  scale.set(0.5); // 60 ms: a has been idle that long, b 40 ms
  CHECK(a.timeout() == 60ms);
  CHECK(oa.calls == 0); // nothing on the caller's thread
  next_turn(ioc);       // the queue's wake: a's wait moves to now
  next_turn(ioc);       // and completes
  CHECK(oa.calls == 1);
  CHECK(oa.ec == kOk);
  CHECK(oa.at == t0 + 60ms);
  run_for(ioc, kStillScaled);
  CHECK(ob.calls == 0);

  scale.set(1.0);
  clock::set(t0 + 79ms);
  run_for(ioc, kStillScaled);
  CHECK(ob.calls == 0);
  scale.set(0.4); // 50 ms: b has been idle 59
  CHECK(run_until(ioc, [&] { return ob.calls == 1; }));
  CHECK(ob.at == t0 + 79ms);
  CHECK(ob.ec == kOk);
}

TEST_CASE("idle_timer and heartbeat: ranges: the factor changed up and down while they wait, "
          "over several ranges: each completes at its timeout in force, never before, none "
          "missed") {
  struct tag;
  using clock = frozen_clock<tag>;
  using idle_t = asio_wheel::basic_idle_timer<clock>;
  const clock::time_point t0(kT0);
  clock::reset(t0, /*running=*/false);
  asio::io_context ioc;
  auto& scale = asio_wheel::timeout_scale::of(ioc);
  const idle_t::range ranges[] = {{5ms, 405ms}, {20ms, 220ms}, {8ms, 408ms}, {50ms, 50ms}};
  constexpr int kTimers = 32;
  std::vector<std::unique_ptr<idle_t>> timers;
  std::vector<scaled_outcome<clock>> outcomes(kTimers);
  std::vector<clock::time_point> since(kTimers);
  for (int i = 0; i < kTimers; ++i) {
    const auto u = static_cast<std::size_t>(i);
    clock::set(t0 + i * 7ms);
    since[u] = clock::now();
    timers.push_back(std::make_unique<idle_t>(ioc, ranges[u % std::size(ranges)]));
    timers.back()->async_wait(record_scaled(outcomes[u], scale));
  }
  std::mt19937 rng(17);
  const double factors[] = {1.0, 0.0, 0.75, 0.1, 0.5, 0.3, 1.0, 0.05, 0.6};
  clock::time_point now = clock::now();
  for (int step = 0; step < 40; ++step) {
    now += std::chrono::milliseconds(rng() % 25);
    clock::set(now);
    const double f = factors[rng() % std::size(factors)];
    scale.set(f);
    next_turn(ioc);
    run_for(ioc, 3ms);
    CAPTURE(step);
    CAPTURE(f);
    for (int i = 0; i < kTimers; ++i) {
      const auto u = static_cast<std::size_t>(i);
      CAPTURE(i);
      if (now - since[u] >= ranges[u % std::size(ranges)].at(f))
        CHECK(outcomes[u].calls == 1);
      CHECK(outcomes[u].calls <= 1);
    }
  }
  for (int i = 0; i < kTimers; ++i) {
    const auto u = static_cast<std::size_t>(i);
    CAPTURE(i);
    if (outcomes[u].calls == 1) {
      CHECK(outcomes[u].ec == kOk);
      CHECK(outcomes[u].at - since[u] >= ranges[u % std::size(ranges)].at(outcomes[u].factor));
    }
  }
  clock::set(now + 410ms);
  CHECK(run_until(ioc, [&] {
    return std::all_of(outcomes.begin(), outcomes.end(), [](auto& o) { return o.calls == 1; });
  }));
}

TEST_CASE("idle_timer: a range: touched while parked, it waits from its new stamp; a lower "
          "factor does not complete it early") {
  struct tag;
  using clock = frozen_clock<tag>;
  using idle_t = asio_wheel::basic_idle_timer<clock>;
  const clock::time_point t0(kT0);
  clock::reset(t0, /*running=*/false);
  asio::io_context ioc;
  auto& scale = asio_wheel::timeout_scale::of(ioc);
  idle_t idle(ioc, {10ms, 110ms});
  scaled_outcome<clock> o;
  idle.async_wait(record_scaled(o, scale));
  clock::set(t0 + 50ms);
  run_for(ioc, kStillScaled); // past 10 ms: parked in the queue
  idle.touch();               // idle since t0 + 50 ms
  scale.set(0.0);             // 10 ms
  next_turn(ioc);
  run_for(ioc, kStillScaled);
  CHECK(o.calls == 0);
  clock::set(t0 + 59ms);
  run_for(ioc, kStillScaled);
  CHECK(o.calls == 0);
  clock::set(t0 + 60ms);
  CHECK(run_until(ioc, [&] { return o.calls == 1; }));
  CHECK(o.at == t0 + 60ms);
}

TEST_CASE("idle_timer: set_timeout() to and from a range while pending") {
  struct tag;
  using clock = frozen_clock<tag>;
  using idle_t = asio_wheel::basic_idle_timer<clock>;
  const clock::time_point t0(kT0);
  clock::reset(t0, /*running=*/false);
  asio::io_context ioc;
  auto& scale = asio_wheel::timeout_scale::of(ioc);
  scale.set(0.5);
  idle_t idle(ioc, 100ms);
  scaled_outcome<clock> o;
  idle.async_wait(record_scaled(o, scale));
  clock::set(t0 + 40ms);
  run_for(ioc, kStillScaled);
  idle.set_timeout({20ms, 100ms}); // 60 ms at 0.5
  CHECK(idle.timeout() == 60ms);
  run_for(ioc, kStillScaled);
  CHECK(o.calls == 0);
  scale.set(0.2); // 36 ms: due
  CHECK(run_until(ioc, [&] { return o.calls == 1; }));
  CHECK(o.at == t0 + 40ms);
  CHECK(o.ec == kOk);

  // From a range back to a fixed timeout, while parked.
  idle.touch();
  scaled_outcome<clock> o2;
  idle.async_wait(record_scaled(o2, scale));
  clock::set(t0 + 70ms);
  run_for(ioc, kStillScaled); // past 20 ms: parked
  idle.set_timeout(50ms);
  scale.set(0.0); // the range would say 20 ms: no longer its business
  next_turn(ioc);
  run_for(ioc, kStillScaled);
  CHECK(o2.calls == 0);
  clock::set(t0 + 90ms);
  CHECK(run_until(ioc, [&] { return o2.calls == 1; }));
  CHECK(o2.at == t0 + 90ms);

  CHECK_THROWS_WITH_AS(idle.set_timeout({30ms, 20ms}), doctest::Contains("min <= max"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(idle.set_timeout({0ms, 20ms}), doctest::Contains("positive"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(idle_t(ioc, {-1ms, 20ms}), doctest::Contains("positive"),
                       std::invalid_argument);
  CHECK(idle.get_timeout() == 50ms);
}

TEST_CASE("idle_timer: a range: per-operation cancellation while parked, then a new wait; "
          "destroyed while parked") {
  struct tag;
  using clock = frozen_clock<tag>;
  using idle_t = asio_wheel::basic_idle_timer<clock>;
  const clock::time_point t0(kT0);
  clock::reset(t0, /*running=*/false);
  asio::io_context ioc;
  auto& scale = asio_wheel::timeout_scale::of(ioc);
  asio::cancellation_signal signal;
  auto idle = std::make_unique<idle_t>(ioc, idle_t::range{10ms, 110ms});
  auto other = std::make_unique<idle_t>(ioc, idle_t::range{10ms, 110ms});
  scaled_outcome<clock> o1, o2, o3;
  idle->async_wait(asio::bind_cancellation_slot(signal.slot(), record_scaled(o1, scale)));
  other->async_wait(record_scaled(o3, scale));
  clock::set(t0 + 30ms);
  run_for(ioc, kStillScaled); // both parked
  signal.emit(asio::cancellation_type::terminal);
  CHECK(run_until(ioc, [&] { return o1.calls == 1; }));
  CHECK(o1.ec == kAborted);
  idle->async_wait(record_scaled(o2, scale)); // parked again, from its stamp (t0)
  run_for(ioc, kStillScaled);
  CHECK(o2.calls == 0);
  other.reset(); // leaves the queue
  CHECK(run_until(ioc, [&] { return o3.calls == 1; }));
  CHECK(o3.ec == kAborted);
  scale.set(0.1); // 20 ms: due
  CHECK(run_until(ioc, [&] { return o2.calls == 1; }));
  CHECK(o2.ec == kOk);
  CHECK(o2.at == t0 + 30ms);
}

TEST_CASE("idle_timer and heartbeat: fixed timeouts never create the context's timeout_scale") {
  asio::io_context ctx;
  asio_wheel::idle_timer idle(ctx, 1s);
  asio_wheel::heartbeat hb(ctx, {1s, 2s});
  outcome o;
  idle.async_wait(record(o));
  hb.async_next([](asio::error_code, hb_event) {});
  CHECK_FALSE(asio::has_service<asio_wheel::timeout_scale>(ctx));
  idle.cancel();
  hb.cancel();
  ctx.run();
  asio_wheel::idle_timer scaled(ctx, {1s, 2s});
  CHECK(asio::has_service<asio_wheel::timeout_scale>(ctx));
}

TEST_CASE("heartbeat: ranges: the ping and the drop at their scaled thresholds") {
  struct tag;
  using clock = frozen_clock<tag>;
  using hb_t = asio_wheel::basic_heartbeat<clock>;
  const clock::time_point t0(kT0);
  clock::reset(t0, /*running=*/false);
  asio::io_context ioc;
  auto& scale = asio_wheel::timeout_scale::of(ioc);
  hb_t hb(ioc, {{10ms, 50ms}, {40ms, 240ms}});
  CHECK(hb.get_options().ping_after == hb_t::range{10ms, 50ms});
  std::vector<std::pair<hb_t::event, clock::time_point>> events;
  std::function<void()> next = [&] {
    hb.async_next([&](asio::error_code ec, hb_t::event ev) {
      if (ec)
        return;
      events.emplace_back(ev, clock::now());
      if (ev == hb_t::event::ping)
        next();
    });
  };
  next();
  clock::set(t0 + 30ms);
  run_for(ioc, kStillScaled);
  CHECK(events.empty()); // ping at 50 ms
  scale.set(0.25);       // ping at 20 ms, drop at 90 ms
  CHECK(run_until(ioc, [&] { return events.size() == 1; }));
  CHECK(events[0].first == hb_t::event::ping);
  CHECK(events[0].second == t0 + 30ms);
  clock::set(t0 + 89ms);
  run_for(ioc, kStillScaled);
  CHECK(events.size() == 1);
  scale.set(1.0); // drop at 240 ms
  clock::set(t0 + 200ms);
  run_for(ioc, kStillScaled);
  CHECK(events.size() == 1);
  scale.set(0.5); // drop at 140 ms: past
  CHECK(run_until(ioc, [&] { return events.size() == 2; }));
  CHECK(events[1].first == hb_t::event::drop);
  CHECK(events[1].second == t0 + 200ms);
}

TEST_CASE("heartbeat: invalid threshold ranges throw std::invalid_argument saying what is "
          "allowed") {
  asio::io_context ctx;
  using opts = asio_wheel::heartbeat::options;
  using range = asio_wheel::heartbeat::range;
  CHECK_THROWS_WITH_AS(asio_wheel::heartbeat(ctx, opts{range{2s, 1s}, 5s}),
                       doctest::Contains("min <= max"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(asio_wheel::heartbeat(ctx, opts{range{1s, 6s}, range{2s, 5s}}),
                       doctest::Contains("ping_after.max < drop_after.max"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(asio_wheel::heartbeat(ctx, opts{range{0s, 1s}, 5s}),
                       doctest::Contains("0 < ping_after"), std::invalid_argument);
  CHECK_NOTHROW(asio_wheel::heartbeat(ctx, opts{range{1s, 4s}, range{2s, 5s}}));
}

TEST_CASE("idle_timer and heartbeat: ranges: once none waits in a queue, the context's run() "
          "returns (as after a fixed timer's cancel)") {
  // Parked past their minimum (1 ms), far from their maximum (10 s): the queue has a wait of
  // its own, which must go with the last timer in it.
  asio::io_context ctx;
  auto idle =
      std::make_unique<asio_wheel::idle_timer>(ctx, asio_wheel::idle_timer::range{1ms, 10s});
  asio_wheel::heartbeat hb(ctx, {{1ms, 10s}, {2ms, 20s}});
  outcome o;
  idle->async_wait(record(o));
  outcome ping;
  hb.async_next([&](asio::error_code ec, hb_event) { ping.complete(ec); });
  asio::steady_timer later(ctx, 50ms);
  later.async_wait([&](asio::error_code) {
    idle.reset(); // leaves its queue, aborts its wait
    hb.cancel();
  });
  const auto r = guarded_run(ctx, kPrompt);
  CHECK_ABORTED(o);
  CHECK_ABORTED(ping);
  CHECK_PROMPT(r);
  CHECK(r.elapsed < 2s);
}
