//
// detail/node_fifo.hpp
// ~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_DETAIL_NODE_FIFO_HPP
#define ASIO_WHEEL_DETAIL_NODE_FIFO_HPP

#include <asio_wheel/detail/timing_wheel.hpp>

#include <cassert>
#include <cstddef>
#include <cstdint>

namespace asio_wheel::detail {

// A first-in first-out list of wheel nodes, each with a 64-bit key, linked through the
// fields the node uses in a timing wheel: its two links, its deadline (the key) and its slot
// (the list's id). So a node is in one wheel or in one list, never both, and waiting in a
// list costs it nothing more than waiting in the wheel (a heartbeat_group member stays 56
// bytes). The scaled timeouts keep their waiters in such lists, one per distinct range,
// ordered by the time they joined (see heartbeat_group.hpp and detail/scaled_queue.hpp).
//
// The ids are above the wheel's slot numbers and below its "unlinked" mark, so that
// is_linked() stays true for a node in a list (a wheel's insert() asserts against it) and
// the slot alone tells where a node is. Every operation is O(1). Not thread-safe.
class node_fifo {
public:
  static constexpr std::uint16_t first_id = 0x8000;
  static constexpr std::uint16_t last_id = 0xfffe;
  static_assert(first_id >= timing_wheel::num_levels * timing_wheel::slots_per_level &&
                last_id < wheel_node::unlinked);

  explicit node_fifo(std::uint16_t id) noexcept : id_(id) {
    assert(id >= first_id && id <= last_id);
  }

  node_fifo(const node_fifo&) = delete;
  node_fifo& operator=(const node_fifo&) = delete;

  ~node_fifo() { assert(empty() && "a node_fifo was destroyed with nodes linked"); }

  std::uint16_t id() const noexcept { return id_; }
  bool empty() const noexcept { return head_ == nullptr; }
  std::size_t size() const noexcept { return size_; }

  // Whether `node` is linked in this list.
  bool holds(const wheel_node& node) const noexcept { return node.slot_ == id_; }
  // The id of the list `node` is linked in; 0 if it is in none (it may be in a wheel).
  static std::uint16_t id_of(const wheel_node& node) noexcept {
    return node.slot_ >= first_id && node.slot_ <= last_id ? node.slot_ : 0;
  }

  static std::uint64_t key(const wheel_node& node) noexcept { return node.deadline_; }

  // Precondition: not empty.
  wheel_node& front() const noexcept { return *head_; }
  wheel_node& back() const noexcept { return *tail_; }

  // Precondition: `node` is not linked (in a wheel or a list).
  void push_back(wheel_node& node, std::uint64_t key) noexcept {
    assert(!node.is_linked());
    node.deadline_ = key;
    node.slot_ = id_;
    node.next_ = nullptr;
    node.prev_ = tail_;
    (tail_ != nullptr ? tail_->next_ : head_) = &node;
    tail_ = &node;
    ++size_;
  }

  // Puts back a node taken from the front, with its key. Precondition: not linked.
  void push_front(wheel_node& node, std::uint64_t key) noexcept {
    assert(!node.is_linked());
    node.deadline_ = key;
    node.slot_ = id_;
    node.prev_ = nullptr;
    node.next_ = head_;
    (head_ != nullptr ? head_->prev_ : tail_) = &node;
    head_ = &node;
    ++size_;
  }

  // Precondition: not empty.
  wheel_node& pop_front() noexcept {
    wheel_node& node = *head_;
    remove(node);
    return node;
  }

  // Precondition: holds(node).
  void remove(wheel_node& node) noexcept {
    assert(holds(node));
    (node.prev_ != nullptr ? node.prev_->next_ : head_) = node.next_;
    (node.next_ != nullptr ? node.next_->prev_ : tail_) = node.prev_;
    node.slot_ = wheel_node::unlinked;
    --size_;
  }

  // Unlinks every node, calling on_remove(wheel_node&) after each is unlinked.
  template <typename OnRemove>
  void clear(OnRemove&& on_remove) {
    while (head_ != nullptr)
      on_remove(pop_front());
  }

private:
  wheel_node* head_ = nullptr;
  wheel_node* tail_ = nullptr;
  std::size_t size_ = 0;
  std::uint16_t id_;
};

} // namespace asio_wheel::detail

#endif // ASIO_WHEEL_DETAIL_NODE_FIFO_HPP
