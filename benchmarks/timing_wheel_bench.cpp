//
// timing_wheel_bench.cpp
// ~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

// Cost per operation of detail::timing_wheel at 1e3 .. 1e7 live entries.
//
// Every benchmark keeps the population at N, so what is measured is an operation against a
// wheel (and a node array) of that size: at 1e7 the nodes take 320 MB and most touches of a
// neighbour miss every cache level. Deadlines are uniform over the next 60000 ticks. Nodes
// are preallocated in one vector; random numbers come from an inline generator (a table
// would either be a cache footprint of its own or, if small, repeat the same nodes).
//
//   insert       time to insert a batch of nodes that an untimed phase just removed
//   remove       time to remove a batch of random linked nodes (reinserted untimed)
//   remove_fifo  the same, but nodes are removed in the order they were inserted, as the
//                deadlines of requests answered in order; the nodes still lie at random
//                places in memory
//   unlink_floor the floor under `remove`: unlinking random nodes from one bare intrusive
//                doubly linked list of N nodes (no wheel), the same pattern and batches
//   rearm        remove + insert of one random node, both timed: a timer's expires_after()
//   advance      advance() one tick at a time; every expired node is re-armed from the
//                callback, so N stays constant; cost per expired entry, the re-arm included
//
// ns_per_op is the counter to read. bytes_per_entry is sizeof the node: the wheel's only
// per-entry memory (its own fixed part is a few KiB, whatever N).
//
// What bounds the figures at large N. An O(1) unlink from a list must write the node's two
// neighbours. For random nodes they are random lines of an N * 32-byte array: from 1e5 up
// they miss the caches and, past a few MB, the TLB. unlink_floor pays exactly these misses
// with no wheel around them, so remove / unlink_floor is the wheel's own overhead. When
// nodes leave in insertion order (remove_fifo) their neighbours are recent and cached. With
// transparent huge pages for the node array (GLIBC_TUNABLES=glibc.malloc.hugetlb=1 and
// THP in madvise mode), the TLB part of the cost at 1e7 goes away.
//
//   g++ -std=c++20 -O2 -DNDEBUG -I include benchmarks/timing_wheel_bench.cpp -lbenchmark -lpthread

#include "support/bench_support.hpp"

#include <asio_wheel/detail/timing_wheel.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace {

using asio_wheel::detail::tick_type;
using asio_wheel::detail::timing_wheel;
using asio_wheel::detail::wheel_node;
using bench_clock = std::chrono::steady_clock;

// Nothing but the hook: the per-entry cost of the wheel itself.
struct bench_node : wheel_node {};

constexpr tick_type deadline_span = 60'000;

// splitmix64: a couple of nanoseconds, no memory traffic.
class fast_rng {
public:
  std::uint64_t next() noexcept { return bits_.next(); }

  // Uniform in [0, bound) for bound < 2^32 (multiply-shift, no division).
  std::uint64_t below(std::uint64_t bound) noexcept { return ((next() >> 32) * bound) >> 32; }

private:
  asio_wheel::bench::rng bits_{0x5eed};
};

// A wheel holding `size` entries with deadlines uniform over the next deadline_span ticks.
// Nodes are inserted in a random order of their addresses, and the order of insertion is kept
// (a ring of indices, oldest first) for the benchmarks that remove first in, first out.
class population {
public:
  explicit population(std::size_t size) : nodes_(size), order_(size) {
    for (std::size_t i = 0; i < size; ++i)
      order_[i] = static_cast<std::uint32_t>(i);
    for (std::size_t i = size; i > 1; --i)
      std::swap(order_[i - 1], order_[static_cast<std::size_t>(rng_.below(i))]);
    for (const std::uint32_t index : order_)
      wheel_.insert(nodes_[index], random_deadline());
  }

  population(const population&) = delete;
  population& operator=(const population&) = delete;

  ~population() {
    for (bench_node& node : nodes_) {
      if (node.is_linked())
        wheel_.remove(node);
    }
  }

  std::size_t size() const noexcept { return nodes_.size(); }
  timing_wheel& wheel() noexcept { return wheel_; }

  tick_type random_deadline() noexcept { return wheel_.now() + 1 + rng_.below(deadline_span); }

  bench_node& random_linked_node() noexcept { return nodes_[random_linked_index()]; }

  std::size_t random_linked_index() noexcept {
    for (;;) {
      const auto index = static_cast<std::size_t>(rng_.below(nodes_.size()));
      if (nodes_[index].is_linked())
        return index;
    }
  }

  bench_node& node(std::size_t index) noexcept { return nodes_[index]; }

