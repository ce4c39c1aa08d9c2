//
// examples/beast_server/main.cpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// A Boost.Beast HTTP/1.1 keep-alive server with a WebSocket echo, written as Beast's own
// examples are (http_server_async, advanced_server): callbacks, one io_context run by
// --threads N threads, each connection on its own strand, and stream.expires_after(...)
// before every read and write. CMake builds this one source twice:
//
//   beast_server_beast  the stream is boost::beast::tcp_stream
//   beast_server_wheel  the stream is asio_wheel::tcp_stream (ASIO_WHEEL_BEAST_SERVER_WHEEL=1)
//
// Nothing else differs between the two, which is the point: scripts/loadtest --beast puts
// them side by side under wrk, slowhttptest and thousands of idle connections. Two departures
// from Beast's examples, in both builds, for a server under that load: the listener accepts
// what waits in the backlog in batches (listener::on_accept), and a request that arrived
// whole with its first bytes is parsed at once (http_session::read_request).
//
// Timeouts:
//   * idle: a keep-alive connection with no request in progress is closed when no byte has
//     arrived for --idle-timeout (expires_after(idle) before the read that waits for the
//     first byte of the next request).
//   * request: a request whose head and response do not complete within --request-timeout of
//     its first byte is abandoned and its connection closed: expires_after(time left) before
//     each read and write of it. Slowloris (a header line now and then) and slow readers (a
//     response that does not drain) both end this way.
//   * WebSocket: websocket::stream_base::timeout with keep_alive_pings: a ping after half of
//     --idle-timeout of silence, the connection closed if nothing arrives by --idle-timeout;
//     the handshake is bounded by --request-timeout.
//
// HTTP: GET and HEAD on "/" answer a small text, on "/big" 16 MiB (from one static buffer:
// slow readers cost no copy), GET /stats the server's counters (plain text "name value"
// lines, as examples/http_server's, which scripts/loadtest reads); other targets 404, other
// methods 405; a malformed request closes the connection. An upgrade request on any target
// becomes a WebSocket echo.
//
// Usage:
//   beast_server_{wheel,beast} [--port P] [--address A] [--threads N] [--idle-timeout T]
//                              [--request-timeout T] [--duration T]
//   beast_server_{wheel,beast} --smoke
//
//   --port P            default 8080; 0 picks one. Prints "listening on 127.0.0.1:P ...".
//   --threads N         threads running the io_context (default 1).
//   --idle-timeout T    default 5s; T: a number with ms or s (300ms, 2.5s), bare: seconds.
//   --request-timeout T default 10s.
//   --duration T        stop by itself after T (default: run until SIGINT or SIGTERM).
//   --smoke             the server in-process on an ephemeral port (idle 1 s, request
//                       3 s) and a client against it: keep-alive requests, GET /big, 404,
//                       an idle connection and a slowloris (each closed at its timeout, not
//                       before, within 2 s after), a WebSocket echo, and a WebSocket client
//                       that answers no ping (closed by the idle timeout); with 1 and 2
//                       threads. Exits 0 if every outcome was the expected one.

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>

#if ASIO_WHEEL_BEAST_SERVER_WHEEL
#include <asio_wheel/beast/tcp_stream.hpp>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using clock_type = std::chrono::steady_clock;
using namespace std::chrono_literals;

#if ASIO_WHEEL_BEAST_SERVER_WHEEL
using server_stream = asio_wheel::tcp_stream;
constexpr const char* stream_name = "asio_wheel::tcp_stream";
#else
using server_stream = beast::tcp_stream;
constexpr const char* stream_name = "beast::tcp_stream";
#endif

