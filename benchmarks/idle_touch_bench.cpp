//
// idle_touch_bench.cpp
// ~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// The heartbeat reset of a server with N = 1e6 idle connections, each with a pending idle
// wait (timeout 60 s, so nothing fires during the run), done two ways, in one binary and
// one run:
//
//   touch/idle_timer/<order>    asio_wheel::idle_timer::touch() on K connections: one
//                               clock read and one relaxed store each. The pending wait
//                               is not touched; it re-arms itself lazily when its deadline
//                               passes.
//   reset/steady_timer/<order>  the steady_timer way: expires_after(60 s) on the pending
//                               wait (which aborts it), async_wait() again, and ctx.poll()
//                               running the K aborted handlers, all timed.
//   clock/steady_clock_now      K reads of std::chrono::steady_clock::now() and nothing
//                               else: the floor under touch() (informational; on a VM the
//                               clock read is most of a touch).
//
// <order> is one of
//   random      each of the K connections drawn uniformly from the N: cache- and TLB-cold,
//               like activity on arbitrary connections of a large server;
//   sequential  K consecutive connections, the next K in the next batch: the memory is
//               streamed, mostly prefetched;
//   warm        K random connections, as in random, but each connection's timer object is
//               read (untimed) just before the timed batch: its memory is in cache, as for a
//               connection touched right after its socket was read. What the operation
//               needs beyond the object itself (for steady_timer, its entry in the
//               context's timer heap and the pending operation) stays where it was.
// Time = wall ns per connection, the median over batches of K = 1000 (a preempted batch
// does not move it); the Time column is that per-op time too (manual time).
//
// Memory per idle connection, for both: sizeof(the timer object) plus the heap used per
// pending wait (mallinfo2: in-use arena + mmapped, across arming the N waits, divided by N).
//
// After the run, the ratios steady_timer reset / idle_timer touch are printed, computed
// from the figures measured in this run.
//
// Extra flags (removed before Google Benchmark sees the command line):
//   --itb_n=N        connections (default 1000000)
//   --itb_batch=K    connections per timed batch (default 1000)
//   --itb_iters=I    batches per benchmark (default 400)
//
// Build: g++ -std=c++20 -O2 -DNDEBUG -I include benchmarks/idle_touch_bench.cpp
//          -o /tmp/itb -lbenchmark -lpthread

#include "support/bench_support.hpp"

#include <asio_wheel/idle_timer.hpp>

#include <asio/error.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;
using namespace std::chrono_literals;
namespace bench = asio_wheel::bench;

using idle_timer = asio_wheel::idle_timer;

struct config {
  std::size_t n = 1'000'000;
  std::size_t batch = 1000;
  std::int64_t iterations = 400;
};

config cfg;

// results[op name][order] = median ns per op
std::map<std::string, std::map<std::string, double>> results;

struct memory_figures {
  std::size_t object_bytes = 0;
  double heap_per_wait = 0;
};
std::map<std::string, memory_figures> memory;

// An io_context whose shutdown() can be called before the timers are destroyed, so that
// tearing down 1e6 pending steady_timers does not cost O(N log N) of heap work.
class bench_context : public asio::io_context {
public:
  bench_context() : asio::io_context(1) {}
  using asio::execution_context::shutdown;
};

// N connections, each with a timer of type T and one pending wait.
template <typename T>
class world {
public:
  explicit world(std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
      if constexpr (std::is_same_v<T, asio::steady_timer>)
        timers_.emplace_back(ctx_);
      else
        timers_.emplace_back(ctx_, std::chrono::duration_cast<typename T::duration>(60s));
    }
    const std::size_t heap0 = bench::heap_in_use();
    for (auto& t : timers_) {
      if constexpr (std::is_same_v<T, asio::steady_timer>)
        t.expires_after(60s);
      t.async_wait(bench::make_handler(&counts_));
    }
    const std::size_t heap1 = bench::heap_in_use();
    heap_per_wait_ =
        (static_cast<double>(heap1) - static_cast<double>(heap0)) / static_cast<double>(n);
  }

  world(const world&) = delete;
  world& operator=(const world&) = delete;

  ~world() {
    ctx_.shutdown();
    timers_.clear();
  }

  T& operator[](std::size_t i) { return timers_[i]; }
  std::size_t size() const { return timers_.size(); }
  bench::counts& count() { return counts_; }
  auto handler() { return bench::make_handler(&counts_); }
  void poll() { ctx_.poll(); }
  double heap_per_wait() const { return heap_per_wait_; }

private:
  bench_context ctx_;
  std::deque<T> timers_; // not movable (the idle timers): a deque never moves its elements
  bench::counts counts_;
  double heap_per_wait_ = 0;
};

std::unique_ptr<world<idle_timer>> idle_world;
std::unique_ptr<world<asio::steady_timer>> steady_world;

// Connection indices for the batches: random ones are drawn once, up front.
std::vector<std::uint32_t> random_indices;

enum class order { random, sequential, warm };

const char* order_name(order o) {
  return o == order::random ? "random" : o == order::sequential ? "sequential" : "warm";
}

