//
// timeout_scale.hpp
// ~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_TIMEOUT_SCALE_HPP
#define ASIO_WHEEL_TIMEOUT_SCALE_HPP

// Timeouts that shrink under overload, after Envoy's scaled range timers (envoy
// source/common/event/scaled_range_timer_manager_impl.h, envoy issue #11427).
//
// A timeout is a range [min, max] (timeout_range); one number per execution context, the
// scale factor f in [0, 1] (timeout_scale), puts every pending timeout of that context at
// min + f * (max - min). A server lowers f when it runs short of memory or descriptors, and
// the connections that hold them while doing nothing go first; it raises f again when the
// pressure is gone.
//
// Why a service of the execution context, and not an object passed to each timer: "a server
// sets one number". The timers of a context find it themselves, so the code that measures
// the pressure needs no reference to them, and no timer can refer to a scale that is gone (a
// service lives as long as its context, which the timers must not outlive anyway). A server
// that runs several contexts sets each one's.
//
// How a change reaches the timers: set() stores the factor (one atomic store) and tells
// each listener (a heartbeat_group, or the queue service of the idle timers and heartbeats of
// one clock and executor type, see detail/scaled_queue.hpp) by posting one handler to its
// executor, at most one pending per listener. It never looks at a timer or a member: on the
// caller's thread the work is O(listeners), which is the number of groups and of timer types
// in the context (a handful), not the number of connections. Each listener then re-arms one
// wait per distinct range, on its own executor (see the design notes of heartbeat_group.hpp
// and detail/scaled_queue.hpp).

#include <asio_wheel/detail/asio_forward.hpp>
#include <asio_wheel/detail/context_of.hpp>
#include <asio_wheel/detail/exceptions.hpp>

#include <atomic>
#include <cassert>
#include <chrono>
#include <cmath>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace asio_wheel {

class timeout_scale;

namespace detail {

// Something that must hear of a change of its context's scale factor: a heartbeat_group, or
// the queue service of the scaled activity timers. Registered with the scale while it
// exists; scale_changed() is called under the scale's lock, on the thread that calls set().
class scale_listener {
public:
  scale_listener() noexcept = default;
  scale_listener(const scale_listener&) = delete;
  scale_listener& operator=(const scale_listener&) = delete;

  // On the setter's thread, with the scale's lock held: must do no more than hand the news
  // to the listener's own executor (a post), and must not call back into the scale.
  virtual void scale_changed() = 0;

protected:
  // Virtual, so that a listener with virtual functions can be deleted as itself without
  // clang's -Wdelete-non-abstract-non-virtual-dtor (a heartbeat_group in a unique_ptr).
  virtual ~scale_listener() {
    assert(scale_ == nullptr && "a scale_listener was destroyed listening");
  }

  // Registers with `scale`. Precondition: not listening.
  void listen(timeout_scale& scale);
  // Unregisters, if listening. Once it returns, scale_changed() is not running and will not
  // be called again.
  void unlisten() noexcept;

private:
  friend class asio_wheel::timeout_scale;
  timeout_scale* scale_ = nullptr;
  scale_listener* next_ = nullptr;
  scale_listener* prev_ = nullptr;
};

} // namespace detail

/// A timeout given as a range: the scale factor of the context chooses where in it.
/**
 * The timeout in force at factor @c f is <tt>min + ceil(f * (max - min))</tt>, counted in
 * the duration's units (the product is computed in double, rounded up, and never exceeds
 * @c max): @c max at f = 1 (the default factor), @c min at f = 0. A range with
 * <tt>min == max</tt> is a fixed timeout, which no factor changes; a plain duration converts
 * to one, so that code written for fixed timeouts compiles unchanged.
 *
 * @code
 * asio_wheel::idle_timer idle(ex, 30s);          // fixed: always 30 s
 * asio_wheel::idle_timer idle(ex, {2s, 30s});    // 30 s, down to 2 s under pressure
 * @endcode
 */
template <typename Duration>
struct timeout_range {
  /// The timeout at factor 0 (the most pressure).
  Duration min{};
  /// The timeout at factor 1 (no pressure).
  Duration max{};

  /// A zero range.
  constexpr timeout_range() noexcept = default;

  /// A fixed timeout: <tt>min == max == d</tt>.
  template <typename Rep, typename Period,
            typename = std::enable_if_t<
                std::is_convertible_v<const std::chrono::duration<Rep, Period>&, Duration>>>
  constexpr timeout_range(const std::chrono::duration<Rep, Period>& d) noexcept // NOLINT
      : min{d}, max{d} {}

  /// A range. Checked by the timer it is given to (0 <= min <= max).
  constexpr timeout_range(const Duration& min_timeout, const Duration& max_timeout) noexcept
      : min{min_timeout}, max{max_timeout} {}

  /// Whether no factor changes it (<tt>min == max</tt>).
  constexpr bool is_fixed() const noexcept { return min == max; }

  /// The timeout in force at factor @c f: <tt>min + ceil(f * (max - min))</tt>.
  /**
   * @c f is expected in [0, 1] (as timeout_scale keeps it); the result is clamped to
   * [min, max] whatever it is. Precondition: <tt>min <= max</tt>.
   */
  Duration at(double f) const noexcept {
    if (min == max || !(f > 0.0))
      return min;
    const auto span = (max - min).count();
    const double scaled = std::ceil(f * static_cast<double>(span));
    // Compared in double before converting: a product at or beyond the span (f = 1, or a
    // span past 2^53 rounded up) would not fit back, or would exceed it.
    if (!(scaled < static_cast<double>(span)))
      return max;
    return min + Duration(static_cast<typename Duration::rep>(scaled));
  }