namespace {

struct options {
  std::string address = "127.0.0.1";
  unsigned short port = 8080;
  unsigned threads = 1;
  clock_type::duration idle_timeout = 5s;
  clock_type::duration request_timeout = 10s;
  clock_type::duration run_for = clock_type::duration::zero(); // zero: until a signal
};

double to_ms(clock_type::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

// How late the timeout closes of one kind came, past the deadline the server had set. The
// deadline is computed from a clock reading taken before expires_after, so a close before
// it would show as negative: the load test checks the minimum.
class lateness {
public:
  void record(clock_type::duration late) {
    std::lock_guard lock(mutex_);
    if (ms_.size() < (1u << 20))
      ms_.push_back(to_ms(late));
  }
  // "<prefix>_count N", then _min, _p50, _p99, _max in ms.
  void print(std::ostream& os, const char* prefix) const {
    std::vector<double> v;
    {
      std::lock_guard lock(mutex_);
      v = ms_;
    }
    std::sort(v.begin(), v.end());
    auto q = [&](double f) {
      return v.empty() ? 0.0 : v[std::min(v.size() - 1, static_cast<std::size_t>(f * v.size()))];
    };
    os << prefix << "_count " << v.size() << '\n'
       << prefix << "_min " << (v.empty() ? 0.0 : v.front()) << '\n'
       << prefix << "_p50 " << q(0.5) << '\n'
       << prefix << "_p99 " << q(0.99) << '\n'
       << prefix << "_max " << (v.empty() ? 0.0 : v.back()) << '\n';
  }

private:
  mutable std::mutex mutex_;
  std::vector<double> ms_;
};

// Why connections closed; the names are examples/http_server's, which scripts/loadtest reads.
enum class closed { peer, idle, request_timeout, connection_close, bad_request, error, count };
constexpr const char* closed_names[] = {
    "peer", "idle", "request_timeout", "connection_close", "bad_request", "error"};

struct stats {
  std::atomic<long long> accepted{0}, open{0}, requests{0}, ws_sessions{0}, ws_messages{0},
      ws_closed_timeout{0};
  std::atomic<long long> closes[static_cast<int>(closed::count)]{};
  lateness idle_late, request_late;

  void close(closed why) { ++closes[static_cast<int>(why)]; }

  std::string text() const {
    std::ostringstream os;
    os.setf(std::ios::fixed);
    os.precision(3);
    os << "stream " << stream_name << '\n'
       << "accepted " << accepted << '\n'
       << "open " << open << '\n'
       << "requests " << requests << '\n';
    for (int i = 0; i < static_cast<int>(closed::count); ++i)
      os << "closed_" << closed_names[i] << ' ' << closes[i] << '\n';
    os << "ws_sessions " << ws_sessions << '\n'
       << "ws_messages " << ws_messages << '\n'
       << "ws_closed_timeout " << ws_closed_timeout << '\n';
    idle_late.print(os, "idle_late_ms");
    request_late.print(os, "request_timeout_late_ms");
    return os.str();
  }
};

struct server_state {
  options opts;
  stats st;
};

// The body of GET /big: 16 MiB, one buffer for every response.
const std::string& big_body() {
  static const std::string body = [] {
    std::string s(16u << 20, '\0');
    for (std::size_t i = 0; i < s.size(); ++i)
      s[i] = static_cast<char>('a' + i % 26);
    return s;
  }();
  return body;
}
constexpr char small_body[] = "Hello from Beast on asio-wheel's example server.\n";

// An I/O error that means the client went away, not a server fault.
bool is_peer_gone(beast::error_code ec) {
  return ec == http::error::end_of_stream || ec == http::error::partial_message ||
         ec == net::error::eof || ec == net::error::connection_reset ||
         ec == net::error::broken_pipe || ec == net::error::connection_aborted;
}

// ---------------------------------------------------------------------------------------------
// WebSocket echo

class ws_session : public std::enable_shared_from_this<ws_session> {
public:
  ws_session(server_state& s, server_stream&& stream) : state_(s), ws_(std::move(stream)) {}

  void run(http::request<http::string_body> req) {
    ++state_.st.ws_sessions;
    // The websocket stream keeps its own timeouts; the TCP stream's would close it under it.
    beast::get_lowest_layer(ws_).expires_never();
    websocket::stream_base::timeout t{};
    t.handshake_timeout = state_.opts.request_timeout;
    t.idle_timeout = state_.opts.idle_timeout;
    t.keep_alive_pings = true;
    ws_.set_option(t);
    ws_.async_accept(req, beast::bind_front_handler(&ws_session::on_accept, shared_from_this()));
  }

  ~ws_session() { --state_.st.open; }

private:
  void on_accept(beast::error_code ec) {
    if (ec)
      return fail(ec);
    read();
  }
  void read() {
    ws_.async_read(buffer_, beast::bind_front_handler(&ws_session::on_read, shared_from_this()));
  }
  void on_read(beast::error_code ec, std::size_t) {
    if (ec)
      return fail(ec);
    ++state_.st.ws_messages;
    ws_.text(ws_.got_text());
    ws_.async_write(buffer_.data(),
                    beast::bind_front_handler(&ws_session::on_write, shared_from_this()));
  }
  void on_write(beast::error_code ec, std::size_t) {
    if (ec)
      return fail(ec);
    buffer_.consume(buffer_.size());
    read();
  }
  void fail(beast::error_code ec) {
    if (ec == beast::error::timeout) {
      ++state_.st.ws_closed_timeout;
      state_.st.close(closed::idle);
    } else if (ec == websocket::error::closed || is_peer_gone(ec)) {
      state_.st.close(closed::peer);
    } else {
      state_.st.close(closed::error);
    }
  }

  server_state& state_;
  websocket::stream<server_stream> ws_;
  beast::flat_buffer buffer_;
};

// ---------------------------------------------------------------------------------------------
// HTTP session

class http_session : public std::enable_shared_from_this<http_session> {
public:
  http_session(server_state& s, tcp::socket&& socket) : state_(s), stream_(std::move(socket)) {
    ++state_.st.open;
  }
  ~http_session() {
    if (!handed_over_)
      --state_.st.open;
  }

  void run() {
    // On the connection's strand, as Beast's examples start theirs.
    net::dispatch(stream_.get_executor(),
                  beast::bind_front_handler(&http_session::wait_for_request, shared_from_this()));
  }

private:
  // Keep-alive: wait for the first byte of the next request, at most the idle timeout.
  void wait_for_request() {
    if (buffer_.size() > 0) // pipelined: the next request has begun
      return read_request(clock_type::now());
    const auto now = clock_type::now();
    due_ = now + state_.opts.idle_timeout;
    stream_.expires_after(state_.opts.idle_timeout);
    stream_.async_read_some(
        buffer_.prepare(1024),
        beast::bind_front_handler(&http_session::on_first_bytes, shared_from_this()));
  }

  void on_first_bytes(beast::error_code ec, std::size_t n) {
    const auto now = clock_type::now();
    if (ec == beast::error::timeout) {
      state_.st.idle_late.record(now - due_);
      return close(closed::idle);
    }
    if (ec)
      return close(is_peer_gone(ec) ? closed::peer : closed::error);
    buffer_.commit(n);
    read_request(now);
  }

  // The request's clock starts at its first byte.
  void read_request(clock_type::time_point first_byte) {
    due_ = first_byte + state_.opts.request_timeout;
    parser_.emplace();
    parser_->body_limit(1u << 20);
    // What is buffered (usually the whole request, with the first bytes) is parsed here:
    // http::async_read would find it complete without reading and post its completion, and
    // then nothing timed would be outstanding when this handler returns. A stream then lets
    // its timer go and waits anew for the response's write: Beast's cancels its timer as
    // after every operation, ours releases its wheel wait (see README, Using with Beast).
    beast::error_code ec;
    while (buffer_.size() > 0 && !parser_->is_done() && !ec)
      buffer_.consume(parser_->put(buffer_.data(), ec));
    if (ec == http::error::need_more)
      ec = {};
    if (ec || parser_->is_done())
      return on_read(ec, 0);
    expires_at_due();
    http::async_read(stream_, buffer_, *parser_,
                     beast::bind_front_handler(&http_session::on_read, shared_from_this()));
  }

  // expires_after with the time the request has left, as a Beast server re-arms before each
  // operation.
  void expires_at_due() {
    stream_.expires_after(std::max(clock_type::duration::zero(), due_ - clock_type::now()));
  }

  void on_read(beast::error_code ec, std::size_t) {
    if (ec == beast::error::timeout)
      return request_timed_out();
    if (ec)
      return close(is_peer_gone(ec) ? closed::peer
                   : ec.category() == make_error_code(http::error::bad_target).category()
                       ? closed::bad_request
                       : closed::error);
    auto req = parser_->release();
    if (websocket::is_upgrade(req)) {
      handed_over_ = true; // the websocket session owns the connection's "open" count now
      std::make_shared<ws_session>(state_, std::move(stream_))->run(std::move(req));
      return;
    }
    ++state_.st.requests;
    respond(req);
  }

  void respond(const http::request<http::string_body>& req) {
    const bool head = req.method() == http::verb::head;
    auto status = http::status::ok;
    const char* text = small_body;
    std::size_t size = sizeof small_body - 1;
    std::string stats_text;
    if (req.method() != http::verb::get && !head) {
      status = http::status::method_not_allowed;
      text = "method not allowed\n";
      size = std::strlen(text);
    } else if (req.target() == "/big") {
      text = big_body().data();
      size = big_body().size();
    } else if (req.target() == "/stats") {
      stats_text = state_.st.text();
      text = stats_text.data();
      size = stats_text.size();
    } else if (req.target() != "/") {
      status = http::status::not_found;
      text = "not found\n";
      size = std::strlen(text);
    }
    // The body is a view: /big's static buffer, or stats_text, which the response keeps.
    auto res = std::make_shared<response>(std::move(stats_text));
    if (!res->owned.empty())
      text = res->owned.data();
    res->msg.result(status);
    res->msg.version(req.version());
    res->msg.keep_alive(req.keep_alive());
    res->msg.set(http::field::server, "asio-wheel beast_server");
    res->msg.set(http::field::content_type, "text/plain");
    res->msg.content_length(size);
    if (!head)
      res->msg.body() = {text, size};
    res_ = res;
    expires_at_due();
    http::async_write(stream_, res->msg,
                      beast::bind_front_handler(&http_session::on_write, shared_from_this(),
                                                res->msg.keep_alive()));
  }

  void on_write(bool keep_alive, beast::error_code ec, std::size_t) {
    res_.reset();
    if (ec == beast::error::timeout)
      return request_timed_out();
    if (ec)
      return close(is_peer_gone(ec) ? closed::peer : closed::error);
    if (!keep_alive)
      return close(closed::connection_close);
    wait_for_request();
  }

  void request_timed_out() {
    state_.st.request_late.record(clock_type::now() - due_);
    close(closed::request_timeout);
  }

  void close(closed why) {
    state_.st.close(why);
    beast::error_code ignored;
    if (why == closed::connection_close)
      stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.close();
  }

  struct response {
    explicit response(std::string s) : owned(std::move(s)) {}
    std::string owned;
    http::response<http::span_body<const char>> msg;
  };

  server_state& state_;
  server_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::shared_ptr<response> res_;
  clock_type::time_point due_{}; // the deadline of the read or write in progress
  bool handed_over_ = false;
};

// ---------------------------------------------------------------------------------------------
// Listener and the server

class listener : public std::enable_shared_from_this<listener> {
public:
  listener(net::io_context& ioc, server_state& s, tcp::endpoint ep)
      : ioc_(ioc), state_(s), acceptor_(net::make_strand(ioc)) {
    acceptor_.open(ep.protocol());
    acceptor_.set_option(net::socket_base::reuse_address(true));
    acceptor_.bind(ep);
    acceptor_.listen(net::socket_base::max_listen_connections);
    // For the batches of on_accept: a synchronous accept that finds none returns would_block.
    acceptor_.non_blocking(true);
  }
  unsigned short port() const { return acceptor_.local_endpoint().port(); }
  void run() { accept(); }
  void stop() {
    net::post(acceptor_.get_executor(), [self = shared_from_this()] {
      beast::error_code ignored;
      self->acceptor_.close(ignored);
    });
  }

private:
  void accept() {
    acceptor_.async_accept(net::make_strand(ioc_),
                           beast::bind_front_handler(&listener::on_accept, shared_from_this()));
  }
  void start_session(tcp::socket socket) {
    ++state_.st.accepted;
    beast::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    std::make_shared<http_session>(state_, std::move(socket))->run();
  }

  void on_accept(beast::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted || !acceptor_.is_open())
      return;
    if (!ec) {
      start_session(std::move(socket));
      // Then whatever else is waiting, up to a batch: one accept per turn of a loop busy
      // with a thousand keep-alive connections leaves new ones in the backlog for seconds,
      // and their request deadline (from the first byte the server reads) that much later.
      for (int i = 0; i < 64; ++i) {
        tcp::socket next = acceptor_.accept(net::make_strand(ioc_), ec);
        if (ec)
          break; // would_block; an error shows again in the next async_accept
        start_session(std::move(next));
      }
    } else if (ec == net::error::no_descriptors) {
      // Out of descriptors: go on accepting once some are released.
      auto t = std::make_shared<net::steady_timer>(acceptor_.get_executor(), 100ms);
      t->async_wait([self = shared_from_this(), t](beast::error_code) { self->accept(); });
      return;
    }
    accept();
  }

  net::io_context& ioc_;
  server_state& state_;
  tcp::acceptor acceptor_;
};

// The io_context, its listener and N threads; stop() ends them all.
class server {
public:
  explicit server(const options& o)
      : ioc_(static_cast<int>(o.threads)),
        listener_(std::make_shared<listener>(
            ioc_, state_, tcp::endpoint(net::ip::make_address(o.address), o.port))) {
    state_.opts = o;
  }
  ~server() { stop(); }
  unsigned short port() const { return listener_->port(); }
  server_state& state() { return state_; }

