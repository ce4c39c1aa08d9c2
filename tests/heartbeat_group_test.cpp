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
//
// Thresholds that are ranges, scaled by the context's timeout_scale (issue 17), on a frozen
// manual_clock, so that every threshold is exact and every "not yet" certain: a factor
// lowered while members wait drops those past their new threshold in the next turn, never
// those before it; up and down repeatedly; pings; a member touched while it waits in a queue
// is filed again from its stamp; one run looks at 4096 members at most; a group destroyed
// with a change pending; fixed thresholds never create the scale; invalid ranges.
//
// Options are written {ping_after, drop_after}, without designators: this file builds as
// C++17 too (scripts/test's cxx17 stage).

#include <asio_wheel/heartbeat_group.hpp>
#include <asio_wheel/timeout_scale.hpp>
#include <asio_wheel/wheel_timer.hpp>

#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>

#include <doctest/doctest.h>

#include "asio_test_support.hpp"
#include "frozen_run.hpp"
#include "manual_clock.hpp"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
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

constexpr auto kPrompt = 5s;

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
  // A turn that comes after drop_after judges the member by its drop alone: the ping needs
  // the context's thread not held back for drop_after - ping_after (the probe's premise).
  until_premise([&](bool last) {
    asio::io_context ctx;
    recorder rec;
    group_type group(ctx, {40ms, 150ms}, rec.handler());
    CHECK(group.get_options().ping_after == 40ms);
    CHECK(group.get_options().drop_after == 150ms);
    connection c;
    CHECK_FALSE(c.is_watched());
    const auto before = sclock::now();
    group.watch(c);
    CHECK(c.is_watched());
    CHECK(group.size() == 1);
    stall_probe probe(ctx, 200ms);
    const auto r = guarded_run(ctx);

    REQUIRE(!rec.events.empty());
    CHECK(rec.events.back().ev == hb_event::drop);
    CHECK(rec.events.back().at >= before + 150ms);
    CHECK(rec.events.back().at - (before + 150ms) < kPrompt);
    CHECK_FALSE(c.is_watched());
    CHECK(group.size() == 0);
    CHECK_PROMPT(r);
    if (probe.max_gap() >= 100ms && !last)
      return false;
    REQUIRE(rec.events.size() == 2);
    CHECK(rec.events[0].who == &c);
    CHECK(rec.events[0].ev == hb_event::ping);
    CHECK(rec.events[0].at >= before + 40ms);
    CHECK(rec.events[0].at >= c.last_activity() + 40ms);
    return true;
  });
}

TEST_CASE("heartbeat_group: a zero ping_after is an idle timeout: drops only") {
  asio::io_context ctx;
  recorder rec;
  group_type group(ctx, {{}, 60ms}, rec.handler());
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
  constexpr auto kPing = 100ms;
  constexpr auto kDrop = 400ms;
  constexpr int kAnswered = 3;
  // A touch while the member waits for its drop is seen when that drop's old threshold
  // comes (lazy re-filing): its new spell's ping is judged then, only about ping_after
  // before the new spell's own drop (pings at 100, 400, 500 and 800 ms, the drop at
  // 900). So each ping needs the context's thread not held back for ping_after (the
  // probe's premise, over the whole run).
  until_premise([&](bool last) {
    asio::io_context ctx;
    recorder rec;
    std::vector<sclock::time_point> touches;
    int pings = 0;
    rec.react = [&](member& m, hb_event ev) {
      if (ev == hb_event::ping && ++pings <= kAnswered) {
        touches.push_back(sclock::now());
        m.touch(); // the peer answered the ping
      }
    };
    group_type group(ctx, {kPing, kDrop}, rec.handler());
    connection c;
    const auto before = sclock::now();
    group.watch(c);
    stall_probe probe(ctx, 2 * kDrop + 2 * kPing);
    const auto r = guarded_run(ctx);
    CHECK_PROMPT(r);
    REQUIRE(!rec.events.empty());
    CHECK(rec.events.back().ev == hb_event::drop);
    if (probe.max_gap() >= kPing - 10ms && !last)
      return false;

    REQUIRE(rec.events.size() == kAnswered + 2);
    CHECK(rec.events[0].at >= before + kPing);
    for (int i = 1; i <= kAnswered; ++i) {
      CAPTURE(i);
      CHECK(rec.events[i].ev == hb_event::ping);
      CHECK(rec.events[i].at >= touches[i - 1] + kPing);
    }
    CHECK(rec.events.back().at >= touches.back() + kDrop);
    return true;
  });
}

