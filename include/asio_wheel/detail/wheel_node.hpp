//
// detail/wheel_node.hpp
// ~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_DETAIL_WHEEL_NODE_HPP
#define ASIO_WHEEL_DETAIL_WHEEL_NODE_HPP

#include <asio_wheel/detail/wheel_geometry.hpp>

#include <cassert>
#include <cstdint>

namespace asio_wheel::detail {

template <typename Key>
class node_heap;

// An entry of the wheel, embedded in (or a base of) the caller's object. Intrusive, so that
// the wheel (detail/timing_wheel.hpp) never allocates; 32 bytes.
class wheel_node {
public:
  wheel_node() noexcept = default;
  wheel_node(const wheel_node&) = delete;
  wheel_node& operator=(const wheel_node&) = delete;

  ~wheel_node() { assert(!is_linked() && "a wheel_node was destroyed while still in a wheel"); }

  bool is_linked() const noexcept { return slot_ != unlinked; }

  // The deadline given to the last insert().
  tick_type deadline() const noexcept { return deadline_; }

private:
  friend class timing_wheel;
  // A node waits in a wheel or in a node_heap (detail/node_heap.hpp), through the same fields.
  template <typename Key>
  friend class node_heap;

  static constexpr std::uint16_t unlinked = 0xffff;

  // Neighbours in the slot's list; nullptr at its ends. Meaningless while not linked, or
  // linked in a node_heap.
  wheel_node* next_ = nullptr;
  wheel_node* prev_ = nullptr;
  // In a node_heap, the node's position in its array.
  tick_type deadline_ = 0;
  // In a wheel, level * slots_per_level + slot number; in a node_heap, its id (above every
  // slot of a wheel); else `unlinked`.
  std::uint16_t slot_ = unlinked;
};

} // namespace asio_wheel::detail

#endif // ASIO_WHEEL_DETAIL_WHEEL_NODE_HPP
