//
// examples/http_server/http_parser.hpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// HTTP/1.1 request heads: parse_head() reads the request line and the header fields into what
// the connection needs to answer (status, route, HEAD, keep-alive, body length).

#ifndef ASIO_WHEEL_EXAMPLE_HTTP_PARSER_HPP
#define ASIO_WHEEL_EXAMPLE_HTTP_PARSER_HPP

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace http_example {

// ---------------------------------------------------------------------------------------
// HTTP: requests

constexpr std::size_t max_head_bytes = 8192;
constexpr std::uint64_t max_body_bytes = 1 << 20;

enum class route { hello, big, stats, not_found };

struct request_info {
  int status = 200; // != 200: answer this error (the router decides 404/405)
  route target = route::hello;
  bool head = false;
  bool keep_alive = true;
  bool http10 = false;
  std::uint64_t content_length = 0;
};

// Parses a request head (request line and header lines, "\r\n\r\n" included). A request
// whose framing is broken (400, 413, 501) is not kept alive.
request_info parse_head(std::string_view head);

} // namespace http_example

#endif // ASIO_WHEEL_EXAMPLE_HTTP_PARSER_HPP
