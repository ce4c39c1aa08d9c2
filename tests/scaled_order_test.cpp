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

#include <asio_wheel/heartbeat.hpp>
#include <asio_wheel/heartbeat_group.hpp>
#include <asio_wheel/idle_timer.hpp>
#include <asio_wheel/timeout_scale.hpp>
#include <asio_wheel/virtual_time.hpp>

#include <asio/io_context.hpp>

#include <doctest/doctest.h>

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

TEST_CASE("idle_timer: a range: a wait started long after its minimum completes at its own "
          "timeout, not at the one of the timer queued ahead of it") {
  asio::io_context io;
  asio_wheel::virtual_time vt(io);
  auto& scale = asio_wheel::timeout_scale::of(io);
  const tp t0 = vt.now();
  const range r{1s, 1001s};
  idle_t a(io, r); // quiet since t0
  vt.advance(200s);
  idle_t b(io, r); // quiet since t0 + 200 s
  std::optional<tp> a_done, b_done;
  b.async_wait([&](asio::error_code) { b_done = vclock::now(); });
  vt.advance(2s); // b is past its minimum: queued, keyed t0 + 201 s
  // a's minimum passed 201 s ago: it joins the same span's queue behind b.
  a.async_wait([&](asio::error_code) { a_done = vclock::now(); });
  vt.advance(0s);
  scale.set(0.5); // a at t0 + 501 s, b at t0 + 701 s
  vt.advance(1000s);
  REQUIRE(a_done);
  REQUIRE(b_done);
  MESSAGE("a completed " << seconds(*a_done - (t0 + 501s)) << " s after its deadline");
  CHECK(*a_done >= t0 + 501s);
  CHECK(*a_done <= t0 + 501s + kTolerance);
  CHECK(*b_done >= t0 + 701s);
  CHECK(*b_done <= t0 + 701s + kTolerance);
}

TEST_CASE("heartbeat: ranges: a wait started long after its minimum pings at its own "
          "threshold, not at the one of the heartbeat queued ahead of it") {
  asio::io_context io;
  asio_wheel::virtual_time vt(io);
  auto& scale = asio_wheel::timeout_scale::of(io);
  const tp t0 = vt.now();
  const beat_t::options opts{.ping_after = {1s, 1001s}, .drop_after = {2s, 5001s}};
  beat_t a(io, opts);
  vt.advance(200s);
  beat_t b(io, opts);
  std::optional<tp> a_ping, b_ping;
  b.async_next([&](asio::error_code, beat_t::event) { b_ping = vclock::now(); });
  vt.advance(2s);
  a.async_next([&](asio::error_code, beat_t::event) { a_ping = vclock::now(); });
  vt.advance(0s);
  scale.set(0.5); // pings: a at t0 + 501 s, b at t0 + 701 s
  vt.advance(1000s);
  REQUIRE(a_ping);
  REQUIRE(b_ping);
  MESSAGE("a pinged " << seconds(*a_ping - (t0 + 501s)) << " s after its threshold");
  CHECK(*a_ping >= t0 + 501s);
  CHECK(*a_ping <= t0 + 501s + kTolerance);
  CHECK(*b_ping >= t0 + 701s);
  CHECK(*b_ping <= t0 + 701s + kTolerance);
}

