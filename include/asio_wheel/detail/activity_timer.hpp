//
// detail/activity_timer.hpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_DETAIL_ACTIVITY_TIMER_HPP
#define ASIO_WHEEL_DETAIL_ACTIVITY_TIMER_HPP

#include <asio_wheel/detail/activity_stamp.hpp>
#include <asio_wheel/detail/context_of.hpp>
#include <asio_wheel/detail/min_max.hpp>
#include <asio_wheel/detail/rearming_handler.hpp>
#include <asio_wheel/detail/saturating_time.hpp>
#include <asio_wheel/detail/scaled_queue.hpp>
#include <asio_wheel/detail/timing_wheel.hpp>
#include <asio_wheel/detail/wheel_timer_impl.hpp>
#include <asio_wheel/timeout_scale.hpp>

#include <asio_wheel/detail/asio_forward.hpp>
#include <asio_wheel/detail/exceptions.hpp>

#include <chrono>
#include <cstddef>
#include <mutex>
#include <new>
#include <optional>
#include <type_traits>
#include <utility>

namespace asio_wheel::detail {

// What idle_timer and heartbeat share: a wheel timer re-armed lazily, and the mark of the
// last activity that decides when it is really due.
//
// Timeouts that are ranges (timeout_range, scaled by the context's timeout_scale) wait in
// two stages (see detail/scaled_queue.hpp): on the timer's own wait until the range's
// minimum has passed since the last activity, then parked (the same wait, moved to the
// maximum) in the context's queue for the range's span, which wakes it when the timeout at
// the factor in force has passed. The wheel_node base is the timer's link in that queue;
// queues_ is null, and no queue is ever touched, while every timeout the timer was given is
// fixed: such a timer costs what it did before ranges existed (touch() is unchanged in every
// case: it never reads the factor).
template <typename Clock, typename WaitTraits, typename Executor>
class activity_timer : private wheel_node {
  using queue_service = scaled_queue_service<activity_timer, Clock, WaitTraits, Executor>;
  friend queue_service;

protected:
  // Where the operation of the owner stands. Only the owner's thread (or strand) changes it,
  // as it does every member of the owner but the activity mark.
  enum class op_state : unsigned char {
    none,     // no operation, or its completion runs without reading this
    pending,  // an operation waits (in the wheel, parked, or its success completion queued)
    complete, // cancelled once its completion was queued, and found due then: completes so
    abort     // cancelled once its completion was queued, and not due then: aborts
  };

  // For the owner: what a `complete` decision found due (basic_heartbeat: a ping, else a
  // drop). Set with state_ by the owner's judgement.
  bool decided_ping_ = false;

private:
  // First, with decided_ping_: they fit in wheel_node's tail padding.
  op_state state_ = op_state::none;

public:
  /// The type of the executor associated with the object.
  using executor_type = Executor;
  /// The clock type.
  using clock_type = Clock;
  /// The duration type of the clock.
  using duration = typename Clock::duration;
  /// The time point type of the clock.
  using time_point = typename Clock::time_point;
  /// A timeout: fixed (a duration), or a range that the context's timeout_scale scales.
  using range = timeout_range<duration>;

  activity_timer(const activity_timer&) = delete;
  activity_timer& operator=(const activity_timer&) = delete;

  /// Get the executor associated with the object.
  detail::get_executor_result_t<executor_type> get_executor() noexcept {
    return timer_.get_executor();
  }

  /// Marks activity now. O(1): one clock read and one relaxed compare-exchange; no wheel
  /// operation, no lock, no allocation, no handler. Any thread may call it at any time;
  /// concurrent touches keep the latest reading.
  void touch() noexcept { activity_.mark(); }

