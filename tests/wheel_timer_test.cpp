//
// wheel_timer_test.cpp
// ~~~~~~~~~~~~~~~~~~~~
//
// What only wheel_timer has: the tick (set_tick / tick and their validation), precision of
// a tick-based wheel (never early, late by at most about one tick), the driver being armed
// only while waits are pending, one wheel per context and clock, and per-operation
// cancellation that survives moving the timer (Asio 1.22's own timer loses it).
//
// The machine is noisy: only "never early" is exact; lateness bounds are generous and the
// measured distribution is printed with MESSAGE. Every io_context run goes through
// guarded_run(), whose watchdog turns a hang into a failure.
//

#include <asio_wheel/wheel_timer.hpp>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/cancellation_type.hpp>
#include <asio/error.hpp>
#include <asio/execution_context.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <asio/thread_pool.hpp>

#include <doctest/doctest.h>

#include "asio_test_support.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

namespace {

using namespace std::chrono_literals;
using namespace asio_wheel::test;
using asio_wheel::wheel_timer;

// "Promptly": generous for a noisy 2-core machine, still far below kFar.
constexpr auto kPrompt = 5s;
// Scheduling noise allowed on top of one tick: the machine is a noisy 2-core box, maybe
// under a sanitizer.
constexpr auto kNoise = 200ms;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

std::string lower(std::string s) {
  for (auto& c : s)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

double to_ms(sclock::duration d) {
  return std::chrono::duration_cast<std::chrono::duration<double, std::milli>>(d).count();
}

// Lateness statistics of one precision run.
struct lateness_stats {
  std::size_t count = 0;
  std::size_t early = 0;
  std::size_t not_ok = 0;
  sclock::duration worst_early{};
  sclock::duration p50{}, p99{}, max{};
};

// Starts `n` waits of Timer on `ioc`, with expiries uniform in [0, span) from now (fixed
// seed), runs the context, and measures completion time minus expiry.
template <class Timer>
lateness_stats measure(asio::io_context& ioc, std::size_t n, sclock::duration span,
                       unsigned seed = 20240601) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<long long> dist(
      0, std::chrono::duration_cast<std::chrono::microseconds>(span).count() - 1);
  std::vector<std::unique_ptr<Timer>> timers;
  std::vector<outcome> out(n);
  std::vector<typename Timer::time_point> expiries(n);
  timers.reserve(n);
  const auto base = sclock::now();
  for (std::size_t i = 0; i < n; ++i) {
    expiries[i] = base + std::chrono::microseconds(dist(rng));
    timers.push_back(std::make_unique<Timer>(ioc, expiries[i]));
    timers[i]->async_wait(record(out[i]));
  }
  const auto r = guarded_run(ioc);
  CHECK_FALSE(r.timed_out);

  lateness_stats s;
  std::vector<sclock::duration> late;
  late.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (out[i].calls != 1 || out[i].ec) {
      ++s.not_ok;
      continue;
    }
    const auto d = out[i].at - expiries[i];
    if (d < sclock::duration::zero()) {
      ++s.early;
      s.worst_early = std::min(s.worst_early, d);
    }
    late.push_back(d);
  }
  s.count = late.size();
  if (!late.empty()) {
    std::sort(late.begin(), late.end());
    s.p50 = late[late.size() / 2];
    s.p99 = late[std::min(late.size() - 1, late.size() * 99 / 100)];
    s.max = late.back();
  }
  return s;
}

std::string describe(const char* what, const lateness_stats& s) {
  std::ostringstream os;
  os << what << ": " << s.count << " waits, lateness p50 " << to_ms(s.p50) << " ms, p99 "
     << to_ms(s.p99) << " ms, max " << to_ms(s.max) << " ms; early " << s.early << ", failed "
     << s.not_ok;
  return os.str();
}

// A clock with a coarser duration than steady_clock: the wheel must work with it too.
struct ms_clock {
  using duration = std::chrono::milliseconds;
  using rep = duration::rep;
  using period = duration::period;
  using time_point = std::chrono::time_point<ms_clock>;
  [[maybe_unused]] static constexpr bool is_steady = true;
  static time_point now() noexcept {
    return time_point(std::chrono::duration_cast<duration>(sclock::now().time_since_epoch()));
  }
};

} // namespace

