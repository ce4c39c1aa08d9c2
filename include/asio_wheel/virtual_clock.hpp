//
// virtual_clock.hpp
// ~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_VIRTUAL_CLOCK_HPP
#define ASIO_WHEEL_VIRTUAL_CLOCK_HPP

#include <atomic>
#include <chrono>
#include <cstdint>
#include <type_traits>

namespace asio_wheel {

/// A steady clock whose time moves only when a test moves it.
/**
 * Meets the Cpp17TrivialClock requirements with @c is_steady true, so every template of
 * the library takes it: @c basic_wheel_timer<virtual_clock>, @c basic_idle_timer,
 * @c basic_heartbeat, @c basic_heartbeat_group, and @c cancel_at with a
 * @c virtual_clock::time_point. Time starts at 0 (the epoch) and is moved forward by
 * asio_wheel::virtual_time (advance(), run()) or set(); it never goes back.
 *
 * The time is one process-wide value (@c now() is static, as for every standard clock):
 * contexts driven by different virtual_time objects share it, so a test should drive one
 * context at a time.
 *
 * The wheel of a context on this clock arms no Asio timer: a pending wait does not keep
 * io_context::run() busy, whatever executor its handler is bound to (a strand's, another
 * context's: unlike a wait on a real clock, it holds no outstanding work on it; a handler
 * that holds work itself, such as one bound to a work-tracking executor, still does), and
 * nothing completes until virtual_time drives the wheel.
 *
 * @par Thread Safety
 * @e Distinct @e objects: Safe. @e Shared @e objects: Safe (now() is an atomic load).
 */
struct virtual_clock {
  using rep = std::int64_t;                                  ///< Nanoseconds, as a signed count.
  using period = std::nano;                                  ///< One nanosecond.
  using duration = std::chrono::duration<rep, period>;       ///< The clock's duration.
  using time_point = std::chrono::time_point<virtual_clock>; ///< The clock's time point.
  static constexpr bool is_steady = true;                    ///< Virtual time never goes back.

  /// The current virtual time.
  static time_point now() noexcept {
    return time_point(duration(ns().load(std::memory_order_acquire)));
  }

  /// Moves the time to @c t if that is later than now(); an earlier @c t is ignored (the
  /// clock is steady). Does not run anything: prefer virtual_time::advance().
  static void set(time_point t) noexcept {
    const rep want = t.time_since_epoch().count();
    rep seen = ns().load(std::memory_order_relaxed);
    while (seen < want && !ns().compare_exchange_weak(seen, want, std::memory_order_acq_rel)) {
    }
  }

private:
  // A function-local static, so that the header defines it once for the whole program.
  static std::atomic<rep>& ns() noexcept {
    static std::atomic<rep> value{0};
    return value;
  }
};

/// Whether the wheel of @c Clock is driven by a test (virtual_time) instead of an Asio timer.
/**
 * True for virtual_clock. A user's own test clock may specialise it to true only if its
 * now() is moved by the same means as virtual_clock's (it must be virtual_clock-driven);
 * otherwise leave it alone.
 */
template <typename Clock>
struct is_virtual_clock : std::false_type {};

template <>
struct is_virtual_clock<virtual_clock> : std::true_type {};

} // namespace asio_wheel

#endif // ASIO_WHEEL_VIRTUAL_CLOCK_HPP
