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

#include <type_traits>
#include <utility>

namespace asio_wheel::detail {

// The handler of an activity timer's wheel wait: the user's handler, and the owner that
// decides, when the wait completes, whether to call it or to wait again with it. Used in
// place of asio::async_compose, whose operation would keep the handler in a block of its
// own: this one, with a small handler, fits in the wheel timer's room for one wait, so an
// idle connection's wait allocates nothing. The handler's associated executor, allocator
// and cancellation slot are this one's (see the asio::associator specialisation below).
template <typename Owner, typename Handler>
class rearming_handler {
public:
  template <typename H>
  rearming_handler(Owner* owner, H&& handler) : owner_(owner), handler_(std::forward<H>(handler)) {}

  // Taken from (moved into a wait) as soon as the move starts: a wait that failed to start
  // without taking it leaves it whole, to be called with an error instead (see taken()).
  rearming_handler(rearming_handler&& other) noexcept(std::is_nothrow_move_constructible_v<Handler>)
      : owner_(std::exchange(other.owner_, nullptr)), handler_(std::move(other.handler_)) {}

  // Static: after operation_aborted the owner may be gone (a destroyed timer aborts its
  // wait), and on_wait() then only calls the handler.
  void operator()(const error_code& ec) { Owner::on_wait(std::move(*this), ec); }

  Owner& owner() const noexcept { return *owner_; }
  // The slot its wheel wait is bound to (see activity_timer::slot_canceller). Read when the
  // wait starts, with the owner alive; none once taken.
  asio::cancellation_slot wait_slot() const noexcept {
    return owner_ != nullptr ? owner_->wait_slot() : asio::cancellation_slot();
  }
  bool taken() const noexcept { return owner_ == nullptr; }
  Handler& handler() noexcept { return handler_; }
  const Handler& handler() const noexcept { return handler_; }

private:
  Owner* owner_;
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
