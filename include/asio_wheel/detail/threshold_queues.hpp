//
// detail/threshold_queues.hpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_DETAIL_THRESHOLD_QUEUES_HPP
#define ASIO_WHEEL_DETAIL_THRESHOLD_QUEUES_HPP

// Design of the scaled thresholds (timeout_scale.hpp), after Envoy's scaled range timers
// (envoy source/common/event/scaled_range_timer_manager_impl.{h,cc}).
//
// Each threshold is a range [min, max]; the threshold in force is min + f * (max - min) for
// the context's factor f. A member first waits, in the group's wheel, for min since its last
// touch: no factor can bring its event earlier. Once min has passed (with no touch since),
// it joins the queue of that event (ping or drop: all members share the ranges, so one
// queue each), keyed by its own last touch + min: a heap ordered by key
// (detail/node_heap.hpp), whose head is the earliest due at every factor. A queue is due at
// head key + f * (max - min), and the group's one wait is armed for the earliest of the
// wheel's next expiry and the queues' heads. A change of f moves two instants, not the
// members: the group re-arms its wait, on its own executor, and a member already past its
// new threshold is taken in the next run. O(1) work per change, no walk over the members.
//
// The keys are the members' own, however late a member joins: one taken from a queue (or
// the wheel) that was touched since is filed again from its new stamp, in the wheel if its
// new min is still ahead, else in the queue with that stamp + min, which may be long past
// (a touch soon after it joined, with a span longer than min; or a ping whose drop's min
// has passed). A FIFO would have had to raise such a key to its tail's, making the member
// as late as the members ahead of it (issue 23). So every member is taken within a tick of
// the group's wheel of its own threshold at the factor in force (or of the change of the
// factor that made it due; on a clock stepped back, late by up to the step, as everywhere
// else), and judged by its own stamp and the factor read at that moment before an event is
// delivered (never early with respect to the threshold in force then).
//
// The queue's links are the wheel's (a member is in the wheel or in one queue, so the member
// stays 56 bytes); the heaps' arrays cost 24 bytes per member queued, at their peak. If an
// array cannot grow, the member waits in the wheel for the range's max instead (its latest
// threshold at any factor): late under memory pressure, never early.
//
// A group whose ranges are all fixed (min == max, plain durations) never uses the queues and
// does not listen to the scale: it works, and costs, exactly as before ranges existed.

#include <asio_wheel/detail/node_heap.hpp>
#include <asio_wheel/detail/saturating_time.hpp>
#include <asio_wheel/detail/wheel_node.hpp>

#include <cstddef>
#include <cstdint>

namespace asio_wheel::detail {

// A heartbeat group's two queues of members past the minimum of their next threshold (see
// the design note above), indexed by the event they wait for, with the group's two ranges.
// Used on the group's executor only.
template <typename Clock, typename Range>
class threshold_queues {
public:
  using duration = typename Clock::duration;
  using time_point = typename Clock::time_point;

  static constexpr std::size_t ping = 0;
  static constexpr std::size_t drop = 1;
  static constexpr std::size_t none = 2;

  threshold_queues(const Range& ping_after, const Range& drop_after) noexcept
      : range_{ping_after, drop_after} {}

  const Range& range(std::size_t q) const noexcept { return range_[q]; }
  std::size_t size() const noexcept { return queue_[ping].size() + queue_[drop].size(); }

  // Unlinks `m` if it waits in a queue; false if it does not.
  bool remove(wheel_node& m) noexcept {
    for (auto& h : queue_) {
      if (h.holds(m)) {
        h.remove(m);
        return true;
      }
    }
    return false;
  }

  template <typename OnRemove>
  void clear(OnRemove&& on_remove) {
    queue_[ping].clear(on_remove);
    queue_[drop].clear(on_remove);
  }

  // Queues `m`, past the minimum `min_at` of the range of queue `q` (its own last touch +
  // min, however long ago). Throws std::bad_alloc if the queue cannot grow, with nothing
  // changed.
  void push(std::size_t q, wheel_node& m, const time_point& min_at) { queue_[q].push(m, min_at); }

  // The earliest instant a head is due at factor f; false if both queues are empty.
  bool earliest(double f, time_point& at) const noexcept {
    return due_head((time_point::max)(), f, at) != none;
  }

  // The queue whose head is due by `now` at factor f the earliest (ping's on a tie), its
  // instant in `at`; none if no head is.
  std::size_t due_head(const time_point& now, double f, time_point& at) const noexcept {
    std::size_t q = none;
    for (std::size_t c : {ping, drop}) {
      if (queue_[c].empty())
        continue;
      const time_point t = head_due(c, f);
      if (t <= now && (q == none || t < at)) {
        q = c;
        at = t;
      }
    }
    return q;
  }

  wheel_node& pop(std::size_t q) noexcept { return queue_[q].pop_front(); }

private:
  // When the head of queue `q` is due at factor f: its key plus the scaled part of its
  // range. Precondition: not empty.
  time_point head_due(std::size_t q, double f) const noexcept {
    const Range& r = range_[q];
    return saturating_add(queue_[q].front_key(), r.at(f) - r.min);
  }

  Range range_[2];
  using heap = node_heap<time_point>;
  heap queue_[2] = {heap(heap::first_id), heap(heap::first_id + 1)};
};

} // namespace asio_wheel::detail

#endif // ASIO_WHEEL_DETAIL_THRESHOLD_QUEUES_HPP