  // The `count` entries inserted longest ago. Valid while only remove_oldest() and
  // reinsert_oldest() change the population.
  void oldest(std::vector<bench_node*>& out) noexcept {
    for (std::size_t i = 0; i < out.size(); ++i)
      out[i] = &nodes_[order_[(first_ + i) % order_.size()]];
  }

  // Inserts the nodes that oldest() returned again, which makes them the newest.
  void reinsert_oldest(const std::vector<bench_node*>& nodes) noexcept {
    for (bench_node* node : nodes)
      wheel_.insert(*node, random_deadline());
    first_ = (first_ + nodes.size()) % order_.size();
  }

private:
  timing_wheel wheel_;
  std::vector<bench_node> nodes_;
  fast_rng rng_;
  std::vector<std::uint32_t> order_;
  std::size_t first_ = 0;
};

// Which benchmarks may share a population: those that remove first in, first out need the
// order of insertion that the others scramble.
enum class usage { random, fifo };

// Building 1e7 entries takes a while and Google Benchmark calls each function several times
// per argument, so the population is kept between calls; only one exists at a time, which
// keeps peak memory at one 320 MB array.
population& population_of(std::size_t size, usage use = usage::random) {
  static std::unique_ptr<population> current;
  static usage current_use = usage::random;
  if (!current || current->size() != size || current_use != use) {
    current.reset();
    current = std::make_unique<population>(size);
    current_use = use;
  }
  return *current;
}

// Frees the kept population, for a benchmark that needs its own large array.
void drop_population() {
  population_of(0);
}

void report(benchmark::State& state, double timed_ns, std::int64_t items) {
  state.SetItemsProcessed(items);
  state.counters["ns_per_op"] = items > 0 ? timed_ns / static_cast<double>(items) : 0.0;
  state.counters["bytes_per_entry"] = static_cast<double>(sizeof(bench_node));
}

double nanoseconds(bench_clock::duration d) {
  return std::chrono::duration<double, std::nano>(d).count();
}

// Batches keep the clock reads (tens of ns) out of the per-op figure; N/8 at most, so the
// population stays within 12% of N even at 1e3.
std::size_t batch_for(std::size_t size) {
  return std::min<std::size_t>(1024, size / 8);
}

void bm_insert(benchmark::State& state) {
  population& p = population_of(static_cast<std::size_t>(state.range(0)));
  std::vector<bench_node*> batch(batch_for(p.size()));
  double timed_ns = 0;
  for (auto _ : state) {
    for (bench_node*& node : batch) {
      node = &p.random_linked_node();
      p.wheel().remove(*node);
    }
    const auto start = bench_clock::now();
    for (bench_node* node : batch)
      p.wheel().insert(*node, p.random_deadline());
    const auto elapsed = bench_clock::now() - start;
    state.SetIterationTime(std::chrono::duration<double>(elapsed).count());
    timed_ns += nanoseconds(elapsed);
  }
  report(state, timed_ns, state.iterations() * static_cast<std::int64_t>(batch.size()));
}

// Removes a batch with the clock around it; its nanoseconds, also the iteration's time.
double timed_remove(benchmark::State& state, timing_wheel& wheel,
                    const std::vector<bench_node*>& batch) {
  const auto start = bench_clock::now();
  for (bench_node* node : batch)
    wheel.remove(*node);
  const auto elapsed = bench_clock::now() - start;
  state.SetIterationTime(std::chrono::duration<double>(elapsed).count());
  return nanoseconds(elapsed);
}

void bm_remove(benchmark::State& state) {
  population& p = population_of(static_cast<std::size_t>(state.range(0)));
  std::vector<bench_node*> batch(batch_for(p.size()));
  // drawn[i] == round: node i is already in this round's batch (a node is removed once).
  std::vector<std::uint32_t> drawn(p.size(), 0);
  std::uint32_t round = 0;
  double timed_ns = 0;
  for (auto _ : state) {
    ++round;
    // Chosen before the clock starts: checking that a node is linked reads it, which is the
    // caller's business (it holds the timer), not the wheel's.
    for (bench_node*& node : batch) {
      std::size_t index = p.random_linked_index();
      while (drawn[index] == round)
        index = p.random_linked_index();
      drawn[index] = round;
      node = &p.node(index);
    }
    timed_ns += timed_remove(state, p.wheel(), batch);
    for (bench_node* node : batch)
      p.wheel().insert(*node, p.random_deadline());
  }
  report(state, timed_ns, state.iterations() * static_cast<std::int64_t>(batch.size()));
}

