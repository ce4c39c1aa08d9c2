//
// precision_bench.cpp
// ~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// How late timers complete when nothing else is happening: --timers timers (default 1e4)
// due uniformly over --spread seconds (default 1), from 50 ms after arming, on one thread, an
// io_context(1), the default tick. Each implementation's lateness at handler entry against
// its due time must have p99 <= one tick + 1 ms, with no early completion and every timer
// fired.
//
//   steady      asio::steady_timer
//   wheel       asio_wheel::wheel_timer, then asio_wheel::idle_timer (timeout = the offset)
//               and asio_wheel::heartbeat (ping after the offset), both never touched: due
//               at construction + offset
//
// Not for heartbeat_group, whose thresholds are shared by its members: timers due uniformly
// over the spread would need a group each.
//
// Also measured: how far CLOCK_MONOTONIC_COARSE lags CLOCK_MONOTONIC right after short
// sleeps, the bound an activity stamp taken from the coarse clock would rely on.
//
//   --impl wheel|steady|both  both (default): steady_timer, then the three asio-wheel timers
//   --timers N                default 10000
//   --spread S                default 1
//   --seed S                  default 42
//   --smoke                   2,000 timers (later arguments still override)
//   --json FILE               results as JSON
//   --cdf FILE                lateness CDF data (gnuplot blocks, one per implementation)
//   --no-progress             nothing on stderr
//
// Exit status: 0 every check passed; 1 a check failed, results written; 2 bad arguments;
// 3 error.

#include "support/bench_support.hpp"

#include <asio_wheel/heartbeat.hpp>
#include <asio_wheel/idle_timer.hpp>
#include <asio_wheel/wheel_timer.hpp>

#include <asio/error.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;
using namespace std::chrono_literals;
namespace bench = asio_wheel::bench;

// ---------------------------------------------------------------------------------------
// Configuration.

// --seed, --json, --cdf and --no-progress, as heartbeat_scenario has them.
struct config : bench::report_options {
  std::string impl = "both";
  std::size_t timers = 10'000;
  double spread_s = 1;
};

config cfg;

void parse_args(int argc, char** argv) {
  bench::command_line args("precision_bench", argc, argv);
  while (args.next()) {
    if (args.is("--impl")) {
      cfg.impl = args.value();
      // A group's thresholds are shared by its members, so timers due uniformly over the
      // spread would need a group each.
      if (cfg.impl == "group")
        args.error("--impl group: no precision check for heartbeat_group, whose thresholds are "
                   "shared by its members; use wheel, steady or both");
      if (cfg.impl != "wheel" && cfg.impl != "steady" && cfg.impl != "both")
        args.error("--impl must be wheel, steady or both");
    } else if (args.is("--timers")) {
      cfg.timers = static_cast<std::size_t>(args.number());
    } else if (args.is("--spread")) {
      cfg.spread_s = args.number();
    } else if (args.is("--smoke")) {
      cfg.timers = 2'000;
    } else if (args.is("-h") || args.is("--help")) {
      std::printf("usage: precision_bench [--impl wheel|steady|both] [--timers N] [--spread S] "
                  "[--seed S]\n"
                  "         [--json FILE] [--cdf FILE] [--no-progress] [--smoke]\n");
      std::exit(0);
    } else if (!cfg.take(args)) {
      args.unknown();
    }
  }
  if (cfg.timers == 0)
    args.error("--timers must be positive");
}

// ---------------------------------------------------------------------------------------
// Precision: N timers due uniformly over `spread`, nothing else happening.

struct precision_result {
  bench::metrics m;
  std::vector<std::int64_t> lateness_ns;
};

template <typename Setup>
precision_result run_precision(const char* name, Setup setup) {
  asio::io_context ctx(1);
  bench::rng r{cfg.seed};
  std::vector<clock_type::duration> offsets(cfg.timers);
  const auto lead = bench::to_clock(50ms);
  for (auto& o : offsets)
    o = lead + bench::to_clock(std::chrono::duration<double>(static_cast<double>(r.next() >> 11) *
                                                             0x1.0p-53 * cfg.spread_s));
  precision_result res;
  res.lateness_ns.reserve(cfg.timers);
  const bench::usage u0 = bench::usage::now();
  auto keep = setup(ctx, offsets, res.lateness_ns);
  ctx.run();
  const bench::usage u1 = bench::usage::now();
  bench::summarize(res.m, "lateness", res.lateness_ns);
  res.m["timers"] = static_cast<double>(cfg.timers);
  res.m["wall_s"] = bench::wall_between(u0, u1);
  res.m["cpu_s"] = u1.cpu() - u0.cpu();
  res.m["tick_us"] =
      std::chrono::duration<double, std::micro>(asio_wheel::wheel_timer::tick(ctx)).count();
  (void)name;
  return res;
}

