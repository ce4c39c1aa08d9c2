//
// examples/coroutine_timeouts.cpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// Timeouts in C++20 coroutines, two ways, on a TCP line echo server and its client
// (127.0.0.1, ephemeral port, one process, one thread):
//
//   * per-operation deadlines with asio_wheel::cancel_after(duration, token): the server
//     gives each client a limited time to send its next request and closes the connection
//     of one that stays silent; the client bounds a read that nothing will answer;
//
//   * an overall deadline for a multi-step exchange (write the request, read the answer)
//     with `||` and an asio_wheel::wheel_timer:
//
//       auto r = co_await (exchange(sock, "hello\n") || deadline.async_wait(use_awaitable));
//
//     Asio issue #900: Asio's operator|| waits for the first operation that *succeeds*. An
//     exchange that threw (say, on eof) would not end the ||, which would then wait for the
//     timer. So exchange() reports errors as values (as_tuple) and never throws.
//
// The server echoes each line; a line starting with "slow" is answered only after a delay.
// The client shows:
//   1. "hello" answered within the overall deadline;
//   2. "slow" not answered within its (shorter) deadline: the timer wins, the read is
//      cancelled, and the connection stays usable (the late answer is read afterwards);
//   3. a read with cancel_after on which no data comes: operation_aborted at the deadline;
//   4. a second connection that never sends anything: the server's per-read deadline closes
//      it, which the client sees as eof.
//
//   coroutine_timeouts           the same with human-scale durations (about 6 s)
//   coroutine_timeouts --smoke   short durations (about 3 s); exits 0 only if every outcome
//                                was the expected one

#include <asio_wheel/cancel_after.hpp>
#include <asio_wheel/wheel_timer.hpp>

#include <asio/buffer.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/error.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/read_until.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>

#include "asio_tokens.hpp"

#include <chrono>
#include <cstdio>
#include <exception>
#include <string>
#include <string_view>
#include <system_error>
#include <tuple>
#include <utility>

