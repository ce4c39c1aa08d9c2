//
// support/asio_test_support.hpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_TEST_ASIO_TEST_SUPPORT_HPP
#define ASIO_WHEEL_TEST_ASIO_TEST_SUPPORT_HPP

// The scaffolding of the doctest suites that run an io_context:
//
//   * printing of error codes, durations and time points in failed checks, and names for
//     the two timer types of the TEST_CASE_TEMPLATEs (TIMER_TYPES);
//   * ASIO_WHEEL_TEST_TSAN / ASIO_WHEEL_TEST_SANITIZED, to run fewer rounds under TSan, or
//     under any of TSan and ASan;
//   * guarded_run() and guarded(): run an io_context in this thread while a watchdog thread
//     stops it if it hangs, so that a broken timer fails a test instead of hanging the suite;
//     guarded_run_threads() does the same with more threads calling run();
//   * runner_threads: an io_context run by threads of its own, with a watchdog on join();
//   * outcome, record() and record_read(): what a completion handler saw, and when;
//   * the CHECK_* macros on those, and CHECK_TRAIT;
//   * spawn() for coroutines, what_of() for an exception_ptr, life_token;
//   * ticker: a callback every period, on an asio::steady_timer (activity for idle tests);
//   * until_premise() and stall_probe: a timing premise that a stalled machine may break,
//     checked, and the scenario tried again when it did not hold.
//
// Everything is in asio_wheel::test. The macros name kOk and kAborted in full, but "prompt"
// is a property of each suite, not of this header: CHECK_PROMPT, CHECK_SUCCESS_PROMPTLY_AT
// and CHECK_ABORTED_AT use the `kPrompt` that the including file defines (it differs with
// how noisy the suite's timing is, and with TSan).

#include <asio_wheel/wheel_timer.hpp>

#include <asio/error.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <asio/system_error.hpp>

#if defined(ASIO_HAS_CO_AWAIT)
#include <asio/co_spawn.hpp>
#endif

// Before doctest: in C++17 its stringification of std::error_code and std::thread::id
// needs the complete std::ostream.
#include <ostream>

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

// ---------------------------------------------------------------------------------------------
// Sanitizers: the concurrency suites run fewer rounds under them.
// ---------------------------------------------------------------------------------------------

#if defined(__SANITIZE_THREAD__)
#define ASIO_WHEEL_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define ASIO_WHEEL_TEST_TSAN 1
#endif
#endif

// Under ThreadSanitizer or AddressSanitizer (UBSan alone does not count).
#if defined(ASIO_WHEEL_TEST_TSAN) || defined(__SANITIZE_ADDRESS__)
#define ASIO_WHEEL_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ASIO_WHEEL_TEST_SANITIZED 1
#endif
#endif

// ---------------------------------------------------------------------------------------------
// Printing of the values the checks compare.
// ---------------------------------------------------------------------------------------------

namespace doctest {

template <>
struct StringMaker<std::error_code> {
  static String convert(const std::error_code& ec) {
    const std::string s = std::string(ec.category().name()) + ":" + std::to_string(ec.value()) +
                          " (" + ec.message() + ")";
    return String(s.c_str());
  }
};

template <class Rep, class Period>
struct StringMaker<std::chrono::duration<Rep, Period>> {
  static String convert(const std::chrono::duration<Rep, Period>& d) {
    const auto us = std::chrono::duration_cast<std::chrono::duration<double, std::micro>>(d);
    return String((std::to_string(us.count() / 1000.0) + " ms").c_str());
  }
};

template <class Clock, class Duration>
struct StringMaker<std::chrono::time_point<Clock, Duration>> {
  static String convert(const std::chrono::time_point<Clock, Duration>& tp) {
    if (tp == std::chrono::time_point<Clock, Duration>::max())
      return "time_point::max()";
    if (tp == std::chrono::time_point<Clock, Duration>::min())
      return "time_point::min()";
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(tp.time_since_epoch());
    return String(("epoch+" + std::to_string(ns.count()) + " ns").c_str());
  }
};

} // namespace doctest

// The timer types of every TEST_CASE_TEMPLATE that states Asio's behaviour: the
// asio::steady_timer instance shows what Asio does, the wheel_timer instance must match it.
TYPE_TO_STRING(asio::steady_timer);
TYPE_TO_STRING(asio_wheel::wheel_timer);

#define TIMER_TYPES asio::steady_timer, asio_wheel::wheel_timer

