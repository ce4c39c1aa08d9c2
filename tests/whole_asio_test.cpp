//
// whole_asio_test.cpp
// ~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// A translation unit as users write them: all of <asio.hpp> (<boost/asio.hpp> in the
// Boost.Asio build), <asio_wheel.hpp>, and `using namespace asio;`. Every public API of the
// library (wheel_timer, basic_wheel_timer, cancel_after, cancel_at, idle_timer, heartbeat,
// heartbeat_group) completes through a callback, use_awaitable, deferred and as_tuple. With
// an Asio that has its own asio::cancel_after (1.31 and later), both adapters are used here
// side by side, each called by its qualified name.
//
// Built against the flavour's target alone: none of the test support headers, nor the
// forwarding headers of the Boost.Asio build (tests/CMakeLists.txt), so what compiles here
// compiles for users. The asio_wheel::cancel_after calls failed to compile with Asio 1.31 and
// later before the library qualified its own calls (argument-dependent lookup found
// asio::cancel_at), and a callback token failed with Asio 1.38 (no executor for the deadline).
//
// Timing: durations of a few milliseconds; every lower bound is exact (never early), every
// upper bound generous (kPrompt).

#if defined(ASIO_WHEEL_USE_BOOST_ASIO)
#include <boost/asio.hpp>
namespace asio = boost::asio; // as Boost.Asio users write
using boost::system::error_code;
using boost::system::system_error;
#else
#include <asio.hpp>
#endif

#include <asio_wheel.hpp>

// Before Asio 1.24, deferred and as_tuple exist only in asio::experimental, and <asio.hpp>
// does not include them.
#if !ASIO_WHEEL_ASIO_HAS_DEFERRED
#if defined(ASIO_WHEEL_USE_BOOST_ASIO)
#include <boost/asio/experimental/as_tuple.hpp>
#include <boost/asio/experimental/deferred.hpp>
#else
#include <asio/experimental/as_tuple.hpp>
#include <asio/experimental/deferred.hpp>
#endif
using asio::experimental::as_tuple;
using asio::experimental::deferred;
#endif

#include <doctest/doctest.h>

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

using namespace asio;
using namespace std::chrono_literals;

namespace {

using sclock = std::chrono::steady_clock;

// "Promptly": what run() must beat is kFar; generous for a loaded machine under a sanitizer.
constexpr auto kPrompt = 10s;
constexpr auto kShort = 5ms;
constexpr auto kFar = 1h;

// Runs the context until it has no more work; how long that took.
sclock::duration run_all(io_context& ctx) {
  const auto start = sclock::now();
  ctx.run();
  return sclock::now() - start;
}

// Spawns a coroutine on ctx; its exception, if any, fails the test.
template <typename F>
void spawn(io_context& ctx, F&& f) {
  co_spawn(ctx, std::forward<F>(f), [](std::exception_ptr e) {
    if (e) {
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& x) {
        FAIL("coroutine threw: " << x.what());
      }
    }
  });
}

} // namespace

// ---------------------------------------------------------------------------------------
// wheel_timer and basic_wheel_timer

TEST_CASE("whole Asio: wheel_timer with a callback, never early") {
  io_context ctx;
  const auto start = sclock::now();
  asio_wheel::wheel_timer t(ctx, kShort);
  std::optional<error_code> result;
  sclock::time_point fired;
  t.async_wait([&](error_code ec) {
    result = ec;
    fired = sclock::now();
  });
  const auto took = run_all(ctx);
  REQUIRE(result.has_value());
  CHECK(!*result);
  CHECK(fired - start >= kShort);
  CHECK(took < kPrompt);
}

TEST_CASE("whole Asio: basic_wheel_timer on the io_context's executor type, with deferred") {
  io_context ctx;
  using timer_type =
      asio_wheel::basic_wheel_timer<sclock, wait_traits<sclock>, io_context::executor_type>;
  const auto start = sclock::now();
  timer_type t(ctx.get_executor(), kShort);
  CHECK(t.get_executor() == ctx.get_executor());
  auto op = t.async_wait(deferred);
  std::optional<error_code> result;
  sclock::time_point fired;
  std::move(op)([&](error_code ec) {
    result = ec;
    fired = sclock::now();
  });
  run_all(ctx);
  REQUIRE(result.has_value());
  CHECK(!*result);
  CHECK(fired - start >= kShort);
}

TEST_CASE("whole Asio: wheel_timer with use_awaitable and as_tuple(use_awaitable)") {
  io_context ctx;
  bool done = false;
  spawn(ctx, [&]() -> awaitable<void> {
    auto ex = co_await this_coro::executor;
    const auto start = sclock::now();
    asio_wheel::wheel_timer t(ex, kShort);
    co_await t.async_wait(use_awaitable);
    CHECK(sclock::now() - start >= kShort);

    // Cancelled: as_tuple reports operation_aborted as a value.
    t.expires_after(kFar);
    post(ex, [&t] { t.cancel(); });
    auto [ec] = co_await t.async_wait(as_tuple(use_awaitable));
    CHECK(ec == error::operation_aborted);
    done = true;
  });
  CHECK(run_all(ctx) < kPrompt);
  CHECK(done);
}

