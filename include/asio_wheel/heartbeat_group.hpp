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
#include <asio_wheel/detail/activity_stamp.hpp>
#include <asio_wheel/detail/heartbeat_rule.hpp>
#include <asio_wheel/detail/look_queue.hpp>
#include <asio_wheel/detail/threshold_queues.hpp>
#include <asio_wheel/detail/timing_wheel.hpp>
#include <asio_wheel/detail/wheel_driver.hpp>
#include <asio_wheel/timeout_scale.hpp>

#include <asio_wheel/detail/asio_forward.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <type_traits>
#include <utility>

namespace asio_wheel {

// The thresholds that are ranges, and the queues they need: see detail/threshold_queues.hpp.

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
  /// once per touch()); also each look at a pinged member waiting for its drop (one per
  /// ping_after.min, for a touch since).
  std::uint64_t refiles = 0;
  /// Wake-ups of the group's one wheel wait (including early ones, at which the group only
  /// re-files the members of an upper slot of its own wheel).
  std::uint64_t wakeups = 0;
  /// The most members moved within the group's wheel by one wake-up: re-filed from an
  /// upper-level slot towards the slot they are taken from, ahead of time (docs/design.md,
  /// "Staging"). At most 512 while the wake-ups keep pace, so that none holds the loop for a
  /// whole slot of members (at a million members, 9 to 14 ms before this bound); more only
  /// for a slot that came due before it could be staged (a loop stalled for seconds, a clock
  /// stepped forward), which is re-filed whole.
  std::size_t largest_run_moves = 0;
};

