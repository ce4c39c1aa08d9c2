//
// examples/http_server/options.hpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// The server's options (which timers, which timeouts, where to listen), and the names every
// file of the example uses.

#ifndef ASIO_WHEEL_EXAMPLE_HTTP_OPTIONS_HPP
#define ASIO_WHEEL_EXAMPLE_HTTP_OPTIONS_HPP

// A standard header before Asio's in every translation unit of the program (each reaches Asio
// through this header, or after standard headers of its own): Asio 1.22's detail/config.hpp tests
// the standard library's feature macros without including a standard header first (later
// Asio includes <version> itself). A translation unit that includes Asio first would then
// recycle handler memory with operator new/delete, one that does not with aligned_alloc/free,
// and a block allocated in one and freed in the other is an alloc-dealloc mismatch.
#include <version>

#include <asio_wheel/timeout_scale.hpp>

#include <asio/ip/tcp.hpp>
#include <asio/use_awaitable.hpp>

#include "../asio_tokens.hpp"

#include <chrono>
#include <cstdint>
#include <string>

#ifndef ASIO_WHEEL_HTTP_USE_STEADY_TIMER
#define ASIO_WHEEL_HTTP_USE_STEADY_TIMER 0
#endif

namespace http_example {

using namespace std::chrono_literals;
using asio::awaitable;
using asio::use_awaitable;
using asio::ip::tcp;
using example_tokens::as_tuple;
using clock_type = std::chrono::steady_clock;
using ms = std::chrono::milliseconds;
// A timeout that may shrink under pressure: [min, max], at min + f * (max - min) for the
// factor f of the context's asio_wheel::timeout_scale (1 without pressure). A fixed timeout
// has min == max.
using timeout_range = asio_wheel::timeout_range<clock_type::duration>;

// ---------------------------------------------------------------------------------------
// Options

enum class timer_kind { wheel, steady };

constexpr timer_kind default_timer =
    ASIO_WHEEL_HTTP_USE_STEADY_TIMER ? timer_kind::steady : timer_kind::wheel;

inline const char* to_string(timer_kind k) {
  return k == timer_kind::wheel ? "wheel" : "steady";
}

struct server_options {
  std::string address = "127.0.0.1";
  std::uint16_t port = 8080;
  unsigned threads = 1;
  timer_kind timer = default_timer;
  timeout_range idle_timeout = 5s;
  timeout_range request_timeout = 10s;
  clock_type::duration run_for = clock_type::duration::zero(); // zero: until a signal
  // Pressure (pressure.hpp): the timeouts go to their minimum once the open connections, or
  // the resident memory, reach their limit; zero: no limit. Checked every pressure_period.
  std::uint64_t pressure_connections = 0;
  std::uint64_t pressure_rss_bytes = 0;
  clock_type::duration pressure_period = 100ms;
};

inline long long to_ms(clock_type::duration d) {
  return static_cast<long long>(std::chrono::duration_cast<ms>(d).count());
}

inline double to_ms_double(clock_type::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

} // namespace http_example

#endif // ASIO_WHEEL_EXAMPLE_HTTP_OPTIONS_HPP
