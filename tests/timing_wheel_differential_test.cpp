//
// timing_wheel_differential_test.cpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

// Randomized differential testing of detail::timing_wheel against reference_wheel: over a
// million operations (insert, re-arm, remove, advance by every size of step up to the end of
// the tick range, budgets including 0, inserts and removes from inside callbacks), with the
// set, order and tick of expiries compared exactly and check_invariants() after every step.
// Every run is a pure function of its seed, which every failure message names.

#include "reference_wheel.hpp"
#include "test_shard.hpp"

#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using namespace asio_wheel::test;

class prng_entropy {
public:
  explicit prng_entropy(std::uint64_t seed) : rng_(seed) {}

  std::uint64_t bits(unsigned count) { return count == 0 ? 0 : rng_() >> (64 - count); }

private:
  std::mt19937_64 rng_;
};

struct run_config {
  std::uint64_t seed;
  std::size_t node_count;
  std::size_t operations;
  bool check_in_callbacks;
  // See random_profile: 0 for a wild mix, higher for crowded wheels.
  unsigned huge_jump_rarity;
  // The wheel's cascade limit (0: none): small ones leave staging unfinished across calls.
  std::size_t cascade_limit = 0;
  // With the cascade limit, a window come due re-filed whole: heartbeat_group's wheel.
  bool refile_whole = false;
};

// A wheel's behaviour depends on the absolute digits of its ticks, not only on differences,
// so each epoch starts somewhere else: at zero, just below 2^63, near the end of the range.
tick_type random_start(prng_entropy& in) {
  switch (in.bits(2)) {
  case 0:
    return in.bits(10);
  case 1:
    return (tick_type{1} << 63) - in.bits(20);
  case 2:
    return max_tick - in.bits(24);
  default:
    return in.bits(64);
  }
}

// Operations per epoch, and how many to keep going once the clock reached max_tick: from
// there every deadline clamps to max_tick, worth covering but not worth dwelling on.
constexpr std::size_t epoch_operations = 25'000;
constexpr std::size_t operations_at_end_of_time = 64;

// Returns the number of operations applied. Throws std::logic_error naming seed and epoch.
std::size_t run(const run_config& config) {
  prng_entropy in(config.seed);
  differential_harness::options opts;
  opts.check_invariants_in_callbacks = config.check_in_callbacks;
  // The whole pool each step would dominate the run time for the large pools; the nodes a
  // step touched are compared every step anyway.
  opts.full_node_check_period = 64;
  if (config.cascade_limit != 0)
    opts.cascade_limit = config.cascade_limit;
  opts.refile_whole = config.refile_whole;
  const random_profile profile{config.huge_jump_rarity};

  std::size_t done = 0;
  std::uint64_t interrupted = 0, capped = 0;
  for (std::size_t epoch = 0; done < config.operations; ++epoch) {
    differential_harness h(config.node_count, random_start(in), opts);
    h.set_context("seed " + std::to_string(config.seed) + ", " + std::to_string(config.node_count) +
                  " nodes, epoch " + std::to_string(epoch));
    std::size_t at_end = 0;
    for (std::size_t i = 0; i < epoch_operations && done < config.operations; ++i, ++done) {
      apply_random_operation(h, in, profile);
      if (h.now() == max_tick && ++at_end == operations_at_end_of_time)
        break;
    }
    // Everything left must come out, in order, in one unlimited advance.
    h.advance(max_tick);
    interrupted += h.interrupted();
    capped += h.capped();
  }
  // A limited run means something only if the limit actually stopped the wheel.
  if (config.cascade_limit != 0 && !config.refile_whole && interrupted == 0)
    throw std::logic_error("the cascade limit never stopped an advance()");
  if (config.refile_whole && capped == 0)
    throw std::logic_error("the cascade limit never held the staging ahead back");
  return done;
}

void run_checked(const run_config& config) {
  CAPTURE(config.seed);
  CAPTURE(config.node_count);
  try {
    const std::size_t done = run(config);
    CHECK(done == config.operations);
  } catch (const std::logic_error& e) {
    FAIL_CHECK("seed " << config.seed << ": " << std::string(e.what()));
  }
}

