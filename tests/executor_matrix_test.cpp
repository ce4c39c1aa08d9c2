//
// executor_matrix_test.cpp
// ~~~~~~~~~~~~~~~~~~~~~~~~
//
// The executor matrix on one thread: every kind of executor a program can give an
// io_context's timer, as the timer's own executor and as the handler's bound executor, each
// with its outstanding_work.tracked variant (the legacy io_context::strand has no
// properties), each cell a TEST_CASE_TEMPLATE over Asio's basic_waitable_timer and the
// wheel's basic_wheel_timer rebound to that executor. Each cell checks:
//
//   * where the handler runs: in the strand, in the user's executor, on the context;
//   * that it is called exactly once, with success at expiry and operation_aborted after
//     cancel();
//   * that the handler of an unrelated timer, on the context's own executor, does not run
//     inside a strand or a user's executor (with one thread, that is how a wheel that made
//     the first timer's strand its home shows: its batches run inside that strand).
//
// Then, on both timer types: a handler's associated allocator serves its executor's
// queueing too (a strand's operation). Over-aligned handlers are in
// over_aligned_handler_test.cpp. The thread pools, the io_context run by several threads
// (handlers of unrelated timers must not be serialized), a user's own execution context and
// asio::system_executor are in executor_matrix_mt_test.cpp.
//

#include <asio_wheel/wheel_timer.hpp>

#include <asio/any_io_executor.hpp>
#include <asio/bind_executor.hpp>
#include <asio/error.hpp>
#include <asio/execution.hpp>
#include <asio/io_context.hpp>
#include <asio/io_context_strand.hpp>
#include <asio/prefer.hpp>
#include <asio/steady_timer.hpp>
#include <asio/strand.hpp>

#include <doctest/doctest.h>

#include "asio_test_support.hpp"
#include "executor_test_support.hpp"

#include <chrono>
#include <memory>

