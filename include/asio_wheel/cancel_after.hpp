//
// cancel_after.hpp
// ~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_CANCEL_AFTER_HPP
#define ASIO_WHEEL_CANCEL_AFTER_HPP

// Timeouts for any asynchronous operation that supports per-operation cancellation, with
// asio::cancel_after's and asio::cancel_at's interface (Asio has its own only from 1.31) on
// every Asio the library supports, and the deadline kept in the timing wheel of the
// operation's context:
//
//   co_await sock.async_read_some(buf, asio_wheel::cancel_after(5s, asio::use_awaitable));
//   co_await sock.async_read_some(buf, asio_wheel::cancel_after(5s)); // the default token
//
// The adapter starts a wait beside the operation and gives the operation a cancellation
// slot of its own. If the deadline passes first, the slot is emitted (terminal cancellation
// by default) and the operation completes as it does on cancellation, usually with
// operation_aborted. If the operation completes first, the wait is cancelled at once: its
// entry leaves the wheel immediately. A cancellation emitted on the outer handler's own slot
// (for example a coroutine's) is forwarded to the operation.
//
// As with Asio's adapter:
//   * The wait is on a timer of the operation's I/O executor: its context's wheel (Asio: its
//     timer heap), whatever executor the handler is bound to. It completes, and emits the
//     cancellation, on the handler's associated executor (by default the I/O executor):
//     with asio::use_future, inline on the operation's own context.
//   * cancel_after's timeout counts from the launch of the operation, also when the
//     operation is deferred (asio::deferred) and launched later.
//   * The overloads that take a timer (asio::basic_waitable_timer, or the library's
//     basic_wheel_timer) wait on that timer instead: it is re-armed by every launch and
//     cancelled when the operation completes first.
//   * Without a completion token, cancel_after(t) and cancel_at(tp) are partial adapters:
//     op(cancel_after(5s)) adapts the operation's default completion token (deferred where
//     the executor names none), and cancel_after(5s)(token) the token given.
//
// Beyond Asio's adapter: an operation without an I/O executor (an initiation without
// get_executor(), which Asio's does not accept) keeps the deadline on its handler's
// executor if that has an execution context, else on asio::system_executor.
//
// Thread safety: as with asio::cancel_after, when the context is run by several threads,
// perform the operation within an implicit or explicit strand (a strand as the handler's
// executor, or as the I/O object's), so that the deadline's emit and the operation's
// completion are serialised.
//
// Beside asio::cancel_after (Asio >= 1.31). Same signatures, same completion; the difference
// is where the deadline lives. Asio's adapter builds an asio::basic_waitable_timer into each
// operation, whose wait enters the context's timer heap (O(log n) to arm and to cancel,
// under the reactor's lock). This one files the deadline in the wheel the context already
// has: no Asio timer and no timer-heap entry per operation, O(1) to arm and to cancel; the
// adapter's state is one allocation per operation (through the block cache's allocator, but
// larger than its biggest class, so from operator new). Both can be used in one file:
// a qualified call never finds the other, so write asio_wheel::cancel_after (and
// asio::cancel_after) in full. An unqualified cancel_after(5s, asio::use_awaitable) finds
// Asio's by argument-dependent lookup, and is ambiguous if asio_wheel's is visible too (a
// using-declaration does not prevent that; only qualification does).

#include <asio_wheel/basic_wheel_timer.hpp>
#include <asio_wheel/detail/block_cache.hpp>
#include <asio_wheel/detail/exceptions.hpp>

#include <asio_wheel/detail/asio_deferred.hpp>
#include <asio_wheel/detail/asio_forward.hpp>

#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <ratio>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