namespace asio_wheel::test {

using namespace std::chrono_literals;
using sclock = std::chrono::steady_clock;

// A wait this far away must never be what ends a test: run() has to return long before.
// Far beyond every suite's kPrompt (at most 5 s), so that "promptly" can tell the two apart
// however long a loaded machine (CI, sanitizers) stalls the test.
inline constexpr auto kFar = 60s;
// The default watchdog: any io_context run that takes longer than this is stopped. It only
// turns a hang into a failure, so it is generous: a run of a few milliseconds' work may take
// seconds under TSan on a loaded 2-core machine.
inline constexpr auto kWatchdog = 30s;

// How much later than on Linux a timer may complete here, for the tests whose premise is that
// two expiries some milliseconds apart complete apart. On Windows Asio's timers (and so the
// wheel's alarm) fire from a waitable timer, on the 15.6 ms clock interrupt, and under Wine on
// a loaded machine were seen more than 25 ms late. Zero elsewhere: what Linux checks is
// unchanged.
#if defined(_WIN32)
inline constexpr auto kPlatformTimerSlack = std::chrono::milliseconds(250);
#else
inline constexpr auto kPlatformTimerSlack = std::chrono::milliseconds(0);
#endif

// A timer's success. An I/O operation's is not always this value: on Windows Asio reports it
// as error_code(0, asio::system_category()), which does not compare equal to kOk; check an
// I/O result with CHECK_FALSE(ec).
inline const asio::error_code kOk{};
inline const asio::error_code kAborted = asio::error::operation_aborted;

// ---------------------------------------------------------------------------------------------
// Running an io_context with a watchdog.
// ---------------------------------------------------------------------------------------------

struct run_report {
  sclock::duration elapsed{};
  bool timed_out = false;
  std::size_t handlers = 0; // what run() returned (in this thread)
};

// Calls `run()` (which runs `ioc` in this thread and returns the number of handlers run) while
// a watchdog thread stops `ioc` (io_context::stop() is thread-safe) if `run()` has not
// returned after `limit`; the report then says timed_out. Exceptions thrown by handlers
// propagate, as from io_context::run() itself.
template <class RunFn>
run_report guarded(asio::io_context& ioc, RunFn run, sclock::duration limit = kWatchdog) {
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  std::atomic<bool> fired{false};
  std::thread watchdog([&] {
    std::unique_lock<std::mutex> lk(m);
    if (!cv.wait_for(lk, limit, [&] { return done; })) {
      fired = true;
      ioc.stop();
    }
  });
  auto finish = [&] {
    {
      std::lock_guard<std::mutex> lk(m);
      done = true;
    }
    cv.notify_all();
    watchdog.join();
  };
  run_report r;
  const auto t0 = sclock::now();
  try {
    r.handlers = run();
  } catch (...) {
    finish();
    throw;
  }
  r.elapsed = sclock::now() - t0;
  finish();
  r.timed_out = fired;
  return r;
}

// ioc.run() in `threads` threads (this one and threads - 1 others), under the watchdog; the
// report counts the handlers run by this thread. An exception out of another thread's run()
// ends the program (std::terminate); one out of this thread's stops the context, joins the
// others and propagates.
inline run_report guarded_run_threads(asio::io_context& ioc, int threads,
                                      sclock::duration limit = kWatchdog) {
  return guarded(
      ioc,
      [&] {
        std::vector<std::thread> others;
        for (int i = 1; i < threads; ++i)
          others.emplace_back([&] { ioc.run(); });
        auto join_others = [&] {
          for (auto& t : others)
            t.join();
        };
        std::size_t n = 0;
        try {
          n = ioc.run();
        } catch (...) {
          ioc.stop();
          join_others();
          throw;
        }
        join_others();
        return n;
      },
      limit);
}

// The environment's ASIO_WHEEL_TEST_RUN_THREADS (1 to 64; unset: 1): how many threads
// guarded_run() runs a context on. Read at run time, so that one binary is the suite on one
// thread and, with the variable set by its ctest entry, on several
// (wheel_timer_conformance_mt_test), instead of a second build of the same source.
inline int run_threads_from_environment() {
  static const int threads = [] {
    const char* v = std::getenv("ASIO_WHEEL_TEST_RUN_THREADS");
    if (v == nullptr || *v == '\0')
      return 1;
    char* end = nullptr;
    const long n = std::strtol(v, &end, 10);
    if (*end != '\0' || n < 1 || n > 64) {
      std::fprintf(stderr,
                   "ASIO_WHEEL_TEST_RUN_THREADS='%s': expected a thread count from 1 to 64\n", v);
      std::exit(2);
    }
    return static_cast<int>(n);
  }();
  return threads;
}

// ioc.run() in this thread, under the watchdog; with ASIO_WHEEL_TEST_RUN_THREADS=N in the
// environment, in N threads instead (guarded_run_threads), so that a test written for one
// thread runs as is on a context run by several.
inline run_report guarded_run(asio::io_context& ioc, sclock::duration limit = kWatchdog) {
  if (const int threads = run_threads_from_environment(); threads > 1)
    return guarded_run_threads(ioc, threads, limit);
  return guarded(
      ioc, [&] { return ioc.run(); }, limit);
}

// Runs an io_context on `threads` threads of its own. With `hold_work`, a work guard keeps
// run() from returning before join() releases it. join() waits for every run() to return and
// stops the context if they have not after the limit (by default the `watchdog` given to the
// constructor, which the destructor uses too). An exception out of run() ends the program
// (std::terminate), unless `rerun_on_exception`: then a std::exception is counted in
// `exceptions` and run() is called again.
struct runner_options {
  bool hold_work = true;
  bool rerun_on_exception = false;
};

class runner_threads {
public:
  runner_threads(asio::io_context& ioc, int threads, sclock::duration watchdog,
                 runner_options opts = {})
      : ioc_(ioc), threads_wanted_(threads), watchdog_(watchdog) {
    if (opts.hold_work)
      guard_.emplace(ioc.get_executor());
    for (int i = 0; i < threads; ++i)
      threads_.emplace_back([this, rerun = opts.rerun_on_exception] {
        if (rerun) {
          for (;;) {
            try {
              ioc_.run();
              break;
            } catch (const std::exception&) {
              ++exceptions;
            }
          }
        } else {
          ioc_.run();
        }
        const std::lock_guard<std::mutex> lk(m_);
        if (++returned_ == threads_wanted_)
          all_returned_at_ = sclock::now();
        cv_.notify_all();
      });
  }
  runner_threads(const runner_threads&) = delete;
  runner_threads& operator=(const runner_threads&) = delete;
  ~runner_threads() { join(); }

