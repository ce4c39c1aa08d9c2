//
// detail/clock_instances.hpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_DETAIL_CLOCK_INSTANCES_HPP
#define ASIO_WHEEL_DETAIL_CLOCK_INSTANCES_HPP

// The classes of a wheel service that depend on its clock only (not on a handler or an
// executor), for the clocks of wheel_timer and basic_wheel_timer<system_clock>, with Asio's wait
// traits. With ASIO_WHEEL_SEPARATE_COMPILATION they are explicit instantiation declarations here,
// so that a user's translation unit does not compile their members defined out of class
// (detail/impl/), and explicit instantiation definitions in <asio_wheel/src.hpp>. Members
// defined in the class bodies stay inline everywhere: the paths of a wait, a cancel and a
// turn that the compiler must see to inline (the callgrind_ops counts). Member templates
// (on an executor, a handler, a virtual clock) are not instantiated by either.

#include <asio_wheel/detail/config.hpp>
#include <asio_wheel/detail/wheel_service.hpp>

#include <chrono>

// `KEYWORD template class ...;` for every clock class of `CLOCK` (a type without commas).
#define ASIO_WHEEL_DETAIL_CLOCK_CLASSES(KEYWORD, CLOCK)                                            \
  KEYWORD template class ::asio_wheel::detail::wheel_service<                                      \
      CLOCK, ::asio_wheel::asio::wait_traits<CLOCK>>;                                              \
  KEYWORD template class ::asio_wheel::detail::wheel_shard<                                        \
      CLOCK, ::asio_wheel::asio::wait_traits<CLOCK>>;                                              \
  KEYWORD template class ::asio_wheel::detail::service_alarm<                                      \
      CLOCK, ::asio_wheel::asio::wait_traits<CLOCK>>;                                              \
  KEYWORD template class ::asio_wheel::detail::wheel_driver<CLOCK>;                                \
  KEYWORD template class ::asio_wheel::detail::timer_queue<CLOCK>

// The configuration macros that change these classes (ASIO_WHEEL_SHARDS, ASIO_WHEEL_MAX_SHARDS,
// ASIO_WHEEL_SWEEP_FROM_SHARDS) must be the same for the separately compiled library as for
// its users; a translation unit that defines one of them compiles its own instances instead
// of declaring them extern, so that its code does not call the library's, compiled without.
#if !defined(ASIO_WHEEL_HEADER_ONLY) && !defined(ASIO_WHEEL_DETAIL_SOURCE) &&                      \
    !defined(ASIO_WHEEL_SHARDS) && !defined(ASIO_WHEEL_MAX_SHARDS) &&                              \
    !defined(ASIO_WHEEL_SWEEP_FROM_SHARDS)
ASIO_WHEEL_DETAIL_CLOCK_CLASSES(extern, std::chrono::steady_clock);
ASIO_WHEEL_DETAIL_CLOCK_CLASSES(extern, std::chrono::system_clock);
#endif

#endif // ASIO_WHEEL_DETAIL_CLOCK_INSTANCES_HPP
