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

#include <cstdint>
#include <limits>
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
    // Unlinks what a failed check left in the wheel, before either is destroyed.
    struct unlink_all {
      timing_wheel& w;
      std::vector<node>& ns;
      ~unlink_all() {
        for (auto& n : ns)
          if (n.is_linked())
            w.remove(n);
      }
    } guard{wheel, nodes};
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
