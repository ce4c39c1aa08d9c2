//
// beast/impl/basic_stream.hpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_BEAST_IMPL_BASIC_STREAM_HPP
#define ASIO_WHEEL_BEAST_IMPL_BASIC_STREAM_HPP

#include <asio_wheel/beast/basic_stream.hpp>
#include <asio_wheel/detail/saturating_time.hpp>

#include <boost/asio/coroutine.hpp>
#include <boost/assert.hpp>
#include <boost/beast/core/async_base.hpp>
#include <boost/beast/core/buffer_traits.hpp>
#include <boost/beast/core/buffers_prefix.hpp>
#include <boost/beast/websocket/teardown.hpp>
#include <boost/make_shared.hpp>
#include <boost/weak_ptr.hpp>

#include <algorithm>
#include <utility>

namespace asio_wheel {

//------------------------------------------------------------------------------------------------
// impl_type

template <class Protocol, class Executor, class RatePolicy>
template <class... Args>
basic_stream<Protocol, Executor, RatePolicy>::impl_type::impl_type(std::false_type, Args&&... args)
    : socket(std::forward<Args>(args)...), timer(ex()), deadline(ex()) {}

template <class Protocol, class Executor, class RatePolicy>
template <class RatePolicy_, class... Args>
basic_stream<Protocol, Executor, RatePolicy>::impl_type::impl_type(std::true_type,
                                                                   RatePolicy_&& policy,
                                                                   Args&&... args)
    : ::boost::empty_value<RatePolicy>(::boost::empty_init_t{}, std::forward<RatePolicy_>(policy)),
      socket(std::forward<Args>(args)...), timer(ex()), deadline(ex()) {}

template <class Protocol, class Executor, class RatePolicy>
basic_stream<Protocol, Executor, RatePolicy>::impl_type::impl_type(impl_type&& other)
    : ::boost::enable_shared_from_this<impl_type>(),
      ::boost::empty_value<RatePolicy>(::boost::empty_init_t{}, std::move(other.policy())),
      socket(std::move(other.socket)), read(other.read), write(other.write),
      timer(std::move(other.timer)), waiting(other.waiting), deadline(ex()) {
  // Beast moves its op states with their pending flags; the timing state is not moved: the
  // moved-to stream files its deadlines afresh with its next operations.
  read.timed = read.timeout = false;
  write.timed = write.timeout = false;
}

template <class Protocol, class Executor, class RatePolicy>
template <class Executor2>
void basic_stream<Protocol, Executor, RatePolicy>::impl_type::on_timer(const Executor2& ex2) {
  BOOST_ASSERT(waiting > 0);

  // The last waiter starts the new slice (Beast's rate timer, unchanged).
  if (--waiting > 0)
    return;

  timer.expires_after(std::chrono::seconds(1));

  beast_detail::rate_policy_access<RatePolicy>::on_timer(policy());

  struct handler : ::boost::empty_value<Executor2> {
    ::boost::weak_ptr<impl_type> wp;

    using executor_type = Executor2;

    executor_type get_executor() const noexcept { return this->get(); }

    handler(const Executor2& ex, const ::boost::shared_ptr<impl_type>& sp)
        : ::boost::empty_value<Executor2>(::boost::empty_init_t{}, ex), wp(sp) {}

    void operator()(error_code ec) {
      auto sp = wp.lock();
      if (!sp || ec)
        return;
      sp->on_timer(this->get());
    }
  };

  ++waiting;
  timer.async_wait(handler(ex2, this->shared_from_this()));
}

// The handler of the wheel's wait: on the executor of the operation that armed it, as Beast's
// timeout handler. It does not keep the stream alive: a stream destroyed with its wait
// pending aborts the wait.
template <class Protocol, class Executor, class RatePolicy>
template <class Executor2>
struct basic_stream<Protocol, Executor, RatePolicy>::deadline_handler {
  using executor_type = Executor2;

  ::boost::weak_ptr<impl_type> wp;
  std::uint64_t generation;
  executor_type ex;

  executor_type get_executor() const noexcept { return ex; }

  // Posted: the check of an operation overdue when it started (see arm()).
  void operator()() { (*this)(error_code()); }

