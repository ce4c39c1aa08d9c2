//
// detail/wheel_shard.hpp
// ~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_DETAIL_WHEEL_SHARD_HPP
#define ASIO_WHEEL_DETAIL_WHEEL_SHARD_HPP

// One shard of a context's wheel service (detail/wheel_service.hpp): a timing wheel with its
// own lock, its waits, its alarm (one Asio timer, armed for the shard's next expiry and
// cancelled when no wait is left, so that an idle context's run() can return), and the
// expiry turns and drains that complete its waits (completion.hpp), run on the service's
// home. It is the glue of one wheel: it holds the lock, builds each wait's operation, hands
// it to its timer_queue (the entries, their waits, the wheel) and arms its service_alarm.
// Whatever it starts by itself lives in memory it owns (own_memory, block_reserve).
// A context has one shard per thread that starts waits, up to a bound (see wheel_service),
// so that threads running one context do not share a lock or a turn: a timer's waits live in
// one shard while any is pending or its entry is filed (timer_entry::shard_).

#include <asio_wheel/detail/block_reserve.hpp>
#include <asio_wheel/detail/completion.hpp>
#include <asio_wheel/detail/drain_sweep.hpp>
#include <asio_wheel/detail/futex_mutex.hpp>
#include <asio_wheel/detail/handler_executor.hpp>
#include <asio_wheel/detail/min_max.hpp>
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

#include <atomic>
#include <cassert>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <limits>
#include <mutex>
#include <new>
#include <optional>
#include <type_traits>
#include <utility>

namespace asio_wheel::detail {

template <typename Clock, typename WaitTraits>
class alignas(64) wheel_shard {
public:
  using clock_type = Clock;
  using duration = typename Clock::duration;
  using time_point = typename Clock::time_point;

  // Shard `index` of a service whose handlers run on `home`, with the context's tick.
  // `shutdown`: the service has shut down already (a shard made after that starts nothing).
  // `sweep`: the service's, if its shards may share one drain (see drain_sweep.hpp), else
  // null.
  wheel_shard(service_home& home, std::uint8_t index, duration tick, bool shutdown,
              drain_sweep* sweep)
      : home_(home), queue_(index), shutdown_(shutdown), may_sweep_(sweep) {
    queue_.driver().set_tick(tick, false);
  }

  wheel_shard(const wheel_shard&) = delete;
  wheel_shard& operator=(const wheel_shard&) = delete;

  ~wheel_shard() {
    // Waits aborted after shutdown (by another service's shutdown, say): never called.
    std::uint64_t count = 0;
    destroy_list(queue_.ready().take(count));
  }

  // The service's set_tick(), with every shard's lock held by the service: whether a wait
  // has fixed the tick, then the change (checked by the service before any shard changes).
  bool tick_fixed() const noexcept { return alarm_.started(); }
  void set_tick(duration tick) { queue_.driver().set_tick(tick, false); }
  futex_mutex& mutex() const noexcept { return mutex_; }

