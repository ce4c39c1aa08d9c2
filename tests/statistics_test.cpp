//
// statistics_test.cpp
// ~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// asio_wheel::get_statistics and heartbeat_group::statistics(): each field moves as
// wheel_statistics.hpp says. Statistics are ours alone (Asio's timers have none), so these are
// not conformance cases. Virtual time (virtual_clock) makes every figure exact: the driver
// turns come only when the test advances, and lateness is whatever the test makes it.

#include <asio_wheel/basic_wheel_timer.hpp>
#include <asio_wheel/heartbeat_group.hpp>
#include <asio_wheel/statistics.hpp>
#include <asio_wheel/virtual_time.hpp>
#include <asio_wheel/wheel_timer.hpp>

#include <asio/error.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>

#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <ratio>
#include <string>
#include <vector>

using namespace std::chrono_literals;
using vclock = asio_wheel::virtual_clock;
using vtimer = asio_wheel::basic_wheel_timer<vclock>;

namespace {
void ignore(const asio::error_code&) {}
} // namespace

TEST_CASE("a context without a wheel reads zeros, and get_statistics does not create one") {
  asio::io_context io;
  const auto s = asio_wheel::get_statistics(io);
  CHECK(s.tick == 0ns);
  CHECK(s.waits_started == 0);
  CHECK_FALSE(s.next_expiry);
  CHECK_FALSE(asio::has_service<asio_wheel::detail::wheel_service<
                  std::chrono::steady_clock, asio::wait_traits<std::chrono::steady_clock>>>(io));
}

TEST_CASE("steady_clock: started, succeeded, expired at start, pending, next expiry") {
  asio::io_context io;
  asio_wheel::wheel_timer soon(io), later(io, 1h), past(io, -1s);
  later.async_wait(ignore);
  past.async_wait(ignore);
  soon.expires_after(50ms);
  soon.async_wait(ignore);
  // On a loaded machine (CI under ASan) `soon` may itself be due by the time its wait
  // starts; it certainly was not if its expiry is still ahead after the call.
  const bool soon_surely_pending_at_start = std::chrono::steady_clock::now() < soon.expiry();
  auto s = asio_wheel::get_statistics(io);
  CHECK(s.tick == 1ms);
  CHECK(s.waits_started == 3);
  if (soon_surely_pending_at_start) {
    CHECK(s.waits_expired_at_start == 1);
  } else {
    CHECK(s.waits_expired_at_start >= 1);
    CHECK(s.waits_expired_at_start <= 2);
  }
  // `past` is pending until the next expiry turn, as in Asio's timer queue.
  CHECK(s.waits_succeeded == 0);
  CHECK(s.waits_pending() == 3);
  CHECK(s.timers_pending == 3);
  REQUIRE(s.next_expiry);
  CHECK(*s.next_expiry <= 51ms); // rounded up to the tick
  later.cancel();
  io.run();
  s = asio_wheel::get_statistics(io);
  CHECK(s.waits_succeeded == 2);
  CHECK(s.waits_aborted == 1);
  CHECK(s.waits_pending() == 0);
  CHECK(s.timers_pending == 0);
  CHECK_FALSE(s.next_expiry);
  CHECK(s.driver_turns >= 1);
  CHECK(s.lateness_count() == 2); // `soon` and `past` (filed at the wheel's tick)
}

TEST_CASE("per-level counts, next expiry, lazy re-files and empty turns") {
  asio::io_context io;
  asio_wheel::virtual_time vt(io);
  vtimer a(io, 10ms), b(io, 100ms), c(io, 5000ms);
  a.async_wait(ignore);
  b.async_wait(ignore);
  c.async_wait(ignore);
  auto s = asio_wheel::get_statistics<vclock>(io);
  // The level depends on the digits of the current tick (the XOR rule of timing_wheel.hpp);
  // 10 ticks ahead is on level 0 or 1, 5000 ticks ahead on level 2 or 3.
  CHECK(s.timers_per_level[0] + s.timers_per_level[1] >= 1);
  CHECK(s.timers_per_level[2] + s.timers_per_level[3] >= 1);
  std::size_t sum = 0;
  for (auto n : s.timers_per_level)
    sum += n;
  CHECK(sum == 3);
  REQUIRE(s.next_expiry);
  // 10 ms, or earlier when the driver wakes first to stage the upper slot of `a` (its
  // deadline across a boundary of 64 ticks) or of `b` ahead of time.
  CHECK(*s.next_expiry <= 10ms);

  // `a` re-armed for later: it stays at its tick, and is filed again when that comes. Every
  // turn so far found no wait due: that one, and any that only staged an upper slot.
  a.expires_after(50ms); // aborts the wait
  a.async_wait(ignore);
  vt.advance(10ms);
  s = asio_wheel::get_statistics<vclock>(io);
  CHECK(s.lazy_refiles == 1);
  CHECK(s.driver_turns >= 1);
  CHECK(s.empty_turns == s.driver_turns);
  CHECK(s.waits_aborted == 1);
  CHECK(s.timers_pending == 3);
  vt.advance(40ms);
  s = asio_wheel::get_statistics<vclock>(io);
  CHECK(s.waits_succeeded == 1);
  CHECK(s.driver_turns - s.empty_turns == 1); // the turn that completed `a`'s wait
  a.cancel();
  b.cancel();
  c.cancel();
  vt.advance(0ms);
}

