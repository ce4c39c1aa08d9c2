//
// threads_bench.cpp
// ~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// A server's timeouts on T threads: N connections split over the threads, each thread
// re-arming its own connections' timeouts as a server does on every read, and then a burst
// of N expiries. Two layouts, side by side in one run:
//
//   shared     ONE io_context run by T threads (Beast's examples: ioc.run() on N threads)
//   per-thread T io_contexts, one thread each (the layout without shared state: the bound)
//
// and three timers:
//
//   steady     asio::steady_timer: expires_after(30 s) + async_wait on the pending wait,
//              which aborts it (one operation_aborted handler)
//   wheel      asio_wheel::wheel_timer, the same calls
//   idle       asio_wheel::idle_timer: touch() (its wait re-arms itself lazily)
//
// Each thread arms its connections' waits itself (so that a wheel files them in its own
// shard, as a server's connection does on the thread that accepted it), then all threads
// re-arm for --tb_seconds, each in batches of 256 followed by poll() of its context (which
// runs aborted handlers: on the shared context, any thread's). Reported: re-arms per second,
// whole process (the median over --tb_rounds rounds; the rounds alternate the timers and
// the layouts, so that a noisy machine moves them alike).
//
// The fire phase (steady and wheel; an idle_timer's deadline is its last activity plus its
// timeout, not an instant): every thread arms its N/T waits for one instant (--tb_fire_ms after the
// start, one per connection, all pending at once), then runs its context until all N
// handlers ran. Reported: expiries per second from the instant to the last handler, and
// how many threads ran at least 1% of the handlers (the "threads" column: on the shared
// context, the steady_timer's reactor and a single-lock wheel complete each batch on one
// thread at a time).
//
// Ratios printed at the end, from the medians of this run: wheel / steady and idle / steady
// per layout and thread count, and shared / per-thread per timer.
//
// Flags: --tb_threads=1,2,4 (thread counts), --tb_n=1000000 (connections), --tb_seconds=1,
// --tb_rounds=3, --tb_fire_ms=0 (0: no fire phase; else the delay before the instant,
// which must outlast arming N waits), --tb_impls=steady,wheel,idle,
// --tb_layouts=shared,per-thread (one of them alone: to profile it), --tb_in_handlers=0
// (1: each thread's batches run as a chain of handlers on the context, each batch queueing
// the next, as a server re-arms inside its read handlers; on the shared context any thread
// runs any chain's next batch, and a timer is re-armed from whatever thread runs it),
// --tb_stats=0 (1: after each wheel and idle measurement, the context's statistics: aborted
// waits per completion batch, i.e. how many a drain found queued; of the first context in
// the per-thread layout; with --tb_in_handlers=1, also the share of the chains' batches that
// ran away from the chain's own thread, whose shard holds the chain's timers, and the share
// that ran on another thread than the chain's batch before; and, measured right before each
// measurement, how long a cache line takes from one thread to another and back).

#include <asio_wheel/idle_timer.hpp>
#include <asio_wheel/statistics.hpp>
#include <asio_wheel/wheel_timer.hpp>

#include <asio/error.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

