//
// basic_wheel_timer.hpp
// ~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_BASIC_WHEEL_TIMER_HPP
#define ASIO_WHEEL_BASIC_WHEEL_TIMER_HPP

#include <asio_wheel/detail/config.hpp>
#include <asio_wheel/detail/wheel_service.hpp>
#include <asio_wheel/detail/wheel_timer_impl.hpp>

#include <asio_wheel/detail/asio_forward.hpp>
#include <asio_wheel/detail/exceptions.hpp>
#include <asio_wheel/detail/foreign_asio.hpp>
#include <asio_wheel/detail/saturating_time.hpp>

#include <chrono>
#include <cstddef>
#include <thread>
#include <type_traits>
#include <utility>

namespace asio_wheel {

/// Provides waitable timer functionality on a hashed hierarchical timing wheel.
/**
 * The basic_wheel_timer class template has the interface and the semantics of
 * asio::basic_waitable_timer, so that replacing asio::steady_timer by
 * asio_wheel::wheel_timer changes nothing else in a program. Waits are kept in one timing
 * wheel per execution context and clock (O(1) arm and cancel) instead of Asio's per-context
 * binary heap, and the wheel is driven by a single Asio timer armed only for its next
 * occupied tick.
 *
 * A timer is always in one of two states: "expired" or "not expired". If the wait() or
 * async_wait() function is called on an expired timer, the wait operation will complete
 * immediately.
 *
 * @par Precision
 * Expiry times are rounded up to the context's tick (default 1 ms, see set_tick()). A wait
 * never completes before its expiry time as read from the clock, and completes at most one
 * tick plus the event loop's latency after it. This holds for clocks that are not steady
 * too: one stepped back (system_clock after an NTP step) is read again before a wait is
 * judged due, as Asio's own timer does.
 *
 * @par Thread Safety
 * @e Distinct @e objects: Safe.@n
 * @e Shared @e objects: Unsafe. As for Asio's timers, a timer's calls must not overlap:
 * when its handlers can run on several threads, use a strand (or the handler chain).
 *
 * @par Completion Signature
 * async_wait(): <tt>void(asio::error_code)</tt> (<tt>boost::system::error_code</tt> with
 * Boost.Asio): success when the timer expired, asio::error::operation_aborted when
 * cancel(), cancel_one(), expires_at(), expires_after(), a move assignment or the destructor
 * took the wait out first.
 *
 * @par Per-Operation Cancellation
 * async_wait() supports terminal, partial and total cancellation, as Asio's timer does (and
 * after the timer was moved, which Asio 1.22's does not).
 *
 * @par Return values
 * cancel(), cancel_one(), expires_at() and expires_after() return how many pending waits
 * they aborted: 0 when the waits had already expired (their handlers then run with success,
 * as with Asio).
 *
 * @par Lifetime
 * As asio::steady_timer: the timer may be destroyed or moved at any time; its pending waits
 * complete with operation_aborted, and a wait already due completes with success. A wait's
 * state leaves the timer before its handler runs, so the handler may destroy, move or re-arm
 * the timer. The execution context must outlive the timer.
 *
 * @par Differences from asio::basic_waitable_timer
 * Per-operation cancellation keeps working after the timer is moved. Waits that expire
 * together complete from one handler (see README.md, "Completion order", and docs/semantics.md).
 *
 * @par Memory exhaustion
 * A wait kept inside the timer (see async_wait(), Operation Storage) moves to a 56-byte
 * block when it leaves: cancel(), cancel_one(), expires_at(), expires_after() and move
 * assignment then throw std::bad_alloc, with nothing changed, if there is none; the
 * destructor takes one from a small reserve of the context's, and calls std::terminate
 * only if that is empty too. When a wait expires without a block to move to, it stays in
 * the wheel and std::bad_alloc leaves the context's run(); the next run() completes it
 * (see README, "Memory exhaustion").
 */
template <typename Clock, typename WaitTraits = asio::wait_traits<Clock>,
          typename Executor = asio::any_io_executor>
class basic_wheel_timer {
  using service_type = detail::wheel_service<Clock, WaitTraits>;
  using impl_type = detail::wheel_timer_impl<Clock, WaitTraits, Executor>;

public:
  /// The type of the executor associated with the object.
  using executor_type = Executor;

  /// Rebinds the timer type to another executor.
  template <typename Executor1>
  struct rebind_executor {
    /// The timer type when rebound to the specified executor.
    using other = basic_wheel_timer<Clock, WaitTraits, Executor1>;
  };

  /// The clock type.
  using clock_type = Clock;

  /// The duration type of the clock.
  using duration = typename clock_type::duration;

  /// The time point type of the clock.
  using time_point = typename clock_type::time_point;

