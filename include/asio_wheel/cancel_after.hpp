//
// cancel_after.hpp
// ~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_CANCEL_AFTER_HPP
#define ASIO_WHEEL_CANCEL_AFTER_HPP

// Timeouts for any asynchronous operation that supports per-operation cancellation, in the
// shape of asio::cancel_after, on every Asio the library supports (Asio has its own only
// from 1.31), with the deadline kept in the timing wheel of the operation's context:
//
//   co_await sock.async_read_some(buf, asio_wheel::cancel_after(5s, asio::use_awaitable));
//
// The adapter starts a wheel wait beside the operation and gives the operation a
// cancellation slot of its own. If the deadline passes first, the slot is emitted (terminal
// cancellation by default) and the operation completes as it does on cancellation, usually
// with operation_aborted. If the operation completes first, the wheel wait is cancelled at
// once: its entry leaves the wheel immediately. A cancellation emitted on the outer
// handler's own slot (for example a coroutine's) is forwarded to the operation.
//
// Thread safety: the wheel wait completes on the operation's executor. As with
// asio::cancel_after, when the context is run by several threads, use a strand as that
// executor so that the deadline and the operation's completion are serialised.
//
// Beside asio::cancel_after (Asio >= 1.31). Same signatures, same completion; the
// difference is where the deadline lives. Asio's adapter builds an asio::basic_waitable_timer
// into each operation, whose wait enters the context's timer heap (O(log n) to arm and to
// cancel, under the reactor's lock). This one files the deadline in the wheel the context
// already has: no Asio timer and no timer-heap entry per operation, O(1) to arm and to
// cancel, and the adapter's state comes from the per-thread block cache. Both can be used
// in one file: a qualified call never finds the other, so write asio_wheel::cancel_after
// (and asio::cancel_after) in full. An unqualified cancel_after(5s, asio::use_awaitable)
// finds Asio's by argument-dependent lookup, and is ambiguous if asio_wheel's is visible
// too (a using-declaration does not prevent that; only qualification does).

#include <asio_wheel/basic_wheel_timer.hpp>
#include <asio_wheel/detail/block_cache.hpp>

#include <asio_wheel/detail/asio_forward.hpp>
#include <asio_wheel/detail/exceptions.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

namespace asio_wheel {

/// A completion token adapter that cancels the operation when a deadline passes.
/**
 * Created by cancel_after() or cancel_at(); use it in place of the completion token it
 * wraps.
 */
template <typename CompletionToken, typename Clock = std::chrono::steady_clock,
          typename WaitTraits = asio::wait_traits<Clock>>
class cancel_at_t {
public:
  using time_point = typename Clock::time_point;

  template <typename T>
  cancel_at_t(T&& token, const time_point& deadline, asio::cancellation_type_t type)
      : token_(std::forward<T>(token)), deadline_(deadline), type_(type) {}

