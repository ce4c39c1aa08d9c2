//
// tail_latency_bench.cpp
// ~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// Tail latency with many timers (issue #36): N timers armed at once, then run() on one
// thread (io_context(1), the default 1 ms tick), expiries uniform over a window:
//
//   spread   [5 s, 13 s] after arming began (1e6 timers: 125 per ms), across several
//            level-2 slots of the wheel (4.096 s each at 1 ms)
//   burst    [5 s, 6 s] (1e6 timers: 1,000 per ms)
//
// Each timer's lateness is taken in its handler as steady_clock::now() - expiry(); the
// event loop's worst stall by a probe, an asio::steady_timer re-armed 1 ms after each of
// its completions, whose own lateness is how long the loop was held (by a wheel turn, a
// batch of handlers, Asio's timer queue). Reported per implementation, shape and N: lateness
// p50, p99, p99.9 and max, the probe's p99 and max, and the time to arm; medians of the
// repetitions. asio::steady_timer and asio_wheel::wheel_timer run alternately, each in a new
// io_context.
//
//   --impl wheel|steady|both  both (default)
//   --n LIST                  comma-separated timer counts (default 1e4,1e5,1e6,4e6)
//   --shape spread|burst|both both (default)
//   --repeat R                repetitions, medians reported (default 3)
//   --quick                   --n 1e4,1e5,1e6 --repeat 1 (a 4e6 run needs about 1.5 GB
//                             and two minutes)
//   --trace FILE              lateness against due time, for the plot: per 5 ms of due
//                             time the worst lateness, one gnuplot block per run of the
//                             largest N (first repetition)
//   --busy                    a handler that reposts itself keeps the loop from sleeping
//                             (as a busy server's I/O does), so that the machine's late
//                             wake-ups (the baseline line above the table) count for
//                             neither timer
//   --core                    instead, the wheel alone (detail::timing_wheel, no Asio): the
//                             same N and shapes, advanced tick by tick as the driver does
//                             (its budgets: 4096 expiries, 512 moves per turn; staging
//                             turns the wheel asks for at once run between ticks), each
//                             turn's thread CPU time measured: the worst turn, and the
//                             worst tick (from its first turn until its expiries are
//                             done). Other load on the machine does not count in it.
//                             --trace: per tick of the largest N,
//                             that CPU time (blocks: spread, burst).
//   --json FILE               results as JSON
//   --no-progress             nothing on stderr
//
// Output: a Markdown table on stdout. Exit status: 0 done (an early completion is counted
// in the table's "early" column, never hidden); 2 bad arguments; 3 error.

#include "support/bench_support.hpp"

#include <asio_wheel/detail/timing_wheel.hpp>
#include <asio_wheel/detail/wheel_driver.hpp>
#include <asio_wheel/wheel_timer.hpp>

#include <asio/error.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <deque>
#include <fstream>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;
using namespace std::chrono_literals;
namespace bench = asio_wheel::bench;

struct config : bench::report_options {
  std::string impl = "both";
  std::vector<std::size_t> sizes{10'000, 100'000, 1'000'000, 4'000'000};
  std::string shape = "both";
  int repeat = 3;
  std::string trace;
  bool core = false;
  bool busy = false;
};

config cfg;

std::vector<std::size_t> parse_sizes(bench::command_line& args) {
  std::vector<std::size_t> out;
  std::string list = args.value();
  std::size_t pos = 0;
  while (pos <= list.size()) {
    const std::size_t comma = std::min(list.find(',', pos), list.size());
    const std::string item = list.substr(pos, comma - pos);
    char* end = nullptr;
    const double v = std::strtod(item.c_str(), &end);
    if (item.empty() || *end != '\0' || !(v >= 1))
      args.error("bad value for --n: '" + item + "'");
    out.push_back(static_cast<std::size_t>(v));
    pos = comma + 1;
  }
  return out;
}

