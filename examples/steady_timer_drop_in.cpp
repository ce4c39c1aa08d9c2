//
// examples/steady_timer_drop_in.cpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// An ordinary asio::steady_timer program, ported to asio_wheel by changing one line: the
// `timer` alias below. Everything else is written against the steady_timer API and
// compiles and behaves the same with either type (swap the alias back to check).
//
// What it does, on one io_context:
//   * a periodic ticker, re-armed drift-free with expires_at(expiry() + period);
//   * a deadline that stops the ticker by cancelling it (its pending wait completes with
//     operation_aborted);
//   * a wait that is cancelled before it expires (cancel(), then expires_after() on a
//     pending wait, which also aborts it), then re-armed and allowed to fire;
//   * a wait cancelled through its own cancellation slot (per-operation cancellation);
//   * a blocking wait().
//
//   steady_timer_drop_in           ticks every 200 ms for 2 s
//   steady_timer_drop_in --smoke   ticks every 10 ms for about 105 ms; exits 1 unless every
//                                  outcome is the expected one (used as a test)

#include <asio_wheel/wheel_timer.hpp>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/error.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>

#include <chrono>
#include <cstdio>
#include <string_view>

using timer = asio_wheel::wheel_timer; // was: asio::steady_timer

namespace {

using clock_type = timer::clock_type;

long long ms_since(clock_type::time_point start) {
  return static_cast<long long>(
      std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - start).count());
}

// A ticker in the classic style: each tick schedules the next one relative to the previous
// expiry, so that handler latency does not accumulate.
class ticker {
public:
  ticker(asio::io_context& ctx, clock_type::duration period, clock_type::time_point start)
      : timer_(ctx), period_(period), start_(start) {
    // From `start`, as the deadline below: however long the process is held up before this
    // line, the first tick is due before the deadline.
    timer_.expires_at(start_ + period_);
    arm();
  }

  // A handler already queued can no longer be aborted by cancel() (it completes with
  // success), hence the flag as well.
  void stop() {
    stopping_ = true;
    timer_.cancel();
  }

  int ticks() const { return ticks_; }
  bool early() const { return early_; }
  bool stopped_by_cancel() const { return stopped_by_cancel_; }

private:
  void arm() {
    timer_.async_wait([this](const asio::error_code& ec) {
      if (ec == asio::error::operation_aborted || stopping_) {
        stopped_by_cancel_ = true;
        std::printf("[%5lld ms] ticker: stopped (%s)\n", ms_since(start_), ec.message().c_str());
        return;
      }
      if (clock_type::now() < timer_.expiry())
        early_ = true; // a timer never completes before its expiry
      ++ticks_;
      std::printf("[%5lld ms] ticker: tick %d\n", ms_since(start_), ticks_);
      timer_.expires_at(timer_.expiry() + period_);
      arm();
    });
  }

  timer timer_;
  clock_type::duration period_;
  clock_type::time_point start_;
  int ticks_ = 0;
  bool early_ = false;
  bool stopped_by_cancel_ = false;
  bool stopping_ = false;
};

} // namespace

int main(int argc, char* argv[]) {
  using namespace std::chrono_literals;
  const bool smoke = argc > 1 && std::string_view(argv[1]) == "--smoke";
  const auto period = smoke ? 10ms : 200ms;
  const auto run_for = smoke ? 105ms : 2000ms;

  asio::io_context ctx;
  const auto start = clock_type::now();
  bool ok = true;
  auto fail = [&ok](const char* what) {
    std::fprintf(stderr, "steady_timer_drop_in: unexpected: %s\n", what);
    ok = false;
  };

  // 1. The ticker, and the deadline that stops it.
  ticker tick(ctx, period, start);
  // From `start`, as the ticker's ticks: at least one tick and at most run_for / period + 1
  // come, however long the process is held up in between.
  timer deadline(ctx, start + run_for);
  bool deadline_fired = false;
  deadline.async_wait([&](const asio::error_code& ec) {
    std::printf("[%5lld ms] deadline: %s, stopping the ticker\n", ms_since(start),
                ec ? ec.message().c_str() : "reached");
    deadline_fired = !ec && clock_type::now() >= deadline.expiry();
    tick.stop();
  });

  // 2. A wait that is cancelled long before its expiry, then re-armed and let fire.
  timer distant(ctx, std::chrono::hours(1));
  asio::error_code far_first, far_second, far_third;
  distant.async_wait([&](const asio::error_code& ec) {
    far_first = ec;
    std::printf("[%5lld ms] far: first wait %s\n", ms_since(start), ec.message().c_str());
  });
  timer canceller(ctx, period * 3);
  canceller.async_wait([&](const asio::error_code&) {
    const std::size_t n = distant.cancel(); // the first wait: operation_aborted
    std::printf("[%5lld ms] canceller: cancel() aborted %zu wait(s)\n", ms_since(start), n);
    distant.expires_after(std::chrono::hours(1));
    distant.async_wait([&](const asio::error_code& ec) {
      far_second = ec;
      std::printf("[%5lld ms] far: second wait %s\n", ms_since(start), ec.message().c_str());
    });
    // expires_after() on a pending wait aborts it, too; then this one is allowed to fire.
    const std::size_t m = distant.expires_after(period);
    std::printf("[%5lld ms] canceller: expires_after() aborted %zu wait(s)\n", ms_since(start), m);
    distant.async_wait([&](const asio::error_code& ec) {
      far_third = ec;
      std::printf("[%5lld ms] far: third wait %s\n", ms_since(start),
                  ec ? ec.message().c_str() : "fired");
    });
  });

  // 3. Per-operation cancellation: the wait's own slot.
  asio::cancellation_signal signal;
  timer slotted(ctx, std::chrono::hours(1));
  asio::error_code slotted_ec;
  slotted.async_wait(asio::bind_cancellation_slot(signal.slot(), [&](const asio::error_code& ec) {
    slotted_ec = ec;
    std::printf("[%5lld ms] slotted: %s\n", ms_since(start), ec.message().c_str());
  }));
  timer emitter(ctx, period * 2);
  emitter.async_wait(
      [&](const asio::error_code&) { signal.emit(asio::cancellation_type::terminal); });

  ctx.run();

  // 4. A blocking wait.
  timer blocking(ctx, period);
  blocking.wait();
  // Against the expiry, not a clock read taken after the construction: a thread preempted in
  // between (a loaded machine) reads that later than the expiry was computed from, and a
  // timely return would look early.
  const bool blocking_ok = clock_type::now() >= blocking.expiry();
  std::printf("[%5lld ms] blocking wait() returned\n", ms_since(start));

  // One more if the deadline was handled late, after the next tick had become due.
  const int max_ticks = static_cast<int>(run_for / period) + 1;
  std::printf("ticks: %d (at most %d expected)\n", tick.ticks(), max_ticks);
  if (tick.ticks() < 1 || tick.ticks() > max_ticks)
    fail("tick count");
  if (tick.early())
    fail("a tick before its expiry");
  if (!tick.stopped_by_cancel())
    fail("the ticker was not stopped by cancel()");
  if (!deadline_fired)
    fail("the deadline did not fire at its expiry");
  if (far_first != asio::error::operation_aborted || far_second != asio::error::operation_aborted)
    fail("a cancelled wait did not complete with operation_aborted");
  if (far_third)
    fail("the re-armed wait did not fire");
  if (slotted_ec != asio::error::operation_aborted)
    fail("per-operation cancellation");
  if (!blocking_ok)
    fail("blocking wait() returned early");

  if (!ok)
    return 1;
  std::puts("all outcomes as expected");
  return 0;
}
