//
// heartbeat_group_test.cpp
// ~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// asio_wheel::heartbeat_group on one thread (touch() from other threads and a strand are in
// idle_timer_mt_test.cpp).
//
// Events: one ping per quiet spell, then a drop, after which the member is unwatched; a
// zero ping_after gives drops only; touches start new spells; never early. The group's
// bookkeeping: watch/unwatch/re-watch, destruction of members and of the group (also from
// the event handler), another group's member, invalid options, an exception from the
// handler, a burst larger than one run's budget, run() returning once nothing is watched.
//
// Timing as in idle_timer_test.cpp: lower bounds are times taken before the touch or watch
// they refer to, so never-early checks are exact; upper bounds are generous (kPrompt).

#include <asio_wheel/heartbeat_group.hpp>
#include <asio_wheel/wheel_timer.hpp>

#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>

#include <doctest/doctest.h>

#include "asio_test_support.hpp"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;
using namespace asio_wheel::test;
using group_type = asio_wheel::heartbeat_group;
using member = group_type::member;
using hb_event = group_type::event;

constexpr auto kPrompt = 3s;

struct connection : member {
  int id = 0;
};

struct record {
  const member* who;
  hb_event ev;
  sclock::time_point at;
};

// The events a group delivered, and an optional reaction to each.
struct recorder {
  std::vector<record> events;
  std::function<void(member&, hb_event)> react;

  group_type::event_handler handler() {
    return [this](member& m, hb_event ev) {
      events.push_back({&m, ev, sclock::now()});
      if (react)
        react(m, ev);
    };
  }

  std::vector<record> of(const member& m) const {
    std::vector<record> out;
    for (const auto& r : events)
      if (r.who == &m)
        out.push_back(r);
    return out;
  }
};

} // namespace

TEST_CASE("heartbeat_group: a member costs 56 bytes") {
  static_assert(sizeof(member) <= 64, "the issue's target: at most 64 bytes per connection");
  CHECK(sizeof(member) == 56);
}

TEST_CASE("heartbeat_group: one ping after ping_after of silence, a drop after drop_after, "
          "then the member is unwatched and run() returns") {
  asio::io_context ctx;
  recorder rec;
  group_type group(ctx, {.ping_after = 40ms, .drop_after = 150ms}, rec.handler());
  CHECK(group.get_options().ping_after == 40ms);
  CHECK(group.get_options().drop_after == 150ms);
  connection c;
  CHECK_FALSE(c.is_watched());
  const auto before = sclock::now();
  group.watch(c);
  CHECK(c.is_watched());
  CHECK(group.size() == 1);
  const auto r = guarded_run(ctx);

  REQUIRE(rec.events.size() == 2);
  CHECK(rec.events[0].who == &c);
  CHECK(rec.events[0].ev == hb_event::ping);
  CHECK(rec.events[0].at >= before + 40ms);
  CHECK(rec.events[0].at >= c.last_activity() + 40ms);
  CHECK(rec.events[1].ev == hb_event::drop);
  CHECK(rec.events[1].at >= before + 150ms);
  CHECK(rec.events[1].at - (before + 150ms) < kPrompt);
  CHECK_FALSE(c.is_watched());
  CHECK(group.size() == 0);
  CHECK_PROMPT(r);
}

TEST_CASE("heartbeat_group: a zero ping_after is an idle timeout: drops only") {
  asio::io_context ctx;
  recorder rec;
  group_type group(ctx, {.drop_after = 60ms}, rec.handler());
  connection a, b;
  const auto before = sclock::now();
  group.watch(a);
  group.watch(b);
  const auto r = guarded_run(ctx);
  REQUIRE(rec.events.size() == 2);
  for (const auto& e : rec.events) {
    CHECK(e.ev == hb_event::drop);
    CHECK(e.at >= before + 60ms);
  }
  CHECK_PROMPT(r);
}