namespace asio_wheel {
namespace detail {

// A timer the user may hand to cancel_after / cancel_at: Asio's or the library's.
template <typename T>
inline constexpr bool is_deadline_timer = false;
template <typename Clock, typename WaitTraits, typename Executor>
inline constexpr bool is_deadline_timer<asio::basic_waitable_timer<Clock, WaitTraits, Executor>> =
    true;
template <typename Clock, typename WaitTraits, typename Executor>
inline constexpr bool is_deadline_timer<basic_wheel_timer<Clock, WaitTraits, Executor>> = true;

// `d` in `To`, saturating at To's limits (duration::max() of a coarser unit overflows a cast;
// so would an infinite floating-point one). A NaN is no time at all: std::invalid_argument
// naming `what` (the adapter and its argument).
template <typename To, typename Rep, typename Period>
To saturating_duration(const std::chrono::duration<Rep, Period>& d, const char* what) {
  if constexpr (std::is_floating_point_v<Rep>) {
    if (std::isnan(d.count()))
      throw_exception(std::invalid_argument(
          std::string("asio_wheel::") + what +
          " is NaN; it must be a number (an infinite one saturates at the clock's range)"));
  }
  using wide = std::chrono::duration<long double>;
  if (wide(d) >= wide((To::max)()))
    return (To::max)();
  if (wide(d) <= wide((To::min)()))
    return (To::min)();
  // In range; duration_cast multiplies first, which overflows for a period that does not
  // divide To's (a count of thirds of a second times 10^9) long before To's own limits.
  using factor = std::ratio_divide<Period, typename To::period>;
  if constexpr (std::is_integral_v<Rep>) {
    constexpr auto limit =
        static_cast<long double>((std::numeric_limits<std::intmax_t>::max)() / factor::num);
    const auto count = static_cast<long double>(d.count());
    if (count <= limit && count >= -limit)
      return std::chrono::duration_cast<To>(d);
  }
  return To(static_cast<typename To::rep>(
      std::chrono::duration<long double, typename To::period>(d).count()));
}

// `t` in the clock's own duration, saturating as saturating_duration does (a time point of a
// coarser unit, such as time_point<Clock, hours>::max(), overflows a time_point_cast).
template <typename ToDuration, typename Clock, typename Duration>
std::chrono::time_point<Clock, ToDuration>
saturating_time_point(const std::chrono::time_point<Clock, Duration>& t, const char* what) {
  return std::chrono::time_point<Clock, ToDuration>(
      saturating_duration<ToDuration>(t.time_since_epoch(), what));
}

// Arms `timer` for `when`: a duration counts from now, the operation's launch (expires_after
// saturates), a time point is absolute.
template <typename Timer>
void arm(Timer& timer, const typename Timer::duration& when) {
  timer.expires_after(when);
}
template <typename Timer>
void arm(Timer& timer, const typename Timer::time_point& when) {
  timer.expires_at(when);
}

// The deadline of one operation on a timer of the adapter's own, in the wheel of the
// operation's context. When: Clock::duration (cancel_after) or Clock::time_point (cancel_at).
template <typename Clock, typename WaitTraits, typename When>
struct wheel_deadline {
  When when;

  // The timer of one operation, on `Executor`; it goes when the operation finishes.
  template <typename Executor>
  class timer_holder {
  public:
    using timer_type = basic_wheel_timer<Clock, WaitTraits, Executor>;
    timer_holder(const wheel_deadline&, const Executor& ex) : timer_(std::in_place, ex) {}
    timer_type& get() noexcept { return *timer_; }
    void finish() noexcept { timer_.reset(); }

  private:
    std::optional<timer_type> timer_;
  };
};

// The deadline of one operation on the user's timer (which must outlive the operation).
template <typename Timer, typename When>
struct timer_deadline {
  Timer* timer;
  When when;

  template <typename Executor>
  class timer_holder {
  public:
    using timer_type = Timer;
    timer_holder(const timer_deadline& d, const Executor&) noexcept : timer_(d.timer) {}
    timer_type& get() noexcept { return *timer_; }
    // As Asio's adapter does: every wait of the timer. A cancel that fails (a wheel timer
    // out of memory) only leaves the wait to complete at the deadline, where finished_
    // stops its emit; finish() runs in destructors, so it must not throw.
    void finish() noexcept {
      ASIO_WHEEL_TRY {
        timer_->cancel();
      }
      ASIO_WHEEL_CATCH_ALL {}
    }

  private:
    Timer* timer_;
  };
};

} // namespace detail

/// @addtogroup coroutine_timeouts
/// @{

/// A completion token adapter that cancels the operation when a deadline passes.
/**
 * Created by cancel_after() or cancel_at() with a completion token; use it in place of the
 * token it wraps. Named through the aliases cancel_after_t, cancel_at_t, cancel_after_timer
 * and cancel_at_timer.
 */
template <typename CompletionToken, typename Deadline>
class basic_cancel_t {
public:
  /// Wraps @c token with @c deadline; cancel_after() and cancel_at() call this.
  template <typename T>
  basic_cancel_t(T&& token, const Deadline& deadline,
                 asio::cancellation_type_t cancel_type = asio::cancellation_type::terminal)
      : token_(std::forward<T>(token)), deadline_(deadline), cancel_type_(cancel_type) {}

  /// The completion token adapted (public, as in Asio's adapters).
  CompletionToken token_;
  /// When to cancel: a timeout or an expiry, on the wheel or on the user's timer.
  Deadline deadline_;
  /// The cancellation type emitted when the deadline passes.
  asio::cancellation_type_t cancel_type_;
};

/// A partial completion token adapter: a deadline without a token yet.
/**
 * Created by cancel_after() or cancel_at() without a completion token. Used as a completion
 * token, it adapts the operation's default completion token (that of its I/O executor, or
 * deferred where there is none); called with a token, it returns the adapter for that token.
 */
template <typename Deadline>
class basic_partial_cancel {
public:
  /// Keeps @c deadline; cancel_after() and cancel_at() without a token call this.
  explicit basic_partial_cancel(const Deadline& deadline, asio::cancellation_type_t cancel_type =
                                                              asio::cancellation_type::terminal)
      : deadline_(deadline), cancel_type_(cancel_type) {}

