//
// scaled_order_test.cpp
// ~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// Timeout ranges complete every timer at its own deadline at the factor in force, however
// its queue was joined (issue 23, items 1 and 2). A span's queue used to be a FIFO whose
// keys were raised to the tail's: a timer that joined after its minimum had long passed (a
// touch found at its wake-up, a wait started late) took the key of the timer ahead of it and
// completed when that one did: 48 s late for a heartbeat_group at factor 1, 200 s for an idle_timer
// after a change of the factor, in the scenarios below.
//
// Then the queues against a reference model (each timer's due time computed from its stamp
// and the factor, O(n)), with random touches, late waits and changes of the factor: after
// every step, no timer completed before its deadline at the factor in force, none later than
// that deadline (or the step that made it due) plus kTolerance, and none is still pending
// past that. On virtual time, so every instant is exact and the runs are fast.
//
// The heartbeat models touch no peer that has had its ping and waits for its drop: such a
// touch starts a spell whose ping (ping_after after it) can come before the drop that the
// lazy wait is filed for, and is delivered only at that drop's time, for fixed thresholds
// as for ranges (not a matter of the queues' order; reported separately).
//
// Options are written {ping_after, drop_after}, without designators: this file builds as
// C++17 too (scripts/test's cxx17 stage).

#include <asio_wheel/heartbeat.hpp>
#include <asio_wheel/heartbeat_group.hpp>
#include <asio_wheel/idle_timer.hpp>
#include <asio_wheel/timeout_scale.hpp>
#include <asio_wheel/virtual_time.hpp>

#include <asio/io_context.hpp>

#include <doctest/doctest.h>

#include "test_rounds.hpp"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace std::chrono_literals;
using vclock = asio_wheel::virtual_clock;
using tp = vclock::time_point;
using dur = vclock::duration;
using range = asio_wheel::timeout_range<dur>;
using idle_t = asio_wheel::basic_idle_timer<vclock>;
using beat_t = asio_wheel::basic_heartbeat<vclock>;
using group_t = asio_wheel::basic_heartbeat_group<vclock>;

// Within a tick of the timer's own wait, plus a tick of the queue's (or group's) wait: the
// two stages of a range (detail/scaled_queue.hpp, detail/threshold_queues.hpp).
constexpr dur kTolerance = 2ms;

double seconds(dur d) {
  return std::chrono::duration<double>(d).count();
}

} // namespace

// ---------------------------------------------------------------------------------------------
// The scenarios of the issue.
// ---------------------------------------------------------------------------------------------

namespace {

// Starts the operation of an idle_timer or a heartbeat; `done` records the instant it
// completes, and for a heartbeat the event. An aborted one (the waiter destroyed at the end
// of a test) records nothing.
struct outcome {
  tp at;
  bool ping = false;
};

void start_op(idle_t& w, std::optional<outcome>& done) {
  w.async_wait([&done](asio::error_code ec) {
    if (ec == asio::error::operation_aborted)
      return;
    REQUIRE(!ec);
    REQUIRE(!done);
    done = outcome{vclock::now()};
  });
}

void start_op(beat_t& w, std::optional<outcome>& done) {
  w.async_next([&done](asio::error_code ec, beat_t::event ev) {
    if (ec == asio::error::operation_aborted)
      return;
    REQUIRE(!ec);
    REQUIRE(!done);
    done = outcome{vclock::now(), ev == beat_t::event::ping};
  });
}

// Two waiters of one span, whose first deadline (an idle timeout, a ping) is the range
// {1 s, 1001 s}: b's minimum passes, so it is queued; then a, quiet for 202 s, starts its
// operation, 201 s after its own minimum. At factor 0.5, a is due at t0 + 501 s and b at t0 + 701
// s.
template <typename Waiter, typename Options>
void check_late_join(const Options& opts) {
  asio::io_context io;
  asio_wheel::virtual_time vt(io);
  auto& scale = asio_wheel::timeout_scale::of(io);
  const tp t0 = vt.now();
  Waiter a(io, opts); // quiet since t0
  vt.advance(200s);
  Waiter b(io, opts); // quiet since t0 + 200 s
  std::optional<outcome> a_done, b_done;
  start_op(b, b_done);
  vt.advance(2s);      // b is past its minimum: queued, keyed t0 + 201 s
  start_op(a, a_done); // joins the same span's queue after b, keyed t0 + 1 s
  vt.advance(0s);
  scale.set(0.5);
  vt.advance(1000s);
  REQUIRE(a_done);
  REQUIRE(b_done);
  MESSAGE("a completed " << seconds(a_done->at - (t0 + 501s)) << " s after its deadline");
  CHECK(a_done->at >= t0 + 501s);
  CHECK(a_done->at <= t0 + 501s + kTolerance);
  CHECK(b_done->at >= t0 + 701s);
  CHECK(b_done->at <= t0 + 701s + kTolerance);
}

} // namespace

