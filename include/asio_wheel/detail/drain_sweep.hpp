//
// detail/drain_sweep.hpp
// ~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_DETAIL_DRAIN_SWEEP_HPP
#define ASIO_WHEEL_DETAIL_DRAIN_SWEEP_HPP

// One drain for the shards of a context, when it has many: the sweep. Every aborted wait
// completes from a handler on the context, and on an io_context run by many threads each
// shard's own drain, posted at its first abort, is taken at once by an idle thread and finds
// few waits (40 per drain at 16 threads, against 256 on a context of its own): the context's
// scheduler, whose one lock every handler takes, then runs a drain per 40 aborts and is the
// limit (benchmarks/results/threads.md). With the sweep, a shard with aborted waits marks
// itself pending and the first shard to do so posts the one sweep, which takes the ready
// queues of the pending shards, up to a batch's worth, before it completes any: a scheduler
// handler per batch, whichever shards its waits come from. With few shards it costs (one
// thread then completes the others' aborts, 0.75x on 2 cores), so a context sweeps only once
// ASIO_WHEEL_SWEEP_FROM_SHARDS shards are in use (threads that started waits on it), and only
// on an io_context whose shards' handlers have run on more than one thread. That last
// condition keeps an order promise of a context run by one thread (README, "Order around
// aborted waits"): a wait aborted after an expiry turn was queued may join a sweep queued
// before that turn, and complete first; where several threads run the context, their
// handlers have no order to keep but a strand's, which the README qualifies. (A timer's own
// waits keep their order either way: a timer stays in its shard while a wait of it is in
// that shard's ready queue, timer_queue::keep_filing.)

#include <asio_wheel/detail/bit_ops.hpp>
#include <asio_wheel/detail/thread_shard.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>

// The number of shards in use (see thread_shard.hpp) from which a context's shards share one
// drain, the sweep; 0: never. The same in every translation unit of a program.
#ifndef ASIO_WHEEL_SWEEP_FROM_SHARDS
#define ASIO_WHEEL_SWEEP_FROM_SHARDS 8
#endif

namespace asio_wheel::detail {

inline constexpr unsigned sweep_from_shards = ASIO_WHEEL_SWEEP_FROM_SHARDS;

// What a shard asks of its service's sweep.
class drain_sweep {
public:
  // Shard `index` has aborted waits and no drain queued: if the context sweeps by now (it
  // has ASIO_WHEEL_SWEEP_FROM_SHARDS shards), the shard is pending, a sweep is queued unless
  // one is, and true is returned; else the shard posts its own drain. Called with the shard's
  // lock held, on an io_context (whose post does not throw).
  virtual bool enroll(unsigned index) = 0;

  // A handler of a shard runs on this thread. Without any lock.
  virtual void ran_here() noexcept = 0;

protected:
  ~drain_sweep() = default;
};

// The shards that are pending: one bit each. Set by a shard's enroll, cleared by the one
// sweep that takes it (a sweep posted while another runs may take the rest).
class pending_shards {
public:
  void set(unsigned index) noexcept {
    // seq_cst, as sweep_flag's: see sweep_flag::start.
    words_[index / 64].fetch_or(bit(index), std::memory_order_seq_cst);
  }

  // Clears the bit of `index` if set; true if this call cleared it.
  bool take(unsigned index) noexcept {
    return (words_[index / 64].fetch_and(~bit(index), std::memory_order_acq_rel) & bit(index)) != 0;
  }

  // Calls f(index) for each bit set, in order of index, until f returns false.
  template <typename F>
  void for_each(F&& f) const {
    for (unsigned w = 0; w < word_count; ++w) {
      std::uint64_t word = words_[w].load(std::memory_order_seq_cst);
      while (word != 0) {
        const unsigned i = w * 64 + static_cast<unsigned>(countr_zero(word));
        word &= word - 1;
        if (!f(i))
          return;
      }
    }
  }

  bool any() const noexcept {
    for (const auto& word : words_)
      if (word.load(std::memory_order_seq_cst) != 0)
        return true;
    return false;
  }

private:
  static constexpr unsigned word_count = (max_shards + 63) / 64;
  static constexpr std::uint64_t bit(unsigned index) noexcept {
    return std::uint64_t{1} << (index % 64);
  }
  std::atomic<std::uint64_t> words_[word_count] = {};
};

// Whether the context's handlers have run on more than one thread: the first thread seen, and
// a flag set for good when another shows up.
class runner_census {
public:
  void ran_here() noexcept {
    if (many_.load(std::memory_order_relaxed))
      return;
    const unsigned me = this_thread();
    unsigned first = 0;
    if (!first_.compare_exchange_strong(first, me, std::memory_order_relaxed) && first != me)
      many_.store(true, std::memory_order_relaxed);
  }

  bool many() const noexcept { return many_.load(std::memory_order_relaxed); }

private:
  // A number of this thread's own, from 1, never reused while it fits (a thread's address or
  // id may be, once the thread has ended): two threads taken for one only delay the sweep.
  static unsigned this_thread() noexcept {
    static std::atomic<unsigned> next{0};
    thread_local const unsigned id = next.fetch_add(1, std::memory_order_relaxed) + 1;
    return id;
  }
  std::atomic<unsigned> first_{0};
  std::atomic<bool> many_{false};
};

// Whether a sweep is queued: at most one is (its operation lives in the service's own
// memory). True from the post until the sweep starts.
class sweep_flag {
public:
  // Before posting: true if this call must post (none was queued).
  bool claim() noexcept { return !queued_.exchange(true, std::memory_order_seq_cst); }

  // The sweep has started, and reads the pending shards next. seq_cst with pending_shards:
  // an enroll whose claim() found a sweep queued set its bit before that claim, which came
  // before this store (it read the value this store replaces): the read after this store
  // sees the bit. An enroll after this store claims, and posts another sweep.
  void start() noexcept { queued_.store(false, std::memory_order_seq_cst); }

private:
  std::atomic<bool> queued_{false};
};

} // namespace asio_wheel::detail

#endif // ASIO_WHEEL_DETAIL_DRAIN_SWEEP_HPP
