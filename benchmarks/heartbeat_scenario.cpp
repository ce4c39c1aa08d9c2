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
// max RSS (ru_maxrss), handler counts (aborted, pings, drops, stale), lateness of every ping
// and drop at handler entry against its due time (p50/p99/max; early completions, which
// must be 0), round lag (how late the traffic rounds start: does the loop keep up?), idle
// wakeups per second in the quiet phase.
//
//   --impl wheel|steady|group|both
//                             both (default): all three, each in a child process of its own
//                             (so max RSS is per implementation), alternating, --repeat K
//                             times (ABCCBA order), medians and steady/wheel, steady/group
//                             ratios
//   --smoke                   a few seconds: 1e5 connections, ping 2 s, drop 3 s, 4 s run
//   --json FILE               results as JSON
//   --cdf FILE                lateness CDF data (gnuplot blocks, one per implementation)
//   --precision               instead: --timers (1e4) timers due uniformly over --spread
//                             (1 s) with the default tick; each implementation's p99
//                             lateness must be <= one tick + 1 ms, with no early completion.
//                             Exit status 1 if a check fails. Not for the group, whose
//                             thresholds are shared by its members.
//
// Progress goes to stderr: one \r-updated line on a terminal, plain lines otherwise.
// Exit status: 0 all good; 1 a check failed (early completions, precision bound), results
// written; 2 bad arguments; 3 error.

#include <asio_wheel/heartbeat.hpp>
#include <asio_wheel/heartbeat_group.hpp>
#include <asio_wheel/idle_timer.hpp>
#include <asio_wheel/wheel_timer.hpp>

#include <asio/error.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <asio/version.hpp>

#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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

// ---------------------------------------------------------------------------------------
// Configuration.

struct config {
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
  std::uint64_t seed = 42;
  bool precision = false;
  std::size_t timers = 10'000;
  double spread_s = 1;
  bool progress = true;
  std::string json;
  std::string cdf;
  std::string child_out; // internal: a child writes its results here
};

config cfg;

[[noreturn]] void usage_error(const std::string& what) {
  std::fprintf(stderr,
               "heartbeat_scenario: %s (see the header of benchmarks/heartbeat_scenario.cpp)\n",
               what.c_str());
  std::exit(2);
}

double parse_number(const char* name, const char* text) {
  char* end = nullptr;
  const double v = std::strtod(text, &end);
  if (end == text || *end != '\0' || !std::isfinite(v) || v < 0)
    usage_error(std::string("bad value for ") + name + ": '" + text + "'");
  return v;
}

