//
// completion_order_test.cpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~
//
// The order in which completions run, against Asio's (issue 23, items 9 and 10):
//
//   * waits due in the same tick of the wheel: Asio completes timers in order of their expiry
//     times (its heap; equal times in no defined order: remove_timer's down_heap swaps on
//     equal keys), so timers armed one after another for the same duration complete in the
//     order they were armed. The wheel completes a tick's waits in the order their timers
//     were filed for it: the order armed, a moved timer keeping its place, except after a
//     lazy re-arm (README "Order of simultaneous expiries");
//   * a wait whose expiry has passed when it starts, against I/O that is ready: Asio's
//     reactor queues the I/O it finds ready, then the timers it finds expired, in one pass
//     (epoll_reactor::run: descriptors first, then get_ready_timers), so the I/O completes
//     first; the wheel's expiry turn for such a wait comes from its alarm, an Asio timer, in
//     that same order (README "Order around I/O").
//
// The same-tick cases run on a frozen manual_clock, stepped by a microsecond between arms, so
// that every expiry is exact and the order of expiry times certain; each case is a template
// over Asio's timer and ours on that clock. The I/O cases use real loopback sockets, made
// ready (poll(2) says so) before the wait starts.
//

#include <asio_wheel/basic_wheel_timer.hpp>
#include <asio_wheel/statistics.hpp>
#include <asio_wheel/wheel_timer.hpp>

#include <asio/basic_waitable_timer.hpp>
#include <asio/buffer.hpp>
#include <asio/error.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <asio/write.hpp>

#include <doctest/doctest.h>

#include "asio_test_support.hpp"
#include "frozen_run.hpp"

#if defined(_WIN32)
#include <winsock2.h> // WSAPoll (Asio has included it already)
#else
#include <poll.h>
#endif

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

using namespace std::chrono_literals;
using namespace asio_wheel::test;

// ---------------------------------------------------------------------------------------------
// Same tick
// ---------------------------------------------------------------------------------------------

struct order_tag;
using order_clock = frozen_clock<order_tag>;
using asio_order_timer = asio::basic_waitable_timer<order_clock>;
using wheel_order_timer = asio_wheel::basic_wheel_timer<order_clock>;

// Between two arms: the expiry times of timers armed for one duration then differ, in the
// order they were armed (Asio's order), and still fall in one tick of the wheel (1 ms).
constexpr auto kStep = 1us;
// Past a tick's end: an expiry is rounded up to the next tick boundary, whose offset from
// frozen_start is not known here.
constexpr auto kTick = 1ms;

// Appends "<name> " (or "<name>-aborted ") to `out` when the wait completes.
auto log(std::string& out, const char* name) {
  return [&out, name](const asio::error_code& ec) {
    out += std::string(name) + (ec ? "-aborted " : " ");
  };
}

// A context, its log, three timers and the clock, frozen. A wait far ahead (the pilot) starts
// first: the wheel's ticks begin at its first wait, and the waits of a case start half a
// tick later, so that those armed a few microseconds apart for one duration fall in one
// tick. (Asio's timer has no ticks.)
template <typename Timer>
struct same_tick {
  asio::io_context ioc;
  std::string out;
  Timer pilot{ioc};
  Timer a{ioc}, b{ioc}, c{ioc};

  same_tick() {
    order_clock::reset(order_clock::time_point(frozen_start), /*running=*/false);
    pilot.expires_at(order_clock::now() + 1h);
    pilot.async_wait([](const asio::error_code&) {});
    order_clock::step(std::chrono::microseconds(kTick) / 2);
  }
  ~same_tick() { pilot.cancel(); }

  // Arms `t` for `d` from now, logged as `name`, and moves the clock on by kStep.
  void arm(Timer& t, order_clock::duration d, const char* name) {
    t.expires_after(d);
    t.async_wait(log(out, name));
    order_clock::step(kStep);
  }

  // Sets the clock to `frozen_start + at`, and runs until `out` reads `want` (or a while).
  std::string run_to(order_clock::duration at, const std::string& want) {
    order_clock::set(order_clock::time_point(frozen_start + at));
    run_until(ioc, [&] { return out == want; });
    return out;
  }
};

} // namespace

