//
// scaled_timeout_mt_test.cpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// Timeout ranges scaled by timeout_scale (issue 17), with the factor changed from another
// thread, up and down, many times, while heartbeat_group members, idle timers and heartbeats
// wait on an io_context run by several threads (each connection on its strand, the group on
// its own). Under ThreadSanitizer this is the proof that set() may be called from any
// thread at any time.
//
// Never early, checked exactly although the factor moves under the waiters: the setter logs
// each factor with a time read before it is stored, so the factor an event was judged by is
// one of those in force between the earliest instant it may have been judged (its last
// activity plus the range's minimum: no factor is lower) and the event's own time. The
// event's idle time must reach the smallest threshold among those. Activity and re-arming
// happen on each waiter's own strand, so the stamp an event handler reads is the one it was
// judged by. Then the factor is set to 0 and left there: every waiter must complete promptly
// (its minimum has passed long since).
//
// Options are written {ping_after, drop_after}, without designators: this file builds as
// C++17 too (scripts/test's cxx17 stage).

#include <asio_wheel/heartbeat.hpp>
#include <asio_wheel/heartbeat_group.hpp>
#include <asio_wheel/idle_timer.hpp>
#include <asio_wheel/timeout_scale.hpp>

#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <asio/strand.hpp>

#include <doctest/doctest.h>

#include "asio_test_support.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;
using namespace asio_wheel::test;
using strand_type = asio::strand<asio::io_context::executor_type>;
using range = asio_wheel::timeout_range<sclock::duration>;

#if defined(ASIO_WHEEL_TEST_SANITIZED)
constexpr auto kRunFor = 1200ms;
#else
constexpr auto kRunFor = 800ms;
#endif
// After the factor is left at 0, for every waiter: a hang guard (each is then due at once),
// generous for a loaded machine under a sanitizer.
constexpr auto kPromptAll = 20s;
// How long a test goes on after kRunFor while what it counts has not happened yet (a loaded
// machine may have run its threads little meanwhile: the checks ask that things happened, not
// how fast).
constexpr auto kPatience = 20s;

// Sleeps for kRunFor, then until `enough()` holds, for at most kPatience more.
template <class Enough>
void run_phase(Enough enough) {
  std::this_thread::sleep_for(kRunFor);
  for (const auto end = sclock::now() + kPatience; !enough() && sclock::now() < end;)
    std::this_thread::sleep_for(10ms);
}

// The factors set, each with a time read before set() and one read after it returned (the
// store is visible to every thread then: set() releases a lock after it).
struct factor_log {
  struct entry {
    sclock::time_point before, after;
    double factor;
  };
  std::mutex mutex;
  std::vector<entry> entries{{sclock::time_point::min(), sclock::time_point::min(), 1.0}};

  std::size_t size() {
    std::lock_guard lock(mutex);
    return entries.size();
  }

  void set(asio_wheel::timeout_scale& scale, double f) {
    const auto before = sclock::now();
    scale.set(f);
    const auto after = sclock::now();
    std::lock_guard lock(mutex);
    entries.push_back({before, after, f});
  }

  // The smallest threshold of `r` among the factors that may have been read at some instant
  // of [from, to]: entry i may be read from its set() call on, until the next one returned.
  sclock::duration lowest(const range& r, sclock::time_point from, sclock::time_point to) {
    std::lock_guard lock(mutex);
    sclock::duration low = r.max;
    for (std::size_t i = 0; i < entries.size(); ++i) {
      const bool superseded = i + 1 < entries.size() && entries[i + 1].after < from;
      if (entries[i].before <= to && !superseded)
        low = std::min(low, r.at(entries[i].factor));
    }
    return low;
  }
};

// An event: when, how long the waiter had been idle, which range.
struct event_record {
  sclock::time_point at;
  sclock::time_point last;
  range r;
};

struct event_log {
  std::mutex mutex;
  std::vector<event_record> events;
  void add(event_record e) {
    std::lock_guard lock(mutex);
    events.push_back(e);
  }
};

// Changes the factor of `scale` up and down until `stop`, logging each change.
void change_factor(asio_wheel::timeout_scale& scale, factor_log& log, std::atomic<bool>& stop) {
  std::mt19937 rng(1717);
  const double factors[] = {1.0, 0.0, 0.5, 0.9, 0.1, 0.25, 1.0, 0.0, 0.7};
  while (!stop.load()) {
    log.set(scale, factors[rng() % std::size(factors)]);
    std::this_thread::sleep_for(std::chrono::microseconds(200 + rng() % 3000));
  }
}

void check_never_early(event_log& events, factor_log& factors) {
  std::lock_guard lock(events.mutex);
  std::size_t early = 0;
  for (const auto& e : events.events) {
    const auto threshold = factors.lowest(e.r, e.last + e.r.min, e.at);
    if (e.at - e.last < threshold) {
      if (++early <= 5)
        MESSAGE("early by " << (threshold - (e.at - e.last)).count() << " ns");
    }
  }
  CHECK(early == 0);
}

} // namespace

