//
// timing_wheel_cascade_limit_test.cpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// A cascade limit must change when re-filing work is done, never what expires or in which
// order: a wheel limited to a few moves per advance(), called until it reports done, is
// checked against an unlimited twin fed the same operations.
//

#include "reference_wheel.hpp"

#include <asio_wheel/detail/timing_wheel.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace {

using asio_wheel::detail::tick_type;
using asio_wheel::detail::timing_wheel;
using asio_wheel::detail::wheel_node;

struct node : wheel_node {
  int id = 0;
};

struct twin {
  explicit twin(std::size_t n) : nodes(n) {
    for (std::size_t i = 0; i < n; ++i)
      nodes[i].id = static_cast<int>(i);
  }
  ~twin() {
    for (auto& n : nodes)
      if (n.is_linked())
        wheel.remove(n);
  }
  timing_wheel wheel;
  std::vector<node> nodes;
};

// Unlinks what a failed check left in the wheel, before either is destroyed.
struct unlink_all {
  timing_wheel& w;
  std::vector<node>& ns;
  ~unlink_all() {
    for (auto& n : ns)
      if (n.is_linked())
        w.remove(n);
  }
};

// A start tick whose every digit is 63, 0 or random: at the edges of each level's windows.
tick_type edge_start(std::mt19937_64& rng) {
  tick_type start = 0;
  for (unsigned level = 0; level < 6; ++level) {
    const unsigned pick = static_cast<unsigned>(rng() % 3);
    const tick_type digit = pick == 0 ? 63 : pick == 1 ? 0 : rng() % 64;
    start |= digit << (6 * level);
  }
  return start;
}

// Advances until done, `budget` expiries per call; returns the ids in expiry order.
std::vector<int> drain(twin& t, tick_type now, std::size_t budget, int& calls) {
  std::vector<int> out;
  for (calls = 1;; ++calls) {
    const bool done = t.wheel.advance(
        now, budget, [&](wheel_node& n) { out.push_back(static_cast<node&>(n).id); });
    t.wheel.check_invariants();
    if (const auto next = t.wheel.next_expiry(); !done)
      REQUIRE(next.has_value());
    if (done)
      return out;
    REQUIRE(calls < 10'000'000); // progress
  }
}

} // namespace

TEST_CASE("a cascade limit changes neither the set nor the order of expiries") {
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    CAPTURE(seed);
    std::mt19937_64 rng(seed);
    const std::size_t n = seed % 2 == 0 ? 64 : 600;
    twin plain(n), limited(n);
    limited.wheel.set_cascade_limit(1 + seed % 5);
    std::size_t interrupted = 0;

    for (int step = 0; step < 40'000; ++step) {
      CAPTURE(step);
      const auto op = rng() % 10;
      const auto i = rng() % n;
      if (op < 5) {
        if (plain.nodes[i].is_linked())
          continue;
        const tick_type now = plain.wheel.now();
        tick_type d = 0;
        switch (rng() % 4) {
        case 0:
          d = now + rng() % 70;
          break;
        case 1:
          d = now + rng() % 300'000;
          break;
        case 2:
          d = now + (rng() >> (20 + rng() % 40));
          break;
        default:
          d = now - std::min<tick_type>(now, rng() % 50);
          break;
        }
        plain.wheel.insert(plain.nodes[i], d);
        limited.wheel.insert(limited.nodes[i], d);
      } else if (op < 7) {
        REQUIRE(plain.nodes[i].is_linked() == limited.nodes[i].is_linked());
        if (plain.nodes[i].is_linked()) {
          plain.wheel.remove(plain.nodes[i]);
          limited.wheel.remove(limited.nodes[i]);
        }
      } else {
        const tick_type now = plain.wheel.now();
        tick_type to = now + (rng() % 3 == 0 ? rng() % 300'000 : rng() % 5'000);
        if (rng() % 200 == 0)
          to = now + (rng() >> 24);
        if (to < now)
          to = std::numeric_limits<tick_type>::max();
        const std::size_t budget = rng() % 3 == 0 ? 1 + rng() % 4 : timing_wheel::unlimited;
        int plain_calls = 0, limited_calls = 0;
        const auto want = drain(plain, to, budget, plain_calls);
        const auto got = drain(limited, to, budget, limited_calls);
        REQUIRE(got == want);
        REQUIRE(limited.wheel.now() == plain.wheel.now());
        if (limited_calls > plain_calls)
          ++interrupted;
      }
      REQUIRE(plain.wheel.size() == limited.wheel.size());
      limited.wheel.check_invariants();
    }
    // The test means something only if the limit actually interrupted cascades.
    CHECK(interrupted > 0);
    MESSAGE("seed " << seed << ": " << interrupted << " advances interrupted by the limit");
  }
}

