//
// heartbeat.hpp
// ~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_HEARTBEAT_HPP
#define ASIO_WHEEL_HEARTBEAT_HPP

#include <asio_wheel/detail/activity_timer.hpp>
#include <asio_wheel/detail/heartbeat_rule.hpp>
#include <asio_wheel/timeout_scale.hpp>

#include <asio_wheel/detail/asio_forward.hpp>
#include <asio_wheel/detail/exceptions.hpp>

#include <chrono>
#include <cstddef>
#include <optional>
#include <stdexcept>
#include <utility>

namespace asio_wheel {

/// The keep-alive pattern of a server: ping a quiet peer, drop a silent one.
/**
 * touch() on every input; async_next() completes with event::ping once the peer has been
 * quiet for @c ping_after (once per quiet spell), and with event::drop once it has been
 * quiet for @c drop_after. What a ping or a drop means is the caller's business:
 *
 * @code
 * asio_wheel::heartbeat hb(sock.get_executor(), {15s, 45s}); // ping, drop
 * for (;;) {
 *   auto [ec, ev] = co_await hb.async_next(asio::as_tuple(asio::use_awaitable));
 *   if (ec) break;                                   // cancelled
 *   if (ev == asio_wheel::heartbeat::event::drop) { sock.close(); break; }
 *   co_await async_write(sock, asio::buffer("PING\n", 5), asio::use_awaitable);
 * }
 * // and in the reader: hb.touch();
 * @endcode
 *
 * Like basic_idle_timer, marking input is a clock read and one compare-exchange, and the
 * wheel is re-armed lazily.
 *
 * @par Thresholds that shrink under load
 * As for basic_idle_timer, either threshold may be a range <tt>{min, max}</tt>, put at
 * <tt>min + ceil(f * (max - min))</tt> by the factor @c f of the context's timeout_scale;
 * a change of the factor re-judges a pending async_next() by the new thresholds (a peer
 * already quiet for longer than one gets it in the next turn or so, never before it).
 * @code
 * asio_wheel::heartbeat hb(ex, {{5s, 15s}, {10s, 60s}});
 * @endcode
 *
 * @par Precision
 * As basic_idle_timer: never early (for a range, with respect to the threshold at the factor
 * read when the event is judged); late by at most a wheel tick plus the event loop's
 * latency, for a range however the wait came to its span's queue. That holds for every
 * event: a peer touched after its ping, while async_next() waits for the drop, starts a
 * spell whose ping is due ping_after after that touch, and gets it then (the wait for the
 * drop looks every ping_after.min for a touch since: one wheel re-arm each, not one per
 * touch()).
 *
 * @par Thread Safety
 * @e Distinct @e objects: Safe.@n
 * @e Shared @e objects: Unsafe, except touch(), which any thread may call at any time (and
 * timeout_scale::set()).
 *
 * @par Lifetime
 * As asio::steady_timer: the object may be destroyed at any time, from any handler or from
 * another thread running the context (not concurrently with another call on it). A pending
 * async_next() then completes exactly once: with operation_aborted if it was still
 * waiting; if its completion was already queued, as cancel() would have decided at the
 * destruction (see the destructor).
 */
template <typename Clock, typename WaitTraits = asio::wait_traits<Clock>,
          typename Executor = asio::any_io_executor>
class basic_heartbeat : public detail::activity_timer<Clock, WaitTraits, Executor> {
  using base = detail::activity_timer<Clock, WaitTraits, Executor>;

public:
  using typename base::duration;
  using typename base::executor_type;
  using typename base::range;
  using typename base::time_point;
  /// The clock type.
  using clock_type = Clock;

#if defined(ASIO_WHEEL_DOXYGEN)
  // The members inherited from detail::activity_timer, declared for the reference only.

  /// Marks input from the peer now: both thresholds count from the latest touch().
  /** @copydetails basic_idle_timer::touch() */
  void touch() noexcept;

  /// @copydoc basic_idle_timer::last_activity()
  time_point last_activity() const noexcept;

  /// @copydoc basic_idle_timer::get_executor()
  executor_type get_executor() noexcept;
#endif

  /// What async_next() reports.
  enum class event {
    ping, ///< The peer has been quiet for ping_after: time to probe it.
    drop  ///< The peer has been silent for drop_after: time to close.
  };

  /// The two thresholds, both measured from the last touch().
  /**
   * Each is a duration or a range <tt>{min, max}</tt> (see timeout_range). Valid when
   * 0 < min <= max for each, and the ping comes first at every factor:
   * ping_after.min < drop_after.min and ping_after.max < drop_after.max.
   */
  struct options {
    range ping_after; ///< Quiet this long since the last touch(): event::ping.
    range drop_after; ///< Silent this long since the last touch(): event::drop.
  };

