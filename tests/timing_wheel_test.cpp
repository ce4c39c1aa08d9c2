//
// timing_wheel_test.cpp
// ~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

// Unit tests of detail::timing_wheel, with hand-computed expectations: each operation, each
// level boundary, the ends of the tick range, budgets, re-entrant callbacks and very long
// uptimes. check_invariants() runs after every operation and inside every callback.

#include "reference_wheel.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using asio_wheel::detail::timing_wheel;
using asio_wheel::test::expiry;
using asio_wheel::test::max_tick;
using asio_wheel::test::node_id;
using asio_wheel::test::saturating_add;
using asio_wheel::test::test_node;
using asio_wheel::test::tick_type;

constexpr std::size_t unlimited = timing_wheel::unlimited;
constexpr tick_type top_bit = tick_type{1} << 63;

constexpr tick_type pow64(unsigned k) {
  return tick_type{1} << (6 * k);
}

// "id@tick id@tick ...": compared as a string so that a failure prints the whole sequence.
std::string str(const std::vector<expiry>& fired) {
  std::string s;
  for (const expiry& e : fired) {
    if (!s.empty())
      s += ' ';
    s += std::to_string(e.id) + '@' + std::to_string(e.tick);
  }
  return s;
}

// A wheel and a pool of nodes. Every operation is followed by check_invariants() (a throw
// fails the test case with the broken invariant), and every expiry is checked on the spot:
// unlinked, not early (deadline <= now()), not past the advance target.
class wheel_fixture {
public:
  explicit wheel_fixture(std::size_t node_count, tick_type start = 0)
      : wheel(start), nodes(node_count) {
    for (std::size_t i = 0; i < node_count; ++i)
      nodes[i].id = static_cast<node_id>(i);
    wheel.check_invariants();
  }

  wheel_fixture(const wheel_fixture&) = delete;
  wheel_fixture& operator=(const wheel_fixture&) = delete;

  ~wheel_fixture() {
    for (test_node& node : nodes) {
      if (node.is_linked())
        wheel.remove(node);
    }
  }

  void insert(node_id id, tick_type deadline) {
    wheel.insert(nodes.at(id), deadline);
    wheel.check_invariants();
  }

  void remove(node_id id) {
    wheel.remove(nodes.at(id));
    wheel.check_invariants();
  }

  // advance() recording (id, now()) for each expiry; `react` runs after the checks.
  std::vector<expiry> advance(tick_type now, std::size_t budget = unlimited,
                              const std::function<void(test_node&)>& react = {}) {
    const tick_type target = std::max(now, wheel.now());
    std::vector<expiry> fired;
    done = wheel.advance(now, budget, [&](asio_wheel::detail::wheel_node& base) {
      auto& node = static_cast<test_node&>(base);
      fired.push_back({node.id, wheel.now()});
      CHECK_FALSE(node.is_linked());
      CHECK(node.deadline() <= wheel.now());
      CHECK(wheel.now() <= target);
      wheel.check_invariants();
      if (react)
        react(node);
    });
    wheel.check_invariants();
    if (done)
      CHECK(wheel.now() == target);
    return fired;
  }

  timing_wheel wheel;
  std::vector<test_node> nodes;
  // What the last advance() returned.
  bool done = true;
};

// Deadlines on and one tick either side of every level boundary above `start`: the next
// multiple of 64^k, and start + 64^k, for every level k. Also the classic 63/64/65 and
// 4095/4096/4097 when they are not in the past.
std::vector<tick_type> boundary_deadlines(tick_type start) {
  std::vector<tick_type> out;
  const auto add = [&](tick_type d) {
    if (d >= start)
      out.push_back(d);
  };
  for (const tick_type d : {63u, 64u, 65u, 4095u, 4096u, 4097u})
    add(d);
  for (unsigned k = 1; k < timing_wheel::num_levels; ++k) {
    const tick_type unit = pow64(k);
    if ((start | (unit - 1)) != max_tick) {
      const tick_type aligned = (start | (unit - 1)) + 1;
      add(aligned - 1);
      add(aligned);
      add(saturating_add(aligned, 1));
    }
    add(saturating_add(start, unit - 1));
    add(saturating_add(start, unit));
    add(saturating_add(start, unit + 1));
  }
  add(top_bit - 1);
  add(top_bit);
  add(top_bit + 1);
  add(max_tick - 1);
  add(max_tick);
  return out;
}

// Starts that put the interesting digits everywhere: zero, unaligned, just below a level
// boundary, around the top bit, at the very end of the range.
const tick_type interesting_starts[] = {
    0,
    1,
    63,
    64,
    4095,
    4097,
    123'456'789,
    pow64(5) - 1,
    top_bit - 1,
    top_bit,
    top_bit + 63,
    max_tick - pow64(3),
    max_tick - 64,
    max_tick - 1,
    max_tick,
};

} // namespace

