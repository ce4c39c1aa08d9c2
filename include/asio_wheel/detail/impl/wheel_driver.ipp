//
// detail/impl/wheel_driver.ipp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_DETAIL_IMPL_WHEEL_DRIVER_IPP
#define ASIO_WHEEL_DETAIL_IMPL_WHEEL_DRIVER_IPP

// The clock-independent cold paths of wheel_driver: included by wheel_driver.hpp
// header-only, else by <asio_wheel/src.hpp> (ASIO_WHEEL_DECL, config.hpp).

#include <asio_wheel/detail/wheel_driver.hpp>

#include <cstdio>

namespace asio_wheel::detail {

// The messages are composed with snprintf into arrays, not with std::string's operators: in
// the header-only mode every translation unit with a timer compiles these, and the string
// operations' inlined code was 5 KB of the one-timer TU's 116 KB of text (issue 37). The
// arrays hold the longest text: a duration's three 20-digit figures.

ASIO_WHEEL_DECL void describe_duration(char (&out)[duration_text_size], const duration_text& d) {
  if (d.ns > -9.2e18L && d.ns < 9.2e18L)
    std::snprintf(out, sizeof out, "%lld ns", static_cast<long long>(d.ns));
  else
    std::snprintf(out, sizeof out, "%lld x %lld/%lld s", d.count, d.num, d.den);
}

ASIO_WHEEL_DECL void throw_invalid_tick(const duration_text& tick) {
  char shown[duration_text_size];
  describe_duration(shown, tick);
  char what[256];
  std::snprintf(what, sizeof what,
                "asio_wheel: invalid tick of %s; the tick must be positive and at most 60 s "
                "(default 1 ms)",
                shown);
  detail::throw_exception(std::invalid_argument(what));
}

ASIO_WHEEL_DECL void throw_fixed_tick(const duration_text& current) {
  char shown[duration_text_size];
  describe_duration(shown, current);
  char what[256];
  std::snprintf(what, sizeof what,
                "asio_wheel: the tick of a context can only be changed before its first wait "
                "(it is %s); call set_tick() right after creating the io_context",
                shown);
  detail::throw_exception(std::logic_error(what));
}

} // namespace asio_wheel::detail

#endif // ASIO_WHEEL_DETAIL_IMPL_WHEEL_DRIVER_IPP