  /// Constructor. Construction counts as input.
  /**
   * @throws std::invalid_argument unless the options are valid (for durations:
   * 0 < ping_after < drop_after).
   */
  basic_heartbeat(const executor_type& ex, const options& opts)
      : base(ex), options_(checked(opts)) {
    this->use_range(options_.ping_after);
    this->use_range(options_.drop_after);
  }

  /// Constructor. Construction counts as input.
  template <typename ExecutionContext>
  basic_heartbeat(
      ExecutionContext& context, const options& opts,
      std::enable_if_t<std::is_convertible_v<ExecutionContext&, asio::execution_context&>>* =
          nullptr)
      : base(context), options_(checked(opts)) {
    this->use_range(options_.ping_after);
    this->use_range(options_.drop_after);
  }

  /// Destructor.
  /**
   * As asio::steady_timer's: an async_next() still waiting completes with
   * asio::error::operation_aborted; one whose completion is already queued (or running on
   * another thread) completes as cancel() would have decided now: with the event due then,
   * else with operation_aborted.
   */
  ~basic_heartbeat() {
    this->detach([this] { return due_now(); });
  }

  /// The thresholds.
  const options& get_options() const noexcept {
    return options_;
  }

  /// Cancels the pending async_next().
  /**
   * A wait still waiting completes with asio::error::operation_aborted. One whose
   * completion is already queued (a threshold was found reached, and its handler has not
   * run yet) is judged at this call, and its outcome is then fixed, whatever touch() or
   * timeout_scale::set() comes before it runs: if a threshold in force has been reached, it
   * completes with that event and is not counted, as asio::steady_timer's wait does when
   * cancel() comes after its expiry; otherwise it completes with operation_aborted. A
   * cancellation of a pending async_next() is never lost.
   *
   * @return The number of waits that will complete with operation_aborted (0 or 1).
   *
   * @throws std::bad_alloc if the wait, living in the timer, cannot get the block it moves
   * to; nothing changed then.
   */
  std::size_t cancel() {
    return this->cancel_op([this] { return due_now(); });
  }

  /// Waits for the next ping or drop.
  /**
   * @par Completion Signature
   * @code void(asio::error_code, event) @endcode
   * On an error the event is meaningless: operation_aborted on cancel() or destruction;
   * asio::error::no_memory if, touched since it was armed, the wait could not wait again for
   * want of memory (only a handler too large to live in the timer, more than two pointers,
   * needs any).
   *
   * @par Per-Operation Cancellation
   * terminal, partial and total cancellation abort the wait, with the rule of cancel(): an
   * emit that comes after the wait's completion was queued is judged when it is emitted
   * (the event if a threshold in force has been reached then, else operation_aborted),
   * never lost.
   *
   * One wait at a time: start the next from the handler of the previous one, or once that
   * has run. A wait that cancel() took out of the wheel (it was still waiting) no longer
   * counts; one whose completion was queued counts until its handler has run. Another
   * started while one counts is not detected, and both then complete wrongly (as two
   * concurrent reads on one Asio stream would).
   */
  template <typename Token = asio::default_completion_token_t<executor_type>>
  auto async_next(Token&& token = asio::default_completion_token_t<executor_type>()) {
    return asio::async_initiate<Token, void(error_code, event)>(
        typename base::template initiation<basic_heartbeat>(this), token);
  }

private:
  friend base;
  friend typename base::template initiation<basic_heartbeat>;

  template <typename, typename>
  friend class detail::rearming_handler;

  using rule = detail::heartbeat_rule<time_point>;

  // The thresholds at one factor, for the rule.
  struct thresholds {
    duration ping_after;
    duration drop_after;
  };

  static options checked(const options& opts) {
    const range& p = opts.ping_after;
    const range& d = opts.drop_after;
    if (p.min > p.max || d.min > d.max)
      detail::throw_exception(
          std::invalid_argument("asio_wheel::heartbeat: a threshold range {min, max} needs "
                                "min <= max (a plain duration is {d, d})"));
    if (p.min <= duration::zero() || d.min <= p.min || d.max <= p.max)
      detail::throw_exception(
          std::invalid_argument("asio_wheel::heartbeat: need 0 < ping_after < drop_after "
                                "(for ranges: 0 < ping_after.min < drop_after.min and "
                                "ping_after.max < drop_after.max)"));
    return opts;
  }

  thresholds at(double f) const noexcept {
    return {options_.ping_after.at(f), options_.drop_after.at(f)};
  }

  // For a cancellation that comes after the completion was queued: whether an event is due
  // now, which is then fixed (decided_) for that completion to report.
  bool due_now() {
    const time_point last = this->activity_.last();
    const auto step = rule::due(at(this->factor()), last, pinged_for_, clock_type::now());
    if (step == rule::step::wait)
      return false;
    this->decided_ping_ = step == rule::step::ping;
    // Marked sent by the completion that reports it (on_wait), not here: a slot's emit
    // judges before it knows whether the wait is still in the wheel, where it aborts it.
    decided_for_ = last;
    return true;
  }

