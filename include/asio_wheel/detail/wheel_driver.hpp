//
// detail/wheel_driver.hpp
// ~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_DETAIL_WHEEL_DRIVER_HPP
#define ASIO_WHEEL_DETAIL_WHEEL_DRIVER_HPP

// What drives a timing wheel from a clock with one alarm: the ticks, the never-early rule,
// the budgets of one turn, and the alarm's arming rule. The wheel service drives its timers
// with it (its alarm an Asio timer), heartbeat_group its members (its alarm a wheel timer).
// It starts no wait itself: its owner arms its alarm when armed_for() says so.

#include <asio_wheel/detail/config.hpp>
#include <asio_wheel/detail/exceptions.hpp>
#include <asio_wheel/detail/min_max.hpp>
#include <asio_wheel/detail/tick_scale.hpp>
#include <asio_wheel/detail/timing_wheel.hpp>

#include <chrono>
#include <cstddef>
#include <limits>
#include <optional>
#include <stdexcept>

namespace asio_wheel::detail {

// A duration of any clock, for the text of an exception: the cold paths that format and
// throw it are not templates (compiled once, see ASIO_WHEEL_DECL).
struct duration_text {
  long double ns;  // the duration in nanoseconds
  long long count; // else, when they cannot hold it: count x num/den seconds
  long long num;
  long long den;
};

// Room for describe_duration()'s longest text, "<count> x <num>/<den> s" with 20-character
// figures, and its terminator.
inline constexpr std::size_t duration_text_size = 72;

// `d` in nanoseconds where they hold it, else in its clock's own units, into `out`.
ASIO_WHEEL_DECL void describe_duration(char (&out)[duration_text_size], const duration_text& d);
// Throw std::invalid_argument: the tick `tick` is not positive or longer than 60 s.
[[noreturn, gnu::cold]] ASIO_WHEEL_DECL void throw_invalid_tick(const duration_text& tick);
// Throw std::logic_error: the tick, `current`, can no longer change.
[[noreturn, gnu::cold]] ASIO_WHEEL_DECL void throw_fixed_tick(const duration_text& current);

template <typename Clock>
class wheel_driver {
public:
  using duration = typename Clock::duration;
  using time_point = typename Clock::time_point;

  // The tick of a context's wheel unless set_tick() says otherwise, and of every
  // heartbeat_group's wheel.
  static duration default_tick() noexcept {
    return detail::max_of(duration{1},
                          std::chrono::duration_cast<duration>(std::chrono::milliseconds(1)));
  }

  // Expiries handled, and entries moved (staged ahead, see timing_wheel), per turn before
  // other handlers of the context get a turn: one upper slot can hold a large share of a
  // million entries. A move of a cold entry costs 0.1-1 us (a cache and a TLB miss; more
  // for the sparse lists of a level-1 slot in 128-byte timers), so 512 moves hold the loop
  // at most about 0.5 ms. Paced, a turn per tick, they stage 512,000 entries a second: a
  // level-2 slot of 5e5 entries in the first half of the 4 s before it comes due, and
  // what pacing leaves runs in turns at once (timing_wheel's "Pacing").
  static constexpr std::size_t expiry_budget = 4096;
  static constexpr std::size_t cascade_budget = 512;

  // `refile_whole`: for an owner that takes one entry per advance() and compares it with
  // work of its own (heartbeat_group), so that a partial cascade does not end a take early
  // (timing_wheel::set_refile_whole). Staging ahead keeps cascade_budget either way: with
  // no limit, the group staged a whole upper slot in one step, 9 to 14 ms of the loop's time
  // every 4 s at a million members.
  explicit wheel_driver(duration tick = default_tick(), bool refile_whole = false)
      : refile_whole_(refile_whole) {
    reset(tick);
  }

  wheel_driver(const wheel_driver&) = delete;
  wheel_driver& operator=(const wheel_driver&) = delete;

  // A new tick, for an empty wheel: the ticks have a boundary, and the wheel starts, at the
  // current time.
  void reset(duration tick) {
    const time_point now = Clock::now();
    scale_ = tick_scale<Clock>(tick, now);
    wheel_.emplace(scale_.floor(now));
    wheel_->set_cascade_limit(cascade_budget);
    wheel_->set_refile_whole(refile_whole_);
    settle();
  }

  // Longest tick accepted by set_tick(); beyond it a wheel is the wrong tool.
  static constexpr std::chrono::seconds max_tick{60};

  // A new tick, checked: only before the first wait (`fixed`: there has been one), since
  // deadlines computed in the old tick would be misread.
  void set_tick(duration tick, bool fixed) {
    check_tick(tick, scale_.tick(), fixed);
    if (tick != scale_.tick())
      reset(tick);
  }

  // Throws as set_tick() would, for a wheel whose tick is `current`; changes nothing. For an
  // owner of several wheels (the shards of a service), which checks before it changes any.
  static void check_tick(duration tick, duration current, bool fixed) {
    // Compared in the clock's own units: a coarse clock's extreme tick (seconds::max())
    // would overflow in nanoseconds.
    if (tick <= duration::zero() || tick > std::chrono::duration_cast<duration>(max_tick))
      throw_invalid_tick(text_of(tick));
    if (tick != current && fixed)
      throw_fixed_tick(text_of(current));
  }

  const tick_scale<Clock>& scale() const noexcept { return scale_; }
  timing_wheel& wheel() noexcept { return *wheel_; }
  const timing_wheel& wheel() const noexcept { return *wheel_; }

