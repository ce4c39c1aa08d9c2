//
// tests/toolchain/all_api.cpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// A user's file: includes <asio.hpp> and <asio_wheel.hpp> and uses every public API of the
// library once, as written in the README, with nothing of the test suite. It must compile
// without a warning under each row of README's tested-toolchains table (C++17 and C++20,
// g++ and clang, libstdc++ and libc++, with and without exceptions and RTTI), and runs:
// exit status 0 when every completion came as Asio's timers would have it.
//
// Without exceptions (ASIO_NO_EXCEPTIONS), Asio requires the program to define
// asio::detail::throw_exception: user_throw_exception.hpp's reports and aborts (nothing
// here should fail).
//
// Standalone Asio's spelling; the Boost flavour reaches it through the test build's
// forwarding headers.

#include <asio.hpp>
#include <asio_wheel.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <optional>

#include "user_throw_exception.hpp" // for builds without exceptions

namespace {

using namespace std::chrono_literals;

int failures = 0;

void expect(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "all_api: FAILED: %s\n", what);
    ++failures;
  }
}

// basic_wheel_timer / wheel_timer: steady_timer's whole interface.
void timers(asio::io_context& io) {
  asio_wheel::wheel_timer a(io);
  asio_wheel::wheel_timer b(io.get_executor(), 2ms);
  asio_wheel::wheel_timer c(io, std::chrono::steady_clock::now() + 1ms);
  asio_wheel::basic_wheel_timer<std::chrono::system_clock> sys(io, 1ms);
  asio_wheel::wheel_timer::rebind_executor<asio::strand<asio::io_context::executor_type>>::other
      on_strand(asio::make_strand(io), 1ms);

  a.expires_after(1ms);
  expect(a.expiry() > std::chrono::steady_clock::now() - 1s, "expiry()");
  int fired = 0;
  a.async_wait([&](asio::error_code ec) { fired += !ec; });
  int moved_away = 0; // b's wait: moved with b, then aborted by the move assignment
  b.async_wait([&](asio::error_code ec) { moved_away += ec == asio::error::operation_aborted; });
  sys.async_wait([&](asio::error_code ec) { fired += !ec; });
  on_strand.async_wait([&](asio::error_code ec) { fired += !ec; });
  c.async_wait(
      [&](asio::error_code ec) { expect(ec == asio::error::operation_aborted, "cancel"); });
  expect(c.cancel_one() == 1, "cancel_one()");
  expect(c.cancel() == 0, "cancel() with nothing pending");
  c.expires_at(std::chrono::steady_clock::now());
  c.wait(); // blocking, as steady_timer's
  asio::error_code ec;
  c.wait(ec);
  expect(!ec, "wait(ec)");
#if ASIO_WHEEL_ASIO_HAS_DEPRECATED_TIMER_MEMBERS
  // Asio's deprecated members, where its timer has them (before 1.33, no ASIO_NO_DEPRECATED).
  expect(c.expires_from_now(1h) == 0, "expires_from_now(d)");
  expect(c.expires_at() == c.expiry(), "expires_at()");
  expect(c.expires_from_now() > 59min, "expires_from_now()");
  expect(c.expires_from_now(1h, ec) == 0 && !ec, "expires_from_now(d, ec)");
  expect(c.expires_at(c.expiry(), ec) == 0 && !ec, "expires_at(t, ec)");
  expect(c.cancel(ec) == 0 && !ec, "cancel(ec)");
  expect(c.cancel_one(ec) == 0 && !ec, "cancel_one(ec)");
  c.expires_at(std::chrono::steady_clock::now());
#endif

  // Moves, and a future.
  asio_wheel::wheel_timer moved(std::move(b));
  moved = asio_wheel::wheel_timer(io, 1ms);
  std::future<void> f = moved.async_wait(asio::use_future);

  // Per-operation cancellation.
  asio::cancellation_signal signal;
  asio_wheel::wheel_timer long_one(io, 1h);
  long_one.async_wait(asio::bind_cancellation_slot(signal.slot(), [&](asio::error_code e) {
    expect(e == asio::error::operation_aborted, "per-operation cancellation");
  }));
  signal.emit(asio::cancellation_type::terminal);

  asio_wheel::wheel_timer::set_tick(io, asio_wheel::wheel_timer::tick(io));
  io.run();
  io.restart();
  f.get();
  expect(fired == 3 && moved_away == 1, "three timers fired, one aborted by a move");
}

// cancel_after / cancel_at around one of Asio's own operations.
void cancel_adapters(asio::io_context& io) {
  asio::steady_timer forever(io, 1h);
  asio::steady_timer forever_too(io, 1h);
  int aborted = 0;
  forever.async_wait(asio_wheel::cancel_after(
      1ms, [&](asio::error_code ec) { aborted += ec == asio::error::operation_aborted; }));
  forever_too.async_wait(asio_wheel::cancel_at(
      std::chrono::steady_clock::now() + 1ms, asio::cancellation_type::all,
      [&](asio::error_code ec) { aborted += ec == asio::error::operation_aborted; }));
  io.run();
  io.restart();
  expect(aborted == 2, "cancel_after and cancel_at");
}

// Coroutines, where the compiler and Asio have them (C++20), and exceptions (Asio's
// awaitable needs them).
#if defined(ASIO_HAS_CO_AWAIT) && defined(__cpp_exceptions)
#define ALL_API_COROUTINES 1
#endif

