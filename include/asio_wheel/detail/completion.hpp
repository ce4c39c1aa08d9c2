//
// detail/completion.hpp
// ~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_DETAIL_COMPLETION_HPP
#define ASIO_WHEEL_DETAIL_COMPLETION_HPP

// The last stage of a wait: waits that have left their timers, queued in completion order,
// and completed in batches from one handler of the service's, on its home executor (see
// handler_executor.hpp). A handler whose executor is the home's io_context's is called
// directly from the batch (direct_completion), any other is dispatched to its executor
// (tracked_executor).

#include <asio_wheel/detail/block_reserve.hpp>
#include <asio_wheel/detail/handler_executor.hpp>
#include <asio_wheel/detail/min_max.hpp>
#include <asio_wheel/detail/prefetch.hpp>
#include <asio_wheel/detail/timer_entry.hpp>
#include <asio_wheel/detail/wait_op.hpp>
#include <asio_wheel/wheel_statistics.hpp>

#include <asio_wheel/detail/asio_forward.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>

namespace asio_wheel::detail {

// The addresses of a batch's first waits, in order, so that the thread completing the batch
// can prefetch each wait a few handlers ahead. A drain's waits were queued by whichever
// threads aborted them, and on an io_context run by several threads another thread usually
// runs the drain (Asio's scheduler hands it to any of them): each wait's memory is then in
// another core's cache, and following the list one wait at a time cost a cache miss per
// handler, one after the other (complete_batch was a quarter of the profile of
// benchmarks/threads_bench on one context run by 2 threads). With the addresses known ahead,
// the misses overlap. A hint is only ever prefetched, never dereferenced.
struct batch_hints {
  static constexpr std::size_t capacity = 256;
  wait_op* ops[capacity];
  std::size_t size = 0;
};

// What a shard took out of its wheel or its ready queue and has not completed, for the order
// of a timer's waits. A turn takes its due waits out of the wheel, and their timers, left
// without waits, leave the wheel (idle); a drain takes the ready queue, the aborted waits of
// timers that may have left the wheel since. Such a timer's next wait, started on another
// thread, would go to that thread's shard, whose drain may come first, where Asio completes
// a timer's expired or aborted wait before any later wait of the timer. So, while a batch
// taken from a shard runs, and while the rest of one cut short by stop() or a throw waits in
// its ready queue for the next drain, an idle timer last filed in that shard waits there
// again (wheel_service::other_thread_shard), and a timer assigned an idle one keeps its filing
// there (wheel_shard::release). Read without the shard's lock, relaxed: a thread that starts a wait
// on a timer whose earlier wait was taken has synchronized with the thread that took it (Asio's
// timers are not thread-safe objects), which orders the write before the read; a thread that has
// not is not ordered after that wait by Asio either. A line of its own: written twice per batch,
// read on another thread only for an idle timer used from it.
class alignas(64) batch_state {
public:
  // A turn took its due waits (under the shard's lock).
  void taken() noexcept { running_.fetch_add(1, std::memory_order_relaxed); }

  // A drain or a sweep took the whole ready queue, and so what a requeue() put back (under
  // the shard's lock).
  void taken_from_ready() noexcept {
    taken();
    if (requeued_.load(std::memory_order_relaxed))
      requeued_.store(false, std::memory_order_relaxed);
  }

  // A batch taken has completed, or gone back to the ready queue (after requeued()).
  void ended() noexcept { running_.fetch_sub(1, std::memory_order_relaxed); }

  // The rest of a batch went back to the front of the ready queue (under the shard's lock).
  void requeued() noexcept {
    if (!requeued_.load(std::memory_order_relaxed))
      requeued_.store(true, std::memory_order_relaxed);
  }

  bool running() const noexcept { return running_.load(std::memory_order_relaxed) != 0; }

  bool holding() const noexcept { return running() || requeued_.load(std::memory_order_relaxed); }

private:
  // Batches taken and not ended: a turn's, a drain's, the parts of sweeps.
  std::atomic<unsigned> running_{0};
  // From a requeue() until the ready queue is next taken. Written only when it changes.
  std::atomic<bool> requeued_{false};
};

// Waits whose result is decided (expired out of turn, or aborted), in completion order,
// linked through wait_op::next_, waiting for the next drain. Guarded by the service's lock.
class ready_queue {
public:
  ready_queue() noexcept = default;
  ready_queue(const ready_queue&) = delete;
  ready_queue& operator=(const ready_queue&) = delete;

