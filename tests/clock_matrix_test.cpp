//
// clock_matrix_test.cpp
// ~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// Never early, on every kind of clock. Each component (basic_wheel_timer, idle_timer,
// heartbeat, heartbeat_group, cancel_at) runs one scenario on each clock below, and every
// completion checks, against the clock it waits on, that it is not early:
//
//   steady    std::chrono::steady_clock
//   system    std::chrono::system_clock (not steady; never stepped here)
//   file      std::chrono::file_clock (not steady; libstdc++'s epoch is in 2174, so it
//             reads negative today)
//   forward   manual_clock, steady, stepped forward by an hour mid-scenario
//   back      manual_clock, not steady, stepped back by kBack mid-scenario (an NTP step)
//   negative  manual_clock, not steady, one hour after time_point::min(), stepped back
//   coarse    manual_clock, steady, a period of 10 ms (the wheel's tick is one period),
//             stepped forward by a second
//   fine      manual_clock, not steady, a period of 1 fs (64-bit range: +-2.5 h), stepped
//             back
//
// Every scenario has two phases: the first starts waits and lets the wheel advance (a wait
// on the clock completes), then the clock is stepped from that wait's handler, and the
// second phase starts new waits relative to the clock's new reading, while waits of the
// first may still be pending. A step back leaves the wheel's own time ahead of the clock:
// that is where a wait judged "already due" by the wheel instead of the clock completed
// early (issue 13, defect 4), and where an idle timer or heartbeat spun.
//
// The checks: a timer's completion reads clock::now() >= its expiry; an idle timer's,
// now >= the last touch + timeout; a heartbeat's ping and drop, now >= the last touch +
// the threshold; cancel_at's cancellation, read as it is emitted, now >= the deadline. A
// "touch time" is a clock reading taken just before the touch (or the construction or
// watch() that counts as one), so it is never later than the library's own mark. Every
// wait completes exactly once within the watchdog. On a manual clock the scenario's clock
// reads are bounded: a wait that spins on a clock stepped back reads it hundreds of
// thousands of times.
//
// Where Asio defines the behaviour (a timer on a clock), the case is a template over
// asio::basic_waitable_timer<Clock> and basic_wheel_timer<Clock>, so that the scenario is
// shown to hold for Asio's own timer first.

#include <asio_wheel/basic_wheel_timer.hpp>
#include <asio_wheel/cancel_after.hpp>
#include <asio_wheel/heartbeat.hpp>
#include <asio_wheel/heartbeat_group.hpp>
#include <asio_wheel/idle_timer.hpp>

#include <asio/basic_waitable_timer.hpp>
#include <asio/error.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>

#include <doctest/doctest.h>

#include "asio_test_support.hpp"
#include "manual_clock.hpp"
#include "manual_op.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <ratio>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;
using namespace asio_wheel::test;

constexpr auto kPrompt = 5s;
// The step back of the stepping clocks: waits started before it take that much longer.
constexpr auto kBack = 40ms;

// --- The clocks ---------------------------------------------------------------------------

template <typename Clock>
struct real_clock {
  using clock = Clock;
  static constexpr bool is_manual = false;
  static void reset() {}
  static void step() {}
  static std::uint64_t reads() { return 0; }
};

template <typename Self, typename Duration, bool Steady>
struct manual_variant {
  using clock = manual_clock<Self, Duration, Steady>;
  static constexpr bool is_manual = true;
  static std::uint64_t reads() { return clock::reads(); }
};

using ns = std::chrono::nanoseconds;
using centiseconds = std::chrono::duration<std::int64_t, std::centi>;
using femtoseconds = std::chrono::duration<std::int64_t, std::femto>;

struct steady_v : real_clock<std::chrono::steady_clock> {};
struct system_v : real_clock<std::chrono::system_clock> {};
// std::chrono::file_clock is C++20's: this file builds as C++17 too (scripts/test's cxx17
// stage), without that variant.
#if defined(__cpp_lib_chrono) && __cpp_lib_chrono >= 201907L
#define ASIO_WHEEL_TEST_FILE_CLOCK 1
struct file_v : real_clock<std::chrono::file_clock> {};
#define FILE_VARIANT file_v,
#define TIMERS_ON_FILE_CLOCK asio_on<file_v>, wheel_on<file_v>,
#else
#define FILE_VARIANT
#define TIMERS_ON_FILE_CLOCK
#endif

