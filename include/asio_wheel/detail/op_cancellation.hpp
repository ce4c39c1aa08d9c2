//
// detail/op_cancellation.hpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_DETAIL_OP_CANCELLATION_HPP
#define ASIO_WHEEL_DETAIL_OP_CANCELLATION_HPP

#include <asio_wheel/detail/wait_op.hpp>

#include <asio_wheel/detail/asio_forward.hpp>

#include <atomic>

namespace asio_wheel::detail {

// Per-operation cancellation: the handler emplaced in a wait's cancellation slot. Refers to
// the operation, not to the timer object, so it keeps working after the timer is moved.
// `Service` takes its lock in cancel_by_slot() and forget_slot(), and clears op_
// when the wait leaves its timer.
template <typename Service>
class op_cancellation : public cancellation_target {
public:
  explicit op_cancellation(Service* service) noexcept : service_(service) {}
  op_cancellation(const op_cancellation&) = delete;
  op_cancellation& operator=(const op_cancellation&) = delete;

  // The signal is being destroyed, or its slot re-used, while the wait may be pending.
  // A null link means the wait is gone, and perhaps the service with it: hands off.
  ~op_cancellation() {
    if (op_.load(std::memory_order_acquire) != nullptr)
      service_->forget_slot(*this);
  }

  void operator()(asio::cancellation_type_t type) {
    using ct = asio::cancellation_type;
    if (!!(type & (ct::terminal | ct::partial | ct::total)) &&
        op_.load(std::memory_order_acquire) != nullptr)
      service_->cancel_by_slot(*this);
  }

private:
  Service* service_;
};

} // namespace asio_wheel::detail

#endif // ASIO_WHEEL_DETAIL_OP_CANCELLATION_HPP
