//
// detail/wheel_timer_impl.hpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_DETAIL_WHEEL_TIMER_IMPL_HPP
#define ASIO_WHEEL_DETAIL_WHEEL_TIMER_IMPL_HPP

#include <asio_wheel/detail/context_of.hpp>
#include <asio_wheel/detail/io_executor_holder.hpp>
#include <asio_wheel/detail/timer_entry.hpp>
#include <asio_wheel/detail/wheel_service.hpp>

#include <asio_wheel/detail/asio_forward.hpp>

#include <cassert>
#include <cstddef>
#include <type_traits>
#include <utility>

namespace asio_wheel::detail {

// The state of one wheel timer object and its requests to the service, as Asio's
// io_object_impl is for its I/O objects: basic_wheel_timer is this plus Asio's interface and
// its documentation, and the library's own timers (activity_timer) hold one directly, for
// the one request a public timer does not make, retarget(). The timer owns its executor
// and its expiry; the service owns everything in entry_ (see timer_entry), and the timer
// only asks it whether it may skip the service (timer_entry::idle), the same question for
// every request.
template <typename Clock, typename WaitTraits, typename Executor>
class wheel_timer_impl {
  using service_type = wheel_service<Clock, WaitTraits>;

public:
  using executor_type = Executor;
  using clock_type = Clock;
  using duration = typename Clock::duration;
  using time_point = typename Clock::time_point;

  explicit wheel_timer_impl(const executor_type& ex)
      : service_(&asio::use_service<service_type>(context_of(ex))), executor_(ex, *service_) {}

  template <typename ExecutionContext, typename = std::enable_if_t<std::is_convertible_v<
                                           ExecutionContext&, asio::execution_context&>>>
  explicit wheel_timer_impl(ExecutionContext& context)
      : service_(&asio::use_service<service_type>(context)),
        executor_(context.get_executor(), *service_) {}

  // Pending waits move with the timer; `other` is left without an expiry.
  template <typename Executor1>
  explicit wheel_timer_impl(wheel_timer_impl<Clock, WaitTraits, Executor1>&& other)
      : service_(other.service_), executor_(other.executor_.get(), *other.service_),
        expiry_(other.expiry_) {
    other.expiry_ = time_point();
    take_waits(other, true);
  }

  wheel_timer_impl(const wheel_timer_impl&) = delete;
  wheel_timer_impl& operator=(const wheel_timer_impl&) = delete;

  ~wheel_timer_impl() { release(true); }

  // Aborts this timer's waits and takes those of `other`, its executor and its expiry.
  template <typename Executor1>
  void move_assign(wheel_timer_impl<Clock, WaitTraits, Executor1>& other) {
    if (static_cast<void*>(this) == static_cast<void*>(&other))
      return;
    // Assigned an idle timer of the same context, this timer keeps its shard while its
    // aborted waits are queued there (see wheel_shard::release).
    release(false, other.service_ == service_ && other.entry_.idle());
    service_ = other.service_;
    executor_ = executor_holder(other.executor_.get(), *other.service_);
    expiry_ = other.expiry_;
    other.expiry_ = time_point();
    take_waits(other, false);
  }

  get_executor_result_t<executor_type> get_executor() noexcept { return executor_.get(); }

  std::size_t cancel() { return entry_.idle() ? 0 : live_service().cancel(entry_); }

  std::size_t cancel_one() { return entry_.idle() ? 0 : live_service().cancel_one(entry_); }

  time_point expiry() const noexcept { return expiry_; }

  std::size_t expires_at(const time_point& expiry_time) {
    const std::size_t n = cancel();
    expiry_ = expiry_time;
    return n;
  }

  std::size_t expires_after(const duration& expiry_time) {
    return expires_at(add(clock_type::now(), expiry_time));
  }

  // Moves the pending waits to `expiry` without aborting them (they complete then, or now
  // if it has passed). The service first: if it throws, nothing changed.
  void retarget(const time_point& expiry) {
    if (!entry_.idle())
      live_service().retarget(entry_, expiry);
    expiry_ = expiry;
  }

  template <typename WaitToken>
  auto async_wait(WaitToken&& token) {
    return asio::async_initiate<WaitToken, void(error_code)>(initiate_async_wait(this), token);
  }

  // Asio's saturating time_point + duration.
  static time_point add(const time_point& t, const duration& d) {
    const time_point epoch;
    if (t >= epoch) {
      if ((time_point::max)() - t < d)
        return (time_point::max)();
    } else if (-(t - (time_point::min)()) > d) {
      return (time_point::min)();
    }
    return t + d;
  }

private:
  template <typename, typename, typename>
  friend class wheel_timer_impl;

  using executor_holder = io_executor_holder<Executor>;

  // Also an idle timer's last shard, where a wait of it may still be queued or completing
  // (see wheel_service::other_thread_shard), unless this timer keeps its own filing (see
  // move_assign) or, assigned (`fresh` false), its own last shard holds such a wait.
  template <typename Other>
  void take_waits(Other& other, bool fresh) {
    if (!other.entry_.idle())
      service_->move_entry(entry_, other.entry_);
    else if (entry_.idle())
      service_->take_last_shard(entry_, other.entry_, fresh);
  }

  // Aborts the pending waits, as cancel(), and leaves the wheel: the timer is going, or
  // taking another's state (`keep_shard`: see wheel_shard::release). If it throws (only when
  // assigned over), nothing changed.
  void release(bool from_destructor, bool keep_shard = false) {
    if (!entry_.idle())
      live_service().release(entry_, from_destructor, keep_shard);
  }

  // The service, which a debug build checks is still there: a timer outlives its execution
  // context only to be destroyed, idle (the context's shutdown aborted its waits).
  service_type& live_service() const noexcept {
    assert(service_->alive() &&
           "asio_wheel: a timer used after its execution context (io_context) was destroyed; "
           "destroy timers, or stop using them, before their context");
    return *service_;
  }

  class initiate_async_wait {
  public:
    using executor_type = Executor;

    explicit initiate_async_wait(wheel_timer_impl* self) noexcept : self_(self) {}

    executor_type get_executor() const noexcept { return self_->executor_.get(); }

    template <typename WaitHandler>
    void operator()(WaitHandler&& handler) const {
      static_assert(std::is_invocable_v<std::decay_t<WaitHandler>&&, error_code>,
                    "WaitHandler must be callable as void(error_code)");
      self_->executor_.visit([&](const auto& io_ex) {
        self_->live_service().async_wait(self_->entry_, self_->expiry_,
                                         std::forward<WaitHandler>(handler), io_ex);
      });
    }

  private:
    wheel_timer_impl* self_;
  };

  // Never null: timers are always bound to their context's service.
  service_type* service_;
  executor_holder executor_;
  time_point expiry_{};
  // In the service's wheel while waits are pending; the service guards its contents.
  timer_entry entry_;
};

} // namespace asio_wheel::detail

#endif // ASIO_WHEEL_DETAIL_WHEEL_TIMER_IMPL_HPP