  /// Adapts @c token.
  template <typename CompletionToken>
  [[nodiscard]] basic_cancel_t<std::decay_t<CompletionToken>, Deadline>
  operator()(CompletionToken&& token) const {
    return basic_cancel_t<std::decay_t<CompletionToken>, Deadline>(
        std::forward<CompletionToken>(token), deadline_, cancel_type_);
  }

  /// When to cancel: a timeout or an expiry, on the wheel or on the user's timer.
  Deadline deadline_;
  /// The cancellation type emitted when the deadline passes.
  asio::cancellation_type_t cancel_type_;
};

/// cancel_after(timeout, token): the timeout counts from the operation's launch.
template <typename CompletionToken, typename Clock = std::chrono::steady_clock,
          typename WaitTraits = asio::wait_traits<Clock>>
using cancel_after_t =
    basic_cancel_t<CompletionToken,
                   detail::wheel_deadline<Clock, WaitTraits, typename Clock::duration>>;

/// cancel_at(expiry, token).
template <typename CompletionToken, typename Clock = std::chrono::steady_clock,
          typename WaitTraits = asio::wait_traits<Clock>>
using cancel_at_t =
    basic_cancel_t<CompletionToken,
                   detail::wheel_deadline<Clock, WaitTraits, typename Clock::time_point>>;

/// cancel_after(timer, timeout, token), on the user's timer.
template <typename CompletionToken, typename Timer>
using cancel_after_timer =
    basic_cancel_t<CompletionToken, detail::timer_deadline<Timer, typename Timer::duration>>;

/// cancel_at(timer, expiry, token), on the user's timer.
template <typename CompletionToken, typename Timer>
using cancel_at_timer =
    basic_cancel_t<CompletionToken, detail::timer_deadline<Timer, typename Timer::time_point>>;

/// cancel_after(timeout): the partial form.
template <typename Clock = std::chrono::steady_clock,
          typename WaitTraits = asio::wait_traits<Clock>>
using partial_cancel_after =
    basic_partial_cancel<detail::wheel_deadline<Clock, WaitTraits, typename Clock::duration>>;

/// cancel_at(expiry): the partial form.
template <typename Clock = std::chrono::steady_clock,
          typename WaitTraits = asio::wait_traits<Clock>>
using partial_cancel_at =
    basic_partial_cancel<detail::wheel_deadline<Clock, WaitTraits, typename Clock::time_point>>;

/// cancel_after(timer, timeout): the partial form.
template <typename Timer>
using partial_cancel_after_timer =
    basic_partial_cancel<detail::timer_deadline<Timer, typename Timer::duration>>;

/// cancel_at(timer, expiry): the partial form.
template <typename Timer>
using partial_cancel_at_timer =
    basic_partial_cancel<detail::timer_deadline<Timer, typename Timer::time_point>>;

/// Cancels the operation if it has not completed within @c timeout of its launch.
/**
 * Without a token: the partial form (see basic_partial_cancel). The deadline is kept in the
 * wheel of the operation's context (a std::chrono::steady_clock timer); the timeout counts
 * from the operation's launch, which for a deferred operation is when it is launched.
 *
 * @param timeout How long the operation may take; a timeout beyond the clock's range
 * (infinity included) never passes, a zero or negative one cancels the operation at once.
 * @throws std::invalid_argument if @c timeout is a floating-point NaN.
 * @param cancel_type The cancellation type to emit (default terminal).
 * @return The partial adapter: use it as the completion token (it adapts the operation's
 * default token), or call it with a token. The overloads that take a @c token return the
 * adapter for it.
 *
 * @par Thread Safety
 * A wait is performed beside the operation, and emits the cancellation on the handler's
 * associated executor: when the context is run by several threads, perform the operation
 * within an implicit or explicit strand. As in Asio's adapter, the wait starts before the
 * operation connects its cancellation slot: launched from a thread that does not run the
 * operation's context while another does, a deadline shorter than the launch itself can
 * pass in between, and its cancellation is then lost (the operation runs on).
 *
 * @par Per-Operation Cancellation
 * A cancellation emitted on the handler's own slot is forwarded to the operation.
 */
template <typename Rep, typename Period>
[[nodiscard]] partial_cancel_after<>
cancel_after(const std::chrono::duration<Rep, Period>& timeout,
             asio::cancellation_type_t cancel_type = asio::cancellation_type::terminal) {
  using clock = std::chrono::steady_clock;
  return partial_cancel_after<>(
      {detail::saturating_duration<clock::duration>(timeout, "cancel_after: the timeout")},
      cancel_type);
}

/// Cancels the operation if it has not completed within @c timeout of its launch.
template <typename Rep, typename Period, typename CompletionToken>
[[nodiscard]] cancel_after_t<std::decay_t<CompletionToken>>
cancel_after(const std::chrono::duration<Rep, Period>& timeout,
             asio::cancellation_type_t cancel_type, CompletionToken&& token) {
  return asio_wheel::cancel_after(timeout, cancel_type)(std::forward<CompletionToken>(token));
}

/// Cancels the operation, with terminal cancellation, if it has not completed within
/// @c timeout of its launch.
template <typename Rep, typename Period, typename CompletionToken>
[[nodiscard]] cancel_after_t<std::decay_t<CompletionToken>>
cancel_after(const std::chrono::duration<Rep, Period>& timeout, CompletionToken&& token) {
  return asio_wheel::cancel_after(timeout)(std::forward<CompletionToken>(token));
}

/// Cancels the operation if it has not completed within @c timeout of its launch, waiting on
/// @c timer (an asio::basic_waitable_timer or an asio_wheel::basic_wheel_timer).
/**
 * Each launch re-arms @c timer (expires_after, which cancels its other waits); the operation
 * completing first cancels every wait of @c timer. @c timer must outlive the operation.
 */
template <typename Timer, typename Rep, typename Period,
          typename = std::enable_if_t<detail::is_deadline_timer<Timer>>>
[[nodiscard]] partial_cancel_after_timer<Timer>
cancel_after(Timer& timer, const std::chrono::duration<Rep, Period>& timeout,
             asio::cancellation_type_t cancel_type = asio::cancellation_type::terminal) {
  return partial_cancel_after_timer<Timer>(
      {&timer,
       detail::saturating_duration<typename Timer::duration>(timeout, "cancel_after: the timeout")},
      cancel_type);
}

/// Cancels the operation if it has not completed within @c timeout of its launch, waiting on
/// @c timer.
template <typename Timer, typename Rep, typename Period, typename CompletionToken,
          typename = std::enable_if_t<detail::is_deadline_timer<Timer>>>
[[nodiscard]] cancel_after_timer<std::decay_t<CompletionToken>, Timer>
cancel_after(Timer& timer, const std::chrono::duration<Rep, Period>& timeout,
             asio::cancellation_type_t cancel_type, CompletionToken&& token) {
  return asio_wheel::cancel_after(timer, timeout,
                                  cancel_type)(std::forward<CompletionToken>(token));
}

/// Cancels the operation, with terminal cancellation, if it has not completed within
/// @c timeout of its launch, waiting on @c timer.
template <typename Timer, typename Rep, typename Period, typename CompletionToken,
          typename = std::enable_if_t<detail::is_deadline_timer<Timer>>>
[[nodiscard]] cancel_after_timer<std::decay_t<CompletionToken>, Timer>
cancel_after(Timer& timer, const std::chrono::duration<Rep, Period>& timeout,
             CompletionToken&& token) {
  return asio_wheel::cancel_after(timer, timeout)(std::forward<CompletionToken>(token));
}

/// Cancels the operation if it has not completed by @c expiry.
/**
 * Without a token: the partial form (see basic_partial_cancel). The deadline is kept in the
 * wheel of the operation's context, on a timer of @c Clock.
 *
 * @param expiry When to emit the cancellation; a time already passed cancels the operation
 * at once, one beyond the clock's range never comes.
 * @throws std::invalid_argument if @c expiry is a floating-point NaN.
 * @param cancel_type The cancellation type to emit (default terminal).
 * @return The partial adapter, as cancel_after()'s; the overloads that take a @c token
 * return the adapter for it.
 *
 * Thread safety and per-operation cancellation: as cancel_after().
 */
template <typename Clock, typename Duration>
[[nodiscard]] partial_cancel_at<Clock>
cancel_at(const std::chrono::time_point<Clock, Duration>& expiry,
          asio::cancellation_type_t cancel_type = asio::cancellation_type::terminal) {
  return partial_cancel_at<Clock>(
      {detail::saturating_time_point<typename Clock::duration>(expiry, "cancel_at: the expiry")},
      cancel_type);
}

/// Cancels the operation if it has not completed by @c expiry.
template <typename Clock, typename Duration, typename CompletionToken>
[[nodiscard]] cancel_at_t<std::decay_t<CompletionToken>, Clock>
cancel_at(const std::chrono::time_point<Clock, Duration>& expiry,
          asio::cancellation_type_t cancel_type, CompletionToken&& token) {
  return asio_wheel::cancel_at(expiry, cancel_type)(std::forward<CompletionToken>(token));
}

/// Cancels the operation, with terminal cancellation, if it has not completed by @c expiry.
template <typename Clock, typename Duration, typename CompletionToken>
[[nodiscard]] cancel_at_t<std::decay_t<CompletionToken>, Clock>
cancel_at(const std::chrono::time_point<Clock, Duration>& expiry, CompletionToken&& token) {
  return asio_wheel::cancel_at(expiry)(std::forward<CompletionToken>(token));
}

/// Cancels the operation if it has not completed by @c expiry, waiting on @c timer (an
/// asio::basic_waitable_timer or an asio_wheel::basic_wheel_timer of the same clock).
/**
 * Each launch re-arms @c timer (expires_at, which cancels its other waits); the operation
 * completing first cancels every wait of @c timer. @c timer must outlive the operation.
 */
template <typename Timer, typename Duration,
          typename = std::enable_if_t<detail::is_deadline_timer<Timer>>>
[[nodiscard]] partial_cancel_at_timer<Timer>
cancel_at(Timer& timer, const std::chrono::time_point<typename Timer::clock_type, Duration>& expiry,
          asio::cancellation_type_t cancel_type = asio::cancellation_type::terminal) {
  return partial_cancel_at_timer<Timer>(
      {&timer,
       detail::saturating_time_point<typename Timer::duration>(expiry, "cancel_at: the expiry")},
      cancel_type);
}

/// Cancels the operation if it has not completed by @c expiry, waiting on @c timer.
template <typename Timer, typename Duration, typename CompletionToken,
          typename = std::enable_if_t<detail::is_deadline_timer<Timer>>>
[[nodiscard]] cancel_at_timer<std::decay_t<CompletionToken>, Timer>
cancel_at(Timer& timer, const std::chrono::time_point<typename Timer::clock_type, Duration>& expiry,
          asio::cancellation_type_t cancel_type, CompletionToken&& token) {
  return asio_wheel::cancel_at(timer, expiry, cancel_type)(std::forward<CompletionToken>(token));
}

/// Cancels the operation, with terminal cancellation, if it has not completed by @c expiry,
/// waiting on @c timer.
template <typename Timer, typename Duration, typename CompletionToken,
          typename = std::enable_if_t<detail::is_deadline_timer<Timer>>>
[[nodiscard]] cancel_at_timer<std::decay_t<CompletionToken>, Timer>
cancel_at(Timer& timer, const std::chrono::time_point<typename Timer::clock_type, Duration>& expiry,
          CompletionToken&& token) {
  return asio_wheel::cancel_at(timer, expiry)(std::forward<CompletionToken>(token));
}

/// @}

namespace detail {

template <typename State>
class cancel_deadline_handler;

// Shared by the operation's handler and the deadline's wait; freed by the last of the two.
// HandlerExecutor: the executor the operation's handler is bound to (by default the timer's).
template <typename TimerHolder, typename HandlerExecutor>
class cancel_state {
  using allocator = block_cache_allocator<cancel_state>;
  template <typename>
  friend class cancel_deadline_handler;

public:
  using handler_executor_type = HandlerExecutor;

