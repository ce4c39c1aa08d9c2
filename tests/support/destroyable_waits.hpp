//
// support/destroyable_waits.hpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_TEST_DESTROYABLE_WAITS_HPP
#define ASIO_WHEEL_TEST_DESTROYABLE_WAITS_HPP

// The objects of the destruction sweeps (destruction_sweep_test, destruction_sweep_mt_test),
// each behind one interface so that a TEST_CASE_TEMPLATE runs Asio's timer and ours through
// the same scenario: make(executor, d) builds one whose first wait completes d after its
// construction, wait() starts that wait with a handler called as h(ec). steady_kind is
// asio::basic_waitable_timer (the expectation), idle_kind an idle_timer, heartbeat_kind a
// heartbeat whose first event is its ping (ping_after d); the *_range kinds take a range
// {d, 1000 d}, which timeout_scale::set(0.0) brings down to d. `touchable`: the object has
// touch() (no Asio equivalent).

#include <asio_wheel/heartbeat.hpp>
#include <asio_wheel/idle_timer.hpp>

#include <asio/basic_waitable_timer.hpp>
#include <asio/error.hpp>

#include <atomic>
#include <memory>
#include <utility>

namespace asio_wheel::test {

// What the handler of one wait saw: called exactly once is the property every sweep checks.
struct wait_record {
  std::atomic<int> calls{0};
  asio::error_code ec;
  bool ping = false; // heartbeat kinds: the event was a ping
};

// The handler: the error code for every kind, and the event for a heartbeat.
struct record_handler {
  wait_record* r;
  void operator()(const asio::error_code& ec) const {
    r->ec = ec;
    r->calls.fetch_add(1, std::memory_order_acq_rel);
  }
  template <typename Event>
  void operator()(const asio::error_code& ec, Event ev) const {
    r->ping = ev == Event::ping;
    (*this)(ec);
  }
};

template <typename Clock>
struct steady_kind {
  using object = asio::basic_waitable_timer<Clock>;
  static constexpr bool touchable = false;
  template <typename Executor>
  static std::unique_ptr<object> make(const Executor& ex, typename Clock::duration d) {
    return std::make_unique<object>(ex, d);
  }
  template <typename Handler>
  static void wait(object& o, Handler&& h) {
    o.async_wait(std::forward<Handler>(h));
  }
};

template <typename Clock, bool Range = false>
struct idle_kind {
  using object = asio_wheel::basic_idle_timer<Clock>;
  static constexpr bool touchable = true;
  template <typename Executor>
  static std::unique_ptr<object> make(const Executor& ex, typename Clock::duration d) {
    if (Range)
      return std::make_unique<object>(ex, typename object::range{d, d * 1000});
    return std::make_unique<object>(ex, d);
  }
  template <typename Handler>
  static void wait(object& o, Handler&& h) {
    o.async_wait(std::forward<Handler>(h));
  }
};

template <typename Clock, bool Range = false>
struct heartbeat_kind {
  using object = asio_wheel::basic_heartbeat<Clock>;
  static constexpr bool touchable = true;
  template <typename Executor>
  static std::unique_ptr<object> make(const Executor& ex, typename Clock::duration d) {
    if (Range)
      return std::make_unique<object>(ex,
                                      typename object::options{{d, d * 1000}, {d * 2, d * 2000}});
    return std::make_unique<object>(ex, typename object::options{d, d * 2});
  }
  template <typename Handler>
  static void wait(object& o, Handler&& h) {
    o.async_next(std::forward<Handler>(h));
  }
};

} // namespace asio_wheel::test

#endif // ASIO_WHEEL_TEST_DESTROYABLE_WAITS_HPP
