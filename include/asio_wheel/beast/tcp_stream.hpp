//
// beast/tcp_stream.hpp
// ~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_BEAST_TCP_STREAM_HPP
#define ASIO_WHEEL_BEAST_TCP_STREAM_HPP

#include <asio_wheel/beast/basic_stream.hpp>

#include <boost/asio/ip/tcp.hpp>

namespace asio_wheel {

/// A TCP/IP stream socket with timeouts in the context's timing wheel: the drop-in for
/// <tt>boost::beast::tcp_stream</tt>.
using tcp_stream = basic_stream<::boost::asio::ip::tcp>;

} // namespace asio_wheel

#endif // ASIO_WHEEL_BEAST_TCP_STREAM_HPP
