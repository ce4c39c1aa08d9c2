//
// mixed_standard/lock_cxx17.cpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// Compiled as C++17 (tests/CMakeLists.txt), linked with main.cpp compiled as C++20: the wheel's
// lock taken and released by code of both versions, as in a program whose library was built
// as C++17 and whose coroutines are C++20.

#include <asio_wheel/detail/futex_mutex.hpp>

#if __cplusplus > 201703L
#error "lock_cxx17.cpp must be compiled as C++17: the test is that the two versions interoperate"
#endif

void lock_cxx17(asio_wheel::detail::futex_mutex& m) {
  m.lock();
}
void unlock_cxx17(asio_wheel::detail::futex_mutex& m) {
  m.unlock();
}
