//
// heartbeat_scenario.cpp
// ~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// A server's keep-alive timers, the asio::steady_timer way against the two asio-wheel ways.
//
// N connections (default 1e6), each with a heartbeat: ping the peer after --ping seconds of
// silence (default 10), drop it after --idle seconds of silence (default 30). The connections
// arrive at an even rate over the first --ramp seconds of the run (default 4; 0: all opened
// before it, a mass reconnect). Every round (--round-ms, default 10 ms) each open connection
// hears from its peer with probability --touch-fraction (default 0.5%: 500,000 reads per
// second at 1e6, a read every 2 s per connection on average). A fraction of the connections
// (--silent-fraction, default 1%) falls silent at a random round early enough for its ping
// to come due inside the run. The run lasts --seconds (default 14): long enough for every
// heartbeat's first lazy re-arm (one ping interval after its opening) to happen inside it.
//
//   steady  each connection owns one asio::steady_timer. Activity: expires_after(ping) +
//           async_wait, which aborts the pending wait (one operation_aborted handler per
//           read). On expiry: ping, then expires_at(last + idle) for the drop.
//   wheel   each connection owns one asio_wheel::heartbeat {ping, idle}. Activity: touch()
//           (one store; the wheel re-arms lazily). async_next() reports ping and drop.
//   group   one asio_wheel::heartbeat_group {ping, idle} for the server, and each connection
//           derives from its member hook (no wait, no heap per connection); the group is
//           watching it from its opening. Activity: touch() (one store; the group files the
//           member again lazily, once per threshold). The group's event handler reports ping
//           and drop, with one wheel timer wait for all; a dropped member is unwatched.
//
// All three run on one thread, on an io_context(1), with the same traffic: rounds are paced
// by one asio::steady_timer at absolute times, and the connections touched in round r are a
// function of (seed, r) only. Each reads steady_clock::now() once per read to note the true
// time of the activity; a ping is due at that time + ping, a drop at that time + idle.
//
// Phases: setup (only with --ramp 0: open N connections), run (--seconds), quiet (--quiet s,
// default 2: every connection's timer is moved to 1 hour -- for the group, its members move
// to a second group that pings after 1 hour -- and the process's voluntary context switches
// are counted while nothing is due: the idle wakeups), teardown.
//
// Measured per implementation: wall and CPU time (user+sys, getrusage) of setup and run,
// memory (the RSS at the end of the run, every connection open: "memory per connection,
// run"; max RSS, reached in the quiet phase, which re-creates each timer while its old
// wait's abort is queued: "peak"), handler counts (aborted, pings, drops, stale), lateness
// of every ping and drop at handler entry against its due time (p50/p99/max; early
// completions, which must be 0), round lag (how late the traffic rounds start: does the loop
// keep up?), idle wakeups per second in the quiet phase.
//
//   --impl wheel|steady|group|both
//                             both (default): all three, each in a child process of its own
//                             (so max RSS is per implementation), alternating, --repeat K
//                             times (ABCCBA order), medians and steady/wheel, steady/group
//                             ratios
//   --smoke                   a few seconds: 1e5 connections, ping 2 s, drop 3 s, 4 s run
//   --slice N                 a round's openings and reads run in handlers of at most N
//                             (default 128), each posting the next, as a server's accepts and
//                             reads are completions of their own between which the loop runs
//                             its timers (Asio's epoll reactor takes at most 128 ready
//                             descriptors a pass); 0: the whole round in one handler, which delays
//                             every timer due meanwhile by the round's length (at 1e6, 5,000
//                             reads and 2,500 openings a round: milliseconds), so that the
//                             lateness measured is the traffic generator's as much as the
//                             timer's
//   --busy                    in the run, a handler that reposts itself keeps the loop from
//                             sleeping (as a server's I/O does), so that the machine's late
//                             wake-ups (measured, the line above the table) count for none
//   --json FILE               results as JSON
//   --cdf FILE                lateness CDF data (gnuplot blocks, one per implementation)
//
// The precision check (timers due uniformly over a second, nothing else running) is a
// program of its own: precision_bench.cpp.
//
// Progress goes to stderr: one \r-updated line on a terminal, plain lines otherwise.
// Exit status: 0 all good; 1 a check failed (early completions), results written; 2 bad
// arguments; 3 error.

#include "support/bench_support.hpp"

#include <asio_wheel/heartbeat.hpp>
#include <asio_wheel/heartbeat_group.hpp>

#include <asio/error.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <new>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

extern char** environ;

