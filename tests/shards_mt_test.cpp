//
// shards_mt_test.cpp
// ~~~~~~~~~~~~~~~~~~
//
// A context's wheel cut into shards (built with ASIO_WHEEL_SHARDS=4, see CMakeLists.txt):
// a wait is filed in the shard of the thread that starts it, and stays there while its
// timer is filed. Each case starts a timer's waits on one thread and then acts on the timer
// from others (whose shards differ), while two threads run the context: cancel, cancel_one,
// expiry changes, another wait on the pending timer, move assignment between timers filed
// in different shards, destruction, per-operation cancellation emitted from another thread.
// The threads act one after another (Asio's timers are not thread-safe objects), each a new
// thread, so each takes a new shard. Each case is a template over asio::steady_timer and
// wheel_timer, and asserts what Asio's timer does: every wait completes exactly once, with
// the outcome Asio gives it, never before its expiry. The stress of many threads at once
// is wheel_timer_shards_mt_test (wheel_timer_mt_test.cpp, built with 4 shards).
//

#include <asio_wheel/statistics.hpp>
#include <asio_wheel/wheel_timer.hpp>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/error.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>

#include <doctest/doctest.h>

#include "asio_test_support.hpp"
#include "step_thread.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <stdexcept>
#include <thread>
#include <type_traits>
#include <vector>

