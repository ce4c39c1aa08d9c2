//
// cancel_after_test.cpp
// ~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// asio_wheel::cancel_after / cancel_at, the completion token adapters, and the `||` timeout
// pattern with asio_wheel::wheel_timer.
//
//   * On a loopback TCP read that never gets data, with callbacks, use_awaitable, deferred
//     and as_tuple: the read completes with operation_aborted at the deadline, never before.
//   * When the operation completes first, its result passes through unchanged and the wheel
//     entry leaves at once: io_context::run() returns promptly instead of waiting for a 10 s
//     deadline.
//   * The cancellation type given to the adapter is the one the operation sees; a
//     cancellation emitted on the outer handler's slot is forwarded to the operation.
//   * `op || timer.async_wait()`: the winner's result, and Asio issue #900 (with Asio 1.22's
//     operator||, an operation that *throws* is not a "success", so || waits for the timer;
//     the operation must report its error as a value (as_tuple, redirect_error, or a wrapper
//     that catches) for || to return at once).
//   * The io_context destroyed with an operation pending: the handler is destroyed, never
//     called, and nothing leaks (the ASan+LSan build checks the last part).
//
//   * Asio's interface, each a TEST_CASE_TEMPLATE over asio::cancel_after / cancel_at (Asio
//     1.31 and later) and ours: the user's timer, the partial form, initiations called as
//     lvalues, a deferred operation's deadline counted from its launch, use_future.
//
// Timing: never-early checks are exact (the start is taken before the operation is
// launched, which is when cancel_after computes its deadline); nothing asserts a tight upper
// bound.
// "Promptly" means well under the 10 s (kFar) that a far deadline would take. Every run goes
// through guarded_run(), whose watchdog stops an io_context that hangs.

#include <asio_wheel/cancel_after.hpp>
#include <asio_wheel/wheel_timer.hpp>

#include <asio/async_result.hpp>
#include <asio/bind_cancellation_slot.hpp>
#include <asio/bind_executor.hpp>
#if ASIO_WHEEL_ASIO_HAS_IMMEDIATE_EXECUTOR
#include <asio/associated_immediate_executor.hpp>
#include <asio/bind_immediate_executor.hpp>
#endif
#include <asio/buffer.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/cancellation_type.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/error.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/post.hpp>
#include <asio/read.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/strand.hpp>
#include <asio/system_error.hpp>
#include <asio/system_executor.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/use_future.hpp>
#include <asio/write.hpp>

#include <doctest/doctest.h>

#include "asio_test_support.hpp"
#include "asio_tokens.hpp"
#include "cancel_adapters.hpp"
#include "manual_op.hpp"

#include <array>
#include <chrono>
#include <cstddef>
#include <exception>
#include <functional>
#include <future>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>

namespace doctest {

template <>
struct StringMaker<asio::cancellation_type_t> {
  static String convert(asio::cancellation_type_t t) {
    return String(("cancellation_type(" + std::to_string(static_cast<unsigned>(t)) + ")").c_str());
  }
};

} // namespace doctest

namespace {

using namespace std::chrono_literals;
using namespace asio_wheel::test;
using asio::ip::tcp;

// "Promptly": generous for a noisy 2-core machine (and sanitizers), still far below kFar.
constexpr auto kPrompt = 5s;
// The short deadline of the tests that expect the deadline to win.
constexpr auto kShort = 50ms;

const asio::error_code kEof = asio::error::eof;

// ---------------------------------------------------------------------------------------
// A connected loopback TCP pair: `server` is the accepted end.

struct loopback {
  explicit loopback(asio::io_context& ctx)
      : acceptor(ctx, tcp::endpoint(asio::ip::address_v4::loopback(), 0)), client(ctx),
        server(ctx) {
    client.connect(acceptor.local_endpoint());
    acceptor.accept(server);
  }

  tcp::acceptor acceptor;
  tcp::socket client;
  tcp::socket server;
};

// Starts a read of lb.server, cancelled after `timeout`, whose handler owns the socket, the
// buffer and a life_token counting into `destroyed`, and counts its calls in `called`.
template <class Duration>
void start_owning_read(loopback& lb, Duration timeout, int& destroyed, int& called) {
  auto sock = std::make_shared<tcp::socket>(std::move(lb.server));
  auto buf = std::make_shared<std::array<char, 64>>();
  sock->async_read_some(
      asio::buffer(*buf),
      asio_wheel::cancel_after(timeout, [sock, buf, guard = std::make_shared<life_token>(destroyed),
                                         &called](asio::error_code, std::size_t) { ++called; }));
}

// An operation with no I/O executor (its initiation has no get_executor()): completes only
// through its cancellation slot, from inside the emit.
template <typename Token>
auto async_forever(Token&& token) {
  return asio::async_initiate<Token, void(asio::error_code)>(
      [](auto handler) {
        auto slot = asio::get_associated_cancellation_slot(handler);
        REQUIRE(slot.is_connected());
        auto h = std::make_shared<std::optional<decltype(handler)>>(std::move(handler));
        slot.assign([h](asio::cancellation_type_t) {
          if (*h) {
            auto last = std::move(**h);
            h->reset();
            std::move(last)(asio::error::operation_aborted);
          }
        });
      },
      token);
}

// The outcome of an awaitable that does not throw: a value or the exception. (Not a
// std::variant: Asio's operator|| flattens variants.)
template <typename T>
struct caught {
  std::optional<T> value;
  std::exception_ptr error;
};

// Does not throw: the operation's exception becomes a value, so that `||` sees a success.
template <typename T>
asio::awaitable<caught<T>> no_throw(asio::awaitable<T> a) {
  caught<T> c;
  try {
    c.value.emplace(co_await std::move(a));
  } catch (...) {
    c.error = std::current_exception();
  }
  co_return c;
}

asio::error_code code_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const asio::system_error& ex) {
    return ex.code();
  } catch (...) {
    return asio::error::fault;
  }
}

// Awaits `op`, an operation that reports a failure by throwing (use_awaitable), and records
// its completion into `o`: the error it threw, and what it returned (the bytes of a read).
template <typename T>
asio::awaitable<void> await_recording(outcome& o, asio::awaitable<T> op) {
  asio::error_code ec;
  std::size_t n = 0;
  try {
    if constexpr (std::is_void_v<T>)
      co_await std::move(op);
    else
      n = co_await std::move(op);
  } catch (const asio::system_error& e) {
    ec = e.code();
  }
  o.complete(ec, n);
}

// What `op || timer.async_wait(use_awaitable)` returned (index 0: the operation won, 1: the
// timer), and how long it took.
template <typename T>
struct race_result {
  std::variant<T, std::monostate> winner;
  sclock::duration elapsed{};
};