void parse_args(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc)
        usage_error(a + " needs a value");
      return argv[++i];
    };
    if (a == "--impl") {
      cfg.impl = value();
      if (cfg.impl != "wheel" && cfg.impl != "steady" && cfg.impl != "group" && cfg.impl != "both")
        usage_error("--impl must be wheel, steady, group or both");
    } else if (a == "--connections") {
      cfg.connections = static_cast<std::size_t>(parse_number("--connections", value()));
    } else if (a == "--idle") {
      cfg.idle_s = parse_number("--idle", value());
    } else if (a == "--ping") {
      cfg.ping_s = parse_number("--ping", value());
    } else if (a == "--seconds") {
      cfg.seconds = parse_number("--seconds", value());
    } else if (a == "--ramp") {
      cfg.ramp_s = parse_number("--ramp", value());
    } else if (a == "--round-ms") {
      cfg.round_ms = parse_number("--round-ms", value());
    } else if (a == "--touch-fraction") {
      cfg.touch_fraction = parse_number("--touch-fraction", value());
    } else if (a == "--silent-fraction") {
      cfg.silent_fraction = parse_number("--silent-fraction", value());
    } else if (a == "--quiet") {
      cfg.quiet_s = parse_number("--quiet", value());
    } else if (a == "--repeat") {
      cfg.repeat = static_cast<unsigned>(parse_number("--repeat", value()));
    } else if (a == "--seed") {
      cfg.seed = static_cast<std::uint64_t>(parse_number("--seed", value()));
    } else if (a == "--precision") {
      cfg.precision = true;
    } else if (a == "--timers") {
      cfg.timers = static_cast<std::size_t>(parse_number("--timers", value()));
    } else if (a == "--spread") {
      cfg.spread_s = parse_number("--spread", value());
    } else if (a == "--smoke") {
      // A few seconds, as the examples' --smoke: later arguments still override.
      cfg.connections = 100'000;
      cfg.ping_s = 2;
      cfg.idle_s = 3;
      cfg.seconds = 4;
      cfg.ramp_s = 1;
      cfg.quiet_s = 1;
      cfg.timers = 2'000;
    } else if (a == "--no-progress") {
      cfg.progress = false;
    } else if (a == "--json") {
      cfg.json = value();
    } else if (a == "--cdf") {
      cfg.cdf = value();
    } else if (a == "--child-out") {
      cfg.child_out = value();
    } else if (a == "-h" || a == "--help") {
      std::printf(
          "usage: heartbeat_scenario [--impl wheel|steady|group|both] [--connections N] "
          "[--idle S] [--ping S]\n"
          "         [--seconds S] [--ramp S] [--round-ms MS] [--touch-fraction F] "
          "[--silent-fraction F] [--quiet S]\n"
          "         [--repeat K] [--seed S] [--json FILE] [--cdf FILE] [--no-progress] [--smoke]\n"
          "       heartbeat_scenario --precision [--impl ...] [--timers N] [--spread S] "
          "[--json FILE] [--cdf FILE]\n");
      std::exit(0);
    } else {
      usage_error("unknown argument '" + a + "'");
    }
  }
  if (cfg.connections == 0 || cfg.repeat == 0 || cfg.round_ms <= 0 || cfg.timers == 0)
    usage_error("--connections, --repeat, --round-ms and --timers must be positive");
  if (cfg.ping_s <= 0 || cfg.idle_s <= cfg.ping_s)
    usage_error("need 0 < --ping < --idle");
  if (cfg.touch_fraction > 1 || cfg.silent_fraction > 1)
    usage_error("fractions must be <= 1");
  // A group's thresholds are shared by its members, so timers due uniformly over the spread
  // would need a group each.
  if (cfg.precision && cfg.impl == "group")
    usage_error("--precision has no group check: use --impl wheel, steady or both");
}

template <typename D>
clock_type::duration to_clock(D d) {
  return std::chrono::duration_cast<clock_type::duration>(d);
}

clock_type::duration secs(double s) {
  return to_clock(std::chrono::duration<double>(s));
}

// ---------------------------------------------------------------------------------------
// Process measurements.

struct usage {
  double user = 0, sys = 0;
  long nvcsw = 0, nivcsw = 0, maxrss_kb = 0;
  clock_type::time_point wall;

  static usage now() {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    usage u;
    u.user = static_cast<double>(ru.ru_utime.tv_sec) + ru.ru_utime.tv_usec * 1e-6;
    u.sys = static_cast<double>(ru.ru_stime.tv_sec) + ru.ru_stime.tv_usec * 1e-6;
    u.nvcsw = ru.ru_nvcsw;
    u.nivcsw = ru.ru_nivcsw;
    u.maxrss_kb = ru.ru_maxrss;
    u.wall = clock_type::now();
    return u;
  }
  double cpu() const { return user + sys; }
};

double wall_between(const usage& a, const usage& b) {
  return std::chrono::duration<double>(b.wall - a.wall).count();
}

