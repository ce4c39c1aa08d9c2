//
// executor_matrix_mt_test.cpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// The executor matrix where several threads run the context: a thread_pool (its executor
// and strands), an io_context run by two threads (its executor, strands, the legacy
// io_context::strand, a user's executor), each with its outstanding_work.tracked variant
// (the legacy strand has no properties), as the timer's executor and as the handler's
// bound executor; a user's own execution context, of a kind neither Asio nor the wheel
// knows; and asio::system_executor. Every cell is a TEST_CASE_TEMPLATE over Asio's
// basic_waitable_timer and the wheel's basic_wheel_timer rebound to that executor, and
// checks:
//
//   * where the handler runs, and that it is called exactly once, with success at expiry
//     and operation_aborted after cancel();
//   * that unrelated handlers are not serialized with it: the handler of the cell's timer
//     blocks until the handler of an unrelated timer on the context's own executor, due
//     later, has run, which another thread of the context is free to do. A wheel whose
//     driver ran in the cell's strand would never get there: the wait is bounded, so that
//     shows as a failed check, not a hang. The unrelated handler must not run inside a
//     strand or a user's executor either.
//
// The unrelated timer is due later than the cell's, not at the same time: waits that
// expire in the same driver turn complete from one handler, one after another (README,
// "Batched completions").
//

#include <asio_wheel/wheel_timer.hpp>

#include <asio/any_io_executor.hpp>
#include <asio/bind_executor.hpp>
#include <asio/error.hpp>
#include <asio/execution.hpp>
#include <asio/io_context.hpp>
#include <asio/io_context_strand.hpp>
#include <asio/prefer.hpp>
#include <asio/strand.hpp>
#include <asio/system_executor.hpp>
#include <asio/thread_pool.hpp>

#include <doctest/doctest.h>

#include "asio_test_support.hpp"
#include "executor_test_support.hpp"

#include <atomic>
#include <chrono>
#include <cstddef>
#include <filesystem>
#include <memory>
#include <thread>

namespace {

using namespace std::chrono_literals;
using namespace asio_wheel::test;

constexpr auto kTracked = asio::execution::outstanding_work.tracked;

// How long the cell's handler waits for the unrelated one: far longer than the 95 ms
// between their expiries, even under TSan on a machine that stalls the process for seconds.
#if defined(ASIO_WHEEL_TEST_SANITIZED)
constexpr auto kBlock = 15s;
#else
constexpr auto kBlock = 10s;
#endif

// What one handler saw; written by the handler, read by the test once `done`.
struct seen {
  std::atomic<int> calls{0};
  asio::error_code ec;
  bool where = false;
  std::atomic<bool> done{false};

