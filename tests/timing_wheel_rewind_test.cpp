//
// timing_wheel_rewind_test.cpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// detail::timing_wheel::rewind(), which moves the wheel's time back for a clock stepped
// back: afterwards every entry's effective deadline is max(deadline, new time), expiries
// keep (effective deadline, insertion) order, and the invariants hold. Checked on every
// size of step (within one slot, across each level, across the whole range, from inside a
// cascade that a limit interrupted) and by a randomized differential run against a model
// (a sorted map), with check_invariants() after every operation. Each run is a function of
// its seed, which failure messages name.

#include <asio_wheel/detail/timing_wheel.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace {

using asio_wheel::detail::tick_type;
using asio_wheel::detail::timing_wheel;
using asio_wheel::detail::wheel_node;

struct node : wheel_node {
  std::size_t id = 0;
};

// The wheel's contract as a sorted map: (effective deadline, insertion number) -> id.
class model {
public:
  explicit model(tick_type start) : now_(start) {}

  tick_type now() const { return now_; }
  bool contains(std::size_t id) const { return deadline_.count(id) != 0; }

  void insert(std::size_t id, tick_type deadline) {
    const key k{std::max(deadline, now_), seq_++};
    queue_.emplace(k, id);
    deadline_[id] = {deadline, k};
  }

  void remove(std::size_t id) {
    queue_.erase(deadline_.at(id).second);
    deadline_.erase(id);
  }

  // As timing_wheel::advance; the expired ids, in order.
  std::pair<bool, std::vector<std::size_t>> advance(tick_type now, std::size_t budget) {
    const tick_type target = std::max(now, now_);
    std::vector<std::size_t> out;
    for (;;) {
      if (queue_.empty() || queue_.begin()->first.effective > target) {
        now_ = target;
        return {true, out};
      }
      const auto [k, id] = *queue_.begin();
      now_ = k.effective;
      if (budget == 0)
        return {false, out};
      --budget;
      queue_.erase(queue_.begin());
      deadline_.erase(id);
      out.push_back(id);
    }
  }

  // Effective deadlines are recomputed from the new time; the insertion order stays.
  void rewind(tick_type now) {
    if (now >= now_)
      return;
    now_ = now;
    std::map<key, std::size_t> q;
    for (auto& [id, d] : deadline_) {
      d.second.effective = std::max(d.first, now_);
      q.emplace(d.second, id);
    }
    queue_ = std::move(q);
  }

  // Moves the time to `now` without expiring anything. Precondition: nothing is due before.
  void move_to(tick_type now) {
    REQUIRE((queue_.empty() || queue_.begin()->first.effective >= now));
    now_ = now;
  }

  std::optional<tick_type> earliest() const {
    if (queue_.empty())
      return std::nullopt;
    return queue_.begin()->first.effective;
  }

private:
  struct key {
    tick_type effective;
    std::uint64_t seq;
    // Lexicographic; spelled out, as C++17 has no defaulted comparisons.
    friend bool operator<(const key& a, const key& b) noexcept {
      return a.effective != b.effective ? a.effective < b.effective : a.seq < b.seq;
    }
  };
  std::map<key, std::size_t> queue_;
  std::map<std::size_t, std::pair<tick_type, key>> deadline_;
  tick_type now_;
  std::uint64_t seq_ = 0;
};

// A wheel and the model, driven together; every result compared.
class pair_under_test {
public:
  pair_under_test(std::size_t nodes, tick_type start, std::string context)
      : wheel_(start), model_(start), nodes_(nodes), context_(std::move(context)) {
    for (std::size_t i = 0; i < nodes; ++i)
      nodes_[i].id = i;
  }
  pair_under_test(const pair_under_test&) = delete;
  pair_under_test& operator=(const pair_under_test&) = delete;
  ~pair_under_test() {
    wheel_.clear([](wheel_node&) {});
  }

  tick_type now() const { return wheel_.now(); }
  bool linked(std::size_t id) const { return nodes_[id].is_linked(); }