namespace {

using clock_type = std::chrono::steady_clock;
using namespace std::chrono_literals;
namespace bench = asio_wheel::bench;

// ---------------------------------------------------------------------------------------
// Configuration.

// --seed, --json, --cdf and --no-progress, as precision_bench has them.
struct config : bench::report_options {
  std::string impl = "both";
  std::size_t connections = 1'000'000;
  double idle_s = 30;
  double ping_s = 10;
  double seconds = 14;
  double ramp_s = 4;
  double round_ms = 10;
  double touch_fraction = 0.005;
  double silent_fraction = 0.01;
  double quiet_s = 2;
  unsigned repeat = 1;
  std::size_t slice = 128;
  bool busy = false;
  std::string child_out; // internal: a child writes its results here
};

config cfg;

void parse_args(int argc, char** argv) {
  bench::command_line args("heartbeat_scenario", argc, argv);
  while (args.next()) {
    if (args.is("--impl")) {
      cfg.impl = args.value();
      if (cfg.impl != "wheel" && cfg.impl != "steady" && cfg.impl != "group" && cfg.impl != "both")
        args.error("--impl must be wheel, steady, group or both");
    } else if (args.is("--connections")) {
      cfg.connections = static_cast<std::size_t>(args.number());
    } else if (args.is("--idle")) {
      cfg.idle_s = args.number();
    } else if (args.is("--ping")) {
      cfg.ping_s = args.number();
    } else if (args.is("--seconds")) {
      cfg.seconds = args.number();
    } else if (args.is("--ramp")) {
      cfg.ramp_s = args.number();
    } else if (args.is("--round-ms")) {
      cfg.round_ms = args.number();
    } else if (args.is("--touch-fraction")) {
      cfg.touch_fraction = args.number();
    } else if (args.is("--silent-fraction")) {
      cfg.silent_fraction = args.number();
    } else if (args.is("--quiet")) {
      cfg.quiet_s = args.number();
    } else if (args.is("--repeat")) {
      cfg.repeat = static_cast<unsigned>(args.number());
    } else if (args.is("--precision")) {
      args.error("the precision check is the program precision_bench");
    } else if (args.is("--smoke")) {
      // A few seconds, as the examples' --smoke: later arguments still override.
      cfg.connections = 100'000;
      cfg.ping_s = 2;
      cfg.idle_s = 3;
      cfg.seconds = 4;
      cfg.ramp_s = 1;
      cfg.quiet_s = 1;
    } else if (args.is("--slice")) {
      const double v = args.number();
      if (v < 0 || v != static_cast<double>(static_cast<std::size_t>(v)))
        args.error("--slice must be a whole number >= 0 (0: a round in one handler)");
      cfg.slice = static_cast<std::size_t>(v);
    } else if (args.is("--busy")) {
      cfg.busy = true;
    } else if (args.is("--child-out")) {
      cfg.child_out = args.value();
    } else if (args.is("-h") || args.is("--help")) {
      std::printf("usage: heartbeat_scenario [--impl wheel|steady|group|both] [--connections N] "
                  "[--idle S] [--ping S]\n"
                  "         [--seconds S] [--ramp S] [--round-ms MS] [--touch-fraction F] "
                  "[--silent-fraction F] [--quiet S]\n"
                  "         [--repeat K] [--seed S] [--json FILE] [--cdf FILE] [--no-progress] "
                  "[--smoke] [--slice N] [--busy]\n");
      std::exit(0);
    } else if (!cfg.take(args)) {
      args.unknown();
    }
  }
  if (cfg.connections == 0 || cfg.repeat == 0 || cfg.round_ms <= 0)
    args.error("--connections, --repeat and --round-ms must be positive");
  if (cfg.ping_s <= 0 || cfg.idle_s <= cfg.ping_s)
    args.error("need 0 < --ping < --idle");
  if (cfg.touch_fraction > 1 || cfg.silent_fraction > 1)
    args.error("fractions must be <= 1");
}

// ---------------------------------------------------------------------------------------
// Process measurements.

long current_rss_kb() {
  std::ifstream statm("/proc/self/statm");
  long size = 0, resident = 0;
  statm >> size >> resident;
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

// ---------------------------------------------------------------------------------------
// Deterministic traffic: the same for both implementations.

constexpr std::uint32_t never_silent = 0xffffffffu;
enum : std::uint8_t { await_ping = 0, await_drop = 1, closed = 2 };

// Everything the handlers count; one implementation per process.
struct counters {
  std::uint64_t touches = 0;
  std::uint64_t aborted = 0;
  std::uint64_t pings = 0;
  std::uint64_t drops = 0;
  std::uint64_t stale = 0; // steady: a completion that found its timer re-armed since
  std::uint64_t quiet_aborted = 0;
  bool quiet = false;
  std::vector<std::int64_t> lateness_ns;
  std::vector<std::int64_t> round_lag_ns;

  void record(clock_type::time_point due) {
    lateness_ns.push_back((clock_type::now() - due).count());
  }
  void abort() { ++(quiet ? quiet_aborted : aborted); }
};

counters stats;
clock_type::duration ping_after;
clock_type::duration drop_after;

// A fixed array of objects that are neither copied nor moved (heartbeat is not movable).
template <typename T>
class fixed_array {
public:
  fixed_array() = default;
  fixed_array(const fixed_array&) = delete;
  fixed_array& operator=(const fixed_array&) = delete;
  ~fixed_array() { clear(); }

  void allocate(std::size_t n) {
    data_ = static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(alignof(T))));
    capacity_ = n;
  }
  template <typename... Args>
  T& emplace_back(Args&&... args) {
    T* p = ::new (static_cast<void*>(data_ + size_)) T(std::forward<Args>(args)...);
    ++size_;
    return *p;
  }
  T& operator[](std::size_t i) { return data_[i]; }
  std::size_t size() const { return size_; }
  void clear() {
    for (std::size_t i = 0; i < size_; ++i)
      data_[i].~T();
    size_ = 0;
    if (data_ != nullptr)
      ::operator delete(data_, std::align_val_t(alignof(T)));
    data_ = nullptr;
  }

private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;
};

// ---------------------------------------------------------------------------------------
// The steady_timer way.

struct steady_impl {
  static constexpr const char* name = "steady";
  // What the connections share, given to open() and park().
  using server = asio::io_context&;

  struct connection {
    asio::steady_timer timer;
    clock_type::time_point last; // true time of the last activity
    std::uint32_t silent_from = never_silent;
    std::uint8_t state = await_ping;

