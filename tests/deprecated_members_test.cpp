//
// deprecated_members_test.cpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// Asio's deprecated timer members (expires_from_now(), expires_at() without argument, the
// error_code overloads of cancel(), cancel_one() and expires_*()), where its timer has them:
// before Asio 1.33 (Boost 1.87), without ASIO_NO_DEPRECATED. A program written with them
// changes only the type too. The suite's builds define ASIO_NO_DEPRECATED (their other files
// must not use what Asio deprecates), so this file takes it back before any Asio header: it
// is then a user's file in Asio's default configuration. The members are header code of
// basic_wheel_timer, which no compiled part of the library holds. On Asio 1.33 and later the
// file has no case.
//

#undef ASIO_NO_DEPRECATED
#undef BOOST_ASIO_NO_DEPRECATED

#include <asio_wheel/wheel_timer.hpp>

#include <asio/error.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>

#include <doctest/doctest.h>

#include "asio_test_support.hpp"

#include <chrono>
#include <type_traits>
#include <utility>

using namespace asio_wheel::test;

namespace {

template <typename Timer, typename = void>
struct has_expires_from_now : std::false_type {};

template <typename Timer>
struct has_expires_from_now<Timer,
                            std::void_t<decltype(std::declval<const Timer&>().expires_from_now())>>
    : std::true_type {};

} // namespace

TEST_CASE_TEMPLATE("the deprecated members are there where Asio's timer has them", Timer,
                   TIMER_TYPES) {
  CHECK(has_expires_from_now<Timer>::value == bool(ASIO_WHEEL_ASIO_HAS_DEPRECATED_TIMER_MEMBERS));
}

#if ASIO_WHEEL_ASIO_HAS_DEPRECATED_TIMER_MEMBERS

TEST_CASE_TEMPLATE("the deprecated members act as the ones that replace them", Timer, TIMER_TYPES) {
  using clock = typename Timer::clock_type;
  using duration = typename Timer::duration;
  asio::io_context ioc;
  Timer t(ioc);
  const asio::error_code fault = asio::error::fault; // to see the overloads clear it
  outcome o1, o2, o3, o4;

  CHECK(t.expires_from_now(std::chrono::hours(1)) == 0);
  CHECK(t.expires_at() == t.expiry());
  const duration left = t.expires_from_now();
  CHECK(left > std::chrono::minutes(59));
  CHECK(left <= std::chrono::hours(1));
  t.async_wait(record(o1));

  asio::error_code ec = fault;
  CHECK(t.expires_from_now(std::chrono::hours(2), ec) == 1); // o1 aborted
  CHECK(!ec);
  t.async_wait(record(o2));
  t.async_wait(record(o3));
  ec = fault;
  CHECK(t.cancel_one(ec) == 1); // o2, the oldest
  CHECK(!ec);
  ec = fault;
  CHECK(t.cancel(ec) == 1); // o3
  CHECK(!ec);
  ec = fault;
  CHECK(t.cancel_one(ec) == 0);
  CHECK(!ec);

  ec = fault;
  const auto past = clock::now() - std::chrono::seconds(1);
  CHECK(t.expires_at(past, ec) == 0);
  CHECK(!ec);
  CHECK(t.expires_at() == past);
  CHECK(t.expires_from_now() < duration::zero());
  t.async_wait(record(o4));
  const auto r = guarded_run(ioc);
  CHECK_FALSE(r.timed_out);
  CHECK(o1.ec == kAborted);
  CHECK(o2.ec == kAborted);
  CHECK(o3.ec == kAborted);
  CHECK(o4.ec == kOk);
  CHECK(o1.calls + o2.calls + o3.calls + o4.calls == 4);

  // The reading saturates where expiry() - now() would overflow (Asio's chrono_time_traits).
  t.expires_at((Timer::time_point::min)());
  CHECK(t.expires_from_now() == (duration::min)());
  t.expires_at((Timer::time_point::max)());
  CHECK(t.expires_from_now() > std::chrono::hours(24 * 365));
}
#endif // ASIO_WHEEL_ASIO_HAS_DEPRECATED_TIMER_MEMBERS
