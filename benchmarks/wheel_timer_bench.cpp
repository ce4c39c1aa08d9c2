//
// wheel_timer_bench.cpp
// ~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// asio::steady_timer against asio_wheel::wheel_timer, side by side in one run, on one thread,
// with N = 1e4, 1e5, 1e6 and 4e6 pending timers.
//
//   arm/<impl>/<N>     expires_after + async_wait on a timer with no pending wait. Per
//                      iteration, K random timers are replaced by new timer objects (their
//                      waits aborted, handlers drained; untimed), then arming the K is timed.
//   cancel/<impl>/<N>  cancel() on K random pending timers + ctx.poll() running the K aborted
//                      handlers, timed together; the K are re-armed untimed. wheel_timer's
//                      cancel() leaves the entry in the wheel (lazy re-arm): unlinking it is
//                      paid later, by a re-arm for an earlier expiry (as in reset), by the
//                      destructor, or by the driver when the entry's tick comes.
//   reset/<impl>/<N>   the heartbeat: expires_after on a pending wait (aborting it) +
//                      async_wait, on K random timers, + ctx.poll() running the K aborted
//                      handlers, all timed.
//   cancel_warm, reset_warm
//                      the same with the K timer objects read (untimed) just before: in a
//                      server, the timer re-armed is the one of the connection that was just
//                      read from, so the object itself is in cache; what is left is the cost
//                      of the timer machinery (operations, queue, handlers). In arm the
//                      objects are warm already (replaced just before).
//   fire/<impl>/<N>    N timers due 200 ms .. 1 s after arming (uniformly random), then
//                      ctx.run() until all have fired: process CPU time per completed handler
//                      (CLOCK_PROCESS_CPUTIME_ID around run(); arming excluded).
//   bytes/<impl>/<N>   sizeof(timer) + heap bytes per pending wait (mallinfo2 delta, in-use
//                      arena + mmapped, across arming N waits, divided by N).
//
// For arm/cancel/reset the Time column is the mean over batches of wall ns per op, and the
// ns/op counter the median over batches; for fire, Time is the mean over rounds of CPU ns per
// handler, and cpu_ns/handler the median. The medians go into the table: the machine may be
// shared, and a batch or round disturbed by other load should not move the result. The CPU
// column covers whole iterations, untimed preparation included: ignore it.
//
// Deadlines of pending timers are uniformly random in 1..60 s (counted from the end of the
// setup), so nothing fires in arm/cancel/reset; every benchmark checks its handler counts
// (and that nothing fired) and fails with SkipWithError otherwise. Each benchmark builds its
// own io_context and timers (untimed), with a fixed-seed RNG, and runs a fixed number of
// iterations, so the whole binary is bounded (one to two minutes here).
//
// After the run, a table of steady / wheel ratios per operation and N is printed, computed
// from the figures measured in this run.
//
// Extra flags (removed before Google Benchmark sees the command line):
//   --wtb_batch=K          timers per batch in arm/cancel/reset (default 1000)
//   --wtb_iters=I          batches per arm/cancel/reset benchmark (default 200)
//   --wtb_fire_iters=I     fire rounds up to N = 1e6 (default 3; 2 rounds above 1e6)
//   --wtb_sizes=a,b,...    the values of N (default 10000,100000,1000000,4000000)
//   --wtb_hint=H           io_context concurrency hint (default: Asio's default; 1 = one thread)
//   --wtb_lead_s=S         push pending deadlines S s further out (for long profiling runs)
//
// Build: g++ -std=c++20 -O2 -DNDEBUG -I include benchmarks/wheel_timer_bench.cpp
//          -o /tmp/wtb -lbenchmark -lpthread

#include "support/bench_support.hpp"

#include <asio_wheel/wheel_timer.hpp>

#include <asio/error.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>

#include <benchmark/benchmark.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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

// ---------------------------------------------------------------------------------------
// Configuration (command line, see the header comment).

