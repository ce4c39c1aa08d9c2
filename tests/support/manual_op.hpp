#ifndef ASIO_WHEEL_TEST_MANUAL_OP_HPP
#define ASIO_WHEEL_TEST_MANUAL_OP_HPP

#include <asio/associated_cancellation_slot.hpp>
#include <asio/async_result.hpp>
#include <asio/cancellation_type.hpp>
#include <asio/error.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>

#include <functional>
#include <memory>
#include <thread>
#include <type_traits>
#include <utility>

namespace asio_wheel::test {

// manual_op: an asynchronous operation of our own (async_initiate), completed by the test.
// It supports per-operation cancellation by emplacing a handler in the slot, which records
// the cancellation type and completes the operation with operation_aborted (posted, as
// Asio's own operations do). A cancellation that arrives after the operation has completed
// is counted, not acted upon: no correct caller emits into the slot of a finished operation.

class manual_op {
public:
  explicit manual_op(asio::io_context& ctx) : ex_(ctx.get_executor()) {}

  manual_op(const manual_op&) = delete;
  manual_op& operator=(const manual_op&) = delete;

  template <typename Token>
  auto async_run(Token&& token) {
    return asio::async_initiate<Token, void(asio::error_code)>(initiation{this}, token);
  }

  bool pending() const noexcept { return handler_ != nullptr; }

  // Completes the operation through the executor, as Asio's operations do.
  void complete_later(asio::error_code ec = {}) {
    if (!handler_)
      return;
    asio::post(ex_, [h = std::move(handler_), ec]() mutable { h->call(ec); });
  }

  // Completes the operation from inside the caller (which must be a handler on the
  // operation's executor).
  void complete_now(asio::error_code ec = {}) {
    if (!handler_)
      return;
    auto h = std::move(handler_);
    h->call(ec);
  }

  int initiations = 0;
  int cancellations = 0;
  int emits_after_completion = 0;
  asio::cancellation_type_t last_type = asio::cancellation_type::none;
  std::thread::id cancelled_on; // the thread of the last cancellation
  bool had_slot = false;
  // Called in each cancellation that acts, inside the emit, before the completion is posted:
  // what a test must observe at the emission itself (the clock, say), not in the handler.
  std::function<void()> on_cancel_emitted;

private:
  struct handler_base {
    virtual ~handler_base() = default;
    virtual void call(asio::error_code ec) = 0;
  };

  template <typename H>
  struct handler_impl final : handler_base {
    explicit handler_impl(H&& h) : handler(std::move(h)) {}
    void call(asio::error_code ec) override { std::move(handler)(ec); }
    H handler;
  };

  struct canceller {
    manual_op* self;
    void operator()(asio::cancellation_type_t type) const { self->on_cancel(type); }
  };

  struct initiation {
    manual_op* self;

    // Like an I/O object's initiation: says which executor the operation runs on.
    using executor_type = asio::io_context::executor_type;
    executor_type get_executor() const noexcept { return self->ex_; }

    template <typename Handler>
    void operator()(Handler&& handler) const {
      ++self->initiations;
      auto slot = asio::get_associated_cancellation_slot(handler);
      self->had_slot = slot.is_connected();
      if (slot.is_connected())
        slot.template emplace<canceller>(canceller{self});
      self->handler_ =
          std::make_unique<handler_impl<std::decay_t<Handler>>>(std::forward<Handler>(handler));
    }
  };

  void on_cancel(asio::cancellation_type_t type) {
    if (!handler_) {
      ++emits_after_completion;
      return;
    }
    ++cancellations;
    last_type = type;
    cancelled_on = std::this_thread::get_id();
    if (on_cancel_emitted)
      on_cancel_emitted();
    complete_later(asio::error::operation_aborted);
  }

  asio::io_context::executor_type ex_;
  std::unique_ptr<handler_base> handler_;
};

} // namespace asio_wheel::test

#endif // ASIO_WHEEL_TEST_MANUAL_OP_HPP
