//
// detail/block_reserve.hpp
// ~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_DETAIL_BLOCK_RESERVE_HPP
#define ASIO_WHEEL_DETAIL_BLOCK_RESERVE_HPP

#include <asio_wheel/detail/block_cache.hpp>
#include <asio_wheel/detail/exceptions.hpp>
#include <asio_wheel/detail/wait_op.hpp>

#include <cstddef>
#include <new>
#include <utility>

namespace asio_wheel::detail {

// A block for a wait that must leave its timer's inline storage (see evict() in
// timer_entry.hpp), taken before anything changes, so that running out of memory leaves the
// wait where it was.
class spare_block {
public:
  // From the thread's cache or the heap, if `needed`; may throw.
  explicit spare_block(bool needed)
      : block_(needed ? block_cache::allocate(inline_op_size) : nullptr) {}
  // Adopts `block` (nullptr: none).
  explicit spare_block(std::in_place_t, void* block) noexcept : block_(block) {}
  spare_block(spare_block&& other) noexcept : block_(std::exchange(other.block_, nullptr)) {}
  spare_block& operator=(spare_block&&) = delete;
  ~spare_block() {
    if (block_ != nullptr)
      block_cache::deallocate(block_, inline_op_size);
  }
  void* take() noexcept { return std::exchange(block_, nullptr); }

  // The same, or nullptr where the heap has none.
  static void* try_allocate() noexcept {
    ASIO_WHEEL_TRY {
      return block_cache::allocate(inline_op_size);
    }
    ASIO_WHEEL_CATCH_ALL {
      return nullptr;
    }
  }

private:
  void* block_;
};

// Spare blocks kept by the service for where nothing may throw (a timer's destructor,
// per-operation cancellation), linked through their first word. Filled when the context's
// first wait starts, drawn on only when the heap has nothing, topped up by each drain.
// Guarded by the service's lock.
class block_reserve {
public:
  static constexpr std::size_t target = 4;

  block_reserve() noexcept = default;
  block_reserve(const block_reserve&) = delete;
  block_reserve& operator=(const block_reserve&) = delete;

  ~block_reserve() {
    while (head_ != nullptr)
      block_cache::deallocate(pop(), inline_op_size);
  }

  // Up to `target` blocks; throws std::bad_alloc if the heap has none.
  void fill() {
    while (count_ < target)
      keep(block_cache::allocate(inline_op_size));
  }

  // Tops the reserve up after it was drawn on; memory still short is no error here.
  void refill() noexcept {
    while (count_ < target) {
      void* block = spare_block::try_allocate();
      if (block == nullptr)
        return;
      keep(block);
    }
  }

  // A spare block where throwing is the last resort: the heap's, else one of the reserve's,
  // else std::bad_alloc.
  spare_block spare(bool needed) {
    if (!needed)
      return spare_block(std::in_place, nullptr);
    if (void* block = spare_block::try_allocate())
      return spare_block(std::in_place, block);
    if (head_ == nullptr)
      detail::throw_exception(std::bad_alloc());
    return spare_block(std::in_place, pop());
  }

private:
  void keep(void* block) noexcept {
    *static_cast<void**>(block) = head_;
    head_ = block;
    ++count_;
  }

  void* pop() noexcept {
    void* block = head_;
    head_ = *static_cast<void**>(block);
    --count_;
    return block;
  }

  void* head_ = nullptr;
  std::size_t count_ = 0;
};

} // namespace asio_wheel::detail

#endif // ASIO_WHEEL_DETAIL_BLOCK_RESERVE_HPP