  /// The wait traits type.
  using traits_type = WaitTraits;

  /// Constructor.
  /**
   * This constructor creates a timer without setting an expiry time. The expires_at() or
   * expires_after() functions must be called to set an expiry time before the timer can be
   * waited on.
   *
   * @param ex The I/O executor that the timer will use, by default, to dispatch handlers
   * for any asynchronous operations performed on the timer.
   */
  explicit basic_wheel_timer(const executor_type& ex) : impl_(ex) {}

  /// Constructor.
  /**
   * This constructor creates a timer without setting an expiry time.
   *
   * @param context An execution context which provides the I/O executor that the timer
   * will use, by default, to dispatch handlers for any asynchronous operations performed on
   * the timer.
   */
  template <typename ExecutionContext>
  explicit basic_wheel_timer(
      ExecutionContext& context,
      std::enable_if_t<std::is_convertible_v<ExecutionContext&, asio::execution_context&>>* =
          nullptr)
      : impl_(context) {}

  /// Constructor to set a particular expiry time as an absolute time.
  basic_wheel_timer(const executor_type& ex, const time_point& expiry_time) : impl_(ex) {
    impl_.expires_at(expiry_time);
  }

  /// Constructor to set a particular expiry time as an absolute time.
  template <typename ExecutionContext>
  explicit basic_wheel_timer(
      ExecutionContext& context, const time_point& expiry_time,
      std::enable_if_t<std::is_convertible_v<ExecutionContext&, asio::execution_context&>>* =
          nullptr)
      : impl_(context) {
    impl_.expires_at(expiry_time);
  }

  /// Constructor to set a particular expiry time relative to now.
  basic_wheel_timer(const executor_type& ex, const duration& expiry_time) : impl_(ex) {
    impl_.expires_after(expiry_time);
  }

  /// Constructor to set a particular expiry time relative to now.
  template <typename ExecutionContext>
  explicit basic_wheel_timer(
      ExecutionContext& context, const duration& expiry_time,
      std::enable_if_t<std::is_convertible_v<ExecutionContext&, asio::execution_context&>>* =
          nullptr)
      : impl_(context) {
    impl_.expires_after(expiry_time);
  }

  /// @cond INTERNAL
  // A context or executor of the other Asio flavour: fails to compile, saying what to link.
  template <typename Foreign, typename... Args,
            std::enable_if_t<detail::is_foreign_asio_v<Foreign, executor_type>, int> = 0>
  explicit basic_wheel_timer(Foreign&&, Args&&...)
      : impl_(detail::foreign_asio_error<std::decay_t<Foreign>>{}) {}
  /// @endcond

  /// Move-construct a basic_wheel_timer from another.
  /**
   * Following the move, the moved-from object is in the same state as if constructed using
   * the basic_wheel_timer(const executor_type&) constructor. Pending waits move with the
   * timer, and their per-operation cancellation keeps working.
   */
  basic_wheel_timer(basic_wheel_timer&& other) : impl_(std::move(other.impl_)) {}

  /// Move-construct a basic_wheel_timer from another, with a convertible executor.
  template <typename Executor1>
  basic_wheel_timer(basic_wheel_timer<Clock, WaitTraits, Executor1>&& other,
                    std::enable_if_t<std::is_convertible_v<Executor1, Executor>>* = nullptr)
      : impl_(std::move(other.impl_)) {}

  /// Move-assign a basic_wheel_timer from another.
  /**
   * Pending waits on this timer are aborted (operation_aborted); those of @c other move
   * here. Following the move, the moved-from object is in the same state as if constructed
   * using the basic_wheel_timer(const executor_type&) constructor.
   */
  basic_wheel_timer& operator=(basic_wheel_timer&& other) {
    impl_.move_assign(other.impl_);
    return *this;
  }

  /// Move-assign a basic_wheel_timer from another, with a convertible executor.
  template <typename Executor1>
  std::enable_if_t<std::is_convertible_v<Executor1, Executor>, basic_wheel_timer&>
  operator=(basic_wheel_timer<Clock, WaitTraits, Executor1>&& other) {
    impl_.move_assign(other.impl_);
    return *this;
  }

  /// Destroys the timer.
  /**
   * This function destroys the timer, cancelling any outstanding asynchronous wait
   * operations associated with the timer as if by calling @c cancel.
   */
  ~basic_wheel_timer() = default;

  basic_wheel_timer(const basic_wheel_timer&) = delete;
  basic_wheel_timer& operator=(const basic_wheel_timer&) = delete;

  /// Get the executor associated with the object.
  /**
   * Returns a const reference with Asio 1.26 and later, a copy before, as
   * asio::basic_waitable_timer does.
   */
  detail::get_executor_result_t<executor_type> get_executor() noexcept {
    return impl_.get_executor();
  }