// =======================================================================================
// set_tick / tick
// =======================================================================================

TEST_CASE("the default tick is 1 ms") {
  asio::io_context ioc;
  CHECK(wheel_timer::tick(ioc) == std::chrono::milliseconds(1));
  asio::execution_context plain;
  CHECK(wheel_timer::tick(plain) == std::chrono::milliseconds(1));
  asio::thread_pool pool(1);
  CHECK(wheel_timer::tick(pool) == std::chrono::milliseconds(1));
  pool.join();
}

TEST_CASE("set_tick rejects a zero, negative or coarser-than-60-s tick with invalid_argument") {
  asio::io_context ioc;
  wheel_timer::set_tick(ioc, 5ms);
  const wheel_timer::duration bad[] = {
      wheel_timer::duration::zero(), wheel_timer::duration(-1),    -1ms, -1h, 60s + 1ns, 61s, 1h,
      wheel_timer::duration::max(),  wheel_timer::duration::min(),
  };
  for (const auto& tick : bad) {
    CAPTURE(tick.count());
    std::string message;
    bool right_type = false;
    try {
      wheel_timer::set_tick(ioc, tick);
    } catch (const std::invalid_argument& e) {
      right_type = true;
      message = e.what();
    } catch (const std::exception& e) {
      message = std::string("wrong exception type: ") + e.what();
    }
    CHECK_MESSAGE(right_type, message);
    // The message says what is allowed: a positive tick of at most 60 s.
    const std::string m = lower(message);
    CAPTURE(message);
    CHECK(contains(m, "tick"));
    CHECK(contains(m, "positive"));
    CHECK((contains(m, "60 s") || contains(m, "60s") || contains(m, "1 minute") ||
           contains(m, "60 seconds")));
    // A rejected value changes nothing.
    CHECK(wheel_timer::tick(ioc) == std::chrono::milliseconds(5));
  }
}

TEST_CASE("set_tick accepts any positive tick up to 60 s, and tick() reports it") {
  asio::io_context ioc;
  const wheel_timer::duration good[] = {1ns, 1us, 250us, 1ms, 10ms, 1s, 59s, 60s, 1ms};
  for (const auto& tick : good) {
    CAPTURE(tick.count());
    CHECK_NOTHROW(wheel_timer::set_tick(ioc, tick));
    CHECK(wheel_timer::tick(ioc) == tick);
  }
}

TEST_CASE("each context has its own tick") {
  asio::io_context a, b;
  asio::execution_context c;
  wheel_timer::set_tick(a, 7ms);
  wheel_timer::set_tick(c, 2s);
  CHECK(wheel_timer::tick(a) == 7ms);
  CHECK(wheel_timer::tick(b) == 1ms);
  CHECK(wheel_timer::tick(c) == 2s);
}

TEST_CASE("each clock has its own wheel and tick") {
  using system_wheel_timer = asio_wheel::basic_wheel_timer<std::chrono::system_clock>;
  asio::io_context ioc;
  wheel_timer::set_tick(ioc, 3ms);
  CHECK(system_wheel_timer::tick(ioc) == std::chrono::milliseconds(1));
  system_wheel_timer::set_tick(ioc, 4ms);
  CHECK(wheel_timer::tick(ioc) == 3ms);
  CHECK(system_wheel_timer::tick(ioc) == 4ms);
}

TEST_CASE("set_tick while waits are pending throws logic_error; the same value is accepted") {
  asio::io_context ioc;
  wheel_timer::set_tick(ioc, 5ms);
  wheel_timer t(ioc, kFar);
  outcome o;
  t.async_wait(record(o));
  CHECK_NOTHROW(wheel_timer::set_tick(ioc, 5ms));
  std::string message;
  bool right_type = false;
  try {
    wheel_timer::set_tick(ioc, 2ms);
  } catch (const std::invalid_argument& e) {
    message = std::string("invalid_argument instead of logic_error: ") + e.what();
  } catch (const std::logic_error& e) {
    right_type = true;
    message = e.what();
  }
  CHECK_MESSAGE(right_type, message);
  CHECK(contains(lower(message), "tick"));
  CHECK(wheel_timer::tick(ioc) == 5ms);
  // Invalid values are still invalid_argument, pending waits or not.
  CHECK_THROWS_AS(wheel_timer::set_tick(ioc, 0ms), std::invalid_argument);
  CHECK(t.cancel() == 1);
  const auto r = guarded_run(ioc);
  CHECK_PROMPT(r);
  CHECK_ABORTED(o);
}