struct options {
  std::vector<unsigned> threads{1, 2};
  std::size_t n = 1000000;
  double seconds = 1.0;
  unsigned rounds = 3;
  unsigned fire_ms = 0;
  std::vector<std::string> impls{"steady", "wheel", "idle"};
  std::vector<std::string> layouts{"shared", "per-thread"};
  bool in_handlers = false;
  bool stats = false;
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= s.size()) {
    const std::size_t comma = s.find(',', start);
    out.push_back(s.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos)
      break;
    start = comma + 1;
  }
  return out;
}

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* name) -> const char* {
      const std::size_t len = std::strlen(name);
      return a.compare(0, len, name) == 0 ? a.c_str() + len : nullptr;
    };
    const char* v = nullptr;
    if ((v = value("--tb_threads="))) {
      o.threads.clear();
      for (const auto& t : split(v))
        o.threads.push_back(static_cast<unsigned>(std::stoul(t)));
    } else if ((v = value("--tb_n="))) {
      o.n = static_cast<std::size_t>(std::stod(v));
    } else if ((v = value("--tb_seconds="))) {
      o.seconds = std::stod(v);
    } else if ((v = value("--tb_rounds="))) {
      o.rounds = static_cast<unsigned>(std::stoul(v));
    } else if ((v = value("--tb_fire_ms="))) {
      o.fire_ms = static_cast<unsigned>(std::stoul(v));
    } else if ((v = value("--tb_impls="))) {
      o.impls = split(v);
    } else if ((v = value("--tb_layouts="))) {
      o.layouts = split(v);
    } else if ((v = value("--tb_in_handlers="))) {
      o.in_handlers = std::string(v) == "1" || std::string(v) == "true";
    } else if ((v = value("--tb_stats="))) {
      o.stats = std::string(v) == "1" || std::string(v) == "true";
    } else {
      std::fprintf(stderr,
                   "threads_bench: unknown argument '%s'; flags: --tb_threads=1,2,4 --tb_n=N "
                   "--tb_seconds=S --tb_rounds=R --tb_fire_ms=MS --tb_impls=steady,wheel,idle "
                   "--tb_layouts=shared,per-thread --tb_in_handlers=0|1 --tb_stats=0|1\n",
                   argv[i]);
      std::exit(2);
    }
  }
  for (unsigned t : o.threads)
    if (t == 0 || o.n < t) {
      std::fprintf(stderr, "threads_bench: thread counts must be from 1 to --tb_n\n");
      std::exit(2);
    }
  return o;
}

// Expiries counted where they run: no shared counter between the threads. Aborted waits
// (every re-arm of steady and wheel aborts one) are not counted.
thread_local std::uint64_t handlers_here = 0;

// The index of the benchmark's thread that runs this code (in_handlers: which thread runs a
// chain's batch).
thread_local unsigned thread_index = 0;

void count(const asio::error_code& ec) {
  handlers_here += !ec;
}

// The timer calls of each kind: arm a fresh connection, re-arm a pending one, arm for an
// instant (fire phase). asio::steady_timer and wheel_timer take the same calls.
template <typename Timer>
struct calls {
  static constexpr bool fires = true;
  static auto make(asio::io_context& io) { return std::make_unique<Timer>(io); }
  static void arm(Timer& t) {
    t.expires_after(30s);
    t.async_wait(count);
  }
  static void rearm(Timer& t) { arm(t); }
  static void fire_at(Timer& t, clock_type::time_point at) {
    t.expires_at(at);
    t.async_wait(count);
  }
};

template <>
struct calls<asio_wheel::idle_timer> {
  static constexpr bool fires = false; // its deadline is its last activity + timeout
  static auto make(asio::io_context& io) {
    return std::make_unique<asio_wheel::idle_timer>(io, 30s);
  }
  static void arm(asio_wheel::idle_timer& t) { t.async_wait(count); }
  static void rearm(asio_wheel::idle_timer& t) { t.touch(); }
  static void fire_at(asio_wheel::idle_timer&, clock_type::time_point) {}
};

struct result {
  double rearms_per_s = 0;
  // --tb_stats: of the first context, over the re-arm phase (fire phase excluded)
  std::uint64_t aborted = 0; // waits completed with operation_aborted
  std::uint64_t batches = 0; // drains and expiry turns that completed waits
  // --tb_in_handlers: the chains' batches; those that ran on another thread than the
  // chain's own (whose shard holds its timers' waits: each thread arms its chain's timers,
  // and a re-armed timer stays filed where it is, see README "Lazy re-arm"); and those that
  // ran on another thread than the chain's batch before
  std::uint64_t links = 0;
  std::uint64_t away = 0;
  std::uint64_t moves = 0;
  double fires_per_s = 0;
  unsigned fire_threads = 0; // threads that ran >= 1% of the fire phase's handlers
};