TEST_CASE("heartbeat_group: the factor changed from another thread, up and down, while "
          "members wait on a context run by several threads") {
  asio::io_context ioc(4);
  auto& scale = asio_wheel::timeout_scale::of(ioc);
  factor_log factors;
  event_log events;
  const range ping{3ms, 30ms};
  const range drop{8ms, 80ms};
  using group_t = asio_wheel::basic_heartbeat_group<sclock, asio::wait_traits<sclock>, strand_type>;
  strand_type strand = asio::make_strand(ioc);
  std::atomic<bool> rewatch{true};
  constexpr std::size_t kMembers = 300;
  std::vector<group_t::member> members(kMembers);
  std::atomic<std::size_t> drops{0}, pings{0};
  std::unique_ptr<group_t> group;
  group = std::make_unique<group_t>(strand, group_t::options{ping, drop},
                                    [&](group_t::member& m, group_t::event ev) {
                                      const auto now = sclock::now();
                                      if (ev == group_t::event::ping) {
                                        pings.fetch_add(1);
                                        events.add({now, m.last_activity(), ping});
                                        return;
                                      }
                                      drops.fetch_add(1);
                                      events.add({now, m.last_activity(), drop});
                                      if (rewatch.load())
                                        group->watch(m);
                                    });
  asio::post(strand, [&] {
    for (auto& m : members)
      group->watch(m);
  });
  // Some members answer on the strand now and then: new spells, lazy re-filing.
  std::atomic<bool> stop_touch{false};
  std::function<void()> touch_some;
  asio::steady_timer toucher(strand);
  std::mt19937 rng(4);
  touch_some = [&] {
    if (stop_touch.load())
      return;
    for (int i = 0; i < 20; ++i)
      members[rng() % kMembers].touch();
    toucher.expires_after(2ms);
    toucher.async_wait([&](asio::error_code ec) {
      if (!ec)
        touch_some();
    });
  };
  asio::post(strand, touch_some);

  std::vector<std::thread> threads;
  auto work = asio::make_work_guard(ioc);
  for (int i = 0; i < 3; ++i)
    threads.emplace_back([&] { ioc.run(); });
  std::atomic<bool> stop_setter{false};
  std::thread setter([&] { change_factor(scale, factors, stop_setter); });
  run_phase([&] { return factors.size() > 50 && drops.load() > 0 && pings.load() > 0; });
  stop_setter.store(true);
  setter.join();
  // Left at 0: every member is past its minimum, so every member is dropped promptly.
  asio::post(strand, [&] {
    stop_touch.store(true);
    rewatch.store(false);
    toucher.cancel();
  });
  factors.set(scale, 0.0);
  const auto deadline = sclock::now() + kPromptAll;
  std::size_t left = kMembers;
  while (sclock::now() < deadline) {
    std::promise<std::size_t> size;
    asio::post(strand, [&] { size.set_value(group->size()); });
    left = size.get_future().get();
    if (left == 0)
      break;
    std::this_thread::sleep_for(5ms);
  }
  CHECK(left == 0);
  asio::post(strand, [&] { group.reset(); });
  work.reset();
  for (auto& t : threads)
    t.join();
  MESSAGE(drops.load() << " drops, " << pings.load() << " pings, " << factors.entries.size()
                       << " factor changes");
  CHECK(drops.load() > kMembers);
  CHECK(pings.load() > 0);
  CHECK(factors.entries.size() > 50);
  check_never_early(events, factors);
}