TEST_CASE("set_tick before any wait may be called any number of times") {
  asio::io_context ioc;
  wheel_timer t(ioc); // a timer exists, but has never waited
  CHECK_NOTHROW(wheel_timer::set_tick(ioc, 10ms));
  CHECK_NOTHROW(wheel_timer::set_tick(ioc, 2ms));
  CHECK_NOTHROW(wheel_timer::set_tick(ioc, 3ms));
  t.expires_after(5ms);
  outcome o;
  t.async_wait(record(o));
  guarded_run(ioc);
  CHECK(o.calls == 1);
  CHECK(o.ec == kOk);
  CHECK(o.at >= t.expiry());
}

TEST_CASE("set_tick with a different value after the wheel has been used throws logic_error") {
  // The brief's rule: once a wait has used the context's wheel, the tick is fixed (setting
  // the same value again is fine).
  asio::io_context ioc;
  wheel_timer::set_tick(ioc, 4ms);
  {
    wheel_timer t(ioc, 2ms);
    outcome o;
    t.async_wait(record(o));
    guarded_run(ioc);
    CHECK(o.calls == 1);
  }
  CHECK_NOTHROW(wheel_timer::set_tick(ioc, 4ms));
  CHECK_THROWS_AS(wheel_timer::set_tick(ioc, 8ms), std::logic_error);
  CHECK(wheel_timer::tick(ioc) == 4ms);
}

// =======================================================================================
// Precision
// =======================================================================================

namespace {

// Measures `n` waits of a wheel_timer with expiries over `span` on a fresh context whose tick
// is `tick` (zero: the default) and checks each run: every wait completes with success,
// none early, and the latest is less than `bound` late. A loaded machine that stalls the
// process makes every wait due meanwhile late by the stall: a run late beyond `bound` is
// measured again (until_premise), as a wheel late by design is late in every run.
void check_precision(const char* what, sclock::duration tick, std::size_t n, sclock::duration span,
                     unsigned seed, sclock::duration bound) {
  until_premise([&](bool last) {
    asio::io_context ioc;
    if (tick != sclock::duration::zero())
      wheel_timer::set_tick(ioc, tick);
    const auto s = measure<wheel_timer>(ioc, n, span, seed);
    MESSAGE(describe(what, s));
    CHECK(s.not_ok == 0);
    CHECK_MESSAGE(s.early == 0, "earliest completion " << to_ms(s.worst_early) << " ms");
    if (s.max >= bound && !last)
      return false;
    CHECK(s.max < bound);
    return true;
  });
}

} // namespace

TEST_CASE("precision: 2000 waits over 300 ms are never early, and late by about a tick") {
  asio::io_context fresh;
  const auto tick = wheel_timer::tick(fresh); // the default
  check_precision("wheel_timer, tick 1 ms", sclock::duration::zero(), 2000, 300ms, 20240601,
                  tick + kNoise);

  asio::io_context ref;
  const auto rs = measure<asio::steady_timer>(ref, 2000, 300ms);
  MESSAGE(describe("asio::steady_timer, for comparison", rs));
}

TEST_CASE("precision: coarse tick (20 ms): never early, late by at most a tick plus noise") {
  check_precision("wheel_timer, tick 20 ms", 20ms, 400, 300ms, 7, 20ms + kNoise);
}

TEST_CASE("precision: fine tick (10 us), waits crossing several wheel levels") {
  // 64 ticks per level: 640 us, 41 ms, 2.6 s. Waits up to 300 ms cascade from level 2.
  check_precision("wheel_timer, tick 10 us", 10us, 600, 300ms, 99, kNoise);
}

TEST_CASE("precision: 1 ns tick") {
  check_precision("wheel_timer, tick 1 ns", 1ns, 300, 50ms, 3, kNoise);
}