  void insert(std::size_t id, tick_type deadline) {
    wheel_.insert(nodes_[id], deadline);
    model_.insert(id, deadline);
    check("insert");
  }
  void remove(std::size_t id) {
    wheel_.remove(nodes_[id]);
    model_.remove(id);
    check("remove");
  }
  void rewind(tick_type now) {
    wheel_.rewind(now);
    model_.rewind(now);
    check("rewind");
  }
  // With a cascade limit the wheel may stop early without a budget to blame: it is then
  // called until done, with no budget, and compared with the model's whole advance.
  void set_cascade_limit(std::size_t limit) {
    wheel_.set_cascade_limit(limit);
    cascade_limited_ = limit != timing_wheel::unlimited;
  }

  // The wheel only, stopped by its cascade limit before expiring anything; the model's time
  // follows without expiring either.
  void interrupt(tick_type now) {
    REQUIRE(cascade_limited_);
    const bool done = wheel_.advance(now, timing_wheel::unlimited,
                                     [](wheel_node&) { FAIL("interrupt(): an entry expired"); });
    REQUIRE_FALSE(done);
    model_.move_to(wheel_.now());
    check("interrupt");
  }

  bool advance(tick_type now, std::size_t budget = timing_wheel::unlimited) {
    std::vector<std::size_t> got;
    auto collect = [&](wheel_node& n) { got.push_back(static_cast<node&>(n).id); };
    bool done = false;
    if (cascade_limited_) {
      budget = timing_wheel::unlimited;
      while (!wheel_.advance(now, budget, collect)) {
      }
      done = true;
    } else {
      done = wheel_.advance(now, budget, collect);
    }
    const auto [want_done, want] = model_.advance(now, budget);
    INFO(context_);
    CHECK(done == want_done);
    CHECK(got == want);
    check("advance");
    return done;
  }

private:
  void check(const char* what) {
    INFO(context_ << ", after " << what);
    CHECK(wheel_.now() == model_.now());
    CHECK(wheel_.next_expiry().has_value() == model_.earliest().has_value());
    if (wheel_.next_expiry() && model_.earliest())
      CHECK(*wheel_.next_expiry() <= *model_.earliest()); // never later than the earliest
    std::string broken;
    try {
      wheel_.check_invariants();
    } catch (const std::exception& e) {
      broken = e.what();
    }
    CHECK_MESSAGE(broken.empty(), broken);
  }

  timing_wheel wheel_;
  model model_;
  std::vector<node> nodes_;
  std::string context_;
  bool cascade_limited_ = false;
};

constexpr tick_type kMax = ~tick_type{0};

} // namespace

TEST_CASE("rewind to now() or later changes nothing") {
  pair_under_test p(4, 1000, "no-op");
  p.insert(0, 1010);
  p.insert(1, 5000);
  p.rewind(1000);
  p.rewind(2000);
  CHECK(p.now() == 1000);
  CHECK(p.advance(6000));
}

TEST_CASE("rewind by every size of step: deadlines behind the old time expire at their own "
          "ticks, in order") {
  // Steps within a slot, to each level boundary and past it, and back to the start of time.
  const tick_type steps[] = {1,
                             5,
                             63,
                             64,
                             65,
                             4095,
                             4096,
                             4097,
                             (tick_type{1} << 18) + 3,
                             tick_type{1} << 24,
                             (tick_type{1} << 36) - 1,
                             tick_type{1} << 48,
                             tick_type{1} << 60};
  const tick_type starts[] = {tick_type{1} << 62, (tick_type{1} << 63) + 12345, kMax - 100};
  for (const tick_type start : starts) {
    for (const tick_type step : steps) {
      if (step > start)
        continue;
      const std::string ctx =
          "start " + std::to_string(start) + ", step back " + std::to_string(step);
      pair_under_test p(64, start, ctx);
      std::size_t id = 0;
      // Entries all over the wheel: at now, just ahead, on every level.
      for (unsigned level = 0; level < 11 && id < 20; ++level) {
        const tick_type ahead = tick_type{1} << (6 * level);
        if (ahead <= kMax - start)
          p.insert(id++, start + ahead);
      }
      p.insert(id++, start);
      p.insert(id++, start - 1); // overdue: effective start
      p.advance(start + 3);      // expires the three due ones; elapsed moves on
      const tick_type back = p.now() - step;
      p.rewind(back);
      CHECK(p.now() == back);
      // Filed after the rewind: behind the old time, ahead of the new, and overdue.
      p.insert(id++, back + step / 2);
      p.insert(id++, back + 1);
      p.insert(id++, back);
      if (back > 0)
        p.insert(id++, back - 1);
      p.insert(id++, back + step / 2); // the same tick twice: first in, first out
      // Walk forward in uneven steps to the end, with small budgets on the way.
      tick_type t = back;
      for (int i = 0; i < 40 && t < kMax; ++i) {
        const tick_type jump = std::max<tick_type>(1, step / 16);
        t = jump > kMax - t ? kMax : t + jump;
        while (!p.advance(t, 2)) {
        }
      }
      p.advance(kMax);
    }
  }
}