  // The first round always goes through the timer, so the handler is never called from
  // inside async_next(). A wait aborted by its cancellation slot may have left the timer in
  // its queue.
  template <typename Handler>
  void start(detail::rearming_handler<basic_heartbeat, Handler>&& h) {
    this->leave_queue();
    const time_point last = this->activity_.last();
    if (!pinged(last)) {
      this->wait_for(options_.ping_after, last, std::move(h));
      return;
    }
    const time_point now = clock_type::now();
    this->wait_for(options_.drop_after, last, std::move(h), now, look_by(now));
  }

  // Whether the spell that began at `last` has had its ping: it waits for its drop then,
  // else for its ping. A heartbeat always pings (0 < ping_after): once per spell.
  bool pinged(const time_point& last) const noexcept {
    return !rule::may_ping(at(1.0), last, pinged_for_);
  }

  // While a pinged spell waits for its drop, a touch() from `now` on starts a spell whose
  // ping is due ping_after after it: at now + ping_after.min at the earliest, at any factor.
  // The wait ends by then to look (touch() only stores), so that ping is not late; without
  // a touch, it waits on (one look per ping_after.min of silence until the drop).
  time_point look_by(const time_point& now) const noexcept {
    return detail::saturating_add(now, options_.ping_after.min);
  }

  // From a wait's own completion: waits for the next threshold. False, with `h` untouched,
  // if it could not for want of memory (see rewait_for()).
  template <typename Handler>
  bool arm(detail::rearming_handler<basic_heartbeat, Handler>& h, const time_point& last,
           const time_point& now) {
    if (!pinged(last))
      return this->rewait_for(options_.ping_after, last, h, now);
    return this->rewait_for(options_.drop_after, last, h, now, look_by(now));
  }

  template <typename Handler>
  static void on_wait(detail::rearming_handler<basic_heartbeat, Handler>&& h,
                      const error_code& ec) {
    // On an error the object may be gone (destroyed with its wait): nothing reads it.
    if (ec) {
      std::move(h.handler())(ec, event::drop);
      return;
    }
    const error_code aborted(asio::error::operation_aborted);
    typename base::completion_lock lock(h.link());
    if (lock.gone()) {
      // Destroyed once this completion was queued, and judged then (see the destructor).
      using verdict = detail::activity_link::verdict;
      const verdict v = lock.outcome();
      lock.unlock();
      std::move(h.handler())(v == verdict::abort ? aborted : ec,
                             v == verdict::ping ? event::ping : event::drop);
      return;
    }
    basic_heartbeat& self = h.owner();
    self.leave_queue();
    using state = typename base::op_state;
    if (self.state() == state::abort) {
      self.end_op();
      lock.unlock();
      std::move(h.handler())(aborted, event::drop);
      return;
    }
    if (self.state() == state::complete) {
      // Cancelled after this completion was queued, with an event due then (see cancel()).
      const event ev = self.decided_ping_ ? event::ping : event::drop;
      if (self.decided_ping_)
        self.pinged_for_ = self.decided_for_; // whatever came before: a touch, say
      self.end_op();
      lock.unlock();
      std::move(h.handler())(error_code(), ev);
      return;
    }
    const time_point now = clock_type::now();
    const time_point last = self.activity_.last();
    switch (rule::due(self.at(self.factor()), last, self.pinged_for_, now)) {
    case rule::step::drop:
      self.end_op();
      lock.unlock();
      std::move(h.handler())(error_code(), event::drop);
      return;
    case rule::step::ping:
      self.pinged_for_ = last;
      self.end_op();
      lock.unlock();
      std::move(h.handler())(error_code(), event::ping);
      return;
    case rule::step::wait:
      // Touched since (the thresholds moved), past a range's minimum, or the factor rose.
      if (!self.arm(h, last, now)) {
        self.end_op();
        lock.unlock();
        std::move(h.handler())(error_code(asio::error::no_memory), event::drop);
      }
      return;
    }
  }

  options options_;
  // The activity mark the last ping was reported for: one ping per quiet spell.
  time_point pinged_for_{(time_point::min)()};
  // The activity mark of a ping decided by a cancellation after its completion was queued
  // (due_now()): pinged_for_ takes it when that completion reports the ping.
  time_point decided_for_{(time_point::min)()};
};

/// A heartbeat on std::chrono::steady_clock.
using heartbeat = basic_heartbeat<std::chrono::steady_clock>;

} // namespace asio_wheel

#endif // ASIO_WHEEL_HEARTBEAT_HPP