  void operator()(error_code ec) {
    // Aborted: released (release_if_untimed) or the stream is gone.
    if (ec)
      return;
    if (auto sp = wp.lock())
      sp->on_deadline(generation, ex);
  }
};

template <class Protocol, class Executor, class RatePolicy>
template <class Executor2>
void basic_stream<Protocol, Executor, RatePolicy>::impl_type::arm(op_state& state,
                                                                  const Executor2& ex2) {
  BOOST_ASSERT(!state.timed && !state.timeout);
  state.timed = true;
  if (state.expiry <= clock_type::now()) {
    // Already overdue (say, expires_after(0)): Beast's timer completes such a wait at once,
    // ahead of an operation that completes immediately; the wheel would only find it due at
    // its next tick. So a posted check times it out, as Beast's does; the wheel is not used.
    asio::post(ex2, deadline_handler<Executor2>{this->weak_from_this(), overdue_check, ex2});
    return;
  }
  if (armed_for == never()) {
    // No wait: start one (the only path that allocates, once per idle-to-busy transition and
    // per timeout period of a busy stream).
    deadline.expires_at(state.expiry);
    deadline.async_wait(deadline_handler<Executor2>{this->weak_from_this(), ++generation, ex2});
    armed_for = state.expiry;
  } else if (state.expiry < armed_for) {
    // A shorter timeout than the one armed: the wait moves earlier (O(1), nothing aborted).
    deadline.retarget(state.expiry);
    armed_for = state.expiry;
  }
  // Otherwise the armed wait comes first, and on_deadline() waits again for this deadline.
}

template <class Protocol, class Executor, class RatePolicy>
bool basic_stream<Protocol, Executor, RatePolicy>::impl_type::disarm(op_state& state) noexcept {
  if (!state.timed)
    return false;
  state.timed = false;
  return std::exchange(state.timeout, false);
}

template <class Protocol, class Executor, class RatePolicy>
void basic_stream<Protocol, Executor, RatePolicy>::impl_type::release_if_untimed() noexcept {
  if (armed_for == never() || read.timed || write.timed)
    return;
  armed_for = never();
  ++generation; // a success already queued is stale from now on
  try {
    deadline.cancel();
  } catch (...) {
    // No memory to abort the wait: it stays, completes at armed_for as stale, and the
    // context's run() waits for it. Nothing is lost.
  }
}

template <class Protocol, class Executor, class RatePolicy>
template <class Executor2>
void basic_stream<Protocol, Executor, RatePolicy>::impl_type::on_deadline(std::uint64_t gen,
                                                                          const Executor2& ex2) {
  if (gen != generation && gen != overdue_check)
    return;
  if (gen != overdue_check)
    armed_for = never();
  const time_point now = clock_type::now();
  bool overdue = false;
  time_point next = never();
  for (op_state* state : {&read, &write}) {
    if (!state->timed)
      continue;
    if (state->expiry <= now) {
      state->timeout = true;
      overdue = true;
    } else {
      next = (std::min)(next, state->expiry);
    }
  }
  if (overdue) {
    // As Beast: the socket is closed, every outstanding operation completes (the overdue ones
    // with error::timeout), and none needs the wait any more.
    close();
    return;
  }
  if (next == never() || gen == overdue_check)
    return; // nothing left to time, or the wheel's wait (if any) times the rest
  // Busy: the operations outstanding were started after the wait was armed, with later
  // deadlines. One wait for the earliest of them.
  deadline.expires_at(next);
  deadline.async_wait(deadline_handler<Executor2>{this->weak_from_this(), ++generation, ex2});
  armed_for = next;
}

template <class Protocol, class Executor, class RatePolicy>
void basic_stream<Protocol, Executor, RatePolicy>::impl_type::reset() {
  // Beast's rule: there is nothing to apply the expiration to if both directions are busy.
  BOOST_ASSERT(!read.pending || !write.pending);
  if (!read.pending)
    read.expiry = never();
  if (!write.pending)
    write.expiry = never();
}

template <class Protocol, class Executor, class RatePolicy>
void basic_stream<Protocol, Executor, RatePolicy>::impl_type::close() noexcept {
  {
    error_code ec;
    socket.close(ec);
  }
  try {
    timer.cancel();
  } catch (...) {
  }
}

//------------------------------------------------------------------------------------------------
// Operations

// Sets a direction's pending flag for the life of an operation (moves with it), as Beast's.
template <class Protocol, class Executor, class RatePolicy>
class basic_stream<Protocol, Executor, RatePolicy>::pending_guard {
  bool* b_ = nullptr;

public:
  pending_guard() = default;

  explicit pending_guard(bool& b) { assign(b); }

  pending_guard(pending_guard&& other) noexcept : b_(std::exchange(other.b_, nullptr)) {}

  pending_guard& operator=(pending_guard&&) = delete;

