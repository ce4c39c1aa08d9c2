//
// idle_timer.hpp
// ~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_IDLE_TIMER_HPP
#define ASIO_WHEEL_IDLE_TIMER_HPP

#include <asio_wheel/detail/activity_timer.hpp>
#include <asio_wheel/detail/saturating_time.hpp>
#include <asio_wheel/timeout_scale.hpp>

#include <asio_wheel/detail/asio_forward.hpp>
#include <asio_wheel/detail/exceptions.hpp>

#include <chrono>
#include <cstddef>
#include <stdexcept>
#include <utility>

namespace asio_wheel {

/// Completes when nothing has happened for a given time.
/**
 * The idle timeout of a connection, without a timer operation per read: touch() marks
 * activity with a clock read and one compare-exchange, and async_wait() completes once
 * @c timeout has elapsed since the last touch(). When the wheel's deadline passes and a
 * touch() came since, the wait re-arms itself for the remainder, lazily: a connection that
 * is busy costs one wheel re-arm per timeout period, not one per read.
 *
 * @par Timeouts that shrink under load
 * The timeout may be a range, <tt>{min, max}</tt> (see timeout_range): the timeout in force
 * is then <tt>min + ceil(f * (max - min))</tt>, where @c f is the factor of the context's
 * timeout_scale (1 unless the server lowers it). When the factor changes (from any thread,
 * at any time), a pending wait is judged by the new timeout from then on: one idle for
 * longer than it completes in the next turn of its executor or so, never before it; the
 * others wait for it. Envoy's scaled range timers: the timer waits on its own for @c min,
 * then in its context's queue for its range (one wheel wait per distinct <tt>max -
 * min</tt>, however many timers), so a change of the factor costs one re-arm per distinct
 * range, not one per timer. A plain duration is a fixed timeout, which no factor changes.
 *
 * @par Precision
 * Never completes before @c timeout has elapsed since the last touch(), as read from the
 * clock (touches from several threads keep the latest reading), @c timeout being, for a
 * range, the one at the factor read when the wait completes; late by at most one wheel tick
 * plus the event loop's latency (after a change of the factor, plus the delay of one posted
 * handler), for a range however long after its minimum the timer joined its span's queue
 * (a wait started late, a touch found at its previous deadline): the queue is ordered by
 * each timer's own last touch. On a clock that is not steady and was stepped back, the timeout
 * counts from the latest reading before the step until the clock passes it.
 *
 * @par Thread Safety
 * @e Distinct @e objects: Safe.@n
 * @e Shared @e objects: Unsafe, except touch(), which any thread may call at any time (and
 * timeout_scale::set()).
 *
 * @par Lifetime
 * As asio::steady_timer: the object may be destroyed at any time, from any handler or from
 * another thread running the context (not concurrently with another call on it). A pending
 * async_wait() then completes exactly once: with operation_aborted if it was still
 * waiting; if its completion was already queued, as cancel() would have decided at the
 * destruction (see the destructor).
 *
 * @par Memory
 * 208 bytes with std::chrono::steady_clock, and a block of 32 bytes allocated with it, which
 * its pending completion shares (so that the timer may be destroyed at any time); a timer
 * with a small handler allocates nothing per wait, range or not. The first range in a
 * context creates its queue service.
 *
 * @par Example
 * @code
 * asio_wheel::idle_timer idle(socket.get_executor(), 30s);
 * idle.async_wait([&](asio::error_code ec) { if (!ec) socket.close(); });
 * // on every read:
 * idle.touch();
 *
 * // 60 s normally, down to 5 s when the server sets the factor of its context to 0:
 * asio_wheel::idle_timer shrinking(socket.get_executor(), {5s, 60s});
 * asio_wheel::timeout_scale::of(socket.get_executor()).set(0.0);
 * @endcode
 */
template <typename Clock, typename WaitTraits = asio::wait_traits<Clock>,
          typename Executor = asio::any_io_executor>
class basic_idle_timer : public detail::activity_timer<Clock, WaitTraits, Executor> {
  using base = detail::activity_timer<Clock, WaitTraits, Executor>;

public:
  using typename base::duration;
  using typename base::executor_type;
  using typename base::range;
  using typename base::time_point;
  /// The clock type.
  using clock_type = Clock;

#if defined(ASIO_WHEEL_DOXYGEN)
  // The members inherited from the implementation's base (detail::activity_timer), declared
  // here for the reference only: Doxygen does not show a detail:: base's members.