TEST_CASE("heartbeat_group: a touch starts a new quiet spell: pinged again only ping_after "
          "after it, and the drop moves") {
  asio::io_context ctx;
  constexpr auto kPing = 50ms;
  constexpr auto kDrop = 250ms;
  constexpr int kAnswered = 3;
  recorder rec;
  std::vector<sclock::time_point> touches;
  int pings = 0;
  rec.react = [&](member& m, hb_event ev) {
    if (ev == hb_event::ping && ++pings <= kAnswered) {
      touches.push_back(sclock::now());
      m.touch(); // the peer answered the ping
    }
  };
  group_type group(ctx, {.ping_after = kPing, .drop_after = kDrop}, rec.handler());
  connection c;
  const auto before = sclock::now();
  group.watch(c);
  const auto r = guarded_run(ctx);

  REQUIRE(rec.events.size() == kAnswered + 2);
  CHECK(rec.events[0].at >= before + kPing);
  for (int i = 1; i <= kAnswered; ++i) {
    CAPTURE(i);
    CHECK(rec.events[i].ev == hb_event::ping);
    CHECK(rec.events[i].at >= touches[i - 1] + kPing);
  }
  CHECK(rec.events.back().ev == hb_event::drop);
  CHECK(rec.events.back().at >= touches.back() + kDrop);
  CHECK_PROMPT(r);
}

TEST_CASE("heartbeat_group: regular input keeps a member quiet; others are dropped meanwhile") {
  asio::io_context ctx;
  constexpr auto kPing = 90ms;
  constexpr auto kDrop = 200ms;
  constexpr int kTouches = 15;
  recorder rec;
  group_type group(ctx, {.ping_after = kPing, .drop_after = kDrop}, rec.handler());
  connection busy, quiet;
  const auto start = sclock::now();
  group.watch(busy);
  group.watch(quiet);
  ticker input(ctx, kPing / 3, kTouches, [&] { busy.touch(); });
  const auto r = guarded_run(ctx);

  REQUIRE(input.times().size() == static_cast<std::size_t>(kTouches));
  const auto quiet_events = rec.of(quiet);
  REQUIRE(quiet_events.size() == 2);
  CHECK(quiet_events[0].at >= start + kPing);
  CHECK(quiet_events[1].at >= start + kDrop);
  const auto busy_events = rec.of(busy);
  REQUIRE(!busy_events.empty());
  CHECK(busy_events.back().ev == hb_event::drop);
  for (const auto& e : busy_events) {
    sclock::time_point last = start;
    for (const auto t : input.times())
      if (t < e.at)
        last = std::max(last, t);
    CHECK(e.at >= last + (e.ev == hb_event::ping ? kPing : kDrop));
  }
  if (input.max_gap(start) < kPing - 20ms) {
    REQUIRE(busy_events.size() == 2);
    CHECK(busy_events[0].at >= input.times().back() + kPing);
  } else {
    MESSAGE("input gap too long (machine stalled): quietness not asserted");
  }
  CHECK_PROMPT(r);
}

TEST_CASE("heartbeat_group: many members watched at different times: each event comes after "
          "its own threshold, in threshold order") {
  asio::io_context ctx;
  constexpr auto kPing = 30ms;
  constexpr auto kDrop = 70ms;
  constexpr int kMembers = 300;
  recorder rec;
  group_type group(ctx, {.ping_after = kPing, .drop_after = kDrop}, rec.handler());
  std::vector<std::unique_ptr<connection>> conns;
  std::map<const member*, sclock::time_point> watched_after;
  // Watched in waves, 10 at a time every 2 ms.
  ticker waves(ctx, 2ms, kMembers / 10, [&] {
    for (int i = 0; i < 10; ++i) {
      conns.push_back(std::make_unique<connection>());
      watched_after[conns.back().get()] = sclock::now();
      group.watch(*conns.back());
    }
  });
  const auto r = guarded_run(ctx);

  REQUIRE(conns.size() == static_cast<std::size_t>(kMembers));
  CHECK(rec.events.size() == 2 * static_cast<std::size_t>(kMembers));
  sclock::time_point prev_threshold{};
  for (const auto& e : rec.events) {
    const sclock::time_point threshold =
        watched_after[e.who] + (e.ev == hb_event::ping ? kPing : kDrop);
    CHECK(e.at >= threshold);
    // Order: by threshold, to within the group's 1 ms tick and the timestamps' skew.
    CHECK(threshold + 2ms >= prev_threshold);
    prev_threshold = std::max(prev_threshold, threshold);
  }
  for (const auto& c : conns)
    CHECK_FALSE(c->is_watched());
  CHECK_PROMPT(r);
}

TEST_CASE("heartbeat_group: unwatch() stops the events; run() returns once nothing is "
          "watched") {
  asio::io_context ctx;
  recorder rec;
  group_type group(ctx, {.ping_after = 5s, .drop_after = kFar}, rec.handler());
  connection a, b;
  group.watch(a);
  group.watch(b);
  CHECK(group.size() == 2);
  CHECK(group.unwatch(a));
  CHECK_FALSE(group.unwatch(a));
  CHECK_FALSE(a.is_watched());
  CHECK(group.size() == 1);
  asio::post(ctx, [&] { CHECK(group.unwatch(b)); });
  const auto r = guarded_run(ctx);
  CHECK(rec.events.empty());
  CHECK(group.size() == 0);
  CHECK(r.elapsed < kPrompt);
  CHECK_PROMPT(r);
}