const std::uint32_t* batch_indices(order o, std::int64_t iteration,
                                   std::vector<std::uint32_t>& scratch) {
  const std::size_t k = cfg.batch;
  if (o != order::sequential) {
    // warm uses other random batches than random, so that it does not find them cached.
    const std::size_t batches = random_indices.size() / k;
    const std::size_t b =
        static_cast<std::size_t>(iteration) + (o == order::warm ? batches / 2 : 0);
    return random_indices.data() + b % batches * k;
  }
  const std::size_t base = static_cast<std::size_t>(iteration) * k % cfg.n;
  for (std::size_t j = 0; j < k; ++j)
    scratch[j] = static_cast<std::uint32_t>((base + j) % cfg.n);
  return scratch.data();
}

// Brings the timer objects of a batch into the cache: every cache line of each is read.
template <typename W>
void warm(W& w, const std::uint32_t* idx) {
  for (std::size_t j = 0; j < cfg.batch; ++j)
    bench::warm_object(w[idx[j]]);
}

void finish(benchmark::State& state, const std::string& op, const char* order,
            const std::vector<double>& per_op_ns) {
  const double med = bench::median(per_op_ns);
  double sum = 0;
  for (const double x : per_op_ns)
    sum += x;
  state.counters["ns/op"] = med;
  state.counters["mean_ns/op"] = sum / static_cast<double>(per_op_ns.size());
  state.counters["N"] = static_cast<double>(cfg.n);
  state.counters["K"] = static_cast<double>(cfg.batch);
  results[op][order] = med;
}

template <typename W>
void bm_touch(benchmark::State& state, W* w, const std::string& op, order ord) {
  const std::size_t k = cfg.batch;
  std::vector<std::uint32_t> scratch(k);
  std::vector<std::remove_reference_t<decltype((*w)[0])>*> targets(k);
  std::vector<double> per_op_ns;
  per_op_ns.reserve(static_cast<std::size_t>(cfg.iterations));
  std::int64_t iteration = 0;
  for (auto _ : state) {
    const std::uint32_t* idx = batch_indices(ord, iteration++, scratch);
    if (ord == order::warm)
      warm(*w, idx);
    for (std::size_t j = 0; j < k; ++j)
      targets[j] = &(*w)[idx[j]]; // untimed: the container's indexing is not the operation
    const auto t0 = clock_type::now();
    for (std::size_t j = 0; j < k; ++j)
      targets[j]->touch();
    benchmark::ClobberMemory();
    const auto t1 = clock_type::now();
    state.SetIterationTime(bench::seconds(t1 - t0) / static_cast<double>(k));
    per_op_ns.push_back(bench::seconds(t1 - t0) * 1e9 / static_cast<double>(k));
  }
  w->poll();
  if (w->count().ok != 0 || w->count().aborted != 0) {
    state.SkipWithError("an idle wait completed during the benchmark");
    return;
  }
  finish(state, op, order_name(ord), per_op_ns);
}

void bm_steady_reset(benchmark::State& state, order ord) {
  auto& w = *steady_world;
  const std::size_t k = cfg.batch;
  std::vector<std::uint32_t> scratch(k);
  std::vector<asio::steady_timer*> targets(k);
  std::vector<double> per_op_ns;
  per_op_ns.reserve(static_cast<std::size_t>(cfg.iterations));
  std::int64_t iteration = 0;
  for (auto _ : state) {
    const std::uint32_t* idx = batch_indices(ord, iteration++, scratch);
    if (ord == order::warm)
      warm(w, idx);
    for (std::size_t j = 0; j < k; ++j)
      targets[j] = &w[idx[j]];
    const std::uint64_t aborted0 = w.count().aborted;
    std::size_t cancelled = 0;
    const auto t0 = clock_type::now();
    for (std::size_t j = 0; j < k; ++j) {
      asio::steady_timer& t = *targets[j];
      cancelled += t.expires_after(60s); // aborts the pending wait
      t.async_wait(w.handler());
    }
    w.poll(); // runs the K aborted handlers
    const auto t1 = clock_type::now();
    if (cancelled != k || w.count().aborted - aborted0 != k) {
      state.SkipWithError("a reset did not abort exactly one pending wait");
      return;
    }
    state.SetIterationTime(bench::seconds(t1 - t0) / static_cast<double>(k));
    per_op_ns.push_back(bench::seconds(t1 - t0) * 1e9 / static_cast<double>(k));
  }
  if (w.count().ok != 0) {
    state.SkipWithError("a steady_timer fired during the benchmark");
    return;
  }
  finish(state, "reset/steady_timer", order_name(ord), per_op_ns);
}

void bm_clock(benchmark::State& state) {
  const std::size_t k = cfg.batch;
  std::vector<double> per_op_ns;
  per_op_ns.reserve(static_cast<std::size_t>(cfg.iterations));
  for (auto _ : state) {
    const auto t0 = clock_type::now();
    for (std::size_t j = 0; j < k; ++j) {
      auto t = clock_type::now();
      benchmark::DoNotOptimize(t);
    }
    const auto t1 = clock_type::now();
    state.SetIterationTime(bench::seconds(t1 - t0) / static_cast<double>(k));
    per_op_ns.push_back(bench::seconds(t1 - t0) * 1e9 / static_cast<double>(k));
  }
  finish(state, "clock/steady_clock_now", "random", per_op_ns);
  for (const char* o : {"sequential", "warm"})
    results["clock/steady_clock_now"][o] = results["clock/steady_clock_now"]["random"];
}

