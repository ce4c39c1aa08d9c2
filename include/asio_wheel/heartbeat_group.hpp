//
// heartbeat_group.hpp
// ~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_HEARTBEAT_GROUP_HPP
#define ASIO_WHEEL_HEARTBEAT_GROUP_HPP

#include <asio_wheel/basic_wheel_timer.hpp>
#include <asio_wheel/detail/activity_timer.hpp>
#include <asio_wheel/detail/heartbeat_rule.hpp>
#include <asio_wheel/detail/tick_scale.hpp>
#include <asio_wheel/detail/timing_wheel.hpp>
#include <asio_wheel/detail/wheel_service.hpp>

#include <asio_wheel/detail/asio_forward.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <utility>

namespace asio_wheel {

/// A snapshot of a heartbeat_group's activity; see basic_heartbeat_group::statistics().
struct heartbeat_group_statistics {
  /// Members watched now (size()).
  std::size_t members = 0;
  /// Ping events delivered since the group's construction.
  std::uint64_t pings = 0;
  /// Drop events delivered (each unwatched the member).
  std::uint64_t drops = 0;
  /// Members found at their filed threshold touched since, and filed again for their new
  /// threshold without an event: the group's lazy re-arm, once per threshold reached (not
  /// once per touch()).
  std::uint64_t refiles = 0;
  /// Wake-ups of the group's one wheel wait (including early ones, at which the group only
  /// re-files the members of an upper slot of its own wheel).
  std::uint64_t wakeups = 0;
};

/// Pings quiet peers and drops silent ones, for a whole server: one wait for all connections.
/**
 * basic_heartbeat gives each connection its own asynchronous operation, and so its own
 * pending wait (160 bytes per connection). A heartbeat group keeps the connections in a
 * timing wheel of its own instead, with a #member hook embedded in each connection
 * (56 bytes, no allocation), and one wheel timer wait for the group. When a connection has
 * been quiet for @c ping_after, or silent for @c drop_after, the group calls its event
 * handler with the member and the event; the handler finds its connection from the member
 * (typically a base class) and acts.
 *
 * member::touch() on every input is one clock read and one compare-exchange, as for
 * basic_heartbeat; a member whose threshold passes with activity since is filed again for
 * the rest (once per threshold period, not once per input).
 *
 * @code
 * struct connection : asio_wheel::heartbeat_group::member { tcp::socket socket; ... };
 *
 * asio_wheel::heartbeat_group group(io.get_executor(), {.ping_after = 15s, .drop_after = 45s},
 *     [](asio_wheel::heartbeat_group::member& m, asio_wheel::heartbeat_group::event ev) {
 *       auto& conn = static_cast<connection&>(m);
 *       if (ev == asio_wheel::heartbeat_group::event::drop) conn.socket.close();
 *       else conn.send_ping();
 *     });
 * group.watch(conn);   // when the connection is accepted
 * conn.touch();        // on every read
 * @endcode
 *
 * @par Events
 * Per member, in order: at most one @c ping per quiet spell (a spell ends with the next
 * touch()), then one @c drop, after which the member is no longer watched (watch() it again
 * to go on). A zero @c ping_after means no pings: the group is then an idle timeout. Events
 * are delivered in the order of their thresholds, by a handler running on the group's
 * executor. One run of that handler looks at 4096 members at most (those due, and those
 * touched since they were filed, which it files again), so that a burst cannot starve other
 * work. The event handler may do anything with any member or group, including destroying
 * the member it was given or the group itself. An exception it throws propagates out of the
 * context's run(); the group goes on.
 *
 * @par Memory exhaustion
 * The group's one wait lives in its timer, so re-arming it after a run of the handler
 * allocates nothing. watch() can throw std::bad_alloc: on the context's first wait, or when
 * the wait, armed for later, must make way for an earlier one and cannot get the block it
 * moves to. The member is then left as it was (unwatched if it was not watched), and the
 * wait stays armed as it was.
 *
 * @par Precision
 * Never reports a threshold before it has passed since the last touch(); late by at most
 * one millisecond (the group's wheel tick) plus the wheel timer's tick and the event
 * loop's latency.
 *
 * @par Thread Safety
 * @e Distinct @e objects: Safe.@n
 * @e Shared @e objects: Unsafe. watch(), unwatch() and the destruction of a watched member
 * or of the group must happen on the group's executor (use a strand when several threads
 * run the context). member::touch() is safe from any thread at any time.
 *
 * @par Memory
 * 56 bytes per member (with std::chrono::steady_clock), embedded in the connection; the
 * group itself is about 12 KiB, whatever the number of members.
 */
template <typename Clock, typename WaitTraits = asio::wait_traits<Clock>,
          typename Executor = asio::any_io_executor>
class basic_heartbeat_group {
  static_assert(std::is_integral_v<typename Clock::rep>,
                "asio_wheel::heartbeat_group needs a clock with an integral representation");

public:
  /// The type of the executor associated with the object.
  using executor_type = Executor;
  /// The clock type.
  using clock_type = Clock;
  /// The duration type of the clock.
  using duration = typename Clock::duration;
  /// The time point type of the clock.
  using time_point = typename Clock::time_point;

