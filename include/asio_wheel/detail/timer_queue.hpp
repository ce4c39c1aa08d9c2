//
// detail/timer_queue.hpp
// ~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_DETAIL_TIMER_QUEUE_HPP
#define ASIO_WHEEL_DETAIL_TIMER_QUEUE_HPP

// The timers of one wheel service, as Asio's timer_queue is for its timer service: the
// entries filed in the wheel, the waits pending on them, and the waits that have left them
// for completion. Plain data under the service's lock: it posts nothing and arms nothing.
// Where the alarm or a drain is concerned, a function says so through its result, and the
// service acts on it.

#include <asio_wheel/detail/block_cache.hpp>
#include <asio_wheel/detail/block_reserve.hpp>
#include <asio_wheel/detail/completion.hpp>
#include <asio_wheel/detail/exceptions.hpp>
#include <asio_wheel/detail/futex_mutex.hpp>
#include <asio_wheel/detail/saturating_time.hpp>
#include <asio_wheel/detail/timer_entry.hpp>
#include <asio_wheel/detail/wait_op.hpp>
#include <asio_wheel/detail/wheel_driver.hpp>
#include <asio_wheel/wheel_statistics.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <mutex>
#include <new>
#include <utility>

namespace asio_wheel::detail {

template <typename Clock>
class timer_queue {
public:
  // The queue of shard `shard` (see timer_entry::shard_).
  explicit timer_queue(std::uint8_t shard) noexcept : shard_(shard) {}
  timer_queue(const timer_queue&) = delete;
  timer_queue& operator=(const timer_queue&) = delete;

  wheel_driver<Clock>& driver() noexcept { return driver_; }
  const wheel_driver<Clock>& driver() const noexcept { return driver_; }
  wheel_counters& counters() noexcept { return counters_; }
  std::uint8_t shard() const noexcept { return shard_; }
  ready_queue& ready() noexcept { return ready_; }
  // Entries with pending waits: while there are none, the alarm need not be armed.
  std::size_t live() const noexcept { return live_; }

  // Links `op`, a new wait, to `entry`: it joins the waits pending there, or it is the
  // first and the entry is filed for `deadline`.
  [[gnu::always_inline]] void enqueue(timer_entry& entry, wait_op* op, tick_type deadline,
                                      bool joins) noexcept {
    append_wait(entry, op);
    if (!joins) {
      ++live_;
      file(entry, deadline);
    }
  }

  // Takes `op` off its timer and queues it for completion. The caller has posted the drain
  // and has the block `op` needs if it is in the timer's storage: nothing here throws. A
  // timer left without waits stays in the wheel (see file()). Returns true when no entry has
  // a wait left (the alarm may go).
  [[nodiscard]] bool detach(wait_op* op, bool aborted, spare_block& spare) noexcept {
    timer_entry& entry = *op->owner_;
    unlink_wait(entry, op);
    make_ready(entry, evict(entry, op, spare), aborted);
    return entry.head_ == nullptr && --live_ == 0;
  }

  // As detach(), for every wait of `entry` (it has some); returns how many.
  std::size_t detach_all(timer_entry& entry, bool aborted, spare_block& spare) noexcept {
    wait_op* op = entry.head_;
    entry.head_ = nullptr;
    std::size_t count = 0;
    while (op != nullptr) {
      wait_op* next = op->next_;
      make_ready(entry, evict(entry, op, spare), aborted);
      op = next;
      ++count;
    }
    --live_;
    return count;
  }

  // Moves the pending waits of `entry` to `deadline`, a tick not yet due.
  void refile(timer_entry& entry, tick_type deadline) noexcept {
    entry.wanted_ = deadline;
    driver_.wheel().remove(entry);
    driver_.wheel().insert(entry, deadline);
  }

  // Moves the pending waits of `from` to `to` (a timer being moved). `to` has none and is
  // not in the wheel. The same filing, the same wanted_: nothing changes for the alarm, and
  // `to` takes from's place in its slot, so that it completes among the waits of its tick
  // in the order `from` was armed (as Asio's moved timer keeps its place in the heap).
  // `drain_queued`: as for take_due.
  void move(timer_entry& to, timer_entry& from, bool drain_queued) noexcept {
    to.shard_ = from.shard_; // the waits stay in their shard, and this queue is its
    const bool waits_ready = ready_.holds_wait_of(from);
    if (waits_ready)
      to.ready_mark_ = from.ready_mark_; // see queue_behind_ready: the moved waits come after
    if (from.head_ == nullptr) {
      // A filing left behind: of no use to `to`, unless a wait of the timer may still be in
      // the ready queue, which keeps the timer in this shard (see keep_filing): `to` takes
      // it, at its tick, as the timer's own next wait would have found it.
      if (from.is_linked()) {
        if (drain_queued && waits_ready) {
          to.filed_.store(true, std::memory_order_relaxed);
          driver_.wheel().replace(from, to);
          from.filed_.store(false, std::memory_order_release); // see unfile()
        } else {
          unfile(from);
        }
      }
      return;
    }
    move_waits(to, from);
    to.filed_.store(true, std::memory_order_relaxed);
    driver_.wheel().replace(from, to);
    from.filed_.store(false, std::memory_order_release); // see unfile()
  }

