//
// detail/service_alarm.hpp
// ~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_DETAIL_SERVICE_ALARM_HPP
#define ASIO_WHEEL_DETAIL_SERVICE_ALARM_HPP

#include <asio_wheel/detail/own_memory.hpp>
#include <asio_wheel/detail/wheel_driver.hpp>
#include <asio_wheel/virtual_clock.hpp>

#include <asio_wheel/detail/asio_forward.hpp>
#include <asio_wheel/detail/exceptions.hpp>

#include <new>
#include <optional>
#include <utility>

namespace asio_wheel::detail {

// The wheel service's alarm: its one Asio timer, on the service's home, armed for the
// wheel's next expiry by the rule of the service's wheel_driver. It has at most one
// wait outstanding, in memory of its own: to move it earlier, the wait is cancelled, and its
// handler, an expiry turn, arms it again. Exists from the context's first wait until
// shutdown, so that a context that never waits has no timer. Guarded by the service's lock.
template <typename Clock, typename WaitTraits>
class service_alarm {
public:
  using time_point = typename Clock::time_point;

  bool started() const noexcept { return timer_.has_value(); }
  void start(const asio::any_io_executor& home) { timer_.emplace(home); }
  // At shutdown, while Asio's timer service and reactor still exist (they may have been
  // created after the wheel's, and so be destroyed before it).
  void stop() noexcept { timer_.reset(); }

  // The wait's handler runs (`expired`: it completed without error): its memory is free.
  // Returns true if it was cancelled to be armed again (see superseded_), or if it expired
  // but every wait pending when the reactor found it has gone since (see emptied_): the
  // handler then arms the alarm again rather than running a turn. False if it expired, even
  // when it was superseded after its expiry was found.
  bool done(bool expired) noexcept {
    busy_ = false;
    const bool emptied = std::exchange(emptied_, false);
    return std::exchange(superseded_, false) && (!expired || emptied);
  }
  own_memory& memory() noexcept { return memory_; }

  // Whether arm_if_earlier(driver, tick, ...) would do nothing: the alarm is armed for
  // `tick` or earlier, or its wait was cancelled and comes back to its handler, which arms
  // it for the wheel's next expiry. Inline, for the service to test before the call: a
  // burst of waits outside run() finds it so on every wait after the first that was earlier.
  bool settled(const wheel_driver<Clock>& driver, tick_type tick) const noexcept {
    return !driver.needs_alarm(tick) || (busy_ && !driver.armed());
  }

  // Makes sure the alarm wakes no later than `tick`, by the rule of `driver`, with `handler`
  // (in memory()). Returns false if it could not be armed: only Asio's own timer queue can
  // fail, when it must grow its array to take the wait (other Asio timers of the clock were
  // added meanwhile) and the heap has nothing.
  template <typename Handler>
  bool arm_if_earlier(wheel_driver<Clock>& driver, tick_type tick, const Handler& handler) {
    if (!driver.needs_alarm(tick))
      return true;
    if constexpr (is_virtual_clock<Clock>::value) {
      // No Asio timer: virtual_time reads the alarm's time (virtual_next) and drives the turn.
      driver.armed_for(tick);
      return true;
    }
    if (busy_) {
      // Its one wait is armed for later, or done with its handler queued. Cancelled, it
      // comes back to its handler, which arms the alarm for the wheel's next expiry, this
      // tick included: the wait's memory is free by then.
      disarm(driver);
      return true;
    }
    timer_->expires_at(driver.scale().time_of(tick)); // no wait pending: cancels nothing
    ASIO_WHEEL_TRY {
      timer_->async_wait(handler);
    }
    ASIO_WHEEL_CATCH(const std::bad_alloc&) {
      return false;
    }
    busy_ = true;
    driver.armed_for(tick);
    return true;
  }

  // The shard's last pending wait has left (aborted, or taken by a turn that is not this
  // alarm's): disarms the alarm, and notes it for done() if its wait is outstanding.
  void emptied(wheel_driver<Clock>& driver) noexcept {
    if (busy_)
      emptied_ = true;
    disarm(driver);
  }

  // Nothing to wake for: the wait, if armed, is cancelled (so that run() can return), and
  // its handler finds nothing to do.
  void disarm(wheel_driver<Clock>& driver) noexcept {
    if (driver.armed()) {
      if constexpr (!is_virtual_clock<Clock>::value) {
        driver.superseded(); // busy_: settled() for every tick until done()
        superseded_ = true;
        cancel();
      } else {
        driver.disarm();
      }
    }
  }

private:
  // Asio reports no error from cancelling a timer; one that did would leave the wait to
  // complete at its time, which its handler handles as well. Out of line: rarely needed.
  // (The error_code overload is deprecated, and gone with ASIO_NO_DEPRECATED.)
  [[gnu::noinline]] void cancel() noexcept {
    ASIO_WHEEL_TRY {
      timer_->cancel();
    }
    ASIO_WHEEL_CATCH_ALL {}
  }

  std::optional<asio::basic_waitable_timer<Clock, WaitTraits, asio::any_io_executor>> timer_;
  // True while the wait is outstanding: from async_wait() until its handler runs (completed
  // or cancelled).
  bool busy_ = false;
  // True from cancelling the outstanding wait until its handler runs. That handler is
  // queued at once, not by the reactor, so it arms the alarm again rather than running a
  // turn (see wheel_shard::on_alarm). Also set when the wait had expired already, its
  // handler queued by the reactor, which the cancel cannot take back: that handler
  // completes without error, and runs the turn in its place among the reactor's
  // completions (done()). Were it to arm the alarm again instead, the turn would wait for
  // the reactor's next pass, behind whatever was queued meanwhile (an abort, say), where
  // Asio completes its own timers found in the first.
  bool superseded_ = false;
  // True from the shard's last pending wait leaving while the wait is outstanding until its
  // handler runs. A reactor pass that found the wait expired before that found nothing
  // that is still pending: a wait started since, even one whose expiry has passed, is for
  // the reactor's next pass, as Asio's own timer started then would be, behind the aborts
  // queued meanwhile. So the handler arms the alarm again, as for a cancelled wait.
  bool emptied_ = false;
  own_memory memory_;
};

} // namespace asio_wheel::detail

#endif // ASIO_WHEEL_DETAIL_SERVICE_ALARM_HPP
