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

namespace asio_wheel::detail {

ASIO_WHEEL_DECL std::string describe_duration(const duration_text& d) {
  if (d.ns > -9.2e18L && d.ns < 9.2e18L)
    return std::to_string(static_cast<long long>(d.ns)) + " ns";
  return std::to_string(d.count) + " x " + std::to_string(d.num) + "/" + std::to_string(d.den) +
         " s";
}

ASIO_WHEEL_DECL void throw_invalid_tick(const duration_text& tick) {
  detail::throw_exception(
      std::invalid_argument("asio_wheel: invalid tick of " + describe_duration(tick) +
                            "; the tick must be positive and at most 60 s (default 1 ms)"));
}

ASIO_WHEEL_DECL void throw_fixed_tick(const duration_text& current) {
  detail::throw_exception(std::logic_error(
      "asio_wheel: the tick of a context can only be changed before its "
      "first wait (it is " +
      describe_duration(current) + "); call set_tick() right after creating the io_context"));
}

} // namespace asio_wheel::detail

#endif // ASIO_WHEEL_DETAIL_IMPL_WHEEL_DRIVER_IPP