  /// The time of the last activity, as marked (never before the true time).
  time_point last_activity() const noexcept { return activity_.last(); }

protected:
  // The cancellation of the owner's operation, by cancel() or by its slot. A wait pending in
  // the wheel (or parked) is aborted there. One whose success completion is already queued
  // cannot be: that completion would find activity since (or, for a range, a higher factor)
  // and wait again, so the cancellation would be lost while the peer keeps talking. It is
  // judged now instead: due (`is_due()`, the owner's judgement at this instant) completes as
  // queued, as Asio's timer does when cancel() comes after its expiry; not due completes with
  // operation_aborted. Returns the number of operations aborted. With the queue's lock held
  // while the wait is cancelled (see leave_queue_after()). If it throws (no memory for the
  // aborted wait), nothing changed.
  template <typename IsDue>
  std::size_t cancel_op(IsDue&& is_due) {
    // A completion running on another thread reads and writes state_ under the lock.
    const auto lock = lock_state();
    std::size_t cancelled = 0;
    // Out of its queue only once cancelled: if cancel() throws, the timer is as it was.
    leave_queue_after([&] { cancelled = timer_.cancel(); });
    if (state_ != op_state::pending)
      return cancelled; // none, or its fate is decided already
    if (cancelled == 0) {
      state_ = std::forward<IsDue>(is_due)() ? op_state::complete : op_state::abort;
      cancelled = state_ == op_state::abort ? 1 : 0;
    } else {
      state_ = op_state::none;
    }
    cut_slot();
    return cancelled;
  }

  // The operation completes now (its handler is called right after): no slot may reach it.
  void end_op() noexcept {
    state_ = op_state::none;
    cut_slot();
  }

  op_state state() const noexcept { return state_; }

  // Held by the owner's calls that change what a completion running on another thread reads
  // (cancel_op(), a new timeout): that completion holds it while it reads the timer.
  std::unique_lock<futex_mutex> lock_state() {
    return std::unique_lock<futex_mutex>(link_.get()->mutex);
  }

  // Construction counts as activity.
  explicit activity_timer(const executor_type& ex) : link_(this), timer_(ex) {}

  template <typename ExecutionContext, typename = std::enable_if_t<std::is_convertible_v<
                                           ExecutionContext&, asio::execution_context&>>>
  explicit activity_timer(ExecutionContext& context) : link_(this), timer_(context) {}

  // No queue, and no cancellation slot, may refer to the timer once it is gone; nor may a
  // completion (the owner's destructor has called detach()).
  ~activity_timer() {
    cut_slot();
    leave_queue();
  }

  // First in the owner's destructor, before anything of the owner is gone: a completion of
  // its operation that is queued, or running on another thread, no longer reads the timer,
  // and finishes with the outcome judged now, as cancel_op() judges it (`is_due()`, the
  // owner's judgement at this instant; it may set decided_ping_). A wait still in the wheel
  // is aborted afterwards by the timer's destruction, and its completion does not read the
  // link. Waits for a completion running on another thread to be done with the timer.
  // Out of line: once per timer, and kept out of the inlining budget of the hot paths.
  template <typename IsDue>
  [[gnu::cold, gnu::noinline]] void detach(IsDue&& is_due) noexcept {
    activity_link& link = *link_.get();
    std::lock_guard lock(link.mutex);
    using verdict = activity_link::verdict;
    const auto due = [&] { return decided_ping_ ? verdict::ping : verdict::complete; };
    switch (state_) {
    case op_state::pending:
      link.outcome = std::forward<IsDue>(is_due)() ? due() : verdict::abort;
      break;
    case op_state::complete:
      link.outcome = due();
      break;
    case op_state::abort:
    case op_state::none:
      link.outcome = verdict::abort;
      break;
    }
    link.owner = nullptr;
  }

  // The lock a completion holds while it reads the timer: from the start of on_wait() until
  // it calls the handler (unlock()) or has waited again. gone(): the timer was destroyed, and
  // outcome() says how the completion finishes.
  class completion_lock {
  public:
    explicit completion_lock(activity_link* link) noexcept : link_(link) { link_->mutex.lock(); }
    completion_lock(const completion_lock&) = delete;
    completion_lock& operator=(const completion_lock&) = delete;
    ~completion_lock() { unlock(); }

    bool gone() const noexcept { return link_->owner == nullptr; }
    activity_link::verdict outcome() const noexcept { return link_->outcome; }
    // Before the handler is called: it may destroy the timer, or start the next operation.
    // The link is not touched after this (another thread may free it then).
    void unlock() noexcept {
      if (link_ != nullptr)
        std::exchange(link_, nullptr)->mutex.unlock();
    }

  private:
    activity_link* link_;
  };

  // Called with every timeout the owner is given, before it is stored: a range that is not
  // fixed joins the timer to its context's queue service (created on first use; may throw).
  void use_range(const range& r) {
    if (queues_ == nullptr && !r.is_fixed())
      queues_ = &asio::use_service<queue_service>(context_of(timer_.get_executor()));
  }

