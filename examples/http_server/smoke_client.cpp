//
// examples/http_server/smoke_client.cpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#include "smoke_client.hpp"

#include "http_response.hpp"
#include "options.hpp"
#include "server.hpp"
#include "stats.hpp"

#include <asio_wheel/cancel_after.hpp>

#include <asio/buffer.hpp>
#include <asio/co_spawn.hpp>
#include <asio/connect.hpp>
#include <asio/detached.hpp>
#include <asio/error.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/read.hpp>
#include <asio/read_until.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

// ---------------------------------------------------------------------------------------
// --smoke: a built-in client

namespace http_example::smoke {

using namespace asio::experimental::awaitable_operators;

namespace {

// Open file descriptors of this process (the directory handle used to count them excluded).
long count_fds() {
  std::error_code ec;
  long n = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end;
       it.increment(ec))
    ++n;
  return n > 0 ? n - 1 : n;
}

long rss_kb() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.starts_with("VmRSS:"))
      return std::strtol(line.c_str() + 6, nullptr, 10);
  return -1;
}

// Long enough that a client stalled between two requests (a loaded machine, sanitizers) is
// not taken for an idle one: the checks are of the outcomes, and a close's own lateness is
// measured by the server (idle_late, deadline_late).
constexpr clock_type::duration idle_timeout = 1s;
constexpr clock_type::duration request_timeout = 1500ms;
constexpr clock_type::duration slack = 2s;    // how late a close may be and still pass
constexpr clock_type::duration io_limit = 3s; // any single client operation

struct checks {
  std::string label;
  int failed = 0;
  int passed = 0;

  void expect(bool ok, const std::string& what) {
    if (ok) {
      ++passed;
    } else {
      ++failed;
      std::printf("  [%s] FAILED: %s\n", label.c_str(), what.c_str());
    }
  }
};

struct reply {
  asio::error_code ec;
  int status = 0;
  bool close = false;
  std::size_t content_length = 0;
  std::string body;
};

awaitable<asio::error_code> send(tcp::socket& s, std::string_view data) {
  auto [ec, n] = co_await asio::async_write(
      s, asio::buffer(data), asio_wheel::cancel_after(io_limit, as_tuple(use_awaitable)));
  co_return ec;
}

awaitable<reply> receive(tcp::socket& s, std::string& buf, bool head_request = false) {
  reply r;
  auto [ec, n] =
      co_await asio::async_read_until(s, asio::dynamic_buffer(buf), "\r\n\r\n",
                                      asio_wheel::cancel_after(io_limit, as_tuple(use_awaitable)));
  if (ec) {
    r.ec = ec;
    co_return r;
  }
  std::string head = buf.substr(0, n);
  buf.erase(0, n);
  if (!head.starts_with("HTTP/1.1 ") || head.size() < 12) {
    r.ec = asio::error::invalid_argument;
    co_return r;
  }
  r.status = std::atoi(head.c_str() + 9);
  std::transform(head.begin(), head.end(), head.begin(), [](char c) {
    return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  });
  if (const auto p = head.find("\r\ncontent-length:"); p != std::string::npos)
    r.content_length = std::strtoul(head.c_str() + p + 17, nullptr, 10);
  r.close = head.find("\r\nconnection: close\r\n") != std::string::npos;
  if (!head_request) {
    if (buf.size() < r.content_length) {
      auto [ec2, n2] = co_await asio::async_read(
          s, asio::dynamic_buffer(buf), asio::transfer_exactly(r.content_length - buf.size()),
          asio_wheel::cancel_after(io_limit, as_tuple(use_awaitable)));
      if (ec2) {
        r.ec = ec2;
        co_return r;
      }
    }
    r.body = buf.substr(0, r.content_length);
    buf.erase(0, r.content_length);
  }
  co_return r;
}

struct close_seen {
  bool closed = false;   // eof or reset
  bool got_data = false; // the server sent something instead
  clock_type::duration after{};
};