// ---------------------------------------------------------------------------------------
// cancel_after, cancel_at

TEST_CASE("whole Asio: asio_wheel::cancel_after with a callback aborts a far wait at the "
          "deadline") {
  io_context ctx;
  steady_timer t(ctx, kFar);
  const auto start = sclock::now();
  std::optional<error_code> result;
  sclock::time_point done;
  t.async_wait(asio_wheel::cancel_after(kShort, [&](error_code ec) {
    result = ec;
    done = sclock::now();
  }));
  CHECK(run_all(ctx) < kPrompt);
  REQUIRE(result.has_value());
  CHECK(*result == error::operation_aborted);
  CHECK(done - start >= kShort);
}

TEST_CASE("whole Asio: asio_wheel::cancel_at with use_awaitable throws operation_aborted") {
  io_context ctx;
  bool caught = false;
  spawn(ctx, [&]() -> awaitable<void> {
    steady_timer t(co_await this_coro::executor, kFar);
    const auto deadline = sclock::now() + kShort;
    try {
      co_await t.async_wait(asio_wheel::cancel_at(deadline, use_awaitable));
    } catch (const system_error& e) {
      caught = e.code() == error::operation_aborted;
      CHECK(sclock::now() >= deadline);
    }
  });
  CHECK(run_all(ctx) < kPrompt);
  CHECK(caught);
}

TEST_CASE("whole Asio: asio_wheel::cancel_after around deferred and inside as_tuple") {
  io_context ctx;
  // deferred inside the adapter: the operation starts when the deferred one is launched.
  asio_wheel::wheel_timer distant(ctx, kFar);
  auto op = distant.async_wait(asio_wheel::cancel_after(kShort, deferred));
  std::optional<error_code> deferred_result;
  std::move(op)([&](error_code ec) { deferred_result = ec; });

  // as_tuple around use_awaitable, inside the adapter.
  std::optional<error_code> tuple_result;
  spawn(ctx, [&]() -> awaitable<void> {
    asio_wheel::wheel_timer t(co_await this_coro::executor, kFar);
    auto [ec] = co_await t.async_wait(
        asio_wheel::cancel_after(kShort, cancellation_type::terminal, as_tuple(use_awaitable)));
    tuple_result = ec;
  });
  CHECK(run_all(ctx) < kPrompt);
  REQUIRE(deferred_result.has_value());
  CHECK(*deferred_result == error::operation_aborted);
  REQUIRE(tuple_result.has_value());
  CHECK(*tuple_result == error::operation_aborted);
}

TEST_CASE("whole Asio: an operation that completes first passes its result through") {
  io_context ctx;
  asio_wheel::wheel_timer t(ctx, kShort);
  std::optional<error_code> result;
  t.async_wait(asio_wheel::cancel_after(kFar, [&](error_code ec) { result = ec; }));
  // run() returns promptly: the far deadline left the wheel with the operation.
  CHECK(run_all(ctx) < kPrompt);
  REQUIRE(result.has_value());
  CHECK(!*result);
}

TEST_CASE("whole Asio: asio_wheel's and asio's cancel_after in one translation unit") {
  io_context ctx;
  std::vector<error_code> results;
  auto record = [&](error_code ec) { results.push_back(ec); };

  steady_timer a(ctx, kFar);
  a.async_wait(asio_wheel::cancel_after(kShort, record));
  asio_wheel::wheel_timer b(ctx, kFar);
  b.async_wait(asio_wheel::cancel_at(sclock::now() + kShort, record));
  std::size_t expected = 2;
#if ASIO_WHEEL_ASIO_HAS_CANCEL_AFTER
  // Asio's own, on Asio's timer and on the wheel timer (it needs only the I/O executor).
  steady_timer c(ctx, kFar);
  c.async_wait(asio::cancel_after(kShort, record));
  asio_wheel::wheel_timer d(ctx, kFar);
  d.async_wait(asio::cancel_at(sclock::now() + kShort, record));
  expected += 2;
  {
    // With both namespaces used, unqualified would be ambiguous; qualified is not.
    using namespace asio_wheel;
    wheel_timer e(ctx, kFar);
    e.async_wait(asio_wheel::cancel_after(kShort, record));
    ++expected;
  }
#endif
  CHECK(run_all(ctx) < kPrompt);
  CHECK(results.size() == expected);
  for (const error_code& ec : results)
    CHECK(ec == error::operation_aborted);
}

// ---------------------------------------------------------------------------------------
// idle_timer

