//
// detail/own_memory.hpp
// ~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_DETAIL_OWN_MEMORY_HPP
#define ASIO_WHEEL_DETAIL_OWN_MEMORY_HPP

#include <cstddef>
#include <memory>

namespace asio_wheel::detail {

// Room for one operation that Asio allocates for the service (the alarm's wait, a posted
// drain or continuation), given to Asio through the handler's associated allocator, so that
// on an io_context or a thread pool whatever the service starts by itself allocates nothing.
// The service has at most one operation of each kind outstanding, hence one room each. An
// operation that does not fit (none does, in Asio 1.22 to 1.38: 112 bytes for the wait, 56
// for a post) comes from the heap instead.
struct own_memory {
  static constexpr std::size_t size = 160;
  alignas(std::max_align_t) unsigned char bytes[size];
};

template <typename T>
class own_allocator {
public:
  using value_type = T;

  explicit own_allocator(own_memory& memory) noexcept : memory_(&memory) {}
  template <typename U>
  own_allocator(const own_allocator<U>& other) noexcept : memory_(other.memory_) {}

  T* allocate(std::size_t n) {
    if (n * sizeof(T) <= own_memory::size && alignof(T) <= alignof(std::max_align_t))
      return reinterpret_cast<T*>(memory_->bytes);
    return std::allocator<T>().allocate(n);
  }

  void deallocate(T* p, std::size_t n) noexcept {
    if (static_cast<void*>(p) != memory_->bytes)
      std::allocator<T>().deallocate(p, n);
  }

  template <typename U>
  bool operator==(const own_allocator<U>& other) const noexcept {
    return memory_ == other.memory_;
  }
  template <typename U>
  bool operator!=(const own_allocator<U>& other) const noexcept {
    return memory_ != other.memory_;
  }

private:
  template <typename>
  friend class own_allocator;
  own_memory* memory_;
};

// A handler of the service's own, in the room `memory`: calls `call(self)`. One type for
// every owner and member (make_own_handler), so that posting one compiles Asio's post of a
// handler once per kind of home (service_home::post), not once per owner and member.
struct own_handler {
  void (*call)(void*);
  void* self;
  own_memory* memory;
  using allocator_type = own_allocator<void>;
  allocator_type get_allocator() const noexcept { return allocator_type(*memory); }
  void operator()() const { call(self); }
};

// The own_handler that calls `(self->*Fn)()`.
template <typename Owner, void (Owner::*Fn)()>
own_handler make_own_handler(Owner* self, own_memory& memory) noexcept {
  return {[](void* owner) { (static_cast<Owner*>(owner)->*Fn)(); }, self, &memory};
}

// The same for a timer's wait: calls `(self->*Fn)(expired)`, `expired` false when the wait
// completed with an error (operation_aborted: cancelled). Whether Asio's reactor found the
// wait due or a cancel() queued it at once decides where its completion stands among the
// context's handlers, which the owner needs to know (see wheel_shard::on_alarm).
template <typename Owner, void (Owner::*Fn)(bool)>
struct own_wait_handler {
  Owner* self;
  own_memory* memory;
  using allocator_type = own_allocator<void>;
  allocator_type get_allocator() const noexcept { return allocator_type(*memory); }
  template <typename ErrorCode>
  void operator()(const ErrorCode& ec) const {
    (self->*Fn)(!ec);
  }
};

// A handler of the service's own that is queued at most once at a time, in memory of its
// own: the drain, the continuation of an expiry turn. Guarded by the service's lock.
template <typename Owner, void (Owner::*Fn)()>
class own_post {
public:
  bool queued() const noexcept { return queued_; }

  // Queues (self->*Fn)() on `home` (a service_home). Throws only where `home` may.
  template <typename Home>
  void post(Home& home, Owner* self) {
    home.post(make_own_handler<Owner, Fn>(self, memory_));
    queued_ = true;
  }

  // Queued by another: its owner's work is taken by a handler that is not this one (a
  // shard's drain, by the service's sweep; see drain_sweep.hpp). ran() as for its own.
  void queued_elsewhere() noexcept { queued_ = true; }

  // Its handler has started (or the one that stood in for it has taken the work): another
  // may be queued.
  void ran() noexcept { queued_ = false; }

private:
  bool queued_ = false;
  own_memory memory_;
};

} // namespace asio_wheel::detail

#endif // ASIO_WHEEL_DETAIL_OWN_MEMORY_HPP
