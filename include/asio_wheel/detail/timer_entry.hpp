//
// detail/timer_entry.hpp
// ~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_DETAIL_TIMER_ENTRY_HPP
#define ASIO_WHEEL_DETAIL_TIMER_ENTRY_HPP

// A timer's pending waits: the wheel entry embedded in each timer object, its FIFO of waits
// and its room for one wait, and the moves of a wait between them. Everything here runs
// under the service's lock unless it says otherwise, and touches neither the wheel nor the
// service's counters: the service does that around these calls.

#include <asio_wheel/detail/block_reserve.hpp>
#include <asio_wheel/detail/thread_shard.hpp>
#include <asio_wheel/detail/timing_wheel.hpp>
#include <asio_wheel/detail/wait_op.hpp>

#include <atomic>
#include <cassert>
#include <cstdint>
#include <functional>
#include <utility>

namespace asio_wheel::detail {

// The wheel state of one timer object; embedded in it, written only by the service.
struct timer_entry : wheel_node {
  timer_entry() = default;
  timer_entry(const timer_entry&) = delete;
  timer_entry& operator=(const timer_entry&) = delete;

  // Whether the service may still touch the entry: true while it is in the wheel (with
  // waits, or left behind without: lazy re-arm). Written under the service's lock by the one
  // that files and unfiles the entry: set when it is filed; cleared, with release, as the
  // service's last write to it when it leaves the wheel. Read without the lock by the timer
  // object (see idle()). Declared first so that it fits in wheel_node's tail padding.
  std::atomic<bool> filed_{false};
  // True while a pending wait lives in inline_ (at most one does). Set by the service when
  // it starts a wait there, on the timer's owner thread; cleared, with release, when that
  // wait leaves the timer. Atomic because the owner reads it without the lock, to choose
  // where its next wait goes; declared here to share wheel_node's tail padding as well.
  std::atomic<bool> inline_busy_{false};
  // The shard of the service (see wheel_shard) whose wheel holds the entry, or held it
  // last: while filed_, every change to the entry and its waits is made under that shard's
  // lock. Written under that lock when a wait files the entry; it changes only while the
  // entry is idle, by the owner's next wait (which files it in the owner's thread's shard),
  // so the owner reads it without a lock; the owner also copies it when it takes an idle
  // timer's state (a move). Until the first filing, the shard of the thread that made the
  // entry, so that a first wait on that thread costs no more than a later one
  // (wheel_service::shard_for_wait). In wheel_node's tail padding too.
  std::uint8_t shard_ = thread_shard_now();
  // The ready queue's epoch when a wait of this timer last joined it (see
  // ready_queue::holds_wait_of): while it is current, a wait of the timer that a turn finds
  // due queues behind it rather than completing first. Under the shard's lock; in
  // wheel_node's tail padding too (16 bits: shard_ takes a byte of the 32 it had).
  std::uint16_t ready_mark_ = 0;
  // Pending waits, oldest first, linked through wait_op::next_ (null-terminated) and
  // wait_op::prev_ (circular: head_->prev_ is the newest, so no tail pointer is needed in
  // every timer). An entry with waits is in the wheel; one without may still be.
  wait_op* head_ = nullptr;
  // While waits are pending: their deadline. The wheel may hold the entry at an earlier
  // tick, where it was filed for an earlier wait; it is filed again for wanted_ then.
  tick_type wanted_ = 0;
  // Storage for one wait, so that a timer with one small wait allocates nothing and keeps
  // it in its own cache lines. A wait leaves it when it completes (for a block of its own:
  // the timer may go before the handler runs) or when the timer moves (for the new timer's).
  alignas(void*) unsigned char inline_[inline_op_size];

  // Without the lock, by the timer object: true guarantees that no wait is pending and that
  // the service is done with the entry (the acquire pairs with the service's last write), so
  // that cancel(), cancel_one(), expires_at() and the destructor of an idle timer skip the
  // service. A stale false is impossible (only the owner's own calls file the entry); a
  // stale true only costs a trip to the service, which finds nothing.
  bool idle() const noexcept { return !filed_.load(std::memory_order_acquire); }

