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
// counted from an origin. Expiries round up (a deadline never maps to a tick before it: never
// early), the current time rounds down, and every time point from the origin to
// time_point::max() maps without overflow.
template <typename Clock>
class tick_scale {
public:
  using duration = typename Clock::duration;
  using time_point = typename Clock::time_point;

  tick_scale() noexcept = default;

  // Precondition: tick > 0.
  tick_scale(duration tick, time_point origin) noexcept
      : tick_(tick), origin_(origin),
        max_tick_(since_origin(time_point::max()) / static_cast<std::uint64_t>(tick.count())) {}

  duration tick() const noexcept { return tick_; }

  // Rounds up, so that an expiry never maps to a tick before it.
  tick_type ceil(const time_point& t) const noexcept {
    if (t <= origin_)
      return 0;
    const std::uint64_t d = since_origin(t);
    const auto n = static_cast<std::uint64_t>(tick_.count());
    return d / n + (d % n != 0 ? 1 : 0);
  }

  // Rounds down: the last tick that has fully begun.
  tick_type floor(const time_point& t) const noexcept {
    return t <= origin_ ? 0 : since_origin(t) / static_cast<std::uint64_t>(tick_.count());
  }

  // The first instant of `tick`; time_point::max() for ticks beyond the clock's range.
  time_point time_of(tick_type tick) const noexcept {
    if (tick > max_tick_)
      return time_point::max();
    const std::uint64_t t = static_cast<std::uint64_t>(origin_.time_since_epoch().count()) +
                            tick * static_cast<std::uint64_t>(tick_.count());
    return time_point(duration(static_cast<typename duration::rep>(t)));
  }

private:
  // Unsigned distance from the origin: exact for every time point after it, whatever the
  // sign of the clock's epoch.
  std::uint64_t since_origin(const time_point& t) const noexcept {
    return static_cast<std::uint64_t>(t.time_since_epoch().count()) -
           static_cast<std::uint64_t>(origin_.time_since_epoch().count());
  }

  duration tick_{1};
  time_point origin_{};
  // The largest tick that time_of() can represent.
  tick_type max_tick_ = 0;
};

} // namespace asio_wheel::detail

#endif // ASIO_WHEEL_DETAIL_TICK_SCALE_HPP
