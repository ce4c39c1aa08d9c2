//
// faults_test.cpp
// ~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// Faults and edge cases, single-threaded (the racing ones are in faults_mt_test.cpp):
//
//   * a handler that throws in the middle of a batch of same-tick expirations (or of a batch
//     of cancellations): run() throws, nothing else is lost, restart() and run() complete
//     the rest exactly once; or the context is destroyed instead and the rest is destroyed
//     without being called;
//   * io_context::stop() and restart() with waits pending (in the wheel, due, aborted);
//   * the io_context destroyed with waits and coroutines pending: the coroutine frames are
//     destroyed, nothing runs, nothing leaks;
//   * timers destroyed from inside another timer's handler, from inside their own, and
//     later in the same expiry batch;
//   * deadlines at the clock's extremes (time_point::max(), duration::max(), min());
//   * bad tick configurations, and changing the tick once the wheel has served a wait;
//   * run() returning once the wheel is empty, also after idle_timer::set_timeout().
//
// Where the behaviour is Asio's, the test is a template over asio::steady_timer and
// asio_wheel::wheel_timer: the steady_timer instance shows what Asio 1.22 does, and the
// wheel_timer instance must do the same. Each handler owns a census_token, so "nothing
// leaked" is checked by counting handler objects (copies and moves included) in Debug, on
// top of LSan in the sanitizer builds.
//
// The test case marked KNOWN DIVERGENCE (doctest::may_fail) records, without
// failing the suite, where wheel_timer does not yet behave like asio::steady_timer, and a
// bug found by these tests. Their failed checks are printed; remove may_fail once fixed.
//

#include <asio_wheel/cancel_after.hpp>
#include <asio_wheel/idle_timer.hpp>
#include <asio_wheel/wheel_timer.hpp>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/bind_executor.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/cancellation_type.hpp>
#include <asio/error.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <asio/strand.hpp>

#if defined(ASIO_HAS_CO_AWAIT)
#include <asio/co_spawn.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#endif

#include <doctest/doctest.h>

#include "asio_test_support.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <exception>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <type_traits>

#if defined(__GLIBCXX__) && defined(__linux__)
#include <pthread.h>
#define FAULTS_TEST_FORCED_UNWIND 1
#endif
#include <utility>
#include <vector>

namespace {

using namespace std::chrono_literals;
using namespace asio_wheel::test;

// "Promptly": generous for a loaded 2-core machine, and far below kFar.
constexpr auto kPrompt = 5s;

// ---------------------------------------------------------------------------------------
// Counting handler objects, and recording completions.

// Objects constructed (copies and moves included) and destroyed.
struct census {
  int created = 0;
  int destroyed = 0;
  int live() const { return created - destroyed; }
};

struct census_token {
  explicit census_token(census& c) : c_(&c) { ++c_->created; }
  census_token(const census_token& o) : c_(o.c_) { ++c_->created; }
  census_token& operator=(const census_token&) = delete;
  ~census_token() { ++c_->destroyed; }
  census* c_;
};

// A handler recording into `r` (as record() does), owning a census token; `seq` numbers the
// completions.
auto recorder(outcome& r, census& c, int& seq) {
  return [rec = record(r, &seq), tok = census_token(c)](asio::error_code ec) { rec(ec); };
}

// Exactly one completion, with `want`; a success never before the expiry.
#define CHECK_ONCE_WITH(r, want)                                                                   \
  do {                                                                                             \
    CHECK((r).calls == 1);                                                                         \
    CHECK((r).ec == (want));                                                                       \
    if ((r).calls == 1 && !(r).ec)                                                                 \
      CHECK((r).at >= (r).expiry);                                                                 \
  } while (false)

// Exactly one completion, success (never early) or operation_aborted.
#define CHECK_ONCE_OK_OR_ABORTED(r)                                                                \
  do {                                                                                             \
    CHECK((r).calls == 1);                                                                         \
    CHECK(((r).ec == kOk || (r).ec == kAborted));                                                  \
    if ((r).calls == 1 && !(r).ec)                                                                 \
      CHECK((r).at >= (r).expiry);                                                                 \
  } while (false)

// Whether a wait's cancellation slot may be emitted after its timer was destroyed. Asio
// 1.22's steady_timer stores a pointer to the timer's queue entry in the slot's handler
// (deadline_timer_service::op_cancellation), so emitting after the timer is gone is a
// use-after-free in Asio itself; wheel_timer's slot handler refers to the operation.
template <class Timer>
constexpr bool kSlotSurvivesTimer = std::is_same_v<Timer, asio_wheel::wheel_timer>;

struct boom : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// `n` timers, all expiring at the same time point: the same tick of the wheel, and the same
// get_ready_timers() sweep of Asio's heap, so each forms one batch of expirations.
template <class Timer>
std::vector<std::unique_ptr<Timer>> same_expiry(asio::io_context& ioc, int n,
                                                sclock::time_point at) {
  std::vector<std::unique_ptr<Timer>> timers;
  for (int i = 0; i < n; ++i)
    timers.push_back(std::make_unique<Timer>(ioc, at));
  return timers;
}

} // namespace

// =======================================================================================
// A handler that throws in the middle of a batch
// =======================================================================================

TEST_CASE_TEMPLATE("a handler throws in the middle of a batch of 50: run() throws, nothing "
                   "else is lost, restart() and run() complete the other 49 exactly once",
                   Timer, TIMER_TYPES) {
  constexpr int n = 50;
  enum class mode { on_context, on_strand, aborted_batch, every_tenth, destroy_instead };
  mode m = mode::on_context;
  SUBCASE("50 expirations in one tick, handlers on the context's executor") {
    m = mode::on_context;
  }
  SUBCASE("50 expirations in one tick, handlers bound to one strand") {
    m = mode::on_strand;
  }
  SUBCASE("50 cancellations delivered together (cancel() of 50 far waits in one handler)") {
    m = mode::aborted_batch;
  }
  SUBCASE("every 10th handler throws: five exceptions, five restarts") {
    m = mode::every_tenth;
  }
  SUBCASE("the context is destroyed after the exception: the other 40 are destroyed, never "
          "called") {
    m = mode::destroy_instead;
  }

  census handlers;
  std::vector<outcome> res(n);
  int seq = 0;
  int throws = 0;
  std::string first_what;
  int calls_at_first_throw = -1;
  {
    auto ioc = std::make_unique<asio::io_context>();
    // Optional: a strand must be destroyed before its context (Asio's strand_impl unlinks
    // itself from the context's strand service).
    std::optional<asio::strand<asio::io_context::executor_type>> strand(asio::make_strand(*ioc));
    const auto due = sclock::now() + 20ms;
    auto timers = same_expiry<Timer>(*ioc, n, m == mode::aborted_batch ? due + kFar : due);
    for (int i = 0; i < n; ++i) {
      res[i].expiry = timers[i]->expiry();
      auto h = [&res, &seq, m, i, tok = census_token(handlers)](asio::error_code ec) {
        outcome& r = res[i];
        ++r.calls;
        r.ec = ec;
        r.at = sclock::now();
        r.order = seq++;
        const int k = seq; // this is the k-th completion
        if (m == mode::every_tenth ? k % 10 == 0 : k == 10)
          throw boom("handler #" + std::to_string(k));
      };
      if (m == mode::on_strand)
        timers[i]->async_wait(asio::bind_executor(*strand, std::move(h)));
      else
        timers[i]->async_wait(std::move(h));
    }
    std::size_t cancelled = 0;
    if (m == mode::aborted_batch)
      asio::post(*ioc, [&] {
        for (auto& t : timers)
          cancelled += t->cancel();
      });

    bool finished = false;
    for (int attempt = 0; attempt < 20 && !finished; ++attempt) {
      try {
        const auto r = guarded_run(*ioc);
        CHECK_FALSE(r.timed_out);
        finished = true;
      } catch (const boom& e) {
        if (throws++ == 0) {
          first_what = e.what();
          calls_at_first_throw = seq;
        }
        if (m == mode::destroy_instead)
          break;
        ioc->restart();
      }
    }
    CHECK(first_what == "handler #10");
    // run() left at the throwing handler: the 40 others had not been called yet. (With the
    // handlers on a strand, wheel_timer runs the rest of the batch first: see the KNOWN
    // DIVERGENCE test below.)
    if (m != mode::on_strand) {
      CHECK(calls_at_first_throw == 10);
    } else {
      CHECK(calls_at_first_throw >= 10);
    }
    if (m == mode::aborted_batch)
      CHECK(cancelled == static_cast<std::size_t>(n));

    if (m == mode::destroy_instead) {
      CHECK(throws == 1);
      CHECK(handlers.live() == n - 10); // the rest are still queued
      timers.clear();
      strand.reset();
      ioc.reset();
      CHECK(seq == 10); // none of them was called by the destruction
      CHECK(handlers.live() == 0);
      int called = 0;
      for (const auto& r : res) {
        CHECK(r.calls <= 1);
        called += r.calls;
      }
      CHECK(called == 10);
      return;
    }

    CHECK(finished);
    CHECK(throws == (m == mode::every_tenth ? 5 : 1));
    CHECK(seq == n);
    const asio::error_code want = m == mode::aborted_batch ? kAborted : kOk;
    for (int i = 0; i < n; ++i) {
      CAPTURE(i);
      CHECK_ONCE_WITH(res[i], want);
    }
  }
  CHECK(handlers.live() == 0);
}