struct config {
  std::size_t batch = 1000;
  std::int64_t iterations = 200;
  std::int64_t fire_iterations = 3;
  int hint = ASIO_CONCURRENCY_HINT_DEFAULT;
  double extra_lead_s = 0;
  std::vector<std::int64_t> sizes = {10'000, 100'000, 1'000'000, 4'000'000};
};

config cfg;

// ---------------------------------------------------------------------------------------
// Results of this run, for the ratio table: results[op][N][impl].

std::map<std::string, std::map<std::int64_t, std::map<std::string, double>>> results;

template <typename Timer>
constexpr const char* impl_name() {
  return std::is_same_v<Timer, asio::steady_timer> ? "steady" : "wheel";
}

// Per-timer arm cost seen in the last setup of each implementation, used to place the fire
// window after the end of arming. A conservative guess until the first setup.
std::map<std::string, double> arm_ns_estimate;

// ---------------------------------------------------------------------------------------
// Helpers.

// N timers of one implementation on a fresh io_context, each with one pending wait due at
// `base + U(lo, hi)`, where base is the start of arming plus `lead` (so that the window is
// counted from about the end of the setup).
template <typename Timer>
class world {
public:
  world(std::size_t n, clock_type::duration lo, clock_type::duration hi, clock_type::duration lead)
      : rng_(0x5eed'1234'abcdULL ^ n), dist_(lo.count(), hi.count()) {
    ctx_ = std::make_unique<asio::io_context>(cfg.hint);
    timers_.reserve(n);
    for (std::size_t i = 0; i < n; ++i)
      timers_.emplace_back(*ctx_);
    mark_.assign(n, 0);
    offsets_.reserve(n);
    for (std::size_t i = 0; i < n; ++i)
      offsets_.push_back(clock_type::duration(dist_(rng_)));

    const std::size_t heap0 = bench::heap_in_use();
    const auto t0 = clock_type::now();
    base_ = t0 + lead;
    for (std::size_t i = 0; i < n; ++i) {
      timers_[i].expires_at(base_ + offsets_[i]);
      timers_[i].async_wait(bench::make_handler(&counts_));
    }
    armed_at_ = clock_type::now();
    const std::size_t heap1 = bench::heap_in_use();
    heap_per_wait_ =
        (static_cast<double>(heap1) - static_cast<double>(heap0)) / static_cast<double>(n);
    setup_s_ = bench::seconds(armed_at_ - t0);
    arm_ns_estimate[impl_name<Timer>()] = setup_s_ * 1e9 / static_cast<double>(n);
  }

  world(const world&) = delete;
  world& operator=(const world&) = delete;

  // The ordinary order: the timers (cancelling what is pending), then the context. Shutting
  // the context down first would be much slower for wheel_timer (measured here: ~0.6 us per
  // pending wait at N = 1e6, against ~0.06 us for steady_timer).
  ~world() {
    timers_.clear();
    ctx_.reset();
  }

  std::size_t size() const { return timers_.size(); }
  Timer& timer(std::size_t i) { return timers_[i]; }
  bench::counts& count() { return counts_; }
  auto handler() { return bench::make_handler(&counts_); }
  asio::io_context& ctx() { return *ctx_; }
  double heap_per_wait() const { return heap_per_wait_; }
  // Wall time of arming the N initial waits.
  double setup_seconds() const { return setup_s_; }

  // Fraction of the initial deadlines that had already passed when arming ended.
  double late_fraction() const {
    std::size_t late = 0;
    for (const auto& off : offsets_)
      late += (base_ + off <= armed_at_) ? 1 : 0;
    return static_cast<double>(late) / static_cast<double>(offsets_.size());
  }

  // K distinct random timer indices.
  void pick(std::vector<std::uint32_t>& idx) {
    if (++generation_ == 0) {
      std::fill(mark_.begin(), mark_.end(), 0);
      generation_ = 1;
    }
    std::uniform_int_distribution<std::uint32_t> pick(0, static_cast<std::uint32_t>(size() - 1));
    for (auto& i : idx) {
      std::uint32_t j = 0;
      do
        j = pick(rng_);
      while (mark_[j] == generation_);
      mark_[j] = generation_;
      i = j;
    }
  }

