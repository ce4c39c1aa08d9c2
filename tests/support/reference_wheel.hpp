//
// support/reference_wheel.hpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_TEST_REFERENCE_WHEEL_HPP
#define ASIO_WHEEL_TEST_REFERENCE_WHEEL_HPP

// Differential testing of detail::timing_wheel.
//
// reference_wheel is the contract of the timing wheel written as plainly as possible: an
// ordered map keyed by (effective deadline, insertion sequence), where the effective deadline
// is max(deadline, now() at insertion). It is obviously correct and obviously slow, which is
// the point: every behaviour of the real wheel that a caller can observe (which entries expire,
// in which order, at which now(), what advance() returns, size(), now()) must match it.
//
// differential_harness drives both with the same operations, compares after every step and
// throws std::logic_error describing the first disagreement. It depends on nothing but the
// standard library, so the doctest suites and the libFuzzer target share it; and
// apply_random_operation() turns any source of random bits (a seeded PRNG, or the fuzzer's
// bytes) into operations, so both drivers explore the same operation space.

#include <asio_wheel/detail/timing_wheel.hpp>

#include <algorithm>
#include <array>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace asio_wheel::test {

using detail::tick_type;
using node_id = std::uint32_t;

inline constexpr tick_type max_tick = std::numeric_limits<tick_type>::max();

// Tick arithmetic that clamps instead of wrapping: a wrapped deadline would silently test a
// different (earlier) deadline than the one the test meant.
constexpr tick_type saturating_add(tick_type a, tick_type b) noexcept {
  return b > max_tick - a ? max_tick : a + b;
}

constexpr tick_type saturating_sub(tick_type a, tick_type b) noexcept {
  return b > a ? 0 : a - b;
}

// The wheel's entry type in every test: the node knows its index in the owner's pool, so an
// expiry callback can report which node fired.
struct test_node : detail::wheel_node {
  node_id id = 0;
};

// ---------------------------------------------------------------------------------------------
// The model.
// ---------------------------------------------------------------------------------------------

class reference_wheel {
public:
  reference_wheel(std::size_t node_count, tick_type start) : where_(node_count), now_(start) {}

  tick_type now() const noexcept { return now_; }
  std::size_t size() const noexcept { return queue_.size(); }
  bool contains(node_id id) const { return where_.at(id).has_value(); }

  // Deadline given to insert() for a queued id.
  tick_type deadline(node_id id) const { return where_.at(id)->deadline; }

  // Smallest effective deadline, or empty when nothing is queued.
  std::optional<tick_type> earliest() const {
    if (queue_.empty())
      return std::nullopt;
    return queue_.begin()->first.effective;
  }

  // Returns the effective deadline. Precondition: `id` is not queued.
  tick_type insert(node_id id, tick_type deadline) {
    if (contains(id))
      throw std::logic_error("reference_wheel: insert of an id that is already queued");
    const key k{std::max(deadline, now_), next_seq_++};
    queue_.emplace(k, id);
    where_[id] = position{k, deadline};
    return k.effective;
  }

  // Precondition: `id` is queued.
  void remove(node_id id) {
    const std::optional<position>& p = where_.at(id);
    if (!p)
      throw std::logic_error("reference_wheel: remove of an id that is not queued");
    queue_.erase(p->k);
    where_[id].reset();
  }