long current_rss_kb() {
  std::ifstream statm("/proc/self/statm");
  long size = 0, resident = 0;
  statm >> size >> resident;
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

// ---------------------------------------------------------------------------------------
// Statistics.

using metrics = std::map<std::string, double>;

double percentile(const std::vector<std::int64_t>& sorted, double p) {
  if (sorted.empty())
    return 0;
  const double rank = p / 100.0 * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<std::size_t>(rank);
  const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = rank - static_cast<double>(lo);
  return static_cast<double>(sorted[lo]) * (1 - frac) + static_cast<double>(sorted[hi]) * frac;
}

double median(std::vector<double> v) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 != 0 ? v[m] : (v[m - 1] + v[m]) / 2;
}

// Lateness summary of ns samples into m under `prefix` (microseconds).
void summarize(metrics& m, const std::string& prefix, std::vector<std::int64_t> samples) {
  std::sort(samples.begin(), samples.end());
  std::size_t early = 0;
  for (std::int64_t s : samples)
    early += s < 0 ? 1 : 0;
  m[prefix + "_n"] = static_cast<double>(samples.size());
  m[prefix + "_early"] = static_cast<double>(early);
  m[prefix + "_min_us"] = samples.empty() ? 0 : static_cast<double>(samples.front()) / 1e3;
  m[prefix + "_p50_us"] = percentile(samples, 50) / 1e3;
  m[prefix + "_p99_us"] = percentile(samples, 99) / 1e3;
  m[prefix + "_max_us"] = samples.empty() ? 0 : static_cast<double>(samples.back()) / 1e3;
}

// ---------------------------------------------------------------------------------------
// Progress on stderr.

class progress_line {
public:
  progress_line() : tty_(isatty(STDERR_FILENO) == 1) {}

  // Prints if enough time has passed since the last print (or `force`).
  template <typename... Args>
  void update(bool force, const char* fmt, Args... args) {
    if (!cfg.progress)
      return;
    const auto now = clock_type::now();
    if (!force && now - last_ < (tty_ ? 250ms : 2s))
      return;
    last_ = now;
    char buf[256];
    std::snprintf(buf, sizeof buf, fmt, args...);
    if (tty_)
      std::fprintf(stderr, "\r\033[K%s", buf);
    else
      std::fprintf(stderr, "%s\n", buf);
    std::fflush(stderr);
    open_ = tty_;
  }

  void done() {
    if (open_)
      std::fputc('\n', stderr);
    open_ = false;
  }

private:
  bool tty_;
  bool open_ = false;
  clock_type::time_point last_{};
};

// ---------------------------------------------------------------------------------------
// Deterministic traffic: the same for both implementations.

__extension__ typedef unsigned __int128 uint128;