  ~pending_guard() { reset(); }

  void assign(bool& b) {
    BOOST_ASSERT(b_ == nullptr);
    BOOST_ASSERT(!b);
    b_ = &b;
    b = true;
  }

  void reset() noexcept {
    if (b_ != nullptr)
      *std::exchange(b_, nullptr) = false;
  }
};

template <class Protocol, class Executor, class RatePolicy>
struct basic_stream<Protocol, Executor, RatePolicy>::ops {
  using policy_access = beast_detail::rate_policy_access<RatePolicy>;

  template <bool isRead, class Buffers, class Handler>
  class transfer_op : public ::boost::beast::async_base<Handler, Executor>, public asio::coroutine {
    ::boost::shared_ptr<impl_type> impl_;
    pending_guard pg_;
    Buffers b_;

    using is_read = std::integral_constant<bool, isRead>;

    op_state& state() { return isRead ? impl_->read : impl_->write; }

    std::size_t available_bytes() {
      if constexpr (isRead)
        return policy_access::available_read_bytes(impl_->policy());
      else
        return policy_access::available_write_bytes(impl_->policy());
    }

    void transfer_bytes(std::size_t n) {
      if constexpr (isRead)
        policy_access::transfer_read_bytes(impl_->policy(), n);
      else
        policy_access::transfer_write_bytes(impl_->policy(), n);
    }

    void async_perform(std::size_t amount) {
      if constexpr (isRead)
        impl_->socket.async_read_some(::boost::beast::buffers_prefix(amount, b_), std::move(*this));
      else
        impl_->socket.async_write_some(::boost::beast::buffers_prefix(amount, b_),
                                       std::move(*this));
    }

    // Lets go of the wheel's wait if nothing timed is outstanding, then calls the handler.
    // Nothing is touched after the call, as Beast's stream: the handler may throw, or wake a
    // thread that starts the next operation at once.
    void upcall(const error_code& ec, std::size_t n) {
      pg_.reset();
      transfer_bytes(n);
      impl_->release_if_untimed();
      this->complete_now(ec, n);
    }

  public:
    template <class Handler_>
    transfer_op(Handler_&& h, basic_stream& s, const Buffers& b)
        : ::boost::beast::async_base<Handler, Executor>(std::forward<Handler_>(h),
                                                        s.get_executor()),
          impl_(s.impl_), b_(b) {
      this->set_allowed_cancellation(asio::cancellation_type::all);
      if (::boost::beast::buffer_bytes(b_) == 0 && state().pending) {
        // Beast's workaround for its issue #2065: an enclosing SSL stream completes a
        // zero-length write with a zero-length read while a read is outstanding.
        this->complete(false, error_code(), 0);
      } else {
        pg_.assign(state().pending);
        (*this)({});
      }
    }

    void operator()(error_code ec, std::size_t bytes_transferred = 0) {
      BOOST_ASIO_CORO_REENTER(*this) {
        // Empty buffers: the no-op is performed, and the timeout applied by hand, as Beast.
        if (::boost::beast::buffer_bytes(b_) == 0) {
          BOOST_ASIO_CORO_YIELD async_perform(0);
          if (state().expiry <= clock_type::now()) {
            impl_->close();
            ec = ::boost::beast::error::timeout;
          }
          upcall(ec, bytes_transferred);
          return;
        }

        if (state().expiry != never())
          impl_->arm(state(), this->get_executor());

        // The rate policy allows nothing now: wait for its next slice.
        if (available_bytes() == 0) {
          ++impl_->waiting;
          BOOST_ASIO_CORO_YIELD impl_->timer.async_wait(std::move(*this));
          if (ec) {
            // The socket was closed, or timed out.
            if (impl_->disarm(state()))
              ec = ::boost::beast::error::timeout;
            upcall(ec, 0);
            return;
          }
          impl_->on_timer(this->get_executor());
        }

        // At least one byte, or bytes_transferred could be 0.
        BOOST_ASIO_CORO_YIELD async_perform((std::max<std::size_t>)(available_bytes(), 1));

        if (impl_->disarm(state()))
          ec = ::boost::beast::error::timeout;
        upcall(ec, bytes_transferred);
      }
    }
  };

  template <class Handler>
  class connect_op : public ::boost::beast::async_base<Handler, Executor> {
    ::boost::shared_ptr<impl_type> impl_;
    pending_guard pg0_;
    pending_guard pg1_;

    // A connect counts as a read and a write; its deadline is the write direction's (Beast).
    op_state& state() noexcept { return impl_->write; }

