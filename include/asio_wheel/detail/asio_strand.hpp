//
// detail/asio_strand.hpp
// ~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_DETAIL_ASIO_STRAND_HPP
#define ASIO_WHEEL_DETAIL_ASIO_STRAND_HPP

// Asio's strand, of the flavour chosen in detail/config.hpp, apart from asio_forward.hpp:
// only the probing of an any_io_executor (detail/impl/handler_executor.ipp) names it, so
// that with ASIO_WHEEL_SEPARATE_COMPILATION a translation unit that includes a timer does
// not parse it, nor the legacy io_context::strand it brings (issue 37,
// docs/build_cost.md).

#include <asio_wheel/detail/asio_forward.hpp>

#if defined(ASIO_WHEEL_USE_BOOST_ASIO)
#include <boost/asio/strand.hpp>
#else
#include <asio/strand.hpp>
#endif

// The legacy io_context::strand, which an any_io_executor can hold only when it is the
// Networking TS's asio::executor (ASIO_USE_TS_EXECUTOR_AS_DEFAULT).
#if defined(ASIO_WHEEL_ASIO_TS_EXECUTOR_AS_DEFAULT) &&                                             \
    defined(ASIO_WHEEL_ASIO_HAS_IO_CONTEXT_STRAND)
#if defined(ASIO_WHEEL_USE_BOOST_ASIO)
#include <boost/asio/io_context_strand.hpp>
#else
#include <asio/io_context_strand.hpp>
#endif
#endif

#endif // ASIO_WHEEL_DETAIL_ASIO_STRAND_HPP