  // Lets run() return once no work is left and waits for all the threads, stopping the
  // context after `limit`. Returns false if it had to stop it. Only the first call waits.
  bool join() { return join(watchdog_); }
  bool join(sclock::duration limit) {
    if (threads_.empty())
      return returned_by_themselves_ == threads_wanted_;
    guard_.reset();
    {
      std::unique_lock<std::mutex> lk(m_);
      cv_.wait_for(lk, limit, [&] { return returned_ == threads_wanted_; });
      returned_by_themselves_ = returned_;
      if (returned_ != threads_wanted_)
        ioc_.stop();
    }
    for (auto& t : threads_)
      t.join();
    threads_.clear();
    return returned_by_themselves_ == threads_wanted_;
  }

  // After join(): how many run() calls had returned before the limit.
  int returned_by_themselves() const { return returned_by_themselves_; }
  // After join(): when the last run() returned.
  sclock::time_point all_returned_at() const { return all_returned_at_; }

  std::atomic<int> exceptions{0};

private:
  asio::io_context& ioc_;
  const int threads_wanted_;
  const sclock::duration watchdog_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> guard_;
  std::vector<std::thread> threads_;
  std::mutex m_;
  std::condition_variable cv_;
  int returned_ = 0;
  int returned_by_themselves_ = 0;
  sclock::time_point all_returned_at_{};
};

// ---------------------------------------------------------------------------------------------
// Timing premises on a loaded machine.
// ---------------------------------------------------------------------------------------------

// A test on the real clock often needs a premise that only a stalled process breaks: a wait
// 20 ms ahead is still pending when a posted function runs, a turn comes before drop_after.
// CI machines stall a process for seconds (and ASan/TSan slow it down), so such a test
// checks the premise with clock reads (or a stall_probe) and asserts strictly only when it
// held. until_premise() runs the scenario again when it did not, so that it is asserted in
// (nearly) every run: `attempt(last)` returns false to be tried again (premise broken, checks
// skipped); on the last of `attempts` calls it must assert whatever happened, so a premise
// that never holds still fails.
inline constexpr int kPremiseAttempts = 5;

template <class Attempt>
void until_premise(Attempt attempt, int attempts = kPremiseAttempts) {
  for (int i = 1; i <= attempts; ++i) {
    if (attempt(i == attempts))
      return;
    MESSAGE("attempt " << i << " of " << attempts
                       << ": the machine stalled and broke the timing premise; trying again");
  }
}

// std::latch's members that the tests use (std::latch is C++20's; the tests that use this
// build as C++17 too).
class test_latch {
public:
  explicit test_latch(std::ptrdiff_t count) : count_(count) {}
  test_latch(const test_latch&) = delete;
  test_latch& operator=(const test_latch&) = delete;

