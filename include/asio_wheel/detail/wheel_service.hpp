//
// detail/wheel_service.hpp
// ~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_DETAIL_WHEEL_SERVICE_HPP
#define ASIO_WHEEL_DETAIL_WHEEL_SERVICE_HPP

// One timing wheel per execution context and clock, driven by one Asio timer.
//
// Every wheel_timer of a context shares this service. A timer is one wheel entry
// (timer_entry) while it has pending waits, whatever their number: all waits of a timer
// share its expiry, as in Asio's own timer queue. The driver, one
// asio::basic_waitable_timer, is armed for the earliest tick at which the wheel has work,
// re-armed only when an insert moves that earlier, and cancelled when no entry has a wait
// left, so an idle context has no timer armed and run() can return.
//
// Lazy re-arm. An entry that loses its waits stays in the wheel; given new ones for a later
// expiry (a heartbeat re-armed on every request), it stays where it is and wanted_ records
// the expiry. When its tick comes, the driver files it again for wanted_, or drops it if it
// has no wait: one wheel operation per tick reached, not one per re-arm.
//
// Inline waits. Each timer has room for one small wait (timer_entry::inline_). A wait moves
// out of it, under the lock, when it leaves its timer for the ready queue (to a block of
// its own) or when the timer is moved (to the new timer's room), so the ready queue and the
// batches never point into a timer object that its owner may destroy.
//
// Completions. Waits that expire in one driver turn, or are aborted before the next drain,
// are completed in one batch from a single handler on the context: a handler whose executor
// is the context's own is called directly from it, any other is dispatched to its executor.
// If a handler throws, the rest of the batch is queued for the next drain before the
// exception leaves run(), so nothing is lost.
//
// Shutdown. shutdown() destroys every pending handler without calling it, and the driver
// timer while Asio's timer service and reactor are still alive: services are shut down
// before any is destroyed, and those may be destroyed before this one.

#include <asio_wheel/detail/futex_mutex.hpp>
#include <asio_wheel/detail/io_executor_holder.hpp>
#include <asio_wheel/detail/tick_scale.hpp>
#include <asio_wheel/detail/timing_wheel.hpp>
#include <asio_wheel/detail/wait_op.hpp>

#include <asio_wheel/detail/asio_forward.hpp>

#include <atomic>
#include <cassert>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <utility>

namespace asio_wheel::detail {

// The wheel state of one timer object; embedded in it.
struct timer_entry : wheel_node {
  timer_entry() = default;
  timer_entry(const timer_entry&) = delete;
  timer_entry& operator=(const timer_entry&) = delete;

  // Owned by the timer object, not the service (so not guarded by the service's lock):
  // false guarantees that no wait is pending and that the entry is not in the wheel, which
  // lets expires_at() on an idle timer, and its destructor, skip the service. Declared
  // first so that it fits in wheel_node's tail padding.
  bool might_be_filed_ = false;
  // True while a pending wait lives in inline_ (at most one does). Set by the timer's owner
  // when it starts a wait there; cleared under the service's lock when that wait leaves the
  // timer. Atomic because the owner reads it without the lock, to choose where its next
  // wait goes; declared here to share wheel_node's tail padding with the flag above.
  std::atomic<bool> inline_busy_{false};
  // Pending waits, oldest first, linked through wait_op::next_ (null-terminated) and
  // wait_op::prev_ (circular: head_->prev_ is the newest, so no tail pointer is needed in
  // every timer). An entry with waits is in the wheel; one without may still be, left
  // there by a cancellation (lazy re-arm, see wheel_service::file).
  wait_op* head_ = nullptr;
  // While waits are pending: their deadline. The wheel may hold the entry at an earlier
  // tick, where it was filed for an earlier wait; it is filed again for wanted_ then.
  tick_type wanted_ = 0;
  // Storage for one wait, so that a timer with one small wait allocates nothing and keeps
  // it in its own cache lines. A wait leaves it when it completes (for a block of its own:
  // the timer may go before the handler runs) or when the timer moves (for the new timer's).
  alignas(void*) unsigned char inline_[inline_op_size];