  template <class Where>
  void complete(asio::error_code e, Where& where_fn) {
    ec = e;
    where = where_fn();
    calls.fetch_add(1, std::memory_order_relaxed);
  }
  void finish() { done.store(true, std::memory_order_release); }
};

// Starts the cell's waits and the unrelated one on a context that other threads run; waits
// for all of them; checks. `Bind` makes the cell's handlers: identity for the timer-executor
// role, bind_executor(cell executor, h) for the bound-executor role. `Timer` is the type of
// the cell's timers, `plain` the context's own executor.
template <class Family, class Timer, class Plain, class Where, class Bind>
void check_cell(Timer& t, Timer& c, const Plain& plain, Where where, bool exclusive, Bind bind) {
  using plain_timer = typename Family::template timer<asio::any_io_executor>;
  seen fired, aborted, unrelated;
  std::atomic<bool> saw_unrelated{false};
  {
    // 95 ms after the cell's (5 ms), so that it falls in a later turn of the wheel than the
    // cell's, whose handler blocks the thread that runs it until this one completes: waits
    // due in one turn complete one after another on one thread ("Batched completions" in
    // docs/semantics.md), so a loaded machine that ran the turn that late would block both.
    plain_timer u(plain, 100ms + kPlatformTimerSlack);
    // The cell's timer starts the context's first wait: a wheel chooses its home then.
    t.async_wait(bind([&](asio::error_code ec) {
      fired.complete(ec, where);
      saw_unrelated = wait_until(unrelated.done, kBlock);
      fired.finish();
    }));
    c.async_wait(bind([&](asio::error_code ec) {
      aborted.complete(ec, where);
      aborted.finish();
    }));
    u.async_wait([&](asio::error_code ec) {
      unrelated.complete(ec, where);
      unrelated.finish();
    });
    CHECK(c.cancel() == 1);
    const bool all_done = wait_until(fired.done, 2 * kBlock) &&
                          wait_until(unrelated.done, kBlock) && wait_until(aborted.done, kBlock);
    REQUIRE(all_done);
  }
  CHECK(fired.calls == 1);
  CHECK(fired.ec == kOk);
  CHECK(fired.where);
  CHECK(saw_unrelated);
  CHECK(aborted.calls == 1);
  CHECK(aborted.ec == kAborted);
  CHECK(aborted.where);
  CHECK(unrelated.calls == 1);
  CHECK(unrelated.ec == kOk);
  if (exclusive)
    CHECK_FALSE(unrelated.where);
}

// The cell's executor as the timer's.
template <class Family>
struct as_timer_executor {
  template <class Executor, class Plain, class Where>
  void operator()(const Executor& ex, const Plain& plain, Where where, bool exclusive) const {
    using timer = typename Family::template timer<Executor>;
    timer t(ex, 5ms);
    timer c(ex, kFar);
    check_cell<Family>(t, c, plain, where, exclusive, [](auto h) { return h; });
  }
};

// The cell's executor bound to handlers of timers on the context's own executor.
template <class Family>
struct as_bound_executor {
  template <class Executor, class Plain, class Where>
  void operator()(const Executor& ex, const Plain& plain, Where where, bool exclusive) const {
    using timer = typename Family::template timer<asio::any_io_executor>;
    timer t(plain, 5ms);
    timer c(plain, kFar);
    check_cell<Family>(t, c, plain, where, exclusive,
                       [&ex](auto h) { return asio::bind_executor(ex, std::move(h)); });
  }
};

// The rows of a thread_pool.
template <class Check>
void thread_pool_cells(asio::thread_pool& pool, Check check) {
  const auto plain = pool.get_executor();
  const auto on_pool = [plain] { return plain.running_in_this_thread(); };
  const auto strand = asio::make_strand(pool);
  const auto in_strand = [strand] { return strand.running_in_this_thread(); };

  SUBCASE("thread_pool executor") {
    check(plain, plain, on_pool, false);
  }
  SUBCASE("thread_pool executor, tracked") {
    check(asio::prefer(plain, kTracked), plain, on_pool, false);
  }
  SUBCASE("any_io_executor(thread_pool executor)") {
    check(asio::any_io_executor(plain), plain, on_pool, false);
  }
  SUBCASE("any_io_executor(thread_pool executor, tracked)") {
    check(asio::any_io_executor(asio::prefer(plain, kTracked)), plain, on_pool, false);
  }
  SUBCASE("thread_pool strand") {
    check(strand, plain, in_strand, true);
  }
  SUBCASE("thread_pool strand, tracked") {
    check(asio::prefer(strand, kTracked), plain, in_strand, true);
  }
  // The first wait of the pool on a strand: it became the wheel's home at 5e44cd9.
  SUBCASE("any_io_executor(thread_pool strand)") {
    check(asio::any_io_executor(strand), plain, in_strand, true);
  }
  SUBCASE("any_io_executor(thread_pool strand, tracked)") {
    check(asio::any_io_executor(asio::prefer(strand, kTracked)), plain, in_strand, true);
  }
}

// The rows of an io_context.
template <class Check>
void io_context_cells(asio::io_context& ioc, Check check) {
  const auto plain = ioc.get_executor();
  const auto on_context = [plain] { return plain.running_in_this_thread(); };
  const auto strand = asio::make_strand(ioc);
  const auto in_strand = [strand] { return strand.running_in_this_thread(); };
  const user_executor<asio::io_context::executor_type> user(plain);
  const auto in_user = [] { return in_user_executor(); };

  SUBCASE("io_context executor") {
    check(plain, plain, on_context, false);
  }
  SUBCASE("io_context executor, tracked") {
    check(asio::prefer(plain, kTracked), plain, on_context, false);
  }
  SUBCASE("any_io_executor(io_context executor)") {
    check(asio::any_io_executor(plain), plain, on_context, false);
  }
  SUBCASE("any_io_executor(io_context executor, tracked)") {
    check(asio::any_io_executor(asio::prefer(plain, kTracked)), plain, on_context, false);
  }
  SUBCASE("strand") {
    check(strand, plain, in_strand, true);
  }
  SUBCASE("strand, tracked") {
    check(asio::prefer(strand, kTracked), plain, in_strand, true);
  }
  SUBCASE("any_io_executor(strand)") {
    check(asio::any_io_executor(strand), plain, in_strand, true);
  }
  // It became the wheel's home at 5e44cd9.
  SUBCASE("any_io_executor(strand, tracked)") {
    check(asio::any_io_executor(asio::prefer(strand, kTracked)), plain, in_strand, true);
  }
  SUBCASE("legacy io_context::strand") {
    asio::io_context::strand legacy(ioc);
    check(
        legacy, plain, [&legacy] { return legacy.running_in_this_thread(); }, true);
  }
  SUBCASE("user executor") {
    check(user, plain, in_user, true);
  }
  SUBCASE("user executor, tracked") {
    check(asio::prefer(user, kTracked), plain, in_user, true);
  }
  SUBCASE("any_io_executor(user executor)") {
    check(asio::any_io_executor(user), plain, in_user, true);
  }
  SUBCASE("any_io_executor(user executor, tracked)") {
    check(asio::any_io_executor(asio::prefer(user, kTracked)), plain, in_user, true);
  }
}

} // namespace