TEST_CASE("heartbeat_group: destroying a watched member unwatches it") {
  asio::io_context ctx;
  recorder rec;
  group_type group(ctx, {.ping_after = 20ms, .drop_after = 40ms}, rec.handler());
  auto gone = std::make_unique<connection>();
  connection stays;
  group.watch(*gone);
  group.watch(stays);
  gone.reset();
  CHECK(group.size() == 1);
  const auto r = guarded_run(ctx);
  REQUIRE(rec.events.size() == 2);
  CHECK(rec.events[0].who == &stays);
  CHECK(rec.events[1].who == &stays);
  CHECK_PROMPT(r);
}

TEST_CASE("heartbeat_group: the event handler may destroy its member, another member, or the "
          "group") {
  asio::io_context ctx;
  recorder rec;
  std::optional<group_type> group;
  std::vector<std::unique_ptr<connection>> conns;
  for (int i = 0; i < 4; ++i) {
    conns.push_back(std::make_unique<connection>());
    conns.back()->id = i;
  }

  SUBCASE("its member, at the ping (watched) and at the drop (unwatched)") {
    rec.react = [&](member& m, hb_event ev) {
      auto& c = static_cast<connection&>(m);
      if ((c.id == 0 && ev == hb_event::ping) || (c.id != 0 && ev == hb_event::drop))
        conns[static_cast<std::size_t>(c.id)].reset();
    };
    group.emplace(ctx, group_type::options{.ping_after = 20ms, .drop_after = 40ms}, rec.handler());
    for (auto& c : conns)
      group->watch(*c);
    const auto r = guarded_run(ctx);
    // Member 0: its ping only; the others: ping and drop.
    CHECK(rec.events.size() == 1 + 2 * 3);
    for (const auto& c : conns)
      CHECK(c == nullptr);
    CHECK(group->size() == 0);
    CHECK_PROMPT(r);
  }

  SUBCASE("another member, still watched") {
    rec.react = [&](member& m, hb_event) {
      auto& c = static_cast<connection&>(m);
      if (c.id == 0)
        conns[1].reset(); // due at the same time, not delivered yet, or later
    };
    group.emplace(ctx, group_type::options{.drop_after = 30ms}, rec.handler());
    for (auto& c : conns)
      group->watch(*c);
    const auto r = guarded_run(ctx);
    CHECK(rec.events.size() == 3);
    for (const auto& e : rec.events)
      CHECK(static_cast<const connection*>(e.who)->id != 1);
    CHECK_PROMPT(r);
  }

  SUBCASE("the group: the members due at the same time get nothing, all are unwatched") {
    rec.react = [&](member&, hb_event) { group.reset(); };
    group.emplace(ctx, group_type::options{.drop_after = 30ms}, rec.handler());
    for (auto& c : conns)
      group->watch(*c);
    const auto r = guarded_run(ctx);
    CHECK(rec.events.size() == 1);
    CHECK_FALSE(group.has_value());
    for (const auto& c : conns)
      CHECK_FALSE(c->is_watched());
    CHECK_PROMPT(r);
  }
}

TEST_CASE("heartbeat_group: destroying the group unwatches its members, without events") {
  asio::io_context ctx;
  recorder rec;
  connection a, b;
  {
    group_type group(ctx, {.ping_after = 10ms, .drop_after = 20ms}, rec.handler());
    group.watch(a);
    group.watch(b);
  }
  CHECK_FALSE(a.is_watched());
  CHECK_FALSE(b.is_watched());
  const auto r = guarded_run(ctx);
  CHECK(rec.events.empty());
  CHECK_PROMPT(r);
}