  bool holds(const wait_op* op) const noexcept {
    const void* p = op;
    return !std::less<const void*>()(p, inline_) &&
           std::less<const void*>()(p, inline_ + sizeof inline_);
  }
};

// The target of a type-erased executor if it is a T, else nullptr. Asio 1.22's
// any_executor::target<T>() casts without checking the type.
template <typename T, typename AnyExecutor>
const T* target_if(const AnyExecutor& ex) noexcept {
  return ex.target_type() == typeid(T) ? ex.template target<T>() : nullptr;
}

template <typename Clock, typename WaitTraits>
class wheel_service : public asio::execution_context::service {
public:
  using clock_type = Clock;
  using duration = typename Clock::duration;
  using time_point = typename Clock::time_point;

  static_assert(std::is_integral_v<typename duration::rep> && sizeof(typename duration::rep) <= 8,
                "asio_wheel: the clock's duration must have an integral representation of at "
                "most 64 bits");

  inline static asio::execution_context::id id;

  // Longest tick accepted by set_tick(); beyond it a wheel is the wrong tool.
  static constexpr std::chrono::seconds max_tick{60};
  // Expiries handled, and entries re-filed, per driver turn before other handlers of the
  // context get a turn: one upper slot can hold a large share of a million timers.
  static constexpr std::size_t expiry_budget = 4096;
  static constexpr std::size_t cascade_budget = 16384;

  explicit wheel_service(asio::execution_context& context)
      : asio::execution_context::service(context) {
    reset_time(default_tick());
  }

  wheel_service(const wheel_service&) = delete;
  wheel_service& operator=(const wheel_service&) = delete;

  static duration default_tick() noexcept {
    return std::max(duration{1},
                    std::chrono::duration_cast<duration>(std::chrono::milliseconds(1)));
  }

  duration tick() const {
    std::lock_guard lock(mutex_);
    return scale_.tick();
  }

  void set_tick(duration tick) {
    if (tick <= duration::zero() || tick > max_tick)
      throw std::invalid_argument("asio_wheel: invalid tick of " + std::to_string(to_ns(tick)) +
                                  " ns; the tick must be positive and at most 60 s (default 1 ms)");
    std::lock_guard lock(mutex_);
    if (tick == scale_.tick())
      return;
    // Deadlines already computed in the old tick would be misread: the tick is part of the
    // wheel's configuration, fixed by its first wait.
    if (driver_)
      throw std::logic_error(
          "asio_wheel: the tick of a context can only be changed before its first wait (it "
          "is " +
          std::to_string(to_ns(scale_.tick())) +
          " ns); call set_tick() right after creating "
          "the io_context");
    reset_time(tick);
  }

  // The any_io_executor of this service's own io_context `io`, shared by the timers
  // constructed from its plain executor (see io_executor_holder). Made by the first of them.
  const shared_context_executor& own_executor(asio::io_context& io) {
    std::call_once(own_executor_once_, [&] { own_executor_.emplace(io); });
    assert(own_executor_->context == &io);
    return *own_executor_;
  }

  // Starts a wait on `entry` for `expiry`. Strong guarantee: if it throws, nothing changed.
  template <typename Handler, typename IoExecutor>
  void async_wait(timer_entry& entry, const time_point& expiry, Handler&& handler,
                  const IoExecutor& io_ex) {
    using handler_type = std::decay_t<Handler>;
    auto slot = asio::get_associated_cancellation_slot(handler);
    auto ex = asio::get_associated_executor(handler, io_ex);

    // Emplaced before the op is built, so that a throwing emplace leaks nothing; until the
    // op is linked below, the handler has nothing to cancel.
    op_cancellation* cancellation = nullptr;
    if (slot.is_connected())
      cancellation = &slot.template emplace<op_cancellation>(this);

    wait_op* op = nullptr;
    if (is_home(ex)) {
      using home_op = wait_handler_op<handler_type, direct_completion>;
      if constexpr (fits_inline<handler_type>) {
        // Only this thread (the timer's owner) sets the flag; a stale true, from a wait
        // that just left on another thread, only costs a block.
        if (!entry.inline_busy_.load(std::memory_order_acquire)) {
          op = home_op::create_at(entry.inline_, std::forward<Handler>(handler));
          entry.inline_busy_.store(true, std::memory_order_relaxed);
        }
      }
      if (op == nullptr)
        op = home_op::create(std::forward<Handler>(handler));
    } else {
      op = wait_handler_op<handler_type, tracked_executor<decltype(ex)>>::create(
          std::forward<Handler>(handler), ex);
    }

    std::unique_lock lock(mutex_);
    if (shutdown_) {
      lock.unlock();
      discard(entry, op);
      return;
    }
    // Already in the wheel for the same expiry: the wait joins the others. Otherwise, an
    // expiry behind the wheel's last tick has certainly passed: the wait completes without
    // the wheel or the driver.
    const bool joins = entry.head_ != nullptr;
    const tick_type deadline = scale_.ceil(expiry);
    const bool past = !joins && deadline <= wheel_->now();
    // Whatever may throw comes before any change, so that then the wait is only destroyed.
    std::optional<spare_block> spare;
    try {
      if (!driver_)
        start(io_ex);
      if (past)
        spare.emplace(entry.holds(op));
      else if (!joins)
        arm_if_earlier(deadline);
    } catch (...) {
      lock.unlock();
      discard(entry, op);
      throw;
    }
    op->cancellation_ = cancellation;
    if (cancellation != nullptr)
      cancellation->op_.store(op, std::memory_order_relaxed);
    if (past) {
      make_ready(evict(entry, op, *spare), false);
      return;
    }
    append(entry, op);
    if (!joins) {
      ++live_;
      file(entry, deadline);
    }
  }