    explicit connection(asio::io_context& ctx) : timer(ctx) {}
  };

  static void wait(connection& c) {
    c.timer.async_wait([&c](const asio::error_code& ec) { on_timer(c, ec); });
  }

  static void on_timer(connection& c, const asio::error_code& ec) {
    if (ec == asio::error::operation_aborted) {
      stats.abort();
      return;
    }
    // Asio's idiom: the expiry may have moved after this completion was queued, in which
    // case a newer wait is pending and this one is stale.
    if (c.timer.expiry() > clock_type::now()) {
      ++stats.stale;
      return;
    }
    if (c.state == await_ping) {
      stats.record(c.last + ping_after);
      ++stats.pings;
      c.state = await_drop;
      c.timer.expires_at(c.timer.expiry() - ping_after + drop_after);
      wait(c);
    } else if (c.state == await_drop) {
      stats.record(c.last + drop_after);
      ++stats.drops;
      c.state = closed;
    }
  }

  static void open(asio::io_context&, connection& c) {
    c.last = clock_type::now();
    c.timer.expires_after(ping_after);
    wait(c);
  }

  static void touch(connection& c) {
    c.last = clock_type::now();
    c.state = await_ping;
    c.timer.expires_after(ping_after);
    wait(c);
  }

  // Quiet phase: nothing due for an hour.
  static void park(asio::io_context&, connection& c) {
    c.state = closed;
    c.timer.expires_after(1h);
    c.timer.async_wait([](const asio::error_code& ec) {
      if (ec == asio::error::operation_aborted)
        stats.abort();
    });
  }
};

// ---------------------------------------------------------------------------------------
// The asio-wheel way.

struct wheel_impl {
  static constexpr const char* name = "wheel";
  using server = asio::io_context&;
  using event = asio_wheel::heartbeat::event;

  struct connection {
    asio_wheel::heartbeat hb;
    clock_type::time_point last; // true time of the last activity
    std::uint32_t silent_from = never_silent;
    std::uint8_t state = await_ping;

    connection(asio::io_context& ctx, const asio_wheel::heartbeat::options& o) : hb(ctx, o) {}
  };

  static void next(connection& c) {
    c.hb.async_next([&c](const asio::error_code& ec, event ev) { on_event(c, ec, ev); });
  }

  static void on_event(connection& c, const asio::error_code& ec, event ev) {
    if (ec) {
      stats.abort();
      return;
    }
    if (ev == event::ping) {
      stats.record(c.last + ping_after);
      ++stats.pings;
      c.state = await_drop;
      next(c);
    } else {
      stats.record(c.last + drop_after);
      ++stats.drops;
      c.state = closed;
    }
  }

  static asio_wheel::heartbeat::options options() { return {ping_after, drop_after}; }

  // Construction counts as activity; `last` is read first, so it is never after the mark.
  static void open(asio::io_context&, connection& c) { next(c); }

  static void touch(connection& c) {
    c.last = clock_type::now();
    c.state = await_ping;
    c.hb.touch();
  }

  // Quiet phase: nothing due for an hour. A heartbeat's thresholds are fixed at
  // construction, so the connection is re-created (aborting its pending async_next).
  static void park(asio::io_context& ctx, connection& c) {
    c.~connection();
    auto* p = ::new (static_cast<void*>(&c)) connection(ctx, {1h, 2h});
    p->state = closed;
    p->hb.async_next([](const asio::error_code& ec, event) {
      if (ec)
        stats.abort();
    });
  }
};

// ---------------------------------------------------------------------------------------
// The asio-wheel way for a whole server: one heartbeat_group.

struct group_impl {
  static constexpr const char* name = "group";
  using group = asio_wheel::heartbeat_group;
  using event = group::event;

  struct connection : group::member {
    clock_type::time_point last; // true time of the last activity
    std::uint32_t silent_from = never_silent;
    std::uint8_t state = await_ping;
  };

  static void on_event(group::member& m, event ev) {
    auto& c = static_cast<connection&>(m);
    if (ev == event::ping) {
      stats.record(c.last + ping_after);
      ++stats.pings;
      c.state = await_drop;
    } else {
      // The group has unwatched it, as the others stop waiting after a drop.
      stats.record(c.last + drop_after);
      ++stats.drops;
      c.state = closed;
    }
  }

  // The parked group stands for the others' timers moved an hour away: a group's thresholds
  // are fixed at construction, as a heartbeat's.
  struct server {
    group active;
    group parked;

    explicit server(asio::io_context& ctx)
        : active(ctx, {ping_after, drop_after}, on_event), parked(ctx, {1h, 2h}, on_event) {}
  };

  // watch() counts as activity; `last` is read first, so it is never after the mark.
  static void open(server& s, connection& c) {
    c.last = clock_type::now();
    s.active.watch(c);
  }

  static void touch(connection& c) {
    c.last = clock_type::now();
    c.state = await_ping;
    c.touch();
  }

  // Quiet phase: nothing due for an hour. The last unwatch() cancels the active group's
  // wait, so only the parked group's remains.
  static void park(server& s, connection& c) {
    s.active.unwatch(c);
    c.state = closed;
    s.parked.watch(c);
  }
};

template <typename Impl>
typename Impl::connection& construct(fixed_array<typename Impl::connection>& conns,
                                     asio::io_context& ctx) {
  if constexpr (std::is_same_v<Impl, wheel_impl>) {
    const auto t = clock_type::now();
    auto& c = conns.emplace_back(ctx, wheel_impl::options());
    c.last = t;
    return c;
  } else if constexpr (std::is_same_v<Impl, group_impl>) {
    return conns.emplace_back();
  } else {
    return conns.emplace_back(ctx);
  }
}

