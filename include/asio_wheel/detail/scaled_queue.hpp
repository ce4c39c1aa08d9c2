//
// detail/scaled_queue.hpp
// ~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_DETAIL_SCALED_QUEUE_HPP
#define ASIO_WHEEL_DETAIL_SCALED_QUEUE_HPP

// The scaled timeouts of idle_timer and heartbeat: Envoy's scaled range timers
// (envoy source/common/event/scaled_range_timer_manager_impl.{h,cc}) on the wheel.
//
// A timer whose timeout is a range [min, max] first waits for min since its last touch, on
// its own wheel wait (no factor can make it earlier). Once min has passed with no touch
// since, its wait is "parked" for max since the last touch (the latest it may have to wait,
// at factor 1), and the timer joins the queue of its span (max - min) in its context, keyed
// by its own last touch + min: a heap ordered by key (detail/node_heap.hpp), so that the head
// is the earliest due at every factor, however late the timer joined (a touch found only
// when its wait ended, a wait started late). Each queue has one wheel wait of its own, armed
// for head key + ceil(f * span). When it fires, the timers at the head that are due are
// woken: their parked wait is moved to now (wheel_timer_impl::retarget), so it completes on
// its own executor, where the timer judges itself again from its stamp and the factor (and
// completes, or waits again: lazy re-arm). A change of the factor re-arms one wait per
// queue: O(distinct spans), however many timers wait. So each timer completes within a tick
// of the queue's wait (and the event loop's latency) after its own timeout at the factor in
// force, or after the change of the factor that made it due.
//
// One queue service per context and timer type (clock, wait traits, executor), created by
// the first timer with a range. Its queues, their waits and the links of the timers in them
// are guarded by one mutex, which is what lets a queue's handler, on any thread of the
// context, retarget the wait of a timer whose owner runs elsewhere: the owner touches its
// wheel timer either while not in a queue (no handler can reach it then) or with the mutex
// held (park()). The lock is taken once per idle period of a timer (when it parks and when
// its wait completes), never by touch().
//
// The parked wait makes the queue a shortcut, not a dependency: a timer whose queue could
// not be armed or grow (memory exhaustion), or that could not get a queue at all (more
// distinct spans than max_queues), still completes at its max: late under pressure, never
// early.
//
// Lock order: this mutex, then the wheel service's (timer operations under it). The mutex
// is recursive because a handler destroyed inside a timer operation (a wait that could not
// be started) may own a timer of the same service, whose destructor leaves its queue.

#include <asio_wheel/basic_wheel_timer.hpp>
#include <asio_wheel/detail/exceptions.hpp>
#include <asio_wheel/detail/node_heap.hpp>
#include <asio_wheel/detail/saturating_time.hpp>
#include <asio_wheel/detail/wheel_service.hpp>
#include <asio_wheel/timeout_scale.hpp>

#include <asio_wheel/detail/asio_forward.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

namespace asio_wheel::detail {

// Waiter: the timer type, which derives from wheel_node (its queue link), makes this class a
// friend, and has a static `wake(Waiter&, const time_point& now)` that moves its pending
// wait to now.
template <typename Waiter, typename Clock, typename WaitTraits, typename Executor>
class scaled_queue_service : public asio::execution_context::service, private scale_listener {
public:
  using duration = typename Clock::duration;
  using time_point = typename Clock::time_point;
  using range = timeout_range<duration>;

  inline static asio::execution_context::id id;

  // Distinct spans that get a queue; a timer with another one is only parked (see above).
  static constexpr std::size_t max_queues = 256;
  // Timers woken per run of a queue's handler, or of a rescale handler over all queues, at
  // most, as the wheel's budgets: a burst does not starve the context's other handlers.
  static constexpr std::size_t waiters_per_run = 4096;

  explicit scaled_queue_service(asio::execution_context& context)
      : asio::execution_context::service(context), scale_(timeout_scale::of(context)) {}

  scaled_queue_service(const scaled_queue_service&) = delete;
  scaled_queue_service& operator=(const scaled_queue_service&) = delete;

  ~scaled_queue_service() override { this->unlisten(); }

  double factor() const noexcept { return scale_.factor(); }