TEST_CASE("whole Asio: idle_timer with a callback, deferred, use_awaitable and as_tuple") {
  io_context ctx;
  const auto start = sclock::now();
  asio_wheel::idle_timer by_callback(ctx, kShort);
  asio_wheel::idle_timer by_deferred(ctx.get_executor(), kShort);
  std::vector<sclock::duration> after;
  by_callback.async_wait([&](error_code ec) {
    CHECK(!ec);
    after.push_back(sclock::now() - start);
  });
  by_deferred.async_wait(deferred)([&](error_code ec) {
    CHECK(!ec);
    after.push_back(sclock::now() - start);
  });
  bool awaited = false;
  spawn(ctx, [&]() -> awaitable<void> {
    auto ex = co_await this_coro::executor;
    const auto begin = sclock::now();
    asio_wheel::idle_timer idle(ex, kShort);
    co_await idle.async_wait(use_awaitable);
    CHECK(sclock::now() - begin >= kShort);
    // A touched timer is still pending; cancelled, as_tuple reports it.
    idle.touch();
    post(ex, [&idle] { idle.cancel(); });
    auto [ec] = co_await idle.async_wait(as_tuple(use_awaitable));
    CHECK(ec == error::operation_aborted);
    awaited = true;
  });
  CHECK(run_all(ctx) < kPrompt);
  REQUIRE(after.size() == 2);
  for (auto d : after)
    CHECK(d >= kShort);
  CHECK(awaited);
}

// ---------------------------------------------------------------------------------------
// heartbeat

TEST_CASE("whole Asio: heartbeat pings, then drops, through every kind of token") {
  // The ping needs its turn before drop_after (a turn that comes later judges the spell by
  // its drop alone): a loaded machine may stall the test past it, which `judged_in_time`
  // detects; the scenario is tried again then.
#if defined(_WIN32)
  // Windows' timers fire on its timer interrupt (15.6 ms unless a process asks for less) and
  // under Wine an io_context and its first waits take milliseconds: a 10 ms spell there was
  // missed in all five attempts beside the stage's computing tests.
  constexpr auto kPing = 40ms;
#else
  constexpr auto kPing = kShort;
#endif
  constexpr auto kDrop = 2 * kPing;
  constexpr int kAttempts = 5;
  using event = asio_wheel::heartbeat::event;
  const asio_wheel::heartbeat::options opts{.ping_after = kPing, .drop_after = kDrop};
  for (int attempt = 1;; ++attempt) {
    io_context ctx;
    const auto start = sclock::now();
    // Whether each first event's completion ran before drop_after: its turn did too.
    bool judged_in_time = true;
    auto first_event_at = [&](sclock::time_point since) {
      judged_in_time = judged_in_time && sclock::now() < since + kDrop;
    };

    // Callback, then deferred: ping, then drop.
    std::vector<event> seen;
    asio_wheel::heartbeat hb(ctx, opts);
    hb.async_next([&](error_code ec, event ev) {
      first_event_at(start);
      CHECK(!ec);
      seen.push_back(ev);
      hb.async_next(deferred)([&](error_code ec2, event ev2) {
        CHECK(!ec2);
        seen.push_back(ev2);
      });
    });

    // use_awaitable, then as_tuple(use_awaitable).
    std::vector<event> awaited;
    spawn(ctx, [&]() -> awaitable<void> {
      const auto begin = sclock::now();
      asio_wheel::heartbeat beat(co_await this_coro::executor, opts);
      awaited.push_back(co_await beat.async_next(use_awaitable));
      first_event_at(begin);
      auto [ec, ev] = co_await beat.async_next(as_tuple(use_awaitable));
      CHECK(!ec);
      awaited.push_back(ev);
    });
    CHECK(run_all(ctx) < kPrompt);
    REQUIRE(seen.size() == 2);
    REQUIRE(awaited.size() == 2);
    if (judged_in_time || attempt == kAttempts) {
      CHECK(seen == std::vector<event>{event::ping, event::drop});
      CHECK(awaited == std::vector<event>{event::ping, event::drop});
      break;
    }
    MESSAGE("attempt " << attempt << ": stalled past drop_after before the ping; again");
  }
}

// ---------------------------------------------------------------------------------------
// heartbeat_group

TEST_CASE("whole Asio: heartbeat_group reports a ping and a drop for a watched member") {
  io_context ctx;
  struct connection : asio_wheel::heartbeat_group::member {
    std::vector<asio_wheel::heartbeat_group::event> events;
  };
  connection conn;
  const auto start = sclock::now();
  asio_wheel::heartbeat_group group(
      ctx, {.ping_after = kShort, .drop_after = 2 * kShort},
      [&](asio_wheel::heartbeat_group::member& m, asio_wheel::heartbeat_group::event ev) {
        static_cast<connection&>(m).events.push_back(ev);
        if (ev == asio_wheel::heartbeat_group::event::drop)
          CHECK(sclock::now() - start >= 2 * kShort);
      });
  group.watch(conn);
  CHECK(group.get_executor() == any_io_executor(ctx.get_executor()));
  CHECK(run_all(ctx) < kPrompt);
  // "At most one ping per quiet spell, then one drop": a turn that comes after drop_after
  // (a loaded machine) judges the member by its drop alone, so the ping may be absent; the
  // ping itself is checked with thresholds 110 ms apart in heartbeat_group_test.
  using hb_event = asio_wheel::heartbeat_group::event;
  CHECK((conn.events == std::vector<hb_event>{hb_event::ping, hb_event::drop} ||
         conn.events == std::vector<hb_event>{hb_event::drop}));
  CHECK(!conn.is_watched());
}
