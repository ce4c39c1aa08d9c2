//
// detail/block_cache.hpp
// ~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_DETAIL_BLOCK_CACHE_HPP
#define ASIO_WHEEL_DETAIL_BLOCK_CACHE_HPP

#include <asio_wheel/detail/config.hpp>
#include <asio_wheel/detail/prefetch.hpp>

#include <cstddef>
#include <new>
#include <utility>

namespace asio_wheel::detail {

// Per-thread free lists of small blocks for operation memory, used when a handler has no
// allocator of its own. Servers cancel and re-arm timers in bursts (a reset is an abort plus
// a new wait), and Asio's recycling allocator keeps two blocks per thread, so a burst would
// otherwise cost a malloc and a free per wait. A block freed on another thread joins that
// thread's list. Each list is capped, so a burst's memory goes back to malloc after it.
//
// The recycling is what lets a wait re-arm from its own completion without the heap (a
// heartbeat's look for a touch, an idle timer following its activity): the block its
// completed operation frees is the one the next takes. So it is kept everywhere, but with
// mingw-w64's GCC the lists have no destructor: GCC keeps thread_local objects there in
// emulated TLS, whose storage a thread frees at exit before the destructors of those
// objects run (GCC bug 80816, mingw-w64 bugs 527 and 859), so a destructor would read freed
// memory (and free what it found there). What a thread still holds when it exits is then
// left to the heap (at most max_cached blocks of each size; cached() says how many).
#if defined(__MINGW32__) && !defined(__clang__)
#define ASIO_WHEEL_BLOCK_CACHE_FREED_AT_THREAD_EXIT 0
#else
#define ASIO_WHEEL_BLOCK_CACHE_FREED_AT_THREAD_EXIT 1
#endif

class block_cache {
public:
  // Whether a thread's cached blocks go back to the heap when it exits (see above).
  static constexpr bool freed_at_thread_exit = ASIO_WHEEL_BLOCK_CACHE_FREED_AT_THREAD_EXIT;

  // Size classes: most handlers (lambdas, coroutine handlers) fit the first. 8 bytes short
  // of a power of two, so that glibc's chunk header fits in it: a 56-byte block takes 64
  // bytes of heap, where a 64-byte one takes 80. (Not named `small`: the Windows SDK's
  // rpcndr.h, which a full windows.h includes, defines it as a macro.)
  static constexpr std::size_t small_block = 56;
  static constexpr std::size_t large_block = 120;
  // Per list: one driver turn's expiries (wheel_service::expiry_budget), whose waits leave
  // their timers' inline storage for blocks and free them as their handlers run, recycle
  // without malloc. At most 4096 * (64 + 128) bytes of heap held per thread after a burst.
  static constexpr std::size_t max_cached = 4096;

  static void* allocate(std::size_t size) {
    if (size <= large_block) {
      list& l = lists()[size <= small_block ? 0 : 1];
      if (l.head != nullptr) {
        block* b = l.head;
        l.head = b->next;
        --l.count;
        // The next block's link is read by the next allocation: on a context run by several
        // threads the block was freed by the thread that completed its wait, and its line
        // is in that thread's cache (threads_bench: 5% of the profile was this read).
        prefetch(l.head);
        return b;
      }
      size = size <= small_block ? small_block : large_block;
    }
    return ::operator new(size);
  }

  // Inlined: once per completed wait, right before its upcall, and called from enough
  // places that the compiler would otherwise make it a call (measured: 10 to 20
  // instructions per wait in benchmarks/callgrind_ops). A call in builds for tests (see
  // ASIO_WHEEL_INLINE_PER_WAIT): inlined, it was a copy in every operation type's deallocate.
  ASIO_WHEEL_INLINE_PER_WAIT static void deallocate(void* p, std::size_t size) noexcept {
    if (size <= large_block) {
      list& l = lists()[size <= small_block ? 0 : 1];
      if (l.count < max_cached) {
        block* b = ::new (p) block{l.head};
        l.head = b;
        ++l.count;
        return;
      }
    }
    ::operator delete(p);
  }

  // The blocks this thread's lists hold, for tests that balance allocations.
  static std::size_t cached() noexcept { return lists()[0].count + lists()[1].count; }

private:
  struct block {
    block* next;
  };

  struct list {
    block* head = nullptr;
    std::size_t count = 0;

    list() = default;
    list(const list&) = delete;
    list& operator=(const list&) = delete;
#if ASIO_WHEEL_BLOCK_CACHE_FREED_AT_THREAD_EXIT
    // At thread exit. Later frees on this thread (static destructors of the main thread, a
    // context destroyed at exit) find the list full and empty, and go straight to the heap.
    ~list() {
      while (head != nullptr)
        ::operator delete(std::exchange(head, head->next));
      count = max_cached;
    }
#endif
  };

  static list* lists() noexcept {
    thread_local list per_thread[2];
    return per_thread;
  }
};

// A standard allocator over block_cache: the default allocator of the library's operations.
template <typename T>
class block_cache_allocator {
public:
  using value_type = T;

  block_cache_allocator() noexcept = default;
  template <typename U>
  block_cache_allocator(const block_cache_allocator<U>&) noexcept {}

  // The cache's blocks have operator new's default alignment. An operation whose handler
  // asks for more (alignas(64) state, say) takes aligned memory of its own: rare enough
  // that it needs no cache.
  T* allocate(std::size_t n) {
    if constexpr (alignof(T) > __STDCPP_DEFAULT_NEW_ALIGNMENT__)
      return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(alignof(T))));
    else
      return static_cast<T*>(block_cache::allocate(n * sizeof(T)));
  }

  void deallocate(T* p, std::size_t n) noexcept {
    if constexpr (alignof(T) > __STDCPP_DEFAULT_NEW_ALIGNMENT__) {
      // The sized form only where the compiler declares it: clang before 19 does not
      // without -fsized-deallocation.
#if defined(__cpp_sized_deallocation)
      ::operator delete(p, n * sizeof(T), std::align_val_t(alignof(T)));
#else
      (void)n;
      ::operator delete(p, std::align_val_t(alignof(T)));
#endif
    } else
      block_cache::deallocate(p, n * sizeof(T));
  }

  template <typename U>
  bool operator==(const block_cache_allocator<U>&) const noexcept {
    return true;
  }
};

} // namespace asio_wheel::detail

#undef ASIO_WHEEL_BLOCK_CACHE_FREED_AT_THREAD_EXIT

#endif // ASIO_WHEEL_DETAIL_BLOCK_CACHE_HPP