struct forward_v : manual_variant<forward_v, ns, true> {
  static void reset() { clock::reset(clock::time_point(1h)); }
  static void step() { clock::step(1h); }
};
struct back_v : manual_variant<back_v, ns, false> {
  static void reset() { clock::reset(clock::time_point(1h)); }
  static void step() { clock::step(-kBack); }
};
struct negative_v : manual_variant<negative_v, ns, false> {
  static void reset() { clock::reset(clock::time_point::min() + 1h); }
  static void step() { clock::step(-kBack); }
};
struct coarse_v : manual_variant<coarse_v, centiseconds, true> {
  static void reset() { clock::reset(clock::time_point(1h)); }
  static void step() { clock::step(1s); }
};
struct fine_v : manual_variant<fine_v, femtoseconds, false> {
  static void reset() { clock::reset(clock::time_point(1s)); }
  static void step() { clock::step(-std::chrono::duration_cast<femtoseconds>(kBack)); }
};

#define CLOCK_VARIANTS                                                                             \
  steady_v, system_v, FILE_VARIANT forward_v, back_v, negative_v, coarse_v, fine_v

// A timer type on a clock variant, for the templates over Asio's timer and ours.
template <typename V>
struct asio_on {
  using variant = V;
  using timer = asio::basic_waitable_timer<typename V::clock>;
};
template <typename V>
struct wheel_on {
  using variant = V;
  using timer = asio_wheel::basic_wheel_timer<typename V::clock>;
};

#define TIMERS_ON_CLOCKS                                                                           \
  asio_on<steady_v>, wheel_on<steady_v>, asio_on<system_v>, wheel_on<system_v>,                    \
      TIMERS_ON_FILE_CLOCK asio_on<forward_v>, wheel_on<forward_v>, asio_on<back_v>,               \
      wheel_on<back_v>, asio_on<negative_v>, wheel_on<negative_v>, asio_on<coarse_v>,              \
      wheel_on<coarse_v>, asio_on<fine_v>, wheel_on<fine_v>

// `d` in the clock's duration, rounded up (5 ms on the 10 ms clock is one period).
template <typename Clock>
typename Clock::duration dur(ns d) {
  return std::chrono::ceil<typename Clock::duration>(d);
}

// The clock reads a scenario may take on a manual clock. Asio's timer (the wheel's driver is
// one) reads the clock about twice per wake-up and wakes about once a millisecond (the
// clock's wait cap); each handler reads it a few times. That is 2 to 3 reads per ms of the
// scenario; a wait spinning on a clock stepped back read it over 100 times per ms.
constexpr std::uint64_t reads_per_ms = 10;
constexpr std::uint64_t reads_fixed = 200;

// Runs `ioc` under the watchdog and checks the scenario's end: everything completed, in
// time, and (on a manual clock) without spinning on the clock.
template <typename V>
void run_scenario(asio::io_context& ioc, const int& started, const int& completed) {
  const std::uint64_t reads_before = V::reads();
  const run_report r = guarded_run(ioc);
  CHECK_FALSE(r.timed_out);
  CHECK(r.elapsed < kPrompt);
  CHECK(completed == started);
  if (V::is_manual) {
    const std::uint64_t reads = V::reads() - reads_before;
    const auto ms = static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(r.elapsed).count());
    CAPTURE(ms);
    CHECK(reads <= reads_fixed + reads_per_ms * ms);
  }
}

// The latest of the touch times recorded for one activity timer or member.
template <typename Clock>
struct touches {
  typename Clock::time_point last = Clock::time_point::min();
  // A reading taken just before the touch (or construction, or watch()).
  void before_touch() {
    const auto t = Clock::now();
    if (t > last)
      last = t;
  }
};

} // namespace

