//
// sweep_mt_test.cpp
// ~~~~~~~~~~~~~~~~~
//
// One drain for a context's shards, the sweep (detail/drain_sweep.hpp), built to start at 2
// shards of 4 (ASIO_WHEEL_SHARDS=4, ASIO_WHEEL_SWEEP_FROM_SHARDS=2; see CMakeLists.txt; by
// default a context sweeps from 8 shards), on a context whose handlers have run on two
// threads (the sweep's other condition). Each case aborts waits whose timers were armed on
// four threads, so filed in four shards, and completes them in one sweep, whose batch then
// spans the shards: a handler that throws, or stop(), in the middle of it leaves the rest,
// of its shard and of the shards after it, to the next run(), and nothing is lost or run
// twice. And a context run by one thread does not sweep, so it keeps a timer's order across
// shards. Templates over asio::steady_timer and wheel_timer, asserting what Asio's timer
// does. The stress of many threads at once with the sweep is wheel_timer_shards_mt_test.
//

#include <asio_wheel/statistics.hpp>
#include <asio_wheel/wheel_timer.hpp>

#include <asio/error.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>

#include <doctest/doctest.h>

#include "asio_test_support.hpp"

#include <array>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <stdexcept>
#include <thread>
#include <type_traits>
#include <vector>

namespace {

using namespace std::chrono_literals;
using namespace asio_wheel::test;

constexpr int kThreads = 4;
constexpr int kPerThread = 100; // more than 64: a stop() is seen inside a shard's part too

struct counts {
  int calls = 0;
  int aborted = 0;
};

// Runs a handler of the context's wheel on two threads, one after the other: from then on the
// context sweeps (for asio::steady_timer, two waits that complete).
template <class Timer>
void run_on_two_threads(asio::io_context& ioc) {
  for (int i = 0; i < 2; ++i)
    std::thread([&] {
      Timer t(ioc);
      t.expires_after(1ms);
      t.async_wait([](const asio::error_code&) {});
      ioc.restart();
      ioc.run();
    }).join();
  ioc.restart();
}

// kThreads x kPerThread timers, each armed on one of kThreads threads (so filed in that
// thread's shard) for 1 h, then cancelled: every wait is aborted and queued in its shard,
// none completed yet (nobody runs the context).
template <class Timer>
struct armed_and_cancelled {
  explicit armed_and_cancelled(asio::io_context& ioc) {
    run_on_two_threads<Timer>(ioc);
    for (int t = 0; t < kThreads; ++t)
      for (int i = 0; i < kPerThread; ++i)
        timers.push_back(std::make_unique<Timer>(ioc));
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([this, t] {
        for (int i = t * kPerThread; i < (t + 1) * kPerThread; ++i) {
          timers[i]->expires_after(1h);
          timers[i]->async_wait([this, i](const asio::error_code& ec) {
            ++results[i].calls;
            results[i].aborted += ec == asio::error::operation_aborted;
            if (on_completion)
              on_completion(i);
          });
        }
      });
    for (auto& th : threads)
      th.join();
    // Once every shard is made, so that the context sweeps for each (a cancel goes to its
    // timer's shard, whatever the thread).
    for (auto& t : timers)
      t->cancel();
  }

  std::vector<std::unique_ptr<Timer>> timers;
  std::array<counts, kThreads * kPerThread> results{};
  std::function<void(int)> on_completion;

  int completed() const {
    int n = 0;
    for (const auto& r : results)
      n += r.calls;
    return n;
  }

  void check_each_once_aborted() const {
    for (const auto& r : results) {
      CHECK(r.calls == 1);
      CHECK(r.aborted == 1);
    }
  }
};

} // namespace

TEST_CASE_TEMPLATE("sweep: waits aborted in four shards complete exactly once, from one "
                   "scheduler handler",
                   Timer, asio::steady_timer, asio_wheel::wheel_timer) {
  asio::io_context ioc;
  armed_and_cancelled<Timer> w(ioc);
  const std::size_t handlers = ioc.run();
  CHECK(w.completed() == kThreads * kPerThread);
  w.check_each_once_aborted();
  if constexpr (std::is_same_v<Timer, asio_wheel::wheel_timer>) {
    CHECK(asio_wheel::get_statistics(ioc).shards == kThreads);
    // Each shard's alarm (its Asio timer, cancelled when the shard's last wait went) and two
    // sweeps: a sweep takes shards until it holds a batch's worth (256 waits: three shards
    // of 100), and posts another for the rest. A drain per shard would make 8.
    CHECK(handlers == kThreads + 2);
  } else {
    CHECK(handlers == static_cast<std::size_t>(kThreads * kPerThread)); // one per abort
  }
}