namespace {

// An executor whose execute() throws on its `throw_at`-th call (and every later one if
// `for_good`) and otherwise posts to the context: a user's executor, or one whose queueing
// fails for a reason of its own (a queue closed for good, say).
struct throwing_executor {
  asio::io_context* context;
  int* calls;
  int throw_at;
  bool for_good = false;
  asio::execution_context& query(asio::execution::context_t) const noexcept { return *context; }
  static constexpr asio::execution::blocking_t query(asio::execution::blocking_t) noexcept {
    return asio::execution::blocking.never;
  }
  template <class F>
  void execute(F&& f) const {
    if (++*calls == throw_at || (for_good && *calls > throw_at))
      throw boom("execute() #" + std::to_string(*calls));
    // Wrapped: a function's associated executor is this one, to which post() would hand it.
    asio::post(*context, [g = std::forward<F>(f)]() mutable { std::move(g)(); });
  }
  bool operator==(const throwing_executor& other) const noexcept {
    return context == other.context && calls == other.calls && throw_at == other.throw_at &&
           for_good == other.for_good;
  }
  bool operator!=(const throwing_executor& other) const noexcept { return !(*this == other); }
};
static_assert(asio::execution::is_executor<throwing_executor>::value);

} // namespace

// Asio destroys, uncalled, the handler whose executor's execute() threw, and lets the
// exception out of run(). The wheel keeps that wait at the front of its ready queue and
// hands it to the executor again at the next run() (as when Asio's allocation fails there:
// docs/semantics.md, "Known limitations"): late, not lost. On both, nothing runs twice and
// nothing leaks.
TEST_CASE_TEMPLATE("a handler's executor throws from execute(): run() throws it once; "
                   "asio::steady_timer destroys that handler uncalled, the wheel runs it at the "
                   "next run(); none runs twice or leaks",
                   Timer, TIMER_TYPES) {
  constexpr int n = 3;
  census handlers;
  std::vector<outcome> res(n);
  int seq = 0;
  int calls = 0;
  int throws = 0;
  std::string what;
  {
    asio::io_context ioc;
    auto timers = same_expiry<Timer>(ioc, n, sclock::now() + 20ms);
    for (int i = 0; i < n; ++i) {
      res[i].expiry = timers[i]->expiry();
      timers[i]->async_wait(
          asio::bind_executor(throwing_executor{&ioc, &calls, 1}, recorder(res[i], handlers, seq)));
    }
    for (int attempt = 0; attempt < 2 * n; ++attempt) {
      try {
        ioc.restart();
        const auto r = guarded_run(ioc);
        CHECK_PROMPT(r);
        break;
      } catch (const boom& e) {
        ++throws;
        what = e.what();
      }
    }
  }
  CHECK(throws == 1);
  CHECK(what == "execute() #1");
  // The first wait started met the throw: both complete one expiry's waits in the order they
  // were started.
  if constexpr (std::is_same_v<Timer, asio::steady_timer>) {
    CHECK(calls == n);
    CHECK(res[0].calls == 0);
    for (int i = 1; i < n; ++i) {
      CAPTURE(i);
      CHECK_ONCE_WITH(res[i], kOk);
    }
  } else {
    CHECK(calls == n + 1);
    for (int i = 0; i < n; ++i) {
      CAPTURE(i);
      CHECK_ONCE_WITH(res[i], kOk);
    }
  }
  CHECK(handlers.live() == 0);
}

// An executor that refuses a wait for good (its execute() throws at every call): Asio lets
// the exception out of run() once, the handler destroyed uncalled, and the expiry's other
// waits complete at the next run(). The wheel offers the wait once more at the next run(),
// as above, and at the second refusal does as Asio did at the first (a throw other than
// std::bad_alloc; for want of memory it keeps offering it: alloc_failure_test). Without the
// bound every run() threw and the waits behind it never completed. Nothing runs twice or
// leaks; the last run() returns.
TEST_CASE_TEMPLATE("a handler's executor refuses its wait for good: asio::steady_timer lets "
                   "the exception out of run() once, the wheel twice; that handler is destroyed "
                   "uncalled, the other waits of its expiry complete, and run() then returns",
                   Timer, TIMER_TYPES) {
  constexpr int n = 3;
  census handlers;
  std::vector<outcome> res(n);
  int seq = 0;
  int calls = 0;
  int throws = 0;
  bool returned = false;
  {
    asio::io_context ioc;
    auto timers = same_expiry<Timer>(ioc, n, sclock::now() + 20ms);
    for (int i = 0; i < n; ++i)
      res[i].expiry = timers[i]->expiry();
    timers[0]->async_wait(recorder(res[0], handlers, seq));
    timers[1]->async_wait(asio::bind_executor(throwing_executor{&ioc, &calls, 1, true},
                                              recorder(res[1], handlers, seq)));
    timers[2]->async_wait(recorder(res[2], handlers, seq));
    for (int attempt = 0; attempt < 10 && !returned; ++attempt) {
      try {
        ioc.restart();
        const auto r = guarded_run(ioc);
        CHECK_PROMPT(r);
        returned = true;
      } catch (const boom&) {
        ++throws;
      }
    }
  }
  CHECK(returned);
  CHECK(throws == (std::is_same_v<Timer, asio::steady_timer> ? 1 : 2));
  CHECK(calls == throws);
  CHECK(res[1].calls == 0);
  CHECK_ONCE_WITH(res[0], kOk);
  CHECK_ONCE_WITH(res[2], kOk);
  CHECK(handlers.live() == 0);
}

