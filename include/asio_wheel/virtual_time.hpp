//
// virtual_time.hpp
// ~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_VIRTUAL_TIME_HPP
#define ASIO_WHEEL_VIRTUAL_TIME_HPP

// Design. Virtual time is a clock type (virtual_clock), not a mode of the context: the
// library's templates already take a clock, so production code on steady_clock compiles to
// exactly what it did (no flag tested on touch() or async_wait), and a test switches by an
// alias. The wheel of a virtual_clock context arms no Asio timer (is_virtual_clock): it
// records the tick it would arm for, and virtual_time moves the clock there and posts the
// driver's turn, which then runs on the context like the real one (same batches, same
// order, same budget). Handlers run only inside io_context::poll(), called by virtual_time
// on the calling thread, so a scenario is deterministic given deterministic handlers.

#include <asio_wheel/detail/wheel_service.hpp>
#include <asio_wheel/virtual_clock.hpp>

#include <asio_wheel/detail/asio_forward.hpp>
#include <asio_wheel/detail/exceptions.hpp>

#include <cstddef>
#include <optional>
#include <stdexcept>

namespace asio_wheel {

/// Drives the virtual_clock timers of one io_context: advance time by hand, or run a
/// scenario to completion with time jumping to each next deadline.
/**
 * Use it in tests of code written against a clock template parameter (or an alias):
 * @code
 * using clock = asio_wheel::virtual_clock;          // steady_clock in production
 * asio::io_context io;
 * asio_wheel::virtual_time vt(io);
 * asio_wheel::basic_idle_timer<clock> idle(io);
 * ...
 * vt.advance(std::chrono::minutes(30));             // everything due in 30 min completes
 * @endcode
 *
 * @par Rule for real I/O in the same context
 * Virtual time never moves by itself. advance(d) moves it by exactly @c d whatever else
 * is going on, so it is the tool when a test mixes timers and real I/O: it never fires a
 * timeout while a socket operation is outstanding unless the test says so. run() (auto-
 * advance) jumps to the next deadline only when io_context::poll() ran no handler and no
 * @ref hold is alive; while a hold is alive and nothing is ready, it blocks in
 * io_context::run_one() for real events instead of jumping. A test that starts real I/O
 * (a connect, a read from a peer thread) whose completion a timeout races with should
 * hold a @ref hold until that I/O completes. Without one, a socket operation whose result
 * has not arrived yet looks idle, and run() fires the timeout at once: the footgun of
 * tokio's auto-advance (tokio-rs/tokio#4522, #2647, #7841).
 *
 * @par Thread Safety
 * @e Distinct @e objects: Safe. @e Shared @e objects: Unsafe. advance() and run() call
 * io_context::poll() on the calling thread; no other thread should run the context
 * meanwhile (handlers would then run on it, at times the test does not control).
 */
class virtual_time {
public:
  using clock_type = virtual_clock;             ///< The clock this object moves.
  using duration = virtual_clock::duration;     ///< The clock's duration.
  using time_point = virtual_clock::time_point; ///< The clock's time point.

  /// Controls the virtual_clock wheel of @c io (created if need be).
  explicit virtual_time(asio::io_context& io) : io_(io), service_(asio::use_service<service>(io)) {}

  virtual_time(const virtual_time&) = delete;
  virtual_time& operator=(const virtual_time&) = delete;

  /// The current virtual time (virtual_clock::now()).
  static time_point now() noexcept { return virtual_clock::now(); }

  /// The instant the context's wheel next has work: the earliest pending wait's expiry
  /// rounded up to the wheel's tick (1 ms unless set_tick() changed it), so no earlier than
  /// that expiry and less than a tick after it. Empty when no wait is pending.
  std::optional<time_point> next_deadline() const { return service_.virtual_next(); }

  /// Moves time forward by @c d, completing everything due within it.
  /**
   * "Due" is on the wheel's tick grid, as on a real clock: a wait whose expiry falls
   * between two ticks completes at the later one, so an advance() that stops between them
   * leaves it pending (a 500 us wait needs advance(1ms) on the default tick). A test that
   * needs exact instants sets the tick first: basic_wheel_timer<virtual_clock>::set_tick(io,
   * std::chrono::nanoseconds(1)).
   *
   * Runs the ready handlers (poll()); then, while the wheel's next deadline is at most
   * now() + d: moves the clock to it, runs the driver's turn and polls again, so that waits
   * complete in deadline order, each seeing now() at (or just after) its own expiry, and
   * waits armed by those handlers within the window complete too. Finally sets the clock to
   * now() + d (without running anything more: nothing is due) and returns. No real time
   * passes. A negative @c d counts as zero.
   *
   * @returns The number of handlers run (as counted by io_context::poll()).
   */
  std::size_t advance(duration d) {
    const time_point target = later(d);
    std::size_t n = poll();
    for (;;) {
      const std::optional<time_point> next = next_deadline();
      if (!next || *next > target)
        break;
      n += step(*next);
    }
    virtual_clock::set(target);
    return n;
  }

