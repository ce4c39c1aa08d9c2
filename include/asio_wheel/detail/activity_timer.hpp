//
// detail/activity_timer.hpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_DETAIL_ACTIVITY_TIMER_HPP
#define ASIO_WHEEL_DETAIL_ACTIVITY_TIMER_HPP

#include <asio_wheel/basic_wheel_timer.hpp>

#include <asio/execution_context.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <type_traits>

namespace asio_wheel::detail {

// The time of the last activity of a connection, marked on every read: so it must cost a
// store, not a timer operation. It reads Clock::now() (a vDSO call for steady_clock, ~30 ns
// here) rather than CLOCK_MONOTONIC_COARSE (~8 ns): the coarse clock was measured lagging the
// precise one by more than its stated resolution on a loaded VM, and a stamp earlier than the
// true activity would make an idle timeout complete early.
template <typename Clock>
class activity_stamp {
public:
  using duration = typename Clock::duration;
  using time_point = typename Clock::time_point;

  activity_stamp() noexcept { mark(); }

  // Any thread; relaxed: readers only need some recent value, never a torn one.
  void mark() noexcept { last_.store(now().time_since_epoch().count(), std::memory_order_relaxed); }

  time_point last() const noexcept {
    return time_point(duration(last_.load(std::memory_order_relaxed)));
  }

  // last() + d, saturating at time_point::max().
  time_point after(duration d) const noexcept {
    const time_point t = last();
    return time_point::max() - t < d ? time_point::max() : t + d;
  }

private:
  static time_point now() noexcept { return Clock::now(); }

  std::atomic<typename duration::rep> last_;
};

// What idle_timer and heartbeat share: a wheel timer re-armed lazily, and the mark of the
// last activity that decides when it is really due.
template <typename Clock, typename WaitTraits, typename Executor>
class activity_timer {
public:
  /// The type of the executor associated with the object.
  using executor_type = Executor;
  /// The clock type.
  using clock_type = Clock;
  /// The duration type of the clock.
  using duration = typename Clock::duration;
  /// The time point type of the clock.
  using time_point = typename Clock::time_point;

  /// Get the executor associated with the object.
  executor_type get_executor() noexcept { return timer_.get_executor(); }

  /// Marks activity now. O(1): one clock read and one relaxed store; no wheel operation,
  /// no lock, no allocation, no handler. Any thread may call it at any time.
  void touch() noexcept { activity_.mark(); }

  /// The time of the last activity, as marked (never before the true time).
  time_point last_activity() const noexcept { return activity_.last(); }

  /// Cancels the pending wait, which completes with asio::error::operation_aborted.
  /**
   * @return The number of waits cancelled.
   */
  std::size_t cancel() { return timer_.cancel(); }

protected:
  // Construction counts as activity.
  explicit activity_timer(const executor_type& ex) : timer_(ex) {}

  template <typename ExecutionContext, typename = std::enable_if_t<std::is_convertible_v<
                                           ExecutionContext&, asio::execution_context&>>>
  explicit activity_timer(ExecutionContext& context) : timer_(context) {}

  ~activity_timer() = default;

  basic_wheel_timer<Clock, WaitTraits, Executor> timer_;
  activity_stamp<Clock> activity_;
};

} // namespace asio_wheel::detail

#endif // ASIO_WHEEL_DETAIL_ACTIVITY_TIMER_HPP
