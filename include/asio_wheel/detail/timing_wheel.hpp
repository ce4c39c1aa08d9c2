//
// detail/timing_wheel.hpp
// ~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_DETAIL_TIMING_WHEEL_HPP
#define ASIO_WHEEL_DETAIL_TIMING_WHEEL_HPP

// Design
// ======
//
// A hashed hierarchical timing wheel (Varghese & Lauck, 1987) on integer ticks, in the layout
// of the Linux kernel and tokio: 64 slots per level, one 64-bit occupancy bitmap per level.
// The wheel takes no clock. Time is whatever the caller says it is through advance(now).
// Eleven levels, the base-64 digits of a 64-bit tick, cover the whole tick range, so no
// deadline is ever clamped and the top level never wraps (detail/wheel_geometry.hpp).
//
// Placement. An entry lives at the lowest level whose slot number is the first base-64
// digit in which its deadline differs from the current time `elapsed_` (the XOR rule of
// tokio, wheel_geometry::level_of). Consequences the code relies on:
//   * at level k >= 1 every occupied slot number is greater than elapsed_'s digit k, and the
//     entry agrees with elapsed_ in every digit above k;
//   * at level 0 every occupied slot number is >= elapsed_'s digit 0;
//   * so every entry of level k comes due before any entry of level k+1, and the next slot
//     to process is the lowest set bit of the lowest non-empty level: O(levels), no walk
//     over empty slots, no rotation.
//
// Expiry. When a slot of level k >= 1 comes due (elapsed_ reaches its first tick), its
// entries are re-filed from their exact deadlines (lazy cascade: an entry removed before
// then never moves, and most timeouts are removed before they fire). Entries are expired
// only from level 0, whose slot is exactly one tick, so an entry expires only when
// now >= its exact deadline: never early. Catching up after a stall jumps from occupied
// slot to occupied slot: O(occupied slots + entries), not O(elapsed ticks).
//
// Order. Entries expire in order of effective deadline, and first in first out within one
// tick, where the effective deadline is max(deadline, now() at insertion): a deadline
// already in the past is treated as due at the current tick and expires on the next
// advance(), after entries already due at that tick.
//
// Rewind. Time moves forward only through advance(); rewind(now) moves it back, for a clock
// stepped back, so that deadlines behind the old time but ahead of the clock are filed at
// their own tick. It re-files the levels below the highest digit that changed, and with
// them every effective deadline becomes max(deadline, new time).
//
// Bounded cascades. Re-filing a slot is O(its entries), and an upper slot can hold a large
// share of all entries. With set_cascade_limit(n), advance() moves at most n entries per
// call and returns false with the slot partly re-filed; the next call finishes that slot
// before anything else, so the order of expiries is the same as without a limit.
//
// Complexity: insert O(1), remove O(1), next_expiry O(levels), advance O(cascaded entries +
// expired entries + levels per slot visited). Memory: the wheel owns 11 * 64 slot lists
// (first and last pointers, 11 KiB) and 11 bitmaps; entries are intrusive (wheel_node,
// 32 bytes, owned by the caller), so the wheel never allocates.
//
// Cache behaviour. A slot's lists are not circular, and their ends live in the wheel's own
// array, which stays in cache. Appending therefore touches the new node and the slot's last
// node, which was itself appended recently; it never touches the slot's oldest node, a miss
// at 1e7 entries. Unlinking a node writes its two neighbours (or the array, at an end).
//
// Thread safety: none. The owner serialises every call.

#include <asio_wheel/detail/wheel_geometry.hpp>
#include <asio_wheel/detail/wheel_node.hpp>

#include <asio_wheel/detail/bit_ops.hpp>
#include <asio_wheel/detail/exceptions.hpp>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace asio_wheel::detail {

class timing_wheel {
public:
  static constexpr unsigned slot_bits = wheel_geometry::slot_bits;
  static constexpr unsigned slots_per_level = wheel_geometry::slots_per_level;
  static constexpr unsigned num_levels = wheel_geometry::num_levels;
  static constexpr std::size_t unlimited = (std::numeric_limits<std::size_t>::max)();

  explicit timing_wheel(tick_type start = 0) noexcept : elapsed_(start) {}

  timing_wheel(const timing_wheel&) = delete;
  timing_wheel& operator=(const timing_wheel&) = delete;

  ~timing_wheel() { assert(empty() && "a timing_wheel was destroyed with entries linked"); }

  // The current time: the last `now` given to advance(), or the start tick.
  tick_type now() const noexcept { return elapsed_; }

  bool empty() const noexcept { return size_ == 0; }
  std::size_t size() const noexcept { return size_; }

