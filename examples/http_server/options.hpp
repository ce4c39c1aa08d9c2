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
  clock_type::duration idle_timeout = 5s;
  clock_type::duration request_timeout = 10s;
  clock_type::duration run_for = clock_type::duration::zero(); // zero: until a signal
};

inline long long to_ms(clock_type::duration d) {
  return static_cast<long long>(std::chrono::duration_cast<ms>(d).count());
}

inline double to_ms_double(clock_type::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

} // namespace http_example

#endif // ASIO_WHEEL_EXAMPLE_HTTP_OPTIONS_HPP
