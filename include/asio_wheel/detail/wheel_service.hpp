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
// of a context shares, and the glue between its parts (docs/design.md has the layout):
// timer_entry.hpp (a timer's waits), wheel_driver.hpp (the wheel, its clock, its alarm's
// rule), completion.hpp (ready queue and batches), handler_executor.hpp (where handlers
// run), own_memory.hpp and block_reserve.hpp (memory of its own). It holds the lock, starts
// and cancels waits under it, arms its alarm (one Asio timer, armed for the wheel's next
// expiry and cancelled when no wait is left, so that an idle context's run() can return),
// runs the expiry turns and drains, and shuts down.
//
// Shutdown. shutdown() destroys every pending handler without calling it, and the alarm
// while Asio's timer service and reactor are still alive: services are shut down before any
// is destroyed, and those may be destroyed before this one. It allocates nothing: a wait in
// its timer's storage is destroyed there, one timer at a time.
//
// Memory exhaustion. Whatever the service starts by itself (the alarm's wait, a drain, a
// continuation: at most one of each) lives in memory it owns (own_memory), so on an
// io_context or a thread pool arming the alarm and posting completions allocate nothing. A
// wait leaving its timer's storage needs a block; where that cannot throw, the reserve
// stands in (block_reserve).

#include <asio_wheel/detail/block_reserve.hpp>
#include <asio_wheel/detail/completion.hpp>
#include <asio_wheel/detail/futex_mutex.hpp>
#include <asio_wheel/detail/handler_executor.hpp>
#include <asio_wheel/detail/io_executor_holder.hpp>
#include <asio_wheel/detail/op_cancellation.hpp>
#include <asio_wheel/detail/own_memory.hpp>
#include <asio_wheel/detail/timer_entry.hpp>
#include <asio_wheel/detail/wait_op.hpp>
#include <asio_wheel/detail/wheel_driver.hpp>
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
#include <mutex>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
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
                "most 64 bits");

  inline static asio::execution_context::id id;

  // Longest tick accepted by set_tick(); beyond it a wheel is the wrong tool.
  static constexpr std::chrono::seconds max_tick{60};

  explicit wheel_service(asio::execution_context& context)
      : asio::execution_context::service(context), home_(context, mutex_) {}

  wheel_service(const wheel_service&) = delete;
  wheel_service& operator=(const wheel_service&) = delete;

  ~wheel_service() override {
    // Waits aborted after shutdown (by another service's shutdown, say): never called.
    std::uint64_t count = 0;
    destroy_list(ready_.take(count));
  }

  duration tick() const {
    std::lock_guard lock(mutex_);
    return driver_.scale().tick();
  }

  void set_tick(duration tick) {
    if (tick <= duration::zero() || tick > max_tick)
      throw std::invalid_argument("asio_wheel: invalid tick of " + std::to_string(to_ns(tick)) +
                                  " ns; the tick must be positive and at most 60 s (default 1 ms)");
    std::lock_guard lock(mutex_);
    if (tick == driver_.scale().tick())
      return;
    // Deadlines already computed in the old tick would be misread: the tick is part of the
    // wheel's configuration, fixed by its first wait.
    if (alarm_)
      throw std::logic_error("asio_wheel: the tick of a context can only be changed before its "
                             "first wait (it is " +
                             std::to_string(to_ns(driver_.scale().tick())) +
                             " ns); call set_tick() right after creating the io_context");
    driver_.reset(tick);
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
    cancellation* slot_handler = nullptr;
    if (slot.is_connected())
      slot_handler = &slot.template emplace<cancellation>(this);

    wait_op* op = nullptr;
    if (home_.is_home(ex)) {
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
    // queued for it instead of the alarm: like Asio's timer queue, which keeps such a wait
    // until the reactor's next pass, the wait stays on its timer until that turn, so a
    // cancel() or expires_*() before it still aborts it. Filed at the wheel's time, not its
    // own deadline, so that the lateness statistics count only the wheel's delay.
    const bool joins = entry.head_ != nullptr;
    tick_type deadline = driver_.scale().ceil(expiry);
    bool past = false;
    // Whatever may throw comes before any change, so that then the wait is only destroyed.
    // Arming does not throw (on an io_context or a thread pool): if Asio's timer queue
    // cannot take the alarm's wait, a continuation arms it (see arm_if_earlier).
    try {
      past = !joins && driver_.due(deadline);
      if (!alarm_)
        start(io_ex, ex);
      if (past) {
        post_continuation();
        deadline = std::max(deadline, driver_.wheel().now());
      } else if (!joins) {
        arm_if_earlier(deadline);
      }
    } catch (...) {
      lock.unlock();
      discard(entry, op);
      throw;
    }
    op->cancellation_ = slot_handler;
    if (slot_handler != nullptr)
      slot_handler->op_.store(op, std::memory_order_relaxed);
    counters_.expired_at_start += past;
    append_wait(entry, op);
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

  // The timer is going (destroyed, or assigned over): aborts its waits, as cancel(), and
  // takes its entry out of the wheel. From a destructor, a wait in the timer's storage that
  // finds no block on the heap takes one from the reserve, and only if that is empty too,
  // throws (and the destructor terminates); otherwise strong guarantee. After shutdown,
  // the waits are destroyed instead, here, without allocating.
  void release(timer_entry& entry, bool from_destructor) {
    std::unique_lock lock(mutex_);
    if (shutdown_) {
      live_ -= entry.head_ != nullptr;
      const doomed_waits waits(entry);
      if (entry.is_linked())
        unfile(entry);
      lock.unlock();
      waits.destroy(entry);
      return;
    }
    if (entry.head_ != nullptr) {
      const bool in_timer = entry.inline_busy_.load(std::memory_order_relaxed);
      spare_block spare = from_destructor ? reserve_.spare(in_timer) : spare_block(in_timer);
      post_drain();
      detach_all(entry, true, spare);
    }
    if (entry.is_linked())
      unfile(entry);
  }

  // Moves the pending waits of `entry` to a new expiry without aborting them: lets an idle
  // timer follow a changed timeout without an operation_aborted round trip. Strong
  // guarantee.
  void retarget(timer_entry& entry, const time_point& expiry) {
    std::lock_guard lock(mutex_);
    if (entry.head_ == nullptr)
      return;
    const tick_type deadline = driver_.scale().ceil(expiry);
    if (driver_.due(deadline)) {
      detach_all(entry, false);
      return;
    }
    // Armed first: if that throws (only on a context other than an io_context or a thread
    // pool), the waits have not moved.
    arm_if_earlier(deadline);
    // Moved now, even when later: an idle timer's timeout moves rarely, and a filing left
    // behind would wake the alarm once more.
    entry.wanted_ = deadline;
    driver_.wheel().remove(entry);
    driver_.wheel().insert(entry, deadline);
  }

  // Moves the pending waits of `from` to `to` (a timer being moved). `to` has none and is
  // not in the wheel.
  void move_entry(timer_entry& to, timer_entry& from) {
    std::lock_guard lock(mutex_);
    if (from.head_ == nullptr) {
      if (from.is_linked())
        unfile(from); // a filing left behind, of no use to `to`
      return;
    }
    move_waits(to, from);
    // Same filing, same wanted_: nothing changes for the alarm.
    const tick_type filed = from.deadline();
    unfile(from);
    driver_.wheel().insert(to, filed);
    to.filed_.store(true, std::memory_order_relaxed);
  }

  // A consistent snapshot (see wheel_statistics), from any thread.
  wheel_statistics statistics(bool count_levels) const {
    wheel_statistics s;
    std::lock_guard lock(mutex_);
    s.tick = std::chrono::duration_cast<std::chrono::nanoseconds>(driver_.scale().tick());
    s.timers_pending = live_;
    for (unsigned level = 0; count_levels && level < wheel_statistics::levels; ++level)
      s.timers_per_level[level] = driver_.wheel().level_size(level);
    if (driver_.armed() && live_ != 0) {
      const auto left = driver_.alarm_time() - Clock::now();
      s.next_expiry = std::max(std::chrono::nanoseconds::zero(),
                               std::chrono::duration_cast<std::chrono::nanoseconds>(left));
    }
    counters_.snapshot(s);
    return s;
  }

  // Virtual clock only (see virtual_time): the time the alarm would be armed for, empty
  // when nothing is pending.
  std::optional<time_point> virtual_next() const {
    static_assert(is_virtual_clock<Clock>::value);
    std::lock_guard lock(mutex_);
    if (!driver_.armed() || live_ == 0 || shutdown_)
      return std::nullopt;
    return driver_.alarm_time();
  }

  // Virtual clock only: the alarm's wake-up, as the Asio timer would complete it, posted
  // to the context (the caller polls it). Returns false if nothing was armed.
  bool virtual_fire() {
    static_assert(is_virtual_clock<Clock>::value);
    std::lock_guard lock(mutex_);
    if (!driver_.armed() || shutdown_)
      return false;
    driver_.disarm(); // as on_alarm(): the next arm comes from this turn
    asio::post(home_.executor(), [this] {
      std::unique_lock relock(mutex_);
      expire(relock);
    });
    return true;
  }

private:
  using cancellation = op_cancellation<wheel_service>;
  friend cancellation;

  // First wait on this context, with mutex_ held: the home, if no is_home() question found
  // it yet, the reserve, and the alarm on the home. Created here rather than in the
  // constructor so that a context that never waits has no timer. Strong guarantee. Out of
  // line: it runs once per context (callgrind_ops counts every wait's inlining budget).
  template <typename IoExecutor, typename Executor>
  [[gnu::cold, gnu::noinline]] void start(const IoExecutor& io_ex, const Executor& ex) {
    home_.find(io_ex, ex);
    reserve_.fill();
    alarm_.emplace(home_.executor());
  }

  static long long to_ns(duration d) {
    return static_cast<long long>(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
  }

  void shutdown() override {
    // The home's own thread, if any, may be in a turn or a drain: it finishes that, without
    // the lock held here, and runs nothing more. What it had queued goes with it, below.
    home_.stop();
    std::unique_lock lock(mutex_);
    shutdown_ = true;
    // Destroyed now, while Asio's timer service and reactor still exist (they may have
    // been created after this service, and so be destroyed before it).
    driver_.disarm();
    alarm_.reset();
    // Outside the lock: a handler's destructor may destroy timers, which calls back in. One
    // timer at a time, so that the wait in its storage is destroyed while the timer surely
    // exists; a timer destroyed meanwhile destroys its own (see release).
    for (;;) {
      std::uint64_t count = 0;
      if (wait_op* list = ready_.take(count)) {
        lock.unlock();
        destroy_list(list);
        lock.lock();
        continue;
      }
      wheel_node* node = driver_.wheel().front();
      if (node == nullptr)
        break;
      auto& entry = static_cast<timer_entry&>(*node);
      live_ -= entry.head_ != nullptr;
      const doomed_waits waits(entry);
      unfile(entry);
      lock.unlock();
      waits.destroy(entry);
      lock.lock();
    }
    home_.release();
  }

  // --- Everything below runs with mutex_ held, unless it says otherwise. ---

  // Takes `op` off its timer and queues it for completion. The caller has posted the drain
  // and has the block `op` needs if it is in the timer's storage: nothing here throws. A
  // timer left without waits stays in the wheel (see file()).
  void detach(wait_op* op, bool aborted, spare_block& spare) noexcept {
    timer_entry& entry = *op->owner_;
    unlink_wait(entry, op);
    // Queued (and the drain posted) before the alarm may be disarmed: the drain is what
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
  // happened in between (lazy re-arm).
  void file(timer_entry& entry, tick_type deadline) noexcept {
    entry.wanted_ = deadline;
    if (entry.is_linked()) {
      if (entry.deadline() <= deadline)
        return;
      driver_.wheel().remove(entry);
    }
    entry.filed_.store(true, std::memory_order_relaxed);
    driver_.wheel().insert(entry, deadline);
  }

  // Takes `entry` out of the wheel: the service's last write to it (see timer_entry::idle).
  // Out of line: a timer leaving (release, move, shutdown) is rare, and each inlined copy of
  // the wheel's remove() would weigh on the inlining of file() (callgrind_ops counts it).
  [[gnu::noinline]] void unfile(timer_entry& entry) noexcept {
    driver_.wheel().remove(entry);
    entry.filed_.store(false, std::memory_order_release);
  }

  // An entry has lost its last wait; it may stay in the wheel (see file()).
  void vacate() noexcept {
    if (--live_ == 0 && driver_.armed()) {
      // Nothing left to wait for: disarm so that run() can return. The handler of the
      // cancelled wait finds nothing to do.
      driver_.disarm();
      if constexpr (!is_virtual_clock<Clock>::value)
        cancel_alarm();
    }
  }

  // Asio reports no error from cancelling a timer; one that did would leave the wait to
  // complete at its time, which on_alarm() handles as well. Out of line: rarely needed.
  // (The error_code overload is deprecated, and gone with ASIO_NO_DEPRECATED.)
  [[gnu::noinline]] void cancel_alarm() noexcept {
    try {
      alarm_->cancel();
    } catch (...) {
    }
  }

  // Queues `op`, which has left its timer, for the drain that the caller has posted (or
  // for destruction, after shutdown).
  void make_ready(wait_op* op, bool aborted) noexcept {
    assert(drain_posted_ || shutdown_);
    ++counters_.decided[aborted];
    unlink_cancellation(op);
    ready_.push(op, aborted);
  }

  // Queues the drain unless one is. Throws only on a context other than an io_context or a
  // thread pool (see service_home::post): callers post it before they change anything.
  void post_drain() {
    if (!drain_posted_ && !shutdown_)
      post_drain_now();
  }

  // Out of line: it is rarely needed, and would weigh on the callers' inlining.
  [[gnu::noinline]] void post_drain_now() {
    home_.post(own_handler<wheel_service, &wheel_service::drain>{this, &drain_memory_});
    drain_posted_ = true;
  }

  // Queues another expiry turn unless one is: the rest of a backlog, or a retry.
  void post_continuation() {
    if (continuation_posted_ || shutdown_)
      return;
    home_.post(own_handler<wheel_service, &wheel_service::resume>{this, &continuation_memory_});
    continuation_posted_ = true;
  }

  // Makes sure the alarm wakes no later than `tick`. Returns false if it could not be
  // armed: only Asio's own timer queue can fail, when it must grow its array to take the
  // wait back (other Asio timers of the clock were added meanwhile) and the heap has
  // nothing; a continuation, posted instead, tries again.
  bool arm_if_earlier(tick_type tick) {
    if (!driver_.needs_alarm(tick))
      return true;
    if constexpr (is_virtual_clock<Clock>::value) {
      // No Asio timer: virtual_time reads the alarm's time (virtual_next) and drives the turn.
      driver_.armed_for(tick);
      return true;
    }
    if (alarm_busy_) {
      // Its one wait is armed for later, or done with its handler queued. Cancelled, it
      // comes back to on_alarm(), which arms the alarm for the wheel's next expiry, this
      // tick included: the wait's memory is free by then.
      if (driver_.armed()) {
        driver_.disarm();
        cancel_alarm();
      }
      return true;
    }
    alarm_->expires_at(driver_.scale().time_of(tick)); // no wait pending: cancels nothing
    try {
      alarm_->async_wait(
          own_handler<wheel_service, &wheel_service::on_alarm>{this, &alarm_memory_});
    } catch (const std::bad_alloc&) {
      post_continuation();
      return false;
    }
    alarm_busy_ = true;
    driver_.armed_for(tick);
    return true;
  }

  void cancel_by_slot(cancellation& slot_handler) {
    std::lock_guard lock(mutex_);
    if (wait_op* op = slot_handler.op_.load(std::memory_order_relaxed)) {
      // emit() is not expected to throw: the reserve stands in for the heap.
      spare_block spare = reserve_.spare(op->owner_->holds(op));
      post_drain();
      detach(op, true, spare);
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
  void on_alarm() {
    std::unique_lock lock(mutex_);
    alarm_busy_ = false;
    driver_.disarm();
    if (!shutdown_)
      expire(lock);
  }

  void resume() {
    std::unique_lock lock(mutex_);
    continuation_posted_ = false;
    if (!shutdown_)
      expire(lock);
  }

  // An expiry turn: takes the due waits out of the wheel, arms the alarm for what is left,
  // and completes them. If memory is short (a wait cannot leave its timer's storage, or the
  // alarm cannot be armed), the waits taken so far still complete, the rest stay in the
  // wheel, a continuation is queued, and std::bad_alloc leaves run(): the next run() carries
  // on. Called with the lock held; releases it.
  void expire(std::unique_lock<futex_mutex>& lock) {
    const tick_type now = driver_.turn_now();
    wait_op* head = nullptr;
    wait_op** tail = &head;
    bool short_of_memory = false;
    std::uint64_t batch = 0;
    // Lateness is recorded per run of entries with one deadline (they expire in deadline
    // order, so a tick's entries are consecutive): a compare per entry, not a histogram
    // update, which kept callgrind_ops fire within 2% (docs/statistics.md).
    tick_type run_wanted = 0;
    std::uint64_t run_length = 0;
    const bool done = driver_.advance(now, [&](wheel_node& node) noexcept {
      auto& entry = static_cast<timer_entry&>(node);
      if (entry.head_ == nullptr) {
        entry.filed_.store(false, std::memory_order_release); // left behind: dropped
        return true;
      }
      if (entry.wanted_ > now) {
        ++counters_.refiles;
        driver_.wheel().insert(entry, entry.wanted_); // re-armed for later since it was filed
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
          counters_.late(now - run_wanted, run_length);
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
      entry.filed_.store(false, std::memory_order_release); // the turn is done with it
      return true;
    });
    if (run_length != 0)
      counters_.late(now - run_wanted, run_length);
    counters_.turn(batch);
    bool failed = short_of_memory;
    std::exception_ptr error;
    try {
      if (!done) {
        counters_.budget_turns += !short_of_memory;
        // Give the context's other handlers a turn before the rest of the backlog.
        post_continuation();
      } else if (live_ != 0) {
        // The first filing may be one left behind (see file()): early, never late.
        if (auto next = driver_.wheel().next_expiry())
          failed = !arm_if_earlier(*next) || failed;
      }
    } catch (...) {
      // Only on a context that is neither an io_context nor a thread pool: posting failed.
      error = std::current_exception();
    }
    lock.unlock();
    complete(head);
    if (error)
      std::rethrow_exception(error);
    if (failed)
      throw std::bad_alloc();
  }

  void drain() {
    wait_op* list = nullptr;
    {
      std::lock_guard lock(mutex_);
      std::uint64_t count = 0;
      list = ready_.take(count);
      drain_posted_ = false;
      reserve_.refill();
      counters_.batch(count);
    }
    complete(list);
  }

  // Completes a batch (see complete_batch): what a stop() or a throwing handler leaves goes
  // back to the front of the ready queue, with a drain posted.
  void complete(wait_op* list) {
    complete_batch(list, home_, [this](wait_op* rest) {
      std::lock_guard lock(mutex_);
      ready_.push_front(rest);
      post_drain(); // on an io_context or a thread pool, cannot throw
    });
  }

  // Guards every member below, the timer_entry lists and wait_op links (and home_ until it
  // is found).
  mutable futex_mutex mutex_;
  // Where the alarm and the drains run. Declared before alarm_, which runs on it.
  service_home home_;
  // Statistics (see wheel_statistics): totals only ever grow.
  wheel_counters counters_;
  // The wheel of timer entries, its clock, and the state of the alarm.
  wheel_driver<Clock> driver_;
  // Entries with pending waits (all of them in the wheel). The alarm is armed only while
  // there are some: entries left behind without waits do not keep run() going.
  std::size_t live_ = 0;
  ready_queue ready_;
  // True while a drain handler is queued on the home; at most one is, in drain_memory_.
  bool drain_posted_ = false;
  // True while a continuation of the expiry turn is queued; at most one is, in
  // continuation_memory_.
  bool continuation_posted_ = false;
  // True while the alarm has a wait outstanding: from async_wait() until its handler runs
  // (completed or cancelled). At most one is, in alarm_memory_.
  bool alarm_busy_ = false;
  bool shutdown_ = false;
  block_reserve reserve_;
  own_memory alarm_memory_;
  own_memory drain_memory_;
  own_memory continuation_memory_;
  // The one Asio timer of this wheel; exists from the first wait until shutdown().
  std::optional<asio::basic_waitable_timer<Clock, WaitTraits, asio::any_io_executor>> alarm_;
  // See own_executor(); not guarded by mutex_.
  std::once_flag own_executor_once_;
  std::optional<shared_context_executor> own_executor_;
};

} // namespace asio_wheel::detail

#endif // ASIO_WHEEL_DETAIL_WHEEL_SERVICE_HPP
