//
// destruction_sweep_test.cpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// Destroying an object at each point of its wait's life, on one thread (issue 34): pending
// in the wheel, due but not yet noticed, due with its completion queued (destroyed by the
// handler of another object earlier in the batch that completes it, bound to a strand or
// not), by its own handler, and, for the timers with ranges, once a timeout_scale::set()
// made it due. Each handler must be called exactly once, as Asio's timer calls it: every
// scenario is a TEST_CASE_TEMPLATE that runs asio::basic_waitable_timer first, so that the
// expectation is Asio's behaviour, then idle_timer and heartbeat. What only ours can do
// (touch() after the completion was queued) and heartbeat_group's members follow. An
// idle_timer or heartbeat destroyed with its completion queued used to free what that
// completion read (heap-use-after-free in activity_timer::leave_queue under ASan).
// destruction_sweep_mt_test does the same with the context run by several threads.
//
// How a completion is caught queued: on a frozen manual_clock, a companion expires at the
// same instant and was started first, so its handler runs first in the same batch (each test
// checks that the subject's handler had not run then).
//
// Options are written without designators: this file builds as C++17 too.

#include <asio_wheel/heartbeat.hpp>
#include <asio_wheel/heartbeat_group.hpp>
#include <asio_wheel/idle_timer.hpp>
#include <asio_wheel/timeout_scale.hpp>

#include <asio/basic_waitable_timer.hpp>
#include <asio/bind_executor.hpp>
#include <asio/error.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/strand.hpp>

#include <doctest/doctest.h>

#include "asio_test_support.hpp"
#include "destroyable_waits.hpp"
#include "frozen_run.hpp"
#include "manual_clock.hpp"

#include <chrono>
#include <memory>
#include <set>
#include <vector>

namespace {

using namespace std::chrono_literals;
using namespace asio_wheel::test;

struct clock_tag;
using tclock = frozen_clock<clock_tag>;
const tclock::time_point t0(frozen_start);
constexpr auto kStill = frozen_still;

using steady = steady_kind<tclock>;
using idle = idle_kind<tclock>;
using heartbeat = heartbeat_kind<tclock>;
using idle_range = idle_kind<tclock, true>;
using heartbeat_range = heartbeat_kind<tclock, true>;

// A success: for a heartbeat, its first event, the ping.
template <typename Kind>
void check_success(const wait_record& r) {
  CHECK(r.calls == 1);
  CHECK(r.ec == kOk);
  if (std::is_same_v<Kind, heartbeat>)
    CHECK(r.ping);
}

void check_aborted(const wait_record& r) {
  CHECK(r.calls == 1);
  CHECK(r.ec == kAborted);
}

// Runs until `r` has its call, then a while longer: a second call would show.
void settle(asio::io_context& ioc, const wait_record& r) {
  tclock::set(t0 + 1h);
  CHECK(run_until(ioc, [&] { return r.calls > 0; }));
  run_for(ioc, kStill);
}

// The subject (due at t0 + 10 ms) and a companion of the same kind due at the same instant,
// started first; the companion's handler runs `between` while the subject's completion is
// queued behind it in the same batch. Both handlers dispatched through `ex`'s strand when
// `on_strand`.
template <typename Kind, typename Between>
void with_subject_queued(asio::io_context& ioc, bool on_strand,
                         std::unique_ptr<typename Kind::object>& subject, wait_record& r,
                         Between between) {
  auto strand = asio::make_strand(ioc);
  auto companion = Kind::make(ioc.get_executor(), 10ms);
  subject = Kind::make(ioc.get_executor(), 10ms);
  bool ran = false;
  auto companion_handler = [&](asio::error_code, auto...) {
    ran = true;
    CHECK(r.calls == 0); // the subject's completion is queued, not run
    between();
  };
  if (on_strand) {
    Kind::wait(*companion, asio::bind_executor(strand, companion_handler));
    Kind::wait(*subject, asio::bind_executor(strand, record_handler{&r}));
  } else {
    Kind::wait(*companion, companion_handler);
    Kind::wait(*subject, record_handler{&r});
  }
  tclock::set(t0 + 10ms);
  CHECK(run_until(ioc, [&] { return ran && r.calls == 1; }));
  run_for(ioc, kStill);
  CHECK(ran);
}

} // namespace

