//
// idle_timer_mt_test.cpp
// ~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// touch() from other threads while waits are pending (label "concurrency": also run under
// ThreadSanitizer). idle_timer, heartbeat and heartbeat_group's member document touch() as
// the one member any thread may call at any time; everything else stays on the thread(s)
// running the context (for heartbeat_group, on its strand).
//
// Never-early checks are exact for a single touching thread: the time is taken before each
// touch(), and the completion must come at least a timeout after the last one. With several
// touching threads the last *stored* mark may come from a thread whose touch started
// earlier (a clock read and a store are not one atomic step), so the bound is the earliest
// of the threads' last touches. Keep-alive is asserted only when the touching threads
// really touched more often than the timeout (a preempted thread can leave a gap, after
// which an idle timer is right to fire).
//
// Options are written {ping_after, drop_after}, without designators: this file builds as
// C++17 too (scripts/test's cxx17 stage).

#include <asio_wheel/heartbeat.hpp>
#include <asio_wheel/heartbeat_group.hpp>
#include <asio_wheel/idle_timer.hpp>

#include <asio/error.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/strand.hpp>

#include <doctest/doctest.h>

#include "asio_test_support.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <system_error>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;
using namespace asio_wheel::test;

constexpr auto kPrompt = 5s; // generous: TSan slows everything down
constexpr auto kMtWatchdog = 20s;

// A thread that touches every object of a set `rounds` times, `period` apart, recording the
// time before each round and the longest an object went untouched (from a round's start to the
// next round's end). `origin` is a clock reading taken before the objects were made or watched
// (their first mark): the first round's interval counts from it, since a thread that starts
// late leaves the objects untouched past their timeout, and they rightly complete before its
// first round.
template <class T>
class toucher {
public:
  toucher(std::vector<std::unique_ptr<T>>& objects, sclock::time_point origin,
          sclock::duration period, int rounds)
      : last_start_(origin), thread_([this, &objects, period, rounds] {
          auto next = sclock::now();
          for (int r = 0; r < rounds; ++r) {
            const auto previous = last_start_;
            last_start_ = sclock::now();
            for (auto& o : objects) {
              o->touch();
              (void)o->last_activity(); // a concurrent reader, too
            }
            // At the round's end: the last object touched waited that long since its previous
            // touch (a stall within the last round has no next round to show it).
            max_gap_ = std::max(max_gap_, sclock::now() - previous);
            ++touches_;
            next += period;
            std::this_thread::sleep_until(next);
          }
        }) {}

  void join() { thread_.join(); }

  // Valid after join().
  sclock::time_point last_start() const { return last_start_; }
  sclock::duration max_gap() const { return max_gap_; }
  int rounds() const { return touches_; }

private:
  sclock::time_point last_start_{};
  sclock::duration max_gap_{};
  int touches_ = 0;
  std::thread thread_;
};

} // namespace

TEST_CASE("idle_timer: touch() from another thread keeps pending waits alive; they complete "
          "a timeout after the last touch, never before") {
  asio::io_context ctx(1);
  constexpr int kTimers = 64;
  constexpr auto kTimeout = 100ms;
  std::vector<std::unique_ptr<asio_wheel::idle_timer>> timers;
  std::vector<outcome> outcomes(kTimers);
  // Before the constructions, which count as touches: read after, a preemption in between
  // would make a timely completion look early.
  const auto start = sclock::now();
  for (int i = 0; i < kTimers; ++i) {
    timers.push_back(std::make_unique<asio_wheel::idle_timer>(ctx, kTimeout));
    timers.back()->async_wait(record(outcomes[i]));
  }
  toucher<asio_wheel::idle_timer> t(timers, start, 5ms, 80); // 400 ms of touching
  const bool timed_out = guarded_run(ctx, kMtWatchdog).timed_out;
  t.join();

  CHECK_FALSE(timed_out);
  const bool steady = t.max_gap() < kTimeout - 20ms;
  if (!steady)
    MESSAGE("toucher stalled (gap " << t.max_gap() << "): keep-alive not asserted");
  for (int i = 0; i < kTimers; ++i) {
    CAPTURE(i);
    const auto& o = outcomes[i];
    CHECK(o.calls == 1);
    CHECK(o.ec == kOk);
    if (steady) {
      CHECK(o.at >= t.last_start() + kTimeout);
      CHECK(o.at - (t.last_start() + kTimeout) < kPrompt);
    }
    CHECK(o.at >= start + kTimeout);
  }
}