  // Aborts every pending wait of `entry`; returns how many.
  std::size_t cancel(timer_entry& entry) {
    std::lock_guard lock(mutex_);
    return detach_all(entry, true);
  }

  // The timer is going (destroyed, or assigned over): aborts its waits, as cancel(), and
  // takes its entry out of the wheel.
  void release(timer_entry& entry) {
    std::lock_guard lock(mutex_);
    detach_all(entry, true);
    if (entry.is_linked())
      wheel_->remove(entry);
  }

  // Aborts the oldest pending wait of `entry`; returns how many (0 or 1).
  std::size_t cancel_one(timer_entry& entry) {
    std::lock_guard lock(mutex_);
    if (entry.head_ == nullptr)
      return 0;
    detach(entry.head_, true);
    return 1;
  }

  // Moves the pending waits of `entry` to a new expiry without aborting them: lets an idle
  // timer follow a changed timeout without an operation_aborted round trip.
  void retarget(timer_entry& entry, const time_point& expiry) {
    std::lock_guard lock(mutex_);
    if (entry.head_ == nullptr)
      return;
    const tick_type deadline = scale_.ceil(expiry);
    if (deadline <= wheel_->now()) {
      detach_all(entry, false);
      return;
    }
    // Moved now, even when later: an idle timer's timeout moves rarely, and a filing left
    // behind would wake the driver once more.
    entry.wanted_ = deadline;
    wheel_->remove(entry);
    wheel_->insert(entry, deadline);
    arm_if_earlier(deadline);
  }

  // Moves the pending waits of `from` to `to` (a timer being moved). `to` has none and is
  // not in the wheel.
  void move_entry(timer_entry& to, timer_entry& from) {
    std::lock_guard lock(mutex_);
    if (from.head_ == nullptr) {
      if (from.is_linked())
        wheel_->remove(from); // a filing left behind, of no use to `to`
      return;
    }
    to.head_ = std::exchange(from.head_, nullptr);
    if (from.inline_busy_.load(std::memory_order_relaxed))
      move_inline(to, from);
    for (wait_op* op = to.head_; op != nullptr; op = op->next_)
      op->owner_ = &to;
    // Same filing, same wanted_: nothing changes for the driver.
    to.wanted_ = from.wanted_;
    const tick_type filed = from.deadline();
    wheel_->remove(from);
    wheel_->insert(to, filed);
  }

private:
  // Per-operation cancellation: emplaced in the handler's cancellation slot. Refers to the
  // operation, not to the timer object, so it keeps working after the timer is moved.
  class op_cancellation : public cancellation_target {
  public:
    explicit op_cancellation(wheel_service* service) noexcept : service_(service) {}
    op_cancellation(const op_cancellation&) = delete;
    op_cancellation& operator=(const op_cancellation&) = delete;