#if defined(FAULTS_TEST_FORCED_UNWIND)
namespace {

// An executor whose execute() takes the function and then blocks at a cancellation point
// (a bounded queue waiting for room), until its thread is cancelled.
struct blocking_executor {
  asio::io_context* context;
  std::atomic<bool>* entered;
  asio::execution_context& query(asio::execution::context_t) const noexcept { return *context; }
  static constexpr asio::execution::blocking_t query(asio::execution::blocking_t) noexcept {
    return asio::execution::blocking.never;
  }
  template <class F>
  void execute(F&& f) const {
    [[maybe_unused]] auto taken = std::forward<F>(f);
    entered->store(true);
    for (;;) {
      pthread_testcancel();
      std::this_thread::sleep_for(1ms);
    }
  }
  bool operator==(const blocking_executor& other) const noexcept {
    return context == other.context;
  }
  bool operator!=(const blocking_executor& other) const noexcept { return !(*this == other); }
};
static_assert(asio::execution::is_executor<blocking_executor>::value);

template <typename Timer>
struct cancelled_run {
  asio::io_context* context;
  std::atomic<bool>* entered;
  outcome* result;
  census* handlers;
  int* seq;
  static void* body(void* p) {
    auto* self = static_cast<cancelled_run*>(p);
    Timer t(*self->context, 5ms);
    t.async_wait(asio::bind_executor(blocking_executor{self->context, self->entered},
                                     recorder(*self->result, *self->handlers, *self->seq)));
    self->context->run();
    return nullptr;
  }
};

} // namespace

// glibc cancels a thread by unwinding it with a foreign exception that every catch block on
// the way must rethrow (abi::__forced_unwind): here from a handler's executor blocked in
// execute() (a cancellation point) while the thread runs the context. The thread ends
// cancelled, the handler is never called, and it is destroyed with the context.
TEST_CASE_TEMPLATE("a thread cancelled while a handler's executor blocks in execute() unwinds "
                   "through the completion; the handler is never called and nothing leaks",
                   Timer, TIMER_TYPES) {
  census handlers;
  outcome res;
  int seq = 0;
  {
    asio::io_context ioc;
    std::atomic<bool> entered{false};
    cancelled_run<Timer> run{&ioc, &entered, &res, &handlers, &seq};
    pthread_t thread;
    REQUIRE(pthread_create(&thread, nullptr, &cancelled_run<Timer>::body, &run) == 0);
    const auto deadline = sclock::now() + 10s;
    while (!entered.load() && sclock::now() < deadline)
      std::this_thread::sleep_for(1ms);
    CHECK(entered.load());
    pthread_cancel(thread);
    void* status = nullptr;
    pthread_join(thread, &status);
    CHECK(status == PTHREAD_CANCELED);
  }
  CHECK(res.calls == 0);
  CHECK(handlers.live() == 0);
}
#endif

// =======================================================================================
// stop() and restart()
// =======================================================================================

TEST_CASE_TEMPLATE("io_context stop() and restart() with waits pending: nothing runs while "
                   "stopped, each wait completes exactly once after restart()",
                   Timer, TIMER_TYPES) {
  census handlers;
  int seq = 0;

  SUBCASE("stop() before run(): waits in the wheel, already due, and aborted stay queued") {
    std::vector<outcome> nearby(10), due(10), aborted(10), distant(10);
    {
      asio::io_context ioc;
      std::vector<std::unique_ptr<Timer>> timers;
      auto start = [&](outcome& r, auto expiry) {
        timers.push_back(std::make_unique<Timer>(ioc, expiry));
        r.expiry = timers.back()->expiry();
        timers.back()->async_wait(recorder(r, handlers, seq));
        return timers.back().get();
      };
      for (auto& r : nearby)
        start(r, 20ms);
      for (auto& r : due)
        start(r, -1s);
      for (auto& r : aborted)
        CHECK(start(r, kFar)->cancel() == 1);
      std::vector<Timer*> far_timers;
      for (auto& r : distant)
        far_timers.push_back(start(r, kFar));
      // Once the near ones are done, a later timer cancels the far ones.
      Timer closer(ioc, 60ms);
      std::size_t far_cancelled = 0;
      closer.async_wait([&](asio::error_code) {
        for (Timer* t : far_timers)
          far_cancelled += t->cancel();
      });

      ioc.stop();
      const auto r1 = guarded_run(ioc);
      CHECK(r1.handlers == 0);
      CHECK(r1.elapsed < kPrompt);
      CHECK(ioc.stopped());
      CHECK(seq == 0);
      std::this_thread::sleep_for(30ms); // the near ones come due while stopped
      CHECK(seq == 0);

      ioc.restart();
      const auto r2 = guarded_run(ioc);
      CHECK_PROMPT(r2);
      CHECK(far_cancelled == distant.size());
    }
    for (auto& r : nearby)
      CHECK_ONCE_WITH(r, kOk);
    for (auto& r : due)
      CHECK_ONCE_WITH(r, kOk);
    for (auto& r : aborted)
      CHECK_ONCE_WITH(r, kAborted);
    for (auto& r : distant)
      CHECK_ONCE_WITH(r, kAborted);
  }

  SUBCASE("stop() from a handler between two batches: the second waits for restart()") {
    std::vector<outcome> first(20), second(20);
    {
      asio::io_context ioc;
      const auto t0 = sclock::now();
      auto a = same_expiry<Timer>(ioc, 20, t0 + 10ms);
      auto b = same_expiry<Timer>(ioc, 20, t0 + 100ms);
      for (int i = 0; i < 20; ++i) {
        first[i].expiry = a[i]->expiry();
        a[i]->async_wait(recorder(first[i], handlers, seq));
        second[i].expiry = b[i]->expiry();
        b[i]->async_wait(recorder(second[i], handlers, seq));
      }
      Timer stopper(ioc, t0 + 30ms);
      sclock::time_point stopped_at{};
      stopper.async_wait([&](asio::error_code) {
        stopped_at = sclock::now();
        ioc.stop();
      });
      const auto r1 = guarded_run(ioc);
      CHECK_FALSE(r1.timed_out);
      CHECK(ioc.stopped());
      for (auto& r : first)
        CHECK_ONCE_WITH(r, kOk);
      // Unless this thread was preempted until the second batch was due too (then both
      // come due in one sweep of the heap, or one tick of the wheel: see KNOWN DIVERGENCE).
      const bool second_was_pending = stopped_at < b[0]->expiry();
      if (second_was_pending)
        for (auto& r : second)
          CHECK(r.calls == 0);
      else
        MESSAGE("preempted past the second batch's expiry: not checked");
      std::this_thread::sleep_until(t0 + 120ms); // the second batch is due while stopped
      if (second_was_pending)
        for (auto& r : second)
          CHECK(r.calls == 0);
      ioc.restart();
      const auto r2 = guarded_run(ioc);
      CHECK_PROMPT(r2);
    }
    for (auto& r : first)
      CHECK(r.calls == 1);
    for (auto& r : second)
      CHECK_ONCE_WITH(r, kOk);
  }

  SUBCASE("stop() from another thread while run() sleeps until a wait's expiry") {
    outcome r;
    {
      asio::io_context ioc;
      Timer t(ioc, 300ms);
      r.expiry = t.expiry();
      t.async_wait(recorder(r, handlers, seq));
      sclock::time_point stopped_by{};
      std::thread stopper([&] {
        std::this_thread::sleep_for(20ms);
        ioc.stop();
        stopped_by = sclock::now();
      });
      const auto r1 = guarded_run(ioc);
      stopper.join();
      CHECK_FALSE(r1.timed_out);
      CHECK(ioc.stopped());
      if (stopped_by < r.expiry) // else the stopper was preempted past the expiry
        CHECK(r.calls == 0);
      ioc.restart();
      const auto r2 = guarded_run(ioc);
      CHECK_FALSE(r2.timed_out);
    }
    CHECK_ONCE_WITH(r, kOk);
  }

  SUBCASE("stop() and restart() over and over while 300 waits come due") {
    constexpr int n = 300;
    std::vector<outcome> res(n);
    int slices = 0;
    {
      asio::io_context ioc;
      std::vector<std::unique_ptr<Timer>> timers;
      for (int i = 0; i < n; ++i) {
        // 0..59 ms, several per tick; every 7th is cancelled from a later slice.
        timers.push_back(std::make_unique<Timer>(ioc, std::chrono::microseconds(i * 200)));
        res[i].expiry = timers.back()->expiry();
        timers.back()->async_wait(recorder(res[i], handlers, seq));
      }
      const auto deadline = sclock::now() + kWatchdog;
      while (seq < n && sclock::now() < deadline) {
        asio::post(ioc, [&] { ioc.stop(); });
        guarded_run(ioc);
        ioc.restart();
        if (++slices == 10)
          for (int i = 0; i < n; i += 7)
            timers[i]->cancel();
        std::this_thread::sleep_for(1ms);
      }
      const auto r = guarded_run(ioc); // nothing left: returns at once
      CHECK_PROMPT(r);
    }
    MESSAGE(slices << " stop/restart slices");
    for (int i = 0; i < n; ++i) {
      CAPTURE(i);
      CHECK_ONCE_OK_OR_ABORTED(res[i]);
    }
  }

  CHECK(handlers.live() == 0);
}

