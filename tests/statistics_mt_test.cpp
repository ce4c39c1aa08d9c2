//
// statistics_mt_test.cpp
// ~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// get_statistics() from a thread that does not run the context, while two threads run it
// and arm, re-arm and cancel timers: every snapshot is consistent (TSan checks the reads),
// and the totals balance at the end.

#include <asio_wheel/statistics.hpp>
#include <asio_wheel/wheel_timer.hpp>

#include <asio/bind_executor.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/strand.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

using namespace std::chrono_literals;

TEST_CASE("snapshots from another thread are consistent while two threads run the context") {
  asio::io_context io;
  constexpr int timers = 64, rounds = 200;
  std::vector<std::unique_ptr<asio_wheel::wheel_timer>> ts;
  for (int i = 0; i < timers; ++i)
    ts.push_back(std::make_unique<asio_wheel::wheel_timer>(io));
  std::atomic<int> left{timers};
  std::vector<int> count(timers, 0);
  std::vector<std::function<void(const asio::error_code&)>> loops(timers);
  std::vector<asio::strand<asio::io_context::executor_type>> strands;
  for (int i = 0; i < timers; ++i)
    strands.push_back(asio::make_strand(io));
  for (int i = 0; i < timers; ++i) {
    loops[i] = [&, i](const asio::error_code&) {
      // Read once, before the wait starts: its handler may run on the other thread at once.
      const int n = ++count[i];
      if (n == rounds) {
        --left;
        return;
      }
      ts[i]->expires_after(std::chrono::microseconds((i * 37 + n * 11) % 2000));
      // On the timer's strand: its next handler may not run, on the other thread, while this
      // one still uses the timer (cancel() below); Asio's timers are not thread-safe objects.
      ts[i]->async_wait(asio::bind_executor(strands[i], loops[i]));
      if (n % 3 == 0)
        ts[i]->cancel(); // an aborted wait, then the loop goes on from its handler
    };
    asio::post(strands[i], [&, i] { loops[i](asio::error_code{}); });
  }
  auto work = asio::make_work_guard(io);
  std::thread a([&] { io.run(); }), b([&] { io.run(); });
  std::uint64_t snapshots = 0, bad = 0, last_started = 0;
  while (left.load() != 0) {
    const auto s = asio_wheel::get_statistics(io);
    ++snapshots;
    std::size_t filed = 0;
    for (auto n : s.timers_per_level)
      filed += n;
    if (s.waits_succeeded + s.waits_aborted > s.waits_started || filed < s.timers_pending ||
        s.waits_started < last_started || s.waits_pending() < s.timers_pending)
      ++bad;
    last_started = s.waits_started;
    std::this_thread::yield();
  }
  work.reset();
  a.join();
  b.join();
  const auto s = asio_wheel::get_statistics(io);
  MESSAGE(snapshots << " snapshots");
  CHECK(bad == 0);
  CHECK(snapshots > 0);
  CHECK(s.waits_pending() == 0);
  CHECK(s.waits_started == s.waits_succeeded + s.waits_aborted);
  CHECK(s.waits_started == std::uint64_t(timers) * (rounds - 1));
}