TEST_CASE("idle_timer: touches from several threads while the context runs on two threads") {
  asio::io_context ctx(2);
  constexpr int kTimers = 128;
  constexpr auto kTimeout = 80ms;
  std::vector<std::unique_ptr<asio_wheel::idle_timer>> timers;
  std::vector<outcome> outcomes(kTimers);
  std::atomic<int> completed{0};
  const auto start = sclock::now(); // before the constructions, which count as touches
  for (int i = 0; i < kTimers; ++i) {
    timers.push_back(std::make_unique<asio_wheel::idle_timer>(ctx, kTimeout));
    timers.back()->async_wait([rec = record(outcomes[i]), &completed](asio::error_code ec) {
      rec(ec);
      completed.fetch_add(1, std::memory_order_relaxed);
    });
  }
  toucher<asio_wheel::idle_timer> a(timers, start, 4ms, 75);
  toucher<asio_wheel::idle_timer> b(timers, start, 7ms, 43);
  const bool timed_out = guarded_run_threads(ctx, 2, kMtWatchdog).timed_out;
  a.join();
  b.join();

  CHECK_FALSE(timed_out);
  CHECK(completed.load() == kTimers);
  const bool steady = a.max_gap() < kTimeout - 20ms && b.max_gap() < kTimeout - 20ms;
  // The last stored mark is one thread's last touch or later: at least the earlier of the
  // two threads' last touches.
  const auto floor = std::min(a.last_start(), b.last_start());
  for (int i = 0; i < kTimers; ++i) {
    CAPTURE(i);
    const auto& o = outcomes[i];
    CHECK(o.calls == 1);
    CHECK(o.ec == kOk);
    if (steady)
      CHECK(o.at >= floor + kTimeout);
    CHECK(o.at >= start + kTimeout);
  }
}

TEST_CASE("idle_timer: waits re-armed from their handlers while another thread touches") {
  asio::io_context ctx(1);
  constexpr int kTimers = 32;
  constexpr auto kTimeout = 30ms;
  std::vector<std::unique_ptr<asio_wheel::idle_timer>> timers;
  std::vector<int> completions(kTimers, 0);
  std::vector<sclock::time_point> last_completion(kTimers);
  std::atomic<bool> stop{false};
  // What the check below asks of the untouched (odd) timers.
  constexpr int kOddWanted = kTimers / 2 * 3;
  std::atomic<int> odd_done{0};
  std::function<void(int)> wait = [&](int i) {
    timers[i]->async_wait([&, i](asio::error_code ec) {
      if (ec)
        return;
      ++completions[i];
      if (i % 2)
        odd_done.fetch_add(1, std::memory_order_relaxed);
      last_completion[i] = sclock::now();
      if (!stop.load(std::memory_order_relaxed)) {
        timers[i]->touch(); // a new idle period starts now (the even ones: concurrently)
        wait(i);
      }
    });
  };
  for (int i = 0; i < kTimers; ++i)
    timers.push_back(std::make_unique<asio_wheel::idle_timer>(ctx, kTimeout));
  for (int i = 0; i < kTimers; ++i)
    wait(i);
  // Touch only the even timers, every 5 ms, for 300 ms (and longer while a loaded machine has
  // not yet run the odd ones kOddWanted times, up to the watchdog: the check below asks that
  // they keep completing, not how fast); then ask the waits to stop.
  std::thread touch_even([&] {
    const auto start = sclock::now();
    const auto end = start + 300ms;
    while (sclock::now() < end || (odd_done.load(std::memory_order_relaxed) < kOddWanted &&
                                   sclock::now() < start + kMtWatchdog / 2)) {
      for (int i = 0; i < kTimers; i += 2)
        timers[i]->touch();
      std::this_thread::sleep_for(5ms);
    }
    stop.store(true, std::memory_order_relaxed);
  });
  const bool timed_out = guarded_run(ctx, kMtWatchdog).timed_out;
  touch_even.join();
  CHECK_FALSE(timed_out);
  int odd = 0, even = 0;
  for (int i = 0; i < kTimers; ++i)
    (i % 2 == 0 ? even : odd) += completions[i];
  // The untouched (odd) timers complete about every timeout, the touched ones rarely.
  CHECK(odd >= kOddWanted);
  MESSAGE("completions while touched: " << even << ", untouched: " << odd);
}