TEST_CASE("heartbeat_group: regular input keeps a member quiet; others are dropped meanwhile") {
  constexpr auto kPing = 90ms;
  constexpr auto kDrop = 200ms;
  constexpr int kTouches = 15;
  // The input keeps `busy` quiet only if it comes in time, and `quiet` is pinged only if its
  // turn comes before drop_after: both need the context's thread not held back, which the
  // input's own gaps show.
  until_premise([&](bool last_attempt) {
    asio::io_context ctx;
    recorder rec;
    group_type group(ctx, {kPing, kDrop}, rec.handler());
    connection busy, quiet;
    const auto start = sclock::now();
    group.watch(busy);
    group.watch(quiet);
    ticker input(ctx, kPing / 3, kTouches, [&] { busy.touch(); });
    const auto r = guarded_run(ctx);
    CHECK_PROMPT(r);

    REQUIRE(input.times().size() == static_cast<std::size_t>(kTouches));
    const auto quiet_events = rec.of(quiet);
    REQUIRE(!quiet_events.empty());
    CHECK(quiet_events.back().ev == hb_event::drop);
    CHECK(quiet_events.back().at >= start + kDrop);
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
    if (input.max_gap(start) >= kPing - 20ms && !last_attempt)
      return false;
    REQUIRE(quiet_events.size() == 2);
    CHECK(quiet_events[0].at >= start + kPing);
    REQUIRE(busy_events.size() == 2);
    CHECK(busy_events[0].at >= input.times().back() + kPing);
    return true;
  });
}

TEST_CASE("heartbeat_group: many members watched at different times: each event comes after "
          "its own threshold, in threshold order") {
  constexpr auto kPing = 30ms;
  constexpr auto kDrop = 70ms;
  constexpr int kMembers = 300;
  // Every member is pinged only if its turn comes before its drop_after (see the first
  // test): the context's thread must not be held back for drop_after - ping_after.
  until_premise([&](bool last) {
    asio::io_context ctx;
    recorder rec;
    group_type group(ctx, {kPing, kDrop}, rec.handler());
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
    stall_probe probe(ctx, 2ms * (kMembers / 10) + kDrop + 20ms);
    const auto r = guarded_run(ctx);
    CHECK_PROMPT(r);

    REQUIRE(conns.size() == static_cast<std::size_t>(kMembers));
    // Never early: each event after its threshold, measured before the member was watched.
    for (const auto& e : rec.events)
      CHECK(e.at >= watched_after[e.who] + (e.ev == hb_event::ping ? kPing : kDrop));
    if (probe.max_gap() >= kDrop - kPing - 10ms && !last)
      return false;
    CHECK(rec.events.size() == 2 * static_cast<std::size_t>(kMembers));
    // Order: by threshold (from the member's own activity mark, which the clock read before
    // watch() only bounds), to within the group's 1 ms tick.
    sclock::time_point prev_threshold{};
    for (const auto& e : rec.events) {
      const sclock::time_point threshold =
          e.who->last_activity() + (e.ev == hb_event::ping ? kPing : kDrop);
      CHECK(threshold + 2ms >= prev_threshold);
      prev_threshold = std::max(prev_threshold, threshold);
    }
    for (const auto& c : conns)
      CHECK_FALSE(c->is_watched());
    return true;
  });
}