// ---------------------------------------------------------------------------------------
// The scenario in one process, for one implementation.

template <typename Impl>
bench::metrics run_scenario() {
  using connection = typename Impl::connection;
  const long base_rss_kb = current_rss_kb();
  ping_after = bench::secs(cfg.ping_s);
  drop_after = bench::secs(cfg.idle_s);
  const std::size_t n = cfg.connections;
  const auto round = bench::to_clock(std::chrono::duration<double, std::milli>(cfg.round_ms));
  const auto rounds = static_cast<std::uint32_t>(std::llround(cfg.seconds * 1000 / cfg.round_ms));
  const auto ramp_rounds =
      static_cast<std::uint32_t>(std::llround(cfg.ramp_s * 1000 / cfg.round_ms));
  // Silent connections stop hearing from their peer at a random round, from their opening
  // to `window_end`, so that most of their pings come due inside the run.
  const double margin_s = std::min(1.0, 0.1 * cfg.seconds);
  const auto window_end = static_cast<std::uint32_t>(
      std::max(0.0, cfg.seconds - cfg.ping_s - margin_s) * 1000 / cfg.round_ms);

  stats.lateness_ns.reserve(
      static_cast<std::size_t>(static_cast<double>(n) * (cfg.silent_fraction + 0.02)) + 1024);
  stats.round_lag_ns.reserve(rounds + 1);
  bench::progress_line progress(cfg.progress);
  const char* name = Impl::name;

  asio::io_context ctx(1);
  // Before the connections, which may unwatch themselves from it when they go.
  typename Impl::server server(ctx);
  fixed_array<connection> conns;
  conns.allocate(n);

  // Opens connections up to `target`, in round r; returns the wall time it took.
  bench::rng silent_rng{cfg.seed ^ 0x5eed5eedULL};
  std::size_t silent = 0;
  auto open_up_to = [&](std::size_t target, std::uint32_t r) {
    const auto t0 = clock_type::now();
    while (conns.size() < target) {
      connection& c = construct<Impl>(conns, ctx);
      if (static_cast<double>(silent_rng.next() >> 11) * 0x1.0p-53 < cfg.silent_fraction) {
        const std::uint32_t last = std::max(r, window_end);
        c.silent_from = r + static_cast<std::uint32_t>(silent_rng.below(last - r + 1ULL));
        ++silent;
      }
      Impl::open(server, c);
      if (ramp_rounds == 0 && (conns.size() & 0xffff) == 0)
        progress.update(false, "[%s] setup: %zu / %zu connections", name, conns.size(), n);
    }
    return clock_type::now() - t0;
  };

  // Setup: without a ramp, every connection is opened before the run.
  const bench::usage u0 = bench::usage::now();
  clock_type::duration open_time{};
  if (ramp_rounds == 0) {
    open_time += open_up_to(n, 0);
    progress.update(true, "[%s] setup: %zu connections in %.2f s", name, n,
                    std::chrono::duration<double>(open_time).count());
  }
  const bench::usage u1 = bench::usage::now();

  // Run: rounds of traffic at absolute times; with a ramp, the connections arrive at an even
  // rate over its first ramp_rounds rounds. Each open connection hears from its peer with
  // probability touch_fraction per round.
  bench::rng traffic{cfg.seed};
  asio::steady_timer pacer(ctx);
  const auto run_start = clock_type::now();
  std::uint32_t r = 0;
  // A round's work, its openings then its reads, runs in slices of at most cfg.slice items
  // (--slice), each slice a handler that posts the next, so that the loop runs its timers
  // between two, as it would between two of a server's completions; the next round is
  // waited for once the last slice is done, so that each round draws its reads from the
  // same generator state whatever the timer. Set by on_round, for the round r.
  std::size_t open_target = 0; // connections open once this round's openings are done
  std::size_t reads_left = 0;  // this round's reads not yet done
  std::function<void(const asio::error_code&)> on_round;
  std::function<void()> work_slice = [&] {
    std::size_t budget = cfg.slice != 0 ? cfg.slice : SIZE_MAX;
    if (conns.size() < open_target) {
      const std::size_t upto =
          open_target - conns.size() > budget ? conns.size() + budget : open_target;
      budget -= upto - conns.size();
      open_time += open_up_to(upto, r);
    }
    for (; budget > 0 && reads_left > 0 && conns.size() == open_target; --budget, --reads_left) {
      connection& c = conns[traffic.below(open_target)];
      if (c.silent_from <= r || c.state == closed)
        continue;
      Impl::touch(c);
      ++stats.touches;
    }
    if (conns.size() < open_target || reads_left > 0) {
      asio::post(ctx, [&work_slice] { work_slice(); }); // not a copy of the std::function
      return;
    }
    ++r;
    progress.update(
        false,
        "[%s] run %5.1f / %.0f s  open %.2fM  reads %.2fM  aborted %.2fM  pings %" PRIu64
        "  drops %" PRIu64,
        name, std::chrono::duration<double>(clock_type::now() - run_start).count(), cfg.seconds,
        static_cast<double>(open_target) / 1e6, static_cast<double>(stats.touches) / 1e6,
        static_cast<double>(stats.aborted) / 1e6, stats.pings, stats.drops);
    pacer.expires_at(run_start + r * round);
    pacer.async_wait(on_round);
  };
  on_round = [&](const asio::error_code&) {
    const auto now = clock_type::now();
    if (r == rounds) {
      ctx.stop();
      return;
    }
    stats.round_lag_ns.push_back((now - (run_start + r * round)).count());
    open_target = conns.size();
    if (conns.size() < n) {
      const auto target = static_cast<std::size_t>(static_cast<bench::uint128>(n) * (r + 1ULL) /
                                                   std::max<std::uint32_t>(ramp_rounds, 1));
      open_target = std::max(open_target, std::min(n, target));
    }
    reads_left = static_cast<std::size_t>(
        std::llround(cfg.touch_fraction * static_cast<double>(open_target)));
    work_slice();
  };
  asio::post(ctx, [&] { on_round({}); });
  if (cfg.busy)
    bench::keep_busy_while(ctx, [&] { return r < rounds; });
  ctx.run();
  const bench::usage u2 = bench::usage::now();
  // What a server holds with every connection open: the peak (max RSS) is the quiet phase's,
  // which re-creates each connection's timer while its old wait's abort is queued, so holds
  // two of whatever a timer keeps until its last handler is gone (an idle_timer's link).
  const long run_rss_kb = current_rss_kb();
  progress.update(true, "[%s] run: %.2f s wall, %.2f s CPU, %" PRIu64 " pings, %" PRIu64 " drops",
                  name, bench::wall_between(u1, u2), u2.cpu() - u1.cpu(), stats.pings, stats.drops);

  // Quiet: every timer an hour away, nothing due; count the wakeups.
  stats.quiet = true;
  ctx.restart();
  for (std::size_t i = 0; i < conns.size(); ++i)
    Impl::park(server, conns[i]);
  while (ctx.poll() != 0) {
  }
  ctx.restart();
  progress.update(true, "[%s] quiet: %.1f s with every timer an hour away", name, cfg.quiet_s);
  const bench::usage u3 = bench::usage::now();
  asio::steady_timer quiet_end(ctx, bench::secs(cfg.quiet_s));
  quiet_end.async_wait([&](const asio::error_code&) { ctx.stop(); });
  ctx.run();
  const bench::usage u4 = bench::usage::now();

  // Teardown.
  conns.clear();
  pacer.cancel();
  quiet_end.cancel();
  ctx.restart();
  ctx.poll();
  const bench::usage u5 = bench::usage::now();
  progress.done();

  bench::metrics m;
  m["connections"] = static_cast<double>(n);
  m["silent"] = static_cast<double>(silent);
  m["rounds"] = rounds;
  m["open_wall_s"] = std::chrono::duration<double>(open_time).count();
  m["setup_wall_s"] = bench::wall_between(u0, u1);
  m["setup_cpu_s"] = u1.cpu() - u0.cpu();
  m["run_wall_s"] = bench::wall_between(u1, u2);
  m["run_cpu_s"] = u2.cpu() - u1.cpu();
  m["run_user_s"] = u2.user - u1.user;
  m["run_sys_s"] = u2.sys - u1.sys;
  m["run_cpu_pct"] = 100.0 * m["run_cpu_s"] / m["run_wall_s"];
  m["run_nivcsw"] = static_cast<double>(u2.nivcsw - u1.nivcsw);
  m["run_nvcsw"] = static_cast<double>(u2.nvcsw - u1.nvcsw);
  m["touches"] = static_cast<double>(stats.touches);
  m["aborted"] = static_cast<double>(stats.aborted);
  m["pings"] = static_cast<double>(stats.pings);
  m["drops"] = static_cast<double>(stats.drops);
  m["fired"] = static_cast<double>(stats.pings + stats.drops);
  m["stale"] = static_cast<double>(stats.stale);
  m["handlers"] = static_cast<double>(stats.aborted + stats.pings + stats.drops + stats.stale);
  m["run_cpu_ns_per_touch"] =
      stats.touches == 0 ? 0 : m["run_cpu_s"] * 1e9 / static_cast<double>(stats.touches);
  bench::summarize(m, "lateness", stats.lateness_ns);
  bench::summarize(m, "round_lag", stats.round_lag_ns);
  if (!stats.round_lag_ns.empty()) {
    // When the worst stall began: the scheduled time of the round it delayed most.
    const auto worst = std::max_element(stats.round_lag_ns.begin(), stats.round_lag_ns.end());
    m["round_lag_max_at_s"] =
        static_cast<double>(worst - stats.round_lag_ns.begin()) * cfg.round_ms / 1000;
  }
  m["quiet_wall_s"] = bench::wall_between(u3, u4);
  m["quiet_cpu_s"] = u4.cpu() - u3.cpu();
  m["quiet_nvcsw"] = static_cast<double>(u4.nvcsw - u3.nvcsw);
  m["quiet_nivcsw"] = static_cast<double>(u4.nivcsw - u3.nivcsw);
  // Less the one wakeup of the timer that ends the phase.
  m["quiet_wakeups_per_s"] = std::max(0.0, m["quiet_nvcsw"] - 1) / m["quiet_wall_s"];
  m["quiet_aborted"] = static_cast<double>(stats.quiet_aborted);
  m["teardown_wall_s"] = bench::wall_between(u4, u5);
  m["maxrss_mib"] = static_cast<double>(u5.maxrss_kb) / 1024.0;
  m["base_rss_mib"] = static_cast<double>(base_rss_kb) / 1024.0;
  m["bytes_per_connection"] =
      static_cast<double>(u5.maxrss_kb - base_rss_kb) * 1024.0 / static_cast<double>(n);
  m["run_bytes_per_connection"] =
      static_cast<double>(run_rss_kb - base_rss_kb) * 1024.0 / static_cast<double>(n);
  m["sizeof_connection"] = sizeof(connection);
  m["total_wall_s"] = bench::wall_between(u0, u5);
  m["total_cpu_s"] = u5.cpu() - u0.cpu();
  return m;
}

