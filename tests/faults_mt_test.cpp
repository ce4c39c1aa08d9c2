//
// faults_mt_test.cpp
// ~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// The racing faults (the single-threaded ones are in faults_test.cpp):
//
//   * a wait due now, and cancel() (cancel_one(), expires_after(), destruction, or
//     per-operation cancellation on the handler's strand) from another thread at the same
//     moment, many rounds: exactly one completion each, success (never early) or aborted,
//     and the count returned agrees with the handler's error code;
//   * io_context::stop() from another thread while two threads run a stream of
//     expirations, then restart(): every wait completes exactly once;
//   * handlers that throw while two threads run the context: every exception comes out of
//     some run(), every other wait completes exactly once.
//
// Templates over asio::steady_timer and asio_wheel::wheel_timer: what is asserted is what
// Asio's own timer does. As Asio requires, a timer object is used by one thread at a time:
// here the test's main thread owns every timer (its handlers never touch it), and the
// context is run by other threads. Bounded: fewer rounds under the sanitizers; a watchdog
// stops a hung context.
//

#include <asio_wheel/wheel_timer.hpp>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/bind_executor.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/cancellation_type.hpp>
#include <asio/error.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <asio/strand.hpp>

#include <doctest/doctest.h>

#include "asio_test_support.hpp"

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

namespace {

using namespace std::chrono_literals;
using namespace asio_wheel::test;

#if defined(ASIO_WHEEL_TEST_SANITIZED)
constexpr int kScale = 2;
#else
constexpr int kScale = 1;
#endif
constexpr auto kMtWatchdog = 20s;
constexpr auto kRoundLimit = 20s; // a hang guard: a round needs milliseconds, even under TSan

enum class completion : int { none = 0, success, aborted, other };

completion completion_of(const asio::error_code& ec) {
  return !ec ? completion::success : ec == kAborted ? completion::aborted : completion::other;
}

// One wait's record, written by its handler on a runner thread.
struct wait_record {
  std::atomic<int> calls{0};
  std::atomic<completion> result{completion::none};
  std::atomic<bool> early{false};
  sclock::time_point expiry{}; // set by the owner before the wait starts
};

// Records into `r`; `live` counts handler objects (copies and moves included).
struct recording_handler {
  recording_handler(wait_record& r, std::atomic<long>& live) : r_(&r), live_(&live) { ++*live_; }
  recording_handler(const recording_handler& o) : r_(o.r_), live_(o.live_) { ++*live_; }
  recording_handler& operator=(const recording_handler&) = delete;
  ~recording_handler() { --*live_; }

  void operator()(const asio::error_code& ec) const {
    const auto now = sclock::now();
    if (!ec && now < r_->expiry)
      r_->early = true;
    r_->result = completion_of(ec);
    ++r_->calls;
  }

  wait_record* r_;
  std::atomic<long>* live_;
};

bool wait_until(const std::atomic<int>& done, int target, sclock::duration limit) {
  const auto deadline = sclock::now() + limit;
  while (done.load() < target) {
    if (sclock::now() > deadline)
      return false;
    std::this_thread::yield();
  }
  return true;
}

} // namespace

// =======================================================================================
// cancel() racing the expiry
// =======================================================================================

