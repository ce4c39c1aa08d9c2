//
// mixed_standard/main.cpp
// ~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// futex_mutex across C++ versions: a contended lock() sleeping in C++17 code must be woken by
// an unlock() in C++20 code, and the other way round. Until futex_mutex used one protocol on
// Linux for both, libstdc++'s C++20 notify_one() woke only waiters its own wait() counted, and
// the C++17 sleeper on the raw futex slept for ever. Fails (exit 1) if a locker is still
// asleep 5 s after the unlock that should have woken it.

#include <asio_wheel/detail/futex_mutex.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#if __cplusplus <= 201703L
#error "main.cpp must be compiled as C++20 or later: the test is that the two versions interoperate"
#endif

void lock_cxx17(asio_wheel::detail::futex_mutex& m);
void unlock_cxx17(asio_wheel::detail::futex_mutex& m);

namespace {

void lock_cxx20(asio_wheel::detail::futex_mutex& m) {
  m.lock();
}
void unlock_cxx20(asio_wheel::detail::futex_mutex& m) {
  m.unlock();
}

using lock_fn = void (*)(asio_wheel::detail::futex_mutex&);

// The holder's unlock must wake the sleeper's lock; returns whether it did within 5 s.
bool woken(const char* what, lock_fn holder_lock, lock_fn holder_unlock, lock_fn sleeper_lock,
           lock_fn sleeper_unlock) {
  asio_wheel::detail::futex_mutex m;
  std::atomic<bool> done{false};
  holder_lock(m);
  std::thread sleeper([&] {
    sleeper_lock(m); // contends, marks the word, sleeps
    sleeper_unlock(m);
    done = true;
  });
  // Long enough for the sleeper to be asleep in lock(); if it is not yet, the test is only
  // weaker, never wrong.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  holder_unlock(m);
  for (int i = 0; i < 50 && !done; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::printf("%s: the sleeper %s\n", what, done ? "got the lock" : "is STILL ASLEEP after 5 s");
  if (!done) {
    std::fflush(stdout);
    std::_Exit(1); // the sleeper cannot be joined
  }
  sleeper.join();
  return true;
}

} // namespace

int main() {
  for (int round = 0; round < 3; ++round) {
    woken("C++20 unlock, C++17 sleeper", lock_cxx20, unlock_cxx20, lock_cxx17, unlock_cxx17);
    woken("C++17 unlock, C++20 sleeper", lock_cxx17, unlock_cxx17, lock_cxx20, unlock_cxx20);
  }
  return EXIT_SUCCESS;
}
