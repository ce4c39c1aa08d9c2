//
// detail/prefetch.hpp
// ~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_DETAIL_PREFETCH_HPP
#define ASIO_WHEEL_DETAIL_PREFETCH_HPP

namespace asio_wheel::detail {

// Asks the processor to start loading the cache line at `p`, for memory that is about to be
// read and is likely in another core's cache (a wait completed, or a block reused, on a
// thread other than the one that wrote it last). Only a hint: it never faults, whatever the
// address (null, freed), and nothing reads through it. Where the compiler has no builtin for
// it, nothing.
inline void prefetch(const void* p) noexcept {
#if defined(__GNUC__) || defined(__clang__)
  __builtin_prefetch(p);
#else
  (void)p;
#endif
}

} // namespace asio_wheel::detail

#endif // ASIO_WHEEL_DETAIL_PREFETCH_HPP
