// The harness of the documentation's C++ fragments (tests/snippets/extract.py): what a
// fragment of README.md or docs/migrating.md may take as given. A `function` or `coroutine`
// fragment is the body of a function with io, sock and buf in scope; a `beast` one has
// socket, buffer and req (Boost.Asio, with ASIO_WHEEL_SNIPPET_BEAST); a `namespace` one is
// pasted at namespace scope. Each is compiled in a namespace of its own.

#ifndef ASIO_WHEEL_TESTS_SNIPPETS_HARNESS_HPP
#define ASIO_WHEEL_TESTS_SNIPPETS_HARNESS_HPP

#include <asio_wheel.hpp>

#if defined(ASIO_WHEEL_SNIPPET_BEAST)
#include <asio_wheel/beast/tcp_stream.hpp>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace asio = boost::asio;
namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

#define ASIO_WHEEL_SNIPPET_BEAST_PARAMS                                                            \
  [[maybe_unused]] tcp::socket socket, [[maybe_unused]] beast::flat_buffer &buffer,                \
      [[maybe_unused]] http::request<http::string_body>&req
#else
#include <asio.hpp>
#include <asio/experimental/awaitable_operators.hpp>

using asio::ip::tcp;
#endif

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <utility>

using namespace std::chrono_literals;

#define ASIO_WHEEL_SNIPPET_PARAMS                                                                  \
  [[maybe_unused]] asio::io_context &io, [[maybe_unused]] tcp::socket &sock,                       \
      [[maybe_unused]] asio::mutable_buffer buf

#endif // ASIO_WHEEL_TESTS_SNIPPETS_HARNESS_HPP