// ---------------------------------------------------------------------------------------
// Output.

// steady / other, where `other` names the implementation of the denominator.
std::string ratio(double steady, double other, const std::string& name) {
  if (other == 0 && steady == 0)
    return "=";
  if (other == 0)
    return name + " 0";
  if (other < 0 || steady < 0)
    return "n/a";
  const double q = steady / other;
  return bench::fmt(q >= 100 ? "%.0fx" : q >= 10 ? "%.1fx" : "%.2fx", q);
}

const char* impl_label(const std::string& impl) {
  return impl == "steady"  ? "asio::steady_timer"
         : impl == "wheel" ? "asio_wheel"
                           : "heartbeat_group";
}

struct row {
  const char* label;
  const char* key;
  std::string (*show)(double);
  bool with_ratio;
};

std::string show_s(double v) {
  return bench::fmt("%.2f s", v);
}
std::string show_mib(double v) {
  return bench::fmt("%.0f MiB", v);
}
std::string show_b(double v) {
  return bench::fmt("%.0f B", v);
}
std::string show_us(double v) {
  return bench::ms(v);
}
std::string show_n(double v) {
  return bench::grouped(v);
}
std::string show_pct(double v) {
  return bench::fmt("%.0f %%", v);
}
std::string show_rate(double v) {
  return bench::fmt("%.1f /s", v);
}
std::string show_ns(double v) {
  return bench::fmt("%.0f ns", v);
}