// KNOWN DIVERGENCE (reported; may_fail keeps the suite green while it stands). wheel_timer
// completes all the waits of one tick from one scheduler operation (the driver's, or the
// drain's), where asio::steady_timer makes each completion its own operation. Observable:
//   * run_one() runs the whole batch, not one handler;
//   * a handler bound to a strand is dispatched to it, and runs inline; Asio captures an
//     exception thrown there (io_context executor's execute()) and rethrows it from run()
//     only once the batch is over: so the rest of the batch runs after the throw, and when
//     several handlers of the batch throw, run() throws one asio::multiple_exceptions
//     instead of each exception in turn (all but the first are lost).
//   * stop() from a handler of the batch ends run() within stop_check_interval (64)
//     handlers of the batch, not right after that handler: the batch asks
//     io_context::stopped(), which takes Asio's scheduler mutex, once per 64 handlers (the
//     promise is checked below, "stop() from a handler of a long batch").
// With asio::steady_timer, run() returns right after the handler that threw or called
// stop(), and run_one() runs exactly one handler.
TEST_CASE_TEMPLATE("KNOWN DIVERGENCE (run_one, strand throws, stop()): stop() or a "
                   "throw in handler #10 of a same-tick batch of 50 ends run() after it; "
                   "run_one() runs one handler of the batch" *
                       doctest::may_fail(),
                   Timer, TIMER_TYPES) {
  constexpr int n = 50;
  enum class mode { stop, run_one, strand_throw, strand_throw_every_tenth };
  mode m = mode::stop;
  SUBCASE("stop() from handler #10") {
    m = mode::stop;
  }
  SUBCASE("run_one() once all are due") {
    m = mode::run_one;
  }
  SUBCASE("handlers bound to a strand, #10 throws") {
    m = mode::strand_throw;
  }
  SUBCASE("handlers bound to a strand, every 10th throws") {
    m = mode::strand_throw_every_tenth;
  }

  census handlers;
  std::vector<outcome> res(n);
  int seq = 0;
  {
    asio::io_context ioc;
    auto strand = asio::make_strand(ioc);
    auto timers = same_expiry<Timer>(ioc, n, sclock::now() + 10ms);
    for (int i = 0; i < n; ++i) {
      res[i].expiry = timers[i]->expiry();
      auto h = [&, i, m, tok = census_token(handlers)](asio::error_code ec) {
        recorder(res[i], handlers, seq)(ec);
        if (m == mode::stop && seq == 10)
          ioc.stop();
        if ((m == mode::strand_throw && seq == 10) ||
            (m == mode::strand_throw_every_tenth && seq % 10 == 0))
          throw boom("handler #" + std::to_string(seq));
      };
      if (m == mode::strand_throw || m == mode::strand_throw_every_tenth)
        timers[i]->async_wait(asio::bind_executor(strand, std::move(h)));
      else
        timers[i]->async_wait(std::move(h));
    }
    switch (m) {
    case mode::stop: {
      const auto r = guarded_run(ioc);
      CHECK_FALSE(r.timed_out);
      CHECK(ioc.stopped());
      CHECK_MESSAGE(seq == 10, "handlers run after the one that called stop(): " << seq - 10);
      ioc.restart();
      guarded_run(ioc);
      break;
    }
    case mode::run_one: {
      std::this_thread::sleep_for(20ms); // all due
      const auto r = guarded(ioc, [&] { return ioc.run_one(); });
      CHECK(r.handlers == 1);
      CHECK_MESSAGE(seq == 1, "run_one() ran " << seq << " handlers of the batch");
      guarded_run(ioc);
      break;
    }
    case mode::strand_throw:
    case mode::strand_throw_every_tenth: {
      std::vector<std::string> thrown;
      for (int attempt = 0; attempt < 20; ++attempt) {
        try {
          guarded_run(ioc);
          break;
        } catch (const boom& e) {
          thrown.push_back(std::string(e.what()) + " after " + std::to_string(seq));
        } catch (const std::exception& e) {
          thrown.push_back(std::string("other: ") + e.what() + " after " + std::to_string(seq));
        }
        ioc.restart();
      }
      std::string got;
      for (const auto& t : thrown)
        got += "[" + t + "] ";
      std::string want;
      for (int k = 10; k <= (m == mode::strand_throw ? 10 : n); k += 10)
        want += "[handler #" + std::to_string(k) + " after " + std::to_string(k) + "] ";
      CHECK(got == want);
      break;
    }
    }
  }
  // What holds either way: each exactly once, never early.
  CHECK(seq == n);
  for (int i = 0; i < n; ++i) {
    CAPTURE(i);
    CHECK_ONCE_WITH(res[i], kOk);
  }
  CHECK(handlers.live() == 0);
}