namespace {

using namespace std::chrono_literals;
using namespace asio_wheel::test;

constexpr auto kTracked = asio::execution::outstanding_work.tracked;

// Runs `ioc` in this thread until `done()`, under the watchdog. Needed rather than run():
// a timer made with a work-tracking executor keeps run() from returning while it exists.
template <class Done>
run_report run_until(asio::io_context& ioc, Done done) {
  return guarded(ioc, [&] {
    std::size_t n = 0;
    while (!done() && !ioc.stopped())
      n += ioc.run_one();
    return n;
  });
}

// What one handler saw: its completion, and whether it ran where the cell says.
struct seen {
  outcome o;
  bool where = false;
};

// The cell's executor as the timer's: `where()` must hold in the handlers of the cell's
// timers; if `exclusive` (a strand, a user's executor), it must not hold in the handler of
// an unrelated timer on the context's own executor.
template <class Family, class Executor, class Where>
void check_as_timer_executor(asio::io_context& ioc, const Executor& ex, Where where,
                             bool exclusive) {
  using timer = typename Family::template timer<Executor>;
  using plain_timer = typename Family::template timer<asio::any_io_executor>;
  seen fired, aborted, unrelated;
  {
    // The cell's timer starts the context's first wait: a wheel chooses its home then.
    timer t(ex, 5ms);
    timer c(ex, kFar);
    plain_timer u(ioc, 10ms);
    const auto expiry = t.expiry();
    t.async_wait([&](asio::error_code ec) {
      fired.o.complete(ec);
      fired.where = where();
    });
    c.async_wait([&](asio::error_code ec) {
      aborted.o.complete(ec);
      aborted.where = where();
    });
    u.async_wait([&](asio::error_code ec) {
      unrelated.o.complete(ec);
      unrelated.where = where();
    });
    CHECK(c.cancel() == 1);
    const auto r = run_until(
        ioc, [&] { return fired.o.calls > 0 && aborted.o.calls > 0 && unrelated.o.calls > 0; });
    CHECK_FALSE(r.timed_out);
    CHECK_SUCCESS_AT(fired.o, expiry);
  }
  CHECK(fired.where);
  CHECK_ABORTED(aborted.o);
  CHECK(aborted.where);
  CHECK(unrelated.o.calls == 1);
  CHECK(unrelated.o.ec == kOk);
  if (exclusive)
    CHECK_FALSE(unrelated.where);
}

// The cell's executor bound to the handlers of timers on the context's own executor.
template <class Family, class Executor, class Where>
void check_as_bound_executor(asio::io_context& ioc, const Executor& ex, Where where,
                             bool exclusive) {
  using plain_timer = typename Family::template timer<asio::any_io_executor>;
  seen fired, aborted, unrelated;
  {
    plain_timer t(ioc, 5ms);
    plain_timer c(ioc, kFar);
    plain_timer u(ioc, 10ms);
    const auto expiry = t.expiry();
    t.async_wait(asio::bind_executor(ex, [&](asio::error_code ec) {
      fired.o.complete(ec);
      fired.where = where();
    }));
    c.async_wait(asio::bind_executor(ex, [&](asio::error_code ec) {
      aborted.o.complete(ec);
      aborted.where = where();
    }));
    u.async_wait([&](asio::error_code ec) {
      unrelated.o.complete(ec);
      unrelated.where = where();
    });
    CHECK(c.cancel() == 1);
    const auto r = run_until(
        ioc, [&] { return fired.o.calls > 0 && aborted.o.calls > 0 && unrelated.o.calls > 0; });
    CHECK_FALSE(r.timed_out);
    CHECK_SUCCESS_AT(fired.o, expiry);
  }
  CHECK(fired.where);
  CHECK_ABORTED(aborted.o);
  CHECK(aborted.where);
  CHECK(unrelated.o.calls == 1);
  CHECK(unrelated.o.ec == kOk);
  if (exclusive)
    CHECK_FALSE(unrelated.where);
}

// The rows of the matrix: check(executor, where, exclusive) once per SUBCASE.
template <class Check>
void io_context_cells(asio::io_context& ioc, Check check) {
  const auto io = ioc.get_executor();
  const auto on_context = [io] { return io.running_in_this_thread(); };
  const auto strand = asio::make_strand(ioc);
  const auto in_strand = [strand] { return strand.running_in_this_thread(); };
  const user_executor<asio::io_context::executor_type> user(io);
  const auto in_user = [] { return in_user_executor(); };

  SUBCASE("io_context executor") {
    check(io, on_context, false);
  }
  SUBCASE("io_context executor, tracked") {
    check(asio::prefer(io, kTracked), on_context, false);
  }
  SUBCASE("any_io_executor(io_context executor)") {
    check(asio::any_io_executor(io), on_context, false);
  }
  SUBCASE("any_io_executor(io_context executor, tracked)") {
    check(asio::any_io_executor(asio::prefer(io, kTracked)), on_context, false);
  }
  SUBCASE("strand") {
    check(strand, in_strand, true);
  }
  SUBCASE("strand, tracked") {
    check(asio::prefer(strand, kTracked), in_strand, true);
  }
  SUBCASE("any_io_executor(strand)") {
    check(asio::any_io_executor(strand), in_strand, true);
  }
  // The first wait on a strand that the wheel's known targets did not include: it became
  // the wheel's home at 5e44cd9.
  SUBCASE("any_io_executor(strand, tracked)") {
    check(asio::any_io_executor(asio::prefer(strand, kTracked)), in_strand, true);
  }
  SUBCASE("legacy io_context::strand") {
    asio::io_context::strand legacy(ioc);
    check(
        legacy, [&legacy] { return legacy.running_in_this_thread(); }, true);
  }
  SUBCASE("user executor") {
    check(user, in_user, true);
  }
  SUBCASE("user executor, tracked") {
    check(asio::prefer(user, kTracked), in_user, true);
  }
  SUBCASE("any_io_executor(user executor)") {
    check(asio::any_io_executor(user), in_user, true);
  }
  SUBCASE("any_io_executor(user executor, tracked)") {
    check(asio::any_io_executor(asio::prefer(user, kTracked)), in_user, true);
  }
}

} // namespace

TEST_CASE_TEMPLATE("executor matrix, io_context: the cell's executor as the timer's", Family,
                   TIMER_FAMILIES) {
  asio::io_context ioc;
  io_context_cells(ioc, [&](const auto& ex, auto where, bool exclusive) {
    check_as_timer_executor<Family>(ioc, ex, where, exclusive);
  });
}

TEST_CASE_TEMPLATE("executor matrix, io_context: the cell's executor bound to the handler", Family,
                   TIMER_FAMILIES) {
  asio::io_context ioc;
  io_context_cells(ioc, [&](const auto& ex, auto where, bool exclusive) {
    check_as_bound_executor<Family>(ioc, ex, where, exclusive);
  });
}