namespace {

using namespace std::chrono_literals;
using namespace asio::experimental::awaitable_operators;
using asio::awaitable;
using asio::use_awaitable;
using asio::ip::tcp;
using example_tokens::as_tuple;
using clock_type = std::chrono::steady_clock;
using ms = std::chrono::milliseconds;

struct config {
  ms server_read_timeout; // time a client has to send its next request
  ms slow_delay;          // how long the server takes to answer a "slow" request
  ms fast_deadline;       // the client's overall deadline for a normal request
  ms slow_deadline;       // the client's overall deadline for the slow request
  ms client_read_timeout; // a read on which nothing comes
  ms late_answer_timeout; // how long the client waits for the late answer afterwards
};

constexpr config demo_config{3000ms, 2000ms, 1000ms, 500ms, 1000ms, 4000ms};
// The smoke run is a test on a loaded CI machine under a sanitizer, which may stall the
// process for a second or two: every deadline that must not expire is seconds away (the
// server's per-read one too, though the idle connection then takes that long to close).
constexpr config smoke_config{2500ms, 300ms, 10000ms, 100ms, 50ms, 10000ms};

clock_type::time_point t_start;

long long now_ms() {
  return static_cast<long long>(
      std::chrono::duration_cast<ms>(clock_type::now() - t_start).count());
}

long long to_ms(clock_type::duration d) {
  return static_cast<long long>(std::chrono::duration_cast<ms>(d).count());
}

std::string trimmed(std::string_view line) {
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r'))
    line.remove_suffix(1);
  return std::string(line);
}

// ---------------------------------------------------------------------------------------
// Server

awaitable<void> serve(tcp::socket sock, config cfg, int& idle_closes) {
  const auto ex = co_await asio::this_coro::executor;
  std::string buf;
  for (;;) {
    // Per-read deadline: the client has server_read_timeout to send its next line.
    auto [ec, n] = co_await asio::async_read_until(
        sock, asio::dynamic_buffer(buf, 4096), '\n',
        asio_wheel::cancel_after(cfg.server_read_timeout, as_tuple(use_awaitable)));
    if (ec == asio::error::operation_aborted) {
      std::printf("[%5lld ms] server: no request within %lld ms, closing the connection\n",
                  now_ms(), static_cast<long long>(cfg.server_read_timeout.count()));
      ++idle_closes;
      break;
    }
    if (ec)
      break; // eof: the client is done
    std::string line = buf.substr(0, n);
    buf.erase(0, n);
    if (line.starts_with("slow")) {
      asio_wheel::wheel_timer delay(ex, cfg.slow_delay);
      co_await delay.async_wait(use_awaitable);
    }
    auto [wec, wn] = co_await asio::async_write(
        sock, asio::buffer(line), asio_wheel::cancel_after(1s, as_tuple(use_awaitable)));
    if (wec)
      break;
  }
  sock.close();
}

awaitable<void> listen(tcp::acceptor& acceptor, config cfg, int& idle_closes) {
  const auto ex = co_await asio::this_coro::executor;
  for (;;) {
    auto [ec, sock] = co_await acceptor.async_accept(as_tuple(use_awaitable));
    if (ec)
      co_return; // the acceptor was closed: shutting down
    asio::co_spawn(ex, serve(std::move(sock), cfg, idle_closes), asio::detached);
  }
}

// ---------------------------------------------------------------------------------------
// Client

struct answer {
  asio::error_code ec;
  std::string line;
};

// Writes `request` and reads one line. Never throws: errors are returned, so that `||`
// sees the exchange finish (#900).
awaitable<answer> exchange(tcp::socket& sock, std::string request, std::string& buf) {
  auto [wec, wn] = co_await asio::async_write(sock, asio::buffer(request), as_tuple(use_awaitable));
  if (wec)
    co_return answer{wec, {}};
  auto [ec, n] = co_await asio::async_read_until(sock, asio::dynamic_buffer(buf, 4096), '\n',
                                                 as_tuple(use_awaitable));
  if (ec)
    co_return answer{ec, {}};
  answer a{{}, buf.substr(0, n)};
  buf.erase(0, n);
  co_return a;
}

struct outcomes {
  bool fast_answered = false;
  bool slow_timed_out = false;
  bool late_answer_read = false;
  bool read_deadline_hit = false;
  bool idle_connection_closed = false;
};

awaitable<void> client(tcp::endpoint server, config cfg, outcomes& out) {
  const auto ex = co_await asio::this_coro::executor;
  tcp::socket sock(ex);
  co_await sock.async_connect(server, asio_wheel::cancel_after(2s, use_awaitable));
  std::string buf;

  // 1. Answered in time: the exchange wins the ||.
  {
    asio_wheel::wheel_timer deadline(ex, cfg.fast_deadline);
    const auto t0 = clock_type::now();
    auto r = co_await (exchange(sock, "hello\n", buf) || deadline.async_wait(use_awaitable));
    const auto took = clock_type::now() - t0;
    if (r.index() == 0 && !std::get<0>(r).ec) {
      std::printf("[%5lld ms] client: \"hello\" answered \"%s\" in %lld ms (deadline %lld ms)\n",
                  now_ms(), trimmed(std::get<0>(r).line).c_str(), to_ms(took),
                  static_cast<long long>(cfg.fast_deadline.count()));
      out.fast_answered = std::get<0>(r).line == "hello\n";
    } else {
      std::printf("[%5lld ms] client: \"hello\" NOT answered in time\n", now_ms());
    }
  }

  // 2. Not answered in time: the timer wins, the exchange is cancelled.
  {
    // t0 first: read after the deadline's expiry is computed, a preemption in between would
    // make a timer that fired on time look early.
    const auto t0 = clock_type::now();
    asio_wheel::wheel_timer deadline(ex, cfg.slow_deadline);
    auto r = co_await (exchange(sock, "slow request\n", buf) || deadline.async_wait(use_awaitable));
    const auto took = clock_type::now() - t0;
    if (r.index() == 1) {
      std::printf("[%5lld ms] client: \"slow request\" timed out after %lld ms (deadline %lld "
                  "ms); the read was cancelled\n",
                  now_ms(), to_ms(took), static_cast<long long>(cfg.slow_deadline.count()));
      out.slow_timed_out = took >= cfg.slow_deadline;
    } else {
      std::printf("[%5lld ms] client: \"slow request\" unexpectedly answered\n", now_ms());
    }
    // The connection is still usable: the late answer arrives eventually.
    auto [ec, n] = co_await asio::async_read_until(
        sock, asio::dynamic_buffer(buf, 4096), '\n',
        asio_wheel::cancel_after(cfg.late_answer_timeout, as_tuple(use_awaitable)));
    if (!ec) {
      std::printf("[%5lld ms] client: the late answer arrived: \"%s\"\n", now_ms(),
                  trimmed(std::string_view(buf).substr(0, n)).c_str());
      out.late_answer_read = buf.substr(0, n) == "slow request\n";
      buf.erase(0, n);
    } else {
      std::printf("[%5lld ms] client: no late answer (%s)\n", now_ms(), ec.message().c_str());
    }
  }

  // 3. A read on which nothing comes, bounded by cancel_after.
  {
    char byte = 0;
    const auto t0 = clock_type::now();
    auto [ec, n] = co_await sock.async_read_some(
        asio::buffer(&byte, 1),
        asio_wheel::cancel_after(cfg.client_read_timeout, as_tuple(use_awaitable)));
    const auto took = clock_type::now() - t0;
    std::printf("[%5lld ms] client: read with cancel_after(%lld ms): %s after %lld ms\n", now_ms(),
                static_cast<long long>(cfg.client_read_timeout.count()), ec.message().c_str(),
                to_ms(took));
    out.read_deadline_hit = ec == asio::error::operation_aborted && n == 0;
  }
  sock.close();

  // 4. A connection that never sends: the server's per-read deadline closes it.
  {
    tcp::socket idle(ex);
    const auto t0 = clock_type::now(); // before the server can possibly start its deadline
    co_await idle.async_connect(server, asio_wheel::cancel_after(2s, use_awaitable));
    char byte = 0;
    auto [ec, n] = co_await idle.async_read_some(
        asio::buffer(&byte, 1),
        asio_wheel::cancel_after(cfg.server_read_timeout * 5, as_tuple(use_awaitable)));
    const auto took = clock_type::now() - t0;
    std::printf("[%5lld ms] client: idle connection ended after %lld ms: %s\n", now_ms(),
                to_ms(took), ec.message().c_str());
    out.idle_connection_closed = ec == asio::error::eof && took >= cfg.server_read_timeout;
  }
}

} // namespace