  // Entries linked on `level` (0 to num_levels - 1), for statistics: O(entries on the level
  // + its occupied slots). Counted on demand rather than kept per link/unlink, which cost
  // 2% of the instructions of an expiry (docs/statistics.md).
  std::size_t level_size(unsigned level) const noexcept {
    std::size_t n = 0;
    for (tick_type bits = occupied_[level]; bits != 0; bits &= bits - 1) {
      const auto index = static_cast<unsigned>(countr_zero(bits));
      for (const wheel_node* node = slots_[level * slots_per_level + index].first; node != nullptr;
           node = node->next_)
        ++n;
    }
    return n;
  }

  // Links `node` to expire at `deadline`. Precondition: the node is not linked.
  void insert(wheel_node& node, tick_type deadline) noexcept {
    assert(!node.is_linked());
    node.deadline_ = deadline;
    link(node, deadline < elapsed_ ? elapsed_ : deadline);
    ++size_;
  }

  // Unlinks `node` from the wheel. Precondition: the node is linked in this wheel.
  void remove(wheel_node& node) noexcept {
    assert(node.is_linked());
    const unsigned slot = node.slot_;
    unlink(node);
    --size_;
    if (slot == partial_ && slots_[slot].first == nullptr)
      partial_ = no_slot;
  }

  // Puts `by` where `node` is (its slot, its place in the slot's list, its deadline) and
  // unlinks `node`: for an entry whose owner moves, which keeps its place among the entries
  // of its tick (first in, first out). Precondition: `node` is linked in this wheel, `by` is
  // not linked.
  void replace(wheel_node& node, wheel_node& by) noexcept {
    assert(node.is_linked() && !by.is_linked());
    slot_list& list = slots_[node.slot_];
    by.next_ = node.next_;
    by.prev_ = node.prev_;
    by.deadline_ = node.deadline_;
    by.slot_ = node.slot_;
    (by.prev_ != nullptr ? by.prev_->next_ : list.first) = &by;
    (by.next_ != nullptr ? by.next_->prev_ : list.last) = &by;
    node.slot_ = wheel_node::unlinked;
  }

  // At most `limit` entries re-filed per advance() call (default: no limit).
  void set_cascade_limit(std::size_t limit) noexcept { cascade_limit_ = limit == 0 ? 1 : limit; }

  // The tick at which advance() next has work to do: the exact deadline when the earliest
  // entry is on level 0, else the first tick of the upper-level slot that must be re-filed.
  // Never later than the earliest deadline. Empty when the wheel is empty.
  std::optional<tick_type> next_expiry() const noexcept {
    if (partial_ != no_slot)
      return elapsed_; // a slot is being re-filed: due now
    for (unsigned level = 0; level < num_levels; ++level) {
      if (occupied_[level] != 0)
        return wheel_geometry::slot_start(elapsed_, level,
                                          static_cast<unsigned>(countr_zero(occupied_[level])));
    }
    return std::nullopt;
  }

  // Moves time to `now` (an earlier value than now() counts as now()) and calls
  // `on_expire(wheel_node&)` for each entry whose effective deadline <= now, at most
  // `budget` times, in order. The node is unlinked before the call, so the callback may
  // destroy it, re-insert it, or insert and remove other nodes. Returns true when no due
  // entry is left, false when the budget ran out first; the rest stays due and expires on
  // the next call, ahead of anything inserted meanwhile at a later deadline.
  //
  // A callback that returns bool may decline an entry by returning false (it cannot take
  // it now, say for want of memory): the node goes back to the head of its slot, as if it
  // had never been taken, and advance() returns false at once. The callback must then have
  // left the wheel as it found it.
  template <typename OnExpire>
  bool advance(tick_type now, std::size_t budget, OnExpire&& on_expire) {
    if (now < elapsed_)
      now = elapsed_;
    std::size_t moves = cascade_limit_;
    for (;;) {
      if (partial_ != no_slot) {
        // Finish re-filing first: its entries may be due before anything re-filed so far.
        if (!cascade(partial_, moves))
          return false;
        continue;
      }
      unsigned level = 0;
      while (level < num_levels && occupied_[level] == 0)
        ++level;
      if (level == num_levels)
        break;
      const auto index = static_cast<unsigned>(countr_zero(occupied_[level]));
      const tick_type start = wheel_geometry::slot_start(elapsed_, level, index);
      if (start > now)
        break;
      // Never moves backwards: level 0 slots are >= the current digit, upper ones greater.
      elapsed_ = start;
      if (level == 0) {
        if (budget == 0)
          return false;
        --budget;
        wheel_node& node = *slots_[index].first;
        remove(node);
        if constexpr (std::is_same_v<std::invoke_result_t<OnExpire&, wheel_node&>, bool>) {
          if (!on_expire(node)) {
            relink_front(node, index);
            return false;
          }
        } else {
          on_expire(node);
        }
      } else if (!cascade(level * slots_per_level + index, moves)) {
        return false;
      }
    }
    elapsed_ = now;
    return true;
  }

