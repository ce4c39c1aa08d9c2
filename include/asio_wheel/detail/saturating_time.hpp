//
// detail/saturating_time.hpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_DETAIL_SATURATING_TIME_HPP
#define ASIO_WHEEL_DETAIL_SATURATING_TIME_HPP

#include <chrono>
#include <cstdint>
#include <limits>
#include <ratio>
#include <type_traits>

namespace asio_wheel::detail {

// t + d, saturating at time_point::max() (a threshold past the clock's range never comes)
// and at time_point::min(). The bound is moved by d, not t: max() - t overflows for a t
// before the epoch, and clocks read negative (libstdc++'s file_clock, whose epoch is 2174).
template <typename TimePoint>
TimePoint saturating_add(const TimePoint& t, const typename TimePoint::duration& d) noexcept {
  if (d >= TimePoint::duration::zero())
    return t > (TimePoint::max)() - d ? (TimePoint::max)() : t + d;
  return t < (TimePoint::min)() - d ? (TimePoint::min)() : t + d;
}

// to - from in the time points' own duration, saturating at duration::min() and
// duration::max(): for a clock read before its epoch and an expiry at time_point::max(), say.
// For a signed rep that is Asio's chrono_time_traits::subtract; for an unsigned one Asio's
// wraps around (an expiry 2 ticks past: 254 for 8 bits), this gives duration::min(), zero,
// as the builtin it replaces did. The bounds are checked before subtracting, in the rep's
// own type, rather than with __builtin_sub_overflow, which MSVC lacks.
template <typename TimePoint>
typename TimePoint::duration saturating_sub(const TimePoint& to, const TimePoint& from) noexcept {
  using duration = typename TimePoint::duration;
  using rep = typename duration::rep;
  static_assert(std::is_integral_v<rep>);
  const rep a = to.time_since_epoch().count();
  const rep b = from.time_since_epoch().count();
  if constexpr (std::is_signed_v<rep>) {
    if (b > 0 && a < (std::numeric_limits<rep>::min)() + b)
      return (duration::min)();
    if (b < 0 && a > (std::numeric_limits<rep>::max)() + b)
      return (duration::max)();
  } else if (a < b) {
    return (duration::min)();
  }
  return duration(static_cast<rep>(a - b));
}

// The time from `from` to `to` in nanoseconds: zero unless `to` is later, saturating at
// nanoseconds::max(). `to - from` in the clock's own duration would overflow for a clock read
// negative and a deadline at time_point::max(), and its cast to nanoseconds for a clock whose
// period is seconds and a deadline centuries ahead: the difference is taken in unsigned
// 64-bit arithmetic, where it is exact (the clock's rep is an integer of at most 64 bits).
template <typename TimePoint>
std::chrono::nanoseconds saturating_ns_until(const TimePoint& from, const TimePoint& to) noexcept {
  using ns = std::chrono::nanoseconds;
  if (!(from < to))
    return ns::zero();
  using period = std::ratio_divide<typename TimePoint::period, std::nano>;
  static_assert(std::is_integral_v<typename TimePoint::rep> &&
                sizeof(typename TimePoint::rep) <= 8);
  const std::uint64_t diff = static_cast<std::uint64_t>(to.time_since_epoch().count()) -
                             static_cast<std::uint64_t>(from.time_since_epoch().count());
  constexpr auto max = static_cast<std::uint64_t>((ns::max)().count());
  constexpr auto num = static_cast<std::uint64_t>(period::num);
  constexpr auto den = static_cast<std::uint64_t>(period::den);
  const std::uint64_t whole = diff / den;
  if (whole > max / num)
    return (ns::max)();
  const std::uint64_t scaled = whole * num;
  const std::uint64_t part = diff % den * num / den; // diff % den < den: no overflow for any
                                                     // period a clock has
  if (scaled > max - part)
    return (ns::max)();
  return ns(static_cast<ns::rep>(scaled + part));
}

} // namespace asio_wheel::detail

#endif // ASIO_WHEEL_DETAIL_SATURATING_TIME_HPP