  /// What the event handler is told.
  enum class event {
    ping, ///< The member has been quiet for ping_after: time to probe the peer.
    drop  ///< The member has been silent for drop_after: time to close. It is unwatched.
  };

  /// The two thresholds, both measured from the member's last touch().
  struct options {
    duration ping_after{}; ///< Zero: never ping.
    duration drop_after{};
  };

  class member;

  /// The event handler: called on the group's executor.
  using event_handler = std::function<void(member&, event)>;

  /// The hook a watched connection embeds (or derives from).
  /**
   * Neither copyable nor movable: the group refers to it. Destroying a watched member
   * unwatches it (on the group's executor, see the group's thread safety).
   */
  class member : private detail::wheel_node {
  public:
    /// Constructor. Construction counts as activity; the member is not watched.
    member() noexcept = default;
    member(const member&) = delete;
    member& operator=(const member&) = delete;

    /// Destructor: unwatches the member.
    ~member() {
      if (group_ != nullptr)
        group_->unwatch(*this);
    }

    /// Marks activity now: one clock read and one relaxed compare-exchange, from any thread;
    /// concurrent touches keep the latest reading.
    void touch() noexcept { activity_.mark(); }

    /// The time of the last activity, as marked.
    time_point last_activity() const noexcept { return activity_.last(); }

    /// Whether a group watches the member.
    bool is_watched() const noexcept { return group_ != nullptr; }

  private:
    friend class basic_heartbeat_group;

    detail::activity_stamp<Clock> activity_;
    // The activity mark the last ping was reported for: one ping per quiet spell.
    time_point pinged_for_{time_point::min()};
    // The group watching the member; non-null iff the member is linked in its wheel.
    basic_heartbeat_group* group_ = nullptr;
  };

  /// Constructor.
  /**
   * @throws std::invalid_argument unless 0 <= ping_after < drop_after, or if @c on_event
   * is empty.
   */
  basic_heartbeat_group(const executor_type& ex, const options& opts, event_handler on_event)
      : options_(checked(opts)), on_event_(checked(std::move(on_event))), timer_(ex),
        scale_(tick_length(), clock_type::now()), anchor_(std::make_shared<anchor>(anchor{this})) {
    start_wheel();
  }

  /// Constructor.
  template <typename ExecutionContext>
  basic_heartbeat_group(
      ExecutionContext& context, const options& opts, event_handler on_event,
      std::enable_if_t<std::is_convertible_v<ExecutionContext&, asio::execution_context&>>* =
          nullptr)
      : options_(checked(opts)), on_event_(checked(std::move(on_event))), timer_(context),
        scale_(tick_length(), clock_type::now()), anchor_(std::make_shared<anchor>(anchor{this})) {
    start_wheel();
  }

  basic_heartbeat_group(const basic_heartbeat_group&) = delete;
  basic_heartbeat_group& operator=(const basic_heartbeat_group&) = delete;

  /// Destructor: unwatches every member, without events.
  ~basic_heartbeat_group() {
    anchor_->group = nullptr;
    wheel_.clear([](detail::wheel_node& node) { static_cast<member&>(node).group_ = nullptr; });
  }

  /// Get the executor associated with the object.
  detail::get_executor_result_t<executor_type> get_executor() noexcept {
    return timer_.get_executor();
  }

  /// The thresholds.
  const options& get_options() const noexcept { return options_; }