TYPE_TO_STRING(steady_v);
TYPE_TO_STRING(system_v);
#if defined(ASIO_WHEEL_TEST_FILE_CLOCK)
TYPE_TO_STRING(file_v);
#endif
TYPE_TO_STRING(forward_v);
TYPE_TO_STRING(back_v);
TYPE_TO_STRING(negative_v);
TYPE_TO_STRING(coarse_v);
TYPE_TO_STRING(fine_v);
TYPE_TO_STRING(asio_on<steady_v>);
TYPE_TO_STRING(wheel_on<steady_v>);
TYPE_TO_STRING(asio_on<system_v>);
TYPE_TO_STRING(wheel_on<system_v>);
#if defined(ASIO_WHEEL_TEST_FILE_CLOCK)
TYPE_TO_STRING(asio_on<file_v>);
TYPE_TO_STRING(wheel_on<file_v>);
#endif
TYPE_TO_STRING(asio_on<forward_v>);
TYPE_TO_STRING(wheel_on<forward_v>);
TYPE_TO_STRING(asio_on<back_v>);
TYPE_TO_STRING(wheel_on<back_v>);
TYPE_TO_STRING(asio_on<negative_v>);
TYPE_TO_STRING(wheel_on<negative_v>);
TYPE_TO_STRING(asio_on<coarse_v>);
TYPE_TO_STRING(wheel_on<coarse_v>);
TYPE_TO_STRING(asio_on<fine_v>);
TYPE_TO_STRING(wheel_on<fine_v>);

// =======================================================================================
// Timers: Asio's and ours, on every clock
// =======================================================================================

TEST_CASE_TEMPLATE("clock matrix: a timer's wait never completes before its expiry", T,
                   TIMERS_ON_CLOCKS) {
  using V = typename T::variant;
  using Timer = typename T::timer;
  using clock = typename V::clock;
  using time_point = typename clock::time_point;
  V::reset();

  asio::io_context ioc;
  std::deque<Timer> timers; // addresses stay put as it grows
  int started = 0;
  int completed = 0;
  int aborted = 0;
  // The clock's reading just before the step back. A wait due by then may have been found
  // due before the step (a stalled process: the t0 + 25 ms wait, say, comes due in the same
  // pass as the one that steps the clock), and its handler, run after the step, reads a
  // clock behind its expiry: not early. Every other wait must read its expiry or later.
  std::optional<time_point> before_step;
  auto never_early = [&](time_point now, time_point expiry) {
    return now >= expiry || (before_step && expiry <= *before_step);
  };

  // A wait on a timer of its own; `then` runs in its handler after the checks.
  std::function<void(time_point, std::function<void()>)> wait_until =
      [&](time_point expiry, std::function<void()> then) {
        Timer& t = timers.emplace_back(ioc);
        t.expires_at(expiry);
        ++started;
        t.async_wait([&, expiry, then](asio::error_code ec) {
          const time_point now = clock::now();
          CHECK(ec == kOk);
          CHECK(never_early(now, expiry));
          ++completed;
          if (then)
            then();
        });
      };

  const time_point t0 = clock::now();
  wait_until(t0 - dur<clock>(1ms), {}); // already due
  wait_until(t0, {});
  wait_until(t0 + dur<clock>(25ms), {}); // pending across the step
  wait_until(t0 + dur<clock>(5ms), [&] {
    // The wheel has reached t0 + 5 ms; the clock now moves.
    before_step = clock::now();
    V::step();
    const time_point t1 = clock::now();
    wait_until(t1 - dur<clock>(1ms), {});
    wait_until(t1, {});
    for (int i = 1; i <= 12; ++i)
      wait_until(t1 + dur<clock>(i * 1ms), {});
    wait_until(t1 + dur<clock>(20ms), {});
    // Two waits on one timer, re-armed for later once (the wheel keeps its first filing).
    Timer& shared = timers.emplace_back(ioc);
    shared.expires_at(t1 + dur<clock>(3ms));
    shared.async_wait([&](asio::error_code ec) {
      CHECK(ec == asio::error::operation_aborted);
      ++aborted;
    });
    const time_point later = t1 + dur<clock>(15ms);
    CHECK(shared.expires_at(later) == 1);
    for (int i = 0; i < 2; ++i) {
      ++started;
      shared.async_wait([&, later](asio::error_code ec) {
        CHECK(ec == kOk);
        CHECK(clock::now() >= later);
        ++completed;
      });
    }
  });

  run_scenario<V>(ioc, started, completed);
  CHECK(aborted == 1);
}

// =======================================================================================
// idle_timer, heartbeat, heartbeat_group, cancel_at: ours only (Asio has none)
// =======================================================================================