// About 1.07 million operations in all. Small pools make ids collide (re-arm, remove of
// fresh entries, reactions on live ones) and keep check_invariants() cheap; the large pools
// with rare huge jumps hold a few hundred live entries: crowded slots, long cascades. Each run
// is a series of independent epochs of epoch_operations, so three seeds of 50,000 are the
// same test as one of 150,000, in three processes when sharded. The order puts about equal
// time in each of four shards (index i goes to shard i % 4, counting on into limited_runs):
// checking invariants in callbacks costs most, then large pools.
const run_config plain_runs[] = {
    {22, 8, 50'000, true, 0},    {4, 32, 150'000, true, 3},     {21, 8, 50'000, true, 0},
    {1, 8, 50'000, true, 0},     {7, 1'000, 100'000, false, 3}, {8, 2'000, 70'000, false, 5},
    {5, 256, 150'000, false, 0}, {3, 64, 150'000, false, 0},    {2, 16, 150'000, false, 0},
    {6, 256, 150'000, false, 5},
};

// Issue #36: the staging of each level's next slot is spread over advance() calls, a few
// moves each, so sources stay half staged while entries are inserted into them, removed from
// stages, expired around them, and windows come due before their staging is done. Crowded
// wheels (rare huge jumps) keep the stages full.
const run_config limited_runs[] = {
    {16, 2'000, 60'000, false, 5, 16}, {12, 64, 100'000, true, 3, 2},
    {15, 1'000, 80'000, false, 5, 3},  {13, 256, 100'000, false, 5, 1},
    {14, 256, 100'000, false, 3, 7},   {11, 16, 100'000, true, 0, 1},
};

// heartbeat_group's wheel: a cascade limit, but a window come due re-filed whole. Each
// advance() takes all that is due in one call (the harness calls it once, and compares its
// result with the model's), while the staging ahead is left half done across calls.
const run_config staged_runs[] = {
    {31, 256, 60'000, false, 5, 1, true},
    {32, 64, 50'000, true, 3, 3, true},
    {33, 1'000, 40'000, false, 5, 16, true},
};

// Runs the configurations of this process's shard (test_shard.hpp); `first` is the index of
// configs[0] among all the test's configurations, so that the shards split the whole list.
template <std::size_t N>
void run_shard_of(const run_config (&configs)[N], std::size_t first) {
  static const test_shard shard;
  for (std::size_t i = 0; i < N; ++i)
    if (shard.runs(first + i))
      run_checked(configs[i]);
}

} // namespace

TEST_SUITE("timing_wheel differential") {

  // The model itself, against hand-computed expectations: if it were wrong the same way as
  // the wheel, the differential runs would prove nothing.
  TEST_CASE("reference_wheel orders by effective deadline then insertion") {
    reference_wheel m(6, 100);
    CHECK(m.insert(0, 105) == 105);
    CHECK(m.insert(1, 50) == 100); // overdue: due now
    CHECK(m.insert(2, 100) == 100);
    CHECK(m.insert(3, 105) == 105);
    CHECK(m.insert(4, 200) == 200);
    CHECK(m.earliest() == 100);

    std::vector<expiry> fired;
    const auto record = [&](node_id id, tick_type tick) { fired.push_back({id, tick}); };
    CHECK_FALSE(m.advance(150, 3, record));
    CHECK(fired == std::vector<expiry>{{1, 100}, {2, 100}, {0, 105}});
    CHECK(m.now() == 105); // stopped on the next due entry, not on 150
    CHECK(m.insert(5, 101) == 105);
    fired.clear();
    CHECK(m.advance(150, differential_harness::unlimited, record));
    CHECK(fired == std::vector<expiry>{{3, 105}, {5, 105}});
    CHECK(m.now() == 150);
    CHECK(m.size() == 1);
    m.remove(4);
    CHECK_FALSE(m.earliest().has_value());
  }

  TEST_CASE("harness agrees with hand-computed expiries, reactions included") {
    differential_harness h(4, 10);
    h.insert(0, 12);
    h.insert(1, 12);
    h.insert(2, 3); // overdue
    reaction r;
    r.action = reaction::action_kind::rearm_self;
    r.when = {deadline_rule::base_kind::after_now, 64, 0};
    h.set_reaction(1, r);
    CHECK(h.advance(12));
    CHECK(h.last_expired() == std::vector<expiry>{{2, 10}, {0, 12}, {1, 12}});
    CHECK(h.is_linked(1));
    CHECK(h.wheel().next_expiry() <= tick_type{76});
    CHECK_FALSE(h.advance(200, 0));
    CHECK(h.now() == 76);
    CHECK(h.advance(200, 1) == false); // re-armed again at 140, still due
    CHECK(h.last_expired() == std::vector<expiry>{{1, 76}});
    h.remove(1);
    CHECK(h.advance(200));
    CHECK(h.last_expired().empty());
  }

  TEST_CASE("random operations against the model") {
    run_shard_of(plain_runs, 0);
  }

  TEST_CASE("random operations against the model, with small cascade limits") {
    run_shard_of(limited_runs, std::size(plain_runs));
  }

  TEST_CASE("random operations against the model, with small cascade limits, windows come due "
            "re-filed whole") {
    run_shard_of(staged_runs, std::size(plain_runs) + std::size(limited_runs));
  }
}