  // Moves time back to `now`, for a clock that went backwards: deadlines between `now` and
  // the old time can then be filed at their own tick, instead of counting as due at once
  // (see insert). Only the levels below the highest base-64 digit in which the two times
  // differ are re-filed: above it, every entry is placed the same for both. O(entries on
  // those levels + their slots); nothing for a `now` not before now(). Order is kept: the
  // entries are taken in the order they would expire, and re-filed in that order.
  void rewind(tick_type now) noexcept {
    if (now >= elapsed_)
      return;
    const unsigned top = wheel_geometry::level_of(elapsed_, now);
    // Chained through next_, level by level, slot by slot: every entry of a level expires
    // before those of the next, and a level's slots come due in increasing order.
    wheel_node* chain = nullptr;
    wheel_node** tail = &chain;
    for (unsigned level = 0; level <= top; ++level) {
      while (occupied_[level] != 0) {
        const auto index = static_cast<unsigned>(countr_zero(occupied_[level]));
        slot_list& list = slots_[level * slots_per_level + index];
        *tail = list.first;
        tail = &list.last->next_;
        list.first = list.last = nullptr;
        occupied_[level] &= ~(tick_type{1} << index);
      }
    }
    // A slot being re-filed is on one of those levels: its first tick is elapsed_, so its
    // digits below its level are zero, and a time before it differs at or above that level.
    partial_ = no_slot;
    elapsed_ = now;
    while (chain != nullptr) {
      wheel_node& node = *chain;
      chain = node.next_;
      link(node, node.deadline_ < elapsed_ ? elapsed_ : node.deadline_);
    }
  }

  // Some linked entry (the oldest of the earliest occupied slot), or nullptr when empty: for
  // a teardown that takes entries one at a time.
  wheel_node* front() const noexcept {
    for (unsigned level = 0; level < num_levels; ++level) {
      if (occupied_[level] != 0)
        return slots_[level * slots_per_level +
                      static_cast<unsigned>(countr_zero(occupied_[level]))]
            .first;
    }
    return nullptr;
  }

  // Unlinks every entry, calling `on_remove(wheel_node&)` for each after it is unlinked, in
  // no particular order and without cascading: O(entries + occupied slots). For teardown.
  template <typename OnRemove>
  void clear(OnRemove&& on_remove) {
    partial_ = no_slot;
    for (unsigned level = 0; level < num_levels; ++level) {
      while (occupied_[level] != 0) {
        const auto index = static_cast<unsigned>(countr_zero(occupied_[level]));
        wheel_node& node = *slots_[level * slots_per_level + index].first;
        remove(node);
        on_remove(node);
      }
    }
  }

  // Throws std::logic_error describing the first broken invariant. O(entries): for tests.
  void check_invariants() const {
    std::size_t count = 0;
    for (unsigned level = 0; level < num_levels; ++level) {
      const unsigned digit = wheel_geometry::digit_of(elapsed_, level);
      for (unsigned index = 0; index < slots_per_level; ++index) {
        const unsigned slot = level * slots_per_level + index;
        const slot_list& list = slots_[slot];
        const bool bit = ((occupied_[level] >> index) & 1u) != 0;
        if (bit != (list.first != nullptr))
          fail("occupancy bit disagrees with slot list", level, index);
        if ((list.first == nullptr) != (list.last == nullptr))
          fail("slot list has one end only", level, index);
        if (list.first == nullptr)
          continue;
        const bool being_refiled = slot == partial_ && index == digit;
        if (level == 0 ? index < digit : (index <= digit && !being_refiled))
          fail("occupied slot is behind the current time", level, index);
        const tick_type start = wheel_geometry::slot_start(elapsed_, level, index);
        if (list.first->prev_ != nullptr || list.last->next_ != nullptr)
          fail("slot list ends are not its first and last nodes", level, index);
        for (const wheel_node* node = list.first; node != nullptr; node = node->next_) {
          if (++count > size_)
            detail::throw_exception(
                std::logic_error("timing_wheel: more nodes linked than size, or a cycle"));
          if (node->slot_ != slot)
            fail("node records another slot", level, index);
          if (node->next_ != nullptr ? node->next_->prev_ != node : node != list.last)
            fail("broken list links", level, index);
          if (level == 0) {
            const bool exact = node->deadline_ == start;
            const bool overdue = node->deadline_ < elapsed_ && index == digit;
            if (!exact && !overdue)
              fail("level-0 node in the wrong slot", level, index);
          } else if (node->deadline_ < start ||
                     (node->deadline_ >> (level * slot_bits)) != (start >> (level * slot_bits))) {
            fail("node deadline outside its slot", level, index);
          }
        }
      }
    }
    if (partial_ != no_slot && (partial_ < slots_per_level || slots_[partial_].first == nullptr))
      detail::throw_exception(
          std::logic_error("timing_wheel: the slot being re-filed is not an occupied upper slot"));
    if (count != size_)
      detail::throw_exception(std::logic_error("timing_wheel: size " + std::to_string(size_) +
                                               " but " + std::to_string(count) + " nodes linked"));
  }

private:
  void link(wheel_node& node, tick_type when) noexcept {
    const unsigned level = wheel_geometry::level_of(elapsed_, when);
    const unsigned index = wheel_geometry::digit_of(when, level);
    const unsigned slot = level * slots_per_level + index;
    node.slot_ = static_cast<std::uint16_t>(slot);
    // Appended, to keep one tick's entries first in, first out.
    slot_list& list = slots_[slot];
    node.next_ = nullptr;
    node.prev_ = list.last;
    if (list.last == nullptr) {
      list.first = &node;
      occupied_[level] |= tick_type{1} << index;
    } else {
      list.last->next_ = &node;
    }
    list.last = &node;
  }