    template <class Handler_>
    connect_op(Handler_&& h, basic_stream& s, int)
        : ::boost::beast::async_base<Handler, Executor>(std::forward<Handler_>(h),
                                                        s.get_executor()),
          impl_(s.impl_), pg0_(impl_->read.pending), pg1_(impl_->write.pending) {
      this->set_allowed_cancellation(asio::cancellation_type::all);
      if (state().expiry != never())
        impl_->arm(state(), this->get_executor());
    }

  public:
    template <class Handler_>
    connect_op(Handler_&& h, basic_stream& s, const endpoint_type& ep)
        : connect_op(std::forward<Handler_>(h), s, 0) {
      impl_->socket.async_connect(ep, std::move(*this));
    }

    template <class Endpoints, class Condition, class Handler_>
    connect_op(Handler_&& h, basic_stream& s, const Endpoints& eps, const Condition& cond)
        : connect_op(std::forward<Handler_>(h), s, 0) {
      asio::async_connect(impl_->socket, eps, cond, std::move(*this));
    }

    template <class Iterator, class Condition, class Handler_>
    connect_op(Handler_&& h, basic_stream& s, Iterator begin, Iterator end, const Condition& cond)
        : connect_op(std::forward<Handler_>(h), s, 0) {
      asio::async_connect(impl_->socket, begin, end, cond, std::move(*this));
    }

    template <class... Args>
    void operator()(error_code ec, Args&&... args) {
      if (impl_->disarm(state()))
        ec = ::boost::beast::error::timeout;
      pg0_.reset();
      pg1_.reset();
      impl_->release_if_untimed(); // before the call, as upcall() in transfer_op
      this->complete_now(ec, std::forward<Args>(args)...);
    }
  };

  struct run_read_op {
    template <class ReadHandler, class Buffers>
    void operator()(ReadHandler&& h, basic_stream* s, const Buffers& b) {
      static_assert(std::is_invocable_v<ReadHandler, error_code, std::size_t>,
                    "ReadHandler type requirements not met");
      transfer_op<true, Buffers, std::decay_t<ReadHandler>>(std::forward<ReadHandler>(h), *s, b);
    }
  };

  struct run_write_op {
    template <class WriteHandler, class Buffers>
    void operator()(WriteHandler&& h, basic_stream* s, const Buffers& b) {
      static_assert(std::is_invocable_v<WriteHandler, error_code, std::size_t>,
                    "WriteHandler type requirements not met");
      transfer_op<false, Buffers, std::decay_t<WriteHandler>>(std::forward<WriteHandler>(h), *s, b);
    }
  };

  struct run_connect_op {
    template <class ConnectHandler>
    void operator()(ConnectHandler&& h, basic_stream* s, const endpoint_type& ep) {
      static_assert(std::is_invocable_v<ConnectHandler, error_code>,
                    "ConnectHandler type requirements not met");
      connect_op<std::decay_t<ConnectHandler>>(std::forward<ConnectHandler>(h), *s, ep);
    }
  };

  struct run_connect_range_op {
    template <class RangeConnectHandler, class EndpointSequence, class Condition>
    void operator()(RangeConnectHandler&& h, basic_stream* s, const EndpointSequence& eps,
                    const Condition& cond) {
      static_assert(
          std::is_invocable_v<RangeConnectHandler, error_code, typename Protocol::endpoint>,
          "RangeConnectHandler type requirements not met");
      connect_op<std::decay_t<RangeConnectHandler>>(std::forward<RangeConnectHandler>(h), *s, eps,
                                                    cond);
    }
  };

  struct run_connect_iter_op {
    template <class IteratorConnectHandler, class Iterator, class Condition>
    void operator()(IteratorConnectHandler&& h, basic_stream* s, Iterator begin, Iterator end,
                    const Condition& cond) {
      static_assert(std::is_invocable_v<IteratorConnectHandler, error_code, Iterator>,
                    "IteratorConnectHandler type requirements not met");
      connect_op<std::decay_t<IteratorConnectHandler>>(std::forward<IteratorConnectHandler>(h), *s,
                                                       begin, end, cond);
    }
  };