  /// Marks activity now: the idle timeout counts from the latest touch().
  /**
   * One clock read and one relaxed compare-exchange: no wheel operation, no lock, no
   * allocation, no handler. Any thread may call it at any time; touches racing from several
   * threads keep the latest reading.
   */
  void touch() noexcept;

  /// The time of the last activity, as marked (never before the true time).
  time_point last_activity() const noexcept;

  /// Get the executor associated with the object.
  executor_type get_executor() noexcept;
#endif

  /// Constructor. Construction counts as activity.
  /**
   * @param ex The I/O executor of the timer: its waits' handlers run there by default.
   * @param timeout A duration, or a range <tt>{min, max}</tt> scaled by the context's
   * timeout_scale.
   *
   * @throws std::invalid_argument unless 0 < min <= max (for a duration: unless positive).
   */
  basic_idle_timer(const executor_type& ex, const range& timeout)
      : base(ex), timeout_(checked(timeout)) {
    this->use_range(timeout_);
  }

  /// Constructor. Construction counts as activity.
  template <typename ExecutionContext>
  basic_idle_timer(
      ExecutionContext& context, const range& timeout,
      std::enable_if_t<std::is_convertible_v<ExecutionContext&, asio::execution_context&>>* =
          nullptr)
      : base(context), timeout_(checked(timeout)) {
    this->use_range(timeout_);
  }

  /// Destructor.
  /**
   * As asio::steady_timer's: a wait still waiting completes with
   * asio::error::operation_aborted; one whose completion is already queued (or running on
   * another thread) completes as cancel() would have decided now: with success if the timer
   * has been idle for its timeout in force, else with operation_aborted.
   */
  ~basic_idle_timer() {
    this->detach([this] { return due_now(); });
  }

  /// The idle timeout in force: the fixed timeout, or for a range, the timeout at the
  /// context's factor now.
  duration timeout() const noexcept {
    return timeout_.at(this->factor());
  }

  /// The idle timeout as given: a range (<tt>min == max</tt> for a fixed timeout).
  const range& get_timeout() const noexcept {
    return timeout_;
  }

  /// Changes the idle timeout; a pending wait follows the new value without being aborted.
  /**
   * @throws std::invalid_argument unless 0 < min <= max (for a duration: unless positive);
   * std::bad_alloc if the new timeout (its minimum, for a range) has already passed and the
   * pending wait, living in the timer, cannot get the block it moves to. Either way nothing
   * changed.
   */
  void set_timeout(const range& timeout) {
    const range checked_timeout = checked(timeout);
    // A completion running on another thread reads what this changes.
    const auto lock = this->lock_state();
    this->use_range(checked_timeout);
    // To its minimum: a wait past it completes, and on_wait() judges it (and parks it again)
    // by the new timeout. Out of its queue once moved: if the move throws, it is as it was.
    this->leave_queue_after(
        [&] { this->timer_.retarget(this->activity_.after(checked_timeout.min)); });
    timeout_ = checked_timeout;
  }

  /// Cancels the pending async_wait().
  /**
   * A wait still waiting completes with asio::error::operation_aborted. One whose
   * completion is already queued (the wheel found it due, or a queue woke it, and its handler
   * has not run yet) is judged at this call, and its outcome is then fixed, whatever touch()
   * or timeout_scale::set() comes before it runs: if the timer has been idle for its timeout
   * in force, it completes with success and is not counted, as asio::steady_timer's wait
   * does when cancel() comes after its expiry; otherwise it completes with
   * operation_aborted. A cancellation of a pending wait is never lost.
   *
   * @return The number of waits that will complete with operation_aborted (0 or 1).
   *
   * @throws std::bad_alloc if the wait, living in the timer, cannot get the block it moves
   * to; nothing changed then.
   */
  std::size_t cancel() {
    return this->cancel_op([this] { return due_now(); });
  }

