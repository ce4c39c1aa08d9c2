//
// detail/separate_compilation.hpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_DETAIL_SEPARATE_COMPILATION_HPP
#define ASIO_WHEEL_DETAIL_SEPARATE_COMPILATION_HPP

// With ASIO_WHEEL_SEPARATE_COMPILATION: the clock classes of std::chrono::steady_clock and
// system_clock (the clocks of wheel_timer and system_wheel_timer) are declared extern
// templates here and instantiated once, in the translation unit of <asio_wheel/src.hpp>; and
// every translation unit checks, at link time, that it was compiled with the configuration
// that src.hpp's was. Other clocks (virtual_clock, a user's) stay header-only. So does the
// dispatch of a completion to a handler's own executor, except for the default executors
// and allocator (ASIO_WHEEL_SEPARATE_DISPATCHES).
//
// Why the link-time check: the configuration macros change the clock classes' layout
// (ASIO_WHEEL_MAX_SHARDS sizes wheel_service's array of shards) or code (ASIO_WHEEL_SHARDS,
// ASIO_WHEEL_SWEEP_FROM_SHARDS). Header-only, every translation unit compiles those classes
// itself; with extern templates, a translation unit that set ASIO_WHEEL_MAX_SHARDS otherwise
// than src.hpp's would inline the members of one layout and call the members of another
// (an adversarial review overflowed the array, under ASan, so). So each translation unit
// odr-uses a function whose name is made of its configuration, and src.hpp's defines the one
// of its own: a translation unit built otherwise fails to link, with that name in the error.

#include <asio_wheel/detail/config.hpp>

#if defined(ASIO_WHEEL_SEPARATE_COMPILATION)

#include <asio_wheel/detail/drain_sweep.hpp>
#include <asio_wheel/detail/exceptions.hpp>
#include <asio_wheel/detail/futex_mutex.hpp>
#include <asio_wheel/detail/service_alarm.hpp>
#include <asio_wheel/detail/thread_shard.hpp>
#include <asio_wheel/detail/tick_scale.hpp>
#include <asio_wheel/detail/timer_queue.hpp>
#include <asio_wheel/detail/wait_op.hpp>
#include <asio_wheel/detail/wheel_driver.hpp>
#include <asio_wheel/detail/wheel_service.hpp>
#include <asio_wheel/detail/wheel_shard.hpp>

#include <asio_wheel/detail/asio_forward.hpp>

#include <chrono>
#include <memory>

