//
// detail/wheel_service.hpp
// ~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_DETAIL_WHEEL_SERVICE_HPP
#define ASIO_WHEEL_DETAIL_WHEEL_SERVICE_HPP

// One timing wheel per execution context and clock: the Asio service that every wheel_timer
// of a context shares, as Asio's deadline_timer_service is for its timers (docs/design.md
// has the layout). It is the glue: it holds the lock, builds each wait's operation, hands
// it to its timer_queue (the entries, their waits, the wheel), arms its service_alarm (one
// Asio timer, armed for the wheel's next expiry and cancelled when no wait is left, so that
// an idle context's run() can return), and runs, on its service_home, the expiry turns and
// the drains that complete the waits (completion.hpp). Whatever it starts by itself lives
// in memory it owns (own_memory, block_reserve).

#include <asio_wheel/detail/block_reserve.hpp>
#include <asio_wheel/detail/completion.hpp>
#include <asio_wheel/detail/futex_mutex.hpp>
#include <asio_wheel/detail/handler_executor.hpp>
#include <asio_wheel/detail/io_executor_holder.hpp>
#include <asio_wheel/detail/op_cancellation.hpp>
#include <asio_wheel/detail/own_memory.hpp>
#include <asio_wheel/detail/service_alarm.hpp>
#include <asio_wheel/detail/timer_entry.hpp>
#include <asio_wheel/detail/timer_queue.hpp>
#include <asio_wheel/detail/wait_op.hpp>
#include <asio_wheel/virtual_clock.hpp>
#include <asio_wheel/wheel_statistics.hpp>

#include <asio_wheel/detail/asio_forward.hpp>
#include <asio_wheel/detail/exceptions.hpp>

#include <algorithm>
#include <atomic>
#include <cassert>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <new>
#include <optional>
#include <type_traits>
#include <utility>

namespace asio_wheel::detail {

template <typename Clock, typename WaitTraits>
class wheel_service : public asio::execution_context::service {
public:
  using clock_type = Clock;
  using duration = typename Clock::duration;
  using time_point = typename Clock::time_point;

  static_assert(std::is_integral_v<typename duration::rep> && sizeof(typename duration::rep) <= 8,
                "asio_wheel: the clock's duration must have an integral representation of at "
                "most 64 bits (libc++'s std::chrono::file_clock has a 128-bit one)");

  inline static asio::execution_context::id id;

  explicit wheel_service(asio::execution_context& context)
      : asio::execution_context::service(context), home_(context, mutex_) {}

  wheel_service(const wheel_service&) = delete;
  wheel_service& operator=(const wheel_service&) = delete;

  ~wheel_service() override {
    // Waits aborted after shutdown (by another service's shutdown, say): never called.
    std::uint64_t count = 0;
    destroy_list(queue_.ready().take(count));
  }

  duration tick() const {
    std::lock_guard lock(mutex_);
    return queue_.driver().scale().tick();
  }

  void set_tick(duration tick) {
    std::lock_guard lock(mutex_);
    queue_.driver().set_tick(tick, alarm_.started());
  }

  // See io_executor_holder: the timers made from the context's plain executor share it.
  const shared_context_executor& own_executor(asio::io_context& io) {
    return own_executor_.get(io);
  }

  // The executor the service's own handlers run on (service_home), found from `ex` (an
  // executor of this context) if no wait found it yet; it never changes after. For the
  // library's other context-wide handlers (detail/scaled_queue.hpp), which must not keep
  // the work or the strand of the first timer that needed them.
  template <typename Executor>
  const asio::any_io_executor& home_executor(const Executor& ex) {
    std::lock_guard lock(mutex_);
    home_.find(ex, ex);
    return home_.executor();
  }

