//
// statistics.hpp
// ~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_STATISTICS_HPP
#define ASIO_WHEEL_STATISTICS_HPP

#include <asio_wheel/detail/wheel_service.hpp>
#include <asio_wheel/wheel_statistics.hpp>

#include <asio_wheel/detail/asio_forward.hpp>

#include <chrono>

namespace asio_wheel {

/// @ingroup statistics
/// Reads the statistics of the timing wheel of @c context for @c Clock.
/**
 * Every wheel_timer, idle_timer, heartbeat, heartbeat_group and cancel_after/cancel_at of
 * one execution context on one clock shares one wheel; this is its snapshot, copied under
 * its lock (see wheel_statistics for the fields).
 *
 * Does not create the wheel: for a context that has none for this clock (no timer of it
 * was ever made there, nor its tick asked or set), every field is zero, the tick included;
 * once there is one, the tick is the context's and the counts start at zero.
 *
 * @param context The execution context.
 * @param count_levels Whether to fill timers_per_level. Counting walks the wheel's lists
 * under its lock: O(timers in the wheel), a few nanoseconds each, so some milliseconds for
 * a million timers, during which the context's timer operations wait. Pass false for a
 * frequent scrape of a very large wheel; everything else is O(1).
 *
 * @par Thread Safety
 * Safe from any thread, at any time the context exists, concurrently with every timer
 * operation.
 *
 * @par Example
 * @code
 * asio_wheel::wheel_statistics s = asio_wheel::get_statistics(io);
 * std::printf("%zu timers, p99 lateness <= %llu ticks\n", s.timers_pending,
 *             (unsigned long long)s.lateness_quantile(0.99));
 * @endcode
 */
template <typename Clock = std::chrono::steady_clock,
          typename WaitTraits = asio::wait_traits<Clock>>
wheel_statistics get_statistics(asio::execution_context& context, bool count_levels = true) {
  using service = detail::wheel_service<Clock, WaitTraits>;
  if (!asio::has_service<service>(context))
    return wheel_statistics{};
  // Created by now (services are never removed before the context's destruction), so this
  // finds it rather than creating it.
  return asio::use_service<service>(context).statistics(count_levels);
}

} // namespace asio_wheel

#endif // ASIO_WHEEL_STATISTICS_HPP
