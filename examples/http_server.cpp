//
// examples/http_server.cpp
// ~~~~~~~~~~~~~~~~~~~~~~~~
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
//       quiet for --idle-timeout.
//     * request deadline: from the first byte of a request to the end of its response.
//       Every read and write of the request is bounded by the time left, with
//       asio_wheel::cancel_after(left, as_tuple(use_awaitable)).
//
//   --timer steady  plain Asio, the usual way:
//     * idle timeout: an asio::steady_timer reset on every read (expires_after, which aborts
//       the pending wait, then a new async_wait).
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
//               [--idle-timeout T] [--request-timeout T] [--duration T]
//   http_server --smoke
//
//   --port P            default 8080; 0 picks an ephemeral port. The port is printed:
//                       "listening on 127.0.0.1:P ...".
//   --address A         default 127.0.0.1
//   --threads N         threads running the io_context (default 1); with N > 1 every
//                       connection is on its own strand.
//   --idle-timeout T    default 5s. T: a number with a unit, ms or s (300ms, 2.5s); a bare
//                       number is seconds.
//   --request-timeout T default 10s.
//   --duration T        stop by itself after T (default: run until SIGINT or SIGTERM).
//   --smoke             start the server in-process on an ephemeral port (idle timeout 300 ms,
//                       request deadline 500 ms) and run a built-in client against it: keep-
//                       alive requests, pipelining, HEAD, 404/405/400, Connection: close, an
//                       idle connection (closed within idle-timeout + 1 s), a slowloris (a
//                       header byte every 100 ms; closed by the request deadline), concurrent
//                       clients; for both timers, with 1 and 2 threads. Exits 0 if every
//                       outcome was the expected one. Prints the fd count and RSS.
//
// On exit the counters are printed (requests, closes by reason, and how late the idle and
// request-deadline closes were past their due time).

#include <asio_wheel/cancel_after.hpp>
#include <asio_wheel/idle_timer.hpp>
#include <asio_wheel/wheel_timer.hpp>

#include <asio/buffer.hpp>
#include <asio/co_spawn.hpp>
#include <asio/connect.hpp>
#include <asio/detached.hpp>
#include <asio/error.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/post.hpp>
#include <asio/read.hpp>
#include <asio/read_until.hpp>
#include <asio/signal_set.hpp>
#include <asio/steady_timer.hpp>
#include <asio/strand.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>

#include "asio_tokens.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#ifndef ASIO_WHEEL_HTTP_USE_STEADY_TIMER
#define ASIO_WHEEL_HTTP_USE_STEADY_TIMER 0
#endif

