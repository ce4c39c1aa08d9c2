//
// detail/bit_ops.hpp
// ~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_DETAIL_BIT_OPS_HPP
#define ASIO_WHEEL_DETAIL_BIT_OPS_HPP

// The three <bit> functions the wheel needs, on 64-bit words, for C++17 as well: C++20's
// std::countr_zero / std::countl_zero / std::bit_width where the standard library has them
// (__cpp_lib_bitops, __cpp_lib_int_pow2), else the compiler's builtins (GCC, clang), else a
// portable loop. All are constexpr (wheel_geometry's level_of is).

#include <cstdint>
#if __has_include(<version>)
#include <version>
#endif
#if defined(__cpp_lib_bitops) && defined(__cpp_lib_int_pow2)
#include <bit>
#define ASIO_WHEEL_HAS_STD_BITOPS 1
#else
#define ASIO_WHEEL_HAS_STD_BITOPS 0
#endif

namespace asio_wheel::detail {

// Trailing zero bits of `x`; 64 for 0.
constexpr int countr_zero(std::uint64_t x) noexcept {
#if ASIO_WHEEL_HAS_STD_BITOPS
  return std::countr_zero(x);
#elif defined(__GNUC__) || defined(__clang__)
  return x == 0 ? 64 : __builtin_ctzll(x);
#else
  int n = 0;
  for (; n < 64 && (x & 1) == 0; ++n)
    x >>= 1;
  return n;
#endif
}

// Leading zero bits of `x`; 64 for 0.
constexpr int countl_zero(std::uint64_t x) noexcept {
#if ASIO_WHEEL_HAS_STD_BITOPS
  return std::countl_zero(x);
#elif defined(__GNUC__) || defined(__clang__)
  return x == 0 ? 64 : __builtin_clzll(x);
#else
  int n = 0;
  for (; n < 64 && (x & (std::uint64_t{1} << 63)) == 0; ++n)
    x <<= 1;
  return n;
#endif
}

// Bits needed to represent `x`: 0 for 0, else 1 + the index of its highest set bit.
constexpr int bit_width(std::uint64_t x) noexcept {
  return 64 - countl_zero(x);
}

} // namespace asio_wheel::detail

#undef ASIO_WHEEL_HAS_STD_BITOPS

#endif // ASIO_WHEEL_DETAIL_BIT_OPS_HPP