  void start() {
    listener_->run();
    for (unsigned i = 0; i < state_.opts.threads; ++i)
      threads_.emplace_back([this] { ioc_.run(); }); // a handler that throws terminates
  }
  net::io_context& context() { return ioc_; }
  void stop() {
    listener_->stop();
    ioc_.stop();
    for (auto& t : threads_)
      t.join();
    threads_.clear();
  }

private:
  server_state state_;
  net::io_context ioc_;
  std::shared_ptr<listener> listener_;
  std::vector<std::thread> threads_;
};

// ---------------------------------------------------------------------------------------------
// --smoke: a client against the server in-process

struct smoke_client {
  unsigned short port;
  int failures = 0;

  void expect(bool ok, const std::string& what) {
    std::printf("  %s: %s\n", ok ? "ok" : "FAILED", what.c_str());
    failures += ok ? 0 : 1;
  }
  tcp::socket connect(net::io_context& ioc) {
    tcp::socket s(ioc);
    s.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port));
    return s;
  }
  // Reads until the server closes; the time that took.
  static clock_type::duration time_to_close(tcp::socket& s, clock_type::time_point since) {
    char buf[4096];
    beast::error_code ec;
    while (!ec)
      s.read_some(net::buffer(buf), ec);
    return clock_type::now() - since;
  }
  void expect_closed_at(clock_type::duration took, clock_type::duration timeout, const char* what) {
    expect(took >= timeout && took <= timeout + 2s,
           std::string(what) + " closed after " + std::to_string(to_ms(took)) + " ms (timeout " +
               std::to_string(to_ms(timeout)) + " ms)");
  }

  void run(const options& o) {
    net::io_context ioc;
    {
      auto s = connect(ioc);
      beast::flat_buffer b;
      for (const char* target : {"/", "/", "/big", "/nothing"}) {
        http::request<http::empty_body> req(http::verb::get, target, 11);
        req.set(http::field::host, "smoke");
        http::write(s, req);
        http::response_parser<http::string_body> p;
        p.body_limit(32u << 20);
        http::read(s, b, p);
        const auto& res = p.get();
        const bool ok = std::strcmp(target, "/nothing") == 0
                            ? res.result() == http::status::not_found
                        : std::strcmp(target, "/big") == 0 ? res.body() == big_body()
                                                           : res.body() == small_body;
        expect(ok && res.keep_alive(),
               std::string("GET ") + target + " on one keep-alive connection");
      }
    }
    {
      const auto t0 = clock_type::now();
      auto s = connect(ioc);
      expect_closed_at(time_to_close(s, t0), o.idle_timeout, "an idle connection");
    }
    {
      const auto t0 = clock_type::now();
      auto s = connect(ioc);
      std::string head = "GET / HTTP/1.1\r\nHost: smoke\r\n";
      beast::error_code ec;
      net::write(s, net::buffer(head), ec);
      // A header line every 100 ms, never the end of the head, until a write fails: the
      // server has closed (the first write after its close draws a reset, the next fails).
      while (!ec && clock_type::now() - t0 < o.request_timeout + 2s) {
        std::this_thread::sleep_for(100ms);
        net::write(s, net::buffer(std::string("X-a: b\r\n")), ec);
      }
      expect_closed_at(time_to_close(s, t0), o.request_timeout, "a slowloris");
    }
    {
      websocket::stream<tcp::socket> ws(connect(ioc));
      ws.handshake("127.0.0.1", "/");
      ws.write(net::buffer(std::string("echo me")));
      beast::flat_buffer b;
      ws.read(b);
      expect(beast::buffers_to_string(b.data()) == "echo me", "WebSocket echo");
      // Silent, and no pong: the server pings, then closes at its idle timeout.
      const auto t0 = clock_type::now();
      std::this_thread::sleep_for(o.idle_timeout + 500ms);
      expect(time_to_close(ws.next_layer(), t0) < o.idle_timeout + 2s,
             "a WebSocket client that answers no ping is closed by the idle timeout");
    }
  }
};

