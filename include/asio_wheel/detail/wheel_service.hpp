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
// are completed in one batch from a single handler on the context's own plain executor
// (never a strand or a user's executor, whatever the timers were made with): a handler whose
// executor is that io_context's is called directly from it, any other is dispatched to its
// executor.
// If a handler throws, the rest of the batch is queued for the next drain before the
// exception leaves run(), so nothing is lost.
//
// Clocks. A wait completes only once its expiry has passed by its own clock. The wheel's
// time (the last tick it reached) never goes back, so for a steady clock it is a lower bound
// of the clock and "the wheel has reached the deadline" suffices. A clock that is not steady
// can be stepped back behind it: then the clock is read again before anything is judged due,
// and the wheel is moved back to it (timing_wheel::rewind), so that waits are filed at their
// own ticks and the driver, an Asio timer on the same clock, sleeps until they come.
//
// Shutdown. shutdown() destroys every pending handler without calling it, and the driver
// timer while Asio's timer service and reactor are still alive: services are shut down
// before any is destroyed, and those may be destroyed before this one. It allocates nothing:
// a wait in its timer's storage is destroyed there, one timer at a time.
//
// Memory exhaustion. Whatever the service starts by itself uses memory it owns, handed to
// Asio as the handlers' associated allocator: the driver's wait (it has at most one
// outstanding: to move it earlier, the wait is cancelled and its handler arms it again), the
// drain and the continuation of a long expiry turn (at most one of each is queued). So on an
// io_context or a thread pool, arming the driver and posting completions allocate nothing
// (on a thread pool, Asio's own completion of the driver's wait still does: it dispatches
// through the type-erased executor).
// What remains is the block a wait needs to leave its timer's storage (see evict): where
// that cannot throw, a reserve of blocks stands in (reserve_).

#include <asio_wheel/detail/futex_mutex.hpp>
#include <asio_wheel/detail/io_executor_holder.hpp>
#include <asio_wheel/detail/tick_scale.hpp>
#include <asio_wheel/detail/timing_wheel.hpp>
#include <asio_wheel/detail/wait_op.hpp>
#include <asio_wheel/virtual_clock.hpp>
#include <asio_wheel/wheel_statistics.hpp>