struct rng {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n).
  std::uint64_t below(std::uint64_t n) {
    return static_cast<std::uint64_t>((static_cast<uint128>(next()) * n) >> 64);
  }
};

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
metrics run_scenario() {
  using connection = typename Impl::connection;
  const long base_rss_kb = current_rss_kb();
  ping_after = secs(cfg.ping_s);
  drop_after = secs(cfg.idle_s);
  const std::size_t n = cfg.connections;
  const auto round = to_clock(std::chrono::duration<double, std::milli>(cfg.round_ms));
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
  progress_line progress;
  const char* name = Impl::name;

  asio::io_context ctx(1);
  // Before the connections, which may unwatch themselves from it when they go.
  typename Impl::server server(ctx);
  fixed_array<connection> conns;
  conns.allocate(n);

  // Opens connections up to `target`, in round r; returns the wall time it took.
  rng silent_rng{cfg.seed ^ 0x5eed5eedULL};
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
  const usage u0 = usage::now();
  clock_type::duration open_time{};
  if (ramp_rounds == 0) {
    open_time += open_up_to(n, 0);
    progress.update(true, "[%s] setup: %zu connections in %.2f s", name, n,
                    std::chrono::duration<double>(open_time).count());
  }
  const usage u1 = usage::now();

  // Run: rounds of traffic at absolute times; with a ramp, the connections arrive at an even
  // rate over its first ramp_rounds rounds. Each open connection hears from its peer with
  // probability touch_fraction per round.
  rng traffic{cfg.seed};
  asio::steady_timer pacer(ctx);
  const auto run_start = clock_type::now();
  std::uint32_t r = 0;
  std::function<void(const asio::error_code&)> on_round = [&](const asio::error_code&) {
    const auto now = clock_type::now();
    if (r == rounds) {
      ctx.stop();
      return;
    }
    stats.round_lag_ns.push_back((now - (run_start + r * round)).count());
    if (conns.size() < n) {
      const auto target = static_cast<std::size_t>(static_cast<uint128>(n) * (r + 1ULL) /
                                                   std::max<std::uint32_t>(ramp_rounds, 1));
      open_time += open_up_to(std::min(n, target), r);
    }
    const std::size_t open = conns.size();
    const auto per_round =
        static_cast<std::size_t>(std::llround(cfg.touch_fraction * static_cast<double>(open)));
    for (std::size_t k = 0; k < per_round; ++k) {
      connection& c = conns[traffic.below(open)];
      if (c.silent_from <= r || c.state == closed)
        continue;
      Impl::touch(c);
      ++stats.touches;
    }
    ++r;
    progress.update(
        false,
        "[%s] run %5.1f / %.0f s  open %.2fM  reads %.2fM  aborted %.2fM  pings %" PRIu64
        "  drops %" PRIu64,
        name, std::chrono::duration<double>(now - run_start).count(), cfg.seconds,
        static_cast<double>(open) / 1e6, static_cast<double>(stats.touches) / 1e6,
        static_cast<double>(stats.aborted) / 1e6, stats.pings, stats.drops);
    pacer.expires_at(run_start + r * round);
    pacer.async_wait(on_round);
  };
  asio::post(ctx, [&] { on_round({}); });
  ctx.run();
  const usage u2 = usage::now();
  progress.update(true, "[%s] run: %.2f s wall, %.2f s CPU, %" PRIu64 " pings, %" PRIu64 " drops",
                  name, wall_between(u1, u2), u2.cpu() - u1.cpu(), stats.pings, stats.drops);

  // Quiet: every timer an hour away, nothing due; count the wakeups.
  stats.quiet = true;
  ctx.restart();
  for (std::size_t i = 0; i < conns.size(); ++i)
    Impl::park(server, conns[i]);
  while (ctx.poll() != 0) {
  }
  ctx.restart();
  progress.update(true, "[%s] quiet: %.1f s with every timer an hour away", name, cfg.quiet_s);
  const usage u3 = usage::now();
  asio::steady_timer quiet_end(ctx, secs(cfg.quiet_s));
  quiet_end.async_wait([&](const asio::error_code&) { ctx.stop(); });
  ctx.run();
  const usage u4 = usage::now();

  // Teardown.
  conns.clear();
  pacer.cancel();
  quiet_end.cancel();
  ctx.restart();
  ctx.poll();
  const usage u5 = usage::now();
  progress.done();

  metrics m;
  m["connections"] = static_cast<double>(n);
  m["silent"] = static_cast<double>(silent);
  m["rounds"] = rounds;
  m["open_wall_s"] = std::chrono::duration<double>(open_time).count();
  m["setup_wall_s"] = wall_between(u0, u1);
  m["setup_cpu_s"] = u1.cpu() - u0.cpu();
  m["run_wall_s"] = wall_between(u1, u2);
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
  summarize(m, "lateness", stats.lateness_ns);
  summarize(m, "round_lag", stats.round_lag_ns);
  if (!stats.round_lag_ns.empty()) {
    // When the worst stall began: the scheduled time of the round it delayed most.
    const auto worst = std::max_element(stats.round_lag_ns.begin(), stats.round_lag_ns.end());
    m["round_lag_max_at_s"] =
        static_cast<double>(worst - stats.round_lag_ns.begin()) * cfg.round_ms / 1000;
  }
  m["quiet_wall_s"] = wall_between(u3, u4);
  m["quiet_cpu_s"] = u4.cpu() - u3.cpu();
  m["quiet_nvcsw"] = static_cast<double>(u4.nvcsw - u3.nvcsw);
  m["quiet_nivcsw"] = static_cast<double>(u4.nivcsw - u3.nivcsw);
  // Less the one wakeup of the timer that ends the phase.
  m["quiet_wakeups_per_s"] = std::max(0.0, m["quiet_nvcsw"] - 1) / m["quiet_wall_s"];
  m["quiet_aborted"] = static_cast<double>(stats.quiet_aborted);
  m["teardown_wall_s"] = wall_between(u4, u5);
  m["maxrss_mib"] = static_cast<double>(u5.maxrss_kb) / 1024.0;
  m["base_rss_mib"] = static_cast<double>(base_rss_kb) / 1024.0;
  m["bytes_per_connection"] =
      static_cast<double>(u5.maxrss_kb - base_rss_kb) * 1024.0 / static_cast<double>(n);
  m["sizeof_connection"] = sizeof(connection);
  m["total_wall_s"] = wall_between(u0, u5);
  m["total_cpu_s"] = u5.cpu() - u0.cpu();
  return m;
}