int smoke() {
  int failures = 0;
  for (unsigned threads : {1u, 2u}) {
    options o;
    o.port = 0;
    o.threads = threads;
    // Long enough that a client stalled between two requests or two header lines (a loaded
    // machine) is not taken for an idle one.
    o.idle_timeout = 1s;
    o.request_timeout = 3s; // GET /big (16 MiB) within it, under sanitizers too
    std::printf("smoke: %s, %u thread%s\n", stream_name, threads, threads == 1 ? "" : "s");
    server srv(o);
    srv.start();
    smoke_client c{srv.port()};
    try {
      c.run(o);
    } catch (const std::exception& e) {
      c.expect(false, std::string("client threw: ") + e.what());
    }
    srv.stop();
    auto& st = srv.state().st;
    c.expect(st.closes[static_cast<int>(closed::error)] == 0, "no connection closed on an error");
    c.expect(st.ws_closed_timeout == 1, "one WebSocket closed by its timeout");
    failures += c.failures;
  }
  std::printf("smoke: %s\n", failures == 0 ? "passed" : "FAILED");
  return failures == 0 ? 0 : 1;
}

// ---------------------------------------------------------------------------------------------
// Command line

clock_type::duration parse_duration(const std::string& flag, const std::string& s) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  const std::string unit(end);
  if (end == s.c_str() || !(v >= 0) || (unit != "" && unit != "s" && unit != "ms"))
    throw std::invalid_argument(flag + " '" + s +
                                "': expected a number of seconds or milliseconds (5, 2.5s, "
                                "300ms), at least 0");
  const double ms = unit == "ms" ? v : v * 1000;
  return std::chrono::duration_cast<clock_type::duration>(
      std::chrono::duration<double, std::milli>(ms));
}

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc)
        throw std::invalid_argument(a + " needs a value");
      return argv[++i];
    };
    if (a == "--port") {
      const auto v = std::stoul(value());
      if (v > 65535)
        throw std::invalid_argument("--port " + std::to_string(v) + ": expected 0..65535");
      o.port = static_cast<unsigned short>(v);
    } else if (a == "--address") {
      o.address = value();
    } else if (a == "--threads") {
      const auto v = std::stoul(value());
      if (v < 1 || v > 1024)
        throw std::invalid_argument("--threads " + std::to_string(v) + ": expected 1..1024");
      o.threads = static_cast<unsigned>(v);
    } else if (a == "--idle-timeout") {
      o.idle_timeout = parse_duration(a, value());
    } else if (a == "--request-timeout") {
      o.request_timeout = parse_duration(a, value());
    } else if (a == "--duration") {
      o.run_for = parse_duration(a, value());
    } else {
      throw std::invalid_argument("unknown argument '" + a +
                                  "' (expected --port, --address, --threads, --idle-timeout, "
                                  "--request-timeout, --duration or --smoke)");
    }
  }
  return o;
}

} // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--smoke") == 0)
    return smoke();
  try {
    const options o = parse(argc, argv);
    // GET /big's buffer is filled now, not by the first slow reader: a fixed part of the
    // server's memory from the start.
    (void)big_body();
    server srv(o);
    std::printf("listening on %s:%u (stream %s, %u thread%s, idle timeout %.0f ms, request "
                "timeout %.0f ms)\n",
                o.address.c_str(), srv.port(), stream_name, o.threads, o.threads == 1 ? "" : "s",
                to_ms(o.idle_timeout), to_ms(o.request_timeout));
    std::fflush(stdout);
    // Signals and --duration end the run; the main thread waits for either.
    net::io_context control;
    net::signal_set signals(control, SIGINT, SIGTERM);
    signals.async_wait([&](beast::error_code, int) { control.stop(); });
    net::steady_timer backstop(control);
    if (o.run_for > clock_type::duration::zero()) {
      backstop.expires_after(o.run_for);
      backstop.async_wait([&](beast::error_code ec) {
        if (!ec)
          control.stop();
      });
    }
    srv.start();
    control.run();
    srv.stop();
    std::printf("%s", srv.state().st.text().c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "beast_server: %s\n", e.what());
    return 2;
  }
}