  void count_down() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (--count_ == 0)
      cv_.notify_all();
  }
  void wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [this] { return count_ <= 0; });
  }
  void arrive_and_wait() {
    count_down();
    wait();
  }

private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::ptrdiff_t count_; // guarded by mutex_
};

// Measures how long a context goes without running a handler: an asio::steady_timer (not the
// wheel under test) on `where` (a context, or an executor such as the strand of the handlers
// whose timing matters) that fires every `period` for `span` from its construction, and
// records the longest gap between two of its handlers (from construction on). A gap shorter
// than a premise's margin proves that no handler there was held back that long within the
// span. It keeps run() going for the span.
class stall_probe {
public:
  template <class ContextOrExecutor>
  stall_probe(ContextOrExecutor& where, sclock::duration span, sclock::duration period = 2ms)
      : timer_(where), period_(period), last_(sclock::now()), end_(last_ + span) {
    arm();
  }
  // The longest time between two handlers of the probe (and since its construction).
  sclock::duration max_gap() const { return max_gap_; }
  // Whether the span has been watched to its end.
  bool done() const { return done_; }

private:
  void arm() {
    timer_.expires_after(period_);
    timer_.async_wait([this](asio::error_code ec) {
      if (ec)
        return;
      const auto now = sclock::now();
      max_gap_ = std::max(max_gap_, now - last_);
      last_ = now;
      if (now < end_)
        arm();
      else
        done_ = true;
    });
  }

  asio::steady_timer timer_;
  sclock::duration period_;
  sclock::time_point last_;
  sclock::time_point end_;
  sclock::duration max_gap_{};
  bool done_ = false;
};

// ---------------------------------------------------------------------------------------------
// Recording completions.
// ---------------------------------------------------------------------------------------------

// What the handler of one operation saw.
struct outcome {
  int calls = 0;
  asio::error_code ec;
  std::size_t bytes = 0;       // a read's byte count (record_read())
  sclock::time_point at{};     // when the handler ran
  sclock::time_point expiry{}; // the timer's expiry when the wait started, if the test sets it
  int order = -1;              // position in completion order, with record(o, &seq)

  // Records one completion, now.
  void complete(asio::error_code e) {
    ++calls;
    ec = e;
    at = sclock::now();
  }
  void complete(asio::error_code e, std::size_t n) {
    bytes = n;
    complete(e);
  }
};

// A void(error_code) handler recording into `o`; `seq` (optional) numbers the completions.
inline auto record(outcome& o, int* seq = nullptr) {
  return [&o, seq](asio::error_code ec) {
    o.complete(ec);
    if (seq)
      o.order = (*seq)++;
  };
}

// A read handler, void(error_code, std::size_t), recording into `o`.
inline auto record_read(outcome& o) {
  return [&o](asio::error_code ec, std::size_t n) { o.complete(ec, n); };
}

// The error a use_future future reports (its system_error's code), or success. Under TSan,
// call it once the thread that completed the operation has been joined, or has finished with
// the promise: libstdc++'s exception_ptr counts references with atomics TSan does not see.
template <class T>
asio::error_code error_of(std::future<T>& f) {
  try {
    f.get();
  } catch (const asio::system_error& e) {
    return e.code();
  }
  return {};
}

// The checks below evaluate their arguments more than once.

#define CHECK_PROMPT(report)                                                                       \
  do {                                                                                             \
    CHECK_FALSE((report).timed_out);                                                               \
    CHECK((report).elapsed < kPrompt);                                                             \
  } while (false)

// Exactly one completion, a success, never before `not_before`.
#define CHECK_SUCCESS_AT(o, not_before)                                                            \
  do {                                                                                             \
    CHECK((o).calls == 1);                                                                         \
    CHECK((o).ec == ::asio_wheel::test::kOk);                                                      \
    CHECK((o).at >= (not_before));                                                                 \
  } while (false)

// The same, and less than kPrompt after `not_before`.
#define CHECK_SUCCESS_PROMPTLY_AT(o, not_before)                                                   \
  do {                                                                                             \
    CHECK_SUCCESS_AT(o, not_before);                                                               \
    CHECK((o).at - (not_before) < kPrompt);                                                        \
  } while (false)

// Exactly one completion, operation_aborted.
#define CHECK_ABORTED(o)                                                                           \
  do {                                                                                             \
    CHECK((o).calls == 1);                                                                         \
    CHECK((o).ec == ::asio_wheel::test::kAborted);                                                 \
  } while (false)

