//
// detail/wait_op.hpp
// ~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_DETAIL_WAIT_OP_HPP
#define ASIO_WHEEL_DETAIL_WAIT_OP_HPP

#include <asio_wheel/detail/block_cache.hpp>

#include <asio_wheel/detail/asio_forward.hpp>
#include <asio_wheel/detail/exceptions.hpp>

#include <atomic>
#include <cstddef>
#include <exception>
#include <memory>
#include <type_traits>
#include <utility>

namespace asio_wheel::detail {

struct timer_entry;
class wait_op;

// asio::error::operation_aborted, built once: as an error_code it names asio::system_category(),
// a call with a static guard of its own (Asio 1.22: ~13 instructions), on every aborted
// completion. A local static rather than a namespace-scope one, so that a wait aborted during
// static initialization still gets the right code.
inline const error_code& aborted_error() noexcept {
  static const error_code ec(asio::error::operation_aborted);
  return ec;
}

// The link between a pending wait and the handler emplaced in its cancellation slot. The
// handler lives in the user's cancellation_signal, which may be destroyed before the wait
// completes, so the link is cut from whichever side goes first: by the service when the
// wait leaves its timer, by the handler's destructor otherwise. Written under the service's
// lock; atomic so that a handler can see without the lock that it has nothing left to do.
struct cancellation_target {
  std::atomic<wait_op*> op_{nullptr};
};

// A pending async_wait, type-erased. Owned by the service from initiation until it
// completes; never touched by the user.
class wait_op {
public:
  // Releases the operation's memory, then, when `invoke` is true, calls the handler with
  // the stored result; when false only destroys the handler (shutdown). If moving the handler
  // out throws, the operation is destroyed where it is, its memory released, and the
  // exception propagates when invoking (the handler is then destroyed uncalled, as Asio's
  // operations do); when only destroying, it is swallowed. A wait whose handler has another
  // executor than the service's home is queued there instead, and comes back untouched if
  // that throws first (see dispatch_scope).
  void complete(bool invoke) { fn_(this, invoke ? action::invoke : action::destroy, nullptr); }

  // Moves the operation to `storage` (at least inline_op_size bytes, suitably aligned) and
  // returns it there; this one is destroyed without releasing its memory. Only for
  // operations that fit inline (see fits_inline): the move cannot throw.
  wait_op* relocate(void* storage) noexcept { return fn_(this, action::relocate, storage); }

  // Destroys the handler, uncalled, of an operation in a timer's inline storage, then clears
  // `busy`, the flag that marks that storage taken. The handler is moved out first and
  // destroyed last: its destructor may destroy the timer, storage and flag included.
  void destroy_inline(std::atomic<bool>& busy) noexcept {
    fn_(this, action::destroy_inline, &busy);
  }

  // Links in the owning timer's FIFO of pending waits; the ready queue reuses next_ once
  // the wait has left its timer.
  wait_op* next_ = nullptr;
  // Once the wait is ready to complete (or to be destroyed: complete() reads it either way):
  // its result, and whether its handler's executor has refused it once already, by a throw
  // other than std::bad_alloc (see dispatch_queued). Set whole, as the wait becomes ready.
  struct ready_state {
    bool aborted;
    bool refused_once;
  };
  // prev_ while the wait is pending, ready_ once it is ready. Sharing the word keeps the
  // operation of a small handler within a 56-byte block.
  union {
    wait_op* prev_ = nullptr;
    ready_state ready_;
  };
  // The timer this wait is pending on; nullptr once it is ready to complete.
  timer_entry* owner_ = nullptr;
  // The handler emplaced in the associated cancellation slot while linked to this wait, or
  // nullptr (see cancellation_target).
  cancellation_target* cancellation_ = nullptr;

  // Calls the handler of a wait that was queued on its handler's executor (see
  // queued_completion), its memory released first.
  void call_queued() { fn_(this, action::call_queued, nullptr); }

protected:
  enum class action { invoke, destroy, destroy_inline, relocate, call_queued };
  using op_fn = wait_op* (*)(wait_op*, action, void*);
  explicit wait_op(op_fn fn) noexcept : fn_(fn) {}
  wait_op(const wait_op&) = default;
  wait_op& operator=(const wait_op&) = delete;
  ~wait_op() = default;

private:
  op_fn fn_;
};

// The wait being handed to its handler's executor on this thread, so that a failure there
// loses nothing. Asio allocates to queue a function on a strand or through a type-erased
// executor (the function's wrapper, the strand's operation), and where that throws, the
// function it was given is destroyed unqueued. The function the wheel gives
// (queued_completion) only points at the wait, which keeps its handler: destroyed while its
// wait is the one being dispatched here, it gives the wait back instead of destroying it,
// and the batch puts the wait back at the front of the ready queue (late, never lost).
// Destroyed anywhere else (its executor's shutdown), it destroys the handler uncalled.
class dispatch_scope {
public:
  explicit dispatch_scope(wait_op* op) noexcept : op_(op), outer_(innermost_) { innermost_ = this; }
  dispatch_scope(const dispatch_scope&) = delete;
  dispatch_scope& operator=(const dispatch_scope&) = delete;
  ~dispatch_scope() { innermost_ = outer_; }

