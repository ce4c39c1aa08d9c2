//
// detail/node_heap.hpp
// ~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_DETAIL_NODE_HEAP_HPP
#define ASIO_WHEEL_DETAIL_NODE_HEAP_HPP

#include <asio_wheel/detail/timing_wheel.hpp>
#include <asio_wheel/detail/wheel_node.hpp>

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace asio_wheel::detail {

// A min-heap of wheel nodes by key, first in first out among equal keys: the queue of one
// span of the scaled timeouts (detail/scaled_queue.hpp, detail/threshold_queues.hpp).
//
// Why a heap and not a FIFO: a timer joins its span's queue keyed by its own last activity
// plus the range's minimum, and it may join long after that instant (a touch found only when
// its previous wait ends, a wait started late, another minimum in the same span). A FIFO
// could only keep its head the earliest by raising such a key to the tail's, which made the
// timer as late as the one ahead of it: minutes, for long ranges (issue 23). Ordered by the
// true keys, the head is the earliest due at every factor (due = key + f * span is monotone
// in the key), so the queue's one wait still covers every member and a change of the factor
// still moves one wait per queue.
//
// Costs: push O(1) when the key is not below its parent's, which is the common case (a
// timer joining on time has a key at or after every other's), else O(log n); pop and remove
// O(log n). The key, a sequence number (for ties) and the node live in the heap's array, so
// comparisons never touch the nodes; a node moved writes its new position into its own
// `deadline_`, and its heap id into `slot_` (the fields it uses in a wheel: a node is in one
// wheel or one heap, never both, and stays 32 bytes). The array grows as needed and never
// shrinks: 24 bytes per node at the peak. push() is the only call that may allocate.
//
// The ids are above the wheel's slot numbers and below its "unlinked" mark, so that
// is_linked() stays true for a node in a heap (a wheel's insert() asserts against it) and
// the slot alone tells where a node is. Not thread-safe.
template <typename Key>
class node_heap {
public:
  static constexpr std::uint16_t first_id = 0x8000;
  static constexpr std::uint16_t last_id = 0xfffe;
  static_assert(first_id >= timing_wheel::num_slots && last_id < wheel_node::unlinked);

  explicit node_heap(std::uint16_t id) noexcept : id_(id) {
    assert(id >= first_id && id <= last_id);
  }

  node_heap(const node_heap&) = delete;
  node_heap& operator=(const node_heap&) = delete;

  ~node_heap() { assert(empty() && "a node_heap was destroyed with nodes linked"); }

  std::uint16_t id() const noexcept { return id_; }
  bool empty() const noexcept { return entries_.empty(); }
  std::size_t size() const noexcept { return entries_.size(); }

  // Whether `node` is linked in this heap.
  bool holds(const wheel_node& node) const noexcept { return node.slot_ == id_; }
  // The id of the heap `node` is linked in; 0 if it is in none (it may be in a wheel).
  static std::uint16_t id_of(const wheel_node& node) noexcept {
    return node.slot_ >= first_id && node.slot_ <= last_id ? node.slot_ : 0;
  }

  // The node with the least key (the first pushed among equals), and its key.
  // Precondition: not empty.
  wheel_node& front() const noexcept { return *entries_.front().node; }
  const Key& front_key() const noexcept { return entries_.front().key; }

  // Links `node` with `key`. Precondition: `node` is not linked (in a wheel or a heap).
  // Throws std::bad_alloc if the array cannot grow, with nothing changed; never once a node
  // was popped or removed since the array last grew (its room is kept).
  void push(wheel_node& node, const Key& key) {
    assert(!node.is_linked());
    entries_.push_back(entry{key, seq_++, &node});
    node.slot_ = id_;
    sift_up(entries_.size() - 1);
  }

  // Precondition: not empty.
  wheel_node& pop_front() noexcept {
    wheel_node& node = front();
    remove(node);
    return node;
  }

  // Precondition: holds(node).
  void remove(wheel_node& node) noexcept {
    assert(holds(node));
    const auto i = static_cast<std::size_t>(node.deadline_);
    node.slot_ = wheel_node::unlinked;
    const std::size_t last = entries_.size() - 1;
    if (i != last) {
      entries_[i] = entries_[last];
      entries_.pop_back();
      // The moved entry goes up if it is now below its parent, else down.
      if (i > 0 && less(entries_[i], entries_[parent(i)]))
        sift_up(i);
      else
        sift_down(i);
    } else {
      entries_.pop_back();
    }
  }

  // Unlinks every node, calling on_remove(wheel_node&) after each is unlinked.
  template <typename OnRemove>
  void clear(OnRemove&& on_remove) {
    while (!entries_.empty())
      on_remove(pop_front());
  }

private:
  struct entry {
    Key key;
    std::uint64_t seq;
    wheel_node* node;
  };

  static bool less(const entry& a, const entry& b) noexcept {
    return a.key < b.key || (!(b.key < a.key) && a.seq < b.seq);
  }
  static std::size_t parent(std::size_t i) noexcept { return (i - 1) / 2; }

  void place(std::size_t i, const entry& e) noexcept {
    entries_[i] = e;
    e.node->deadline_ = i;
  }

  void sift_up(std::size_t i) noexcept {
    const entry e = entries_[i];
    while (i > 0 && less(e, entries_[parent(i)])) {
      place(i, entries_[parent(i)]);
      i = parent(i);
    }
    place(i, e);
  }

  // Floyd's bottom-up descent: the hole goes down to a leaf along the lesser children, then
  // the entry goes up from there, no higher than `i`. The entry is the array's last, which
  // usually belongs near the bottom (most keys come in order): one comparison per level
  // instead of two.
  void sift_down(std::size_t i) noexcept {
    const entry e = entries_[i];
    const std::size_t n = entries_.size();
    const std::size_t top = i;
    for (std::size_t child = 2 * i + 1; child < n; i = child, child = 2 * i + 1) {
      if (child + 1 < n && less(entries_[child + 1], entries_[child]))
        ++child;
      place(i, entries_[child]);
    }
    while (i > top && less(e, entries_[parent(i)])) {
      place(i, entries_[parent(i)]);
      i = parent(i);
    }
    place(i, e);
  }

  // A binary heap by (key, seq); each node's deadline_ is its index here.
  std::vector<entry> entries_;
  // The order of pushes, for ties.
  std::uint64_t seq_ = 0;
  std::uint16_t id_;
};

} // namespace asio_wheel::detail

#endif // ASIO_WHEEL_DETAIL_NODE_HEAP_HPP