    // The signal is being destroyed, or its slot re-used, while the wait may be pending.
    // A null link means the wait is gone, and perhaps the service with it: hands off.
    ~op_cancellation() {
      if (op_.load(std::memory_order_acquire) != nullptr)
        service_->unlink_cancellation(*this);
    }

    void operator()(asio::cancellation_type_t type) {
      using ct = asio::cancellation_type;
      if (!!(type & (ct::terminal | ct::partial | ct::total)) &&
          op_.load(std::memory_order_acquire) != nullptr)
        service_->cancel_by_slot(*this);
    }

  private:
    wheel_service* service_;
  };

  // The plain executor of the context behind `ex`, on which the driver and drain handlers
  // run. Strands and work-tracking properties are peeled off, so that handlers bound to the
  // context's own executor can be called directly from those handlers.
  template <typename Executor>
  static asio::any_io_executor context_executor(const Executor& ex) {
    if constexpr (std::is_same_v<Executor, asio::any_io_executor>) {
      if (const auto* io = detail::target_if<asio::io_context::executor_type>(ex))
        return io->context().get_executor();
      if (const auto* s = detail::target_if<asio::strand<asio::io_context::executor_type>>(ex))
        return s->get_inner_executor().context().get_executor();
      if (const auto* s = detail::target_if<asio::strand<asio::any_io_executor>>(ex))
        return context_executor(s->get_inner_executor());
      if (const auto* pool = detail::target_if<asio::thread_pool::executor_type>(ex))
        return pool->context().get_executor();
      return asio::prefer(ex, asio::execution::outstanding_work.untracked);
    } else if constexpr (requires { ex.get_inner_executor(); }) {
      return context_executor(asio::any_io_executor(ex.get_inner_executor()));
    } else {
      return context_executor(asio::any_io_executor(ex));
    }
  }

  // First wait on this context: bind the driver to the context's executor. Created here
  // rather than in the constructor because a service is constructed from the bare
  // execution_context, which does not say what kind of context it is.
  template <typename Executor>
  void start(const Executor& io_ex) {
    home_ = context_executor(io_ex);
    if (const auto* io = detail::target_if<asio::io_context::executor_type>(home_))
      home_context_ = &io->context();
    driver_.emplace(home_);
  }