int main(int argc, char* argv[]) {
  const bool smoke = argc > 1 && std::string_view(argv[1]) == "--smoke";
  const config cfg = smoke ? smoke_config : demo_config;
  t_start = clock_type::now();

  asio::io_context ctx(1);
  tcp::acceptor acceptor(ctx, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
  const tcp::endpoint endpoint = acceptor.local_endpoint();
  std::printf("server listening on %s:%u\n", endpoint.address().to_string().c_str(),
              static_cast<unsigned>(endpoint.port()));

  int idle_closes = 0;
  outcomes out;
  std::exception_ptr client_error;

  // A watchdog, so that a hang is a failure rather than a stuck test.
  asio_wheel::wheel_timer watchdog(ctx, smoke ? 60s : 120s);
  bool watchdog_fired = false;
  watchdog.async_wait([&](asio::error_code ec) {
    if (!ec) {
      watchdog_fired = true;
      ctx.stop();
    }
  });

  asio::co_spawn(ctx, listen(acceptor, cfg, idle_closes), asio::detached);
  asio::co_spawn(ctx, client(endpoint, cfg, out), [&](std::exception_ptr e) {
    client_error = e;
    acceptor.close(); // stop accepting: run() returns once the sessions are done
    watchdog.cancel();
  });

  ctx.run();

  if (client_error) {
    try {
      std::rethrow_exception(client_error);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "client failed: %s\n", e.what());
    }
  }
  const bool ok = !watchdog_fired && !client_error && out.fast_answered && out.slow_timed_out &&
                  out.late_answer_read && out.read_deadline_hit && out.idle_connection_closed &&
                  idle_closes == 1;
  std::printf("answered in time: %s; timed out: %s; late answer read: %s; read deadline: %s; "
              "idle connection closed by the server: %s (%d)\n",
              out.fast_answered ? "yes" : "NO", out.slow_timed_out ? "yes" : "NO",
              out.late_answer_read ? "yes" : "NO", out.read_deadline_hit ? "yes" : "NO",
              out.idle_connection_closed ? "yes" : "NO", idle_closes);
  if (!ok) {
    std::fprintf(stderr, "coroutine_timeouts: FAILED%s\n",
                 watchdog_fired ? " (watchdog: the run hung)" : "");
    return 1;
  }
  std::puts("all outcomes as expected");
  return 0;
}
