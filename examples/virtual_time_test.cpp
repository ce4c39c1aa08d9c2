//
// examples/virtual_time_test.cpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// How a user tests a server's 30-minute idle timeout without waiting 30 minutes.
//
// The server code takes its clock as a template parameter (production: steady_clock, the
// default). The test instantiates it on asio_wheel::virtual_clock and drives time with
// asio_wheel::virtual_time; the sockets are real (loopback), so real I/O is pumped by
// run_one_for() and time moves only by advance(): the rule of virtual_time.hpp for real I/O.
//
//   virtual_time_test [--smoke]   runs the test; exits 1 if the server closes early or late

#include <asio_wheel/idle_timer.hpp>
#include <asio_wheel/virtual_time.hpp>

#include <asio/buffer.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/read.hpp>
#include <asio/write.hpp>

#include <array>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>

using asio::ip::tcp;
using namespace std::chrono_literals;

// ----- The server: an echo session closed after `idle` without a byte from the client. -----
template <typename Clock = std::chrono::steady_clock>
class echo_session : public std::enable_shared_from_this<echo_session<Clock>> {
public:
  echo_session(tcp::socket socket, typename Clock::duration idle)
      : socket_(std::move(socket)), idle_(socket_.get_executor(), idle) {}

  void start() {
    auto self = this->shared_from_this();
    idle_.async_wait([self](const asio::error_code& ec) {
      if (!ec)
        self->socket_.close(); // idle for the whole timeout
    });
    read();
  }

private:
  void read() {
    auto self = this->shared_from_this();
    socket_.async_read_some(asio::buffer(buf_), [self](asio::error_code ec, std::size_t n) {
      if (ec) {
        self->idle_.cancel();
        return;
      }
      self->idle_.touch(); // activity: the idle timeout counts from now
      asio::async_write(self->socket_, asio::buffer(self->buf_, n),
                        [self](asio::error_code wec, std::size_t) {
                          if (!wec)
                            self->read();
                        });
    });
  }

  tcp::socket socket_;
  asio_wheel::basic_idle_timer<Clock> idle_;
  std::array<char, 256> buf_{};
};

// ----- The test. -----
int main() {
  using clock = asio_wheel::virtual_clock; // the one change from production
  asio::io_context io;
  asio_wheel::virtual_time vt(io);
  int failures = 0;
  auto expect = [&](bool ok, const char* what) {
    std::printf("%s: %s\n", ok ? "ok  " : "FAIL", what);
    failures += ok ? 0 : 1;
  };
  // Real I/O completes in real time: pump it (without moving virtual time) until `done`.
  auto pump_until = [&](const std::function<bool()>& done, int rounds = 500) {
    for (int i = 0; i < rounds && !done(); ++i) {
      io.restart();
      io.run_one_for(10ms);
    }
    return done();
  };

  tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
  tcp::socket client(io);
  bool accepted = false, connected = false;
  acceptor.async_accept([&](asio::error_code ec, tcp::socket s) {
    if (!ec)
      std::make_shared<echo_session<clock>>(std::move(s), 30min)->start();
    accepted = !ec;
  });
  client.async_connect(acceptor.local_endpoint(), [&](asio::error_code ec) { connected = !ec; });
  expect(pump_until([&] { return accepted && connected; }), "client connected");

  // One exchange: write a byte, wait (real time) for the echo.
  auto exchange = [&] {
    char c = 'x', back = 0;
    bool echoed = false;
    asio::write(client, asio::buffer(&c, 1));
    asio::async_read(client, asio::buffer(&back, 1),
                     [&](asio::error_code ec, std::size_t) { echoed = !ec && back == c; });
    return pump_until([&] { return echoed; });
  };
  // Whether the server has closed the connection: a read gets EOF.
  bool closed = false, reading = false;
  auto watch_close = [&] {
    if (reading)
      return;
    reading = true;
    static char sink;
    client.async_read_some(asio::buffer(&sink, 1), [&](asio::error_code ec, std::size_t) {
      reading = false;
      closed = ec == asio::error::eof || ec == asio::error::connection_reset;
    });
  };

  expect(exchange(), "echo");
  vt.advance(20min);
  expect(exchange(), "echo after 20 idle minutes (activity: the timeout restarts)");
  vt.advance(29min);
  watch_close();
  pump_until([&] { return closed; }, 20); // 200 ms for a wrongly early close to show
  expect(!closed, "still open after 29 idle minutes");
  vt.advance(1min);
  expect(pump_until([&] { return closed; }), "closed at 30 idle minutes");
  std::printf(
      "virtual time advanced: %lld min\n",
      static_cast<long long>(
          std::chrono::duration_cast<std::chrono::minutes>(vt.now().time_since_epoch()).count()));
  return failures == 0 ? 0 : 1;
}
