//
// detail/thread_shard.hpp
// ~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_DETAIL_THREAD_SHARD_HPP
#define ASIO_WHEEL_DETAIL_THREAD_SHARD_HPP

#include <asio_wheel/detail/min_max.hpp>

#include <atomic>
#include <cstdint>
#include <thread>

// The most shards a context's wheel is cut into (a power of two, 1 to 128): the number of
// hardware threads, rounded up to a power of two, up to this. 1 gives one lock and one alarm
// per context, as before shards. The same in every translation unit of a program.
#ifndef ASIO_WHEEL_MAX_SHARDS
#define ASIO_WHEEL_MAX_SHARDS 64
#endif

namespace asio_wheel::detail {

inline constexpr unsigned max_shards = ASIO_WHEEL_MAX_SHARDS;
static_assert(max_shards >= 1 && max_shards <= 128 && (max_shards & (max_shards - 1)) == 0,
              "asio_wheel: ASIO_WHEEL_MAX_SHARDS must be a power of two from 1 to 128");

// A thread's shard before its first wait: one past the last, whose slot in a service stays
// empty, so that the service's test for a shard not yet made also catches it.
inline constexpr std::uint8_t no_shard = static_cast<std::uint8_t>(max_shards);

// ASIO_WHEEL_SHARDS, if defined, fixes the number of shards instead (a power of two, at most
// ASIO_WHEEL_MAX_SHARDS): for a program whose threads are not the machine's, and for tests.
#ifdef ASIO_WHEEL_SHARDS
static_assert(ASIO_WHEEL_SHARDS >= 1 && ASIO_WHEEL_SHARDS <= max_shards &&
                  (ASIO_WHEEL_SHARDS & (ASIO_WHEEL_SHARDS - 1)) == 0,
              "asio_wheel: ASIO_WHEEL_SHARDS must be a power of two from 1 to "
              "ASIO_WHEEL_MAX_SHARDS");
#endif

// The shards of a wheel service of a real clock: the hardware threads rounded up to a power
// of two, at most max_shards (1 where the number is unknown: no thread pool to spread), or
// ASIO_WHEEL_SHARDS.
inline unsigned shard_count() noexcept {
#ifdef ASIO_WHEEL_SHARDS
  return ASIO_WHEEL_SHARDS;
#else
  static const unsigned count = [] {
    const unsigned threads = detail::max_of(1u, std::thread::hardware_concurrency());
    unsigned n = 1;
    while (n < threads && n < max_shards)
      n *= 2;
    return n;
  }();
  return count;
#endif
}

// The threads that made timers or started waits, numbered in the order they first did, from
// 0.
// Process-wide, so that every service maps a thread to the same shard; written once per
// thread.
inline std::atomic<unsigned> thread_ordinals{0};

// This thread's shard in every wheel service of a real clock: its ordinal modulo the
// number of shards, so that the threads of a pool that start waiting together get a shard
// each, up to the number of shards, and share them beyond. no_shard until its first wait or
// its first timer.
// Constant-initialized, so that each wait reads it directly, without a thread-local
// initialization call.
inline thread_local std::uint8_t this_thread_shard = no_shard;

// This thread's first wait, or its first timer: its shard, from now on.
[[gnu::cold, gnu::noinline]] inline unsigned take_thread_shard() noexcept {
  const unsigned ordinal = thread_ordinals.fetch_add(1, std::memory_order_relaxed);
  this_thread_shard = static_cast<std::uint8_t>(ordinal & (shard_count() - 1));
  return this_thread_shard;
}

// This thread's shard, taken now if it has none: the one a timer made on this thread
// starts with (see timer_entry::shard_).
inline std::uint8_t thread_shard_now() noexcept {
  const std::uint8_t shard = this_thread_shard;
  return shard != no_shard ? shard : static_cast<std::uint8_t>(take_thread_shard());
}

} // namespace asio_wheel::detail

#endif // ASIO_WHEEL_DETAIL_THREAD_SHARD_HPP
