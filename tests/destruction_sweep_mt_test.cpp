//
// destruction_sweep_mt_test.cpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// destruction_sweep_test with the context run by several threads (issue 34): each object
// is destroyed by a handler on one thread while its wait may be pending, due, queued, or
// completing on another; with its handler bound to a strand (and destroyed on that strand,
// or off it); and, for ranges, while another thread calls timeout_scale::set(). Every
// handler must be called exactly once, with success or operation_aborted; ASan and TSan
// must find nothing. A TEST_CASE_TEMPLATE that runs
// asio::steady_timer first. Then heartbeat_group members destroyed on the group's strand
// from the context's threads.

#include <asio_wheel/heartbeat_group.hpp>
#include <asio_wheel/timeout_scale.hpp>

#include <asio/bind_executor.hpp>
#include <asio/error.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <asio/strand.hpp>

#include <doctest/doctest.h>

#include "asio_test_support.hpp"
#include "destroyable_waits.hpp"
#include "test_rounds.hpp"

#include <atomic>
#include <chrono>
#include <memory>
#include <random>
#include <set>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;
using namespace asio_wheel::test;
using sclock = std::chrono::steady_clock;

#if defined(ASIO_WHEEL_TEST_SANITIZED)
constexpr int kRounds = 40;
#else
constexpr int kRounds = 200;
#endif
// kRounds, or fewer where the platform makes each round dear (support/test_rounds.hpp).
int rounds() {
  static const int n = test_rounds(kRounds);
  return n;
}
constexpr int kObjects = 24;
constexpr int kThreads = 3;

using steady = steady_kind<sclock>;
using idle = idle_kind<sclock>;
using heartbeat = heartbeat_kind<sclock>;
using idle_range = idle_kind<sclock, true>;
using heartbeat_range = heartbeat_kind<sclock, true>;

enum class where { anywhere, on_strand, off_strand };

// One round: kObjects objects due 1..3 ms ahead, their handlers bound to a strand unless
// `w` is anywhere, each destroyed by a handler posted 0..4 ms later (to the strand for
// on_strand), on whichever thread runs it; `during` runs on a thread of its own meanwhile.
template <typename Kind, typename During>
void round(std::mt19937& rng, where w, During during) {
  asio::io_context ioc;
  auto work = asio::make_work_guard(ioc);
  auto strand = asio::make_strand(ioc);
  std::vector<std::unique_ptr<typename Kind::object>> objects;
  std::vector<wait_record> records(kObjects);
  std::uniform_int_distribution<int> ahead_us(1000, 3000), later_us(0, 4000);
  for (int i = 0; i < kObjects; ++i) {
    const auto d = std::chrono::microseconds(ahead_us(rng));
    objects.push_back(Kind::make(ioc.get_executor(), d));
    if (w == where::anywhere)
      Kind::wait(*objects[i], record_handler{&records[i]});
    else
      Kind::wait(*objects[i], asio::bind_executor(strand, record_handler{&records[i]}));
  }
  std::vector<std::thread> runners;
  for (int t = 0; t < kThreads; ++t)
    runners.emplace_back([&] { ioc.run(); });
  std::atomic<bool> stop{false};
  std::thread side([&] { during(ioc, stop); });
  std::vector<std::unique_ptr<asio::steady_timer>> destroyers;
  std::atomic<int> destroyed{0};
  for (int i = 0; i < kObjects; ++i) {
    destroyers.push_back(
        std::make_unique<asio::steady_timer>(ioc, std::chrono::microseconds(later_us(rng))));
    auto destroy = [&, i](asio::error_code) {
      objects[i].reset();
      destroyed.fetch_add(1);
    };
    if (w == where::on_strand)
      destroyers.back()->async_wait(asio::bind_executor(strand, destroy));
    else
      destroyers.back()->async_wait(destroy);
  }
  const auto give_up = sclock::now() + 30s;
  const auto all_called = [&] {
    for (auto& r : records)
      if (r.calls.load() == 0)
        return false;
    return true;
  };
  while ((destroyed.load() < kObjects || !all_called()) && sclock::now() < give_up)
    std::this_thread::sleep_for(1ms);
  std::this_thread::sleep_for(5ms); // a second call would show
  stop = true;
  side.join();
  work.reset();
  ioc.stop();
  for (auto& t : runners)
    t.join();
  for (int i = 0; i < kObjects; ++i) {
    CAPTURE(i);
    const wait_record& r = records[i];
    CHECK(r.calls.load() == 1);
    CHECK((r.ec == kOk || r.ec == kAborted));
  }
}