#if defined(ALL_API_COROUTINES)
asio::awaitable<void> with_timeout(int& aborted) {
  asio::steady_timer forever(co_await asio::this_coro::executor, 1h);
  asio::error_code ec;
  co_await forever.async_wait(
      asio_wheel::cancel_after(1ms, asio::redirect_error(asio::use_awaitable, ec)));
  aborted += ec == asio::error::operation_aborted;
  asio_wheel::wheel_timer t(co_await asio::this_coro::executor, 1ms);
  co_await t.async_wait(asio::use_awaitable);
}

void coroutines(asio::io_context& io) {
  int aborted = 0;
  asio::co_spawn(io, with_timeout(aborted), asio::detached);
  io.run();
  io.restart();
  expect(aborted == 1, "co_await with asio_wheel::cancel_after");
}
#endif

// idle_timer, heartbeat, heartbeat_group, timeout_scale.
void activity(asio::io_context& io) {
  asio_wheel::idle_timer idle(io, 2ms);
  asio_wheel::idle_timer ranged(io.get_executor(), {1ms, 3ms});
  idle.touch();
  expect(idle.last_activity() <= std::chrono::steady_clock::now(), "last_activity()");
  expect(idle.get_timeout() == asio_wheel::idle_timer::range(2ms), "get_timeout()");
  idle.set_timeout(asio_wheel::timeout_range<asio_wheel::idle_timer::duration>(1ms, 2ms));
  expect(ranged.timeout() == 3ms, "timeout() at factor 1");
  int idled = 0;
  idle.async_wait([&](asio::error_code ec) { idled += !ec; });
  ranged.async_wait([&](asio::error_code ec) { idled += !ec; });

  asio_wheel::heartbeat beat(io, {1ms, 1h}); // a drop far enough that a slow run still pings
  expect(beat.get_options().drop_after == asio_wheel::heartbeat::range(1h), "get_options()");
  int pings = 0;
  beat.async_next([&](asio::error_code ec, asio_wheel::heartbeat::event ev) {
    pings += !ec && ev == asio_wheel::heartbeat::event::ping;
  });

  struct connection : asio_wheel::heartbeat_group::member {};
  connection conn;
  int drops = 0;
  auto group = std::make_unique<asio_wheel::heartbeat_group>(
      io, asio_wheel::heartbeat_group::options{1ms, 2ms},
      [&](asio_wheel::heartbeat_group::member& m, asio_wheel::heartbeat_group::event ev) {
        drops += ev == asio_wheel::heartbeat_group::event::drop && &m == &conn;
      });
  group->watch(conn);
  conn.touch();
  expect(conn.is_watched() && group->size() == 1, "watch()");
  expect(conn.last_activity() <= std::chrono::steady_clock::now(), "member::last_activity()");

  asio_wheel::timeout_scale& scale = asio_wheel::timeout_scale::of(io);
  scale.set(1.0);
  expect(asio_wheel::timeout_scale::of(io.get_executor()).factor() == 1.0, "factor()");

  io.run();
  io.restart();
  expect(idled == 2 && pings == 1 && drops == 1, "idle, ping and drop");
  expect(group->statistics().drops == 1 && !group->unwatch(conn), "group statistics");
  expect(idle.cancel() == 0 && beat.cancel() == 0, "cancel() with nothing pending");
  group.reset();
}

void statistics(asio::io_context& io) {
  const asio_wheel::wheel_statistics s = asio_wheel::get_statistics(io);
  expect(s.waits_started > 0 && s.waits_pending() == 0, "get_statistics()");
  expect(s.lateness_quantile(0.99) >= s.lateness_quantile(0.5), "lateness_quantile()");
  const asio_wheel::wheel_statistics v =
      asio_wheel::get_statistics<asio_wheel::virtual_clock>(io, false);
  expect(v.timers_pending == 0, "get_statistics<virtual_clock>()");
}

// Virtual time: the timers on asio_wheel::virtual_clock.
void virtual_time() {
  asio::io_context io;
  asio_wheel::virtual_time vt(io);
  asio_wheel::basic_wheel_timer<asio_wheel::virtual_clock> t(io, 30min);
  asio_wheel::basic_idle_timer<asio_wheel::virtual_clock> idle(io, 10min);
  asio_wheel::basic_heartbeat<asio_wheel::virtual_clock> beat(io, {1min, 2min});
  asio_wheel::basic_heartbeat_group<asio_wheel::virtual_clock> group(io, {0min, 5min},
                                                                     [](auto&, auto) {});
  int done = 0;
  t.async_wait([&](asio::error_code ec) { done += !ec; });
  idle.async_wait([&](asio::error_code ec) { done += !ec; });
  beat.async_next([&](asio::error_code ec, auto) { done += !ec; });
  expect(vt.next_deadline().has_value(), "next_deadline()");
  vt.advance(29min);
  {
    asio_wheel::virtual_time::hold hold(vt);
    expect(vt.holds() == 1, "hold");
    hold.release();
  }
  vt.run_for(1min);
  vt.run();
  expect(done == 3 && asio_wheel::virtual_time::now() >= asio_wheel::virtual_clock::now(),
         "virtual timers");
  static_assert(asio_wheel::is_virtual_clock<asio_wheel::virtual_clock>::value, "");
}

} // namespace

int main() {
  asio::io_context io;
  timers(io);
  cancel_adapters(io);
#if defined(ALL_API_COROUTINES)
  coroutines(io);
#endif
  activity(io);
  statistics(io);
  virtual_time();
  asio_wheel::error_code ec = asio::error::operation_aborted;
  const asio_wheel::system_error error(ec);
  expect(error.code() == ec, "asio_wheel::error_code / system_error");
  std::printf("all_api: %s\n", failures == 0 ? "passed" : "FAILED");
  return failures == 0 ? 0 : 1;
}
