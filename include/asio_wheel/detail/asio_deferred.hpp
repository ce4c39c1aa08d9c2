//
// detail/asio_deferred.hpp
// ~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_DETAIL_ASIO_DEFERRED_HPP
#define ASIO_WHEEL_DETAIL_ASIO_DEFERRED_HPP

// Asio's deferred, of the flavour chosen in detail/config.hpp, apart from asio_forward.hpp:
// only cancel_after.hpp needs it, and a translation unit that includes a timer does not
// parse it (issue 37, docs/build_cost.md).

#include <asio_wheel/detail/asio_forward.hpp>

#if defined(ASIO_WHEEL_USE_BOOST_ASIO)
#if ASIO_WHEEL_ASIO_HAS_DEFERRED
#include <boost/asio/deferred.hpp>
#else
#include <boost/asio/experimental/deferred.hpp>
#endif
#else
#if ASIO_WHEEL_ASIO_HAS_DEFERRED
#include <asio/deferred.hpp>
#else
#include <asio/experimental/deferred.hpp>
#endif
#endif

namespace asio_wheel::detail {

// deferred's token type: asio::deferred_t from Asio 1.24, asio::experimental's before (see
// config.hpp). The completion token an adapter used alone stands for where the operation's
// executor names no default (cancel_after.hpp).
#if ASIO_WHEEL_ASIO_HAS_DEFERRED
using deferred_t = asio::deferred_t;
#else
using deferred_t = asio::experimental::deferred_t;
#endif

} // namespace asio_wheel::detail

#endif // ASIO_WHEEL_DETAIL_ASIO_DEFERRED_HPP