TEST_CASE_TEMPLATE("destroyed while its wait is pending: the handler is called once, with "
                   "operation_aborted",
                   Kind, steady, idle, heartbeat) {
  tclock::reset(t0, /*running=*/false);
  asio::io_context ioc;
  wait_record r;
  auto subject = Kind::make(ioc.get_executor(), 10ms);
  Kind::wait(*subject, record_handler{&r});

  SUBCASE("from outside run()") {
    subject.reset();
  }
  SUBCASE("from another object's handler") {
    auto other = Kind::make(ioc.get_executor(), 5ms);
    Kind::wait(*other, [&](asio::error_code, auto...) { subject.reset(); });
    tclock::set(t0 + 5ms);
    CHECK(run_until(ioc, [&] { return subject == nullptr; }));
    other.reset();
  }
  SUBCASE("from a posted handler, its deadline passed but the context not yet run") {
    // Asio's timer is still in its queue until the reactor's next pass, ours in the wheel
    // until the next turn: both abort it.
    tclock::set(t0 + 10ms);
    subject.reset();
  }
  settle(ioc, r);
  check_aborted(r);
}

TEST_CASE_TEMPLATE("destroyed once its completion is queued (by a handler earlier in the batch "
                   "that completes it): the handler is called once, with success",
                   Kind, steady, idle, heartbeat) {
  for (const bool on_strand : {false, true}) {
    CAPTURE(on_strand);
    tclock::reset(t0, /*running=*/false);
    asio::io_context ioc;
    wait_record r;
    std::unique_ptr<typename Kind::object> subject;
    with_subject_queued<Kind>(ioc, on_strand, subject, r, [&] { subject.reset(); });
    check_success<Kind>(r);
  }
}

TEST_CASE_TEMPLATE("destroyed by its own handler, inside the batch that completed it: called "
                   "once; a later handler of the batch finds nothing to do",
                   Kind, steady, idle, heartbeat) {
  tclock::reset(t0, /*running=*/false);
  asio::io_context ioc;
  wait_record r;
  auto subject = Kind::make(ioc.get_executor(), 10ms);
  auto later = Kind::make(ioc.get_executor(), 10ms);
  Kind::wait(*subject, [&](asio::error_code ec, auto... ev) {
    record_handler{&r}(ec, ev...);
    subject.reset();
  });
  bool later_ran = false;
  Kind::wait(*later, [&](asio::error_code, auto...) {
    later_ran = true;
    CHECK(subject == nullptr);
  });
  tclock::set(t0 + 10ms);
  CHECK(run_until(ioc, [&] { return later_ran; }));
  run_for(ioc, kStill);
  CHECK(later_ran);
  check_success<Kind>(r);
}

TEST_CASE_TEMPLATE("idle_timer and heartbeat: touched after the completion was queued, then "
                   "destroyed: operation_aborted, as cancel() judges it",
                   Kind, idle, heartbeat) {
  for (const bool on_strand : {false, true}) {
    CAPTURE(on_strand);
    tclock::reset(t0, /*running=*/false);
    asio::io_context ioc;
    wait_record r;
    std::unique_ptr<typename Kind::object> subject;
    with_subject_queued<Kind>(ioc, on_strand, subject, r, [&] {
      subject->touch(); // the peer talks: not idle any more, the wait would go on
      subject.reset();
    });
    check_aborted(r);
  }
}

TEST_CASE_TEMPLATE("idle_timer and heartbeat: cancel() after the completion was queued, then "
                   "destroyed: the outcome cancel() fixed",
                   Kind, idle, heartbeat) {
  for (const bool touch_before : {false, true}) {
    CAPTURE(touch_before);
    tclock::reset(t0, /*running=*/false);
    asio::io_context ioc;
    wait_record r;
    std::unique_ptr<typename Kind::object> subject;
    with_subject_queued<Kind>(ioc, false, subject, r, [&] {
      if (touch_before)
        subject->touch();
      subject->cancel();
      subject->touch();
      subject.reset();
    });
    if (touch_before)
      check_aborted(r);
    else
      check_success<Kind>(r);
  }
}