// What stop() from a handler promises with either timer: run() returns soon after it, within
// the 64 handlers of a batch that wheel_timer completes between two looks at
// io_context::stopped() (Asio's timer: right after it), and the rest run after restart().
TEST_CASE_TEMPLATE("stop() from a handler of a long same-tick batch ends run() within 64 "
                   "handlers, and the rest run after restart()",
                   Timer, TIMER_TYPES) {
  constexpr int n = 300;
  constexpr int stopper = 10;
  census handlers;
  std::vector<outcome> res(n);
  int seq = 0;
  {
    asio::io_context ioc;
    auto timers = same_expiry<Timer>(ioc, n, sclock::now() + 10ms);
    for (int i = 0; i < n; ++i) {
      res[i].expiry = timers[i]->expiry();
      timers[i]->async_wait([&, i, tok = census_token(handlers)](asio::error_code ec) {
        recorder(res[i], handlers, seq)(ec);
        if (seq == stopper)
          ioc.stop();
      });
    }
    const auto r = guarded_run(ioc);
    CHECK_FALSE(r.timed_out);
    CHECK(ioc.stopped());
    const int after_stop = seq - stopper;
    CHECK_MESSAGE(after_stop >= 0, "run() returned before the handler that called stop()");
    CHECK_MESSAGE(after_stop < 64, after_stop << " handlers ran after the one that called stop()");
    if constexpr (std::is_same_v<Timer, asio::steady_timer>)
      CHECK(after_stop == 0);
    ioc.restart();
    guarded_run(ioc);
  }
  CHECK(seq == n);
  for (int i = 0; i < n; ++i) {
    CAPTURE(i);
    CHECK_ONCE_WITH(res[i], kOk);
  }
  CHECK(handlers.live() == 0);
}

#if defined(ASIO_HAS_CO_AWAIT)
// =======================================================================================
// The io_context destroyed with waits and coroutines pending
// =======================================================================================

namespace {

using namespace asio::experimental::awaitable_operators;

// What the coroutines and handlers of the destruction test record.
struct doomed_state {
  census frames;             // census_tokens living in coroutine frames (and in coroutine lambdas)
  census handlers;           // census_tokens owned by callback handlers
  int resumed = 0;           // coroutines that got past their co_await
  int invoked = 0;           // callback handlers called
  int spawn_completions = 0; // co_spawn completion handlers called
};

// Awaits a 1 h timer of its own, in its frame.
template <class Timer>
asio::awaitable<void> await_hour(doomed_state& s) {
  census_token in_frame(s.frames);
  Timer t(co_await asio::this_coro::executor, 1h);
  co_await t.async_wait(asio::use_awaitable);
  ++s.resumed;
}

// Awaits a 1 h timer through cancel_after(30 min): the deadline is a wheel wait.
template <class Timer>
asio::awaitable<void> await_cancel_after(doomed_state& s) {
  census_token in_frame(s.frames);
  Timer t(co_await asio::this_coro::executor, 1h);
  co_await t.async_wait(asio_wheel::cancel_after(30min, asio::use_awaitable));
  ++s.resumed;
}

// Two levels of frames: the outer awaits an || of a plain wait and a nested coroutine
// that awaits through cancel_after.
template <class Timer>
asio::awaitable<void> await_nested(doomed_state& s) {
  census_token in_frame(s.frames);
  Timer t(co_await asio::this_coro::executor, 1h);
  co_await (t.async_wait(asio::use_awaitable) || await_cancel_after<Timer>(s));
  ++s.resumed;
}

} // namespace

TEST_CASE_TEMPLATE("the io_context destroyed with waits and coroutines pending: the frames "
                   "are destroyed, nothing runs, nothing leaks",
                   Timer, TIMER_TYPES) {
  enum class when { never_run, suspended, stopped };
  when w = when::never_run;
  SUBCASE("before it ever ran") {
    w = when::never_run;
  }
  SUBCASE("after running until every coroutine is suspended") {
    w = when::suspended;
  }
  SUBCASE("after running, then stop() with an aborted and a due wait queued") {
    w = when::stopped;
  }

  doomed_state s;
  {
    auto ioc = std::make_unique<asio::io_context>();
    auto done = [&s](std::exception_ptr) { ++s.spawn_completions; };
    // The lambda's capture is a frame census token too: the lambda lives in co_spawn's
    // entry frame.
    asio::co_spawn(
        *ioc,
        [&s, tok = census_token(s.frames)]() -> asio::awaitable<void> {
          co_await await_hour<Timer>(s);
          ++s.resumed;
        },
        done);
    asio::co_spawn(*ioc, await_cancel_after<Timer>(s), done);
    asio::co_spawn(*ioc, await_nested<Timer>(s), done);

    // Plain waits: 1 h, 1 h through cancel_after, one due now, one to be aborted.
    Timer hour(*ioc, 1h), hour2(*ioc, 1h), due(*ioc, -1s), due2(*ioc, -1s), aborted(*ioc, 1h);
    auto h = [&s, tok = census_token(s.handlers)](asio::error_code) { ++s.invoked; };
    hour.async_wait(h);
    hour2.async_wait(asio_wheel::cancel_after(30min, h));
    due.async_wait(h);
    aborted.async_wait(h);

    if (w != when::never_run) {
      // Until every coroutine is suspended and the due wait has completed.
      for (const auto t0 = sclock::now();
           (s.invoked < 1 || s.frames.live() < 5) && sclock::now() - t0 < kWatchdog;)
        ioc->run_for(10ms);
      CHECK(s.invoked == 1); // the due one
      s.invoked = 0;
      // Suspended: the co_spawn lambda (in co_spawn's entry frame), and the frames of
      // await_hour, await_cancel_after, await_nested and its inner await_cancel_after.
      CHECK(s.frames.live() == 5);
      CHECK(s.frames.created >= 5);
    }
    // Queued, not delivered: an aborted wait and a due one.
    CHECK(aborted.cancel() == 1);
    due2.async_wait(h);
    if (w == when::stopped) {
      ioc->stop();
      CHECK(ioc->run() == 0);
      CHECK(ioc->stopped());
    }
    CHECK(s.invoked == 0);
    CHECK(s.resumed == 0);
    // The timers go first (an I/O object must not outlive its context); their aborted
    // waits are queued, never delivered.
  }
  // Everything is gone with the context: the coroutine frames (and the timers in them), the
  // handlers, the co_spawn completion handlers; nothing was resumed or called.
  CHECK(s.resumed == 0);
  CHECK(s.invoked == 0);
  CHECK(s.spawn_completions == 0);
  CHECK(s.frames.live() == 0);
  CHECK(s.handlers.live() == 0);
}
#endif // defined(ASIO_HAS_CO_AWAIT)

// =======================================================================================
// Timers destroyed from inside handlers
// =======================================================================================

TEST_CASE_TEMPLATE("a timer destroyed from inside another timer's handler: its far wait is "
                   "aborted, and run() returns promptly",
                   Timer, TIMER_TYPES) {
  census handlers;
  int seq = 0;
  outcome rb1, rb2, rslot;
  {
    asio::io_context ioc;
    Timer a(ioc, 5ms);
    auto b = std::make_unique<Timer>(ioc, kFar);
    asio::cancellation_signal sig;
    rb1.expiry = rb2.expiry = rslot.expiry = b->expiry();
    b->async_wait(recorder(rb1, handlers, seq));
    b->async_wait(recorder(rb2, handlers, seq));
    b->async_wait(asio::bind_cancellation_slot(sig.slot(), recorder(rslot, handlers, seq)));
    a.async_wait([&](asio::error_code) {
      b.reset();
      // After the abort there is nothing to cancel. Only for wheel_timer: Asio 1.22's
      // steady_timer keeps a pointer to the destroyed timer in the slot's handler, so this
      // emit would read freed memory there (ASan: heap-use-after-free in
      // timer_queue::cancel_timer_by_key).
      if constexpr (kSlotSurvivesTimer<Timer>)
        sig.emit(asio::cancellation_type::terminal);
    });
    const auto r = guarded_run(ioc);
    CHECK_PROMPT(r);
  }
  CHECK_ONCE_WITH(rb1, kAborted);
  CHECK_ONCE_WITH(rb2, kAborted);
  CHECK_ONCE_WITH(rslot, kAborted);
  CHECK(handlers.live() == 0);
}