TEST_CASE_TEMPLATE("clock matrix: an idle timer completes no earlier than timeout after the "
                   "last touch",
                   V, CLOCK_VARIANTS) {
  using clock = typename V::clock;
  using time_point = typename clock::time_point;
  using idle_type = asio_wheel::basic_idle_timer<clock>;
  V::reset();

  asio::io_context ioc;
  const auto timeout = dur<clock>(15ms);
  int started = 0;
  int completed = 0;
  std::deque<std::pair<idle_type, touches<clock>>> idles;

  auto make_idle = [&]() -> std::pair<idle_type, touches<clock>>& {
    touches<clock> seen;
    seen.before_touch();
    auto& p = idles.emplace_back(std::piecewise_construct, std::forward_as_tuple(ioc, timeout),
                                 std::forward_as_tuple(seen));
    ++started;
    p.first.async_wait([&completed, timeout, pp = &p](asio::error_code ec) {
      const time_point now = clock::now();
      CHECK(ec == kOk);
      CHECK(now >= pp->second.last + timeout);
      CHECK(now >= pp->first.last_activity() + timeout);
      ++completed;
    });
    return p;
  };

  auto& first = make_idle(); // pending across the step

  // A timer on the same clock lets the wheel advance before the step.
  asio_wheel::basic_wheel_timer<clock> advance(ioc, dur<clock>(5ms));
  std::optional<ticker> toucher;
  advance.async_wait([&](asio::error_code ec) {
    REQUIRE(ec == kOk);
    V::step();
    first.second.before_touch();
    first.first.touch();
    // Started after the step: on a clock stepped back, their deadlines are behind the
    // wheel's time.
    auto& second = make_idle();
    auto& third = make_idle();
    third.first.set_timeout(timeout + dur<clock>(5ms));
    // Touched a few times in real time (not on the clock under test).
    toucher.emplace(ioc, 3ms, 3, [&] {
      second.second.before_touch();
      second.first.touch();
    });
  });

  run_scenario<V>(ioc, started, completed);
}

TEST_CASE_TEMPLATE("clock matrix: a heartbeat pings and drops no earlier than its thresholds", V,
                   CLOCK_VARIANTS) {
  using clock = typename V::clock;
  using time_point = typename clock::time_point;
  using hb_type = asio_wheel::basic_heartbeat<clock>;
  V::reset();

  asio::io_context ioc;
  const typename hb_type::options opts{dur<clock>(8ms), dur<clock>(20ms)};
  int started = 0;
  int completed = 0;

  struct peer {
    peer(asio::io_context& ioc, const typename hb_type::options& o) : hb(ioc, o) {}
    hb_type hb;
    touches<clock> seen;
    int pings = 0;
  };
  std::deque<peer> peers;

  // Listens until the drop; every event is checked against the last touch.
  std::function<void(peer&)> listen = [&](peer& p) {
    p.hb.async_next([&, pp = &p](asio::error_code ec, typename hb_type::event ev) {
      const time_point now = clock::now();
      REQUIRE(ec == kOk);
      const time_point last = pp->hb.last_activity();
      if (ev == hb_type::event::ping) {
        CHECK(now >= pp->seen.last + opts.ping_after.max);
        CHECK(now >= last + opts.ping_after.max);
        CHECK(++pp->pings <= 2);
        listen(*pp);
      } else {
        CHECK(now >= pp->seen.last + opts.drop_after.max);
        CHECK(now >= last + opts.drop_after.max);
        ++completed;
      }
    });
  };
  auto make_peer = [&]() -> peer& {
    touches<clock> seen;
    seen.before_touch();
    peer& p = peers.emplace_back(ioc, opts);
    p.seen = seen;
    ++started;
    listen(p);
    return p;
  };

  peer& first = make_peer();
  asio_wheel::basic_wheel_timer<clock> advance(ioc, dur<clock>(4ms));
  std::optional<ticker> toucher;
  advance.async_wait([&](asio::error_code ec) {
    REQUIRE(ec == kOk);
    V::step();
    first.seen.before_touch();
    first.hb.touch();
    peer& second = make_peer();
    toucher.emplace(ioc, 3ms, 2, [&] {
      second.seen.before_touch();
      second.hb.touch();
    });
  });

  run_scenario<V>(ioc, started, completed);
}

