//
// tests/windows/windows_h_first.cpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// A Windows user's translation unit that includes the whole of <windows.h> (no
// WIN32_LEAN_AND_MEAN) before anything else, as precompiled headers and older code bases do,
// and without NOMINMAX. windows.h then defines macros that break any header using the names:
// function-like min(a, b) and max(a, b) (so std::min(...), std::max(...) and
// numeric_limits<T>::max() must be spelled (std::min)(...), (...::max)()), and object-like
// near, far, interface and, from rpcndr.h, small. Every public header must survive that, and
// the timers must then work. winsock2.h comes first: Asio's requirement, not ours (windows.h
// alone includes winsock.h, which Asio refuses); see docs/windows.md.
// Built and run on Windows only (scripts/test's windows stage), as ctest "windows_h_first".

// libstdc++, unlike MSVC's standard library, does not survive the min/max macros: its headers
// come first, all of them, so that neither Asio nor the library includes one afterwards.
#include <bits/stdc++.h>

#include <winsock2.h> // before windows.h: Asio's rule

#include <windows.h>

// The Windows SDK defines these for C and C++; mingw-w64 defines min and max for C only, and
// small not at all. Defined here as the SDK does, so that this is the MSVC user's TU.
#if !defined(max)
#define max(a, b) (((a) > (b)) ? (a) : (b))
#endif
#if !defined(min)
#define min(a, b) (((a) < (b)) ? (a) : (b))
#endif
#if !defined(small)
#define small char
#endif
#if !defined(near) || !defined(far)
#error "windows.h was expected to define near and far"
#endif

#include <asio_wheel.hpp>

#include <asio/io_context.hpp>

int main() {
  using namespace std::chrono_literals;
  asio::io_context ctx;
  int fired = 0;
  asio_wheel::wheel_timer timer(ctx, 10ms);
  timer.async_wait([&](const asio::error_code& ec) {
    if (!ec)
      ++fired;
  });
  asio_wheel::idle_timer idle(ctx, 20ms);
  idle.async_wait([&](const asio::error_code& ec) {
    if (!ec)
      ++fired;
  });
  ctx.run();
  if (fired != 2) {
    std::fprintf(stderr, "windows_h_first: %d of 2 timers fired\n", fired);
    return 1;
  }
  std::printf("windows_h_first: both timers fired\n");
  return 0;
}