  static long long to_ns(duration d) {
    return static_cast<long long>(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
  }

  // True when a handler on `ex` may be called directly from the service's own handlers:
  // `ex` is an executor of this very io_context that allows blocking.possibly, which is
  // what those handlers run on. Work tracking and the continuation hint do not matter for a
  // direct call; Asio's composed operations, for one, carry the work-tracking variant.
  template <typename Executor>
  bool is_home(const Executor& ex) noexcept {
    if constexpr (std::is_same_v<Executor, asio::any_io_executor>) {
      // The template Bits of io_context::basic_executor_type: 4 is outstanding_work.tracked
      // (detail::io_context_bits); blocking.never is a run-time bit, checked in is_home_io.
      return is_home_any<0>(ex) || is_home_any<4>(ex);
    } else {
      return is_home_io(ex);
    }
  }

  template <std::uintptr_t Bits>
  bool is_home_any(const asio::any_io_executor& ex) noexcept {
    using target = asio::io_context::basic_executor_type<std::allocator<void>, Bits>;
    const target* io = detail::target_if<target>(ex);
    return io != nullptr && is_home_io(*io);
  }

  template <typename Executor>
  bool is_home_io(const Executor& ex) noexcept {
    if constexpr (requires {
                    ex.context();
                    ex.running_in_this_thread();
                  }) {
      if constexpr (std::is_same_v<std::remove_cvref_t<decltype(ex.context())>, asio::io_context>) {
        return &static_cast<asio::execution_context&>(ex.context()) == &this->context() &&
               asio::query(ex, asio::execution::blocking) != asio::execution::blocking.never;
      }
    }
    return false;
  }

  void shutdown() override {
    wait_op* list = nullptr;
    {
      std::lock_guard lock(mutex_);
      shutdown_ = true;
      wheel_->clear(
          [this](wheel_node& node) { detach_all(static_cast<timer_entry&>(node), false); });
      list = ready_head_;
      ready_head_ = ready_tail_ = nullptr;
      // Destroyed now, while Asio's timer service and reactor still exist (they may have
      // been created after this service, and so be destroyed before it).
      armed_ = false;
      driver_.reset();
    }
    // Outside the lock: a handler's destructor may destroy timers, which calls back in.
    while (list != nullptr) {
      wait_op* op = list;
      list = op->next_;
      op->complete(false);
    }
  }

  // Origin and wheel restart at the current time: ticks count from there.
  void reset_time(duration tick) {
    scale_ = tick_scale<Clock>(tick, Clock::now());
    wheel_.emplace(0);
    wheel_->set_cascade_limit(cascade_budget);
  }

  // --- Everything below runs with mutex_ held. ---

  // A block for a wait that must leave its timer's inline storage, taken before anything
  // changes, so that running out of memory leaves the wait where it was.
  class spare_block {
  public:
    explicit spare_block(bool needed)
        : block_(needed ? block_cache::allocate(inline_op_size) : nullptr) {}
    spare_block(const spare_block&) = delete;
    spare_block& operator=(const spare_block&) = delete;
    ~spare_block() {
      if (block_ != nullptr)
        block_cache::deallocate(block_, inline_op_size);
    }
    void* take() noexcept { return std::exchange(block_, nullptr); }

  private:
    void* block_;
  };

  // Destroys a wait that never started, without calling its handler. Without the lock: the
  // handler's destructor may call back into the service.
  static void discard(timer_entry& entry, wait_op* op) noexcept {
    if (entry.holds(op)) {
      op->destroy_in_place();
      entry.inline_busy_.store(false, std::memory_order_relaxed);
    } else {
      op->complete(false);
    }
  }

  // `op`, already unlinked from its timer, leaves the timer's inline storage if it is there:
  // the timer may be destroyed, moved or waited on again before the handler runs.
  static wait_op* evict(timer_entry& entry, wait_op* op, spare_block& spare) noexcept {
    if (!entry.holds(op))
      return op;
    wait_op* moved = op->relocate(spare.take());
    entry.inline_busy_.store(false, std::memory_order_release);
    return moved;
  }

  // The timer owning `from` is being moved to the one owning `to`, whose inline storage is
  // free: the pending wait in from's storage moves to to's, and its neighbours follow it.
  static void move_inline(timer_entry& to, timer_entry& from) noexcept {
    assert(!to.inline_busy_.load(std::memory_order_relaxed));
    wait_op* old = to.head_;
    while (!from.holds(old))
      old = old->next_;
    wait_op* const moved = old->relocate(to.inline_);
    if (old == to.head_)
      to.head_ = moved;
    else
      moved->prev_->next_ = moved;
    if (moved->next_ != nullptr)
      moved->next_->prev_ = moved;
    else if (moved->prev_ == old)
      moved->prev_ = moved; // it was the only wait
    else
      to.head_->prev_ = moved; // it was the newest
    if (moved->cancellation_ != nullptr)
      moved->cancellation_->op_.store(moved, std::memory_order_release);
    from.inline_busy_.store(false, std::memory_order_relaxed);
    to.inline_busy_.store(true, std::memory_order_relaxed);
  }

  void append(timer_entry& entry, wait_op* op) noexcept {
    op->owner_ = &entry;
    op->next_ = nullptr;
    if (wait_op* head = entry.head_) {
      op->prev_ = head->prev_;
      head->prev_->next_ = op;
      head->prev_ = op;
    } else {
      op->prev_ = op;
      entry.head_ = op;
    }
  }

  // Takes `op` off its timer and queues it for completion. A timer left without waits stays
  // in the wheel (see file()).
  void detach(wait_op* op, bool aborted) {
    timer_entry& entry = *op->owner_;
    spare_block spare(entry.holds(op));
    wait_op* const head = entry.head_;
    if (op == head)
      entry.head_ = op->next_;
    else
      op->prev_->next_ = op->next_;
    // The successor's prev_, or for the newest the head's back link, now skips op.
    if (op->next_ != nullptr)
      op->next_->prev_ = op->prev_;
    else if (op != head)
      head->prev_ = op->prev_;
    // Queued (and the drain posted) before the driver may be disarmed: the drain is what
    // keeps another thread's run() from returning in between.
    make_ready(evict(entry, op, spare), aborted);
    if (entry.head_ == nullptr)
      vacate();
  }

  std::size_t detach_all(timer_entry& entry, bool aborted) {
    if (entry.head_ == nullptr)
      return 0;
    spare_block spare(entry.inline_busy_.load(std::memory_order_relaxed));
    return detach_all(entry, aborted, spare);
  }

  std::size_t detach_all(timer_entry& entry, bool aborted, spare_block& spare) {
    wait_op* op = entry.head_;
    entry.head_ = nullptr;
    std::size_t count = 0;
    while (op != nullptr) {
      wait_op* next = op->next_;
      make_ready(evict(entry, op, spare), aborted);
      op = next;
      ++count;
    }
    // After make_ready(): see detach().
    vacate();
    return count;
  }

  // Files `entry`, which has just gained its first wait, for `deadline`. An entry still in
  // the wheel from an earlier wait, at a tick no later than `deadline`, stays where it is:
  // moving it would write its two neighbours, cold in a large wheel, and a server re-arms
  // a timer for later on every request. When that tick comes, expire() files the entry
  // again for wanted_ (or drops it, if its waits have gone), once however many re-arms
  // happened in between.
  void file(timer_entry& entry, tick_type deadline) noexcept {
    entry.wanted_ = deadline;
    if (entry.is_linked()) {
      if (entry.deadline() <= deadline)
        return;
      wheel_->remove(entry);
    }
    wheel_->insert(entry, deadline);
  }

  // An entry has lost its last wait; it may stay in the wheel (see file()).
  void vacate() {
    if (--live_ == 0 && armed_) {
      // Nothing left to wait for: disarm so that run() can return.
      armed_ = false;
      driver_->cancel();
    }
  }

  void make_ready(wait_op* op, bool aborted) {
    op->owner_ = nullptr;
    op->aborted_ = aborted;
    unlink_cancellation(op);
    op->next_ = nullptr;
    if (ready_tail_ != nullptr)
      ready_tail_->next_ = op;
    else
      ready_head_ = op;
    ready_tail_ = op;
    if (!drain_posted_ && !shutdown_) {
      // Set once posted: if post() throws, the next completion tries again.
      asio::post(home_, [this] { drain(); });
      drain_posted_ = true;
    }
  }

  void arm_if_earlier(tick_type tick) {
    if (armed_ && tick >= armed_at_)
      return;
    // expires_at aborts the wait armed before, if it has not fired; on_driver ignores it.
    driver_->expires_at(scale_.time_of(tick));
    armed_ = false; // until the new wait is started: async_wait may throw
    driver_->async_wait([this](const error_code& ec) { on_driver(ec); });
    armed_ = true;
    armed_at_ = tick;
  }

  void cancel_by_slot(op_cancellation& cancellation) {
    std::lock_guard lock(mutex_);
    if (wait_op* op = cancellation.op_.load(std::memory_order_relaxed))
      detach(op, true);
  }

  void unlink_cancellation(op_cancellation& cancellation) {
    std::lock_guard lock(mutex_);
    if (wait_op* op = cancellation.op_.load(std::memory_order_relaxed)) {
      op->cancellation_ = nullptr;
      cancellation.op_.store(nullptr, std::memory_order_relaxed);
    }
  }

  // The wait leaves its timer: cut its link to the slot handler (see cancellation_target).
  static void unlink_cancellation(wait_op* op) noexcept {
    if (op->cancellation_ != nullptr) {
      op->cancellation_->op_.store(nullptr, std::memory_order_release);
      op->cancellation_ = nullptr;
    }
  }

  // --- Completion handlers, on the context. ---

  void on_driver(const error_code& ec) {
    if (ec == asio::error::operation_aborted)
      return; // superseded by a later arm, or disarmed
    std::unique_lock lock(mutex_);
    // Whichever wait this was, the driver is not known to be armed any more; at worst the
    // next arm aborts a wait that is still pending.
    armed_ = false;
    expire(lock);
  }

  void expire(std::unique_lock<futex_mutex>& lock) {
    const tick_type now = scale_.floor(Clock::now());
    wait_op* head = nullptr;
    wait_op** tail = &head;
    // noexcept: the entry has left the wheel, so running out of memory for the block of
    // an inline wait (see evict) would leave its waits nowhere. It terminates instead.
    const bool done = wheel_->advance(now, expiry_budget, [&](wheel_node& node) noexcept {
      auto& entry = static_cast<timer_entry&>(node);
      if (entry.head_ == nullptr)
        return; // left behind by a cancellation: dropped
      if (entry.wanted_ > now) {
        wheel_->insert(entry, entry.wanted_); // re-armed for later since it was filed
        return;
      }
      --live_;
      spare_block spare(entry.inline_busy_.load(std::memory_order_relaxed));
      for (wait_op* op = std::exchange(entry.head_, nullptr); op != nullptr;) {
        wait_op* const next = op->next_;
        op = evict(entry, op, spare);
        op->owner_ = nullptr;
        op->aborted_ = false;
        unlink_cancellation(op);
        op->next_ = nullptr;
        *tail = op;
        tail = &op->next_;
        op = next;
      }
    });
    if (!done) {
      // Give the context's other handlers a turn before the rest of the backlog.
      asio::post(home_, [this] {
        std::unique_lock relock(mutex_);
        expire(relock);
      });
    } else if (live_ != 0) {
      // The first filing may be one left behind (see file()): early, never late.
      if (auto next = wheel_->next_expiry())
        arm_if_earlier(*next);
    }
    lock.unlock();
    run(head);
  }

  void drain() {
    wait_op* list = nullptr;
    {
      std::lock_guard lock(mutex_);
      list = ready_head_;
      ready_head_ = ready_tail_ = nullptr;
      drain_posted_ = false;
    }
    run(list);
  }

  // Completes a list of waits. If a handler throws, the ones after it go back to the
  // front of the ready queue, with a drain posted, before the exception propagates.
  void run(wait_op* list) {
    struct requeue_rest {
      wheel_service* self;
      wait_op*& rest;
      ~requeue_rest() {
        if (rest != nullptr)
          self->requeue_front(rest);
      }
    } guard{this, list};
    for (bool first = true; list != nullptr; first = false) {
      // io_context::stop() from a handler of the batch: run() must return after that
      // handler, as it would with one scheduler operation per handler. The rest waits.
      if (!first && home_context_ != nullptr && home_context_->stopped())
        return;
      wait_op* op = list;
      list = op->next_;
      op->complete(true);
    }
  }

  void requeue_front(wait_op* list) {
    std::lock_guard lock(mutex_);
    wait_op* last = list;
    while (last->next_ != nullptr)
      last = last->next_;
    last->next_ = ready_head_;
    if (ready_head_ == nullptr)
      ready_tail_ = last;
    ready_head_ = list;
    if (!drain_posted_ && !shutdown_) {
      // Set once posted: if post() throws, the next completion tries again.
      asio::post(home_, [this] { drain(); });
      drain_posted_ = true;
    }
  }

  // Guards every member below, the timer_entry lists, and wait_op links.
  mutable futex_mutex mutex_;
  // The executor the driver and drain handlers run on: the context's own. Set by start().
  asio::any_io_executor home_;
  // The io_context behind home_, if it is one: its stop() interrupts a batch.
  asio::io_context* home_context_ = nullptr;
  // Tick length and the instant of tick 0 of wheel_.
  tick_scale<Clock> scale_;
  // Re-created by set_tick() (only while empty), hence optional.
  std::optional<timing_wheel> wheel_;
  // Entries with pending waits (all of them in the wheel). The driver is armed only while
  // there are some: entries left behind without waits do not keep run() going.
  std::size_t live_ = 0;
  // Waits whose result is decided, in completion order, linked through wait_op::next_.
  wait_op* ready_head_ = nullptr;
  wait_op* ready_tail_ = nullptr;
  // True while a drain handler is queued on home_; at most one is.
  bool drain_posted_ = false;
  // True while the driver has a wait for armed_at_ that has not completed or been aborted.
  bool armed_ = false;
  tick_type armed_at_ = 0;
  bool shutdown_ = false;
  // The one Asio timer of this wheel; exists from the first wait until shutdown().
  std::optional<asio::basic_waitable_timer<Clock, WaitTraits, asio::any_io_executor>> driver_;
  // See own_executor(); not guarded by mutex_.
  std::once_flag own_executor_once_;
  std::optional<shared_context_executor> own_executor_;
};

} // namespace asio_wheel::detail

#endif // ASIO_WHEEL_DETAIL_WHEEL_SERVICE_HPP