TEST_CASE("batches: one per driver turn with waits due, one per drain; the largest") {
  asio::io_context io;
  asio_wheel::virtual_time vt(io);
  std::vector<std::unique_ptr<vtimer>> ts;
  for (int i = 0; i < 3; ++i) {
    ts.push_back(std::make_unique<vtimer>(io, 20ms));
    ts.back()->async_wait(ignore);
  }
  vtimer multi(io, 1h);
  multi.async_wait(ignore);
  multi.async_wait(ignore);
  vt.advance(20ms);
  auto s = asio_wheel::get_statistics<vclock>(io);
  CHECK(s.batches == 1);
  CHECK(s.largest_batch == 3);
  multi.cancel(); // two aborted waits: one drain
  vt.advance(0ms);
  s = asio_wheel::get_statistics<vclock>(io);
  CHECK(s.batches == 2);
  CHECK(s.largest_batch == 3);
  CHECK(s.waits_aborted == 2);
}

TEST_CASE("budget turns: more expiries in one tick than one turn's budget") {
  asio::io_context io;
  asio_wheel::virtual_time vt(io);
  std::vector<std::unique_ptr<vtimer>> ts;
  for (int i = 0; i < 5000; ++i) {
    ts.push_back(std::make_unique<vtimer>(io, 7ms));
    ts.back()->async_wait(ignore);
  }
  vt.advance(7ms);
  const auto s = asio_wheel::get_statistics<vclock>(io);
  CHECK(s.waits_succeeded == 5000);
  CHECK(s.budget_turns == 1);
  // The turn cut short and its continuation; any other only staged ahead (empty).
  CHECK(s.driver_turns - s.empty_turns == 2);
  CHECK(s.largest_batch == 4096);
  CHECK(s.batches == 2);
}

TEST_CASE("lateness histogram: log2 buckets of ticks late, sum, quantiles") {
  asio::io_context io;
  asio_wheel::virtual_time vt(io);
  vtimer on_time(io, 10ms);
  on_time.async_wait(ignore);
  vt.advance(10ms);
  // Late by 5 ticks: the clock jumps past the deadline before the driver's turn runs.
  vtimer late(io, 10ms);
  late.async_wait(ignore);
  vclock::set(vclock::now() + 15ms);
  vt.advance(0ms);
  // Late by 1000 ticks.
  vtimer very(io, 1ms);
  very.async_wait(ignore);
  vclock::set(vclock::now() + 1001ms);
  vt.advance(0ms);
  const auto s = asio_wheel::get_statistics<vclock>(io);
  CHECK(s.lateness[0] == 1);
  CHECK(s.lateness[3] == 1);  // 5 in [4, 8)
  CHECK(s.lateness[10] == 1); // 1000 in [512, 1024)
  CHECK(s.lateness_count() == 3);
  CHECK(s.lateness_sum == 1005);
  CHECK(s.lateness_quantile(0.3) == 0);
  CHECK(s.lateness_quantile(0.5) == 7);
  CHECK(s.lateness_quantile(1.0) == 1023);
}

