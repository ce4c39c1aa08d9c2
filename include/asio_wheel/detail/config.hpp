//
// detail/config.hpp
// ~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_DETAIL_CONFIG_HPP
#define ASIO_WHEEL_DETAIL_CONFIG_HPP

// Which Asio the library is compiled with, and where that Asio differs from the others it
// supports. The only place that reads ASIO_VERSION or BOOST_ASIO_VERSION: the rest of the
// library (and its tests) test the ASIO_WHEEL_ASIO_* macros below, so a difference between
// Asio releases is decided once, here, with the release that made it.
//
// Flavour: standalone Asio (<asio/...>, namespace asio) unless ASIO_WHEEL_USE_BOOST_ASIO is
// defined, then Boost.Asio (<boost/asio/...>, namespace boost::asio, boost::system's
// error_code). The CMake target asio_wheel::asio_wheel_boost defines it. The library's own
// namespace is asio_wheel in both; detail/asio_forward.hpp makes asio_wheel::asio name the
// chosen Asio, so the library's code reads the same for both.
//
// One flavour per program: the library's entities have the same names in both, so every
// translation unit of a program must agree on ASIO_WHEEL_USE_BOOST_ASIO.

// Boost.Asio included first, and no standalone Asio: the user most likely meant the Boost
// flavour and did not link its target (a program that uses both includes standalone Asio
// first, and is not stopped). Without this, the first error is 60 lines about a constructor
// that takes no boost::asio::io_context. (The other order: see detail/foreign_asio.hpp.)
#if !defined(ASIO_WHEEL_USE_BOOST_ASIO) && defined(BOOST_ASIO_DETAIL_CONFIG_HPP) &&                \
    !defined(ASIO_DETAIL_CONFIG_HPP)
#error                                                                                             \
    "asio_wheel: Boost.Asio is included but ASIO_WHEEL_USE_BOOST_ASIO is not defined: link the CMake target asio_wheel::asio_wheel_boost (it defines it), or define ASIO_WHEEL_USE_BOOST_ASIO in every translation unit (for standalone Asio beside Boost.Asio, include a standalone Asio header before asio_wheel's)"
#endif

#if defined(ASIO_WHEEL_USE_BOOST_ASIO)
#include <boost/asio/version.hpp>
#define ASIO_WHEEL_ASIO_VERSION BOOST_ASIO_VERSION
#else
#include <asio/version.hpp>
#define ASIO_WHEEL_ASIO_VERSION ASIO_VERSION
#endif

// 1.22 is the first Asio with the associator and cancellation slot machinery the library
// builds on (Boost 1.79 for Boost.Asio).
#if ASIO_WHEEL_ASIO_VERSION < 102200
#if defined(ASIO_WHEEL_USE_BOOST_ASIO)
#error "asio_wheel needs Boost.Asio 1.22 or later (Boost 1.79 or later)"
#else
#error "asio_wheel needs standalone Asio 1.22 or later"
#endif
#endif

// Asio 1.24: deferred and as_tuple are asio::deferred and asio::as_tuple. Before, they exist
// only as asio::experimental::deferred / as_tuple, which 1.30 deprecates and 1.33 removes.
// The library uses deferred only as the token a partial cancel_after adapts where the
// executor names no default (asio_forward.hpp); its tests and examples pick the name from this.
#define ASIO_WHEEL_ASIO_HAS_DEFERRED (ASIO_WHEEL_ASIO_VERSION >= 102400)

// Asio 1.26: an I/O object's get_executor() returns a const reference (by value before).
// The library's I/O objects return what asio::steady_timer returns.
#define ASIO_WHEEL_ASIO_GET_EXECUTOR_BY_REF (ASIO_WHEEL_ASIO_VERSION >= 102600)

// Asio 1.26: any_executor::target<T>() returns nullptr unless the target is a T (before, it
// cast without checking). No macro or header tells, so the release decides.
#define ASIO_WHEEL_ASIO_TARGET_CHECKS_TYPE (ASIO_WHEEL_ASIO_VERSION >= 102600)

// Asio 1.27: a handler's associated immediate executor (asio::associated_immediate_executor),
// through which an operation that completes at once calls it. The library's handlers that
// carry a user's forward it with every other associator, whichever the release has.
#define ASIO_WHEEL_ASIO_HAS_IMMEDIATE_EXECUTOR (ASIO_WHEEL_ASIO_VERSION >= 102700)