/// Pings quiet peers and drops silent ones, for a whole server: one wait for all connections.
/**
 * basic_heartbeat gives each connection its own asynchronous operation, and so its own
 * pending wait (288 bytes per connection: 240 in the object and a 32-byte block, 48 bytes from
 * malloc). A heartbeat group keeps the connections in a timing wheel of its own instead, with a
 * member hook embedded in each connection (56 bytes, no allocation), and one wheel timer wait for
 * the group. When a connection has been quiet for @c ping_after, or silent for @c drop_after, the
 * group calls its event handler with the member and the event; the handler finds its connection
 * from the member (typically a base class) and acts.
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
 * to go on). A zero @c ping_after means no pings: the group is then an idle timeout. A
 * member whose drop is already due when it is judged (its ping not yet delivered: the loop
 * was held past both thresholds) gets its drop without a ping. Events are delivered in the
 * order of their thresholds, also after a stalled loop, by a handler running on the group's
 * executor. One run of that handler looks at 4096 members at most (those due, and those
 * touched since they were filed, which it files again), so that a burst cannot starve other
 * work. The event handler may do anything with any member or group, including destroying
 * the member it was given or the group itself. An exception it throws propagates out of the
 * context's run(); the group goes on.
 *
 * @par Thresholds that shrink under load
 * Either threshold may be a range, <tt>{min, max}</tt> (see timeout_range): the threshold in
 * force is then <tt>min + ceil(f * (max - min))</tt>, where @c f is the factor of the
 * context's timeout_scale (1 unless a server lowers it). Changing the factor (from any
 * thread, at any time) re-judges every member by the new thresholds: a member already quiet
 * for longer than its new threshold gets its event in the next turn of the group's executor
 * (in runs of 4096 at most, as above), and never before that threshold; the others wait for
 * theirs. The factor's change costs the group O(1) (one re-arm of its wait), whatever the
 * number of members. A plain duration is a fixed range: a group with fixed thresholds does
 * not read the factor at all.
 * @code
 * asio_wheel::heartbeat_group group(io, {.ping_after = {5s, 15s}, .drop_after = {10s, 60s}},
 *                                   on_event);
 * asio_wheel::timeout_scale::of(io).set(0.0);   // overload: ping after 5 s, drop after 10 s
 * @endcode
 *
 * @par Memory exhaustion
 * The group's one wait lives in its timer, so re-arming it after a run of the handler
 * allocates nothing. With ranges, a run may grow a queue's array; if it cannot, the member
 * waits in the group's wheel for the range's maximum instead (late under memory pressure,
 * never early). watch() can throw std::bad_alloc: on the context's first wait, or when
 * the wait, armed for later, must make way for an earlier one and cannot get the block it
 * moves to. The member is then left as it was (unwatched if it was not watched), and the
 * wait stays armed as it was.
 *
 * @par Precision
 * Never reports a threshold before it has passed since the last touch(), the threshold being
 * the one in force at the factor read when the event is judged (just before it is
 * delivered); late by at most one millisecond (the group's wheel tick) plus the wheel timer's
 * tick and the event loop's latency, or after a change of the factor, by the delay of one
 * posted handler. For a range this holds however the member came to its queue (a touch
 * found at its previous threshold, a ping whose drop's minimum had passed): each queue is
 * ordered by its members' own last touch. It holds for every event: a member touched after
 * its ping, while its drop is pending, starts a spell whose ping is due ping_after after
 * that touch, and gets it then (the group looks at a pinged member each ping_after until its
 * drop, for a touch since).
 *
 * @par Thread Safety
 * @e Distinct @e objects: Safe.@n
 * @e Shared @e objects: Unsafe. watch(), unwatch() and the destruction of a watched member
 * or of the group must happen on the group's executor (use a strand when several threads
 * run the context). member::touch() is safe from any thread at any time, and so is
 * timeout_scale::set().
 *
 * @par Completion Signature
 * None: the group has no asynchronous operation. Events go to the handler given to the
 * constructor, <tt>void(member&, event)</tt>, called on the group's executor (see
 * event_handler). For a per-connection asynchronous operation (every completion token, a
 * coroutine per connection), use basic_heartbeat.
 *
 * @par Per-Operation Cancellation
 * Not applicable: unwatch() a member to stop its events; destroying the group stops all.
 *
 * @par Lifetime
 * The group may be destroyed at any time on its executor, from its event handler included:
 * no event is delivered after, and its members are left unwatched. A member may be
 * destroyed at any time on the group's executor (its destructor unwatches it), from the
 * event handler included. The execution context must outlive the group.
 *
 * @par Many threads
 * A group belongs to one strand, so a server whose io_context runs on N threads keeps one
 * group per strand: N groups, each constructed with a strand of its own
 * (<tt>asio::make_strand(io)</tt>). Each accepted connection is given to one of them (round
 * robin, say), and its socket is accepted onto that group's strand
 * (<tt>acceptor.async_accept(group.get_executor(), token)</tt>). The connection's handlers,
 * its group's watch() and unwatch() and the group's events then all run on that one strand
 * and never race, while the groups run in parallel on the context's threads. touch() may
 * still come from anywhere. A member stays in the group that watches it: to move it,
 * unwatch() it on that group's strand and watch() it on the other's.
 * examples/idle_heartbeat_server.cpp shows it (<tt>--group --threads N</tt>).
 * @code
 * std::vector<std::unique_ptr<asio_wheel::heartbeat_group>> groups;
 * for (unsigned i = 0; i < threads; ++i)
 *   groups.push_back(std::make_unique<asio_wheel::heartbeat_group>(
 *       asio::make_strand(io), opts, on_event));
 * // Accepting connection number n:
 * auto& group = *groups[n % groups.size()];
 * tcp::socket socket =
 *     co_await acceptor.async_accept(group.get_executor(), asio::use_awaitable);
 * // The connection's coroutine, co_spawn()ed on socket.get_executor(), calls group.watch().
 * @endcode
 *
 * @par Memory
 * 56 bytes per member (with std::chrono::steady_clock), embedded in the connection, ranges or
 * not; the group itself is about 12 KiB, plus, with ranges, 24 bytes per member waiting in
 * its queues at their peak (their arrays grow and do not shrink).
 */
template <typename Clock, typename WaitTraits = asio::wait_traits<Clock>,
          typename Executor = asio::any_io_executor>
class basic_heartbeat_group : private detail::scale_listener {
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
  /// A threshold: fixed (a duration), or a range that the context's timeout_scale scales.
  using range = timeout_range<duration>;

  /// What the event handler is told.
  enum class event {
    ping, ///< The member has been quiet for ping_after: time to probe the peer.
    drop  ///< The member has been silent for drop_after: time to close. It is unwatched.
  };

  /// The two thresholds, both measured from the member's last touch().
  /**
   * Each is a duration or a range <tt>{min, max}</tt>. Valid when 0 <= min <= max for each,
   * and the ping comes first at every factor: ping_after.min < drop_after.min and
   * ping_after.max < drop_after.max. A ping_after of zero (<tt>{0, 0}</tt>) means no ping;
   * otherwise its minimum must be positive.
   */
  struct options {
    range ping_after{}; ///< Zero: never ping.
    range drop_after{}; ///< Silent this long: event::drop, and the member is unwatched.
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
    template <typename, typename>
    friend class detail::look_queue;

