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
//   * so every entry of level k comes due before any entry of level k+1.
// Entries are expired only from level 0, whose slot is exactly one tick, so an entry expires
// only when now >= its exact deadline: never early.
//
// Staging (no cascade stall). In a plain hierarchical wheel, when time enters a slot of
// level k >= 1 its entries are re-filed onto the lower levels (the cascade) before anything
// in its first ticks can expire: O(entries of the slot) at one instant, and one upper slot
// can hold half of a million timers (issue #36: 30 ms of expiries held back). Here that
// re-filing is done ahead of time, a bounded number of moves per advance(), into a stage:
//   * the window W_j of level j (1 to 10) is the level-j slot that follows the one holding
//     elapsed_: ticks [T_j, T_j + 64^j) with T_j the next multiple of 64^j after elapsed_;
//   * stage S_j is a bank of 64 lists holding entries of W_j sorted by digit j-1 of their
//     deadline, that is, exactly as level j-1 will hold them once time enters W_j;
//   * S_j is fed by its source: the level-j slot of W_j (digit j of elapsed_ plus one), or,
//     when elapsed_'s digit j is 63, W_j is the first sub-window of W_{j+1} and the source
//     is bucket 0 of S_{j+1} (the stages are chained). So an entry due soon after a boundary
//     is re-filed level by level down to S_1 before time reaches it, as the cascade would,
//     only earlier;
//   * when time enters W_j (advance() reaches T_j), levels 0 to j-1 are empty, their due
//     entries all expired, and S_1..S_j are swapped in as levels 0..j-1: O(j) exchanges of
//     bank numbers, no entry touched. A node records its list (bank * 64 + slot), which is
//     why levels and stages are banks named through level_bank_ and stage_bank_.
// A source found not fully staged when its window comes due (time jumped there, or the
// move limit could not keep up) is staged then, before anything at T_j expires: the old
// cascade, bounded per call by set_cascade_limit(), with the same order. next_expiry()
// reports work while a source is waiting (staging_pending_), and the instant a non-empty
// list becomes a source, so that the owner's turns do the staging in time; T_1 is no
// event of its own (S_1's entries become level 0's, due at their own ticks).
//
// Pacing. A list becomes a source some time ahead of its window, its lead: 64^j ticks for
// the level-j slot of W_j, 64^(j-1) for bucket 0 of S_j once the stage below chains to it.
// While every waiting list of a group of chained windows (bottom..top, all starting at
// T_top) has more than half of its lead left, the group is paced: only the first advance()
// of a tick moves its entries (a limit's worth), and next_expiry() says the next tick
// rather than now(); after that it is urgent, staged in calls at once as before
// (group_state). Staging in calls at once as soon as a slot became a source held the
// owner's loop in a burst of cache misses every 64 ticks (8,000 moves, 2 ms, at 1e6 timers
// over 8 s; more for a level-2 slot), which delayed the expiries behind it and, on a loaded
// machine, got the thread preempted for as long again (issue #36). A limit's worth per tick
// stages limit * 32 entries of a level-1 slot in time and limit * 2048 of a level-2 slot;
// what a larger slot leaves is staged in the urgent half. Known limit (review of issue
// #36): that half may be too short where the whole lead was not. A move costs c of the
// owner's time (cold lines: 0.15-1 us), so the urgent half stages about (lead / 2) / c;
// a level-1 slot of more than limit * 32 + 32 ms / c entries (at c = 0.25 us about
// 140,000: 2,200 deadlines a millisecond, every millisecond) reaches its window unstaged
// and its expiries wait behind staging turns, where staging at once from the start fitted
// 64 ms / c. Judging urgency by the work left, not by the lead, needs each slot's count.
//
// Order. Entries expire in order of effective deadline, and first in first out within one
// tick, where the effective deadline is max(deadline, now() at insertion): a deadline
// already in the past is treated as due at the current tick and expires on the next
// advance(), after entries already due at that tick. Staging keeps it: every move takes
// the head of a list and appends it to a list downstream (source -> stage bucket -> next
// stage's bucket), so the lists an entry passes through form one FIFO per tick; an insert
// goes to its window's source while that waits, else to the stage (link()), and
// rewind() re-files into the most refined list (link_refined()).
//
// Rewind. Time moves forward only through advance(); rewind(now) moves it back, for a clock
// stepped back, so that deadlines behind the old time but ahead of the clock are filed at
// their own tick. It re-files the levels and stages below the highest digit that changed,
// and with them every effective deadline becomes max(deadline, new time).
//
// Complexity: insert O(1) (a few more instructions for the next slot of a level), remove
// O(1), next_expiry O(levels), advance O(expired + staged entries + levels per slot
// visited), at most set_cascade_limit() moves per call. Memory: 21 banks of 64 slot lists
// (11 levels, 10 stages: 21 KiB) and their bitmaps; entries are intrusive (wheel_node,
// 32 bytes, owned by the caller), so the wheel never allocates. Each entry is moved at
// most once per level it descends, as with a cascade; the moves are only done earlier, and
// only for the slot that comes next on each level (an entry cancelled before its slot
// becomes next never moves).
//
// Cache behaviour. A slot's lists are not circular, and their ends live in the wheel's own
// array, which stays in cache. Appending therefore touches the new node and the slot's last
// node, which was itself appended recently; it never touches the slot's oldest node, a miss
// at 1e7 entries. Unlinking a node writes its two neighbours (or the array, at an end).
//
// Thread safety: none. The owner serialises every call.

