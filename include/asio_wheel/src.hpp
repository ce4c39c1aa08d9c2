//
// src.hpp
// ~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_SRC_HPP
#define ASIO_WHEEL_SRC_HPP

/// @file
/// The separately compiled part of asio-wheel. With ASIO_WHEEL_SEPARATE_COMPILATION
/// defined in every translation unit of a program, exactly one of them includes this file
/// (the CMake target asio_wheel::asio_wheel_compiled is such a translation unit, built as a
/// static library): it defines the library's non-template functions, which depend on no
/// handler, executor or clock (the probing of an any_io_executor for its context, the texts
/// and throws of a bad tick), and the clock classes of std::chrono::steady_clock and
/// system_clock (the wheel service, its shards, alarms and queues), which the other
/// translation units then do not compile. Every translation unit, this one included, must be
/// compiled with the same configuration macros (ASIO_WHEEL_MAX_SHARDS, ASIO_WHEEL_SHARDS,
/// ASIO_WHEEL_SWEEP_FROM_SHARDS), exception and RTTI modes and Asio: a program that mixes them
/// fails to link, with an undefined reference to
/// asio_wheel::detail::separate_compilation_config_must_match_src_hpp<...> that names the
/// values (detail/separate_compilation.hpp). It composes with Asio's own
/// ASIO_SEPARATE_COMPILATION (or BOOST_ASIO_SEPARATE_COMPILATION), which it does not include:
/// Asio's code is compiled where the program compiles it (asio/impl/src.hpp), or header-only.

#include <asio_wheel/detail/config.hpp>

#if !defined(ASIO_WHEEL_SEPARATE_COMPILATION)
#error                                                                                             \
    "asio_wheel/src.hpp is only for ASIO_WHEEL_SEPARATE_COMPILATION: define it in every translation unit, or do not include this file"
#endif

#include <asio_wheel.hpp>

#include <asio_wheel/detail/impl/handler_executor.ipp>
#include <asio_wheel/detail/impl/wheel_driver.ipp>

namespace asio_wheel::detail {

// This translation unit's configuration, which every other one must share (see
// detail/separate_compilation.hpp).
template <typename... Config>
bool separate_compilation_config_must_match_src_hpp() noexcept {
  return true;
}
template bool
separate_compilation_config_must_match_src_hpp<ASIO_WHEEL_SEPARATE_COMPILATION_CONFIG>() noexcept;

ASIO_WHEEL_SEPARATE_CLOCK_CLASSES(template, std::chrono::steady_clock);
ASIO_WHEEL_SEPARATE_CLOCK_CLASSES(template, std::chrono::system_clock);
ASIO_WHEEL_SEPARATE_HOME_FINDS(template);
ASIO_WHEEL_SEPARATE_DISPATCHES(template);

} // namespace asio_wheel::detail

#endif // ASIO_WHEEL_SRC_HPP