  template <typename Deadline, typename Executor>
  static cancel_state* create(const Deadline& deadline, const Executor& ex,
                              const HandlerExecutor& handler_ex, asio::cancellation_type_t type) {
    allocator alloc;
    cancel_state* p = alloc.allocate(1);
    ASIO_WHEEL_TRY {
      return ::new (static_cast<void*>(p)) cancel_state(deadline, ex, handler_ex, type);
    }
    ASIO_WHEEL_CATCH_ALL {
      alloc.deallocate(p, 1);
      ASIO_WHEEL_RETHROW;
    }
  }

  // Starts the deadline, and forwards cancellation from the user's own slot, if connected.
  // If it throws (std::bad_alloc), the references it took are given back.
  template <typename When>
  void start(const When& when, asio::cancellation_slot outer) {
    if (outer.is_connected()) {
      // The forwarder owns a reference: it lives in the user's signal, which this state
      // never touches again (the signal may be gone before the operation completes).
      refs_.fetch_add(1, std::memory_order_relaxed);
      ASIO_WHEEL_TRY {
        outer.template emplace<forward_handler>(this);
      }
      ASIO_WHEEL_CATCH_ALL {
        refs_.fetch_sub(1, std::memory_order_relaxed); // the operation's is still held
        ASIO_WHEEL_RETHROW;
      }
    }
    auto& timer = timer_.get();
    detail::arm(timer, when);
    // The wait's handler owns a reference of each kind, given back when it is destroyed
    // uncalled (if async_wait() throws, too).
    refs_.fetch_add(1, std::memory_order_relaxed);
    context_refs_.fetch_add(1, std::memory_order_relaxed);
    timer.async_wait(cancel_deadline_handler<cancel_state>(this));
  }