TEST_CASE("idle_timer and heartbeat: the factor changed from another thread, up and down, "
          "while they wait on a context run by several threads") {
  asio::io_context ioc(4);
  auto& scale = asio_wheel::timeout_scale::of(ioc);
  factor_log factors;
  event_log events;
  const range idle_ranges[] = {{5ms, 60ms}, {2ms, 40ms}};
  const range ping{3ms, 25ms};
  const range drop{9ms, 70ms};

  // One connection: a strand, an idle timer and a heartbeat on it, re-armed on completion
  // while `again`; touched on its strand now and then.
  struct connection {
    strand_type strand;
    asio_wheel::basic_idle_timer<sclock, asio::wait_traits<sclock>, strand_type> idle;
    asio_wheel::basic_heartbeat<sclock, asio::wait_traits<sclock>, strand_type> hb;
    range idle_range;
    bool idle_done = false, hb_done = false;
    connection(asio::io_context& ioc, const range& ir, const range& p, const range& d)
        : strand(asio::make_strand(ioc)), idle(strand, ir), hb(strand, {p, d}), idle_range(ir) {}
  };
  constexpr std::size_t kConnections = 120;
  std::vector<std::unique_ptr<connection>> conns;
  for (std::size_t i = 0; i < kConnections; ++i)
    conns.push_back(std::make_unique<connection>(ioc, idle_ranges[i % 2], ping, drop));
  std::atomic<bool> again{true};
  std::atomic<std::size_t> idle_events{0}, hb_events{0}, finished{0};

  std::function<void(connection&)> wait_idle = [&](connection& c) {
    c.idle.async_wait([&, cp = &c](asio::error_code ec) {
      if (ec) {
        cp->idle_done = true;
        finished.fetch_add(1);
        return;
      }
      idle_events.fetch_add(1);
      events.add({sclock::now(), cp->idle.last_activity(), cp->idle_range});
      if (again.load()) {
        cp->idle.touch();
        wait_idle(*cp);
      } else {
        cp->idle_done = true;
        finished.fetch_add(1);
      }
    });
  };
  std::function<void(connection&)> next_hb = [&](connection& c) {
    c.hb.async_next([&, cp = &c](asio::error_code ec, auto ev) {
      if (ec) {
        cp->hb_done = true;
        finished.fetch_add(1);
        return;
      }
      hb_events.fetch_add(1);
      using ev_t = decltype(ev);
      events.add({sclock::now(), cp->hb.last_activity(), ev == ev_t::ping ? ping : drop});
      if (ev == ev_t::drop) {
        if (!again.load()) {
          cp->hb_done = true;
          finished.fetch_add(1);
          return;
        }
        cp->hb.touch();
      }
      next_hb(*cp);
    });
  };
  for (auto& c : conns)
    asio::post(c->strand, [&, cp = c.get()] {
      wait_idle(*cp);
      next_hb(*cp);
    });

  std::vector<std::thread> threads;
  auto work = asio::make_work_guard(ioc);
  for (int i = 0; i < 3; ++i)
    threads.emplace_back([&] { ioc.run(); });
  std::atomic<bool> stop_setter{false};
  std::thread setter([&] { change_factor(scale, factors, stop_setter); });
  // Touches on each connection's strand, from a thread of their own making the posts.
  std::atomic<bool> stop_touch{false};
  std::thread toucher([&] {
    std::mt19937 rng(9);
    while (!stop_touch.load()) {
      connection& c = *conns[rng() % kConnections];
      asio::post(c.strand, [&c] {
        c.idle.touch();
        c.hb.touch();
      });
      std::this_thread::sleep_for(100us);
    }
  });
  run_phase([&] { return factors.size() > 50 && idle_events.load() > 0 && hb_events.load() > 0; });
  stop_setter.store(true);
  setter.join();
  stop_touch.store(true);
  toucher.join();
  again.store(false);
  factors.set(scale, 0.0);
  const auto deadline = sclock::now() + kPromptAll;
  while (finished.load() < 2 * kConnections && sclock::now() < deadline)
    std::this_thread::sleep_for(5ms);
  CHECK(finished.load() == 2 * kConnections);
  // Whatever is left (nothing, if the check passed) is cancelled before the threads stop.
  for (auto& c : conns)
    asio::post(c->strand, [cp = c.get()] {
      cp->idle.cancel();
      cp->hb.cancel();
    });
  work.reset();
  for (auto& t : threads)
    t.join();
  MESSAGE(idle_events.load() << " idle completions, " << hb_events.load() << " heartbeat events, "
                             << factors.entries.size() << " factor changes");
  CHECK(idle_events.load() > kConnections);
  CHECK(hb_events.load() > kConnections);
  check_never_early(events, factors);
  for (auto& c : conns) {
    CHECK(c->idle_done);
    CHECK(c->hb_done);
  }
}

TEST_CASE("timeout_scale: set() from another thread while groups and timers with ranges come "
          "and go") {
  // Registration and unregistration of listeners race with set(): a group's destructor
  // waits for a set() that is telling it, and a change posted to a group already gone finds
  // it gone.
  asio::io_context ioc(1);
  auto& scale = asio_wheel::timeout_scale::of(ioc);
  std::atomic<bool> stop{false};
  std::atomic<std::size_t> sets{0};
  std::thread setter([&] {
    const double factors[] = {0.0, 1.0, 0.5, 0.25};
    for (std::size_t i = 0; !stop.load(); ++i) {
      scale.set(factors[i % std::size(factors)]);
      sets.fetch_add(1);
    }
  });
#if defined(ASIO_WHEEL_TEST_SANITIZED)
  constexpr int kRounds = 200;
#else
  constexpr int kRounds = 1000;
#endif
  std::size_t events = 0, completions = 0;
  for (int i = 0; i < kRounds; ++i) {
    asio_wheel::heartbeat_group group(ioc, {{1ms, 3ms}, {2ms, 6ms}},
                                      [&](asio_wheel::heartbeat_group::member&,
                                          asio_wheel::heartbeat_group::event) { ++events; });
    asio_wheel::heartbeat_group::member m;
    group.watch(m);
    asio_wheel::idle_timer idle(ioc, asio_wheel::idle_timer::range{1ms, 4ms});
    idle.async_wait([&](asio::error_code) { ++completions; });
    ioc.restart();
    ioc.run_for(std::chrono::microseconds(i % 4 * 1000));
  }
  stop.store(true);
  setter.join();
  ioc.restart();
  ioc.run(); // the aborted waits, and the changes posted to groups now gone
  MESSAGE(sets.load() << " changes of the factor, " << events << " group events, " << completions
                      << " idle completions");
  CHECK(completions == static_cast<std::size_t>(kRounds)); // each completed or aborted once
  CHECK(sets.load() > 0);
}