  /// Cancel any asynchronous operations that are waiting on the timer.
  /**
   * This function forces the completion of any pending asynchronous wait operations
   * against the timer. The handler for each cancelled operation will be invoked with the
   * asio::error::operation_aborted error code. Handlers are never invoked from inside
   * this function.
   *
   * Cancelling the timer does not change the expiry time.
   *
   * @return The number of asynchronous operations that were cancelled.
   *
   * @note If the timer has already expired when cancel() is called, then the handlers for
   * asynchronous wait operations will have already been invoked or queued for invocation,
   * and can no longer be cancelled: they complete with success.
   */
  std::size_t cancel() { return impl_.cancel(); }

  /// Cancels one asynchronous operation that is waiting on the timer.
  /**
   * This function forces the completion of one pending asynchronous wait operation against
   * the timer, the oldest first. Its handler will be invoked with the
   * asio::error::operation_aborted error code.
   *
   * @return The number of asynchronous operations that were cancelled: zero or one.
   */
  std::size_t cancel_one() { return impl_.cancel_one(); }

  /// Get the timer's expiry time as an absolute time.
  time_point expiry() const { return impl_.expiry(); }

  /// Set the timer's expiry time as an absolute time.
  /**
   * Any pending asynchronous wait operations will be cancelled. The handler for each
   * cancelled operation will be invoked with the asio::error::operation_aborted error
   * code.
   *
   * @return The number of asynchronous operations that were cancelled.
   */
  std::size_t expires_at(const time_point& expiry_time) { return impl_.expires_at(expiry_time); }

  /// Set the timer's expiry time relative to now.
  /**
   * Any pending asynchronous wait operations will be cancelled. The handler for each
   * cancelled operation will be invoked with the asio::error::operation_aborted error
   * code. The expiry saturates at time_point::max().
   *
   * @return The number of asynchronous operations that were cancelled.
   */
  std::size_t expires_after(const duration& expiry_time) {
    return impl_.expires_after(expiry_time);
  }

#if ASIO_WHEEL_ASIO_HAS_DEPRECATED_TIMER_MEMBERS
  /// (Deprecated: Use non-error_code overload.) Cancel any asynchronous operations that are
  /// waiting on the timer.
  /**
   * As cancel(), which does not fail: @p ec is cleared. Present where
   * asio::basic_waitable_timer has it: Asio before 1.33, without ASIO_NO_DEPRECATED.
   *
   * @param ec Set to indicate what error occurred, if any.
   *
   * @return The number of asynchronous operations that were cancelled.
   */
  std::size_t cancel(error_code& ec) {
    ec = error_code();
    return cancel();
  }

  /// (Deprecated: Use non-error_code overload.) Cancels one asynchronous operation that is
  /// waiting on the timer.
  /**
   * As cancel_one(), which does not fail: @p ec is cleared.
   *
   * @param ec Set to indicate what error occurred, if any.
   *
   * @return The number of asynchronous operations that were cancelled: zero or one.
   */
  std::size_t cancel_one(error_code& ec) {
    ec = error_code();
    return cancel_one();
  }

  /// (Deprecated: Use expiry().) Get the timer's expiry time as an absolute time.
  time_point expires_at() const {
    return expiry();
  }

  /// (Deprecated: Use non-error_code overload.) Set the timer's expiry time as an absolute
  /// time.
  /**
   * As expires_at(const time_point&), which does not fail: @p ec is cleared.
   *
   * @param expiry_time The expiry time to be used for the timer.
   *
   * @param ec Set to indicate what error occurred, if any.
   *
   * @return The number of asynchronous operations that were cancelled.
   */
  std::size_t expires_at(const time_point& expiry_time, error_code& ec) {
    ec = error_code();
    return expires_at(expiry_time);
  }

  /// (Deprecated: Use expiry().) Get the timer's expiry time relative to now.
  /**
   * expiry() minus the clock's reading, saturated at duration::min() and duration::max() as
   * Asio's timer does for a clock with a signed rep (for an unsigned rep, zero once the
   * expiry has passed, where Asio's wraps around).
   */
  duration expires_from_now() const {
    return detail::saturating_sub(impl_.expiry(), clock_type::now());
  }

  /// (Deprecated: Use expires_after().) Set the timer's expiry time relative to now.
  /**
   * As expires_after().
   *
   * @param expiry_time The expiry time to be used for the timer.
   *
   * @return The number of asynchronous operations that were cancelled.
   */
  std::size_t expires_from_now(const duration& expiry_time) {
    return expires_after(expiry_time);
  }

