//
// beast/basic_stream_test.cpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// asio_wheel::basic_stream against boost::beast::basic_stream: each behaviour is a template
// over Beast's tcp_stream and ours, so it proves Beast's behaviour before judging ours. What
// only ours promises (no wheel work per operation) is checked on ours alone, from the wheel's
// statistics. Beast's own test of basic_stream runs too, adapted (ctest beast_basic_stream).

#include <asio_wheel/beast/tcp_stream.hpp>
#include <asio_wheel/statistics.hpp>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/stream_traits.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/websocket.hpp>
#if defined(ASIO_WHEEL_TEST_OPENSSL)
#include <boost/beast/ssl/ssl_stream.hpp>
#endif

#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace net = boost::asio;
namespace beast = boost::beast;
namespace websocket = boost::beast::websocket;
using net::ip::tcp;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
using error_code = boost::system::error_code;

namespace {

// The one-line swap, checked at compile time: the same lowest layer inside Beast's wrappers.
static_assert(
    std::is_same_v<beast::lowest_layer_type<asio_wheel::tcp_stream>, asio_wheel::tcp_stream>);
static_assert(std::is_same_v<beast::lowest_layer_type<websocket::stream<asio_wheel::tcp_stream>>,
                             asio_wheel::tcp_stream>);
static_assert(beast::is_async_stream<asio_wheel::tcp_stream>::value);
static_assert(beast::is_sync_stream<asio_wheel::tcp_stream>::value);
#if defined(ASIO_WHEEL_TEST_OPENSSL)
static_assert(std::is_same_v<beast::lowest_layer_type<beast::ssl_stream<asio_wheel::tcp_stream>>,
                             asio_wheel::tcp_stream>);
static_assert(std::is_constructible_v<beast::ssl_stream<asio_wheel::tcp_stream>, net::io_context&,
                                      net::ssl::context&>);
#endif

// A stream connected over loopback to a plain socket.
template <class Stream>
struct connected {
  net::io_context& ioc;
  tcp::acceptor acceptor{ioc, tcp::endpoint(net::ip::address_v4::loopback(), 0)};
  Stream stream{ioc};
  tcp::socket peer{ioc};

  explicit connected(net::io_context& io) : ioc(io) {
    stream.socket().connect(acceptor.local_endpoint());
    acceptor.accept(peer);
  }
};

double seconds_since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

// `rounds` request cycles as a Beast server does them, on c.stream: expires_after(30s);
// read one byte; expires_after(30s); write it back; the peer sends and reads each byte.
// `on_last` runs in the handler of the last write, before it returns.
template <class Stream>
struct ping_pong {
  connected<Stream>& c;
  int rounds;
  std::function<void()> on_last;
  int served = 0;
  error_code failure;
  std::array<char, 1> in{};
  std::array<char, 1> peer_in{};
  char ping = 'p';

  ping_pong(
      connected<Stream>& conn, int n, std::function<void()> last = [] {})
      : c(conn), rounds(n), on_last(std::move(last)) {}

  void start() {
    serve();
    client(rounds);
  }

  void serve() {
    c.stream.expires_after(30s);
    c.stream.async_read_some(net::buffer(in), [this](error_code ec, std::size_t) {
      if (ec) {
        failure = ec;
        return;
      }
      c.stream.expires_after(30s);
      c.stream.async_write_some(net::buffer(in), [this](error_code wec, std::size_t) {
        if (wec) {
          failure = wec;
          return;
        }
        if (++served < rounds)
          serve();
        else
          on_last();
      });
    });
  }

  void client(int left) {
    if (left == 0)
      return;
    net::async_write(c.peer, net::buffer(&ping, 1), [this, left](error_code ec, std::size_t) {
      if (ec)
        return;
      net::async_read(c.peer, net::buffer(peer_in), [this, left](error_code rec, std::size_t) {
        if (!rec)
          client(left - 1);
      });
    });
  }
};
} // namespace

TEST_CASE_TEMPLATE("a read whose peer is silent times out: error::timeout, socket closed", Stream,
                   beast::tcp_stream, asio_wheel::tcp_stream) {
  net::io_context ioc;
  connected<Stream> c(ioc);
  std::array<char, 16> buf{};
  error_code result;
  bool called = false;
  const auto start = clock_type::now();
  c.stream.expires_after(50ms);
  c.stream.async_read_some(net::buffer(buf), [&](error_code ec, std::size_t) {
    called = true;
    result = ec;
  });
  ioc.run();
  CHECK(called);
  CHECK(result == beast::error::timeout);
  CHECK_FALSE(c.stream.socket().is_open());
  CHECK(seconds_since(start) >= 0.050);
  CHECK(seconds_since(start) < 5.0);
}