// Plain timers: asio::steady_timer or asio_wheel::wheel_timer.
template <typename Timer>
auto timer_setup() {
  return [](asio::io_context& ctx, const std::vector<clock_type::duration>& offsets,
            std::vector<std::int64_t>& out) {
    auto timers = std::make_shared<std::vector<Timer>>();
    timers->reserve(offsets.size());
    const auto base = clock_type::now();
    for (std::size_t i = 0; i < offsets.size(); ++i) {
      Timer& t = timers->emplace_back(ctx, base + offsets[i]);
      t.async_wait([&out, &t](const asio::error_code& ec) {
        if (!ec)
          out.push_back((clock_type::now() - t.expiry()).count());
      });
    }
    return timers;
  };
}

// idle_timer with timeout = offset, never touched: due at construction + offset.
auto idle_setup() {
  return [](asio::io_context& ctx, const std::vector<clock_type::duration>& offsets,
            std::vector<std::int64_t>& out) {
    struct item {
      clock_type::time_point due;
      std::unique_ptr<asio_wheel::idle_timer> t;
    };
    auto items = std::make_shared<std::vector<item>>(offsets.size());
    for (std::size_t i = 0; i < offsets.size(); ++i) {
      item& it = (*items)[i];
      it.due = clock_type::now() + offsets[i];
      it.t = std::make_unique<asio_wheel::idle_timer>(ctx, offsets[i]);
      it.t->async_wait([&out, &it](const asio::error_code& ec) {
        if (!ec)
          out.push_back((clock_type::now() - it.due).count());
      });
    }
    return items;
  };
}

// heartbeat with ping_after = offset, never touched: pings at construction + offset.
auto heartbeat_setup() {
  return [](asio::io_context& ctx, const std::vector<clock_type::duration>& offsets,
            std::vector<std::int64_t>& out) {
    struct item {
      clock_type::time_point due;
      std::unique_ptr<asio_wheel::heartbeat> hb;
    };
    auto items = std::make_shared<std::vector<item>>(offsets.size());
    for (std::size_t i = 0; i < offsets.size(); ++i) {
      item& it = (*items)[i];
      it.due = clock_type::now() + offsets[i];
      it.hb = std::make_unique<asio_wheel::heartbeat>(
          ctx, asio_wheel::heartbeat::options{offsets[i], bench::to_clock(1h)});
      it.hb->async_next([&out, &it](const asio::error_code& ec, asio_wheel::heartbeat::event) {
        if (!ec)
          out.push_back((clock_type::now() - it.due).count());
      });
    }
    return items;
  };
}

// How far CLOCK_MONOTONIC_COARSE lags CLOCK_MONOTONIC (steady_clock), sampled right after
// short sleeps (like a touch() right after the event loop wakes) and back to back: the
// bound asio-wheel's activity marks rely on. Empty where there is no coarse clock.
bench::metrics coarse_clock_lag() {
  bench::metrics m;
#if defined(__linux__) && defined(CLOCK_MONOTONIC_COARSE)
  timespec res{};
  if (clock_getres(CLOCK_MONOTONIC_COARSE, &res) != 0)
    return m;
  auto ns_of = [](clockid_t id) {
    timespec ts{};
    clock_gettime(id, &ts);
    return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
  };
  std::vector<std::int64_t> lag;
  bench::rng r{cfg.seed};
  for (int i = 0; i < 200; ++i) {
    const timespec nap{0, static_cast<long>(r.below(2'000'000))};
    nanosleep(&nap, nullptr);
    for (int j = 0; j < 50; ++j) {
      const std::int64_t mono = ns_of(CLOCK_MONOTONIC);
      lag.push_back(mono - ns_of(CLOCK_MONOTONIC_COARSE));
    }
  }
  std::sort(lag.begin(), lag.end());
  m["resolution_us"] =
      static_cast<double>(res.tv_sec) * 1e6 + static_cast<double>(res.tv_nsec) / 1e3;
  m["lag_p50_us"] = bench::percentile(lag, 50) / 1e3;
  m["lag_p99_us"] = bench::percentile(lag, 99) / 1e3;
  m["lag_max_us"] = static_cast<double>(lag.back()) / 1e3;
  m["samples"] = static_cast<double>(lag.size());
#endif
  return m;
}

// ---------------------------------------------------------------------------------------
// Output.

void json_config(std::FILE* f) {
  std::fprintf(f, "  \"config\": {\"timers\": %zu, \"spread_s\": %g, \"seed\": %" PRIu64 ", ",
               cfg.timers, cfg.spread_s, cfg.seed);
  bench::json_build(f);
  std::fprintf(f, "}");
}