void print_summary() {
  std::printf("\nidle_touch_bench: N = %zu idle connections, K = %zu per batch, median ns per "
              "connection\n",
              cfg.n, cfg.batch);
  const char* orders[] = {"random", "sequential", "warm"};
  std::printf("  %-28s %12s %12s %12s\n", "", orders[0], orders[1], orders[2]);
  for (const auto& [op, by_order] : results) {
    std::printf("  %-28s", op.c_str());
    for (const char* o : orders) {
      const auto it = by_order.find(o);
      if (it != by_order.end())
        std::printf(" %12.2f", it->second);
      else
        std::printf(" %12s", "-");
    }
    std::printf("\n");
  }
  std::printf("\n  ratio: steady_timer reset / idle_timer touch (goal: at least 50x)\n");
  for (const char* o : orders) {
    const auto s = results["reset/steady_timer"].find(o);
    const auto w = results["touch/idle_timer"].find(o);
    if (s == results["reset/steady_timer"].end() || w == results["touch/idle_timer"].end() ||
        w->second <= 0)
      continue;
    const double ratio = s->second / w->second;
    std::printf("    %-10s %8.1fx  %s\n", o, ratio,
                ratio >= 50 ? "(goal met)" : "(below the 50x goal)");
  }
  std::printf("\n  memory per idle connection (object + heap per pending wait)\n");
  for (const auto& [name, m] : memory)
    std::printf("    %-28s sizeof %4zu + heap %6.1f = %7.1f bytes\n", name.c_str(), m.object_bytes,
                m.heap_per_wait, static_cast<double>(m.object_bytes) + m.heap_per_wait);
}

} // namespace

int main(int argc, char** argv) {
  std::vector<char*> rest;
  rest.push_back(argv[0]);
  for (int i = 1; i < argc; ++i) {
    std::string v;
    if (bench::parse_flag(argv[i], "--itb_n", v))
      cfg.n = static_cast<std::size_t>(std::strtoull(v.c_str(), nullptr, 10));
    else if (bench::parse_flag(argv[i], "--itb_batch", v))
      cfg.batch = static_cast<std::size_t>(std::strtoull(v.c_str(), nullptr, 10));
    else if (bench::parse_flag(argv[i], "--itb_iters", v))
      cfg.iterations = std::strtoll(v.c_str(), nullptr, 10);
    else
      rest.push_back(argv[i]);
  }
  if (cfg.n < 1 || cfg.batch < 1 || cfg.iterations < 1) {
    std::fprintf(stderr, "idle_touch_bench: --itb_n, --itb_batch and --itb_iters must be >= 1\n");
    return 2;
  }
  cfg.batch = std::min(cfg.batch, cfg.n);

  // The worlds, built once (untimed) and shared by the benchmarks.
  std::mt19937_64 rng(0x1d1e'70c4ULL);
  std::uniform_int_distribution<std::uint32_t> pick(0, static_cast<std::uint32_t>(cfg.n - 1));
  random_indices.resize(cfg.batch * 256);
  for (auto& i : random_indices)
    i = pick(rng);

  std::printf("building %zu idle_timers and %zu steady_timers, each with a pending wait...\n",
              cfg.n, cfg.n);
  std::fflush(stdout);
  idle_world = std::make_unique<world<idle_timer>>(cfg.n);
  memory["idle_timer"] = {sizeof(idle_timer), idle_world->heap_per_wait()};
  steady_world = std::make_unique<world<asio::steady_timer>>(cfg.n);
  memory["steady_timer"] = {sizeof(asio::steady_timer), steady_world->heap_per_wait()};

  for (const order ord : {order::random, order::sequential, order::warm}) {
    const std::string name = order_name(ord);
    benchmark::RegisterBenchmark(
        ("touch/idle_timer/" + name).c_str(),
        [ord](benchmark::State& s) { bm_touch(s, idle_world.get(), "touch/idle_timer", ord); })
        ->Iterations(cfg.iterations)
        ->UseManualTime()
        ->Unit(benchmark::kNanosecond);
    benchmark::RegisterBenchmark(("reset/steady_timer/" + name).c_str(),
                                 [ord](benchmark::State& s) { bm_steady_reset(s, ord); })
        ->Iterations(cfg.iterations)
        ->UseManualTime()
        ->Unit(benchmark::kNanosecond);
  }
  benchmark::RegisterBenchmark("clock/steady_clock_now", bm_clock)
      ->Iterations(cfg.iterations)
      ->UseManualTime()
      ->Unit(benchmark::kNanosecond);

  int bargc = static_cast<int>(rest.size());
  benchmark::Initialize(&bargc, rest.data());
  if (benchmark::ReportUnrecognizedArguments(bargc, rest.data()))
    return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();

  print_summary();

  steady_world.reset();
  idle_world.reset();
  return 0;
}
