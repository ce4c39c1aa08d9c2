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

#include <asio_wheel/detail/asio_forward.hpp>

#include <chrono>
#include <cstddef>
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
 * asio_wheel::heartbeat hb(sock.get_executor(), {.ping_after = 15s, .drop_after = 45s});
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
 * @par Precision
 * As basic_idle_timer: never early; late by at most a wheel tick plus the event loop's
 * latency.
 *
 * @par Thread Safety
 * @e Distinct @e objects: Safe.@n
 * @e Shared @e objects: Unsafe, except touch(), which any thread may call at any time.
 *
 * @par Lifetime
 * As with Asio's composed operations, the object must outlive an async_next() that has
 * not been cancelled: when a threshold's deadline passes, the completion reads the activity
 * mark before calling the handler. Destroying the object aborts a wait still pending, which
 * is then safe; but a wait whose deadline has passed may have its completion queued already
 * (it cannot be aborted any more), and that completion reads the object. Keep the object
 * alive from the handler (as a connection's shared_ptr does), or destroy it from there.
 * heartbeat_group has no such rule.
 */
template <typename Clock, typename WaitTraits = asio::wait_traits<Clock>,
          typename Executor = asio::any_io_executor>
class basic_heartbeat : public detail::activity_timer<Clock, WaitTraits, Executor> {
  using base = detail::activity_timer<Clock, WaitTraits, Executor>;

public:
  using typename base::duration;
  using typename base::executor_type;
  using typename base::time_point;
  using clock_type = Clock;

  /// What async_next() reports.
  enum class event {
    ping, ///< The peer has been quiet for ping_after: time to probe it.
    drop  ///< The peer has been silent for drop_after: time to close.
  };

  /// The two thresholds, both measured from the last touch().
  struct options {
    duration ping_after;
    duration drop_after;
  };

  /// Constructor. Construction counts as input.
  /**
   * @throws std::invalid_argument unless 0 < ping_after < drop_after.
   */
  basic_heartbeat(const executor_type& ex, const options& opts)
      : base(ex), options_(checked(opts)) {}

  /// Constructor. Construction counts as input.
  template <typename ExecutionContext>
  basic_heartbeat(
      ExecutionContext& context, const options& opts,
      std::enable_if_t<std::is_convertible_v<ExecutionContext&, asio::execution_context&>>* =
          nullptr)
      : base(context), options_(checked(opts)) {}

  const options& get_options() const noexcept { return options_; }

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
   * terminal, partial and total cancellation abort the wait.
   */
  template <typename Token = asio::default_completion_token_t<executor_type>>
  auto async_next(Token&& token = asio::default_completion_token_t<executor_type>()) {
    return asio::async_initiate<Token, void(error_code, event)>(
        typename base::template initiation<basic_heartbeat>(this), token);
  }

private:
  friend typename base::template initiation<basic_heartbeat>;
  template <typename, typename>
  friend class detail::rearming_handler;

  using rule = detail::heartbeat_rule<time_point>;

  static options checked(const options& opts) {
    if (opts.ping_after <= duration::zero() || opts.drop_after <= opts.ping_after)
      throw std::invalid_argument("asio_wheel::heartbeat: need 0 < ping_after < drop_after");
    return opts;
  }

  // The first round always goes through the timer, so the handler is never called from
  // inside async_next().
  template <typename Handler>
  void start(detail::rearming_handler<basic_heartbeat, Handler>&& h) {
    arm(std::move(h));
  }

  // Waits for the next threshold of the current quiet spell: the ping, or once it has been
  // reported, the drop.
  template <typename Handler>
  void arm(detail::rearming_handler<basic_heartbeat, Handler>&& h) {
    this->wait_until(rule::next_threshold(options_, this->activity_.last(), pinged_for_),
                     std::move(h));
  }

  template <typename Handler>
  static void on_wait(detail::rearming_handler<basic_heartbeat, Handler>&& h,
                      const error_code& ec) {
    if (ec) {
      std::move(h.handler())(ec, event::drop);
      return;
    }
    basic_heartbeat& self = h.owner();
    const time_point last = self.activity_.last();
    switch (rule::due(self.options_, last, self.pinged_for_, clock_type::now())) {
    case rule::step::drop:
      std::move(h.handler())(error_code(), event::drop);
      return;
    case rule::step::ping:
      self.pinged_for_ = last;
      std::move(h.handler())(error_code(), event::ping);
      return;
    case rule::step::wait: // touched since: the thresholds moved
      if (!self.rewait_until(
              rule::next_threshold(self.options_, self.activity_.last(), self.pinged_for_), h))
        std::move(h.handler())(error_code(asio::error::no_memory), event::drop);
      return;
    }
  }

  options options_;
  // The activity mark the last ping was reported for: one ping per quiet spell.
  time_point pinged_for_{time_point::min()};
};

/// A heartbeat on std::chrono::steady_clock.
using heartbeat = basic_heartbeat<std::chrono::steady_clock>;

} // namespace asio_wheel

#endif // ASIO_WHEEL_HEARTBEAT_HPP