const row scenario_rows[] = {
    {"run: CPU time (user+sys)", "run_cpu_s", show_s, true},
    {"run: CPU per read", "run_cpu_ns_per_touch", show_ns, true},
    {"run: wall time", "run_wall_s", show_s, true},
    {"run: CPU utilisation", "run_cpu_pct", show_pct, true},
    {"opening the connections (wall)", "open_wall_s", show_s, true},
    {"max RSS", "maxrss_mib", show_mib, true},
    {"memory per connection, run", "run_bytes_per_connection", show_b, true},
    {"memory per connection, peak", "bytes_per_connection", show_b, true},
    {"sizeof(connection)", "sizeof_connection", show_b, true},
    {"reads (touches)", "touches", show_n, false},
    {"handlers run", "handlers", show_n, true},
    {"  aborted (operation_aborted)", "aborted", show_n, true},
    {"  fired: pings", "pings", show_n, false},
    {"  fired: drops", "drops", show_n, false},
    {"  stale", "stale", show_n, false},
    {"lateness min", "lateness_min_us", show_us, false},
    {"lateness p50", "lateness_p50_us", show_us, true},
    {"lateness p99", "lateness_p99_us", show_us, true},
    {"lateness max", "lateness_max_us", show_us, true},
    {"early completions", "lateness_early", show_n, false},
    {"round lag p99", "round_lag_p99_us", show_us, true},
    {"round lag max", "round_lag_max_us", show_us, true},
    {"run: preempted (nivcsw)", "run_nivcsw", show_n, false},
    {"quiet: wakeups", "quiet_wakeups_per_s", show_rate, false},
    {"quiet: CPU", "quiet_cpu_s", show_s, false},
};

