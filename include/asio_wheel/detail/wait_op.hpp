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

#include <asio/associated_allocator.hpp>
#include <asio/dispatch.hpp>
#include <asio/error.hpp>
#include <asio/execution.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/is_executor.hpp>
#include <asio/prefer.hpp>

#include <atomic>
#include <memory>
#include <type_traits>
#include <utility>

namespace asio_wheel::detail {

struct timer_entry;
class wait_op;

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
  // the stored result; when false only destroys the handler (shutdown).
  void complete(bool invoke) { complete_(this, invoke); }

  // Links in the owning timer's FIFO of pending waits; the ready queue reuses next_ once
  // the wait has left its timer.
  wait_op* next_ = nullptr;
  // prev_ while the wait is pending; aborted_, its result, once it is ready to complete.
  // Sharing the word keeps the operation of a small handler within a 56-byte block.
  union {
    wait_op* prev_ = nullptr;
    bool aborted_;
  };
  // The timer this wait is pending on; nullptr once it is ready to complete.
  timer_entry* owner_ = nullptr;
  // The handler emplaced in the associated cancellation slot while linked to this wait, or
  // nullptr (see cancellation_target).
  cancellation_target* cancellation_ = nullptr;

protected:
  using complete_fn = void (*)(wait_op*, bool);
  explicit wait_op(complete_fn fn) noexcept : complete_(fn) {}
  ~wait_op() = default;

private:
  complete_fn complete_;
};

// The executor a handler must complete on, kept with outstanding work when it is not the
// wheel's own context executor (Asio's rule: a pending wait keeps the handler's executor
// busy).
template <typename Executor, typename = void>
class tracked_executor {
public:
  explicit tracked_executor(const Executor& ex)
      : executor_(asio::prefer(ex, asio::execution::outstanding_work.tracked)) {}

  template <typename Handler>
  void complete(Handler&& handler, const asio::error_code& ec) {
    asio::dispatch(executor_, [h = std::move(handler), ec]() mutable { std::move(h)(ec); });
  }

private:
  std::decay_t<decltype(asio::prefer(std::declval<const Executor&>(),
                                     asio::execution::outstanding_work.tracked))>
      executor_;
};

// Networking TS style executors (no properties) keep work through a work guard.
template <typename Executor>
class tracked_executor<Executor, std::enable_if_t<!asio::execution::is_executor<Executor>::value>> {
public:
  explicit tracked_executor(const Executor& ex) : guard_(ex) {}

  template <typename Handler>
  void complete(Handler&& handler, const asio::error_code& ec) {
    asio::dispatch(guard_.get_executor(),
                   [h = std::move(handler), ec]() mutable { std::move(h)(ec); });
  }

private:
  asio::executor_work_guard<Executor> guard_;
};

// Completion on the wheel's own context executor: the service is already running there,
// so the handler is called directly, without another trip through the scheduler.
class direct_completion {
public:
  template <typename Handler>
  void complete(Handler&& handler, const asio::error_code& ec) {
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

  template <typename H, typename... Args>
  static wait_handler_op* create(H&& handler, Args&&... completion_args) {
    allocator_type alloc(asio::get_associated_allocator(handler, block_cache_allocator<void>()));
    wait_handler_op* p = std::allocator_traits<allocator_type>::allocate(alloc, 1);
    try {
      return ::new (static_cast<void*>(p))
          wait_handler_op(alloc, std::forward<H>(handler), std::forward<Args>(completion_args)...);
    } catch (...) {
      std::allocator_traits<allocator_type>::deallocate(alloc, p, 1);
      throw;
    }
  }

private:
  template <typename H, typename... Args>
  wait_handler_op(const allocator_type& alloc, H&& handler, Args&&... completion_args)
      : wait_op(&wait_handler_op::do_complete), allocator_(alloc),
        completion_(std::forward<Args>(completion_args)...), handler_(std::forward<H>(handler)) {}

  static void do_complete(wait_op* base, bool invoke) {
    auto* self = static_cast<wait_handler_op*>(base);
    // Move everything out and free the operation before the upcall: Asio promises the
    // memory is back before the handler runs, and a sub-object of the handler may own it.
    allocator_type alloc(self->allocator_);
    Completion completion(std::move(self->completion_));
    Handler handler(std::move(self->handler_));
    const asio::error_code ec =
        self->aborted_ ? asio::error_code(asio::error::operation_aborted) : asio::error_code();
    self->~wait_handler_op();
    std::allocator_traits<allocator_type>::deallocate(alloc, self, 1);
    if (invoke)
      completion.complete(std::move(handler), ec);
  }

  [[no_unique_address]] allocator_type allocator_;
  [[no_unique_address]] Completion completion_;
  Handler handler_;
};

} // namespace asio_wheel::detail

#endif // ASIO_WHEEL_DETAIL_WAIT_OP_HPP
