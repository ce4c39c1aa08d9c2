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

#include <asio_wheel/detail/asio_forward.hpp>

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
 * @par Precision
 * Never completes before @c timeout has elapsed since the last touch(), as read from the
 * clock (touches from several threads keep the latest reading); late by at most one wheel
 * tick plus the event loop's latency. On a clock that is not steady and was stepped back,
 * the timeout counts from the latest reading before the step until the clock passes it.
 *
 * @par Thread Safety
 * @e Distinct @e objects: Safe.@n
 * @e Shared @e objects: Unsafe, except touch(), which any thread may call at any time.
 *
 * @par Lifetime
 * As with Asio's composed operations, the object must outlive a wait that has not been
 * cancelled: when the wheel's deadline passes, the completion reads the activity mark
 * before calling the handler (keep the object alive from the handler, as a connection's
 * shared_ptr does). Destroying it aborts a wait still pending, which is then safe; a wait
 * whose deadline has passed may have its completion queued already, and that one still
 * reads the object.
 *
 * @par Example
 * @code
 * asio_wheel::idle_timer idle(socket.get_executor(), 30s);
 * idle.async_wait([&](asio::error_code ec) { if (!ec) socket.close(); });
 * // on every read:
 * idle.touch();
 * @endcode
 */
template <typename Clock, typename WaitTraits = asio::wait_traits<Clock>,
          typename Executor = asio::any_io_executor>
class basic_idle_timer : public detail::activity_timer<Clock, WaitTraits, Executor> {
  using base = detail::activity_timer<Clock, WaitTraits, Executor>;

public:
  using typename base::duration;
  using typename base::executor_type;
  using typename base::time_point;
  using clock_type = Clock;

  /// Constructor. Construction counts as activity.
  /**
   * @throws std::invalid_argument if @c timeout is not positive.
   */
  basic_idle_timer(const executor_type& ex, const duration& timeout)
      : base(ex), timeout_(checked(timeout)) {}

  /// Constructor. Construction counts as activity.
  template <typename ExecutionContext>
  basic_idle_timer(
      ExecutionContext& context, const duration& timeout,
      std::enable_if_t<std::is_convertible_v<ExecutionContext&, asio::execution_context&>>* =
          nullptr)
      : base(context), timeout_(checked(timeout)) {}

  /// The idle timeout.
  duration timeout() const noexcept { return timeout_; }

  /// Changes the idle timeout; a pending wait follows the new value without being aborted.
  /**
   * @throws std::invalid_argument if @c timeout is not positive; std::bad_alloc if the new
   * timeout has already passed and the pending wait, living in the timer, cannot get the
   * block it moves to. Either way nothing changed.
   */
  void set_timeout(const duration& timeout) {
    const duration checked_timeout = checked(timeout);
    detail::timer_access::retarget(this->timer_, this->activity_.after(checked_timeout));
    timeout_ = checked_timeout;
  }

  /// Waits until the connection has been idle for the timeout.
  /**
   * @par Completion Signature
   * @code void(asio::error_code) @endcode
   * Success once @c timeout has elapsed since the last touch();
   * asio::error::operation_aborted on cancel() or destruction; asio::error::no_memory if,
   * touched since it was armed, the wait could not wait again for want of memory (only a
   * handler too large to live in the timer, more than two pointers, needs any).
   *
   * @par Per-Operation Cancellation
   * terminal, partial and total cancellation abort the wait.
   */
  template <typename WaitToken = asio::default_completion_token_t<executor_type>>
  auto async_wait(WaitToken&& token = asio::default_completion_token_t<executor_type>()) {
    return asio::async_initiate<WaitToken, void(error_code)>(
        typename base::template initiation<basic_idle_timer>(this), token);
  }

private:
  friend typename base::template initiation<basic_idle_timer>;
  template <typename, typename>
  friend class detail::rearming_handler;

  static duration checked(const duration& timeout) {
    if (timeout <= duration::zero())
      throw std::invalid_argument("asio_wheel::idle_timer: the timeout must be positive");
    return timeout;
  }

  // The first round always goes through the timer, so the handler is never called from
  // inside async_wait().
  template <typename Handler>
  void start(detail::rearming_handler<basic_idle_timer, Handler>&& h) {
    this->wait_until(this->activity_.after(timeout_), std::move(h));
  }

  // The timer's wait completed. Touched since it was armed: wait for the rest.
  template <typename Handler>
  static void on_wait(detail::rearming_handler<basic_idle_timer, Handler>&& h,
                      const error_code& ec) {
    if (!ec) {
      basic_idle_timer& self = h.owner();
      const time_point deadline = self.activity_.after(self.timeout_);
      if (clock_type::now() < deadline) {
        if (self.rewait_until(deadline, h))
          return;
        std::move(h.handler())(error_code(asio::error::no_memory));
        return;
      }
    }
    std::move(h.handler())(ec);
  }

  duration timeout_;
};

/// An idle timer on std::chrono::steady_clock.
using idle_timer = basic_idle_timer<std::chrono::steady_clock>;

} // namespace asio_wheel

#endif // ASIO_WHEEL_IDLE_TIMER_HPP