TEST_CASE_TEMPLATE("idle_timer and heartbeat with ranges: destroyed after a "
                   "timeout_scale::set() made the parked wait due",
                   Kind, idle_range, heartbeat_range) {
  tclock::reset(t0, /*running=*/false);
  asio::io_context ioc;
  auto& scale = asio_wheel::timeout_scale::of(ioc);
  scale.set(1.0);
  wait_record r;
  auto subject = Kind::make(ioc.get_executor(), 10ms);
  Kind::wait(*subject, record_handler{&r});
  // Past its minimum: parked in its span's queue until the factor brings it down.
  tclock::set(t0 + 50ms);
  run_for(ioc, kStill);
  REQUIRE(r.calls == 0);

  SUBCASE("before the context ran the change: aborted, as a wait past its deadline") {
    scale.set(0.0);
    subject.reset();
    settle(ioc, r);
    check_aborted(r);
  }
  SUBCASE("from a handler run after the change: called once") {
    scale.set(0.0);
    asio::post(ioc, [&] { subject.reset(); });
    settle(ioc, r);
    // Whether the queue's wake or the posted handler ran first: once, either way.
    CHECK(r.calls == 1);
    CHECK((r.ec == kOk || r.ec == kAborted));
  }
  scale.set(1.0);
}

// heartbeat_group: a member has no wait of its own; the group's one wait delivers events to
// members by reference. Destroying a member at any point must leave no event for it.
namespace {

using group_t = asio_wheel::basic_heartbeat_group<tclock>;

struct conn : group_t::member {
  explicit conn(std::set<const group_t::member*>& live) : live_(live) { live_.insert(this); }
  ~conn() { live_.erase(this); }
  std::set<const group_t::member*>& live_;
  int events = 0;
};

struct group_fixture {
  asio::io_context ioc;
  std::set<const group_t::member*> live;
  std::vector<std::unique_ptr<conn>> conns;
  std::function<void(conn&, group_t::event)> on_event = [](conn&, group_t::event) {};
  int stray = 0; // events for a member already destroyed
  std::unique_ptr<group_t> group;

  explicit group_fixture(const group_t::options& opts) {
    group = std::make_unique<group_t>(ioc, opts, [this](group_t::member& m, group_t::event ev) {
      if (live.count(&m) == 0) {
        ++stray;
        return;
      }
      auto& c = static_cast<conn&>(m);
      ++c.events;
      on_event(c, ev);
    });
    for (int i = 0; i < 3; ++i) {
      conns.push_back(std::make_unique<conn>(live));
      group->watch(*conns.back());
    }
  }
};

} // namespace

TEST_CASE("heartbeat_group: a member destroyed while pending, by another member's event in the "
          "same run, or by its own event, gets no event after it") {
  for (const bool ranges : {false, true}) {
    CAPTURE(ranges);
    tclock::reset(t0, /*running=*/false);
    const group_t::options opts =
        ranges ? group_t::options{{10ms, 10s}, {20ms, 20s}} : group_t::options{10ms, 20ms};
    group_fixture f(opts);
    if (ranges)
      asio_wheel::timeout_scale::of(f.ioc).set(0.0);
    SUBCASE("pending") {
      f.conns[1].reset();
    }
    SUBCASE("by another member's event, in the same run") {
      f.on_event = [&](conn& c, group_t::event) {
        if (&c == f.conns[0].get())
          f.conns[1].reset();
      };
    }
    SUBCASE("by its own event") {
      f.on_event = [&](conn& c, group_t::event) {
        for (auto& p : f.conns)
          if (p.get() == &c)
            p.reset();
      };
    }
    tclock::set(t0 + 1h);
    run_for(f.ioc, kStill);
    CHECK(f.stray == 0);
    for (auto& c : f.conns)
      if (c)
        CHECK(c->events >= 1);
    if (ranges)
      asio_wheel::timeout_scale::of(f.ioc).set(1.0);
  }
}

TEST_CASE("heartbeat_group with ranges: a member destroyed between a timeout_scale::set() and "
          "the group's rescale gets no event") {
  tclock::reset(t0, /*running=*/false);
  group_fixture f(group_t::options{{10ms, 10s}, {20ms, 20s}});
  auto& scale = asio_wheel::timeout_scale::of(f.ioc);
  scale.set(1.0);
  tclock::set(t0 + 50ms);
  run_for(f.ioc, kStill);
  scale.set(0.0);
  f.conns[2].reset(); // the rescale is posted, not run
  run_for(f.ioc, kStill);
  CHECK(f.stray == 0);
  CHECK(f.conns[0]->events >= 1);
  scale.set(1.0);
}
