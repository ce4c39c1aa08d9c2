//
// support/executor_test_support.hpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_TEST_EXECUTOR_TEST_SUPPORT_HPP
#define ASIO_WHEEL_TEST_EXECUTOR_TEST_SUPPORT_HPP

// What the executor matrices (executor_matrix_test.cpp, executor_matrix_mt_test.cpp) share:
//
//   * timer families: Asio's basic_waitable_timer and asio_wheel::basic_wheel_timer over
//     steady_clock, rebound to any executor type, so that a TEST_CASE_TEMPLATE over the two
//     states Asio's behaviour for every executor before judging the wheel's;
//   * user_executor: a user's own standard executor that posts into an io_context (or a
//     thread_pool), and says, through in_user_executor(), whether the calling thread is
//     running a function it executed;
//   * own_context: a user's own execution context (neither an io_context nor a thread_pool)
//     with one thread, and its executor;
//   * counting_handler: a handler with a counting associated allocator;
//   * wait_until(): a bounded wait on a flag, so that a deadlock fails a check instead of
//     hanging the suite.

#include <asio_wheel/basic_wheel_timer.hpp>

#include <asio/associated_allocator.hpp>
#include <asio/basic_waitable_timer.hpp>
#include <asio/error.hpp>
#include <asio/execution.hpp>
#include <asio/execution_context.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/prefer.hpp>
#include <asio/wait_traits.hpp>

#include <doctest/doctest.h>

#include "asio_test_support.hpp"

#include <atomic>
#include <chrono>
#include <optional>
#include <thread>
#include <type_traits>
#include <utility>

// ---------------------------------------------------------------------------------------------
// The two timer families.
// ---------------------------------------------------------------------------------------------

namespace asio_wheel::test {

struct asio_timers {
  template <class Executor>
  using timer = asio::basic_waitable_timer<sclock, asio::wait_traits<sclock>, Executor>;
};

struct wheel_timers {
  template <class Executor>
  using timer = asio_wheel::basic_wheel_timer<sclock, asio::wait_traits<sclock>, Executor>;
};

} // namespace asio_wheel::test

TYPE_TO_STRING(asio_wheel::test::asio_timers);
TYPE_TO_STRING(asio_wheel::test::wheel_timers);

#define TIMER_FAMILIES asio_wheel::test::asio_timers, asio_wheel::test::wheel_timers

namespace asio_wheel::test {

// ---------------------------------------------------------------------------------------------
// A user's own executor.
// ---------------------------------------------------------------------------------------------

namespace detail {
// How many functions executed by a user_executor this thread is inside.
inline thread_local int user_executor_depth = 0;
} // namespace detail

// True while the calling thread runs a function that a user_executor executed.
inline bool in_user_executor() noexcept {
  return detail::user_executor_depth > 0;
}

// The smallest executor a user might write that any_io_executor accepts: execute() posts
// into `Inner` (an io_context's or a thread_pool's executor), with the function's associated
// allocator, as Asio's own executors do; work tracking is a property that changes the type,
// as Asio's does. Never blocking: execute() always queues.
template <class Inner>
class user_executor {
public:
  explicit user_executor(const Inner& inner) noexcept : inner_(inner) {}

  decltype(auto) query(asio::execution::context_t) const noexcept {
    return asio::query(inner_, asio::execution::context);
  }
  static constexpr asio::execution::blocking_t query(asio::execution::blocking_t) noexcept {
    return asio::execution::blocking.never;
  }
  asio::execution::outstanding_work_t query(asio::execution::outstanding_work_t) const noexcept {
    return asio::query(inner_, asio::execution::outstanding_work);
  }

  user_executor require(asio::execution::blocking_t::never_t) const noexcept { return *this; }

  auto require(asio::execution::outstanding_work_t::tracked_t) const {
    using inner = std::decay_t<decltype(asio::require(std::declval<const Inner&>(),
                                                      asio::execution::outstanding_work.tracked))>;
    return user_executor<inner>(asio::require(inner_, asio::execution::outstanding_work.tracked));
  }
  auto require(asio::execution::outstanding_work_t::untracked_t) const {
    using inner = std::decay_t<decltype(asio::require(
        std::declval<const Inner&>(), asio::execution::outstanding_work.untracked))>;
    return user_executor<inner>(asio::require(inner_, asio::execution::outstanding_work.untracked));
  }