// wrap() is deprecated: ASIO_NO_DEPRECATED (the dev stage) removes it; the other stages
// build it.
#if !defined(ASIO_NO_DEPRECATED)
TEST_CASE_TEMPLATE("a handler wrapped by the legacy io_context::strand::wrap runs in that strand",
                   Timer, TIMER_TYPES) {
  asio::io_context ioc;
  asio::io_context::strand legacy(ioc);
  seen fired, aborted;
  Timer t(ioc, 5ms);
  Timer c(ioc, kFar);
  t.async_wait(legacy.wrap([&](asio::error_code ec) {
    fired.o.complete(ec);
    fired.where = legacy.running_in_this_thread();
  }));
  c.async_wait(legacy.wrap([&](asio::error_code ec) {
    aborted.o.complete(ec);
    aborted.where = legacy.running_in_this_thread();
  }));
  c.cancel();
  const auto r = guarded_run(ioc);
  CHECK_FALSE(r.timed_out);
  CHECK_SUCCESS_AT(fired.o, t.expiry());
  CHECK(fired.where);
  CHECK_ABORTED(aborted.o);
  CHECK(aborted.where);
}
#endif // !defined(ASIO_NO_DEPRECATED)

// -------------------------------------------------------------------------------------------
// The handler's associated allocator on the way to its executor
// -------------------------------------------------------------------------------------------

// A handler bound to a strand or a user's executor completes from the context's thread
// outside it, so the executor has to queue it, in memory it allocates. Asio takes that
// memory from the handler's associated allocator, as it does the operation's: each wait's
// handler allocator serves at least two allocations, and gets every one back. (Only an
// executor of a known type: any_io_executor does not carry the allocator property, in Asio
// as here, so through it the executor's own allocator is used.)
TEST_CASE_TEMPLATE("a handler's associated allocator also serves its executor's queueing", Family,
                   TIMER_FAMILIES) {
  using plain_timer = typename Family::template timer<asio::any_io_executor>;
  asio::io_context ioc;
  alloc_stats fired_stats, aborted_stats;
  seen fired, aborted;

  auto run_cell = [&](const auto& ex, auto where) {
    {
      plain_timer t(ioc, 5ms);
      plain_timer c(ioc, kFar);
      t.async_wait(
          asio::bind_executor(ex, with_counting_allocator(fired_stats, [&](asio::error_code ec) {
                                fired.o.complete(ec);
                                fired.where = where();
                              })));
      c.async_wait(
          asio::bind_executor(ex, with_counting_allocator(aborted_stats, [&](asio::error_code ec) {
                                aborted.o.complete(ec);
                                aborted.where = where();
                              })));
      c.cancel();
      const auto r = run_until(ioc, [&] { return fired.o.calls > 0 && aborted.o.calls > 0; });
      CHECK_FALSE(r.timed_out);
    }
    CHECK(fired.o.calls == 1);
    CHECK(fired.o.ec == kOk);
    CHECK(fired.where);
    CHECK_ABORTED(aborted.o);
    CHECK(aborted.where);
    // The operation, and the executor's queued function.
    CHECK(fired_stats.allocs >= 2);
    CHECK(aborted_stats.allocs >= 2);
  };

  const auto strand = asio::make_strand(ioc);
  const auto in_strand = [strand] { return strand.running_in_this_thread(); };
  const user_executor<asio::io_context::executor_type> user(ioc.get_executor());

  SUBCASE("strand") {
    run_cell(strand, in_strand);
  }
  SUBCASE("strand, tracked") {
    run_cell(asio::prefer(strand, kTracked), in_strand);
  }
  SUBCASE("legacy io_context::strand") {
    asio::io_context::strand legacy(ioc);
    run_cell(legacy, [&legacy] { return legacy.running_in_this_thread(); });
  }
  SUBCASE("user executor") {
    run_cell(user, [] { return in_user_executor(); });
  }
  SUBCASE("user executor, tracked") {
    run_cell(asio::prefer(user, kTracked), [] { return in_user_executor(); });
  }

  CHECK(fired_stats.deallocs == fired_stats.allocs);
  CHECK(fired_stats.bytes_live == 0);
  CHECK(aborted_stats.deallocs == aborted_stats.allocs);
  CHECK(aborted_stats.bytes_live == 0);
}