  // Random durations in 1..60 s (plus --wtb_lead_s).
  void draw(std::vector<clock_type::duration>& d) {
    const auto extra = std::chrono::duration_cast<clock_type::duration>(
        std::chrono::duration<double>(cfg.extra_lead_s));
    std::uniform_int_distribution<clock_type::rep> dist(clock_type::duration(1s).count(),
                                                        clock_type::duration(60s).count());
    for (auto& x : d)
      x = clock_type::duration(dist(rng_)) + extra;
  }

  // Runs ready handlers; the context never runs out of work here (timers are pending).
  void poll() { ctx_->poll(); }

private:
  std::unique_ptr<asio::io_context> ctx_;
  std::vector<Timer> timers_;
  bench::counts counts_;
  std::mt19937_64 rng_;
  std::uniform_int_distribution<clock_type::rep> dist_;
  std::vector<clock_type::duration> offsets_;
  std::vector<std::uint32_t> mark_;
  std::uint32_t generation_ = 0;
  clock_type::time_point base_{};
  clock_type::time_point armed_at_{};
  double heap_per_wait_ = 0;
  double setup_s_ = 0;
};

// Pending worlds: deadlines 1..60 s after the end of arming. The lead assumes at most 1 us
// per timer (arming measures 0.05 .. 0.2 us here); a slower setup only shifts the window later.
// The benchmarks on a pending world last well under a second, so nothing can fire; for long
// profiling runs (--wtb_iters=...), --wtb_lead_s=S adds S seconds to every deadline.
template <typename Timer>
std::unique_ptr<world<Timer>> make_pending_world(std::size_t n) {
  const auto lead = std::chrono::duration_cast<clock_type::duration>(
      std::chrono::nanoseconds(static_cast<std::int64_t>(n) * 1000) +
      std::chrono::duration<double>(cfg.extra_lead_s));
  return std::make_unique<world<Timer>>(n, 1s, 60s, lead);
}

// A batch of K cancellations did not abort exactly K waits, or did not run K aborted handlers:
// most likely a timer fired (a run longer than the 1 s minimum deadline; see --wtb_lead_s).
void fail_batch(benchmark::State& state, const char* op, std::size_t k, std::size_t cancelled,
                std::uint64_t aborted) {
  char msg[200];
  std::snprintf(msg, sizeof msg,
                "%s: K = %zu, but %zu waits cancelled and %llu aborted handlers run", op, k,
                cancelled, static_cast<unsigned long long>(aborted));
  state.SkipWithError(msg);
}

void record(const char* op, const char* impl, std::int64_t n, double value) {
  results[op][n][impl] = value;
}

// Common tail of arm/cancel/reset: verify that no wait completed successfully (deadlines are
// >= 1 s away), then record per-op time.
// The figure recorded for the ratio table is the median over batches of ns per op (the mean
// is the Time column and the mean_ns/op counter).
template <typename Timer>
void finish_pending(benchmark::State& state, world<Timer>& w, const char* op,
                    std::vector<double>& per_op_ns) {
  w.poll();
  if (w.count().ok != 0) {
    state.SkipWithError("a timer fired during a pending-timer benchmark");
    return;
  }
  double sum = 0;
  for (const double x : per_op_ns)
    sum += x;
  const double mean = sum / static_cast<double>(per_op_ns.size());
  const double med = bench::median(per_op_ns);
  state.counters["ns/op"] = med;
  state.counters["mean_ns/op"] = mean;
  state.counters["K"] = static_cast<double>(std::min<std::size_t>(cfg.batch, w.size()));
  state.counters["setup_s"] = w.setup_seconds();
  record(op, impl_name<Timer>(), state.range(0), med);
}

// ---------------------------------------------------------------------------------------
// Benchmarks.