    // Its position in the group's looks + 1, 0 when not there (see place()). First: it may
    // fit in wheel_node's tail padding.
    std::uint32_t look_pos_ = 0;

    // Where it waits, while watched: in the group's wheel (wheel_node's slot), or in one of
    // the group's queues (node_heap: the same fields, its position in wheel_node's
    // deadline).
    detail::activity_stamp<Clock> activity_;
    // The activity mark the last ping was reported for: one ping per quiet spell.
    time_point pinged_for_{(time_point::min)()};
    // The group watching the member; non-null iff the member is linked in its wheel or in
    // one of its queues.
    basic_heartbeat_group* group_ = nullptr;
  };

  /// Constructor.
  /**
   * @throws std::invalid_argument if the options are not valid (see options), or if
   * @c on_event is empty.
   */
  basic_heartbeat_group(const executor_type& ex, const options& opts, event_handler on_event)
      : options_(checked(opts)), timer_(ex), ex_(timer_.get_executor()),
        anchor_(std::make_shared<anchor>(anchor{this, checked(std::move(on_event))})) {
    start();
  }

  /// Constructor.
  template <typename ExecutionContext>
  basic_heartbeat_group(
      ExecutionContext& context, const options& opts, event_handler on_event,
      std::enable_if_t<std::is_convertible_v<ExecutionContext&, asio::execution_context&>>* =
          nullptr)
      : options_(checked(opts)), timer_(context), ex_(timer_.get_executor()),
        anchor_(std::make_shared<anchor>(anchor{this, checked(std::move(on_event))})) {
    start();
  }

  basic_heartbeat_group(const basic_heartbeat_group&) = delete;
  basic_heartbeat_group& operator=(const basic_heartbeat_group&) = delete;

  /// Destructor: unwatches every member, without events.
  ~basic_heartbeat_group() {
    // First: once it returns, no thread is in scale_changed() with this group.
    this->unlisten();
    anchor_->group = nullptr;
    const auto forget = [](detail::wheel_node& node) {
      static_cast<member&>(node).group_ = nullptr;
    };
    driver_.wheel().clear(forget);
    queues_.clear(forget);
    looks_.clear();
    // Last, as a member would go: the event handler goes with the group (its captures may
    // own what owns the context, whose queued wake_handler holds the anchor), unless it is
    // the one destroying the group: run() drops it once it has returned.
    if (!delivering_)
      anchor_->on_event = nullptr;
  }

  /// Get the executor associated with the object.
  detail::get_executor_result_t<executor_type> get_executor() noexcept {
    return timer_.get_executor();
  }

  /// The thresholds.
  const options& get_options() const noexcept { return options_; }

  /// The number of members watched.
  std::size_t size() const noexcept { return driver_.wheel().size() + queues_.size(); }