  // Whether the function given for op_ was destroyed uncalled during the dispatch: the wait
  // is the caller's again, untouched.
  bool given_back() const noexcept { return given_back_; }

  // Called by a queued_completion about to call its wait's handler (the executor ran it,
  // inline in the dispatch or later): the wait is freed before the upcall, and its memory
  // may hold another wait by the time a function is destroyed here.
  static void taken(wait_op* op) noexcept {
    for (dispatch_scope* s = innermost_; s != nullptr; s = s->outer_) {
      if (s->op_ == op)
        s->op_ = nullptr;
    }
  }

  // Called by a queued_completion destroyed uncalled: true (and the wait is given back) if
  // `op` is being dispatched on this thread.
  static bool give_back(wait_op* op) noexcept {
    for (dispatch_scope* s = innermost_; s != nullptr; s = s->outer_) {
      if (s->op_ == op) {
        s->given_back_ = true;
        return true;
      }
    }
    return false;
  }

  // The wait whose dispatch failed and was given back, for the batch that completed it
  // (read once, right after the exception left complete()).
  static wait_op* take_failed() noexcept { return std::exchange(failed_, nullptr); }
  static void set_failed(wait_op* op) noexcept { failed_ = op; }

private:
  wait_op* op_;
  dispatch_scope* outer_;
  bool given_back_ = false;
  static inline thread_local dispatch_scope* innermost_ = nullptr;
  static inline thread_local wait_op* failed_ = nullptr;
};

// The nullary function a dispatched wait is queued as on its handler's executor: the wait
// itself, whose handler moves out only when it is called (see dispatch_scope). It speaks for
// the handler's associated allocator, so that whatever the executor allocates to queue it (a
// strand's operation, a pool's) comes from there, as with Asio's own operations. A template
// on that allocator's type only, not on the handler, so that the executors' code that queues
// it (Asio's dispatch, its operations and type-erased functions) is instantiated once per
// executor and allocator type, shared by every handler type of a program.
template <typename Allocator>
class queued_completion {
public:
  using allocator_type = Allocator;

  queued_completion(wait_op* op, const Allocator& allocator) noexcept
      : op_(op), allocator_(allocator) {}
  queued_completion(queued_completion&& other) noexcept
      : op_(std::exchange(other.op_, nullptr)), allocator_(other.allocator_) {}
  queued_completion& operator=(queued_completion&&) = delete;
  ~queued_completion() {
    if (op_ != nullptr && !dispatch_scope::give_back(op_))
      op_->complete(false);
  }

  allocator_type get_allocator() const noexcept { return allocator_; }

  void operator()() {
    dispatch_scope::taken(op_);
    std::exchange(op_, nullptr)->call_queued();
  }

private:
  wait_op* op_;
  allocator_type allocator_;
};

// Hands the completed wait `op` to its handler's executor, kept in `completion` (a
// tracked_executor, inside the wait), as a queued_completion speaking for `allocator`. If
// that throws and the wait was given back, the wait is as it was (its executor put back), set
// as the failed one for the batch, and the exception propagates: the next run() hands it to
// the executor again. For want of memory (std::bad_alloc) as often as it takes: late, never
// lost. For any other exception once: an executor that refuses the same wait a second time
// is taken to refuse it for good, and the wait goes as Asio's own operation goes at the
// first refusal, its handler destroyed uncalled, before that exception propagates; else
// every run() would throw again and the waits behind it in the batch would never complete.
// A throw after the executor queued the function (or from the handler, called inline)
// leaves the wait to the executor. Shared by every handler type with the same executor and
// allocator types, as queued_completion is, and out of line, so that each handler's
// operation holds only a call: it is off the path of a wait completed on the wheel's own
// context.
template <typename Completion, typename Allocator>
[[gnu::noinline]] void dispatch_queued(wait_op* op, Completion& completion,
                                       const Allocator& allocator) {
  auto ex = completion.take();
  dispatch_scope scope(op);
  ASIO_WHEEL_TRY {
    asio::dispatch(ex, queued_completion<Allocator>(op, allocator));
  }
  ASIO_WHEEL_CATCH_ALL {
    if (scope.given_back()) {
      completion.put_back(std::move(ex));
      if (handling_bad_alloc()) {
        dispatch_scope::set_failed(op);
      } else if (!op->ready_.refused_once) {
        op->ready_.refused_once = true;
        dispatch_scope::set_failed(op);
      } else {
        op->complete(false);
      }
    }
    ASIO_WHEEL_RETHROW;
  }
  // An executor that dropped the function without throwing (a closed queue, say): the
  // handler goes uncalled, as Asio's own operation's would.
  if (scope.given_back())
    op->complete(false);
}

// Bytes for one wait kept inside its timer object (timer_entry::inline_): the header above
// plus a handler of two pointers, such as most lambdas and every coroutine handler.
inline constexpr std::size_t inline_op_size = 56;

// The executor a handler must complete on, kept with outstanding work when it is not the
// wheel's own context executor (Asio's rule: a pending wait keeps the handler's executor
// busy). Track = false, for a wait on a virtual clock, keeps it without outstanding work:
// such a wait completes only when virtual_time drives the wheel, so its work would keep
// io_context::run() busy for nothing, and virtual_time::run() could not tell a forgotten
// hold from real I/O (virtual_clock.hpp). The completion is dispatched the same way.
template <typename Executor, bool Track = true, typename = void>
class tracked_executor {
public:
  explicit tracked_executor(const Executor& ex) : executor_(asio::prefer(ex, work())) {}