#include <asio_wheel/detail/min_max.hpp>
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
  // Lists of 64 slots: one per level, and one per stage (levels 1 to 10).
  static constexpr unsigned num_banks = 2 * num_levels - 1;
  // Every value a linked node's slot number can take is below this.
  static constexpr unsigned num_slots = num_banks * slots_per_level;
  static constexpr std::size_t unlimited = (std::numeric_limits<std::size_t>::max)();

  explicit timing_wheel(tick_type start = 0) noexcept {
    set_time(start);
    for (unsigned level = 0; level < num_levels; ++level)
      level_bank_[level] = static_cast<std::uint8_t>(level);
    for (unsigned j = 1; j < num_levels; ++j)
      stage_bank_[j] = static_cast<std::uint8_t>(num_levels + j - 1);
    stage_bank_[0] = no_bank;
    set_firsts(num_levels - 1);
  }

  timing_wheel(const timing_wheel&) = delete;
  timing_wheel& operator=(const timing_wheel&) = delete;

  ~timing_wheel() { assert(empty() && "a timing_wheel was destroyed with entries linked"); }

  // The current time: the last `now` given to advance(), or the start tick. While a window
  // comes due whose staging a cascade limit interrupted, the tick before it.
  tick_type now() const noexcept { return elapsed_; }

  bool empty() const noexcept { return size_ == 0; }
  std::size_t size() const noexcept { return size_; }

  // Entries linked on `level` (0 to num_levels - 1), for statistics, an entry staged ahead
  // of its level's next slot counted on that level: O(entries on the level + its occupied
  // slots). Counted on demand rather than kept per link/unlink, which cost 2% of the
  // instructions of an expiry (docs/statistics.md).
  std::size_t level_size(unsigned level) const noexcept {
    std::size_t n = bank_size(level_bank_[level]);
    if (level != 0)
      n += bank_size(stage_bank_[level]);
    return n;
  }

  // Links `node` to expire at `deadline`. Precondition: the node is not linked.
  [[gnu::always_inline]] void insert(wheel_node& node, tick_type deadline) noexcept {
    assert(!node.is_linked());
    node.deadline_ = deadline;
    // Counted first: link() then ends in its last call (a jump, for a window), and keeps
    // nothing across it.
    ++size_;
    link(node, deadline < elapsed_ ? elapsed_ : deadline);
  }

  // Unlinks `node` from the wheel. Precondition: the node is linked in this wheel.
  // Inline: on the path of every reset (timer_queue::file), as it was before staging.
  [[gnu::always_inline]] void remove(wheel_node& node) noexcept {
    assert(node.is_linked());
    unlink(node);
    --size_;
  }

  // Puts `by` where `node` is (its slot, its place in the slot's list, its deadline) and
  // unlinks `node`: for an entry whose owner moves, which keeps its place among the entries
  // of its tick (first in, first out). Precondition: `node` is linked in this wheel, `by` is
  // not linked.
  void replace(wheel_node& node, wheel_node& by) noexcept {
    assert(node.is_linked() && !by.is_linked());
    slot_list& list = lists_[node.slot_];
    by.next_ = node.next_;
    by.prev_ = node.prev_;
    by.deadline_ = node.deadline_;
    by.slot_ = node.slot_;
    (by.prev_ != nullptr ? by.prev_->next_ : list.first) = &by;
    (by.next_ != nullptr ? by.next_->prev_ : list.last) = &by;
    node.slot_ = wheel_node::unlinked;
  }

  // At most `limit` entries moved (staged ahead, or re-filed) per advance() call (default:
  // no limit). 0 counts as 1, but with set_refile_whole(), where a call that is to stage
  // nothing ahead still makes progress (a window that comes due is re-filed whole).
  void set_cascade_limit(std::size_t limit) noexcept {
    cascade_limit_ = limit == 0 && !refile_whole_ ? 1 : limit;
  }

  // Whether a window that comes due before its staging is done is re-filed whole, whatever
  // the cascade limit, in the advance() that reaches it (default: no, a limit's worth per
  // call). For an owner whose advance() must never stop for a cascade (heartbeat_group takes
  // one entry per call and compares it with work of its own), while its staging ahead,
  // which pacing spreads over ticks, keeps the limit: with no limit at all, that staged a
  // whole upper slot in one step.
  void set_refile_whole(bool whole) noexcept {
    refile_whole_ = whole;
    if (!whole && cascade_limit_ == 0)
      cascade_limit_ = 1;
  }

  // Entries moved (staged ahead, or re-filed for a window that came due) by the last
  // advance(): at most the cascade limit it ran with, but for a window re-filed whole. For an
  // owner that spreads one allowance over several calls (heartbeat_group's run), statistics
  // and tests.
  std::size_t last_moves() const noexcept { return moved_; }

  // The tick at which advance() next has work to do: the exact deadline when the earliest
  // entry is on level 0; else the earliest of the exact deadline of S_1's first entry, the
  // first tick of a higher window that comes due and the tick at which a list becomes a
  // source to stage; while a source waits to be staged,
  // now() or, when its staging is paced and this tick's share is done, the next tick (see
  // "Pacing" in the design note). Never later than the earliest deadline. Empty when the
  // wheel is empty.
  std::optional<tick_type> next_expiry() const noexcept {
    if (size_ == 0)
      return std::nullopt;
    if (staging_pending_) {
      // Every other event is after now(), but for a level-0 entry filed at now() (a deadline
      // already past): due at once. A flag left by work that is gone (its entries removed)
      // wakes no one: the events below say when, as wake_for() told the owner (else an insert
      // into an emptied wheel reported now(), before the wake_for() its owner armed for).
      if (const std::optional<tick_type> wake = staging_wake()) {
        const unsigned digit = wheel_geometry::digit_of(elapsed_, 0);
        return ((bits_[level_bank_[0]] >> digit) & 1u) != 0 ? elapsed_ : *wake;
      }
    }
    if (const tick_type bits = bits_[level_bank_[0]]; bits != 0)
      return wheel_geometry::slot_start(elapsed_, 0, static_cast<unsigned>(countr_zero(bits)));
    // The windows start in order (T_1 <= T_2 <= ...). Entering W_1 stages nothing of S_1's
    // own: its entries are due at their own ticks, T_1 + bucket, which wake_for() gives them
    // (a turn at T_1 for them alone came before the alarm their owner armed, and did
    // nothing). T_j of a higher stage is an event: its bucket 1 becomes the next source. A
    // level's lowest slot, at its start, is later than the start of the slot before it, below.
    tick_type best = max_tick;
    if (const tick_type bits = bits_[stage_bank_[1]]; bits != 0)
      best = window_start(1) + static_cast<tick_type>(countr_zero(bits));
    for (unsigned j = 2; j < num_levels; ++j) {
      if (bits_[stage_bank_[j]] != 0) {
        best = detail::min_of(best, window_start(j));
        break;
      }
    }
    // A level's lowest slot becomes its source when the slot before it begins.
    for (unsigned level = 1; level < num_levels; ++level) {
      const tick_type bits = bits_[level_bank_[level]];
      if (bits == 0)
        continue;
      const auto index = static_cast<unsigned>(countr_zero(bits));
      if (index == wheel_geometry::digit_of(elapsed_, level) + 1)
        return elapsed_; // a source with entries (not expected without staging_pending_)
      best = detail::min_of(best, wheel_geometry::slot_start(elapsed_, level, index - 1));
    }
    // Bucket 0 of a stage becomes the next stage's source when the stages chain.
    for (unsigned j = 2; j < num_levels; ++j) {
      if ((bits_[stage_bank_[j]] & 1u) == 0)
        continue;
      if (chained(j - 1))
        return elapsed_;
      best = detail::min_of(best, window_start(j) - (tick_type{1} << ((j - 1) * slot_bits)));
    }
    return best;
  }

  // The deadlines an owner whose alarm is armed for `alarm` may file with no further look:
  // [lo, lo + span), every deadline d there with wake_for(d) >= alarm, and so it stays
  // through any inserts and removes until the next advance() or rewind() (an owner caches it,
  // and tests a deadline against it in one compare). Conservative: a deadline outside may
  // need no alarm either. O(levels), for the owner to compute when its alarm or the wheel's
  // time changes.
  //
  // Why it holds. wake_for(d) is never before now(). For d > alarm at the alarm's level L or
  // above it is the start of d's slot's predecessor on d's level, or a window's start, or
  // (bucket 0 of a stage) the start of the slot before the window, or (a deadline joining a
  // source that waits, its staging paced) the next tick: none before `alarm` once
  // d's level-L slot follows one that starts at or after it (the alarm's own slot's
  // successor when the alarm is a slot's start, as wake_for() and next_expiry() give; the
  // window's second bucket when the alarm is the window's start). The
  // exceptions are now(): a deadline joining a source that waits (none does unless staging is
  // pending, and none starts to without advance() or rewind(), except through the next exception),
  // and a deadline in bucket 0 of a stage that a lower stage chains to, that is in W_c for each c
  // with chained(c) (then T_c = T_{c+1}, and W_c is that bucket): the range stops before the first
  // such window above it, or starts after it.
  struct wake_range {
    tick_type lo = 0;
    tick_type span = 0;
  };
  wake_range settled_range(tick_type alarm) const noexcept {
    if (alarm <= elapsed_)
      return {0, max_tick};
    // Staging that waits wakes the owner now(), but for paced staging whose share of this
    // tick is spent: the next tick, which a deadline joining its source gets too (and no
    // insert or remove makes it sooner).
    if (staging_pending_) {
      // Nothing waits after all (the flag is a "may"): ranged as if it were clear.
      const std::optional<tick_type> wake = staging_wake();
      if (wake && (alarm - elapsed_ != 1 || *wake != alarm))
        return {};
    }
    const unsigned level = wheel_geometry::level_of(elapsed_, alarm);
    const unsigned shift = level * slot_bits;
    tick_type lo = alarm;
    if (level != 0 && alarm == window_start(level)) {
      // The window itself, but for its bucket 0 (chain: the slot before the window).
      lo = alarm + (level == 1 ? 0 : tick_type{1} << (shift - slot_bits));
    } else if (level != 0) {
      // The first slot whose predecessor starts at or after the alarm.
      const tick_type next =
          (alarm >> shift) + ((alarm & ((tick_type{1} << shift) - 1)) == 0 ? 1 : 2);
      if (next > (max_tick >> shift))
        return {}; // the end of the tick range
      lo = next << shift;
    }
    tick_type hi = max_tick;
    for (unsigned c = 1; c + 1 < num_levels; ++c) {
      const unsigned window_shift = c * slot_bits;
      if (!chained(c))
        continue;
      if ((elapsed_ >> window_shift) == (max_tick >> window_shift))
        break; // no window above: nothing can be filed there
      const tick_type start = window_start(c);
      const tick_type size = tick_type{1} << window_shift;
      const tick_type end = max_tick - start < size ? max_tick : start + size;
      if (end <= lo)
        continue;
      if (start > lo) {
        hi = start;
        break; // the windows start in order
      }
      lo = end;
    }
    if (hi <= lo)
      return {};
    return {lo, hi - lo};
  }

  // The tick by which advance() must next be called once an entry is inserted for
  // `deadline` (from now on, with nothing else changed): the deadline itself for level 0,
  // or for a window that needs no more staging; the tick where the entry's slot becomes its
  // level's next, to be staged; now() if it joins a source that waits. Never later than the
  // effective deadline; next_expiry() after that insert is no earlier than min(this,
  // next_expiry() before). An owner that files a deadline between its turns (which re-arm
  // from next_expiry()) arms its alarm for it, unless settled_range() says it need not. O(1).
  tick_type wake_for(tick_type deadline) const noexcept {
    const tick_type when = deadline < elapsed_ ? elapsed_ : deadline;
    const unsigned level = wheel_geometry::level_of(elapsed_, when);
    const unsigned shift = level * slot_bits;
    const tick_type digits = when >> shift;
    if (level == 0)
      return when;
    if (digits != (elapsed_ >> shift) + 1)
      return (digits - 1) << shift; // the start of the slot before
    return wake_for_window(when, level, static_cast<unsigned>(digits & (slots_per_level - 1)));
  }

  // Moves time to `now` (an earlier value than now() counts as now()) and calls
  // `on_expire(wheel_node&)` for each entry whose effective deadline <= now, at most
  // `budget` times, in order. The node is unlinked before the call, so the callback may
  // destroy it, re-insert it, or insert and remove other nodes. Returns true when no due
  // entry is left, false when the budget (or the cascade limit, for a window not staged in
  // time) ran out first; the rest stays due and expires on the next call, ahead of anything
  // inserted meanwhile at a later deadline. Then stages ahead, within the cascade limit.
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
    moved_ = 0;
    for (;;) {
      const unsigned bank0 = level_bank_[0];
      if (bits_[bank0] != 0) {
        const auto index = static_cast<unsigned>(countr_zero(bits_[bank0]));
        const tick_type start = wheel_geometry::slot_start(elapsed_, 0, index);
        if (start > now)
          break;
        // Never moves backwards: level 0 slots are >= the current digit. Only digit 0
        // changes: window_digits_ stays.
        elapsed_ = start;
        if (budget == 0)
          return false;
        --budget;
        wheel_node& node = *lists_[bank0 * slots_per_level + index].first;
        remove(node);
        if constexpr (std::is_same_v<std::invoke_result_t<OnExpire&, wheel_node&>, bool>) {
          if (!on_expire(node)) {
            relink_front(node, bank0 * slots_per_level + index);
            return false;
          }
        } else {
          on_expire(node);
        }
        continue;
      }
      // Level 0 is empty: the next thing due is the start of a window.
      const std::optional<tick_type> window = upper_event();
      if (!window || *window > now)
        break;
      if (!enter(*window, moves))
        return false;
    }
    if (((elapsed_ ^ now) >> slot_bits) != 0) {
      staging_pending_ = true; // other windows, other sources
      set_time(now);
    }
    elapsed_ = now;
    if (staging_pending_)
      stage(moves);
    return true;
  }

  // Moves time back to `now`, for a clock that went backwards: deadlines between `now` and
  // the old time can then be filed at their own tick, instead of counting as due at once
  // (see insert). Only the levels and stages below the highest base-64 digit in which the
  // two times differ are re-filed: above it, every entry is placed the same for both. O(the
  // entries there + their slots); nothing for a `now` not before now(). Order is kept: the
  // entries are taken in the order they would expire, and re-filed in that order.
  void rewind(tick_type now) noexcept {
    if (now >= elapsed_)
      return;
    const unsigned top = wheel_geometry::level_of(elapsed_, now);
    // Chained through next_, so that the entries of one tick keep their order: first the
    // stages, downstream first (an entry of a tick in S_j is older than one of that tick in
    // S_{j+1}, or in the slot S_j is fed from: it moved, or was inserted, first); then the
    // levels, each before the next and slot by slot in the order they come due (the entries
    // that become due at once, deadlines before `now`, keep their order of expiry).
    wheel_node* chain = nullptr;
    wheel_node** tail = &chain;
    for (unsigned j = 1; j <= top; ++j)
      take_bank(stage_bank_[j], tail);
    for (unsigned level = 0; level <= top; ++level)
      take_bank(level_bank_[level], tail);
    // Bucket 0 of the stage above: what had moved down from it (S_top, chained to it before
    // and not after) comes back into it, ahead of what it still holds. Set aside, then
    // spliced back behind: O(1).
    slot_list upstream;
    if (top + 1 < num_levels) {
      slot_list& list = lists_[stage_bank_[top + 1] * slots_per_level];
      upstream = list;
      list.first = list.last = nullptr;
      bits_[stage_bank_[top + 1]] &= ~tick_type{1};
    }
    set_time(now);
    while (chain != nullptr) {
      wheel_node& node = *chain;
      chain = node.next_;
      link_refined(node, node.deadline_ < elapsed_ ? elapsed_ : node.deadline_);
    }
    if (upstream.first != nullptr) {
      slot_list& list = lists_[stage_bank_[top + 1] * slots_per_level];
      if (list.last == nullptr) {
        list = upstream;
        bits_[stage_bank_[top + 1]] |= tick_type{1};
      } else {
        list.last->next_ = upstream.first;
        upstream.first->prev_ = list.last;
        list.last = upstream.last;
      }
    }
    staging_pending_ = true;
  }

  // Some linked entry, or nullptr when empty: for a teardown that takes entries one at a
  // time.
  wheel_node* front() const noexcept {
    for (unsigned bank = 0; bank < num_banks; ++bank) {
      if (bits_[bank] != 0)
        return lists_[bank * slots_per_level + static_cast<unsigned>(countr_zero(bits_[bank]))]
            .first;
    }
    return nullptr;
  }

  // Unlinks every entry, calling `on_remove(wheel_node&)` for each after it is unlinked, in
  // no particular order and without cascading: O(entries + occupied slots). For teardown.
  template <typename OnRemove>
  void clear(OnRemove&& on_remove) {
    for (unsigned bank = 0; bank < num_banks; ++bank) {
      while (bits_[bank] != 0) {
        const auto index = static_cast<unsigned>(countr_zero(bits_[bank]));
        wheel_node& node = *lists_[bank * slots_per_level + index].first;
        remove(node);
        on_remove(node);
      }
    }
    staging_pending_ = false;
  }

  // Throws std::logic_error describing the first broken invariant. O(entries): for tests.
  void check_invariants() const {
    bool seen[num_banks] = {};
    for (unsigned level = 0; level < num_levels; ++level)
      seen[level_bank_[level]] = true;
    for (unsigned j = 1; j < num_levels; ++j) {
      if (stage_bank_[j] >= num_banks || seen[stage_bank_[j]])
        detail::throw_exception(std::logic_error("timing_wheel: banks are not a permutation"));
      seen[stage_bank_[j]] = true;
    }
    for (bool b : seen)
      if (!b)
        detail::throw_exception(std::logic_error("timing_wheel: banks are not a permutation"));
    for (unsigned k = 0; k < num_levels; ++k) {
      if (level_first_[k] != level_bank_[k] * slots_per_level ||
          stage_first_[k] != (k == 0 ? 0 : stage_bank_[k] * slots_per_level))
        fail("first slot disagrees with the bank", "level", k, 0);
    }
    std::size_t count = 0;
    for (unsigned level = 0; level < num_levels; ++level) {
      const unsigned digit = wheel_geometry::digit_of(elapsed_, level);
      check_bank(level_bank_[level], level, "level", count,
                 [&](const wheel_node& node, unsigned index) {
                   const tick_type start = wheel_geometry::slot_start(elapsed_, level, index);
                   if (level == 0 ? index < digit : index <= digit)
                     return "occupied slot is behind the current time";
                   if (level == 0) {
                     const bool exact = node.deadline_ == start;
                     const bool overdue = node.deadline_ < elapsed_ && index == digit;
                     if (!exact && !overdue)
                       return "level-0 node in the wrong slot";
                   } else if (node.deadline_ < start || (node.deadline_ >> (level * slot_bits)) !=
                                                            (start >> (level * slot_bits))) {
                     return "node deadline outside its slot";
                   }
                   return static_cast<const char*>(nullptr);
                 });
    }
    for (unsigned j = 1; j < num_levels; ++j) {
      const unsigned shift = j * slot_bits;
      const bool exists = (elapsed_ >> shift) != (max_tick >> shift);
      check_bank(stage_bank_[j], j, "stage", count, [&](const wheel_node& node, unsigned index) {
        if (!exists || (node.deadline_ >> shift) != (elapsed_ >> shift) + 1)
          return "staged node outside its window";
        if (wheel_geometry::digit_of(node.deadline_, j - 1) != index)
          return "staged node in the wrong bucket";
        return static_cast<const char*>(nullptr);
      });
    }
    for (unsigned level = 0; level < num_levels; ++level) {
      if (level == 0 ? window_next_[0] >= elapsed_ &&
                           wheel_geometry::level_of(elapsed_, window_next_[0]) == 0
                     : window_next_[level] != (elapsed_ >> (level * slot_bits)) + 1)
        fail("window digits disagree with the time", "level", level, 0);
      if (window_digits_[level] == window_next_[level]) {
        const unsigned next = wheel_geometry::digit_of(elapsed_, level) + 1;
        if (level != 0 && next < slots_per_level &&
            lists_[level_bank_[level] * slots_per_level + next].first != nullptr)
          fail("window filed as empty while its source waits", "level", level, next);
      } else if (level == 0 || window_digits_[level] != max_tick) {
        fail("window digits are neither the window's nor none", "level", level, 0);
      }
    }
    if (count != size_)
      detail::throw_exception(std::logic_error("timing_wheel: size " + std::to_string(size_) +
                                               " but " + std::to_string(count) + " nodes linked"));
    if (!staging_pending_) {
      for (unsigned j = 1; j < num_levels; ++j) {
        if (source(j).first != nullptr)
          fail("a source waits, staging not pending", "stage", j, 0);
      }
    }
  }