  // Accepts every endpoint (Beast's detail::any_endpoint).
  struct any_endpoint {
    template <class Error, class Endpoint>
    bool operator()(const Error&, const Endpoint&) const noexcept {
      return true;
    }
  };
};

//------------------------------------------------------------------------------------------------
// basic_stream

template <class Protocol, class Executor, class RatePolicy>
basic_stream<Protocol, Executor, RatePolicy>::~basic_stream() {
  // The shared state can outlive *this (operations hold it): cancel them so that it goes soon.
  impl_->close();
}

template <class Protocol, class Executor, class RatePolicy>
template <class Arg0, class... Args, class>
basic_stream<Protocol, Executor, RatePolicy>::basic_stream(Arg0&& arg0, Args&&... args)
    : impl_(::boost::make_shared<impl_type>(std::false_type{}, std::forward<Arg0>(arg0),
                                            std::forward<Args>(args)...)) {}

template <class Protocol, class Executor, class RatePolicy>
template <class RatePolicy_, class Arg0, class... Args, class>
basic_stream<Protocol, Executor, RatePolicy>::basic_stream(RatePolicy_&& policy, Arg0&& arg0,
                                                           Args&&... args)
    : impl_(::boost::make_shared<impl_type>(std::true_type{}, std::forward<RatePolicy_>(policy),
                                            std::forward<Arg0>(arg0),
                                            std::forward<Args>(args)...)) {}

template <class Protocol, class Executor, class RatePolicy>
basic_stream<Protocol, Executor, RatePolicy>::basic_stream(basic_stream&& other)
    : impl_(::boost::make_shared<impl_type>(std::move(*other.impl_))) {
  // As Beast: the impl is moved, not the pointer, so that the moved-from stream is as if
  // newly created (Asio's guarantee for sockets). Its wheel wait has nothing left to time.
  other.impl_->release_if_untimed();
}

template <class Protocol, class Executor, class RatePolicy>
template <class Executor_>
basic_stream<Protocol, Executor, RatePolicy>::basic_stream(
    basic_stream<Protocol, Executor_, RatePolicy>&& other)
    : impl_(::boost::make_shared<impl_type>(std::false_type{}, std::move(other.impl_->socket))) {}

template <class Protocol, class Executor, class RatePolicy>
auto basic_stream<Protocol, Executor, RatePolicy>::release_socket() -> socket_type {
  this->cancel();
  return std::move(impl_->socket);
}

template <class Protocol, class Executor, class RatePolicy>
void basic_stream<Protocol, Executor, RatePolicy>::expires_after(
    std::chrono::steady_clock::duration expiry_time) {
  expires_at(detail::saturating_add(clock_type::now(), expiry_time));
}

template <class Protocol, class Executor, class RatePolicy>
void basic_stream<Protocol, Executor, RatePolicy>::expires_at(
    std::chrono::steady_clock::time_point expiry_time) {
  // Beast's rule: there is nothing to apply the expiration to if both directions are busy.
  BOOST_ASSERT(!impl_->read.pending || !impl_->write.pending);
  if (!impl_->read.pending)
    impl_->read.expiry = expiry_time;
  if (!impl_->write.pending)
    impl_->write.expiry = expiry_time;
}

template <class Protocol, class Executor, class RatePolicy>
void basic_stream<Protocol, Executor, RatePolicy>::expires_never() {
  impl_->reset();
}

template <class Protocol, class Executor, class RatePolicy>
void basic_stream<Protocol, Executor, RatePolicy>::cancel() {
  error_code ec;
  impl_->socket.cancel(ec);
  impl_->timer.cancel();
}

template <class Protocol, class Executor, class RatePolicy>
void basic_stream<Protocol, Executor, RatePolicy>::close() {
  impl_->close();
}

template <class Protocol, class Executor, class RatePolicy>
template <BOOST_BEAST_ASYNC_TPARAM1 ConnectHandler>
BOOST_BEAST_ASYNC_RESULT1(ConnectHandler)
basic_stream<Protocol, Executor, RatePolicy>::async_connect(const endpoint_type& ep,
                                                            ConnectHandler&& handler) {
  return asio::async_initiate<ConnectHandler, void(error_code)>(typename ops::run_connect_op{},
                                                                handler, this, ep);
}

template <class Protocol, class Executor, class RatePolicy>
template <class EndpointSequence,
          BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, typename Protocol::endpoint))
              RangeConnectHandler,
          class>
BOOST_ASIO_INITFN_RESULT_TYPE(RangeConnectHandler, void(error_code, typename Protocol::endpoint))
basic_stream<Protocol, Executor, RatePolicy>::async_connect(const EndpointSequence& endpoints,
                                                            RangeConnectHandler&& handler) {
  return asio::async_initiate<RangeConnectHandler, void(error_code, typename Protocol::endpoint)>(
      typename ops::run_connect_range_op{}, handler, this, endpoints, typename ops::any_endpoint{});
}