  // `op` has left its timer `from` with its result: queued last. The timer is marked (see
  // timer_entry::ready_mark_) until the queue is next taken.
  void push(timer_entry& from, wait_op* op, bool aborted) noexcept {
    from.ready_mark_ = epoch_;
    push(op, aborted);
  }

  bool empty() const noexcept { return head_ == nullptr; }

  // Whether a wait of `entry` may be in the queue: one was queued since the queue was last
  // taken, or the rest of an interrupted batch was put back since (its timers are not
  // marked: any may have a wait there).
  bool holds_wait_of(const timer_entry& entry) const noexcept {
    return entry.ready_mark_ == epoch_ || requeued_ == epoch_;
  }

  // `op` has left its timer with its result: queued last.
  void push(wait_op* op, bool aborted) noexcept {
    if (count_ < batch_hints::capacity)
      hints_[count_] = op;
    ++count_;
    op->owner_ = nullptr;
    op->ready_ = {aborted, false};
    op->next_ = nullptr;
    if (tail_ != nullptr)
      tail_->next_ = op;
    else
      head_ = op;
    tail_ = op;
  }

  // The rest of a batch that a throwing handler interrupted: queued first, in its order.
  void push_front(wait_op* list) noexcept {
    requeued_ = epoch_;
    hinted_ = false; // the queue no longer starts with hints_[0]
    wait_op* last = list;
    ++count_;
    while (last->next_ != nullptr) {
      last = last->next_;
      ++count_;
    }
    last->next_ = head_;
    if (head_ == nullptr)
      tail_ = last;
    head_ = list;
  }

  // Everything queued, for one batch; `count` gets its length.
  wait_op* take(std::uint64_t& count) noexcept {
    ++epoch_; // std::uint16_t: wraps, as said below
    count = std::exchange(count_, 0);
    hinted_ = true;
    tail_ = nullptr;
    return std::exchange(head_, nullptr);
  }

  // The same, and the addresses of the batch's first waits appended to `hints` (a sweep
  // gathers several shards' batches in one), as many as it has room for.
  wait_op* take(std::uint64_t& count, batch_hints& hints) noexcept {
    const std::size_t room = batch_hints::capacity - hints.size;
    const std::size_t n =
        hinted_ ? static_cast<std::size_t>(min_of<std::uint64_t>(count_, room)) : 0;
    // As std::copy of pointers does (without <algorithm>: detail/min_max.hpp).
    if (n > 1)
      std::memmove(hints.ops + hints.size, hints_, n * sizeof(wait_op*));
    else if (n == 1)
      hints.ops[hints.size] = hints_[0];
    hints.size += n;
    return take(count);
  }

private:
  wait_op* head_ = nullptr;
  wait_op* tail_ = nullptr;
  // Waits queued, for the batch size of the next drain.
  std::uint64_t count_ = 0;
  // How many times the queue has been taken (wrapping), so that a timer's ready_mark_ says
  // whether a wait of the timer may still be queued: equal means yes. Starts at 1 so that
  // an entry's initial mark of 0 says no; after 2^16 drains a stale mark can match by
  // chance, which only queues a due wait behind the ready ones (late by one drain, in
  // order).
  std::uint16_t epoch_ = 1;
  // The epoch in which the rest of a batch was last put back (push_front); 0: none yet.
  std::uint16_t requeued_ = 0;
  // The first waits queued since the queue was last taken, in queue order, while hinted_:
  // hints_[i] is the i-th wait of the queue for i < min(count_, capacity). False from a
  // push_front until the next take. Last, so that the fields above share a cache line.
  bool hinted_ = true;
  wait_op* hints_[batch_hints::capacity];
};

// The waits that one expiry turn at tick `now` takes from the wheel, in expiry order. The
// lateness of their timers is recorded per run of timers with one deadline (they expire in
// deadline order, so a tick's are consecutive): a compare per timer, not a histogram
// update, which kept callgrind_ops fire within 2% (docs/statistics.md).
class expiry_batch {
public:
  expiry_batch(tick_type now, wheel_counters& counters) noexcept : now_(now), counters_(counters) {}
  expiry_batch(const expiry_batch&) = delete;
  expiry_batch& operator=(const expiry_batch&) = delete;

  // `entry` has just left the wheel, due: its waits join the batch, the one in its storage
  // for the block `spare` holds.
  void take(timer_entry& entry, spare_block& spare) noexcept {
    count_late(entry);
    for (wait_op* op = std::exchange(entry.head_, nullptr); op != nullptr; ++size_) {
      wait_op* const next = op->next_;
      op = evict(entry, op, spare);
      op->owner_ = nullptr;
      op->ready_ = {false, false};
      unlink_cancellation(op);
      op->next_ = nullptr;
      *tail_ = op;
      tail_ = &op->next_;
      op = next;
    }
  }