// ---------------------------------------------------------------------------------------
// Precision: N timers due uniformly over `spread`, nothing else happening.

struct precision_result {
  metrics m;
  std::vector<std::int64_t> lateness_ns;
};

template <typename Setup>
precision_result run_precision(const char* name, Setup setup) {
  asio::io_context ctx(1);
  rng r{cfg.seed};
  std::vector<clock_type::duration> offsets(cfg.timers);
  const auto lead = to_clock(50ms);
  for (auto& o : offsets)
    o = lead + to_clock(std::chrono::duration<double>(static_cast<double>(r.next() >> 11) *
                                                      0x1.0p-53 * cfg.spread_s));
  precision_result res;
  res.lateness_ns.reserve(cfg.timers);
  const usage u0 = usage::now();
  auto keep = setup(ctx, offsets, res.lateness_ns);
  ctx.run();
  const usage u1 = usage::now();
  summarize(res.m, "lateness", res.lateness_ns);
  res.m["timers"] = static_cast<double>(cfg.timers);
  res.m["wall_s"] = wall_between(u0, u1);
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
          ctx, asio_wheel::heartbeat::options{offsets[i], to_clock(1h)});
      it.hb->async_next([&out, &it](const asio::error_code& ec, asio_wheel::heartbeat::event) {
        if (!ec)
          out.push_back((clock_type::now() - it.due).count());
      });
    }
    return items;
  };
}

// ---------------------------------------------------------------------------------------
// Output.

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string grouped(double v) {
  const auto n = static_cast<long long>(std::llround(v));
  std::string s = std::to_string(n < 0 ? -n : n);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3)
    s.insert(static_cast<std::size_t>(i), ",");
  return n < 0 ? "-" + s : s;
}

std::string ms(double us) {
  return fmt(us >= 100000 ? "%.0f ms" : "%.2f ms", us / 1000);
}

// steady / other, where `other` names the implementation of the denominator.
std::string ratio(double steady, double other, const std::string& name) {
  if (other == 0 && steady == 0)
    return "=";
  if (other == 0)
    return name + " 0";
  if (other < 0 || steady < 0)
    return "n/a";
  const double q = steady / other;
  return fmt(q >= 100 ? "%.0fx" : q >= 10 ? "%.1fx" : "%.2fx", q);
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
  return fmt("%.2f s", v);
}
std::string show_mib(double v) {
  return fmt("%.0f MiB", v);
}
std::string show_b(double v) {
  return fmt("%.0f B", v);
}
std::string show_us(double v) {
  return ms(v);
}
std::string show_n(double v) {
  return grouped(v);
}
std::string show_pct(double v) {
  return fmt("%.0f %%", v);
}
std::string show_rate(double v) {
  return fmt("%.1f /s", v);
}
std::string show_ns(double v) {
  return fmt("%.0f ns", v);
}

