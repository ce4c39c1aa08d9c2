//
// futex_mutex_mt_test.cpp
// ~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// The wheel's lock in whichever form the build has (std::atomic::wait in C++20, the futex
// system call in C++17 on Linux): mutual exclusion under contention, and a contended
// lock() that sleeps rather than spins (the C++17 form must be as good as the C++20 one).

#include <asio_wheel/detail/futex_mutex.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <mutex>
#include <thread>
#include <vector>

namespace {

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

} // namespace

TEST_CASE("futex_mutex: mutual exclusion under contention, 4 threads") {
  asio_wheel::detail::futex_mutex mutex;
  long counter = 0; // unsynchronised but for the lock: TSan and the total check it
  constexpr int threads = 4;
  constexpr int rounds = 20000;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      for (int i = 0; i < rounds; ++i) {
        std::lock_guard<asio_wheel::detail::futex_mutex> lock(mutex);
        ++counter;
      }
    });
  for (auto& t : pool)
    t.join();
  CHECK(counter == long{threads} * rounds);
}

TEST_CASE("futex_mutex: a contended lock() sleeps until unlock(), burning no CPU") {
  asio_wheel::detail::futex_mutex mutex;
  std::atomic<bool> waiting{false};
  std::atomic<bool> acquired{false};
  double waiter_cpu = 0;
  mutex.lock();
  std::thread waiter([&] {
    const double before = thread_cpu_seconds();
    waiting = true;
    mutex.lock(); // blocks for the 300 ms the main thread holds the lock
    acquired = true;
    waiter_cpu = thread_cpu_seconds() - before;
    mutex.unlock();
  });
  while (!waiting)
    std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK_FALSE(acquired.load());
  mutex.unlock();
  waiter.join();
  CHECK(acquired.load());
  // A spin or yield loop would use most of the 300 ms; a sleeping waiter a few system calls.
  CHECK(waiter_cpu < 0.05);
}