namespace {

using namespace std::chrono_literals;
using namespace asio_wheel::test;

// One wait's record: how often it completed, how, and whether before its expiry.
struct wait_record {
  std::atomic<int> calls{0};
  std::atomic<int> success{0};
  std::atomic<int> aborted{0};
  std::atomic<int> early{0};
  sclock::time_point expiry{};
};

template <class Timer>
auto recorder(wait_record& r, const Timer& t) {
  r.expiry = t.expiry();
  // `calls` last: a test thread polls it, then reads the others without joining the runners.
  return [&r](const asio::error_code& ec) {
    if (!ec) {
      ++r.success;
      if (sclock::now() < r.expiry)
        ++r.early;
    } else if (ec == asio::error::operation_aborted) {
      ++r.aborted;
    }
    ++r.calls;
  };
}

// Runs `f` on a new thread (so on a shard no earlier step used, for a wheel) and joins it.
void on_new_thread(const std::function<void()>& f) {
  std::thread(f).join();
}

// Waits (polling, bounded) until `done` holds. The bound only turns a hang into a failure:
// generous, for a loaded machine under a sanitizer.
template <class Pred>
bool eventually(Pred done, sclock::duration limit = 15s) {
  const auto until = sclock::now() + limit;
  while (!done()) {
    if (sclock::now() > until)
      return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

template <class Timer>
std::size_t shards_used(asio::io_context& ioc) {
  if constexpr (std::is_same_v<Timer, asio_wheel::wheel_timer>)
    return asio_wheel::get_statistics(ioc).shards;
  else
    return 2; // Asio's timer has no shards: the check is the wheel's
}

// A step_thread whose waits go to another shard than this thread's. Thread ordinals are
// process-wide and a context has 4 shards here, so every fourth new thread shares this one's
// shard: which does depends on the test cases run before.
template <class Timer>
std::unique_ptr<step_thread> helper_in_another_shard() {
  for (;;) {
    auto helper = std::make_unique<step_thread>();
    if constexpr (!std::is_same_v<Timer, asio_wheel::wheel_timer>) {
      return helper;
    } else {
      asio::io_context probe;
      Timer mine(probe);
      Timer theirs(probe);
      mine.expires_after(1h);
      mine.async_wait([](const asio::error_code&) {});
      helper->run([&] {
        theirs.expires_after(1h);
        theirs.async_wait([](const asio::error_code&) {});
      });
      if (asio_wheel::get_statistics(probe).shards == 2)
        return helper;
    }
  }
}

} // namespace

TEST_CASE_TEMPLATE("shards: a wait started on one thread, then cancelled, re-armed and waited "
                   "on again from other threads",
                   Timer, asio::steady_timer, asio_wheel::wheel_timer) {
  // The cancellations must come before the expiry they race: a clock read after each call
  // proves it did (a thread created late on a loaded machine may come after it, and then
  // finds the wait completed, rightly); the scenario is tried again then.
  until_premise([&](bool last) {
    asio::io_context ioc(2);
    runner_threads runners(ioc, 2, kWatchdog);
    Timer t(ioc);
    wait_record first, second, third, fourth;
    bool in_time = true;
    // Windows wide enough for a thread created under TSan on a loaded machine (20 ms
    // broke the premise in 2 runs of 3 under TSan).
    on_new_thread([&] {
      t.expires_after(1s); // cancelled: costs nothing
      t.async_wait(recorder(first, t));
    });
    std::size_t cancelled = 0, cancelled_one = 0;
    on_new_thread([&] {
      cancelled = t.cancel();
      in_time = in_time && sclock::now() < t.expiry();
    });
    on_new_thread([&] {
      t.expires_after(300ms);
      t.async_wait(recorder(second, t));
    });
    on_new_thread([&] { t.async_wait(recorder(third, t)); }); // joins the pending timer
    on_new_thread([&] {
      cancelled_one = t.cancel_one();
      in_time = in_time && sclock::now() < t.expiry();
    });
    on_new_thread([&] { t.async_wait(recorder(fourth, t)); });
    CHECK(eventually([&] { return fourth.calls.load() == 1; }));
    CHECK(runners.join());
    CHECK(first.calls == 1);
    CHECK(second.calls == 1);
    CHECK(third.calls == 1);
    CHECK(fourth.calls == 1);
    CHECK(fourth.success == 1);
    CHECK(third.early + fourth.early == 0);
    if (!in_time && !last)
      return false;
    CHECK(third.success == 1);
    CHECK(cancelled == 1);
    CHECK(first.aborted == 1);
    CHECK(cancelled_one == 1);
    CHECK(second.aborted == 1); // cancel_one() takes the oldest
    return true;
  });
}

TEST_CASE_TEMPLATE("shards: move assignment between timers filed in different shards", Timer,
                   asio::steady_timer, asio_wheel::wheel_timer) {
  asio::io_context ioc(2);
  runner_threads runners(ioc, 2, kWatchdog);
  auto a = std::make_unique<Timer>(ioc);
  auto b = std::make_unique<Timer>(ioc);
  wait_record a1, b1, b2, after;
  on_new_thread([&] {
    a->expires_after(10s);
    a->async_wait(recorder(a1, *a));
  });
  on_new_thread([&] {
    b->expires_after(30ms);
    b->async_wait(recorder(b1, *b));
    b->async_wait(recorder(b2, *b));
  });
  // a's wait is aborted in its shard; b's two move to a, in theirs.
  on_new_thread([&] { *a = std::move(*b); });
  CHECK(eventually([&] { return a1.calls.load() == 1; }));
  CHECK(a1.aborted == 1);
  // The moved waits complete through a, on time; b is idle and may wait anew, anywhere.
  on_new_thread([&] {
    b->expires_after(5ms);
    b->async_wait(recorder(after, *b));
  });
  CHECK(eventually([&] { return b1.calls + b2.calls + after.calls == 3; }));
  // a is destroyed from yet another thread, idle by now.
  on_new_thread([&] { a.reset(); });
  CHECK(runners.join());
  CHECK(b1.success == 1);
  CHECK(b2.success == 1);
  CHECK(after.success == 1);
  CHECK(b1.early + b2.early + after.early == 0);
  CHECK(a1.calls + b1.calls + b2.calls + after.calls == 4);
  CHECK(shards_used<Timer>(ioc) >= 2);
}

TEST_CASE_TEMPLATE("shards: a timer destroyed on another thread with waits pending in its "
                   "shard",
                   Timer, asio::steady_timer, asio_wheel::wheel_timer) {
  asio::io_context ioc(2);
  runner_threads runners(ioc, 2, kWatchdog);
  std::vector<std::unique_ptr<Timer>> timers;
  std::vector<std::unique_ptr<wait_record>> records;
  for (int i = 0; i < 8; ++i) {
    timers.push_back(std::make_unique<Timer>(ioc));
    records.push_back(std::make_unique<wait_record>());
  }
  for (int i = 0; i < 8; ++i)
    on_new_thread([&] {
      timers[i]->expires_after(10s);
      timers[i]->async_wait(recorder(*records[i], *timers[i]));
    });
  for (int i = 0; i < 8; ++i)
    on_new_thread([&] { timers[i].reset(); });
  CHECK(runners.join());
  for (const auto& r : records) {
    CHECK(r->calls == 1);
    CHECK(r->aborted == 1);
  }
}

TEST_CASE_TEMPLATE("shards: per-operation cancellation emitted from another thread", Timer,
                   asio::steady_timer, asio_wheel::wheel_timer) {
  asio::io_context ioc(2);
  runner_threads runners(ioc, 2, kWatchdog);
  Timer t(ioc);
  asio::cancellation_signal sig;
  wait_record slotted, plain;
  on_new_thread([&] {
    t.expires_after(10s);
    t.async_wait(asio::bind_cancellation_slot(sig.slot(), recorder(slotted, t)));
    t.async_wait(recorder(plain, t));
  });
  on_new_thread([&] { sig.emit(asio::cancellation_type::terminal); });
  CHECK(eventually([&] { return slotted.calls.load() == 1; }));
  CHECK(slotted.aborted == 1);
  CHECK(plain.calls == 0);
  // The slot's handler is gone with its wait: a second emit from a third thread finds
  // nothing, and the other wait is cancelled from a fourth.
  on_new_thread([&] { sig.emit(asio::cancellation_type::terminal); });
  std::size_t n = 0;
  on_new_thread([&] { n = t.cancel(); });
  CHECK(n == 1);
  CHECK(runners.join());
  CHECK(slotted.calls == 1);
  CHECK(plain.calls == 1);
  CHECK(plain.aborted == 1);
}

TEST_CASE_TEMPLATE("shards: an idle timer waits anew from another thread; statistics sum the "
                   "shards",
                   Timer, asio::steady_timer, asio_wheel::wheel_timer) {
  asio::io_context ioc(2);
  runner_threads runners(ioc, 2, kWatchdog);
  Timer t(ioc);
  constexpr int rounds = 6;
  wait_record r[rounds];
  for (int i = 0; i < rounds; ++i) {
    on_new_thread([&] {
      t.expires_after(2ms);
      t.async_wait(recorder(r[i], t));
    });
    CHECK(eventually([&] { return r[i].calls.load() == 1; }));
    // Wait for the timer to be idle (a wheel drops its filing when the turn is done).
    std::this_thread::sleep_for(5ms);
  }
  CHECK(runners.join());
  for (auto& w : r) {
    CHECK(w.success == 1);
    CHECK(w.early == 0);
  }
  if constexpr (std::is_same_v<Timer, asio_wheel::wheel_timer>) {
    const auto s = asio_wheel::get_statistics(ioc);
    CHECK(s.shards >= 2);
    CHECK(s.shards <= 4);
    CHECK(s.waits_started == rounds);
    CHECK(s.waits_succeeded == rounds);
    CHECK(s.waits_pending() == 0);
  }
}

// Nothing of another thread waits for a handler that aborted a wait of the same shard, as
// nothing does for asio::steady_timer: an abort made by another thread's handler (below),
// and a wait that comes due behind the handler's own abort of its timer (next case),
// complete while the handler still runs. The handler waits for them (bounded): held
// behind it (a drain deferred to the end of the handler that aborted first, say), they
// would not come until it returned.
TEST_CASE_TEMPLATE("shards: a handler that aborts a wait holds back no abort by another "
                   "thread in the same shard",
                   Timer, asio::steady_timer, asio_wheel::wheel_timer) {
  asio::io_context ioc(2);
  runner_threads runners(ioc, 2, kWatchdog);
  Timer held(ioc), other(ioc);
  wait_record held_wait, other_wait;
  // Both filed in this thread's shard.
  held.expires_after(10s);
  held.async_wait(recorder(held_wait, held));
  other.expires_after(10s);
  other.async_wait(recorder(other_wait, other));
  std::atomic<bool> aborted{false};
  bool saw_other = false;
  asio::post(ioc, [&] {
    held.cancel();
    aborted = true;
    saw_other = eventually([&] { return other_wait.calls.load() == 1; }, 10s);
  });
  CHECK(eventually([&] { return aborted.load(); }));
  asio::post(ioc, [&] { other.cancel(); }); // on the other thread: the first is busy
  CHECK(eventually([&] { return held_wait.calls.load() == 1; }, 20s));
  CHECK(runners.join());
  CHECK(saw_other);
  CHECK(held_wait.aborted == 1);
  CHECK(other_wait.aborted == 1);
}

TEST_CASE_TEMPLATE("shards: a handler that aborts a wait and waits again on its timer holds "
                   "back neither that wait's expiry on another thread nor their order",
                   Timer, asio::steady_timer, asio_wheel::wheel_timer) {
  asio::io_context ioc(2);
  runner_threads runners(ioc, 2, kWatchdog);
  Timer t(ioc);
  wait_record first_wait, second_wait;
  std::atomic<int> tickets{0};
  std::atomic<int> first_ticket{-1}, second_ticket{-1};
  t.expires_after(10s);
  auto first = recorder(first_wait, t);
  t.async_wait([&, first](const asio::error_code& ec) mutable {
    first_ticket = tickets++;
    first(ec);
  });
  bool saw_second = false;
  asio::post(ioc, [&] {
    t.expires_after(2ms); // aborts the first wait; the second comes due on the other thread
    auto second = recorder(second_wait, t);
    t.async_wait([&, second](const asio::error_code& ec) mutable {
      second_ticket = tickets++;
      second(ec);
    });
    saw_second = eventually([&] { return second_wait.calls.load() == 1; }, 10s);
  });
  CHECK(eventually([&] { return first_wait.calls.load() == 1; }, 20s));
  CHECK(runners.join());
  CHECK(saw_second);
  CHECK(first_wait.aborted == 1);
  CHECK(second_wait.success == 1);
  CHECK(second_wait.early == 0);
  CHECK(first_ticket.load() < second_ticket.load()); // a timer's completions in order
}

TEST_CASE_TEMPLATE("shards: a timer's aborted wait completes before the timer's next wait, "
                   "though that starts on a thread whose shard has a drain queued first",
                   Timer, asio::steady_timer, asio_wheel::wheel_timer) {
  // One thread runs the context; the timers are used from it and from one other thread,
  // one step after another. That thread's shard queues its drain first (an abort of
  // `other`); then the main thread's timer has a wait aborted, by cancel() before the timer
  // is moved (leaving only a filing), or by assigning an idle timer over it (leaving it
  // without waits), and the other thread waits on the timer and aborts that wait too. Asio
  // completes the timer's two aborted waits in that order.
  bool assign = false;
  SUBCASE("cancelled, then moved") {
    assign = false;
  }
  SUBCASE("assigned over") {
    assign = true;
  }
  asio::io_context ioc;
  std::vector<int> order;
  const auto helper_thread = helper_in_another_shard<Timer>();
  step_thread& helper = *helper_thread;
  Timer other(ioc);
  helper.run([&] {
    other.expires_after(1h);
    other.async_wait([&](const asio::error_code&) { order.push_back(0); });
    other.cancel();
  });
  Timer t(ioc);
  t.expires_after(1h);
  t.async_wait([&](const asio::error_code&) { order.push_back(1); });
  std::unique_ptr<Timer> moved;
  if (assign) {
    t = Timer(ioc);
  } else {
    t.cancel();
    moved = std::make_unique<Timer>(std::move(t));
  }
  Timer& next = moved ? *moved : t;
  helper.run([&] {
    next.expires_after(1h);
    next.async_wait([&](const asio::error_code&) { order.push_back(2); });
    next.cancel();
  });
  ioc.run();
  CHECK(order == std::vector<int>{0, 1, 2});
}

TEST_CASE_TEMPLATE("shards: a timer assigned over by a timer with a pending wait completes its "
                   "aborted wait, then the wait it took, exactly once each",
                   Timer, asio::steady_timer, asio_wheel::wheel_timer) {
  // The assignment aborts t's wait and t takes u's, filed in the helper's shard; t then
  // cancels it. Each completes once (the order between the two is not the subject here:
  // the taken wait was started before the assignment).
  asio::io_context ioc;
  std::vector<int> order;
  const auto helper_thread = helper_in_another_shard<Timer>();
  step_thread& helper = *helper_thread;
  Timer t(ioc);
  t.expires_after(1h);
  t.async_wait([&](const asio::error_code& ec) { order.push_back(ec ? 1 : -1); });
  Timer u(ioc);
  helper.run([&] {
    u.expires_after(1h);
    u.async_wait([&](const asio::error_code& ec) { order.push_back(ec ? 2 : -2); });
  });
  t = std::move(u);
  CHECK(t.cancel() == 1);
  CHECK(u.cancel() == 0);
  ioc.run();
  std::sort(order.begin(), order.end());
  CHECK(order == std::vector<int>{1, 2});
}

TEST_CASE_TEMPLATE("shards: a timer's expiry, in a batch that a throw cuts short, completes "
                   "before the timer's next wait, started and aborted on another thread whose "
                   "shard has a drain queued first",
                   Timer, asio::steady_timer, asio_wheel::wheel_timer) {
  // x and t expire in one batch, x first. x's handler has the helper abort `other` (so the
  // helper's shard queues a drain) and throws out of run(): t's expiry is left queued, and
  // t left the wheel when its turn took it. The helper then waits on t (or on the timer t
  // was moved to) and aborts that wait, either from x's handler, in step with it, while the
  // batch runs, or after run() returned. Asio completes t's expiry first. (stop() cuts a
  // batch the same way, after up to 64 handlers: see "Batched completions" in the README.)
  enum class variant { after, moved, assigned, assigned_over, in_batch };
  variant v = variant::after;
  SUBCASE("after run() returned") {
    v = variant::after;
  }
  SUBCASE("on a timer move-constructed from it") {
    v = variant::moved;
  }
  SUBCASE("on a timer it was move-assigned to") {
    v = variant::assigned;
  }
  SUBCASE("after a timer made on the other thread was assigned over it") {
    v = variant::assigned_over;
  }
  SUBCASE("from x's handler, while the batch runs") {
    v = variant::in_batch;
  }
  asio::io_context ioc;
  std::vector<int> order;
  const auto helper_thread = helper_in_another_shard<Timer>();
  step_thread& helper = *helper_thread;
  Timer other(ioc);
  helper.run([&] {
    other.expires_after(1h);
    other.async_wait([&](const asio::error_code&) { order.push_back(0); });
  });
  Timer x(ioc);
  Timer t(ioc);
  const auto wait_and_abort = [&](Timer& timer) {
    timer.expires_after(1h);
    timer.async_wait([&](const asio::error_code& ec) { order.push_back(ec ? 2 : -2); });
    timer.cancel();
  };
  x.expires_at(sclock::now() - 2s);
  t.expires_at(sclock::now() - 1s);
  x.async_wait([&](const asio::error_code&) {
    helper.run([&] {
      other.cancel();
      if (v == variant::in_batch)
        wait_and_abort(t); // t's expiry is later in this batch: nothing to abort yet
    });
    throw std::runtime_error("x");
  });
  t.async_wait([&](const asio::error_code& ec) { order.push_back(ec ? -1 : 1); });
  CHECK_THROWS_AS(ioc.run(), std::runtime_error);
  std::unique_ptr<Timer> next;
  if (v == variant::moved) {
    next = std::make_unique<Timer>(std::move(t));
  } else if (v == variant::assigned) {
    next = std::make_unique<Timer>(ioc);
    *next = std::move(t);
  }
  if (v == variant::assigned_over)
    helper.run([&] { t = Timer(ioc); }); // t keeps its last shard, which holds its expiry
  if (v != variant::in_batch)
    helper.run([&] { wait_and_abort(next ? *next : t); });
  ioc.restart();
  ioc.run();
  REQUIRE(order.size() == 3);
  const auto at = [&](int value) { return std::find(order.begin(), order.end(), value); };
  CHECK(at(1) < at(2));
  CHECK(at(0) != order.end());
}

TEST_CASE_TEMPLATE("shards: a timer assigned over while its aborted wait is in a running drain "
                   "keeps that wait first",
                   Timer, asio::steady_timer, asio_wheel::wheel_timer) {
  // y's and t's waits are aborted, y's first: one drain takes both. y's handler assigns an
  // idle timer over t (whose aborted wait is in that drain's batch, no longer queued), has
  // the helper start and abort t's next wait, and throws: t's aborted wait goes back to its
  // shard, whose drain is now queued after the helper's.
  asio::io_context ioc;
  std::vector<int> order;
  const auto helper_thread = helper_in_another_shard<Timer>();
  step_thread& helper = *helper_thread;
  Timer y(ioc);
  Timer t(ioc);
  y.expires_after(1h);
  t.expires_after(1h);
  y.async_wait([&](const asio::error_code&) {
    order.push_back(0);
    t = Timer(ioc);
    helper.run([&] {
      t.expires_after(1h);
      t.async_wait([&](const asio::error_code& ec) { order.push_back(ec ? 2 : -2); });
      t.cancel();
    });
    throw std::runtime_error("y");
  });
  t.async_wait([&](const asio::error_code& ec) { order.push_back(ec ? 1 : -1); });
  y.cancel();
  t.cancel();
  CHECK_THROWS_AS(ioc.run(), std::runtime_error);
  ioc.restart();
  ioc.run();
  CHECK(order == std::vector<int>{0, 1, 2});
}
