//
// support/bench_support.hpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_BENCH_SUPPORT_HPP
#define ASIO_WHEEL_BENCH_SUPPORT_HPP

// What the benchmark programs share, so that they measure, count and report the same way:
//
//   * time and process figures: seconds(), to_clock(), secs(), process_cpu_seconds(),
//     usage (getrusage: CPU, context switches, max RSS) and wall_between(), heap_in_use()
//     (mallinfo2);
//   * statistics: median(), percentile(), summarize() (a lateness summary into metrics);
//   * the typical handler: counts and make_handler();
//   * rng: splitmix64 with a fixed seed, so that every implementation sees the same draws;
//   * command lines: parse_flag() for the --<prefix>_<name>=value flags that sit beside
//     Google Benchmark's; command_line and report_options for programs with their own, and
//     run_main() for their main();
//   * warm_object(): a timer object's cache lines read (untimed), as a server's read handler
//     has just touched the connection holding it;
//   * output: fmt(), grouped(), ms(), progress_line (stderr), json_metrics(), json_build()
//     and write_cdf() (the lateness CDF blocks benchmarks/plot/lateness_cdf.gnuplot draws).
//
// Everything is in asio_wheel::bench and inline: each benchmark is one translation unit, and
// uses what it needs. Linux only (getrusage, mallinfo2, /proc), as the benchmarks are.

#include <asio/error.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/version.hpp>

#include <malloc.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace asio_wheel::bench {

using clock_type = std::chrono::steady_clock;

// ---------------------------------------------------------------------------------------
// Time and process figures.

inline double seconds(clock_type::duration d) {
  return std::chrono::duration<double>(d).count();
}

template <typename D>
clock_type::duration to_clock(D d) {
  return std::chrono::duration_cast<clock_type::duration>(d);
}

inline clock_type::duration secs(double s) {
  return to_clock(std::chrono::duration<double>(s));
}

inline double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// The process's resource usage and the wall clock, read together.
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

inline double wall_between(const usage& a, const usage& b) {
  return seconds(b.wall - a.wall);
}

// Bytes of heap in use: the arena's allocated blocks plus mmapped ones.
inline std::size_t heap_in_use() {
  const struct mallinfo2 mi = ::mallinfo2();
  return mi.uordblks + mi.hblkhd;
}

// ---------------------------------------------------------------------------------------
// Statistics.

using metrics = std::map<std::string, double>;

inline double median(std::vector<double> v) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 != 0 ? v[m] : (v[m - 1] + v[m]) / 2;
}

// The p-th percentile of sorted samples, interpolated between neighbours.
inline double percentile(const std::vector<std::int64_t>& sorted, double p) {
  if (sorted.empty())
    return 0;
  const double rank = p / 100.0 * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<std::size_t>(rank);
  const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = rank - static_cast<double>(lo);
  return static_cast<double>(sorted[lo]) * (1 - frac) + static_cast<double>(sorted[hi]) * frac;
}

// ---------------------------------------------------------------------------------------
// The machine's wake-ups, and a loop that never sleeps (--busy).

// How late this machine wakes a thread that sleeps 1 ms (std::this_thread::sleep_until,
// 2,000 times), as one line: every timer whose loop sleeps between expiries pays it, whatever
// its queue. On a virtual machine the timer interrupt of a halted virtual CPU can come
// milliseconds late (benchmarks/RESULTS.md, "What held the sleeping loop"), which a loop
// kept busy never pays.
inline std::string wakeup_baseline() {
  std::vector<std::int64_t> late;
  late.reserve(2000);
  for (int i = 0; i < 2000; ++i) {
    const auto due = clock_type::now() + std::chrono::milliseconds(1);
    std::this_thread::sleep_until(due);
    late.push_back(
        std::chrono::duration_cast<std::chrono::nanoseconds>(clock_type::now() - due).count());
  }
  std::sort(late.begin(), late.end());
  char line[200];
  std::snprintf(line, sizeof line,
                "a 1 ms sleep wakes late by p50 %.3f / p99 %.3f / p99.9 %.3f / max %.3f ms "
                "(2000 sleeps)",
                percentile(late, 50) / 1e6, percentile(late, 99) / 1e6,
                percentile(late, 99.9) / 1e6, static_cast<double>(late.back()) / 1e6);
  return line;
}

// Posts to `ctx` a handler that posts itself again while busy() is true, so that the loop
// never sleeps in epoll_wait, like a server's loop with I/O to do: timers' expiries are then
// found by polls of the reactor, and the machine's late wake-ups count for no timer.
template <typename Predicate>
void keep_busy_while(asio::io_context& ctx, Predicate busy) {
  struct spinner {
    asio::io_context* ctx;
    Predicate busy;
    void operator()() const {
      if (busy())
        asio::post(*ctx, *this);
    }
  };
  asio::post(ctx, spinner{&ctx, std::move(busy)});
}

