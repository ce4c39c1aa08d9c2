//
// scaled_queue_test.cpp
// ~~~~~~~~~~~~~~~~~~~~~
//
// The context-wide parts of scaled timeouts (issue 17, review findings F2 and F3): once
// every wait has completed, nothing of them keeps the context's run() going.
//
// F2: a change of the factor that completes the last waiter of a queue (idle_timer,
// heartbeat) or drops the last member of a heartbeat_group used to leave the queue's (the
// group's) wheel wait pending until its old deadline, the range's maximum: run() did not
// return for that long (forever, for a huge maximum).
//
// F3: the queues kept the executor of the first timer that parked, for the context's life:
// a work-tracking one kept run() going after every timer was destroyed.
//
// On a frozen manual_clock: nothing expires unless the test moves the clock, so a context
// that is not stopped after a run of real time still has work (not a deadline in reach).
//
// Options are written {ping_after, drop_after}, without designators: this file builds as
// C++17 too (scripts/test's cxx17 stage).

#include <asio_wheel/heartbeat.hpp>
#include <asio_wheel/heartbeat_group.hpp>
#include <asio_wheel/idle_timer.hpp>
#include <asio_wheel/statistics.hpp>
#include <asio_wheel/timeout_scale.hpp>

#include <asio/any_io_executor.hpp>
#include <asio/execution.hpp>
#include <asio/io_context.hpp>
#include <asio/require.hpp>

#include <doctest/doctest.h>

#include "asio_test_support.hpp"
#include "frozen_run.hpp"
#include "manual_clock.hpp"

#include <chrono>
#include <memory>

namespace {

using namespace std::chrono_literals;
using namespace asio_wheel::test;

struct clock_tag;
using tclock = frozen_clock<clock_tag>;
const tclock::time_point t0(frozen_start);
constexpr auto kStill = frozen_still;

// Whether run() returns with nothing left to do: no wheel wait pending, and the context
// stops by itself (as run() does once its work count reaches zero) after the handlers ready
// now, or within `limit` (run_for() returns early then). poll() first: run_for() runs
// nothing if the process is scheduled only after its limit.
bool runs_out(asio::io_context& ioc, std::chrono::steady_clock::duration limit = 300ms) {
  const bool nothing_pending = asio_wheel::get_statistics(ioc, false).timers_pending == 0;
  ioc.restart();
  ioc.poll();
  if (!ioc.stopped())
    ioc.run_for(limit);
  return nothing_pending && ioc.stopped();
}

} // namespace

TEST_CASE("a lowered factor completes the last parked idle_timer: nothing stays pending") {
  using idle_t = asio_wheel::basic_idle_timer<tclock>;
  for (const auto max : {std::chrono::nanoseconds(10s), std::chrono::nanoseconds::max()}) {
    CAPTURE(max.count());
    tclock::reset(t0, /*running=*/false);
    asio::io_context ioc;
    auto& scale = asio_wheel::timeout_scale::of(ioc);
    idle_t idle(ioc, {10ms, max});
    int calls = 0;
    asio::error_code ec;
    idle.async_wait([&](asio::error_code e) {
      ++calls;
      ec = e;
    });
    tclock::set(t0 + 20ms);
    run_for(ioc, kStill); // past its minimum: parked in its span's queue
    CHECK(calls == 0);
    scale.set(0.0);
    CHECK(run_until(ioc, [&] { return calls == 1; }));
    CHECK(ec == kOk);
    CHECK(runs_out(ioc));
  }
}

TEST_CASE("a lowered factor completes the last parked heartbeat: nothing stays pending") {
  using hb_t = asio_wheel::basic_heartbeat<tclock>;
  tclock::reset(t0, /*running=*/false);
  asio::io_context ioc;
  auto& scale = asio_wheel::timeout_scale::of(ioc);
  hb_t hb(ioc, {{5ms, 10s}, {10ms, 20s}});
  int calls = 0;
  hb.async_next([&](asio::error_code, hb_t::event) { ++calls; });
  tclock::set(t0 + 30ms);
  run_for(ioc, kStill);
  CHECK(calls == 0);
  scale.set(0.0);
  CHECK(run_until(ioc, [&] { return calls == 1; }));
  CHECK(runs_out(ioc));
}