private:
  static constexpr tick_type max_tick = (std::numeric_limits<tick_type>::max)();
  static constexpr std::uint8_t no_bank = 0xff;

  struct slot_list {
    wheel_node* first = nullptr;
    wheel_node* last = nullptr;
  };

  std::size_t bank_size(unsigned bank) const noexcept {
    std::size_t n = 0;
    for (tick_type bits = bits_[bank]; bits != 0; bits &= bits - 1) {
      const auto index = static_cast<unsigned>(countr_zero(bits));
      for (const wheel_node* node = lists_[bank * slots_per_level + index].first; node != nullptr;
           node = node->next_)
        ++n;
    }
    return n;
  }

  // Whether W_j is the first sub-window of W_{j+1}: elapsed_'s digit j is 63 (never at the
  // top level, whose digit is at most 15).
  bool chained(unsigned j) const noexcept {
    return j + 1 < num_levels && wheel_geometry::digit_of(elapsed_, j) == slots_per_level - 1;
  }

  // T_j, the first tick of W_j. Precondition: the window exists (elapsed_ is not in the last
  // level-j slot of the tick range), as it does for a stage or source with entries.
  tick_type window_start(unsigned j) const noexcept {
    const unsigned shift = j * slot_bits;
    return ((elapsed_ >> shift) + 1) << shift;
  }

  // The list that feeds S_j (see the design note). For level 10 in its last slot, an empty
  // slot that no deadline can reach.
  const slot_list& source(unsigned j) const noexcept {
    if (chained(j))
      return lists_[stage_bank_[j + 1] * slots_per_level];
    return lists_[level_bank_[j] * slots_per_level + wheel_geometry::digit_of(elapsed_, j) + 1];
  }

  // The first tick of the earliest window with entries, in a stage or still on its level,
  // or empty. Level 0 is not looked at. Out of line: advance() calls it only once level 0 is
  // empty, and inlined there it made advance() too big to inline into the owner's expiry
  // turn (callgrind_ops fire, 271 to 282 instructions a timer).
  [[gnu::noinline]] std::optional<tick_type> upper_event() const noexcept {
    std::optional<tick_type> best;
    for (unsigned level = 1; level < num_levels; ++level) {
      if (const tick_type bits = bits_[level_bank_[level]]; bits != 0) {
        best =
            wheel_geometry::slot_start(elapsed_, level, static_cast<unsigned>(countr_zero(bits)));
        break;
      }
    }
    // The windows start in order: T_1 <= T_2 <= ...
    for (unsigned j = 1; j < num_levels; ++j) {
      if (bits_[stage_bank_[j]] != 0) {
        const tick_type t = window_start(j);
        if (!best || t < *best)
          best = t;
        break;
      }
    }
    return best;
  }

  // Time reaches `start`, the first tick of a window with entries: its sources are staged
  // (elapsed_ one tick before it, so that every stage below chains to it), then the stages
  // are swapped in as the levels below. Returns false, elapsed_ before `start`, if `moves`
  // ran out first.
  bool enter(tick_type start, std::size_t& moves) noexcept {
    // `start` is the earliest thing due: every level below and their stages are empty.
    set_time(start - 1);
    const auto top = static_cast<unsigned>(countr_zero(start)) / slot_bits;
    std::size_t whole = unlimited;
    if (!stage_group(1, top, refile_whole_ ? whole : moves)) {
      staging_pending_ = true;
      return false;
    }
    set_time(start);
    for (unsigned j = 1; j <= top; ++j) {
      const std::uint8_t bank = stage_bank_[j];
      stage_bank_[j] = level_bank_[j - 1];
      level_bank_[j - 1] = bank;
    }
    set_firsts(top);
    staging_pending_ = true; // the new levels' next slots
    return true;
  }

  // Stages every source, the earliest windows first, within `moves`; a group whose staging
  // is paced (not urgent()) only in the first call of a tick, which spends the tick's share.
  void stage(std::size_t& moves) noexcept {
    const bool share_spent = paced_at_ == elapsed_;
    bool left = false;
    unsigned bottom = 1;
    for (unsigned j = 1; j < num_levels; ++j) {
      if (chained(j))
        continue; // W_j is part of W_{j+1}'s group
      const unsigned group = bottom;
      bottom = j + 1;
      const waiting state = group_state(group, j);
      if (state == waiting::none)
        continue;
      if (state == waiting::paced) {
        if (share_spent) {
          left = true;
          continue;
        }
        paced_at_ = elapsed_;
      }
      if (!stage_group(group, j, moves))
        return;
    }
    staging_pending_ = left;
  }

  // What the group bottom..top has waiting to be staged: nothing; lists with more than half
  // of their lead left before the window (W_top, where W_bottom starts too) comes due, to
  // pace; or a list with at most half, urgent. A list's lead is the time from the moment it
  // became a source to the window: 64^top ticks for the level-top source, 64^(j-1) for
  // bucket 0 of S_j, a source once the stage below chains to it. So a slot that pacing, then
  // urgent turns, could not stage before the stages below chained to it stays urgent.
  enum class waiting { none, paced, urgent };
  waiting group_state(unsigned bottom, unsigned top) const noexcept {
    const tick_type left = window_start(top) - elapsed_;
    waiting state = waiting::none;
    const auto note = [&](unsigned lead_level) {
      if (left <= (tick_type{1} << (lead_level * slot_bits - 1)))
        state = waiting::urgent;
      else if (state == waiting::none)
        state = waiting::paced;
    };
    if (lists_[level_bank_[top] * slots_per_level + wheel_geometry::digit_of(elapsed_, top) + 1]
            .first != nullptr)
      note(top);
    for (unsigned j = top; j > bottom; --j) {
      if (lists_[stage_bank_[j] * slots_per_level].first != nullptr)
        note(j - 1);
    }
    return state;
  }

  // The tick by which advance() must be called for the staging that waits: now() if a
  // waiting group is urgent, or paced and without its share of this tick; else the next
  // tick. Empty when nothing waits after all (staging_pending_ is a "may"): the flag then
  // costs no turn, and the next advance() clears it.
  std::optional<tick_type> staging_wake() const noexcept {
    bool paced = false;
    unsigned bottom = 1;
    for (unsigned j = 1; j < num_levels; ++j) {
      if (chained(j))
        continue;
      const unsigned group = bottom;
      bottom = j + 1;
      const waiting state = group_state(group, j);
      if (state == waiting::none)
        continue;
      if (state == waiting::urgent || paced_at_ != elapsed_)
        return elapsed_;
      paced = true;
    }
    if (!paced)
      return std::nullopt;
    return elapsed_ != max_tick ? elapsed_ + 1 : elapsed_;
  }

  // staging_wake() for the group that holds the source of `level`, which waits.
  tick_type group_wake(unsigned level) const noexcept {
    unsigned bottom = level;
    while (bottom > 1 && chained(bottom - 1))
      --bottom;
    unsigned top = level;
    while (chained(top))
      ++top;
    if (group_state(bottom, top) == waiting::urgent || paced_at_ != elapsed_ ||
        elapsed_ == max_tick)
      return elapsed_;
    return elapsed_ + 1;
  }

  // Stages the group of chained windows bottom..top (all starting at T_top): the level-top
  // source into S_top, then bucket 0 of each stage into the one below. Returns false if
  // `moves` ran out first.
  bool stage_group(unsigned bottom, unsigned top, std::size_t& moves) noexcept {
    if (!drain(lists_[level_bank_[top] * slots_per_level + wheel_geometry::digit_of(elapsed_, top) +
                      1],
               top, moves))
      return false;
    for (unsigned j = top; j > bottom; --j) {
      if (!drain(lists_[stage_bank_[j] * slots_per_level], j - 1, moves))
        return false;
    }
    return true;
  }

  // Moves the entries of `from`, oldest first, into S_j by digit j-1 of their deadlines.
  bool drain(slot_list& from, unsigned j, std::size_t& moves) noexcept {
    const unsigned base = stage_bank_[j] * slots_per_level;
    while (from.first != nullptr) {
      if (moves == 0)
        return false;
      --moves;
      ++moved_;
      wheel_node& node = *from.first;
      unlink(node);
      append(node, base + wheel_geometry::digit_of(node.deadline_, j - 1));
    }
    return true;
  }

  // Inline: on the path of every wait (timer_queue::file), as it was before staging.
  [[gnu::always_inline]] void link(wheel_node& node, tick_type when) noexcept {
    const unsigned level = wheel_geometry::level_of(elapsed_, when);
    const unsigned shift = level * slot_bits;
    const tick_type digits = when >> shift; // the slot, and the digits above it
    unsigned slot;
    // A level's next slot (its window) is staged. While its source is known to be empty
    // (window_digits_), an entry for it goes into the stage: inline, on the path of about
    // half of the deadlines a minute or more ahead (those in the next level-3 slot), where
    // out of line it cost 30 instructions each, 8% of callgrind_ops arm.
    if (digits == window_digits_[level]) {
      // Digit level-1, from the shift at hand (digit_of() from the level: two instructions
      // more). Level 0 has no window: its window_digits_ matches no deadline.
      assert(level != 0);
      const auto bucket =
          static_cast<unsigned>(when >> (shift - slot_bits)) & (slots_per_level - 1);
      // Bucket 0 may be a source itself: out of line, and last (a tail call, so the hot
      // path saves no register for it).
      if (bucket == 0)
        return link_window(node, level);
      slot = stage_first_[level] + bucket;
    } else {
      slot = level_first_[level] + static_cast<unsigned>(digits & (slots_per_level - 1));
    }
    // Else the entry joins its slot, which for the window is its source while that waits,
    // behind the older entries there (staging is then pending already: the invariant of
    // staging_pending_). Only an empty list may be a window's source that has emptied
    // since the time moved: looked at there, where a bit is set anyway.
    slot_list& list = lists_[slot];
    if (list.last == nullptr)
      return link_first(node, level, slot);
    node.slot_ = static_cast<std::uint16_t>(slot);
    node.next_ = nullptr;
    node.prev_ = list.last;
    list.last->next_ = &node;
    list.last = &node;
  }

  // Appends `node` to the empty list `slot` of `level`, or, when that list is the window's
  // source, empty since the time moved (window_digits_), files it into the stage. The
  // deadline is read from the node: the effective one wherever a window can be (on level
  // 0, which has none, the deadline may be older, and window_digits_[0] is window_next_[0]).
  [[gnu::noinline]] void link_first(wheel_node& node, unsigned level, unsigned slot) noexcept {
    if ((node.deadline_ >> (level * slot_bits)) == window_next_[level] &&
        window_digits_[level] != window_next_[level])
      return link_window(node, level);
    append(node, slot);
  }

  // Files `node`, due in the window of `level` (>= 1) whose source is empty, into the stage:
  // for a source that has emptied since the time moved (link() then files the window's next
  // deadlines there itself), and for bucket 0, which is the source of S_{level-1} while
  // that stage chains to it (the next turn stages it further). A deadline in a window is
  // never before now(): the node's is the effective one.
  [[gnu::noinline]] void link_window(wheel_node& node, unsigned level) noexcept {
    window_digits_[level] = window_next_[level];
    const unsigned bucket = wheel_geometry::digit_of(node.deadline_, level - 1);
    if (bucket == 0 && level > 1 && chained(level - 1))
      staging_pending_ = true;
    append(node, stage_first_[level] + bucket);
  }

  // level_first_ and stage_first_ of levels and stages 0 to `top`, after their banks changed.
  void set_firsts(unsigned top) noexcept {
    for (unsigned k = 0; k <= top; ++k) {
      level_first_[k] = static_cast<std::uint16_t>(level_bank_[k] * slots_per_level);
      stage_first_[k] = static_cast<std::uint16_t>(k == 0 ? 0 : stage_bank_[k] * slots_per_level);
    }
  }

  // Moves the time to `t`, and window_next_ with it; every window's source is then taken to
  // wait (window_digits_), until link() finds it empty.
  void set_time(tick_type t) noexcept {
    elapsed_ = t;
    window_next_[0] = t - 1;
    window_digits_[0] = t - 1;
    for (unsigned level = 1; level < num_levels; ++level) {
      window_next_[level] = (t >> (level * slot_bits)) + 1;
      window_digits_[level] = max_tick;
    }
  }

  // wake_for() of a deadline in the window of `level` (its slot `index`).
  [[gnu::noinline]] tick_type wake_for_window(tick_type when, unsigned level,
                                              unsigned index) const noexcept {
    if (lists_[level_bank_[level] * slots_per_level + index].first != nullptr)
      return group_wake(level); // joins the source, which waits
    if (level == 1)
      return when; // in S_1, at its own tick
    if (wheel_geometry::digit_of(when, level - 1) != 0)
      return window_start(level); // in its stage: the window comes, the next slot is staged
    // Bucket 0, staged further once the stage below chains to it.
    const tick_type chain = window_start(level) - (tick_type{1} << ((level - 1) * slot_bits));
    return chain > elapsed_ ? chain : elapsed_;
  }

  // Files `node` for `when` where staging would have taken it: into a window, the most
  // refined stage of the chain source -> S_j -> S_{j-1}..., whatever the lists upstream
  // hold. For rewind(), which re-files entries older than every entry of their tick left
  // upstream.
  void link_refined(wheel_node& node, tick_type when) noexcept {
    const unsigned level = wheel_geometry::level_of(elapsed_, when);
    const unsigned index = wheel_geometry::digit_of(when, level);
    unsigned slot = level_bank_[level] * slots_per_level + index;
    if (level != 0 && index == wheel_geometry::digit_of(elapsed_, level) + 1) {
      for (unsigned j = level;; --j) {
        const unsigned bucket = wheel_geometry::digit_of(when, j - 1);
        slot = stage_bank_[j] * slots_per_level + bucket;
        if (bucket != 0 || j == 1 || !chained(j - 1))
          break;
      }
    }
    append(node, slot);
  }

  // Appended, to keep one tick's entries first in, first out.
  void append(wheel_node& node, unsigned slot) noexcept {
    node.slot_ = static_cast<std::uint16_t>(slot);
    slot_list& list = lists_[slot];
    node.next_ = nullptr;
    node.prev_ = list.last;
    if (list.last == nullptr) {
      list.first = &node;
      bits_[slot / slots_per_level] |= tick_type{1} << (slot % slots_per_level);
    } else {
      list.last->next_ = &node;
    }
    list.last = &node;
  }

  // Puts back a node just taken from the head of level-0 list `slot` (see advance()).
  void relink_front(wheel_node& node, unsigned slot) noexcept {
    slot_list& list = lists_[slot];
    node.slot_ = static_cast<std::uint16_t>(slot);
    node.prev_ = nullptr;
    node.next_ = list.first;
    if (list.first == nullptr) {
      list.last = &node;
      bits_[slot / slots_per_level] |= tick_type{1} << (slot % slots_per_level);
    } else {
      list.first->prev_ = &node;
    }
    list.first = &node;
    ++size_;
  }

  [[gnu::always_inline]] void unlink(wheel_node& node) noexcept {
    const unsigned slot = node.slot_;
    slot_list& list = lists_[slot];
    wheel_node* const next = node.next_;
    wheel_node* const prev = node.prev_;
    (prev != nullptr ? prev->next_ : list.first) = next;
    (next != nullptr ? next->prev_ : list.last) = prev;
    if (list.first == nullptr)
      bits_[slot / slots_per_level] &= ~(tick_type{1} << (slot % slots_per_level));
    node.slot_ = wheel_node::unlinked;
  }

  // Empties `bank` onto the chain at `tail`, slot by slot in increasing order.
  void take_bank(unsigned bank, wheel_node**& tail) noexcept {
    while (bits_[bank] != 0) {
      const auto index = static_cast<unsigned>(countr_zero(bits_[bank]));
      slot_list& list = lists_[bank * slots_per_level + index];
      *tail = list.first;
      tail = &list.last->next_;
      list.first = list.last = nullptr;
      bits_[bank] &= ~(tick_type{1} << index);
    }
  }

  template <typename Check>
  void check_bank(unsigned bank, unsigned level, const char* role, std::size_t& count,
                  Check&& check) const {
    for (unsigned index = 0; index < slots_per_level; ++index) {
      const unsigned slot = bank * slots_per_level + index;
      const slot_list& list = lists_[slot];
      const bool bit = ((bits_[bank] >> index) & 1u) != 0;
      if (bit != (list.first != nullptr))
        fail("occupancy bit disagrees with slot list", role, level, index);
      if ((list.first == nullptr) != (list.last == nullptr))
        fail("slot list has one end only", role, level, index);
      if (list.first == nullptr)
        continue;
      if (list.first->prev_ != nullptr || list.last->next_ != nullptr)
        fail("slot list ends are not its first and last nodes", role, level, index);
      for (const wheel_node* node = list.first; node != nullptr; node = node->next_) {
        if (++count > size_)
          detail::throw_exception(
              std::logic_error("timing_wheel: more nodes linked than size, or a cycle"));
        if (node->slot_ != slot)
          fail("node records another slot", role, level, index);
        if (node->next_ != nullptr ? node->next_->prev_ != node : node != list.last)
          fail("broken list links", role, level, index);
        if (const char* what = check(*node, index))
          fail(what, role, level, index);
      }
    }
  }

  [[noreturn]] static void fail(const char* what, const char* role, unsigned level,
                                unsigned index) {
    detail::throw_exception(std::logic_error(std::string("timing_wheel: ") + what + " (" + role +
                                             " " + std::to_string(level) + ", slot " +
                                             std::to_string(index) + ")"));
  }

  // Entries moved per advance() at most, but for a window re-filed whole. Invariant: not 0
  // unless refile_whole_.
  std::size_t cascade_limit_ = unlimited;
  // See set_refile_whole().
  bool refile_whole_ = false;
  // Entries moved by the current (or last) advance(): not checked against cascade_limit_,
  // which may have changed since.
  std::size_t moved_ = 0;
  // Current time. Invariant: every entry on a level is placed relative to it by the XOR
  // rule; every entry in stage S_j lies in W_j (derived from it), in the bucket of its
  // digit j-1.
  tick_type elapsed_;
  // Invariant: window_next_[k] == (elapsed_ >> 6k) + 1 for k >= 1, the digits of level k's
  // next slot (its window) with those above, as link() compares a deadline's. Level 0 has
  // none: window_next_[0] is a tick that no effective deadline on level 0 equals, the time
  // last given to set_time() less one (below elapsed_, which only grows until the next
  // set_time(); from 0, max_tick, which is not on level 0).
  tick_type window_next_[num_levels];
  // window_next_[k], once link() has found level k's window source empty since the time
  // last moved (set_time()); else max_tick, which no deadline's digits above level k >= 1
  // equal. Invariant: window_digits_[k] is window_next_[k] or (k >= 1) max_tick, and
  // window_next_[k] only while the level's next slot is empty (nothing is appended to it
  // then: link() files its deadlines into the stage).
  tick_type window_digits_[num_levels];
  // Number of linked entries.
  std::size_t size_ = 0;
  // Set whenever a source may hold entries (time moved to other windows, a stage ran out of
  // moves, an insert into bucket 0 of a chained stage; an insert appended to a source finds
  // it set already); cleared by stage() once every source is empty.
  // Invariant: false implies every source is empty.
  bool staging_pending_ = false;
  // The tick whose share of paced staging stage() has given (see "Pacing" in the design
  // note); max_tick before any.
  tick_type paced_at_ = max_tick;
  // Which bank holds level k, and stage S_j (j >= 1); together, every bank once.
  std::uint8_t level_bank_[num_levels];
  std::uint8_t stage_bank_[num_levels];
  // Invariant: level_first_[k] == level_bank_[k] * 64 and stage_first_[j] == stage_bank_[j]
  // * 64 (j >= 1; stage_first_[0] is 0), their first slots: link() adds a digit to them,
  // one instruction fewer than from the bank.
  std::uint16_t level_first_[num_levels];
  std::uint16_t stage_first_[num_levels];
  // Bit i of bits_[b] is set iff lists_[b * 64 + i] is non-empty; least-significant bit is
  // slot 0.
  tick_type bits_[num_banks] = {};
  // Ends of each slot's list, oldest entry first; both nullptr iff the slot is empty. A
  // linked node's slot_ indexes it.
  slot_list lists_[num_slots];
};

} // namespace asio_wheel::detail

#endif // ASIO_WHEEL_DETAIL_TIMING_WHEEL_HPP