// Lateness summary of ns samples into m under `prefix` (microseconds).
inline void summarize(metrics& m, const std::string& prefix, std::vector<std::int64_t> samples) {
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
// Handlers.

struct counts {
  std::uint64_t ok = 0;
  std::uint64_t aborted = 0;
};

// The typical handler: a small lambda capturing one pointer.
inline auto make_handler(counts* c) {
  return [c](const asio::error_code& ec) {
    if (ec)
      ++c->aborted;
    else
      ++c->ok;
  };
}

// ---------------------------------------------------------------------------------------
// Random numbers: splitmix64, a couple of nanoseconds and no memory traffic.

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

// ---------------------------------------------------------------------------------------
// Command lines.

// "--<name>=<value>": true, with `value` set; anything else: false (left for the next check,
// or for Google Benchmark).
inline bool parse_flag(const char* arg, const char* name, std::string& value) {
  const std::size_t len = std::strlen(name);
  if (std::strncmp(arg, name, len) != 0 || arg[len] != '=')
    return false;
  value = arg + len + 1;
  return true;
}

// The command line of a program with options of its own, read one option at a time:
//
//   bench::command_line args("precision_bench", argc, argv);
//   while (args.next()) {
//     if (args.is("--timers"))
//       cfg.timers = static_cast<std::size_t>(args.number());
//     else ...
//     else
//       args.unknown();
//   }
//
// Every mistake is a usage error: exit status 2, with a message that names the option and
// points at the program's source, whose header documents its options.
class command_line {
public:
  command_line(const char* program, int argc, char** argv)
      : program_(program), argc_(argc), argv_(argv) {}

  // Moves to the next option; false once all are read.
  bool next() {
    if (++i_ >= argc_)
      return false;
    option_ = argv_[i_];
    return true;
  }

  bool is(const char* name) const { return option_ == name; }

  // The argument after the option.
  const char* value() {
    if (i_ + 1 >= argc_)
      error(option_ + " needs a value");
    return argv_[++i_];
  }

  // The argument after the option, a finite number >= 0.
  double number() {
    const char* text = value();
    char* end = nullptr;
    const double v = std::strtod(text, &end);
    if (end == text || *end != '\0' || !std::isfinite(v) || v < 0)
      error("bad value for " + option_ + ": '" + text + "'");
    return v;
  }

  [[noreturn]] void unknown() const { error("unknown argument '" + option_ + "'"); }

  [[noreturn]] void error(const std::string& what) const {
    std::fprintf(stderr, "%s: %s (see the header of benchmarks/%s.cpp)\n", program_, what.c_str(),
                 program_);
    std::exit(2);
  }

private:
  const char* program_;
  int argc_;
  char** argv_;
  int i_ = 0;
  std::string option_; // the option being read
};

// The options of the programs that draw from a seed, show progress on stderr and write their
// results as JSON and lateness CDFs.
struct report_options {
  std::uint64_t seed = 42;
  bool progress = true;
  std::string json;
  std::string cdf;

  // Takes the current option if it is one of --seed S, --json FILE, --cdf FILE, --no-progress.
  bool take(command_line& args) {
    if (args.is("--seed"))
      seed = static_cast<std::uint64_t>(args.number());
    else if (args.is("--json"))
      json = args.value();
    else if (args.is("--cdf"))
      cdf = args.value();
    else if (args.is("--no-progress"))
      progress = false;
    else
      return false;
    return true;
  }
};

// The body of main(): an exception escaping it is the program's error, exit status 3.
template <typename Body>
int run_main(const char* program, Body body) {
  try {
    return body();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return 3;
  }
}

// ---------------------------------------------------------------------------------------
// Caches.

// Brings every cache line of the object in (not what it points to).
template <typename T>
void warm_object(const T& t) {
  const auto* p = reinterpret_cast<const volatile unsigned char*>(&t);
  for (std::size_t off = 0; off < sizeof(T); off += 64)
    (void)p[off];
  (void)p[sizeof(T) - 1];
}

// ---------------------------------------------------------------------------------------
// Output.

inline std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// 1234567 -> "1,234,567".
inline std::string grouped(double v) {
  const auto n = static_cast<long long>(std::llround(v));
  std::string s = std::to_string(n < 0 ? -n : n);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3)
    s.insert(static_cast<std::size_t>(i), ",");
  return n < 0 ? "-" + s : s;
}

// Microseconds, shown in milliseconds.
inline std::string ms(double us) {
  return fmt(us >= 100000 ? "%.0f ms" : "%.2f ms", us / 1000);
}

// Progress on stderr: one \r-updated line on a terminal, plain lines otherwise.
class progress_line {
public:
  explicit progress_line(bool enabled) : enabled_(enabled), tty_(isatty(STDERR_FILENO) == 1) {}

  // Prints if enough time has passed since the last print (or `force`).
  template <typename... Args>
  void update(bool force, const char* format, Args... args) {
    using namespace std::chrono_literals;
    if (!enabled_)
      return;
    const auto now = clock_type::now();
    if (!force && now - last_ < (tty_ ? 250ms : 2s))
      return;
    last_ = now;
    char buf[256];
    std::snprintf(buf, sizeof buf, format, args...);
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
  bool enabled_;
  bool tty_;
  bool open_ = false;
  clock_type::time_point last_{};
};

// A JSON object of the metrics, keys in order, its closing brace at `indent`.
inline void json_metrics(std::FILE* f, const metrics& m, const char* indent) {
  std::fprintf(f, "{");
  bool first = true;
  for (const auto& [k, v] : m) {
    std::fprintf(f, "%s\n%s  \"%s\": %.10g", first ? "" : ",", indent, k.c_str(), v);
    first = false;
  }
  std::fprintf(f, "\n%s}", indent);
}

#if defined(__clang__)
inline constexpr const char* compiler_name = "clang++ " __clang_version__;
#elif defined(__GNUC__)
inline constexpr const char* compiler_name = "g++ " __VERSION__;
#else
inline constexpr const char* compiler_name = "unknown";
#endif

// The JSON members naming what the program was built with: "asio_version", "compiler".
inline void json_build(std::FILE* f) {
  std::fprintf(f, "\"asio_version\": \"%d.%d.%d\", \"compiler\": \"%s\"", ASIO_VERSION / 100000,
               ASIO_VERSION / 100 % 1000, ASIO_VERSION % 100, compiler_name);
}

// Empirical CDF of each implementation's lateness, at most ~1000 points per block.
inline void write_cdf(const std::string& path,
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

} // namespace asio_wheel::bench

#endif // ASIO_WHEEL_BENCH_SUPPORT_HPP