TEST_CASE_TEMPLATE("a wait due now, cancelled from another thread at the same moment: exactly "
                   "one completion, and the count returned agrees with the error code",
                   Timer, TIMER_TYPES) {
  enum class how { cancel, cancel_one, expires_after, two_waits, destroy, slot_on_strand };
  how h = how::cancel;
  SUBCASE("cancel()") {
    h = how::cancel;
  }
  SUBCASE("cancel_one()") {
    h = how::cancel_one;
  }
  SUBCASE("expires_after() on the pending wait") {
    h = how::expires_after;
  }
  SUBCASE("two waits, cancel()") {
    h = how::two_waits;
  }
  SUBCASE("destruction of the timer") {
    h = how::destroy;
  }
  SUBCASE("per-operation cancellation emitted on the handler's strand") {
    h = how::slot_on_strand;
  }

  const int rounds = 120 / kScale;
  constexpr int per_round = 16;
  const int waits_per_timer = h == how::two_waits ? 2 : 1;
  const int n = rounds * per_round * waits_per_timer;
  auto recs = std::make_unique<wait_record[]>(static_cast<std::size_t>(n));
  std::atomic<long> live{0};
  std::atomic<int> completed{0};
  long inconsistent = 0, bad = 0, timeouts = 0, succeeded = 0, aborted = 0;
  std::mt19937 rng(2024);
  // Fresh signals each round (an emit may land after its wait completed), kept until the
  // context is gone: even if a round times out, nothing queued can outlive them.
  struct round_signals {
    explicit round_signals(int k) : sigs(static_cast<std::size_t>(k)) {}
    std::vector<asio::cancellation_signal> sigs;
    std::atomic<int> emitted{0};
  };
  std::vector<std::unique_ptr<round_signals>> signals;

  {
    asio::io_context ioc;
    runner_threads run(ioc, 2, kMtWatchdog, {/*hold_work*/ true, /*rerun_on_exception*/ true});
    std::vector<std::unique_ptr<Timer>> timers;
    std::vector<asio::strand<asio::io_context::executor_type>> strands;
    for (int i = 0; i < per_round; ++i) {
      timers.push_back(std::make_unique<Timer>(ioc));
      strands.push_back(asio::make_strand(ioc));
    }
    int next = 0;
    for (int round = 0; round < rounds && timeouts == 0; ++round) {
      signals.push_back(std::make_unique<round_signals>(per_round));
      auto& sigs = signals.back()->sigs;
      auto& emitted = signals.back()->emitted;
      const int first = next;
      const auto due = sclock::now() + 2ms;
      for (int i = 0; i < per_round; ++i) {
        if (!timers[i])
          timers[i] = std::make_unique<Timer>(ioc);
        timers[i]->expires_at(due);
        for (int k = 0; k < waits_per_timer; ++k) {
          wait_record& r = recs[next++];
          r.expiry = timers[i]->expiry();
          auto handler = [rh = recording_handler(r, live), &completed](asio::error_code ec) {
            rh(ec);
            ++completed;
          };
          if (h == how::slot_on_strand)
            timers[i]->async_wait(asio::bind_cancellation_slot(
                sigs[i].slot(), asio::bind_executor(strands[i], std::move(handler))));
          else
            timers[i]->async_wait(std::move(handler));
        }
      }
      // Spin to a moment around the expiry (from 0.8 ms before to 0.8 ms after), then
      // cancel every timer as fast as possible: the expiry happens meanwhile.
      const auto at =
          due + std::chrono::microseconds(std::uniform_int_distribution<int>(-800, 800)(rng));
      while (sclock::now() < at) {
      }
      std::vector<std::size_t> counts(per_round, 0);
      for (int i = 0; i < per_round; ++i) {
        switch (h) {
        case how::cancel:
        case how::two_waits:
          counts[i] = timers[i]->cancel();
          break;
        case how::cancel_one:
          counts[i] = timers[i]->cancel_one();
          break;
        case how::expires_after:
          counts[i] = timers[i]->expires_after(1h);
          break;
        case how::destroy:
          timers[i].reset();
          break;
        case how::slot_on_strand:
          asio::post(strands[i], [&sig = sigs[i], &emitted] {
            sig.emit(asio::cancellation_type::terminal);
            ++emitted;
          });
          break;
        }
      }
      if (!wait_until(completed, next, kRoundLimit) ||
          (h == how::slot_on_strand && !wait_until(emitted, per_round, kRoundLimit))) {
        ++timeouts;
        break;
      }
      for (int i = 0; i < per_round; ++i) {
        int n_aborted = 0;
        for (int k = 0; k < waits_per_timer; ++k) {
          const wait_record& r = recs[first + i * waits_per_timer + k];
          const completion o = r.result.load();
          if (r.calls != 1 || r.early || (o != completion::success && o != completion::aborted))
            ++bad;
          if (o == completion::aborted)
            ++n_aborted;
          (o == completion::aborted ? aborted : succeeded) += 1;
        }
        // The count returned is exactly the waits that were aborted. (Two waits of one
        // timer usually expire or are cancelled together, but not always: if the owner is
        // preempted between the two async_wait calls, the first can expire alone.)
        switch (h) {
        case how::cancel:
        case how::cancel_one:
        case how::expires_after:
        case how::two_waits:
          if (counts[i] != static_cast<std::size_t>(n_aborted))
            ++inconsistent;
          break;
        default:
          break;
        }
      }
    }
    timers.clear();
    CHECK(run.join());
    CHECK(run.exceptions == 0);
  }
  CHECK(timeouts == 0);
  CHECK(bad == 0);
  CHECK(inconsistent == 0);
  // Nothing completed twice after its round was checked, and nothing is left.
  for (int i = 0; i < n; ++i) {
    if (recs[i].calls.load() > 1) {
      CAPTURE(i);
      CHECK(recs[i].calls.load() == 1);
      break;
    }
  }
  CHECK(live == 0);
  MESSAGE(succeeded << " expired first, " << aborted << " cancelled first");
  // The race is only exercised if both sides won sometimes (not a failure: a very loaded
  // machine can skew it).
  WARN(succeeded > 0);
  WARN(aborted > 0);
}