  // The factor in force; 1 for a timer whose timeouts are all fixed (not read then).
  double factor() const noexcept { return queues_ != nullptr ? queues_->factor() : 1.0; }

  // Out of its queue, if in one: before the owner touches timer_ or completes.
  void leave_queue() noexcept {
    if (queues_ != nullptr)
      queues_->leave(*this);
  }

  // Calls f(), which may touch timer_ and throw, then leaves the queue (if f() returned):
  // with the queue service's lock held throughout, so that no queue moves the wait meanwhile.
  template <typename F>
  void leave_queue_after(F&& f) {
    if (queues_ != nullptr)
      queues_->leave_after(*this, std::forward<F>(f));
    else
      std::forward<F>(f)();
  }

  // Starts (or continues) a wait until `deadline`; the owner's on_wait() gets `h` back.
  template <typename Owner, typename Handler>
  void wait_until(const time_point& deadline, rearming_handler<Owner, Handler>&& h) {
    timer_.expires_at(deadline);
    timer_.async_wait(std::move(h));
  }

  // Waits for the timeout `r` of the quiet spell that began at `last`, as read at `now`
  // (only read for a range): until its minimum while that is ahead (the whole timeout, if it
  // is fixed); parked in the span's queue until the timeout at the factor in force; or, if
  // that has passed, through the timer at once. In every case the wait ends by `until` at
  // the latest (the owner looks then for what the timeout does not cover: basic_heartbeat's
  // next ping); a parked wait stays in its queue meanwhile, so that a change of the factor
  // still reaches it. Precondition: not in a queue.
  template <typename Owner, typename Handler>
  void wait_for(const range& r, const time_point& last, rearming_handler<Owner, Handler>&& h,
                std::optional<time_point> now = std::nullopt,
                const time_point& until = (time_point::max)()) {
    const time_point min_at = saturating_add(last, r.min);
    if (queues_ == nullptr || r.is_fixed()) {
      wait_until(detail::min_of(min_at, until), std::move(h));
      return;
    }
    if (!now)
      now = Clock::now();
    const time_point due = saturating_add(last, r.at(factor()));
    if (*now < min_at || *now >= due) {
      wait_until(detail::min_of(*now < min_at ? min_at : due, until), std::move(h));
      return;
    }
    queues_->park(*this, r, min_at, timer_.get_executor(), [&] {
      wait_until(detail::min_of(saturating_add(last, r.max), until), std::move(h));
    });
  }

  // wait_for() from a wait's own completion, where nothing may be lost. False if it could
  // not for want of memory (its operation needs a block: a handler too large for the
  // timer), with `h` untouched and the timer in no queue: the caller completes it with
  // asio::error::no_memory.
  template <typename Owner, typename Handler>
  bool rewait_for(const range& r, const time_point& last, rearming_handler<Owner, Handler>& h,
                  std::optional<time_point> now = std::nullopt,
                  const time_point& until = (time_point::max)()) {
    ASIO_WHEEL_TRY {
      wait_for(r, last, std::move(h), now, until);
      return true;
    }
    ASIO_WHEEL_CATCH(const std::bad_alloc&) {
      if (h.taken())
        ASIO_WHEEL_RETHROW; // moving the handler itself threw: it is gone, as in Asio
      return false;
    }
  }

  // The initiation of an owner's asynchronous operation: wraps the handler once, and starts
  // the first wait through `owner->start(rearming_handler)`. A class rather than a lambda,
  // so that it carries the I/O executor as Asio's own initiations do.
  template <typename Owner>
  class initiation {
  public:
    using executor_type = Executor;
    explicit initiation(Owner* owner) noexcept : owner_(owner) {}
    executor_type get_executor() const noexcept { return owner_->get_executor(); }
    template <typename Handler>
    void operator()(Handler&& handler) const {
      activity_timer& self = *owner_;
      // One operation at a time (documented on async_wait / async_next): the pending one's
      // state and slot are the object's, and its completion, even queued, reads them. Not
      // checked: `pending` can outlive an operation whose handler was destroyed uncalled
      // (its move threw; its executor's context was destroyed), which only on_wait() clears,
      // and the object may be gone by then.
      self.cut_slot();
      auto slot = asio::get_associated_cancellation_slot(handler);
      if (slot.is_connected())
        self.slot_ = &slot.template emplace<slot_canceller<Owner>>(owner_);
      self.state_ = op_state::pending;
      ASIO_WHEEL_TRY {
        owner_->start(rearming_handler<Owner, std::decay_t<Handler>>(
            self.link_.get(), std::forward<Handler>(handler)));
      }
      ASIO_WHEEL_CATCH_ALL {
        self.end_op();
        ASIO_WHEEL_RETHROW;
      }
    }

