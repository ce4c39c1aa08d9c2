//
// detail/heartbeat_rule.hpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_DETAIL_HEARTBEAT_RULE_HPP
#define ASIO_WHEEL_DETAIL_HEARTBEAT_RULE_HPP

#include <asio_wheel/detail/saturating_time.hpp>

#include <chrono>

namespace asio_wheel::detail {

// When a quiet peer is pinged and dropped, shared by heartbeat (one wait per connection) and
// heartbeat_group (one wait for all); `Options` has the two thresholds, ping_after and
// drop_after. A quiet spell begins at the last activity `last`; the ping is reported once
// per spell, which `pinged_for == last` records; a zero ping_after means no ping at all.
// Every threshold is measured from `last`, so a peer that answers a ping starts a new spell
// and may be pinged again.
template <typename TimePoint>
struct heartbeat_rule {
  enum class step {
    wait, // nothing due yet: look again at next_threshold()
    ping, // record pinged_for = last, report the ping
    drop  // report the drop
  };

  // The next time something may be due in the spell that began at `last`.
  template <typename Options>
  static TimePoint next_threshold(const Options& o, const TimePoint& last,
                                  const TimePoint& pinged_for) noexcept {
    return saturating_add(last, may_ping(o, last, pinged_for) ? o.ping_after : o.drop_after);
  }

  // What is due at `now`. Never reports a threshold before it has passed.
  template <typename Options>
  static step due(const Options& o, const TimePoint& last, const TimePoint& pinged_for,
                  const TimePoint& now) noexcept {
    if (now >= saturating_add(last, o.drop_after))
      return step::drop;
    if (may_ping(o, last, pinged_for) && now >= saturating_add(last, o.ping_after))
      return step::ping;
    return step::wait;
  }

  // Whether the next event of the spell that began at `last` is its ping (else its drop).
  template <typename Options>
  static bool may_ping(const Options& o, const TimePoint& last,
                       const TimePoint& pinged_for) noexcept {
    return o.ping_after != TimePoint::duration::zero() && pinged_for != last;
  }
};

} // namespace asio_wheel::detail

#endif // ASIO_WHEEL_DETAIL_HEARTBEAT_RULE_HPP