TYPE_TO_STRING(asio_order_timer);
TYPE_TO_STRING(wheel_order_timer);

TEST_CASE_TEMPLATE("waits due in one tick complete in the order their timers were armed", Timer,
                   asio_order_timer, wheel_order_timer) {
  same_tick<Timer> f;
  Timer &a = f.a, &b = f.b, &c = f.c;
  const auto arm = [&](Timer& t, order_clock::duration d, const char* name) { f.arm(t, d, name); };
  std::string want;
  SUBCASE("armed one after another") {
    arm(a, 100ms, "A");
    arm(b, 100ms, "B");
    arm(c, 100ms, "C");
    want = "A B C ";
  }
  SUBCASE("re-armed earlier: as armed then") {
    arm(a, 200ms, "A1");
    arm(b, 100ms, "B");
    arm(a, 100ms, "A2"); // aborts A1
    arm(c, 100ms, "C");
    want = "A1-aborted B A2 C ";
  }
  SUBCASE("a second wait on a timer joins its first") {
    arm(a, 100ms, "A1");
    arm(b, 100ms, "B");
    a.async_wait(log(f.out, "A2"));
    want = "A1 A2 B ";
  }
  SUBCASE("re-armed later once its earlier tick has passed: as armed then") {
    // Lazy re-arm: A's entry stays at its 10 ms tick, and is filed for its new one when that
    // tick comes, before B is armed.
    arm(a, 10ms, "A1");
    arm(a, 100ms, "A2"); // aborts A1
    order_clock::set(order_clock::time_point(frozen_start + 12ms));
    run_for(f.ioc, frozen_still);
    arm(b, a.expiry() + 10 * kStep - order_clock::now(), "B"); // 10 us after A2: one tick
    want = "A1-aborted A2 B ";
  }
  std::optional<Timer> moved;
  SUBCASE("a moved timer keeps its place") {
    arm(a, 100ms, "A");
    arm(b, 100ms, "B");
    moved.emplace(std::move(a));
    arm(c, 100ms, "C");
    want = "A B C ";
  }
  SUBCASE("a timer moved onto another keeps its place") {
    arm(a, 100ms, "A");
    arm(b, 100ms, "B");
    arm(c, 100ms, "C");
    c = std::move(a); // aborts C
    want = "C-aborted A B ";
  }
  run_for(f.ioc, frozen_still);
  CHECK(f.run_to(100ms + 2 * kTick, want) == want);
}

// The exception to the order of arming (README "Order of simultaneous expiries", "Lazy
// re-arm"), issue 23 item 9's scenario: A re-armed for later while its wait is pending stays
// filed at its earlier tick, and is filed for its new tick when the earlier one comes, behind
// B, armed for the same tick meanwhile. Asio completes A first (its expiry is earlier); the
// wheel completes B first. Keeping Asio's order here needs an arm stamp in every timer
// (measured: +8 bytes per timer, +2.9% instructions per arm before any sorting), so the
// README states the exception instead, and this case holds each timer to what it states.
TEST_CASE_TEMPLATE("a timer re-armed later while still filed for an earlier tick is ordered "
                   "when that tick comes",
                   Timer, asio_order_timer, wheel_order_timer) {
  same_tick<Timer> f;
  Timer &a = f.a, &b = f.b, &c = f.c;
  const auto arm = [&](Timer& t, order_clock::duration d, const char* name) { f.arm(t, d, name); };
  arm(a, 50ms, "A1");
  SUBCASE("its wait pending") {
    arm(a, 100ms, "A2"); // aborts A1
  }
  SUBCASE("its wait cancelled") {
    CHECK(a.cancel() == 1);
    arm(a, 100ms, "A2");
  }
  arm(b, 100ms, "B");
  arm(c, 60ms, "C");
  run_for(f.ioc, frozen_still);
  CHECK(f.run_to(60ms + 2 * kTick, "A1-aborted C ") == "A1-aborted C ");
  const std::string want =
      std::is_same_v<Timer, wheel_order_timer> ? "A1-aborted C B A2 " : "A1-aborted C A2 B ";
  CHECK(f.run_to(100ms + 2 * kTick, want) == want);
}