  // The executor to dispatch a completion on, moved out (the operation may be gone when the
  // dispatch returns), and back if the dispatch gave the operation back.
  auto take() noexcept { return std::move(executor_); }
  template <typename E>
  void put_back(E&& ex) noexcept {
    executor_ = std::forward<E>(ex);
  }

private:
  static constexpr auto work() noexcept {
    if constexpr (Track)
      return asio::execution::outstanding_work.tracked;
    else
      return asio::execution::outstanding_work.untracked;
  }

  std::decay_t<decltype(asio::prefer(std::declval<const Executor&>(), work()))> executor_;
};

// Networking TS style executors (no properties, such as the legacy io_context::strand) keep
// work through a work guard.
template <typename Executor, bool Track>
class tracked_executor<Executor, Track,
                       std::enable_if_t<!asio::execution::is_executor<Executor>::value>> {
public:
  explicit tracked_executor(const Executor& ex) : held_(ex) {}

  // A copy: the work guard stays with the operation until it is destroyed.
  Executor take() const noexcept {
    if constexpr (Track)
      return held_.get_executor();
    else
      return held_;
  }
  void put_back(const Executor&) noexcept {}

private:
  std::conditional_t<Track, asio::executor_work_guard<Executor>, Executor> held_;
};

// Completion on the wheel's own context executor: the service is already running there,
// so the handler is called directly, without another trip through the scheduler.
class direct_completion {
public:
  template <typename Handler>
  void complete(Handler&& handler, const error_code& ec) {
    std::move(handler)(ec);
  }
};

// Where a handler without an associated allocator gets its operation memory: per-thread
// block lists, so a re-armed wait reuses the block its predecessor freed.
template <typename Handler>
using op_allocator_t = asio::associated_allocator_t<Handler, block_cache_allocator<void>>;

// The wait of one handler. Completion is direct_completion or a tracked_executor<>.
template <typename Handler, typename Completion>
class wait_handler_op final : public wait_op {
public:
  using allocator_type = typename std::allocator_traits<
      op_allocator_t<Handler>>::template rebind_alloc<wait_handler_op>;

  // Constructs the operation in a timer's inline storage. Only if fits_inline<Handler>.
  template <typename H>
  static wait_handler_op* create_at(void* storage, H&& handler) {
    return ::new (storage) wait_handler_op(allocator_type(), std::forward<H>(handler));
  }

  template <typename H, typename... Args>
  static wait_handler_op* create(H&& handler, Args&&... completion_args) {
    allocator_type alloc(asio::get_associated_allocator(handler, block_cache_allocator<void>()));
    wait_handler_op* p = std::allocator_traits<allocator_type>::allocate(alloc, 1);
    ASIO_WHEEL_TRY {
      return ::new (static_cast<void*>(p))
          wait_handler_op(alloc, std::forward<H>(handler), std::forward<Args>(completion_args)...);
    }
    ASIO_WHEEL_CATCH_ALL {
      std::allocator_traits<allocator_type>::deallocate(alloc, p, 1);
      ASIO_WHEEL_RETHROW;
    }
  }

private:
  template <typename H, typename... Args>
  wait_handler_op(const allocator_type& alloc, H&& handler, Args&&... completion_args)
      : wait_op(&wait_handler_op::do_fn), allocator_(alloc),
        completion_(std::forward<Args>(completion_args)...), handler_(std::forward<H>(handler)) {}