// Waits for the server to close the connection.
awaitable<close_seen> wait_for_close(tcp::socket& s, clock_type::time_point since,
                                     clock_type::duration limit) {
  char byte = 0;
  auto [ec, n] = co_await s.async_read_some(
      asio::buffer(&byte, 1), asio_wheel::cancel_after(limit, as_tuple(use_awaitable)));
  close_seen c;
  c.after = clock_type::now() - since;
  c.closed = ec == asio::error::eof || ec == asio::error::connection_reset;
  c.got_data = !ec && n > 0;
  co_return c;
}

awaitable<bool> connect(tcp::socket& s, const tcp::endpoint& ep) {
  auto [ec] =
      co_await s.async_connect(ep, asio_wheel::cancel_after(io_limit, as_tuple(use_awaitable)));
  co_return !ec;
}

const std::string get_root = "GET / HTTP/1.1\r\nHost: smoke\r\n\r\n";

// Keep-alive, 404, HEAD, pipelining, a body to discard (405), then Connection: close.
awaitable<void> keep_alive(tcp::endpoint ep, checks& c) {
  tcp::socket s(co_await asio::this_coro::executor);
  if (!co_await connect(s, ep)) {
    c.expect(false, "keep-alive: connect");
    co_return;
  }
  std::string buf;
  bool all_ok = true;
  for (int i = 0; i < 5; ++i) {
    co_await send(s, get_root);
    const reply r = co_await receive(s, buf);
    all_ok &= !r.ec && r.status == 200 && r.body == hello_body && !r.close;
  }
  c.expect(all_ok, "five keep-alive GET / answered 200 with the body on one connection");

  co_await send(s, "GET /missing HTTP/1.1\r\nHost: smoke\r\n\r\n");
  reply r = co_await receive(s, buf);
  c.expect(!r.ec && r.status == 404 && !r.close, "GET /missing: 404, kept alive");

  co_await send(s, "HEAD / HTTP/1.1\r\nHost: smoke\r\n\r\n");
  r = co_await receive(s, buf, true);
  c.expect(!r.ec && r.status == 200 && r.content_length == hello_body.size() && buf.empty(),
           "HEAD /: 200, Content-Length, no body");

  co_await send(s, get_root + get_root);
  const reply p1 = co_await receive(s, buf);
  const reply p2 = co_await receive(s, buf);
  c.expect(!p1.ec && !p2.ec && p1.status == 200 && p2.status == 200 && p2.body == hello_body,
           "two pipelined requests: both answered in order");

  co_await send(s, "POST / HTTP/1.1\r\nHost: smoke\r\nContent-Length: 5\r\n\r\nhello");
  r = co_await receive(s, buf);
  c.expect(!r.ec && r.status == 405 && !r.close, "POST with a body: 405, body discarded");

  co_await send(s, "\r\n" + get_root);
  r = co_await receive(s, buf);
  c.expect(!r.ec && r.status == 200 && !r.close, "an empty line before a request is ignored");

  co_await send(s, "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
  r = co_await receive(s, buf);
  c.expect(!r.ec && r.status == 200 && !r.close, "HTTP/1.0 with keep-alive: kept alive");

  co_await send(s, "GET / HTTP/1.1\r\nHost: smoke\r\nConnection: close\r\n\r\n");
  r = co_await receive(s, buf);
  c.expect(!r.ec && r.status == 200 && r.close, "Connection: close: 200 with Connection: close");
  const close_seen closed = co_await wait_for_close(s, clock_type::now(), io_limit);
  c.expect(closed.closed && closed.after < slack, "Connection: close: the server closed");
}

// A malformed request: 400, then closed.
awaitable<void> bad_request(tcp::endpoint ep, checks& c) {
  tcp::socket s(co_await asio::this_coro::executor);
  if (!co_await connect(s, ep)) {
    c.expect(false, "bad request: connect");
    co_return;
  }
  std::string buf;
  co_await send(s, "NOT HTTP AT ALL\r\n\r\n");
  const reply r = co_await receive(s, buf);
  c.expect(!r.ec && r.status == 400 && r.close, "malformed request: 400 with Connection: close");
  const close_seen closed = co_await wait_for_close(s, clock_type::now(), io_limit);
  c.expect(closed.closed, "malformed request: the server closed");
}

// A connection that never sends: closed by the idle timeout.
awaitable<void> idle_silent(tcp::endpoint ep, checks& c) {
  tcp::socket s(co_await asio::this_coro::executor);
  const auto t0 = clock_type::now(); // before the server's idle clock can start
  if (!co_await connect(s, ep)) {
    c.expect(false, "idle: connect");
    co_return;
  }
  const close_seen closed = co_await wait_for_close(s, t0, idle_timeout + 3 * slack);
  std::printf("  [%s] silent connection closed after %lld ms (idle timeout %lld ms)\n",
              c.label.c_str(), to_ms(closed.after), to_ms(idle_timeout));
  c.expect(closed.closed && closed.after >= idle_timeout && closed.after <= idle_timeout + slack,
           "a silent connection is closed within [idle timeout, idle timeout + 2 s]");
}

// A connection that makes one request, then idles: closed by the idle timeout.
awaitable<void> idle_after_request(tcp::endpoint ep, checks& c) {
  tcp::socket s(co_await asio::this_coro::executor);
  if (!co_await connect(s, ep)) {
    c.expect(false, "idle after request: connect");
    co_return;
  }
  std::string buf;
  co_await send(s, get_root);
  const reply r = co_await receive(s, buf);
  const auto t0 = clock_type::now();
  c.expect(!r.ec && r.status == 200, "idle after request: the request was answered");
  const close_seen closed = co_await wait_for_close(s, t0, idle_timeout + 3 * slack);
  std::printf("  [%s] connection idle after a request closed after %lld ms\n", c.label.c_str(),
              to_ms(closed.after));
  // The server's idle clock started at its last read, a little before the client saw the
  // answer: allow for that at the low end (the server itself checks it is never early).
  c.expect(closed.closed && closed.after >= idle_timeout / 2 &&
               closed.after <= idle_timeout + slack,
           "an idle keep-alive connection is closed within idle timeout + 2 s");
}

// Sends one header byte every 100 ms, forever; ends only by cancellation.
awaitable<void> trickle(tcp::socket& s) {
  asio::steady_timer pause(co_await asio::this_coro::executor);
  const std::string_view header = "X-Slowloris: keeps the request open one byte at a time\r\n";
  for (std::size_t i = 0;; ++i) {
    auto [ec, n] = co_await asio::async_write(s, asio::buffer(header.substr(i % header.size(), 1)),
                                              as_tuple(use_awaitable));
    if (ec) {
      pause.expires_after(1h); // the connection is gone: wait for the other branch
      co_await pause.async_wait(use_awaitable);
    }
    pause.expires_after(100ms);
    co_await pause.async_wait(use_awaitable);
  }
}

// Slowloris: a request whose head never ends, a byte every 100 ms (so never idle). The
// request deadline must close it.
awaitable<void> slowloris(tcp::endpoint ep, checks& c) {
  tcp::socket s(co_await asio::this_coro::executor);
  if (!co_await connect(s, ep)) {
    c.expect(false, "slowloris: connect");
    co_return;
  }
  const auto t0 = clock_type::now(); // before the first byte: the server's deadline is later
  co_await send(s, "GET / HTTP/1.1\r\n");
  auto result = co_await (wait_for_close(s, t0, request_timeout + 3 * slack) || trickle(s));
  const close_seen closed = result.index() == 0 ? std::get<0>(result) : close_seen{};
  std::printf("  [%s] slowloris connection closed after %lld ms (request deadline %lld ms)\n",
              c.label.c_str(), to_ms(closed.after), to_ms(request_timeout));
  c.expect(!closed.got_data, "slowloris: no response to an unfinished request");
  c.expect(closed.closed && closed.after >= request_timeout &&
               closed.after <= request_timeout + slack,
           "slowloris is closed within [request deadline, request deadline + 2 s]");
}

// A slow reader: asks for /big with a tiny receive buffer and does not read. The write of
// the response stalls, the request deadline cancels it and the server resets the connection.
awaitable<void> slow_reader(tcp::endpoint ep, checks& c) {
  tcp::socket s(co_await asio::this_coro::executor);
  s.open(tcp::v4());
  s.set_option(asio::socket_base::receive_buffer_size(4096));
  if (!co_await connect(s, ep)) {
    c.expect(false, "slow reader: connect");
    co_return;
  }
  co_await send(s, "GET /big HTTP/1.1\r\nHost: smoke\r\n\r\n");
  asio::steady_timer pause(co_await asio::this_coro::executor, request_timeout + 300ms);
  co_await pause.async_wait(as_tuple(use_awaitable));
  std::size_t total = 0;
  asio::error_code ec;
  std::vector<char> chunk(65536);
  while (!ec) {
    auto [e, n] = co_await s.async_read_some(
        asio::buffer(chunk), asio_wheel::cancel_after(io_limit, as_tuple(use_awaitable)));
    ec = e;
    total += n;
  }
  std::printf("  [%s] slow reader: %zu bytes of %zu, then %s\n", c.label.c_str(), total,
              big_body_bytes, ec.message().c_str());
  c.expect(ec == asio::error::connection_reset && total < big_body_bytes,
           "slow reader: reset by the request deadline before the response was through");
}

// Several clients at once, keep-alive.
awaitable<void> concurrent_client(tcp::endpoint ep, int requests, int& ok) {
  tcp::socket s(co_await asio::this_coro::executor);
  if (!co_await connect(s, ep))
    co_return;
  std::string buf;
  for (int i = 0; i < requests; ++i) {
    if (co_await send(s, get_root))
      co_return;
    const reply r = co_await receive(s, buf);
    if (r.ec || r.status != 200 || r.body != hello_body)
      co_return;
    ++ok;
  }
}

// Polls the server's counters until no connection is open.
awaitable<bool> wait_until_drained(const http_server& server, clock_type::duration limit) {
  asio::steady_timer pause(co_await asio::this_coro::executor);
  const auto end = clock_type::now() + limit;
  while (server.stats().open.load() != 0 && clock_type::now() < end) {
    pause.expires_after(10ms);
    co_await pause.async_wait(use_awaitable);
  }
  co_return server.stats().open.load() == 0;
}

// One smoke run against a fresh server. Returns whether every check passed.
bool run(timer_kind kind, unsigned threads) {
  checks c;
  c.label = std::string(to_string(kind)) + ", " + std::to_string(threads) + " thread" +
            (threads > 1 ? "s" : "");
  server_options o;
  o.port = 0;
  o.threads = threads;
  o.timer = kind;
  o.idle_timeout = idle_timeout;
  o.request_timeout = request_timeout;

  std::optional<http_server> server;
  server.emplace(o);
  const tcp::endpoint ep(asio::ip::address_v4::loopback(), server->listen());
  server->start();
  std::printf("[%s] server on 127.0.0.1:%u\n", c.label.c_str(), static_cast<unsigned>(ep.port()));

  asio::io_context client;
  constexpr int concurrent = 16, per_client = 25;
  int concurrent_ok = 0;
  int running = 0;
  auto spawn = [&](awaitable<void> a) {
    ++running;
    asio::co_spawn(client, std::move(a), [&](std::exception_ptr e) {
      if (e) {
        try {
          std::rethrow_exception(e);
        } catch (const std::exception& ex) {
          c.expect(false, std::string("client threw: ") + ex.what());
        }
      }
      --running;
    });
  };
  spawn(keep_alive(ep, c));
  spawn(bad_request(ep, c));
  spawn(idle_silent(ep, c));
  spawn(idle_after_request(ep, c));
  spawn(slowloris(ep, c));
  spawn(slow_reader(ep, c));
  for (int i = 0; i < concurrent; ++i)
    spawn(concurrent_client(ep, per_client, concurrent_ok));

  asio::steady_timer watchdog(client, 30s);
  bool hung = false;
  watchdog.async_wait([&](asio::error_code ec) {
    if (!ec) {
      hung = true;
      client.stop();
    }
  });
  // Once the scenarios are done: wait for the server to see every connection closed.
  bool drained = false;
  asio::co_spawn(
      client,
      [&]() -> awaitable<void> {
        asio::steady_timer pause(co_await asio::this_coro::executor);
        while (running > 0) {
          pause.expires_after(10ms);
          co_await pause.async_wait(use_awaitable);
        }
        drained = co_await wait_until_drained(*server, 3s);
        watchdog.cancel();
      },
      asio::detached);
  client.run();

  c.expect(!hung, "the client finished within 30 s");
  c.expect(concurrent_ok == concurrent * per_client,
           std::to_string(concurrent) +
               " concurrent keep-alive clients: " + std::to_string(concurrent_ok) + " of " +
               std::to_string(concurrent * per_client) + " requests answered");
  c.expect(drained, "the server closed every connection");

  const server_stats& s = server->stats();
  const auto idle = s.idle_late.get();
  const auto late = s.deadline_late.get();
  c.expect(s.closes(close_reason::idle) == 2,
           "2 idle closes (got " + std::to_string(s.closes(close_reason::idle)) + ")");
  c.expect(s.closes(close_reason::request_timeout) == 2,
           "2 request-deadline closes (got " +
               std::to_string(s.closes(close_reason::request_timeout)) + ")");
  c.expect(s.closes(close_reason::connection_close) == 1, "1 Connection: close");
  c.expect(s.closes(close_reason::bad_request) == 1, "1 bad request");
  c.expect(s.closes(close_reason::error) == 0, "no I/O errors");
  c.expect(idle.count == 2 && idle.min_ms >= 0 && late.count == 2 && late.min_ms >= 0,
           "no timeout close came before its due time");
  std::printf("  [%s] requests %llu; closes: idle %llu (late by max %.2f ms), request deadline "
              "%llu (late by %.2f ms), peer %llu\n",
              c.label.c_str(), static_cast<unsigned long long>(s.requests.load()),
              static_cast<unsigned long long>(s.closes(close_reason::idle)), idle.max_ms,
              static_cast<unsigned long long>(s.closes(close_reason::request_timeout)), late.max_ms,
              static_cast<unsigned long long>(s.closes(close_reason::peer)));

  // With the listener closed and every connection gone, the context has nothing left to
  // wait for: its threads must return by themselves (an armed timer would keep them).
  server->stop_accepting();
  c.expect(server->join(3s), "the server's io_context ran out of work once idle");
  server.reset();

  std::printf("[%s] %d checks passed, %d failed\n", c.label.c_str(), c.passed, c.failed);
  return c.failed == 0;
}

// Pressure (pressure.hpp): a limit of 8 connections. 6 silent connections are accepted at
// factor 1; 2 more reach the limit and the factor falls to 0; then 2 more are opened. With
// the wheel's idle timers (idle timeout 100 ms..10 s, pressure checked every 100 ms), the 8
// are shed within 4 s (which relieves the pressure: the 2 that come after may then get a
// longer timeout again); with steady_timers, the 8 accepted at factor 1 keep the 10 s they
// were armed with, the pressure stays, and the 2 opened after the fall get the short
// timeout. Once every connection is gone, the factor comes back to 1.
bool run_pressure(timer_kind kind) {
  checks c;
  c.label = std::string(to_string(kind)) + ", pressure";
  server_options o;
  o.port = 0;
  o.timer = kind;
  o.idle_timeout = timeout_range{100ms, 10s};
  o.request_timeout = timeout_range{200ms, 10s};
  o.pressure_connections = 8;
  std::optional<http_server> server;
  server.emplace(o);
  const tcp::endpoint ep(asio::ip::address_v4::loopback(), server->listen());
  server->start();

  asio::io_context client;
  constexpr std::size_t before = 8, after = 2;
  std::vector<std::optional<tcp::socket>> socks(before + after);
  int closed_before = 0, closed_after = 0;
  asio::co_spawn(
      client,
      [&]() -> awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        asio::steady_timer pause(ex);
        int watching = 0;
        auto watch = [&](std::size_t i, int& closed) {
          ++watching;
          asio::co_spawn(
              ex,
              [&, i]() -> awaitable<void> {
                const close_seen seen = co_await wait_for_close(*socks[i], clock_type::now(), 4s);
                if (seen.closed)
                  ++closed;
                --watching;
              },
              asio::detached);
        };
        auto open = [&](std::size_t i) -> awaitable<void> {
          socks[i].emplace(ex);
          c.expect(co_await connect(*socks[i], ep), "pressure: connect");
        };
        for (std::size_t i = 0; i < 6; ++i)
          co_await open(i);
        // All 6 accepted (below the limit: factor 1) before the 2 that reach it.
        for (int i = 0; i < 100 && server->stats().open.load() < 6; ++i) {
          pause.expires_after(10ms);
          co_await pause.async_wait(use_awaitable);
        }
        for (std::size_t i = 6; i < before; ++i)
          co_await open(i);
        for (int i = 0; i < 100 && server->state().factor() > 0.0; ++i) {
          pause.expires_after(10ms);
          co_await pause.async_wait(use_awaitable);
        }
        c.expect(server->state().factor() == 0.0, "pressure: the factor fell to 0 within 1 s");
        for (std::size_t i = 0; i < before; ++i)
          watch(i, closed_before);
        for (std::size_t i = before; i < before + after; ++i) {
          co_await open(i);
          watch(i, closed_after);
        }
        while (watching > 0) {
          pause.expires_after(10ms);
          co_await pause.async_wait(use_awaitable);
        }
        for (auto& s : socks)
          s.reset();
      },
      asio::detached);
  client.run();

  std::printf("  [%s] shed within 4 s: %d of %zu connections accepted before the factor fell, "
              "%d of %zu after\n",
              c.label.c_str(), closed_before, before, closed_after, after);
  if (kind == timer_kind::wheel) {
    c.expect(closed_before == static_cast<int>(before),
             "wheel: the idle connections accepted before the fall are shed within 4 s");
  } else {
    c.expect(closed_before == 0, "steady: the connections armed before the fall keep their 10 s");
    c.expect(closed_after == static_cast<int>(after),
             "steady: the connections opened under pressure get the short timeout");
  }
  const server_stats& s = server->stats();
  c.expect(s.idle_late.get().min_ms >= 0, "no idle close before its timeout in force");
  std::printf("  [%s] shed: %llu idle closes, %.1f ms at most after the factor fell or their "
              "timeout in force\n",
              c.label.c_str(), static_cast<unsigned long long>(s.shed_idle.load()),
              s.shed_delay.get().max_ms);
  // Everything closed: the factor comes back.
  for (int i = 0; i < 300 && server->state().factor() < 1.0; ++i)
    std::this_thread::sleep_for(10ms);
  c.expect(server->state().factor() == 1.0, "the factor is back at 1 once the pressure is gone");
  server->stop_accepting();
  c.expect(server->join(3s), "the server's io_context ran out of work");
  server.reset();
  std::printf("[%s] %d checks passed, %d failed\n", c.label.c_str(), c.passed, c.failed);
  return c.failed == 0;
}

} // namespace

int main() {
  const long fds_before = count_fds();
  bool ok = true;
  for (timer_kind kind : {timer_kind::wheel, timer_kind::steady})
    for (unsigned threads : {1u, 2u})
      ok &= run(kind, threads);
  for (timer_kind kind : {timer_kind::wheel, timer_kind::steady})
    ok &= run_pressure(kind);
  const long fds_after = count_fds();
  std::printf("fds: %ld at start, %ld at end; RSS: %ld kB\n", fds_before, fds_after, rss_kb());
  if (fds_after != fds_before) {
    std::printf("FAILED: file descriptors leaked\n");
    ok = false;
  }
  std::puts(ok ? "http_server smoke: all outcomes as expected" : "http_server smoke: FAILED");
  return ok ? 0 : 1;
}

} // namespace http_example::smoke
