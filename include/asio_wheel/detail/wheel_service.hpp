//
// detail/wheel_service.hpp
// ~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_DETAIL_WHEEL_SERVICE_HPP
#define ASIO_WHEEL_DETAIL_WHEEL_SERVICE_HPP

// The Asio service that every wheel_timer of one execution context and clock shares, as
// Asio's deadline_timer_service is for its timers (docs/design.md has the layout and the
// threading model). It holds the context's wheel as shards (wheel_shard): one per thread
// that starts waits, up to a bound, each with its own lock, wheel, alarm, turns and drains,
// so that the threads running one io_context neither share a lock nor wait for one turn
// (Linux keeps a timer base per CPU, tokio a wheel per worker, Envoy a timer set per
// dispatcher). A wait is filed in the shard of the thread that starts it, unless its timer
// is still filed in a shard, where it joins it: a timer's waits live in one shard while any
// is pending. The service itself only chooses the shard (a thread-local read, nothing shared
// written), makes shards on demand, and holds what the context shares: the home that the
// shards' handlers run on, the tick, and the timers' shared executor.

#include <asio_wheel/detail/drain_sweep.hpp>
#include <asio_wheel/detail/futex_mutex.hpp>
#include <asio_wheel/detail/handler_executor.hpp>
#include <asio_wheel/detail/io_executor_holder.hpp>
#include <asio_wheel/detail/thread_shard.hpp>
#include <asio_wheel/detail/timer_entry.hpp>
#include <asio_wheel/detail/wheel_driver.hpp>
#include <asio_wheel/detail/wheel_shard.hpp>
#include <asio_wheel/virtual_clock.hpp>
#include <asio_wheel/wheel_statistics.hpp>

#include <asio_wheel/detail/asio_forward.hpp>
#include <asio_wheel/detail/exceptions.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <type_traits>
#include <utility>

namespace asio_wheel::detail {

template <typename Clock, typename WaitTraits>
class wheel_service : public asio::execution_context::service, private drain_sweep {
public:
  using clock_type = Clock;
  using duration = typename Clock::duration;
  using time_point = typename Clock::time_point;
  using shard_type = wheel_shard<Clock, WaitTraits>;

  static_assert(std::is_integral_v<typename duration::rep> && sizeof(typename duration::rep) <= 8,
                "asio_wheel: the clock's duration must have an integral representation of at "
                "most 64 bits (libc++'s std::chrono::file_clock has a 128-bit one)");

  inline static asio::execution_context::id id;

  explicit wheel_service(asio::execution_context& context)
      : asio::execution_context::service(context), home_(context) {}

  wheel_service(const wheel_service&) = delete;
  wheel_service& operator=(const wheel_service&) = delete;

  ~wheel_service() override {
    for (auto& slot : shards_)
      delete slot.load(std::memory_order_relaxed);
    // Last: a handler destroyed with a shard may still destroy a timer of this service.
    alive_ = 0;
  }

  // False once the service has gone with its execution context, as long as its memory has
  // not been reused: for the debug-build check of a timer used after its context.
  bool alive() const noexcept { return alive_ == alive_mark; }

  duration tick() const {
    std::lock_guard lock(mutex_);
    return tick_;
  }

  // Every shard's lock held at once, so that no first wait slips in between the check and
  // the change: the service's lock first (shards are made under it), then the shards' in
  // order of index.
  void set_tick(duration tick) {
    std::lock_guard lock(mutex_);
    for_each_shard([](shard_type& s) { s.mutex().lock(); });
    bool fixed = false;
    for_each_shard([&](shard_type& s) { fixed = fixed || s.tick_fixed(); });
    ASIO_WHEEL_TRY {
      wheel_driver<Clock>::check_tick(tick, tick_, fixed);
      for_each_shard([&](shard_type& s) { s.set_tick(tick); }); // empty wheels: no throw
      tick_ = tick;
    }
    ASIO_WHEEL_CATCH_ALL {
      for_each_shard([](shard_type& s) { s.mutex().unlock(); });
      ASIO_WHEEL_RETHROW;
    }
    for_each_shard([](shard_type& s) { s.mutex().unlock(); });
  }

  // See io_executor_holder: the timers made from the context's plain executor share it.
  const shared_context_executor& own_executor(asio::io_context& io) {
    return own_executor_.get(io);
  }