TEST_CASE("heartbeat_group statistics: members, pings, drops, re-files, wake-ups") {
  using group_type = asio_wheel::basic_heartbeat_group<vclock>;
  asio::io_context io;
  asio_wheel::virtual_time vt(io);
  int pings = 0, drops = 0;
  group_type group(io, {10s, 30s}, [&](group_type::member&, group_type::event e) {
    (e == group_type::event::ping ? pings : drops)++;
  });
  group_type::member quiet, busy;
  group.watch(quiet);
  group.watch(busy);
  CHECK(group.statistics().members == 2);
  vt.advance(5s);
  busy.touch(); // its threshold moves: re-filed when the old one comes
  vt.advance(5s);
  auto s = group.statistics();
  CHECK(s.pings == 1);
  CHECK(s.refiles == 1);
  CHECK(s.wakeups >= 1); // and early ones, to re-file the group's upper slots
  vt.advance(20s);
  s = group.statistics();
  CHECK(s.drops == 1);
  CHECK(s.members == 1);
  CHECK(s.pings == 2);
  CHECK(pings == 2);
  CHECK(drops == 1);
  group.unwatch(busy);
  vt.advance(0s);
}

// A turn that finds a timer due whose aborted wait is still queued sends the due wait
// behind it (see timer_queue::queue_behind_ready): the turn found a wait due, so it is not
// an empty turn, and the waits are counted once each.
TEST_CASE("a turn whose due waits queue behind an aborted one is not an empty turn") {
  asio::io_context io;
  std::string out;
  auto log = [&out](const char* name) {
    return [&out, name](const asio::error_code& ec) {
      out += std::string(name) + (ec ? "-aborted " : "-ok ");
    };
  };
  asio_wheel::wheel_timer x(io);
  asio::post(io, [&] {
    x.expires_after(-1s);
    x.async_wait(log("x1"));
    x.cancel();
    x.expires_after(-1s);
    x.async_wait(log("x2"));
  });
  io.run();
  CHECK(out == "x1-aborted x2-ok ");
  const auto s = asio_wheel::get_statistics(io);
  CHECK(s.waits_started == 2);
  CHECK(s.waits_succeeded == 1);
  CHECK(s.waits_aborted == 1);
  CHECK(s.driver_turns >= 1);
  CHECK(s.empty_turns == 0);
}

// #23 item 8: next_expiry while waits are pending is never empty, and never overflows.
TEST_CASE("next_expiry: zero for a wait already due when started (its turn is queued)") {
  asio::io_context io;
  asio_wheel::wheel_timer past(io, -1s);
  past.async_wait(ignore);
  const auto s = asio_wheel::get_statistics(io);
  CHECK(s.waits_pending() == 1);
  REQUIRE(s.next_expiry); // was empty: the driver is not armed, a turn is queued instead
  CHECK(*s.next_expiry == 0ns);
  io.run();
  CHECK_FALSE(asio_wheel::get_statistics(io).next_expiry);
}

// std::chrono::file_clock: C++20's, and libc++'s has a 128-bit representation, which the
// wheel rejects at compile time (tests/compile_fail/wide_clock.cpp).
#if __cplusplus >= 202002L && !defined(_LIBCPP_VERSION)
TEST_CASE("next_expiry: a clock read negative and a wait at time_point::max() reads far ahead") {
  using fclock = std::chrono::file_clock; // libstdc++: its epoch is in 2174, so now() < 0
  asio::io_context io;
  asio_wheel::basic_wheel_timer<fclock> t(io);
  t.expires_at((fclock::time_point::max)());
  t.async_wait(ignore);
  const auto s = asio_wheel::get_statistics<fclock>(io);
  REQUIRE(s.next_expiry);
  // alarm_time - now overflowed (UBSan: signed overflow) and read as zero.
  CHECK(*s.next_expiry > std::chrono::hours(24 * 365 * 100));
  t.cancel();
  io.run();
}
#endif

namespace {
// A clock whose period is seconds, reading the system clock.
struct seconds_clock {
  using rep = std::int64_t;
  using period = std::ratio<1>;
  using duration = std::chrono::duration<rep, period>;
  using time_point = std::chrono::time_point<seconds_clock>;
  static constexpr bool is_steady = false;
  static time_point now() {
    return time_point(
        std::chrono::duration_cast<duration>(std::chrono::system_clock::now().time_since_epoch()));
  }
};
} // namespace

TEST_CASE("next_expiry: a clock of seconds and a wait centuries ahead saturates") {
  asio::io_context io;
  asio_wheel::basic_wheel_timer<seconds_clock> t(io);
  // 400 years: more than nanoseconds can hold (292 years).
  t.expires_after(seconds_clock::duration(std::int64_t{400} * 365 * 24 * 3600));
  t.async_wait(ignore);
  const auto s = asio_wheel::get_statistics<seconds_clock>(io);
  REQUIRE(s.next_expiry);
  CHECK(*s.next_expiry == (std::chrono::nanoseconds::max)());
  t.cancel();
  io.run();
}