  asio::cancellation_slot slot() noexcept { return signal_.slot(); }

  // The operation completed (or its handler was destroyed): the deadline is moot. The
  // adapter's own timer goes now, while its context surely exists: the state itself may
  // live on in the user's signal (the forwarder's reference) after the context is gone, and
  // the timer holds the wheel's service and a copy of the operation's executor (a strand,
  // for one, whose destructor needs its context). A user's timer is cancelled.
  void finish() {
    finished_.store(true, std::memory_order_release);
    timer_.finish();
    drop_context();
    release();
  }

private:
  template <typename Deadline, typename Executor>
  cancel_state(const Deadline& deadline, const Executor& ex, const HandlerExecutor& handler_ex,
               asio::cancellation_type_t type)
      : timer_(deadline, ex), handler_ex_(std::in_place, handler_ex), type_(type) {}

  // Emplaced in the user's own slot; owns one reference.
  class forward_handler {
  public:
    explicit forward_handler(cancel_state* self) noexcept : self_(self) {}
    forward_handler(const forward_handler&) = delete;
    forward_handler& operator=(const forward_handler&) = delete;
    ~forward_handler() { self_->release(); }

    void operator()(asio::cancellation_type_t type) const {
      if (!self_->finished_.load(std::memory_order_acquire))
        self_->signal_.emit(type);
    }