TEST_CASE("heartbeat: touch() from another thread keeps the peers quiet; silence then brings "
          "one ping and the drop") {
  constexpr int kPeers = 32;
  constexpr auto kPing = 60ms;
  constexpr auto kDrop = 150ms;
  using hb = asio_wheel::heartbeat;
  struct log {
    std::vector<hb::event> events;
    std::vector<sclock::time_point> at;
  };
  // Quietness needs the touches in time, and the single ping needs its judgement before
  // drop_after (a later one reports the drop alone): a stalled toucher or context thread is
  // tried again.
  until_premise([&](bool last) {
    asio::io_context ctx(1);
    std::vector<std::unique_ptr<hb>> peers;
    std::vector<log> logs(kPeers);
    std::function<void(int)> next = [&](int i) {
      peers[i]->async_next([&, i](asio::error_code ec, hb::event ev) {
        if (ec)
          return;
        logs[i].events.push_back(ev);
        logs[i].at.push_back(sclock::now());
        if (ev == hb::event::ping)
          next(i);
      });
    };
    const auto origin = sclock::now(); // before the constructions, which count as touches
    for (int i = 0; i < kPeers; ++i)
      peers.push_back(std::make_unique<hb>(ctx, hb::options{kPing, kDrop}));
    for (int i = 0; i < kPeers; ++i)
      next(i);
    toucher<hb> t(peers, origin, 5ms, 60); // 300 ms of input
    stall_probe probe(ctx, 300ms + kDrop + 20ms);
    const bool timed_out = guarded_run(ctx, kMtWatchdog).timed_out;
    t.join();

    CHECK_FALSE(timed_out);
    for (int i = 0; i < kPeers; ++i) {
      CAPTURE(i);
      const auto& l = logs[i];
      REQUIRE(!l.events.empty());
      CHECK(l.events.back() == hb::event::drop);
    }
    const bool steady = t.max_gap() < kPing - 20ms && probe.max_gap() < kDrop - kPing - 10ms;
    if (!steady && !last)
      return false;
    for (int i = 0; i < kPeers; ++i) {
      CAPTURE(i);
      const auto& l = logs[i];
      REQUIRE(l.events.size() == 2);
      CHECK(l.events[0] == hb::event::ping);
      CHECK(l.at[0] >= t.last_start() + kPing);
      CHECK(l.at[1] >= t.last_start() + kDrop);
      CHECK(l.at[1] - (t.last_start() + kDrop) < kPrompt);
    }
    return true;
  });
}

// ---------------------------------------------------------------------------------------
// heartbeat_group: the members' touch() from other threads; the group on a strand.
// ---------------------------------------------------------------------------------------

namespace {

using group_type = asio_wheel::heartbeat_group;

struct connection : group_type::member {
  std::size_t id = 0;
};

} // namespace