template <typename Timer>
void arm_each(world<Timer>& w, const std::vector<std::uint32_t>& idx,
              const std::vector<clock_type::duration>& dur) {
  for (std::size_t j = 0; j < idx.size(); ++j) {
    Timer& t = w.timer(idx[j]);
    t.expires_after(dur[j]);
    t.async_wait(w.handler());
  }
}

template <typename Timer>
void bm_arm(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  auto w = make_pending_world<Timer>(n);
  const std::size_t k = std::min(cfg.batch, n);
  std::vector<std::uint32_t> idx(k);
  std::vector<clock_type::duration> dur(k);
  std::vector<double> per_op_ns;
  per_op_ns.reserve(static_cast<std::size_t>(state.max_iterations));
  for (auto _ : state) {
    w->pick(idx);
    w->draw(dur);
    // Idle timers: each replaced by a new object on the same context (its wait aborted).
    // A cancelled wheel_timer would not do: its entry may stay in the wheel (lazy re-arm),
    // and arming it earlier would pay the unlink that cancel() left, which reset measures.
    const std::uint64_t aborted0 = w->count().aborted;
    for (const auto i : idx)
      w->timer(i) = Timer(w->ctx());
    w->poll();
    if (w->count().aborted - aborted0 != k) {
      fail_batch(state, "arm (untimed replacement)", k, k, w->count().aborted - aborted0);
      return;
    }

    const auto t0 = clock_type::now();
    arm_each(*w, idx, dur);
    const auto t1 = clock_type::now();

    state.SetIterationTime(bench::seconds(t1 - t0) / static_cast<double>(k));
    per_op_ns.push_back(bench::seconds(t1 - t0) * 1e9 / static_cast<double>(k));
  }
  finish_pending(state, *w, "arm", per_op_ns);
}

template <typename Timer>
void warm_objects(world<Timer>& w, const std::vector<std::uint32_t>& idx, bool warm) {
  if (warm)
    for (const auto i : idx)
      bench::warm_object(w.timer(i));
}

// The loop of cancel and reset. Per iteration: K random timers and durations, the timer
// objects read first if `warm`; then, timed, `timed(idx, dur)` (returning how many waits it
// aborted) and ctx.poll() running the K aborted handlers; then, untimed, `after(idx, dur)`.
template <typename Timer, typename Timed, typename After>
void abort_batches(benchmark::State& state, const char* op, bool warm, Timed timed, After after) {
  const auto n = static_cast<std::size_t>(state.range(0));
  auto w = make_pending_world<Timer>(n);
  const std::size_t k = std::min(cfg.batch, n);
  std::vector<std::uint32_t> idx(k);
  std::vector<clock_type::duration> dur(k);
  std::vector<double> per_op_ns;
  per_op_ns.reserve(static_cast<std::size_t>(state.max_iterations));
  for (auto _ : state) {
    w->pick(idx);
    w->draw(dur);
    const std::uint64_t aborted0 = w->count().aborted;
    warm_objects(*w, idx, warm);

    const auto t0 = clock_type::now();
    const std::size_t cancelled = timed(*w, idx, dur);
    w->poll();
    const auto t1 = clock_type::now();

    if (cancelled != k || w->count().aborted - aborted0 != k) {
      fail_batch(state, op, k, cancelled, w->count().aborted - aborted0);
      return;
    }
    after(*w, idx, dur);
    state.SetIterationTime(bench::seconds(t1 - t0) / static_cast<double>(k));
    per_op_ns.push_back(bench::seconds(t1 - t0) * 1e9 / static_cast<double>(k));
  }
  finish_pending(state, *w, op, per_op_ns);
}

template <typename Timer, bool Warm>
void bm_cancel(benchmark::State& state) {
  abort_batches<Timer>(
      state, Warm ? "cancel_warm" : "cancel", Warm,
      [](world<Timer>& w, const std::vector<std::uint32_t>& idx, const auto&) {
        std::size_t cancelled = 0;
        for (const auto i : idx)
          cancelled += w.timer(i).cancel();
        return cancelled;
      },
      arm_each<Timer>);
}