void parse_args(int argc, char** argv) {
  bench::command_line args("tail_latency_bench", argc, argv);
  while (args.next()) {
    if (cfg.take(args))
      continue;
    if (args.is("--impl"))
      cfg.impl = args.value();
    else if (args.is("--n"))
      cfg.sizes = parse_sizes(args);
    else if (args.is("--shape"))
      cfg.shape = args.value();
    else if (args.is("--repeat"))
      cfg.repeat = std::max(1, static_cast<int>(args.number()));
    else if (args.is("--quick")) {
      cfg.sizes = {10'000, 100'000, 1'000'000};
      cfg.repeat = 1;
    } else if (args.is("--core"))
      cfg.core = true;
    else if (args.is("--trace"))
      cfg.trace = args.value();
    else if (args.is("--busy"))
      cfg.busy = true;
    else
      args.unknown();
  }
  if (cfg.impl != "wheel" && cfg.impl != "steady" && cfg.impl != "both")
    args.error("--impl must be wheel, steady or both");
  if (cfg.shape != "spread" && cfg.shape != "burst" && cfg.shape != "both")
    args.error("--shape must be spread, burst or both");
}

struct shape {
  const char* name;
  clock_type::duration from, to;
};

constexpr shape spread{"spread", 5s, 13s};
constexpr shape burst{"burst", 5s, 6s};

struct result {
  double arm_s = 0;
  double p50_ms = 0, p99_ms = 0, p999_ms = 0, max_ms = 0;
  double probe_p99_ms = 0, probe_max_ms = 0;
  std::size_t early = 0, fired = 0;
};

double ms_of(double ns) {
  return ns / 1e6;
}

// The machine's load while the figures were taken: they are only as quiet as it is.
std::string loadavg() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