TEST_CASE("an expiry that has passed completes within about a tick, even with a coarse tick") {
  // A stalled process makes a completion late by the stall: a late run is tried again.
  until_premise([&](bool last) {
    asio::io_context ioc;
    wheel_timer::set_tick(ioc, 100ms);
    wheel_timer first(ioc, 1ms); // puts the wheel to work
    outcome o1;
    first.async_wait(record(o1));
    guarded_run(ioc);
    CHECK(o1.calls == 1);
    CHECK(o1.at >= first.expiry());

    wheel_timer past(ioc, sclock::now() - 1s);
    outcome o2;
    const auto t0 = sclock::now();
    past.async_wait(record(o2));
    ioc.restart();
    guarded_run(ioc);
    CHECK(o2.calls == 1);
    CHECK(o2.ec == kOk);
    const bool in_time = o1.at - first.expiry() < 100ms + kNoise && o2.at - t0 < 100ms + kNoise;
    if (!in_time && !last)
      return false;
    CHECK(o1.at - first.expiry() < 100ms + kNoise);
    CHECK(o2.at - t0 < 100ms + kNoise);
    return true;
  });
}

TEST_CASE("more expiries in one tick than one driver turn handles: all complete") {
  asio::io_context ioc;
  const std::size_t n = 10000; // more than the service's per-turn budget
  const auto when = sclock::now() + 10ms;
  std::vector<std::unique_ptr<wheel_timer>> timers;
  timers.reserve(n);
  std::size_t ok = 0, early = 0;
  bool other_ran = false;
  for (std::size_t i = 0; i < n; ++i) {
    timers.push_back(std::make_unique<wheel_timer>(ioc, when));
    timers.back()->async_wait([&](asio::error_code ec) {
      if (!ec)
        ++ok;
      if (sclock::now() < when)
        ++early;
    });
  }
  wheel_timer other(ioc, when); // same tick, started last
  other.async_wait([&](asio::error_code) { other_ran = true; });
  const auto r = guarded_run(ioc);
  CHECK_FALSE(r.timed_out);
  CHECK(ok == n);
  CHECK(early == 0);
  CHECK(other_ran);
}

TEST_CASE("a clock with millisecond durations works") {
  using ms_timer = asio_wheel::basic_wheel_timer<ms_clock>;
  asio::io_context ioc;
  CHECK(ms_timer::tick(ioc) == std::chrono::milliseconds(1));
  ms_timer t(ioc, std::chrono::milliseconds(5));
  ms_timer distant(ioc, std::chrono::milliseconds(10000));
  bool ok = false, aborted = false;
  t.async_wait([&](asio::error_code ec) {
    ok = !ec && ms_clock::now() >= t.expiry();
    distant.cancel();
  });
  distant.async_wait([&](asio::error_code ec) { aborted = ec == asio::error::operation_aborted; });
  const auto r = guarded_run(ioc);
  CHECK_PROMPT(r);
  CHECK(ok);
  CHECK(aborted);
}

TEST_CASE("extreme expiries with a 1 ns tick: time_point::max() waits, the near one completes") {
  asio::io_context ioc;
  wheel_timer::set_tick(ioc, 1ns);
  wheel_timer max(ioc, wheel_timer::time_point::max());
  wheel_timer huge(ioc, 24h * 365 * 200);
  wheel_timer nearby(ioc, 3ms);
  outcome om, oh, on;
  max.async_wait(record(om));
  huge.async_wait(record(oh));
  nearby.async_wait([&](asio::error_code ec) {
    record(on)(ec);
    max.cancel();
    huge.cancel();
  });
  const auto r = guarded_run(ioc);
  CHECK_PROMPT(r);
  CHECK(on.calls == 1);
  CHECK(on.ec == kOk);
  CHECK(on.at >= nearby.expiry());
  CHECK(om.ec == kAborted);
  CHECK(oh.ec == kAborted);
}

// =======================================================================================
// The driver: armed only while waits are pending
// =======================================================================================

TEST_CASE("run() returns immediately when the wheel is empty") {
  asio::io_context ioc;
  {
    const auto r = guarded_run(ioc); // nothing at all
    CHECK_PROMPT(r);
  }
  wheel_timer t(ioc, kFar); // a timer with an expiry but no wait
  ioc.restart();
  {
    const auto r = guarded_run(ioc);
    CHECK_PROMPT(r);
  }
  // After the only wait completed: the driver must not stay armed.
  wheel_timer::set_tick(ioc, 1ms);
  t.expires_after(3ms);
  outcome o;
  t.async_wait(record(o));
  ioc.restart();
  {
    const auto r = guarded_run(ioc);
    CHECK_PROMPT(r);
    CHECK(o.calls == 1);
  }
  ioc.restart();
  {
    const auto r = guarded_run(ioc);
    CHECK_PROMPT(r);
  }
}

