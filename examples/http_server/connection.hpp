//
// examples/http_server/connection.hpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// One client connection, from accept to close: its requests are read, parsed and answered
// in order, under the two timeouts (idle, request deadline), on asio-wheel's timers or on
// asio::steady_timer (the template parameter), as the header of main.cpp describes.

#ifndef ASIO_WHEEL_EXAMPLE_HTTP_CONNECTION_HPP
#define ASIO_WHEEL_EXAMPLE_HTTP_CONNECTION_HPP

#include "http_parser.hpp"
#include "http_response.hpp"
#include "options.hpp"
#include "stats.hpp"

#include <asio_wheel/cancel_after.hpp>
#include <asio_wheel/idle_timer.hpp>

#include <asio/buffer.hpp>
#include <asio/error.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace http_example {

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

} // namespace http_example

#endif // ASIO_WHEEL_EXAMPLE_HTTP_CONNECTION_HPP