TEST_CASE_TEMPLATE("an expiry passed while idle times the next operation out at once", Stream,
                   beast::tcp_stream, asio_wheel::tcp_stream) {
  net::io_context ioc;
  connected<Stream> c(ioc);
  std::array<char, 16> buf{};
  error_code result;
  c.stream.expires_at(clock_type::now() - 1s);
  const auto start = clock_type::now();
  c.stream.async_read_some(net::buffer(buf), [&](error_code ec, std::size_t) { result = ec; });
  ioc.run();
  CHECK(result == beast::error::timeout);
  CHECK(seconds_since(start) < 5.0); // at once, not at a far deadline: a loaded machine stalls
}

// Request/response with expires_after(30s) before every read and write: nothing times out,
// and once the last operation is done, run() returns (the wheel's wait is not left behind).
TEST_CASE_TEMPLATE("expires_after before every operation: no timeout, run() returns when done",
                   Stream, beast::tcp_stream, asio_wheel::tcp_stream) {
  net::io_context ioc;
  connected<Stream> c(ioc);
  ping_pong<Stream> pp(c, 300);
  pp.start();
  const auto start = clock_type::now();
  ioc.run();
  CHECK_FALSE(pp.failure);
  CHECK(pp.served == 300);
  CHECK(c.stream.socket().is_open());
  CHECK(seconds_since(start) < 10.0); // not the 30 s of a wait left armed
}

// The deadline of each read is 300 ms after it starts; the peer sends every 100 ms for a
// second. Ours arms its wait for the first deadline and must wait again (not time out) when
// that passes, as the reads since have later deadlines.
TEST_CASE_TEMPLATE("a stream busy past its first deadline is not timed out", Stream,
                   beast::tcp_stream, asio_wheel::tcp_stream) {
  // Premise: the peer's sends came less than a deadline apart. A machine that stalls this
  // process for a deadline (a loaded CI runner under a sanitizer) times a read out rightly,
  // with either stream; the run is then tried again.
  constexpr int attempts = 5;
  for (int attempt = 1;; ++attempt) {
    net::io_context ioc;
    connected<Stream> c(ioc);
    constexpr int sends = 10;
    constexpr auto deadline = 300ms;
    int received = 0;
    error_code failure;
    std::array<char, 1> in{};
    const char byte = 'b';
    net::steady_timer pace(ioc);
    auto last_send = clock_type::now();
    clock_type::duration longest_gap{};

    std::function<void()> read = [&] {
      c.stream.expires_after(deadline);
      c.stream.async_read_some(net::buffer(in), [&](error_code ec, std::size_t) {
        if (ec) {
          failure = ec;
          return;
        }
        if (++received < sends)
          read();
      });
    };
    std::function<void(int)> send = [&](int left) {
      if (left == 0)
        return;
      pace.expires_after(100ms);
      pace.async_wait([&, left](error_code) {
        const auto now = clock_type::now();
        longest_gap = std::max(longest_gap, now - last_send);
        last_send = now;
        net::write(c.peer, net::buffer(&byte, 1));
        send(left - 1);
      });
    };
    read();
    send(sends);
    ioc.run();
    if (longest_gap >= deadline - 50ms && attempt < attempts) {
      MESSAGE("attempt " << attempt << ": two sends came "
                         << std::chrono::duration<double>(longest_gap).count()
                         << " s apart (stalled); again");
      continue;
    }
    CHECK_FALSE(failure);
    CHECK(received == sends);
    break;
  }
}

// A read pending with a long deadline; then a write with a short one that cannot complete
// (the peer reads nothing and the buffers fill). The write times out at its own deadline; the
// read, its socket closed, completes with operation_aborted. Ours must move its wait earlier.
TEST_CASE_TEMPLATE("a write with a shorter deadline than a pending read times out first", Stream,
                   beast::tcp_stream, asio_wheel::tcp_stream) {
  net::io_context ioc;
  connected<Stream> c(ioc);
  std::array<char, 16> in{};
  std::vector<char> big(64 << 20, 'x');
  error_code read_result, write_result;
  c.stream.expires_after(20s);
  c.stream.async_read_some(net::buffer(in), [&](error_code ec, std::size_t) { read_result = ec; });
  c.stream.expires_after(100ms); // the write direction only: a read is pending
  const auto start = clock_type::now();
  net::async_write(c.stream, net::buffer(big),
                   [&](error_code ec, std::size_t) { write_result = ec; });
  ioc.run();
  CHECK(write_result == beast::error::timeout);
  CHECK(read_result == net::error::operation_aborted);
  CHECK(seconds_since(start) < 10.0);
}