  // The owner's wait has passed `min_at` (its last touch + r.min) and its timeout at the
  // factor in force is still ahead: `arm_parked()` starts the owner's wait for its max
  // (with the lock held, so that no queue handler sees the timer linked without it), then
  // the timer joins its span's queue. Precondition: `w` is not in a queue. If arm_parked()
  // throws, nothing changed. `ex` is the owner's executor, which only tells the context.
  template <typename ArmParked>
  void park(Waiter& w, const range& r, const time_point& min_at, const Executor& ex,
            ArmParked&& arm_parked) {
    std::lock_guard lock(mutex_);
    queue* q = nullptr;
    if (!shut_) {
      ASIO_WHEEL_TRY {
        q = find_or_create(r.max - r.min, ex);
      }
      ASIO_WHEEL_CATCH_ALL {
        q = nullptr; // no memory for a queue: parked only, late under pressure
      }
    }
    std::forward<ArmParked>(arm_parked)();
    if (q == nullptr)
      return;
    ASIO_WHEEL_TRY {
      q->heap.push(w, min_at);
    }
    ASIO_WHEEL_CATCH_ALL {
      return; // no memory for the queue to grow: parked only, as above
    }
    ASIO_WHEEL_TRY {
      // Nothing to do unless `w` is the head, or an earlier arm() failed.
      arm(*q);
    }
    ASIO_WHEEL_CATCH_ALL {
      // Parked: it completes at its max at the latest; the next park or change retries.
    }
  }

  // Calls f() with the lock held, then takes `w` out of its queue (if f() returned).
  template <typename F>
  void leave_after(Waiter& w, F&& f) {
    std::lock_guard lock(mutex_);
    std::forward<F>(f)();
    unlink(w);
  }

  // Takes `w` out of its queue, if it is in one. Noexcept: from destructors.
  void leave(Waiter& w) noexcept {
    std::lock_guard lock(mutex_);
    unlink(w);
  }

private:
  // With the lock held.
  void unlink(Waiter& w) noexcept {
    const std::uint16_t heap_id = node_heap<time_point>::id_of(w);
    if (heap_id == 0)
      return;
    queue& q = *queues_[heap_id - node_heap<time_point>::first_id];
    q.heap.remove(w);
    if (q.heap.empty())
      disarm(q);
  }

  struct queue {
    queue(std::uint16_t heap_id, duration s, const asio::any_io_executor& ex)
        : heap(heap_id), span(s), timer(ex) {}
    // The timers parked for this span, by their last touch + min.
    node_heap<time_point> heap;
    duration span;
    // On the context's plain executor (see ex_).
    basic_wheel_timer<Clock, WaitTraits> timer;
    // When the wait is armed for; empty while none is (or it was cancelled), and after a
    // stale success (on_wake). Then a wait armed since may still be pending: disarm() cancels
    // whatever is, and arm() re-arms (aborting it) unless armed_at says it is armed for due.
    std::optional<time_point> armed_at;
  };

  // The wait handler of a queue: two pointers, so it lives in the wheel timer.
  struct wake_handler {
    scaled_queue_service* service;
    std::size_t index;
    void operator()(const error_code& ec) const {
      if (!ec)
        service->on_wake(index);
    }
  };

  struct rescale_handler {
    scaled_queue_service* service;
    void operator()() const { service->on_rescale(); }
  };

  // When the head of `q` is due at factor f. Precondition: not empty.
  static time_point head_due(const queue& q, double f) noexcept {
    return saturating_add(q.heap.front_key(), range(duration::zero(), q.span).at(f));
  }

  queue* find_or_create(duration span, const Executor& ex) {
    for (auto& q : queues_)
      if (q->span == span)
        return q.get();
    if (queues_.size() == max_queues)
      return nullptr;
    if (!ex_) {
      ex_.emplace(
          asio::use_service<wheel_service<Clock, WaitTraits>>(this->context()).home_executor(ex));
      // Listens once it has an executor to post to.
      this->listen(scale_);
    }
    queues_.reserve(queues_.size() + 1);
    queues_.push_back(std::make_unique<queue>(
        static_cast<std::uint16_t>(node_heap<time_point>::first_id + queues_.size()), span, *ex_));
    return queues_.back().get();
  }

  // An empty queue has no wait: a pending one would keep its context's run() from
  // returning until it fires (as a cancelled timer lets it return). Cancelled whatever
  // armed_at says: after a stale success it is empty while a wait armed since is pending.
  // (A timer with nothing pending cancels nothing, without the wheel's lock.)
  static void disarm(queue& q) noexcept {
    ASIO_WHEEL_TRY {
      q.timer.cancel();
      q.armed_at.reset();
    }
    ASIO_WHEEL_CATCH_ALL {
      // No memory for the aborted wait: it stays armed, and wakes to find nothing due.
    }
  }