// Another io_context's executor bound to the handler: the wait is dispatched there, and the
// handler's allocator serves the operation and the function queued on that context, as
// Asio's own timer's (found by review: kept type-erased, as an any_io_executor, the queued
// function took std::allocator and an allocation of its own instead).
TEST_CASE_TEMPLATE("a handler bound to another io_context's executor: its allocator serves the "
                   "queueing there",
                   Family, TIMER_FAMILIES) {
  using plain_timer = typename Family::template timer<asio::any_io_executor>;
  for (const bool tracked : {false, true}) {
    CAPTURE(tracked);
    asio::io_context ioc;
    asio::io_context other;
    alloc_stats stats;
    outcome o;
    bool on_other = false;
    {
      plain_timer t(ioc, 5ms);
      auto h = with_counting_allocator(stats, [&](asio::error_code ec) {
        o.complete(ec);
        on_other = other.get_executor().running_in_this_thread();
      });
      if (tracked)
        t.async_wait(asio::bind_executor(asio::prefer(other.get_executor(), kTracked), h));
      else
        t.async_wait(asio::bind_executor(other.get_executor(), h));
      const auto r = run_until(ioc, [&] { return ioc.stopped(); });
      CHECK_FALSE(r.timed_out);
      CHECK(o.calls == 0); // queued on `other`, which has not run yet
      other.run();
    }
    CHECK(o.calls == 1);
    CHECK(o.ec == kOk);
    CHECK(on_other);
    // The operation, and the function queued on `other`.
    CHECK(stats.allocs >= 2);
    CHECK(stats.deallocs == stats.allocs);
    CHECK(stats.bytes_live == 0);
  }
}

namespace {

// An executor that discards what it is given, as a closed queue does.
struct dropping_executor {
  asio::io_context* context;
  asio::execution_context& query(asio::execution::context_t) const noexcept { return *context; }
  static constexpr asio::execution::blocking_t query(asio::execution::blocking_t) noexcept {
    return asio::execution::blocking.never;
  }
  template <class F>
  void execute(F&& f) const {
    [[maybe_unused]] const auto dropped = std::move(f);
  }
  bool operator==(const dropping_executor& other) const noexcept {
    return context == other.context;
  }
  bool operator!=(const dropping_executor& other) const noexcept {
    return context != other.context;
  }
};
static_assert(asio::execution::is_executor<dropping_executor>::value);

// Counts the live copies of what a handler captures.
struct live_count {
  int* live;
  explicit live_count(int* l) : live(l) { ++*live; }
  live_count(const live_count&) = delete;
  live_count& operator=(const live_count&) = delete;
  ~live_count() { --*live; }
};

} // namespace

TEST_CASE_TEMPLATE("an executor that drops the completion without running it: the handler is "
                   "destroyed uncalled, nothing leaks",
                   Timer, TIMER_TYPES) {
  asio::io_context io;
  int live = 0, called = 0;
  {
    Timer t(io, 1ms);
    auto capture = std::make_shared<live_count>(&live);
    t.async_wait(asio::bind_executor(dropping_executor{&io},
                                     [capture, &called](asio::error_code) { ++called; }));
    capture.reset();
    CHECK(live == 1);
    io.run();
  }
  CHECK(called == 0);
  CHECK(live == 0);
}

TEST_CASE_TEMPLATE("a handler run inline by its strand starts a wait whose completion is then "
                   "destroyed uncalled (its executor's context destroyed): nothing leaks",
                   Timer, TIMER_TYPES) {
  asio::io_context io;
  auto strand = asio::make_strand(io);
  Timer a(io, 1ms);
  int live = 0, called_b = 0;
  bool ran_a = false;
  a.async_wait(asio::bind_executor(strand, [&](asio::error_code) {
    ran_a = true;
    auto elsewhere = std::make_unique<asio::io_context>(); // never run
    asio::io_context other;
    Timer b(other, 0ms);
    auto capture = std::make_shared<live_count>(&live);
    b.async_wait(asio::bind_executor(elsewhere->get_executor(),
                                     [capture, &called_b](asio::error_code) { ++called_b; }));
    capture.reset();
    other.run(); // b completes: its handler is queued on `elsewhere`
    elsewhere.reset();
    CHECK(live == 0);
  }));
  io.run();
  CHECK(ran_a);
  CHECK(called_b == 0);
  CHECK(live == 0);
}