  private:
    Owner* owner_;
  };

  // The slot the wheel wait of the pending operation is bound to: the one between the
  // user's slot and the wheel (see slot_canceller), or none.
  asio::cancellation_slot wait_slot() const noexcept {
    return slot_ != nullptr ? slot_->inner.slot() : asio::cancellation_slot();
  }

private:
  // The link's reference held by the timer.
  class owned_link {
  public:
    explicit owned_link(activity_timer* owner) : link_(new activity_link(owner)) {}
    owned_link(const owned_link&) = delete;
    owned_link& operator=(const owned_link&) = delete;
    ~owned_link() { activity_link::release(link_); }
    activity_link* get() const noexcept { return link_; }

  private:
    activity_link* link_;
  };

  // Before timer_: constructed first, released last.
  owned_link link_;

protected:
  wheel_timer_impl<Clock, WaitTraits, Executor> timer_;
  activity_stamp<Clock> activity_;

private:
  template <typename, typename>
  friend class rearming_handler;

  // Emplaced in the cancellation slot of the user's handler, in place of the wheel wait's:
  // an emit must reach the operation whatever stage it is at, including a success
  // completion already queued, which the wheel no longer knows (see cancel_op()). It passes
  // the emit on to the wheel wait through `inner`, so that a wait still in the wheel is
  // aborted there, as it was (that path needs no memory). The link to the timer is cut from
  // whichever side goes first: by the timer when the operation completes, is cancelled, or
  // the timer is destroyed; by this handler's destructor when the user's signal is destroyed
  // or its slot re-used.
  struct slot_link {
    activity_timer* timer = nullptr;
    asio::cancellation_signal inner;
  };

  template <typename Owner>
  struct slot_canceller : slot_link {
    explicit slot_canceller(Owner* owner) noexcept { this->timer = owner; }
    slot_canceller(const slot_canceller&) = delete;
    slot_canceller& operator=(const slot_canceller&) = delete;
    ~slot_canceller() {
      if (this->timer != nullptr)
        this->timer->slot_ = nullptr;
    }

    void operator()(asio::cancellation_type_t type) {
      using ct = asio::cancellation_type;
      if (this->timer == nullptr || !(type & (ct::terminal | ct::partial | ct::total)))
        return;
      activity_timer& t = *this->timer;
      {
        // A completion running on another thread reads and writes state_ under the lock.
        std::lock_guard lock(t.link_.get()->mutex);
        if (t.state_ == op_state::pending) {
          // Judged now, for a success completion already queued; a wait still in the wheel
          // is aborted by the emit below, whose completion does not read this.
          t.state_ = static_cast<Owner&>(t).due_now() ? op_state::complete : op_state::abort;
          // A wait aborted there may leave the timer in its queue.
          t.leave_queue();
        }
        t.cut_slot();
      }
      this->inner.emit(type); // this object is not destroyed by cut_slot()
    }
  };

  void cut_slot() noexcept {
    if (slot_ != nullptr) {
      slot_->timer = nullptr;
      slot_ = nullptr;
    }
  }

  // A queue woke the timer (with the queue service's lock held): its parked wait completes
  // now, and on_wait() judges it.
  static void wake(activity_timer& t, const time_point& now) { t.timer_.retarget(now); }

  // The context's queue service, once the timer has been given a range; else null.
  queue_service* queues_ = nullptr;
  // The handler in the cancellation slot of the pending operation, linked to this timer
  // (see slot_canceller); null when there is none, or its link was cut.
  slot_link* slot_ = nullptr;
};

} // namespace asio_wheel::detail

#endif // ASIO_WHEEL_DETAIL_ACTIVITY_TIMER_HPP