  // Arms q's wait for its head at the factor in force, unless armed for just that (earlier
  // would wake for nothing after a factor rise, later would be late); disarms it if q is
  // empty.
  void arm(queue& q) {
    if (q.heap.empty()) {
      disarm(q);
      return;
    }
    const time_point due = head_due(q, factor());
    if (q.armed_at && *q.armed_at == due)
      return;
    // Aborts the wait armed, if any; throws with nothing changed.
    q.timer.expires_at(due);
    q.armed_at.reset();
    q.timer.async_wait(wake_handler{
        this, static_cast<std::size_t>(q.heap.id() - node_heap<time_point>::first_id)});
    q.armed_at = due;
  }

  // Wakes the due timers at the head of q (at most `budget`, which it decrements), then arms
  // for the next: a head left due for want of budget is armed for its due time, past, so its
  // wait completes in a later turn and wakes the rest there.
  void process(queue& q, std::size_t& budget) {
    const time_point now = Clock::now();
    const double f = factor();
    for (; budget > 0 && !q.heap.empty(); --budget) {
      if (head_due(q, f) > now)
        break;
      const time_point head_key = q.heap.front_key();
      Waiter& w = static_cast<Waiter&>(q.heap.pop_front());
      ASIO_WHEEL_TRY {
        Waiter::wake(w, now);
      }
      ASIO_WHEEL_CATCH_ALL {
        // No memory to move its wait: it stays first, for the next run (with its key, in
        // the room it just left: no allocation).
        q.heap.push(w, head_key);
        arm(q);
        ASIO_WHEEL_RETHROW;
      }
    }
    arm(q);
  }

  void on_wake(std::size_t index) {
    std::lock_guard lock(mutex_);
    if (shut_)
      return;
    queue& q = *queues_[index];
    // This wait's, or (a stale success) one that arm() replaced while it was completing: the
    // wait armed since, if any, is disarm()'s or the next arm()'s to abort.
    q.armed_at.reset();
    std::size_t budget = waiters_per_run;
    process(q, budget);
  }

  // On the setter's thread, under the scale's lock: one post, however many changes.
  void scale_changed() override {
    if (rescale_posted_.exchange(true, std::memory_order_acq_rel))
      return;
    ASIO_WHEEL_TRY {
      asio::post(*ex_, rescale_handler{this});
    }
    ASIO_WHEEL_CATCH_ALL {
      rescale_posted_.store(false, std::memory_order_release);
      ASIO_WHEEL_RETHROW;
    }
  }

  // Each queue's wait moves to its head at the new factor: O(queues). Those due now are
  // woken in this run, waiters_per_run at most across all queues (the others, from their
  // queue's wait, in later turns).
  void on_rescale() {
    rescale_posted_.store(false, std::memory_order_release);
    std::lock_guard lock(mutex_);
    if (shut_)
      return;
    std::size_t budget = waiters_per_run;
    for (auto& q : queues_) {
      if (q->heap.empty())
        continue;
      // Re-armed if its head's due time moved, whatever the direction (see arm()); if
      // process() empties it, the wait is cancelled, which needs armed_at kept.
      process(*q, budget);
    }
  }

  void shutdown() override {
    this->unlisten();
    std::lock_guard lock(mutex_);
    shut_ = true;
    // The timers still in the queues keep their parked waits, which the wheel service
    // destroys at its own shutdown; their destructors find them out of any queue.
    for (auto& q : queues_)
      q->heap.clear([](wheel_node&) {});
    queues_.clear();
  }

  timeout_scale& scale_;
  std::recursive_mutex mutex_;
  // The executor of the queues' waits and of rescale handlers: the context's plain one, as
  // the wheel service's own handlers (wheel_service::home_executor()). Not a timer's: a
  // work-tracking executor would keep run() going for the context's life, and a strand
  // would tie every queue's wake-ups to one connection. Their work is done under mutex_.
  std::optional<asio::any_io_executor> ex_;
  // Indexed by node_heap id - first_id; never shrinks before shutdown (there are few).
  std::vector<std::unique_ptr<queue>> queues_;
  bool shut_ = false;
  std::atomic<bool> rescale_posted_{false};
};

} // namespace asio_wheel::detail

#endif // ASIO_WHEEL_DETAIL_SCALED_QUEUE_HPP
