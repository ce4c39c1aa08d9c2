//
// detail/activity_stamp.hpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_DETAIL_ACTIVITY_STAMP_HPP
#define ASIO_WHEEL_DETAIL_ACTIVITY_STAMP_HPP

#include <asio_wheel/detail/saturating_time.hpp>

#include <atomic>

namespace asio_wheel::detail {

// The time of the last activity of a connection, marked on every read: so it must cost
// about a store, not a timer operation. It reads Clock::now() (a vDSO call for steady_clock,
// ~30 ns here) rather than CLOCK_MONOTONIC_COARSE (~8 ns): the coarse clock was measured
// lagging the precise one by more than its stated resolution on a loaded VM, and a stamp
// earlier than the true activity would make an idle timeout complete early.
template <typename Clock>
class activity_stamp {
public:
  using duration = typename Clock::duration;
  using time_point = typename Clock::time_point;

  // Initialised with a reading, not marked: no value of the clock may stand for "never
  // marked", since a clock may read anything (a negative time, for one).
  activity_stamp() noexcept : last_(now().time_since_epoch().count()) {}

  // Any thread. Keeps the latest reading (an atomic max): a thread descheduled between its
  // clock read and its write must not move the stamp back over a later mark that has
  // returned (with a plain store it did, and an idle timeout then completed early). Alone on
  // its stamp, a mark is a load, a compare and one compare-exchange that succeeds; a reading
  // no later than the stamp writes nothing. Relaxed: readers need some recent value, never a
  // torn one, and nothing else is published through it. For a clock stepped back, the stamp
  // stays at the latest reading from before the step until the clock passes it again (a
  // timeout counts from there: late by up to the step, never early).
  void mark() noexcept {
    const rep t = now().time_since_epoch().count();
    rep seen = last_.load(std::memory_order_relaxed);
    while (seen < t && !last_.compare_exchange_weak(seen, t, std::memory_order_relaxed)) {
    }
  }

  time_point last() const noexcept {
    return time_point(duration(last_.load(std::memory_order_relaxed)));
  }

  // last() + d, saturating at time_point::max().
  time_point after(duration d) const noexcept { return saturating_add(last(), d); }

private:
  using rep = typename duration::rep;

  static time_point now() noexcept { return Clock::now(); }

  // The latest clock reading marked; only ever increases.
  std::atomic<rep> last_;
};

} // namespace asio_wheel::detail

#endif // ASIO_WHEEL_DETAIL_ACTIVITY_STAMP_HPP