TEST_CASE("rewind while a cascade is interrupted by the cascade limit") {
  pair_under_test p(300, 0, "interrupted cascade");
  p.set_cascade_limit(7);
  // 200 entries in one level-2 slot, spread over its ticks.
  for (std::size_t i = 0; i < 200; ++i)
    p.insert(i, 3 * 4096 + i * 13);
  p.interrupt(3 * 4096 + 5);      // stops part-way through re-filing the slot
  CHECK(p.now() == 3 * 4096 - 1); // the tick before the window whose staging stopped
  p.rewind(3 * 4096 - 100);
  p.insert(200, 3 * 4096 - 50);
  p.insert(201, 3 * 4096 + 1);
  while (!p.advance(5 * 4096)) {
  }
  CHECK(p.advance(kMax));
}

// Issue #36: a level's next slot staged in part (a few moves per advance()), entries of one
// tick both in its stage (older) and in the slot (younger), then time moved back across the
// slot's level: the staged ones must still come first.
TEST_CASE("rewind while a slot is half staged keeps first in, first out") {
  pair_under_test p(200, 0, "half staged");
  p.set_cascade_limit(7);
  for (std::size_t i = 0; i < 100; ++i) // level 2, slot 2: not yet its level's next
    p.insert(i, 2 * 4096 + (i % 2 == 0 ? 100 : 64 * 5 + 1));
  p.advance(4096); // slot 2 becomes next: 7 entries staged, the rest wait in the slot
  for (std::size_t i = 100; i < 120; ++i)
    p.insert(i, 2 * 4096 + (i % 2 == 0 ? 100 : 64 * 5 + 1)); // behind, in the slot
  p.rewind(4000);
  while (!p.advance(3 * 4096)) {
  }
  CHECK(p.advance(kMax));
}

TEST_CASE("rewind, randomized against the model") {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  constexpr int kOps = 4000;
#else
  constexpr int kOps = 20000;
#endif
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    std::mt19937_64 rng(seed);
    auto bits = [&](unsigned n) -> tick_type { return n == 0 ? 0 : rng() >> (64 - n); };
    const tick_type start = seed % 3 == 0 ? kMax - bits(30) : bits(seed % 2 == 0 ? 62 : 20);
    pair_under_test p(128, start, "seed " + std::to_string(seed));
    p.set_cascade_limit(seed % 2 == 0 ? 5 : timing_wheel::unlimited);
    for (int op = 0; op < kOps; ++op) {
      const std::size_t id = static_cast<std::size_t>(bits(7));
      const tick_type now = p.now();
      const tick_type span = bits(static_cast<unsigned>(bits(6))); // any magnitude up to 2^63
      switch (bits(3)) {
      case 0:
      case 1:
      case 2:
        if (p.linked(id))
          p.remove(id);
        else if (bits(1) != 0)
          p.insert(id, span > kMax - now ? kMax : now + span);
        else
          p.insert(id, span > now ? 0 : now - span);
        break;
      case 3:
      case 4:
        p.advance(span > kMax - now ? kMax : now + span, static_cast<std::size_t>(bits(4)));
        break;
      default:
        p.rewind(span > now ? 0 : now - span);
        break;
      }
    }
    while (!p.advance(kMax)) {
    }
  }
}
