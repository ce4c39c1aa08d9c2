//
// callgrind_ops.cpp
// ~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// Performs exactly K timer operations of one kind on one implementation, inside the function
// `callgrind_measured_region`, so that callgrind can count the instructions of those K
// operations and nothing else (scripts/bench divides by K):
//
//   valgrind --tool=callgrind --collect-atstart=no
//            --toggle-collect=callgrind_measured_region
//            build/release/bin/callgrind_ops steady reset 100000
//
// Usage: callgrind_ops <impl> <op> [K]        (K default 100000)
//   impl  steady  asio::steady_timer
//         wheel   asio_wheel::wheel_timer
//         idle    asio_wheel::idle_timer (op touch only)
//   op    arm     expires_after + async_wait on each of K idle timers (the pending set grows
//                 from 0 to K)
//         cancel  cancel() on each of K pending timers, then run the K aborted handlers
//         reset   expires_after (aborting the pending wait) + async_wait on each of K pending
//                 timers, then run the K aborted handlers: a connection's read, the
//                 steady_timer way
//         fire    run() until the K pending timers, all already due, have completed
//         touch   idle only: touch() on each of K idle timers with a pending wait: a
//                 connection's read, the asio-wheel way
//
// Timers not yet due are armed 60..600 s ahead (uniformly random, fixed seed), so nothing
// fires during arm, cancel, reset or touch, however slowly valgrind runs them; for fire they are
// armed 1..100 ms after a margin longer than the arming takes (0.5 s + 25 us per timer), the
// context and the timers made just after a boundary of the wheel's levels (see
// align_to_wheel_block), and the program sleeps (outside the measured region) until all are due.
// Every handler count is checked; the program exits non-zero if one is off. Prints "<impl> <op>
// K=<K> ok".
//
// callgrind_floor is this program built with ASIO_WHEEL_CALLGRIND_FLOOR defined, which adds
//   impl  floor          the stripped prototype of support/floor_timer.hpp: only what Asio's
//                        contract requires, to measure the floor of each operation
//                        (docs/completion_path.md)
//         floor-stopped  the same, with io_context::stopped() checked before each handler of
//                        a batch but the first, as wheel_timer does
// A program of its own, so that the prototype (which shares the wheel's headers) does not
// change how the compiler inlines wheel_timer here, and so the counts of callgrind_ops.

#include "support/bench_support.hpp"
#ifdef ASIO_WHEEL_CALLGRIND_FLOOR
#include "support/floor_timer.hpp"
#endif

#include <asio_wheel/idle_timer.hpp>
#include <asio_wheel/wheel_timer.hpp>

#include <asio/error.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;
using namespace std::chrono_literals;
using asio_wheel::bench::counts;

counts handled;

// The typical handler: a small lambda capturing one pointer.
inline auto handler() {
  return [c = &handled](const asio::error_code& ec) {
    if (ec == asio::error::operation_aborted)
      ++c->aborted;
    else
      ++c->ok;
  };
}

// Fixed seed: the same deadlines for every implementation.
struct rng : asio_wheel::bench::rng {
  rng() : asio_wheel::bench::rng{42} {}
  // Uniform in [lo, hi] milliseconds.
  clock_type::duration ms(std::uint64_t lo, std::uint64_t hi) {
    return std::chrono::duration_cast<clock_type::duration>(
        std::chrono::milliseconds(lo + next() % (hi - lo + 1)));
  }
};

} // namespace

// The only function whose instructions are collected (callgrind --toggle-collect). Not
// inlined, with C linkage so that its name needs no demangling.
extern "C" __attribute__((noinline)) void
callgrind_measured_region(const std::function<void()>* body) {
  (*body)();
}