// One run: arms n timers of type Timer, runs the loop until all fired, with the probe.
template <typename Timer>
result run_once(std::size_t n, const shape& sh, std::uint64_t seed, std::FILE* trace,
                const char* label) {
  asio::io_context io(1);
  std::deque<Timer> timers;
  std::vector<std::int64_t> late(n, 0);
  std::vector<std::int64_t> due_ns(trace != nullptr ? n : 0, 0);
  std::mt19937_64 rng(seed);
  const auto width = (sh.to - sh.from).count();
  std::size_t fired = 0;

  const clock_type::time_point t0 = clock_type::now();
  for (std::size_t i = 0; i < n; ++i) {
    Timer& t = timers.emplace_back(io);
    const auto offset = sh.from + clock_type::duration(static_cast<clock_type::rep>(
                                      rng() % static_cast<std::uint64_t>(width)));
    t.expires_at(t0 + offset);
    if (trace != nullptr)
      due_ns[i] = std::chrono::duration_cast<std::chrono::nanoseconds>(offset).count();
    t.async_wait([&late, &fired, &t, i](const asio::error_code& ec) {
      late[i] = std::chrono::duration_cast<std::chrono::nanoseconds>(clock_type::now() - t.expiry())
                    .count();
      fired += ec ? 0 : 1;
    });
  }
  result r;
  r.arm_s = bench::seconds(clock_type::now() - t0);

  // The probe: an Asio timer, 1 ms after each completion, until the last timer fired.
  asio::steady_timer probe(io);
  std::vector<std::int64_t> stalls;
  stalls.reserve(20'000);
  std::function<void()> arm_probe = [&] {
    probe.expires_after(1ms);
    probe.async_wait([&](const asio::error_code&) {
      stalls.push_back(
          std::chrono::duration_cast<std::chrono::nanoseconds>(clock_type::now() - probe.expiry())
              .count());
      if (fired < n)
        arm_probe();
    });
  };
  arm_probe();
  if (cfg.busy)
    bench::keep_busy_while(io, [&] { return fired < n; });
  io.run();

  r.fired = fired;
  if (trace != nullptr) {
    // Worst lateness per 5 ms of due time.
    const std::int64_t bucket = 5'000'000;
    const auto buckets = static_cast<std::size_t>(sh.to.count() / bucket + 1);
    std::vector<std::int64_t> worst(buckets, -1);
    for (std::size_t i = 0; i < n; ++i) {
      const auto b = static_cast<std::size_t>(due_ns[i] / bucket);
      worst[b] = std::max(worst[b], late[i]);
    }
    std::fprintf(trace, "# %s %s n=%zu: due (s), worst lateness in 5 ms of due time (ms)\n", label,
                 sh.name, n);
    for (std::size_t b = 0; b < buckets; ++b)
      if (worst[b] >= 0)
        std::fprintf(trace, "%.4f %.4f\n", static_cast<double>(b) * 5e-3,
                     ms_of(static_cast<double>(worst[b])));
    std::fprintf(trace, "\n\n");
  }
  std::sort(late.begin(), late.end());
  for (std::int64_t l : late)
    r.early += l < 0 ? 1 : 0;
  r.p50_ms = ms_of(bench::percentile(late, 50));
  r.p99_ms = ms_of(bench::percentile(late, 99));
  r.p999_ms = ms_of(bench::percentile(late, 99.9));
  r.max_ms = ms_of(static_cast<double>(late.back()));
  std::sort(stalls.begin(), stalls.end());
  r.probe_p99_ms = ms_of(bench::percentile(stalls, 99));
  r.probe_max_ms = stalls.empty() ? 0 : ms_of(static_cast<double>(stalls.back()));
  return r;
}

double thread_cpu_us() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

// --core: the wheel alone, as its driver runs it (see the header).
void run_core(std::size_t n, const shape& sh, std::uint64_t seed, std::FILE* trace) {
  using asio_wheel::detail::tick_type;
  using asio_wheel::detail::wheel_node;
  using driver = asio_wheel::detail::wheel_driver<clock_type>;
  // A tick of 1 ms since boot, as steady_clock gives on Linux: the digits matter.
  const tick_type start = 2'601'234;
  const auto ms = [](clock_type::duration d) {
    return static_cast<tick_type>(std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
  };
  asio_wheel::detail::timing_wheel w(start);
  w.set_cascade_limit(driver::cascade_budget);
  std::vector<wheel_node> nodes(n);
  std::mt19937_64 rng(seed);
  const tick_type from = ms(sh.from), width = ms(sh.to) - ms(sh.from);
  for (wheel_node& x : nodes)
    w.insert(x, start + from + rng() % width);
  std::vector<double> turns, ticks;
  std::size_t expired = 0;
  const auto turn = [&](tick_type t) {
    const double a = thread_cpu_us();
    const bool done = w.advance(t, driver::expiry_budget, [&](wheel_node&) { ++expired; });
    turns.push_back(thread_cpu_us() - a);
    return done;
  };
  if (trace != nullptr)
    std::fprintf(trace, "# core %s n=%zu: due (s), CPU time of the tick's turns (ms)\n", sh.name,
                 n);
  for (tick_type t = start + 1; !w.empty(); ++t) {
    const double a = thread_cpu_us();
    while (!turn(t)) {
    }
    ticks.push_back(thread_cpu_us() - a);
    if (trace != nullptr)
      std::fprintf(trace, "%.3f %.4f\n", static_cast<double>(t - start) * 1e-3, ticks.back() / 1e3);
    while (!w.empty() && w.next_expiry() == w.now())
      turn(t);
  }
  if (trace != nullptr)
    std::fprintf(trace, "\n\n");
  std::sort(turns.begin(), turns.end());
  std::sort(ticks.begin(), ticks.end());
  const auto at = [](const std::vector<double>& v, double q) {
    return v[std::min(v.size() - 1, static_cast<std::size_t>(q * static_cast<double>(v.size())))];
  };
  std::printf("| %s | %zu | %zu | %.0f | %.0f | %.0f | %.0f | %.0f |\n", sh.name, n, turns.size(),
              at(turns, 0.99), at(turns, 0.999), turns.back(), at(ticks, 0.99), ticks.back());
  std::fflush(stdout);
  if (expired != n)
    throw std::runtime_error("core: " + std::to_string(expired) + " of " + std::to_string(n) +
                             " expired");
}

result median_of(const std::vector<result>& rs) {
  auto med = [&](auto field) {
    std::vector<double> v;
    for (const result& r : rs)
      v.push_back(r.*field);
    return bench::median(v);
  };
  result m;
  m.arm_s = med(&result::arm_s);
  m.p50_ms = med(&result::p50_ms);
  m.p99_ms = med(&result::p99_ms);
  m.p999_ms = med(&result::p999_ms);
  m.max_ms = med(&result::max_ms);
  m.probe_p99_ms = med(&result::probe_p99_ms);
  m.probe_max_ms = med(&result::probe_max_ms);
  for (const result& r : rs) {
    m.early += r.early;
    m.fired = std::max(m.fired, r.fired);
  }
  return m;
}

} // namespace

int main(int argc, char** argv) {
  return bench::run_main("tail_latency_bench", [&] {
    parse_args(argc, argv);
    std::vector<shape> shapes;
    if (cfg.shape != "burst")
      shapes.push_back(spread);
    if (cfg.shape != "spread")
      shapes.push_back(burst);
    std::vector<const char*> impls;
    if (cfg.impl != "wheel")
      impls.push_back("steady");
    if (cfg.impl != "steady")
      impls.push_back("wheel");
    if (cfg.core) {
      std::printf("| shape | N | turns | turn CPU p99 (us) | p99.9 (us) | max (us) | tick CPU "
                  "p99 (us) | max (us) |\n|---|---:|---:|---:|---:|---:|---:|---:|\n");
      const std::size_t most = *std::max_element(cfg.sizes.begin(), cfg.sizes.end());
      std::FILE* trace = cfg.trace.empty() ? nullptr : std::fopen(cfg.trace.c_str(), "w");
      for (const shape& sh : shapes)
        for (const std::size_t n : cfg.sizes)
          run_core(n, sh, cfg.seed, n == most ? trace : nullptr);
      if (trace != nullptr)
        std::fclose(trace);
      return 0;
    }
    const std::size_t largest = *std::max_element(cfg.sizes.begin(), cfg.sizes.end());
    std::FILE* trace = cfg.trace.empty() ? nullptr : std::fopen(cfg.trace.c_str(), "w");
    std::FILE* json = cfg.json.empty() ? nullptr : std::fopen(cfg.json.c_str(), "w");
    if (json != nullptr)
      std::fprintf(json, "{\n  \"runs\": [\n");
    bool first_json = true;

    std::printf("Machine: %s; load %s. Loop %s.\n\n", bench::wakeup_baseline().c_str(),
                loadavg().c_str(),
                cfg.busy ? "kept busy (--busy): it never sleeps" : "sleeps between expiries");
    std::printf("| shape | N | impl | arm (s) | p50 (ms) | p99 (ms) | p99.9 (ms) | max (ms) | "
                "probe p99 (ms) | probe max (ms) | early |\n");
    std::printf("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    std::fflush(stdout);
    for (const shape& sh : shapes) {
      for (const std::size_t n : cfg.sizes) {
        std::vector<std::vector<result>> runs(impls.size());
        for (int rep = 0; rep < cfg.repeat; ++rep) {
          for (std::size_t k = 0; k < impls.size(); ++k) {
            if (cfg.progress)
              std::fprintf(stderr, "%s n=%zu %s rep %d\n", sh.name, n, impls[k], rep + 1);
            std::FILE* t = rep == 0 && n == largest ? trace : nullptr;
            const std::uint64_t seed = cfg.seed + static_cast<std::uint64_t>(rep);
            runs[k].push_back(std::string(impls[k]) == "steady"
                                  ? run_once<asio::steady_timer>(n, sh, seed, t, impls[k])
                                  : run_once<asio_wheel::wheel_timer>(n, sh, seed, t, impls[k]));
          }
        }
        for (std::size_t k = 0; k < impls.size(); ++k) {
          const result m = median_of(runs[k]);
          std::printf("| %s | %zu | %s | %.2f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %zu |\n",
                      sh.name, n, impls[k], m.arm_s, m.p50_ms, m.p99_ms, m.p999_ms, m.max_ms,
                      m.probe_p99_ms, m.probe_max_ms, m.early);
          std::fflush(stdout);
          if (json != nullptr) {
            std::fprintf(json,
                         "%s    {\"shape\": \"%s\", \"n\": %zu, \"impl\": \"%s\", \"repeat\": %d, "
                         "\"arm_s\": %.4f, \"p50_ms\": %.4f, \"p99_ms\": %.4f, \"p999_ms\": "
                         "%.4f, \"max_ms\": %.4f, \"probe_p99_ms\": %.4f, \"probe_max_ms\": "
                         "%.4f, \"early\": %zu, \"fired\": %zu}",
                         first_json ? "" : ",\n", sh.name, n, impls[k], cfg.repeat, m.arm_s,
                         m.p50_ms, m.p99_ms, m.p999_ms, m.max_ms, m.probe_p99_ms, m.probe_max_ms,
                         m.early, m.fired);
            first_json = false;
          }
        }
      }
    }
    if (json != nullptr) {
      std::fprintf(json, "\n  ],\n  \"loadavg\": \"%s\"\n}\n", loadavg().c_str());
      std::fclose(json);
    }
    if (trace != nullptr)
      std::fclose(trace);
    return 0;
  });
}