// Races `op` against a wheel_timer that expires after `timeout`, with Asio's operator||.
template <typename T>
asio::awaitable<race_result<T>> race_timer(asio::awaitable<T> op, sclock::duration timeout) {
  using namespace asio::experimental::awaitable_operators;
  // Read before the timer computes its expiry: read after, a preemption in between would make
  // a timely timer look early.
  const auto t0 = sclock::now();
  asio_wheel::wheel_timer timer(co_await asio::this_coro::executor, timeout);
  auto winner = co_await (std::move(op) || timer.async_wait(asio::use_awaitable));
  co_return race_result<T>{std::move(winner), sclock::now() - t0};
}

} // namespace

// =======================================================================================
// The deadline wins: a loopback read that never gets data
// =======================================================================================

TEST_CASE("cancel_after, callback: a read without data is aborted at the deadline, never "
          "before") {
  asio::io_context ctx;
  loopback lb(ctx);
  std::array<char, 64> buf{};
  outcome o;
  const auto t0 = sclock::now();
  lb.server.async_read_some(asio::buffer(buf), asio_wheel::cancel_after(kShort, record_read(o)));
  const auto r = guarded_run(ctx);
  CHECK_ABORTED_AT(o, t0 + kShort);
  CHECK_PROMPT(r);
}

TEST_CASE("cancel_at, callback: a read without data is aborted at the time point, never "
          "before") {
  asio::io_context ctx;
  loopback lb(ctx);
  std::array<char, 64> buf{};
  outcome o;
  const auto deadline = sclock::now() + kShort;
  lb.server.async_read_some(asio::buffer(buf), asio_wheel::cancel_at(deadline, record_read(o)));
  const auto r = guarded_run(ctx);
  CHECK_ABORTED_AT(o, deadline);
  CHECK_PROMPT(r);
}

TEST_CASE("cancel_after, use_awaitable: the read throws operation_aborted at the deadline") {
  asio::io_context ctx;
  loopback lb(ctx);
  outcome o;
  sclock::time_point t0{};
  spawn(ctx, [&]() -> asio::awaitable<void> {
    std::array<char, 64> buf{};
    t0 = sclock::now();
    co_await await_recording(
        o, lb.server.async_read_some(asio::buffer(buf),
                                     asio_wheel::cancel_after(kShort, asio::use_awaitable)));
  });
  const auto r = guarded_run(ctx);
  CHECK_ABORTED_AT(o, t0 + kShort);
  CHECK_PROMPT(r);
}

TEST_CASE("cancel_at, use_awaitable: the read throws operation_aborted at the time point") {
  asio::io_context ctx;
  loopback lb(ctx);
  outcome o;
  sclock::time_point deadline{};
  spawn(ctx, [&]() -> asio::awaitable<void> {
    std::array<char, 64> buf{};
    deadline = sclock::now() + kShort;
    co_await await_recording(
        o, lb.server.async_read_some(asio::buffer(buf),
                                     asio_wheel::cancel_at(deadline, asio::use_awaitable)));
  });
  const auto r = guarded_run(ctx);
  CHECK_ABORTED_AT(o, deadline);
  CHECK_PROMPT(r);
}

TEST_CASE("cancel_after, deferred: launched at once, the read is aborted at the deadline") {
  asio::io_context ctx;
  loopback lb(ctx);
  std::array<char, 64> buf{};
  outcome o;

  SUBCASE("launched with a callback") {
    const auto t0 = sclock::now();
    auto op =
        lb.server.async_read_some(asio::buffer(buf), asio_wheel::cancel_after(kShort, deferred));
    CHECK(o.calls == 0); // deferred: nothing started yet
    std::move(op)(record_read(o));
    const auto r = guarded_run(ctx);
    CHECK_ABORTED_AT(o, t0 + kShort);
    CHECK_PROMPT(r);
  }

  SUBCASE("awaited in a coroutine") {
    sclock::time_point t0{};
    spawn(ctx, [&]() -> asio::awaitable<void> {
      t0 = sclock::now();
      auto op =
          lb.server.async_read_some(asio::buffer(buf), asio_wheel::cancel_after(kShort, deferred));
      auto [ec, n] = co_await std::move(op)(as_tuple(asio::use_awaitable));
      o.complete(ec, n);
    });
    const auto r = guarded_run(ctx);
    CHECK_ABORTED_AT(o, t0 + kShort);
    CHECK_PROMPT(r);
  }
}

TEST_CASE("cancel_after with as_tuple, inside and outside the adapter") {
  asio::io_context ctx;
  loopback lb(ctx);
  outcome o;
  sclock::time_point t0{};

  SUBCASE("cancel_after(t, as_tuple(use_awaitable))") {
    spawn(ctx, [&]() -> asio::awaitable<void> {
      std::array<char, 64> buf{};
      t0 = sclock::now();
      auto [ec, n] = co_await lb.server.async_read_some(
          asio::buffer(buf), asio_wheel::cancel_after(kShort, as_tuple(asio::use_awaitable)));
      o.complete(ec, n);
    });
  }

  SUBCASE("as_tuple(cancel_after(t, use_awaitable))") {
    spawn(ctx, [&]() -> asio::awaitable<void> {
      std::array<char, 64> buf{};
      t0 = sclock::now();
      auto [ec, n] = co_await lb.server.async_read_some(
          asio::buffer(buf), as_tuple(asio_wheel::cancel_after(kShort, asio::use_awaitable)));
      o.complete(ec, n);
    });
  }

  SUBCASE("cancel_after(t, redirect_error(use_awaitable, ec))") {
    spawn(ctx, [&]() -> asio::awaitable<void> {
      std::array<char, 64> buf{};
      asio::error_code ec;
      t0 = sclock::now();
      const std::size_t n = co_await lb.server.async_read_some(
          asio::buffer(buf),
          asio_wheel::cancel_after(kShort, asio::redirect_error(asio::use_awaitable, ec)));
      o.complete(ec, n);
    });
  }

  const auto r = guarded_run(ctx);
  CHECK_ABORTED_AT(o, t0 + kShort);
  CHECK(o.bytes == 0);
  CHECK_PROMPT(r);
}

TEST_CASE("cancel_after on a composed operation (async_read of 4 bytes, 3 sent)") {
  asio::io_context ctx;
  loopback lb(ctx);
  std::array<char, 4> buf{};
  outcome o;
  asio::write(lb.client, asio::buffer("abc", 3));
  const auto t0 = sclock::now();
  asio::async_read(lb.server, asio::buffer(buf), asio_wheel::cancel_after(kShort, record_read(o)));
  const auto r = guarded_run(ctx);
  CHECK_ABORTED_AT(o, t0 + kShort);
  CHECK(o.bytes == 3); // what was read before the deadline is reported
  CHECK_PROMPT(r);
}