  // Some entry of the wheel, or null: for shutdown, which takes them one at a time.
  timer_entry* any_entry() const noexcept {
    return static_cast<timer_entry*>(driver_.wheel().front());
  }

  // After shutdown: the waits of `entry`, to be destroyed without the lock, and the entry
  // out of the wheel.
  doomed_waits take_doomed(timer_entry& entry) noexcept {
    live_ -= entry.head_ != nullptr;
    const doomed_waits waits(entry);
    if (entry.is_linked())
      unfile(entry);
    return waits;
  }

  // After shutdown: destroys every wait, uncalled, without the lock (a handler's destructor
  // may destroy timers, which calls back in). One timer at a time, so that the wait in its
  // storage is destroyed while the timer surely exists; a timer destroyed meanwhile
  // destroys its own (see wheel_shard::release).
  void destroy_all(std::unique_lock<futex_mutex>& lock) noexcept {
    for (;;) {
      std::uint64_t count = 0;
      if (wait_op* list = ready_.take(count)) {
        lock.unlock();
        destroy_list(list);
        lock.lock();
        continue;
      }
      timer_entry* entry = any_entry();
      if (entry == nullptr)
        return;
      const doomed_waits waits = take_doomed(*entry);
      lock.unlock();
      waits.destroy(*entry);
      lock.lock();
    }
  }

  // Takes `entry` out of the wheel: the service's last write to it (see timer_entry::idle).
  // Out of line: a timer leaving (release, move, shutdown) is rare, and each inlined copy of
  // the wheel's remove() would weigh on the inlining of file() (callgrind_ops counts it).
  [[gnu::noinline]] void unfile(timer_entry& entry) noexcept {
    driver_.wheel().remove(entry);
    entry.filed_.store(false, std::memory_order_release);
  }

  // One expiry turn's take, at tick `now`: the waits of the due entries, appended to `batch`
  // in expiry order, at most the driver's budget of entries. An entry re-armed for later
  // since it was filed is filed again for wanted_; one whose waits have gone is dropped.
  // Returns false if entries are left due: the budget ran out, or (`short_of_memory`) a
  // wait in its timer's storage found no block to leave it for, and its entry went back.
  // With `drain_queued` (the drain that will take the whole ready queue is posted), the
  // waits of a timer whose earlier wait may still be in the ready queue go there, behind it
  // (see queue_behind_ready); without, nothing would complete them there, so they join the
  // batch: a mark from another context's queue (a timer moved across contexts) or from
  // 2^32 drains ago can then cost the order, never a wait.
  bool take_due(tick_type now, expiry_batch& batch, bool& short_of_memory, bool drain_queued) {
    return driver_.advance(now, [&](wheel_node& node) noexcept {
      auto& entry = static_cast<timer_entry&>(node);
      if (entry.head_ == nullptr) {
        if (!(drain_queued && ready_.holds_wait_of(entry) && keep_filing(entry, now)))
          entry.filed_.store(false, std::memory_order_release); // left behind: dropped
        return true;
      }
      if (entry.wanted_ > now) {
        ++counters_.refiles;
        driver_.wheel().insert(entry, entry.wanted_);
        return true;
      }
      void* block = nullptr;
      if (entry.inline_busy_.load(std::memory_order_relaxed)) {
        ASIO_WHEEL_TRY {
          block = block_cache::allocate(inline_op_size);
        }
        ASIO_WHEEL_CATCH_ALL {
          short_of_memory = true;
          return false;
        }
      }
      spare_block spare(std::in_place, block);
      --live_;
      if (drain_queued && ready_.holds_wait_of(entry)) {
        behind_ready(entry, spare, batch, now);
        return true;
      }
      batch.take(entry, spare);
      entry.filed_.store(false, std::memory_order_release); // the turn is done with it
      return true;
    });
  }

