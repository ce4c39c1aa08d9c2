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
#include <cstdio>
#include <cstdlib>
#if __has_include(<version>)
#include <version>
#endif

// How a contended lock() sleeps: on Linux the futex system call on the lock's word, whatever
// the C++ version; elsewhere std::atomic::wait (C++20), else a std::mutex and
// std::condition_variable pair taken only by waiters. Never a spin or yield loop.
//
// One protocol on Linux for C++17 and C++20 alike: a program whose translation units differ in
// the C++ version (a library built as C++17, coroutines in C++20) locks one wheel from both,
// and libstdc++'s notify_one() wakes only the waiters its own wait() counted, so a C++17
// sleeper on the raw futex was never woken by a C++20 unlock (an adversarial review hung such
// a program in a few rounds of waits on two threads).
//
// Not libstdc++'s std::atomic::wait where it has no futex to sleep on (no
// _GLIBCXX_HAVE_PLATFORM_WAIT: mingw-w64's GCC, whatever the C++ version): there a waiter
// checks a version count and then sleeps on a condition variable under a lock that notify
// does not take, so a notify between the check and the sleep is lost (GCC 12's headers; a
// later rework of libstdc++'s atomic wait describes and fixes the race). Here a lost wake-up
// leaves a thread asleep in lock() once the unlocks that could wake it have passed: a hung
// context (faults_mt_test hung so under Wine).
#if defined(__linux__)
#define ASIO_WHEEL_FUTEX_LINUX 1
#include <climits>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#elif defined(__cpp_lib_atomic_wait) &&                                                            \
    !(defined(__GLIBCXX__) && !defined(_GLIBCXX_HAVE_PLATFORM_WAIT))
#define ASIO_WHEEL_FUTEX_ATOMIC_WAIT 1
#else
#define ASIO_WHEEL_FUTEX_CONDVAR 1
#include <condition_variable>
#include <mutex>
#endif

namespace asio_wheel::detail {

// The wheel's lock: taken twice per heartbeat reset, almost always uncontended, held for a
// few dozen instructions. An uncontended lock() and unlock() is one compare-exchange and one
// exchange, against about 75 instructions for glibc's pthread_mutex; a contended one sleeps
// on a futex (see above) instead of spinning.
// The algorithm is "Mutex, take 2" of U. Drepper, "Futexes Are Tricky" (2011).
class futex_mutex {
public:
  futex_mutex() noexcept = default;
  futex_mutex(const futex_mutex&) = delete;
  futex_mutex& operator=(const futex_mutex&) = delete;

  // Marks the word, so that a lock() of the destroyed mutex (a timer used after its
  // execution context, whose wheel held it) stops with a message instead of sleeping for
  // ever, as long as the memory has not been reused. Costs nothing on the uncontended path.
  ~futex_mutex() { state_.store(destroyed, std::memory_order_relaxed); }

  void lock() noexcept {
    int expected = unlocked;
    if (state_.compare_exchange_strong(expected, locked, std::memory_order_acquire,
                                       std::memory_order_relaxed))
      return;
    // Announce a waiter before sleeping, so that unlock() knows to wake someone.
    int previous;
    while ((previous = state_.exchange(contended, std::memory_order_acquire)) != unlocked) {
      if (previous != locked && previous != contended)
        lock_of_destroyed_mutex();
      wait_while_contended();
    }
  }

  void unlock() noexcept {
    if (state_.exchange(unlocked, std::memory_order_release) == contended)
      wake_one();
  }

private:
  // Not a state a live mutex has: it was destroyed (or its memory overwritten).
  [[noreturn]] static void lock_of_destroyed_mutex() noexcept {
    std::fputs("asio_wheel: lock of a destroyed wheel: a timer used after its execution context "
               "(io_context) was destroyed?\n",
               stderr);
    std::abort();
  }

  // Sleeps while state_ is `contended`; may return spuriously (lock() loops).
  void wait_while_contended() noexcept {
#if defined(ASIO_WHEEL_FUTEX_ATOMIC_WAIT)
    state_.wait(contended, std::memory_order_relaxed);
#elif defined(ASIO_WHEEL_FUTEX_LINUX)
    // The kernel compares the word with `contended` atomically with going to sleep, so a
    // wake_one() between the exchange in lock() and this call is not lost (EAGAIN).
    ::syscall(SYS_futex, word(), FUTEX_WAIT_PRIVATE, contended, nullptr, nullptr, 0);
#else
    std::unique_lock<std::mutex> guard(sleep_mutex_);
    sleep_.wait(guard, [this] { return state_.load(std::memory_order_relaxed) != contended; });
#endif
  }

  void wake_one() noexcept {
#if defined(ASIO_WHEEL_FUTEX_ATOMIC_WAIT)
    state_.notify_one();
#elif defined(ASIO_WHEEL_FUTEX_LINUX)
    ::syscall(SYS_futex, word(), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
#else
    // Taking sleep_mutex_ orders this wake after a waiter's check of state_ (no lost wake).
    { std::lock_guard<std::mutex> guard(sleep_mutex_); }
    sleep_.notify_one();
#endif
  }

#if defined(ASIO_WHEEL_FUTEX_LINUX)
  // The futex word: std::atomic<int> is an int in memory on every Linux ABI (checked below).
  int* word() noexcept {
    return reinterpret_cast<int*>(&state_);
  }
  static_assert(sizeof(std::atomic<int>) == sizeof(int) && std::atomic<int>::is_always_lock_free,
                "futex_mutex: the futex system call needs std::atomic<int> to be a plain int");
#endif

  static constexpr int unlocked = 0;
  static constexpr int locked = 1;          // no waiter
  static constexpr int contended = 2;       // maybe waiters
  static constexpr int destroyed = 0x0dead; // see ~futex_mutex
  std::atomic<int> state_{unlocked};
#if defined(ASIO_WHEEL_FUTEX_CONDVAR)
  std::mutex sleep_mutex_;
  std::condition_variable sleep_;
#endif
};

// Which of the three the lock sleeps on, for the link-time check of the separate mode
// (detail/separate_compilation.hpp): the lock's size and code differ between them.
struct futex_sleeps_on_syscall {};
struct futex_sleeps_on_atomic_wait {};
struct futex_sleeps_on_condvar {};
#if defined(ASIO_WHEEL_FUTEX_LINUX)
using futex_mutex_sleep = futex_sleeps_on_syscall;
#elif defined(ASIO_WHEEL_FUTEX_ATOMIC_WAIT)
using futex_mutex_sleep = futex_sleeps_on_atomic_wait;
#else
using futex_mutex_sleep = futex_sleeps_on_condvar;
#endif

} // namespace asio_wheel::detail

#undef ASIO_WHEEL_FUTEX_ATOMIC_WAIT
#undef ASIO_WHEEL_FUTEX_LINUX
#undef ASIO_WHEEL_FUTEX_CONDVAR

#endif // ASIO_WHEEL_DETAIL_FUTEX_MUTEX_HPP