  /// The group's counters (see heartbeat_group_statistics).
  /**
   * @par Thread Safety
   * As the group's other functions: on its executor (the counters are plain integers
   * changed by its wait handler). For the wheel's own counters from any thread, see
   * get_statistics().
   */
  heartbeat_group_statistics statistics() const noexcept {
    return {size(), pings_, drops_, refiles_, wakeups_, largest_run_moves_};
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
      detail::throw_exception(std::invalid_argument(
          "asio_wheel::heartbeat_group::watch: the member is watched by another group; "
          "unwatch it there first"));
    const bool was_watched = m.group_ == this;
    if (was_watched)
      take_out(m);
    m.group_ = this;
    m.touch();
    m.pinged_for_ = (time_point::min)();
    ASIO_WHEEL_TRY {
      // Just touched: its first threshold's minimum is ahead, so it waits in the wheel.
      file(m, rule::next_threshold(minima_, m.activity_.last(), m.pinged_for_));
    }
    ASIO_WHEEL_CATCH_ALL {
      if (!was_watched) {
        driver_.wheel().remove(m);
        m.group_ = nullptr;
      }
      ASIO_WHEEL_RETHROW;
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
    take_out(m);
    m.group_ = nullptr;
    if (size() == 0)
      disarm();
    return true;
  }

private:
  using rule = detail::heartbeat_rule<time_point>;
  using tick_type = detail::tick_type;

  // The thresholds at one factor, for the rule.
  struct thresholds {
    duration ping_after;
    duration drop_after;
  };

  using queues = detail::threshold_queues<Clock, range>;

  // Members looked at per run of the group's wait handler at most (due or filed again): the
  // driver's budget of a turn.
  static constexpr std::size_t members_per_run = detail::wheel_driver<Clock>::expiry_budget;

  // The machinery behind the interface, defined in impl/heartbeat_group.hpp: the thresholds
  // at a factor, filing a member in the wheel or a queue, the run that delivers events, the
  // wait's arming through the driver, and the handlers of the wait and of a rescale.
  struct anchor;
  struct wake_handler;
  struct rescale_handler;

  static options checked(const options& opts);
  static event_handler checked(event_handler on_event);
  void start();
  double factor() const noexcept;
  thresholds at(double f) const noexcept;
  void take_out(member& m) noexcept;
  void file(member& m, const time_point& when);
  void disarm() noexcept;
  void arm();
  void scale_changed() override;
  void on_rescale();
  void on_wake();
  void run();
  void place(member& m, const thresholds& th, const time_point& last, const time_point& now,
             tick_type now_tick) noexcept;
  void defer(member& m, bool ping, const time_point& last, tick_type event_at) noexcept;
  // The next member due by `now`, and the tick it was due at (`taken_at`); nullptr if none.
  member* take_due(const time_point& now, tick_type now_tick, tick_type& taken_at,
                   std::size_t& run_moves);
  bool look_due(double f, time_point& at) const noexcept;
  void deliver(const anchor& still);

  options options_;
  // The thresholds at factor 0: where every spell's first wait ends.
  thresholds minima_{options_.ping_after.min, options_.drop_after.min};
  // Every watched member waits in its wheel until the minimum of its next threshold (or,
  // when that is fixed, the threshold itself) has passed since its last touch, filed at that
  // tick (or earlier, when it was touched since: it is filed again then). Ticks of the
  // context wheel's default length (1 ms), with a boundary at the group's construction. The
  // wait is armed by the driver's rule, no later than the wheel's next expiry and the
  // queues' heads at the factor last read (a later factor only makes the wait early).
  // Members are taken one per advance(), so the re-filing of a slot that comes due is not
  // bounded (see wheel_driver's constructor), but the staging ahead of it is, as a
  // context's; runs are bounded by members_per_run.
  detail::wheel_driver<Clock> driver_{detail::wheel_driver<Clock>::default_tick(), true};
  // Members past the minimum of their next threshold, by event, ordered by their own last
  // touch + min: see
  // detail/threshold_queues.hpp. Empty while the thresholds are fixed.
  queues queues_{options_.ping_after, options_.drop_after};
  // Members in the drop's queue that must be looked at for a touch since, keyed by the
  // instant to look by less ping_after.min (due at key + ping_after at the factor in force):
  // see place(). Empty while drop_after is fixed.
  detail::look_queue<member, time_point> looks_;
  basic_wheel_timer<Clock, WaitTraits, Executor> timer_;
  // The timer's executor, copied once: scale_changed() posts to it from other threads.
  const executor_type ex_;
  // The context's scale factor, if a threshold is a range; nullptr, and never read, if not.
  timeout_scale* scale_source_ = nullptr;
  // Shared with the pending wait's handler; see anchor. Holds the event handler.
  std::shared_ptr<anchor> anchor_;
  // True while the wait handler delivers events: it arms the wait when it is done.
  bool delivering_ = false;
  // A rescale_handler is posted and has not started: set() need not post another.
  std::atomic<bool> rescale_posted_{false};
  // Totals for statistics(); only the wait handler changes them.
  std::uint64_t pings_ = 0;
  std::uint64_t drops_ = 0;
  std::uint64_t refiles_ = 0;
  std::uint64_t wakeups_ = 0;
  std::size_t largest_run_moves_ = 0;
};

/// A heartbeat group on std::chrono::steady_clock.
using heartbeat_group = basic_heartbeat_group<std::chrono::steady_clock>;

} // namespace asio_wheel

#include <asio_wheel/detail/exceptions.hpp>
#include <asio_wheel/impl/heartbeat_group.hpp>

#endif // ASIO_WHEEL_HEARTBEAT_GROUP_HPP