// ---------------------------------------------------------------------------------------------
// Around I/O
// ---------------------------------------------------------------------------------------------

namespace {

using asio::ip::tcp;

// "Promptly": far below kFar, for a noisy machine.
constexpr auto kPrompt = 5s;

// Blocks until `fd` is readable: the reactor's next pass finds it ready.
void wait_readable(tcp::socket::native_handle_type fd) {
#if defined(_WIN32)
  ::WSAPOLLFD p{fd, POLLRDNORM, 0};
  REQUIRE(::WSAPoll(&p, 1, 5000) == 1);
#else
  ::pollfd p{fd, POLLIN, 0};
  REQUIRE(::poll(&p, 1, 5000) == 1);
#endif
}

// A listening socket on loopback, and a client for it.
struct loopback {
  asio::io_context& ioc;
  tcp::acceptor acceptor{ioc, tcp::endpoint(asio::ip::address_v4::loopback(), 0)};
  tcp::socket client{ioc};
};

// A connected pair of sockets on loopback: `client` writes, `server` reads.
struct socket_pair {
  loopback net;
  tcp::socket& client = net.client;
  tcp::socket server{net.ioc};

  explicit socket_pair(asio::io_context& ioc) : net{ioc} {
    client.connect(net.acceptor.local_endpoint());
    net.acceptor.accept(server);
  }
};

} // namespace

// Asio's example cpp20/invocation/completion_executor: a posted handler, an accept that became
// ready, then a wait whose expiry has passed. Asio runs them in that order: the post, then the
// reactor's pass, which queues the ready accept before the expired timer.
TEST_CASE_TEMPLATE("a wait already expired when started completes after I/O found ready before it",
                   Timer, TIMER_TYPES) {
  asio::io_context ioc(1);
  std::string out;
  loopback net{ioc};
  // Another wait of the context pending far ahead (the wheel's alarm is then armed for later),
  // or none (the alarm is not armed yet).
  std::unique_ptr<Timer> distant;
  SUBCASE("no other wait pending") {}
  SUBCASE("another wait pending, far ahead") {
    distant = std::make_unique<Timer>(ioc, kFar);
    distant->async_wait(log(out, "far"));
  }
  asio::post(ioc, [&] { out += "post "; });
  tcp::socket server(ioc);
  net.acceptor.async_accept(
      server, [&](const asio::error_code& ec) { out += ec ? "accept-failed " : "accept "; });
  net.client.connect(net.acceptor.local_endpoint());
  wait_readable(net.acceptor.native_handle());
  Timer t(ioc);
  t.expires_at(Timer::clock_type::time_point::min());
  t.async_wait([&](const asio::error_code& ec) {
    log(out, "wait")(ec);
    if (distant)
      distant->cancel(); // so that run() returns
  });
  const auto r = guarded_run(ioc);
  CHECK_PROMPT(r);
  CHECK(out == std::string(distant ? "post accept wait far-aborted " : "post accept wait "));
}

// The same with a read: data arrived for a socket whose read is pending, then a wait whose
// expiry has passed starts (from a handler, as a server's code would).
TEST_CASE_TEMPLATE("a wait already expired when started completes after a read found ready "
                   "before it",
                   Timer, TIMER_TYPES) {
  asio::io_context ioc(1);
  std::string out;
  socket_pair net(ioc);
  tcp::socket& server = net.server;
  Timer nearby(ioc), t(ioc);
  char byte = 0;
  bool arm_near = false;
  SUBCASE("the wheel's alarm not armed") {}
  SUBCASE("the wheel's alarm armed for later") {
    arm_near = true;
  }
  asio::post(ioc, [&] {
    server.async_read_some(asio::buffer(&byte, 1), [&](const asio::error_code& ec, std::size_t) {
      out += ec ? "read-failed " : "read ";
    });
    asio::write(net.client, asio::buffer("x", 1));
    wait_readable(server.native_handle());
    if (arm_near) {
      nearby.expires_after(kFar);
      nearby.async_wait(log(out, "near"));
    }
    t.expires_after(-1s);
    t.async_wait([&](const asio::error_code& ec) {
      log(out, "wait")(ec);
      nearby.cancel();
    });
  });
  const auto r = guarded_run(ioc);
  CHECK_PROMPT(r);
  CHECK(out == std::string(arm_near ? "read wait near-aborted " : "read wait "));
}

