//
// detail/futex_mutex.hpp
// ~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_DETAIL_FUTEX_MUTEX_HPP
#define ASIO_WHEEL_DETAIL_FUTEX_MUTEX_HPP

#include <atomic>

namespace asio_wheel::detail {

// The wheel's lock: taken twice per heartbeat reset, almost always uncontended, held for a
// few dozen instructions. An uncontended lock() and unlock() is one compare-exchange and one
// exchange, against about 75 instructions for glibc's pthread_mutex; a contended one sleeps
// through std::atomic::wait (a futex on Linux) instead of spinning.
// The algorithm is "Mutex, take 2" of U. Drepper, "Futexes Are Tricky" (2011).
class futex_mutex {
public:
  futex_mutex() noexcept = default;
  futex_mutex(const futex_mutex&) = delete;
  futex_mutex& operator=(const futex_mutex&) = delete;

  void lock() noexcept {
    int expected = unlocked;
    if (state_.compare_exchange_strong(expected, locked, std::memory_order_acquire,
                                       std::memory_order_relaxed))
      return;
    // Announce a waiter before sleeping, so that unlock() knows to wake someone.
    while (state_.exchange(contended, std::memory_order_acquire) != unlocked)
      state_.wait(contended, std::memory_order_relaxed);
  }

  void unlock() noexcept {
    if (state_.exchange(unlocked, std::memory_order_release) == contended)
      state_.notify_one();
  }

private:
  static constexpr int unlocked = 0;
  static constexpr int locked = 1;    // no waiter
  static constexpr int contended = 2; // maybe waiters
  std::atomic<int> state_{unlocked};
};

} // namespace asio_wheel::detail

#endif // ASIO_WHEEL_DETAIL_FUTEX_MUTEX_HPP
