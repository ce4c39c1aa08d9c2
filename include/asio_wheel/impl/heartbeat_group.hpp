//
// impl/heartbeat_group.hpp
// ~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_IMPL_HEARTBEAT_GROUP_HPP
#define ASIO_WHEEL_IMPL_HEARTBEAT_GROUP_HPP

// The machinery of basic_heartbeat_group, out of the class body (Asio's impl/ pattern):
// included at the bottom of heartbeat_group.hpp, and including it, so that either header
// may come first. The definitions are declared inline, as they were in the class body, so
// that the compiler weighs them for inlining as before.

#include <asio_wheel/detail/exceptions.hpp>
#include <asio_wheel/detail/min_max.hpp>
#include <asio_wheel/heartbeat_group.hpp>

#include <atomic>
#include <memory>
#include <optional>
#include <stdexcept>

namespace asio_wheel {

// A group with a range listens to its context's scale; one without never reads it.
template <typename Clock, typename WaitTraits, typename Executor>
inline void basic_heartbeat_group<Clock, WaitTraits, Executor>::start() {
  if (!options_.ping_after.is_fixed() || !options_.drop_after.is_fixed()) {
    scale_source_ = &timeout_scale::of(ex_);
    this->listen(*scale_source_);
  }
}

// What the group's wait refers to. The wait may have completed, its handler queued, when
// the group is destroyed (by a handler of the same batch, say), so the handler cannot
// point at the group itself. Used on the group's executor only (and copied, never
// changed, by scale_changed() on other threads).
template <typename Clock, typename WaitTraits, typename Executor>
struct basic_heartbeat_group<Clock, WaitTraits, Executor>::anchor {
  basic_heartbeat_group* group; // nullptr once the group is destroyed
  // Here, not in the group: the event handler may destroy the group, and goes on running
  // (its captures with it) until it returns; run() holds the anchor meanwhile.
  event_handler on_event;
};

// The wait handler: two pointers, so the wait lives in the wheel timer without allocating.
template <typename Clock, typename WaitTraits, typename Executor>
struct basic_heartbeat_group<Clock, WaitTraits, Executor>::wake_handler {
  std::shared_ptr<anchor> to;
  // An aborted wait was re-armed or is the group's destruction: nothing to do.
  void operator()(const error_code& ec) const {
    if (!ec && to->group != nullptr)
      to->group->on_wake();
  }
};

// Posted by scale_changed(): the factor changed.
template <typename Clock, typename WaitTraits, typename Executor>
struct basic_heartbeat_group<Clock, WaitTraits, Executor>::rescale_handler {
  std::shared_ptr<anchor> to;
  void operator()() const {
    if (to->group != nullptr)
      to->group->on_rescale();
  }
};

template <typename Clock, typename WaitTraits, typename Executor>
inline auto basic_heartbeat_group<Clock, WaitTraits, Executor>::checked(const options& opts)
    -> options {
  const range& p = opts.ping_after;
  const range& d = opts.drop_after;
  if (p.min < duration::zero() || d.min < duration::zero())
    detail::throw_exception(
        std::invalid_argument("asio_wheel::heartbeat_group: need 0 <= ping_after < "
                              "drop_after (a zero ping_after means no ping); a threshold "
                              "is negative"));
  if (p.min > p.max || d.min > d.max)
    detail::throw_exception(
        std::invalid_argument("asio_wheel::heartbeat_group: a threshold range {min, max} "
                              "needs min <= max (a plain duration is {d, d})"));
  if (p.min == duration::zero() && p.max != duration::zero())
    detail::throw_exception(
        std::invalid_argument("asio_wheel::heartbeat_group: ping_after {0, max} would ping "
                              "at once under full pressure; its minimum must be positive "
                              "(or {0, 0}: no ping)"));
  if (d.min <= p.min || d.max <= p.max)
    detail::throw_exception(
        std::invalid_argument("asio_wheel::heartbeat_group: need 0 <= ping_after < "
                              "drop_after (a zero ping_after means no ping); for ranges, "
                              "both ping_after.min < drop_after.min and ping_after.max < "
                              "drop_after.max"));
  return opts;
}

template <typename Clock, typename WaitTraits, typename Executor>
inline auto basic_heartbeat_group<Clock, WaitTraits, Executor>::checked(event_handler on_event)
    -> event_handler {
  if (!on_event)
    detail::throw_exception(
        std::invalid_argument("asio_wheel::heartbeat_group: the event handler is empty"));
  return on_event;
}

// The factor in force; 1 for a group that does not listen (its ranges are fixed).
template <typename Clock, typename WaitTraits, typename Executor>
inline double basic_heartbeat_group<Clock, WaitTraits, Executor>::factor() const noexcept {
  return scale_source_ != nullptr ? scale_source_->factor() : 1.0;
}

template <typename Clock, typename WaitTraits, typename Executor>
inline auto basic_heartbeat_group<Clock, WaitTraits, Executor>::at(double f) const noexcept
    -> thresholds {
  return {options_.ping_after.at(f), options_.drop_after.at(f)};
}

// Unlinks a watched member from wherever it waits.
template <typename Clock, typename WaitTraits, typename Executor>
inline void basic_heartbeat_group<Clock, WaitTraits, Executor>::take_out(member& m) noexcept {
  looks_.remove(m);
  if (!queues_.remove(m))
    driver_.wheel().remove(m);
}

// Files a watched member for `when`, arming the wait if it is now the earliest. A tick
// the wheel has reached is judged by the driver's rule first: for a clock stepped back,
// the wheel follows the clock, so that the member is filed at its own tick (rather than
// due at once, found not due by the rule, and filed again, every wake).
template <typename Clock, typename WaitTraits, typename Executor>
inline void basic_heartbeat_group<Clock, WaitTraits, Executor>::file(member& m,
                                                                     const time_point& when) {
  const tick_type tick = driver_.scale().ceil(when);
  driver_.due(tick);
  driver_.wheel().insert(m, tick);
  if (!delivering_)
    arm();
}

// Nothing left to watch: lets the context's run() return, as after a timer's cancel().
template <typename Clock, typename WaitTraits, typename Executor>
inline void basic_heartbeat_group<Clock, WaitTraits, Executor>::disarm() noexcept {
  if (!driver_.armed())
    return;
  ASIO_WHEEL_TRY {
    timer_.cancel();
    driver_.disarm();
  }
  ASIO_WHEEL_CATCH_ALL {
    // No memory for the aborted wait: it stays armed and wakes to find nothing due.
  }
}

// Arms the wait for the earliest of the wheel's next expiry and the queues' heads, unless
// it is armed for that or earlier (the driver's rule: an early wake finds nothing due and
// arms again); with nothing to wait for (a run that dropped the last member, on a
// rescale), disarms it.
template <typename Clock, typename WaitTraits, typename Executor>
inline void basic_heartbeat_group<Clock, WaitTraits, Executor>::arm() {
  std::optional<tick_type> next = driver_.wheel().next_expiry();
  time_point head{};
  if (scale_source_ != nullptr) {
    const double f = factor();
    time_point look{};
    const bool queued = queues_.earliest(f, head);
    if (look_due(f, look) && (!queued || look < head))
      head = look;
    if (queued || !looks_.empty()) {
      const tick_type t = driver_.scale().ceil(head);
      if (!next || t < *next)
        next = t;
    }
  }
  if (!next) {
    disarm();
    return;
  }
  if (!driver_.needs_alarm(*next))
    return;
  // Disarmed first: if arming throws, no wait is known to be armed, and the next arm()
  // tries.
  driver_.disarm();
  timer_.expires_at(driver_.scale().time_of(*next));
  timer_.async_wait(wake_handler{anchor_});
  driver_.armed_for(*next);
}

// On the thread that calls timeout_scale::set(), with the scale's lock held: hands the
// news to the group's executor, once however many changes come before it runs.
template <typename Clock, typename WaitTraits, typename Executor>
inline void basic_heartbeat_group<Clock, WaitTraits, Executor>::scale_changed() {
  if (rescale_posted_.exchange(true, std::memory_order_acq_rel))
    return;
  ASIO_WHEEL_TRY {
    asio::post(ex_, rescale_handler{anchor_});
  }
  ASIO_WHEEL_CATCH_ALL {
    rescale_posted_.store(false, std::memory_order_release);
    ASIO_WHEEL_RETHROW;
  }
}

// The factor changed: the members now past their thresholds get their events in this run
// (bounded as any run), and the wait is re-armed for the queues' new heads. Inside a run
// (an event handler that runs the context), nothing: the run re-arms when it ends.
template <typename Clock, typename WaitTraits, typename Executor>
inline void basic_heartbeat_group<Clock, WaitTraits, Executor>::on_rescale() {
  // Before the factor is read: a change after this posts again.
  rescale_posted_.store(false, std::memory_order_release);
  if (!delivering_)
    run();
}

template <typename Clock, typename WaitTraits, typename Executor>
inline void basic_heartbeat_group<Clock, WaitTraits, Executor>::on_wake() {
  driver_.disarm();
  ++wakeups_;
  run();
}

// Delivers what is due, then arms the wait for what is next.
template <typename Clock, typename WaitTraits, typename Executor>
inline void basic_heartbeat_group<Clock, WaitTraits, Executor>::run() {
  // The event handler may destroy the group: `still` tells, and outlives it.
  const std::shared_ptr<anchor> still = anchor_;
  // Destroyed by its event handler: the handler, now returned, goes too (see ~group).
  const auto release_handler = [&still] {
    [[maybe_unused]] const event_handler gone = std::move(still->on_event);
  };
  delivering_ = true;
  ASIO_WHEEL_TRY {
    deliver(*still);
  }
  ASIO_WHEEL_CATCH_ALL {
    if (still->group != nullptr) {
      delivering_ = false;
      arm();
    } else {
      release_handler();
    }
    ASIO_WHEEL_RETHROW;
  }
  if (still->group != nullptr) {
    delivering_ = false;
    arm();
  } else {
    release_handler();
  }
}

// Files a member taken at `now` (the wheel at `now_tick`) for the next threshold of its
// spell: in the wheel while that threshold's minimum is ahead (or for a fixed threshold),
// past now_tick so that deliver() cannot meet it again; else in that threshold's queue,
// keyed by its own minimum (or, if the queue cannot grow, in the wheel at the range's
// maximum: late under memory pressure, never early).
//
// A spell that has had its ping waits for its drop; but a touch() from `now` on starts a
// spell whose ping is due ping_after after it, at now + ping_after.min at the earliest (at
// any factor), which only a look at the member finds (touch() only stores). So the member
// is looked at by then: in the wheel at that instant while the drop's minimum is ahead
// (neither can move); past it, the member waits in the drop's queue, which follows the
// factor, and in the looks (looks_), keyed by now + ping_after.min, which wakes
// it at now + ping_after at the factor in force, no later than any such ping. Whichever
// wakes first takes the member out of both (take_due()). If the looks cannot grow, the
// ping of a touch since may wait for the drop (late under memory pressure).
template <typename Clock, typename WaitTraits, typename Executor>
inline void basic_heartbeat_group<Clock, WaitTraits, Executor>::place(member& m,
                                                                      const thresholds& th,
                                                                      const time_point& last,
                                                                      const time_point& now,
                                                                      tick_type now_tick) noexcept {
  const bool pinging = rule::may_ping(th, last, m.pinged_for_);
  const std::size_t q = pinging ? queues::ping : queues::drop;
  const range& r = queues_.range(q);
  const time_point min_at = detail::saturating_add(last, r.min);
  // The instant to look by, in the drop's wait: none without pings.
  const bool looks = !pinging && th.ping_after != duration::zero();
  const time_point look_at =
      looks ? detail::saturating_add(now, options_.ping_after.min) : (time_point::max)();
  const auto in_wheel = [&](const time_point& at) {
    driver_.wheel().insert(m, detail::max_of(driver_.scale().ceil(at), now_tick + 1));
  };
  if (r.is_fixed() || now < min_at) {
    in_wheel(detail::min_of(min_at, look_at));
    return;
  }
  ASIO_WHEEL_TRY {
    queues_.push(q, m, min_at);
  }
  ASIO_WHEEL_CATCH_ALL {
    in_wheel(detail::min_of(detail::saturating_add(last, r.max), look_at));
    return;
  }
  if (looks) {
    ASIO_WHEEL_TRY {
      looks_.push(m, look_at);
    }
    ASIO_WHEEL_CATCH_ALL {
      // No look: a touch since is found at the drop's time (late under memory pressure).
    }
  }
}

// Files a member taken before its event's tick (see deliver()) for that event: in the
// event's queue when its threshold is a range, where it follows a change of the factor, as
// the members it must keep its place among do; else (or if the queue cannot grow) in the
// wheel at `event_at`. A drop found due supersedes the spell's ping, as rule::due says: it
// stays superseded if the factor goes up before the drop is delivered.
template <typename Clock, typename WaitTraits, typename Executor>
inline void basic_heartbeat_group<Clock, WaitTraits, Executor>::defer(member& m, bool ping,
                                                                      const time_point& last,
                                                                      tick_type event_at) noexcept {
  const std::size_t q = ping ? queues::ping : queues::drop;
  if (!ping)
    m.pinged_for_ = last;
  if (scale_source_ != nullptr && !queues_.range(q).is_fixed()) {
    ASIO_WHEEL_TRY {
      queues_.push(q, m, detail::saturating_add(last, queues_.range(q).min));
      return;
    }
    ASIO_WHEEL_CATCH_ALL {
      // No room: in the wheel, at the tick the factor in force gives.
    }
  }
  driver_.wheel().insert(m, event_at);
}

// The member to look at next, in the order of the instants they are due at: the wheel's
// due members and the heads of the queues due by `now`. nullptr when none is due.
template <typename Clock, typename WaitTraits, typename Executor>
inline auto basic_heartbeat_group<Clock, WaitTraits, Executor>::take_due(const time_point& now,
                                                                         tick_type now_tick,
                                                                         tick_type& taken_at,
                                                                         std::size_t& run_moves)
    -> member* {
  const double f = scale_source_ != nullptr ? factor() : 1.0;
  time_point q_due{};
  const std::size_t q = scale_source_ != nullptr ? queues_.due_head(now, f, q_due) : queues::none;
  // The looks' head, if due by now before the queues' (looks exist only with a range).
  time_point l_due{};
  const bool look = look_due(f, l_due) && l_due <= now && (q == queues::none || l_due < q_due);
  if (look)
    q_due = l_due;
  member* due = nullptr;
  detail::timing_wheel& wheel = driver_.wheel();
  // A head due before the wheel's time (the factor went down since the wheel passed it) comes
  // before every entry of the wheel, none of which is due before its time: advance() would
  // take those first, since it never goes back.
  const bool head = q != queues::none || look;
  if (!head || driver_.scale().ceil(q_due) >= wheel.now()) {
    // The staging ahead has one allowance for the whole run, not one per step: a step that
    // takes a queue's head finds nothing due in the wheel and goes on to stage, and a run of
    // such steps re-filed a whole slot in urgent staging. A window come due is re-filed
    // whole whatever the allowance (set_refile_whole), so a step always takes what is due.
    constexpr std::size_t allowance = detail::wheel_driver<Clock>::cascade_budget;
    wheel.set_cascade_limit(run_moves < allowance ? allowance - run_moves : 0);
    wheel.advance(head ? detail::min_of(now_tick, driver_.scale().ceil(q_due)) : now_tick, 1,
                  [&due](detail::wheel_node& node) { due = &static_cast<member&>(node); });
    run_moves += wheel.last_moves();
    largest_run_moves_ = detail::max_of(largest_run_moves_, run_moves);
  }
  if (due != nullptr) {
    // The wheel's time is the entry's tick (or, for an entry filed late, past it).
    taken_at = detail::max_of(due->deadline(), wheel.now());
  } else if (look) {
    // Its look: the member leaves the drop's queue, to be judged.
    taken_at = driver_.scale().ceil(q_due);
    due = &looks_.pop_front();
    queues_.remove(*due);
    return due;
  } else if (q != queues::none) {
    taken_at = driver_.scale().ceil(q_due);
    due = &static_cast<member&>(queues_.pop(q));
  }
  if (due != nullptr)
    looks_.remove(*due);
  return due;
}

// When the first of the looks is due at factor f; false if there is none.
template <typename Clock, typename WaitTraits, typename Executor>
inline bool
basic_heartbeat_group<Clock, WaitTraits, Executor>::look_due(double f,
                                                             time_point& at) const noexcept {
  if (looks_.empty())
    return false;
  const range& p = options_.ping_after;
  at = detail::saturating_add(looks_.front_key(), p.at(f) - p.min);
  return true;
}

// Takes the due members one at a time, so that the event handler runs outside the wheel's
// advance() and may change the wheel, or destroy the group (`still` then says so).
//
// The events of a run come in the order of their thresholds. A member is taken at the tick
// it was filed for, which is not always its event's: a pinged member is filed for its look
// (ping_after after the ping) when that comes before its drop, and a run that comes late
// (a stalled loop) finds the drop due too; or a member touched after its look was filed
// is found with a ping due later than the look. Such a member is filed again at its
// event's tick, so that the members due in between come first: this run reaches that tick
// unless the event falls within now_tick's tick, after its instant (the next run's then).
template <typename Clock, typename WaitTraits, typename Executor>
inline void basic_heartbeat_group<Clock, WaitTraits, Executor>::deliver(const anchor& still) {
  time_point now = clock_type::now();
  // A clock stepped back: members filed after now_tick are not due (see file()).
  tick_type now_tick = driver_.turn_at(now);
  std::size_t run_moves = 0;
  for (std::size_t taken = 0; taken < members_per_run; ++taken) {
    tick_type taken_at = 0;
    member* due = take_due(now, now_tick, taken_at, run_moves);
    if (due == nullptr)
      return;
    member& m = *due;
    const time_point last = m.activity_.last();
    // The factor in force now, read for each member: the threshold it is judged by is the
    // one in force when its event is delivered.
    const thresholds th = at(factor());
    const typename rule::step step = rule::due(th, last, m.pinged_for_, now);
    if (step != rule::step::wait) {
      // An event due by `now` but after now_tick's instant waits for its tick, as a member
      // filed for it would.
      const tick_type event_at = driver_.scale().ceil(
          detail::saturating_add(last, step == rule::step::ping ? th.ping_after : th.drop_after));
      if (event_at > taken_at) {
        defer(m, step == rule::step::ping, last, event_at);
        continue;
      }
    }
    switch (step) {
    case rule::step::wait:
      // Touched since it was filed (the thresholds moved, and are later than now), or the
      // factor went up: filed again from its stamp.
      ++refiles_;
      place(m, th, last, now, now_tick);
      continue;
    case rule::step::ping:
      m.pinged_for_ = last;
      place(m, th, last, now, now_tick);
      ++pings_;
      still.on_event(m, event::ping);
      break;
    case rule::step::drop:
      m.group_ = nullptr;
      ++drops_;
      still.on_event(m, event::drop);
      break;
    }
    if (still.group == nullptr)
      return;
    if constexpr (!Clock::is_steady) {
      // Stepped back by the event handler (or meanwhile): the rest of the run is judged by
      // the clock as it reads now, never by an instant it has gone back from.
      const time_point t = clock_type::now();
      if (t < now) {
        now = t;
        now_tick = driver_.turn_at(now);
      }
    }
  }
}

} // namespace asio_wheel

#endif // ASIO_WHEEL_IMPL_HEARTBEAT_GROUP_HPP
