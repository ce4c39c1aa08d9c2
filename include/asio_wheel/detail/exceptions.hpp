//
// detail/exceptions.hpp
// ~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_DETAIL_EXCEPTIONS_HPP
#define ASIO_WHEEL_DETAIL_EXCEPTIONS_HPP

// Exceptions the way Asio does them, so that the library builds with -fno-exceptions:
//
// - Every error the library reports is raised through throw_exception() below, which hands
//   it to the Asio in use: asio::detail::throw_exception (standalone) or
//   boost::throw_exception (Boost.Asio). With exceptions off (ASIO_NO_EXCEPTIONS, or
//   BOOST_NO_EXCEPTIONS for Boost.Asio, or a compiler without exceptions) the program
//   supplies that function, as Asio requires; the library never returns into the code that
//   raised the error: if the program's function returns, std::terminate() runs.
// - The library's try blocks, written ASIO_WHEEL_TRY / ASIO_WHEEL_CATCH(...) /
//   ASIO_WHEEL_CATCH_ALL / ASIO_WHEEL_RETHROW, only undo or record what a throwing call
//   left behind. Without exceptions nothing throws (a failed allocation ends the program),
//   so the try body runs alone and the catch blocks are compiled out.

#include <asio_wheel/detail/config.hpp>

#if defined(ASIO_WHEEL_USE_BOOST_ASIO)
#include <boost/asio/detail/throw_exception.hpp>
#if defined(BOOST_ASIO_NO_EXCEPTIONS) || defined(BOOST_NO_EXCEPTIONS)
#define ASIO_WHEEL_NO_EXCEPTIONS 1
#endif
#else
#include <asio/detail/throw_exception.hpp>
#if defined(ASIO_NO_EXCEPTIONS)
#define ASIO_WHEEL_NO_EXCEPTIONS 1
#endif
#endif
#if !defined(ASIO_WHEEL_NO_EXCEPTIONS) && !defined(__cpp_exceptions) && !defined(_CPPUNWIND)
#define ASIO_WHEEL_NO_EXCEPTIONS 1
#endif

#include <exception>
#include <new>

// Without exceptions a try block is `if (true)` and its one catch clause the `else`: a
// function whose try block returns and whose catch block rethrows (std::terminate, which
// does not return) then has no path that falls off its end, for -Wreturn-type as for the
// compiler. Hence one catch clause per try block.
#if defined(ASIO_WHEEL_NO_EXCEPTIONS)
#define ASIO_WHEEL_TRY if (true)
#define ASIO_WHEEL_CATCH(declaration) else
#define ASIO_WHEEL_CATCH_ALL else
#define ASIO_WHEEL_RETHROW std::terminate()
#else
#define ASIO_WHEEL_TRY try
#define ASIO_WHEEL_CATCH(declaration) catch (declaration)
#define ASIO_WHEEL_CATCH_ALL catch (...)
#define ASIO_WHEEL_RETHROW throw
#endif

namespace asio_wheel::detail {

// Called in a catch block: whether the exception being handled is std::bad_alloc. By a copy
// of it, not by rethrowing it (`throw;`) into a catch-all here, which would end a foreign
// exception such as glibc's forced unwind of a cancelled thread, whose catch block must
// rethrow it (no copy of that one: std::current_exception() gives none). Without exceptions
// no catch block runs (false).
#if defined(ASIO_WHEEL_NO_EXCEPTIONS)
inline bool handling_bad_alloc() noexcept {
  return false;
}
#else
inline bool handling_bad_alloc() noexcept {
  const std::exception_ptr handled = std::current_exception();
  if (!handled)
    return false;
  try {
    std::rethrow_exception(handled);
  } catch (const std::bad_alloc&) {
    return true;
  } catch (...) {
    return false;
  }
}
#endif

// Raises `e` through the Asio in use (see above); never returns.
template <typename Exception>
[[noreturn]] void throw_exception(const Exception& e) {
#if defined(ASIO_WHEEL_USE_BOOST_ASIO)
  ::boost::asio::detail::throw_exception(e);
#else
  ::asio::detail::throw_exception(e);
#endif
  std::terminate(); // only reached if the program's throw_exception returned
}

} // namespace asio_wheel::detail

#endif // ASIO_WHEEL_DETAIL_EXCEPTIONS_HPP