  // --- The never-early rule. ---

  // Whether a deadline is due now. The wheel's time never goes back by itself: for a steady
  // clock it is never ahead of the clock, so a deadline it has reached has passed, and no
  // clock read is needed. A clock that is not steady may have been stepped back behind the
  // wheel (system_clock after an NTP step), and then the wheel's time says nothing: the clock
  // decides, as Asio's timer queue compares with Clock::now(), and the wheel follows it back
  // (timing_wheel::rewind) so that the deadline can be filed at its own tick, and the alarm,
  // on the same clock, sleeps until it comes.
  bool due(tick_type deadline) {
    if (deadline > wheel_->now())
      return false;
    if constexpr (Clock::is_steady) {
      return true;
    } else {
      const tick_type now = scale_.floor(Clock::now());
      rewind(now);
      return deadline <= now;
    }
  }

  // The start of a turn at `now`, read from the clock: its tick. For a clock stepped back,
  // the wheel follows it, so that what it holds for later ticks is not due, however far the
  // wheel's time went; an entry re-filed in the turn lands after `now`, so the turn cannot
  // meet it again.
  tick_type turn_at(const time_point& now) {
    const tick_type tick = scale_.floor(now);
    if constexpr (!Clock::is_steady)
      rewind(tick);
    return tick;
  }

  // One step of a turn: at most expiry_budget entries due by `now`, in deadline order (see
  // timing_wheel::advance); false if the budget ran out first.
  template <typename OnExpire>
  bool advance(tick_type now, OnExpire&& on_expire) {
    const bool done = wheel_->advance(now, expiry_budget, static_cast<OnExpire&&>(on_expire));
    settle();
    return done;
  }

  // --- The alarm. One wait at a time, armed for the earliest tick with work: the wheel's
  // next expiry (early, never late: a filing left behind by lazy re-arm counts). ---

  // Whether the alarm must be armed to wake by `tick`: it is not armed, or armed for later.
  bool needs_alarm(tick_type tick) const noexcept { return !armed_ || tick < armed_at_; }
  // The owner has armed the alarm for `tick`.
  void armed_for(tick_type tick) noexcept {
    armed_ = true;
    armed_at_ = tick;
    settle();
  }
  // The alarm's wait completed, or was cancelled, or is about to be replaced.
  void disarm() noexcept {
    armed_ = false;
    settled_span_ = 0;
  }
  // The alarm's wait was cancelled, and its handler, to come, disarms the driver and arms the
  // alarm again for the wheel's next expiry: until then any deadline is settled (as
  // service_alarm::settled() says).
  void superseded() noexcept {
    armed_ = false;
    settled_lo_ = 0;
    settled_span_ = (std::numeric_limits<tick_type>::max)();
  }
  // Whether a deadline filed now needs no look at the alarm: it is armed early enough for
  // any wheel_.wake_for(deadline) (timing_wheel::settled_range). One compare, on the path of
  // every wait; false says nothing (the owner then asks wake_for()).
  bool settles(tick_type deadline) const noexcept { return deadline - settled_lo_ < settled_span_; }
  bool armed() const noexcept { return armed_; }
  // When the alarm wakes, while armed().
  time_point alarm_time() const noexcept { return scale_.time_of(armed_at_); }

private:
  void rewind(tick_type now) noexcept {
    wheel_->rewind(now);
    settle();
  }

  // Recomputes settled_lo_ and settled_span_: after the alarm or the wheel's time changes.
  void settle() noexcept {
    const timing_wheel::wake_range range =
        armed_ ? wheel_->settled_range(armed_at_) : timing_wheel::wake_range{};
    settled_lo_ = range.lo;
    settled_span_ = range.span;
  }

  // The figures of `d` that describe_duration() (out of line) words a message with.
  static duration_text text_of(duration d) noexcept {
    using period = typename duration::period;
    return {std::chrono::duration_cast<std::chrono::duration<long double, std::nano>>(d).count(),
            static_cast<long long>(d.count()), static_cast<long long>(period::num),
            static_cast<long long>(period::den)};
  }

  // Re-created by reset() (only while empty), hence optional. First, so that the wheel
  // lies at the start of timer_queue (see there).
  std::optional<timing_wheel> wheel_;
  bool refile_whole_;
  // Tick length and the instant of tick 0 of wheel_.
  tick_scale<Clock> scale_;
  // True while the alarm's wait is armed for armed_at_: not cancelled, not known to have
  // fired. Invariant: armed_at_ is no later than the wheel's next expiry.
  bool armed_ = false;
  tick_type armed_at_ = 0;
  // The deadlines [settled_lo_, settled_lo_ + settled_span_) that settles() accepts:
  // wheel_->settled_range(armed_at_) while armed_, every deadline while superseded(), else
  // none. Invariant: recomputed whenever armed_, armed_at_ or the wheel's time changes
  // through this driver (an owner that advances the wheel directly, as heartbeat_group does,
  // must not use settles()).
  tick_type settled_lo_ = 0;
  tick_type settled_span_ = 0;
};

} // namespace asio_wheel::detail

#if defined(ASIO_WHEEL_HEADER_ONLY)
#include <asio_wheel/detail/impl/wheel_driver.ipp>
#endif

#endif // ASIO_WHEEL_DETAIL_WHEEL_DRIVER_HPP