#if !defined(BOOST_NO_EXCEPTIONS)
// The handler of a timed read throws out of run(). Beast's stream cancelled its timer before
// calling it, so once restarted, run() has nothing left to wait for; nor may ours (whose wait
// was released after the handler returned: never, when it threw).
TEST_CASE_TEMPLATE("a read handler that throws leaves no wait behind: run() then returns", Stream,
                   beast::tcp_stream, asio_wheel::tcp_stream) {
  net::io_context ioc;
  connected<Stream> c(ioc);
  std::array<char, 1> in{};
  const char byte = 'b';
  c.stream.expires_after(3s);
  c.stream.async_read_some(net::buffer(in), [](error_code ec, std::size_t) {
    if (!ec)
      throw std::runtime_error("from the handler");
  });
  net::write(c.peer, net::buffer(&byte, 1));
  CHECK_THROWS_AS(ioc.run(), std::runtime_error);
  ioc.restart();
  const auto start = clock_type::now();
  ioc.run();
  CHECK(seconds_since(start) < 1.0); // not the 3 s of the read's deadline
  CHECK(c.stream.socket().is_open());
}

// The use_future pattern: the context runs on its own thread, and this one starts each timed
// read as soon as the previous one's handler has signalled, while that handler is still
// returning. Beast's stream touches nothing once it has called the handler; nor may ours
// (ThreadSanitizer: the release of the wheel's wait, after the handler, raced with the next
// read's arm()). Each read must still be timed: the last one, its peer silent, times out.
TEST_CASE_TEMPLATE("the next operation started from another thread as the handler signals", Stream,
                   beast::tcp_stream, asio_wheel::tcp_stream) {
  net::io_context ioc;
  connected<Stream> c(ioc);
  auto work = net::make_work_guard(ioc);
  std::thread runner([&] { ioc.run(); });
  std::array<char, 1> in{};
  const char byte = 'b';
  constexpr int reads = 200;
  int received = 0;
  for (int i = 0; i < reads; ++i) {
    c.stream.expires_after(30s);
    std::future<std::size_t> n = c.stream.async_read_some(net::buffer(in), net::use_future);
    net::write(c.peer, net::buffer(&byte, 1));
    if (n.get() == 1)
      ++received;
  }
  c.stream.expires_after(100ms);
  std::future<std::size_t> last = c.stream.async_read_some(net::buffer(in), net::use_future);
  bool timed_out = false;
  try {
    last.get();
  } catch (const boost::system::system_error& e) {
    timed_out = e.code() == beast::error::timeout;
  }
  work.reset();
  const auto start = clock_type::now();
  runner.join();
  CHECK(received == reads);
  CHECK(timed_out);
  CHECK(seconds_since(start) < 5.0); // nothing left armed for the reads' 30 s
}
#endif

TEST_CASE_TEMPLATE("destroying the stream aborts its operations; nothing is left pending", Stream,
                   beast::tcp_stream, asio_wheel::tcp_stream) {
  net::io_context ioc;
  error_code result;
  bool called = false;
  {
    connected<Stream> c(ioc);
    std::array<char, 16> in{};
    c.stream.expires_after(30s);
    c.stream.async_read_some(net::buffer(in), [&](error_code ec, std::size_t) {
      called = true;
      result = ec;
    });
    ioc.poll();
  }
  const auto start = clock_type::now();
  ioc.run();
  CHECK(called);
  CHECK(result == net::error::operation_aborted);
  CHECK(seconds_since(start) < 5.0);
}