template <typename Timer, bool Warm>
void bm_reset(benchmark::State& state) {
  abort_batches<Timer>(
      state, Warm ? "reset_warm" : "reset", Warm,
      [](world<Timer>& w, const std::vector<std::uint32_t>& idx,
         const std::vector<clock_type::duration>& dur) {
        std::size_t cancelled = 0;
        for (std::size_t j = 0; j < idx.size(); ++j) {
          Timer& t = w.timer(idx[j]);
          cancelled += t.expires_after(dur[j]);
          t.async_wait(w.handler());
        }
        return cancelled;
      },
      [](world<Timer>&, const auto&, const auto&) {});
}

template <typename Timer>
void bm_fire(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  std::vector<double> cpu_per_handler_ns;
  double cpu_total = 0;
  double wall_total = 0;
  double late_total = 0;
  std::uint64_t handlers = 0;
  for (auto _ : state) {
    // Place the 200 ms .. 1 s window after the expected end of arming.
    double est_ns = 1000;
    if (auto it = arm_ns_estimate.find(impl_name<Timer>()); it != arm_ns_estimate.end())
      est_ns = it->second;
    const auto lead = std::chrono::duration_cast<clock_type::duration>(
        std::chrono::nanoseconds(
            static_cast<std::int64_t>(est_ns * 1.25 * static_cast<double>(n))) +
        10ms);
    world<Timer> w(n, 200ms, 1s, lead);

    const double c0 = bench::process_cpu_seconds();
    const auto t0 = clock_type::now();
    w.ctx().run();
    const auto t1 = clock_type::now();
    const double c1 = bench::process_cpu_seconds();

    if (w.count().ok != n || w.count().aborted != 0) {
      state.SkipWithError("fire: expected N successful completions");
      return;
    }
    state.SetIterationTime((c1 - c0) / static_cast<double>(n));
    cpu_per_handler_ns.push_back((c1 - c0) * 1e9 / static_cast<double>(n));
    cpu_total += c1 - c0;
    wall_total += bench::seconds(t1 - t0);
    late_total += w.late_fraction();
    handlers += n;
  }
  const double iters = static_cast<double>(state.iterations());
  // Median over rounds for the table (robust to a round disturbed by other load); the Time
  // column and mean_cpu_ns/handler are the mean.
  const double ns = bench::median(cpu_per_handler_ns);
  state.counters["mean_cpu_ns/handler"] = cpu_total * 1e9 / static_cast<double>(handlers);
  state.counters["cpu_ns/handler"] = ns;
  state.counters["run_wall_s"] = wall_total / iters;
  state.counters["late%"] = 100.0 * late_total / iters;
  record("fire", impl_name<Timer>(), state.range(0), ns);
}

template <typename Timer>
void bm_bytes(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  auto w = make_pending_world<Timer>(n);
  for (auto _ : state)
    benchmark::DoNotOptimize(w->size());
  w->poll();
  if (w->count().ok != 0 || w->count().aborted != 0) {
    state.SkipWithError("bytes: a wait completed");
    return;
  }
  const double total = static_cast<double>(sizeof(Timer)) + w->heap_per_wait();
  state.counters["sizeof"] = static_cast<double>(sizeof(Timer));
  state.counters["heap/wait"] = w->heap_per_wait();
  state.counters["B/timer"] = total;
  record("bytes", impl_name<Timer>(), state.range(0), total);
}

// ---------------------------------------------------------------------------------------
// Registration: per N and operation, steady then wheel, next to each other.

