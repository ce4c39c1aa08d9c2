// The completion tokens whose name moved between Asio releases, under one name for the
// tests: asio_wheel::test::as_tuple and asio_wheel::test::deferred. They are asio::as_tuple
// and asio::deferred from Asio 1.24; before, asio::experimental's (which 1.30 deprecates and
// 1.33 removes). ASIO_WHEEL_ASIO_HAS_DEFERRED (asio_wheel/detail/config.hpp) decides.

#ifndef ASIO_WHEEL_TEST_ASIO_TOKENS_HPP
#define ASIO_WHEEL_TEST_ASIO_TOKENS_HPP

#include <asio_wheel/detail/config.hpp>

#if ASIO_WHEEL_ASIO_HAS_DEFERRED
#include <asio/as_tuple.hpp>
#include <asio/deferred.hpp>
#else
#include <asio/experimental/as_tuple.hpp>
#include <asio/experimental/deferred.hpp>
#endif

namespace asio_wheel::test {
#if ASIO_WHEEL_ASIO_HAS_DEFERRED
using ::asio::as_tuple;
using ::asio::deferred;
#else
using ::asio::experimental::as_tuple;
using ::asio::experimental::deferred;
#endif
} // namespace asio_wheel::test

#endif // ASIO_WHEEL_TEST_ASIO_TOKENS_HPP
