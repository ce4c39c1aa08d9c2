//
// detail/activity_stamp.hpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_DETAIL_ACTIVITY_STAMP_HPP
#define ASIO_WHEEL_DETAIL_ACTIVITY_STAMP_HPP

#include <atomic>
#include <chrono>

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

} // namespace asio_wheel::detail

#endif // ASIO_WHEEL_DETAIL_ACTIVITY_STAMP_HPP
