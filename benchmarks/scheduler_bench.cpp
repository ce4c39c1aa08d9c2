//
// scheduler_bench.cpp
// ~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// The ceiling under every timer on a shared io_context: how many handlers per second Asio's
// scheduler itself runs when T threads run ONE io_context ("shared"), against T io_contexts
// of one thread ("per-thread"). No timer is involved: 4 chains of handlers per thread, each
// handler posting the next (asio::post from inside a handler, as a completion is queued),
// for --sb_seconds; reported: handlers per second, whole process, per round.
//
// Why it is here: an asio::steady_timer re-arm of a pending wait posts one aborted handler,
// and a wheel shard posts one drain per batch of aborted waits; on the shared context every
// such handler goes through the scheduler's one mutex-guarded queue, whose throughput this
// measures (README "Many threads, one io_context" compares the two).
//
// Flags: --sb_threads=1,2,4,8,16 (thread counts), --sb_seconds=0.5, --sb_rounds=3,
// --sb_chains=4 (chains per thread).

#include "support/bench_support.hpp"

#include <asio/io_context.hpp>
#include <asio/post.hpp>

#include <atomic>
#include <barrier>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace {

struct options {
  std::vector<unsigned> threads{1, 2, 4, 8, 16};
  double seconds = 0.5;
  unsigned rounds = 3;
  unsigned chains = 4;
};

// A comma-separated list of thread counts, each from 1 to 1024.
std::vector<unsigned> thread_counts(const std::string& text) {
  std::vector<unsigned> out;
  for (const char* p = text.c_str(); *p != '\0';) {
    char* end = nullptr;
    const unsigned long t = std::strtoul(p, &end, 10);
    if (end == p || t == 0 || t > 1024 || (*end != ',' && *end != '\0')) {
      std::fprintf(stderr, "scheduler_bench: --sb_threads takes counts from 1 to 1024, "
                           "separated by commas\n");
      std::exit(2);
    }
    out.push_back(static_cast<unsigned>(t));
    p = *end == ',' ? end + 1 : end;
  }
  return out;
}

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    std::string v;
    if (asio_wheel::bench::parse_flag(argv[i], "--sb_threads", v))
      o.threads = thread_counts(v);
    else if (asio_wheel::bench::parse_flag(argv[i], "--sb_seconds", v))
      o.seconds = std::stod(v);
    else if (asio_wheel::bench::parse_flag(argv[i], "--sb_rounds", v))
      o.rounds = static_cast<unsigned>(std::stoul(v));
    else if (asio_wheel::bench::parse_flag(argv[i], "--sb_chains", v))
      o.chains = static_cast<unsigned>(std::stoul(v));
    else {
      std::fprintf(stderr,
                   "scheduler_bench: unknown argument '%s'; flags: --sb_threads=1,2,4 "
                   "--sb_seconds=S --sb_rounds=R --sb_chains=C\n",
                   argv[i]);
      std::exit(2);
    }
  }
  if (o.chains == 0 || o.threads.empty() || !(o.seconds > 0)) {
    std::fprintf(stderr, "scheduler_bench: needs a thread count, at least one chain and "
                         "seconds > 0\n");
    std::exit(2);
  }
  return o;
}

// Counted where they run: no shared counter between the threads while measuring.
thread_local std::uint64_t handlers_here = 0;

struct chain_link {
  asio::io_context* io;
  const std::atomic<bool>* stop;
  void operator()() const {
    ++handlers_here;
    if (!stop->load(std::memory_order_relaxed))
      asio::post(*io, *this);
  }
};

double measure(const options& o, unsigned threads, bool shared) {
  // Each per-thread context is made by its own thread, so that its scheduler comes from that
  // thread's heap: contexts made one after another by one thread lie side by side, and their
  // hot fields can share cache lines (per-thread figures then varied 8x from run to run).
  std::unique_ptr<asio::io_context> one;
  if (shared)
    one = std::make_unique<asio::io_context>(static_cast<int>(threads));
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> total{0};
  std::barrier ready(static_cast<std::ptrdiff_t>(threads) + 1);
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      std::unique_ptr<asio::io_context> own;
      if (!shared)
        own = std::make_unique<asio::io_context>(1);
      asio::io_context& io = shared ? *one : *own;
      for (unsigned c = 0; c < o.chains; ++c)
        asio::post(io, chain_link{&io, &stop});
      ready.arrive_and_wait();
      handlers_here = 0;
      io.run(); // returns once every chain has seen `stop`
      total.fetch_add(handlers_here);
    });
  ready.arrive_and_wait();
  const auto start = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(o.seconds));
  stop.store(true);
  const auto end = std::chrono::steady_clock::now();
  for (auto& th : pool)
    th.join();
  return static_cast<double>(total.load()) / std::chrono::duration<double>(end - start).count();
}

} // namespace

int main(int argc, char** argv) {
  const options o = parse(argc, argv);
  std::printf("scheduler_bench: %u chains per thread, %.2f s per measurement, %u rounds, "
              "hardware threads %u\n",
              o.chains, o.seconds, o.rounds, std::thread::hardware_concurrency());
  for (unsigned t : o.threads)
    for (unsigned r = 0; r < o.rounds; ++r) {
      // Alternate which layout goes first, so that a noisy machine moves both alike.
      const bool shared_first = r % 2 == 0;
      const double a = measure(o, t, shared_first);
      const double b = measure(o, t, !shared_first);
      const double shared = shared_first ? a : b;
      const double per_thread = shared_first ? b : a;
      std::printf("T=%-3u round %u  shared %8.2f M handlers/s  per-thread %8.2f M/s  "
                  "shared / per-thread %.2fx\n",
                  t, r, shared / 1e6, per_thread / 1e6, shared / per_thread);
      std::fflush(stdout);
    }
  return 0;
}