TEST_CASE_TEMPLATE("a timer destroyed inside its own handler: its other wait of the same "
                   "expiry completes once with success, a wait started in the handler is "
                   "aborted",
                   Timer, TIMER_TYPES) {
  census handlers;
  int seq = 0;
  outcome r1, r2, r3;
  std::size_t reset_count = 99;
  {
    asio::io_context ioc;
    auto t = std::make_unique<Timer>(ioc, 5ms);
    r1.expiry = r2.expiry = t->expiry();
    t->async_wait([&, tok = census_token(handlers)](asio::error_code ec) {
      recorder(r1, handlers, seq)(ec);
      // r2's wait expired with this one: it is already on its way, nothing to abort.
      reset_count = t->expires_after(kFar);
      r3.expiry = t->expiry();
      t->async_wait(recorder(r3, handlers, seq));
      t.reset(); // destroys the timer whose handler is running
    });
    t->async_wait(recorder(r2, handlers, seq));
    const auto r = guarded_run(ioc);
    CHECK_PROMPT(r);
  }
  CHECK(reset_count == 0);
  CHECK_ONCE_WITH(r1, kOk);
  CHECK_ONCE_WITH(r2, kOk);
  CHECK_ONCE_WITH(r3, kAborted);
  CHECK(r1.order < r2.order); // the waits of one timer complete in the order started
  CHECK(handlers.live() == 0);
}

TEST_CASE_TEMPLATE("timers destroyed by a handler of the same expiry batch, later in it: each "
                   "wait completes exactly once, with success (as asio::steady_timer does)",
                   Timer, TIMER_TYPES) {
  constexpr int n = 50;
  enum class kind { on_context, on_strand, with_slot };
  census handlers;
  int seq = 0;
  std::vector<outcome> first(n), second(n);
  int destroyer = -1;
  std::vector<std::size_t> counts;
  {
    asio::io_context ioc;
    auto strand = asio::make_strand(ioc);
    std::vector<asio::cancellation_signal> sigs(n);
    auto timers = same_expiry<Timer>(ioc, n, sclock::now() + 10ms);
    for (int i = 0; i < n; ++i) {
      const kind k = static_cast<kind>(i % 3);
      first[i].expiry = second[i].expiry = timers[i]->expiry();
      // The first handler to run (whichever that is: Asio's heap does not order equal
      // expiries) destroys every other timer of the batch, then emits every slot
      // (wheel_timer only).
      auto h = [&, i, tok = census_token(handlers)](asio::error_code ec) {
        recorder(first[i], handlers, seq)(ec);
        if (destroyer != -1)
          return;
        destroyer = i;
        for (int j = 0; j < n; ++j)
          if (j != i) {
            counts.push_back(timers[j]->cancel_one()); // nothing pending any more: 0
            timers[j].reset();
          }
        // Nothing left to cancel. Only for wheel_timer (Asio 1.22's steady_timer would read
        // the destroyed timers: see kSlotSurvivesTimer).
        if constexpr (kSlotSurvivesTimer<Timer>)
          for (auto& sig : sigs)
            sig.emit(asio::cancellation_type::terminal);
      };
      switch (k) {
      case kind::on_context:
        timers[i]->async_wait(std::move(h));
        timers[i]->async_wait(recorder(second[i], handlers, seq));
        break;
      case kind::on_strand:
        timers[i]->async_wait(asio::bind_executor(strand, std::move(h)));
        timers[i]->async_wait(asio::bind_executor(strand, recorder(second[i], handlers, seq)));
        break;
      case kind::with_slot:
        timers[i]->async_wait(std::move(h));
        timers[i]->async_wait(
            asio::bind_cancellation_slot(sigs[i].slot(), recorder(second[i], handlers, seq)));
        break;
      }
    }
    const auto r = guarded_run(ioc);
    CHECK_PROMPT(r);
  }
  CHECK(destroyer != -1);
  CHECK(counts.size() == static_cast<std::size_t>(n - 1));
  for (std::size_t c : counts)
    CHECK(c == 0);
  CHECK(seq == 2 * n);
  for (int i = 0; i < n; ++i) {
    CAPTURE(i);
    CHECK_ONCE_WITH(first[i], kOk);
    CHECK_ONCE_WITH(second[i], kOk);
  }
  CHECK(handlers.live() == 0);
}

TEST_CASE_TEMPLATE("a timer destroyed from a handler after its wait was aborted but before the "
                   "abort was delivered: completes once, aborted",
                   Timer, TIMER_TYPES) {
  census handlers;
  int seq = 0;
  outcome rb, rc;
  std::size_t n = 99;
  {
    asio::io_context ioc;
    Timer a(ioc, 5ms);
    auto b = std::make_unique<Timer>(ioc, kFar);
    auto c = std::make_unique<Timer>(ioc, kFar);
    rb.expiry = b->expiry();
    rc.expiry = c->expiry();
    b->async_wait(recorder(rb, handlers, seq));
    c->async_wait(recorder(rc, handlers, seq));
    a.async_wait([&](asio::error_code) {
      n = b->cancel();
      b.reset();
      c->expires_after(kFar); // aborts c's wait too; then c is destroyed idle
      c.reset();
    });
    const auto r = guarded_run(ioc);
    CHECK_PROMPT(r);
  }
  CHECK(n == 1);
  CHECK_ONCE_WITH(rb, kAborted);
  CHECK_ONCE_WITH(rc, kAborted);
  CHECK(handlers.live() == 0);
}

// =======================================================================================
// Deadlines at the clock's extremes
// =======================================================================================