  /// (Deprecated: Use expires_after().) Set the timer's expiry time relative to now.
  /**
   * As expires_after(), which does not fail: @p ec is cleared.
   *
   * @param expiry_time The expiry time to be used for the timer.
   *
   * @param ec Set to indicate what error occurred, if any.
   *
   * @return The number of asynchronous operations that were cancelled.
   */
  std::size_t expires_from_now(const duration& expiry_time, error_code& ec) {
    ec = error_code();
    return expires_after(expiry_time);
  }
#endif // ASIO_WHEEL_ASIO_HAS_DEPRECATED_TIMER_MEMBERS

  /// Perform a blocking wait on the timer.
  /**
   * This function is used to wait for the timer to expire. This function blocks and does
   * not return until the timer has expired.
   *
   * @throws asio::system_error Thrown on failure.
   */
  void wait() {
    error_code ec;
    wait(ec);
    if (ec)
      detail::throw_exception(system_error(ec, "wait"));
  }

  /// Perform a blocking wait on the timer.
  /**
   * This function is used to wait for the timer to expire. This function blocks and does
   * not return until the timer has expired.
   *
   * @param ec Set to indicate what error occurred, if any.
   */
  void wait(error_code& ec) {
    ec = error_code();
    // The duration overload of to_wait_duration, as Asio's timer uses: the time_point one
    // overflows computing now + duration::max().
    const time_point expiry = impl_.expiry();
    for (time_point now = clock_type::now(); now < expiry; now = clock_type::now())
      std::this_thread::sleep_for(
          traits_type::to_wait_duration(detail::saturating_sub(expiry, now)));
  }

  /// Start an asynchronous wait on the timer.
  /**
   * This function may be used to initiate an asynchronous wait against the timer. It is an
   * initiating function for an asynchronous operation, and always returns immediately.
   *
   * For each call to async_wait(), the completion handler will be called exactly once. The
   * completion handler will be called when:
   *
   * @li The timer has expired.
   *
   * @li The timer was cancelled, in which case the handler is passed the error code
   * asio::error::operation_aborted.
   *
   * @param token The completion token that will be used to produce a completion handler,
   * which will be called when the timer expires. Potential completion tokens include
   * asio::use_future, asio::use_awaitable, asio::deferred, or a function
   * object with the correct completion signature. The function signature of the completion
   * handler must be:
   * @code void handler(
   *   const asio::error_code& error // Result of operation.
   * ); @endcode
   * Regardless of whether the asynchronous operation completes immediately or not, the
   * completion handler will not be invoked from within this function. On immediate
   * completion, invocation of the handler will be performed in a manner equivalent to using
   * asio::post().
   *
   * @par Completion Signature
   * @code void(asio::error_code) @endcode
   *
   * @par Per-Operation Cancellation
   * This asynchronous operation supports cancellation for the following
   * asio::cancellation_type values:
   *
   * @li @c cancellation_type::terminal
   *
   * @li @c cancellation_type::partial
   *
   * @li @c cancellation_type::total
   *
   * Unlike asio::basic_waitable_timer in Asio 1.22, cancellation keeps working after the
   * timer object has been moved.
   *
   * @par Operation Storage
   * One pending wait whose handler is small (two pointers), nothrow-movable and has no
   * associated allocator is kept inside the timer object: starting it allocates nothing.
   * Other waits take a block from a per-thread cache, or from the handler's associated
   * allocator when it has one. A wait's storage is released before its handler runs.
   *
   * @throws std::bad_alloc if memory runs out (the context's first wait, a block for the
   * operation, an expiry already passed). Nothing changed then, and the handler was
   * destroyed without being called.
   */
  template <typename WaitToken = asio::default_completion_token_t<executor_type>>
  auto async_wait(WaitToken&& token = asio::default_completion_token_t<executor_type>()) {
    return impl_.async_wait(std::forward<WaitToken>(token));
  }

  /// Set the length of a tick of the wheel of @c context for this clock.
  /**
   * Expiry times are rounded up to a whole tick: a coarser tick means fewer driver wakeups
   * and less precision. The default is 1 ms.
   *
   * @throws std::invalid_argument if @c tick is not positive or longer than 60 s.
   * @throws std::logic_error if the context's wheel has already served a wait (setting
   * the value it already has is allowed).
   */
  static void set_tick(asio::execution_context& context, const duration& tick) {
    asio::use_service<service_type>(context).set_tick(tick);
  }

  /// The length of a tick of the wheel of @c context for this clock.
  static duration tick(asio::execution_context& context) {
    return asio::use_service<service_type>(context).tick();
  }

private:
  template <typename, typename, typename>
  friend class basic_wheel_timer;

  impl_type impl_;
};

} // namespace asio_wheel

#endif // ASIO_WHEEL_BASIC_WHEEL_TIMER_HPP