  /// Runs the context to completion, jumping time to each next deadline when idle.
  /**
   * Loop: poll(); if it ran nothing and no @ref hold is alive, jump to the next deadline
   * and run its turn; if a hold is alive, block in io_context::run_one() for a real event.
   * Returns when poll() ran nothing, no hold is alive and no wait is pending. A scenario
   * that re-arms forever (a heartbeat with nothing to stop it) never returns: use
   * run_for() or advance() for those.
   *
   * @returns The number of handlers run.
   * @throws std::logic_error if a hold is alive while the context has no outstanding work
   * at all (nothing could ever release it). Pending virtual waits are not outstanding work,
   * whatever executor their handlers are bound to (see virtual_clock).
   */
  std::size_t run() { return run_until((time_point::max)()); }

  /// As run(), but time does not go past now() + @c d: returns when nothing is pending
  /// or the next deadline is later than that, with the clock set to now() + d.
  std::size_t run_for(duration d) { return run_until(later(d)); }

private:
  // now() + d for d >= 0 (a negative d counts as zero), saturating at time_point::max(), as
  // Asio's timers do for expires_after(): advance(duration::max()) means "forever".
  static time_point later(duration d) noexcept {
    const time_point t = now();
    if (d <= duration::zero())
      return t;
    return t > (time_point::max)() - d ? (time_point::max)() : t + d;
  }

public:
  /// Suspends auto-advance (run(), run_for()) while alive: see the class's rule for real
  /// I/O. Cheap, nestable; advance() ignores holds.
  class hold {
  public:
    /// Suspends auto-advance of @c vt until this object is destroyed or released.
    explicit hold(virtual_time& vt) noexcept : vt_(&vt) { ++vt_->holds_; }
    hold(const hold&) = delete;
    hold& operator=(const hold&) = delete;
    ~hold() { release(); }
    /// Ends the hold early (idempotent), e.g. from the real I/O's completion handler.
    void release() noexcept {
      if (vt_ != nullptr)
        --std::exchange(vt_, nullptr)->holds_;
    }

  private:
    virtual_time* vt_;
  };

  /// Number of holds alive.
  std::size_t holds() const noexcept { return holds_; }

private:
  using service = detail::wheel_service<virtual_clock, asio::wait_traits<virtual_clock>>;

  // io_context::poll() stops the context when it runs out of work, and a stopped context
  // polls nothing: restarted before each poll, as a test runs it again and again.
  std::size_t poll() {
    std::size_t total = 0;
    for (;;) {
      io_.restart();
      const std::size_t n = io_.poll();
      total += n;
      if (n == 0)
        return total;
    }
  }

  // Moves the clock to `at` (never back) and runs the wheel's turn there.
  std::size_t step(time_point at) {
    virtual_clock::set(at);
    service_.virtual_fire();
    return poll();
  }

  std::size_t run_until(time_point limit) {
    std::size_t n = 0;
    for (;;) {
      const std::size_t ran = poll();
      n += ran;
      if (ran != 0)
        continue;
      if (holds_ != 0) {
        io_.restart();
        const std::size_t real = io_.run_one();
        if (real == 0 && holds_ != 0)
          detail::throw_exception(std::logic_error(
              "asio_wheel::virtual_time::run: a hold is alive but the io_context has no "
              "outstanding work, so nothing can release it; release the hold when the real "
              "I/O it stands for completes, or use advance()"));
        n += real;
        continue;
      }
      const std::optional<time_point> next = next_deadline();
      if (!next || *next > limit) {
        if (limit != (time_point::max)())
          virtual_clock::set(limit);
        return n;
      }
      n += step(*next);
    }
  }

  asio::io_context& io_;
  service& service_;
  std::size_t holds_ = 0;
};

} // namespace asio_wheel

#endif // ASIO_WHEEL_VIRTUAL_TIME_HPP
