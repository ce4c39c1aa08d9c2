// The examples' as_tuple: asio::as_tuple from Asio 1.24, asio::experimental::as_tuple before
// (deprecated by 1.30, removed by 1.33). With one Asio you would just write the one it has;
// these examples build with every Asio asio_wheel supports, so the choice is made once, from
// ASIO_WHEEL_ASIO_HAS_DEFERRED (asio_wheel/detail/config.hpp).

#ifndef ASIO_WHEEL_EXAMPLES_ASIO_TOKENS_HPP
#define ASIO_WHEEL_EXAMPLES_ASIO_TOKENS_HPP

#include <asio_wheel/detail/config.hpp>

#if ASIO_WHEEL_ASIO_HAS_DEFERRED
#include <asio/as_tuple.hpp>
#else
#include <asio/experimental/as_tuple.hpp>
#endif

namespace example_tokens {
#if ASIO_WHEEL_ASIO_HAS_DEFERRED
using ::asio::as_tuple;
#else
using ::asio::experimental::as_tuple;
#endif
} // namespace example_tokens

#endif // ASIO_WHEEL_EXAMPLES_ASIO_TOKENS_HPP
