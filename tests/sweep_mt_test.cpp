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
// twice. A moved timer's aborted waits keep their order across shards, and a context run by
// one thread does not sweep, so it keeps a turn's expiries ahead of later aborts. Templates
// over asio::steady_timer and wheel_timer, asserting what Asio's timer does. The stress of many
// threads at once with the sweep is wheel_timer_shards_mt_test.
//

#include <asio_wheel/detail/thread_shard.hpp>
#include <asio_wheel/statistics.hpp>
#include <asio_wheel/wheel_timer.hpp>

#include <asio/error.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>

#include <doctest/doctest.h>

#include "asio_test_support.hpp"
#include "step_thread.hpp"

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

TEST_CASE_TEMPLATE("sweep: a moved timer's aborted waits complete in the order they were "
                   "aborted, though the second is started in a shard that the sweep takes first",
                   Timer, asio::steady_timer, asio_wheel::wheel_timer) {
  // The sweep takes its shards in order of index: were the second wait filed in a shard of
  // lower index than the first, it would complete first. The timer keeps its filing, so its
  // shard, while its first aborted wait is queued (timer_queue::keep_filing): both land in
  // one shard, in order. `early` and `late` are two threads whose shards are in that order.
  asio::io_context ioc;
  run_on_two_threads<Timer>(ioc);
  step_thread first, second;
  unsigned first_shard = 0, second_shard = 0;
  Timer warm1(ioc), warm2(ioc); // each thread's first wait takes its shard
  first.run([&] {
    warm1.expires_after(1h);
    warm1.async_wait([](const asio::error_code&) {});
    first_shard = asio_wheel::detail::this_thread_shard;
  });
  second.run([&] {
    warm2.expires_after(1h);
    warm2.async_wait([](const asio::error_code&) {});
    second_shard = asio_wheel::detail::this_thread_shard;
  });
  // Consecutive ordinals, 4 shards: two shards (asio::steady_timer has none).
  if constexpr (std::is_same_v<Timer, asio_wheel::wheel_timer>)
    REQUIRE(first_shard != second_shard);
  step_thread& late = first_shard > second_shard ? first : second;  // files the first wait
  step_thread& early = first_shard > second_shard ? second : first; // the second
  std::vector<int> order;
  Timer t(ioc);
  late.run([&] {
    t.expires_after(1h);
    t.async_wait([&](const asio::error_code& ec) {
      CHECK(ec == asio::error::operation_aborted);
      order.push_back(1);
    });
    t.cancel();
  });
  Timer moved(std::move(t)); // its filing, left behind, goes with it
  early.run([&] {
    moved.expires_after(1h);
    moved.async_wait([&](const asio::error_code& ec) {
      CHECK(ec == asio::error::operation_aborted);
      order.push_back(2);
    });
    moved.cancel();
  });
  warm1.cancel();
  warm2.cancel();
  ioc.run();
  CHECK(order == std::vector<int>{1, 2});
}

TEST_CASE_TEMPLATE("sweep: a context run by one thread completes a turn's expiries before a "
                   "wait aborted after that turn was queued, though another shard has aborts "
                   "queued first",
                   Timer, asio::steady_timer, asio_wheel::wheel_timer) {
  // 5000 waits due at once: the wheel's turn takes 4096 (its budget) and queues a
  // continuation for the rest; the first expiry's handler then aborts W. Before that, a wait
  // of another shard (armed on another thread) was aborted, so that a sweep, were it on,
  // would be queued ahead of the continuation and take W's abort with it. Asio completes
  // every expiry first (found by one reactor pass).
  constexpr int n = 5000;
  asio::io_context ioc;
  Timer x(ioc);
  std::thread([&] {
    x.expires_after(1h);
    x.async_wait([](const asio::error_code&) {});
  }).join();
  Timer w(ioc);
  int expired = 0;
  int expired_before_w = -1;
  std::vector<std::unique_ptr<Timer>> timers;
  // One instant for all, so that all are due in one tick of level 0 however long the arming
  // takes. With expires_after(5ms) each, a thread preempted for over about 60 ms while arming
  // (seen twice in some 1,200 runs on the 2-core machine; once 2,048 of the 5,000 before W's
  // abort) put the rest in a slot of the wheel's next 64-tick window, which the turn must
  // stage first, 512 moves a turn (semantics.md, "Order around aborted waits"): a sleep after
  // the 2,500th made 1,162 complete before W's abort at 70 ms, 2,500 at 130, 300 and 1,100.
  const auto due = Timer::clock_type::now() + 5ms;
  for (int i = 0; i < n; ++i) {
    timers.push_back(std::make_unique<Timer>(ioc));
    timers.back()->expires_at(due);
    timers.back()->async_wait([&](const asio::error_code& ec) {
      if (!ec && expired++ == 0)
        w.cancel();
    });
  }
  w.expires_after(1h);
  w.async_wait([&](const asio::error_code& ec) {
    CHECK(ec == asio::error::operation_aborted);
    expired_before_w = expired;
  });
  std::this_thread::sleep_for(30ms); // all 5000 due before the context runs
  asio::post(ioc, [&] { x.cancel(); });
  ioc.run();
  CHECK(expired == n);
  CHECK(expired_before_w == n);
}
