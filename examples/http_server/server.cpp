//
// examples/http_server/server.cpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#include "server.hpp"

#include "connection.hpp"

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/error.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <asio/strand.hpp>

#include <cstdio>
#include <exception>
#include <utility>

namespace http_example {

http_server::http_server(const server_options& opts)
    : ctx_(static_cast<int>(opts.threads)), acceptor_(asio::make_strand(ctx_)) {
  state_.opts = opts;
}

http_server::~http_server() {
  ctx_.stop();
  join_threads();
}

std::uint16_t http_server::listen() {
  const tcp::endpoint ep(asio::ip::make_address(state_.opts.address), state_.opts.port);
  acceptor_.open(ep.protocol());
  acceptor_.set_option(tcp::acceptor::reuse_address(true));
  acceptor_.bind(ep);
  acceptor_.listen(asio::socket_base::max_listen_connections);
  return acceptor_.local_endpoint().port();
}

void http_server::start() {
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

void http_server::stop_accepting() {
  asio::post(acceptor_.get_executor(), [this] {
    asio::error_code ignored;
    acceptor_.close(ignored);
  });
}

bool http_server::join(clock_type::duration limit) {
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

void http_server::wait() {
  {
    std::unique_lock lock(mutex_);
    done_.wait(lock, [this] { return running_ == 0; });
  }
  join_threads();
}

asio::any_io_executor http_server::connection_executor() {
  if (state_.opts.threads > 1)
    return asio::make_strand(ctx_); // a connection's handlers never run concurrently
  return ctx_.get_executor();
}

awaitable<void> http_server::accept_loop() {
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

void http_server::start_connection(tcp::socket sock) {
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
void http_server::spawn(std::shared_ptr<Connection> c, const asio::any_io_executor& ex) {
  asio::co_spawn(
      ex, [c = std::move(c)]() { return c->run(); }, asio::detached);
}

void http_server::join_threads() {
  for (auto& t : threads_)
    if (t.joinable())
      t.join();
  threads_.clear();
}

} // namespace http_example