void print_scenario_table(const std::map<std::string, bench::metrics>& med, unsigned repeat) {
  const bench::metrics& any = med.begin()->second;
  std::printf("\nheartbeat scenario: %s connections (%s), ping after %g s, drop after %g s of "
              "silence,\n%s reads/s (%g%% of the connections every %g ms), %g%% falling silent, "
              "%g s run, 1 thread%s\n\n",
              bench::grouped(any.at("connections")).c_str(),
              cfg.ramp_s > 0 ? bench::fmt("arriving over the first %g s", cfg.ramp_s).c_str()
                             : "all opened before the run",
              cfg.ping_s, cfg.idle_s,
              bench::grouped(cfg.touch_fraction * static_cast<double>(cfg.connections) * 1000 /
                             cfg.round_ms)
                  .c_str(),
              cfg.touch_fraction * 100, cfg.round_ms, cfg.silent_fraction * 100, cfg.seconds,
              repeat > 1 ? (", median of " + std::to_string(repeat) + " runs each").c_str() : "");
  std::printf("Machine: %s. Loop %s.\n\n", bench::wakeup_baseline().c_str(),
              cfg.busy ? "kept busy in the run (--busy): it never sleeps, and the CPU rows "
                         "count the spinning"
                       : "sleeps between events");
  if (cfg.slice != 0)
    std::printf("Each round's openings and reads run in handlers of %zu (--slice), the loop's "
                "timers between two.\n\n",
                cfg.slice);
  else
    std::printf("Each round's openings and reads run in one handler (--slice 0): timers due "
                "meanwhile wait for it.\n\n");
  // Columns in this order; each asio-wheel way is compared with steady_timer.
  std::vector<std::string> impls, versus;
  for (const char* i : {"steady", "wheel", "group"}) {
    if (med.count(i) == 0)
      continue;
    impls.push_back(i);
    if (i != std::string("steady") && med.count("steady") != 0)
      versus.push_back(i);
  }
  std::printf("  %-30s", "");
  for (const auto& i : impls)
    std::printf(" %16s", impl_label(i));
  for (const auto& v : versus)
    std::printf(" %14s", ("steady / " + v).c_str());
  std::printf("\n  %s\n", std::string(30 + 17 * impls.size() + 15 * versus.size(), '-').c_str());
  for (const row& rw : scenario_rows) {
    std::printf("  %-30s", rw.label);
    for (const auto& i : impls)
      std::printf(" %16s", rw.show(med.at(i).at(rw.key)).c_str());
    for (const auto& v : versus)
      if (rw.with_ratio)
        std::printf(" %14s", ratio(med.at("steady").at(rw.key), med.at(v).at(rw.key), v).c_str());
    std::printf("\n");
  }
  std::printf("\n");
  if (versus.empty())
    return;
  const bench::metrics& st = med.at("steady");
  std::printf("  Same traffic (%s reads); asio::steady_timer ran %s handlers (one "
              "operation_aborted per read).\n",
              bench::grouped(st.at("touches")).c_str(), bench::grouped(st.at("handlers")).c_str());
  auto times = [](double a, double b) {
    return b > 0 ? bench::fmt("%.1fx", a / b) : std::string("-");
  };
  for (const auto& v : versus) {
    const bench::metrics& other = med.at(v);
    std::printf("  %s used %s %s CPU time than asio::steady_timer and ran %s handlers.\n",
                impl_label(v),
                times(std::max(st.at("run_cpu_s"), other.at("run_cpu_s")),
                      std::min(st.at("run_cpu_s"), other.at("run_cpu_s")))
                    .c_str(),
                st.at("run_cpu_s") >= other.at("run_cpu_s") ? "less" : "MORE",
                bench::grouped(other.at("handlers")).c_str());
  }
  std::printf("  Idle wakeups with every timer an hour away:");
  for (const auto& i : impls)
    std::printf("%s %.1f/s (%s)", i == impls.front() ? "" : ",",
                med.at(i).at("quiet_wakeups_per_s"), impl_label(i));
  std::printf(".\n\n");
}

void json_config(std::FILE* f) {
  std::fprintf(
      f,
      "  \"config\": {\"connections\": %zu, \"idle_s\": %g, \"ping_s\": %g, \"seconds\": %g, "
      "\"ramp_s\": %g, "
      "\"round_ms\": %g, \"touch_fraction\": %g, \"silent_fraction\": %g, \"quiet_s\": %g, "
      "\"repeat\": %u, \"seed\": %" PRIu64 ", \"slice\": %zu, \"reads_per_s\": %g, ",
      cfg.connections, cfg.idle_s, cfg.ping_s, cfg.seconds, cfg.ramp_s, cfg.round_ms,
      cfg.touch_fraction, cfg.silent_fraction, cfg.quiet_s, cfg.repeat, cfg.seed, cfg.slice,
      cfg.touch_fraction * static_cast<double>(cfg.connections) * 1000 / cfg.round_ms);
  bench::json_build(f);
  std::fprintf(f, "}");
}

// ---------------------------------------------------------------------------------------
// Child processes (--impl both).

struct child_result {
  bench::metrics m;
  std::vector<std::int64_t> lateness_ns;
};

void write_child_out(const bench::metrics& m) {
  std::FILE* f = std::fopen(cfg.child_out.c_str(), "w");
  if (f == nullptr)
    throw std::runtime_error("cannot write " + cfg.child_out);
  for (const auto& [k, v] : m)
    std::fprintf(f, "m %s %.17g\n", k.c_str(), v);
  for (std::int64_t s : stats.lateness_ns)
    std::fprintf(f, "l %" PRId64 "\n", s);
  std::fclose(f);
}

child_result read_child_out(const std::string& path) {
  std::ifstream in(path);
  child_result r;
  std::string tag;
  while (in >> tag) {
    if (tag == "m") {
      std::string k;
      double v = 0;
      in >> k >> v;
      r.m[k] = v;
    } else if (tag == "l") {
      std::int64_t v = 0;
      in >> v;
      r.lateness_ns.push_back(v);
    }
  }
  return r;
}

std::string self_exe() {
  char buf[4096];
  const ssize_t len = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (len <= 0)
    throw std::runtime_error("cannot read /proc/self/exe");
  return std::string(buf, static_cast<std::size_t>(len));
}

child_result spawn_child(const std::string& impl) {
  char tmpl[] = "/tmp/heartbeat_scenario.XXXXXX";
  const int fd = mkstemp(tmpl);
  if (fd < 0)
    throw std::runtime_error("mkstemp failed");
  close(fd);
  const std::string exe = self_exe();
  std::vector<std::string> args = {exe,
                                   "--impl",
                                   impl,
                                   "--connections",
                                   std::to_string(cfg.connections),
                                   "--idle",
                                   bench::fmt("%.17g", cfg.idle_s),
                                   "--ping",
                                   bench::fmt("%.17g", cfg.ping_s),
                                   "--seconds",
                                   bench::fmt("%.17g", cfg.seconds),
                                   "--ramp",
                                   bench::fmt("%.17g", cfg.ramp_s),
                                   "--round-ms",
                                   bench::fmt("%.17g", cfg.round_ms),
                                   "--touch-fraction",
                                   bench::fmt("%.17g", cfg.touch_fraction),
                                   "--silent-fraction",
                                   bench::fmt("%.17g", cfg.silent_fraction),
                                   "--quiet",
                                   bench::fmt("%.17g", cfg.quiet_s),
                                   "--slice",
                                   std::to_string(cfg.slice),
                                   "--seed",
                                   std::to_string(cfg.seed),
                                   "--child-out",
                                   tmpl};
  if (!cfg.progress)
    args.push_back("--no-progress");
  if (cfg.busy)
    args.push_back("--busy");
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawn(&pid, exe.c_str(), nullptr, nullptr, argv.data(), environ) != 0)
    throw std::runtime_error("posix_spawn failed");
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::remove(tmpl);
    throw std::runtime_error("the " + impl + " child failed");
  }
  child_result r = read_child_out(tmpl);
  std::remove(tmpl);
  return r;
}

