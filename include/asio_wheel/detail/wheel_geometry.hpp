//
// detail/wheel_geometry.hpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_DETAIL_WHEEL_GEOMETRY_HPP
#define ASIO_WHEEL_DETAIL_WHEEL_GEOMETRY_HPP

// The levels of the timing wheel (detail/timing_wheel.hpp) are the digits of a tick written in
// base 64: digit k of a tick is its slot number on level k.
//
//   level | slot width   | one revolution of the level
//   ------+--------------+----------------------------
//     0   | 1 tick       | 64 ticks
//     1   | 64 ticks     | 4096 ticks
//     2   | 64^2 ticks   | 64^3 ticks
//    ...  |              |
//    10   | 64^10 ticks  | 2^64 ticks (only 16 of its slots are reachable)
//
// Eleven levels cover the whole 64-bit tick range, so no deadline is ever clamped and the
// top level never wraps: a deadline of max() ticks is stored exactly, and any number of
// revolutions of the lower levels is just the counter moving on (tokio panicked when its
// top level wrapped, tokio #8334; here there is nothing to wrap).
//
// Only arithmetic on ticks lives here, with no state: the wheel passes in its current time.
// Kept apart so that the placement rule and the slot bounds, on which the wheel's order and
// its never-early rule rest, read on their own, without the lists around them.

#include <asio_wheel/detail/bit_ops.hpp>
#include <cstdint>

namespace asio_wheel::detail {

// The wheel's unit of time. What a tick means is the caller's choice (detail/tick_scale.hpp
// maps a clock onto ticks); the wheel only orders them.
using tick_type = std::uint64_t;

struct wheel_geometry {
  static constexpr unsigned slot_bits = 6;
  static constexpr unsigned slots_per_level = 1u << slot_bits;
  static constexpr unsigned num_levels = (64 + slot_bits - 1) / slot_bits;

  // Digit `level` of `t`: the slot `t` falls in on that level.
  static constexpr unsigned digit_of(tick_type t, unsigned level) noexcept {
    return static_cast<unsigned>((t >> (level * slot_bits)) & (slots_per_level - 1));
  }

  // The level of the highest base-64 digit in which `a` and `b` differ, 0 when they agree
  // above digit 0: the level on which a deadline `b` is filed at time `a` (the XOR rule of
  // tokio), and the highest level a move of time from `a` to `b` disturbs.
  static constexpr unsigned level_of(tick_type a, tick_type b) noexcept {
    // `| mask` maps a == b (and any difference in digit 0 alone) to level 0.
    const tick_type differ = (a ^ b) | (slots_per_level - 1);
    return level_of_bit(static_cast<unsigned>(63 - countl_zero(differ)));
  }

  // The level whose digit holds bit `bit` (0 to 63): bit / 6, as a multiply and a shift
  // that hold for these bits only (checked below). GCC, not knowing the range, divides by 6
  // for any 32-bit value (a multiply by 0xaaaaaaab, a shift, and a register to hold the
  // constant): one instruction more on every insert (callgrind_ops arm).
  static constexpr unsigned level_of_bit(unsigned bit) noexcept { return bit * 43u >> 8; }
  static constexpr bool level_of_bit_exact() noexcept {
    for (unsigned bit = 0; bit < 64; ++bit)
      if (level_of_bit(bit) != bit / slot_bits)
        return false;
    return true;
  }

  // First tick of slot `index` of `level` in the revolution of that level that holds `now`.
  // `now` by reference, so that it is read only below the top level: passed by value, GCC
  // loads the wheel's time ahead of the branch, one instruction more per slot that advance()
  // visits (+1 per operation in callgrind_ops fire).
  static constexpr tick_type slot_start(const tick_type& now, unsigned level,
                                        unsigned index) noexcept {
    const unsigned shift = level * slot_bits;
    const unsigned span = shift + slot_bits;
    // The top level spans every bit: nothing above it to keep (and a shift by 64 is UB).
    const tick_type above = span >= 64 ? 0 : now & ~((tick_type{1} << span) - 1);
    return above | (tick_type{index} << shift);
  }
};

static_assert(wheel_geometry::slot_bits == 6 && wheel_geometry::level_of_bit_exact(),
              "level_of_bit() divides by 6 for bits 0 to 63 only");

} // namespace asio_wheel::detail

#endif // ASIO_WHEEL_DETAIL_WHEEL_GEOMETRY_HPP
