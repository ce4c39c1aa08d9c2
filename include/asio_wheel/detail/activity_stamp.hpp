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
#include <type_traits>

#if defined(__linux__)
#include <time.h>
#endif

namespace asio_wheel::detail {

// The time of the last activity of a connection, marked on every read: so it must cost a
// store, not a timer operation. For std::chrono::steady_clock on Linux the mark reads
// CLOCK_MONOTONIC_COARSE (same epoch as steady_clock, a few ns instead of ~30) and adds its
// resolution, so the mark is never before the true time of the activity: timeouts measured
// from it are never early, and at most one coarse tick (typically 1-4 ms) late.
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
  static time_point now() noexcept {
#if defined(__linux__) && defined(CLOCK_MONOTONIC_COARSE)
    if constexpr (std::is_same_v<Clock, std::chrono::steady_clock>) {
      static const long resolution_ns = [] {
        ::timespec res{};
        return ::clock_getres(CLOCK_MONOTONIC_COARSE, &res) == 0 && res.tv_sec == 0 ? res.tv_nsec
                                                                                   : -1L;
      }();
      ::timespec ts{};
      if (resolution_ns >= 0 && ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) == 0)
        return time_point(std::chrono::duration_cast<duration>(
            std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec + resolution_ns)));
    }
#endif
    return Clock::now();
  }

  std::atomic<typename duration::rep> last_;
};

} // namespace asio_wheel::detail

#endif // ASIO_WHEEL_DETAIL_ACTIVITY_STAMP_HPP