namespace asio_wheel::detail {

// What a clock class's layout or code depends on besides its template arguments, each a type
// named after what it stands for, so that the link error says which values differ.
namespace config {
template <unsigned N>
struct max_shards {}; // ASIO_WHEEL_MAX_SHARDS
template <unsigned N>
struct shards {}; // ASIO_WHEEL_SHARDS; 0: not defined (the hardware's threads decide)
template <unsigned N>
struct sweep_from_shards {}; // ASIO_WHEEL_SWEEP_FROM_SHARDS
template <bool On>
struct exceptions {}; // off: ASIO_NO_EXCEPTIONS or -fno-exceptions (the try blocks go)
template <bool On>
struct rtti {}; // off: ASIO_NO_TYPEID or -fno-rtti (how an any_io_executor is looked into)
template <bool On>
struct boost_asio {}; // ASIO_WHEEL_USE_BOOST_ASIO
template <unsigned long Version>
struct asio_version {}; // ASIO_VERSION or BOOST_ASIO_VERSION: the layout of Asio's types
template <bool On>
struct ts_executor_as_default {}; // ASIO_USE_TS_EXECUTOR_AS_DEFAULT: asio::any_io_executor
                                  // is then asio::executor, the type the extern members take

#if defined(ASIO_WHEEL_SHARDS)
inline constexpr unsigned fixed_shards = ASIO_WHEEL_SHARDS;
#else
inline constexpr unsigned fixed_shards = 0;
#endif
#if defined(ASIO_WHEEL_NO_EXCEPTIONS)
inline constexpr bool with_exceptions = false;
#else
inline constexpr bool with_exceptions = true;
#endif
#if defined(ASIO_WHEEL_ASIO_NO_TYPEID)
inline constexpr bool with_rtti = false;
#else
inline constexpr bool with_rtti = true;
#endif
#if defined(ASIO_WHEEL_USE_BOOST_ASIO)
inline constexpr bool with_boost_asio = true;
#else
inline constexpr bool with_boost_asio = false;
#endif
#if defined(ASIO_WHEEL_ASIO_TS_EXECUTOR_AS_DEFAULT)
inline constexpr bool with_ts_executor_as_default = true;
#else
inline constexpr bool with_ts_executor_as_default = false;
#endif
} // namespace config

// Defined only in the translation unit of <asio_wheel/src.hpp>, for its configuration. An
// undefined reference to it means: this translation unit was compiled with other values of
// the macros named in its template arguments than src.hpp's (or src.hpp is compiled nowhere);
// compile every translation unit of the program, src.hpp's included, with the same ones.
template <typename... Config>
bool separate_compilation_config_must_match_src_hpp() noexcept;

#define ASIO_WHEEL_SEPARATE_COMPILATION_CONFIG                                                     \
  ::asio_wheel::detail::config::max_shards<::asio_wheel::detail::max_shards>,                      \
      ::asio_wheel::detail::config::shards<::asio_wheel::detail::config::fixed_shards>,            \
      ::asio_wheel::detail::config::sweep_from_shards<::asio_wheel::detail::sweep_from_shards>,    \
      ::asio_wheel::detail::config::exceptions<::asio_wheel::detail::config::with_exceptions>,     \
      ::asio_wheel::detail::config::rtti<::asio_wheel::detail::config::with_rtti>,                 \
      ::asio_wheel::detail::futex_mutex_sleep,                                                     \
      ::asio_wheel::detail::config::boost_asio<::asio_wheel::detail::config::with_boost_asio>,     \
      ::asio_wheel::detail::config::asio_version<ASIO_WHEEL_ASIO_VERSION>,                         \
      ::asio_wheel::detail::config::ts_executor_as_default<                                        \
          ::asio_wheel::detail::config::with_ts_executor_as_default>

// The odr-use: a call at start-up from each translation unit that includes a timer's header,
// whether or not it uses one. Internal linkage, not an inline variable: the initializer of an
// inline variable is one COMDAT group for the whole program, and the linker would keep the
// first translation unit's (src.hpp's, if its object comes first) and drop the reference of
// every other, so that a mismatched translation unit linked after it would go unnoticed.
[[maybe_unused]] static const bool separate_compilation_config_checked =
    separate_compilation_config_must_match_src_hpp<ASIO_WHEEL_SEPARATE_COMPILATION_CONFIG>();

// The clock classes of the two standard clocks, compiled in src.hpp's translation unit.
// Their member templates (on a handler or an executor) stay implicit, in the user's, except
// the one cold member that every translation unit instantiates for the default executors
// (wheel_shard::start, and service_home::find behind it).
#define ASIO_WHEEL_SEPARATE_CLOCK_CLASSES(prefix, clock)                                           \
  prefix class tick_scale<clock>;                                                                  \
  prefix class wheel_driver<clock>;                                                                \
  prefix class timer_queue<clock>;                                                                 \
  prefix class service_alarm<clock, asio::wait_traits<clock>>;                                     \
  prefix class wheel_shard<clock, asio::wait_traits<clock>>;                                       \
  prefix class wheel_service<clock, asio::wait_traits<clock>>;                                     \
  prefix void wheel_shard<clock, asio::wait_traits<clock>>::start(const asio::any_io_executor&,    \
                                                                  const asio::any_io_executor&);   \
  prefix void wheel_shard<clock, asio::wait_traits<clock>>::start(                                 \
      const asio::io_context::executor_type&, const asio::io_context::executor_type&)

#define ASIO_WHEEL_SEPARATE_HOME_FINDS(prefix)                                                     \
  prefix void service_home::find(const asio::any_io_executor&, const asio::any_io_executor&);      \
  prefix void service_home::find(const asio::io_context::executor_type&,                           \
                                 const asio::io_context::executor_type&);                          \
  prefix void service_home::find(                                                                  \
      const asio::io_context::basic_executor_type<std::allocator<void>, 4>&,                       \
      const asio::io_context::basic_executor_type<std::allocator<void>, 4>&)

// The dispatch of a completed wait to a handler's executor that is not the wheel's home,
// for the executors every program's first wait brings (the timer's any_io_executor, and
// io_context's executor that io_executor_holder unwraps) with the default allocator: it
// instantiates Asio's dispatch for queued_completion (its operation, type-erased function
// and any_executor's execute), which cost the one-timer translation unit a fifth of the code
// it optimized at -O2 beyond steady_timer's (issue 37, docs/build_cost.md). Out of line
// already (noinline), so only where it is compiled changes.
#define ASIO_WHEEL_SEPARATE_DISPATCHES(prefix)                                                     \
  prefix void dispatch_queued(wait_op*, tracked_executor<asio::any_io_executor>&,                  \
                              const std::allocator<void>&);                                        \
  prefix void dispatch_queued(wait_op*, tracked_executor<asio::io_context::executor_type>&,        \
                              const std::allocator<void>&)

ASIO_WHEEL_SEPARATE_CLOCK_CLASSES(extern template, std::chrono::steady_clock);
ASIO_WHEEL_SEPARATE_CLOCK_CLASSES(extern template, std::chrono::system_clock);
ASIO_WHEEL_SEPARATE_HOME_FINDS(extern template);
ASIO_WHEEL_SEPARATE_DISPATCHES(extern template);

} // namespace asio_wheel::detail

#endif // ASIO_WHEEL_SEPARATE_COMPILATION

#endif // ASIO_WHEEL_DETAIL_SEPARATE_COMPILATION_HPP
