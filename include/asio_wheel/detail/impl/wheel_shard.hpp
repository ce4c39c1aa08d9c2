//
// detail/impl/wheel_shard.hpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_DETAIL_IMPL_WHEEL_SHARD_HPP
#define ASIO_WHEEL_DETAIL_IMPL_WHEEL_SHARD_HPP

// A wheel shard's members that are off the path of a wait: its first wait, shutdown, its own
// handlers (the alarm, the expiry turn and its continuation, the drain), and the accessors
// of statistics and virtual time. Out of the class body, as Asio's detail/impl/ files are,
// so that the class reads as the shard's interface and its hot path; included at the bottom
// of wheel_shard.hpp, and includes it, so that it compiles alone.

#include <asio_wheel/detail/exceptions.hpp>
#include <asio_wheel/detail/wheel_shard.hpp>

namespace asio_wheel::detail {

template <typename Clock, typename WaitTraits>
wheel_statistics wheel_shard<Clock, WaitTraits>::statistics(bool count_levels) const {
  wheel_statistics s;
  std::lock_guard lock(mutex_);
  queue_.snapshot(s, count_levels);
  return s;
}

template <typename Clock, typename WaitTraits>
template <typename C>
auto wheel_shard<Clock, WaitTraits>::virtual_next() const -> std::optional<time_point> {
  static_assert(is_virtual_clock<C>::value);
  std::lock_guard lock(mutex_);
  if (!queue_.driver().armed() || queue_.live() == 0 || shutdown_)
    return std::nullopt;
  return queue_.driver().alarm_time();
}

template <typename Clock, typename WaitTraits>
template <typename C>
bool wheel_shard<Clock, WaitTraits>::virtual_fire() {
  static_assert(is_virtual_clock<C>::value);
  std::lock_guard lock(mutex_);
  if (!queue_.driver().armed() || shutdown_)
    return false;
  queue_.driver().disarm(); // as on_alarm(): the next arm comes from this turn
  asio::post(home_.executor(), [this] {
    std::unique_lock relock(mutex_);
    expire(relock);
  });
  return true;
}

template <typename Clock, typename WaitTraits>
template <typename IoExecutor, typename Executor>
void wheel_shard<Clock, WaitTraits>::start(const IoExecutor& io_ex, const Executor& ex) {
  home_.find(io_ex, ex);
  if (home_.io_context() != nullptr)
    sweep_ = may_sweep_;
  reserve_.fill();
  alarm_.start(home_.executor());
}

template <typename Clock, typename WaitTraits>
void wheel_shard<Clock, WaitTraits>::stop_for_shutdown() {
  std::lock_guard lock(mutex_);
  shutdown_ = true;
  queue_.driver().disarm();
  alarm_.stop();
}

template <typename Clock, typename WaitTraits>
void wheel_shard<Clock, WaitTraits>::destroy_for_shutdown() {
  std::unique_lock lock(mutex_);
  queue_.destroy_all(lock);
}

template <typename Clock, typename WaitTraits>
void wheel_shard<Clock, WaitTraits>::cancel_by_slot(cancellation& slot_handler) {
  std::lock_guard lock(mutex_);
  if (wait_op* op = slot_handler.op_.load(std::memory_order_relaxed)) {
    // emit() is not expected to throw: the reserve stands in for the heap.
    spare_block spare = reserve_.spare(op->owner_->holds(op));
    detach(op, spare);
  }
}

template <typename Clock, typename WaitTraits>
void wheel_shard<Clock, WaitTraits>::forget_slot(cancellation& slot_handler) {
  std::lock_guard lock(mutex_);
  if (wait_op* op = slot_handler.op_.load(std::memory_order_relaxed)) {
    op->cancellation_ = nullptr;
    slot_handler.op_.store(nullptr, std::memory_order_relaxed);
  }
}

template <typename Clock, typename WaitTraits>
void wheel_shard<Clock, WaitTraits>::on_alarm(bool expired) {
  note_runner();
  std::unique_lock lock(mutex_);
  const bool superseded = alarm_.done(expired);
  queue_.driver().disarm();
  if (shutdown_)
    return;
  if (superseded && queue_.live() != 0) {
    if (const auto next = queue_.driver().wheel().next_expiry()) {
      arm_if_earlier(*next); // else a continuation is posted: a turn all the same
      return;
    }
  }
  expire(lock);
}

template <typename Clock, typename WaitTraits>
void wheel_shard<Clock, WaitTraits>::resume() {
  note_runner();
  std::unique_lock lock(mutex_);
  continuation_.ran();
  if (shutdown_)
    return;
  // Waits aborted (or retargeted into the past) since this turn was queued wait in the ready
  // queue for the drain, queued behind it. Asio queues an abort's completion at once, and a
  // timer's expiry only when its reactor finds it: an expiry that this turn would find now,
  // and that was not found due when the turn was queued, completes after those aborts in
  // Asio (say a wait started after a timer was destroyed, due by now). So this turn then
  // completes only the waits found due before it was queued, and leaves the rest to the
  // alarm, whose completion is queued behind the drain, as Asio's reactor would find them.
  // The turn does not complete the aborts itself: the drain's handler is queued, in memory
  // of its own, and would have to be told it ran. Not on the path of a turn without aborts.
  if (drain_.queued() && !queue_.ready().empty()) {
    if (continuation_found_) {
      expire(lock, *continuation_found_);
    } else if (queue_.live() != 0) {
      if (const auto next = queue_.driver().wheel().next_expiry())
        arm_if_earlier(*next); // else a continuation again, behind the drain
    }
    return;
  }
  expire(lock);
}

template <typename Clock, typename WaitTraits>
void wheel_shard<Clock, WaitTraits>::expire(std::unique_lock<futex_mutex>& lock, tick_type until) {
  // `until` no earlier than the wheel's time: a turn since (the alarm's) may have moved the
  // wheel past it, and a take "by" a tick the wheel has passed would hand back waits filed at
  // its time, due after `until`, to be re-filed into the slot it takes from, a budget's worth.
  const tick_type now = detail::min_of(queue_.driver().turn_at(Clock::now()),
                                       detail::max_of(until, queue_.driver().wheel().now()));
  expiry_batch batch(now, queue_.counters());
  bool short_of_memory = false;
  // Before the take, which lets the timers it empties leave the wheel (idle): one seen idle
  // from another thread then finds its shard holding (see batch_state). Ended by complete().
  batches_.taken();
  const bool done = queue_.take_due(now, batch, short_of_memory, drain_.queued());
  wait_op* const list = batch.finish();
  bool failed = short_of_memory;
  std::exception_ptr error;
  ASIO_WHEEL_TRY {
    if (!done) {
      queue_.counters().budget_turns += !short_of_memory;
      // Give the context's other handlers a turn before the rest of the backlog.
      post_continuation(now);
    } else if (queue_.live() != 0) {
      // The first filing may be one left behind (see timer_queue::file): early, never late.
      if (auto next = queue_.driver().wheel().next_expiry())
        failed = !arm_if_earlier(*next) || failed;
    } else {
      // The turn took the last wait. The alarm may still be armed (this turn is a
      // continuation, not the alarm's) for a filing left behind by a cancelled wait: a
      // wait outstanding on Asio's timer would keep run() from returning until then.
      alarm_.emptied(queue_.driver());
    }
  }
  ASIO_WHEEL_CATCH_ALL {
    // Only on a context that is neither an io_context nor a thread pool: posting failed.
    error = std::current_exception();
  }
  lock.unlock();
  complete(list);
  if (error)
    std::rethrow_exception(error);
  if (failed)
    detail::throw_exception(std::bad_alloc());
}

template <typename Clock, typename WaitTraits>
void wheel_shard<Clock, WaitTraits>::drain() {
  note_runner();
  batch_hints hints;
  std::uint64_t count = 0;
  wait_op* const list = take_ready(count, hints);
  complete(list, hints.ops, hints.size);
}

template <typename Clock, typename WaitTraits>
void wheel_shard<Clock, WaitTraits>::complete(wait_op* list, wait_op* const* hints,
                                              std::size_t hinted) {
  unsigned until_check = stop_check_interval;
  complete_swept(list, hints, hinted, until_check);
}

} // namespace asio_wheel::detail

#endif // ASIO_WHEEL_DETAIL_IMPL_WHEEL_SHARD_HPP
