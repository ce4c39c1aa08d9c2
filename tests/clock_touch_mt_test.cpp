//
// clock_touch_mt_test.cpp
// ~~~~~~~~~~~~~~~~~~~~~~~
//
// touch() from several threads keeps the latest activity (issue 13, defect 6). A touch is a
// clock read and then a write; a thread descheduled between the two must not overwrite a
// later touch that has returned meanwhile, or an idle timeout completes less than `timeout`
// after that touch.
//
//   * Deterministic: on a frozen manual_clock whose read hook holds one thread between its
//     read and its write while another touches later, for idle_timer, heartbeat and a
//     heartbeat_group member; then the idle timeout counts from the later touch.
//   * Under load: threads touching one idle_timer on steady_clock; after each touch the
//     stamp is no earlier than a reading taken before it, and the wait completes no
//     earlier than `timeout` after the latest touch of any thread.
//
// Runs under TSan (the "concurrency" label).
//
//
// Options are written {ping_after, drop_after}, without designators: this file builds as
// C++17 too (scripts/test's cxx17 stage).

#include <asio_wheel/heartbeat.hpp>
#include <asio_wheel/heartbeat_group.hpp>
#include <asio_wheel/idle_timer.hpp>

#include <asio/error.hpp>
#include <asio/io_context.hpp>

#include <doctest/doctest.h>

#include "asio_test_support.hpp"
#include "manual_clock.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <thread>
#include <utility>
#include <vector>

namespace {

using namespace std::chrono_literals;
using namespace asio_wheel::test;

struct held_tag;
using held_clock = manual_clock<held_tag, std::chrono::nanoseconds, true>;
const held_clock::time_point kT0{std::chrono::hours(1)};

// Two touches that race: thread A reads kT0 + 1 ms and is held before its write; meanwhile
// this thread touches at kT0 + 2 ms (and returns); then A writes. `touch` touches the object
// under test, `last` reads its stamp. Returns the stamp after both.
template <typename Touch, typename Last>
held_clock::time_point race_two_touches(Touch touch, Last last) {
  held_clock::set(kT0 + 1ms);
  std::promise<void> read;
  std::promise<void> go_on;
  std::thread a([&] {
    bool held = false;
    held_clock::on_read_in_this_thread([&](held_clock::time_point) {
      if (std::exchange(held, true))
        return;
      read.set_value();
      go_on.get_future().wait();
    });
    touch();
    held_clock::on_read_in_this_thread({});
  });
  read.get_future().wait(); // A has read kT0 + 1 ms, and has not written
  held_clock::set(kT0 + 2ms);
  touch();
  CHECK(last() == kT0 + 2ms);
  go_on.set_value();
  a.join();
  return last();
}

} // namespace

TEST_CASE("idle_timer: a touch held between its clock read and its write does not move the "
          "activity back over a later touch") {
  held_clock::reset(kT0, /*running=*/false);
  asio::io_context ioc;
  asio_wheel::basic_idle_timer<held_clock> idle(ioc, 10ms);
  CHECK(race_two_touches([&] { idle.touch(); }, [&] { return idle.last_activity(); }) == kT0 + 2ms);

  // The timeout counts from the later touch: not complete 10 ms after the earlier one.
  outcome o;
  idle.async_wait(record(o));
  held_clock::set(kT0 + 11ms);
  const auto still = sclock::now() + 30ms;
  while (sclock::now() < still) {
    ioc.restart();
    ioc.run_for(2ms);
  }
  CHECK(o.calls == 0);
  held_clock::set(kT0 + 13ms);                  // one wheel tick past kT0 + 12 ms
  const auto limit = sclock::now() + kWatchdog; // a hang guard: the step needs a turn or two
  while (o.calls == 0 && sclock::now() < limit) {
    ioc.restart();
    ioc.run_for(2ms);
  }
  CHECK(o.calls == 1);
  CHECK(o.ec == kOk);
}

TEST_CASE("heartbeat: a touch held between its clock read and its write does not move the "
          "activity back over a later touch") {
  held_clock::reset(kT0, false);
  asio::io_context ioc;
  asio_wheel::basic_heartbeat<held_clock> hb(ioc, {5ms, 10ms});
  CHECK(race_two_touches([&] { hb.touch(); }, [&] { return hb.last_activity(); }) == kT0 + 2ms);
}

TEST_CASE("heartbeat_group: a member's touch held between its clock read and its write does not "
          "move the activity back over a later touch") {
  using group_type = asio_wheel::basic_heartbeat_group<held_clock>;
  held_clock::reset(kT0, false);
  asio::io_context ioc;
  group_type group(ioc, {5ms, 10ms}, [](group_type::member&, group_type::event) {});
  group_type::member m;
  group.watch(m);
  CHECK(race_two_touches([&] { m.touch(); }, [&] { return m.last_activity(); }) == kT0 + 2ms);
}

TEST_CASE("idle_timer touched by several threads on steady_clock: the stamp never goes back "
          "behind a returned touch, and the timeout counts from the latest") {
  using clock = std::chrono::steady_clock;
  asio::io_context ioc;
  const auto timeout = 20ms;
  asio_wheel::idle_timer idle(ioc, timeout);
  std::atomic<clock::rep> latest_before{clock::now().time_since_epoch().count()};
  std::atomic<int> stale{0};
  std::atomic<bool> stop{false};

#if defined(ASIO_WHEEL_TEST_SANITIZED)
  constexpr int kThreads = 2;
#else
  constexpr int kThreads = 3;
#endif
  std::vector<std::thread> touchers;
  for (int i = 0; i < kThreads; ++i)
    touchers.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) {
        const clock::time_point before = clock::now();
        idle.touch();
        if (idle.last_activity() < before)
          stale.fetch_add(1, std::memory_order_relaxed);
        clock::rep seen = latest_before.load(std::memory_order_relaxed);
        const clock::rep b = before.time_since_epoch().count();
        while (seen < b && !latest_before.compare_exchange_weak(seen, b)) {
        }
      }
    });

  outcome o;
  clock::time_point done_at{};
  idle.async_wait([&](asio::error_code ec) {
    done_at = clock::now();
    o.complete(ec);
  });
  std::thread stopper([&] {
    std::this_thread::sleep_for(60ms);
    stop = true;
  });
  stopper.join();
  for (auto& t : touchers)
    t.join();
  const auto r = guarded_run(ioc);
  CHECK_FALSE(r.timed_out);
  CHECK(o.calls == 1);
  CHECK(o.ec == kOk);
  CHECK(stale.load() == 0);
  CHECK(done_at >= clock::time_point(clock::duration(latest_before.load())) + timeout);
}