TEST_CASE_TEMPLATE("a deadline at time_point::max(): pending, never completes by itself, "
                   "aborted promptly by cancel(), per-operation cancellation or destruction",
                   Timer, TIMER_TYPES) {
  using tp = typename Timer::time_point;
  using dur = typename Timer::duration;
  census handlers;
  int seq = 0;
  outcome rmax, rafter, rslot, rdestroyed, rnear;
  std::size_t cancelled = 99;
  {
    asio::io_context ioc;
    Timer tmax(ioc);
    CHECK(tmax.expires_at(tp::max()) == 0);
    CHECK(tmax.expiry() == tp::max());

    // expires_after(duration::max()) saturates, as does the constructor's.
    Timer tafter(ioc);
    CHECK(tafter.expires_after(dur::max()) == 0);
    CHECK(tafter.expiry() == tp::max());
    Timer tctor(ioc, dur::max());
    CHECK(tctor.expiry() == tp::max());
    Timer tnearly(ioc);
    tnearly.expires_after(dur::max() - 1ms); // now + (max - 1 ms) > max as well
    CHECK(tnearly.expiry() == tp::max());

    auto tdestroyed = std::make_unique<Timer>(ioc, tp::max());
    asio::cancellation_signal sig;
    Timer nearby(ioc, 5ms);

    rmax.expiry = rafter.expiry = rslot.expiry = rdestroyed.expiry = tp::max();
    rnear.expiry = nearby.expiry();
    tmax.async_wait(recorder(rmax, handlers, seq));
    tafter.async_wait(recorder(rafter, handlers, seq));
    tctor.async_wait(asio::bind_cancellation_slot(sig.slot(), recorder(rslot, handlers, seq)));
    tdestroyed->async_wait(recorder(rdestroyed, handlers, seq));
    nearby.async_wait(recorder(rnear, handlers, seq));

    // A while with the max waits pending: only the near one completes.
    for (const auto t0 = sclock::now(); rnear.calls == 0 && sclock::now() - t0 < kWatchdog;)
      ioc.run_for(10ms);
    ioc.run_for(30ms);
    CHECK_ONCE_WITH(rnear, kOk);
    CHECK(rmax.calls == 0);
    CHECK(rafter.calls == 0);
    CHECK(rslot.calls == 0);
    CHECK(rdestroyed.calls == 0);

    ioc.restart();
    asio::post(ioc, [&] {
      cancelled = tmax.cancel() + tafter.cancel();
      sig.emit(asio::cancellation_type::terminal);
      tdestroyed.reset();
    });
    const auto r = guarded_run(ioc);
    CHECK_PROMPT(r);
  }
  CHECK(cancelled == 2);
  CHECK_ONCE_WITH(rmax, kAborted);
  CHECK_ONCE_WITH(rafter, kAborted);
  CHECK_ONCE_WITH(rslot, kAborted);
  CHECK_ONCE_WITH(rdestroyed, kAborted);
  CHECK(handlers.live() == 0);
}

TEST_CASE_TEMPLATE("deadlines at and towards time_point::min() complete at once, with success",
                   Timer, TIMER_TYPES) {
  using tp = typename Timer::time_point;
  using dur = typename Timer::duration;
  census handlers;
  int seq = 0;
  outcome rmin, rafter, rzero;
  {
    asio::io_context ioc;
    Timer tmin(ioc, tp::min());
    CHECK(tmin.expiry() == tp::min());
    Timer tafter(ioc);
    const auto before = sclock::now();
    tafter.expires_after(dur::min()); // now + min: far in the past (no overflow: now > 0)
    const auto after = sclock::now();
    CHECK(tafter.expiry() >= before + dur::min());
    CHECK(tafter.expiry() <= after + dur::min());
    Timer tzero(ioc, tp());
    rmin.expiry = tmin.expiry();
    rafter.expiry = tafter.expiry();
    rzero.expiry = tzero.expiry();
    tmin.async_wait(recorder(rmin, handlers, seq));
    tafter.async_wait(recorder(rafter, handlers, seq));
    tzero.async_wait(recorder(rzero, handlers, seq));
    CHECK(seq == 0); // never inside async_wait
    const auto r = guarded_run(ioc);
    CHECK_PROMPT(r);
  }
  CHECK_ONCE_WITH(rmin, kOk);
  CHECK_ONCE_WITH(rafter, kOk);
  CHECK_ONCE_WITH(rzero, kOk);
  CHECK(handlers.live() == 0);
}

TEST_CASE("wheel_timer: time_point::max() with the coarsest (60 s), an odd (7 ns) and the "
          "finest (1 ns) tick: pending until cancelled, a due wait beside it still completes") {
  using asio_wheel::wheel_timer;
  const wheel_timer::duration ticks[] = {60s, 7ns, 1ns};
  for (const auto tick : ticks) {
    CAPTURE(tick.count());
    census handlers;
    int seq = 0;
    outcome rmax, rdue;
    {
      asio::io_context ioc;
      wheel_timer::set_tick(ioc, tick);
      CHECK(wheel_timer::tick(ioc) == tick);
      wheel_timer tmax(ioc, wheel_timer::time_point::max());
      wheel_timer tdue(ioc, -1ms);
      rmax.expiry = tmax.expiry();
      rdue.expiry = tdue.expiry();
      tmax.async_wait(recorder(rmax, handlers, seq));
      tdue.async_wait(recorder(rdue, handlers, seq));
      for (const auto t0 = sclock::now(); rdue.calls == 0 && sclock::now() - t0 < kWatchdog;)
        ioc.run_for(10ms);
      ioc.run_for(20ms);
      CHECK_ONCE_WITH(rdue, kOk);
      CHECK(rmax.calls == 0);
      ioc.restart();
      asio::post(ioc, [&] { CHECK(tmax.cancel() == 1); });
      const auto r = guarded_run(ioc);
      CHECK_PROMPT(r);
    }
    CHECK_ONCE_WITH(rmax, kAborted);
    CHECK(handlers.live() == 0);
  }
}

// =======================================================================================
// Tick configuration
// =======================================================================================

namespace {

// A clock counting whole seconds: its extreme durations overflow in nanoseconds.
struct seconds_clock {
  using duration = std::chrono::seconds;
  using rep = duration::rep;
  using period = duration::period;
  using time_point = std::chrono::time_point<seconds_clock>;
  static constexpr bool is_steady = true;
  static time_point now() noexcept {
    return time_point(
        std::chrono::duration_cast<duration>(std::chrono::steady_clock::now().time_since_epoch()));
  }
};

} // namespace

TEST_CASE("basic_wheel_timer of a clock in seconds: an extreme bad tick is reported as given "
          "(no overflow on the way to the message)") {
  using timer = asio_wheel::basic_wheel_timer<seconds_clock>;
  asio::io_context ioc;
  const std::pair<std::chrono::seconds, const char*> bad[] = {
      {std::chrono::seconds::max(), "9223372036854775807 x 1/1 s"},
      {std::chrono::seconds::min(), "-9223372036854775808 x 1/1 s"},
      {std::chrono::seconds(61), "61000000000 ns"}};
  for (const auto& [tick, shown] : bad) {
    std::string what;
    try {
      timer::set_tick(ioc, tick);
      FAIL("set_tick accepted an invalid tick");
    } catch (const std::invalid_argument& e) {
      what = e.what();
    }
    CAPTURE(what);
    CHECK(what.find(shown) != std::string::npos);
    CHECK(what.find("at most 60 s") != std::string::npos);
  }
  CHECK_NOTHROW(timer::set_tick(ioc, std::chrono::seconds(60)));
  CHECK(timer::tick(ioc) == std::chrono::seconds(60));
}

TEST_CASE("wheel_timer: a bad tick (zero, negative, over 60 s) throws std::invalid_argument "
          "saying what is allowed, and changes nothing") {
  using asio_wheel::wheel_timer;
  using dur = wheel_timer::duration;
  asio::io_context ioc;
  const dur before = wheel_timer::tick(ioc);
  CHECK(before == 1ms);
  const dur bad[] = {dur::zero(), -1ns, -1s, dur::min(), 60s + 1ns, 61s, 1h, dur::max()};
  for (const dur tick : bad) {
    CAPTURE(tick.count());
    std::string what;
    try {
      wheel_timer::set_tick(ioc, tick);
      FAIL("set_tick accepted an invalid tick");
    } catch (const std::invalid_argument& e) {
      what = e.what();
    } catch (const std::exception& e) {
      FAIL("set_tick threw the wrong type: " << e.what());
    }
    CAPTURE(what);
    CHECK(what.find("positive") != std::string::npos);
    CHECK(what.find("60 s") != std::string::npos);
    CHECK(wheel_timer::tick(ioc) == before);
  }
  // The bounds themselves are accepted.
  CHECK_NOTHROW(wheel_timer::set_tick(ioc, 60s));
  CHECK(wheel_timer::tick(ioc) == 60s);
  CHECK_NOTHROW(wheel_timer::set_tick(ioc, 1ns));
  CHECK(wheel_timer::tick(ioc) == 1ns);
}