TEST_CASE("after cancelling the last wait run() returns promptly, even with a 60 s tick") {
  // With a 60 s tick the driver sleeps up to a minute: run() returning promptly proves it
  // was disarmed rather than left to run out.
  asio::io_context ioc;
  wheel_timer::set_tick(ioc, 60s);
  auto t = std::make_unique<wheel_timer>(ioc, kFar);
  asio::cancellation_signal sig;
  outcome o;

  SUBCASE("cancel()") {
    t->async_wait(record(o));
    asio::post(ioc, [&] { t->cancel(); });
  }
  SUBCASE("cancel_one()") {
    t->async_wait(record(o));
    asio::post(ioc, [&] { t->cancel_one(); });
  }
  SUBCASE("expires_after()") {
    t->async_wait(record(o));
    asio::post(ioc, [&] { t->expires_after(kFar); });
  }
  SUBCASE("destruction") {
    t->async_wait(record(o));
    asio::post(ioc, [&] { t.reset(); });
  }
  SUBCASE("per-operation cancellation") {
    t->async_wait(asio::bind_cancellation_slot(sig.slot(), record(o)));
    asio::post(ioc, [&] { sig.emit(asio::cancellation_type::terminal); });
  }
  SUBCASE("cancelled before run()") {
    t->async_wait(record(o));
    t->cancel();
  }
  SUBCASE("cancelled from another thread while run() sleeps") {
    t->async_wait(record(o));
    std::thread canceller([&] {
      std::this_thread::sleep_for(20ms);
      // t is touched by this thread only while it does this; its handler does not touch it.
      t->cancel();
    });
    const auto r = guarded_run(ioc);
    canceller.join();
    CHECK_PROMPT(r);
  }
  const auto r = guarded_run(ioc);
  CHECK_PROMPT(r);
  CHECK_ABORTED(o);
}

TEST_CASE("an earlier wait re-arms the driver; a cancelled earlier wait does not hold run()") {
  asio::io_context ioc;
  wheel_timer distant(ioc, kFar);
  wheel_timer mid(ioc, 30ms);
  wheel_timer nearby(ioc, 5ms);
  outcome of, om, on;
  distant.async_wait(record(of)); // arms the driver 10 s away
  mid.async_wait(record(om));     // must re-arm it earlier
  nearby.async_wait([&](asio::error_code ec) {
    record(on)(ec);
    mid.cancel(); // 25 ms before its expiry, unless the machine stalled
  });
  wheel_timer stopper(ioc, 60ms);
  stopper.async_wait([&](asio::error_code) { distant.cancel(); });
  const auto r = guarded_run(ioc);
  CHECK_PROMPT(r);
  CHECK(on.ec == kOk);
  CHECK(on.at >= nearby.expiry());
  CHECK(om.calls == 1);
  CHECK(of.ec == kAborted);
}

// =======================================================================================
// Lazy re-arm: a cancelled entry may stay in the wheel at its old tick
// =======================================================================================

TEST_CASE("re-armed for later again and again: completes at the last expiry, never before") {
  until_premise([&](bool last) {
    asio::io_context ioc;
    wheel_timer t(ioc, 40ms);
    outcome first;
    t.async_wait(record(first));
    int rearms = 0;
    std::vector<outcome> rounds(5);
    // Whether every re-arm came before the expiry it replaced (a stalled process may come
    // after it: then that wait has completed, rightly, and the scenario is tried again).
    bool rearmed_in_time = true;
    // Every 10 ms, push the expiry to 45 ms out: the entry stays at its first tick (40 ms,
    // reached while the pushes go on) and is filed again each time that tick comes, never
    // completing early. Each push has 30 ms to spare (Wine at load was late by more than 15).
    wheel_timer pacer(ioc);
    std::function<void(asio::error_code)> step = [&](asio::error_code) {
      if (rearms == 5)
        return;
      rearmed_in_time = rearmed_in_time && sclock::now() < t.expiry();
      t.expires_after(45ms);
      t.async_wait(record(rounds[rearms++]));
      pacer.expires_after(10ms);
      pacer.async_wait(step);
    };
    pacer.expires_after(10ms);
    pacer.async_wait(step);
    const auto r = guarded_run(ioc);
    CHECK_PROMPT(r);
    CHECK_SUCCESS_AT(rounds.back(), t.expiry());
    if (!rearmed_in_time && !last)
      return false;
    CHECK(rearmed_in_time);
    CHECK(first.ec == kAborted);
    for (std::size_t i = 0; i + 1 < rounds.size(); ++i)
      CHECK_ABORTED(rounds[i]);
    return true;
  });
}

