//
// tests/toolchain/user_throw_exception.hpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// What a program built without exceptions must supply, as Asio requires: the definition of
// asio::detail::throw_exception (standalone Asio, with ASIO_NO_EXCEPTIONS) or of
// boost::throw_exception (Boost.Asio, with BOOST_NO_EXCEPTIONS). It hands the error to
// user_error_hook and aborts if the hook returns. Include it in one translation unit; with
// exceptions on it defines nothing.

#ifndef ASIO_WHEEL_TESTS_USER_THROW_EXCEPTION_HPP
#define ASIO_WHEEL_TESTS_USER_THROW_EXCEPTION_HPP

#include <cstdio>
#include <cstdlib>
#include <exception>

// Called with every error the program reports; by default prints it (and the caller aborts).
inline void (*user_error_hook)(const std::exception&) = [](const std::exception& e) {
  std::fprintf(stderr, "unexpected error: %s\n", e.what());
};

#if defined(ASIO_WHEEL_USE_BOOST_ASIO) && defined(BOOST_NO_EXCEPTIONS)
#include <boost/assert/source_location.hpp>
namespace boost {
void throw_exception(const std::exception& e) {
  user_error_hook(e);
  std::abort();
}
void throw_exception(const std::exception& e, const boost::source_location&) {
  user_error_hook(e);
  std::abort();
}
} // namespace boost
#elif !defined(ASIO_WHEEL_USE_BOOST_ASIO) && defined(ASIO_NO_EXCEPTIONS)
#include <asio/detail/throw_exception.hpp>
#if !defined(ASIO_SOURCE_LOCATION_PARAM) // Asio before 1.24
#define ASIO_SOURCE_LOCATION_PARAM
#endif
namespace asio::detail {
template <typename Exception>
void throw_exception(const Exception& e ASIO_SOURCE_LOCATION_PARAM) {
  user_error_hook(e);
  std::abort();
}
} // namespace asio::detail
#endif

#endif // ASIO_WHEEL_TESTS_USER_THROW_EXCEPTION_HPP
