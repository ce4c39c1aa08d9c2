//
// detail/tick_scale.hpp
// ~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_DETAIL_TICK_SCALE_HPP
#define ASIO_WHEEL_DETAIL_TICK_SCALE_HPP

#include <asio_wheel/detail/timing_wheel.hpp>

#include <cstdint>

namespace asio_wheel::detail {

// Maps a clock's time points to the integer ticks of a timing wheel: ticks of a fixed length,
// with a boundary at a given time point (the wheel's creation, so that a wait of one tick
// from then takes one tick). Expiries round up (a deadline never maps to a tick before it:
// never early), the current time rounds down, and every time point of the clock, from
// time_point::min() to time_point::max(), maps exactly and without overflow.
//
// The whole range, and not only what follows the wheel's creation: a clock that is not
// steady may be stepped back to before it, and a reading clamped to the first tick would be
// later than the clock, so that a wait due by the ticks would not be due by the clock. Tick 0
// is the part-tick from time_point::min() to the first boundary; 64 bits count the rest.
template <typename Clock>
class tick_scale {
public:
  using duration = typename Clock::duration;
  using time_point = typename Clock::time_point;

  tick_scale() noexcept = default;

  // Precondition: tick > 0.
  tick_scale(duration tick, time_point boundary) noexcept
      : tick_(tick), n_(static_cast<std::uint64_t>(tick.count())),
        shift_((n_ - offset(boundary) % n_) % n_), max_tick_(floor((time_point::max)())) {}

  duration tick() const noexcept { return tick_; }

  // Rounds up, so that an expiry never maps to a tick before it: the first tick that begins
  // at or after t (tick 0 begins at time_point::min()).
  tick_type ceil(const time_point& t) const noexcept {
    const std::uint64_t d = offset(t);
    return d == 0 ? 0 : floor(t) + ((d % n_ + shift_) % n_ != 0 ? 1 : 0);
  }

  // Rounds down: the last tick that has begun.
  tick_type floor(const time_point& t) const noexcept {
    // (d + shift_) / n_, without overflowing 64 bits.
    const std::uint64_t d = offset(t);
    return d / n_ + (d % n_ + shift_ >= n_ ? 1 : 0);
  }

  // The first instant of `tick`; time_point::max() for ticks beyond the clock's range.
  time_point time_of(tick_type tick) const noexcept {
    if (tick > max_tick_)
      return (time_point::max)();
    // tick * n_ - shift_ is at most offset(max()): computed modulo 2^64, it is exact.
    const std::uint64_t d = tick == 0 ? 0 : tick * n_ - shift_;
    const std::uint64_t min =
        static_cast<std::uint64_t>((time_point::min)().time_since_epoch().count());
    return time_point(duration(static_cast<typename duration::rep>(min + d)));
  }

private:
  // Unsigned distance from time_point::min(): exact for every time point, whatever the sign
  // of the clock's representation.
  static std::uint64_t offset(const time_point& t) noexcept {
    return static_cast<std::uint64_t>(t.time_since_epoch().count()) -
           static_cast<std::uint64_t>((time_point::min)().time_since_epoch().count());
  }

  duration tick_{1};
  std::uint64_t n_ = 1;
  // Boundaries are where offset(t) + shift_ is a multiple of n_ (shift_ < n_).
  std::uint64_t shift_ = 0;
  // The tick of time_point::max(): the largest tick that time_of() can represent.
  tick_type max_tick_ = 0;
};

} // namespace asio_wheel::detail

#endif // ASIO_WHEEL_DETAIL_TICK_SCALE_HPP
