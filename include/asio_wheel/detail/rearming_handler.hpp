//
// detail/rearming_handler.hpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_DETAIL_REARMING_HANDLER_HPP
#define ASIO_WHEEL_DETAIL_REARMING_HANDLER_HPP

#include <asio_wheel/detail/asio_forward.hpp>
#include <asio_wheel/detail/futex_mutex.hpp>

#include <atomic>
#include <cstddef>

#include <type_traits>
#include <utility>

namespace asio_wheel::detail {

// What an activity timer and the handler of its operation share, so that the timer may be
// destroyed at any time, as an Asio timer may: the handler's completion reads the timer only
// through this, under `mutex`, and finds `owner` null once the timer is gone. A wait's
// completion may be queued, or running on another thread, when the timer is destroyed; the
// destructor then leaves in `verdict` the outcome that completion finishes with (the timer
// judged at its destruction, as cancel() judges a queued completion). One per timer,
// allocated with it, freed by the last of the timer and its handlers (`refs`).
struct activity_link {
  // What a completion that finds its timer destroyed reports.
  enum class verdict : unsigned char {
    abort,    // operation_aborted: the timer was not due when destroyed
    complete, // due when destroyed: success (basic_heartbeat: a drop)
    ping      // basic_heartbeat: due, with a ping
  };

  explicit activity_link(void* o) noexcept : owner(o) {}

  // Drops one reference; the last frees the link. Without `mutex` held: the one that frees
  // it is the last to have used it.
  static void release(activity_link* link) noexcept {
    if (link != nullptr && link->refs.fetch_sub(1, std::memory_order_acq_rel) == 1)
      delete link;
  }

  // Guards owner, verdict and, while owner is not null, the owner's state that a completion
  // reads and writes (see activity_timer). Taken once per wake of the timer's wait, not per
  // touch().
  futex_mutex mutex;
  // The timer's reference, and one per handler holding the link.
  std::atomic<std::size_t> refs{1};
  // The activity_timer, as void*: its type names this one's users. Null once destroyed.
  void* owner;
  verdict outcome = verdict::abort;
};

// The handler of an activity timer's wheel wait: the user's handler, and the link to the
// owner that decides, when the wait completes, whether to call it or to wait again with it.
// Used in place of asio::async_compose, whose operation would keep the handler in a block of
// its own: this one, with a small handler, fits in the wheel timer's room for one wait, so
// an idle connection's wait allocates nothing. The handler's associated executor, allocator
// and cancellation slot are this one's (see the asio::associator specialisation below).
template <typename Owner, typename Handler>
class rearming_handler {
public:
  template <typename H>
  rearming_handler(activity_link* link, H&& handler)
      : link_(link), handler_(std::forward<H>(handler)) {
    link_->refs.fetch_add(1, std::memory_order_relaxed);
  }

  // Taken from (moved into a wait) as soon as the move starts: a wait that failed to start
  // without taking it leaves it whole, to be called with an error instead (see taken()).
  rearming_handler(rearming_handler&& other) noexcept(std::is_nothrow_move_constructible_v<Handler>)
      : link_(std::exchange(other.link_, nullptr)), handler_(std::move(other.handler_)) {}

  rearming_handler& operator=(const rearming_handler&) = delete;

  ~rearming_handler() { activity_link::release(link_); }

  // Static: the owner may be gone (destroyed with its wait, or after its completion was
  // queued); on_wait() reads it only through the link, locked.
  void operator()(const error_code& ec) { Owner::on_wait(std::move(*this), ec); }

  activity_link* link() const noexcept { return link_; }
  // With the link's mutex held, and its owner not null.
  Owner& owner() const noexcept {
    return static_cast<Owner&>(*static_cast<typename Owner::base*>(link_->owner));
  }
  // The slot its wheel wait is bound to (see activity_timer::slot_canceller). Read when the
  // wait starts, with the owner alive on this thread; none once taken.
  asio::cancellation_slot wait_slot() const noexcept {
    return link_ != nullptr ? owner().wait_slot() : asio::cancellation_slot();
  }
  bool taken() const noexcept { return link_ == nullptr; }
  Handler& handler() noexcept { return handler_; }
  const Handler& handler() const noexcept { return handler_; }

private:
  activity_link* link_;
  Handler handler_;
};

} // namespace asio_wheel::detail

// The user's handler speaks for the rearming_handler that carries it: associated executor
// and allocator, as for Asio's own binders. Not its cancellation slot: the owner has put a
// handler of its own there (activity_timer::slot_canceller), and the wheel wait is bound to
// that one's inner slot.
template <template <typename, typename> class Associator, typename Owner, typename Handler,
          typename DefaultCandidate>
struct asio_wheel::asio::associator<
    Associator, asio_wheel::detail::rearming_handler<Owner, Handler>, DefaultCandidate> {
  using type = typename Associator<Handler, DefaultCandidate>::type;

  static type get(const asio_wheel::detail::rearming_handler<Owner, Handler>& h,
                  const DefaultCandidate& c = DefaultCandidate()) noexcept {
    return Associator<Handler, DefaultCandidate>::get(h.handler(), c);
  }
};

template <typename Owner, typename Handler, typename DefaultCandidate>
struct asio_wheel::asio::associator<asio_wheel::asio::associated_cancellation_slot,
                                    asio_wheel::detail::rearming_handler<Owner, Handler>,
                                    DefaultCandidate> {
  using type = asio_wheel::asio::cancellation_slot;

  static type get(const asio_wheel::detail::rearming_handler<Owner, Handler>& h,
                  const DefaultCandidate& = DefaultCandidate()) noexcept {
    return h.wait_slot();
  }
};

#endif // ASIO_WHEEL_DETAIL_REARMING_HANDLER_HPP