TEST_SUITE("timing_wheel") {

  TEST_CASE("an empty wheel has no expiry and advances without callbacks") {
    for (const tick_type start : interesting_starts) {
      CAPTURE(start);
      wheel_fixture f(1, start);
      CHECK(f.wheel.empty());
      CHECK(f.wheel.size() == 0);
      CHECK(f.wheel.now() == start);
      CHECK_FALSE(f.wheel.next_expiry().has_value());
      for (const tick_type target :
           {start, saturating_add(start, 1), saturating_add(start, pow64(7)), max_tick}) {
        CHECK(f.advance(target).empty());
        CHECK(f.done);
        CHECK(f.wheel.now() == target);
        CHECK_FALSE(f.wheel.next_expiry().has_value());
      }
      CHECK(f.advance(0, 0).empty()); // earlier than now(), budget 0: still nothing to do
      CHECK(f.done);
      CHECK(f.wheel.now() == max_tick);
    }
  }

  TEST_CASE("one tick") {
    wheel_fixture f(1);
    f.insert(0, 1);
    CHECK(f.wheel.size() == 1);
    CHECK(f.wheel.next_expiry() == tick_type{1});
    CHECK(f.advance(0).empty());
    CHECK(f.nodes[0].is_linked());
    CHECK(str(f.advance(1)) == "0@1");
    CHECK(f.wheel.empty());
    CHECK_FALSE(f.wheel.next_expiry().has_value());
    CHECK(f.wheel.now() == 1);
  }

  TEST_CASE("a deadline equal to now() is due at once") {
    wheel_fixture f(2, 500);
    f.insert(0, 500);
    CHECK(f.wheel.next_expiry() == tick_type{500});
    CHECK(str(f.advance(500)) == "0@500"); // a zero-length advance
    CHECK(f.advance(700).empty());
    f.insert(1, 700);
    CHECK(f.wheel.next_expiry() == tick_type{700});
    CHECK(str(f.advance(0)) == "1@700"); // an earlier target counts as now()
    CHECK(f.wheel.now() == 700);
  }

  TEST_CASE("each deadline around a level boundary expires exactly on time") {
    for (const tick_type start : interesting_starts) {
      for (const tick_type deadline : boundary_deadlines(start)) {
        CAPTURE(start);
        CAPTURE(deadline);
        {
          // One jump to the tick before, then to the deadline itself.
          wheel_fixture f(1, start);
          f.insert(0, deadline);
          REQUIRE(f.wheel.next_expiry().has_value());
          CHECK(*f.wheel.next_expiry() <= deadline);
          if (deadline > start)
            CHECK(f.advance(deadline - 1).empty());
          CHECK(str(f.advance(deadline)) == "0@" + std::to_string(deadline));
        }
        {
          // Follow next_expiry(): each step stages a level's next slot, enters a window or
          // expires, two steps per level at most (the wake when the entry's slot becomes
          // its level's next, and entering it), never past the deadline.
          wheel_fixture f(1, start);
          f.insert(0, deadline);
          std::vector<expiry> fired;
          unsigned steps = 0;
          while (fired.empty() && steps++ <= 2 * timing_wheel::num_levels) {
            const std::optional<tick_type> next = f.wheel.next_expiry();
            REQUIRE(next.has_value());
            CHECK(*next >= f.wheel.now());
            CHECK(*next <= deadline);
            fired = f.advance(*next);
          }
          CHECK(str(fired) == "0@" + std::to_string(deadline));
        }
      }
    }
  }

  TEST_CASE("all level-boundary deadlines in one wheel expire in order") {
    for (const tick_type start : interesting_starts) {
      CAPTURE(start);
      const std::vector<tick_type> deadlines = boundary_deadlines(start);
      wheel_fixture f(deadlines.size(), start);
      std::vector<expiry> expected;
      for (std::size_t i = 0; i < deadlines.size(); ++i) {
        f.insert(static_cast<node_id>(i), deadlines[i]);
        expected.push_back({static_cast<node_id>(i), deadlines[i]});
      }
      // Stable: equal deadlines keep insertion order.
      std::stable_sort(expected.begin(), expected.end(),
                       [](const expiry& a, const expiry& b) { return a.tick < b.tick; });
      CHECK(str(f.advance(max_tick)) == str(expected));
      CHECK(f.wheel.empty());
    }
  }

  TEST_CASE("deadlines at and near the end of the tick range") {
    wheel_fixture f(6);
    f.insert(0, max_tick);
    f.insert(1, max_tick - 1);
    f.insert(2, max_tick - 63);
    f.insert(3, max_tick - 64);
    f.insert(4, max_tick - 4096);
    f.insert(5, top_bit);
    CHECK(f.wheel.next_expiry() <= top_bit);
    CHECK(f.advance(top_bit - 1).empty());
    CHECK(str(f.advance(max_tick - 1)) ==
          "5@" + std::to_string(top_bit) + " 4@" + std::to_string(max_tick - 4096) + " 3@" +
              std::to_string(max_tick - 64) + " 2@" + std::to_string(max_tick - 63) + " 1@" +
              std::to_string(max_tick - 1));
    CHECK(f.wheel.size() == 1);
    CHECK(f.wheel.next_expiry() == max_tick);
    CHECK(str(f.advance(max_tick)) == "0@" + std::to_string(max_tick));
    CHECK(f.wheel.now() == max_tick);

    // At the end of time every deadline is due at once, in insertion order.
    f.insert(2, max_tick);
    f.insert(0, 5);
    f.insert(1, max_tick - 1);
    CHECK(f.wheel.next_expiry() == max_tick);
    CHECK(str(f.advance(0)) == "2@" + std::to_string(max_tick) + " 0@" + std::to_string(max_tick) +
                                   " 1@" + std::to_string(max_tick));
    CHECK(f.nodes[0].deadline() == 5);
  }

  TEST_CASE("a wheel starting near 2^63 or near the end of the range") {
    for (const tick_type start : {top_bit - 1, top_bit - 64, top_bit - 4097, top_bit,
                                  max_tick - pow64(4), max_tick - 64, max_tick - 1, max_tick}) {
      CAPTURE(start);
      wheel_fixture f(5, start);
      f.insert(0, saturating_add(start, 1));
      f.insert(1, start);
      f.insert(2, saturating_add(start, 64));
      f.insert(3, saturating_add(start, pow64(3) + 7));
      f.insert(4, max_tick);
      std::vector<expiry> fired;
      // Small steps first, so each crossing of a digit boundary is its own advance().
      for (tick_type t = start; fired.size() < 3 && t != max_tick; t = saturating_add(t, 1)) {
        for (const expiry& e : f.advance(t))
          fired.push_back(e);
        if (t - start > 70)
          break;
      }
      for (const expiry& e : f.advance(max_tick))
        fired.push_back(e);
      // Listed in insertion order: at the end of the range several share max_tick.
      std::vector<expiry> expected = {{0, saturating_add(start, 1)},
                                      {1, start},
                                      {2, saturating_add(start, 64)},
                                      {3, saturating_add(start, pow64(3) + 7)},
                                      {4, max_tick}};
      std::stable_sort(expected.begin(), expected.end(),
                       [](const expiry& a, const expiry& b) { return a.tick < b.tick; });
      CHECK(str(fired) == str(expected));
    }
  }

  TEST_CASE("past deadlines are due at now(), after the entries already due") {
    SUBCASE("with nothing else due") {
      wheel_fixture f(2, 1000);
      f.insert(0, 3);
      CHECK(f.nodes[0].deadline() == 3);
      CHECK(f.wheel.next_expiry() == tick_type{1000});
      CHECK(str(f.advance(1000)) == "0@1000");
    }
    SUBCASE("behind entries already due at now()") {
      wheel_fixture f(6, 1000);
      f.insert(0, 1000);
      f.insert(1, 1001);
      f.insert(2, 5);   // overdue: due at 1000, after 0
      f.insert(3, 999); // overdue
      f.insert(4, 1000);
      CHECK(str(f.advance(1001)) == "0@1000 2@1000 3@1000 4@1000 1@1001");
    }
    SUBCASE("behind entries left due by a budget-limited advance") {
      wheel_fixture f(5);
      f.insert(0, 500); // filed on level 2, re-filed on the way
      f.insert(4, 550);
      CHECK(f.advance(600, 0).empty());
      CHECK_FALSE(f.done);
      CHECK(f.wheel.now() == 500);
      f.insert(1, 10);  // overdue: due at now() == 500, after 0
      f.insert(2, 500); // due exactly now, after 1
      f.insert(3, 499);
      CHECK(str(f.advance(600)) == "0@500 1@500 2@500 3@500 4@550");
    }
  }

  TEST_CASE("budget 0 stops on the first due entry without expiring it") {
    wheel_fixture f(2);
    f.insert(0, 10);
    f.insert(1, pow64(2) + 20); // on level 2 until the cascade
    CHECK(f.advance(pow64(3), 0).empty());
    CHECK_FALSE(f.done);
    CHECK(f.wheel.now() == 10);
    CHECK(f.wheel.size() == 2);
    CHECK(f.advance(pow64(3), 0).empty()); // no progress, no harm
    CHECK_FALSE(f.done);
    CHECK(f.advance(5, 0).empty()); // earlier target counts as now(), entry 0 still due
    CHECK_FALSE(f.done);
    CHECK(str(f.advance(10)) == "0@10");
    // Budget 0 across a cascade: the upper slot is re-filed (no callback), then it stops.
    CHECK(f.advance(pow64(3), 0).empty());
    CHECK_FALSE(f.done);
    CHECK(f.wheel.now() == pow64(2) + 20);
    // Budget 0 with nothing due just moves time.
    CHECK(str(f.advance(pow64(2) + 20)) == "1@" + std::to_string(pow64(2) + 20));
    f.insert(0, pow64(3));
    CHECK(f.advance(pow64(3) - 1, 0).empty());
    CHECK(f.done);
    CHECK(f.wheel.now() == pow64(3) - 1);
  }

  TEST_CASE("budget 1, partial budgets and resuming") {
    wheel_fixture f(5);
    f.insert(0, 10);
    f.insert(1, 10);
    f.insert(2, 20);
    f.insert(3, 30);
    f.insert(4, 200);
    CHECK(str(f.advance(100, 1)) == "0@10");
    CHECK_FALSE(f.done);
    CHECK(f.wheel.now() == 10);
    CHECK(str(f.advance(100, 2)) == "1@10 2@20");
    CHECK_FALSE(f.done);
    CHECK(f.wheel.now() == 30); // parked on the next due entry
    // The budget runs out on the last due entry: nothing due is left, so done.
    CHECK(str(f.advance(100, 1)) == "3@30");
    CHECK(f.done);
    CHECK(f.wheel.now() == 100);
    CHECK(str(f.advance(300, 5)) == "4@200");
    CHECK(f.done);
  }

  TEST_CASE("inserts between budget-limited advances") {
    wheel_fixture f(7);
    f.insert(0, 10);
    f.insert(1, 20);
    f.insert(2, 30);
    CHECK(str(f.advance(100, 1)) == "0@10");
    CHECK_FALSE(f.done);
    CHECK(f.wheel.now() == 20);
    f.insert(3, 15);  // overdue relative to now() == 20: due at 20, after 1
    f.insert(4, 25);  // between the parked now() and the target
    f.insert(5, 100); // exactly the target
    f.insert(6, 150); // beyond it
    CHECK(str(f.advance(100)) == "1@20 3@20 4@25 2@30 5@100");
    CHECK(f.done);
    CHECK(f.wheel.size() == 1);
  }

  TEST_CASE("after a budget-limited advance, due means due at the next target") {
    // The wheel keeps no memory of the earlier target: a following advance() with an
    // earlier `now` expires only what is due at that `now` (and at least at now()). Callers
    // pass a monotonic clock, so in practice the next target is never earlier.
    wheel_fixture f(3);
    f.insert(0, 10);
    f.insert(1, 10);
    f.insert(2, 50);
    CHECK(str(f.advance(100, 1)) == "0@10");
    CHECK(f.wheel.now() == 10);
    CHECK(str(f.advance(20)) == "1@10");
    CHECK(f.done);
    CHECK(f.nodes[2].is_linked());
    CHECK(str(f.advance(100)) == "2@50");
  }

  TEST_CASE("remove from every level") {
    for (unsigned level = 0; level < timing_wheel::num_levels; ++level) {
      CAPTURE(level);
      // From start 0, a deadline whose highest non-zero digit is `level` is filed there
      // (slot 5, not the level's next slot, which is staged ahead): level_size() shows
      // where it went; next_expiry() wakes no later than the tick where the slot is next.
      const tick_type slot_tick = (level == 10 ? 3 : 5) * pow64(level);
      const tick_type deadline = slot_tick + (level == 0 ? 0 : 9);
      wheel_fixture f(3);
      f.insert(0, deadline);
      CHECK(f.wheel.level_size(level) == 1);
      CHECK(f.wheel.next_expiry() == (level == 0 ? slot_tick : slot_tick - pow64(level)));
      f.remove(0);
      CHECK_FALSE(f.nodes[0].is_linked());
      CHECK(f.wheel.empty());
      CHECK_FALSE(f.wheel.next_expiry().has_value());

      f.insert(0, deadline);
      f.insert(1, deadline);
      f.insert(2, deadline + 1);
      f.remove(0);
      CHECK(f.wheel.size() == 2);
      CHECK(str(f.advance(max_tick)) ==
            "1@" + std::to_string(deadline) + " 2@" + std::to_string(deadline + 1));
    }
  }

  TEST_CASE("remove the head, middle or tail of a slot") {
    SUBCASE("one deadline, on level 0, 1 and 3") {
      for (const tick_type deadline : {tick_type{40}, pow64(1) + 7, pow64(3) + 7}) {
        for (node_id victim = 0; victim < 3; ++victim) {
          CAPTURE(deadline);
          CAPTURE(victim);
          wheel_fixture f(3);
          for (node_id id = 0; id < 3; ++id)
            f.insert(id, deadline);
          f.remove(victim);
          std::string expected;
          for (node_id id = 0; id < 3; ++id) {
            if (id != victim)
              expected += (expected.empty() ? "" : " ") + std::to_string(id) + '@' +
                          std::to_string(deadline);
          }
          CHECK(str(f.advance(max_tick)) == expected);
        }
      }
    }
    SUBCASE("one upper slot holding several deadlines") {
      // 64..127 is one level-1 slot from start 0; the list order is not the expiry order.
      wheel_fixture f(3);
      f.insert(0, 100);
      f.insert(1, 70);
      f.insert(2, 90);
      f.remove(1);
      CHECK(str(f.advance(max_tick)) == "2@90 0@100");
    }
    SUBCASE("emptying a slot in every order") {
      const node_id orders[][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2},
                                   {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
      for (const auto& order : orders) {
        wheel_fixture f(3, 7);
        for (node_id id = 0; id < 3; ++id)
          f.insert(id, pow64(2) + 1);
        for (const node_id id : order)
          f.remove(id);
        CHECK(f.wheel.empty());
        CHECK_FALSE(f.wheel.next_expiry().has_value());
      }
    }
  }

  TEST_CASE("replace puts a node in another's place: its slot, its order, its deadline") {
    // Node 3 takes the place of the head, middle or tail of a slot on level 0, 1 and 3; it
    // expires where that node would have, before the node inserted after it (issue 23: a
    // moved timer kept its place in Asio's heap, and went behind its tick in the wheel).
    for (const tick_type deadline : {tick_type{40}, pow64(1) + 7, pow64(3) + 7}) {
      for (node_id victim = 0; victim < 3; ++victim) {
        CAPTURE(deadline);
        CAPTURE(victim);
        wheel_fixture f(5);
        for (node_id id = 0; id < 3; ++id)
          f.insert(id, deadline);
        f.wheel.replace(f.nodes[victim], f.nodes[3]);
        f.wheel.check_invariants();
        CHECK_FALSE(f.nodes[victim].is_linked());
        CHECK(f.nodes[3].deadline() == deadline);
        CHECK(f.wheel.size() == 3);
        f.insert(4, deadline);
        std::string expected;
        for (const node_id id : {node_id{0}, node_id{1}, node_id{2}, node_id{4}}) {
          const node_id fired = id == victim ? node_id{3} : id;
          expected += (expected.empty() ? "" : " ") + std::to_string(fired) + '@' +
                      std::to_string(deadline);
        }
        CHECK(str(f.advance(max_tick)) == expected);
      }
    }
  }

  TEST_CASE("a callback re-arms its own node") {
    wheel_fixture f(1);
    f.insert(0, 7);
    const auto fired = f.advance(100, unlimited,
                                 [&](test_node& node) { f.wheel.insert(node, f.wheel.now() + 7); });
    std::string expected;
    for (tick_type t = 7; t <= 100; t += 7)
      expected += (expected.empty() ? "" : " ") + ("0@" + std::to_string(t));
    CHECK(str(fired) == expected);
    CHECK(f.nodes[0].is_linked());
    CHECK(f.nodes[0].deadline() == 105);
    CHECK(f.wheel.next_expiry() <= tick_type{105});
  }

  TEST_CASE("a callback re-arming at the current tick is bounded by the budget") {
    wheel_fixture f(1);
    f.insert(0, 10);
    const auto fired = f.advance(50, 3, [&](test_node& node) { f.wheel.insert(node, 0); });
    CHECK(str(fired) == "0@10 0@10 0@10");
    CHECK_FALSE(f.done);
    CHECK(f.wheel.now() == 10);
    f.remove(0);
    CHECK(f.advance(50).empty());
    CHECK(f.done);
  }

  TEST_CASE("a callback removes other nodes") {
    wheel_fixture f(5);
    f.insert(0, 10);
    f.insert(1, 10);
    f.insert(2, 10);
    f.insert(3, 50);
    f.insert(4, pow64(4)); // on level 4
    const auto fired = f.advance(max_tick, unlimited, [&](test_node& node) {
      if (node.id == 0) {
        f.wheel.remove(f.nodes[1]); // same slot, next in line
        f.wheel.remove(f.nodes[3]); // a later slot
        f.wheel.remove(f.nodes[4]); // an upper level
      }
    });
    CHECK(str(fired) == "0@10 2@10");
    CHECK(f.wheel.empty());
  }

  TEST_CASE("a callback inserts nodes due now, overdue, later and on upper levels") {
    wheel_fixture f(8);
    f.insert(0, 10);
    f.insert(1, 10);
    f.insert(2, 5000); // level 2 slot 1 (4096..8191)
    const auto fired = f.advance(max_tick, unlimited, [&](test_node& node) {
      if (node.id == 0) {
        f.wheel.insert(f.nodes[3], 10);   // now: after 1, in the slot being expired
        f.wheel.insert(f.nodes[4], 3);    // overdue: due now, after 3
        f.wheel.insert(f.nodes[5], 11);   // next tick
        f.wheel.insert(f.nodes[6], 4990); // the pending level-2 slot, before 2
        f.wheel.insert(f.nodes[7], 5000); // same slot and deadline as 2: after it
      }
    });
    CHECK(str(fired) == "0@10 1@10 3@10 4@10 5@11 6@4990 2@5000 7@5000");
    CHECK(f.nodes[4].deadline() == 3);
  }

  TEST_CASE("a callback may destroy its node") {
    timing_wheel wheel;
    std::vector<std::unique_ptr<test_node>> owned;
    for (node_id id = 0; id < 3; ++id) {
      owned.push_back(std::make_unique<test_node>());
      owned.back()->id = id;
      wheel.insert(*owned.back(), 10 + id);
    }
    std::vector<node_id> fired;
    CHECK(wheel.advance(100, unlimited, [&](asio_wheel::detail::wheel_node& base) {
      const node_id id = static_cast<test_node&>(base).id;
      fired.push_back(id);
      owned[id].reset(); // the node is unlinked before the call
      wheel.check_invariants();
    }));
    CHECK(fired == std::vector<node_id>{0, 1, 2});
    CHECK(wheel.empty());
  }

  TEST_CASE("a throwing callback leaves the wheel consistent and resumable") {
    // The node is unlinked before the call, so an exception loses nothing but that expiry;
    // the rest stays due, in order.
    wheel_fixture f(4);
    f.insert(0, 10);
    f.insert(1, 10);
    f.insert(2, 20);
    f.insert(3, pow64(2) + 1);
    std::vector<node_id> fired;
    const auto throw_on_first = [&](asio_wheel::detail::wheel_node& base) {
      fired.push_back(static_cast<test_node&>(base).id);
      if (fired.size() == 1)
        throw std::runtime_error("handler failed");
    };
    CHECK_THROWS_AS(f.wheel.advance(max_tick, unlimited, throw_on_first), std::runtime_error);
    f.wheel.check_invariants();
    CHECK(f.wheel.now() == 10);
    CHECK_FALSE(f.nodes[0].is_linked());
    CHECK(f.wheel.size() == 3);
    CHECK(f.wheel.advance(max_tick, unlimited, throw_on_first));
    CHECK(fired == std::vector<node_id>{0, 1, 2, 3});
  }

  TEST_CASE("a callback that declines an entry puts it back at the head of its slot") {
    // The service declines a due entry it cannot take for want of memory: nothing may
    // change, so a later advance() finds the same entries in the same order.
    wheel_fixture f(5);
    f.insert(0, 10);
    f.insert(1, 10);
    f.insert(2, 10);
    f.insert(3, 20);
    f.insert(4, pow64(2) + 1); // cascades on the way
    std::vector<node_id> taken;
    int declines = 1;
    const auto decline_second = [&](asio_wheel::detail::wheel_node& base) -> bool {
      const node_id id = static_cast<test_node&>(base).id;
      f.wheel.check_invariants();
      if (taken.size() == 1 && declines-- > 0)
        return false;
      taken.push_back(id);
      return true;
    };
    CHECK_FALSE(f.wheel.advance(max_tick, unlimited, decline_second));
    f.wheel.check_invariants();
    CHECK(taken == std::vector<node_id>{0});
    CHECK(f.wheel.now() == 10);
    CHECK(f.nodes[1].is_linked());
    CHECK(f.wheel.size() == 4);
    CHECK(f.wheel.next_expiry() == tick_type{10});
    CHECK(f.wheel.front() == &f.nodes[1]);
    CHECK(f.wheel.advance(max_tick, unlimited, decline_second));
    CHECK(taken == std::vector<node_id>{0, 1, 2, 3, 4});
    CHECK(f.wheel.empty());
    CHECK(f.wheel.front() == nullptr);
  }

  TEST_CASE("front() gives some linked entry until the wheel is empty") {
    wheel_fixture f(4);
    f.insert(0, pow64(3) + 7);
    f.insert(1, 70);
    f.insert(2, 3);
    f.insert(3, max_tick);
    std::size_t taken = 0;
    while (auto* node = f.wheel.front()) {
      CHECK(node->is_linked());
      f.wheel.remove(*node);
      f.wheel.check_invariants();
      ++taken;
    }
    CHECK(taken == 4);
    CHECK(f.wheel.empty());
  }

  TEST_CASE("entries of one tick stay first in, first out across cascades") {
    SUBCASE("inserted together on an upper level") {
      const tick_type deadline = pow64(3) + 5;
      wheel_fixture f(10);
      for (node_id id = 0; id < 5; ++id)
        f.insert(id, deadline);
      CHECK(f.advance(pow64(3)).empty()); // re-filed on the way down, not expired
      for (node_id id = 5; id < 10; ++id)
        f.insert(id, deadline); // now filed directly on level 0, behind the first five
      std::string expected;
      for (node_id id = 0; id < 10; ++id)
        expected += (id ? " " : "") + std::to_string(id) + '@' + std::to_string(deadline);
      CHECK(str(f.advance(deadline)) == expected);
    }
    SUBCASE("inserted at different times, landing on different levels") {
      wheel_fixture f(3);
      f.insert(0, 5000); // level 2
      CHECK(f.advance(4096).empty());
      f.insert(1, 5000);              // level 1, behind 0 after the cascade
      CHECK(f.advance(4992).empty()); // re-files 0 and 1 to level 0
      f.insert(2, 5000);              // level 0, behind them
      CHECK(str(f.advance(5000)) == "0@5000 1@5000 2@5000");
    }
  }

  TEST_CASE("a node is reusable after expiry and after removal") {
    wheel_fixture f(1);
    f.insert(0, 10);
    CHECK(f.nodes[0].deadline() == 10);
    f.remove(0);
    f.insert(0, 20);
    CHECK(f.nodes[0].deadline() == 20);
    CHECK(str(f.advance(30)) == "0@20");
    f.insert(0, 40);
    CHECK(f.wheel.size() == 1);
    CHECK(str(f.advance(40)) == "0@40");
    CHECK(f.wheel.empty());
  }

  TEST_CASE("never early, and next_expiry() never later than the earliest deadline") {
    // Random entries on every level, stepping either to next_expiry() or by a random amount;
    // each expiry must land exactly on its effective deadline.
    std::mt19937_64 rng(20240601);
    constexpr std::size_t node_count = 300;
    wheel_fixture f(node_count, 1'000'000);
    std::vector<tick_type> effective(node_count);
    // One draw per statement: the order of draws within an expression is unspecified, and
    // the sequence must not depend on the compiler.
    const auto random_below_pow2 = [&](unsigned bits) {
      return rng() & ((tick_type{1} << bits) - 1);
    };
    const auto arm = [&](node_id id) {
      const auto magnitude = static_cast<unsigned>(rng() % 40);
      const tick_type offset = random_below_pow2(magnitude);
      const bool overdue = rng() % 4 == 0;
      const tick_type deadline = f.wheel.now() + offset - (overdue ? 8 : 0);
      effective[id] = std::max(deadline, f.wheel.now());
      f.insert(id, deadline);
    };
    for (node_id id = 0; id < node_count; ++id)
      arm(id);
    std::size_t expired = 0;
    for (int step = 0; step < 3000; ++step) {
      tick_type earliest = max_tick;
      for (node_id id = 0; id < node_count; ++id)
        earliest = std::min(earliest, effective[id]);
      const std::optional<tick_type> next = f.wheel.next_expiry();
      REQUIRE(next.has_value());
      CHECK(*next >= f.wheel.now());
      REQUIRE(*next <= earliest);
      if (*next > f.wheel.now())
        CHECK(f.advance(*next - 1).empty()); // nothing is due before next_expiry()
      tick_type target = *next;
      if (rng() % 2 != 0) {
        const auto magnitude = static_cast<unsigned>(rng() % 36);
        target = f.wheel.now() + random_below_pow2(magnitude);
      }
      for (const expiry& e : f.advance(target)) {
        CHECK(e.tick == effective[e.id]);
        ++expired;
        arm(e.id);
      }
    }
    CHECK(expired > 1000);
  }

  TEST_CASE("a periodic timer keeps exact ticks over 2^41 ticks") {
    constexpr tick_type period = 1'000'000'000;
    wheel_fixture f(1);
    f.insert(0, period);
    tick_type expected = period;
    while (f.wheel.now() < (tick_type{1} << 41)) {
      CHECK(f.wheel.next_expiry() <= expected);
      CHECK(f.advance(expected - 1).empty());
      REQUIRE(str(f.advance(expected)) == "0@" + std::to_string(expected));
      expected += period; // re-armed from the deadline, not from now(): no drift
      f.insert(0, expected);
    }
    CHECK(f.wheel.now() == 2'200'000'000'000);
  }

  TEST_CASE("periodic timers under random steps and huge jumps keep exact ticks") {
    // Three drift-free periodic timers, re-armed from their callbacks. A step longer than a
    // period expires the same timer several times in one advance(), each on its own tick.
    const tick_type periods[] = {1'000'000'000, 3'000'000'007, (tick_type{1} << 33) + 1};
    std::mt19937_64 rng(7);
    wheel_fixture f(3, 12345);
    tick_type next[3];
    for (node_id id = 0; id < 3; ++id) {
      next[id] = f.wheel.now() + periods[id];
      f.insert(id, next[id]);
    }
    std::size_t expirations = 0;
    tick_type last_tick = 0;
    const auto react = [&](test_node& node) {
      CHECK(f.wheel.now() == next[node.id]);
      CHECK(f.wheel.now() >= last_tick);
      last_tick = f.wheel.now();
      ++expirations;
      next[node.id] += periods[node.id];
      f.wheel.insert(node, next[node.id]);
    };
    while (f.wheel.now() < (tick_type{1} << 42))
      f.advance(f.wheel.now() + 1 + rng() % (tick_type{1} << 32), unlimited, react);
    CHECK(expirations > 4000);
    // Huge jumps: 2^45 ticks in single advances, still every period on its exact tick.
    for (int i = 0; i < 3; ++i)
      f.advance(f.wheel.now() + (tick_type{1} << 45), unlimited, react);
    CHECK(f.wheel.now() > (tick_type{1} << 46));
    CHECK(expirations > 4000 + 3 * ((tick_type{1} << 45) / periods[0]));
  }

  TEST_CASE("catching up after a long stall visits only occupied slots") {
    // Walking every tick of a 2^50-tick stall would never finish; visiting occupied slots
    // only makes each of these advance() calls immediate. The assertions are on the result.
    SUBCASE("from zero") {
      const tick_type stall = tick_type{1} << 50;
      const tick_type deadlines[] = {
          1, 100, 5000, tick_type{1} << 30, (tick_type{1} << 40) + 3, stall - 1, stall, stall + 1};
      wheel_fixture f(std::size(deadlines));
      std::string expected;
      for (node_id id = 0; id < std::size(deadlines); ++id) {
        f.insert(id, deadlines[id]);
        if (deadlines[id] <= stall)
          expected += (id ? " " : "") + std::to_string(id) + '@' + std::to_string(deadlines[id]);
      }
      CHECK(str(f.advance(stall)) == expected);
      CHECK(f.wheel.now() == stall);
      CHECK(f.wheel.size() == 1);
      CHECK(f.wheel.next_expiry() <= stall + 1);
    }
    SUBCASE("across the top bit, then to the end of the range") {
      wheel_fixture f(4, top_bit - pow64(5));
      f.insert(0, top_bit - 1);
      f.insert(1, top_bit + pow64(9) + 3);
      f.insert(2, max_tick - 1);
      f.insert(3, max_tick);
      CHECK(str(f.advance(top_bit + (tick_type{1} << 62))) ==
            "0@" + std::to_string(top_bit - 1) + " 1@" + std::to_string(top_bit + pow64(9) + 3));
      CHECK(f.advance(max_tick - 2).empty());
      CHECK(str(f.advance(max_tick)) ==
            "2@" + std::to_string(max_tick - 1) + " 3@" + std::to_string(max_tick));
    }
    SUBCASE("many entries on many levels in one advance") {
      std::mt19937_64 rng(99);
      constexpr std::size_t node_count = 2000;
      wheel_fixture f(node_count);
      std::vector<expiry> expected;
      for (node_id id = 0; id < node_count; ++id) {
        const auto shift = static_cast<unsigned>(rng() % 64);
        const tick_type deadline = rng() >> shift;
        f.insert(id, deadline);
        expected.push_back({id, deadline});
      }
      std::stable_sort(expected.begin(), expected.end(),
                       [](const expiry& a, const expiry& b) { return a.tick < b.tick; });
      CHECK(str(f.advance(max_tick)) == str(expected));
    }
  }

  TEST_CASE("size() and empty() follow inserts, removes and expiries") {
    wheel_fixture f(3);
    CHECK(f.wheel.empty());
    f.insert(0, 1);
    f.insert(1, pow64(6));
    f.insert(2, 2);
    CHECK(f.wheel.size() == 3);
    f.remove(1);
    CHECK(f.wheel.size() == 2);
    CHECK(f.advance(1).size() == 1);
    CHECK(f.wheel.size() == 1);
    CHECK_FALSE(f.wheel.empty());
    CHECK(f.advance(2).size() == 1);
    CHECK(f.wheel.empty());
  }
}