  // The executor the shards' own handlers run on (service_home), found from `ex` (an
  // executor of this context) if no wait found it yet; it never changes after. For the
  // library's other context-wide handlers (detail/scaled_queue.hpp), which must not keep
  // the work or the strand of the first timer that needed them.
  template <typename Executor>
  const asio::any_io_executor& home_executor(const Executor& ex) {
    home_.find(ex, ex);
    return home_.executor();
  }

  // Starts a wait on `entry` for `expiry`. Strong guarantee: if it throws, nothing changed.
  template <typename Handler, typename IoExecutor>
  void async_wait(timer_entry& entry, const time_point& expiry, Handler&& handler,
                  const IoExecutor& io_ex) {
    shard_for_wait(entry).async_wait(entry, expiry, std::forward<Handler>(handler), io_ex, home_);
  }

  // The requests on a timer that is not idle (the timer object skips the service for an
  // idle one): they go to the shard that holds its entry. See wheel_shard for each.
  std::size_t cancel(timer_entry& entry) { return shard_of(entry).cancel(entry); }
  std::size_t cancel_one(timer_entry& entry) { return shard_of(entry).cancel_one(entry); }
  void release(timer_entry& entry, bool from_destructor, bool keep_shard) {
    shard_of(entry).release(entry, from_destructor, keep_shard);
  }
  void retarget(timer_entry& entry, const time_point& expiry) {
    shard_of(entry).retarget(entry, expiry);
  }
  // `to` is idle: it takes the shard of `from` with its waits.
  void move_entry(timer_entry& to, timer_entry& from) { shard_of(from).move_entry(to, from); }
  // An idle timer (`to`) takes an idle one's state (a move): it waits next where `from`
  // would have (see other_thread_shard), unless, assigned (`fresh` false), its own last
  // shard holds a wait that may be its own; where both shards do, it keeps its own (README,
  // "Order around aborted waits").
  void take_last_shard(timer_entry& to, const timer_entry& from, bool fresh) const noexcept {
    if (fresh || !last_shard_holds(to))
      to.shard_ = from.shard_;
  }

  // A snapshot summed over the shards, each consistent in itself (see wheel_statistics),
  // from any thread.
  wheel_statistics statistics(bool count_levels) const;

  // Virtual clock only (see virtual_time), which has one shard: the time its alarm would be
  // armed for, empty when nothing is pending.
  // A member template, so that an explicit instantiation of the class for another clock
  // (ASIO_WHEEL_SEPARATE_COMPILATION) does not instantiate it.
  template <typename C = Clock>
  std::optional<time_point> virtual_next() const;

  // Virtual clock only: the alarm's wake-up, posted to the context (the caller polls it).
  // Returns false if nothing was armed.
  template <typename C = Clock>
  bool virtual_fire();

private:
  void shutdown() override;

  // The shard a new wait on `entry` goes to: the entry's while it is filed (idle() is false),
  // else this thread's (see thread_shard.hpp), unless another (see other_thread_shard); a virtual
  // clock's service has one shard, as virtual_time drives one alarm. A thread's first wait,
  // or the first in its shard, takes the slow path: the slot of no_shard stays empty. Inline,
  // one comparison: a timer used on one thread has its shard_ there, filed or idle (a new
  // one's is the thread's that made it); only a timer used from several threads asks more.
  // A call in builds for tests (see ASIO_WHEEL_INLINE_PER_WAIT), not a copy per handler type.
  ASIO_WHEEL_INLINE_PER_WAIT shard_type& shard_for_wait(const timer_entry& entry) {
    unsigned index = 0;
    if constexpr (!is_virtual_clock<Clock>::value) {
      index = entry.shard_;
      if (index != this_thread_shard)
        index = other_thread_shard(entry);
    }
    shard_type* const s = shards_[index].load(std::memory_order_acquire);
    return s != nullptr ? *s : make_shard(index);
  }

  // A timer last filed in another shard than this thread's: that shard while the timer is
  // filed there; idle, this thread's, unless that shard holds waits it took and has not
  // completed (see batch_state), among which may be the timer's expiry or aborted wait: its
  // next wait, if aborted, must complete after it, which from this thread's shard, whose
  // drain might come first, it could not. Out of line: only a timer used from several
  // threads gets here.
  [[gnu::noinline]] unsigned other_thread_shard(const timer_entry& entry) const noexcept {
    if (!entry.idle())
      return entry.shard_;
    return last_shard_holds(entry) ? entry.shard_ : this_thread_shard;
  }

