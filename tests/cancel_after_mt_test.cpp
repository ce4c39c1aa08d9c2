//
// cancel_after_mt_test.cpp
// ~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// cancel_after when the operation's handler is bound to an executor of another context than
// the operation's own, each a TEST_CASE_TEMPLATE over asio::cancel_after (Asio 1.31 and
// later) and asio_wheel's, run under ThreadSanitizer (label 'concurrency'):
//
//   * use_future, whose executor is system_executor's (before Asio 1.26 it has no execution
//     context at all): the cancellation is emitted on the thread that runs the operation's
//     io_context. Asio's adapter keeps its deadline on a timer of the operation's I/O
//     executor, whose wait completes on that context and runs use_future's executor inline.
//     asio_wheel's kept it in the wheel of the handler's executor, system_context's, and
//     emitted the cancellation from a system thread while the operation ran on its own
//     single-threaded context: a data race (with Asio's timer as the operation, a
//     heap-use-after-free in its timer queue once the caller, woken by the future, destroyed
//     the timer).
//   * a coroutine on another io_context awaiting an operation of this one: aborted at the
//     deadline, once, without a race.

#include <asio_wheel/cancel_after.hpp>

#include <asio/error.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <asio/system_error.hpp>
#include <asio/use_future.hpp>
#if defined(ASIO_HAS_CO_AWAIT)
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/use_awaitable.hpp>
#endif

#include <doctest/doctest.h>

#include "asio_test_support.hpp"
#include "cancel_adapters.hpp"
#include "manual_op.hpp"

#include <chrono>
#include <future>
#include <optional>
#include <thread>
#include <utility>

namespace {

using namespace std::chrono_literals;
using namespace asio_wheel::test;

constexpr auto kShort = 20ms;
constexpr auto kPrompt = 5s;

// One thread running an io_context, kept busy until join().
class context_thread {
public:
  explicit context_thread(asio::io_context& ctx)
      : guard_(ctx.get_executor()), thread_([&ctx, this] {
          id_.set_value(std::this_thread::get_id());
          ctx.run();
        }) {
    thread_id = id_.get_future().get();
  }
  context_thread(const context_thread&) = delete;
  context_thread& operator=(const context_thread&) = delete;
  ~context_thread() { join(); }

  void join() {
    guard_.reset();
    if (thread_.joinable())
      thread_.join();
  }

  std::thread::id thread_id;

private:
  std::promise<std::thread::id> id_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> guard_;
  std::thread thread_;
};

} // namespace

TEST_CASE_TEMPLATE("use_future: the deadline's cancellation is emitted on the thread running "
                   "the operation's io_context",
                   F, CANCEL_ADAPTERS) {
  asio::io_context ctx;
  manual_op op(ctx);
  const auto t0 = sclock::now();
  std::future<void> done = op.async_run(F::after(kShort, asio::use_future));
  context_thread runner(ctx);
  REQUIRE(done.wait_for(kPrompt) == std::future_status::ready);
  CHECK(sclock::now() >= t0 + kShort);
  runner.join(); // before error_of(): see there
  CHECK(error_of(done) == kAborted);
  CHECK(op.cancellations == 1);
  CHECK(op.cancelled_on == runner.thread_id);
}

TEST_CASE_TEMPLATE("use_future with Asio's timer as the operation, destroyed as soon as the "
                   "future is ready: no race, no use after free",
                   F, CANCEL_ADAPTERS) {
  for (int i = 0; i < 20; ++i) {
    CAPTURE(i);
    asio::io_context ctx;
    std::optional<context_thread> runner;
    std::future<void> done;
    {
      asio::steady_timer op(ctx, kFar);
      done = op.async_wait(F::after(1ms, asio::use_future));
      // Not before: the deadline is started before the operation connects its slot (in
      // Asio's adapter too), so a thread already running the context could fire it in
      // between, and the cancellation would find no handler and be lost; with Asio 1.34's
      // adapter that happened in 2 of 6 runs of 300 under ASan on a loaded machine.
      runner.emplace(ctx);
      REQUIRE(done.wait_for(kPrompt) == std::future_status::ready);
    }               // the timer goes while its context runs on `runner`
    runner->join(); // before error_of(): see there
    CHECK(error_of(done) == kAborted);
  }
}

#if defined(ASIO_HAS_CO_AWAIT)
TEST_CASE_TEMPLATE("a coroutine on another io_context awaiting an operation of this one: "
                   "aborted at the deadline, once, without a race",
                   F, CANCEL_ADAPTERS) {
  for (int i = 0; i < 10; ++i) {
    CAPTURE(i);
    asio::io_context ops;
    asio::io_context coroutines;
    asio::steady_timer op(ops, kFar);
    std::promise<std::pair<asio::error_code, sclock::duration>> result;
    asio::co_spawn(
        coroutines,
        [&]() -> asio::awaitable<void> {
          asio::error_code ec;
          const auto t0 = sclock::now();
          try {
            co_await op.async_wait(F::after(kShort, asio::use_awaitable));
          } catch (const asio::system_error& e) {
            ec = e.code();
          }
          result.set_value({ec, sclock::now() - t0});
        },
        asio::detached);
    // The coroutine runs to its co_await here, so that the operation has connected its
    // slot before a thread runs `ops` and can fire the deadline (see the test above).
    while (coroutines.poll_one() != 0) {
    }
    coroutines.restart(); // in case it ran out of work: the runner's guard keeps it now
    context_thread ops_runner(ops);
    context_thread coroutine_runner(coroutines);
    auto done = result.get_future();
    REQUIRE(done.wait_for(kPrompt) == std::future_status::ready);
    const auto [ec, elapsed] = done.get();
    CHECK(ec == kAborted);
    CHECK(elapsed >= kShort);
    coroutine_runner.join();
    ops_runner.join();
  }
}
#endif // defined(ASIO_HAS_CO_AWAIT)