// The tick policy (README, basic_wheel_timer::set_tick): the tick of a context is set
// before its first wait; once the wheel has served a wait -- pending, delivered or not, or
// long completed -- changing it throws std::logic_error (setting the current value is
// allowed). An invalid value is rejected as such first.
TEST_CASE("wheel_timer: changing the tick once the context has served a wait (pending or "
          "not) throws std::logic_error, and the waits are unaffected") {
  using asio_wheel::wheel_timer;
  census handlers;
  int seq = 0;
  asio::io_context ioc;

  auto expect_logic_error = [&](wheel_timer::duration tick) {
    std::string what;
    try {
      wheel_timer::set_tick(ioc, tick);
      FAIL("set_tick changed the tick of a wheel that has served a wait");
    } catch (const std::logic_error& e) {
      what = e.what();
      // invalid_argument derives from logic_error: it must be the plain one here.
      CHECK(dynamic_cast<const std::invalid_argument*>(&e) == nullptr);
    }
    CAPTURE(what);
    CHECK(what.find("first wait") != std::string::npos); // says what is allowed
    CHECK(wheel_timer::tick(ioc) == 1ms);
  };

  SUBCASE("a wait in the wheel") {
    outcome r;
    wheel_timer t(ioc, 30ms);
    r.expiry = t.expiry();
    t.async_wait(recorder(r, handlers, seq));
    expect_logic_error(10ms);
    // An invalid value still says so first.
    CHECK_THROWS_AS(wheel_timer::set_tick(ioc, 0ns), std::invalid_argument);
    // The same value is no change.
    CHECK_NOTHROW(wheel_timer::set_tick(ioc, 1ms));
    const auto rr = guarded_run(ioc);
    CHECK_PROMPT(rr);
    CHECK_ONCE_WITH(r, kOk);
    CHECK(r.at < r.expiry + kPrompt);
  }
  SUBCASE("an aborted wait not delivered yet") {
    outcome r;
    wheel_timer t(ioc, kFar);
    r.expiry = t.expiry();
    t.async_wait(recorder(r, handlers, seq));
    CHECK(t.cancel() == 1);
    expect_logic_error(10ms);
    const auto rr = guarded_run(ioc);
    CHECK_PROMPT(rr);
    CHECK_ONCE_WITH(r, kAborted);
  }
  SUBCASE("a wait already due, not delivered yet") {
    outcome r;
    wheel_timer t(ioc, -1s);
    r.expiry = t.expiry();
    t.async_wait(recorder(r, handlers, seq));
    expect_logic_error(10ms);
    const auto rr = guarded_run(ioc);
    CHECK_PROMPT(rr);
    CHECK_ONCE_WITH(r, kOk);
  }
  SUBCASE("a wait through cancel_after (its deadline is a wheel wait)") {
    outcome r;
    asio::steady_timer t(ioc, 20ms);
    r.expiry = t.expiry();
    t.async_wait(asio_wheel::cancel_after(kFar, recorder(r, handlers, seq)));
    expect_logic_error(10ms);
    const auto rr = guarded_run(ioc);
    CHECK_PROMPT(rr);
    CHECK_ONCE_WITH(r, kOk);
  }
  // Everything has completed, nothing is pending: the tick is still fixed.
  expect_logic_error(10ms);
  CHECK_NOTHROW(wheel_timer::set_tick(ioc, 1ms));
  CHECK(handlers.live() == 0);
}

TEST_CASE("wheel_timer: a tick set before the first wait is the one used") {
  using asio_wheel::wheel_timer;
  census handlers;
  int seq = 0;

  // Coarse: a 1 ms wait rounds up to the first 50 ms tick of the wheel, whose tick 0 is no
  // earlier than set_tick(): so it completes no sooner than 50 ms after it (with the
  // default 1 ms tick it would take about 1 ms).
  {
    asio::io_context ioc;
    wheel_timer::set_tick(ioc, 7ms); // any number of times before the first wait
    const auto changed_at = sclock::now();
    REQUIRE_NOTHROW(wheel_timer::set_tick(ioc, 50ms));
    CHECK(wheel_timer::tick(ioc) == 50ms);
    outcome r;
    wheel_timer t(ioc, 1ms);
    r.expiry = t.expiry();
    t.async_wait(recorder(r, handlers, seq));
    CHECK_PROMPT(guarded_run(ioc));
    CHECK_ONCE_WITH(r, kOk);
    CHECK(r.at - changed_at >= 50ms);
  }

  // Fine (set explicitly, then back to the default before the first wait): the best of
  // five 1 ms waits is well under the coarse tick.
  {
    asio::io_context ioc;
    wheel_timer::set_tick(ioc, 50ms);
    REQUIRE_NOTHROW(wheel_timer::set_tick(ioc, 1ms));
    CHECK(wheel_timer::tick(ioc) == 1ms);
    sclock::duration best = sclock::duration::max();
    for (int i = 0; i < 5; ++i) {
      outcome r;
      wheel_timer t(ioc, 1ms);
      const auto started = sclock::now();
      r.expiry = t.expiry();
      t.async_wait(recorder(r, handlers, seq));
      CHECK_PROMPT(guarded_run(ioc));
      ioc.restart();
      CHECK_ONCE_WITH(r, kOk);
      best = std::min(best, r.at - started);
    }
    CHECK(best < 40ms);
  }
  CHECK(handlers.live() == 0);
}

// =======================================================================================
// A driver left armed
// =======================================================================================

// Regression: wheel_service::retarget() (idle_timer::set_timeout()) used to unlink the
// entry before completing the wait when the new deadline had already passed, so the
// emptied wheel left the driver armed for the old deadline (1 h here) and run() hung.
TEST_CASE("idle_timer::set_timeout() to a deadline the wheel has already passed completes "
          "the wait, and run() then returns at once") {
  census handlers;
  int seq = 0;
  outcome r;
  {
    asio::io_context ioc;
    asio_wheel::idle_timer idle(ioc, 1h); // the driver is armed for its deadline, 1 h
    asio_wheel::wheel_timer nearby(ioc, 20ms);
    r.expiry = idle.last_activity() + 1ms;
    idle.async_wait(recorder(r, handlers, seq));
    // When `near` expires the wheel has advanced to ~20 ms, past last_activity() + 1 ms.
    nearby.async_wait([&](asio::error_code) { idle.set_timeout(1ms); });
    const auto rr = guarded_run(ioc, 2s);
    CHECK_MESSAGE(!rr.timed_out, "run() did not return: the driver is still armed for 1 h");
    CHECK(rr.elapsed < 1s);
  }
  CHECK_ONCE_WITH(r, kOk);
  CHECK(handlers.live() == 0);
}