int precision_main() {
  struct entry {
    std::string name;
    std::string impl;
    precision_result res;
  };
  std::vector<entry> results;
  const bool wheel = cfg.impl != "steady";
  const bool steady = cfg.impl != "wheel";
  bench::progress_line progress(cfg.progress);
  auto run = [&](const char* name, const char* impl, auto setup) {
    progress.update(true, "precision: %s, %zu timers over %g s", name, cfg.timers, cfg.spread_s);
    results.push_back({name, impl, run_precision(name, setup)});
  };
  if (steady)
    run("asio::steady_timer", "steady", timer_setup<asio::steady_timer>());
  if (wheel) {
    run("asio_wheel::wheel_timer", "wheel", timer_setup<asio_wheel::wheel_timer>());
    run("asio_wheel::idle_timer", "idle_timer", idle_setup());
    run("asio_wheel::heartbeat (ping)", "heartbeat", heartbeat_setup());
  }
  progress.done();

  bool pass = true;
  std::printf("\nprecision: %s timers due uniformly over %g s, one thread, default tick\n\n",
              bench::grouped(static_cast<double>(cfg.timers)).c_str(), cfg.spread_s);
  std::printf("  %-30s %8s %10s %10s %10s %10s %6s  %s\n", "", "fired", "min", "p50", "p99", "max",
              "early", "check (p99 <= tick + 1 ms, 0 early)");
  for (auto& e : results) {
    const bench::metrics& m = e.res.m;
    // The same bound for every implementation: the wheel's default tick + 1 ms.
    const double limit_us = m.at("tick_us") + 1000;
    const bool ok = m.at("lateness_early") == 0 && m.at("lateness_p99_us") <= limit_us &&
                    m.at("lateness_n") == static_cast<double>(cfg.timers);
    e.res.m["limit_us"] = limit_us;
    e.res.m["pass"] = ok ? 1 : 0;
    pass = pass && ok;
    std::printf(
        "  %-30s %8s %10s %10s %10s %10s %6s  %s (limit %s)\n", e.name.c_str(),
        bench::grouped(m.at("lateness_n")).c_str(), bench::ms(m.at("lateness_min_us")).c_str(),
        bench::ms(m.at("lateness_p50_us")).c_str(), bench::ms(m.at("lateness_p99_us")).c_str(),
        bench::ms(m.at("lateness_max_us")).c_str(), bench::grouped(m.at("lateness_early")).c_str(),
        ok ? "PASS" : "FAIL", bench::ms(limit_us).c_str());
  }
  std::printf("\nprecision check: %s\n", pass ? "PASS" : "FAIL");
  const bench::metrics coarse = coarse_clock_lag();
  if (!coarse.empty())
    std::printf(
        "\nCLOCK_MONOTONIC_COARSE (asio-wheel's activity marks): resolution %s; behind "
        "CLOCK_MONOTONIC by %s (p50), %s (p99), %s (max)\n",
        bench::ms(coarse.at("resolution_us")).c_str(), bench::ms(coarse.at("lag_p50_us")).c_str(),
        bench::ms(coarse.at("lag_p99_us")).c_str(), bench::ms(coarse.at("lag_max_us")).c_str());

  if (!cfg.cdf.empty()) {
    std::vector<std::pair<std::string, std::vector<std::int64_t>>> sets;
    for (const auto& e : results)
      sets.emplace_back(e.impl, e.res.lateness_ns);
    bench::write_cdf(cfg.cdf, sets);
  }
  if (!cfg.json.empty()) {
    std::FILE* f = std::fopen(cfg.json.c_str(), "w");
    if (f == nullptr)
      throw std::runtime_error("cannot write " + cfg.json);
    std::fprintf(f, "{\n  \"mode\": \"precision\",\n  \"pass\": %s,\n", pass ? "true" : "false");
    json_config(f);
    std::fprintf(f, ",\n  \"results\": {");
    bool first = true;
    for (const auto& e : results) {
      std::fprintf(f, "%s\n    \"%s\": ", first ? "" : ",", e.impl.c_str());
      bench::metrics m = e.res.m;
      bench::json_metrics(f, m, "    ");
      first = false;
    }
    std::fprintf(f, "\n  }");
    if (!coarse.empty()) {
      std::fprintf(f, ",\n  \"coarse_clock\": ");
      bench::json_metrics(f, coarse, "  ");
    }
    std::fprintf(f, "\n}\n");
    std::fclose(f);
  }
  return pass ? 0 : 1;
}

} // namespace

int main(int argc, char** argv) {
  return bench::run_main("precision_bench", [&] {
    parse_args(argc, argv);
    return precision_main();
  });
}