TEST_CASE_TEMPLATE("websocket::stream over it: handshake, echo, close (teardown)", Stream,
                   beast::tcp_stream, asio_wheel::tcp_stream) {
  net::io_context ioc;
  tcp::acceptor acceptor(ioc, tcp::endpoint(net::ip::address_v4::loopback(), 0));
  websocket::stream<Stream> server(ioc);
  websocket::stream<Stream> client(ioc);
  beast::flat_buffer server_buf, client_buf;
  std::string echoed;
  error_code close_result = net::error::fault;
  error_code server_end;

  server.set_option(websocket::stream_base::timeout::suggested(beast::role_type::server));
  acceptor.async_accept(beast::get_lowest_layer(server).socket(), [&](error_code ec) {
    REQUIRE_FALSE(ec);
    server.async_accept([&](error_code aec) {
      REQUIRE_FALSE(aec);
      server.async_read(server_buf, [&](error_code rec, std::size_t) {
        REQUIRE_FALSE(rec);
        server.text(true);
        server.async_write(server_buf.data(), [&](error_code wec, std::size_t) {
          REQUIRE_FALSE(wec);
          server.async_read(server_buf, [&](error_code end, std::size_t) { server_end = end; });
        });
      });
    });
  });
  beast::get_lowest_layer(client).expires_after(10s);
  beast::get_lowest_layer(client).async_connect(acceptor.local_endpoint(), [&](error_code ec) {
    REQUIRE_FALSE(ec);
    beast::get_lowest_layer(client).expires_never();
    client.async_handshake("localhost", "/", [&](error_code hec) {
      REQUIRE_FALSE(hec);
      client.async_write(net::buffer(std::string("hello")), [&](error_code wec, std::size_t) {
        REQUIRE_FALSE(wec);
        client.async_read(client_buf, [&](error_code rec, std::size_t) {
          REQUIRE_FALSE(rec);
          echoed = beast::buffers_to_string(client_buf.data());
          client.async_close(websocket::close_code::normal,
                             [&](error_code cec) { close_result = cec; });
        });
      });
    });
  });
  const auto start = clock_type::now();
  ioc.run();
  CHECK(echoed == "hello");
  CHECK_FALSE(close_result);
  CHECK(server_end == websocket::error::closed);
  CHECK(seconds_since(start) < 10.0);
}

// What only ours promises: while a timed read is pending, writes with expires_after before
// each start no wheel wait and abort none (the read's wait times them all): the one wait is
// released when the read completes, leaving none.
TEST_CASE("asio_wheel::tcp_stream: writes while a timed read is pending cost no wheel wait each") {
  net::io_context ioc;
  connected<asio_wheel::tcp_stream> c(ioc);
  std::array<char, 1> in{};
  const char byte = 'w';
  error_code read_result = net::error::fault;
  error_code failure;
  int written = 0;
  asio_wheel::wheel_statistics during{};
  c.stream.expires_after(30s);
  c.stream.async_read_some(net::buffer(in), [&](error_code ec, std::size_t) { read_result = ec; });
  std::function<void()> write = [&] {
    c.stream.expires_after(30s); // the write direction's: a read is pending
    c.stream.async_write_some(net::buffer(&byte, 1), [&](error_code ec, std::size_t) {
      if (ec) {
        failure = ec;
        return;
      }
      if (++written < 500) {
        write();
        return;
      }
      during = asio_wheel::get_statistics(ioc);
      net::write(c.peer, net::buffer(&byte, 1)); // the read completes: the stream is idle
    });
  };
  write();
  ioc.run();
  REQUIRE_FALSE(failure);
  REQUIRE(written == 500);
  CHECK_FALSE(read_result);
  CHECK(during.waits_started == 1);
  CHECK(during.waits_aborted == 0);
  const asio_wheel::wheel_statistics after = asio_wheel::get_statistics(ioc);
  CHECK(after.waits_started == 1);
  CHECK(after.waits_aborted == 1);
}

// Strictly alternating operations: each releases the wait before its handler (as Beast's
// stream cancels its timer), so none fires and none is left when run() returns.
TEST_CASE("asio_wheel::tcp_stream: request/response cycles leave no wheel wait behind") {
  net::io_context ioc;
  connected<asio_wheel::tcp_stream> c(ioc);
  ping_pong<asio_wheel::tcp_stream> pp(c, 500);
  pp.start();
  ioc.run();
  REQUIRE_FALSE(pp.failure);
  REQUIRE(pp.served == 500);
  const asio_wheel::wheel_statistics after = asio_wheel::get_statistics(ioc);
  CHECK(after.waits_started == 1000);
  CHECK(after.waits_aborted == 1000);
  CHECK(after.waits_succeeded == 0);
  CHECK(after.waits_pending() == 0);
}