TEST_CASE_TEMPLATE("executor matrix, thread_pool of 2: the cell's executor as the timer's", Family,
                   TIMER_FAMILIES) {
  asio::thread_pool pool(2);
  thread_pool_cells(pool, as_timer_executor<Family>());
  pool.join();
}

TEST_CASE_TEMPLATE("executor matrix, thread_pool of 2: the cell's executor bound to the handler",
                   Family, TIMER_FAMILIES) {
  asio::thread_pool pool(2);
  thread_pool_cells(pool, as_bound_executor<Family>());
  pool.join();
}

TEST_CASE_TEMPLATE("executor matrix, io_context run by 2 threads: the cell's executor as the "
                   "timer's",
                   Family, TIMER_FAMILIES) {
  asio::io_context ioc;
  runner_threads threads(ioc, 2, kWatchdog);
  io_context_cells(ioc, as_timer_executor<Family>());
  CHECK(threads.join());
}

TEST_CASE_TEMPLATE("executor matrix, io_context run by 2 threads: the cell's executor bound to "
                   "the handler",
                   Family, TIMER_FAMILIES) {
  asio::io_context ioc;
  runner_threads threads(ioc, 2, kWatchdog);
  io_context_cells(ioc, as_bound_executor<Family>());
  CHECK(threads.join());
}

// -------------------------------------------------------------------------------------------
// A user's own execution context
// -------------------------------------------------------------------------------------------

// Neither an io_context nor a thread_pool: Asio's timer service runs a scheduler of its own
// for it; the wheel, a thread of its own. Handlers still run on the timer's executor, and
// pending ones are destroyed, not called, with the context.
TEST_CASE_TEMPLATE("a user's own execution context: handlers run on its executor, once, and "
                   "pending ones go with it",
                   Family, TIMER_FAMILIES) {
  int destroyed = 0;
  {
    own_context ctx;
    const auto ex = ctx.get_executor();
    const auto in_own = [ex] { return in_user_executor() && ex.running_in_this_thread(); };
    seen fired, aborted, erased;

    auto run = [&](auto& t, auto& c, auto& e) {
      t.async_wait([&](asio::error_code ec) {
        fired.complete(ec, in_own);
        fired.finish();
      });
      c.async_wait([&](asio::error_code ec) {
        aborted.complete(ec, in_own);
        aborted.finish();
      });
      e.async_wait([&](asio::error_code ec) {
        erased.complete(ec, in_own);
        erased.finish();
      });
      c.cancel();
      REQUIRE(wait_until(fired.done, kBlock));
      REQUIRE(wait_until(aborted.done, kBlock));
      REQUIRE(wait_until(erased.done, kBlock));
    };

    SUBCASE("the context's executor") {
      typename Family::template timer<own_context::executor_type> t(ex, 5ms), c(ex, kFar),
          e(ex, 10ms);
      run(t, c, e);
    }
    SUBCASE("the context's executor, in an any_io_executor") {
      const asio::any_io_executor any(ex);
      typename Family::template timer<asio::any_io_executor> t(any, 5ms), c(any, kFar),
          e(any, 10ms);
      run(t, c, e);
    }
    CHECK(fired.calls == 1);
    CHECK(fired.ec == kOk);
    CHECK(fired.where);
    CHECK(aborted.calls == 1);
    CHECK(aborted.ec == kAborted);
    CHECK(aborted.where);
    CHECK(erased.calls == 1);
    CHECK(erased.ec == kOk);
    CHECK(erased.where);

    // A wait pending when the context goes: its handler is destroyed without being called.
    // The timer is owned by its handler, which is how Asio lets a wait outlive its timer
    // object's scope.
    auto pending =
        std::make_shared<typename Family::template timer<own_context::executor_type>>(ex, kFar);
    pending->async_wait([pending, token = std::make_shared<life_token>(destroyed)](
                            asio::error_code) { FAIL("a handler called after its context went"); });
    pending.reset();
  }
  CHECK(destroyed == 1);
}