bench::metrics run_scenario(const std::string& impl) {
  if (impl == "wheel")
    return run_scenario<wheel_impl>();
  if (impl == "group")
    return run_scenario<group_impl>();
  return run_scenario<steady_impl>();
}

int scenario_main() {
  std::vector<std::string> impls;
  if (cfg.impl == "both")
    impls = {"wheel", "steady", "group"};
  else
    impls = {cfg.impl};

  std::map<std::string, std::vector<child_result>> runs;
  if (!cfg.child_out.empty() || (impls.size() == 1 && cfg.repeat == 1)) {
    const bench::metrics m = run_scenario(impls[0]);
    if (!cfg.child_out.empty()) {
      write_child_out(m);
      return 0;
    }
    runs[impls[0]].push_back({m, stats.lateness_ns});
  } else {
    for (unsigned rep = 0; rep < cfg.repeat; ++rep) {
      // ABBA (ABC CBA): alternate the order, so that drift over the runs (load, caches,
      // frequency) does not favour one implementation.
      std::vector<std::string> order = impls;
      if (rep % 2 == 1)
        std::reverse(order.begin(), order.end());
      for (const auto& impl : order) {
        if (cfg.progress)
          std::fprintf(stderr, "run %u/%u: %s\n", rep + 1, cfg.repeat, impl.c_str());
        runs[impl].push_back(spawn_child(impl));
      }
    }
  }

  std::map<std::string, bench::metrics> med;
  for (const auto& [impl, rs] : runs) {
    for (const auto& [k, v] : rs.front().m) {
      std::vector<double> values;
      for (const auto& r : rs)
        values.push_back(r.m.count(k) ? r.m.at(k) : 0);
      med[impl][k] = bench::median(values);
    }
  }
  print_scenario_table(med, cfg.repeat);

  std::vector<std::pair<std::string, std::vector<std::int64_t>>> samples;
  for (const auto& [impl, rs] : runs) {
    std::vector<std::int64_t> all;
    for (const auto& r : rs)
      all.insert(all.end(), r.lateness_ns.begin(), r.lateness_ns.end());
    samples.emplace_back(impl, std::move(all));
  }
  // Wheel first, then steady (the two blocks benchmarks/plot/lateness_cdf.gnuplot plots),
  // then group.
  std::sort(samples.begin(), samples.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  if (!cfg.cdf.empty())
    bench::write_cdf(cfg.cdf, samples);

  std::size_t early = 0;
  std::string early_by;
  for (const auto& [impl, m] : med) {
    const auto e = static_cast<std::size_t>(m.at("lateness_early"));
    early += e;
    if (e != 0)
      early_by +=
          (early_by.empty() ? "" : ", ") + impl + " " + bench::grouped(static_cast<double>(e));
  }

  if (!cfg.json.empty()) {
    std::FILE* f = std::fopen(cfg.json.c_str(), "w");
    if (f == nullptr)
      throw std::runtime_error("cannot write " + cfg.json);
    std::fprintf(f, "{\n  \"mode\": \"scenario\",\n");
    json_config(f);
    std::fprintf(f, ",\n  \"median\": {");
    bool first = true;
    for (const auto& [impl, m] : med) {
      std::fprintf(f, "%s\n    \"%s\": ", first ? "" : ",", impl.c_str());
      bench::json_metrics(f, m, "    ");
      first = false;
    }
    std::fprintf(f, "\n  },\n  \"runs\": {");
    first = true;
    for (const auto& [impl, rs] : runs) {
      std::fprintf(f, "%s\n    \"%s\": [", first ? "" : ",", impl.c_str());
      for (std::size_t i = 0; i < rs.size(); ++i) {
        std::fprintf(f, "%s\n      ", i == 0 ? "" : ",");
        bench::json_metrics(f, rs[i].m, "      ");
      }
      std::fprintf(f, "\n    ]");
      first = false;
    }
    std::fprintf(f, "\n  }");
    for (const char* other : {"wheel", "group"}) {
      if (!med.count(other) || !med.count("steady"))
        continue;
      std::fprintf(f, ",\n  \"ratio_steady_over_%s\": {", other);
      first = true;
      for (const auto& [k, w] : med.at(other)) {
        const double s = med.at("steady").at(k);
        if (w == 0)
          continue;
        std::fprintf(f, "%s\n    \"%s\": %.6g", first ? "" : ",", k.c_str(), s / w);
        first = false;
      }
      std::fprintf(f, "\n  }");
    }
    std::fprintf(f, "\n}\n");
    std::fclose(f);
  }
  if (early != 0) {
    std::printf("FAIL: early completions (%s): a ping or drop completed before its due time\n",
                early_by.c_str());
    return 1;
  }
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  return bench::run_main("heartbeat_scenario", [&] {
    parse_args(argc, argv);
    return scenario_main();
  });
}