  // Starts a wait on `entry` for `expiry`. Strong guarantee: if it throws, nothing changed.
  template <typename Handler, typename IoExecutor>
  void async_wait(timer_entry& entry, const time_point& expiry, Handler&& handler,
                  const IoExecutor& io_ex) {
    auto slot = asio::get_associated_cancellation_slot(handler);
    auto ex = asio::get_associated_executor(handler, io_ex);

    // Emplaced before the op is built, so that a throwing emplace leaks nothing; until the
    // op is linked below, the handler has nothing to cancel.
    cancellation* slot_handler = nullptr;
    if (slot.is_connected())
      slot_handler = &slot.template emplace<cancellation>(this);

    wait_op* const op = make_wait_op(entry, std::forward<Handler>(handler), ex, home_);

    // The lock is gone before the wait is destroyed (its handler's destructor may call back
    // in): by unwinding, or at the end of the block. A lock_guard, not a unique_lock, whose
    // owns flag the compiler kept testing.
    bool started = false;
    ASIO_WHEEL_TRY {
      std::lock_guard lock(mutex_);
      started = start_wait(entry, op, expiry, slot_handler, io_ex, ex);
    }
    ASIO_WHEEL_CATCH_ALL {
      discard(entry, op);
      ASIO_WHEEL_RETHROW;
    }
    if (!started)
      discard(entry, op);
  }

  // Aborts every pending wait of `entry`; returns how many. Strong guarantee.
  std::size_t cancel(timer_entry& entry) {
    std::lock_guard lock(mutex_);
    return detach_all(entry, true);
  }

  // Aborts the oldest pending wait of `entry`; returns how many (0 or 1). Strong guarantee.
  std::size_t cancel_one(timer_entry& entry) {
    std::lock_guard lock(mutex_);
    wait_op* const op = entry.head_;
    if (op == nullptr)
      return 0;
    spare_block spare(entry.holds(op));
    detach(op, spare);
    return 1;
  }

  // The timer is going (destroyed, or assigned over): aborts its waits, as cancel(), and
  // takes its entry out of the wheel. From a destructor, a wait in the timer's storage that
  // finds no block on the heap takes one from the reserve, and only if that is empty too,
  // throws (and the destructor terminates); otherwise strong guarantee. After shutdown,
  // the waits are destroyed instead, here, without allocating.
  void release(timer_entry& entry, bool from_destructor) {
    std::unique_lock lock(mutex_);
    if (shutdown_) {
      const doomed_waits waits = queue_.take_doomed(entry);
      lock.unlock();
      waits.destroy(entry);
      return;
    }
    if (entry.head_ != nullptr) {
      const bool in_timer = entry.inline_busy_.load(std::memory_order_relaxed);
      spare_block spare = from_destructor ? reserve_.spare(in_timer) : spare_block(in_timer);
      detach_all(entry, true, spare);
    }
    if (entry.is_linked())
      queue_.unfile(entry);
  }

  // Moves the pending waits of `entry` to a new expiry without aborting them: lets an idle
  // timer follow a changed timeout without an operation_aborted round trip. Strong
  // guarantee.
  void retarget(timer_entry& entry, const time_point& expiry) {
    std::lock_guard lock(mutex_);
    if (entry.head_ == nullptr)
      return;
    const tick_type deadline = queue_.driver().scale().ceil(expiry);
    if (queue_.driver().due(deadline)) {
      detach_all(entry, false);
      return;
    }
    // Armed first: if that throws (only on a context other than an io_context or a thread
    // pool), the waits have not moved. Moved now, even when later: an idle timer's timeout
    // moves rarely, and a filing left behind would wake the alarm once more.
    arm_if_earlier(deadline);
    queue_.refile(entry, deadline);
  }

  // Moves the pending waits of `from` to `to` (a timer being moved).
  void move_entry(timer_entry& to, timer_entry& from) {
    std::lock_guard lock(mutex_);
    queue_.move(to, from);
  }

  // A consistent snapshot (see wheel_statistics), from any thread.
  wheel_statistics statistics(bool count_levels) const;