// One measurement: T threads on one shared context or on T contexts.
template <typename Timer>
result measure(const options& o, unsigned threads, bool shared) {
  // A per-thread context is made by its own thread (in body), so that its scheduler and
  // service come from that thread's heap: made one after another by one thread, contexts lie
  // side by side and their hot fields can share cache lines (benchmarks/scheduler_bench.cpp
  // measured per-thread figures 8x apart from run to run that way).
  std::vector<std::unique_ptr<asio::io_context>> ctx(shared ? 1 : threads);
  if (shared)
    ctx[0] = std::make_unique<asio::io_context>(static_cast<int>(threads));
  std::vector<std::vector<std::unique_ptr<Timer>>> timers(threads);
  std::vector<std::uint64_t> rearms(threads, 0);
  // A chain's counts, written by whichever thread runs its batch: a line of their own.
  struct alignas(64) chain_counts {
    std::uint64_t links = 0;
    std::uint64_t away = 0;
    std::uint64_t moves = 0;
    unsigned last = 0; // the thread that ran the chain's batch before
  };
  std::vector<chain_counts> chains(threads);
  std::vector<std::uint64_t> fired(threads, 0);
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> fired_total{0};
  std::barrier sync(static_cast<std::ptrdiff_t>(threads) + 1);
  clock_type::time_point fire_instant{};
  clock_type::time_point last_fire{};
  std::atomic<std::int64_t> last_fire_ns{0};
  const bool fire = o.fire_ms != 0 && calls<Timer>::fires;

  auto body = [&](unsigned me) {
    thread_index = me;
    if (!shared)
      ctx[me] = std::make_unique<asio::io_context>(1);
    asio::io_context& io = *ctx[shared ? 0 : me];
    const std::size_t mine = o.n / threads + (me < o.n % threads ? 1 : 0);
    auto& own = timers[me];
    own.reserve(mine);
    for (std::size_t i = 0; i < mine; ++i) {
      own.push_back(calls<Timer>::make(io));
      calls<Timer>::arm(*own.back());
    }
    sync.arrive_and_wait(); // armed
    sync.arrive_and_wait(); // go
    std::uint64_t done = 0;
    std::size_t next = 0;
    auto batch = [&] {
      for (int k = 0; k < 256; ++k) {
        calls<Timer>::rearm(*own[next]);
        if (++next == own.size())
          next = 0;
      }
      done += 256;
    };
    if (!o.in_handlers) {
      while (!stop.load(std::memory_order_relaxed)) {
        batch();
        io.poll();
      }
    } else {
      // This thread's connections as a chain of handlers, each a batch that queues the
      // next: on the shared context any thread runs it, as a connection's read handler.
      // `done`, `next` and `counts` are the chain's: one of its handlers runs at a time.
      struct link {
        asio::io_context& io;
        decltype(batch)& run;
        std::atomic<bool>& stop;
        std::atomic<bool>& ended;
        chain_counts& counts;
        unsigned owner;
        void operator()() const {
          if (stop.load(std::memory_order_relaxed)) {
            ended.store(true, std::memory_order_release);
            return;
          }
          ++counts.links;
          counts.away += thread_index != owner;
          counts.moves += thread_index != counts.last;
          counts.last = thread_index;
          run();
          asio::post(io, *this);
        }
      };
      std::atomic<bool> ended{false};
      chains[me].last = me;
      asio::post(io, link{io, batch, stop, ended, chains[me], me});
      // The waits keep the context busy: run it a slice at a time until the chain ends.
      while (!ended.load(std::memory_order_acquire))
        io.run_one_for(1ms);
    }
    rearms[me] = done;
    sync.arrive_and_wait(); // stopped
    if (!fire)
      return;
    sync.arrive_and_wait(); // fire_instant set
    handlers_here = 0;
    for (auto& t : own)
      calls<Timer>::fire_at(*t, fire_instant);
    sync.arrive_and_wait(); // all armed for the instant
    // run_for() may return while other threads still complete: loop until all did.
    while (fired_total.load(std::memory_order_acquire) < o.n) {
      handlers_here = 0;
      io.restart();
      io.run_for(2ms);
      fired[me] += handlers_here;
      if (handlers_here != 0) {
        fired_total.fetch_add(handlers_here, std::memory_order_acq_rel);
        const auto now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                clock_type::now().time_since_epoch())
                                .count();
        std::int64_t seen = last_fire_ns.load(std::memory_order_relaxed);
        while (now_ns > seen && !last_fire_ns.compare_exchange_weak(seen, now_ns)) {
        }
      }
    }
    sync.arrive_and_wait(); // fired
  };

  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t)
    pool.emplace_back(body, t);
  sync.arrive_and_wait(); // armed
  const auto start = clock_type::now();
  sync.arrive_and_wait(); // go
  std::this_thread::sleep_for(std::chrono::duration<double>(o.seconds));
  stop.store(true);
  const auto end = clock_type::now();
  sync.arrive_and_wait(); // stopped
  result r;
  std::uint64_t total = 0;
  for (auto n : rearms)
    total += n;
  r.rearms_per_s = static_cast<double>(total) / std::chrono::duration<double>(end - start).count();
  for (unsigned t = 0; t < threads; ++t) {
    r.links += chains[t].links;
    r.away += chains[t].away;
    r.moves += chains[t].moves;
  }
  if constexpr (!std::is_same_v<Timer, asio::steady_timer>) {
    if (o.stats) {
      // The re-arm phase's waits all completed aborted (none is due for 30 s), each batch
      // from one handler on the context: how many a drain found queued.
      const asio_wheel::wheel_statistics st = asio_wheel::get_statistics(*ctx[0], false);
      r.aborted = st.waits_aborted;
      r.batches = st.batches;
    }
  }
  if (fire) {
    fire_instant = clock_type::now() + std::chrono::milliseconds(o.fire_ms);
    sync.arrive_and_wait(); // fire_instant set
    sync.arrive_and_wait(); // all armed
    if (clock_type::now() > fire_instant)
      std::fprintf(stderr, "threads_bench: arming took longer than --tb_fire_ms=%u\n", o.fire_ms);
    sync.arrive_and_wait(); // fired
    last_fire = clock_type::time_point(std::chrono::nanoseconds(last_fire_ns.load()));
    r.fires_per_s = static_cast<double>(o.n) /
                    std::max(1e-9, std::chrono::duration<double>(last_fire - fire_instant).count());
    std::uint64_t all = 0;
    for (auto n : fired)
      all += n;
    for (auto n : fired)
      r.fire_threads += n * 100 >= all;
  }
  for (auto& t : pool)
    t.join();
  // Timers before their contexts; the contexts destroy what is still queued.
  timers.clear();
  return r;
}