  private:
    cancel_state* self_;
  };

  // The operation's handler and the deadline's wait are both done with the handler's
  // executor: it goes, for the same reason as the timer in finish().
  void drop_context() {
    if (context_refs_.fetch_sub(1, std::memory_order_acq_rel) == 1)
      handler_ex_.reset();
  }

  void release() {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      allocator alloc;
      this->~cancel_state();
      alloc.deallocate(this, 1);
    }
  }

  // The timer the deadline waits on; the adapter's own is gone after finish().
  TimerHolder timer_;
  // The deadline's wait completes there (see cancel_deadline_handler). Kept here, not in the
  // wait's handler, so that the handler stays one pointer and its wait fits in the timer.
  // Until both the operation's handler and the deadline's wait are done (context_refs_).
  std::optional<HandlerExecutor> handler_ex_;
  asio::cancellation_signal signal_;
  asio::cancellation_type_t type_;
  // One for the operation's handler, and from start(): one for the deadline's wait, one for
  // the forwarder in the user's slot if there is one.
  std::atomic<int> refs_{1};
  // Of refs_, those of the operation's handler and of the deadline's wait, which need
  // handler_ex_ (the forwarder does not).
  std::atomic<int> context_refs_{1};
  // Set once the operation's handler has been called (or destroyed).
  std::atomic<bool> finished_{false};
};

// The deadline's wait: owns a reference of each kind (see cancel_state), released when
// called, or when destroyed uncalled (shutdown). Completes on the executor the operation's
// handler is bound to, as the wait of Asio's adapter does, so that its emit is serialised
// with that handler (and runs inline on the operation's context for use_future's executor).
template <typename State>
class cancel_deadline_handler {
public:
  explicit cancel_deadline_handler(State* self) noexcept : self_(self) {}
  cancel_deadline_handler(cancel_deadline_handler&& other) noexcept
      : self_(std::exchange(other.self_, nullptr)) {}
  ~cancel_deadline_handler() {
    if (self_ != nullptr) {
      self_->drop_context();
      self_->release();
    }
  }

  void operator()(const error_code& ec) {
    State* self = std::exchange(self_, nullptr);
    // The deadline and the operation can come due in the same batch: once the operation's
    // handler has run, its slot must not be emitted into.
    if (!ec && !self->finished_.load(std::memory_order_acquire))
      self->signal_.emit(self->type_);
    self->drop_context();
    self->release();
  }

  const typename State::handler_executor_type& executor() const noexcept {
    return *self_->handler_ex_;
  }

private:
  State* self_;
};

// The handler given to the wrapped operation: carries the adapter's cancellation slot and
// the user's handler, whose associators it exposes (see the asio::associator below).
template <typename Handler, typename State>
class cancel_at_handler {
public:
  using cancellation_slot_type = asio::cancellation_slot;

  // From a const handler (a const function object token) too: then a copy.
  template <typename H>
  cancel_at_handler(H&& handler, State* state)
      : handler_(std::forward<H>(handler)), state_(state) {}

  cancel_at_handler(cancel_at_handler&& other) noexcept
      : handler_(std::move(other.handler_)), state_(std::exchange(other.state_, nullptr)) {}

  cancel_at_handler(const cancel_at_handler&) = delete;
  cancel_at_handler& operator=(const cancel_at_handler&) = delete;

  ~cancel_at_handler() {
    // Destroyed without being called (its context was shut down): still drop the deadline.
    if (state_ != nullptr)
      std::exchange(state_, nullptr)->finish();
  }

  cancellation_slot_type get_cancellation_slot() const noexcept { return state_->slot(); }

  template <typename... Args>
  void operator()(Args&&... args) {
    std::exchange(state_, nullptr)->finish();
    std::move(handler_)(std::forward<Args>(args)...);
  }

  Handler handler_;

private:
  State* state_;
};

// The I/O executor of an initiation, if it has one: an adapter's initiation shows it too,
// so that an adapter nested in another still finds the operation's.
template <typename Initiation, typename = void>
class initiation_io_executor {};

template <typename Initiation>
class initiation_io_executor<Initiation, std::void_t<typename Initiation::executor_type>> {
public:
  using executor_type = typename Initiation::executor_type;
};

// An executor with an execution context (one a wheel can live in). use_future's, for one,
// has none before Asio 1.26.
template <typename Executor>
inline constexpr bool has_execution_context =
    asio::can_query<const Executor&, asio::execution::context_t>::value;

// C++17 detection, in place of requires-expressions: a deadline on the user's timer, and an
// initiation that names its I/O executor.
template <typename Deadline, typename = void>
struct deadline_has_timer : std::false_type {};
template <typename Deadline>
struct deadline_has_timer<
    Deadline, std::void_t<decltype(std::declval<const Deadline&>().timer->get_executor())>>
    : std::true_type {};

template <typename T, typename = void>
struct has_get_executor : std::false_type {};
template <typename T>
struct has_get_executor<T, std::void_t<decltype(std::declval<const T&>().get_executor())>>
    : std::true_type {};

template <typename Initiation, typename Deadline>
class initiate_cancel : public initiation_io_executor<Initiation> {
public:
  template <typename I>
  explicit initiate_cancel(I&& initiation) : initiation_(std::forward<I>(initiation)) {}