  // Virtual clock only (see virtual_time): the time the alarm would be armed for, empty
  // when nothing is pending.
  std::optional<time_point> virtual_next() const;

  // Virtual clock only: the alarm's wake-up, as the Asio timer would complete it, posted
  // to the context (the caller polls it). Returns false if nothing was armed.
  bool virtual_fire();

private:
  using cancellation = op_cancellation<wheel_service>;
  friend cancellation;

  // First wait on this context, with mutex_ held: the home, if no is_home() question found
  // it yet, the reserve, and the alarm on the home. Strong guarantee. Out of line: it runs
  // once per context (callgrind_ops counts every wait's inlining budget).
  template <typename IoExecutor, typename Executor>
  [[gnu::cold, gnu::noinline]] void start(const IoExecutor& io_ex, const Executor& ex);

  void shutdown() override;

  // --- Everything below runs with mutex_ held, unless it says otherwise. ---

  // Links `op`, built for `entry`, as a wait for `expiry`; false after shutdown (the caller
  // then destroys it). If it throws, nothing changed.
  template <typename IoExecutor, typename Executor>
  [[gnu::always_inline]] bool start_wait(timer_entry& entry, wait_op* op, const time_point& expiry,
                                         cancellation* slot_handler, const IoExecutor& io_ex,
                                         const Executor& ex) {
    if (shutdown_)
      return false;
    ++queue_.counters().started;
    // Already in the wheel for the same expiry: the wait joins the others. Otherwise, an
    // expiry that has passed is filed at the wheel's current tick, due, and an expiry turn is
    // queued for it instead of the alarm: like Asio's timer queue, which keeps such a wait
    // until the reactor's next pass, the wait stays on its timer until that turn, so a
    // cancel() or expires_*() before it still aborts it. Filed at the wheel's time, not its
    // own deadline, so that the lateness statistics count only the wheel's delay.
    const bool joins = entry.head_ != nullptr;
    tick_type deadline = queue_.driver().scale().ceil(expiry);
    // Whatever may throw comes before any change. Arming does not throw (on an io_context or
    // a thread pool): if Asio's timer queue cannot take the alarm's wait, a continuation arms
    // it (see arm_if_earlier).
    const bool past = !joins && queue_.driver().due(deadline);
    if (!alarm_.started())
      start(io_ex, ex);
    if (past) {
      post_continuation();
      deadline = std::max(deadline, queue_.driver().wheel().now());
    } else if (!joins) {
      arm_if_earlier(deadline);
    }
    op->cancellation_ = slot_handler;
    if (slot_handler != nullptr)
      slot_handler->op_.store(op, std::memory_order_relaxed);
    queue_.counters().expired_at_start += past;
    queue_.enqueue(entry, op, deadline, joins);
    return true;
  }

  // Aborts `op` (see timer_queue::detach), the drain posted first, which is what keeps
  // another thread's run() from returning before the alarm may be disarmed.
  void detach(wait_op* op, spare_block& spare) {
    post_drain();
    if (queue_.detach(op, true, spare))
      alarm_.disarm(queue_.driver());
  }

  // As detach(), for every wait of `entry`; returns how many. Strong guarantee: the block
  // and the drain come first.
  std::size_t detach_all(timer_entry& entry, bool aborted) {
    if (entry.head_ == nullptr)
      return 0;
    spare_block spare(entry.inline_busy_.load(std::memory_order_relaxed));
    return detach_all(entry, aborted, spare);
  }

  std::size_t detach_all(timer_entry& entry, bool aborted, spare_block& spare) {
    post_drain();
    const std::size_t count = queue_.detach_all(entry, aborted, spare);
    if (queue_.live() == 0)
      alarm_.disarm(queue_.driver());
    return count;
  }

