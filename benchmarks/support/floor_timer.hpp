//
// support/floor_timer.hpp
// ~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_BENCH_FLOOR_TIMER_HPP
#define ASIO_WHEEL_BENCH_FLOOR_TIMER_HPP

// A stripped prototype of wheel_timer that does only what Asio's contract requires, to
// measure the floor of each operation (docs/completion_path.md, "The floor"); callgrind_floor
// (benchmarks/callgrind_ops.cpp) runs it as the implementations "floor" and "floor-stopped". NOT a
// timer to use: it supports only what callgrind_ops does (one wait per timer, handlers on the
// io_context's own executor, no completion tokens, no cancellation slots, no moves of a timer with
// a wait, no exceptions from handlers, one thread).
//
// What it keeps, because the contract requires it or the wheel needs it:
//   * expires_after reads the clock and saturates; expiries round up to a tick (never early);
//   * the handler is stored until it is called (in the timer, 56 bytes, like wheel_timer);
//   * the service's lock (a futex_mutex) around the shared wheel and ready queue;
//   * the wheel, filed lazily (a cancelled entry stays; on_driver() drops or re-files it);
//   * run() does not return while a wait is pending: one Asio timer (the driver) armed for
//     the earliest tick, its pending wait being the work count of every wait;
//   * an aborted handler is never called from inside cancel() or expires_after(): it is
//     queued, and one drain per batch, posted to the io_context, calls it with
//     operation_aborted; its memory is released before the call.
// What it drops, as the cuts to examine: moving a completed wait out of its timer (it stays
// there until its handler runs; only a new async_wait on that timer moves it, to a slot of a
// per-thread arena that never goes back to malloc); io_context::stopped() per handler (only
// the "floor-stopped" variant checks it); the out-of-line call for the driver test on every
// arm; an error_code built per call (a constant here); cancellation slots and the choice of
// executor.

#include <asio_wheel/detail/futex_mutex.hpp>
#include <asio_wheel/detail/tick_scale.hpp>
#include <asio_wheel/detail/timing_wheel.hpp>

#include <asio/error.hpp>
#include <asio/execution_context.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <new>
#include <optional>
#include <type_traits>
#include <utility>

namespace asio_wheel::bench::floor {

using detail::tick_type;
using clock_type = std::chrono::steady_clock;

inline constexpr std::size_t slot_size = 56;

class floor_timer;

// A wait, type-erased by one function pointer.
struct wait {
  enum class action { invoke, relocate, destroy };
  using fn_type = wait* (*)(wait*, action, void*);
  fn_type fn;
  floor_timer* owner; // whose slot holds it; nullptr in an arena slot
  wait* prev;         // links in the ready queue or the batch being run
  wait* next;
  bool aborted;
};

// Slots for completed waits that had to leave their timer: per thread, never returned.
class arena {
public:
  static void* take() {
    node*& head = free_list();
    if (head == nullptr)
      grow();
    node* n = head;
    head = n->next;
    return n;
  }
  static void give(void* p) noexcept {
    node*& head = free_list();
    head = ::new (p) node{head};
  }

private:
  struct node {
    node* next;
  };
  static node*& free_list() noexcept {
    thread_local node* head = nullptr;
    return head;
  }
  static void grow() {
    constexpr std::size_t n = 4096;
    auto* chunk = static_cast<unsigned char*>(::operator new(n* slot_size)); // kept
    for (std::size_t i = 0; i < n; ++i)
      give(chunk + i * slot_size);
  }
};

class floor_service;

class floor_timer {
public:
  using clock_type = floor::clock_type;
  using time_point = clock_type::time_point;
  using duration = clock_type::duration;

  explicit floor_timer(asio::io_context& ctx);
  // Only for std::vector's sake: callgrind_ops reserves, so this never runs.
  floor_timer(floor_timer&&) noexcept { std::terminate(); }
  floor_timer(const floor_timer&) = delete;
  ~floor_timer();

  std::size_t expires_after(duration d) {
    const std::size_t n = pending_ != nullptr ? cancel() : 0;
    const time_point now = clock_type::now();
    expiry_ = (time_point::max)() - now < d ? (time_point::max)() : now + d;
    return n;
  }
  std::size_t expires_at(time_point t) {
    const std::size_t n = pending_ != nullptr ? cancel() : 0;
    expiry_ = t;
    return n;
  }
  std::size_t cancel();

  template <typename Handler>
  void async_wait(Handler&& handler);

private:
  friend class floor_service;

  enum : std::uint8_t { free_slot, busy_slot, queued_slot };

  template <typename Handler>
  struct handler_wait : wait {
    Handler handler;
    explicit handler_wait(Handler&& h)
        : wait{&do_fn, nullptr, nullptr, nullptr, false}, handler(std::move(h)) {}
    handler_wait(handler_wait&&) = default;

