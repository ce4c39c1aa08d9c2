//
// clock_step_test.cpp
// ~~~~~~~~~~~~~~~~~~~
//
// Clocks that read negative and clocks stepped back, on a frozen manual_clock, so that every
// step is exact and every "not yet" is certain (issue 13, defects 3 and 4; the clock matrix
// in clock_matrix_test.cpp runs the same components on running clocks).
//
//   * saturating_add (detail/heartbeat_rule.hpp) with a time before the epoch, and
//     saturating_sub (detail/saturating_time.hpp), the time left to an expiry;
//   * idle_timer, heartbeat and heartbeat_group on a clock reading negative complete;
//   * a wait started after its clock was stepped back behind the wheel's time completes
//     only once the clock reaches its expiry (a template over Asio's timer and ours), also
//     when the clock was stepped back to before the wheel existed, and for set_timeout();
//   * idle_timer, heartbeat and heartbeat_group on such a clock wait without spinning on it.
//
// A frozen clock does not move by itself: the test sets it, and runs the context for a
// while of real time to see that nothing completes before it is moved past the expiry.
// Asio's timer on a manual_clock reads it again at least once a millisecond (its wait
// traits cap every wait), and so does the wheel's driver.
//
//
// Options are written {ping_after, drop_after}, without designators, and file_clock is
// C++20's: this file builds as C++17 too (scripts/test's cxx17 stage).

#include <asio_wheel/basic_wheel_timer.hpp>
#include <asio_wheel/detail/heartbeat_rule.hpp>
#include <asio_wheel/heartbeat.hpp>
#include <asio_wheel/heartbeat_group.hpp>
#include <asio_wheel/idle_timer.hpp>

#include <asio/basic_waitable_timer.hpp>
#include <asio/error.hpp>
#include <asio/io_context.hpp>

#include <doctest/doctest.h>

#include "asio_test_support.hpp"
#include "frozen_run.hpp"
#include "manual_clock.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <thread>