  /// Equal when both ends are.
  friend constexpr bool operator==(const timeout_range& a, const timeout_range& b) noexcept {
    return a.min == b.min && a.max == b.max;
  }
};

/// The scale factor of an execution context's timeout ranges.
/**
 * One number in [0, 1] per execution context (an execution_context service, created on first
 * use): the idle timers, heartbeats and heartbeat groups of that context whose timeouts are
 * ranges put them at <tt>min + factor * (max - min)</tt> (see timeout_range). 1, the initial
 * value, is no pressure (every timeout at its maximum); 0 is the most (every one at its
 * minimum). Fixed timeouts ignore it.
 *
 * @par Changing the factor
 * set() may be called from any thread at any time. From then on, every waiter is judged by
 * the thresholds at the new factor: one that has been idle longer than its new threshold
 * completes (or its member is dropped) in the next turn of its executor, never before that
 * threshold; one that has not waits until it is reached. The caller's thread only stores the
 * factor and posts one handler per listener (a heartbeat_group, or the idle timers and
 * heartbeats of one clock and executor type in the context): it never visits a timer or a
 * member. Each listener then re-arms one wait per distinct range on its own executor, and
 * wakes the waiters that are due in runs of bounded length.
 *
 * @par Never early
 * A timeout completes at time @c t only if the time since the last activity, as read from
 * its clock at @c t, is at least the timeout at the factor read at @c t (the factor in force
 * then: a set() that happens before the judgement is seen by it).
 *
 * @par Example
 * @code
 * // Every ~100 ms, on the context:
 * auto& scale = asio_wheel::timeout_scale::of(io);
 * if (open_connections > limit) scale.set(0.0);              // shed idle connections now
 * else if (open_connections < limit * 8 / 10) scale.set(1.0);
 * @endcode
 *
 * @par Thread Safety
 * @e Distinct @e objects: Safe.@n
 * @e Shared @e objects: Safe.
 */
class timeout_scale : public asio::execution_context::service {
public:
  /// The service's key.
  inline static asio::execution_context::id id;

  /// Constructor, for asio::use_service(). The factor starts at 1.
  explicit timeout_scale(asio::execution_context& context)
      : asio::execution_context::service(context) {}

  timeout_scale(const timeout_scale&) = delete;
  timeout_scale& operator=(const timeout_scale&) = delete;

  ~timeout_scale() override {
    assert(listeners_ == nullptr && "a timer outlived its execution context");
  }

  /// The scale of @c context (created on first use). Thread-safe.
  static timeout_scale& of(asio::execution_context& context) {
    return asio::use_service<timeout_scale>(context);
  }

  /// The scale of the execution context of @c ex. Thread-safe.
  template <typename Executor, typename = std::enable_if_t<
                                   !std::is_convertible_v<Executor&, asio::execution_context&>>>
  static timeout_scale& of(const Executor& ex) {
    return of(detail::context_of(ex));
  }

  /// The factor in force.
  double factor() const noexcept { return factor_.load(std::memory_order_acquire); }

  /// Sets the factor; every timeout range of the context follows from now on.
  /**
   * O(1) in the number of timers and members: one atomic store, and one post per listener
   * (none while its previous one is still pending). Setting the factor it already has does
   * nothing.
   *
   * @throws std::invalid_argument unless 0 <= @c f <= 1 (NaN included); the factor is then
   * unchanged.
   * @throws std::bad_alloc if a listener's handler could not be posted. The factor is set and
   * the other listeners told; the one not told judges by the new factor when it next wakes
   * (late, never early), and at the latest at each waiter's maximum.
   */
  void set(double f) {
    if (!(f >= 0.0 && f <= 1.0))
      detail::throw_exception(
          std::invalid_argument("asio_wheel::timeout_scale::set: the factor must be in [0, 1] "
                                "(1: every timeout at its maximum, 0: at its minimum), got " +
                                std::to_string(f)));
    std::lock_guard lock(mutex_);
    if (factor_.load(std::memory_order_relaxed) == f)
      return;
    factor_.store(f, std::memory_order_release);
    std::exception_ptr failed;
    for (detail::scale_listener* l = listeners_; l != nullptr; l = l->next_) {
      ASIO_WHEEL_TRY {
        l->scale_changed();
      }
      ASIO_WHEEL_CATCH_ALL {
        if (!failed)
          failed = std::current_exception();
      }
    }
    if (failed)
      std::rethrow_exception(failed);
  }

private:
  friend class detail::scale_listener;

  void shutdown() override {}

  void add(detail::scale_listener& l) {
    std::lock_guard lock(mutex_);
    l.scale_ = this;
    l.prev_ = nullptr;
    l.next_ = listeners_;
    if (listeners_ != nullptr)
      listeners_->prev_ = &l;
    listeners_ = &l;
  }

  void remove(detail::scale_listener& l) noexcept {
    std::lock_guard lock(mutex_);
    (l.prev_ != nullptr ? l.prev_->next_ : listeners_) = l.next_;
    if (l.next_ != nullptr)
      l.next_->prev_ = l.prev_;
    l.scale_ = nullptr;
  }

  // Read without the lock by every judgement; written under it, so that set() calls are
  // ordered and each listener hears of every change after it took effect.
  std::atomic<double> factor_{1.0};
  // Guards the listener list, and orders set() calls.
  std::mutex mutex_;
  detail::scale_listener* listeners_ = nullptr;
};

namespace detail {

inline void scale_listener::listen(timeout_scale& scale) {
  assert(scale_ == nullptr);
  scale.add(*this);
}

inline void scale_listener::unlisten() noexcept {
  if (scale_ != nullptr)
    scale_->remove(*this);
}

} // namespace detail

} // namespace asio_wheel

#endif // ASIO_WHEEL_TIMEOUT_SCALE_HPP
