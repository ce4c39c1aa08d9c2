//
// detail/context_of.hpp
// ~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_DETAIL_CONTEXT_OF_HPP
#define ASIO_WHEEL_DETAIL_CONTEXT_OF_HPP

#include <asio_wheel/detail/asio_forward.hpp>

namespace asio_wheel::detail {

// The execution context behind an executor, of either kind that Asio's I/O objects accept:
// a standard executor by query (ASIO_NO_TS_EXECUTORS removes io_context::executor_type's
// context() member), a Networking TS executor, which has no properties to query, by its
// context() member. The TS kind is not only the legacy io_context::strand: with
// ASIO_USE_TS_EXECUTOR_AS_DEFAULT, asio::any_io_executor is asio::executor, the default
// executor of every timer. A reference to the most derived context the executor names
// (io_context& for io_context's executor), as the query gives.
template <typename Executor>
decltype(auto) context_of(const Executor& ex) {
  if constexpr (asio::can_query<const Executor&, asio::execution::context_t>::value)
    return asio::query(ex, asio::execution::context);
  else
    return ex.context();
}

} // namespace asio_wheel::detail

#endif // ASIO_WHEEL_DETAIL_CONTEXT_OF_HPP