TEST_CASE("idle_timer: a range: a wait started long after its minimum completes at its own "
          "timeout, not at the one of the timer queued ahead of it") {
  check_late_join<idle_t>(range{1s, 1001s});
}

TEST_CASE("heartbeat: ranges: a wait started long after its minimum pings at its own "
          "threshold, not at the one of the heartbeat queued ahead of it") {
  check_late_join<beat_t>(beat_t::options{{1s, 1001s}, {2s, 5001s}});
}

TEST_CASE("heartbeat_group: ranges at factor 1: a member touched while it waits in the ping "
          "queue is pinged at its own threshold, not at the tail's") {
  asio::io_context io;
  asio_wheel::virtual_time vt(io);
  const tp t0 = vt.now();
  std::vector<std::pair<const group_t::member*, tp>> pings;
  group_t group(io, {{10s, 100s}, {20s, 10000s}}, [&](group_t::member& m, group_t::event ev) {
    if (ev == group_t::event::ping)
      pings.emplace_back(&m, vclock::now());
  });
  group_t::member a, b;
  group.watch(a);
  vt.advance(11s); // a is in the ping queue (keyed t0 + 10 s)
  a.touch();       // found at its old threshold, t0 + 100 s: due at t0 + 111 s
  vt.advance(48s);
  group.watch(b); // joins the ping queue at t0 + 69 s
  vt.advance(200s - 59s);
  REQUIRE(pings.size() == 2);
  const auto a_at = pings[0].first == &a ? pings[0].second : pings[1].second;
  MESSAGE("a was pinged " << seconds(a_at - (t0 + 111s)) << " s after its threshold");
  CHECK(a_at >= t0 + 111s);
  CHECK(a_at <= t0 + 111s + kTolerance);
}

// ---------------------------------------------------------------------------------------------
// Against a reference model.
// ---------------------------------------------------------------------------------------------

namespace {

// Ranges sharing spans with different minima, so that a queue holds timers whose keys come
// from different minima, and fixed ones beside them.
const std::vector<range>& test_ranges() {
  static const std::vector<range> rs{{10ms, 1010ms}, {200ms, 1200ms}, {700ms, 1700ms},
                                     {5ms, 3005ms},  {300ms, 3300ms}, {50ms, 50ms},
                                     {1ms, 401ms},   {150ms, 550ms}};
  return rs;
}

const std::vector<double>& test_factors() {
  static const std::vector<double> fs{0.0, 0.05, 0.1, 0.3, 0.5, 0.77, 0.9, 1.0};
  return fs;
}

// The worst lateness seen, for the report.
struct lateness {
  dur worst = dur::zero();
  std::size_t completions = 0;
  void saw(dur d) {
    worst = std::max(worst, d);
    ++completions;
  }
};

} // namespace