TEST_CASE("heartbeat_group: ranges at factor 1: a member touched while it waits in the ping "
          "queue is pinged at its own threshold, not at the tail's") {
  asio::io_context io;
  asio_wheel::virtual_time vt(io);
  const tp t0 = vt.now();
  std::vector<std::pair<const group_t::member*, tp>> pings;
  group_t group(io, {.ping_after = {10s, 100s}, .drop_after = {20s, 10000s}},
                [&](group_t::member& m, group_t::event ev) {
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

TEST_CASE("idle_timer: ranges against a model: random touches, late waits and factor "
          "changes; each completes at its deadline at the factor in force, within a tick") {
  for (unsigned seed = 1; seed <= 6; ++seed) {
    CAPTURE(seed);
    std::mt19937_64 rng(seed);
    asio::io_context io;
    asio_wheel::virtual_time vt(io);
    auto& scale = asio_wheel::timeout_scale::of(io);
    double f = 1.0;
    constexpr std::size_t n = 48;

    struct entry {
      std::unique_ptr<idle_t> timer;
      range r;
      bool pending = false;
      std::optional<tp> done; // completion seen in the current step
    };
    std::vector<entry> es(n);
    const auto start = [&](std::size_t i) {
      es[i].pending = true;
      es[i].timer->async_wait([&es, i](asio::error_code ec) {
        if (ec == asio::error::operation_aborted)
          return; // destroyed at the end
        REQUIRE(!ec);
        REQUIRE(es[i].pending);
        REQUIRE(!es[i].done);
        es[i].done = vclock::now();
      });
    };
    for (std::size_t i = 0; i < n; ++i) {
      es[i].r = test_ranges()[rng() % test_ranges().size()];
      es[i].timer = std::make_unique<idle_t>(io, es[i].r);
      if (rng() % 2 == 0)
        start(i);
    }
    lateness seen;
    for (int step = 0; step < 600; ++step) {
      CAPTURE(step);
      // Between advances: touches, waits started (late, often: past their minimum) and
      // changes of the factor. Nothing runs until the advance.
      for (std::size_t i = 0; i < n; ++i) {
        const auto roll = rng() % 16;
        if (roll == 0)
          es[i].timer->touch();
        else if (roll == 1 && !es[i].pending)
          start(i);
      }
      if (rng() % 6 == 0) {
        f = test_factors()[rng() % test_factors().size()];
        scale.set(f);
      }
      const tp t0 = vt.now();
      // Due times for this step: stamps and factor are fixed until it ends.
      std::vector<tp> due(n);
      for (std::size_t i = 0; i < n; ++i)
        due[i] = es[i].timer->last_activity() + es[i].r.at(f);
      const dur d = rng() % 4 == 0 ? dur::zero() : dur(rng() % 300'000'000);
      vt.advance(d);
      const tp t1 = vt.now();
      for (std::size_t i = 0; i < n; ++i) {
        entry& e = es[i];
        if (!e.pending)
          continue;
        CAPTURE(i);
        const tp ready = std::max(due[i], t0);
        if (e.done) {
          CHECK(*e.done >= due[i]); // never early
          CHECK(*e.done <= ready + kTolerance);
          seen.saw(*e.done - ready);
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
      e.timer.reset();
    vt.advance(0s);
  }
}

TEST_CASE("heartbeat_group: ranges against a model: random touches, watches and factor "
          "changes; each event at its threshold at the factor in force, within a tick") {
  const group_t::options options_set[] = {
      {.ping_after = {100ms, 1100ms}, .drop_after = {150ms, 2000ms}},
      {.ping_after = {5ms, 900ms}, .drop_after = {600ms, 1000ms}},
      {.ping_after = {}, .drop_after = {20ms, 1500ms}},
      {.ping_after = {300ms, 1300ms}, .drop_after = {350ms, 1350ms}}};
  unsigned seed = 0;
  for (const auto& opts : options_set) {
    for (unsigned k = 0; k < 3; ++k) {
      ++seed;
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

TEST_CASE("heartbeat: ranges against a model: random touches, late waits and factor "
          "changes; each event at its threshold at the factor in force, within a tick") {
  const beat_t::options opts{.ping_after = {20ms, 900ms}, .drop_after = {400ms, 1600ms}};
  for (unsigned seed = 101; seed <= 104; ++seed) {
    CAPTURE(seed);
    std::mt19937_64 rng(seed);
    asio::io_context io;
    asio_wheel::virtual_time vt(io);
    auto& scale = asio_wheel::timeout_scale::of(io);
    double f = 1.0;
    constexpr std::size_t n = 40;
    struct entry {
      std::unique_ptr<beat_t> hb;
      bool pending = false;
      tp pinged_for = tp::min();
      std::optional<std::pair<beat_t::event, tp>> done;
    };
    std::vector<entry> es(n);
    const auto start = [&](std::size_t i) {
      es[i].pending = true;
      es[i].hb->async_next([&es, i](asio::error_code ec, beat_t::event ev) {
        if (ec == asio::error::operation_aborted)
          return; // destroyed at the end
        REQUIRE(!ec);
        REQUIRE(!es[i].done);
        es[i].done.emplace(ev, vclock::now());
      });
    };
    for (std::size_t i = 0; i < n; ++i) {
      es[i].hb = std::make_unique<beat_t>(io, opts);
      start(i);
    }
    lateness seen;
    for (int step = 0; step < 500; ++step) {
      CAPTURE(step);
      for (std::size_t i = 0; i < n; ++i) {
        const auto roll = rng() % 16;
        if (roll == 0 && es[i].pinged_for != es[i].hb->last_activity())
          es[i].hb->touch();
        else if (roll == 1 && !es[i].pending)
          start(i);
      }
      if (rng() % 6 == 0) {
        f = test_factors()[rng() % test_factors().size()];
        scale.set(f);
      }
      const tp t0 = vt.now();
      const dur ping_at = opts.ping_after.at(f);
      const dur drop_at = opts.drop_after.at(f);
      const dur d = rng() % 4 == 0 ? dur::zero() : dur(rng() % 250'000'000);
      vt.advance(d);
      const tp t1 = vt.now();
      for (std::size_t i = 0; i < n; ++i) {
        entry& e = es[i];
        if (!e.pending)
          continue;
        CAPTURE(i);
        const tp last = e.hb->last_activity();
        const bool may_ping = e.pinged_for != last;
        const tp next = last + (may_ping ? ping_at : drop_at);
        const tp ready = std::max(next, t0);
        if (e.done) {
          const auto [ev, at] = *e.done;
          CHECK(at >= next);
          CHECK(at <= ready + kTolerance);
          seen.saw(at - ready);
          CHECK(ev == (at >= last + drop_at ? beat_t::event::drop : beat_t::event::ping));
          if (ev == beat_t::event::ping)
            e.pinged_for = last;
          e.done.reset();
          e.pending = false;
        } else {
          CHECK(ready + kTolerance > t1);
        }
      }
    }
    MESSAGE("seed " << seed << ": " << seen.completions << " events, worst lateness "
                    << seconds(seen.worst) * 1e3 << " ms");
    for (auto& e : es)
      e.hb.reset();
    vt.advance(0s);
  }
}