const row scenario_rows[] = {
    {"run: CPU time (user+sys)", "run_cpu_s", show_s, true},
    {"run: CPU per read", "run_cpu_ns_per_touch", show_ns, true},
    {"run: wall time", "run_wall_s", show_s, true},
    {"run: CPU utilisation", "run_cpu_pct", show_pct, true},
    {"opening the connections (wall)", "open_wall_s", show_s, true},
    {"max RSS", "maxrss_mib", show_mib, true},
    {"memory per connection (RSS)", "bytes_per_connection", show_b, true},
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

void print_scenario_table(const std::map<std::string, metrics>& med, unsigned repeat) {
  const metrics& any = med.begin()->second;
  std::printf(
      "\nheartbeat scenario: %s connections (%s), ping after %g s, drop after %g s of "
      "silence,\n%s reads/s (%g%% of the connections every %g ms), %g%% falling silent, "
      "%g s run, 1 thread%s\n\n",
      grouped(any.at("connections")).c_str(),
      cfg.ramp_s > 0 ? fmt("arriving over the first %g s", cfg.ramp_s).c_str()
                     : "all opened before the run",
      cfg.ping_s, cfg.idle_s,
      grouped(cfg.touch_fraction * static_cast<double>(cfg.connections) * 1000 / cfg.round_ms)
          .c_str(),
      cfg.touch_fraction * 100, cfg.round_ms, cfg.silent_fraction * 100, cfg.seconds,
      repeat > 1 ? (", median of " + std::to_string(repeat) + " runs each").c_str() : "");
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
  const metrics& st = med.at("steady");
  std::printf("  Same traffic (%s reads); asio::steady_timer ran %s handlers (one "
              "operation_aborted per read).\n",
              grouped(st.at("touches")).c_str(), grouped(st.at("handlers")).c_str());
  auto times = [](double a, double b) { return b > 0 ? fmt("%.1fx", a / b) : std::string("-"); };
  for (const auto& v : versus) {
    const metrics& other = med.at(v);
    std::printf("  %s used %s %s CPU time than asio::steady_timer and ran %s handlers.\n",
                impl_label(v),
                times(std::max(st.at("run_cpu_s"), other.at("run_cpu_s")),
                      std::min(st.at("run_cpu_s"), other.at("run_cpu_s")))
                    .c_str(),
                st.at("run_cpu_s") >= other.at("run_cpu_s") ? "less" : "MORE",
                grouped(other.at("handlers")).c_str());
  }
  std::printf("  Idle wakeups with every timer an hour away:");
  for (const auto& i : impls)
    std::printf("%s %.1f/s (%s)", i == impls.front() ? "" : ",",
                med.at(i).at("quiet_wakeups_per_s"), impl_label(i));
  std::printf(".\n\n");
}

void json_metrics(std::FILE* f, const metrics& m, const char* indent) {
  std::fprintf(f, "{");
  bool first = true;
  for (const auto& [k, v] : m) {
    std::fprintf(f, "%s\n%s  \"%s\": %.10g", first ? "" : ",", indent, k.c_str(), v);
    first = false;
  }
  std::fprintf(f, "\n%s}", indent);
}

#if defined(__clang__)
constexpr const char* compiler_name = "clang++ " __clang_version__;
#elif defined(__GNUC__)
constexpr const char* compiler_name = "g++ " __VERSION__;
#else
constexpr const char* compiler_name = "unknown";
#endif

void json_config(std::FILE* f) {
  std::fprintf(
      f,
      "  \"config\": {\"connections\": %zu, \"idle_s\": %g, \"ping_s\": %g, \"seconds\": %g, "
      "\"ramp_s\": %g, "
      "\"round_ms\": %g, \"touch_fraction\": %g, \"silent_fraction\": %g, \"quiet_s\": %g, "
      "\"repeat\": %u, \"seed\": %" PRIu64 ", \"timers\": %zu, \"spread_s\": %g, "
      "\"reads_per_s\": %g, \"asio_version\": \"%d.%d.%d\", \"compiler\": \"%s\"}",
      cfg.connections, cfg.idle_s, cfg.ping_s, cfg.seconds, cfg.ramp_s, cfg.round_ms,
      cfg.touch_fraction, cfg.silent_fraction, cfg.quiet_s, cfg.repeat, cfg.seed, cfg.timers,
      cfg.spread_s, cfg.touch_fraction * static_cast<double>(cfg.connections) * 1000 / cfg.round_ms,
      ASIO_VERSION / 100000, ASIO_VERSION / 100 % 1000, ASIO_VERSION % 100, compiler_name);
}

// Empirical CDF of each implementation's lateness, at most ~1000 points per block.
void write_cdf(const std::string& path,
               const std::vector<std::pair<std::string, std::vector<std::int64_t>>>& sets) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr)
    throw std::runtime_error("cannot write " + path);
  std::fprintf(
      f, "# lateness CDF: lateness_ms fraction_completed_by_then; one block per implementation\n");
  bool first = true;
  for (auto [name, v] : sets) {
    std::sort(v.begin(), v.end());
    if (!first)
      std::fprintf(f, "\n\n");
    first = false;
    std::fprintf(f, "# %s (%zu samples)\n", name.c_str(), v.size());
    const std::size_t step = std::max<std::size_t>(1, v.size() / 1000);
    for (std::size_t i = 0; i < v.size(); i += step)
      std::fprintf(f, "%.6f %.6f\n", static_cast<double>(v[i]) / 1e6,
                   static_cast<double>(i + 1) / static_cast<double>(v.size()));
    if (!v.empty())
      std::fprintf(f, "%.6f 1\n", static_cast<double>(v.back()) / 1e6);
  }
  std::fclose(f);
}