  bool holds(const wait_op* op) const noexcept {
    const void* p = op;
    return !std::less<const void*>()(p, inline_) &&
           std::less<const void*>()(p, inline_ + sizeof inline_);
  }
};

// The wait leaves its timer: cut its link to the slot handler (see cancellation_target).
inline void unlink_cancellation(wait_op* op) noexcept {
  if (op->cancellation_ != nullptr) {
    op->cancellation_->op_.store(nullptr, std::memory_order_release);
    op->cancellation_ = nullptr;
  }
}

inline void append_wait(timer_entry& entry, wait_op* op) noexcept {
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

// Takes `op` out of its timer's list (it stays wherever it is stored: see evict()).
inline void unlink_wait(timer_entry& entry, wait_op* op) noexcept {
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
}

// `op`, already unlinked from its timer, leaves the timer's inline storage if it is there
// (for the block `spare` holds): the timer may be destroyed, moved or waited on again before
// the handler runs, so the ready queue and the batches never point into a timer object.
inline wait_op* evict(timer_entry& entry, wait_op* op, spare_block& spare) noexcept {
  if (!entry.holds(op))
    return op;
  wait_op* moved = op->relocate(spare.take());
  entry.inline_busy_.store(false, std::memory_order_release);
  return moved;
}

// The timer owning `from` is being moved to the one owning `to`, whose inline storage is
// free: the pending wait in from's storage moves to to's, and its neighbours follow it.
inline void move_inline(timer_entry& to, timer_entry& from) noexcept {
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

// The pending waits of `from` (there are some) become those of `to` (which has none), with
// their deadline: the timer object owning `from` is being moved.
inline void move_waits(timer_entry& to, timer_entry& from) noexcept {
  to.head_ = std::exchange(from.head_, nullptr);
  if (from.inline_busy_.load(std::memory_order_relaxed))
    move_inline(to, from);
  for (wait_op* op = to.head_; op != nullptr; op = op->next_)
    op->owner_ = &to;
  to.wanted_ = from.wanted_;
}

// Without the lock: destroys a wait that never started, without calling its handler (whose
// destructor may call back into the service).
inline void discard(timer_entry& entry, wait_op* op) noexcept {
  if (entry.holds(op)) {
    op->destroy_inline(entry.inline_busy_);
  } else {
    op->ready_ = {false, false}; // over prev_: complete() reads it
    op->complete(false);
  }
}

// Without the lock: destroys the handlers of a list of waits outside any timer.
inline void destroy_list(wait_op* list) noexcept {
  while (list != nullptr) {
    wait_op* op = list;
    list = op->next_;
    op->complete(false);
  }
}

// The waits of a timer, taken to be destroyed after shutdown: the one in its storage stays
// there (nothing to allocate), the others are listed.
struct doomed_waits {
  wait_op* in_timer = nullptr;
  wait_op* others = nullptr;

  explicit doomed_waits(timer_entry& entry) noexcept {
    wait_op* op = std::exchange(entry.head_, nullptr);
    while (op != nullptr) {
      wait_op* const next = op->next_;
      unlink_cancellation(op);
      op->owner_ = nullptr;
      op->ready_ = {false, false}; // over prev_: complete() reads it
      if (entry.holds(op)) {
        in_timer = op;
      } else {
        op->next_ = others;
        others = op;
      }
      op = next;
    }
  }

  // Without the lock. The wait in the timer first, while the timer surely exists: another
  // handler's destructor may destroy it.
  void destroy(timer_entry& entry) const noexcept {
    if (in_timer != nullptr)
      in_timer->destroy_inline(entry.inline_busy_);
    destroy_list(others);
  }
};

} // namespace asio_wheel::detail

#endif // ASIO_WHEEL_DETAIL_TIMER_ENTRY_HPP