  // A consistent snapshot, under the lock (see wheel_statistics).
  void snapshot(wheel_statistics& s, bool count_levels) const {
    s.tick = std::chrono::duration_cast<std::chrono::nanoseconds>(driver_.scale().tick());
    s.timers_pending = live_;
    for (unsigned level = 0; count_levels && level < wheel_statistics::levels; ++level)
      s.timers_per_level[level] = driver_.wheel().level_size(level);
    if (live_ != 0) {
      // Armed: the alarm. Not armed with waits pending, the driver is on its way: a turn is
      // queued (a continuation, or on a virtual clock a wait due when it started) or the
      // alarm is being re-armed earlier; it wakes for the wheel's next expiry (zero if
      // overdue), never later.
      const auto now = Clock::now();
      if (driver_.armed())
        s.next_expiry = saturating_ns_until(now, driver_.alarm_time());
      else if (const auto next = driver_.wheel().next_expiry())
        s.next_expiry = saturating_ns_until(now, driver_.scale().time_of(*next));
      else
        s.next_expiry = std::chrono::nanoseconds::zero();
    }
    counters_.snapshot(s);
  }

private:
  // Files `entry`, which has just gained its first wait, for `deadline`. An entry still in
  // the wheel from an earlier wait, at a tick no later than `deadline`, stays where it is:
  // moving it would write its two neighbours, cold in a large wheel, and a server re-arms
  // a timer for later on every request. When that tick comes, take_due() files the entry
  // again for wanted_ (or drops it, if its waits have gone), once however many re-arms
  // happened in between (lazy re-arm).
  // Out of line, as GCC chose before it was pinned: the start of a wait is measured with
  // it so (docs/completion_path.md).
  [[gnu::noinline]] void file(timer_entry& entry, tick_type deadline) noexcept {
    entry.wanted_ = deadline;
    if (entry.is_linked()) {
      if (entry.deadline() <= deadline)
        return;
      driver_.wheel().remove(entry);
    }
    entry.filed_.store(true, std::memory_order_relaxed);
    entry.shard_ = shard_;
    driver_.wheel().insert(entry, deadline);
  }

  // Queues `op`, which has left its timer, for the drain that the caller has posted (or
  // for destruction, after shutdown).
  void make_ready(timer_entry& from, wait_op* op, bool aborted) noexcept {
    ++counters_.decided[aborted];
    unlink_cancellation(op);
    ready_.push(from, op, aborted);
  }

  // `entry` is due, but a wait of it decided before (aborted, say) may still be in the ready
  // queue: its waits join that queue behind it, for the drain already posted. In the turn's
  // batch they would complete first, where Asio completes a timer's aborted wait before any
  // later wait of the timer (it posts the aborted one at once). Only such a timer's waits
  // take this path: the others of the turn keep their place ahead of the drain, as in Asio.
  void queue_behind_ready(timer_entry& entry, spare_block& spare) noexcept {
    for (wait_op* op = std::exchange(entry.head_, nullptr); op != nullptr;) {
      wait_op* const next = op->next_;
      make_ready(entry, evict(entry, op, spare), false);
      op = next;
    }
  }

  // A due entry with a wait that may still be in the ready queue: its waits go behind it,
  // and the entry keeps a filing, as one left behind. Out of line: rare, and inlined it
  // would push take_due's visitor out of line, a call per expiry (callgrind_ops fire: +6%).
  [[gnu::noinline]] void behind_ready(timer_entry& entry, spare_block& spare, expiry_batch& batch,
                                      tick_type now) noexcept {
    batch.count_late(entry);
    queue_behind_ready(entry, spare);
    if (!keep_filing(entry, now))
      entry.filed_.store(false, std::memory_order_release);
  }

  // An entry without waits that a turn reaches while a wait of it may still be in the ready
  // queue stays filed, one tick on, instead of leaving the wheel: a timer whose entry is
  // filed waits in this shard, so its next wait, from whatever thread, is queued behind that
  // one if aborted too. Out of the wheel, the timer would wait in the next caller's shard,
  // whose drain (or the sweep's part) may come first (a timer used from two threads on a
  // context run by one), where Asio completes a timer's aborted wait before any later wait
  // of the timer. Kept one tick at a time until the drain has taken the queue; a wait that
  // joins it meanwhile is filed again for its deadline when the tick comes (lazy re-arm).
  // Out of line: rare, and inlined it would weigh on every expiry's path (callgrind_ops).
  // False at the last tick there is, which has no next (the entry then leaves).
  [[gnu::noinline]] bool keep_filing(timer_entry& entry, tick_type now) noexcept {
    if (now == (std::numeric_limits<tick_type>::max)())
      return false;
    driver_.wheel().insert(entry, now + 1);
    return true;
  }

  // The wheel of timer entries, its clock, and the state of the alarm. First, with the
  // wheel first in it: file()'s tail calls into the wheel (timing_wheel::link()) then need
  // no pointer of their own, and GCC had kept one in a register on every wait's path
  // (callgrind_ops arm, 2 instructions).
  wheel_driver<Clock> driver_;
  // Statistics (see wheel_statistics): totals only ever grow.
  wheel_counters counters_;
  // Entries with pending waits (all of them in the wheel). The alarm is armed only while
  // there are some: entries left behind without waits do not keep run() going.
  std::size_t live_ = 0;
  // The shard whose queue this is: written into each entry it files.
  const std::uint8_t shard_;
  // Last: its prefetch hints take 2 KiB.
  ready_queue ready_;
};

} // namespace asio_wheel::detail

#endif // ASIO_WHEEL_DETAIL_TIMER_QUEUE_HPP
