//
// examples/http_server/main.cpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// A small HTTP/1.1 keep-alive server on C++20 coroutines (use_awaitable) with the two timeouts
// every server facing the Internet needs, built two ways in one binary so that they can be
// compared under load (scripts/loadtest):
//
//   --timer wheel   (default) asio-wheel:
//     * idle timeout: one asio_wheel::idle_timer per connection. Every read is a touch()
//       (one store); the timer's single async_wait completes once the connection has been
//       quiet for --idle-timeout (for a range, the timeout at the factor in force, which it
//       follows while it waits).
//     * request deadline: from the first byte of a request to the end of its response.
//       Every read and write of the request is bounded by the time left, with
//       asio_wheel::cancel_after(left, as_tuple(use_awaitable)).
//
//   --timer steady  plain Asio, the usual way:
//     * idle timeout: an asio::steady_timer reset on every read (expires_after, which aborts
//       the pending wait, then a new async_wait), for the timeout at the factor in force
//       then.
//     * request deadline: an asio::steady_timer armed for the deadline when the request
//       starts and cancelled when its response is written; if it fires first, it cancels the
//       socket's operations (socket.cancel()).
//
//   Building with -DASIO_WHEEL_HTTP_USE_STEADY_TIMER=1 makes "steady" the default.
//
// Timeouts, precisely:
//   * idle: the connection is closed when no byte has been received for --idle-timeout while
//     no request is in progress. (Should it come due during a request, the request deadline
//     governs, and the idle period starts again when the response has been written.)
//   * request: a request whose head, body and response do not complete within
//     --request-timeout of its first byte is abandoned and its connection closed; slowloris
//     (a header byte now and then) and slow readers (a response that does not drain) both end
//     this way.
//   * both may be ranges, MIN..MAX: the timeout is then MIN + f * (MAX - MIN), where f is the
//     factor of the io_context's asio_wheel::timeout_scale, 1 unless the pressure monitor
//     (pressure.hpp) lowers it: --pressure-connections N and --pressure-rss SIZE set the
//     limits at which it drops to 0 (every timeout at its minimum), checked every 100 ms; it
//     comes back once both are below 80 % of their limits. The wheel's idle timers follow a
//     change at once; steady_timers keep the deadline they were armed for.
//
// HTTP: GET and HEAD on "/" answer a small fixed text; GET /stats answers the server's
// counters (plain text, "name value" lines; scripts/loadtest reads them); other targets 404,
// other methods 405 (a Content-Length body is read and discarded). Keep-alive by default in
// HTTP/1.1, on request in HTTP/1.0; "Connection: close" is honoured. Pipelined requests are
// answered in order. Malformed requests get 400, over-long heads 431, bodies over 1 MiB 413,
// Transfer-Encoding 501, each followed by a close. Reads go through async_wait(wait_read) and
// a non-blocking read into a per-thread scratch buffer, so an idle connection holds no read
// buffer.
//
// Usage:
//   http_server [--port P] [--address A] [--threads N] [--timer wheel|steady]
//               [--idle-timeout T[..T]] [--request-timeout T[..T]] [--duration T]
//               [--pressure-connections N] [--pressure-rss SIZE]
//   http_server --smoke
//
//   --port P            default 8080; 0 picks an ephemeral port. The port is printed:
//                       "listening on 127.0.0.1:P ...".
//   --address A         default 127.0.0.1
//   --threads N         threads running the io_context (default 1); with N > 1 every
//                       connection is on its own strand.
//   --idle-timeout T    default 5s. T: a number with a unit, ms or s (300ms, 2.5s); a bare
//                       number is seconds. MIN..MAX (1s..30s): a range, scaled by pressure.
//   --request-timeout T default 10s; MIN..MAX as above.
//   --pressure-connections N  the timeouts go to their minimum while N connections are open
//                       (default 0: no limit).
//   --pressure-rss SIZE the same at a resident memory of SIZE (a number of MB, or with a
//                       unit: 512M, 2G; default 0: no limit).
//   --duration T        stop by itself after T (default: run until SIGINT or SIGTERM).
//   --smoke             start the server in-process on an ephemeral port (idle timeout 1 s,
//                       request deadline 1.5 s) and run a built-in client against it: keep-
//                       alive requests, pipelining, HEAD, 404/405/400, Connection: close, an
//                       idle connection (closed within idle-timeout + 2 s), a slowloris (a
//                       header byte every 100 ms; closed by the request deadline), concurrent
//                       clients; for both timers, with 1 and 2 threads. Exits 0 if every
//                       outcome was the expected one. Prints the fd count and RSS.
//
// On exit the counters are printed (requests, closes by reason, and how late the idle and
// request-deadline closes were past their due time).
//
// The program is this folder: main.cpp (the command line), options.hpp (the options and the
// names every file uses), stats (the counters), http_parser (request heads), http_response
// (responses), connection.hpp (one connection under its two timeouts), pressure (the
// pressure monitor), server (the acceptor and the threads) and smoke_client (--smoke).

#include "options.hpp"
#include "server.hpp"
#include "smoke_client.hpp"
#include "stats.hpp"

#include <asio/error.hpp>
#include <asio/signal_set.hpp>
#include <asio/steady_timer.hpp>

#include <sys/resource.h>

#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string>
#include <string_view>

using namespace http_example;

