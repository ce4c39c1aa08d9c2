//
// detail/saturating_time.hpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_DETAIL_SATURATING_TIME_HPP
#define ASIO_WHEEL_DETAIL_SATURATING_TIME_HPP

namespace asio_wheel::detail {

// t + d, saturating at time_point::max() (a threshold past the clock's range never comes)
// and at time_point::min(). The bound is moved by d, not t: max() - t overflows for a t
// before the epoch, and clocks read negative (libstdc++'s file_clock, whose epoch is 2174).
template <typename TimePoint>
TimePoint saturating_add(const TimePoint& t, const typename TimePoint::duration& d) noexcept {
  if (d >= TimePoint::duration::zero())
    return t > TimePoint::max() - d ? TimePoint::max() : t + d;
  return t < TimePoint::min() - d ? TimePoint::min() : t + d;
}

} // namespace asio_wheel::detail

#endif // ASIO_WHEEL_DETAIL_SATURATING_TIME_HPP