  CompletionToken token_;
  time_point deadline_;
  asio::cancellation_type_t type_;
};

/// Cancels the operation if it has not completed by @c deadline.
/**
 * @param deadline When to emit the cancellation.
 * @param type The cancellation type to emit (default terminal).
 * @param token The completion token of the operation.
 */
template <typename Clock, typename Duration, typename CompletionToken>
auto cancel_at(const std::chrono::time_point<Clock, Duration>& deadline,
               asio::cancellation_type_t type, CompletionToken&& token) {
  return cancel_at_t<std::decay_t<CompletionToken>, Clock>(
      std::forward<CompletionToken>(token),
      std::chrono::time_point_cast<typename Clock::duration>(deadline), type);
}

/// Cancels the operation, with terminal cancellation, if it has not completed by
/// @c deadline.
template <typename Clock, typename Duration, typename CompletionToken>
auto cancel_at(const std::chrono::time_point<Clock, Duration>& deadline, CompletionToken&& token) {
  return asio_wheel::cancel_at(deadline, asio::cancellation_type::terminal,
                               std::forward<CompletionToken>(token));
}

/// Cancels the operation if it has not completed within @c timeout of its initiation.
/**
 * The deadline is computed with std::chrono::steady_clock when this function is called,
 * which is when the operation is initiated in the usual `op(args, cancel_after(t, tok))`
 * form.
 *
 * @param timeout How long the operation may take.
 * @param type The cancellation type to emit (default terminal).
 * @param token The completion token of the operation.
 */
template <typename Rep, typename Period, typename CompletionToken>
auto cancel_after(const std::chrono::duration<Rep, Period>& timeout, asio::cancellation_type_t type,
                  CompletionToken&& token) {
  using clock = std::chrono::steady_clock;
  const auto now = clock::now();
  const auto limit = clock::time_point::max() - now;
  const auto delta = std::chrono::duration_cast<clock::duration>(timeout);
  return asio_wheel::cancel_at(delta >= limit ? clock::time_point::max() : now + delta, type,
                               std::forward<CompletionToken>(token));
}

/// Cancels the operation, with terminal cancellation, if it has not completed within
/// @c timeout of its initiation.
template <typename Rep, typename Period, typename CompletionToken>
auto cancel_after(const std::chrono::duration<Rep, Period>& timeout, CompletionToken&& token) {
  return asio_wheel::cancel_after(timeout, asio::cancellation_type::terminal,
                                  std::forward<CompletionToken>(token));
}

namespace detail {

// Shared by the operation's handler and the deadline's wait; freed by the last of the two.
template <typename Clock, typename WaitTraits, typename Executor>
class cancel_at_state {
  using allocator = block_cache_allocator<cancel_at_state>;

public:
  static cancel_at_state* create(const Executor& ex, asio::cancellation_type_t type) {
    allocator alloc;
    cancel_at_state* p = alloc.allocate(1);
    ASIO_WHEEL_TRY {
      return ::new (static_cast<void*>(p)) cancel_at_state(ex, type);
    }
    ASIO_WHEEL_CATCH_ALL {
      alloc.deallocate(p, 1);
      ASIO_WHEEL_RETHROW;
    }
  }

  // Starts the deadline, and forwards cancellation from the user's own slot, if connected.
  // If it throws (std::bad_alloc), the references it took are given back.
  void start(const typename Clock::time_point& deadline, asio::cancellation_slot outer) {
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
    timer_->expires_at(deadline);
    // The wait's handler owns a reference, given back when it is destroyed uncalled (if
    // async_wait() throws, too).
    refs_.fetch_add(1, std::memory_order_relaxed);
    timer_->async_wait(deadline_handler(this));
  }

  asio::cancellation_slot slot() noexcept { return signal_.slot(); }

  // The operation completed (or its handler was destroyed): the deadline is moot. The timer
  // goes now, while its context surely exists: the state itself may live on in the user's
  // signal (the forwarder's reference) after the context is gone, and the timer holds the
  // wheel's service and a copy of the operation's executor (a strand, for one, whose
  // destructor needs its context).
  void finish() {
    finished_.store(true, std::memory_order_release);
    timer_.reset();
    release();
  }

private:
  cancel_at_state(const Executor& ex, asio::cancellation_type_t type)
      : timer_(std::in_place, ex), type_(type) {}

  // Emplaced in the user's own slot; owns one reference.
  class forward_handler {
  public:
    explicit forward_handler(cancel_at_state* self) noexcept : self_(self) {}
    forward_handler(const forward_handler&) = delete;
    forward_handler& operator=(const forward_handler&) = delete;
    ~forward_handler() { self_->release(); }

    void operator()(asio::cancellation_type_t type) const {
      if (!self_->finished_.load(std::memory_order_acquire))
        self_->signal_.emit(type);
    }

  private:
    cancel_at_state* self_;
  };

  // Owns one reference: released when called, or when destroyed uncalled (shutdown).
  class deadline_handler {
  public:
    explicit deadline_handler(cancel_at_state* self) noexcept : self_(self) {}
    deadline_handler(deadline_handler&& other) noexcept
        : self_(std::exchange(other.self_, nullptr)) {}
    ~deadline_handler() {
      if (self_ != nullptr)
        self_->release();
    }
    void operator()(const error_code& ec) {
      cancel_at_state* self = std::exchange(self_, nullptr);
      // The deadline and the operation can come due in the same batch: once the
      // operation's handler has run, its slot must not be emitted into.
      if (!ec && !self->finished_.load(std::memory_order_acquire))
        self->signal_.emit(self->type_);
      self->release();
    }

  private:
    cancel_at_state* self_;
  };

  void release() {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      allocator alloc;
      this->~cancel_at_state();
      alloc.deallocate(this, 1);
    }
  }