// Nanoseconds for one cache line to go from one thread to another and back (two threads,
// unpinned): what each line that a shard shares between threads costs. On a VM it changes
// with where the host runs the virtual CPUs, and the shared layout's figures with it.
double line_round_trip_ns() {
  constexpr int trips = 200000;
  alignas(64) std::atomic<int> turn{0};
  // Spins, then yields: a process held to one CPU (taskset, a cgroup) runs the two threads
  // in turn, and pure spinning would wait out a time slice per trip (minutes in all).
  auto await = [&](int value) {
    for (int spins = 0; turn.load(std::memory_order_acquire) != value; ++spins)
      if (spins >= 4096)
        std::this_thread::yield();
  };
  std::thread other([&] {
    for (int i = 0; i < trips; ++i) {
      await(1);
      turn.store(0, std::memory_order_release);
    }
  });
  const auto start = clock_type::now();
  for (int i = 0; i < trips; ++i) {
    turn.store(1, std::memory_order_release);
    await(0);
  }
  const auto end = clock_type::now();
  other.join();
  return std::chrono::duration<double, std::nano>(end - start).count() / trips;
}

result run_one(const options& o, const std::string& impl, unsigned threads, bool shared) {
  if (impl == "steady")
    return measure<asio::steady_timer>(o, threads, shared);
  if (impl == "wheel")
    return measure<asio_wheel::wheel_timer>(o, threads, shared);
  if (impl == "idle")
    return measure<asio_wheel::idle_timer>(o, threads, shared);
  std::fprintf(stderr, "threads_bench: unknown timer '%s' (steady, wheel, idle)\n", impl.c_str());
  std::exit(2);
}

double median(std::vector<double> v) {
  if (v.empty())
    return 0; // a layout not run (--tb_layouts): its ratios print as inf or nan
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

} // namespace