template <typename Timer>
void register_all(const char* op, std::int64_t n) {
  const std::string name = std::string(op) + "/" + impl_name<Timer>();
  benchmark::internal::Benchmark* b = nullptr;
  if (std::strcmp(op, "arm") == 0)
    b = benchmark::RegisterBenchmark(name.c_str(), bm_arm<Timer>);
  else if (std::strcmp(op, "cancel") == 0)
    b = benchmark::RegisterBenchmark(name.c_str(), bm_cancel<Timer, false>);
  else if (std::strcmp(op, "cancel_warm") == 0)
    b = benchmark::RegisterBenchmark(name.c_str(), bm_cancel<Timer, true>);
  else if (std::strcmp(op, "reset") == 0)
    b = benchmark::RegisterBenchmark(name.c_str(), bm_reset<Timer, false>);
  else if (std::strcmp(op, "reset_warm") == 0)
    b = benchmark::RegisterBenchmark(name.c_str(), bm_reset<Timer, true>);
  else if (std::strcmp(op, "fire") == 0)
    b = benchmark::RegisterBenchmark(name.c_str(), bm_fire<Timer>);
  else
    b = benchmark::RegisterBenchmark(name.c_str(), bm_bytes<Timer>);
  b->Arg(n)->Unit(benchmark::kNanosecond);
  if (std::strcmp(op, "bytes") == 0) {
    b->Iterations(1);
  } else if (std::strcmp(op, "fire") == 0) {
    b->UseManualTime()->Iterations(n > 1'000'000 ? std::min<std::int64_t>(2, cfg.fire_iterations)
                                                 : cfg.fire_iterations);
  } else {
    b->UseManualTime()->Iterations(cfg.iterations);
  }
}

// ---------------------------------------------------------------------------------------
// The ratio table.

void print_table(std::FILE* out) {
  static const char* const ops[] = {"arm",        "cancel", "cancel_warm", "reset",
                                    "reset_warm", "fire",   "bytes"};
  std::fprintf(out,
               "\nsteady_timer / wheel_timer (from this run; time ops: ns per op, fire: CPU ns "
               "per handler, bytes: B per pending timer)\n");
  std::fprintf(out, "goal: ratio >= 4 for time ops, >= 2 for bytes; wheel flat in N "
                    "(wheel(N) / wheel(smallest N))\n\n");
  std::fprintf(out, "%-11s %9s %12s %12s %9s %6s %8s\n", "op", "N", "steady", "wheel", "ratio",
               "goal", "flat");
  for (const char* op : ops) {
    const auto oit = results.find(op);
    if (oit == results.end())
      continue;
    double first_wheel = 0;
    for (const auto& [n, impls] : oit->second) {
      const auto s = impls.find("steady");
      const auto w = impls.find("wheel");
      const bool hs = s != impls.end();
      const bool hw = w != impls.end();
      if (hw && first_wheel == 0)
        first_wheel = w->second;
      char sbuf[32] = "-";
      char wbuf[32] = "-";
      char rbuf[32] = "-";
      char gbuf[16] = "-";
      char fbuf[32] = "-";
      if (hs)
        std::snprintf(sbuf, sizeof sbuf, "%.1f", s->second);
      if (hw) {
        std::snprintf(wbuf, sizeof wbuf, "%.1f", w->second);
        std::snprintf(fbuf, sizeof fbuf, "%.2f", w->second / first_wheel);
      }
      if (hs && hw && w->second > 0) {
        const double r = s->second / w->second;
        const double goal = std::strcmp(op, "bytes") == 0 ? 2.0 : 4.0;
        std::snprintf(rbuf, sizeof rbuf, "%.2fx", r);
        std::snprintf(gbuf, sizeof gbuf, "%s", r >= goal ? "ok" : "MISS");
      }
      std::fprintf(out, "%-11s %9lld %12s %12s %9s %6s %8s\n", op, static_cast<long long>(n), sbuf,
                   wbuf, rbuf, gbuf, fbuf);
    }
  }
  std::fprintf(out, "\n");
}

// Reports `arm/steady/1000000` rather than `arm/steady/1000000/iterations:200/manual_time`.
template <typename Base>
class short_names final : public Base {
public:
  using Base::Base;

  bool ReportContext(const benchmark::BenchmarkReporter::Context& context) override {
    benchmark::BenchmarkReporter::Context narrowed = context;
    // Longest short name, plus room for "/repeats:NN_median" when repetitions are asked for.
    narrowed.name_field_width = std::string("cancel_warm/steady/4000000").size() + 18;
    return Base::ReportContext(narrowed);
  }

