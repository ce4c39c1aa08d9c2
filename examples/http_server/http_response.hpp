//
// examples/http_server/http_response.hpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// HTTP/1.1 responses: the canned ones (a fixed text or an error, by status, Connection
// header and HEAD), the pieces of a response head, the body of GET /big, and the date.

#ifndef ASIO_WHEEL_EXAMPLE_HTTP_RESPONSE_HPP
#define ASIO_WHEEL_EXAMPLE_HTTP_RESPONSE_HPP

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

namespace http_example {

// ---------------------------------------------------------------------------------------
// HTTP: responses

constexpr std::string_view hello_body = "Hello from asio-wheel\n";
// GET /big: 16 MiB, written in 16 KiB chunks (from one static chunk), for slow-read tests: more
// than the kernel buffers for a socket (tcp_wmem autotuning goes up to 4 MiB).
constexpr std::size_t big_chunk_bytes = 16384;
constexpr std::size_t big_chunks = 1024;
constexpr std::size_t big_body_bytes = big_chunk_bytes * big_chunks;

enum class conn_header { none, close, keep_alive };

// A canned response: prefix + date + suffix, where the prefix ends with "Date: " and the
// suffix holds the rest of the head and the body.
struct canned_response {
  std::string prefix;
  std::string suffix;
};

// "HTTP/1.1 <status> <reason>", the Server header and "Date: " (the date comes next).
std::string response_head_start(int status);

// After the date: Content-Type, Content-Length and the Connection header, if any.
std::string response_head_end(std::size_t content_length, conn_header conn,
                              const char* content_type = "text/plain; charset=utf-8");

// The response for `status` (200: the hello text), with that Connection header; HEAD: no
// body.
const canned_response& canned(int status, conn_header conn, bool head);

// One chunk of the GET /big body.
const std::array<char, big_chunk_bytes>& big_chunk();

// The IMF-fixdate of now, cached per thread for the current second.
std::string_view http_date();

} // namespace http_example

#endif // ASIO_WHEEL_EXAMPLE_HTTP_RESPONSE_HPP