  // Starts a wait on `entry` for `expiry`. Strong guarantee: if it throws, nothing changed.
  // `home` is home_, passed by the service, which has its address without a load (a load
  // per wait is 0.5% of callgrind_ops arm). Only what needs the handler's type is here: its
  // associations and its operation; the filing is file_wait(), shared by every handler.
  template <typename Handler, typename IoExecutor>
  void async_wait(timer_entry& entry, const time_point& expiry, Handler&& handler,
                  const IoExecutor& io_ex, service_home& home) {
    assert(&home == &home_);
    auto slot = asio::get_associated_cancellation_slot(handler);
    const auto ex = asio::get_associated_executor(handler, io_ex);

    // Emplaced before the op is built, so that a throwing emplace leaks nothing; until the
    // op is linked by file_wait(), the handler has nothing to cancel.
    cancellation* slot_handler = nullptr;
    if (slot.is_connected())
      slot_handler = &slot.template emplace<cancellation>(this);

    // A wait on a virtual clock keeps no work (see tracked_executor).
    wait_op* const op = make_wait_op<!is_virtual_clock<Clock>::value>(
        entry, std::forward<Handler>(handler), ex, home);
    file_wait(entry, op, expiry, slot_handler,
              first_wait{&start_from<IoExecutor, std::decay_t<decltype(ex)>>, &io_ex, &ex});
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
  //
  // `keep_shard`: the timer lives on, assigned an idle timer. While a wait of it may still
  // be in the ready queue, or in a batch taken and running (see batch_state), its entry
  // then stays filed, as cancel() leaves it, so that its next wait, from whatever thread, is
  // filed here and, if aborted, completes after that one (see timer_queue::keep_filing):
  // out of the wheel, it would wait in the next caller's shard, whose drain may come first,
  // where Asio completes the wait that the assignment aborted before any later wait of the
  // timer.
  void release(timer_entry& entry, bool from_destructor, bool keep_shard = false) {
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
    if (entry.is_linked() &&
        !(keep_shard &&
          ((drain_.queued() && queue_.ready().holds_wait_of(entry)) || batches_.running())))
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
    arm_for(deadline);
    queue_.refile(entry, deadline);
  }

  // Moves the pending waits of `from` to `to` (a timer being moved).
  void move_entry(timer_entry& to, timer_entry& from) {
    std::lock_guard lock(mutex_);
    queue_.move(to, from, drain_.queued());
  }

  // Takes the ready queue for the drain, or for the service's sweep (drain_sweep.hpp) that
  // stands in for it: the first waits' addresses appended to `hints`.
  wait_op* take_ready(std::uint64_t& count, batch_hints& hints) {
    std::lock_guard lock(mutex_);
    wait_op* const list = queue_.ready().take(count, hints);
    batches_.taken_from_ready();
    drain_.ran();
    reserve_.refill();
    queue_.counters().batch(count);
    return list;
  }

  // Completes what take_ready() gave (`hints`: its first waits), as the drain's batch or a
  // part of the sweep's (`until_check`, the result: see complete_batch).
  bool complete_swept(wait_op* list, wait_op* const* hints, std::size_t hinted,
                      unsigned& until_check) {
    struct ended {
      batch_state& batches;
      ~ended() { batches.ended(); } // also when a handler throws
    } end{batches_};
    return complete_batch(
        list, home_, [this](wait_op* rest) { requeue(rest); }, hints, hinted, until_check);
  }

  // A batch that take_ready() gave and that is given back whole (a sweep's part that a
  // throw or a stop() kept from its turn), or that was empty. Without the lock.
  void give_back(wait_op* list) {
    if (list != nullptr)
      requeue(list);
    batches_.ended();
  }

  // Waits taken for a batch and not completed (a handler threw, or stop() was called, before
  // their turn): back to the front of the ready queue, with a drain. Without the lock.
  void requeue(wait_op* rest) {
    std::lock_guard lock(mutex_);
    queue_.ready().push_front(rest);
    batches_.requeued();
    post_drain(); // on an io_context or a thread pool, cannot throw
  }

  // Without the lock, from any thread: whether a wait that this shard took out of its wheel
  // or its ready queue may not have completed yet (see batch_state).
  bool holds_taken_waits() const noexcept { return batches_.holding(); }

  // A consistent snapshot (see wheel_statistics), from any thread.
  wheel_statistics statistics(bool count_levels) const;

  // Virtual clock only (see virtual_time): the time the alarm would be armed for, empty
  // when nothing is pending.
  // A member template, so that an explicit instantiation of the class for another clock
  // (ASIO_WHEEL_SEPARATE_COMPILATION) does not instantiate it.
  template <typename C = Clock>
  std::optional<time_point> virtual_next() const;

  // Virtual clock only: the alarm's wake-up, as the Asio timer would complete it, posted
  // to the context (the caller polls it). Returns false if nothing was armed.
  template <typename C = Clock>
  bool virtual_fire();

private:
  using cancellation = op_cancellation<wheel_shard>;
  friend cancellation;

  // What a shard's first wait needs of the wait's executors (start()), behind a function
  // pointer: file_wait() is then compiled once per clock, not once per handler and executor
  // type (a test's translation unit held about fifty copies of it), and the executors' types
  // reach only start(), which runs once per shard.
  struct first_wait {
    void (*start_fn)(wheel_shard&, const void*, const void*);
    const void* io_ex;
    const void* ex;
    void start(wheel_shard& shard) const { start_fn(shard, io_ex, ex); }
  };

  template <typename IoExecutor, typename Executor>
  static void start_from(wheel_shard& shard, const void* io_ex, const void* ex) {
    shard.start(*static_cast<const IoExecutor*>(io_ex), *static_cast<const Executor*>(ex));
  }

  // Files `op`, just built for `entry` (its handler's cancellation slot holding
  // `slot_handler`, or null), as a wait for `expiry`: the lock, the first wait's start(),
  // the alarm, the wheel and the statistics. The wait is then the shard's; if it cannot be
  // (after shutdown) it is destroyed uncalled, and if anything throws, it is destroyed
  // uncalled before the exception leaves: either way the caller has nothing left to undo.
  // Without the lock. Inlined into async_wait() where the build optimizes for speed (see
  // ASIO_WHEEL_INLINE_PER_WAIT), in the separate mode too: it is in the class body.
  ASIO_WHEEL_INLINE_PER_WAIT void file_wait(timer_entry& entry, wait_op* op,
                                            const time_point& expiry, cancellation* slot_handler,
                                            const first_wait& first) {
    // The lock is gone before the wait is destroyed (its handler's destructor may call back
    // in): by unwinding, or at the end of the block. A lock_guard, not a unique_lock, whose
    // owns flag the compiler kept testing.
    bool started = false;
    ASIO_WHEEL_TRY {
      std::lock_guard lock(mutex_);
      started = start_wait(entry, op, expiry, slot_handler, first);
    }
    ASIO_WHEEL_CATCH_ALL {
      discard(entry, op);
      ASIO_WHEEL_RETHROW;
    }
    if (!started)
      discard(entry, op);
  }

  // First wait on this shard, with mutex_ held: the home, if no is_home() question found it
  // yet, the reserve, and the alarm on the home. Strong guarantee. Out of line: it runs once
  // per shard (callgrind_ops counts every wait's inlining budget).
  template <typename IoExecutor, typename Executor>
  [[gnu::cold, gnu::noinline]] void start(const IoExecutor& io_ex, const Executor& ex);

public:
  // The service's shutdown, in two passes over its shards, so that no shard posts a drain
  // while another destroys its waits (a handler's destructor may release a timer of any
  // shard): first every shard stops (nothing more is posted or armed), then each destroys
  // its waits, uncalled.
  void stop_for_shutdown();
  void destroy_for_shutdown();

private:
  // --- Everything below runs with mutex_ held, unless it says otherwise. ---

  // Links `op`, built for `entry`, as a wait for `expiry`; false after shutdown (the caller
  // then destroys it). If it throws, nothing changed.
  [[gnu::always_inline]] bool start_wait(timer_entry& entry, wait_op* op, const time_point& expiry,
                                         cancellation* slot_handler, const first_wait& first) {
    if (shutdown_)
      return false;
    ++queue_.counters().started;
    // Already in the wheel for the same expiry: the wait joins the others. Otherwise, an
    // expiry that has passed is filed at the wheel's current tick, due, and the alarm is
    // armed for that tick (see expire_soon): like Asio's timer queue, which keeps such a
    // wait until the reactor's next pass, the wait stays on its timer until that turn, so a
    // cancel() or expires_*() before it still aborts it. Filed at the wheel's time, not its
    // own deadline, so that the lateness statistics count only the wheel's delay.
    const bool joins = entry.head_ != nullptr;
    tick_type deadline = queue_.driver().scale().ceil(expiry);
    // Whatever may throw comes before any change. Arming does not throw (on an io_context or
    // a thread pool): if Asio's timer queue cannot take the alarm's wait, a continuation arms
    // it (see arm_if_earlier).
    const bool past = !joins && queue_.driver().due(deadline);
    if (!alarm_.started())
      first.start(*this);
    if (past) {
      deadline = detail::max_of(deadline, queue_.driver().wheel().now());
      expire_soon(deadline);
      ++queue_.counters().expired_at_start;
    } else if (!joins) {
      arm_for(deadline);
    }
    if (slot_handler != nullptr) {
      op->cancellation_ = slot_handler; // else null, as built
      slot_handler->op_.store(op, std::memory_order_relaxed);
    }
    queue_.enqueue(entry, op, deadline, joins);
    return true;
  }

  // Aborts `op` (see timer_queue::detach), the drain posted first, which is what keeps
  // another thread's run() from returning before the alarm may be disarmed.
  void detach(wait_op* op, spare_block& spare) {
    post_drain();
    if (queue_.detach(op, true, spare))
      alarm_.emptied(queue_.driver());
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
      alarm_.emptied(queue_.driver());
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

  // Makes sure the alarm wakes in time for a wait filed for `deadline`: not at the deadline
  // but where the wheel must stage its slot ahead (timing_wheel::wake_for). Inline, one
  // compare with the deadlines the armed alarm is known to be early enough for
  // (wheel_driver::settles): in a busy context, or with the alarm armed for a slot further
  // out than the deadline's, nearly all.
  [[gnu::always_inline]] bool arm_for(tick_type deadline) {
    if (queue_.driver().settles(deadline))
      return true;
    return arm_for_wake(deadline);
  }

  [[gnu::noinline]] bool arm_for_wake(tick_type deadline) {
    return arm_if_earlier(queue_.driver().wheel().wake_for(deadline));
  }

  // A turn for `tick`, which has passed (a wait due when it starts): from the alarm, armed
  // for it, so that Asio's reactor runs the turn in its next pass, after the I/O it finds
  // ready there, as it completes its own timers that have expired (a turn posted at once
  // ran before them). An alarm armed for any tick up to the clock's stays: it wakes in that
  // pass too, or its turn is queued already. A virtual clock has no reactor: the turn is
  // posted.
  void expire_soon(tick_type tick) {
    if constexpr (is_virtual_clock<Clock>::value)
      post_continuation(tick);
    else
      arm_if_earlier(detail::max_of(tick, queue_.driver().scale().floor(Clock::now())));
  }

  [[gnu::noinline]] bool arm_alarm(tick_type tick) {
    if (alarm_.arm_if_earlier(
            queue_.driver(), tick,
            own_wait_handler<wheel_shard, &wheel_shard::on_alarm>{this, &alarm_.memory()}))
      return true;
    post_continuation(std::nullopt); // stands in for the alarm, which has found nothing yet
    return false;
  }

  // Queues the drain unless one is. Throws only on a context other than an io_context or a
  // thread pool (see service_home::post): callers post it before they change anything.
  void post_drain() {
    if (!drain_.queued() && !shutdown_)
      post_drain_now();
  }

  // Out of line: it is rarely needed, and would weigh on the callers' inlining.
  [[gnu::noinline]] void post_drain_now() {
    if (sweep_ != nullptr && sweep_->enroll(queue_.shard()))
      drain_.queued_elsewhere();
    else
      drain_.post(home_, this);
  }

  // The shard's own handlers tell the sweep which threads run the context (a sweep only
  // where several do).
  void note_runner() noexcept {
    if (may_sweep_ != nullptr)
      may_sweep_->ran_here();
  }

  // Queues another expiry turn unless one is: the rest of a backlog, or a retry. `found`:
  // the tick by which the waits it is queued for were found due (a backlog's turn, a wait
  // due when it started on a virtual clock), or none (a retry that stands in for the alarm);
  // see resume().
  void post_continuation(std::optional<tick_type> found) {
    if (shutdown_)
      return;
    if (!continuation_.queued()) {
      continuation_found_ = found;
      continuation_.post(home_, this);
    } else if (found && (!continuation_found_ || *continuation_found_ < *found)) {
      continuation_found_ = found;
    }
  }

  // Out of the class body, as the handlers below: not inline, so that with
  // ASIO_WHEEL_SEPARATE_COMPILATION a translation unit whose wait connects a cancellation
  // slot calls them in src.hpp's code instead of instantiating them to inline them.
  void cancel_by_slot(cancellation& slot_handler);
  void forget_slot(cancellation& slot_handler);

  // --- Handlers of the service's own, on its home (without the lock). ---

  // The alarm's wait is done (`expired`: found due by Asio's reactor, not cancelled): its
  // memory is free. Expired, it runs an expiry turn, which arms it for what is left, even
  // if the alarm was wanted earlier meanwhile: the reactor queued this completion with the
  // expiries it found, so the waits it stands for complete in Asio's place for them, ahead
  // of what was queued since (aborts, say); unless every wait pending then has gone since
  // (service_alarm::done). Cancelled to be armed again, with waits left, it arms it for the
  // wheel's next expiry, through the reactor again, even if that has passed.
  void on_alarm(bool expired);

  // The continuation: the rest of a turn's backlog (or a retry after memory ran short).
  void resume();

  // An expiry turn: takes the waits due by the clock (by `until`, if earlier) out of the
  // wheel, arms the alarm for what is left, and completes them. If memory is short (a wait cannot
  // leave its timer's storage, or the alarm cannot be armed), the waits taken so far still
  // complete, the rest stay in the wheel, a continuation is queued, and std::bad_alloc leaves
  // run(): the next run() carries on. Called with the lock held; releases it.
  void expire(std::unique_lock<futex_mutex>& lock,
              tick_type until = (std::numeric_limits<tick_type>::max)());

  // Completes, as one batch, the waits decided outside a turn (aborted, or retargeted into
  // the past).
  void drain();

  // Completes a batch (see complete_batch): what a stop() or a throwing handler leaves goes
  // back to the front of the ready queue, with a drain posted (requeue()). `hints`: the
  // batch's first waits, for a drain (an expiry turn's waits were just touched by the turn's
  // thread).
  void complete(wait_op* list, wait_op* const* hints = nullptr, std::size_t hinted = 0);

  // Guards every member below, and the lists, links and filings of the timer_entries whose
  // shard_ is this shard's. Shards are aligned to cache lines: no false sharing between them.
  mutable futex_mutex mutex_;
  // Where the alarm, the turns and the drains run: the service's, shared by its shards.
  service_home& home_;
  timer_queue<Clock> queue_;
  // The drain, and the continuation of an expiry turn: at most one of each is queued. When
  // the service's sweep took this shard (enroll() said so), drain_ is not posted: queued
  // then means this shard is pending in the sweep, which takes the ready queue instead.
  own_post<wheel_shard, &wheel_shard::drain> drain_;
  own_post<wheel_shard, &wheel_shard::resume> continuation_;
  // While continuation_ is queued: the latest tick by which a wait it is queued for was found
  // due, or none if it only stands in for the alarm (see post_continuation, resume).
  std::optional<tick_type> continuation_found_;
  bool shutdown_ = false;
  // The service's sweep if it may stand in for drain_, and sweep_ that once the first wait
  // found the home an io_context (start()): a context of another kind may throw from a
  // post, which the sweep has no way to report.
  drain_sweep* const may_sweep_;
  drain_sweep* sweep_ = nullptr;
  block_reserve reserve_;
  service_alarm<Clock, WaitTraits> alarm_;
  // Batches taken and not completed, for the order of a timer's waits: see batch_state.
  batch_state batches_;
};

} // namespace asio_wheel::detail

#include <asio_wheel/detail/impl/wheel_shard.hpp>

#endif // ASIO_WHEEL_DETAIL_WHEEL_SHARD_HPP