#include <asio_wheel/detail/asio_forward.hpp>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cassert>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
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

  ~wheel_service() override {
    // Waits aborted after shutdown (by another service's shutdown, say): never called.
    destroy_list(std::exchange(ready_head_, nullptr));
    while (reserve_ != nullptr) {
      void* block = reserve_;
      reserve_ = *static_cast<void**>(block);
      block_cache::deallocate(block, inline_op_size);
    }
  }

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

  // The executor the service's own handlers run on (see find_home()), found from `ex` (an
  // executor of this context) if no wait found it yet; it never changes after. For the
  // library's other context-wide handlers (detail/scaled_queue.hpp), which must not keep
  // the work or the strand of the first timer that needed them.
  template <typename Executor>
  const asio::any_io_executor& home_executor(const Executor& ex) {
    std::lock_guard lock(mutex_);
    find_home(ex, ex);
    return home_;
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
    ++counters_.started;
    // Already in the wheel for the same expiry: the wait joins the others. Otherwise, an
    // expiry that has passed is filed at the wheel's current tick, due, and an expiry turn is
    // queued for it instead of the driver: like Asio's timer queue, which keeps such a wait
    // until the reactor's next pass, the wait stays on its timer until that turn, so a
    // cancel() or expires_*() before it still aborts it. Filed at the wheel's time, not its
    // own deadline, so that the lateness statistics count only the wheel's delay.
    const bool joins = entry.head_ != nullptr;
    tick_type deadline = scale_.ceil(expiry);
    bool past = false;
    // Whatever may throw comes before any change, so that then the wait is only destroyed.
    // Arming does not throw (on an io_context or a thread pool): if Asio's timer queue
    // cannot take the driver's wait, a continuation arms it (see arm_if_earlier).
    try {
      past = !joins && due(deadline);
      if (!driver_)
        start(io_ex, ex);
      if (past) {
        post_continuation();
        deadline = std::max(deadline, wheel_->now());
      } else if (!joins) {
        arm_if_earlier(deadline);
      }
    } catch (...) {
      lock.unlock();
      discard(entry, op);
      throw;
    }
    op->cancellation_ = cancellation;
    if (cancellation != nullptr)
      cancellation->op_.store(op, std::memory_order_relaxed);
    counters_.expired_at_start += past;
    append(entry, op);
    if (!joins) {
      ++live_;
      file(entry, deadline);
    }
  }

  // Aborts every pending wait of `entry`; returns how many. Strong guarantee.
  std::size_t cancel(timer_entry& entry) {
    std::lock_guard lock(mutex_);
    return detach_all(entry, true);
  }

  // The timer is going (destroyed, or assigned over): aborts its waits, as cancel(), and
  // takes its entry out of the wheel. From a destructor, a wait in the timer's storage that
  // finds no block on the heap takes one from the reserve, and only if that is empty too,
  // throws (and the destructor terminates); otherwise strong guarantee. After shutdown,
  // the waits are destroyed instead, here, without allocating.
  void release(timer_entry& entry, bool from_destructor) {
    std::unique_lock lock(mutex_);
    if (shutdown_) {
      const doomed waits = take(entry);
      if (entry.is_linked())
        wheel_->remove(entry);
      lock.unlock();
      destroy(entry, waits);
      return;
    }
    if (entry.head_ != nullptr) {
      spare_block spare = from_destructor
                              ? spare_or_reserve(entry.inline_busy_.load(std::memory_order_relaxed))
                              : spare_block(entry.inline_busy_.load(std::memory_order_relaxed));
      post_drain();
      detach_all(entry, true, spare);
    }
    if (entry.is_linked())
      wheel_->remove(entry);
  }

  // Aborts the oldest pending wait of `entry`; returns how many (0 or 1). Strong guarantee.
  std::size_t cancel_one(timer_entry& entry) {
    std::lock_guard lock(mutex_);
    wait_op* const op = entry.head_;
    if (op == nullptr)
      return 0;
    spare_block spare(entry.holds(op));
    post_drain();
    detach(op, true, spare);
    return 1;
  }

  // Moves the pending waits of `entry` to a new expiry without aborting them: lets an idle
  // timer follow a changed timeout without an operation_aborted round trip. Strong
  // guarantee.
  void retarget(timer_entry& entry, const time_point& expiry) {
    std::lock_guard lock(mutex_);
    if (entry.head_ == nullptr)
      return;
    const tick_type deadline = scale_.ceil(expiry);
    if (due(deadline)) {
      detach_all(entry, false);
      return;
    }
    // Armed first: if that throws (only on a context other than an io_context or a thread
    // pool), the waits have not moved.
    arm_if_earlier(deadline);
    // Moved now, even when later: an idle timer's timeout moves rarely, and a filing left
    // behind would wake the driver once more.
    entry.wanted_ = deadline;
    wheel_->remove(entry);
    wheel_->insert(entry, deadline);
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

  // --- Statistics and virtual time: each takes the lock itself. ---

  // A consistent snapshot (see wheel_statistics), from any thread.
  wheel_statistics statistics(bool count_levels) const {
    wheel_statistics s;
    std::lock_guard lock(mutex_);
    s.tick = std::chrono::duration_cast<std::chrono::nanoseconds>(scale_.tick());
    s.timers_pending = live_;
    for (unsigned level = 0; count_levels && level < wheel_statistics::levels; ++level)
      s.timers_per_level[level] = wheel_->level_size(level);
    if (armed_ && live_ != 0) {
      const auto left = scale_.time_of(armed_at_) - Clock::now();
      s.next_expiry = std::max(std::chrono::nanoseconds::zero(),
                               std::chrono::duration_cast<std::chrono::nanoseconds>(left));
    }
    const wheel_counters& c = counters_;
    s.waits_started = c.started;
    s.waits_succeeded = c.decided[0];
    s.waits_aborted = c.decided[1];
    s.waits_expired_at_start = c.expired_at_start;
    s.driver_turns = c.turns;
    s.empty_turns = c.empty_turns;
    s.lazy_refiles = c.refiles;
    s.batches = c.batches;
    s.largest_batch = c.largest_batch;
    s.budget_turns = c.budget_turns;
    std::copy(std::begin(c.lateness), std::end(c.lateness), s.lateness.begin());
    s.lateness_sum = c.lateness_sum;
    return s;
  }

  // Virtual clock only (see virtual_time): the time the driver would be armed for, empty
  // when nothing is pending.
  std::optional<time_point> virtual_next() const {
    static_assert(is_virtual_clock<Clock>::value);
    std::lock_guard lock(mutex_);
    if (!armed_ || live_ == 0 || shutdown_)
      return std::nullopt;
    return scale_.time_of(armed_at_);
  }

  // Virtual clock only: the driver's wake-up, as the Asio timer would complete it, posted
  // to the context (the caller polls it). Returns false if nothing was armed.
  bool virtual_fire() {
    static_assert(is_virtual_clock<Clock>::value);
    std::lock_guard lock(mutex_);
    if (!armed_ || shutdown_)
      return false;
    armed_ = false; // as on_driver(): the next arm comes from this turn
    asio::post(home_, [this] {
      std::unique_lock relock(mutex_);
      expire(relock);
    });
    return true;
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

  // The context behind an executor, as the kind of context it is, when that can be told
  // from the executor's type: every standard executor names its context's type in its
  // context query (strands and property variants forward it), and a type-erased
  // any_io_executor is looked into for the targets Asio itself makes.
  struct context_kind {
    asio::io_context* io = nullptr;
    asio::thread_pool* pool = nullptr;
    asio::system_context* system = nullptr;
    explicit operator bool() const noexcept { return io || pool || system; }
  };

  template <typename Context>
  context_kind kind_of_context(Context& context) noexcept {
    context_kind kind;
    if (&static_cast<asio::execution_context&>(context) != &this->context())
      return kind; // a handler's executor on another context says nothing of this one
    if constexpr (std::is_base_of_v<asio::io_context, Context>)
      kind.io = &context;
    else if constexpr (std::is_base_of_v<asio::thread_pool, Context>)
      kind.pool = &context;
    else if constexpr (std::is_base_of_v<asio::system_context, Context>)
      kind.system = &context;
    return kind;
  }

  template <typename Executor>
  context_kind kind_of(const Executor& ex) noexcept {
    if constexpr (std::is_same_v<Executor, asio::any_io_executor>) {
      using io = asio::io_context::executor_type;
      using io_tracked = std::decay_t<decltype(asio::prefer(
          std::declval<const io&>(), asio::execution::outstanding_work.tracked))>;
      using pool = asio::thread_pool::executor_type;
      using pool_tracked = std::decay_t<decltype(asio::prefer(
          std::declval<const pool&>(), asio::execution::outstanding_work.tracked))>;
      return kind_of_target<io, io_tracked, pool, pool_tracked, asio::system_executor,
                            asio::strand<io>, asio::strand<io_tracked>, asio::strand<pool>,
                            asio::strand<pool_tracked>, asio::strand<asio::any_io_executor>>(ex);
    } else if constexpr (asio::can_query<const Executor&, asio::execution::context_t>::value) {
      return kind_of_context(asio::query(ex, asio::execution::context));
    } else if constexpr (requires { ex.context(); }) {
      return kind_of_context(ex.context()); // a Networking TS executor (io_context::strand)
    } else {
      return {}; // use_future's executor, for one, has no context
    }
  }

  template <typename... Targets>
  context_kind kind_of_target(const asio::any_io_executor& ex) noexcept {
    context_kind kind;
    ((kind = kind ? kind : kind_of_target_if<Targets>(ex)), ...);
    return kind;
  }

  template <typename Target>
  context_kind kind_of_target_if(const asio::any_io_executor& ex) noexcept {
    if (const Target* target = target_if<Target>(ex)) {
      if constexpr (requires { target->get_inner_executor(); })
        return kind_of(target->get_inner_executor());
      else
        return kind_of(*target);
    }
    return {};
  }

  // At the first wait on this context (or the first is_home() question, see there), with
  // mutex_ held, once: chooses the executor that the driver and the drains will run on, the
  // context's own plain executor, as Asio's timer service completes on its context's
  // scheduler. Never the timer's or the handler's executor, which may be a strand or a
  // user's executor: the driver and every batch would run inside it, serializing the
  // handlers of unrelated timers with its own (and blocking one that waits on work posted to
  // it). Strong guarantee. Out of line: it runs once per context, and inlined it would cost
  // every wait's start its inlining budget (callgrind_ops counts it).
  template <typename IoExecutor, typename Executor>
  [[gnu::cold, gnu::noinline]] void find_home(const IoExecutor& io_ex, const Executor& ex) {
    if (home_found_.load(std::memory_order_relaxed))
      return;
    context_kind kind = kind_of(io_ex);
    if (!kind)
      kind = kind_of(ex);
    if (kind.io != nullptr) {
      home_ = kind.io->get_executor();
      home_context_.store(kind.io, std::memory_order_release);
    } else if (kind.pool != nullptr) {
      home_ = kind.pool->get_executor();
    } else if (kind.system != nullptr) {
      home_ = kind.system->get_executor();
    } else {
      // A context of a kind unknown here (or an io_context seen only through a user's
      // executor, type-erased) has no executor that can be named from it. Asio's timer
      // service, there, runs a scheduler on a thread of its own in the context; the wheel
      // runs a one-thread pool. Its waits complete on their handlers' executors, which keep
      // the work, so nothing of the context's own run() changes.
      own_thread_.emplace(1);
      home_ = own_thread_->get_executor();
    }
    home_found_.store(true, std::memory_order_release);
  }

  // First wait on this context, with mutex_ held: the home, if no is_home() question found
  // it yet, and the driver on it. Created here rather than in the constructor so that a
  // context that never waits has no timer; out of line, as find_home().
  template <typename IoExecutor, typename Executor>
  [[gnu::cold, gnu::noinline]] void start(const IoExecutor& io_ex, const Executor& ex) {
    find_home(io_ex, ex);
    while (reserve_count_ < reserve_target)
      keep_in_reserve(block_cache::allocate(inline_op_size));
    driver_.emplace(home_);
  }

  static long long to_ns(duration d) {
    return static_cast<long long>(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
  }

  // True when a handler on `ex` may be called directly from the service's own handlers:
  // `ex` is an executor of the io_context that those handlers run on (home_context_), and
  // allows blocking.possibly. Work tracking and the continuation hint do not matter for a
  // direct call; Asio's composed operations, for one, carry the work-tracking variant.
  template <typename Executor>
  bool is_home(const Executor& ex) {
    if constexpr (std::is_same_v<Executor, asio::any_io_executor>) {
      // The template Bits of io_context::basic_executor_type: 4 is outstanding_work.tracked
      // (detail::io_context_bits); blocking.never is a run-time bit, checked in is_home_io.
      return is_home_any<0>(ex) || is_home_any<4>(ex);
    } else {
      return is_home_io(ex);
    }
  }

  template <std::uintptr_t Bits>
  bool is_home_any(const asio::any_io_executor& ex) {
    using target = asio::io_context::basic_executor_type<std::allocator<void>, Bits>;
    const target* io = detail::target_if<target>(ex);
    return io != nullptr && is_home_io(*io);
  }

  template <typename Allocator, std::uintptr_t Bits>
  [[gnu::always_inline]] bool
  is_home_io(const asio::io_context::basic_executor_type<Allocator, Bits>& ex) {
    // Relaxed: the answer is the pointer itself; nothing else of the home is read here.
    asio::io_context* const home = home_context_.load(std::memory_order_relaxed);
    if (&ex.context() != home) {
      if (home != nullptr || home_found_.load(std::memory_order_relaxed) ||
          find_home_from(ex) != &ex.context())
        return false;
    }
    return asio::query(ex, asio::execution::blocking) != asio::execution::blocking.never;
  }

  // The first wait's handler is bound to an io_context's executor, before the driver has a
  // home: if it is this context's, that is the home. The answer is needed before the wait is
  // built (it decides how its handler is called), so it cannot wait for start().
  template <typename Allocator, std::uintptr_t Bits>
  [[gnu::cold, gnu::noinline]] asio::io_context*
  find_home_from(const asio::io_context::basic_executor_type<Allocator, Bits>& ex) {
    if (&static_cast<asio::execution_context&>(ex.context()) != &this->context())
      return nullptr; // another context's: the timer's own executor will tell, in start()
    std::lock_guard lock(mutex_);
    find_home(ex, ex);
    return home_context_.load(std::memory_order_relaxed);
  }

  // Anything else is dispatched: a strand (its handlers must not overlap), a legacy
  // io_context::strand, another context's executor, or a user's executor, even one that
  // posts into this context (it may do more than post: count, serialize, log).
  template <typename Executor>
  static bool is_home_io(const Executor&) noexcept {
    return false;
  }

  void shutdown() override {
    // The wheel's own thread (see find_home()) may be in a driver turn or a drain: it finishes
    // that, without the lock held here, and runs nothing more. What it had queued is
    // destroyed with its pool, below.
    if (own_thread_) {
      own_thread_->stop();
      own_thread_->join();
    }
    std::unique_lock lock(mutex_);
    shutdown_ = true;
    // Destroyed now, while Asio's timer service and reactor still exist (they may have
    // been created after this service, and so be destroyed before it).
    armed_ = false;
    driver_.reset();
    // Outside the lock: a handler's destructor may destroy timers, which calls back in. One
    // timer at a time, so that the wait in its storage is destroyed while the timer surely
    // exists; a timer destroyed meanwhile destroys its own (see release).
    for (;;) {
      if (wait_op* list = std::exchange(ready_head_, nullptr)) {
        ready_tail_ = nullptr;
        lock.unlock();
        destroy_list(list);
        lock.lock();
        continue;
      }
      wheel_node* node = wheel_->front();
      if (node == nullptr)
        break;
      auto& entry = static_cast<timer_entry&>(*node);
      wheel_->remove(entry);
      const doomed waits = take(entry);
      lock.unlock();
      destroy(entry, waits);
      lock.lock();
    }
    own_thread_.reset();
  }

  // The ticks have a boundary, and the wheel starts, at the current time.
  void reset_time(duration tick) {
    const time_point now = Clock::now();
    scale_ = tick_scale<Clock>(tick, now);
    wheel_.emplace(scale_.floor(now));
    wheel_->set_cascade_limit(cascade_budget);
  }

  // --- Memory the service keeps for itself. ---

  // Room for one operation that Asio allocates for the service (the driver's wait, a posted
  // drain or continuation), given to Asio through the handler's associated allocator. An
  // operation that does not fit (none does, in Asio 1.22 to 1.38: 112 bytes for the wait,
  // 56 for a post) comes from the heap instead.
  struct own_memory {
    static constexpr std::size_t size = 160;
    alignas(std::max_align_t) unsigned char bytes[size];
  };

  template <typename T>
  class own_allocator {
  public:
    using value_type = T;

    explicit own_allocator(own_memory& memory) noexcept : memory_(&memory) {}
    template <typename U>
    own_allocator(const own_allocator<U>& other) noexcept : memory_(other.memory_) {}

    T* allocate(std::size_t n) {
      if (n * sizeof(T) <= own_memory::size && alignof(T) <= alignof(std::max_align_t))
        return reinterpret_cast<T*>(memory_->bytes);
      return std::allocator<T>().allocate(n);
    }

    void deallocate(T* p, std::size_t n) noexcept {
      if (static_cast<void*>(p) != memory_->bytes)
        std::allocator<T>().deallocate(p, n);
    }

    template <typename U>
    bool operator==(const own_allocator<U>& other) const noexcept {
      return memory_ == other.memory_;
    }
    template <typename U>
    bool operator!=(const own_allocator<U>& other) const noexcept {
      return memory_ != other.memory_;
    }

  private:
    template <typename>
    friend class own_allocator;
    own_memory* memory_;
  };

  // The handler of the driver's wait.
  struct driver_handler {
    wheel_service* self;
    using allocator_type = own_allocator<void>;
    allocator_type get_allocator() const noexcept { return allocator_type(self->driver_memory_); }
    void operator()(const error_code&) const { self->on_driver(); }
  };

  // A handler the service posts to its home executor: calls `Fn`.
  template <void (wheel_service::*Fn)()>
  struct posted_call {
    wheel_service* self;
    own_memory* memory;
    using allocator_type = own_allocator<void>;
    allocator_type get_allocator() const noexcept { return allocator_type(*memory); }
    void operator()() const { (self->*Fn)(); }
  };

  // Posts to the home executor. The operation lives in the handler's memory on an
  // io_context or a thread pool, whose executors take the handler's allocator: nothing to
  // throw. Any other executor may allocate, and throw.
  template <typename Handler>
  void post_home(const Handler& handler) {
    if (asio::io_context* const home = home_context_.load(std::memory_order_relaxed))
      asio::post(home->get_executor(), handler);
    else if (const auto* pool = target_if<asio::thread_pool::executor_type>(home_))
      asio::post(*pool, handler);
    else
      asio::post(home_, handler);
  }

  void keep_in_reserve(void* block) noexcept {
    *static_cast<void**>(block) = reserve_;
    reserve_ = block;
    ++reserve_count_;
  }

  // --- Everything below runs with mutex_ held, unless it says otherwise. ---

  // Whether a wait for `deadline` is due now. The wheel's time never goes back: for a steady
  // clock it is never ahead of the clock, so a deadline it has reached has passed, and no
  // clock read is needed. A clock that is not steady may have been stepped back behind the
  // wheel (system_clock after an NTP step), and then the wheel's time says nothing: the clock
  // decides, as Asio's timer queue compares with Clock::now(), and the wheel follows it back
  // so that the deadline can be filed at its own tick.
  bool due(tick_type deadline) {
    if (deadline > wheel_->now())
      return false;
    if constexpr (Clock::is_steady) {
      return true;
    } else {
      const tick_type now = scale_.floor(Clock::now());
      wheel_->rewind(now);
      return deadline <= now;
    }
  }

  // A block for a wait that must leave its timer's inline storage, taken before anything
  // changes, so that running out of memory leaves the wait where it was.
  class spare_block {
  public:
    // From the thread's cache or the heap, if `needed`; may throw.
    explicit spare_block(bool needed)
        : block_(needed ? block_cache::allocate(inline_op_size) : nullptr) {}
    // Adopts `block` (nullptr: none).
    explicit spare_block(std::in_place_t, void* block) noexcept : block_(block) {}
    spare_block(spare_block&& other) noexcept : block_(std::exchange(other.block_, nullptr)) {}
    spare_block& operator=(spare_block&&) = delete;
    ~spare_block() {
      if (block_ != nullptr)
        block_cache::deallocate(block_, inline_op_size);
    }
    void* take() noexcept { return std::exchange(block_, nullptr); }

    // The same, or nullptr where the heap has none.
    static void* try_allocate() noexcept {
      try {
        return block_cache::allocate(inline_op_size);
      } catch (...) {
        return nullptr;
      }
    }

  private:
    void* block_;
  };

  // A spare block where throwing is the last resort (a destructor, per-operation
  // cancellation): the heap's, else one from the reserve, else std::bad_alloc.
  spare_block spare_or_reserve(bool needed) {
    if (!needed)
      return spare_block(std::in_place, nullptr);
    if (void* block = spare_block::try_allocate())
      return spare_block(std::in_place, block);
    if (reserve_ == nullptr)
      throw std::bad_alloc();
    void* block = reserve_;
    reserve_ = *static_cast<void**>(block);
    --reserve_count_;
    return spare_block(std::in_place, block);
  }

  // Tops the reserve up after it was drawn on; memory still short is no error here.
  void refill_reserve() noexcept {
    while (reserve_count_ < reserve_target) {
      void* block = spare_block::try_allocate();
      if (block == nullptr)
        return;
      keep_in_reserve(block);
    }
  }

  // Destroys a wait that never started, without calling its handler. Without the lock: the
  // handler's destructor may call back into the service.
  static void discard(timer_entry& entry, wait_op* op) noexcept {
    if (entry.holds(op)) {
      op->destroy_inline(entry.inline_busy_);
    } else {
      op->aborted_ = false; // over prev_: complete() reads it
      op->complete(false);
    }
  }

  // The waits of a timer, taken to be destroyed after shutdown: the one in its storage stays
  // there (nothing to allocate), the others are listed.
  struct doomed {
    wait_op* in_timer = nullptr;
    wait_op* others = nullptr;
  };

  doomed take(timer_entry& entry) noexcept {
    doomed waits;
    wait_op* op = std::exchange(entry.head_, nullptr);
    if (op != nullptr)
      --live_;
    while (op != nullptr) {
      wait_op* const next = op->next_;
      unlink_cancellation(op);
      op->owner_ = nullptr;
      op->aborted_ = false; // over prev_: complete() reads it
      if (entry.holds(op)) {
        waits.in_timer = op;
      } else {
        op->next_ = waits.others;
        waits.others = op;
      }
      op = next;
    }
    return waits;
  }

  // Without the lock. The wait in the timer first, while the timer surely exists: another
  // handler's destructor may destroy it.
  static void destroy(timer_entry& entry, const doomed& waits) noexcept {
    if (waits.in_timer != nullptr)
      waits.in_timer->destroy_inline(entry.inline_busy_);
    destroy_list(waits.others);
  }

  // Without the lock: destroys the handlers of a list of waits outside any timer.
  static void destroy_list(wait_op* list) noexcept {
    while (list != nullptr) {
      wait_op* op = list;
      list = op->next_;
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

  // Takes `op` off its timer and queues it for completion. The caller has posted the drain
  // and has the block `op` needs if it is in the timer's storage: nothing here throws. A
  // timer left without waits stays in the wheel (see file()).
  void detach(wait_op* op, bool aborted, spare_block& spare) noexcept {
    timer_entry& entry = *op->owner_;
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

  // As detach(), for every wait of `entry`; returns how many. Strong guarantee: the block
  // and the drain come first.
  std::size_t detach_all(timer_entry& entry, bool aborted) {
    if (entry.head_ == nullptr)
      return 0;
    spare_block spare(entry.inline_busy_.load(std::memory_order_relaxed));
    post_drain();
    return detach_all(entry, aborted, spare);
  }

  // The same, with the block and the drain in hand: nothing throws.
  std::size_t detach_all(timer_entry& entry, bool aborted, spare_block& spare) noexcept {
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
  void vacate() noexcept {
    if (--live_ == 0 && armed_) {
      // Nothing left to wait for: disarm so that run() can return. The handler of the
      // cancelled wait finds nothing to do.
      armed_ = false;
      if constexpr (!is_virtual_clock<Clock>::value)
        cancel_driver();
    }
  }

  // Asio reports no error from cancelling a timer; one that did would leave the wait to
  // complete at its time, which on_driver() handles as well. Out of line: rarely needed.
  // (The error_code overload is deprecated, and gone with ASIO_NO_DEPRECATED.)
  [[gnu::noinline]] void cancel_driver() noexcept {
    try {
      driver_->cancel();
    } catch (...) {
    }
  }

  // Queues `op`, which has left its timer, for the drain that the caller has posted (or
  // for destruction, after shutdown).
  void make_ready(wait_op* op, bool aborted) noexcept {
    assert(drain_posted_ || shutdown_);
    ++counters_.decided[aborted];
    ++ready_count_;
    op->owner_ = nullptr;
    op->aborted_ = aborted;
    unlink_cancellation(op);
    op->next_ = nullptr;
    if (ready_tail_ != nullptr)
      ready_tail_->next_ = op;
    else
      ready_head_ = op;
    ready_tail_ = op;
  }

  // Queues the drain unless one is. Throws only on a context other than an io_context or a
  // thread pool (see post_home): callers post it before they change anything.
  void post_drain() {
    if (!drain_posted_ && !shutdown_)
      post_drain_now();
  }

  // Out of line: it is rarely needed, and would weigh on the callers' inlining.
  [[gnu::noinline]] void post_drain_now() {
    post_home(posted_call<&wheel_service::drain>{this, &drain_memory_});
    drain_posted_ = true;
  }

  // Queues another expiry turn unless one is: the rest of a backlog, or a retry.
  void post_continuation() {
    if (continuation_posted_ || shutdown_)
      return;
    post_home(posted_call<&wheel_service::resume>{this, &continuation_memory_});
    continuation_posted_ = true;
  }

  // Makes sure the driver wakes no later than `tick`. Returns false if it could not be
  // armed: only Asio's own timer queue can fail, when it must grow its array to take the
  // wait back (other Asio timers of the clock were added meanwhile) and the heap has
  // nothing; a continuation, posted instead, tries again.
  bool arm_if_earlier(tick_type tick) {
    if (armed_ && tick >= armed_at_)
      return true;
    if constexpr (is_virtual_clock<Clock>::value) {
      // No Asio timer: virtual_time reads armed_at_ (virtual_next) and drives the turn.
      armed_ = true;
      armed_at_ = tick;
      return true;
    }
    if (driver_busy_) {
      // Its one wait is armed for later, or done with its handler queued. Cancelled, it
      // comes back to on_driver(), which arms the driver for the wheel's next expiry, this
      // tick included: the wait's memory is free by then.
      if (armed_) {
        armed_ = false;
        cancel_driver();
      }
      return true;
    }
    driver_->expires_at(scale_.time_of(tick)); // no wait pending: cancels nothing
    try {
      driver_->async_wait(driver_handler{this});
    } catch (const std::bad_alloc&) {
      post_continuation();
      return false;
    }
    driver_busy_ = armed_ = true;
    armed_at_ = tick;
    return true;
  }

  void cancel_by_slot(op_cancellation& cancellation) {
    std::lock_guard lock(mutex_);
    if (wait_op* op = cancellation.op_.load(std::memory_order_relaxed)) {
      // emit() is not expected to throw: the reserve stands in for the heap.
      spare_block spare = spare_or_reserve(op->owner_->holds(op));
      post_drain();
      detach(op, true, spare);
    }
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

  // --- Completion handlers, on the context (without the lock). ---

  // The driver's wait is done: expired, or cancelled to be armed again (or disarmed).
  // Either way its memory is free, and an expiry turn arms it for what is left.
  void on_driver() {
    std::unique_lock lock(mutex_);
    driver_busy_ = false;
    armed_ = false;
    if (!shutdown_)
      expire(lock);
  }

  void resume() {
    std::unique_lock lock(mutex_);
    continuation_posted_ = false;
    if (!shutdown_)
      expire(lock);
  }

  // An expiry turn: takes the due waits out of the wheel, arms the driver for what is left,
  // and completes them. If memory is short (a wait cannot leave its timer's storage, or the
  // driver cannot be armed), the waits taken so far still complete, the rest stay in the
  // wheel, a continuation is queued, and std::bad_alloc leaves run(): the next run() carries
  // on. Called with the lock held; releases it.
  void expire(std::unique_lock<futex_mutex>& lock) {
    const tick_type now = scale_.floor(Clock::now());
    // A clock stepped back (see due()): what the wheel holds for ticks after `now` is not due,
    // however far the wheel's time went; an entry re-filed below lands after `now`, so this
    // turn cannot meet it again.
    if constexpr (!Clock::is_steady)
      wheel_->rewind(now);
    wait_op* head = nullptr;
    wait_op** tail = &head;
    bool short_of_memory = false;
    std::uint64_t batch = 0;
    // Lateness is recorded per run of entries with one deadline (they expire in deadline
    // order, so a tick's entries are consecutive): a compare per entry, not a histogram
    // update, which kept callgrind_ops fire within 2% (docs/statistics.md).
    tick_type run_wanted = 0;
    std::uint64_t run_length = 0;
    auto record_run = [&]() noexcept {
      const tick_type late = now - run_wanted;
      counters_.lateness[std::bit_width(late)] += run_length;
      counters_.lateness_sum += late * run_length;
    };
    const bool done = wheel_->advance(now, expiry_budget, [&](wheel_node& node) noexcept {
      auto& entry = static_cast<timer_entry&>(node);
      if (entry.head_ == nullptr)
        return true; // left behind by a cancellation: dropped
      if (entry.wanted_ > now) {
        ++counters_.refiles;
        wheel_->insert(entry, entry.wanted_); // re-armed for later since it was filed
        return true;
      }
      // A wait in the timer's storage needs a block (see evict); without one, the entry
      // goes back, due, for the continuation.
      void* block = nullptr;
      if (entry.inline_busy_.load(std::memory_order_relaxed)) {
        try {
          block = block_cache::allocate(inline_op_size);
        } catch (...) {
          short_of_memory = true;
          return false;
        }
      }
      spare_block spare(std::in_place, block);
      --live_;
      // Per timer, not per wait: its waits share the deadline (see wheel_statistics).
      if (entry.wanted_ != run_wanted) {
        if (run_length != 0)
          record_run();
        run_wanted = entry.wanted_;
        run_length = 0;
      }
      ++run_length;
      for (wait_op* op = std::exchange(entry.head_, nullptr); op != nullptr; ++batch) {
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
      return true;
    });
    if (run_length != 0)
      record_run();
    ++counters_.turns;
    counters_.empty_turns += batch == 0;
    counters_.batch(batch);
    counters_.decided[0] += batch;
    bool failed = short_of_memory;
    std::exception_ptr error;
    try {
      if (!done) {
        counters_.budget_turns += !short_of_memory;
        // Give the context's other handlers a turn before the rest of the backlog.
        post_continuation();
      } else if (live_ != 0) {
        // The first filing may be one left behind (see file()): early, never late.
        if (auto next = wheel_->next_expiry())
          failed = !arm_if_earlier(*next) || failed;
      }
    } catch (...) {
      // Only on a context that is neither an io_context nor a thread pool: posting failed.
      error = std::current_exception();
    }
    lock.unlock();
    run(head);
    if (error)
      std::rethrow_exception(error);
    if (failed)
      throw std::bad_alloc();
  }

  void drain() {
    wait_op* list = nullptr;
    {
      std::lock_guard lock(mutex_);
      list = ready_head_;
      ready_head_ = ready_tail_ = nullptr;
      drain_posted_ = false;
      refill_reserve();
      counters_.batch(std::exchange(ready_count_, 0));
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
      if (!first) {
        asio::io_context* const home = home_context_.load(std::memory_order_relaxed);
        if (home != nullptr && home->stopped())
          return;
      }
      wait_op* op = list;
      list = op->next_;
      op->complete(true);
    }
  }

  void requeue_front(wait_op* list) {
    std::lock_guard lock(mutex_);
    wait_op* last = list;
    ++ready_count_;
    while (last->next_ != nullptr) {
      last = last->next_;
      ++ready_count_;
    }
    last->next_ = ready_head_;
    if (ready_head_ == nullptr)
      ready_tail_ = last;
    ready_head_ = list;
    post_drain(); // on an io_context or a thread pool, cannot throw
  }

  // Only for a context of a kind find_home() cannot tell: the thread home_ runs on. Stopped
  // by shutdown(). Declared before home_ and driver_, which refer to it, so that it
  // outlives them.
  std::optional<asio::thread_pool> own_thread_;
  // Set, once, by find_home(), after home_, home_context_ and own_thread_, which do not
  // change after; read without the lock by is_home().
  std::atomic<bool> home_found_{false};
  // The io_context behind home_, if it is one: handlers bound to its plain executor are
  // called directly from the drains, and its stop() interrupts a batch. Set once, by
  // find_home(); read without the lock by is_home() and run().
  std::atomic<asio::io_context*> home_context_{nullptr};
  // Guards every member below, the timer_entry lists, and wait_op links (and the members
  // above, until home_found_ is set).
  mutable futex_mutex mutex_;
  // Statistics (see wheel_statistics): totals only ever grow.
  wheel_counters counters_;
  // Waits in the ready queue, for the batch size of the next drain.
  std::uint64_t ready_count_ = 0;
  // The executor the driver and drain handlers run on: the context's own plain executor
  // (untracked, not a strand), or own_thread_'s.
  asio::any_io_executor home_;
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
  // True while a drain handler is queued on home_; at most one is, in drain_memory_.
  bool drain_posted_ = false;
  // True while a continuation of the expiry turn is queued; at most one is, in
  // continuation_memory_.
  bool continuation_posted_ = false;
  // True while the driver has a wait outstanding: from async_wait() until its handler runs
  // (completed or cancelled). At most one is, in driver_memory_.
  bool driver_busy_ = false;
  // True while that wait is armed for armed_at_: not cancelled, not known to have fired.
  bool armed_ = false;
  tick_type armed_at_ = 0;
  bool shutdown_ = false;
  // Spare blocks for waits leaving their timers where nothing may throw, linked through
  // their first word; reserve_target of them once the first wait is started.
  static constexpr std::size_t reserve_target = 4;
  void* reserve_ = nullptr;
  std::size_t reserve_count_ = 0;
  own_memory driver_memory_;
  own_memory drain_memory_;
  own_memory continuation_memory_;
  // The one Asio timer of this wheel; exists from the first wait until shutdown().
  std::optional<asio::basic_waitable_timer<Clock, WaitTraits, asio::any_io_executor>> driver_;
  // See own_executor(); not guarded by mutex_.
  std::once_flag own_executor_once_;
  std::optional<shared_context_executor> own_executor_;
};

} // namespace asio_wheel::detail

#endif // ASIO_WHEEL_DETAIL_WHEEL_SERVICE_HPP
