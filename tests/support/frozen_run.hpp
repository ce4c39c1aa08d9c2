//
// support/frozen_run.hpp
// ~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_TEST_FROZEN_RUN_HPP
#define ASIO_WHEEL_TEST_FROZEN_RUN_HPP

// Running an io_context while a frozen manual_clock (manual_clock.hpp) stands still: the test
// sets the clock, and runs the context for a while of real time to see that nothing happens
// before the clock is moved past an expiry (Asio's timer on a manual_clock, the wheel's
// driver, reads it again at least once a millisecond), or until something has happened.

#include "manual_clock.hpp"

#include <asio/io_context.hpp>

#include <chrono>
#include <cstddef>
#include <thread>

namespace asio_wheel::test {

// A steady manual clock that a test freezes (a Tag of its own per test case, as its state is
// static), the time it starts at (far from the epoch, so that no deadline of a test
// saturates), and how long a test leaves it standing to see that nothing happens meanwhile.
template <typename Tag>
using frozen_clock = manual_clock<Tag, std::chrono::nanoseconds, true>;
inline constexpr std::chrono::nanoseconds frozen_start = std::chrono::hours(1);
inline constexpr std::chrono::milliseconds frozen_still = std::chrono::milliseconds(20);

// How long run_until() waits at most by default: it only turns a hang into a failure (on a
// frozen clock what pred() waits for needs a few turns, not time), so it is generous for a
// loaded machine under a sanitizer.
inline constexpr std::chrono::seconds frozen_patience = std::chrono::seconds(30);
// The turns run_until() runs at least, however late the process is scheduled: with the clock
// frozen, a step is seen by the next turn or two, and a stall past `limit` before the first
// turn must not leave it unseen.
inline constexpr int frozen_min_turns = 3;

// Runs `ioc` until `pred()` holds, for at most `limit` of real time but at least
// frozen_min_turns turns; returns pred(). Adds the number of handlers run to `*handlers`.
template <typename Pred>
bool run_until(asio::io_context& ioc, Pred pred,
               std::chrono::steady_clock::duration limit = frozen_patience,
               std::size_t* handlers = nullptr) {
  const auto end = std::chrono::steady_clock::now() + limit;
  for (int turns = 0;
       !pred() && (turns < frozen_min_turns || std::chrono::steady_clock::now() < end); ++turns) {
    ioc.restart();
    // poll() first: run_for() runs nothing if its 1 ms has passed before it starts.
    std::size_t n = ioc.poll();
    if (!pred())
      n += ioc.run_for(std::chrono::milliseconds(1));
    if (handlers != nullptr)
      *handlers += n;
    if (n == 0)
      std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return pred();
}

// Runs `ioc` for `d` of real time (and at least frozen_min_turns turns); returns the number
// of handlers run.
inline std::size_t run_for(asio::io_context& ioc, std::chrono::steady_clock::duration d) {
  std::size_t handlers = 0;
  run_until(
      ioc, [] { return false; }, d, &handlers);
  return handlers;
}

// Runs the handlers that are ready now: "the next turn" of a context with one thread.
inline std::size_t next_turn(asio::io_context& ioc) {
  ioc.restart();
  return ioc.poll();
}

} // namespace asio_wheel::test

#endif // ASIO_WHEEL_TEST_FROZEN_RUN_HPP