TEST_CASE_TEMPLATE("clock matrix: a heartbeat group's events come no earlier than their "
                   "thresholds",
                   V, CLOCK_VARIANTS) {
  using clock = typename V::clock;
  using time_point = typename clock::time_point;
  using group_type = asio_wheel::basic_heartbeat_group<clock>;
  V::reset();

  struct conn : group_type::member {
    touches<clock> seen;
    int pings = 0;
  };

  asio::io_context ioc;
  const typename group_type::options opts{dur<clock>(8ms), dur<clock>(20ms)};
  int started = 0;
  int completed = 0;
  group_type group(ioc, opts, [&](typename group_type::member& m, typename group_type::event ev) {
    const time_point now = clock::now();
    auto& c = static_cast<conn&>(m);
    const time_point last = c.last_activity();
    if (ev == group_type::event::ping) {
      CHECK(now >= c.seen.last + opts.ping_after.max);
      CHECK(now >= last + opts.ping_after.max);
      CHECK(++c.pings <= 2);
    } else {
      CHECK(now >= c.seen.last + opts.drop_after.max);
      CHECK(now >= last + opts.drop_after.max);
      ++completed;
    }
  });
  std::deque<conn> conns;
  auto watch = [&]() -> conn& {
    conn& c = conns.emplace_back();
    c.seen.before_touch();
    group.watch(c);
    ++started;
    return c;
  };

  conn& first = watch();
  asio_wheel::basic_wheel_timer<clock> advance(ioc, dur<clock>(4ms));
  std::optional<ticker> toucher;
  advance.async_wait([&](asio::error_code ec) {
    REQUIRE(ec == kOk);
    V::step();
    first.seen.before_touch();
    first.touch();
    conn& second = watch();
    watch();
    toucher.emplace(ioc, 3ms, 2, [&] {
      second.seen.before_touch();
      second.touch();
    });
  });

  run_scenario<V>(ioc, started, completed);
}

// cancel_at's scenario. The check reads the clock when the cancellation is emitted, not in
// the operation's handler: a handler runs after others queued before it, and one of those
// may step the clock back. Here the step is made in the handler of the 5 ms operation; when
// the 25 ms deadline has been reached by then (the context `stall`ed before the first turn,
// as a loaded machine under Wine did), its operation, cancelled on time, runs its handler
// after the step, on a clock that reads before the deadline again.
template <typename V>
void cancel_at_scenario(std::chrono::milliseconds stall) {
  using clock = typename V::clock;
  using time_point = typename clock::time_point;
  V::reset();

  asio::io_context ioc;
  int started = 0;
  int completed = 0;
  // The operations, waiting until cancelled by a deadline on `clock`.
  std::deque<manual_op> ops;

  std::function<void(time_point, std::function<void()>)> op_until =
      [&](time_point deadline, std::function<void()> then) {
        manual_op& op = ops.emplace_back(ioc);
        ++started;
        op.on_cancel_emitted = [deadline] { CHECK(clock::now() >= deadline); };
        op.async_run(asio_wheel::cancel_at(deadline, [&, then](asio::error_code ec) {
          CHECK(ec == asio::error::operation_aborted);
          CHECK(op.cancellations == 1);
          ++completed;
          if (then)
            then();
        }));
      };

  if (stall > stall.zero())
    asio::post(ioc, [stall] { std::this_thread::sleep_for(stall); });
  const time_point t0 = clock::now();
  op_until(t0 + dur<clock>(25ms), {});
  op_until(t0 + dur<clock>(5ms), [&] {
    V::step();
    const time_point t1 = clock::now();
    op_until(t1, {});
    op_until(t1 + dur<clock>(2ms), {});
    op_until(t1 + dur<clock>(10ms), {});
  });

  run_scenario<V>(ioc, started, completed);
}

TEST_CASE_TEMPLATE("clock matrix: cancel_at cancels no earlier than its deadline", V,
                   CLOCK_VARIANTS) {
  cancel_at_scenario<V>(std::chrono::milliseconds(0));
}

// The stall puts both deadlines of the first phase in the first turn: under the handler's
// reading, the 25 ms operation's cancellation looked 20 to 30 ms early on the clocks stepped
// back (Wine showed it so; Linux does with this stall).
TEST_CASE_TEMPLATE("clock matrix: cancel_at, both deadlines of the first phase in one turn", V,
                   CLOCK_VARIANTS) {
  cancel_at_scenario<V>(std::chrono::milliseconds(37));
}