// Asio posts an aborted wait at once, and completes a wait started after its expiry in the
// reactor's next pass: the aborted one first, although it was aborted after the other wait
// started. (The wheel posted a turn for the late wait when it started, which ran first.)
TEST_CASE_TEMPLATE("a wait already expired when started completes after a wait aborted later",
                   Timer, TIMER_TYPES) {
  asio::io_context ioc(1);
  std::string out;
  Timer late(ioc), other(ioc, kFar);
  other.async_wait(log(out, "other"));
  asio::post(ioc, [&] {
    late.expires_after(-1s);
    late.async_wait(log(out, "late"));
    CHECK(other.cancel() == 1);
  });
  const auto r = guarded_run(ioc);
  CHECK_PROMPT(r);
  CHECK(out == "other-aborted late ");
}

// What is left of the difference (README "Order around I/O"): a late wait started while an
// expiry turn of its shard is already queued completes in that turn. Here the reactor's pass
// finds a read ready and `soon` expired: it queues the read, then `soon` (Asio's timer; the
// wheel's alarm, whose turn completes `soon`). The read's handler starts a late wait and
// aborts another: Asio completes `soon`, then the aborted wait (posted), then the late one
// (the next pass); the wheel's queued turn takes the late wait with `soon`, in the order of
// their ticks (the late one is filed at the wheel's time, before `soon`'s tick).
TEST_CASE_TEMPLATE("a wait already expired when started, while a turn is queued, completes in it",
                   Timer, TIMER_TYPES) {
  until_premise([&](bool last) {
    asio::io_context ioc(1);
    std::string out;
    socket_pair net(ioc);
    tcp::socket& server = net.server;
    // `soon` first: the wheel's alarm is armed for it, and `other` leaves it so.
    Timer soon(ioc, 30ms), late(ioc), other(ioc, kFar);
    soon.async_wait(log(out, "soon"));
    other.async_wait(log(out, "other"));
    // Whether the wheel wakes before `soon`, to stage a slot ahead: armed in the last ticks
    // of a 4,096-tick slot, `soon` is due in the next, whose first 64 ticks the wheel stages
    // at once. The reactor's first pass may then find that wake, whose turn, run after the
    // posted function, completes `soon` before the read (docs/semantics.md, "Order around
    // I/O"). The clock read first: a stall between the reads makes the wake look later.
    bool stages_first = false;
    if constexpr (!std::is_same_v<Timer, asio::steady_timer>) {
      const auto before = sclock::now();
      const auto next = asio_wheel::get_statistics(ioc, false).next_expiry;
      stages_first = next && before + *next < soon.expiry() - 15ms;
    }
    char byte = 0;
    // Premise: the posted function runs before `soon` expires. (A process stalled past it
    // has the reactor's first pass, queued before the post, complete `soon` first.)
    bool posted_before_soon = false;
    asio::post(ioc, [&] {
      posted_before_soon = sclock::now() < soon.expiry();
      server.async_read_some(asio::buffer(&byte, 1), [&](const asio::error_code& ec, std::size_t) {
        out += ec ? "read-failed " : "read ";
        late.expires_after(-1s);
        late.async_wait(log(out, "late"));
        CHECK(other.cancel() == 1);
      });
      asio::write(net.client, asio::buffer("x", 1));
      wait_readable(server.native_handle());
      std::this_thread::sleep_for(60ms); // `soon` has expired before the reactor's next pass
    });
    const auto r = guarded_run(ioc);
    CHECK_PROMPT(r);
    if (!posted_before_soon && !last)
      return false;
    const std::string want = std::is_same_v<Timer, asio::steady_timer>
                                 ? "read soon other-aborted late "
                                 : "read late soon other-aborted ";
    if (stages_first && out != want) {
      MESSAGE("the wheel woke to stage a slot before `soon`, and that turn completed it");
      CHECK(out == "soon read other-aborted late ");
    } else {
      CHECK(out == want);
    }
    return true;
  });
}