  // Puts back a node just taken from the head of level-0 slot `index` (see advance()).
  void relink_front(wheel_node& node, unsigned index) noexcept {
    slot_list& list = slots_[index];
    node.slot_ = static_cast<std::uint16_t>(index);
    node.prev_ = nullptr;
    node.next_ = list.first;
    if (list.first == nullptr) {
      list.last = &node;
      occupied_[0] |= tick_type{1} << index;
    } else {
      list.first->prev_ = &node;
    }
    list.first = &node;
    ++size_;
  }

  void unlink(wheel_node& node) noexcept {
    const unsigned slot = node.slot_;
    slot_list& list = slots_[slot];
    wheel_node* const next = node.next_;
    wheel_node* const prev = node.prev_;
    (prev != nullptr ? prev->next_ : list.first) = next;
    (next != nullptr ? next->prev_ : list.last) = prev;
    if (list.first == nullptr)
      occupied_[slot / slots_per_level] &= ~(tick_type{1} << (slot % slots_per_level));
    node.slot_ = wheel_node::unlinked;
  }

  // Re-files the entries of an upper-level slot that has come due, in list order so that
  // entries of one tick keep their first in, first out order on the lower levels. Moves at
  // most `moves` entries (counted down); returns false, with the slot recorded as partial_,
  // if some are left.
  bool cascade(unsigned slot, std::size_t& moves) noexcept {
    partial_ = no_slot;
    while (slots_[slot].first != nullptr) {
      if (moves == 0) {
        partial_ = slot;
        return false;
      }
      --moves;
      wheel_node& node = *slots_[slot].first;
      unlink(node);
      // Every deadline in a due upper slot is >= elapsed_, so it lands on a lower level.
      link(node, node.deadline_);
    }
    return true;
  }

  [[noreturn]] static void fail(const char* what, unsigned level, unsigned index) {
    detail::throw_exception(std::logic_error(std::string("timing_wheel: ") + what + " (level " +
                                             std::to_string(level) + ", slot " +
                                             std::to_string(index) + ")"));
  }

  static constexpr unsigned no_slot = num_levels * slots_per_level;

  // Entries re-filed per advance() at most.
  std::size_t cascade_limit_ = unlimited;
  // The upper slot whose re-filing a cascade limit interrupted, or no_slot. While set,
  // elapsed_ is its first tick, and it is the one occupied slot at its level's current digit.
  unsigned partial_ = no_slot;
  // Current time. Invariant: every linked entry is placed relative to it by the XOR rule.
  tick_type elapsed_;
  // Number of linked entries.
  std::size_t size_ = 0;
  // Bit i of occupied_[k] is set iff slots_[k * 64 + i] is non-empty; least-significant bit
  // is slot 0.
  tick_type occupied_[num_levels] = {};
  // Ends of each slot's list, oldest entry first; both nullptr iff the slot is empty.
  struct slot_list {
    wheel_node* first = nullptr;
    wheel_node* last = nullptr;
  };
  slot_list slots_[num_levels * slots_per_level];
};

} // namespace asio_wheel::detail

#endif // ASIO_WHEEL_DETAIL_TIMING_WHEEL_HPP