  // `entry` has just left the wheel, due: its lateness is recorded (with its waits in the
  // batch, or elsewhere).
  void count_late(const timer_entry& entry) noexcept {
    ++found_;
    // Per timer, not per wait: its waits share the deadline (see wheel_statistics).
    if (entry.wanted_ != run_wanted_) {
      if (run_length_ != 0)
        counters_.late(now_ - run_wanted_, run_length_);
      run_wanted_ = entry.wanted_;
      run_length_ = 0;
    }
    ++run_length_;
  }

  // The turn is over: its statistics are recorded, and the batch handed over.
  wait_op* finish() noexcept {
    if (run_length_ != 0)
      counters_.late(now_ - run_wanted_, run_length_);
    counters_.turn(size_, found_ != 0);
    return head_;
  }

private:
  tick_type now_;
  wheel_counters& counters_;
  wait_op* head_ = nullptr;
  wait_op** tail_ = &head_;
  std::uint64_t size_ = 0;
  // Timers found due, their waits in the batch or queued behind (see timer_queue).
  std::uint64_t found_ = 0;
  tick_type run_wanted_ = 0;
  std::uint64_t run_length_ = 0;
};

// How many handlers of a batch run between two looks at io_context::stopped(): stop()
// ends a batch within that many handlers after it. Asio's stopped() takes the scheduler's
// mutex (1.22 to 1.38 alike); asked before every handler, it cost 66 instructions per
// completion on one thread, and on a context run by several threads it made every
// completion of every thread take that one mutex, the limit of their throughput (see
// docs/completion_path.md, "stop() inside a batch"). One look per 64 handlers is a lock per
// 64 completions, and a long batch (an expiry turn takes up to 4096 waits, a drain every
// wait aborted since the last) still ends soon after a stop() from another thread.
inline constexpr unsigned stop_check_interval = 64;

// Completes a batch of waits, in order, without the lock. io_context::stop(), from a handler
// of the batch or from another thread: the batch stops before its next handler whose index
// is a multiple of stop_check_interval (Asio's timer, with one scheduler operation per
// handler, stops right after the handler that called it; see README, "Batched
// completions"). What is left of the batch then, or after a handler throws (before the
// exception propagates), goes to `requeue(rest)`, which puts it back at the front of the
// ready queue and posts a drain: nothing is lost. So does a wait whose handler's executor
// threw as it was queued there (see dispatch_scope), with the rest.
// `hints`, `hinted`: the addresses of the batch's first waits, in order (none: 0).
// `until_check`: the handlers left before the next look, carried from one part of a batch to
// the next (a sweep completes several shards' waits as one batch). Returns false if it stopped
// for a stop().
template <typename Requeue>
bool complete_batch(wait_op* list, const service_home& home, Requeue&& requeue,
                    wait_op* const* hints, std::size_t hinted, unsigned& until_check) {
  struct requeue_rest {
    Requeue& requeue;
    wait_op*& rest;
    ~requeue_rest() {
      if (rest != nullptr)
        requeue(rest);
    }
  } guard{requeue, list};
  // How far ahead the hints are prefetched: enough misses in flight to hide one another.
  constexpr std::size_t ahead = 16;
  for (std::size_t i = 0; i < hinted && i < ahead; ++i)
    prefetch(hints[i]);
  // The first handler runs unasked: the batch's own handler has just been dequeued by a
  // run() that found the context running.
  std::size_t index = 0;
  for (; list != nullptr; --until_check, ++index) {
    if (index + ahead < hinted)
      prefetch(hints[index + ahead]);
    if (until_check == 0) {
      until_check = stop_check_interval;
      asio::io_context* const io = home.io_context();
      if (io != nullptr && io->stopped())
        return false;
    }
    wait_op* op = list;
    list = op->next_;
    ASIO_WHEEL_TRY {
      op->complete(true);
    }
    ASIO_WHEEL_CATCH_ALL {
      // A wait whose executor could not queue it is back, untouched: first in the rest.
      if (dispatch_scope::take_failed() == op)
        list = op;
      ASIO_WHEEL_RETHROW;
    }
  }
  return true;
}

} // namespace asio_wheel::detail

#endif // ASIO_WHEEL_DETAIL_COMPLETION_HPP