  /// The number of members watched.
  std::size_t size() const noexcept { return wheel_.size(); }

  /// The group's counters (see heartbeat_group_statistics).
  /**
   * @par Thread Safety
   * As the group's other functions: on its executor (the counters are plain integers
   * changed by its wait handler). For the wheel's own counters from any thread, see
   * get_statistics().
   */
  heartbeat_group_statistics statistics() const noexcept {
    return {wheel_.size(), pings_, drops_, refiles_, wakeups_};
  }

  /// Starts watching @c m, or starts again if this group watches it already.
  /**
   * Counts as activity: the first quiet spell begins now.
   *
   * @throws std::invalid_argument if another group watches @c m. If arming the group's wait
   * throws (std::bad_alloc), a member not watched before is left unwatched; one watched
   * before stays watched.
   */
  void watch(member& m) {
    if (m.group_ != nullptr && m.group_ != this)
      throw std::invalid_argument(
          "asio_wheel::heartbeat_group::watch: the member is watched by another group; "
          "unwatch it there first");
    const bool was_watched = m.group_ == this;
    if (was_watched)
      wheel_.remove(m);
    m.group_ = this;
    m.touch();
    m.pinged_for_ = time_point::min();
    try {
      file(m, rule::next_threshold(options_, m.activity_.last(), m.pinged_for_));
    } catch (...) {
      if (!was_watched) {
        wheel_.remove(m);
        m.group_ = nullptr;
      }
      throw;
    }
  }

  /// Stops watching @c m: no event for it after this. Does nothing unless this group
  /// watches it.
  /**
   * @return Whether @c m was watched by this group.
   */
  bool unwatch(member& m) noexcept {
    if (m.group_ != this)
      return false;
    wheel_.remove(m);
    m.group_ = nullptr;
    if (wheel_.empty() && armed_for_) {
      // Nothing left to watch: let the context's run() return, as after a timer's cancel().
      try {
        timer_.cancel();
        armed_for_.reset();
      } catch (...) {
        // No memory for the aborted wait: it stays armed and wakes to find nothing due.
      }
    }
    return true;
  }

private:
  using rule = detail::heartbeat_rule<time_point>;
  using tick_type = detail::tick_type;

  // The group's wheel counts ticks of the context wheel's default length (1 ms), with a
  // boundary at its construction.
  static duration tick_length() noexcept {
    return detail::wheel_service<Clock, WaitTraits>::default_tick();
  }

  // The wheel starts at the current time (it is empty: nothing expires).
  void start_wheel() {
    wheel_.advance(scale_.floor(clock_type::now()), 0, [](detail::wheel_node&) {});
  }
  // Members looked at per run of the group's wait handler at most (due or filed again).
  static constexpr std::size_t members_per_run = 4096;

  // What the group's wait refers to. The wait may have completed, its handler queued, when
  // the group is destroyed (by a handler of the same batch, say), so the handler cannot
  // point at the group itself. Used on the group's executor only.
  struct anchor {
    basic_heartbeat_group* group; // nullptr once the group is destroyed
  };

  // The wait handler: two pointers, so the wait lives in the wheel timer without allocating.
  struct wake_handler {
    std::shared_ptr<anchor> to;
    // An aborted wait was re-armed or is the group's destruction: nothing to do.
    void operator()(const error_code& ec) const {
      if (!ec && to->group != nullptr)
        to->group->on_wake();
    }
  };

  static options checked(const options& opts) {
    if (opts.ping_after < duration::zero() || opts.drop_after <= opts.ping_after)
      throw std::invalid_argument("asio_wheel::heartbeat_group: need 0 <= ping_after < "
                                  "drop_after (a zero ping_after means no ping)");
    return opts;
  }

  static event_handler checked(event_handler on_event) {
    if (!on_event)
      throw std::invalid_argument("asio_wheel::heartbeat_group: the event handler is empty");
    return on_event;
  }

  // Files a watched member for `when`, arming the wait if it is now the earliest.
  void file(member& m, const time_point& when) {
    const tick_type tick = scale_.ceil(when);
    if constexpr (!Clock::is_steady) {
      // Behind the wheel's time, which never goes back by itself: the clock may have been
      // stepped back, and the wheel follows it so that the member is filed at its own tick
      // (rather than due at once, found not due by the rule, and filed again, every wake).
      if (tick < wheel_.now())
        wheel_.rewind(scale_.floor(clock_type::now()));
    }
    wheel_.insert(m, tick);
    if (!delivering_)
      arm();
  }