TEST_CASE("heartbeat_group: unwatch() stops the events; run() returns once nothing is "
          "watched") {
  asio::io_context ctx;
  recorder rec;
  // A ping far beyond kPrompt: run() waiting for it would fail the check.
  group_type group(ctx, {20s, kFar}, rec.handler());
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
  // The ping needs its turn before drop_after (see the first test).
  until_premise([&](bool last) {
    asio::io_context ctx;
    recorder rec;
    group_type group(ctx, {20ms, 200ms}, rec.handler());
    auto gone = std::make_unique<connection>();
    connection stays;
    group.watch(*gone);
    group.watch(stays);
    gone.reset();
    CHECK(group.size() == 1);
    stall_probe probe(ctx, 250ms);
    const auto r = guarded_run(ctx);
    CHECK_PROMPT(r);
    REQUIRE(!rec.events.empty());
    for (const auto& e : rec.events)
      CHECK(e.who == &stays);
    if (probe.max_gap() >= 170ms && !last)
      return false;
    CHECK(rec.events.size() == 2);
    return true;
  });
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
    group.emplace(ctx, group_type::options{20ms, 200ms}, rec.handler());
    for (auto& c : conns)
      group->watch(*c);
    // The pings need their turn before drop_after (see the first test); on a machine that
    // stalled longer, member 0 is dropped unpinged, and stays.
    stall_probe probe(ctx, 250ms);
    const auto r = guarded_run(ctx);
    CHECK(group->size() == 0);
    CHECK_PROMPT(r);
    if (probe.max_gap() < 170ms) {
      // Member 0: its ping only; the others: ping and drop.
      CHECK(rec.events.size() == 1 + 2 * 3);
      for (const auto& c : conns)
        CHECK(c == nullptr);
    } else {
      MESSAGE("stalled past drop_after: the pings not checked");
    }
  }

  SUBCASE("another member, still watched") {
    rec.react = [&](member& m, hb_event) {
      auto& c = static_cast<connection&>(m);
      if (c.id == 0)
        conns[1].reset(); // due at the same time, not delivered yet, or later
    };
    group.emplace(ctx, group_type::options{{}, 30ms}, rec.handler());
    for (auto& c : conns)
      group->watch(*c);
    const auto r = guarded_run(ctx);
    CHECK(rec.events.size() == 3);
    for (const auto& e : rec.events)
      CHECK(static_cast<const connection*>(e.who)->id != 1);
    CHECK_PROMPT(r);
  }

  SUBCASE("the group, from a handler that goes on using its captures") {
    // The handler is the group's: destroying the group must leave it, and its captures,
    // alive until it returns, and release them then.
    auto token = std::make_shared<int>(7);
    const std::weak_ptr<int> seen = token;
    int read_after_reset = 0;
    group.emplace(ctx, group_type::options{{}, 30ms},
                  [&group, &read_after_reset, token = std::move(token)](member&, hb_event) {
                    group.reset();
                    read_after_reset = *token;
                  });
    for (auto& c : conns)
      group->watch(*c);
    const auto r = guarded_run(ctx);
    CHECK(read_after_reset == 7);
    CHECK_FALSE(group.has_value());
    CHECK(seen.expired());
    CHECK_PROMPT(r);
  }

  SUBCASE("the group, destroyed outside its handler, releases the handler at once") {
    // Its captures may own what owns the context (whose queued wait handler outlives the
    // group until the context runs it): they must not wait for that.
    auto token = std::make_shared<int>(7);
    const std::weak_ptr<int> seen = token;
    group.emplace(ctx, group_type::options{{}, 30ms},
                  [token = std::move(token)](member&, hb_event) {});
    for (auto& c : conns)
      group->watch(*c);
    ctx.poll();
    group.reset();
    CHECK(seen.expired());
  }

  SUBCASE("the group: the members due at the same time get nothing, all are unwatched") {
    rec.react = [&](member&, hb_event) { group.reset(); };
    group.emplace(ctx, group_type::options{{}, 30ms}, rec.handler());
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
    group_type group(ctx, {10ms, 20ms}, rec.handler());
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
  // The second watch() restarts the spell only if it comes before the first spell's drop was
  // due (40 ms into 80): a machine that holds the context's thread back past that breaks the
  // premise, and the member is then rightly dropped twice.
  until_premise([&](bool last_attempt) {
    asio::io_context ctx;
    recorder rec, other_rec;
    group_type group(ctx, {{}, 80ms}, rec.handler());
    group_type other(ctx, {{}, 80ms}, other_rec.handler());
    connection c;
    const auto watched = sclock::now();
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
    CHECK(other_rec.events.empty());
    REQUIRE(!rec.events.empty());
    CHECK(rec.events[0].at >= watched + 80ms);
    if (rewatched >= watched + 80ms - 10ms && !last_attempt)
      return false;
    REQUIRE(rec.events.size() == 1);
    CHECK(rec.events[0].at >= rewatched + 80ms);
    CHECK_PROMPT(r);
    return true;
  });
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
  CHECK(message_of({-1ms, 1s}, handler).find("0 <= ping_after") != std::string::npos);
  CHECK(message_of({2s, 1s}, handler).find("< drop_after") != std::string::npos);
  CHECK(message_of({1s, 1s}, handler).find("< drop_after") != std::string::npos);
  CHECK(message_of({{}, 0s}, handler).find("< drop_after") != std::string::npos);
  CHECK(message_of({{}, 1s}, nullptr).find("event handler is empty") != std::string::npos);
  CHECK(message_of({0s, 1s}, handler) == "no exception");
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
  group_type group(ctx, {{}, 30ms}, rec.handler());
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
  group_type group(ctx, {{}, 20ms}, [&](member& m, hb_event ev) {
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
  std::unique_ptr<group_type> group;
  bool shut = false;
  // Started before the group's first wait, so that `shutdown` comes first in the turn
  // however the process is scheduled: its tick is no later than any of the group's, and
  // waits due in one tick complete in the order they were filed. (Started after watch(), a
  // group's wait filed for the same tick, a wake-up of its wheel, came first: 1 run in 20,
  // more on a loaded machine.)
  shutdown.async_wait([&](asio::error_code ec) {
    CHECK(ec == kOk);
    CHECK(rec.events.empty());
    group.reset();
    shut = true;
  });
  group = std::make_unique<group_type>(ctx, group_type::options{5ms, 10ms}, rec.handler());
  group->watch(c);
  std::this_thread::sleep_for(30ms);
  const auto r = guarded_run(ctx);
  CHECK(shut);
  CHECK(rec.events.empty());
  CHECK_FALSE(c.is_watched());
  CHECK_PROMPT(r);
}

// =======================================================================================
// Scaled thresholds (issue 17), on a frozen clock
// =======================================================================================

namespace {

constexpr auto kStillScaled = frozen_still;
constexpr auto kT0 = frozen_start;

// What a group on a frozen clock delivered: who, which event, the clock and the factor then.
template <typename Clock>
struct scaled_log {
  using group = asio_wheel::basic_heartbeat_group<Clock>;
  struct entry {
    const typename group::member* who;
    typename group::event ev;
    typename Clock::time_point at;
    double factor;
  };
  asio_wheel::timeout_scale* scale = nullptr;
  std::vector<entry> events;

  typename group::event_handler handler() {
    return [this](typename group::member& m, typename group::event ev) {
      events.push_back({&m, ev, Clock::now(), scale->factor()});
    };
  }
  std::size_t count(const typename group::member& m, typename group::event ev) const {
    return static_cast<std::size_t>(std::count_if(
        events.begin(), events.end(), [&](const entry& e) { return e.who == &m && e.ev == ev; }));
  }
};

} // namespace

TEST_CASE("heartbeat_group: ranges: a lowered factor drops the members past their new "
          "threshold in the next turn, and no other") {
  struct tag;
  using clock = frozen_clock<tag>;
  using group_t = asio_wheel::basic_heartbeat_group<clock>;
  const clock::time_point t0(kT0);
  clock::reset(t0, /*running=*/false);
  asio::io_context ioc;
  scaled_log<clock> log;
  log.scale = &asio_wheel::timeout_scale::of(ioc);
  group_t group(ioc, {{}, {10ms, 110ms}}, log.handler());
  group_t::member a, b;
  group.watch(a); // quiet since t0
  clock::set(t0 + 20ms);
  group.watch(b); // quiet since t0 + 20 ms
  clock::set(t0 + 60ms);
  run_for(ioc, kStillScaled);
  CHECK(log.events.empty()); // threshold 110 ms at factor 1
  CHECK(group.size() == 2);

  // 10 + 50 = 60 ms: a has been quiet exactly that long, b 40 ms.
  log.scale->set(0.5);
  CHECK(log.events.empty()); // set() delivers nothing on the caller's thread
  next_turn(ioc);
  REQUIRE(log.events.size() == 1);
  CHECK(log.events[0].who == &a);
  CHECK(log.events[0].at == t0 + 60ms);
  run_for(ioc, kStillScaled);
  CHECK(log.events.size() == 1);

  // Back up: b (quiet 59 ms at t0 + 79) is not past 110 ms; down to 0.4 (50 ms), it is.
  log.scale->set(1.0);
  clock::set(t0 + 79ms);
  run_for(ioc, kStillScaled);
  CHECK(log.events.size() == 1);
  log.scale->set(0.4);
  next_turn(ioc);
  REQUIRE(log.events.size() == 2);
  CHECK(log.events[1].who == &b);
  CHECK(log.events[1].at - (t0 + 20ms) >= 50ms);
  CHECK(group.size() == 0);
}

TEST_CASE("heartbeat_group: ranges: the factor changed up and down while members wait: each "
          "drop at its threshold in force, never before, none missed") {
  struct tag;
  using clock = frozen_clock<tag>;
  using group_t = asio_wheel::basic_heartbeat_group<clock>;
  const clock::time_point t0(kT0);
  clock::reset(t0, /*running=*/false);
  asio::io_context ioc;
  scaled_log<clock> log;
  log.scale = &asio_wheel::timeout_scale::of(ioc);
  const group_t::range drop{5ms, 405ms};
  group_t group(ioc, {{}, drop}, log.handler());
  constexpr int kMembers = 24;
  std::vector<group_t::member> members(kMembers);
  std::vector<clock::time_point> quiet_since(kMembers);
  // Watched 10 ms apart: some wait in the wheel (before 5 ms), most in the queue.
  for (int i = 0; i < kMembers; ++i) {
    clock::set(t0 + i * 10ms);
    quiet_since[static_cast<std::size_t>(i)] = clock::now();
    group.watch(members[static_cast<std::size_t>(i)]);
  }
  std::mt19937 rng(17);
  const double factors[] = {1.0, 0.0, 0.75, 0.1, 0.5, 0.3, 1.0, 0.05, 0.6};
  clock::time_point now = clock::now();
  for (int step = 0; step < 40 && group.size() > 0; ++step) {
    now += std::chrono::milliseconds(rng() % 25);
    clock::set(now);
    const double f = factors[rng() % std::size(factors)];
    log.scale->set(f);
    next_turn(ioc);
    run_for(ioc, 3ms);
    CAPTURE(step);
    CAPTURE(f);
    for (int i = 0; i < kMembers; ++i) {
      CAPTURE(i);
      const auto& m = members[static_cast<std::size_t>(i)];
      const auto idle = now - quiet_since[static_cast<std::size_t>(i)];
      // Dropped exactly when quiet for the threshold at this factor, or already before.
      if (idle >= drop.at(f))
        CHECK(log.count(m, group_t::event::drop) == 1);
      CHECK(log.count(m, group_t::event::drop) <= 1);
      CHECK(m.is_watched() == (log.count(m, group_t::event::drop) == 0));
    }
  }
  for (const auto& e : log.events) {
    const auto i =
        static_cast<std::size_t>(static_cast<const group_t::member*>(e.who) - &members[0]);
    CHECK(e.at - quiet_since[i] >= drop.at(e.factor)); // never early
  }
  // Whatever is left goes at its maximum.
  clock::set(now + 405ms);
  CHECK(run_until(ioc, [&] { return group.size() == 0; }));
}

TEST_CASE("heartbeat_group: ranges: pings and drops each at their scaled threshold") {
  struct tag;
  using clock = frozen_clock<tag>;
  using group_t = asio_wheel::basic_heartbeat_group<clock>;
  const clock::time_point t0(kT0);
  clock::reset(t0, /*running=*/false);
  asio::io_context ioc;
  scaled_log<clock> log;
  log.scale = &asio_wheel::timeout_scale::of(ioc);
  group_t group(ioc, {{10ms, 50ms}, {40ms, 240ms}}, log.handler());
  group_t::member m;
  group.watch(m);
  clock::set(t0 + 30ms);
  run_for(ioc, kStillScaled);
  CHECK(log.events.empty()); // ping at 50 ms
  log.scale->set(0.25);      // ping at 20 ms, drop at 90 ms
  next_turn(ioc);
  REQUIRE(log.events.size() == 1);
  CHECK(log.events[0].ev == group_t::event::ping);
  clock::set(t0 + 89ms);
  run_for(ioc, kStillScaled);
  CHECK(log.events.size() == 1);
  clock::set(t0 + 90ms);
  CHECK(run_until(ioc, [&] { return log.events.size() == 2; }));
  CHECK(log.events[1].ev == group_t::event::drop);
  CHECK(log.events[1].at == t0 + 90ms);
  CHECK_FALSE(m.is_watched());
}

TEST_CASE("heartbeat_group: ranges: a member touched while it waits in a queue is filed "
          "again from its stamp, not dropped by a lower factor") {
  struct tag;
  using clock = frozen_clock<tag>;
  using group_t = asio_wheel::basic_heartbeat_group<clock>;
  const clock::time_point t0(kT0);
  clock::reset(t0, /*running=*/false);
  asio::io_context ioc;
  scaled_log<clock> log;
  log.scale = &asio_wheel::timeout_scale::of(ioc);
  group_t group(ioc, {{}, {10ms, 110ms}}, log.handler());
  group_t::member m;
  group.watch(m);
  clock::set(t0 + 50ms);
  run_for(ioc, kStillScaled); // past its minimum: in the queue
  m.touch();                  // quiet since t0 + 50 ms
  log.scale->set(0.0);        // 10 ms: not for m
  next_turn(ioc);
  run_for(ioc, kStillScaled);
  CHECK(log.events.empty());
  CHECK(m.is_watched());
  clock::set(t0 + 59ms);
  run_for(ioc, kStillScaled);
  CHECK(log.events.empty());
  clock::set(t0 + 60ms);
  CHECK(run_until(ioc, [&] { return log.events.size() == 1; }));
  CHECK(log.events[0].at == t0 + 60ms);
}

TEST_CASE("heartbeat_group: ranges: one run after a lower factor looks at 4096 members at "
          "most; every member is dropped once") {
  struct tag;
  using clock = frozen_clock<tag>;
  using group_t = asio_wheel::basic_heartbeat_group<clock>;
  const clock::time_point t0(kT0);
  clock::reset(t0, /*running=*/false);
  asio::io_context ioc;
  scaled_log<clock> log;
  log.scale = &asio_wheel::timeout_scale::of(ioc);
  group_t group(ioc, {{}, {10ms, 10s}}, log.handler());
  constexpr std::size_t kMembers = 10'000;
  std::vector<group_t::member> members(kMembers);
  for (auto& m : members)
    group.watch(m);
  clock::set(t0 + 20ms);
  run_for(ioc, kStillScaled); // all in the queue
  REQUIRE(log.events.empty());
  log.scale->set(0.0);
  // The first handler that delivers anything is the group's run after the change.
  std::size_t handlers = 0;
  while (log.events.empty() && handlers < 100) {
    ioc.restart();
    handlers += ioc.run_one_for(10ms);
  }
  CHECK(log.events.size() > 0);
  CHECK(log.events.size() <= 4096);
  CHECK(run_until(ioc, [&] { return group.size() == 0; }));
  CHECK(log.events.size() == kMembers);
  std::vector<const void*> who;
  for (const auto& e : log.events)
    who.push_back(e.who);
  std::sort(who.begin(), who.end());
  CHECK(std::adjacent_find(who.begin(), who.end()) == who.end());
}

TEST_CASE("heartbeat_group: ranges: a group destroyed while a change of the factor is on its "
          "way; changes with no group") {
  struct tag;
  using clock = frozen_clock<tag>;
  using group_t = asio_wheel::basic_heartbeat_group<clock>;
  clock::reset(clock::time_point(kT0), /*running=*/false);
  asio::io_context ioc;
  auto& scale = asio_wheel::timeout_scale::of(ioc);
  scaled_log<clock> log;
  log.scale = &scale;
  group_t::member m;
  {
    group_t group(ioc, {{}, {1ms, 1s}}, log.handler());
    group.watch(m);
    clock::set(clock::time_point(kT0) + 10ms);
    scale.set(0.0);
  }
  CHECK_FALSE(m.is_watched());
  next_turn(ioc); // the posted change finds the group gone
  scale.set(0.5);
  next_turn(ioc);
  CHECK(log.events.empty());
}

TEST_CASE("heartbeat_group: fixed thresholds never create the context's timeout_scale") {
  asio::io_context ctx;
  group_type group(ctx, {1s, 2s}, [](member&, hb_event) {});
  CHECK_FALSE(asio::has_service<asio_wheel::timeout_scale>(ctx));
  group_type scaled(ctx, {1s, {2s, 3s}}, [](member&, hb_event) {});
  CHECK(asio::has_service<asio_wheel::timeout_scale>(ctx));
}

TEST_CASE("heartbeat_group: invalid threshold ranges throw std::invalid_argument saying what "
          "is allowed") {
  asio::io_context ctx;
  const auto handler = [](member&, hb_event) {};
  const auto message_of = [&](group_type::options o) {
    try {
      group_type g(ctx, o, handler);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no exception");
  };
  using range = group_type::range;
  CHECK(message_of({{}, range{2s, 1s}}).find("min <= max") != std::string::npos);
  CHECK(message_of({range{2s, 1s}, 5s}).find("min <= max") != std::string::npos);
  CHECK(message_of({{}, range{-1s, 1s}}).find("negative") != std::string::npos);
  CHECK(message_of({range{0s, 1s}, 5s}).find("minimum must be positive") != std::string::npos);
  CHECK(message_of({range{1s, 6s}, range{2s, 5s}}).find("ping_after.max < drop_after.max") !=
        std::string::npos);
  CHECK(message_of({range{3s, 4s}, range{2s, 5s}}).find("ping_after.min < drop_after.min") !=
        std::string::npos);
  CHECK(message_of({range{1s, 4s}, range{2s, 5s}}) == "no exception");
  CHECK(message_of({{}, range{0s, 5s}}).find("< drop_after") != std::string::npos);
  CHECK(message_of({{}, range{1ms, 5s}}) == "no exception");
}

TEST_CASE("heartbeat_group: a clock stepped back by an event handler: the rest of the run is "
          "judged by the clock as it then reads, never early") {
  // Not steady (system_clock after an NTP step): the group follows the clock back.
  struct tag;
  using clock = asio_wheel::test::manual_clock<tag, std::chrono::nanoseconds, false>;
  using group_t = asio_wheel::basic_heartbeat_group<clock>;
  const clock::time_point t0(kT0);
  clock::reset(t0, /*running=*/false);
  asio::io_context ioc;
  scaled_log<clock> log;
  log.scale = &asio_wheel::timeout_scale::of(ioc);
  std::deque<group_t::member> members(1);
  std::optional<group_t> group;
  group.emplace(ioc, group_t::options{{}, {30ms, 40ms}},
                [&, record = log.handler()](group_t::member& m, group_t::event ev) {
                  record(m, ev);
                  if (&m == &members.front()) {
                    clock::set(t0 + 10ms);  // stepped back, from 100 ms to 10 ms
                    members.emplace_back(); // a connection the handler accepts
                    group->watch(members.back());
                  }
                });
  log.scale->set(0.0);
  group->watch(members.front()); // at t0: its drop due at t0 + 30 ms
  clock::set(t0 + 100ms);        // the loop is late
  next_turn(ioc);
  REQUIRE(log.events.size() == 1);
  CHECK(log.events[0].who == &members.front());
  // The new member, watched at t0 + 10 ms, is not due in the rest of that run (the run read
  // the clock at t0 + 100 ms), nor before t0 + 40 ms.
  run_for(ioc, kStillScaled);
  CHECK(log.events.size() == 1);
  CHECK(group->size() == 1);
  clock::set(t0 + 40ms);
  run_until(ioc, [&] { return log.events.size() == 2; });
  REQUIRE(log.events.size() == 2);
  CHECK(log.events[1].who == &members.back());
  CHECK(log.events[1].at == t0 + 40ms);
}