  // Whether the shard an idle `entry` was last filed in holds waits it took and has not
  // completed (see batch_state), among which may be a wait of the entry's timer.
  bool last_shard_holds(const timer_entry& entry) const noexcept {
    const shard_type* const last = shards_[entry.shard_].load(std::memory_order_acquire);
    return last != nullptr && last->holds_taken_waits();
  }

  // The shard that holds `entry`, which is not idle: it was made before the entry was filed.
  shard_type& shard_of(const timer_entry& entry) noexcept {
    return *shards_[entry.shard_].load(std::memory_order_acquire);
  }

  // Calls f(shard) for each shard made so far, in order of index.
  template <typename F>
  void for_each_shard(F&& f) const {
    for (const auto& slot : shards_)
      if (shard_type* s = slot.load(std::memory_order_acquire))
        f(*s);
  }

  // The first wait of a thread (`index` is no_shard), or the first in its shard: the shard,
  // made if need be. Strong guarantee.
  [[gnu::cold, gnu::noinline]] shard_type& make_shard(unsigned index);

  // Whether this service's shards may come to share one drain (drain_sweep.hpp).
  static bool may_sweep() noexcept {
    return !is_virtual_clock<Clock>::value && sweep_from_shards != 0 &&
           shard_count() >= sweep_from_shards;
  }

  // drain_sweep: with shard `index`'s lock held.
  bool enroll(unsigned index) override {
    if (!sweeping_.load(std::memory_order_relaxed) || !runners_.many())
      return false;
    pending_.set(index);
    if (sweep_queued_.claim())
      post_sweep();
    return true;
  }

  void ran_here() noexcept override { runners_.ran_here(); }

  void post_sweep() {
    home_.post(make_own_handler<wheel_service, &wheel_service::sweep>(this, sweep_memory_));
  }

  // The sweep: takes the ready queues of the pending shards, in order of index, until it has
  // a batch's worth (batch_hints::capacity waits) or none is left, and completes them as one
  // batch, each shard's waits in their order. A sweep is queued for the shards left.
  void sweep();

  // alive_mark from construction until the end of the destructor (see alive()).
  static constexpr std::uint32_t alive_mark = 0x57686c53; // "Whl" "S"
  std::uint32_t alive_ = alive_mark;
  // Guards the making of shards, tick_ and shut_down_; taken before any shard's lock.
  mutable futex_mutex mutex_;
  // Where every shard's handlers run. Declared before the shards, which refer to it.
  service_home home_;
  // The tick of every shard's wheel: the default, or set_tick()'s.
  duration tick_ = wheel_driver<Clock>::default_tick();
  // Set by shutdown(): a shard made after it starts nothing.
  bool shut_down_ = false;
  // Made on demand (the first wait in each), published with release and never removed until
  // the service goes: a thread that reads a non-null pointer may use it without the lock.
  // The slots from shard_count() on, no_shard's last, stay null.
  std::atomic<shard_type*> shards_[max_shards + 1] = {};
  // Not guarded by mutex_.
  shared_context_executor_once own_executor_;
  // Shards made so far; guarded by mutex_.
  unsigned shards_made_ = 0;
  // Set once shards_made_ reaches sweep_from_shards, when may_sweep(); never cleared. A shard
  // that reads it late posts a drain of its own once more: either way its queue is taken.
  std::atomic<bool> sweeping_{false};
  // The sweep's: written by every shard's first abort after a sweep took it, hence on lines
  // of their own. Not guarded by any lock.
  alignas(64) pending_shards pending_;
  alignas(64) runner_census runners_;
  alignas(64) sweep_flag sweep_queued_;
  // Room for the queued sweep's operation (at most one is queued: sweep_queued_).
  own_memory sweep_memory_;
};

} // namespace asio_wheel::detail

#include <asio_wheel/detail/impl/wheel_service.hpp>
#include <asio_wheel/detail/separate_compilation.hpp>

#endif // ASIO_WHEEL_DETAIL_WHEEL_SERVICE_HPP