  // Only where the initiation has one (a template, for C++17's SFINAE in place of a
  // requires-clause).
  template <typename I = Initiation, typename = decltype(std::declval<const I&>().get_executor())>
  auto get_executor() const noexcept {
    return initiation_.get_executor();
  }

  // The deadline and the cancellation type come as arguments (as with Asio's initiation),
  // so that a deferred operation arms its deadline when it is launched.
  template <typename Handler, typename... Args>
  void operator()(Handler&& handler, const Deadline& deadline, asio::cancellation_type_t type,
                  Args&&... args) && {
    launch(std::move(initiation_), std::forward<Handler>(handler), deadline, type,
           std::forward<Args>(args)...);
  }

  // Called as an lvalue by a completion token's async_result (Asio's completion_token_v2
  // style) and by a deferred operation launched as an lvalue.
  template <typename Handler, typename... Args>
  void operator()(Handler&& handler, const Deadline& deadline, asio::cancellation_type_t type,
                  Args&&... args) const& {
    launch(initiation_, std::forward<Handler>(handler), deadline, type,
           std::forward<Args>(args)...);
  }

private:
  template <typename I, typename Handler, typename... Args>
  static void launch(I&& initiation, Handler&& handler, const Deadline& deadline,
                     asio::cancellation_type_t type, Args&&... args) {
    using handler_type = std::decay_t<Handler>;
    auto timer_ex = deadline_executor(initiation, deadline, handler);
    // The deadline's wait completes where a wait of the timer for this handler would.
    auto handler_ex = asio::get_associated_executor(handler, timer_ex);
    using holder_type = typename Deadline::template timer_holder<decltype(timer_ex)>;
    using state_type = cancel_state<holder_type, decltype(handler_ex)>;
    state_type* state = state_type::create(deadline, timer_ex, handler_ex, type);
    asio::cancellation_slot outer = asio::get_associated_cancellation_slot(handler);
    // From here `wrapped` (or the operation it is moved into) finishes the state, also
    // when something below throws.
    cancel_at_handler<handler_type, state_type> wrapped = [&] {
      ASIO_WHEEL_TRY {
        return cancel_at_handler<handler_type, state_type>(std::forward<Handler>(handler), state);
      }
      ASIO_WHEEL_CATCH_ALL {
        state->finish(); // the handler's move threw: no operation, no deadline
        ASIO_WHEEL_RETHROW;
      }
    }();
    state->start(deadline.when, outer);
    std::forward<I>(initiation)(std::move(wrapped), std::forward<Args>(args)...);
  }

  // The executor of the deadline's timer. The user's timer has its own. The adapter's is on
  // the operation's I/O executor, as Asio's adapter's timer is: its context is the one the
  // operation runs on, whatever executor the handler is bound to (use_future's has none
  // before Asio 1.26; another context's would fire the deadline there). An operation
  // without an I/O executor keeps it on its handler's, or, if that has no context, on
  // system_executor: the default candidate of every Asio before 1.38 (1.38's,
  // inline_executor, has no context: ASIO_WHEEL_ASIO_DEFAULT_CANDIDATE_IS_INLINE).
  template <typename I, typename Handler>
  static auto deadline_executor(const I& initiation, const Deadline& deadline,
                                const Handler& handler) {
    if constexpr (deadline_has_timer<Deadline>::value) {
      return deadline.timer->get_executor();
    } else if constexpr (has_get_executor<I>::value) {
      return std::decay_t<decltype(initiation.get_executor())>(initiation.get_executor());
    } else {
      using handler_ex = asio::associated_executor_t<Handler, asio::system_executor>;
      if constexpr (has_execution_context<handler_ex>)
        return asio::get_associated_executor(handler, asio::system_executor());
      else
        return asio::system_executor();
    }
  }

  Initiation initiation_;
};

// The token a partial adapter adapts when used alone: the default completion token of the
// operation's I/O executor, or deferred where it names none (a plain executor before Asio 1.31,
// which made deferred every operation's default).
template <typename Initiation>
using partial_default_token_t = std::conditional_t<
    std::is_void_v<asio::default_completion_token_t<asio::associated_executor_t<Initiation>>>,
    deferred_t, asio::default_completion_token_t<asio::associated_executor_t<Initiation>>>;

#if ASIO_WHEEL_ASIO_VERSION < 102300
// Before Asio 1.23 a coroutine cannot co_await a deferred operation, which is what the
// partial form yields there: co_await tries to launch it with a pointer to its frame, and
// the error was 150 lines about deferred_async_operation. This wrapper launches it as it is
// otherwise, and turns that attempt into one line saying what works.
template <typename Op>
class partial_deferred_operation {
public:
  explicit partial_deferred_operation(Op op) : op_(std::move(op)) {}