template <class Protocol, class Executor, class RatePolicy>
template <class EndpointSequence, class ConnectCondition,
          BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, typename Protocol::endpoint))
              RangeConnectHandler,
          class>
BOOST_ASIO_INITFN_RESULT_TYPE(RangeConnectHandler, void(error_code, typename Protocol::endpoint))
basic_stream<Protocol, Executor, RatePolicy>::async_connect(const EndpointSequence& endpoints,
                                                            ConnectCondition connect_condition,
                                                            RangeConnectHandler&& handler) {
  return asio::async_initiate<RangeConnectHandler, void(error_code, typename Protocol::endpoint)>(
      typename ops::run_connect_range_op{}, handler, this, endpoints, connect_condition);
}

template <class Protocol, class Executor, class RatePolicy>
template <class Iterator,
          BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, Iterator)) IteratorConnectHandler>
BOOST_ASIO_INITFN_RESULT_TYPE(IteratorConnectHandler, void(error_code, Iterator))
basic_stream<Protocol, Executor, RatePolicy>::async_connect(Iterator begin, Iterator end,
                                                            IteratorConnectHandler&& handler) {
  return asio::async_initiate<IteratorConnectHandler, void(error_code, Iterator)>(
      typename ops::run_connect_iter_op{}, handler, this, begin, end, typename ops::any_endpoint{});
}

template <class Protocol, class Executor, class RatePolicy>
template <class Iterator, class ConnectCondition,
          BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, Iterator)) IteratorConnectHandler>
BOOST_ASIO_INITFN_RESULT_TYPE(IteratorConnectHandler, void(error_code, Iterator))
basic_stream<Protocol, Executor, RatePolicy>::async_connect(Iterator begin, Iterator end,
                                                            ConnectCondition connect_condition,
                                                            IteratorConnectHandler&& handler) {
  return asio::async_initiate<IteratorConnectHandler, void(error_code, Iterator)>(
      typename ops::run_connect_iter_op{}, handler, this, begin, end, connect_condition);
}

template <class Protocol, class Executor, class RatePolicy>
template <class MutableBufferSequence, BOOST_BEAST_ASYNC_TPARAM2 ReadHandler>
BOOST_BEAST_ASYNC_RESULT2(ReadHandler)
basic_stream<Protocol, Executor, RatePolicy>::async_read_some(const MutableBufferSequence& buffers,
                                                              ReadHandler&& handler) {
  static_assert(asio::is_mutable_buffer_sequence<MutableBufferSequence>::value,
                "MutableBufferSequence type requirements not met");
  return asio::async_initiate<ReadHandler, void(error_code, std::size_t)>(
      typename ops::run_read_op{}, handler, this, buffers);
}

template <class Protocol, class Executor, class RatePolicy>
template <class ConstBufferSequence, BOOST_BEAST_ASYNC_TPARAM2 WriteHandler>
BOOST_BEAST_ASYNC_RESULT2(WriteHandler)
basic_stream<Protocol, Executor, RatePolicy>::async_write_some(const ConstBufferSequence& buffers,
                                                               WriteHandler&& handler) {
  static_assert(asio::is_const_buffer_sequence<ConstBufferSequence>::value,
                "ConstBufferSequence type requirements not met");
  return asio::async_initiate<WriteHandler, void(error_code, std::size_t)>(
      typename ops::run_write_op{}, handler, this, buffers);
}

//------------------------------------------------------------------------------------------------
// Customization points, found by argument-dependent lookup

template <class Protocol, class Executor, class RatePolicy>
void beast_close_socket(basic_stream<Protocol, Executor, RatePolicy>& stream) {
  error_code ec;
  stream.socket().close(ec);
}

template <class Protocol, class Executor, class RatePolicy>
void teardown(::boost::beast::role_type role, basic_stream<Protocol, Executor, RatePolicy>& stream,
              error_code& ec) {
  using ::boost::beast::websocket::teardown;
  teardown(role, stream.socket(), ec);
}

template <class Protocol, class Executor, class RatePolicy, class TeardownHandler>
void async_teardown(::boost::beast::role_type role,
                    basic_stream<Protocol, Executor, RatePolicy>& stream,
                    TeardownHandler&& handler) {
  using ::boost::beast::websocket::async_teardown;
  async_teardown(role, stream.socket(), std::forward<TeardownHandler>(handler));
}

} // namespace asio_wheel

#endif // ASIO_WHEEL_BEAST_IMPL_BASIC_STREAM_HPP