TEST_CASE("cancel_after / cancel_at: a deadline beyond the clock's range never passes, whatever "
          "its unit") {
  asio::io_context ctx;
  outcome o;
  asio::steady_timer op(ctx, 30ms); // the operation: a wait that succeeds after 30 ms
  using hours_point = std::chrono::time_point<sclock, std::chrono::hours>;
  asio_wheel::wheel_timer deadline(ctx);

  SUBCASE("cancel_at(time_point<steady_clock, hours>::max())") {
    op.async_wait(asio_wheel::cancel_at(hours_point::max(), record(o)));
  }
  SUBCASE("cancel_at(the user's timer, time_point<steady_clock, hours>::max())") {
    op.async_wait(asio_wheel::cancel_at(deadline, hours_point::max(), record(o)));
  }
  SUBCASE("cancel_after(an infinite floating-point duration)") {
    op.async_wait(asio_wheel::cancel_after(
        std::chrono::duration<double>(std::numeric_limits<double>::infinity()), record(o)));
  }
  SUBCASE("cancel_after(212 years in thirds of a second): no overflow converting them") {
    op.async_wait(asio_wheel::cancel_after(
        std::chrono::duration<long long, std::ratio<1, 3>>(20'000'000'000), record(o)));
  }
  SUBCASE("cancel_after(hours::max())") {
    op.async_wait(asio_wheel::cancel_after(std::chrono::hours::max(), record(o)));
  }

  const auto r = guarded_run(ctx);
  CHECK(o.calls == 1);
  CHECK(o.ec == kOk);
  CHECK_PROMPT(r);
}

TEST_CASE("cancel_after / cancel_at: a NaN timeout or expiry throws std::invalid_argument "
          "saying so") {
  asio::io_context ctx;
  asio_wheel::wheel_timer deadline(ctx);
  const std::chrono::duration<double> nan(std::numeric_limits<double>::quiet_NaN());
  const std::chrono::time_point<sclock, std::chrono::duration<double>> nan_point(nan);
  CHECK_THROWS_WITH_AS((void)asio_wheel::cancel_after(nan), doctest::Contains("timeout is NaN"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS((void)asio_wheel::cancel_after(deadline, nan),
                       doctest::Contains("timeout is NaN"), std::invalid_argument);
  CHECK_THROWS_WITH_AS((void)asio_wheel::cancel_at(nan_point), doctest::Contains("expiry is NaN"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS((void)asio_wheel::cancel_at(deadline, nan_point),
                       doctest::Contains("expiry is NaN"), std::invalid_argument);
}

TEST_CASE("cancel_at a time point already passed: the operation is cancelled at once") {
  asio::io_context ctx;
  loopback lb(ctx);
  std::array<char, 64> buf{};
  outcome o;
  SUBCASE("a second ago") {
    lb.server.async_read_some(asio::buffer(buf),
                              asio_wheel::cancel_at(sclock::now() - 1s, record_read(o)));
  }
  SUBCASE("time_point::min()") {
    lb.server.async_read_some(asio::buffer(buf),
                              asio_wheel::cancel_at(sclock::time_point::min(), record_read(o)));
  }
  SUBCASE("cancel_after(0)") {
    lb.server.async_read_some(asio::buffer(buf), asio_wheel::cancel_after(0ms, record_read(o)));
  }
  SUBCASE("cancel_after(negative)") {
    lb.server.async_read_some(asio::buffer(buf), asio_wheel::cancel_after(-5s, record_read(o)));
  }
  const auto r = guarded_run(ctx);
  CHECK_ABORTED(o);
  CHECK_PROMPT(r);
}

// =======================================================================================
// The operation wins: the result passes through, the wheel entry leaves at once
// =======================================================================================

TEST_CASE("the operation completes first: the result passes through and run() returns at "
          "once") {
  asio::io_context ctx;
  loopback lb(ctx);
  std::array<char, 64> buf{};
  outcome o;
  asio::write(lb.client, asio::buffer("hello", 5));

  SUBCASE("callback, cancel_after") {
    lb.server.async_read_some(asio::buffer(buf), asio_wheel::cancel_after(kFar, record_read(o)));
  }
  SUBCASE("callback, cancel_at") {
    lb.server.async_read_some(asio::buffer(buf),
                              asio_wheel::cancel_at(sclock::now() + kFar, record_read(o)));
  }
  SUBCASE("callback, explicit cancellation type") {
    lb.server.async_read_some(
        asio::buffer(buf),
        asio_wheel::cancel_after(kFar, asio::cancellation_type::partial, record_read(o)));
  }
  SUBCASE("callback, cancel_after(duration::max()) saturates") {
    lb.server.async_read_some(asio::buffer(buf),
                              asio_wheel::cancel_after(sclock::duration::max(), record_read(o)));
  }
  SUBCASE("callback, cancel_at(time_point::max())") {
    lb.server.async_read_some(asio::buffer(buf),
                              asio_wheel::cancel_at(sclock::time_point::max(), record_read(o)));
  }
  SUBCASE("deferred") {
    auto op =
        lb.server.async_read_some(asio::buffer(buf), asio_wheel::cancel_after(kFar, deferred));
    std::move(op)(record_read(o));
  }
  SUBCASE("use_awaitable") {
    spawn(ctx, [&]() -> asio::awaitable<void> {
      const std::size_t n = co_await lb.server.async_read_some(
          asio::buffer(buf), asio_wheel::cancel_after(kFar, asio::use_awaitable));
      o.complete(kOk, n);
    });
  }
  SUBCASE("as_tuple(use_awaitable)") {
    spawn(ctx, [&]() -> asio::awaitable<void> {
      auto [ec, n] = co_await lb.server.async_read_some(
          asio::buffer(buf), asio_wheel::cancel_after(kFar, as_tuple(asio::use_awaitable)));
      o.complete(ec, n);
    });
  }

  const auto r = guarded_run(ctx);
  CHECK(o.calls == 1);
  CHECK_FALSE(o.ec);
  REQUIRE(o.bytes == 5);
  CHECK(std::string_view(buf.data(), o.bytes) == "hello");
  // The 10 s wheel wait left with the operation's completion, so run() ran out of work.
  CHECK_PROMPT(r);
}

TEST_CASE("an error completes first: it passes through unchanged (eof when the peer closes)") {
  asio::io_context ctx;
  loopback lb(ctx);
  std::array<char, 64> buf{};
  outcome o;
  lb.client.close();

  SUBCASE("callback") {
    lb.server.async_read_some(asio::buffer(buf), asio_wheel::cancel_after(kFar, record_read(o)));
  }
  SUBCASE("use_awaitable: the original exception") {
    spawn(ctx, [&]() -> asio::awaitable<void> {
      co_await await_recording(
          o, lb.server.async_read_some(asio::buffer(buf),
                                       asio_wheel::cancel_after(kFar, asio::use_awaitable)));
    });
  }
  const auto r = guarded_run(ctx);
  CHECK(o.calls == 1);
  CHECK(o.ec == kEof);
  CHECK_PROMPT(r);
}

TEST_CASE("a custom operation (async_initiate) that completes first: result passes through, "
          "run() returns at once") {
  asio::io_context ctx;
  manual_op op(ctx);
  outcome o;
  op.async_run(asio_wheel::cancel_after(kFar, record(o)));
  CHECK(op.initiations == 1);
  CHECK(op.had_slot); // the adapter gave the operation a cancellation slot
  asio::post(ctx, [&] { op.complete_later(asio::error::host_unreachable); });
  const auto r = guarded_run(ctx);
  CHECK(o.calls == 1);
  CHECK(o.ec == asio::error_code(asio::error::host_unreachable));
  CHECK(op.cancellations == 0);
  CHECK_PROMPT(r);
}

TEST_CASE("an operation without an I/O executor, with a plain callback: the deadline still "
          "cancels it, from system_executor (Asio's default candidate before 1.38)") {
  // Asio 1.38's default candidate, inline_executor, has no context to keep a wheel in
  // (ASIO_WHEEL_ASIO_DEFAULT_CANDIDATE_IS_INLINE); the adapter names system_executor itself.
  using default_candidate = asio::associated_executor_t<void (*)(asio::error_code)>;
  CHECK_TRAIT(std::is_same_v<default_candidate, asio::system_executor> !=
              bool(ASIO_WHEEL_ASIO_DEFAULT_CANDIDATE_IS_INLINE));

  // Nothing runs a context on this thread: the deadline fires on one of system_context's.
  std::promise<std::pair<asio::error_code, std::thread::id>> result;
  const auto t0 = sclock::now();
  async_forever(asio_wheel::cancel_after(kShort, [&](asio::error_code ec) {
    result.set_value({ec, std::this_thread::get_id()});
  }));
  auto done = result.get_future();
  REQUIRE(done.wait_for(kWatchdog) == std::future_status::ready);
  const auto [ec, thread] = done.get();
  CHECK(sclock::now() - t0 >= kShort);
  CHECK(ec == asio::error::operation_aborted);
  CHECK(thread != std::this_thread::get_id());
}

TEST_CASE("an operation without an I/O executor, with use_future (whose executor has no "
          "execution context before Asio 1.26): the deadline still cancels it") {
  const auto t0 = sclock::now();
  std::future<void> done = async_forever(asio_wheel::cancel_after(kShort, asio::use_future));
  REQUIRE(done.wait_for(kWatchdog) == std::future_status::ready);
  CHECK(sclock::now() - t0 >= kShort);
  CHECK(error_of(done) == kAborted);
}

TEST_CASE("many operations that complete first leave nothing in the wheel") {
  asio::io_context ctx;
  loopback lb(ctx);
  std::array<char, 1> buf{};
  constexpr int kReads = 200;
  int completed = 0;
  std::function<void()> next = [&] {
    lb.server.async_read_some(asio::buffer(buf),
                              asio_wheel::cancel_after(kFar, [&](asio::error_code ec, std::size_t) {
                                CHECK_FALSE(ec);
                                if (++completed < kReads)
                                  next();
                              }));
  };
  const std::string data(kReads, 'x');
  asio::write(lb.client, asio::buffer(data));
  next();
  const auto r = guarded_run(ctx);
  CHECK(completed == kReads);
  CHECK_PROMPT(r);
}

TEST_CASE("the handler runs on its associated executor (a strand), and keeps its allocator "
          "association") {
  asio::io_context ctx;
  loopback lb(ctx);
  auto strand = asio::make_strand(ctx);
  std::array<char, 64> buf{};
  bool in_strand_timeout = false;
  bool in_strand_success = false;
  int calls = 0;
  const auto t0 = sclock::now();
  lb.server.async_read_some(
      asio::buffer(buf),
      asio_wheel::cancel_after(
          kShort, asio::bind_executor(strand, [&](asio::error_code ec, std::size_t) {
            ++calls;
            CHECK(ec == kAborted);
            CHECK(sclock::now() >= t0 + kShort);
            in_strand_timeout = strand.running_in_this_thread();
            // Then one that completes first, on the same strand.
            asio::write(lb.client, asio::buffer("x", 1));
            lb.server.async_read_some(
                asio::buffer(buf),
                asio_wheel::cancel_after(
                    kFar, asio::bind_executor(strand, [&](asio::error_code ec2, std::size_t n) {
                      ++calls;
                      CHECK_FALSE(ec2);
                      CHECK(n == 1);
                      in_strand_success = strand.running_in_this_thread();
                    })));
          })));
  const auto r = guarded_run(ctx);
  CHECK(calls == 2);
  CHECK(in_strand_timeout);
  CHECK(in_strand_success);
  CHECK_PROMPT(r);
}

// =======================================================================================
// Cancellation types and forwarding
// =======================================================================================

TEST_CASE("the operation is cancelled with the given type: terminal by default, partial and "
          "total as asked") {
  asio::io_context ctx;
  manual_op op(ctx);
  outcome o;
  asio::cancellation_type_t expected = asio::cancellation_type::terminal;
  const auto t0 = sclock::now();
  sclock::time_point deadline = t0 + kShort;

  SUBCASE("cancel_after(t, token): terminal") {
    op.async_run(asio_wheel::cancel_after(kShort, record(o)));
  }
  SUBCASE("cancel_after(t, terminal, token)") {
    op.async_run(asio_wheel::cancel_after(kShort, asio::cancellation_type::terminal, record(o)));
  }
  SUBCASE("cancel_after(t, partial, token)") {
    expected = asio::cancellation_type::partial;
    op.async_run(asio_wheel::cancel_after(kShort, asio::cancellation_type::partial, record(o)));
  }
  SUBCASE("cancel_after(t, total, token)") {
    expected = asio::cancellation_type::total;
    op.async_run(asio_wheel::cancel_after(kShort, asio::cancellation_type::total, record(o)));
  }
  SUBCASE("cancel_at(tp, token): terminal") {
    op.async_run(asio_wheel::cancel_at(deadline, record(o)));
  }
  SUBCASE("cancel_at(tp, partial, token)") {
    expected = asio::cancellation_type::partial;
    op.async_run(asio_wheel::cancel_at(deadline, asio::cancellation_type::partial, record(o)));
  }
  SUBCASE("cancel_at(tp, total, token)") {
    expected = asio::cancellation_type::total;
    op.async_run(asio_wheel::cancel_at(deadline, asio::cancellation_type::total, record(o)));
  }
  SUBCASE("cancel_after(t, partial, use_awaitable)") {
    expected = asio::cancellation_type::partial;
    spawn(ctx, [&]() -> asio::awaitable<void> {
      co_await await_recording(
          o, op.async_run(asio_wheel::cancel_after(kShort, asio::cancellation_type::partial,
                                                   asio::use_awaitable)));
    });
  }

  const auto r = guarded_run(ctx);
  CHECK(op.cancellations == 1);
  CHECK(op.last_type == expected);
  CHECK_ABORTED_AT(o, deadline);
  CHECK_PROMPT(r);
}

TEST_CASE("a cancellation emitted on the outer handler's slot is forwarded to the operation") {
  asio::cancellation_signal outer; // outlives every operation bound to its slot
  asio::io_context ctx;

  SUBCASE("socket read, terminal: aborted at once, and the 10 s deadline leaves the wheel") {
    loopback lb(ctx);
    std::array<char, 64> buf{};
    outcome o;
    lb.server.async_read_some(
        asio::buffer(buf),
        asio_wheel::cancel_after(kFar, asio::bind_cancellation_slot(outer.slot(), record_read(o))));
    asio::post(ctx, [&] { outer.emit(asio::cancellation_type::terminal); });
    const auto r = guarded_run(ctx);
    CHECK_ABORTED(o);
    CHECK_PROMPT(r);
  }

  SUBCASE("custom operation: the outer type is forwarded as is (partial, total)") {
    for (const auto type : {asio::cancellation_type::partial, asio::cancellation_type::total,
                            asio::cancellation_type::terminal}) {
      CAPTURE(type);
      manual_op op(ctx);
      outcome o;
      op.async_run(
          asio_wheel::cancel_after(kFar, asio::bind_cancellation_slot(outer.slot(), record(o))));
      asio::post(ctx, [&] { outer.emit(type); });
      const auto r = guarded_run(ctx);
      ctx.restart();
      CHECK(op.cancellations == 1);
      CHECK(op.last_type == type);
      CHECK_ABORTED(o);
      CHECK_PROMPT(r);
    }
  }

  SUBCASE("coroutine: co_spawn bound to the slot, emit aborts the awaited read") {
    loopback lb(ctx);
    outcome o;
    asio::co_spawn(
        ctx,
        [&]() -> asio::awaitable<void> {
          std::array<char, 64> buf{};
          co_await await_recording(
              o, lb.server.async_read_some(asio::buffer(buf),
                                           asio_wheel::cancel_after(kFar, asio::use_awaitable)));
        },
        asio::bind_cancellation_slot(outer.slot(), [](std::exception_ptr e) {
          if (e)
            std::rethrow_exception(e);
        }));
    asio_wheel::wheel_timer later(ctx, 20ms);
    later.async_wait([&](asio::error_code) { outer.emit(asio::cancellation_type::terminal); });
    const auto r = guarded_run(ctx);
    CHECK_ABORTED(o);
    CHECK_PROMPT(r);
  }
}

// The forwarder in the user's slot keeps the adapter's state alive, possibly past the
// context. Once the operation has finished, that state must hold nothing of the context: a
// strand executor copy, for one, needs its context to be destroyed (ASan and TSan saw it).
TEST_CASE("a strand-bound operation's state holds nothing of its context once it finished") {
  asio::cancellation_signal outer; // outlives the context, so the forwarder does too
  outcome o;
  {
    asio::io_context ctx;
    asio::steady_timer op(ctx, 1ms);
    {
      auto strand = asio::make_strand(ctx);
      op.async_wait(asio_wheel::cancel_after(
          kFar,
          asio::bind_cancellation_slot(outer.slot(), asio::bind_executor(strand, record(o)))));
    } // from here, the operation's handler and the adapter's state hold the strand
    guarded_run(ctx);
    CHECK_SUCCESS_AT(o, op.expiry());
  }
  outer.emit(asio::cancellation_type::terminal); // reaches nothing
  CHECK(o.calls == 1);
} // `outer` destroyed: the forwarder releases the state

// The adapter never touches the user's signal after the operation completes (the signal may
// be gone by then): its forwarder stays in the slot, owning what it refers to, until the
// slot is re-used or the signal destroyed; an emit then reaches nothing.
TEST_CASE("after the operation completes, an emit on the outer slot is harmless") {
  asio::cancellation_signal outer;
  asio::io_context ctx;
  loopback lb(ctx);
  std::array<char, 64> buf{};
  outcome o;
  asio::write(lb.client, asio::buffer("x", 1));
  lb.server.async_read_some(
      asio::buffer(buf),
      asio_wheel::cancel_after(kFar, asio::bind_cancellation_slot(outer.slot(), record_read(o))));
  CHECK(outer.slot().has_handler()); // forwarding installed while pending
  const auto r = guarded_run(ctx);
  CHECK(o.calls == 1);
  CHECK_FALSE(o.ec);
  CHECK_PROMPT(r);
  outer.emit(asio::cancellation_type::terminal); // harmless
  CHECK(o.calls == 1);
  outer.slot().clear(); // the forwarder releases the adapter's state (LSan checks it)
}

// The deadline's wait and the operation's completion can be decided in the same turn of the
// wheel: here a wheel_timer due at the same tick completes the operation from its handler,
// so the operation's handler runs before (or after) the deadline's. Either way the deadline
// must not emit into the slot of an operation that has already completed: for an operation
// whose slot handler refers to its own (by then freed) state, that emit is a use after free.
TEST_CASE("the deadline never cancels an operation that has already completed (same tick)") {
  asio::io_context ctx;
  manual_op op(ctx);
  outcome o;
  const auto deadline = sclock::now() + 30ms;
  asio_wheel::wheel_timer completer(ctx);
  completer.expires_at(deadline);

  SUBCASE("the completing timer's wait is started first") {
    completer.async_wait([&](asio::error_code) { op.complete_now(); });
    op.async_run(asio_wheel::cancel_at(deadline, record(o)));
  }
  SUBCASE("the operation is started first") {
    op.async_run(asio_wheel::cancel_at(deadline, record(o)));
    completer.async_wait([&](asio::error_code) { op.complete_now(); });
  }

  const auto r = guarded_run(ctx);
  CHECK(o.calls == 1);
  CHECK(op.emits_after_completion == 0);
  CHECK_PROMPT(r);
}

// =======================================================================================
// The `||` pattern with wheel_timer, and Asio #900
// =======================================================================================

using namespace asio::experimental::awaitable_operators;

TEST_CASE("||: the read wins when data arrives; the timer is cancelled and run() returns at "
          "once") {
  asio::io_context ctx;
  loopback lb(ctx);
  asio::write(lb.client, asio::buffer("ping", 4));
  std::size_t index = 99;
  std::size_t bytes = 0;
  spawn(ctx, [&]() -> asio::awaitable<void> {
    std::array<char, 64> buf{};
    auto race = co_await race_timer(
        lb.server.async_read_some(asio::buffer(buf), asio::use_awaitable), kFar);
    index = race.winner.index();
    if (index == 0)
      bytes = std::get<0>(race.winner);
  });
  const auto r = guarded_run(ctx);
  CHECK(index == 0);
  CHECK(bytes == 4);
  CHECK_PROMPT(r);
}

TEST_CASE("||: the timer wins when no data comes, never before its expiry; the read is "
          "cancelled") {
  asio::io_context ctx;
  loopback lb(ctx);
  std::size_t index = 99;
  sclock::time_point t0{}, t1{};
  asio::error_code later_read;
  spawn(ctx, [&]() -> asio::awaitable<void> {
    std::array<char, 64> buf{};
    asio_wheel::wheel_timer timer(co_await asio::this_coro::executor);
    t0 = sclock::now();
    timer.expires_after(kShort);
    auto result = co_await (lb.server.async_read_some(asio::buffer(buf), asio::use_awaitable) ||
                            timer.async_wait(asio::use_awaitable));
    t1 = sclock::now();
    index = result.index();
    // The socket is usable again: the cancelled read is gone.
    asio::write(lb.client, asio::buffer("z", 1));
    auto [ec, n] =
        co_await lb.server.async_read_some(asio::buffer(buf), as_tuple(asio::use_awaitable));
    later_read = ec;
    CHECK(n == 1);
  });
  const auto r = guarded_run(ctx);
  CHECK(index == 1);
  CHECK(t1 >= t0 + kShort);
  CHECK_FALSE(later_read);
  CHECK_PROMPT(r);
}

TEST_CASE("||, #900: when the operation fails, || returns at once, without waiting for the "
          "10 s timer, as long as the failure is a value, not an exception") {
  asio::io_context ctx;
  loopback lb(ctx);
  std::size_t index = 99;
  asio::error_code ec_seen;
  sclock::duration elapsed{};

  // A read whose failure comes as a value, through as_tuple, against the 10 s timer.
  auto race_as_tuple = [&]() -> asio::awaitable<void> {
    std::array<char, 64> buf{};
    auto race = co_await race_timer(
        lb.server.async_read_some(asio::buffer(buf), as_tuple(asio::use_awaitable)), kFar);
    elapsed = race.elapsed;
    index = race.winner.index();
    if (index == 0)
      ec_seen = std::get<0>(std::get<0>(race.winner));
  };

  SUBCASE("the peer closes: eof via as_tuple") {
    lb.client.close();
    spawn(ctx, race_as_tuple);
  }

  SUBCASE("the peer closes while the read is pending: eof via redirect_error") {
    asio_wheel::wheel_timer closer(ctx, 20ms);
    closer.async_wait([&](asio::error_code) { lb.client.close(); });
    spawn(ctx, [&]() -> asio::awaitable<void> {
      std::array<char, 64> buf{};
      asio::error_code ec;
      auto race =
          co_await race_timer(lb.server.async_read_some(
                                  asio::buffer(buf), asio::redirect_error(asio::use_awaitable, ec)),
                              kFar);
      elapsed = race.elapsed;
      index = race.winner.index();
      ec_seen = ec;
    });
  }

  SUBCASE("the read fails immediately (socket already closed): bad_descriptor via as_tuple") {
    lb.server.close();
    spawn(ctx, race_as_tuple);
  }

  SUBCASE("the operation throws: a wrapper turns the exception into a value") {
    lb.client.close();
    spawn(ctx, [&]() -> asio::awaitable<void> {
      std::array<char, 64> buf{};
      auto race = co_await race_timer(
          no_throw(lb.server.async_read_some(asio::buffer(buf), asio::use_awaitable)), kFar);
      elapsed = race.elapsed;
      index = race.winner.index();
      if (index == 0) {
        const auto& c = std::get<0>(race.winner);
        if (c.error)
          ec_seen = code_of(c.error);
      }
    });
  }

  const auto r = guarded_run(ctx);
  CHECK(index == 0);
  CHECK(ec_seen != kOk);
  CHECK(ec_seen != kAborted);
  CHECK(elapsed < kPrompt);
  CHECK_PROMPT(r);
}

// Documents the pitfall itself (Asio 1.22's operator|| waits for one *success*): with a read
// that throws, || does not return when the read fails; it waits for the timer, reports the
// timer as the winner, and the read's error is lost. A short timer keeps the test fast.
TEST_CASE("||, #900 pitfall: a throwing read makes || wait for the timer (Asio 1.22 "
          "behaviour, the reason for the as_tuple form above)") {
  asio::io_context ctx;
  loopback lb(ctx);
  lb.client.close();
  constexpr auto kTimer = 150ms;
  std::size_t index = 99;
  sclock::duration elapsed{};
  spawn(ctx, [&]() -> asio::awaitable<void> {
    std::array<char, 64> buf{};
    auto race = co_await race_timer(
        lb.server.async_read_some(asio::buffer(buf), asio::use_awaitable), kTimer);
    elapsed = race.elapsed;
    index = race.winner.index();
  });
  const auto r = guarded_run(ctx);
  CHECK(index == 1);              // "the timer won"
  CHECK(elapsed >= kTimer - 1ms); // the eof came at once, || waited for the timer anyway
  CHECK_PROMPT(r);
}

TEST_CASE("the alternative to ||: cancel_after passes a failure through at once") {
  asio::io_context ctx;
  loopback lb(ctx);
  lb.client.close();
  asio::error_code ec_seen;
  sclock::duration elapsed{};
  spawn(ctx, [&]() -> asio::awaitable<void> {
    std::array<char, 64> buf{};
    const auto t0 = sclock::now();
    try {
      co_await lb.server.async_read_some(asio::buffer(buf),
                                         asio_wheel::cancel_after(kFar, asio::use_awaitable));
    } catch (const asio::system_error& e) {
      ec_seen = e.code();
    }
    elapsed = sclock::now() - t0;
  });
  const auto r = guarded_run(ctx);
  CHECK(ec_seen == kEof);
  CHECK(elapsed < kPrompt);
  CHECK_PROMPT(r);
}

// =======================================================================================
// Destroying the io_context with an operation pending
// =======================================================================================

TEST_CASE("the io_context destroyed with a cancel_after operation pending: the handler is "
          "destroyed, never called, nothing leaks") {
  int destroyed = 0;
  int called = 0;

  SUBCASE("callback owning its socket, never run") {
    asio::io_context ctx;
    loopback lb(ctx);
    start_owning_read(lb, kFar, destroyed, called);
  }

  SUBCASE("callback owning its socket, after the context ran a while") {
    asio::io_context ctx;
    loopback lb(ctx);
    start_owning_read(lb, kFar, destroyed, called);
    ctx.run_for(20ms);
  }

  SUBCASE("the wheel service created before the socket's") {
    asio::io_context ctx;
    asio_wheel::wheel_timer first(ctx, kFar);
    first.async_wait([](asio::error_code) {});
    loopback lb(ctx);
    start_owning_read(lb, kFar, destroyed, called);
    ctx.poll();
  }

  SUBCASE("the deadline already passed, its cancellation not yet delivered") {
    asio::io_context ctx;
    loopback lb(ctx);
    start_owning_read(lb, 1ms, destroyed, called);
    std::this_thread::sleep_for(10ms);
  }

  SUBCASE("a coroutine awaiting the read, owning its socket") {
    asio::io_context ctx;
    loopback lb(ctx);
    asio::co_spawn(
        ctx,
        [](tcp::socket sock, std::shared_ptr<life_token>, int& calls) -> asio::awaitable<void> {
          std::array<char, 64> buf{};
          co_await sock.async_read_some(asio::buffer(buf),
                                        asio_wheel::cancel_after(kFar, asio::use_awaitable));
          ++calls;
        }(std::move(lb.server), std::make_shared<life_token>(destroyed), called),
        asio::detached);
    ctx.poll();
  }

  SUBCASE("a custom operation holding the handler, destroyed with the context's objects") {
    asio::io_context ctx;
    manual_op op(ctx);
    op.async_run(asio_wheel::cancel_after(kFar, [guard = std::make_shared<life_token>(destroyed),
                                                 &called](asio::error_code) { ++called; }));
    ctx.poll();
  } // op (declared after ctx) goes first, destroying the handler, then the context

  // Each way, the handler was destroyed, never called.
  CHECK(destroyed == 1);
  CHECK(called == 0);
}

// =======================================================================================
// Asio's interface: over asio::cancel_after / cancel_at (Asio >= 1.31) and ours
// =======================================================================================

// A completion token whose async_result calls the initiation as an lvalue, as the
// completion_token_v2 of Asio's own unit tests does (the initiation is taken by value).
struct lvalue_initiating_token {
  outcome* o;
};

template <>
struct asio::async_result<lvalue_initiating_token, void(asio::error_code)> {
  template <typename Initiation, typename... Args>
  static void initiate(Initiation initiation, lvalue_initiating_token token, Args&&... args) {
    initiation(record(*token.o), std::forward<Args>(args)...);
  }
};

// The scene of most tests below: an operation (a far wait of Asio's timer) on a context, a
// user's timer of type Timer beside it, and what the operation's handler saw.
template <typename Timer = asio::steady_timer>
struct deadline_scene {
  asio::io_context ctx;
  asio::steady_timer op{ctx, kFar};
  Timer user_timer{ctx};
  outcome o;
  const sclock::time_point t0 = sclock::now();

  // Runs the context: the operation is aborted at `deadline`, and run() returns promptly.
  void run_aborted_at(sclock::time_point deadline) {
    const auto r = guarded_run(ctx);
    CHECK_ABORTED_AT(o, deadline);
    CHECK_PROMPT(r);
  }

  // Runs the context: the operation, due in 1 ms, completes first, with success, and the
  // far deadline's wait does not keep run() busy. `adapt` makes the operation's token from
  // its handler.
  template <typename Adapt>
  void run_completing_first(Adapt adapt) {
    ctx.restart();
    outcome first;
    op.expires_after(1ms);
    op.async_wait(adapt(record(first)));
    const auto r = guarded_run(ctx);
    CHECK_SUCCESS_AT(first, op.expiry());
    CHECK_PROMPT(r);
  }
};

TEST_CASE_TEMPLATE("cancel_after / cancel_at on the user's Asio timer: the deadline waits on "
                   "that timer, armed when the operation is launched; the operation completing "
                   "first cancels its wait",
                   F, CANCEL_ADAPTERS) {
  deadline_scene<> s;
  const auto deadline = s.t0 + kShort;
  SUBCASE("cancel_after(timer, d, token)") {
    s.op.async_wait(F::after(s.user_timer, kShort, record(s.o)));
  }
  SUBCASE("cancel_after(timer, d, type, token)") {
    s.op.async_wait(F::after(s.user_timer, kShort, asio::cancellation_type::terminal, record(s.o)));
  }
  SUBCASE("cancel_at(timer, tp, token)") {
    s.op.async_wait(F::at(s.user_timer, deadline, record(s.o)));
  }
  SUBCASE("cancel_at(timer, tp, type, token)") {
    s.op.async_wait(F::at(s.user_timer, deadline, asio::cancellation_type::terminal, record(s.o)));
  }
  CHECK(s.user_timer.expiry() >= deadline);
  CHECK(s.user_timer.expiry() - deadline < kPrompt);
  s.run_aborted_at(deadline);
  // Not F::after(timer, d)(handler): Asio's partial_cancel_after_timer::operator() does not
  // compile (it leaves the timer out of the adapter it builds; Asio 1.31 to 1.38.2).
  s.run_completing_first([&](auto handler) { return F::after(s.user_timer, kFar, handler); });
}

TEST_CASE("asio_wheel::cancel_after / cancel_at also take the user's wheel timer") {
  deadline_scene<asio_wheel::wheel_timer> s;
  const auto deadline = s.t0 + kShort;
  SUBCASE("cancel_after(timer, d, token)") {
    s.op.async_wait(asio_wheel::cancel_after(s.user_timer, kShort, record(s.o)));
  }
  SUBCASE("cancel_at(timer, tp, type, token)") {
    s.op.async_wait(
        asio_wheel::cancel_at(s.user_timer, deadline, asio::cancellation_type::total, record(s.o)));
  }
  SUBCASE("cancel_after(timer, d), the partial form") {
    s.op.async_wait(asio_wheel::cancel_after(s.user_timer, kShort)(record(s.o)));
  }
  CHECK(s.user_timer.expiry() >= deadline);
  s.run_aborted_at(deadline);
  s.run_completing_first(asio_wheel::cancel_after(s.user_timer, kFar));
}

TEST_CASE_TEMPLATE("the partial form: cancel_after(d) / cancel_at(tp) without a token adapts "
                   "the operation's default token (deferred), or the token it is called with",
                   F, CANCEL_ADAPTERS) {
  deadline_scene<> s;
  const auto deadline = s.t0 + kShort;
  SUBCASE("op(cancel_after(d)), launched with a handler") {
    auto deferred_op = s.op.async_wait(F::after(kShort));
    CHECK(s.o.calls == 0);
    std::move(deferred_op)(record(s.o));
  }
  SUBCASE("op(cancel_at(tp, type)), launched with a handler") {
    auto deferred_op = s.op.async_wait(F::at(deadline, asio::cancellation_type::terminal));
    std::move(deferred_op)(record(s.o));
  }
  SUBCASE("op(cancel_after(timer, d)), launched with a handler") {
    auto deferred_op = s.op.async_wait(F::after(s.user_timer, kShort));
    std::move(deferred_op)(record(s.o));
  }
  SUBCASE("op(cancel_after(d)(handler))") {
    s.op.async_wait(F::after(kShort)(record(s.o)));
  }
  SUBCASE("op(cancel_at(timer, tp)(handler))") {
    s.op.async_wait(F::at(s.user_timer, deadline)(record(s.o)));
  }
#if ASIO_WHEEL_ASIO_HAS_CANCEL_AFTER
  SUBCASE("co_await op(cancel_after(d))") {
    spawn(s.ctx, [&]() -> asio::awaitable<void> {
      asio::error_code ec;
      try {
        co_await s.op.async_wait(F::after(kShort));
      } catch (const asio::system_error& e) {
        ec = e.code();
      }
      s.o.complete(ec);
    });
  }
#endif
  s.run_aborted_at(deadline);
}

TEST_CASE_TEMPLATE("an initiation called as an lvalue (a completion_token_v2-style token, a "
                   "const adapter), alone and nested",
                   F, CANCEL_ADAPTERS) {
  deadline_scene<> s;
  const lvalue_initiating_token token{&s.o};
  SUBCASE("cancel_after(d, token)") {
    s.op.async_wait(F::after(kShort, token));
  }
  SUBCASE("cancel_after(timer, d, token)") {
    s.op.async_wait(F::after(s.user_timer, kShort, token));
  }
  SUBCASE("cancel_at(tp, token)") {
    s.op.async_wait(F::at(s.t0 + kShort, token));
  }
  SUBCASE("nested: the inner deadline first") {
    s.op.async_wait(F::after(kFar, F::after(kShort, token)));
  }
  SUBCASE("nested: the outer deadline first") {
    s.op.async_wait(F::after(kShort, F::after(kFar, token)));
  }
  SUBCASE("a const adapter") {
    const auto adapter = F::after(kShort, record(s.o));
    s.op.async_wait(adapter);
  }
  s.run_aborted_at(s.t0 + kShort);
}

TEST_CASE_TEMPLATE("deferred: cancel_after's timeout counts from the launch of the operation, "
                   "not from the adapter's creation",
                   F, CANCEL_ADAPTERS) {
  deadline_scene<> s;
  constexpr auto kTimeout = 100ms;
  auto launch_later = [&](auto deferred_op) {
    std::this_thread::sleep_for(2 * kTimeout);
    const auto launch = sclock::now();
    std::move(deferred_op)(record(s.o));
    return launch;
  };
  sclock::time_point launch{};
  SUBCASE("cancel_after(d, deferred)") {
    launch = launch_later(s.op.async_wait(F::after(kTimeout, deferred)));
  }
  SUBCASE("cancel_after(d), the partial form") {
    launch = launch_later(s.op.async_wait(F::after(kTimeout)));
  }
  s.run_aborted_at(launch + kTimeout);
}

TEST_CASE_TEMPLATE("cancel_after(d, use_future): the future reports operation_aborted", F,
                   CANCEL_ADAPTERS) {
  asio::io_context ctx;
  asio::steady_timer op(ctx, kFar);
  const auto t0 = sclock::now();
  std::future<void> done = op.async_wait(F::after(kShort, asio::use_future));
  const auto r = guarded_run(ctx);
  REQUIRE(done.wait_for(0s) == std::future_status::ready);
  CHECK(error_of(done) == kAborted);
  CHECK(sclock::now() >= t0 + kShort);
  CHECK_PROMPT(r);
}

namespace {

// An associator of the user's own, built as Asio builds its own (the handler's nested type,
// else an asio::associator specialisation, else the default): an adapter that forwards every
// associator to the handler it carries, as Asio's does, forwards this one too.
template <typename T, typename D>
struct associated_tag;

template <typename T, typename = void>
struct has_tag_type : std::false_type {};
template <typename T>
struct has_tag_type<T, std::void_t<typename T::tag_type>> : std::true_type {};

template <typename T, typename D, typename = void, typename = void>
struct associated_tag_impl {
  using type = D;
  static type get(const T&, const D& d = D()) noexcept { return d; }
};
template <typename T, typename D>
struct associated_tag_impl<T, D, std::void_t<typename T::tag_type>> {
  using type = typename T::tag_type;
  static type get(const T& t, const D& = D()) noexcept { return t.tag(); }
};
template <typename T, typename D>
struct associated_tag_impl<T, D, std::enable_if_t<!has_tag_type<T>::value>,
                           std::void_t<typename asio::associator<associated_tag, T, D>::type>>
    : asio::associator<associated_tag, T, D> {};

template <typename T, typename D>
struct associated_tag : associated_tag_impl<T, D> {};

struct tagged_handler {
  using tag_type = int;
  int tag() const noexcept { return 42; }
  outcome* o;
  void operator()(const asio::error_code& ec) const { o->complete(ec); }
};

// An operation that reads its handler's associators when it starts, then completes.
struct inspecting_initiation {
  using executor_type = asio::io_context::executor_type;
  executor_type ex;
  int* tag;
  bool* immediate_bound;

  executor_type get_executor() const noexcept { return ex; }

  template <typename Handler>
  void operator()(Handler&& handler) const {
    *tag = associated_tag<std::decay_t<Handler>, int>::get(handler, -1);
#if ASIO_WHEEL_ASIO_HAS_IMMEDIATE_EXECUTOR
    // Bound, it is the handler's system_executor; else one derived from the I/O executor.
    using immediate = decltype(asio::get_associated_immediate_executor(handler, ex));
    *immediate_bound = std::is_same_v<std::decay_t<immediate>, asio::system_executor>;
#endif
    asio::post(
        ex, [h = std::forward<Handler>(handler)]() mutable { std::move(h)(asio::error_code()); });
  }
};

} // namespace

TEST_CASE_TEMPLATE("the adapter's handler forwards every associator of the user's handler: "
                   "one of the user's own, and the immediate executor where Asio has it",
                   F, CANCEL_ADAPTERS) {
  asio::io_context ctx;
  outcome o;
  int tag = 0;
  bool immediate_bound = false;
  const inspecting_initiation init{ctx.get_executor(), &tag, &immediate_bound};
  SUBCASE("a handler with an associator of its own") {
    auto token = F::after(kFar, tagged_handler{&o});
    asio::async_initiate<decltype(token), void(asio::error_code)>(init, token);
    ctx.run();
    CHECK(tag == 42);
  }
#if ASIO_WHEEL_ASIO_HAS_IMMEDIATE_EXECUTOR
  SUBCASE("a handler bound to an immediate executor") {
    auto token =
        F::after(kFar, asio::bind_immediate_executor(asio::system_executor(),
                                                     [&](asio::error_code ec) { o.complete(ec); }));
    asio::async_initiate<decltype(token), void(asio::error_code)>(init, token);
    ctx.run();
    CHECK(immediate_bound);
  }
#endif
  CHECK(o.calls == 1);
}