namespace {

// The model of an idle_timer: due its timeout after its last touch.
struct idle_model {
  using waiter = idle_t;
  range r;
  static idle_model make(std::mt19937_64& rng) {
    return {test_ranges()[rng() % test_ranges().size()]};
  }
  std::unique_ptr<idle_t> create(asio::io_context& io) const {
    return std::make_unique<idle_t>(io, r);
  }
  bool may_touch(const idle_t&) const { return true; }
  tp due(const idle_t& w, double f) const { return w.last_activity() + r.at(f); }
  void completed(const idle_t&, const outcome&, double) {}
};

// The model of a heartbeat: the ping once per spell, then the drop (the rule of
// detail/heartbeat_rule.hpp).
struct beat_model {
  using waiter = beat_t;
  static constexpr beat_t::options opts{{20ms, 900ms}, {400ms, 1600ms}};
  tp pinged_for = tp::min();
  static beat_model make(std::mt19937_64&) { return {}; }
  std::unique_ptr<beat_t> create(asio::io_context& io) const {
    return std::make_unique<beat_t>(io, opts);
  }
  // Not between its ping and its drop: see the note at the top.
  bool may_touch(const beat_t& w) const { return pinged_for != w.last_activity(); }
  tp due(const beat_t& w, double f) const {
    const tp last = w.last_activity();
    return last + (pinged_for != last ? opts.ping_after.at(f) : opts.drop_after.at(f));
  }
  void completed(const beat_t& w, const outcome& o, double f) {
    const tp last = w.last_activity();
    CHECK(o.ping == (o.at < last + opts.drop_after.at(f)));
    if (o.ping)
      pinged_for = last;
  }
};

// n waiters, some started at once, then steps of touches, operations started (often past
// their minimum) and changes of the factor between advances of virtual time, checked after
// each advance against the model.
template <typename Model>
void run_activity_model(unsigned seed, std::size_t n, int steps) {
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  asio::io_context io;
  asio_wheel::virtual_time vt(io);
  auto& scale = asio_wheel::timeout_scale::of(io);
  double f = 1.0;
  struct entry {
    Model model;
    std::unique_ptr<typename Model::waiter> w;
    bool pending = false;
    std::optional<outcome> done; // a completion seen in the current step
  };
  std::vector<entry> es(n);
  const auto start = [&](entry& e) {
    e.pending = true;
    start_op(*e.w, e.done);
  };
  for (auto& e : es) {
    e.model = Model::make(rng);
    e.w = e.model.create(io);
    if (rng() % 2 == 0)
      start(e);
  }
  lateness seen;
  for (int step = 0; step < steps; ++step) {
    CAPTURE(step);
    // Nothing runs until the advance.
    for (auto& e : es) {
      const auto roll = rng() % 16;
      if (roll == 0 && e.model.may_touch(*e.w))
        e.w->touch();
      else if (roll == 1 && !e.pending)
        start(e);
    }
    if (rng() % 6 == 0) {
      f = test_factors()[rng() % test_factors().size()];
      scale.set(f);
    }
    const tp t0 = vt.now();
    // Stamps and factor are fixed until the step ends.
    std::vector<tp> due(n);
    for (std::size_t i = 0; i < n; ++i)
      due[i] = es[i].model.due(*es[i].w, f);
    vt.advance(rng() % 4 == 0 ? dur::zero() : dur(rng() % 300'000'000));
    const tp t1 = vt.now();
    for (std::size_t i = 0; i < n; ++i) {
      entry& e = es[i];
      if (!e.pending)
        continue;
      CAPTURE(i);
      const tp ready = std::max(due[i], t0);
      if (e.done) {
        CHECK(e.done->at >= due[i]); // never early
        CHECK(e.done->at <= ready + kTolerance);
        seen.saw(e.done->at - ready);
        e.model.completed(*e.w, *e.done, f);
        e.done.reset();
        e.pending = false;
      } else {
        CHECK(ready + kTolerance > t1); // not overdue
      }
    }
  }
  MESSAGE("seed " << seed << ": " << seen.completions << " completions, worst lateness "
                  << seconds(seen.worst) * 1e3 << " ms");
  for (auto& e : es)
    e.w.reset();
  vt.advance(0s);
}

} // namespace

TEST_CASE("idle_timer: ranges against a model: random touches, late waits and factor "
          "changes; each completes at its deadline at the factor in force, within a tick") {
  for (unsigned seed = 1; seed <= 6; ++seed)
    run_activity_model<idle_model>(seed, 48, 600);
}

TEST_CASE("heartbeat: ranges against a model: random touches, late waits and factor "
          "changes; each event at its threshold at the factor in force, within a tick") {
  for (unsigned seed = 101; seed <= 104; ++seed)
    run_activity_model<beat_model>(seed, 40, 500);
}