  // Relocation copies the links along with the rest; the service fixes the neighbours.
  wait_handler_op(wait_handler_op&&) = default;

  // Destroys the operation and releases its memory when it goes out of scope, unless
  // released first: Asio's handler_ptr, so that a throwing move of the handler leaks nothing.
  class op_ptr {
  public:
    explicit op_ptr(wait_handler_op* op) noexcept : op_(op), alloc_(op->allocator_) {}
    op_ptr(const op_ptr&) = delete;
    op_ptr& operator=(const op_ptr&) = delete;
    ~op_ptr() { reset(); }
    void reset() noexcept {
      if (op_ != nullptr) {
        op_->~wait_handler_op();
        wait_handler_op* const op = op_;
        op_ = nullptr;
        std::allocator_traits<allocator_type>::deallocate(alloc_, op, 1);
      }
    }

  private:
    wait_handler_op* op_;
    allocator_type alloc_;
  };

  // Calls the handler of a completed wait (dispatched, or one whose handler's move may
  // throw), its memory released first.
  static void call(wait_handler_op* self) {
    op_ptr p(self); // if the move throws, frees the operation, handler and all
    Handler handler(std::move(self->handler_));
    const error_code ec = self->result();
    p.reset();
    std::move(handler)(ec);
  }

  static wait_op* do_fn(wait_op* base, action what, void* arg) {
    auto* self = static_cast<wait_handler_op*>(base);
    if constexpr (!std::is_same_v<Completion, direct_completion>) {
      if (what == action::invoke) {
        dispatch_queued(self, self->completion_, asio::get_associated_allocator(self->handler_));
        return nullptr;
      }
      if (what == action::call_queued) {
        call(self);
        return nullptr;
      }
    }
    if (what == action::invoke || what == action::destroy) {
      // Move everything out and free the operation before the upcall: Asio promises the
      // memory is back before the handler runs, and a sub-object of the handler may own it.
      if constexpr (std::is_nothrow_move_constructible_v<Handler> &&
                    std::is_nothrow_move_constructible_v<Completion>) {
        allocator_type alloc(self->allocator_);
        Completion completion(std::move(self->completion_));
        Handler handler(std::move(self->handler_));
        const error_code ec = self->result();
        self->~wait_handler_op();
        std::allocator_traits<allocator_type>::deallocate(alloc, self, 1);
        if constexpr (std::is_same_v<Completion, direct_completion>) {
          if (what == action::invoke)
            completion.complete(std::move(handler), ec);
        }
      } else if (what == action::destroy) {
        op_ptr p(self); // if the move throws, frees the operation, handler and all
        ASIO_WHEEL_TRY {
          [[maybe_unused]] Handler handler(std::move(self->handler_));
          p.reset();
        }
        ASIO_WHEEL_CATCH_ALL {
          // The handler is destroyed in place instead, which is all that was asked.
        }
      } else if constexpr (std::is_same_v<Completion, direct_completion>) {
        call(self);
      }
      return nullptr;
    }
    if constexpr (std::is_nothrow_move_constructible_v<Handler> &&
                  std::is_nothrow_move_constructible_v<Completion>) {
      if (what == action::relocate) {
        auto* moved = ::new (arg) wait_handler_op(std::move(*self));
        self->~wait_handler_op();
        return moved;
      }
      [[maybe_unused]] Handler handler(std::move(self->handler_));
      self->~wait_handler_op();
      static_cast<std::atomic<bool>*>(arg)->store(false, std::memory_order_release);
      return nullptr; // `handler` goes last
    } else {
      std::terminate(); // unreachable: such operations are never inline
    }
  }

  error_code result() const noexcept { return ready_.aborted ? aborted_error() : error_code(); }

  [[no_unique_address]] allocator_type allocator_;
  [[no_unique_address]] Completion completion_;
  Handler handler_;
};

// Whether a wait of this handler, completing on the wheel's own context, can live in its
// timer: small enough, no allocator of its own (Asio's rule: operation memory comes from the
// handler's associated allocator), and movable without throwing, because the service moves
// it out of the timer, under its lock, when the wait completes or the timer moves.
template <typename Handler>
inline constexpr bool fits_inline =
    sizeof(wait_handler_op<Handler, direct_completion>) <= inline_op_size &&
    alignof(wait_handler_op<Handler, direct_completion>) <= alignof(void*) &&
    std::is_nothrow_move_constructible_v<Handler>&& std::is_same_v<op_allocator_t<Handler>,
                                                                   block_cache_allocator<void>>;

} // namespace asio_wheel::detail

#endif // ASIO_WHEEL_DETAIL_WAIT_OP_HPP