// Asio's reactor queues every expiry it finds in one pass before anything that the first
// handler of them does: an abort from it completes after all of them. The wheel's turn
// completes at most a budget of waits (4096) and queues a continuation for the rest, found
// due in the same turn: that continuation must complete them before the abort, which waits
// behind it for the drain (it then leaves to the alarm only waits found due after it).
TEST_CASE_TEMPLATE("an abort from the first handler of a pass completes after every expiry "
                   "found in that pass, more than a turn's budget",
                   Timer, asio_order_timer, wheel_order_timer) {
  constexpr int n = 5000; // past the wheel's turn budget of 4096
  asio::io_context ioc;
  order_clock::reset(order_clock::time_point(frozen_start), /*running=*/false);
  Timer distant(ioc, order_clock::now() + 1h);
  int expired = 0, expired_before_abort = -1;
  distant.async_wait([&](const asio::error_code& ec) {
    CHECK(ec == asio::error::operation_aborted);
    expired_before_abort = expired;
  });
  std::vector<std::unique_ptr<Timer>> timers;
  timers.reserve(n);
  for (int i = 0; i < n; ++i) {
    timers.push_back(std::make_unique<Timer>(ioc, order_clock::now() + 10ms));
    timers.back()->async_wait([&](const asio::error_code& ec) {
      CHECK_FALSE(ec);
      if (expired++ == 0)
        CHECK(distant.cancel() == 1);
    });
  }
  order_clock::set(order_clock::time_point(frozen_start + 20ms));
  CHECK(run_until(ioc, [&] { return expired == n && expired_before_abort >= 0; }));
  CHECK(expired_before_abort == n);
}

TEST_CASE("a backlog's turn queued before an alarm's turn moved the wheel takes no wait filed "
          "since, and re-files none") {
  // The second turn of a backlog (9000 waits due together, past the turn budget of 4096) is
  // queued behind the alarm's turn, which the first handler's wait (1 ms) and sleep put
  // ahead of it, and ahead of the drain of an abort (the 4097th handler's, with a sleep, so
  // that the clock crosses a tick). The alarm's turn finishes the backlog and moves the wheel
  // on; in it a handler starts a wait already expired, filed at the wheel's new time. The
  // backlog's turn, which completes only what was found due before it was queued, once
  // handed that wait back and re-filed it into the slot it took from, 4096 times.
  constexpr int n = 9000;
  asio::io_context ioc(1);
  asio_wheel::wheel_timer distant(ioc, 1h), soon(ioc), late(ioc);
  int expired = 0, others = 0;
  distant.async_wait([&](const asio::error_code& ec) {
    CHECK(ec == asio::error::operation_aborted);
    ++others;
  });
  const auto due = std::chrono::steady_clock::now() + 10ms;
  std::vector<std::unique_ptr<asio_wheel::wheel_timer>> timers;
  timers.reserve(n);
  for (int i = 0; i < n; ++i) {
    timers.push_back(std::make_unique<asio_wheel::wheel_timer>(ioc, due));
    timers.back()->async_wait([&, i](const asio::error_code& ec) {
      CHECK_FALSE(ec);
      ++expired;
      if (i == 0) {
        soon.expires_after(1ms);
        soon.async_wait([&](const asio::error_code& e) {
          CHECK_FALSE(e);
          ++others;
        });
        std::this_thread::sleep_for(3ms);
      } else if (i == 4096) {
        CHECK(distant.cancel() == 1);
        std::this_thread::sleep_for(3ms);
      } else if (i == 8192) {
        late.expires_after(-1s);
        late.async_wait([&](const asio::error_code& e) {
          CHECK_FALSE(e);
          ++others;
        });
      }
    });
  }
  std::this_thread::sleep_until(due + 1ms);
  ioc.run();
  CHECK(expired == n);
  CHECK(others == 3);
  CHECK(asio_wheel::get_statistics(ioc).lazy_refiles == 0);
}