namespace {

using namespace std::chrono_literals;
using asio::awaitable;
using asio::use_awaitable;
using asio::ip::tcp;
using example_tokens::as_tuple;
using clock_type = std::chrono::steady_clock;
using ms = std::chrono::milliseconds;

// ---------------------------------------------------------------------------------------
// Options

enum class timer_kind { wheel, steady };

constexpr timer_kind default_timer =
    ASIO_WHEEL_HTTP_USE_STEADY_TIMER ? timer_kind::steady : timer_kind::wheel;

const char* to_string(timer_kind k) {
  return k == timer_kind::wheel ? "wheel" : "steady";
}

struct server_options {
  std::string address = "127.0.0.1";
  std::uint16_t port = 8080;
  unsigned threads = 1;
  timer_kind timer = default_timer;
  clock_type::duration idle_timeout = 5s;
  clock_type::duration request_timeout = 10s;
  clock_type::duration run_for = clock_type::duration::zero(); // zero: until a signal
};

long long to_ms(clock_type::duration d) {
  return static_cast<long long>(std::chrono::duration_cast<ms>(d).count());
}

double to_ms_double(clock_type::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

[[noreturn]] void usage_error(const std::string& what) {
  std::fprintf(stderr,
               "http_server: %s\n"
               "usage: http_server [--port P] [--address A] [--threads N] [--timer wheel|steady]\n"
               "                   [--idle-timeout T] [--request-timeout T] [--duration T]\n"
               "       http_server --smoke\n"
               "       (T: 300ms, 2.5s; a bare number is seconds)\n",
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

// ---------------------------------------------------------------------------------------
// Counters

enum class close_reason : int {
  none,
  peer,             // the client closed (or reset) the connection
  idle,             // idle timeout
  request_timeout,  // request deadline
  connection_close, // "Connection: close", or HTTP/1.0 without keep-alive
  bad_request,      // 400, 413, 431, 501: answered, then closed
  error,            // any other I/O error
  count
};

constexpr std::array<const char*, static_cast<std::size_t>(close_reason::count)> reason_names = {
    "none", "peer", "idle", "request_timeout", "connection_close", "bad_request", "error"};

// How late the timeout closes of one kind were, past their due time.
class lateness_log {
public:
  struct summary {
    std::size_t count = 0;
    double min_ms = 0, p50_ms = 0, p99_ms = 0, max_ms = 0;
  };

  void add(clock_type::duration late) {
    std::lock_guard lock(mutex_);
    if (samples_.size() < max_samples)
      samples_.push_back(late);
  }

  summary get() const {
    std::vector<clock_type::duration> s;
    {
      std::lock_guard lock(mutex_);
      s = samples_;
    }
    summary r;
    r.count = s.size();
    if (s.empty())
      return r;
    std::sort(s.begin(), s.end());
    auto at = [&](double q) {
      return to_ms_double(s[std::min(s.size() - 1, static_cast<std::size_t>(q * s.size()))]);
    };
    r.min_ms = to_ms_double(s.front());
    r.p50_ms = at(0.50);
    r.p99_ms = at(0.99);
    r.max_ms = to_ms_double(s.back());
    return r;
  }

private:
  static constexpr std::size_t max_samples = 1 << 20;
  mutable std::mutex mutex_;
  std::vector<clock_type::duration> samples_;
};

struct server_stats {
  std::atomic<std::uint64_t> accepted{0};
  std::atomic<std::uint64_t> accept_errors{0};
  std::atomic<std::uint64_t> requests{0};
  std::atomic<std::int64_t> open{0};
  std::array<std::atomic<std::uint64_t>, static_cast<std::size_t>(close_reason::count)> closed{};
  lateness_log idle_late;     // close time - (last activity + idle timeout)
  lateness_log deadline_late; // close time - request deadline

  std::uint64_t closes(close_reason r) const {
    return closed[static_cast<std::size_t>(r)].load(std::memory_order_relaxed);
  }
};

struct server_state {
  server_options opts;
  server_stats stats;
};

std::string stats_text(const server_state& st) {
  const auto& s = st.stats;
  std::string out;
  auto line = [&](const char* name, const std::string& value) {
    out += name;
    out += ' ';
    out += value;
    out += '\n';
  };
  auto num = [](auto v) { return std::to_string(v); };
  auto fixed = [](double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.3f", v);
    return std::string(b);
  };
  line("timer", to_string(st.opts.timer));
  line("threads", num(st.opts.threads));
  line("idle_timeout_ms", num(to_ms(st.opts.idle_timeout)));
  line("request_timeout_ms", num(to_ms(st.opts.request_timeout)));
  line("accepted", num(s.accepted.load()));
  line("accept_errors", num(s.accept_errors.load()));
  line("open", num(s.open.load()));
  line("requests", num(s.requests.load()));
  for (std::size_t i = 1; i < reason_names.size(); ++i)
    line(("closed_" + std::string(reason_names[i])).c_str(), num(s.closed[i].load()));
  for (auto [name, log] : {std::pair{"idle_late_ms", &s.idle_late},
                           std::pair{"request_timeout_late_ms", &s.deadline_late}}) {
    const auto sum = log->get();
    const std::string n(name);
    line((n + "_count").c_str(), num(sum.count));
    line((n + "_min").c_str(), fixed(sum.min_ms));
    line((n + "_p50").c_str(), fixed(sum.p50_ms));
    line((n + "_p99").c_str(), fixed(sum.p99_ms));
    line((n + "_max").c_str(), fixed(sum.max_ms));
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// HTTP: requests

constexpr std::size_t max_head_bytes = 8192;
constexpr std::uint64_t max_body_bytes = 1 << 20;
constexpr std::string_view hello_body = "Hello from asio-wheel\n";
// GET /big: 16 MiB, written in 16 KiB chunks (from one static chunk), for slow-read tests: more
// than the kernel buffers for a socket (tcp_wmem autotuning goes up to 4 MiB).
constexpr std::size_t big_chunk_bytes = 16384;
constexpr std::size_t big_chunks = 1024;
constexpr std::size_t big_body_bytes = big_chunk_bytes * big_chunks;

enum class conn_header { none, close, keep_alive };
enum class route { hello, big, stats, not_found };

struct request_info {
  int status = 200; // != 200: answer this error (the router decides 404/405)
  route target = route::hello;
  bool head = false;
  bool keep_alive = true;
  bool http10 = false;
  std::uint64_t content_length = 0;
};

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

bool is_token_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) ||
         std::strchr("!#$%&'*+-.^_`|~", c) != nullptr;
}

// Parses a request head (request line and header lines, "\r\n\r\n" included).
request_info parse_head_fields(std::string_view head) {
  request_info r;
  const std::size_t eol = head.find("\r\n");
  const std::string_view line = head.substr(0, eol);
  const std::size_t sp1 = line.find(' ');
  const std::size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
    r.status = 400;
    return r;
  }
  const std::string_view method = line.substr(0, sp1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (method.empty() || !std::all_of(method.begin(), method.end(), is_token_char) ||
      target.empty()) {
    r.status = 400;
    return r;
  }
  if (version == "HTTP/1.0") {
    r.http10 = true;
  } else if (version != "HTTP/1.1") {
    r.status = 400;
    return r;
  }

  bool close = false, keep_alive = false, have_length = false, chunked = false;
  std::size_t pos = eol + 2;
  while (pos < head.size()) {
    const std::size_t end = head.find("\r\n", pos);
    if (end == pos)
      break; // the empty line
    const std::string_view field = head.substr(pos, end - pos);
    pos = end + 2;
    const std::size_t colon = field.find(':');
    if (colon == 0 || colon == std::string_view::npos ||
        !std::all_of(field.begin(), field.begin() + static_cast<std::ptrdiff_t>(colon),
                     is_token_char)) {
      r.status = 400;
      return r;
    }
    const std::string_view name = field.substr(0, colon);
    const std::string_view value = trim(field.substr(colon + 1));
    if (iequals(name, "connection")) {
      // A comma-separated list of options.
      std::string_view rest = value;
      while (!rest.empty()) {
        const std::size_t comma = rest.find(',');
        const std::string_view option = trim(rest.substr(0, comma));
        close |= iequals(option, "close");
        keep_alive |= iequals(option, "keep-alive");
        rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
      }
    } else if (iequals(name, "content-length")) {
      if (value.empty() || value.size() > 18 ||
          !std::all_of(value.begin(), value.end(),
                       [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
        r.status = 400;
        return r;
      }
      const std::uint64_t n = std::strtoull(std::string(value).c_str(), nullptr, 10);
      if (have_length && n != r.content_length) {
        r.status = 400;
        return r;
      }
      have_length = true;
      r.content_length = n;
    } else if (iequals(name, "transfer-encoding")) {
      chunked = true;
    }
  }
  r.keep_alive = r.http10 ? keep_alive && !close : !close;
  if (chunked) {
    r.status = 501; // request bodies in chunks are not supported
  } else if (r.content_length > max_body_bytes) {
    r.status = 413;
  } else if (method != "GET" && method != "HEAD") {
    r.status = 405;
  } else {
    r.head = method == "HEAD";
    r.target = target == "/"        ? route::hello
               : target == "/big"   ? route::big
               : target == "/stats" ? route::stats
                                    : route::not_found;
    if (r.target == route::not_found)
      r.status = 404;
  }
  return r;
}

request_info parse_head(std::string_view head) {
  request_info r = parse_head_fields(head);
  // Errors about the request's framing leave the connection in an unknown state: close it.
  if (r.status == 400 || r.status == 413 || r.status == 501)
    r.keep_alive = false;
  return r;
}

// ---------------------------------------------------------------------------------------
// HTTP: responses

// A canned response: prefix + date + suffix, where the prefix ends with "Date: " and the
// suffix holds the rest of the head and the body.
struct canned_response {
  std::string prefix;
  std::string suffix;
};

constexpr std::array<int, 7> canned_statuses = {200, 400, 404, 405, 413, 431, 501};

const char* reason_phrase(int status) {
  switch (status) {
  case 200:
    return "OK";
  case 400:
    return "Bad Request";
  case 404:
    return "Not Found";
  case 405:
    return "Method Not Allowed";
  case 413:
    return "Content Too Large";
  case 431:
    return "Request Header Fields Too Large";
  case 501:
    return "Not Implemented";
  default:
    return "Unknown";
  }
}

std::string response_head_start(int status) {
  return "HTTP/1.1 " + std::to_string(status) + " " + reason_phrase(status) +
         "\r\nServer: asio-wheel-http\r\nDate: ";
}

std::string response_head_end(std::size_t content_length, conn_header conn,
                              const char* content_type = "text/plain; charset=utf-8") {
  std::string s = "\r\nContent-Type: ";
  s += content_type;
  s += "\r\nContent-Length: " + std::to_string(content_length) + "\r\n";
  if (conn == conn_header::close)
    s += "Connection: close\r\n";
  else if (conn == conn_header::keep_alive)
    s += "Connection: keep-alive\r\n";
  return s;
}

const canned_response& canned(int status, conn_header conn, bool head) {
  static const std::vector<canned_response> table = [] {
    std::vector<canned_response> t;
    for (int s : canned_statuses)
      for (conn_header c : {conn_header::none, conn_header::close, conn_header::keep_alive})
        for (bool h : {false, true}) {
          const std::string body =
              s == 200 ? std::string(hello_body) : std::string(reason_phrase(s)) + "\n";
          std::string suffix = response_head_end(body.size(), c);
          if (s == 405)
            suffix += "Allow: GET, HEAD\r\n";
          suffix += "\r\n";
          if (!h)
            suffix += body;
          t.push_back({response_head_start(s), std::move(suffix)});
        }
    return t;
  }();
  const auto i = static_cast<std::size_t>(
      std::find(canned_statuses.begin(), canned_statuses.end(), status) - canned_statuses.begin());
  return table[(i * 3 + static_cast<std::size_t>(conn)) * 2 + (head ? 1 : 0)];
}

const std::array<char, big_chunk_bytes>& big_chunk() {
  static const std::array<char, big_chunk_bytes> chunk = [] {
    std::array<char, big_chunk_bytes> a;
    a.fill('x');
    for (std::size_t i = 63; i < a.size(); i += 64)
      a[i] = '\n';
    return a;
  }();
  return chunk;
}

// The IMF-fixdate of now, cached per thread for the current second.
std::string_view http_date() {
  thread_local std::time_t cached = -1;
  thread_local std::array<char, 40> text{};
  thread_local std::size_t length = 0;
  const std::time_t now = std::time(nullptr);
  if (now != cached) {
    std::tm tm{};
    ::gmtime_r(&now, &tm);
    length = std::strftime(text.data(), text.size(), "%a, %d %b %Y %H:%M:%S GMT", &tm);
    cached = now;
  }
  return {text.data(), length};
}

// ---------------------------------------------------------------------------------------
// A connection

struct no_timer {
  explicit no_timer(const asio::any_io_executor&) {}
  void cancel() {}
};

template <timer_kind K>
class connection : public std::enable_shared_from_this<connection<K>> {
  static constexpr bool wheel = K == timer_kind::wheel;
  using idle_type = std::conditional_t<wheel, asio_wheel::idle_timer, asio::steady_timer>;
  using deadline_type = std::conditional_t<wheel, no_timer, asio::steady_timer>;

public:
  connection(tcp::socket sock, server_state& st)
      : sock_(std::move(sock)), st_(st), idle_(make_idle(sock_.get_executor(), st)),
        deadline_(sock_.get_executor()) {}

  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  // The whole life of the connection; returns once it is closed.
  awaitable<void> run() {
    close_reason why = close_reason::error;
    try {
      why = co_await serve();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "http_server: connection failed: %s\n", e.what());
    }
    finish(why);
  }

private:
  static idle_type make_idle(const asio::any_io_executor& ex, const server_state& st) {
    if constexpr (wheel)
      return idle_type(ex, st.opts.idle_timeout);
    else
      return idle_type(ex);
  }

  // --- Idle timeout ---

  void start_idle() {
    if constexpr (wheel)
      wait_idle(); // construction counted as activity
    else
      reset_idle();
  }

  // Every read.
  void touch() {
    if constexpr (wheel)
      idle_.touch(); // a store: the pending wait re-arms itself lazily if it comes due
    else
      reset_idle(); // aborts the pending wait and starts another
  }

  void wait_idle() {
    idle_.async_wait(
        [self = this->shared_from_this()](const asio::error_code& ec) { self->on_idle(ec); });
  }

  void reset_idle() {
    last_activity_ = clock_type::now();
    idle_.expires_at(last_activity_ + st_.opts.idle_timeout);
    idle_.async_wait(
        [self = this->shared_from_this()](const asio::error_code& ec) { self->on_idle(ec); });
  }

  clock_type::time_point last_activity() const {
    if constexpr (wheel)
      return idle_.last_activity();
    else
      return last_activity_;
  }

  void on_idle(const asio::error_code& ec) {
    if (ec || reason_ != close_reason::none)
      return;
    const auto now = clock_type::now();
    if constexpr (!wheel) {
      // Reset after this wait had already completed: the reset's own wait is pending.
      if (idle_.expiry() > now)
        return;
    }
    if (in_request_) {
      idle_deferred_ = true; // the request deadline governs; idle starts again afterwards
      return;
    }
    st_.stats.idle_late.add(now - (last_activity() + st_.opts.idle_timeout));
    reason_ = close_reason::idle;
    asio::error_code ignored;
    sock_.close(ignored); // aborts the session's pending wait
  }

  // --- Request deadline ---

  void begin_request(clock_type::time_point now) {
    in_request_ = true;
    request_deadline_ = now + st_.opts.request_timeout;
    if constexpr (!wheel) {
      deadline_hit_ = false;
      deadline_.expires_at(request_deadline_);
      deadline_.async_wait([self = this->shared_from_this(), id = ++request_id_](
                               const asio::error_code& ec) { self->on_deadline(ec, id); });
    }
  }

  void on_deadline(const asio::error_code& ec, std::uint64_t id) {
    if (ec || id != request_id_ || !in_request_ || reason_ != close_reason::none)
      return;
    deadline_hit_ = true;
    asio::error_code ignored;
    sock_.cancel(ignored); // the session sees operation_aborted, or deadline_hit_ next
  }

  void end_request() {
    in_request_ = false;
    if constexpr (!wheel)
      deadline_.cancel();
    if (idle_deferred_) {
      idle_deferred_ = false;
      if constexpr (wheel) {
        idle_.touch();
        wait_idle();
      } else {
        reset_idle();
      }
    }
  }

  // The request's time is up?
  bool timed_out() const {
    if constexpr (wheel)
      return clock_type::now() >= request_deadline_;
    else
      return deadline_hit_;
  }

  // Maps the result of an operation: closed by the idle timer (operation_aborted), past the
  // request deadline (timed_out), or as is.
  asio::error_code outcome(const asio::error_code& ec, bool bounded) const {
    if (reason_ != close_reason::none)
      return asio::error::operation_aborted;
    if (bounded) {
      if constexpr (wheel) {
        if (ec == asio::error::operation_aborted && timed_out())
          return asio::error::timed_out;
      } else {
        // Also when the operation completed anyway: the request's time is up.
        if (deadline_hit_)
          return asio::error::timed_out;
      }
    }
    return ec;
  }

  // --- I/O ---

  // Waits until the socket is readable; within a request (bounded), no later than the
  // request deadline.
  awaitable<asio::error_code> wait_readable(bool bounded) {
    if constexpr (wheel) {
      if (bounded) {
        const auto left = request_deadline_ - clock_type::now();
        if (left <= clock_type::duration::zero())
          co_return asio::error::timed_out;
        auto [ec] = co_await sock_.async_wait(
            tcp::socket::wait_read, asio_wheel::cancel_after(left, as_tuple(use_awaitable)));
        co_return outcome(ec, bounded);
      }
    }
    auto [ec] = co_await sock_.async_wait(tcp::socket::wait_read, as_tuple(use_awaitable));
    co_return outcome(ec, bounded);
  }

  // Writes all of `buffers`, no later than the request deadline.
  template <typename Buffers>
  awaitable<asio::error_code> write_all(Buffers buffers) {
    if constexpr (wheel) {
      const auto left = request_deadline_ - clock_type::now();
      if (left <= clock_type::duration::zero())
        co_return asio::error::timed_out;
      auto [ec, n] = co_await asio::async_write(
          sock_, buffers, asio_wheel::cancel_after(left, as_tuple(use_awaitable)));
      co_return outcome(ec, true);
    } else {
      auto [ec, n] = co_await asio::async_write(sock_, buffers, as_tuple(use_awaitable));
      co_return outcome(ec, true);
    }
  }

  // Appends what the socket has to `buf` (non-blocking). would_block: nothing yet.
  void read_available(std::string& buf, asio::error_code& ec) {
    thread_local std::array<char, 16384> scratch;
    const std::size_t n = sock_.read_some(asio::buffer(scratch), ec);
    if (n > 0) {
      buf.append(scratch.data(), n);
      touch();
    }
  }

  // The peer closing (eof), resetting or going away mid-write is the peer's doing; anything
  // else is an error, and the first few are logged.
  static close_reason io_failure(const asio::error_code& ec) {
    if (ec == asio::error::eof || ec == asio::error::connection_reset ||
        ec == asio::error::broken_pipe)
      return close_reason::peer;
    static std::atomic<int> logged{0};
    if (logged.fetch_add(1, std::memory_order_relaxed) < 10)
      std::fprintf(stderr, "http_server: connection closed on an I/O error: %s (%s:%d)\n",
                   ec.message().c_str(), ec.category().name(), ec.value());
    return close_reason::error;
  }

  close_reason deadline_expired() {
    st_.stats.deadline_late.add(clock_type::now() - request_deadline_);
    return close_reason::request_timeout;
  }

  // Reads more of the current request into `buf`; none when the request is over.
  awaitable<std::optional<close_reason>> read_more(std::string& buf) {
    for (;;) {
      asio::error_code ec = co_await wait_readable(true);
      if (reason_ != close_reason::none)
        co_return reason_;
      if (ec == asio::error::timed_out)
        co_return deadline_expired();
      if (ec)
        co_return io_failure(ec);
      read_available(buf, ec);
      if (ec == asio::error::would_block)
        continue;
      if (ec)
        co_return io_failure(ec);
      co_return std::nullopt;
    }
  }

  // Answers with a canned response. none: written.
  awaitable<std::optional<close_reason>> respond(int status, conn_header conn, bool head,
                                                 std::string_view date) {
    const canned_response& r = canned(status, conn, head);
    const std::array<asio::const_buffer, 3> buffers = {
        asio::buffer(r.prefix), asio::buffer(date.data(), date.size()), asio::buffer(r.suffix)};
    co_return co_await finish_write(co_await write_all(buffers));
  }

  awaitable<std::optional<close_reason>> respond_stats(conn_header conn, bool head,
                                                       std::string_view date) {
    const std::string body = stats_text(st_);
    std::string text = response_head_start(200);
    text += date;
    text += response_head_end(body.size(), conn);
    text += "Cache-Control: no-store\r\n\r\n";
    if (!head)
      text += body;
    co_return co_await finish_write(co_await write_all(asio::buffer(text)));
  }

  // GET /big: the head, then 16 MiB in chunks, each write bounded by the time left.
  awaitable<std::optional<close_reason>> respond_big(conn_header conn, bool head,
                                                     std::string_view date) {
    std::string text = response_head_start(200);
    text += date;
    text += response_head_end(big_body_bytes, conn);
    text += "\r\n";
    if (auto r = co_await finish_write(co_await write_all(asio::buffer(text))))
      co_return r;
    for (std::size_t i = 0; !head && i < big_chunks; ++i)
      if (auto r = co_await finish_write(co_await write_all(asio::buffer(big_chunk()))))
        co_return r;
    co_return std::nullopt;
  }

  awaitable<std::optional<close_reason>> finish_write(asio::error_code ec) {
    if (reason_ != close_reason::none)
      co_return reason_;
    if (ec == asio::error::timed_out)
      co_return deadline_expired();
    if (ec)
      co_return io_failure(ec);
    co_return std::nullopt;
  }

  // The date for a response, copied into `date`: a write may outlive the cached text's second.
  static std::string_view stamp(std::array<char, 40>& date) {
    const std::string_view d = http_date();
    std::copy(d.begin(), d.end(), date.begin());
    return {date.data(), d.size()};
  }

  awaitable<close_reason> serve() {
    std::string buf; // received, not yet consumed
    std::array<char, 40> date{};
    start_idle();
    for (;;) {
      // Between requests: wait for the first byte of the next one; only the idle timeout
      // applies.
      while (buf.empty()) {
        asio::error_code ec = co_await wait_readable(false);
        if (reason_ != close_reason::none)
          co_return reason_;
        if (ec)
          co_return io_failure(ec);
        read_available(buf, ec);
        if (ec && ec != asio::error::would_block)
          co_return io_failure(ec);
      }

      // The request has begun: its deadline runs from now (its first byte, or for a
      // pipelined request, the moment the previous one was answered).
      begin_request(clock_type::now());
      std::size_t head_end;
      for (;;) {
        // RFC 9112, 2.2: empty lines before a request line are ignored. They belong to the
        // request (its deadline runs), so they cannot keep a connection open for free.
        std::size_t skip = 0;
        while (buf.compare(skip, 2, "\r\n") == 0)
          skip += 2;
        buf.erase(0, skip);
        head_end = buf.find("\r\n\r\n");
        if (head_end != std::string::npos || buf.size() > max_head_bytes)
          break;
        if (auto r = co_await read_more(buf))
          co_return *r;
      }
      if (head_end == std::string::npos || head_end + 4 > max_head_bytes) {
        if (auto r = co_await respond(431, conn_header::close, false, stamp(date)))
          co_return *r;
        co_return close_reason::bad_request;
      }
      const request_info req = parse_head(std::string_view(buf).substr(0, head_end + 4));
      buf.erase(0, head_end + 4);

      // A body, if any, is read and discarded, within the deadline.
      if (req.status != 400 && req.status != 413 && req.status != 501) {
        std::uint64_t body_left = req.content_length;
        for (;;) {
          const auto take =
              static_cast<std::size_t>(std::min<std::uint64_t>(body_left, buf.size()));
          buf.erase(0, take);
          body_left -= take;
          if (body_left == 0)
            break;
          if (auto r = co_await read_more(buf))
            co_return *r;
        }
      }

      // The response.
      const conn_header conn = !req.keep_alive ? conn_header::close
                               : req.http10    ? conn_header::keep_alive
                                               : conn_header::none;
      const std::string_view date_text = stamp(date);
      std::optional<close_reason> failed;
      if (req.status == 200 && req.target == route::stats)
        failed = co_await respond_stats(conn, req.head, date_text);
      else if (req.status == 200 && req.target == route::big)
        failed = co_await respond_big(conn, req.head, date_text);
      else
        failed = co_await respond(req.status, conn, req.head, date_text);
      if (failed)
        co_return *failed;
      st_.stats.requests.fetch_add(1, std::memory_order_relaxed);
      end_request();
      if (!req.keep_alive)
        co_return req.status == 200 || req.status == 404 || req.status == 405
            ? close_reason::connection_close
            : close_reason::bad_request;
    }
  }

  void finish(close_reason why) {
    if (reason_ == close_reason::none)
      reason_ = why;
    asio::error_code ignored;
    // No lingering close: should request bytes remain unread (after a 413, say), the kernel
    // resets the connection, which may cut that last response short.
    if (reason_ == close_reason::connection_close || reason_ == close_reason::bad_request)
      sock_.shutdown(tcp::socket::shutdown_send, ignored);
    // A request out of time is reset (as nginx's reset_timedout_connection does): the kernel
    // drops what is unsent instead of trickling it to a slow reader from an orphan socket.
    if (reason_ == close_reason::request_timeout && sock_.is_open())
      sock_.set_option(asio::socket_base::linger(true, 0), ignored);
    sock_.close(ignored);
    idle_.cancel();
    deadline_.cancel();
    st_.stats.closed[static_cast<std::size_t>(reason_)].fetch_add(1, std::memory_order_relaxed);
    st_.stats.open.fetch_sub(1, std::memory_order_relaxed);
  }

  tcp::socket sock_;
  server_state& st_;
  idle_type idle_;
  [[no_unique_address]] deadline_type deadline_;
  clock_type::time_point last_activity_{}; // steady: when the idle timer was last reset
  clock_type::time_point request_deadline_{};
  std::uint64_t request_id_ = 0; // steady: which request the deadline timer is armed for
  bool in_request_ = false;
  bool idle_deferred_ = false;
  bool deadline_hit_ = false; // steady: the deadline timer fired for the current request
  close_reason reason_ = close_reason::none;
};

// ---------------------------------------------------------------------------------------
// The server

class http_server {
public:
  explicit http_server(const server_options& opts)
      : ctx_(static_cast<int>(opts.threads)), acceptor_(asio::make_strand(ctx_)) {
    state_.opts = opts;
  }

  http_server(const http_server&) = delete;
  http_server& operator=(const http_server&) = delete;

  ~http_server() {
    ctx_.stop();
    join_threads();
  }

  // Binds and listens; returns the port. Throws on failure.
  std::uint16_t listen() {
    const tcp::endpoint ep(asio::ip::make_address(state_.opts.address), state_.opts.port);
    acceptor_.open(ep.protocol());
    acceptor_.set_option(tcp::acceptor::reuse_address(true));
    acceptor_.bind(ep);
    acceptor_.listen(asio::socket_base::max_listen_connections);
    return acceptor_.local_endpoint().port();
  }

  // Starts accepting, and the threads.
  void start() {
    asio::co_spawn(acceptor_.get_executor(), accept_loop(), asio::detached);
    running_ = state_.opts.threads;
    for (unsigned i = 0; i < state_.opts.threads; ++i)
      threads_.emplace_back([this] {
        try {
          ctx_.run();
        } catch (const std::exception& e) {
          std::fprintf(stderr, "http_server: run() threw: %s\n", e.what());
        }
        std::lock_guard lock(mutex_);
        if (--running_ == 0)
          done_.notify_all();
      });
  }

  // Stops accepting. Once the last connection is gone and nothing else is pending, the
  // threads return. Thread-safe.
  void stop_accepting() {
    asio::post(acceptor_.get_executor(), [this] {
      asio::error_code ignored;
      acceptor_.close(ignored);
    });
  }

  // Stops everything now. Thread-safe.
  void stop_now() { ctx_.stop(); }

  // Waits up to `limit` for the threads to return by themselves; then stops the context.
  // Returns whether they returned by themselves.
  bool join(clock_type::duration limit) {
    bool drained;
    {
      std::unique_lock lock(mutex_);
      drained = done_.wait_for(lock, limit, [this] { return running_ == 0; });
    }
    if (!drained)
      ctx_.stop();
    join_threads();
    return drained;
  }

  // Waits for the threads to return.
  void wait() {
    {
      std::unique_lock lock(mutex_);
      done_.wait(lock, [this] { return running_ == 0; });
    }
    join_threads();
  }

  asio::io_context& context() { return ctx_; }
  const server_stats& stats() const { return state_.stats; }
  const server_state& state() const { return state_; }

private:
  asio::any_io_executor connection_executor() {
    if (state_.opts.threads > 1)
      return asio::make_strand(ctx_); // a connection's handlers never run concurrently
    return ctx_.get_executor();
  }

  awaitable<void> accept_loop() {
    for (;;) {
      auto [ec, sock] =
          co_await acceptor_.async_accept(connection_executor(), as_tuple(use_awaitable));
      if (!acceptor_.is_open() || ec == asio::error::operation_aborted)
        co_return;
      if (ec) {
        // Out of descriptors, typically: back off rather than spin.
        state_.stats.accept_errors.fetch_add(1, std::memory_order_relaxed);
        asio::steady_timer pause(acceptor_.get_executor(), 20ms);
        co_await pause.async_wait(as_tuple(use_awaitable));
        continue;
      }
      start_connection(std::move(sock));
    }
  }

  void start_connection(tcp::socket sock) {
    asio::error_code ec;
    sock.set_option(tcp::no_delay(true), ec);
    sock.non_blocking(true, ec);
    if (ec)
      return; // closed by the socket's destructor
    state_.stats.accepted.fetch_add(1, std::memory_order_relaxed);
    state_.stats.open.fetch_add(1, std::memory_order_relaxed);
    const asio::any_io_executor ex = sock.get_executor();
    if (state_.opts.timer == timer_kind::wheel)
      spawn(std::make_shared<connection<timer_kind::wheel>>(std::move(sock), state_), ex);
    else
      spawn(std::make_shared<connection<timer_kind::steady>>(std::move(sock), state_), ex);
  }

  template <typename Connection>
  static void spawn(std::shared_ptr<Connection> c, const asio::any_io_executor& ex) {
    asio::co_spawn(
        ex, [c = std::move(c)]() { return c->run(); }, asio::detached);
  }

  void join_threads() {
    for (auto& t : threads_)
      if (t.joinable())
        t.join();
    threads_.clear();
  }

  server_state state_;
  asio::io_context ctx_;
  tcp::acceptor acceptor_;
  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable done_;
  unsigned running_ = 0;
};

void print_stats(const server_state& st) {
  std::string text = stats_text(st);
  std::printf("--- stats ---\n%s", text.c_str());
  std::fflush(stdout);
}

// ---------------------------------------------------------------------------------------
// --smoke: a built-in client

namespace smoke {

using namespace asio::experimental::awaitable_operators;

constexpr clock_type::duration idle_timeout = 300ms;
constexpr clock_type::duration request_timeout = 500ms;
constexpr clock_type::duration slack = 1s;    // how late a close may be and still pass
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
           "a silent connection is closed within [idle timeout, idle timeout + 1 s]");
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
           "an idle keep-alive connection is closed within idle timeout + 1 s");
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
           "slowloris is closed within [request deadline, request deadline + 1 s]");
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

int main() {
  const long fds_before = count_fds();
  bool ok = true;
  for (timer_kind kind : {timer_kind::wheel, timer_kind::steady})
    for (unsigned threads : {1u, 2u})
      ok &= run(kind, threads);
  const long fds_after = count_fds();
  std::printf("fds: %ld at start, %ld at end; RSS: %ld kB\n", fds_before, fds_after, rss_kb());
  if (fds_after != fds_before) {
    std::printf("FAILED: file descriptors leaked\n");
    ok = false;
  }
  std::puts(ok ? "http_server smoke: all outcomes as expected" : "http_server smoke: FAILED");
  return ok ? 0 : 1;
}

} // namespace smoke

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
      o.idle_timeout = parse_duration(value());
    } else if (a == "--request-timeout") {
      o.request_timeout = parse_duration(value());
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
    std::printf("listening on %s:%u (timer %s, %u thread%s, idle timeout %lld ms, request "
                "timeout %lld ms)\n",
                o.address.c_str(), static_cast<unsigned>(port), to_string(o.timer), o.threads,
                o.threads == 1 ? "" : "s", to_ms(o.idle_timeout), to_ms(o.request_timeout));
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