// asio::system_executor: its context is Asio's process-wide system_context, whose threads
// run the handlers.
TEST_CASE_TEMPLATE("asio::system_executor: handlers run once, on the system context's threads",
                   Family, TIMER_FAMILIES) {
  const asio::system_executor ex;
  seen fired, aborted;
  const auto test_thread = std::this_thread::get_id();
  const auto elsewhere = [test_thread] { return std::this_thread::get_id() != test_thread; };
  {
    typename Family::template timer<asio::any_io_executor> t(ex, 5ms), c(ex, kFar);
    t.async_wait([&](asio::error_code ec) {
      fired.complete(ec, elsewhere);
      fired.finish();
    });
    c.async_wait([&](asio::error_code ec) {
      aborted.complete(ec, elsewhere);
      aborted.finish();
    });
    c.cancel();
    REQUIRE(wait_until(fired.done, kBlock));
    REQUIRE(wait_until(aborted.done, kBlock));
  }
  CHECK(fired.calls == 1);
  CHECK(fired.ec == kOk);
  CHECK(fired.where);
  CHECK(aborted.calls == 1);
  CHECK(aborted.ec == kAborted);
  CHECK(aborted.where);
}

#if defined(__linux__)
namespace {

// The threads of this process, from /proc/self/task.
std::size_t thread_count() {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/task"))
    ++n;
  return n;
}

// A steady clock of this test's own, one per subcase (N): the services of its timers are
// created there, not by an earlier test or subcase, whose choice of home a context keeps
// (the system context lives as long as the process), so that the threads they start, if
// any, are counted there.
template <int N>
struct own_threads_clock {
  using duration = sclock::duration;
  using rep = duration::rep;
  using period = duration::period;
  using time_point = std::chrono::time_point<own_threads_clock>;
  static constexpr bool is_steady = true;
  static time_point now() noexcept { return time_point(sclock::now().time_since_epoch()); }
};

// Asio's timer service, on the system context or a thread pool, runs on the context's own
// threads; so does the wheel's, found from a type-erased executor of that context: it
// starts no thread of its own (which it does only for a context of a kind it cannot tell).
template <template <class, class, class> class Timer>
struct own_threads_family {
  template <int N>
  using timer =
      Timer<own_threads_clock<N>, asio::wait_traits<own_threads_clock<N>>, asio::any_io_executor>;
};
using asio_own_threads = own_threads_family<asio::basic_waitable_timer>;
using wheel_own_threads = own_threads_family<asio_wheel::basic_wheel_timer>;
} // namespace

TYPE_TO_STRING(asio_own_threads);
TYPE_TO_STRING(wheel_own_threads);

namespace {
// One wait on a new timer on `ex`, and one cancelled; true when both completed.
template <class Family, int N>
bool wait_once(const asio::any_io_executor& ex) {
  seen fired, aborted;
  const auto anywhere = [] { return true; };
  typename Family::template timer<N> t(ex, 5ms), c(ex, kFar);
  t.async_wait([&](asio::error_code ec) {
    fired.complete(ec, anywhere);
    fired.finish();
  });
  c.async_wait([&](asio::error_code ec) {
    aborted.complete(ec, anywhere);
    aborted.finish();
  });
  c.cancel();
  return wait_until(fired.done, kBlock) && wait_until(aborted.done, kBlock) && fired.ec == kOk &&
         aborted.ec == kAborted;
}

TEST_CASE_TEMPLATE("a timer on the system context or a thread pool starts no thread of its own",
                   Family, asio_own_threads, wheel_own_threads) {
  SUBCASE("any_io_executor(system_executor)") {
    // The system context's threads start with it, before the count.
    asio::system_executor ex;
    static_cast<void>(asio::query(ex, asio::execution::context));
    const std::size_t before = thread_count();
    CHECK(wait_once<Family, 1>(ex));
    CHECK(thread_count() == before);
  }
  SUBCASE("any_io_executor(system_executor, blocking.never)") {
    const auto ex = asio::require(asio::system_executor(), asio::execution::blocking.never);
    static_cast<void>(asio::query(ex, asio::execution::context));
    const std::size_t before = thread_count();
    CHECK(wait_once<Family, 2>(ex));
    CHECK(thread_count() == before);
  }
  SUBCASE("any_io_executor(system_executor, relationship.continuation)") {
    const auto ex =
        asio::prefer(asio::system_executor(), asio::execution::relationship.continuation);
    static_cast<void>(asio::query(ex, asio::execution::context));
    const std::size_t before = thread_count();
    CHECK(wait_once<Family, 3>(ex));
    CHECK(thread_count() == before);
  }
  SUBCASE("any_io_executor(thread_pool executor, tracked)") {
    asio::thread_pool pool(2);
    const std::size_t before = thread_count();
    CHECK(wait_once<Family, 4>(asio::prefer(pool.get_executor(), kTracked)));
    CHECK(thread_count() == before);
  }
  SUBCASE("any_io_executor(thread_pool strand)") {
    asio::thread_pool pool(2);
    const std::size_t before = thread_count();
    CHECK(wait_once<Family, 5>(asio::make_strand(pool)));
    CHECK(thread_count() == before);
  }
}

} // namespace
#endif