namespace {

using namespace std::chrono_literals;
using namespace asio_wheel::test;

// A wait on a clock standing still runs no handler of its own: Asio's timer (the wheel's
// driver) reads the clock again without one. A few run for what came before (the driver
// waking at the tick it was armed for earlier, an aborted wait's completion). A wait that
// spins re-arms through handlers, thousands of times in kStill (heartbeat_group's spun with
// few clock reads: each turn walked the wheel).
constexpr std::size_t kStillHandlers = 5;

// What a frozen clock may be read in `d` of real time by a waiting context: about twice per
// millisecond (the wait cap), and a few times per handler. Spinning reads it well over 100
// times per millisecond.
inline std::uint64_t read_budget(sclock::duration d) {
  return 200 + 10 * static_cast<std::uint64_t>(
                        std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
}

constexpr auto kStill = 30ms; // how long a frozen clock is left standing to see nothing happen
// The wheel's tick: an expiry is rounded up to the next tick boundary, so a frozen clock is set
// one tick past an expiry to see the wait complete.
constexpr auto kTick = 1ms;

// A clock reading about where libstdc++'s file_clock reads today (its epoch is in 2174).
struct negative_tag;
using negative_clock = manual_clock<negative_tag, std::chrono::nanoseconds, false>;
const negative_clock::time_point kNegative{std::chrono::nanoseconds(-4'600'000'000'000'000'000)};

// A clock stepped back by an NTP client.
struct stepped_tag;
using stepped_clock = manual_clock<stepped_tag, std::chrono::nanoseconds, false>;
const stepped_clock::time_point kT0{std::chrono::hours(24)};

} // namespace

TYPE_TO_STRING(asio::basic_waitable_timer<stepped_clock>);
TYPE_TO_STRING(asio_wheel::basic_wheel_timer<stepped_clock>);

// =======================================================================================
// Defect 3: clocks that read negative
// =======================================================================================

TEST_CASE("saturating_add: exact before the epoch, saturating at both ends of the range") {
  using asio_wheel::detail::saturating_add;
#if defined(__cpp_lib_chrono) && __cpp_lib_chrono >= 201907L
  using clock = std::chrono::file_clock; // libstdc++'s reads negative (its epoch is in 2174)
#else
  using clock = std::chrono::system_clock; // C++17 has no file_clock
#endif
  using tp = clock::time_point;
  using d = tp::duration;
  const tp now = clock::now();
  CHECK(saturating_add(now, d(1s)) == now + d(1s));
  CHECK(saturating_add(now, d::zero()) == now);
  CHECK(saturating_add(tp(d(-5)), d(3)) == tp(d(-2)));
  CHECK(saturating_add(tp::min(), d(1s)) == tp::min() + d(1s));
  CHECK(saturating_add(tp::min(), d::max()) == tp(d(-1)));
  CHECK(saturating_add(tp(d(1)), d::max()) == tp::max());
  CHECK(saturating_add(tp::max() - d(1), d(1)) == tp::max());
  CHECK(saturating_add(tp::max(), d(1)) == tp::max());
  CHECK(saturating_add(tp(d(5)), d(-3)) == tp(d(2)));
  CHECK(saturating_add(tp::min() + d(1), d(-2)) == tp::min());
  CHECK(saturating_add(tp(d(-1)), d::min()) == tp::min());
}

namespace {

// Time points of `Rep` ticks, for saturating_sub over a whole range or its edges.
template <typename Rep>
using rep_time = std::chrono::time_point<std::chrono::system_clock, std::chrono::duration<Rep>>;

// The exact difference, clamped to the rep's range: what Asio's timers take as expiry - now
// (chrono_time_traits::subtract saturates at duration::min() and duration::max()).
template <typename Rep, typename Wide>
Rep clamped_difference(Rep a, Rep b) {
  const Wide exact = static_cast<Wide>(a) - static_cast<Wide>(b);
  if (exact > static_cast<Wide>((std::numeric_limits<Rep>::max)()))
    return (std::numeric_limits<Rep>::max)();
  if (exact < static_cast<Wide>((std::numeric_limits<Rep>::min)()))
    return (std::numeric_limits<Rep>::min)();
  return static_cast<Rep>(exact);
}

} // namespace

// basic_wheel_timer's wait() and expires_from_now() (Asio's deprecated member) take the time
// left so: a clock reading negative with an expiry at time_point::max() must not overflow.
TEST_CASE("saturating_sub: the exact difference, saturating at both ends of the duration") {
  using asio_wheel::detail::saturating_sub;
  int wrong = 0;
  for (int a = -128; a <= 127; ++a) {
    for (int b = -128; b <= 127; ++b) {
      using tp = rep_time<std::int8_t>;
      const auto want = clamped_difference<std::int8_t, int>(static_cast<std::int8_t>(a),
                                                             static_cast<std::int8_t>(b));
      const auto got = saturating_sub(tp(tp::duration(a)), tp(tp::duration(b))).count();
      wrong += got != want;
    }
  }
  CHECK(wrong == 0); // every pair of an 8-bit rep
  using tp = rep_time<std::int64_t>;
  using lim = std::numeric_limits<std::int64_t>;
  const std::int64_t edges[] = {lim::min(), lim::min() + 1, lim::min() / 2, -2,        -1, 0, 1,
                                2,          lim::max() / 2, lim::max() - 1, lim::max()};
  for (std::int64_t a : edges) {
    for (std::int64_t b : edges) {
      CAPTURE(a);
      CAPTURE(b);
#if defined(__SIZEOF_INT128__)
      __extension__ typedef __int128 wide; // GCC and clang; -Wpedantic otherwise says so
      CHECK(saturating_sub(tp(tp::duration(a)), tp(tp::duration(b))).count() ==
            clamped_difference<std::int64_t, wide>(a, b));
#else
      // Without a wider type: the sign of the saturated difference, and exactness where the
      // operands share a sign.
      const std::int64_t got = saturating_sub(tp(tp::duration(a)), tp(tp::duration(b))).count();
      CHECK((got > 0) == (a > b));
      if ((a >= 0) == (b >= 0))
        CHECK(got == a - b);
#endif
    }
  }
  using utp = rep_time<std::uint32_t>; // an unsigned rep: duration::min() is zero
  CHECK(saturating_sub(utp(utp::duration(5)), utp(utp::duration(7))).count() == 0);
  CHECK(saturating_sub(utp(utp::duration(7)), utp(utp::duration(5))).count() == 2);
}

TEST_CASE("a clock reading negative: idle_timer completes once the timeout has passed") {
  negative_clock::reset(kNegative, /*running=*/false);
  asio::io_context ioc;
  asio_wheel::basic_idle_timer<negative_clock> idle(ioc, 10ms);
  CHECK(idle.last_activity() == kNegative);
  outcome o;
  idle.async_wait(record(o));
  negative_clock::set(kNegative + 9ms);
  run_for(ioc, kStill);
  CHECK(o.calls == 0);
  negative_clock::set(kNegative + 10ms + kTick);
  CHECK(run_until(ioc, [&] { return o.calls == 1; }));
  CHECK(o.ec == kOk);
}

TEST_CASE("a clock reading negative: heartbeat pings and drops") {
  using hb_type = asio_wheel::basic_heartbeat<negative_clock>;
  negative_clock::reset(kNegative, false);
  asio::io_context ioc;
  hb_type hb(ioc, {10ms, 20ms});
  std::optional<hb_type::event> got;
  hb.async_next([&](asio::error_code ec, hb_type::event ev) {
    CHECK(ec == kOk);
    got = ev;
  });
  negative_clock::set(kNegative + 10ms + kTick);
  REQUIRE(run_until(ioc, [&] { return got.has_value(); }));
  CHECK(*got == hb_type::event::ping);
  got.reset();
  hb.async_next([&](asio::error_code ec, hb_type::event ev) {
    CHECK(ec == kOk);
    got = ev;
  });
  negative_clock::set(kNegative + 20ms + kTick);
  REQUIRE(run_until(ioc, [&] { return got.has_value(); }));
  CHECK(*got == hb_type::event::drop);
}

TEST_CASE("a clock reading negative: heartbeat_group pings and drops") {
  using group_type = asio_wheel::basic_heartbeat_group<negative_clock>;
  negative_clock::reset(kNegative, false);
  asio::io_context ioc;
  int pings = 0;
  int drops = 0;
  group_type group(ioc, {10ms, 20ms}, [&](group_type::member&, group_type::event ev) {
    ++(ev == group_type::event::ping ? pings : drops);
  });
  group_type::member m;
  group.watch(m);
  negative_clock::set(kNegative + 10ms + 2 * kTick);
  CHECK(run_until(ioc, [&] { return pings == 1; }));
  negative_clock::set(kNegative + 20ms + 2 * kTick);
  CHECK(run_until(ioc, [&] { return drops == 1; }));
  CHECK(pings == 1);
  CHECK_FALSE(m.is_watched());
}

// =======================================================================================
// Defect 4: a clock stepped back behind the wheel
// =======================================================================================

TEST_CASE_TEMPLATE("a clock stepped back: a wait started then completes only when the clock "
                   "reaches its expiry",
                   Timer, asio::basic_waitable_timer<stepped_clock>,
                   asio_wheel::basic_wheel_timer<stepped_clock>) {
  stepped_clock::reset(kT0, false);
  asio::io_context ioc;

  // The wheel reaches kT0 + 10 ms.
  Timer first(ioc, kT0 + 5ms);
  outcome o1;
  first.async_wait(record(o1));
  stepped_clock::set(kT0 + 10ms);
  REQUIRE(run_until(ioc, [&] { return o1.calls == 1; }));

  // Stepped back by 10 ms: a wait for kT0 + 5 ms is 5 ms away again.
  stepped_clock::set(kT0);
  Timer second(ioc, kT0 + 5ms);
  outcome o2;
  second.async_wait(record(o2));
  run_for(ioc, kStill);
  CHECK(o2.calls == 0);
  stepped_clock::set(kT0 + 5ms - 1ns);
  run_for(ioc, 5ms);
  CHECK(o2.calls == 0);
  stepped_clock::set(kT0 + 5ms + kTick);
  CHECK(run_until(ioc, [&] { return o2.calls == 1; }));
  CHECK(o2.ec == kOk);
}

TEST_CASE_TEMPLATE("a clock stepped back to before the context's first wait: a wait started "
                   "then completes only when the clock reaches its expiry",
                   Timer, asio::basic_waitable_timer<stepped_clock>,
                   asio_wheel::basic_wheel_timer<stepped_clock>) {
  stepped_clock::reset(kT0, false);
  asio::io_context ioc;
  Timer first(ioc, kT0 + 1ms);
  outcome o1;
  first.async_wait(record(o1)); // the context's wheel starts here
  stepped_clock::set(kT0 + 1ms + kTick);
  REQUIRE(run_until(ioc, [&] { return o1.calls == 1; }));

  stepped_clock::set(kT0 - 1h);
  Timer second(ioc, kT0 - 1h + 5ms);
  outcome o2;
  second.async_wait(record(o2));
  run_for(ioc, kStill);
  CHECK(o2.calls == 0);
  stepped_clock::set(kT0 - 1h + 5ms + kTick);
  CHECK(run_until(ioc, [&] { return o2.calls == 1; }));
  CHECK(o2.ec == kOk);
}

TEST_CASE_TEMPLATE("a clock stepped forward by an hour and back: waits complete at their own "
                   "expiries",
                   Timer, asio::basic_waitable_timer<stepped_clock>,
                   asio_wheel::basic_wheel_timer<stepped_clock>) {
  stepped_clock::reset(kT0, false);
  asio::io_context ioc;
  Timer before(ioc, kT0 + 5ms);
  outcome o1;
  before.async_wait(record(o1));
  stepped_clock::set(kT0 + 1h);
  REQUIRE(run_until(ioc, [&] { return o1.calls == 1; })); // due: the clock passed it
  stepped_clock::set(kT0);
  Timer after(ioc, kT0 + 5ms);
  outcome o2;
  after.async_wait(record(o2));
  run_for(ioc, kStill);
  CHECK(o2.calls == 0);
  stepped_clock::set(kT0 + 5ms + kTick);
  CHECK(run_until(ioc, [&] { return o2.calls == 1; }));
}

TEST_CASE("a clock stepped back: idle_timer neither completes early nor spins on the clock") {
  using idle_type = asio_wheel::basic_idle_timer<stepped_clock>;
  stepped_clock::reset(kT0, false);
  asio::io_context ioc;
  asio_wheel::basic_wheel_timer<stepped_clock> advance(ioc, kT0 + 5ms);
  outcome o1;
  advance.async_wait(record(o1));
  stepped_clock::set(kT0 + 10ms);
  REQUIRE(run_until(ioc, [&] { return o1.calls == 1; }));

  stepped_clock::set(kT0);
  idle_type idle(ioc, 5ms); // due at kT0 + 5 ms, behind the wheel's kT0 + 10 ms
  outcome o2;
  idle.async_wait(record(o2));
  const std::uint64_t reads = stepped_clock::reads();
  const auto t = sclock::now();
  CHECK(run_for(ioc, kStill) <= kStillHandlers);
  CHECK(o2.calls == 0);
  CHECK(stepped_clock::reads() - reads <= read_budget(sclock::now() - t));

  // set_timeout() to a deadline still behind the wheel: the wait moves, and still waits.
  idle.set_timeout(7ms);
  stepped_clock::set(kT0 + 6ms);
  const std::uint64_t reads2 = stepped_clock::reads();
  const auto t2 = sclock::now();
  CHECK(run_for(ioc, kStill) <= kStillHandlers);
  CHECK(o2.calls == 0);
  CHECK(stepped_clock::reads() - reads2 <= read_budget(sclock::now() - t2));
  stepped_clock::set(kT0 + 7ms + kTick);
  CHECK(run_until(ioc, [&] { return o2.calls == 1; }));
  CHECK(o2.ec == kOk);
}

TEST_CASE("a clock stepped back: heartbeat neither pings early nor spins on the clock") {
  using hb_type = asio_wheel::basic_heartbeat<stepped_clock>;
  stepped_clock::reset(kT0, false);
  asio::io_context ioc;
  asio_wheel::basic_wheel_timer<stepped_clock> advance(ioc, kT0 + 5ms);
  outcome o1;
  advance.async_wait(record(o1));
  stepped_clock::set(kT0 + 10ms);
  REQUIRE(run_until(ioc, [&] { return o1.calls == 1; }));

  stepped_clock::set(kT0);
  hb_type hb(ioc, {5ms, 8ms});
  std::optional<hb_type::event> got;
  hb.async_next([&](asio::error_code ec, hb_type::event ev) {
    CHECK(ec == kOk);
    got = ev;
  });
  const std::uint64_t reads = stepped_clock::reads();
  const auto t = sclock::now();
  CHECK(run_for(ioc, kStill) <= kStillHandlers);
  CHECK_FALSE(got.has_value());
  CHECK(stepped_clock::reads() - reads <= read_budget(sclock::now() - t));
  stepped_clock::set(kT0 + 5ms + kTick);
  REQUIRE(run_until(ioc, [&] { return got.has_value(); }));
  CHECK(*got == hb_type::event::ping);
}

TEST_CASE("a clock stepped back: heartbeat_group neither pings early nor spins on the clock") {
  using group_type = asio_wheel::basic_heartbeat_group<stepped_clock>;
  stepped_clock::reset(kT0, false);
  asio::io_context ioc;
  int pings = 0;
  int drops = 0;
  stepped_clock::time_point at{};
  group_type group(ioc, {5ms, 8ms}, [&](group_type::member&, group_type::event ev) {
    at = stepped_clock::now();
    ++(ev == group_type::event::ping ? pings : drops);
  });
  group_type::member early;
  group.watch(early); // pings at kT0 + 5 ms: the group's wheel gets there
  stepped_clock::set(kT0 + 7ms);
  REQUIRE(run_until(ioc, [&] { return pings == 1; }));
  group.unwatch(early);

  stepped_clock::set(kT0);
  pings = 0;
  group_type::member m;
  group.watch(m); // pings at kT0 + 5 ms again
  const std::uint64_t reads = stepped_clock::reads();
  const auto t = sclock::now();
  CHECK(run_for(ioc, kStill) <= kStillHandlers);
  CHECK(pings == 0);
  CHECK(stepped_clock::reads() - reads <= read_budget(sclock::now() - t));
  stepped_clock::set(kT0 + 5ms + 2 * kTick);
  REQUIRE(run_until(ioc, [&] { return pings == 1; }));
  CHECK(at >= kT0 + 5ms);
  CHECK(drops == 0);
}
