//
// support/manual_clock.hpp
// ~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_TEST_MANUAL_CLOCK_HPP
#define ASIO_WHEEL_TEST_MANUAL_CLOCK_HPP

// A clock the test controls, for the cases the real clocks of a test machine never show: a
// step forward, a step back (a non-steady clock, as system_clock after an NTP step), an
// epoch far in the negative, a period much coarser or much finer than steady_clock's.
//
//   struct my_tag;
//   using clock = manual_clock<my_tag, std::chrono::nanoseconds, /*Steady=*/false>;
//   clock::reset(clock::time_point(1h));     // reads 1 h, and runs on with real time
//   clock::step(-50ms);                      // now reads 50 ms less
//   clock::freeze(); clock::set(t);          // stands still at t until the next set/step
//
// It satisfies the Clock requirements of std::chrono and Asio (static now(), the member
// types, is_steady), so asio::basic_waitable_timer<clock> and
// asio_wheel::basic_wheel_timer<clock> both accept it. Each Tag is a clock of its own, with
// its own state: the state is static, as now() must be.
//
// Running, it follows std::chrono::steady_clock from the value it was last set to
// (truncated to its period, so a coarse clock reads in steps of its period and never
// backwards by itself). Frozen, it reads the value set until the test moves it.
//
// Waits: an Asio timer on a clock waits in real time, for the duration the clock's wait
// traits give (WaitTraits::to_wait_duration), and then reads the clock again. A clock that
// jumps would leave it asleep through the jump, so asio::wait_traits is specialised below to
// cap every wait at max(1 ms, one period): Asio's own timer and the wheel's driver then read
// the clock at least that often, and a test never sleeps longer than that past a step.
//
// now() also counts its calls (reads()), so that a test can bound the clock reads of a wait
// (a busy loop shows as hundreds of thousands of them), and can call a hook of the reading
// thread (on_read_in_this_thread), to hold it between its read and its use of the value.
// Thread-safe: any thread may read or move the clock at any time.

#include <asio/wait_traits.hpp>

#include <atomic>
#include <cassert>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <utility>

namespace asio_wheel::test {

template <typename Tag, typename Duration = std::chrono::nanoseconds, bool Steady = false>
class manual_clock {
public:
  using duration = Duration;
  using rep = typename duration::rep;
  using period = typename duration::period;
  using time_point = std::chrono::time_point<manual_clock>;
  static constexpr bool is_steady = Steady;

  static time_point now() noexcept {
    reads_.fetch_add(1, std::memory_order_relaxed);
    time_point t;
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      t = read();
    }
    if (hook_)
      hook_(t);
    return t;
  }

  // Calls `hook` (which must not throw) in this thread after each of its reads, with the
  // value read, before now() returns it: a test can hold a thread between its clock read and
  // what the caller does with the value. An empty function removes it.
  static void on_read_in_this_thread(std::function<void(time_point)> hook) {
    hook_ = std::move(hook);
  }

  // Reads `start` now, and runs on from it (in real time) unless `running` is false.
  static void reset(time_point start, bool running = true) {
    const std::lock_guard<std::mutex> lock(mutex_);
    base_ = start;
    anchor_ = std::chrono::steady_clock::now();
    running_ = running;
  }

  // Moves the clock by `d`: forward, or back (only a non-steady clock may go back).
  static void step(duration d) {
    assert((!Steady || d >= duration::zero()) && "a steady clock never goes back");
    const std::lock_guard<std::mutex> lock(mutex_);
    base_ = read() + d;
    anchor_ = std::chrono::steady_clock::now();
  }

  // Reads `t` from now on (a steady clock only forward); keeps running or frozen.
  static void set(time_point t) {
    const std::lock_guard<std::mutex> lock(mutex_);
    assert((!Steady || t >= read()) && "a steady clock never goes back");
    base_ = t;
    anchor_ = std::chrono::steady_clock::now();
  }

  // Stands still at the current reading.
  static void freeze() {
    const std::lock_guard<std::mutex> lock(mutex_);
    base_ = read();
    running_ = false;
  }

  // Runs on from the current reading.
  static void resume() {
    const std::lock_guard<std::mutex> lock(mutex_);
    base_ = read();
    anchor_ = std::chrono::steady_clock::now();
    running_ = true;
  }

  // The number of now() calls so far.
  static std::uint64_t reads() noexcept { return reads_.load(std::memory_order_relaxed); }

private:
  // With mutex_ held. Elapsed real time since the anchor, not the steady clock's own
  // reading, is converted: a femtosecond clock overflows 64 bits after 2.5 hours of uptime.
  static time_point read() noexcept {
    if (!running_)
      return base_;
    return base_ + std::chrono::duration_cast<duration>(std::chrono::steady_clock::now() - anchor_);
  }

  inline static std::mutex mutex_;
  // The reading at anchor_ (a real time); a frozen clock reads base_.
  inline static time_point base_{};
  inline static std::chrono::steady_clock::time_point anchor_ = std::chrono::steady_clock::now();
  inline static bool running_ = true;
  inline static std::atomic<std::uint64_t> reads_{0};
  inline static thread_local std::function<void(time_point)> hook_;
};

// The longest real-time wait of an Asio timer on a manual_clock: 1 ms, or one period of a
// coarser clock (a zero wait would spin).
template <typename Clock>
typename Clock::duration manual_wait_cap() noexcept {
  using duration = typename Clock::duration;
  const auto ms = std::chrono::duration_cast<duration>(std::chrono::milliseconds(1));
  return ms > duration::zero() ? ms : duration(1);
}

} // namespace asio_wheel::test

// Asio's timer waits for to_wait_duration() in real time before reading the clock again; a
// manual clock can jump meanwhile, so no wait is longer than manual_wait_cap(). The
// time_point overload saturates, as Asio's own does, without its overflow near the ends of
// the clock's range (it computes now + duration::max()).
template <typename Tag, typename Duration, bool Steady>
struct asio::wait_traits<asio_wheel::test::manual_clock<Tag, Duration, Steady>> {
  using clock = asio_wheel::test::manual_clock<Tag, Duration, Steady>;
  using duration = typename clock::duration;
  using time_point = typename clock::time_point;

  static duration to_wait_duration(const duration& d) {
    const duration cap = asio_wheel::test::manual_wait_cap<clock>();
    return d < cap ? d : cap;
  }

  static duration to_wait_duration(const time_point& t) {
    const time_point now = clock::now();
    if (t <= now)
      return duration::zero();
    // The distance in unsigned arithmetic: t - now overflows when the two are at opposite
    // ends of the clock's range.
    const auto left = static_cast<std::uint64_t>(t.time_since_epoch().count()) -
                      static_cast<std::uint64_t>(now.time_since_epoch().count());
    const duration cap = asio_wheel::test::manual_wait_cap<clock>();
    return left < static_cast<std::uint64_t>(cap.count())
               ? duration(static_cast<typename duration::rep>(left))
               : cap;
  }
};

#endif // ASIO_WHEEL_TEST_MANUAL_CLOCK_HPP
