//
// inline_wait_test.cpp
// ~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// A timer keeps one small wait inside itself (timer_entry::inline_): no allocation to arm,
// and the wait shares the timer's cache lines. This binary replaces the global operator new
// to count allocations, so it holds the tests that depend on that count, and the ones that
// drive waits in and out of the inline storage.

#include <asio_wheel/heartbeat.hpp>
#include <asio_wheel/idle_timer.hpp>
#include <asio_wheel/wheel_timer.hpp>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/cancellation_type.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/error.hpp>
#include <asio/io_context.hpp>
#include <asio/use_awaitable.hpp>

#include <doctest/doctest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <deque>
#include <new>
#include <system_error>
#include <utility>
#include <vector>

namespace {
std::atomic<std::size_t> allocations{0};
} // namespace

// Counting replacements of the global allocation functions (the sized and aligned forms
// fall back on these).
void* operator new(std::size_t size) {
  allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size != 0 ? size : 1))
    return p;
  throw std::bad_alloc();
}

void operator delete(void* p) noexcept {
  std::free(p);
}

void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}

namespace {

using namespace std::chrono_literals;
using asio_wheel::wheel_timer;
using asio_wheel::detail::fits_inline;

struct counts {
  int ok = 0;
  int aborted = 0;
};

auto counter(counts& c) {
  return [&c](const asio::error_code& ec) { ++(ec ? c.aborted : c.ok); };
}

// A handler whose move may throw: it must never be moved under the service's lock.
struct throwing_move_handler {
  counts* c;
  throwing_move_handler(counts& cs) : c(&cs) {}
  throwing_move_handler(const throwing_move_handler&) = default;
  throwing_move_handler(throwing_move_handler&& other) noexcept(false) : c(other.c) {}
  void operator()(const asio::error_code& ec) { ++(ec ? c->aborted : c->ok); }
};

// A handler too large for the inline storage.
struct large_handler {
  counts* c;
  std::array<char, 64> payload{};
  void operator()(const asio::error_code& ec) { ++(ec ? c->aborted : c->ok); }
};

using counter_handler = decltype(counter(std::declval<counts&>()));

static_assert(fits_inline<counter_handler>, "a lambda capturing one reference fits");
#if defined(ASIO_HAS_CO_AWAIT)
static_assert(fits_inline<asio::detail::awaitable_handler<asio::any_io_executor, asio::error_code>>,
              "a coroutine's handler (use_awaitable) fits");
#endif
static_assert(!fits_inline<throwing_move_handler>, "a possibly throwing move is kept apart");
static_assert(!fits_inline<large_handler>, "a large handler is kept apart");

TEST_CASE("one small wait per timer lives in the timer: 1000 pending waits allocate nothing") {
  asio::io_context ioc;
  std::vector<wheel_timer> timers;
  timers.reserve(1000);
  for (int i = 0; i < 1000; ++i)
    timers.emplace_back(ioc);
  counts c;
  // The context's first wait creates the driver (Asio's timer allocates for it).
  timers[0].expires_after(1h);
  timers[0].async_wait(counter(c));

  const std::size_t before = allocations.load();
  for (std::size_t i = 1; i < timers.size(); ++i) {
    timers[i].expires_after(1h + std::chrono::milliseconds(i));
    timers[i].async_wait(counter(c));
  }
  CHECK(allocations.load() - before == 0);

  for (auto& t : timers)
    CHECK(t.cancel() == 1);
  ioc.run();
  CHECK(c.aborted == 1000);
  CHECK(c.ok == 0);
}

TEST_CASE("idle_timer and heartbeat waits with a small handler allocate nothing") {
  asio::io_context ioc;
  counts c;
  // The context's first wait creates the driver (Asio's timer allocates for it).
  wheel_timer first(ioc, 1h);
  first.async_wait(counter(c));
  // Neither type is movable (a pending wait refers to its object): a deque builds in place.
  std::deque<asio_wheel::idle_timer> idle;
  std::deque<asio_wheel::heartbeat> beats;
  for (int i = 0; i < 500; ++i) {
    idle.emplace_back(ioc, 1h);
    beats.emplace_back(ioc, asio_wheel::heartbeat::options{1h, 2h});
  }
  int events = 0;
  const std::size_t before = allocations.load();
  for (auto& t : idle)
    t.async_wait(counter(c));
  for (auto& b : beats)
    b.async_next([&events](const asio::error_code& ec, asio_wheel::heartbeat::event) {
      events += ec ? 1 : 100;
    });
  CHECK(allocations.load() - before == 0);
  for (auto& t : idle)
    CHECK(t.cancel() == 1);
  for (auto& b : beats)
    CHECK(b.cancel() == 1);
  CHECK(first.cancel() == 1);
  ioc.run();
  CHECK(c.aborted == 501);
  CHECK(events == 500);
}

TEST_CASE("a second wait on a timer, and handlers that do not fit, still complete") {
  asio::io_context ioc;
  wheel_timer t(ioc, 5ms);
  counts small, second, throwing, large;
  t.async_wait(counter(small));
  t.async_wait(counter(second));
  t.async_wait(throwing_move_handler(throwing));
  t.async_wait(large_handler{&large});
  SUBCASE("expiry") {
    ioc.run();
    CHECK(small.ok == 1);
    CHECK(second.ok == 1);
    CHECK(throwing.ok == 1);
    CHECK(large.ok == 1);
  }
  SUBCASE("cancel_one in turn, re-arming in between") {
    CHECK(t.cancel_one() == 1); // the inline one: its storage is free again
    counts again;
    t.async_wait(counter(again));
    CHECK(t.cancel_one() == 1);
    CHECK(t.cancel_one() == 1);
    ioc.run();
    CHECK(small.aborted == 1);
    CHECK(second.aborted == 1);
    CHECK(throwing.aborted == 1);
    CHECK(large.ok == 1);
    CHECK(again.ok == 1);
  }
}

TEST_CASE("abort, destroy, move and re-arm before the aborted handler runs") {
  asio::io_context ioc;
  counts c;
  auto t = std::make_unique<wheel_timer>(ioc, 1h);
  t->async_wait(counter(c));
  t->expires_after(1h); // aborts it: its handler is queued, outside the timer
  t->async_wait(counter(c));
  wheel_timer moved(std::move(*t));
  t->expires_after(1ms);
  t->async_wait(counter(c)); // the moved-from timer's storage is free for a new wait
  t.reset();                 // aborts that one
  CHECK(moved.cancel() == 1);
  ioc.run();
  CHECK(c.aborted == 3);
  CHECK(c.ok == 0);
}

// Asio 1.22's own timer loses these slots on a move; the conformance suite therefore tests
// the moves without them, and this test the slot of the wait that lives in the timer.
TEST_CASE("per-operation cancellation of a wait that moved with its timer's inline storage") {
  asio::io_context ioc;
  wheel_timer t(ioc, 30ms);
  counts first, second, third, target;
  asio::cancellation_signal sig;
  t.async_wait(counter(first));
  t.async_wait(counter(second));
  CHECK(t.cancel_one() == 1); // `first` leaves the inline storage
  t.async_wait(asio::bind_cancellation_slot(sig.slot(), counter(target))); // inline again
  SUBCASE("newest") {}
  SUBCASE("between two others") {
    t.async_wait(counter(third));
  }
  SUBCASE("oldest") {
    t.async_wait(counter(third));
    CHECK(t.cancel_one() == 1); // aborts `second`
  }
  wheel_timer u(std::move(t));
  wheel_timer v(ioc, 1h);
  v = std::move(u);
  sig.emit(asio::cancellation_type::terminal);
  CHECK(target.aborted == 0); // queued, not invoked inside emit()
  ioc.run();
  CHECK(target.aborted == 1);
  CHECK(target.ok == 0);
  CHECK(first.aborted == 1);
  CHECK(second.aborted + second.ok == 1);
  CHECK(third.aborted == 0);
  CHECK(v.cancel() == 0);
}

#if defined(ASIO_HAS_CO_AWAIT)
TEST_CASE("coroutines re-arming their own timers in a loop") {
  asio::io_context ioc;
  int done = 0;
  std::vector<wheel_timer> timers;
  timers.reserve(50);
  for (int i = 0; i < 50; ++i)
    timers.emplace_back(ioc);
  for (auto& t : timers) {
    asio::co_spawn(
        ioc,
        [&t, &done]() -> asio::awaitable<void> {
          for (int round = 0; round < 5; ++round) {
            t.expires_after(1ms);
            co_await t.async_wait(asio::use_awaitable);
          }
          ++done;
        },
        asio::detached);
  }
  ioc.run();
  CHECK(done == 50);
}
#endif // defined(ASIO_HAS_CO_AWAIT)

} // namespace