  template <class F>
  void execute(F&& f) const {
    asio::post(inner_, marked<std::decay_t<F>>{std::forward<F>(f)});
  }

  friend bool operator==(const user_executor& a, const user_executor& b) noexcept {
    return a.inner_ == b.inner_;
  }
  friend bool operator!=(const user_executor& a, const user_executor& b) noexcept {
    return !(a == b);
  }

private:
  template <class>
  friend class user_executor;

  // The function, run with the mark set; it keeps the function's associated allocator.
  template <class F>
  struct marked {
    using allocator_type = asio::associated_allocator_t<F>;
    allocator_type get_allocator() const noexcept { return asio::get_associated_allocator(f); }
    void operator()() {
      ++detail::user_executor_depth;
      struct unmark {
        ~unmark() { --detail::user_executor_depth; }
      } guard;
      std::move(f)();
    }
    F f;
  };

  Inner inner_;
};

static_assert(asio::execution::is_executor<user_executor<asio::io_context::executor_type>>::value);

// ---------------------------------------------------------------------------------------------
// A user's own execution context.
// ---------------------------------------------------------------------------------------------

// An execution context of a kind neither Asio's timers nor the wheel know: one thread runs
// the functions its executor is given (through an io_context of its own, which is an
// implementation detail the executor does not reveal: its context is the own_context).
class own_context : public asio::execution_context {
public:
  class executor_type {
  public:
    explicit executor_type(own_context& context) noexcept : context_(&context) {}

    own_context& query(asio::execution::context_t) const noexcept { return *context_; }
    static constexpr asio::execution::blocking_t query(asio::execution::blocking_t) noexcept {
      return asio::execution::blocking.never;
    }
    executor_type require(asio::execution::blocking_t::never_t) const noexcept { return *this; }

    template <class F>
    void execute(F&& f) const {
      asio::post(context_->io_, [f = std::forward<F>(f)]() mutable {
        ++detail::user_executor_depth;
        struct unmark {
          ~unmark() { --detail::user_executor_depth; }
        } guard;
        std::move(f)();
      });
    }

    bool running_in_this_thread() const noexcept {
      return context_->io_.get_executor().running_in_this_thread();
    }

    friend bool operator==(const executor_type& a, const executor_type& b) noexcept {
      return a.context_ == b.context_;
    }
    friend bool operator!=(const executor_type& a, const executor_type& b) noexcept {
      return a.context_ != b.context_;
    }

  private:
    own_context* context_;
  };

  own_context() : work_(io_.get_executor()), thread_([this] { io_.run(); }) {}
  own_context(const own_context&) = delete;
  own_context& operator=(const own_context&) = delete;

  // Services go first, while the thread and the io_context their handlers refer to exist
  // (what Asio's own contexts do in their destructors).
  ~own_context() {
    work_.reset();
    io_.stop();
    thread_.join();
    shutdown();
  }

  executor_type get_executor() noexcept { return executor_type(*this); }

private:
  asio::io_context io_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  std::thread thread_;
};

static_assert(asio::execution::is_executor<own_context::executor_type>::value);

// ---------------------------------------------------------------------------------------------
// Odds and ends.
// ---------------------------------------------------------------------------------------------

// A handler whose associated allocator counts into `stats`; calls `f(ec)`.
template <class F>
struct counting_handler {
  using allocator_type = counting_allocator<void>;
  allocator_type get_allocator() const noexcept { return allocator_type(*stats); }
  void operator()(asio::error_code ec) { f(ec); }
  alloc_stats* stats;
  F f;
};

template <class F>
counting_handler<F> with_counting_allocator(alloc_stats& stats, F f) {
  return {&stats, std::move(f)};
}

// Waits, without blocking any io_context, until `flag` is set or `limit` has passed; tells
// which.
inline bool wait_until(const std::atomic<bool>& flag, sclock::duration limit) {
  const auto end = sclock::now() + limit;
  while (!flag.load(std::memory_order_acquire)) {
    if (sclock::now() >= end)
      return false;
    std::this_thread::sleep_for(200us);
  }
  return true;
}

} // namespace asio_wheel::test

#endif // ASIO_WHEEL_TEST_EXECUTOR_TEST_SUPPORT_HPP