TEST_CASE("heartbeat_group: touch() from another thread keeps members quiet; each is dropped "
          "once, a drop_after after the last touch, never before") {
  asio::io_context ctx(1);
  constexpr std::size_t kMembers = 256;
  constexpr auto kDrop = 100ms;
  std::vector<std::unique_ptr<connection>> conns;
  std::vector<int> drops(kMembers, 0);
  std::vector<sclock::time_point> dropped_at(kMembers);
  group_type group(ctx, {{}, kDrop}, [&](group_type::member& m, group_type::event ev) {
    const auto id = static_cast<connection&>(m).id;
    CHECK(ev == group_type::event::drop);
    ++drops[id];
    dropped_at[id] = sclock::now();
  });
  const auto start = sclock::now();
  for (std::size_t i = 0; i < kMembers; ++i) {
    conns.push_back(std::make_unique<connection>());
    conns.back()->id = i;
    group.watch(*conns.back());
  }
  toucher<connection> t(conns, start, 5ms, 80); // 400 ms of touching
  const bool timed_out = guarded_run(ctx, kMtWatchdog).timed_out;
  t.join();

  CHECK_FALSE(timed_out);
  CHECK(group.size() == 0);
  const bool steady = t.max_gap() < kDrop - 20ms;
  if (!steady)
    MESSAGE("toucher stalled (gap " << t.max_gap() << "): keep-alive not asserted");
  for (std::size_t i = 0; i < kMembers; ++i) {
    CAPTURE(i);
    CHECK(drops[i] == 1);
    CHECK(dropped_at[i] >= start + kDrop);
    if (steady)
      CHECK(dropped_at[i] >= t.last_start() + kDrop);
  }
}

TEST_CASE("heartbeat_group: on a strand of a context run by two threads, with members watched, "
          "unwatched and destroyed from handlers on that strand") {
  // Each member is pinged only if its judgement comes before its drop_after (a later one
  // reports the drop alone): a strand held back that long (the probe on it) is tried again.
  until_premise([&](bool last) {
    asio::io_context ctx(2);
    auto strand = asio::make_strand(ctx);
    constexpr std::size_t kMembers = 200;
    constexpr auto kPing = 20ms;
    constexpr auto kDrop = 250ms;
    std::vector<std::unique_ptr<connection>> conns(kMembers);
    std::atomic<int> pings{0}, drops{0};
    group_type group(strand, {kPing, kDrop}, [&](group_type::member& m, group_type::event ev) {
      auto& c = static_cast<connection&>(m);
      if (ev == group_type::event::ping) {
        pings.fetch_add(1, std::memory_order_relaxed);
      } else {
        drops.fetch_add(1, std::memory_order_relaxed);
        conns[c.id].reset(); // the connection closes
      }
    });
    // Every third member is destroyed before its drop, every fifth unwatched: from the strand.
    std::size_t expected_drops = 0;
    for (std::size_t i = 0; i < kMembers; ++i) {
      conns[i] = std::make_unique<connection>();
      conns[i]->id = i;
      if (i % 3 != 0 && i % 5 != 0)
        ++expected_drops;
    }
    asio::post(strand, [&] {
      for (auto& c : conns)
        group.watch(*c);
      for (std::size_t i = 0; i < kMembers; ++i) {
        if (i % 3 == 0)
          conns[i].reset();
        else if (i % 5 == 0)
          group.unwatch(*conns[i]);
      }
    });
    std::thread toucher_thread([&] {
      // Touches racing with the strand's handlers: only members that outlive the test are
      // touched (the unwatched ones).
      for (int r = 0; r < 20; ++r) {
        for (std::size_t i = 5; i < kMembers; i += 15)
          conns[i]->touch();
        std::this_thread::sleep_for(2ms);
      }
    });
    stall_probe probe(strand, 40ms + kDrop + 20ms);
    const bool timed_out = guarded_run_threads(ctx, 2, kMtWatchdog).timed_out;
    toucher_thread.join();
    CHECK_FALSE(timed_out);
    CHECK(drops.load() == static_cast<int>(expected_drops));
    CHECK(group.size() == 0);
    if (probe.max_gap() >= kDrop - kPing - 10ms && !last)
      return false;
    CHECK(pings.load() >= static_cast<int>(expected_drops));
    return true;
  });
}