TEST_CASE("re-armed for earlier than where it was filed: completes at the earlier expiry") {
  // Left at its old tick it would complete 2 s in; a stalled process makes it late too, so
  // a late run is tried again.
  until_premise([&](bool last) {
    asio::io_context ioc;
    wheel_timer t(ioc, 2s);
    outcome o1, o2;
    t.async_wait(record(o1));
    t.expires_after(10ms); // the entry must move: its old tick is later
    t.async_wait(record(o2));
    const auto r = guarded_run(ioc);
    CHECK_PROMPT(r);
    CHECK(o1.ec == kAborted);
    CHECK_SUCCESS_AT(o2, t.expiry());
    if (o2.at >= t.expiry() + 1s && !last)
      return false;
    CHECK(o2.at < t.expiry() + 1s);
    return true;
  });
}

TEST_CASE("an entry left in the wheel by a cancellation: destroyed, moved or assigned over") {
  asio::io_context ioc;
  outcome o, other;
  auto t = std::make_unique<wheel_timer>(ioc, 10ms);
  t->async_wait(record(o));
  CHECK(t->cancel() == 1);
  wheel_timer later(ioc, 40ms); // keeps the driver running past the old tick
  later.async_wait(record(other));
  SUBCASE("destroyed") {
    t.reset();
  }
  SUBCASE("moved, then the new timer re-armed") {
    wheel_timer moved(std::move(*t));
    t.reset();
    moved.expires_after(20ms);
    outcome o2;
    moved.async_wait(record(o2));
    guarded_run(ioc);
    CHECK_SUCCESS_AT(o2, moved.expiry());
  }
  SUBCASE("assigned over by a timer with a wait") {
    wheel_timer src(ioc, 20ms);
    outcome o2;
    src.async_wait(record(o2));
    *t = std::move(src);
    guarded_run(ioc);
    CHECK_SUCCESS_AT(o2, t->expiry());
  }
  SUBCASE("left as it is") {}
  const auto r = guarded_run(ioc);
  CHECK_PROMPT(r);
  CHECK(o.ec == kAborted);
  CHECK(o.calls == 1);
  CHECK_SUCCESS_AT(other, later.expiry());
}

TEST_CASE("entries left in the wheel do not keep run() going") {
  asio::io_context ioc;
  std::vector<wheel_timer> timers;
  std::vector<outcome> out(100);
  timers.reserve(100);
  for (std::size_t i = 0; i < 100; ++i) {
    timers.emplace_back(ioc, kFar + std::chrono::milliseconds(i));
    timers.back().async_wait(record(out[i]));
  }
  for (auto& t : timers)
    CHECK(t.cancel() == 1);
  const auto r = guarded_run(ioc);
  CHECK_PROMPT(r);
  for (const auto& o : out)
    CHECK(o.ec == kAborted);
  // Re-armed much earlier than where they were left: each entry moves.
  for (auto& t : timers) {
    t.expires_after(5ms);
    t.async_wait([](asio::error_code) {});
  }
  ioc.restart();
  const auto r2 = guarded_run(ioc);
  CHECK_PROMPT(r2);
}

// =======================================================================================
// Per-operation cancellation after a move (Asio 1.22's timer loses it)
// =======================================================================================