// ---------------------------------------------------------------------------------------
// Child processes (--impl both).

struct child_result {
  metrics m;
  std::vector<std::int64_t> lateness_ns;
};

void write_child_out(const metrics& m) {
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
                                   fmt("%.17g", cfg.idle_s),
                                   "--ping",
                                   fmt("%.17g", cfg.ping_s),
                                   "--seconds",
                                   fmt("%.17g", cfg.seconds),
                                   "--ramp",
                                   fmt("%.17g", cfg.ramp_s),
                                   "--round-ms",
                                   fmt("%.17g", cfg.round_ms),
                                   "--touch-fraction",
                                   fmt("%.17g", cfg.touch_fraction),
                                   "--silent-fraction",
                                   fmt("%.17g", cfg.silent_fraction),
                                   "--quiet",
                                   fmt("%.17g", cfg.quiet_s),
                                   "--seed",
                                   std::to_string(cfg.seed),
                                   "--child-out",
                                   tmpl};
  if (!cfg.progress)
    args.push_back("--no-progress");
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

metrics run_scenario(const std::string& impl) {
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
    const metrics m = run_scenario(impls[0]);
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

  std::map<std::string, metrics> med;
  for (const auto& [impl, rs] : runs) {
    for (const auto& [k, v] : rs.front().m) {
      std::vector<double> values;
      for (const auto& r : rs)
        values.push_back(r.m.count(k) ? r.m.at(k) : 0);
      med[impl][k] = median(values);
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
    write_cdf(cfg.cdf, samples);

  std::size_t early = 0;
  std::string early_by;
  for (const auto& [impl, m] : med) {
    const auto e = static_cast<std::size_t>(m.at("lateness_early"));
    early += e;
    if (e != 0)
      early_by += (early_by.empty() ? "" : ", ") + impl + " " + grouped(static_cast<double>(e));
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
      json_metrics(f, m, "    ");
      first = false;
    }
    std::fprintf(f, "\n  },\n  \"runs\": {");
    first = true;
    for (const auto& [impl, rs] : runs) {
      std::fprintf(f, "%s\n    \"%s\": [", first ? "" : ",", impl.c_str());
      for (std::size_t i = 0; i < rs.size(); ++i) {
        std::fprintf(f, "%s\n      ", i == 0 ? "" : ",");
        json_metrics(f, rs[i].m, "      ");
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

// How far CLOCK_MONOTONIC_COARSE lags CLOCK_MONOTONIC (steady_clock), sampled right after
// short sleeps (like a touch() right after the event loop wakes) and back to back: the
// bound asio-wheel's activity marks rely on. Empty where there is no coarse clock.
metrics coarse_clock_lag() {
  metrics m;
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
  rng r{cfg.seed};
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
  m["lag_p50_us"] = percentile(lag, 50) / 1e3;
  m["lag_p99_us"] = percentile(lag, 99) / 1e3;
  m["lag_max_us"] = static_cast<double>(lag.back()) / 1e3;
  m["samples"] = static_cast<double>(lag.size());
#endif
  return m;
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
  progress_line progress;
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
              grouped(static_cast<double>(cfg.timers)).c_str(), cfg.spread_s);
  std::printf("  %-30s %8s %10s %10s %10s %10s %6s  %s\n", "", "fired", "min", "p50", "p99", "max",
              "early", "check (p99 <= tick + 1 ms, 0 early)");
  for (auto& e : results) {
    const metrics& m = e.res.m;
    // The same bound for every implementation: the wheel's default tick + 1 ms.
    const double limit_us = m.at("tick_us") + 1000;
    const bool ok = m.at("lateness_early") == 0 && m.at("lateness_p99_us") <= limit_us &&
                    m.at("lateness_n") == static_cast<double>(cfg.timers);
    e.res.m["limit_us"] = limit_us;
    e.res.m["pass"] = ok ? 1 : 0;
    pass = pass && ok;
    std::printf("  %-30s %8s %10s %10s %10s %10s %6s  %s (limit %s)\n", e.name.c_str(),
                grouped(m.at("lateness_n")).c_str(), ms(m.at("lateness_min_us")).c_str(),
                ms(m.at("lateness_p50_us")).c_str(), ms(m.at("lateness_p99_us")).c_str(),
                ms(m.at("lateness_max_us")).c_str(), grouped(m.at("lateness_early")).c_str(),
                ok ? "PASS" : "FAIL", ms(limit_us).c_str());
  }
  std::printf("\nprecision check: %s\n", pass ? "PASS" : "FAIL");
  const metrics coarse = coarse_clock_lag();
  if (!coarse.empty())
    std::printf("\nCLOCK_MONOTONIC_COARSE (asio-wheel's activity marks): resolution %s; behind "
                "CLOCK_MONOTONIC by %s (p50), %s (p99), %s (max)\n",
                ms(coarse.at("resolution_us")).c_str(), ms(coarse.at("lag_p50_us")).c_str(),
                ms(coarse.at("lag_p99_us")).c_str(), ms(coarse.at("lag_max_us")).c_str());

  if (!cfg.cdf.empty()) {
    std::vector<std::pair<std::string, std::vector<std::int64_t>>> sets;
    for (const auto& e : results)
      sets.emplace_back(e.impl, e.res.lateness_ns);
    write_cdf(cfg.cdf, sets);
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
      metrics m = e.res.m;
      json_metrics(f, m, "    ");
      first = false;
    }
    std::fprintf(f, "\n  }");
    if (!coarse.empty()) {
      std::fprintf(f, ",\n  \"coarse_clock\": ");
      json_metrics(f, coarse, "  ");
    }
    std::fprintf(f, "\n}\n");
    std::fclose(f);
  }
  return pass ? 0 : 1;
}

} // namespace

int main(int argc, char** argv) {
  try {
    parse_args(argc, argv);
    return cfg.precision ? precision_main() : scenario_main();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "heartbeat_scenario: %s\n", e.what());
    return 3;
  }
}