// =======================================================================================
// stop() from another thread while two threads run, then restart()
// =======================================================================================

TEST_CASE_TEMPLATE("stop() from another thread while two threads run a stream of "
                   "expirations; restart() and run() complete every wait exactly once",
                   Timer, TIMER_TYPES) {
  const int rounds = 12 / (kScale > 1 ? 3 : 1);
  const int per_round = 400 / kScale;
  std::atomic<long> live{0};
  std::atomic<int> completed{0};
  long bad = 0, never = 0, stopped_early = 0;
  std::mt19937 rng(99);
  for (int round = 0; round < rounds; ++round) {
    auto recs = std::make_unique<wait_record[]>(static_cast<std::size_t>(per_round));
    completed = 0;
    {
      asio::io_context ioc;
      std::vector<std::unique_ptr<Timer>> timers;
      const auto t0 = sclock::now();
      for (int i = 0; i < per_round; ++i) {
        // Spread over 0..20 ms, several per tick; a few already due.
        timers.push_back(
            std::make_unique<Timer>(ioc, t0 + std::chrono::microseconds((i * 7919) % 20000) -
                                             std::chrono::microseconds(i % 13 == 0 ? 25000 : 0)));
        recs[i].expiry = timers.back()->expiry();
        timers.back()->async_wait(
            [rh = recording_handler(recs[i], live), &completed](asio::error_code ec) {
              rh(ec);
              ++completed;
            });
      }
      {
        runner_threads run(ioc, 2, kMtWatchdog, {/*hold_work*/ false, /*rerun_on_exception*/ true});
        std::this_thread::sleep_for(
            std::chrono::microseconds(std::uniform_int_distribution<int>(0, 20000)(rng)));
        ioc.stop();
        CHECK(run.join());
        CHECK(run.exceptions == 0);
      }
      if (completed < per_round)
        ++stopped_early;
      ioc.restart();
      {
        runner_threads run(ioc, 2, kMtWatchdog, {/*hold_work*/ false, /*rerun_on_exception*/ true});
        CHECK(run.join());
        CHECK(run.exceptions == 0);
      }
    }
    for (int i = 0; i < per_round; ++i) {
      if (recs[i].calls == 0)
        ++never;
      if (recs[i].calls > 1 || recs[i].early || recs[i].result != completion::success)
        ++bad;
    }
  }
  CHECK(never == 0);
  CHECK(bad == 0);
  CHECK(live == 0);
  MESSAGE(stopped_early << " of " << rounds << " rounds stopped with waits left");
}

// =======================================================================================
// Throwing handlers while two threads run
// =======================================================================================

TEST_CASE_TEMPLATE("handlers that throw while two threads run the context: every exception "
                   "leaves some run(), every other wait completes exactly once",
                   Timer, TIMER_TYPES) {
  const int n = 800 / kScale;
  constexpr int every = 40;
  bool same_tick = true;
  SUBCASE("all due in the same tick") {
    same_tick = true;
  }
  SUBCASE("spread over 10 ms") {
    same_tick = false;
  }

  auto recs = std::make_unique<wait_record[]>(static_cast<std::size_t>(n));
  std::atomic<long> live{0};
  std::atomic<int> order{0};
  int exceptions = 0;
  {
    asio::io_context ioc;
    std::vector<std::unique_ptr<Timer>> timers;
    const auto t0 = sclock::now() + 5ms;
    for (int i = 0; i < n; ++i) {
      timers.push_back(std::make_unique<Timer>(
          ioc, same_tick ? t0 : t0 + std::chrono::microseconds((i * 7919) % 10000)));
      recs[i].expiry = timers.back()->expiry();
      timers.back()->async_wait(
          [rh = recording_handler(recs[i], live), &order](asio::error_code ec) {
            rh(ec);
            if (++order % every == 0)
              throw std::runtime_error("thrown by a handler");
          });
    }
    runner_threads run(ioc, 2, kMtWatchdog, {/*hold_work*/ false, /*rerun_on_exception*/ true});
    CHECK(run.join());
    exceptions = run.exceptions;
  }
  CHECK(exceptions == n / every);
  long bad = 0;
  for (int i = 0; i < n; ++i)
    if (recs[i].calls != 1 || recs[i].early || recs[i].result != completion::success)
      ++bad;
  CHECK(bad == 0);
  CHECK(order == n);
  CHECK(live == 0);
}