  void ReportRuns(const std::vector<benchmark::BenchmarkReporter::Run>& runs) override {
    std::vector<benchmark::BenchmarkReporter::Run> renamed(runs);
    for (auto& run : renamed) {
      run.run_name.iterations.clear();
      run.run_name.time_type.clear();
    }
    Base::ReportRuns(renamed);
  }
};

} // namespace

int main(int argc, char** argv) {
  std::vector<char*> rest;
  rest.push_back(argv[0]);
  // Our own output goes to stderr when stdout carries JSON or CSV.
  std::FILE* info = stdout;
  std::string format = "console";
  for (int i = 1; i < argc; ++i) {
    std::string v;
    if (bench::parse_flag(argv[i], "--benchmark_format", v)) {
      format = v;
      if (v != "console")
        info = stderr;
    }
    if (bench::parse_flag(argv[i], "--wtb_batch", v)) {
      cfg.batch = static_cast<std::size_t>(std::stoull(v));
    } else if (bench::parse_flag(argv[i], "--wtb_iters", v)) {
      cfg.iterations = std::stoll(v);
    } else if (bench::parse_flag(argv[i], "--wtb_fire_iters", v)) {
      cfg.fire_iterations = std::stoll(v);
    } else if (bench::parse_flag(argv[i], "--wtb_lead_s", v)) {
      cfg.extra_lead_s = std::stod(v);
    } else if (bench::parse_flag(argv[i], "--wtb_hint", v)) {
      cfg.hint = std::stoi(v);
    } else if (bench::parse_flag(argv[i], "--wtb_sizes", v)) {
      cfg.sizes.clear();
      std::size_t pos = 0;
      while (pos < v.size()) {
        std::size_t next = v.find(',', pos);
        if (next == std::string::npos)
          next = v.size();
        cfg.sizes.push_back(static_cast<std::int64_t>(std::stod(v.substr(pos, next - pos))));
        pos = next + 1;
      }
    } else {
      rest.push_back(argv[i]);
    }
  }
  if (cfg.batch == 0 || cfg.iterations <= 0 || cfg.fire_iterations <= 0 || cfg.sizes.empty()) {
    std::fprintf(stderr, "wheel_timer_bench: invalid --wtb_* flag\n");
    return 1;
  }

  static const char* const ops[] = {"arm",        "cancel", "cancel_warm", "reset",
                                    "reset_warm", "fire",   "bytes"};
  for (const std::int64_t n : cfg.sizes) {
    for (const char* op : ops) {
      register_all<asio::steady_timer>(op, n);
      register_all<asio_wheel::wheel_timer>(op, n);
    }
  }

  int bargc = static_cast<int>(rest.size());
  benchmark::Initialize(&bargc, rest.data());
  if (benchmark::ReportUnrecognizedArguments(bargc, rest.data()))
    return 1;
  std::fprintf(info,
               "sizeof(asio::steady_timer) = %zu, sizeof(asio_wheel::wheel_timer) = %zu, "
               "batch K = %zu, concurrency hint = %d\n",
               sizeof(asio::steady_timer), sizeof(asio_wheel::wheel_timer), cfg.batch, cfg.hint);
  std::fflush(info);
  std::unique_ptr<benchmark::BenchmarkReporter> display;
  if (format == "console")
    display = std::make_unique<short_names<benchmark::ConsoleReporter>>(
        isatty(STDOUT_FILENO) ? benchmark::ConsoleReporter::OO_Color
                              : benchmark::ConsoleReporter::OO_None);
  else if (format == "json")
    display = std::make_unique<short_names<benchmark::JSONReporter>>();
  benchmark::RunSpecifiedBenchmarks(display.get()); // CSV: the library's own reporter
  benchmark::Shutdown();
  std::fflush(stdout);
  print_table(info);
  return 0;
}