  // Makes sure the alarm wakes no later than `tick`; if it cannot (see
  // service_alarm::arm_if_earlier), a continuation, posted instead, tries again. The test
  // inline, the arming out of line: nearly every wait finds the alarm settled, and a call
  // for that cost each arm and reset ~20 instructions (docs/completion_path.md).
  [[gnu::always_inline]] bool arm_if_earlier(tick_type tick) {
    if (alarm_.settled(queue_.driver(), tick))
      return true;
    return arm_alarm(tick);
  }

  [[gnu::noinline]] bool arm_alarm(tick_type tick) {
    if (alarm_.arm_if_earlier(
            queue_.driver(), tick,
            own_handler<wheel_service, &wheel_service::on_alarm>{this, &alarm_.memory()}))
      return true;
    post_continuation();
    return false;
  }

  // Queues the drain unless one is. Throws only on a context other than an io_context or a
  // thread pool (see service_home::post): callers post it before they change anything.
  void post_drain() {
    if (!drain_.queued() && !shutdown_)
      post_drain_now();
  }

  // Out of line: it is rarely needed, and would weigh on the callers' inlining.
  [[gnu::noinline]] void post_drain_now() { drain_.post(home_, this); }

  // Queues another expiry turn unless one is: the rest of a backlog, or a retry.
  void post_continuation() {
    if (!continuation_.queued() && !shutdown_)
      continuation_.post(home_, this);
  }

  void cancel_by_slot(cancellation& slot_handler) {
    std::lock_guard lock(mutex_);
    if (wait_op* op = slot_handler.op_.load(std::memory_order_relaxed)) {
      // emit() is not expected to throw: the reserve stands in for the heap.
      spare_block spare = reserve_.spare(op->owner_->holds(op));
      detach(op, spare);
    }
  }

  void forget_slot(cancellation& slot_handler) {
    std::lock_guard lock(mutex_);
    if (wait_op* op = slot_handler.op_.load(std::memory_order_relaxed)) {
      op->cancellation_ = nullptr;
      slot_handler.op_.store(nullptr, std::memory_order_relaxed);
    }
  }

  // --- Handlers of the service's own, on its home (without the lock). ---

  // The alarm's wait is done: expired, or cancelled to be armed again (or disarmed).
  // Either way its memory is free, and an expiry turn arms it for what is left.
  void on_alarm();

  // The continuation: the rest of a turn's backlog (or a retry after memory ran short).
  void resume();

  // An expiry turn: takes the due waits out of the wheel, arms the alarm for what is left,
  // and completes them. If memory is short (a wait cannot leave its timer's storage, or the
  // alarm cannot be armed), the waits taken so far still complete, the rest stay in the
  // wheel, a continuation is queued, and std::bad_alloc leaves run(): the next run() carries
  // on. Called with the lock held; releases it.
  void expire(std::unique_lock<futex_mutex>& lock);

  // Completes, as one batch, the waits decided outside a turn (aborted, or retargeted into
  // the past).
  void drain();

  // Completes a batch (see complete_batch): what a stop() or a throwing handler leaves goes
  // back to the front of the ready queue, with a drain posted.
  void complete(wait_op* list);

  // Guards every member below, the timer_entry lists and wait_op links (and home_ until it
  // is found).
  mutable futex_mutex mutex_;
  // Where the alarm, the turns and the drains run. Declared before alarm_, which runs on it.
  service_home home_;
  timer_queue<Clock> queue_;
  // The drain, and the continuation of an expiry turn: at most one of each is queued.
  own_post<wheel_service, &wheel_service::drain> drain_;
  own_post<wheel_service, &wheel_service::resume> continuation_;
  bool shutdown_ = false;
  block_reserve reserve_;
  service_alarm<Clock, WaitTraits> alarm_;
  // Not guarded by mutex_.
  shared_context_executor_once own_executor_;
};

} // namespace asio_wheel::detail

#include <asio_wheel/detail/impl/wheel_service.hpp>

#endif // ASIO_WHEEL_DETAIL_WHEEL_SERVICE_HPP