  // Arms the wait for the wheel's next expiry, unless it is armed for that or earlier (an
  // early wake finds nothing due and arms again).
  void arm() {
    const std::optional<tick_type> next = wheel_.next_expiry();
    if (!next || (armed_for_ && *armed_for_ <= *next))
      return;
    // Reset first: if arming throws, no wait is known to be armed, and the next arm() tries.
    armed_for_.reset();
    timer_.expires_at(scale_.time_of(*next));
    timer_.async_wait(wake_handler{anchor_});
    armed_for_ = *next;
  }

  void on_wake() {
    // The event handler may destroy the group: `still` tells, and outlives it.
    const std::shared_ptr<anchor> still = anchor_;
    armed_for_.reset();
    ++wakeups_;
    delivering_ = true;
    try {
      deliver(*still);
    } catch (...) {
      if (still->group != nullptr) {
        delivering_ = false;
        arm();
      }
      throw;
    }
    if (still->group != nullptr) {
      delivering_ = false;
      arm();
    }
  }

  // Files a member taken from the wheel at `now_tick` for a threshold later than now: past
  // now_tick, so that deliver() cannot meet it again (the wheel's time is at most now_tick).
  void refile(member& m, const time_point& when, tick_type now_tick) noexcept {
    wheel_.insert(m, std::max(scale_.ceil(when), now_tick + 1));
  }

  // Takes the due members one at a time, so that the event handler runs outside the wheel's
  // advance() and may change the wheel, or destroy the group (`still` then says so).
  void deliver(const anchor& still) {
    const time_point now = clock_type::now();
    const tick_type now_tick = scale_.floor(now);
    // A clock stepped back: members filed after now_tick are not due, however far the
    // wheel's time went (see file()).
    if constexpr (!Clock::is_steady)
      wheel_.rewind(now_tick);
    for (std::size_t taken = 0; taken < members_per_run; ++taken) {
      member* due = nullptr;
      wheel_.advance(now_tick, 1,
                     [&due](detail::wheel_node& node) { due = &static_cast<member&>(node); });
      if (due == nullptr)
        return;
      member& m = *due;
      const time_point last = m.activity_.last();
      switch (rule::due(options_, last, m.pinged_for_, now)) {
      case rule::step::wait:
        // Touched since it was filed: the thresholds moved, and are later than now.
        ++refiles_;
        refile(m, rule::next_threshold(options_, last, m.pinged_for_), now_tick);
        continue;
      case rule::step::ping:
        m.pinged_for_ = last;
        refile(m, rule::next_threshold(options_, last, last), now_tick);
        ++pings_;
        on_event_(m, event::ping);
        break;
      case rule::step::drop:
        m.group_ = nullptr;
        ++drops_;
        on_event_(m, event::drop);
        break;
      }
      if (still.group == nullptr)
        return;
    }
  }

  options options_;
  event_handler on_event_;
  // Every watched member, filed at the tick of its next threshold (or earlier, when it was
  // touched since: it is filed again then), in the ticks of scale_.
  detail::timing_wheel wheel_;
  basic_wheel_timer<Clock, WaitTraits, Executor> timer_;
  detail::tick_scale<Clock> scale_;
  // The tick the wait is armed for; empty while no wait is pending (or one was cancelled).
  // Invariant: empty, or no later than the wheel's next expiry.
  std::optional<tick_type> armed_for_;
  // Shared with the pending wait's handler; see anchor.
  std::shared_ptr<anchor> anchor_;
  // True while the wait handler delivers events: it arms the wait when it is done.
  bool delivering_ = false;
  // Totals for statistics(); only the wait handler changes them.
  std::uint64_t pings_ = 0;
  std::uint64_t drops_ = 0;
  std::uint64_t refiles_ = 0;
  std::uint64_t wakeups_ = 0;
};

/// A heartbeat group on std::chrono::steady_clock.
using heartbeat_group = basic_heartbeat_group<std::chrono::steady_clock>;

} // namespace asio_wheel

#endif // ASIO_WHEEL_HEARTBEAT_GROUP_HPP