void nothing(asio::io_context&, std::atomic<bool>&) {}

// Swings the factor between 0 and 1 until stopped: parked waits are woken, and made due.
void swing(asio::io_context& ioc, std::atomic<bool>& stop) {
  auto& scale = asio_wheel::timeout_scale::of(ioc);
  for (int i = 0; !stop.load(); ++i) {
    scale.set(i % 2 == 0 ? 0.0 : 1.0);
    std::this_thread::sleep_for(300us);
  }
  scale.set(1.0);
}

} // namespace

TEST_CASE_TEMPLATE("destroyed from any thread running the context, at any point of its wait: "
                   "each handler called exactly once",
                   Kind, steady, idle, heartbeat) {
  std::mt19937 rng(34);
  for (const where w : {where::anywhere, where::on_strand, where::off_strand}) {
    CAPTURE(static_cast<int>(w));
    for (int i = 0; i < rounds(); ++i)
      round<Kind>(rng, w, nothing);
  }
}

TEST_CASE_TEMPLATE("with ranges: destroyed while another thread calls timeout_scale::set(): "
                   "each handler called exactly once",
                   Kind, idle_range, heartbeat_range) {
  std::mt19937 rng(3434);
  for (const where w : {where::anywhere, where::on_strand}) {
    CAPTURE(static_cast<int>(w));
    for (int i = 0; i < rounds(); ++i) {
      round<Kind>(rng, w, swing);
    }
  }
}

TEST_CASE("heartbeat_group on a strand, members destroyed on it from the context's threads "
          "while another thread calls timeout_scale::set(): no event for a destroyed member") {
  using group_t = asio_wheel::heartbeat_group;
  std::mt19937 rng(343434);
  for (const bool ranges : {false, true}) {
    CAPTURE(ranges);
    for (int round = 0; round < rounds(); ++round) {
      asio::io_context ioc;
      auto work = asio::make_work_guard(ioc);
      auto strand = asio::make_strand(ioc);
      const group_t::options opts =
          ranges ? group_t::options{{1ms, 1s}, {2ms, 2s}} : group_t::options{1ms, 2ms};
      // Only the strand touches these.
      std::set<const group_t::member*> live;
      int stray = 0, events = 0;
      std::vector<std::unique_ptr<group_t::member>> members(kObjects);
      std::unique_ptr<group_t> group;
      std::atomic<int> done{0};
      asio::post(strand, [&] {
        group = std::make_unique<group_t>(strand, opts, [&](group_t::member& m, group_t::event) {
          ++events;
          if (live.count(&m) == 0)
            ++stray;
        });
        for (auto& m : members) {
          m = std::make_unique<group_t::member>();
          live.insert(m.get());
          group->watch(*m);
        }
        done.fetch_add(1);
      });
      std::vector<std::thread> runners;
      for (int t = 0; t < kThreads; ++t)
        runners.emplace_back([&] { ioc.run(); });
      std::atomic<bool> stop{false};
      std::thread side([&] {
        if (ranges)
          swing(ioc, stop);
      });
      while (done.load() == 0)
        std::this_thread::yield();
      std::vector<std::unique_ptr<asio::steady_timer>> destroyers;
      std::uniform_int_distribution<int> later_us(0, 4000);
      for (int i = 0; i < kObjects; ++i) {
        destroyers.push_back(
            std::make_unique<asio::steady_timer>(ioc, std::chrono::microseconds(later_us(rng))));
        destroyers.back()->async_wait(asio::bind_executor(strand, [&, i](asio::error_code) {
          live.erase(members[i].get());
          members[i].reset();
          done.fetch_add(1);
        }));
      }
      while (done.load() < kObjects + 1)
        std::this_thread::sleep_for(1ms);
      stop = true;
      side.join();
      std::atomic<bool> gone{false};
      asio::post(strand, [&] {
        group.reset();
        gone = true;
      });
      while (!gone.load())
        std::this_thread::sleep_for(1ms);
      work.reset();
      ioc.stop();
      for (auto& t : runners)
        t.join();
      CHECK(stray == 0);
    }
  }
}