TEST_CASE_TEMPLATE("sweep: a handler that throws leaves the rest of its shard and the shards "
                   "after it to the next run()",
                   Timer, asio::steady_timer, asio_wheel::wheel_timer) {
  asio::io_context ioc;
  armed_and_cancelled<Timer> w(ioc);
  // One handler in the second shard's part throws, once.
  const int thrower = kPerThread + kPerThread / 2;
  w.on_completion = [&](int i) {
    if (i == thrower)
      throw std::runtime_error("from a handler");
  };
  CHECK_THROWS_AS(ioc.run(), std::runtime_error);
  CHECK(w.completed() < kThreads * kPerThread);
  CHECK(w.results[thrower].calls == 1);
  ioc.restart();
  ioc.run();
  CHECK(w.completed() == kThreads * kPerThread);
  w.check_each_once_aborted();
}

TEST_CASE_TEMPLATE("sweep: stop() from a handler leaves the rest of the batch to the run() "
                   "after restart()",
                   Timer, asio::steady_timer, asio_wheel::wheel_timer) {
  asio::io_context ioc;
  armed_and_cancelled<Timer> w(ioc);
  int stopped_at = -1;
  w.on_completion = [&](int i) {
    if (stopped_at < 0) {
      stopped_at = i;
      ioc.stop();
    }
  };
  ioc.run();
  // Asio's timer stops right after the handler that called stop(); a batch within 64
  // handlers of it (README, "Batched completions"), carried across the shards' parts.
  CHECK(w.completed() >= 1);
  CHECK(w.completed() <= 64);
  ioc.restart();
  ioc.run();
  CHECK(w.completed() == kThreads * kPerThread);
  w.check_each_once_aborted();
}

TEST_CASE_TEMPLATE("sweep: stop() from another thread while two threads complete the aborts of "
                   "four shards; nothing lost after restart()",
                   Timer, asio::steady_timer, asio_wheel::wheel_timer) {
  for (int round = 0; round < 20; ++round) {
    asio::io_context ioc(2);
    armed_and_cancelled<Timer> w(ioc);
    std::thread a([&] { ioc.run(); });
    std::thread b([&] { ioc.run(); });
    std::thread stopper([&] { ioc.stop(); });
    stopper.join();
    a.join();
    b.join();
    ioc.restart();
    ioc.run();
    CHECK(w.completed() == kThreads * kPerThread);
    w.check_each_once_aborted();
  }
}

TEST_CASE_TEMPLATE("sweep: a context run by one thread keeps a moved timer's aborted waits in "
                   "the order they were aborted, across shards",
                   Timer, asio::steady_timer, asio_wheel::wheel_timer) {
  asio::io_context ioc;
  std::vector<int> order;
  Timer other(ioc); // a wait in a second shard first, so that the context has two in use
  std::thread([&] {
    other.expires_after(1h);
    other.async_wait([&](const asio::error_code&) { order.push_back(0); });
  }).join();
  Timer t(ioc);
  t.expires_after(1h);
  t.async_wait([&](const asio::error_code& ec) {
    CHECK(ec == asio::error::operation_aborted);
    order.push_back(1);
  });
  t.cancel();
  // Moved, the timer leaves its filing (it has no pending wait): its next wait, started on
  // another thread, is filed in that thread's shard while the first waits in this one's.
  Timer moved(std::move(t));
  std::thread([&] {
    moved.expires_after(1h);
    moved.async_wait([&](const asio::error_code& ec) {
      CHECK(ec == asio::error::operation_aborted);
      order.push_back(2);
    });
    moved.cancel();
  }).join();
  ioc.run_for(100ms);
  CHECK(order == std::vector<int>{1, 2});
  other.cancel();
  ioc.restart();
  ioc.run();
  CHECK(order == std::vector<int>{1, 2, 0});
}