int main(int argc, char** argv) {
  const options o = parse(argc, argv);
  std::printf("threads_bench: N=%zu connections, %.2f s per measurement, %u rounds, "
              "hardware threads %u, fire phase %s, re-arms %s\n",
              o.n, o.seconds, o.rounds, std::thread::hardware_concurrency(),
              o.fire_ms ? "on" : "off", o.in_handlers ? "in handlers" : "in a loop");
  // key: impl, layout, threads
  std::map<std::string, std::vector<result>> runs;
  auto key = [](const std::string& impl, bool shared, unsigned t) {
    return impl + (shared ? "/shared/" : "/per-thread/") + std::to_string(t);
  };
  for (unsigned round = 0; round < o.rounds; ++round) {
    for (unsigned t : o.threads) {
      for (int layout = 0; layout < 2; ++layout) {
        const bool shared = (layout + round) % 2 == 0; // alternate which layout goes first
        if (std::find(o.layouts.begin(), o.layouts.end(), shared ? "shared" : "per-thread") ==
            o.layouts.end())
          continue;
        for (std::size_t i = 0; i < o.impls.size(); ++i) {
          const std::string& impl = o.impls[(i + round) % o.impls.size()];
          // Right before the measurement, whose shared layout it explains.
          const double trip_ns =
              o.stats && std::thread::hardware_concurrency() >= 2 ? line_round_trip_ns() : 0;
          const result r = run_one(o, impl, t, shared);
          runs[key(impl, shared, t)].push_back(r);
          std::printf("round %u  %-7s %-10s T=%-3u  %8.3f M re-arms/s", round, impl.c_str(),
                      shared ? "shared" : "per-thread", t, r.rearms_per_s / 1e6);
          if (o.fire_ms && r.fire_threads != 0)
            std::printf("  %8.3f M fires/s on %u threads", r.fires_per_s / 1e6, r.fire_threads);
          if (r.batches != 0)
            std::printf("  %.1f aborted waits per batch (%s)",
                        static_cast<double>(r.aborted) / static_cast<double>(r.batches),
                        shared ? "the context" : "the first context");
          if (trip_ns != 0)
            std::printf("  line round trip %.0f ns", trip_ns);
          if (o.stats && r.links != 0)
            std::printf("  batches away from the chain's thread %.1f%%, moved %.1f%%",
                        100.0 * static_cast<double>(r.away) / static_cast<double>(r.links),
                        100.0 * static_cast<double>(r.moves) / static_cast<double>(r.links));
          std::printf("\n");
          std::fflush(stdout);
        }
      }
    }
  }
  auto med = [&](const std::string& k, double result::*field) {
    std::vector<double> v;
    for (const auto& r : runs[k])
      v.push_back(r.*field);
    return median(v);
  };
  std::printf("\nMedians (M re-arms/s; fire: M expiries/s and threads that completed >= 1%%)\n");
  std::printf("| T | layout | timer | re-arms/s | x steady | shared / per-thread |%s\n",
              o.fire_ms ? " fires/s | fire threads |" : "");
  std::printf("|---:|---|---|---:|---:|---:|%s\n", o.fire_ms ? "---:|---:|" : "");
  for (unsigned t : o.threads)
    for (int layout = 0; layout < 2; ++layout) {
      const bool shared = layout == 0;
      for (const auto& impl : o.impls) {
        const double v = med(key(impl, shared, t), &result::rearms_per_s);
        const bool has_steady =
            std::find(o.impls.begin(), o.impls.end(), "steady") != o.impls.end();
        const double steady = has_steady ? med(key("steady", shared, t), &result::rearms_per_s) : 0;
        const double per_thread = med(key(impl, false, t), &result::rearms_per_s);
        std::printf("| %u | %s | %s | %.3f M | %s | %.2fx |", t, shared ? "shared" : "per-thread",
                    impl.c_str(), v / 1e6,
                    has_steady ? (std::to_string(v / steady).substr(0, 5) + "x").c_str() : "-",
                    v / per_thread);
        if (o.fire_ms && impl == "idle") {
          std::printf(" - | - |");
        } else if (o.fire_ms) {
          std::vector<double> threads_used;
          for (const auto& r : runs[key(impl, shared, t)])
            threads_used.push_back(r.fire_threads);
          std::printf(" %.3f M | %.0f |", med(key(impl, shared, t), &result::fires_per_s) / 1e6,
                      median(threads_used));
        }
        std::printf("\n");
      }
    }
  return 0;
}
