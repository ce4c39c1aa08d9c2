//
// detail/look_queue.hpp
// ~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_DETAIL_LOOK_QUEUE_HPP
#define ASIO_WHEEL_DETAIL_LOOK_QUEUE_HPP

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace asio_wheel::detail {

// A heartbeat group's looks (see basic_heartbeat_group::place()): members that wait for
// their drop in the drop's queue, keyed by the instant each must be looked at by, for a
// touch since. A second link for a member already linked through its wheel_node, at the
// cost of one index in the member (T::look_pos_: its position + 1, 0 when not queued), so
// that a member stays within 64 bytes; the array costs 16 bytes per member queued, at its
// peak. A binary heap; used on the group's executor only.
template <typename T, typename Key>
class look_queue {
public:
  look_queue() = default;
  look_queue(const look_queue&) = delete;
  look_queue& operator=(const look_queue&) = delete;
  ~look_queue() { assert(entries_.empty() && "a look_queue was destroyed with members"); }

  bool empty() const noexcept { return entries_.empty(); }
  static bool holds(const T& m) noexcept { return m.look_pos_ != 0; }

  // Precondition: not empty.
  T& front() const noexcept { return *entries_.front().member; }
  const Key& front_key() const noexcept { return entries_.front().key; }

  // Precondition: !holds(m). Throws std::bad_alloc if the array cannot grow, with nothing
  // changed.
  void push(T& m, const Key& key) {
    assert(!holds(m));
    entries_.push_back(entry{key, &m});
    place(entries_.size() - 1);
    sift_up(entries_.size() - 1);
  }

  // Unlinks `m` if it is queued.
  void remove(T& m) noexcept {
    if (!holds(m))
      return;
    const std::size_t i = m.look_pos_ - 1;
    m.look_pos_ = 0;
    const std::size_t last = entries_.size() - 1;
    if (i != last) {
      entries_[i] = entries_[last];
      entries_.pop_back();
      place(i);
      if (i > 0 && entries_[i].key < entries_[parent(i)].key)
        sift_up(i);
      else
        sift_down(i);
    } else {
      entries_.pop_back();
    }
  }

  // Precondition: not empty.
  T& pop_front() noexcept {
    T& m = front();
    remove(m);
    return m;
  }

  void clear() noexcept {
    for (const entry& e : entries_)
      e.member->look_pos_ = 0;
    entries_.clear();
  }

private:
  struct entry {
    Key key;
    T* member;
  };

  static std::size_t parent(std::size_t i) noexcept { return (i - 1) / 2; }

  void place(std::size_t i) noexcept {
    entries_[i].member->look_pos_ = static_cast<std::uint32_t>(i + 1);
  }

  void sift_up(std::size_t i) noexcept {
    while (i > 0 && entries_[i].key < entries_[parent(i)].key) {
      std::swap(entries_[i], entries_[parent(i)]);
      place(i);
      place(parent(i));
      i = parent(i);
    }
  }

  void sift_down(std::size_t i) noexcept {
    for (;;) {
      const std::size_t l = 2 * i + 1, r = l + 1;
      std::size_t least = i;
      if (l < entries_.size() && entries_[l].key < entries_[least].key)
        least = l;
      if (r < entries_.size() && entries_[r].key < entries_[least].key)
        least = r;
      if (least == i)
        return;
      std::swap(entries_[i], entries_[least]);
      place(i);
      place(least);
      i = least;
    }
  }

  std::vector<entry> entries_;
};

} // namespace asio_wheel::detail

#endif // ASIO_WHEEL_DETAIL_LOOK_QUEUE_HPP