namespace {

// For fire: returns just after a boundary of 4096 ticks of the wheel (1 ms ticks, counted
// from time_point::min(): see detail/tick_scale.hpp), so that the wheel, created next, and
// every deadline (about 3.1 s later at K = 1e5) lie in one block of 4096 ticks. Every timer
// is then filed on level 1 and cascades once to level 0, in every run. Without this, the
// deadlines of some runs crossed such a boundary and those timers were filed on level 2, one
// cascade more each: fire read 355 or 405 instructions per timer from one run to the next.
// The same wait for every implementation (steady_timer has no levels).
void align_to_wheel_block() {
  constexpr std::uint64_t block = 4096;
  const auto tick = [] {
    const auto ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(clock_type::now().time_since_epoch());
    return (static_cast<std::uint64_t>(ns.count()) + (std::uint64_t{1} << 63)) / 1'000'000;
  };
  for (;;) {
    const std::uint64_t pos = tick() % block;
    if (pos >= 1 && pos < 64)
      return;
    std::this_thread::sleep_for(std::chrono::milliseconds(block - pos + 1));
  }
}

template <typename Timer>
int run_timer_op(const std::string& op, std::size_t k) {
  if (op == "fire")
    align_to_wheel_block();
  asio::io_context ctx(1);
  std::vector<Timer> timers;
  timers.reserve(k);
  for (std::size_t i = 0; i < k; ++i)
    timers.emplace_back(ctx);
  rng r;
  std::vector<clock_type::duration> later(k);
  for (auto& d : later)
    d = r.ms(60'000, 600'000);

  auto arm_all = [&] {
    for (std::size_t i = 0; i < k; ++i) {
      timers[i].expires_after(later[i]);
      timers[i].async_wait(handler());
    }
  };

  std::function<void()> body;
  counts expect;
  if (op == "arm") {
    body = [&] { arm_all(); };
  } else if (op == "cancel") {
    arm_all();
    ctx.poll();
    body = [&] {
      for (auto& t : timers)
        t.cancel();
      ctx.poll();
    };
    expect.aborted = k;
  } else if (op == "reset") {
    arm_all();
    ctx.poll();
    body = [&] {
      for (std::size_t i = 0; i < k; ++i) {
        timers[i].expires_after(later[k - 1 - i]);
        timers[i].async_wait(handler());
      }
      ctx.poll();
    };
    expect.aborted = k;
  } else if (op == "fire") {
    // Every timer is armed for a time still ahead when its wait starts, so that each takes
    // the path of a timer that comes due (for the wheel: filed in a slot, cascaded, expired
    // in a turn), however slowly valgrind runs the arming: due `margin` + 1..100 ms after the
    // arming began, where the margin is far more than the arming takes (checked: a timer
    // already due when armed takes another path, and the count would then depend on the
    // machine's speed). Nothing is run before the measured region, so every timer is still
    // pending when it starts, and all are due by then.
    const auto margin = 500ms + std::chrono::microseconds(25 * k);
    const auto base = clock_type::now() + margin;
    for (std::size_t i = 0; i < k; ++i) {
      timers[i].expires_at(base + r.ms(1, 100));
      timers[i].async_wait(handler());
    }
    if (const auto took = clock_type::now() - (base - margin); took >= margin) {
      std::fprintf(stderr,
                   "callgrind_ops: arming %zu timers for fire took %lld ms, more than the %lld ms "
                   "margin that keeps them all not yet due when armed; use a smaller K\n",
                   k,
                   static_cast<long long>(
                       std::chrono::duration_cast<std::chrono::milliseconds>(took).count()),
                   static_cast<long long>(
                       std::chrono::duration_cast<std::chrono::milliseconds>(margin).count()));
      return 3;
    }
    std::this_thread::sleep_until(base + 150ms);
    body = [&] { ctx.run(); };
    expect.ok = k;
  } else {
    std::fprintf(stderr, "callgrind_ops: op '%s' is not one of arm, cancel, reset, fire\n",
                 op.c_str());
    return 2;
  }

  handled = {};
  callgrind_measured_region(&body);
  if (op == "arm") {
    // The k waits are pending; count nothing yet.
    expect = {};
  }
  if (handled.ok != expect.ok || handled.aborted != expect.aborted) {
    std::fprintf(stderr, "callgrind_ops: %s: expected %llu ok / %llu aborted, got %llu / %llu\n",
                 op.c_str(), static_cast<unsigned long long>(expect.ok),
                 static_cast<unsigned long long>(expect.aborted),
                 static_cast<unsigned long long>(handled.ok),
                 static_cast<unsigned long long>(handled.aborted));
    return 1;
  }
  return 0;
}

int run_idle_op(const std::string& op, std::size_t k) {
  if (op != "touch") {
    std::fprintf(stderr, "callgrind_ops: impl idle supports op touch only\n");
    return 2;
  }
  asio::io_context ctx(1);
  std::vector<std::unique_ptr<asio_wheel::idle_timer>> timers;
  timers.reserve(k);
  rng r;
  for (std::size_t i = 0; i < k; ++i) {
    timers.push_back(std::make_unique<asio_wheel::idle_timer>(ctx, r.ms(60'000, 600'000)));
    timers.back()->async_wait(handler());
  }
  ctx.poll();
  std::function<void()> body = [&] {
    for (auto& t : timers)
      t->touch();
  };
  handled = {};
  callgrind_measured_region(&body);
  ctx.poll();
  if (handled.ok != 0 || handled.aborted != 0) {
    std::fprintf(stderr, "callgrind_ops: touch completed a wait\n");
    return 1;
  }
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: callgrind_ops steady|wheel|idle arm|cancel|reset|fire|touch [K]\n");
    return 2;
  }
  const std::string impl = argv[1];
  const std::string op = argv[2];
  const std::size_t k = argc > 3 ? static_cast<std::size_t>(std::strtod(argv[3], nullptr)) : 100000;
  if (k == 0) {
    std::fprintf(stderr, "callgrind_ops: K must be positive\n");
    return 2;
  }
  int rc = 2;
  if (impl == "steady")
    rc = run_timer_op<asio::steady_timer>(op, k);
  else if (impl == "wheel")
    rc = run_timer_op<asio_wheel::wheel_timer>(op, k);
  else if (impl == "idle")
    rc = run_idle_op(op, k);
#ifdef ASIO_WHEEL_CALLGRIND_FLOOR
  else if (impl == "floor" || impl == "floor-stopped") {
    asio_wheel::bench::floor::floor_service::default_check_stopped = impl == "floor-stopped";
    rc = run_timer_op<asio_wheel::bench::floor::floor_timer>(op, k);
  }
#endif
  else
    std::fprintf(stderr, "callgrind_ops: impl '%s' is not one of steady, wheel, idle\n",
                 impl.c_str());
  if (rc == 0)
    std::printf("%s %s K=%zu ok\n", impl.c_str(), op.c_str(), k);
  return rc;
}
