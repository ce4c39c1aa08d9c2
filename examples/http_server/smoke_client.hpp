//
// examples/http_server/smoke_client.hpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// http_server --smoke: a built-in client that checks every outcome against a server of its
// own (see the header of main.cpp).

#ifndef ASIO_WHEEL_EXAMPLE_HTTP_SMOKE_CLIENT_HPP
#define ASIO_WHEEL_EXAMPLE_HTTP_SMOKE_CLIENT_HPP

namespace http_example::smoke {

// Runs the client against a fresh server for each timer kind, with 1 and 2 threads. Returns
// the exit status: 0 if every outcome was the expected one.
int main();

} // namespace http_example::smoke

#endif // ASIO_WHEEL_EXAMPLE_HTTP_SMOKE_CLIENT_HPP