// Aborted by a deadline: exactly once, operation_aborted, not before `deadline`, and less
// than kPrompt after it.
#define CHECK_ABORTED_AT(o, deadline)                                                              \
  do {                                                                                             \
    CHECK_ABORTED(o);                                                                              \
    CHECK((o).at >= (deadline));                                                                   \
    CHECK((o).at - (deadline) < kPrompt);                                                          \
  } while (false)

// A compile-time property, checked at run time so that one deviation fails one check
// instead of the whole file's build.
#define CHECK_TRAIT(...) CHECK_MESSAGE((__VA_ARGS__), #__VA_ARGS__)

// ---------------------------------------------------------------------------------------------
// Odds and ends.
// ---------------------------------------------------------------------------------------------

// Counts its own destructions: a handler owns one to prove it was destroyed.
struct life_token {
  explicit life_token(int& destroyed) : destroyed_(&destroyed) {}
  life_token(const life_token&) = delete;
  life_token& operator=(const life_token&) = delete;
  ~life_token() { ++*destroyed_; }
  int* destroyed_;
};

#if defined(ASIO_HAS_CO_AWAIT)
// Runs a coroutine on `ioc`; whatever escapes it is rethrown from run().
template <class F>
void spawn(asio::io_context& ioc, F&& f) {
  asio::co_spawn(ioc, std::forward<F>(f), [](std::exception_ptr e) {
    if (e)
      std::rethrow_exception(e);
  });
}

// Runs a coroutine on `ioc`; once it has finished, `finished` is set and `eptr` holds
// whatever escaped it.
template <class F>
void spawn(asio::io_context& ioc, F&& f, std::exception_ptr& eptr, bool& finished) {
  asio::co_spawn(ioc, std::forward<F>(f), [&eptr, &finished](std::exception_ptr e) {
    eptr = e;
    finished = true;
  });
}
#endif // defined(ASIO_HAS_CO_AWAIT)

// What an exception says, for a check's message.
inline std::string what_of(const std::exception_ptr& e) {
  if (!e)
    return "no exception";
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    return ex.what();
  } catch (...) {
    return "unknown exception";
  }
}

// ---------------------------------------------------------------------------------------------
// An allocator that counts (for the handlers' associated allocators).
// ---------------------------------------------------------------------------------------------

struct alloc_stats {
  std::size_t allocs = 0;
  std::size_t deallocs = 0;
  std::size_t bytes_live = 0;
};

template <class T>
struct counting_allocator {
  using value_type = T;
  alloc_stats* stats;

  explicit counting_allocator(alloc_stats& s) noexcept : stats(&s) {}
  template <class U>
  counting_allocator(const counting_allocator<U>& other) noexcept : stats(other.stats) {}

  T* allocate(std::size_t n) {
    ++stats->allocs;
    stats->bytes_live += n * sizeof(T);
    return std::allocator<T>().allocate(n);
  }
  void deallocate(T* p, std::size_t n) noexcept {
    ++stats->deallocs;
    stats->bytes_live -= n * sizeof(T);
    std::allocator<T>().deallocate(p, n);
  }
  template <class U>
  bool operator==(const counting_allocator<U>& other) const noexcept {
    return stats == other.stats;
  }
  template <class U>
  bool operator!=(const counting_allocator<U>& other) const noexcept {
    return stats != other.stats;
  }
};

// Calls `tick()` every `period` (measured from the previous call's scheduled time), `count`
// times, on an asio::steady_timer (independent of the wheel under test). Records the time
// taken just before each call.
class ticker {
public:
  ticker(asio::io_context& ctx, sclock::duration period, int count, std::function<void()> tick)
      : timer_(ctx), period_(period), left_(count), tick_(std::move(tick)) {
    next_ = sclock::now() + period_;
    arm();
  }

  const std::vector<sclock::time_point>& times() const { return times_; }

  // The longest interval between consecutive calls, counting from `start`.
  sclock::duration max_gap(sclock::time_point start) const {
    sclock::duration gap{};
    sclock::time_point prev = start;
    for (const auto t : times_) {
      gap = std::max(gap, t - prev);
      prev = t;
    }
    return gap;
  }

private:
  void arm() {
    timer_.expires_at(next_);
    timer_.async_wait([this](asio::error_code ec) {
      if (ec)
        return;
      times_.push_back(sclock::now());
      tick_();
      if (--left_ > 0) {
        next_ += period_;
        arm();
      }
    });
  }

  asio::steady_timer timer_;
  sclock::duration period_;
  int left_;
  std::function<void()> tick_;
  sclock::time_point next_{};
  std::vector<sclock::time_point> times_;
};

} // namespace asio_wheel::test

#endif // ASIO_WHEEL_TEST_ASIO_TEST_SUPPORT_HPP