  // Until finish().
  std::optional<basic_wheel_timer<Clock, WaitTraits, Executor>> timer_;
  asio::cancellation_signal signal_;
  asio::cancellation_type_t type_;
  // One for the operation's handler, and from start(): one for the deadline's wait, one for
  // the forwarder in the user's slot if there is one.
  std::atomic<int> refs_{1};
  // Set once the operation's handler has been called (or destroyed).
  std::atomic<bool> finished_{false};
};

// The handler given to the wrapped operation: carries the adapter's cancellation slot and
// the user's handler, whose executor and allocator it exposes.
template <typename Handler, typename State>
class cancel_at_handler {
public:
  using cancellation_slot_type = asio::cancellation_slot;

  cancel_at_handler(Handler&& handler, State* state)
      : handler_(std::move(handler)), state_(state) {}

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

// Whether an initiation names the I/O executor of its operation (C++17 detection).
template <typename Initiation, typename = void>
struct initiation_has_executor : std::false_type {};
template <typename Initiation>
struct initiation_has_executor<
    Initiation, std::void_t<decltype(std::declval<const Initiation&>().get_executor())>>
    : std::true_type {};

template <typename Initiation, typename Clock, typename WaitTraits>
class initiate_cancel_at {
public:
  template <typename I>
  initiate_cancel_at(I&& initiation, const typename Clock::time_point& deadline,
                     asio::cancellation_type_t type)
      : initiation_(std::forward<I>(initiation)), deadline_(deadline), type_(type) {}

  template <typename Handler, typename... Args>
  void operator()(Handler&& handler, Args&&... args) && {
    using handler_type = std::decay_t<Handler>;
    auto ex = operation_executor(handler);
    using state_type = cancel_at_state<Clock, WaitTraits, decltype(ex)>;
    state_type* state = state_type::create(ex, type_);
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
    state->start(deadline_, outer);
    std::move(initiation_)(std::move(wrapped), std::forward<Args>(args)...);
  }

private:
  // The executor the operation completes on: the handler's, else the I/O object's. An
  // operation without an I/O object, whose handler has no executor either, still needs a
  // context for the deadline's wheel: system_executor, the default candidate of every Asio
  // before 1.38. 1.38's default, inline_executor, has no context
  // (ASIO_WHEEL_ASIO_DEFAULT_CANDIDATE_IS_INLINE), so the candidate is given explicitly.
  template <typename Handler>
  auto operation_executor(const Handler& handler) const {
    if constexpr (initiation_has_executor<Initiation>::value)
      return asio::get_associated_executor(handler, initiation_.get_executor());
    else
      return asio::get_associated_executor(handler, asio::system_executor());
  }

  Initiation initiation_;
  typename Clock::time_point deadline_;
  asio::cancellation_type_t type_;
};

} // namespace detail
} // namespace asio_wheel

template <typename CompletionToken, typename Clock, typename WaitTraits, typename... Signatures>
struct asio_wheel::asio::async_result<asio_wheel::cancel_at_t<CompletionToken, Clock, WaitTraits>,
                                      Signatures...> {
  template <typename Initiation, typename RawToken, typename... Args>
  static auto initiate(Initiation&& initiation, RawToken&& token, Args&&... args) {
    return asio_wheel::asio::async_initiate<CompletionToken, Signatures...>(
        asio_wheel::detail::initiate_cancel_at<std::decay_t<Initiation>, Clock, WaitTraits>(
            std::forward<Initiation>(initiation), token.deadline_, token.type_),
        token.token_, std::forward<Args>(args)...);
  }
};

template <typename Handler, typename State, typename Executor>
struct asio_wheel::asio::associated_executor<asio_wheel::detail::cancel_at_handler<Handler, State>,
                                             Executor> {
  using type = associated_executor_t<Handler, Executor>;
  static type get(const asio_wheel::detail::cancel_at_handler<Handler, State>& h,
                  const Executor& ex = Executor()) noexcept {
    return asio_wheel::asio::get_associated_executor(h.handler_, ex);
  }
};

template <typename Handler, typename State, typename Allocator>
struct asio_wheel::asio::associated_allocator<asio_wheel::detail::cancel_at_handler<Handler, State>,
                                              Allocator> {
  using type = associated_allocator_t<Handler, Allocator>;
  static type get(const asio_wheel::detail::cancel_at_handler<Handler, State>& h,
                  const Allocator& a = Allocator()) noexcept {
    return asio_wheel::asio::get_associated_allocator(h.handler_, a);
  }
};

#endif // ASIO_WHEEL_CANCEL_AFTER_HPP