    static wait* do_fn(wait* base, action what, void* storage) {
      auto* self = static_cast<handler_wait*>(base);
      if (what == action::relocate) {
        auto* moved = ::new (storage) handler_wait(std::move(*self));
        self->~handler_wait();
        return moved;
      }
      Handler h(std::move(self->handler));
      const bool aborted = self->aborted;
      floor_timer* owner = self->owner;
      self->~handler_wait();
      // The memory goes back before the call.
      if (owner != nullptr)
        owner->slot_state_.store(free_slot, std::memory_order_release);
      else
        arena::give(self);
      if (what == action::invoke) {
        static const asio::error_code aborted_ec = asio::error::operation_aborted;
        std::move(h)(aborted ? aborted_ec : asio::error_code());
      }
      return nullptr;
    }
  };

  struct entry : detail::wheel_node {
    floor_timer* timer = nullptr;
  };

  floor_service* service_;
  time_point expiry_{};
  wait* pending_ = nullptr; // under the service's lock
  tick_type wanted_ = 0;    // under the service's lock
  entry entry_;
  std::atomic<std::uint8_t> slot_state_{free_slot};
  alignas(void*) unsigned char slot_[slot_size];
};

class floor_service : public asio::execution_context::service {
public:
  inline static asio::execution_context::id id;

  explicit floor_service(asio::execution_context& ctx)
      : asio::execution_context::service(ctx),
        scale_(std::chrono::milliseconds(1), clock_type::now()) {
    // At the current tick, as wheel_driver starts its wheel: from tick 0, every deadline
    // would differ from the wheel's time in a high digit and cascade through every level
    // down (callgrind_ops fire: 527 instructions per timer instead of 209).
    wheel_.emplace(scale_.floor(clock_type::now()));
  }

  // Whether the drain checks io_context::stopped() before each handler but the first; the
  // value for services created from now on (callgrind_floor sets it before the context).
  inline static bool default_check_stopped = false;
  const bool check_stopped = default_check_stopped;

  template <typename Handler>
  void async_wait(floor_timer& t, Handler&& handler) {
    using op_type = floor_timer::handler_wait<std::decay_t<Handler>>;
    static_assert(sizeof(op_type) <= slot_size && alignof(op_type) <= alignof(void*));
    std::lock_guard lock(mutex_);
    if (!home_)
      start(t);
    if (t.slot_state_.load(std::memory_order_acquire) == floor_timer::queued_slot)
      evict(t);
    wait* w = ::new (static_cast<void*>(t.slot_)) op_type(std::forward<Handler>(handler));
    w->owner = &t;
    t.slot_state_.store(floor_timer::busy_slot, std::memory_order_relaxed);
    const tick_type deadline = scale_.ceil(t.expiry_);
    if (deadline <= wheel_->now()) {
      make_ready(w, false);
      return;
    }
    t.pending_ = w;
    t.wanted_ = deadline;
    ++live_;
    // Lazy: an entry already filed no later stays; on_driver() files it again for wanted_.
    if (!t.entry_.is_linked() || t.entry_.deadline() > deadline) {
      if (t.entry_.is_linked())
        wheel_->remove(t.entry_);
      wheel_->insert(t.entry_, deadline);
    }
    if (!armed_ || deadline < armed_at_)
      arm(deadline);
  }

  std::size_t cancel(floor_timer& t) {
    std::lock_guard lock(mutex_);
    wait* w = std::exchange(t.pending_, nullptr);
    if (w == nullptr)
      return 0;
    make_ready(w, true);
    if (--live_ == 0)
      disarm();
    return 1;
  }

  void release(floor_timer& t) {
    std::lock_guard lock(mutex_);
    if (wait* w = std::exchange(t.pending_, nullptr)) {
      make_ready(w, true);
      if (--live_ == 0)
        disarm();
    }
    if (t.slot_state_.load(std::memory_order_acquire) == floor_timer::queued_slot)
      evict(t);
    if (t.entry_.is_linked())
      wheel_->remove(t.entry_);
  }

private:
  void shutdown() override {
    wait* queued = nullptr;
    {
      std::lock_guard lock(mutex_);
      shutdown_ = true;
      wheel_->clear([](detail::wheel_node&) {});
      queued = std::exchange(ready_.head, nullptr);
      ready_.tail = nullptr;
      driver_.reset();
    }
    while (queued != nullptr) {
      wait* w = queued;
      queued = w->next;
      w->fn(w, wait::action::destroy, nullptr);
    }
  }

  void start(floor_timer& t);

  // A new wait needs the slot of a completed one that waits for the drain: it moves out.
  void evict(floor_timer& t) {
    wait* old = reinterpret_cast<wait*>(t.slot_);
    wait* moved = old->fn(old, wait::action::relocate, arena::take());
    moved->owner = nullptr;
    // Its neighbours, or the ends of its list (the ready queue or the batch being run).
    (moved->prev != nullptr ? moved->prev->next
     : ready_.head == old   ? ready_.head
                            : batch_.head) = moved;
    (moved->next != nullptr ? moved->next->prev
     : ready_.tail == old   ? ready_.tail
                            : batch_.tail) = moved;
    t.slot_state_.store(floor_timer::free_slot, std::memory_order_relaxed);
  }