void bm_remove_fifo(benchmark::State& state) {
  population& fifo = population_of(static_cast<std::size_t>(state.range(0)), usage::fifo);
  std::vector<bench_node*> batch(batch_for(fifo.size()));
  double timed_ns = 0;
  for (auto _ : state) {
    fifo.oldest(batch);
    // Read before the clock starts, as in bm_remove: the caller holds the timer.
    for (bench_node* node : batch)
      benchmark::DoNotOptimize(node->deadline());
    timed_ns += timed_remove(state, fifo.wheel(), batch);
    fifo.reinsert_oldest(batch);
  }
  report(state, timed_ns, state.iterations() * static_cast<std::int64_t>(batch.size()));
}

// The least that unlinking a random node from an intrusive doubly linked list costs: the
// writes to its two neighbours. One circular list, in random address order, of N nodes of
// the wheel's node size; no slots, bitmaps or bookkeeping.
struct bare_node {
  bare_node* next;
  bare_node* prev;
  std::uint64_t pad[2];
};
static_assert(sizeof(bare_node) == sizeof(bench_node));

void bm_unlink_floor(benchmark::State& state) {
  const auto size = static_cast<std::size_t>(state.range(0));
  drop_population();
  std::vector<bare_node> nodes(size + 1);
  bare_node& head = nodes[size];
  fast_rng rng;
  std::vector<std::uint32_t> order(size);
  for (std::size_t i = 0; i < size; ++i)
    order[i] = static_cast<std::uint32_t>(i);
  for (std::size_t i = size; i > 1; --i)
    std::swap(order[i - 1], order[static_cast<std::size_t>(rng.below(i))]);
  const auto append = [&head](bare_node& node) {
    node.prev = head.prev;
    node.next = &head;
    head.prev->next = &node;
    head.prev = &node;
  };
  head.next = head.prev = &head;
  for (const std::uint32_t index : order)
    append(nodes[index]);

  std::vector<bare_node*> batch(batch_for(size));
  std::vector<std::uint32_t> drawn(size, 0); // as in bm_remove
  std::uint32_t round = 0;
  double timed_ns = 0;
  for (auto _ : state) {
    ++round;
    for (bare_node*& node : batch) {
      std::size_t index = static_cast<std::size_t>(rng.below(size));
      while (drawn[index] == round)
        index = static_cast<std::size_t>(rng.below(size));
      drawn[index] = round;
      node = &nodes[index];
      benchmark::DoNotOptimize(node->next);
    }
    const auto start = bench_clock::now();
    for (bare_node* node : batch) {
      node->next->prev = node->prev;
      node->prev->next = node->next;
      node->next = nullptr;
    }
    benchmark::ClobberMemory();
    const auto elapsed = bench_clock::now() - start;
    state.SetIterationTime(std::chrono::duration<double>(elapsed).count());
    timed_ns += nanoseconds(elapsed);
    for (bare_node* node : batch)
      append(*node);
  }
  report(state, timed_ns, state.iterations() * static_cast<std::int64_t>(batch.size()));
}

void bm_rearm(benchmark::State& state) {
  population& p = population_of(static_cast<std::size_t>(state.range(0)));
  const auto start = bench_clock::now();
  for (auto _ : state) {
    bench_node& node = p.random_linked_node();
    p.wheel().remove(node);
    p.wheel().insert(node, p.random_deadline());
  }
  report(state, nanoseconds(bench_clock::now() - start), state.iterations());
}

void bm_advance(benchmark::State& state) {
  population& p = population_of(static_cast<std::size_t>(state.range(0)));
  timing_wheel& wheel = p.wheel();
  std::int64_t expired = 0;
  const auto start = bench_clock::now();
  for (auto _ : state) {
    wheel.advance(wheel.now() + 1, timing_wheel::unlimited, [&](wheel_node& node) {
      ++expired;
      wheel.insert(node, p.random_deadline());
    });
  }
  report(state, nanoseconds(bench_clock::now() - start), expired);
  state.counters["expired_per_tick"] =
      static_cast<double>(expired) / static_cast<double>(state.iterations());
}

void sizes(benchmark::internal::Benchmark* b) {
  for (const std::int64_t n : {1'000, 10'000, 100'000, 1'000'000, 10'000'000})
    b->Arg(n);
}

} // namespace

BENCHMARK(bm_insert)->Apply(sizes)->UseManualTime();
BENCHMARK(bm_remove)->Apply(sizes)->UseManualTime();
BENCHMARK(bm_remove_fifo)->Apply(sizes)->UseManualTime();
BENCHMARK(bm_unlink_floor)->Apply(sizes)->UseManualTime();
BENCHMARK(bm_rearm)->Apply(sizes);
BENCHMARK(bm_advance)->Apply(sizes);

BENCHMARK_MAIN();