TEST_CASE("with a cascade limit, a removal can empty the slot being re-filed") {
  timing_wheel w;
  w.set_cascade_limit(1);
  std::vector<node> nodes(3);
  for (auto& n : nodes)
    w.insert(n, 5000); // one level-2 slot... or level 1: all in one upper slot
  int expired = 0;
  CHECK_FALSE(w.advance(4999, timing_wheel::unlimited, [&](wheel_node&) { ++expired; }));
  w.check_invariants();
  // One moved; the other two are still in the slot being re-filed.
  for (auto& n : nodes)
    if (n.is_linked())
      w.remove(n);
  w.check_invariants();
  CHECK(w.empty());
  CHECK_FALSE(w.next_expiry().has_value());
  CHECK(w.advance(6000, timing_wheel::unlimited, [&](wheel_node&) { ++expired; }));
  CHECK(expired == 0);
}

// Issue #36: no expiry waits behind a cascade. The owner calls advance() once per tick (its
// alarm's turn), and again at once while next_expiry() says now() (work to do ahead of
// time, which a real owner runs as separate turns between other handlers). With a cascade
// limit, the first call at each tick must expire every entry due by then, in the model's
// order, and report done: a slot of any size is re-filed before its first tick comes, never
// while its entries are due. Before the fix, the slot was re-filed when its first tick came,
// a limit's worth per call, with the tick's expiries behind it.
TEST_CASE("no expiry waits behind a cascade: with a cascade limit, every entry due at a tick "
          "expires in that tick's advance, whatever the size of the upper slot") {
  using asio_wheel::test::reference_wheel;
  struct scenario {
    const char* what;
    tick_type start;
    tick_type from, to; // deadlines uniform in [from, to)
    std::size_t entries;
    std::size_t limit;
    bool every_tick; // else the owner sleeps until next_expiry()
  };
  const scenario scenarios[] = {
      // The next level-2 slot, and one two slots ahead (staged once it becomes next).
      {"one level-2 slot, next", 0, 4096, 8192, 30'000, 64, true},
      {"one level-2 slot, ahead", 100, 3 * 4096, 4 * 4096, 30'000, 64, false},
      // Deadlines just across a level-3 boundary: filed on level 3, due within 2000 ticks
      // of it, through the chained stages S_3 -> S_2 -> S_1.
      {"across a level-3 boundary", 262'144 - 3'000, 262'144, 262'144 + 2'000, 20'000, 32, true},
      // Across a level-4 boundary, from far: the entries cross the level-2 and level-3
      // boundaries of the window too; the owner sleeps between wakes.
      {"across a level-4 boundary", 16'777'216 - 300'000, 16'777'216 - 50, 16'777'216 + 9'000,
       40'000, 128, false},
  };
  for (const scenario& s : scenarios) {
    const std::string what = s.what;
    CAPTURE(what);
    std::mt19937_64 rng(s.entries + s.start);
    std::vector<node> nodes(s.entries);
    timing_wheel wheel(s.start);
    unlink_all guard{wheel, nodes};
    wheel.set_cascade_limit(s.limit);
    reference_wheel model(s.entries, s.start);
    for (std::size_t i = 0; i < s.entries; ++i) {
      nodes[i].id = static_cast<int>(i);
      const tick_type d = s.from + rng() % (s.to - s.from);
      wheel.insert(nodes[i], d);
      model.insert(static_cast<asio_wheel::test::node_id>(i), d);
    }
    std::size_t ticks = 0, turns = 0, expired = 0;
    while (!wheel.empty()) {
      // Turns between ticks, while there is work to do ahead of time.
      while (wheel.next_expiry() == wheel.now()) {
        ++turns;
        REQUIRE(turns < 10'000'000);
        REQUIRE(wheel.advance(wheel.now(), timing_wheel::unlimited,
                              [](wheel_node&) { FAIL("an expiry between ticks"); }));
      }
      const auto next = wheel.next_expiry();
      REQUIRE(next.has_value());
      const tick_type t = s.every_tick ? wheel.now() + 1 : *next;
      CAPTURE(t);
      std::vector<int> got, want;
      const bool done = wheel.advance(t, timing_wheel::unlimited, [&](wheel_node& n) {
        got.push_back(static_cast<node&>(n).id);
      });
      model.advance(t, timing_wheel::unlimited, [&](asio_wheel::test::node_id id, tick_type) {
        want.push_back(static_cast<int>(id));
      });
      REQUIRE(done);
      REQUIRE(got == want);
      REQUIRE(wheel.now() == t);
      expired += got.size();
      ++ticks;
    }
    wheel.check_invariants();
    CHECK(expired == s.entries);
    MESSAGE(what << ": " << ticks << " ticks, " << turns << " turns of work between them");
  }
}

// Issue #36, the loop's stalls: staging that has time is paced, one advance()'s moves per
// tick, instead of turns at once until the source is empty (a burst of milliseconds of
// cache misses every 64 ticks, that held the loop and invited preemption). An owner that
// sleeps until next_expiry() and runs turns at once while it says now(): while every slot
// waiting to be staged has more than half of its lead left, it is never asked for a turn at
// once, and yet every entry expires on its tick, in order. The slots are sized so that
// pacing alone stages them in time: 30,000 entries in a level-2 slot (4096 ticks of lead) and
// about 470 in each level-1 slot (64 ticks), at 64 moves per call. Before the fix, each
// slot was staged in turns at once as soon as it became a source.
TEST_CASE("staging with time to spare is paced, a limit's worth per tick, never in turns at "
          "once") {
  using asio_wheel::test::reference_wheel;
  const std::size_t entries = 30'000;
  std::mt19937_64 rng(36'001);
  std::vector<node> nodes(entries);
  timing_wheel wheel(0);
  unlink_all guard{wheel, nodes};
  wheel.set_cascade_limit(64);
  reference_wheel model(entries, 0);
  for (std::size_t i = 0; i < entries; ++i) {
    nodes[i].id = static_cast<int>(i);
    const tick_type d = 4096 + rng() % 4096;
    wheel.insert(nodes[i], d);
    model.insert(static_cast<asio_wheel::test::node_id>(i), d);
  }
  std::size_t calls = 0, at_once = 0, expired = 0;
  while (!wheel.empty()) {
    while (wheel.next_expiry() == wheel.now()) {
      ++at_once;
      REQUIRE(at_once < 1'000'000);
      REQUIRE(wheel.advance(wheel.now(), timing_wheel::unlimited,
                            [](wheel_node&) { FAIL("an expiry between ticks"); }));
    }
    const auto next = wheel.next_expiry();
    REQUIRE(next.has_value());
    const tick_type t = *next;
    CAPTURE(t);
    std::vector<int> got, want;
    const bool done = wheel.advance(t, timing_wheel::unlimited, [&](wheel_node& n) {
      got.push_back(static_cast<node&>(n).id);
    });
    model.advance(t, timing_wheel::unlimited, [&](asio_wheel::test::node_id id, tick_type) {
      want.push_back(static_cast<int>(id));
    });
    REQUIRE(done);
    REQUIRE(got == want);
    expired += got.size();
    ++calls;
  }
  wheel.check_invariants();
  CHECK(expired == entries);
  CHECK(at_once == 0);
  MESSAGE(calls << " calls");
}

// heartbeat_group's wheel: a window that comes due is re-filed whole, since the group takes
// one entry per advance() and compares it with work of its own (a partial cascade would end a
// take early), but the staging ahead keeps the cascade limit: paced and bounded per advance()
// (with no limit at all, the group staged a whole upper slot in one step: 9 to 14 ms at a
// million members). A window that comes due unstaged (time jumped to it) is re-filed whole in
// the advance() that reaches it, which still takes its first entry.
TEST_CASE("set_refile_whole: staging ahead bounded per advance() by the cascade limit, a window "
          "come due re-filed whole") {
  using asio_wheel::test::reference_wheel;
  constexpr std::size_t limit = 64;
  const std::size_t entries = 30'000;
  for (const bool jump : {false, true}) {
    CAPTURE(jump);
    std::mt19937_64 rng(36'002);
    std::vector<node> nodes(entries);
    timing_wheel wheel(0);
    unlink_all guard{wheel, nodes};
    wheel.set_cascade_limit(limit);
    wheel.set_refile_whole(true);
    reference_wheel model(entries, 0);
    // A level-2 slot that is not the window yet: it becomes the window's source at 4096.
    for (std::size_t i = 0; i < entries; ++i) {
      nodes[i].id = static_cast<int>(i);
      const tick_type d = 8192 + rng() % 4096;
      wheel.insert(nodes[i], d);
      model.insert(static_cast<asio_wheel::test::node_id>(i), d);
    }
    if (jump) {
      // Past 8192 at once: the window was never staged.
      wheel.advance(8191, 1, [](wheel_node&) { FAIL("nothing is due before 8192"); });
      CHECK(wheel.last_moves() <= limit);
      std::vector<int> got;
      const bool done = wheel.advance(
          8192 + 4095, 1, [&](wheel_node& n) { got.push_back(static_cast<node&>(n).id); });
      CHECK(!done); // its budget, one entry, not a cascade limit
      REQUIRE(got.size() == 1);
      std::vector<int> want;
      model.advance(8192 + 4095, 1, [&](asio_wheel::test::node_id id, tick_type) {
        want.push_back(static_cast<int>(id));
      });
      CHECK(got == want);
      CHECK(wheel.last_moves() > limit); // what staging had left, in that one advance()
      wheel.check_invariants();
      continue;
    }
    // The group's way: at each event, one entry per advance() until none is taken.
    std::size_t most = 0, at_once = 0, expired = 0;
    while (!wheel.empty()) {
      const auto next = wheel.next_expiry();
      REQUIRE(next.has_value());
      const tick_type t = *next;
      CAPTURE(t);
      if (t == wheel.now())
        ++at_once;
      std::vector<int> got, want;
      for (;;) {
        std::size_t taken = 0;
        wheel.advance(t, 1, [&](wheel_node& n) {
          got.push_back(static_cast<node&>(n).id);
          ++taken;
        });
        most = (std::max)(most, wheel.last_moves());
        if (taken == 0)
          break;
      }
      model.advance(t, timing_wheel::unlimited, [&](asio_wheel::test::node_id id, tick_type) {
        want.push_back(static_cast<int>(id));
      });
      REQUIRE(got == want);
      expired += got.size();
    }
    wheel.check_invariants();
    CHECK(expired == entries);
    CHECK(at_once == 0); // paced: the slot had time to spare
    CHECK(most <= limit);
    MESSAGE("most moves in one advance(): " << most);
  }
}

namespace {

// An owner as the wheel service drives its wheel: a turn when its alarm comes (advance() to
// the alarm's tick, again at once while next_expiry() says now()), the alarm re-armed for
// next_expiry() after it; a wait filed between turns moves the alarm to wake_for(deadline)
// if earlier, unless the deadline lies in the range settled_range() gave for the alarm (the
// shard's one-compare shortcut, kept as wheel_driver keeps it: recomputed whenever the alarm
// or the wheel's time changes).
struct alarm_owner {
  explicit alarm_owner(timing_wheel& w) : wheel(w) {}

  void rearm() {
    alarm = wheel.next_expiry();
    settle();
  }

  void file(wheel_node& n, tick_type deadline) {
    if (!settles(deadline)) {
      const tick_type wake = wheel.wake_for(deadline);
      if (!alarm || wake < *alarm) {
        alarm = wake;
        settle();
      }
    }
    wheel.insert(n, deadline);
  }

  bool settles(tick_type deadline) const { return deadline - settled.lo < settled.span; }
  void settle() { settled = alarm ? wheel.settled_range(*alarm) : timing_wheel::wake_range{}; }

  timing_wheel& wheel;
  std::optional<tick_type> alarm;
  timing_wheel::wake_range settled;
};

} // namespace

// Issue #36, the waits filed between turns. A wait that joins a list still to be staged (a
// source that waits, or bucket 0 of a stage the stage below chains to: a deadline just past
// a boundary of 4096 ticks, filed in the 64 ticks before it) needs a turn at once, and the
// owner's shortcut must not skip it: it did (a bound of the next 64 ticks taken as early
// enough), and the boundary's turn then re-filed the whole batch, a cascade limit's worth per
// advance(), with the boundary's expiries behind it. Here, with a cascade limit, an owner
// that turns only at its alarm must find, at each alarm, every entry due by then expiring in
// the first advance(), on its own tick, in the model's order.
TEST_CASE("waits filed between turns, by the owner's alarm rule: none late, none behind a "
          "cascade, whatever slot they join") {
  using asio_wheel::test::reference_wheel;
  struct scenario {
    const char* what;
    tick_type start;
    std::size_t limit;
  };
  const scenario scenarios[] = {
      {"before a boundary of 4096 ticks", 8192 - 300, 16},
      {"before a boundary of 262144 ticks", 262'144 - 5'000, 16},
      {"before a boundary of 64^4 ticks", 16'777'216 - 5'000, 32},
      {"after a boundary", 3 * 4096 + 7, 8},
  };
  constexpr std::size_t capacity = 40'000;
  for (const scenario& s : scenarios) {
    const std::string what = s.what;
    CAPTURE(what);
    std::mt19937_64 rng(s.start * 31 + s.limit);
    std::vector<node> nodes(capacity);
    timing_wheel wheel(s.start);
    unlink_all guard{wheel, nodes};
    wheel.set_cascade_limit(s.limit);
    reference_wheel model(capacity, s.start);
    std::size_t used = 0;
    const auto add = [&](tick_type deadline, alarm_owner* owner) {
      node& n = nodes[used];
      n.id = static_cast<int>(used);
      if (owner != nullptr)
        owner->file(n, deadline);
      else
        wheel.insert(n, deadline);
      model.insert(static_cast<asio_wheel::test::node_id>(used), deadline);
      ++used;
    };
    // Turns in the last ticks before each of the next boundaries of 4096 ticks (a due entry
    // at each of them), where the waits filed after them join a chained stage's bucket 0.
    for (tick_type b = (s.start / 4096 + 1) * 4096; b < s.start + 20'000; b += 4096)
      for (tick_type t = b - 60; t < b; t += 7)
        if (t > s.start)
          add(t, nullptr);
    alarm_owner owner(wheel);
    owner.rearm();
    std::size_t turns = 0, batches = 0, expired = 0;
    while (!wheel.empty()) {
      REQUIRE(owner.alarm.has_value());
      const tick_type t = *owner.alarm;
      REQUIRE(t >= wheel.now());
      CAPTURE(t);
      std::vector<int> got, want;
      bool on_tick = true;
      const bool done = wheel.advance(t, timing_wheel::unlimited, [&](wheel_node& n) {
        got.push_back(static_cast<node&>(n).id);
        on_tick = on_tick && n.deadline() == t;
      });
      model.advance(t, timing_wheel::unlimited, [&](asio_wheel::test::node_id id, tick_type) {
        want.push_back(static_cast<int>(id));
      });
      REQUIRE(done);    // nothing due waited for staging
      REQUIRE(on_tick); // the alarm came no later than any deadline
      REQUIRE(got == want);
      expired += got.size();
      while (wheel.next_expiry() == wheel.now()) {
        REQUIRE(++turns < 10'000'000);
        wheel.advance(wheel.now(), timing_wheel::unlimited,
                      [](wheel_node&) { FAIL("an expiry between ticks"); });
      }
      owner.rearm();
      // A batch filed before the next turn: after each turn in the last 64 ticks before a
      // boundary of 4096 ticks, just past it; else now and then, just past the next boundary
      // of 64, 4096 or 262144 ticks, or anywhere in the next 300000 ticks.
      const tick_type now = wheel.now();
      const bool before_boundary = now % 4096 >= 4096 - 64;
      if (used < capacity && (before_boundary || rng() % 3 == 0)) {
        ++batches;
        const std::size_t k = (std::min)(capacity - used, std::size_t{1} + rng() % 1500);
        const unsigned shape = before_boundary ? 1 : static_cast<unsigned>(rng() % 4);
        for (std::size_t i = 0; i < k; ++i) {
          tick_type d = now + 1 + rng() % 300'000;
          if (shape < 3) {
            const unsigned shift = 6 * (shape + 1);
            d = (((now >> shift) + 1) << shift) + rng() % 64;
          }
          add(d, &owner);
        }
      }
    }
    wheel.check_invariants();
    CHECK(expired == used);
    MESSAGE(what << ": " << used << " entries, " << batches << " batches, " << turns
                 << " staging turns");
  }
}

// The contract the shortcut rests on: every deadline in settled_range(alarm) has
// wake_for() >= alarm, and keeps it through any inserts until time moves. Random wheels,
// their times' digits often 63 (stages chained) or 0, random alarms (the next expiry, a
// wake_for(), or anywhere), deadlines drawn from the range's ends and middle and from the
// places where wake_for() is now (just past boundaries), inserted as they are checked.
TEST_CASE("settled_range: every deadline in it wakes no earlier than the alarm, through "
          "inserts") {
  std::mt19937_64 rng(3601);
  std::size_t in_range = 0;
  for (int round = 0; round < 3000; ++round) {
    const tick_type start = edge_start(rng);
    timing_wheel wheel(start);
    wheel.set_cascade_limit(1 + rng() % 8);
    std::vector<node> nodes(120);
    std::size_t used = 0;
    unlink_all guard{wheel, nodes};
    const auto some_deadline = [&] {
      const tick_type now = wheel.now();
      const unsigned shift = 6 * (1 + static_cast<unsigned>(rng() % 4));
      switch (rng() % 3) {
      case 0:
        return (((now >> shift) + 1) << shift) + rng() % 128; // just past a boundary
      case 1:
        return now + rng() % 64;
      default:
        return now + rng() % (tick_type{4} << shift);
      }
    };
    for (std::size_t i = rng() % 40; i > 0; --i)
      wheel.insert(nodes[used++], some_deadline());
    if (rng() % 2 == 0)
      wheel.advance(wheel.now() + rng() % 200, timing_wheel::unlimited, [](wheel_node&) {});
    tick_type alarm = some_deadline();
    if (const unsigned pick = static_cast<unsigned>(rng() % 3); pick == 0)
      alarm = wheel.next_expiry().value_or(alarm);
    else if (pick == 1)
      alarm = wheel.wake_for(alarm); // a slot's start, as an owner's alarm often is
    const timing_wheel::wake_range range = wheel.settled_range(alarm);
    while (used < nodes.size()) {
      tick_type d = some_deadline();
      if (range.span != 0 && rng() % 2 == 0) {
        const tick_type off = rng() % (std::min)(range.span, tick_type{4});
        switch (rng() % 3) {
        case 0:
          d = range.lo + off;
          break;
        case 1:
          d = range.lo + range.span - 1 - off;
          break;
        default:
          d = range.lo + rng() % range.span;
          break;
        }
      }
      if (d - range.lo < range.span) {
        ++in_range;
        CAPTURE(start);
        CAPTURE(wheel.now());
        CAPTURE(alarm);
        CAPTURE(d);
        REQUIRE(wheel.wake_for(d) >= alarm);
      }
      wheel.insert(nodes[used++], d);
    }
    wheel.check_invariants();
  }
  MESSAGE(in_range << " deadlines checked in range");
  CHECK(in_range > 100'000);
}

// wake_for()'s contract, as an owner that re-arms from next_expiry() after each turn and
// files waits between turns relies on it: for each insert, wake_for(d) lies in [now(),
// effective deadline], and next_expiry() after the insert is no earlier than
// min(wake_for(d), next_expiry() before), so that the alarm the owner keeps, the least of
// them, is never later than the wheel's next event. Random schedules over the places where
// it broke (a deadline staged into S_1 while next_expiry() said T_1; a stale
// staging_pending_ flag in an emptied wheel), with turns under a cascade limit, rewinds,
// removes and an emptied wheel.
TEST_CASE("wake_for: next_expiry() after an insert is no earlier than min(wake_for, "
          "next_expiry() before), over turns, rewinds and staging") {
  std::mt19937_64 rng(3602);
  std::size_t checked = 0;
  for (int round = 0; round < 400; ++round) {
    const tick_type start = edge_start(rng);
    timing_wheel wheel(start);
    wheel.set_cascade_limit(1 + rng() % 8);
    std::vector<node> nodes(1 + rng() % 64);
    unlink_all guard{wheel, nodes};
    const auto some_deadline = [&] {
      const tick_type now = wheel.now();
      const unsigned shift = 6 * (1 + static_cast<unsigned>(rng() % 4));
      switch (rng() % 4) {
      case 0:
        return (((now >> shift) + 1) << shift) + rng() % 128; // just past a boundary
      case 1:
        return now + rng() % 128;
      case 2:
        return now - rng() % 8; // already due
      default:
        return now + rng() % (tick_type{4} << shift);
      }
    };
    std::optional<tick_type> alarm; // the owner's: next_expiry() at its turn, then lowered
    for (int op = 0; op < 400; ++op) {
      node& n = nodes[rng() % nodes.size()];
      const unsigned kind = static_cast<unsigned>(rng() % 16);
      if (kind < 8) {
        if (n.is_linked())
          wheel.remove(n);
        const tick_type d = some_deadline();
        const tick_type now = wheel.now();
        const std::optional<tick_type> before = wheel.next_expiry();
        const tick_type wake = wheel.wake_for(d);
        CAPTURE(start);
        CAPTURE(now);
        CAPTURE(d);
        CAPTURE(wake);
        REQUIRE(wake >= now);
        REQUIRE(wake <= (d < now ? now : d));
        wheel.insert(n, d);
        const tick_type bound = before ? (std::min)(*before, wake) : wake;
        REQUIRE(wheel.next_expiry() >= bound);
        alarm = alarm ? (std::min)(*alarm, wake) : wake;
        REQUIRE(wheel.next_expiry() >= *alarm);
        ++checked;
      } else if (kind < 11) {
        if (n.is_linked())
          wheel.remove(n);
      } else if (kind < 12) {
        // Emptied: what staging was pending has nothing left to do.
        for (auto& m : nodes)
          if (m.is_linked())
            wheel.remove(m);
      } else if (kind < 13) {
        wheel.rewind(wheel.now() - rng() % 200);
        alarm = wheel.next_expiry();
      } else {
        // A turn: at the alarm, or (an early wake) anywhere before it.
        const tick_type to = alarm && rng() % 4 != 0 ? *alarm : wheel.now() + rng() % 64;
        wheel.advance(to, timing_wheel::unlimited, [](wheel_node&) {});
        alarm = wheel.next_expiry();
      }
      wheel.check_invariants();
    }
  }
  MESSAGE(checked << " inserts checked");
  CHECK(checked > 50'000);
}