TEST_CASE("heartbeat_group: ranges against a model: random touches, watches and factor "
          "changes; each event at its threshold at the factor in force, within a tick") {
  const group_t::options options_set[] = {{{100ms, 1100ms}, {150ms, 2000ms}},
                                          {{5ms, 900ms}, {600ms, 1000ms}},
                                          {{}, {20ms, 1500ms}},
                                          {{300ms, 1300ms}, {350ms, 1350ms}}};
  // Seeds by position, so that a divided count (support/test_rounds.hpp) plays a prefix of
  // each configuration's rounds, the same ones on every platform.
  const int rounds = asio_wheel::test::test_rounds(3);
  unsigned configuration = 0;
  for (const auto& opts : options_set) {
    ++configuration;
    for (int k = 0; k < rounds; ++k) {
      const unsigned seed = (configuration - 1) * 3 + static_cast<unsigned>(k) + 1;
      CAPTURE(seed);
      std::mt19937_64 rng(seed);
      asio::io_context io;
      asio_wheel::virtual_time vt(io);
      auto& scale = asio_wheel::timeout_scale::of(io);
      double f = 1.0;
      constexpr std::size_t n = 64;

      struct conn : group_t::member {
        std::size_t id = 0;
        tp pinged_for = tp::min();
        std::vector<std::pair<group_t::event, tp>> events; // in the current step
      };
      std::vector<std::unique_ptr<conn>> cs;
      for (std::size_t i = 0; i < n; ++i) {
        cs.push_back(std::make_unique<conn>());
        cs.back()->id = i;
      }
      group_t group(io, opts, [](group_t::member& m, group_t::event ev) {
        static_cast<conn&>(m).events.emplace_back(ev, vclock::now());
      });
      for (auto& c : cs)
        if (rng() % 4 != 0)
          group.watch(*c);
      lateness seen;
      for (int step = 0; step < 500; ++step) {
        CAPTURE(step);
        for (auto& c : cs) {
          const auto roll = rng() % 16;
          if (roll == 0 && c->pinged_for != c->last_activity()) {
            c->touch();
          } else if (roll == 1 && !c->is_watched()) {
            group.watch(*c);
            c->pinged_for = tp::min();
          }
        }
        if (rng() % 6 == 0) {
          f = test_factors()[rng() % test_factors().size()];
          scale.set(f);
        }
        const tp t0 = vt.now();
        const dur ping_at = opts.ping_after.at(f);
        const dur drop_at = opts.drop_after.at(f);
        const bool pings = opts.ping_after.max != dur::zero();
        std::vector<bool> watched(n);
        for (std::size_t i = 0; i < n; ++i)
          watched[i] = cs[i]->is_watched();
        const dur d = rng() % 4 == 0 ? dur::zero() : dur(rng() % 250'000'000);
        vt.advance(d);
        const tp t1 = vt.now();
        for (std::size_t i = 0; i < n; ++i) {
          conn& c = *cs[i];
          CAPTURE(i);
          if (!watched[i]) {
            CHECK(c.events.empty());
            continue;
          }
          const tp last = c.last_activity();
          tp from = t0; // when the next event became possible: the step, or the ping
          bool dropped = false;
          for (const auto& [ev, at] : c.events) {
            REQUIRE_FALSE(dropped);
            const bool may_ping = pings && c.pinged_for != last;
            const tp next = last + (may_ping ? ping_at : drop_at);
            CHECK(at >= next); // never early
            CHECK(at <= std::max(next, from) + kTolerance);
            seen.saw(at - std::max(next, from));
            // The rule: the drop once it has passed, else the ping.
            const group_t::event expected =
                at >= last + drop_at ? group_t::event::drop : group_t::event::ping;
            CHECK(ev == expected);
            if (ev == group_t::event::ping)
              c.pinged_for = last;
            else
              dropped = true;
            from = at;
          }
          c.events.clear();
          CHECK(c.is_watched() == !dropped);
          if (!dropped) {
            const bool may_ping = pings && c.pinged_for != last;
            const tp next = last + (may_ping ? ping_at : drop_at);
            CHECK(std::max(next, from) + kTolerance > t1); // not overdue
          }
        }
      }
      MESSAGE("seed " << seed << ": " << seen.completions << " events, worst lateness "
                      << seconds(seen.worst) * 1e3 << " ms");
      for (auto& c : cs)
        group.unwatch(*c);
      vt.advance(0s);
    }
  }
}
