//
// detail/asio_forward.hpp
// ~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_DETAIL_ASIO_FORWARD_HPP
#define ASIO_WHEEL_DETAIL_ASIO_FORWARD_HPP

// The Asio headers the library uses, from the flavour chosen in detail/config.hpp, and the
// names that let one source serve both flavours: inside namespace asio_wheel, `asio` is
// the chosen Asio's namespace, and error_code / system_error are its error types (Boost.Asio
// has no boost::asio::error_code: it uses boost::system's). Library code therefore writes
// asio::... for Asio's names and error_code for the error type, and never includes an Asio
// header itself. Two that few headers need are apart, so that a translation unit that
// includes a timer does not parse them: asio_deferred.hpp (cancel_after.hpp) and
// asio_strand.hpp (the probing of an any_io_executor, detail/impl/handler_executor.ipp).

#include <asio_wheel/detail/config.hpp>

#if defined(ASIO_WHEEL_USE_BOOST_ASIO)
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_allocator.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/associator.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/basic_waitable_timer.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/execution.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/is_executor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/query.hpp>
#include <boost/asio/system_context.hpp>
#include <boost/asio/system_executor.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/wait_traits.hpp>
#include <boost/system/error_code.hpp>
#include <boost/system/system_error.hpp>
#else
#include <asio/any_io_executor.hpp>
#include <asio/associated_allocator.hpp>
#include <asio/associated_cancellation_slot.hpp>
#include <asio/associated_executor.hpp>
#include <asio/associator.hpp>
#include <asio/async_result.hpp>
#include <asio/basic_waitable_timer.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/cancellation_type.hpp>
#include <asio/dispatch.hpp>
#include <asio/error.hpp>
#include <asio/error_code.hpp>
#include <asio/execution.hpp>
#include <asio/execution_context.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/is_executor.hpp>
#include <asio/post.hpp>
#include <asio/prefer.hpp>
#include <asio/query.hpp>
#include <asio/system_context.hpp>
#include <asio/system_error.hpp>
#include <asio/system_executor.hpp>
#include <asio/thread_pool.hpp>
#include <asio/wait_traits.hpp>
#endif

#if defined(ASIO_WHEEL_USE_BOOST_ASIO) && defined(BOOST_ASIO_NO_TYPEID)
#define ASIO_WHEEL_ASIO_NO_TYPEID 1
#elif !defined(ASIO_WHEEL_USE_BOOST_ASIO) && defined(ASIO_NO_TYPEID)
#define ASIO_WHEEL_ASIO_NO_TYPEID 1
#elif !defined(__cpp_rtti) && !defined(__GXX_RTTI) && !defined(_CPPRTTI)
#define ASIO_WHEEL_ASIO_NO_TYPEID 1
#endif

// ASIO_USE_TS_EXECUTOR_AS_DEFAULT: asio::any_io_executor is the Networking TS's
// asio::executor, which has no properties to query and may hold a TS executor, such as the
// legacy io_context::strand (there unless ASIO_NO_EXTENSIONS or ASIO_NO_TS_EXECUTORS).
#if defined(ASIO_WHEEL_USE_BOOST_ASIO)
#if defined(BOOST_ASIO_USE_TS_EXECUTOR_AS_DEFAULT)
#define ASIO_WHEEL_ASIO_TS_EXECUTOR_AS_DEFAULT 1
#endif
#if !defined(BOOST_ASIO_NO_EXTENSIONS) && !defined(BOOST_ASIO_NO_TS_EXECUTORS)
#define ASIO_WHEEL_ASIO_HAS_IO_CONTEXT_STRAND 1
#endif
#else
#if defined(ASIO_USE_TS_EXECUTOR_AS_DEFAULT)
#define ASIO_WHEEL_ASIO_TS_EXECUTOR_AS_DEFAULT 1
#endif
#if !defined(ASIO_NO_EXTENSIONS) && !defined(ASIO_NO_TS_EXECUTORS)
#define ASIO_WHEEL_ASIO_HAS_IO_CONTEXT_STRAND 1
#endif
#endif

// Without RTTI, the library cannot tell what an any_io_executor holds on Asio 1.22 to 1.25
// (see target_if): it would not find the io_context behind a timer's default executor, and
// would complete its waits from a thread of its own (virtual_time, for one, would not work).
#if defined(ASIO_WHEEL_ASIO_NO_TYPEID) && !ASIO_WHEEL_ASIO_TARGET_CHECKS_TYPE
#error "asio_wheel without RTTI (ASIO_NO_TYPEID) needs Asio 1.26 or later (Boost 1.81 or later)"
#endif

#include <type_traits>
#if !defined(ASIO_WHEEL_ASIO_NO_TYPEID)
#include <typeinfo>
#endif

namespace asio_wheel {

#if defined(ASIO_WHEEL_USE_BOOST_ASIO)
namespace asio = ::boost::asio;
/// The error code type of the Asio in use: boost::system::error_code with Boost.Asio.
using error_code = ::boost::system::error_code;
/// The exception type of the Asio in use: boost::system::system_error with Boost.Asio.
using system_error = ::boost::system::system_error;
#else
namespace asio = ::asio;
/// The error code type of the Asio in use: asio::error_code (std::error_code).
using error_code = ::asio::error_code;
/// The exception type of the Asio in use: asio::system_error (std::system_error).
using system_error = ::asio::system_error;
#endif

namespace detail {

// What an I/O object's get_executor() returns with this Asio (see config.hpp).
template <typename Executor>
using get_executor_result_t =
    std::conditional_t<ASIO_WHEEL_ASIO_GET_EXECUTOR_BY_REF, const Executor&, Executor>;

// The target of a type-erased executor if it is a T, else nullptr. From Asio 1.26 on
// any_executor::target<T>() checks the type itself, without RTTI; before, it casts without
// checking, so the type is compared here with typeid.
template <typename T, typename AnyExecutor>
const T* target_if(const AnyExecutor& ex) noexcept {
#if ASIO_WHEEL_ASIO_TARGET_CHECKS_TYPE
  return ex.template target<T>();
#else
  return ex.target_type() == typeid(T) ? ex.template target<T>() : nullptr;
#endif
}

} // namespace detail
} // namespace asio_wheel

#endif // ASIO_WHEEL_DETAIL_ASIO_FORWARD_HPP