namespace {

[[noreturn]] void usage_error(const std::string& what) {
  std::fprintf(
      stderr,
      "http_server: %s\n"
      "usage: http_server [--port P] [--address A] [--threads N] [--timer wheel|steady]\n"
      "                   [--idle-timeout T[..T]] [--request-timeout T[..T]] [--duration T]\n"
      "                   [--pressure-connections N] [--pressure-rss SIZE]\n"
      "       http_server --smoke\n"
      "       (T: 300ms, 2.5s; a bare number is seconds; T..T: a range, scaled by\n"
      "       pressure; SIZE: MB, or 512M, 2G)\n",
      what.c_str());
  std::exit(2);
}

// "300ms", "2.5s", "2" (seconds). Positive.
clock_type::duration parse_duration(std::string_view text) {
  std::string s(text);
  double scale = 1000.0; // to milliseconds
  if (s.ends_with("ms")) {
    scale = 1.0;
    s.resize(s.size() - 2);
  } else if (s.ends_with("s")) {
    s.resize(s.size() - 1);
  }
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !(v > 0) || v * scale > 1e9)
    usage_error("not a positive duration: '" + std::string(text) + "'");
  return std::chrono::duration_cast<clock_type::duration>(
      std::chrono::duration<double, std::milli>(v * scale));
}

// "T" (a fixed timeout) or "MIN..MAX" (a range, MIN <= MAX).
timeout_range parse_range(std::string_view text) {
  const auto dots = text.find("..");
  if (dots == std::string_view::npos)
    return parse_duration(text);
  const timeout_range r{parse_duration(text.substr(0, dots)),
                        parse_duration(text.substr(dots + 2))};
  if (r.min > r.max)
    usage_error("a range MIN..MAX needs MIN <= MAX: '" + std::string(text) + "'");
  return r;
}

// "512" (MB), "512M", "2G", "800K": bytes.
std::uint64_t parse_size(std::string_view text) {
  std::string s(text);
  double scale = 1024.0 * 1024.0;
  if (!s.empty() && (s.back() == 'K' || s.back() == 'M' || s.back() == 'G')) {
    scale = s.back() == 'K' ? 1024.0 : s.back() == 'M' ? 1024.0 * 1024.0 : 1024.0 * 1024.0 * 1024.0;
    s.pop_back();
  }
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !(v >= 0) || v * scale > 1e15)
    usage_error("not a size: '" + std::string(text) + "'");
  return static_cast<std::uint64_t>(v * scale);
}

long long parse_number(std::string_view text, long long lo, long long hi) {
  const std::string s(text);
  char* end = nullptr;
  const long long n = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || end != s.c_str() + s.size() || n < lo || n > hi)
    usage_error("not a number in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]: '" + s +
                "'");
  return n;
}

// Raises the soft limit on file descriptors to the hard one: every connection is one.
void raise_fd_limit() {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &rl);
  }
}

void print_stats(const server_state& st) {
  std::string text = stats_text(st);
  std::printf("--- stats ---\n%s", text.c_str());
  std::fflush(stdout);
}

} // namespace

int main(int argc, char* argv[]) {
  server_options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    auto value = [&]() -> std::string_view {
      if (i + 1 >= argc)
        usage_error("missing value for " + std::string(a));
      return argv[++i];
    };
    if (a == "--smoke") {
      if (argc != 2)
        usage_error("--smoke takes no other option");
      std::setvbuf(stdout, nullptr, _IOLBF, 0);
      return smoke::main();
    } else if (a == "--port") {
      o.port = static_cast<std::uint16_t>(parse_number(value(), 0, 65535));
    } else if (a == "--address") {
      o.address = std::string(value());
    } else if (a == "--threads") {
      o.threads = static_cast<unsigned>(parse_number(value(), 1, 256));
    } else if (a == "--timer") {
      const std::string_view t = value();
      if (t == "wheel")
        o.timer = timer_kind::wheel;
      else if (t == "steady")
        o.timer = timer_kind::steady;
      else
        usage_error("--timer: wheel or steady");
    } else if (a == "--idle-timeout") {
      o.idle_timeout = parse_range(value());
    } else if (a == "--request-timeout") {
      o.request_timeout = parse_range(value());
    } else if (a == "--pressure-connections") {
      o.pressure_connections = static_cast<std::uint64_t>(parse_number(value(), 0, 100'000'000));
    } else if (a == "--pressure-rss") {
      o.pressure_rss_bytes = parse_size(value());
    } else if (a == "--duration") {
      o.run_for = parse_duration(value());
    } else if (a == "-h" || a == "--help") {
      usage_error("help");
    } else {
      usage_error("unknown argument '" + std::string(a) + "'");
    }
  }
  raise_fd_limit();

  try {
    http_server server(o);
    const std::uint16_t port = server.listen();
    std::printf("listening on %s:%u (timer %s, %u thread%s, idle timeout %lld..%lld ms, request "
                "timeout %lld..%lld ms, pressure limits: %llu connections, %llu bytes)\n",
                o.address.c_str(), static_cast<unsigned>(port), to_string(o.timer), o.threads,
                o.threads == 1 ? "" : "s", to_ms(o.idle_timeout.min), to_ms(o.idle_timeout.max),
                to_ms(o.request_timeout.min), to_ms(o.request_timeout.max),
                static_cast<unsigned long long>(o.pressure_connections),
                static_cast<unsigned long long>(o.pressure_rss_bytes));
    std::fflush(stdout);

    asio::signal_set signals(server.context(), SIGINT, SIGTERM);
    signals.async_wait([&](const asio::error_code& ec, int) {
      if (!ec)
        server.stop_now();
    });
    std::optional<asio::steady_timer> limit;
    if (o.run_for > clock_type::duration::zero()) {
      limit.emplace(server.context(), o.run_for);
      limit->async_wait([&](const asio::error_code& ec) {
        if (!ec)
          server.stop_now();
      });
    }
    server.start();
    server.wait();
    print_stats(server.state());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "http_server: %s\n", e.what());
    return 1;
  }
  return 0;
}