namespace {

// The scenarios of the next test for one cancellation type (called inside a SUBCASE per
// type, so that doctest runs every scenario for every type).
void moved_cancellation_scenarios(asio::cancellation_type_t type) {
  CAPTURE(static_cast<unsigned>(type));
  using io_timer = wheel_timer::rebind_executor<asio::io_context::executor_type>::other;
  asio::io_context ioc;
  asio::cancellation_signal sig;
  outcome o, other;
  std::unique_ptr<wheel_timer> keep;
  std::unique_ptr<io_timer> keep_io;
  std::vector<wheel_timer> vec;

  SUBCASE("move construction") {
    wheel_timer a(ioc, kFar);
    a.async_wait(asio::bind_cancellation_slot(sig.slot(), record(o)));
    keep = std::make_unique<wheel_timer>(std::move(a));
  }
  SUBCASE("move assignment") {
    wheel_timer a(ioc, kFar);
    a.async_wait(asio::bind_cancellation_slot(sig.slot(), record(o)));
    keep = std::make_unique<wheel_timer>(ioc);
    *keep = std::move(a);
  }
  SUBCASE("moved twice") {
    wheel_timer a(ioc, kFar);
    a.async_wait(asio::bind_cancellation_slot(sig.slot(), record(o)));
    wheel_timer b(std::move(a));
    keep = std::make_unique<wheel_timer>(ioc, 5ms);
    *keep = std::move(b);
  }
  SUBCASE("converting move construction") {
    io_timer a(ioc.get_executor(), kFar);
    a.async_wait(asio::bind_cancellation_slot(sig.slot(), record(o)));
    keep = std::make_unique<wheel_timer>(std::move(a));
  }
  SUBCASE("converting move assignment") {
    io_timer a(ioc.get_executor(), kFar);
    a.async_wait(asio::bind_cancellation_slot(sig.slot(), record(o)));
    keep = std::make_unique<wheel_timer>(ioc);
    *keep = std::move(a);
  }
  SUBCASE("moved inside a vector that reallocates") {
    vec.emplace_back(ioc, kFar);
    vec.back().async_wait(asio::bind_cancellation_slot(sig.slot(), record(o)));
    for (int i = 0; i < 50; ++i)
      vec.emplace_back(ioc);
  }
  // When the wait with the slot is due (kFar but in the next subcase).
  sclock::time_point due = sclock::time_point::max();
  SUBCASE("moved, with a second wait without slot that must still succeed") {
    wheel_timer a(ioc, 30ms);
    due = a.expiry();
    a.async_wait(asio::bind_cancellation_slot(sig.slot(), record(o)));
    a.async_wait(record(other));
    keep = std::make_unique<wheel_timer>(std::move(a));
  }
  // A process stalled past `due` before the emit may have completed the wait, rightly.
  bool emitted_before_due = false;
  asio::post(ioc, [&] {
    emitted_before_due = sclock::now() < due;
    sig.emit(type);
  });
  const auto r = guarded_run(ioc);
  CHECK_PROMPT(r);
  if (emitted_before_due)
    CHECK_ABORTED(o);
  else
    CHECK(o.calls == 1);
  if (other.calls) {
    CHECK(other.calls == 1);
    CHECK(other.ec == kOk);
    CHECK(other.at >= keep->expiry());
  }
}

} // namespace

TEST_CASE("per-operation cancellation still works after the timer is moved") {
  SUBCASE("terminal") {
    moved_cancellation_scenarios(asio::cancellation_type::terminal);
  }
  SUBCASE("partial") {
    moved_cancellation_scenarios(asio::cancellation_type::partial);
  }
  SUBCASE("total") {
    moved_cancellation_scenarios(asio::cancellation_type::total);
  }
}

TEST_CASE("per-operation cancellation after a move, emitted after the wait completed, is a "
          "no-op") {
  asio::io_context ioc;
  asio::cancellation_signal sig;
  outcome o1, o2;
  wheel_timer a(ioc, 3ms);
  a.async_wait(asio::bind_cancellation_slot(sig.slot(), record(o1)));
  wheel_timer b(std::move(a));
  guarded_run(ioc);
  CHECK(o1.ec == kOk);
  b.expires_after(5ms);
  b.async_wait(record(o2));
  asio::post(ioc, [&] { sig.emit(asio::cancellation_type::all); });
  ioc.restart();
  guarded_run(ioc);
  CHECK(o2.calls == 1);
  CHECK(o2.ec == kOk);
  CHECK(o2.at >= b.expiry());
}