  // Expires every entry whose effective deadline <= max(now, now()), in (effective deadline,
  // insertion) order, at most `budget` of them, calling on_expire(id, effective deadline)
  // after the entry left the queue (the callback may insert and remove). now() follows the
  // expiries; when the budget runs out it stays on the next due entry's tick, because that
  // is where the real wheel stops, and it is what later insertions are clamped to.
  template <typename OnExpire>
  bool advance(tick_type now, std::size_t budget, OnExpire&& on_expire) {
    const tick_type target = std::max(now, now_);
    for (;;) {
      if (queue_.empty() || queue_.begin()->first.effective > target) {
        now_ = target;
        return true;
      }
      const auto [k, id] = *queue_.begin();
      now_ = k.effective;
      if (budget == 0)
        return false;
      --budget;
      queue_.erase(queue_.begin());
      where_[id].reset();
      on_expire(id, k.effective);
    }
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
  // Where a queued id sits in queue_, and the deadline it was given (the key holds the
  // effective one).
  struct position {
    key k;
    tick_type deadline;
  };

  std::map<key, node_id> queue_;
  std::vector<std::optional<position>> where_; // indexed by id
  tick_type now_;
  std::uint64_t next_seq_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Operations.
// ---------------------------------------------------------------------------------------------

// A deadline described relative to the current time, so that the same rule can be resolved
// inside an expiry callback, against the now() of that moment, on both the wheel and the model.
struct deadline_rule {
  enum class base_kind : std::uint8_t {
    at,           // `amount` itself
    after_now,    // now + amount
    before_now,   // now - amount (an overdue deadline)
    next_boundary // the next multiple of 2^amount strictly after now: a level boundary
  };

  base_kind base = base_kind::after_now;
  tick_type amount = 0;
  // Added last, so a boundary rule can also land one tick either side of the boundary.
  int adjust = 0;

  tick_type resolve(tick_type now) const noexcept {
    tick_type t = 0;
    switch (base) {
    case base_kind::at:
      t = amount;
      break;
    case base_kind::after_now:
      t = saturating_add(now, amount);
      break;
    case base_kind::before_now:
      t = saturating_sub(now, amount);
      break;
    case base_kind::next_boundary: {
      const tick_type low_mask = amount >= 64 ? max_tick : (tick_type{1} << amount) - 1;
      t = saturating_add(now | low_mask, 1);
      break;
    }
    }
    return adjust >= 0 ? saturating_add(t, static_cast<tick_type>(adjust))
                       : saturating_sub(t, static_cast<tick_type>(-static_cast<long long>(adjust)));
  }

  std::string describe() const {
    std::string s;
    switch (base) {
    case base_kind::at:
      s = std::to_string(amount);
      break;
    case base_kind::after_now:
      s = "now+" + std::to_string(amount);
      break;
    case base_kind::before_now:
      s = "now-" + std::to_string(amount);
      break;
    case base_kind::next_boundary:
      s = "next multiple of 2^" + std::to_string(amount) + " after now";
      break;
    }
    if (adjust != 0)
      s += (adjust > 0 ? "+" : "") + std::to_string(adjust);
    return s;
  }
};

// What the harness does, from inside the expiry callback, when a given node expires. It is
// applied to the wheel inside the wheel's callback and to the model inside the model's, so
// re-entrant insert/remove during advance() is compared like any other operation.
struct reaction {
  enum class action_kind : std::uint8_t { none, rearm_self, insert_other, remove_other };

  action_kind action = action_kind::none;
  node_id other = 0;
  deadline_rule when;

  std::string describe() const {
    switch (action) {
    case action_kind::none:
      return "none";
    case action_kind::rearm_self:
      return "rearm self at " + when.describe();
    case action_kind::insert_other:
      return "insert " + std::to_string(other) + " at " + when.describe();
    case action_kind::remove_other:
      return "remove " + std::to_string(other);
    }
    return "?";
  }
};

// One expiry: which node, and the wheel's now() inside the callback (for the model, the
// effective deadline). Equal ticks mean the entry fired exactly on its effective deadline.
struct expiry {
  node_id id;
  tick_type tick;
  friend bool operator==(const expiry& a, const expiry& b) noexcept {
    return a.id == b.id && a.tick == b.tick;
  }
  friend bool operator!=(const expiry& a, const expiry& b) noexcept { return !(a == b); }
};

// ---------------------------------------------------------------------------------------------
// The harness.
// ---------------------------------------------------------------------------------------------

class differential_harness {
public:
  struct options {
    // check_invariants() inside every expiry callback too: the wheel must be consistent
    // there, since callbacks may insert and remove. Costs O(slots) per expiry.
    bool check_invariants_in_callbacks = false;
    // Every this many steps, compare every node's linkage and deadline with the model:
    // O(nodes). The nodes a step touched (inserted, removed, expired, reacted on) are
    // compared after every step regardless, and only those can have changed.
    std::uint64_t full_node_check_period = 1;
    // The wheel's cascade limit (timing_wheel::set_cascade_limit): entries moved per
    // advance(), staged ahead or re-filed. A small one exercises the staging paths hard:
    // sources left for later calls, windows entered before their staging is done. The
    // wheel may then stop before its budget is spent; the harness calls it again, as an
    // owner does, until it is done or its budget is spent at the model's tick, and compares
    // the expiries of all those calls with the model's one advance().
    std::size_t cascade_limit = detail::timing_wheel::unlimited;
    // timing_wheel::set_refile_whole (heartbeat_group's wheel): a window that comes due is
    // re-filed whole, so that with a small cascade limit the staging ahead is left
    // unfinished across calls while every advance() still takes all that is due, in one
    // call.
    bool refile_whole = false;
  };

  static constexpr std::size_t unlimited = detail::timing_wheel::unlimited;

  explicit differential_harness(std::size_t node_count, tick_type start = 0)
      : differential_harness(node_count, start, options{}) {}

  differential_harness(std::size_t node_count, tick_type start, options opts)
      : opts_(opts), node_count_(node_count), nodes_(new test_node[node_count]),
        wheel_(new detail::timing_wheel(start)), model_(node_count, start), reactions_(node_count) {
    for (std::size_t i = 0; i < node_count; ++i)
      nodes_[i].id = static_cast<node_id>(i);
    wheel_->set_refile_whole(opts.refile_whole);
    wheel_->set_cascade_limit(opts.cascade_limit);
    // A reaction may insert any node, so the number of expiries of one advance() is bounded
    // by the live entries plus the reactions allowed; this bound keeps a cycle of reactions
    // that re-arm at the current tick from running forever, identically on both sides.
    max_reactions_per_advance_ = 4 * node_count + 16;
  }

  differential_harness(const differential_harness&) = delete;
  differential_harness& operator=(const differential_harness&) = delete;

  ~differential_harness() {
    // After a failure the wheel may be corrupt: unlinking from a broken list could crash, and
    // the node and wheel destructors assert on linked entries. Leaking is the safe teardown.
    if (failed_) {
      bool intact = true;
      try {
        wheel_->check_invariants();
      } catch (const std::logic_error&) {
        intact = false;
      }
      if (!intact) {
        (void)nodes_.release();
        (void)wheel_.release();
        return;
      }
    }
    for (std::size_t i = 0; i < node_count_; ++i) {
      if (nodes_[i].is_linked())
        wheel_->remove(nodes_[i]);
    }
  }

  // Printed at the start of every failure message, e.g. "seed 42".
  void set_context(std::string context) { context_ = std::move(context); }

  // Links `id` at `deadline`; a linked id is removed first (re-armed), on both sides.
  void insert(node_id id, tick_type deadline) {
    begin_step(op_kind::insert, id, deadline, 0);
    check_id(id);
    touched_.push_back(id);
    if (nodes_[id].is_linked()) {
      wheel_->remove(nodes_[id]);
      model_.remove(id);
    }
    wheel_->insert(nodes_[id], deadline);
    model_.insert(id, deadline);
    verify();
  }

  // Unlinks `id`; does nothing (on both sides) when it is not linked.
  void remove(node_id id) {
    begin_step(op_kind::remove, id, 0, 0);
    check_id(id);
    touched_.push_back(id);
    if (nodes_[id].is_linked())
      wheel_->remove(nodes_[id]);
    if (model_.contains(id))
      model_.remove(id);
    verify();
  }

  // advance(now, budget) on both; compares the expiries (ids, order and ticks) and the
  // returned "done" flag. Returns that flag.
  bool advance(tick_type now, std::size_t budget = unlimited) {
    begin_step(op_kind::advance, 0, now, budget);
    const tick_type target = std::max(now, wheel_->now());
    // The most expiries one advance() can legitimately produce (see the constructor).
    const std::size_t expiry_bound = wheel_->size() + max_reactions_per_advance_;

    expected_.clear();
    const bool want_done = model_.advance(now, budget, [&](node_id id, tick_type tick) {
      expected_.push_back({id, tick});
      if (expected_.size() <= max_reactions_per_advance_)
        react_on_model(id);
    });

    got_.clear();
    std::string callback_error;
    bool got_done = false;
    try {
      for (std::size_t calls = 1;; ++calls) {
        const std::size_t before = got_.size();
        const std::size_t left = budget == unlimited ? unlimited : budget - before;
        got_done = wheel_->advance(now, left, [&](detail::wheel_node& base) {
          auto& node = static_cast<test_node&>(base);
          const tick_type tick = wheel_->now();
          got_.push_back({node.id, tick});
          touched_.push_back(node.id);
          if (callback_error.empty())
            callback_error = check_in_callback(node, tick, target);
          if (got_.size() > expiry_bound)
            throw std::logic_error("more expiries than entries: the wheel is looping");
          if (got_.size() <= max_reactions_per_advance_)
            react_on_wheel(node.id);
        });
        if (wheel_->last_moves() >= opts_.cascade_limit)
          ++capped_;
        // Without a limit, one call is the whole advance (so too when a window come due is
        // re-filed whole). With one, the wheel stopped for
        // its limit unless its budget is spent where the model stopped.
        if (got_done || opts_.cascade_limit == unlimited || opts_.refile_whole ||
            (got_.size() - before == left && wheel_->now() == model_.now()))
          break;
        ++interrupted_;
        if (calls > 10'000'000)
          throw std::logic_error("advance() makes no progress under its cascade limit");
        if (opts_.check_invariants_in_callbacks)
          wheel_->check_invariants();
      }
    } catch (const std::logic_error& e) {
      fail(std::string("exception from the wheel's advance(): ") + e.what());
    }

    if (!callback_error.empty())
      fail(callback_error);
    compare_expiries();
    if (got_done != want_done)
      fail(std::string("advance() returned ") + (got_done ? "true" : "false") +
           ", the model says " + (want_done ? "true" : "false"));
    verify();
    return got_done;
  }

  // What to do when `id` expires from now on (on both sides).
  void set_reaction(node_id id, reaction r) {
    begin_step(op_kind::set_reaction, id, 0, 0);
    recent_[step_ % history].what = r;
    check_id(id);
    if (r.action != reaction::action_kind::none && r.action != reaction::action_kind::rearm_self)
      check_id(r.other);
    reactions_[id] = r;
  }

  const detail::timing_wheel& wheel() const noexcept { return *wheel_; }
  const reference_wheel& model() const noexcept { return model_; }
  std::size_t node_count() const noexcept { return node_count_; }
  tick_type now() const noexcept { return wheel_->now(); }
  std::size_t size() const noexcept { return wheel_->size(); }
  bool is_linked(node_id id) const { return nodes_[id].is_linked(); }
  std::uint64_t steps() const noexcept { return step_; }
  // Calls of the wheel's advance() that stopped for its cascade limit alone.
  std::uint64_t interrupted() const noexcept { return interrupted_; }
  // Calls of the wheel's advance() that moved as many entries as the cascade limit, or more.
  std::uint64_t capped() const noexcept { return capped_; }

  // The expiries of the last advance(), as the wheel reported them (identical to the model's
  // when advance() returned).
  const std::vector<expiry>& last_expired() const noexcept { return got_; }

private:
  enum class op_kind : std::uint8_t { insert, remove, advance, set_reaction };

  struct op_record {
    std::uint64_t step = 0;
    op_kind kind = op_kind::insert;
    node_id id = 0;
    tick_type tick = 0;
    std::size_t budget = 0;
    tick_type now_before = 0;
    reaction what;
  };

  static constexpr std::size_t history = 12;

  void begin_step(op_kind kind, node_id id, tick_type tick, std::size_t budget) {
    ++step_;
    op_record& r = recent_[step_ % history];
    r = op_record{step_, kind, id, tick, budget, wheel_->now(), {}};
    touched_.clear();
  }

  void check_id(node_id id) {
    if (id >= node_count_)
      fail("node id " + std::to_string(id) + " out of range (" + std::to_string(node_count_) +
           " nodes)");
  }

  std::string check_in_callback(const test_node& node, tick_type tick, tick_type target) const {
    if (node.is_linked())
      return "node " + std::to_string(node.id) + " is still linked inside its expiry callback";
    if (node.deadline() > tick)
      return "node " + std::to_string(node.id) + " expired early: deadline " +
             std::to_string(node.deadline()) + ", now() " + std::to_string(tick);
    if (tick > target)
      return "node " + std::to_string(node.id) + " expired at now() " + std::to_string(tick) +
             ", past the advance target " + std::to_string(target);
    if (opts_.check_invariants_in_callbacks) {
      try {
        wheel_->check_invariants();
      } catch (const std::logic_error& e) {
        return "inside the expiry callback of node " + std::to_string(node.id) + ": " + e.what();
      }
    }
    return {};
  }

  void react_on_wheel(node_id id) {
    const reaction& r = reactions_[id];
    if (r.action == reaction::action_kind::insert_other ||
        r.action == reaction::action_kind::remove_other)
      touched_.push_back(r.other);
    switch (r.action) {
    case reaction::action_kind::none:
      break;
    case reaction::action_kind::rearm_self:
      wheel_->insert(nodes_[id], r.when.resolve(wheel_->now()));
      break;
    case reaction::action_kind::insert_other:
      if (!nodes_[r.other].is_linked())
        wheel_->insert(nodes_[r.other], r.when.resolve(wheel_->now()));
      break;
    case reaction::action_kind::remove_other:
      if (nodes_[r.other].is_linked())
        wheel_->remove(nodes_[r.other]);
      break;
    }
  }

  void react_on_model(node_id id) {
    const reaction& r = reactions_[id];
    switch (r.action) {
    case reaction::action_kind::none:
      break;
    case reaction::action_kind::rearm_self:
      model_.insert(id, r.when.resolve(model_.now()));
      break;
    case reaction::action_kind::insert_other:
      if (!model_.contains(r.other))
        model_.insert(r.other, r.when.resolve(model_.now()));
      break;
    case reaction::action_kind::remove_other:
      if (model_.contains(r.other))
        model_.remove(r.other);
      break;
    }
  }

  void compare_expiries() {
    const std::size_t common = std::min(got_.size(), expected_.size());
    for (std::size_t i = 0; i < common; ++i) {
      if (got_[i] != expected_[i])
        fail("expiry #" + std::to_string(i) + ": expected " + describe(expected_[i]) + ", got " +
             describe(got_[i]) + expiry_context(i));
    }
    if (got_.size() != expected_.size()) {
      const bool short_side = got_.size() < expected_.size();
      fail(std::to_string(got_.size()) + " expiries, expected " + std::to_string(expected_.size()) +
           "; first " + (short_side ? "missing" : "extra") + ": " +
           describe(short_side ? expected_[common] : got_[common]) + expiry_context(common));
    }
  }

  static std::string describe(const expiry& e) {
    return "id " + std::to_string(e.id) + " at tick " + std::to_string(e.tick);
  }

  std::string expiry_context(std::size_t index) const {
    std::string s = " (of " + std::to_string(expected_.size()) + " expected";
    if (index > 0)
      s += "; previous expiry " + describe(expected_[index - 1]);
    return s + ")";
  }

  void verify() {
    try {
      wheel_->check_invariants();
    } catch (const std::logic_error& e) {
      fail(std::string("check_invariants(): ") + e.what());
    }
    if (wheel_->now() != model_.now())
      fail("now() is " + std::to_string(wheel_->now()) + ", the model says " +
           std::to_string(model_.now()));
    if (wheel_->size() != model_.size())
      fail("size() is " + std::to_string(wheel_->size()) + ", the model holds " +
           std::to_string(model_.size()));
    if (wheel_->empty() != (model_.size() == 0))
      fail("empty() disagrees with size()");

    const std::optional<tick_type> next = wheel_->next_expiry();
    const std::optional<tick_type> earliest = model_.earliest();
    if (next.has_value() != earliest.has_value())
      fail(next ? "next_expiry() is set on an empty wheel"
                : "next_expiry() is empty, but " + std::to_string(model_.size()) +
                      " entries are queued");
    // The wheel may report an earlier tick (an upper-level slot to re-file), never a later one,
    // and never one in the past.
    if (next && (*next > *earliest || *next < wheel_->now()))
      fail("next_expiry() is " + std::to_string(*next) + " with now() " +
           std::to_string(wheel_->now()) + " and the earliest effective deadline " +
           std::to_string(*earliest));

    for (const node_id id : touched_)
      verify_node(id);
    if (opts_.full_node_check_period != 0 && step_ % opts_.full_node_check_period == 0) {
      for (std::size_t i = 0; i < node_count_; ++i)
        verify_node(static_cast<node_id>(i));
    }
  }

  void verify_node(node_id id) {
    const bool linked = nodes_[id].is_linked();
    if (linked != model_.contains(id))
      fail("node " + std::to_string(id) + " is " + (linked ? "linked" : "not linked") +
           ", the model disagrees");
    if (linked && nodes_[id].deadline() != model_.deadline(id))
      fail("node " + std::to_string(id) + " reports deadline " +
           std::to_string(nodes_[id].deadline()) + ", inserted with " +
           std::to_string(model_.deadline(id)));
  }

  static std::string describe(const op_record& r) {
    std::string s =
        "step " + std::to_string(r.step) + " [now() " + std::to_string(r.now_before) + "]: ";
    switch (r.kind) {
    case op_kind::insert:
      return s + "insert(id " + std::to_string(r.id) + ", deadline " + std::to_string(r.tick) + ")";
    case op_kind::remove:
      return s + "remove(id " + std::to_string(r.id) + ")";
    case op_kind::advance:
      return s + "advance(now " + std::to_string(r.tick) + ", budget " +
             (r.budget == unlimited ? std::string("unlimited") : std::to_string(r.budget)) + ")";
    case op_kind::set_reaction:
      return s + "set_reaction(id " + std::to_string(r.id) + ", " + r.what.describe() + ")";
    }
    return s + "?";
  }

  [[noreturn]] void fail(const std::string& what) {
    failed_ = true;
    std::string msg = "differential_harness";
    if (!context_.empty())
      msg += " [" + context_ + "]";
    msg += ": " + describe(recent_[step_ % history]) + ": " + what + "\n  recent operations:";
    const std::uint64_t first = step_ >= history ? step_ - history + 1 : 1;
    for (std::uint64_t s = first; s <= step_; ++s)
      msg += "\n    " + describe(recent_[s % history]);
    throw std::logic_error(msg);
  }

  options opts_;
  std::size_t node_count_;
  std::unique_ptr<test_node[]> nodes_;
  std::unique_ptr<detail::timing_wheel> wheel_;
  reference_wheel model_;
  std::vector<reaction> reactions_;
  std::size_t max_reactions_per_advance_ = 0;

  std::vector<expiry> got_;
  std::vector<expiry> expected_;
  // Ids the current step touched on the wheel's side (see verify()).
  std::vector<node_id> touched_;

  std::string context_;
  std::uint64_t step_ = 0;
  std::uint64_t interrupted_ = 0;
  std::uint64_t capped_ = 0;
  std::array<op_record, history> recent_{};
  bool failed_ = false;
};

// ---------------------------------------------------------------------------------------------
// Random operations.
// ---------------------------------------------------------------------------------------------

// `Entropy` is any type with `std::uint64_t bits(unsigned count)` returning `count` (0..64)
// random bits: a seeded PRNG in the randomized suites, the input bytes in the fuzzer. Ticks
// are drawn from a mixture that a uniform draw would never produce: equal ticks (FIFO),
// exact level boundaries and +-1, overdue deadlines, the end of the tick range, jumps of
// every magnitude, and targets right around next_expiry().

// Tunes the mixture for a driver that wants something other than the default.
struct random_profile {
  // Only one in 2^huge_jump_rarity of the huge advances drawn (log-uniform magnitude, a power
  // of two, the end of the tick range) is taken; the others become steps of at most 63 ticks.
  // Huge jumps empty the wheel, so making them rarer lets the population grow and slots crowd.
  unsigned huge_jump_rarity = 0;
};

template <typename Entropy>
node_id random_id(Entropy& in, std::size_t node_count) {
  return static_cast<node_id>(in.bits(32) % node_count);
}

template <typename Entropy>
tick_type random_magnitude(Entropy& in) {
  // Log-uniform: as likely to be under 64 as over 2^60.
  return in.bits(static_cast<unsigned>(in.bits(6)) + 1);
}

template <typename Entropy>
deadline_rule random_deadline_rule(Entropy& in) {
  using base = deadline_rule::base_kind;
  switch (in.bits(4)) {
  case 0:
  case 1:
    return {base::after_now, in.bits(2), 0};
  case 2:
  case 3:
  case 4:
    return {base::after_now, in.bits(6), 0};
  case 5:
  case 6:
    return {base::after_now, in.bits(12), 0};
  case 7:
    return {base::after_now, in.bits(18), 0};
  case 8:
    return {base::before_now, in.bits(3), 0};
  case 9:
    return {base::before_now, random_magnitude(in), 0};
  case 10:
    return {base::at, in.bits(64), 0};
  case 11:
    return {base::at, max_tick - in.bits(3), 0};
  case 12:
  case 13:
    return {base::after_now, random_magnitude(in), 0};
  default:
    // A level boundary (every 6 bits) or any power of two, one tick either side or on it.
    return {base::next_boundary, in.bits(1) ? 6 * (in.bits(4) % 11) : in.bits(6),
            static_cast<int>(in.bits(2) % 3) - 1};
  }
}

template <typename Entropy>
tick_type random_advance_target(Entropy& in, const detail::timing_wheel& wheel,
                                const random_profile& profile) {
  const tick_type now = wheel.now();
  auto kind = in.bits(5);
  if ((kind == 29 || kind == 31) && in.bits(profile.huge_jump_rarity) != 0)
    kind = 12;
  switch (kind) {
  case 0:
  case 1:
  case 2:
  case 3:
    return now;
  case 4:
  case 5:
  case 6:
  case 7:
  case 8:
  case 9:
  case 10:
  case 11:
    return saturating_add(now, in.bits(2));
  case 12:
  case 13:
  case 14:
  case 15:
  case 16:
  case 17:
  case 18:
    return saturating_add(now, in.bits(6));
  case 19:
  case 20:
  case 21:
  case 22:
  case 23:
    return saturating_add(now, in.bits(12));
  case 24:
  case 25:
    return saturating_add(now, in.bits(20));
  case 26:
  case 27:
  case 28: {
    // Exactly on, or one tick either side of, the tick the wheel says has work.
    const tick_type next = wheel.next_expiry().value_or(now);
    const tick_type shift = in.bits(2) % 3;
    return shift == 0 ? saturating_sub(next, 1) : saturating_add(next, shift - 1);
  }
  case 29:
    return saturating_add(now, random_magnitude(in));
  case 30:
    // Earlier than now(): must count as now().
    return saturating_sub(now, in.bits(8));
  default:
    return in.bits(2) == 0 ? max_tick : saturating_add(now, tick_type{1} << in.bits(6));
  }
}

template <typename Entropy>
std::size_t random_budget(Entropy& in) {
  switch (in.bits(3)) {
  case 5:
    return 0;
  case 6:
    return 1;
  case 7:
    return static_cast<std::size_t>(in.bits(4));
  default:
    return differential_harness::unlimited;
  }
}

// Applies one random operation to `h`. Throws std::logic_error on a disagreement.
template <typename Entropy>
void apply_random_operation(differential_harness& h, Entropy& in,
                            const random_profile& profile = {}) {
  const std::size_t n = h.node_count();
  const auto op = in.bits(4);
  if (op < 7) {
    const node_id id = random_id(in, n);
    h.insert(id, random_deadline_rule(in).resolve(h.now()));
  } else if (op < 10) {
    h.remove(random_id(in, n));
  } else if (op < 15) {
    const tick_type target = random_advance_target(in, h.wheel(), profile);
    h.advance(target, random_budget(in));
  } else {
    const node_id id = random_id(in, n);
    reaction r;
    r.action = static_cast<reaction::action_kind>(in.bits(2));
    r.other = random_id(in, n);
    r.when = random_deadline_rule(in);
    h.set_reaction(id, r);
  }
}

} // namespace asio_wheel::test

#endif // ASIO_WHEEL_TEST_REFERENCE_WHEEL_HPP