  /// Waits until the connection has been idle for the timeout.
  /**
   * @par Completion Signature
   * @code void(asio::error_code) @endcode
   * Success once @c timeout (for a range, the one in force at the context's factor) has
   * elapsed since the last touch(); asio::error::operation_aborted on cancel() or
   * destruction; asio::error::no_memory if, touched since it was armed, the wait could not
   * wait again for want of memory (only a handler too large to live in the timer, more than
   * two pointers, needs any).
   *
   * @par Per-Operation Cancellation
   * terminal, partial and total cancellation abort the wait, with the rule of cancel(): an
   * emit that comes after the wait's completion was queued is judged when it is emitted
   * (success if the timer is idle for its timeout then, else operation_aborted), never lost.
   *
   * One wait at a time: start the next from the handler of the previous one, or once that
   * has run. A wait that cancel() took out of the wheel (it was still waiting) no longer
   * counts; one whose completion was queued counts until its handler has run. Another
   * started while one counts is not detected, and both then complete wrongly (as two
   * concurrent reads on one Asio stream would).
   */
  template <typename WaitToken = asio::default_completion_token_t<executor_type>>
  auto async_wait(WaitToken&& token = asio::default_completion_token_t<executor_type>()) {
    return asio::async_initiate<WaitToken, void(error_code)>(
        typename base::template initiation<basic_idle_timer>(this), token);
  }

private:
  friend base;
  friend typename base::template initiation<basic_idle_timer>;

  template <typename, typename>
  friend class detail::rearming_handler;

  // Whether the timer has been idle for its timeout in force, now.
  bool due_now() const {
    return clock_type::now() >=
           detail::saturating_add(this->activity_.last(), timeout_.at(this->factor()));
  }

  static range checked(const range& timeout) {
    if (timeout.min <= duration::zero())
      detail::throw_exception(
          std::invalid_argument("asio_wheel::idle_timer: the timeout must be positive (for "
                                "a range {min, max}: its minimum)"));
    if (timeout.min > timeout.max)
      detail::throw_exception(
          std::invalid_argument("asio_wheel::idle_timer: a timeout range {min, max} needs "
                                "min <= max (a plain duration is {d, d})"));
    return timeout;
  }

  // The first round always goes through the timer, so the handler is never called from
  // inside async_wait(). A wait aborted by its cancellation slot may have left the timer in
  // its queue.
  template <typename Handler>
  void start(detail::rearming_handler<basic_idle_timer, Handler>&& h) {
    this->leave_queue();
    this->wait_for(timeout_, this->activity_.last(), std::move(h));
  }

  // The timer's wait completed. Touched since it was armed: wait for the rest.
  template <typename Handler>
  static void on_wait(detail::rearming_handler<basic_idle_timer, Handler>&& h,
                      const error_code& ec) {
    // On an error the timer may be gone (destroyed with its wait): nothing reads it.
    if (ec) {
      std::move(h.handler())(ec);
      return;
    }
    const error_code aborted(asio::error::operation_aborted);
    typename base::completion_lock lock(h.link());
    if (lock.gone()) {
      // Destroyed once this completion was queued, and judged then (see the destructor).
      const bool due = lock.outcome() != detail::activity_link::verdict::abort;
      lock.unlock();
      std::move(h.handler())(due ? ec : aborted);
      return;
    }
    basic_idle_timer& self = h.owner();
    self.leave_queue();
    using state = typename base::op_state;
    if (self.state() != state::pending) {
      // Cancelled after this completion was queued, and judged then (see cancel()).
      const bool was_aborted = self.state() == state::abort;
      self.end_op();
      lock.unlock();
      std::move(h.handler())(was_aborted ? aborted : ec);
      return;
    }
    const time_point now = clock_type::now();
    const time_point last = self.activity_.last();
    if (now < detail::saturating_add(last, self.timeout_.at(self.factor()))) {
      if (self.rewait_for(self.timeout_, last, h, now))
        return;
      self.end_op();
      lock.unlock();
      std::move(h.handler())(error_code(asio::error::no_memory));
      return;
    }
    self.end_op();
    lock.unlock();
    std::move(h.handler())(ec);
  }

  range timeout_;
};

/// An idle timer on std::chrono::steady_clock.
using idle_timer = basic_idle_timer<std::chrono::steady_clock>;

} // namespace asio_wheel

#endif // ASIO_WHEEL_IDLE_TIMER_HPP