// Asio 1.31: asio::cancel_after and asio::cancel_at of its own, with the same signatures as
// asio_wheel's. Both stay usable: the library never calls either unqualified.
#define ASIO_WHEEL_ASIO_HAS_CANCEL_AFTER (ASIO_WHEEL_ASIO_VERSION >= 103100)

// Asio 1.38 (Boost.Asio 1.37 of Boost 1.90): the default candidate of associated_executor is
// inline_executor, which has no execution context; before it was system_executor. See
// cancel_after's initiation. Decided by the feature, not the release: the commit that made
// inline_executor the default is the one after the one that added its header, and Boost
// shipped them under an earlier version number.
#if defined(ASIO_WHEEL_USE_BOOST_ASIO) && __has_include(<boost/asio/inline_executor.hpp>)
#define ASIO_WHEEL_ASIO_DEFAULT_CANDIDATE_IS_INLINE 1
#elif !defined(ASIO_WHEEL_USE_BOOST_ASIO) && __has_include(<asio/inline_executor.hpp>)
#define ASIO_WHEEL_ASIO_DEFAULT_CANDIDATE_IS_INLINE 1
#else
#define ASIO_WHEEL_ASIO_DEFAULT_CANDIDATE_IS_INLINE 0
#endif

// Asio's timer keeps deprecated members (expires_from_now(), expires_at() without argument,
// the error_code overloads of cancel(), cancel_one() and expires_*()) until 1.32 (Boost.Asio
// too: Boost 1.86), unless ASIO_NO_DEPRECATED (BOOST_ASIO_NO_DEPRECATED); 1.33 removed them.
// basic_wheel_timer has them exactly where asio::basic_waitable_timer does, so that a program
// written with them still changes only the type.
#if ASIO_WHEEL_ASIO_VERSION < 103300 &&                                                            \
    ((defined(ASIO_WHEEL_USE_BOOST_ASIO) && !defined(BOOST_ASIO_NO_DEPRECATED)) ||                 \
     (!defined(ASIO_WHEEL_USE_BOOST_ASIO) && !defined(ASIO_NO_DEPRECATED)))
#define ASIO_WHEEL_ASIO_HAS_DEPRECATED_TIMER_MEMBERS 1
#else
#define ASIO_WHEEL_ASIO_HAS_DEPRECATED_TIMER_MEMBERS 0
#endif

// Header-only (the default) or separately compiled. With ASIO_WHEEL_SEPARATE_COMPILATION
// defined in every translation unit, the library's non-template functions (ASIO_WHEEL_DECL,
// defined in detail/impl/*.ipp) are compiled once, in the translation unit that includes
// <asio_wheel/src.hpp> (the CMake target asio_wheel::asio_wheel_compiled is one), instead of
// in every translation unit that uses a timer: as Asio's ASIO_SEPARATE_COMPILATION, with
// which it composes either way. So are the clock classes of the two standard clocks, declared
// extern templates (detail/separate_compilation.hpp, which also checks at link time that
// every translation unit shares src.hpp's configuration); the other templates stay
// header-only (docs/build_cost.md).
#if defined(ASIO_WHEEL_SEPARATE_COMPILATION)
#define ASIO_WHEEL_DECL
#else
#define ASIO_WHEEL_HEADER_ONLY 1
#define ASIO_WHEEL_DECL inline
#endif

// Functions on the path of every wait that depend on no handler (wheel_shard::file_wait,
// wheel_service::shard_for_wait, service_home::is_home, block_cache::deallocate): forced
// inline into each handler's initiation or operation where the build optimizes for speed
// (without it, file_wait's call cost 20% of callgrind_ops arm); calls, compiled once, at -O0
// (GCC and Clang define __NO_INLINE__ there) and under ASan or TSan, the builds made for
// tests, where a copy per handler type was a large part of a test's object (issue 37). Only
// the inlining differs: not the layout, so the separate mode's translation units may differ
// in it.
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define ASIO_WHEEL_SANITIZED_BUILD 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define ASIO_WHEEL_SANITIZED_BUILD 1
#endif
#if defined(__NO_INLINE__) || defined(ASIO_WHEEL_SANITIZED_BUILD)
#define ASIO_WHEEL_INLINE_PER_WAIT
#else
#define ASIO_WHEEL_INLINE_PER_WAIT [[gnu::always_inline]]
#endif

#endif // ASIO_WHEEL_DETAIL_CONFIG_HPP
