//
// examples/http_server/pressure.hpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// A pressure source, after Envoy's overload manager: every pressure_period (100 ms) it
// reads the open connection count and the resident memory (/proc/self/statm), and sets the
// io_context's asio_wheel::timeout_scale factor, which every timeout range of the server
// follows:
//
//   * a limit reached (connections >= --pressure-connections, or RSS >= --pressure-rss):
//     the factor goes to 0 at once, every timeout to its minimum, so that the connections
//     that hold descriptors and memory while doing nothing go first;
//   * both below 80 % of their limits (hysteresis: no flapping at the limit): the factor
//     comes back up by 0.25 per check, to 1 after 400 ms;
//   * in between: it stays where it is.
//
// With --timer wheel, the idle timeouts are asio_wheel::idle_timer ranges: a lower factor
// closes the connections already idle past their new timeout in the next turn, whatever
// their number. The request deadline is read at the factor in force by every read and write
// (each bounded by cancel_after): a lower factor closes a slow request at its next
// operation, and an operation cut off at a deadline that a higher factor has since moved
// later goes on. With --timer steady, the server arms each
// asio::steady_timer for the timeout at the factor in force when it arms it: connections
// accepted (or requests started) under pressure get the short timeouts, but a timer already
// armed keeps its deadline; moving them would mean visiting every connection. The monitor
// itself runs on an asio_wheel::wheel_timer (wheel) or an asio::steady_timer (steady).

#ifndef ASIO_WHEEL_EXAMPLE_HTTP_PRESSURE_HPP
#define ASIO_WHEEL_EXAMPLE_HTTP_PRESSURE_HPP

#include "options.hpp"
#include "stats.hpp"

#include <asio_wheel/wheel_timer.hpp>

#include <asio/any_io_executor.hpp>
#include <asio/steady_timer.hpp>

#include <cstdint>
#include <optional>

namespace http_example {

class pressure_monitor {
public:
  // Runs on `ex` (the acceptor's strand), on a timer of kind `kind`: start() and stop()
  // must be called there too.
  pressure_monitor(const asio::any_io_executor& ex, timer_kind kind, server_state& st);

  // Starts the periodic check, if a limit is set.
  void start();
  // Stops it (the context can then run out of work).
  void stop();

  // The resident memory of this process, in bytes (0 if /proc is not readable).
  static std::uint64_t resident_bytes();

private:
  void arm();
  void check();

  server_state& st_;
  std::optional<asio_wheel::wheel_timer> wheel_;
  std::optional<asio::steady_timer> steady_;
  bool stopped_ = false;
};

} // namespace http_example

#endif // ASIO_WHEEL_EXAMPLE_HTTP_PRESSURE_HPP