TEST_CASE("heartbeat_group: a lowered factor drops the last member: the group's wait does not "
          "stay pending") {
  using group_t = asio_wheel::basic_heartbeat_group<tclock>;
  tclock::reset(t0, /*running=*/false);
  asio::io_context ioc;
  auto& scale = asio_wheel::timeout_scale::of(ioc);
  int drops = 0;
  group_t group(ioc, {{}, {10ms, 20s}}, [&](group_t::member&, group_t::event ev) {
    if (ev == group_t::event::drop)
      ++drops;
  });
  group_t::member m;
  group.watch(m);
  tclock::set(t0 + 30ms);
  run_for(ioc, kStill); // past the minimum: in the drop queue
  CHECK(drops == 0);
  scale.set(0.0);
  CHECK(run_until(ioc, [&] { return drops == 1; }));
  CHECK(group.size() == 0);
  CHECK(runs_out(ioc));
}

// Issue 34 (review): a queue's wait re-armed while its completion is already in flight (here
// in the same batch; as well on another thread) completes as a stale success, whose handler
// forgot the wait armed since. When that run then emptied the queue, disarm() thought nothing
// armed and left the newer wait pending until its deadline (here 5 s later).
TEST_CASE("a queue's wait re-armed while its completion is in flight: an emptied queue leaves "
          "no wait pending") {
  using idle_t = asio_wheel::basic_idle_timer<tclock>;
  tclock::reset(t0, /*running=*/false);
  asio::io_context ioc;
  auto& scale = asio_wheel::timeout_scale::of(ioc);
  scale.set(0.5);
  idle_t a(ioc, {10ms, 10010ms});
  idle_t b(ioc, {10ms, 10010ms});
  int calls = 0;
  // Due with the queue's wait (a's timeout at factor 0.5: t0 + 10 ms + 5 s), and filed
  // before it: completes first in their batch.
  asio_wheel::basic_wheel_timer<tclock> first(ioc);
  first.expires_at(t0 + 5010ms);
  first.async_wait([&](asio::error_code) {
    scale.set(1.0);
    // Past its minimum: parks at once, and the queue's wait, in this batch, is re-armed for
    // the head at factor 1 (t0 + 10.01 s).
    b.async_wait([&](asio::error_code) { ++calls; });
    scale.set(0.5); // the queue's wait then finds a and b due at factor 0.5
  });
  a.async_wait([&](asio::error_code) { ++calls; });
  tclock::set(t0 + 20ms);
  run_for(ioc, kStill); // a parks: the queue's wait is armed for t0 + 5.01 s
  CHECK(calls == 0);
  tclock::set(t0 + 5010ms);
  CHECK(run_until(ioc, [&] { return calls == 2; }));
  CHECK(runs_out(ioc));
}

TEST_CASE("an idle_timer with a range on a work-tracking executor: once it is destroyed, run() "
          "returns") {
  using idle_t = asio_wheel::basic_idle_timer<tclock>;
  tclock::reset(t0, /*running=*/false);
  asio::io_context ioc;
  auto idle =
      std::make_unique<idle_t>(asio::any_io_executor(asio::require(
                                   ioc.get_executor(), asio::execution::outstanding_work.tracked)),
                               idle_t::range{10ms, 30ms});
  int calls = 0;
  idle->async_wait([&](asio::error_code) {
    ++calls;
    idle.reset(); // the timer, and its executor, gone
  });
  tclock::set(t0 + 20ms);
  run_for(ioc, kStill); // parked: the queue is created, from this timer's executor
  CHECK(calls == 0);
  tclock::set(t0 + 30ms);
  CHECK(run_until(ioc, [&] { return calls == 1; }));
  CHECK(idle == nullptr);
  CHECK(runs_out(ioc));
}