  template <typename CompletionToken>
  decltype(auto) operator()(CompletionToken&& token) && {
    return launch(std::move(op_), std::forward<CompletionToken>(token));
  }

  template <typename CompletionToken>
  decltype(auto) operator()(CompletionToken&& token) const& {
    return launch(op_, std::forward<CompletionToken>(token));
  }

private:
  // An object pointer is no completion token: only co_await passes one (its frame). Tested
  // first, and the launch left out when it fails, so that the assertion is the first error.
  template <typename O, typename CompletionToken>
  static decltype(auto) launch(O&& op, CompletionToken&& token) {
    using T = std::decay_t<CompletionToken>;
    constexpr bool is_token = !std::is_pointer_v<T> || std::is_function_v<std::remove_pointer_t<T>>;
    static_assert(is_token,
                  "co_await op(asio_wheel::cancel_after(d)) needs Asio 1.23 or later (Boost 1.80 "
                  "or later); with this Asio write op(asio_wheel::cancel_after(d, "
                  "asio::use_awaitable)) (cancel_at(tp, asio::use_awaitable) likewise)");
    if constexpr (is_token)
      return std::forward<O>(op)(std::forward<CompletionToken>(token));
  }

  Op op_;
};
#endif

} // namespace detail
} // namespace asio_wheel

/// @cond INTERNAL
// Asio's customization points for the adapters and the deadline's handlers: found by Asio,
// never spelled by users, so left out of the reference.
#if ASIO_WHEEL_ASIO_VERSION < 102300
// Still a deferred operation to chain with operator| (deferred is experimental there).
template <typename Op>
struct asio_wheel::asio::experimental::is_deferred<
    asio_wheel::detail::partial_deferred_operation<Op>> : std::true_type {};
#endif

template <typename CompletionToken, typename Deadline, typename... Signatures>
struct asio_wheel::asio::async_result<asio_wheel::basic_cancel_t<CompletionToken, Deadline>,
                                      Signatures...> {
  template <typename Initiation, typename RawToken, typename... Args>
  static auto initiate(Initiation&& initiation, RawToken&& token, Args&&... args) {
    using token_type = std::conditional_t<std::is_const_v<std::remove_reference_t<RawToken>>,
                                          const CompletionToken, CompletionToken>;
    return asio_wheel::asio::async_initiate<token_type, Signatures...>(
        asio_wheel::detail::initiate_cancel<std::decay_t<Initiation>, Deadline>(
            std::forward<Initiation>(initiation)),
        token.token_, token.deadline_, token.cancel_type_, std::forward<Args>(args)...);
  }
};

template <typename Deadline, typename... Signatures>
struct asio_wheel::asio::async_result<asio_wheel::basic_partial_cancel<Deadline>, Signatures...> {
  template <typename Initiation, typename RawToken, typename... Args>
  static auto initiate(Initiation&& initiation, RawToken&& token, Args&&... args) {
    using default_token = asio_wheel::detail::partial_default_token_t<std::decay_t<Initiation>>;
    using adapter = asio_wheel::basic_cancel_t<default_token, Deadline>;
    const adapter full(default_token{}, token.deadline_, token.cancel_type_);
#if ASIO_WHEEL_ASIO_VERSION < 102300
    if constexpr (std::is_same_v<default_token, asio_wheel::detail::deferred_t>) {
      auto op = asio_wheel::asio::async_initiate<const adapter, Signatures...>(
          std::forward<Initiation>(initiation), full, std::forward<Args>(args)...);
      return asio_wheel::detail::partial_deferred_operation<decltype(op)>(std::move(op));
    } else
#endif
      return asio_wheel::asio::async_initiate<const adapter, Signatures...>(
          std::forward<Initiation>(initiation), full, std::forward<Args>(args)...);
  }
};

template <typename State, typename Executor>
struct asio_wheel::asio::associated_executor<asio_wheel::detail::cancel_deadline_handler<State>,
                                             Executor> {
  using type = typename State::handler_executor_type;
  static type get(const asio_wheel::detail::cancel_deadline_handler<State>& h,
                  const Executor& = Executor()) noexcept {
    return h.executor();
  }
};

// The user's handler speaks for the cancel_at_handler that carries it, for every associator
// (executor, allocator, and where the Asio in use has it, the immediate executor), as it does
// for Asio's own adapter. Not the cancellation slot: cancel_at_handler names its own, which
// Asio prefers to an associator.
template <template <typename, typename> class Associator, typename Handler, typename State,
          typename DefaultCandidate>
struct asio_wheel::asio::associator<
    Associator, asio_wheel::detail::cancel_at_handler<Handler, State>, DefaultCandidate> {
  using type = typename Associator<Handler, DefaultCandidate>::type;

  static type get(const asio_wheel::detail::cancel_at_handler<Handler, State>& h,
                  const DefaultCandidate& c = DefaultCandidate()) noexcept {
    return Associator<Handler, DefaultCandidate>::get(h.handler_, c);
  }
};
/// @endcond

#endif // ASIO_WHEEL_CANCEL_AFTER_HPP