TEST_CASE("heartbeat_group: watch() again restarts the spell; another group's member is "
          "refused") {
  asio::io_context ctx;
  recorder rec, other_rec;
  group_type group(ctx, {.drop_after = 80ms}, rec.handler());
  group_type other(ctx, {.drop_after = 80ms}, other_rec.handler());
  connection c;
  group.watch(c);
  try {
    other.watch(c);
    FAIL("watch() of another group's member did not throw");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()).find("watched by another group") != std::string::npos);
  }
  CHECK(other.size() == 0);
  CHECK_FALSE(other.unwatch(c));
  CHECK(c.is_watched());

  sclock::time_point rewatched{};
  asio::steady_timer later(ctx, 40ms);
  later.async_wait([&](asio::error_code) {
    rewatched = sclock::now();
    group.watch(c);
    CHECK(group.size() == 1);
  });
  const auto r = guarded_run(ctx);
  REQUIRE(rec.events.size() == 1);
  CHECK(rec.events[0].at >= rewatched + 80ms);
  CHECK(other_rec.events.empty());
  CHECK_PROMPT(r);
}

TEST_CASE("heartbeat_group: invalid options and an empty handler throw "
          "std::invalid_argument") {
  asio::io_context ctx;
  const auto handler = [](member&, hb_event) {};
  const auto message_of = [&](group_type::options o, group_type::event_handler h) {
    try {
      group_type g(ctx, o, std::move(h));
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no exception");
  };
  CHECK(message_of({.ping_after = -1ms, .drop_after = 1s}, handler).find("0 <= ping_after") !=
        std::string::npos);
  CHECK(message_of({.ping_after = 2s, .drop_after = 1s}, handler).find("< drop_after") !=
        std::string::npos);
  CHECK(message_of({.ping_after = 1s, .drop_after = 1s}, handler).find("< drop_after") !=
        std::string::npos);
  CHECK(message_of({.drop_after = 0s}, handler).find("< drop_after") != std::string::npos);
  CHECK(message_of({.drop_after = 1s}, nullptr).find("event handler is empty") !=
        std::string::npos);
  CHECK(message_of({.ping_after = 0s, .drop_after = 1s}, handler) == "no exception");
}

TEST_CASE("heartbeat_group: an exception from the event handler leaves run(); the group goes "
          "on") {
  asio::io_context ctx;
  recorder rec;
  bool thrown = false;
  rec.react = [&](member&, hb_event) {
    if (!thrown) {
      thrown = true;
      throw std::runtime_error("from the event handler");
    }
  };
  group_type group(ctx, {.drop_after = 30ms}, rec.handler());
  connection a, b, c;
  group.watch(a);
  group.watch(b);
  group.watch(c);
  CHECK_THROWS_WITH_AS(ctx.run(), "from the event handler", std::runtime_error);
  CHECK(rec.events.size() == 1);
  ctx.restart();
  const auto r = guarded_run(ctx);
  CHECK(rec.events.size() == 3);
  CHECK(group.size() == 0);
  CHECK_PROMPT(r);
}

TEST_CASE("heartbeat_group: a burst larger than one run's budget: every member exactly once") {
  asio::io_context ctx;
  constexpr std::size_t kMembers = 10'000;
  std::size_t drops = 0;
  std::vector<int> seen(kMembers, 0);
  std::vector<connection> conns(kMembers);
  for (std::size_t i = 0; i < kMembers; ++i)
    conns[i].id = static_cast<int>(i);
  group_type group(ctx, {.drop_after = 20ms}, [&](member& m, hb_event ev) {
    CHECK(ev == hb_event::drop);
    ++drops;
    ++seen[static_cast<std::size_t>(static_cast<connection&>(m).id)];
  });
  for (auto& c : conns)
    group.watch(c);
  const auto r = guarded_run(ctx);
  CHECK(drops == kMembers);
  CHECK(std::count(seen.begin(), seen.end(), 1) == static_cast<std::ptrdiff_t>(kMembers));
  CHECK_PROMPT(r);
}

TEST_CASE("heartbeat_group: destroyed by a handler of the batch that completed its own wait") {
  // Both waits are due in the same driver turn: the group's completion is already queued,
  // with success, when the first handler destroys the group (a server shutting down).
  asio::io_context ctx(1);
  recorder rec;
  connection c;
  asio_wheel::wheel_timer shutdown(ctx, 1ms);
  auto group = std::make_unique<group_type>(
      ctx, group_type::options{.ping_after = 5ms, .drop_after = 10ms}, rec.handler());
  group->watch(c);
  bool shut = false;
  shutdown.async_wait([&](asio::error_code ec) {
    CHECK(ec == kOk);
    CHECK(rec.events.empty());
    group.reset();
    shut = true;
  });
  std::this_thread::sleep_for(30ms);
  const auto r = guarded_run(ctx);
  CHECK(shut);
  CHECK(rec.events.empty());
  CHECK_FALSE(c.is_watched());
  CHECK_PROMPT(r);
}
