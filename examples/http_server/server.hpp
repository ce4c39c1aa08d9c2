//
// examples/http_server/server.hpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// The server: an acceptor, the io_context and the threads that run it, and the counters; each
// accepted socket becomes a connection (connection.hpp) with the timers the options name.

#ifndef ASIO_WHEEL_EXAMPLE_HTTP_SERVER_HPP
#define ASIO_WHEEL_EXAMPLE_HTTP_SERVER_HPP

#include "options.hpp"
#include "stats.hpp"

#include <asio/any_io_executor.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace http_example {

// ---------------------------------------------------------------------------------------
// The server

class http_server {
public:
  explicit http_server(const server_options& opts);

  http_server(const http_server&) = delete;
  http_server& operator=(const http_server&) = delete;

  ~http_server();

  // Binds and listens; returns the port. Throws on failure.
  std::uint16_t listen();

  // Starts accepting, and the threads.
  void start();

  // Stops accepting. Once the last connection is gone and nothing else is pending, the
  // threads return. Thread-safe.
  void stop_accepting();

  // Stops everything now. Thread-safe.
  void stop_now() { ctx_.stop(); }

  // Waits up to `limit` for the threads to return by themselves; then stops the context.
  // Returns whether they returned by themselves.
  bool join(clock_type::duration limit);

  // Waits for the threads to return.
  void wait();

  asio::io_context& context() { return ctx_; }
  const server_stats& stats() const { return state_.stats; }
  const server_state& state() const { return state_; }

private:
  asio::any_io_executor connection_executor();

  awaitable<void> accept_loop();

  void start_connection(tcp::socket sock);

  template <typename Connection>
  static void spawn(std::shared_ptr<Connection> c, const asio::any_io_executor& ex);

  void join_threads();

  server_state state_;
  asio::io_context ctx_;
  tcp::acceptor acceptor_;
  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable done_;
  unsigned running_ = 0;
};

} // namespace http_example

#endif // ASIO_WHEEL_EXAMPLE_HTTP_SERVER_HPP