  [[gnu::always_inline]] void make_ready(wait* w, bool aborted) {
    w->aborted = aborted;
    ready_.push_back(w);
    if (w->owner != nullptr)
      w->owner->slot_state_.store(floor_timer::queued_slot, std::memory_order_relaxed);
    if (!drain_posted_ && !shutdown_) {
      asio::post(*home_, [this] { drain(); });
      drain_posted_ = true;
    }
  }

  void arm(tick_type tick) {
    driver_->expires_at(scale_.time_of(tick));
    driver_->async_wait([this](const asio::error_code& ec) {
      if (ec != asio::error::operation_aborted)
        on_driver();
    });
    armed_ = true;
    armed_at_ = tick;
  }

  void disarm() {
    if (armed_) {
      armed_ = false;
      driver_->cancel();
    }
  }

  void on_driver() {
    {
      std::lock_guard lock(mutex_);
      armed_ = false;
      const tick_type now = scale_.floor(clock_type::now());
      const bool done = wheel_->advance(now, 4096, [&](detail::wheel_node& node) noexcept {
        floor_timer& t = *static_cast<floor_timer::entry&>(node).timer;
        if (t.pending_ == nullptr)
          return; // left by a cancellation
        if (t.wanted_ > now) {
          wheel_->insert(t.entry_, t.wanted_);
          return;
        }
        --live_;
        make_ready(std::exchange(t.pending_, nullptr), false);
      });
      if (!done)
        asio::post(*home_, [this] { on_driver(); });
      else if (live_ != 0)
        if (auto next = wheel_->next_expiry())
          arm(*next);
    }
  }

  void drain() {
    {
      std::lock_guard lock(mutex_);
      drain_posted_ = false;
      batch_ = std::exchange(ready_, list{});
    }
    // Single-threaded prototype: batch_ is popped here without the lock; a handler that
    // re-arms a timer whose wait is further on in this batch moves it (evict) under the lock.
    for (bool first = true; batch_.head != nullptr; first = false) {
      if (check_stopped && !first && home_->context().stopped()) {
        std::lock_guard lock(mutex_);
        // The rest goes back to the front of the queue, with a drain to run it.
        if (ready_.head != nullptr) {
          batch_.tail->next = ready_.head;
          ready_.head->prev = batch_.tail;
        } else {
          ready_.tail = batch_.tail;
        }
        ready_.head = std::exchange(batch_, list{}).head;
        if (!drain_posted_) {
          asio::post(*home_, [this] { drain(); });
          drain_posted_ = true;
        }
        return;
      }
      wait* w = batch_.pop_front();
      w->fn(w, wait::action::invoke, nullptr);
    }
  }

  // A doubly linked list of waits, through wait::prev and wait::next.
  struct list {
    wait* head = nullptr;
    wait* tail = nullptr;
    void push_back(wait* w) noexcept {
      w->next = nullptr;
      w->prev = tail;
      (tail != nullptr ? tail->next : head) = w;
      tail = w;
    }
    wait* pop_front() noexcept {
      wait* w = head;
      head = w->next;
      (head != nullptr ? head->prev : tail) = nullptr;
      return w;
    }
  };

  detail::futex_mutex mutex_;
  detail::tick_scale<clock_type> scale_;
  std::optional<detail::timing_wheel> wheel_;
  std::optional<asio::io_context::executor_type> home_;
  std::optional<asio::steady_timer> driver_;
  list ready_;
  list batch_; // popped by drain() as it runs
  std::size_t live_ = 0;
  tick_type armed_at_ = 0;
  bool armed_ = false;
  bool drain_posted_ = false;
  bool shutdown_ = false;
};

inline floor_timer::floor_timer(asio::io_context& ctx)
    : service_(&asio::use_service<floor_service>(ctx)) {
  entry_.timer = this;
}

inline floor_timer::~floor_timer() {
  if (pending_ != nullptr || entry_.is_linked() ||
      slot_state_.load(std::memory_order_acquire) == queued_slot)
    service_->release(*this);
}

inline std::size_t floor_timer::cancel() {
  return service_->cancel(*this);
}

template <typename Handler>
void floor_timer::async_wait(Handler&& handler) {
  service_->async_wait(*this, std::forward<Handler>(handler));
}

inline void floor_service::start(floor_timer& t) {
  (void)t;
  auto& ctx = static_cast<asio::io_context&>(context());
  home_.emplace(ctx.get_executor());
  driver_.emplace(ctx);
}

} // namespace asio_wheel::bench::floor

#endif // ASIO_WHEEL_BENCH_FLOOR_TIMER_HPP
