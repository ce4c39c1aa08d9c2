//
// beast/basic_stream.hpp
// ~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_BEAST_BASIC_STREAM_HPP
#define ASIO_WHEEL_BEAST_BASIC_STREAM_HPP

#if !defined(ASIO_WHEEL_USE_BOOST_ASIO)
#error                                                                                             \
    "asio_wheel/beast/ needs the Boost.Asio flavour: link asio_wheel::asio_wheel_beast (or asio_wheel_boost), or define ASIO_WHEEL_USE_BOOST_ASIO"
#endif

#include <asio_wheel/beast/detail/rate_policy_access.hpp>
#include <asio_wheel/detail/wheel_timer_impl.hpp>

#include <asio_wheel/detail/asio_forward.hpp>

#include <boost/asio/basic_stream_socket.hpp>
#include <boost/asio/basic_waitable_timer.hpp>
#include <boost/asio/connect.hpp>
#include <boost/beast/core/detail/config.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/rate_policy.hpp>
#include <boost/beast/core/role.hpp>
#include <boost/beast/core/stream_traits.hpp>
#include <boost/core/empty_value.hpp>
#include <boost/enable_shared_from_this.hpp>
#include <boost/shared_ptr.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace boost::asio::ssl {
template <typename>
class stream;
} // namespace boost::asio::ssl

namespace asio_wheel {

/// A stream socket wrapper with timeouts, a rate policy and an associated executor: Beast's
/// @c boost::beast::basic_stream, whose timeouts live in the context's timing wheel.
/**
 * The same interface and the same semantics as <tt>boost::beast::basic_stream</tt> (Boost
 * 1.81), so that replacing <tt>boost::beast::tcp_stream</tt> by asio_wheel::tcp_stream
 * changes nothing else, inside <tt>websocket::stream</tt> and <tt>beast::ssl_stream</tt> too:
 * call expires_after() (or expires_at(), expires_never()) before each logical operation;
 * when the time passes while a read, write or connect is outstanding, the socket is closed and
 * the operation completes with <tt>boost::beast::error::timeout</tt>. Beast's documentation of
 * @c basic_stream applies word for word.
 *
 * @par What differs: the cost of a timeout
 * Beast's stream keeps two <tt>net::steady_timer</tt>s: every read or write with a timeout
 * waits on one (an allocation and a timer-heap insertion under the reactor's lock) and cancels
 * it on completion (a heap removal and an aborted handler run through the scheduler). This
 * stream keeps one wheel wait for both directions and re-arms it lazily, as asio_wheel's
 * idle_timer does: expires_after() stores a deadline (a clock read), an operation whose
 * deadline is not earlier than the armed one leaves the wait alone, and its completion
 * cancels nothing while the other direction has a timed operation outstanding. When the
 * wheel's wait fires, it closes the socket for an operation found overdue and otherwise waits
 * again for the earliest deadline still pending: a stream with a read and a write outstanding
 * at once costs one wheel wait per timeout period. An operation that completes and leaves
 * none with a timeout outstanding cancels the wait (one aborted handler) before its handler
 * is called, as Beast's stream cancels its timer: so a handler that throws, or that wakes
 * another thread which starts the next operation at once, finds the stream as Beast's would,
 * and an idle program's <tt>run()</tt> returns. Strictly alternating operations (a read, then
 * from its handler a write) therefore cost one wheel wait and one aborted handler each, as
 * with Beast, on the wheel instead of the reactor's timer heap.
 *
 * @par Precision
 * As the wheel's: an operation times out no earlier than its deadline and at most one wheel
 * tick (plus the event loop's latency) after it. Beast's stream is late by the event loop's
 * latency only.
 *
 * @par Thread Safety
 * @e Distinct @e objects: Safe.@n
 * @e Shared @e objects: Unsafe. As with Beast's stream, all asynchronous operations must be
 * performed within the same implicit or explicit strand; the wheel's wait completes on the
 * executor associated with the operation that armed it.
 *
 * @par Completion Signature
 * As Beast's stream: reads and writes <tt>void(error_code, std::size_t)</tt>; connects
 * <tt>void(error_code)</tt>, or with the endpoint or iterator connected to; a timeout
 * completes the operation with <tt>boost::beast::error::timeout</tt> (see each operation).
 *
 * @par Per-Operation Cancellation
 * async_connect(), async_read_some() and async_write_some(): terminal, partial and total, as
 * the socket's operations.
 *
 * @par Lifetime
 * As Beast's stream: the stream must outlive its outstanding operations, as any Asio I/O
 * object; destroying it closes the socket. The execution context must outlive it.
 *
 * @tparam Protocol The protocol of the socket, such as <tt>boost::asio::ip::tcp</tt>.
 * @tparam Executor The executor of the socket, used for completion handlers which do not have
 * their own.
 * @tparam RatePolicy A rate policy as Beast defines it
 * (<tt>boost::beast::unlimited_rate_policy</tt>, <tt>boost::beast::simple_rate_policy</tt>, or a
 * user's that befriends <tt>boost::beast::rate_policy_access</tt>).
 */
template <class Protocol, class Executor = asio::any_io_executor,
          class RatePolicy = ::boost::beast::unlimited_rate_policy>
class basic_stream {
public:
  /// The type of the underlying socket.
  using socket_type = asio::basic_stream_socket<Protocol, Executor>;

  /// The type of the executor associated with the stream.
  using executor_type = ::boost::beast::executor_type<socket_type>;

  /// Rebinds the stream type to another executor.
  template <class Executor1>
  struct rebind_executor {
    /// The stream type when rebound to the specified executor.
    using other = basic_stream<Protocol, Executor1, RatePolicy>;
  };

  /// The protocol type.
  using protocol_type = Protocol;

  /// The endpoint type.
  using endpoint_type = typename Protocol::endpoint;

private:
  static_assert(asio::is_executor<Executor>::value || asio::execution::is_executor<Executor>::value,
                "Executor type requirements not met");

  using clock_type = std::chrono::steady_clock;
  using time_point = clock_type::time_point;

  static constexpr time_point never() noexcept { return (time_point::max)(); }

  // One direction. `expiry` is what the next operation of this direction times out at; it is
  // changed only while no operation of the direction is pending (Beast's rule), so while one
  // is, it is that operation's deadline. `timed`: the pending operation has that deadline
  // (Beast: it waits on its timer); `timeout`: the wheel's wait found it overdue and closed
  // the socket.
  struct op_state {
    time_point expiry = never();
    bool pending = false;
    bool timed = false;
    bool timeout = false;
  };

  struct impl_type : ::boost::enable_shared_from_this<impl_type>, ::boost::empty_value<RatePolicy> {
    socket_type socket;
    op_state read;
    op_state write;
    // The rate policy's one-second slices, as Beast's stream has it: not a timeout.
    asio::basic_waitable_timer<clock_type, asio::wait_traits<clock_type>, Executor> timer;
    int waiting = 0;

    // The wheel wait shared by both directions. Invariant: while armed_for is not never(), one
    // wait of generation `generation` is pending on `deadline` (in the wheel, or its success
    // queued), due at armed_for, which is no later than the deadline of every timed
    // operation; a completion of another generation is stale and does nothing.
    detail::wheel_timer_impl<clock_type, asio::wait_traits<clock_type>, Executor> deadline;
    time_point armed_for = never();
    std::uint64_t generation = 0;
    // The generation of the posted check of an operation overdue when it starts (see arm()):
    // never that of a wheel wait, whose generations start at 1.
    static constexpr std::uint64_t overdue_check = 0;

    template <class... Args>
    explicit impl_type(std::false_type, Args&&... args);

    template <class RatePolicy_, class... Args>
    explicit impl_type(std::true_type, RatePolicy_&& policy, Args&&... args);

    // The moved-to stream starts without a wheel wait; `other`'s stays with it.
    impl_type(impl_type&& other);

    impl_type& operator=(impl_type&&) = delete;

    executor_type ex() noexcept { return socket.get_executor(); }

    RatePolicy& policy() noexcept { return this->::boost::empty_value<RatePolicy>::get(); }
    const RatePolicy& policy() const noexcept {
      return this->::boost::empty_value<RatePolicy>::get();
    }

    template <class Executor2>
    void on_timer(const Executor2& ex2);

    // An operation of `state` starts with a deadline: file it with the wheel's wait.
    template <class Executor2>
    void arm(op_state& state, const Executor2& ex2);

    // An operation of `state` ended: true if the wheel's wait had timed it out.
    bool disarm(op_state& state) noexcept;

    // Once no operation with a timeout is outstanding: cancel the wheel's wait. Called before
    // an operation's handler, never after it (the handler may start the next operation on
    // another thread at once).
    void release_if_untimed() noexcept;

    // The wheel's wait completed: time out what is overdue, wait again for the rest.
    template <class Executor2>
    void on_deadline(std::uint64_t gen, const Executor2& ex2);

    void reset();          // set timeouts to never
    void close() noexcept; // cancel everything
  };

  ::boost::shared_ptr<impl_type> impl_;

  template <class Executor2>
  struct deadline_handler;
  struct ops;
  class pending_guard;

  template <class>
  friend class ::boost::asio::ssl::stream;
  template <typename, typename, typename>
  friend class basic_stream;

  using lowest_layer_type = socket_type;

  lowest_layer_type& lowest_layer() noexcept { return impl_->socket; }

  const lowest_layer_type& lowest_layer() const noexcept { return impl_->socket; }

public:
  /// Destructor. Cancels the outstanding asynchronous operations, as close() does.
  ~basic_stream();

  /// Constructor: forwards every argument to the constructor of the socket.
  template <class Arg0, class... Args,
            class = std::enable_if_t<!std::is_constructible_v<RatePolicy, Arg0>>>
  explicit basic_stream(Arg0&& arg0, Args&&... args);

  /// Constructor from a stream of another executor type: takes its socket.
  template <class Executor_>
  explicit basic_stream(basic_stream<Protocol, Executor_, RatePolicy>&& other);

  /// Constructor: the rate policy (decay-copied), then the socket's constructor arguments.
  template <class RatePolicy_, class Arg0, class... Args,
            class = std::enable_if_t<std::is_constructible_v<RatePolicy, RatePolicy_>>>
  basic_stream(RatePolicy_&& policy, Arg0&& arg0, Args&&... args);

  /// Move constructor. The moved-from stream is as if newly constructed (its socket closed).
  basic_stream(basic_stream&& other);

  basic_stream& operator=(basic_stream&&) = delete;

  /// The underlying socket.
  socket_type& socket() noexcept { return impl_->socket; }

  /// The underlying socket.
  const socket_type& socket() const noexcept { return impl_->socket; }

  /// Cancels the outstanding operations, as cancel() does, and gives the socket away.
  socket_type release_socket();

  /// The rate policy.
  RatePolicy& rate_policy() noexcept { return impl_->policy(); }

  /// The rate policy.
  const RatePolicy& rate_policy() const noexcept { return impl_->policy(); }

  /// Sets the timeout of the next logical operations to @c expiry_time from now.
  /**
   * Applies to the reads, writes and connects started after this call (a connect counts as
   * both), in each direction that has no operation outstanding, until it is set again. If the
   * time passes while an operation is outstanding, the socket is closed and the operation
   * completes with <tt>boost::beast::error::timeout</tt>; if it passes while none is, the next
   * operation times out at once. O(1): a clock read and two stores (no timer operation).
   */
  void expires_after(std::chrono::steady_clock::duration expiry_time);

  /// Sets the timeout of the next logical operations to the time point @c expiry_time, as
  /// expires_after() does.
  void expires_at(std::chrono::steady_clock::time_point expiry_time);

  /// Disables the timeout of the next logical operations.
  void expires_never();

  /// Cancels the outstanding asynchronous operations (they complete with
  /// <tt>operation_aborted</tt>).
  void cancel();

  /// Cancels the outstanding asynchronous operations, as cancel() does, and closes the socket.
  void close();

  /// The executor used for completion handlers that have no associated executor.
  executor_type get_executor() noexcept { return impl_->ex(); }

  /// Connects the socket (blocking; no timeout), as the socket's connect() does.
  void connect(const endpoint_type& ep) { socket().connect(ep); }

  /// Connects the socket (blocking; no timeout), as the socket's connect() does.
  void connect(const endpoint_type& ep, error_code& ec) { socket().connect(ep, ec); }

  /// Connects to one of the endpoints (blocking; no timeout), as <tt>net::connect</tt> does.
  template <class EndpointSequence,
            class = std::enable_if_t<asio::is_endpoint_sequence<EndpointSequence>::value>>
  typename Protocol::endpoint connect(const EndpointSequence& endpoints) {
    return asio::connect(socket(), endpoints);
  }

  /// Connects to one of the endpoints (blocking; no timeout), as <tt>net::connect</tt> does.
  template <class EndpointSequence,
            class = std::enable_if_t<asio::is_endpoint_sequence<EndpointSequence>::value>>
  typename Protocol::endpoint connect(const EndpointSequence& endpoints, error_code& ec) {
    return asio::connect(socket(), endpoints, ec);
  }

  /// Connects to one of the endpoints (blocking; no timeout), as <tt>net::connect</tt> does.
  template <class Iterator>
  Iterator connect(Iterator begin, Iterator end) {
    return asio::connect(socket(), begin, end);
  }

  /// Connects to one of the endpoints (blocking; no timeout), as <tt>net::connect</tt> does.
  template <class Iterator>
  Iterator connect(Iterator begin, Iterator end, error_code& ec) {
    return asio::connect(socket(), begin, end, ec);
  }

  /// Connects to one of the endpoints (blocking; no timeout), as <tt>net::connect</tt> does.
  template <class EndpointSequence, class ConnectCondition,
            class = std::enable_if_t<asio::is_endpoint_sequence<EndpointSequence>::value>>
  typename Protocol::endpoint connect(const EndpointSequence& endpoints,
                                      ConnectCondition connect_condition) {
    return asio::connect(socket(), endpoints, connect_condition);
  }

  /// Connects to one of the endpoints (blocking; no timeout), as <tt>net::connect</tt> does.
  template <class EndpointSequence, class ConnectCondition,
            class = std::enable_if_t<asio::is_endpoint_sequence<EndpointSequence>::value>>
  typename Protocol::endpoint connect(const EndpointSequence& endpoints,
                                      ConnectCondition connect_condition, error_code& ec) {
    return asio::connect(socket(), endpoints, connect_condition, ec);
  }

  /// Connects to one of the endpoints (blocking; no timeout), as <tt>net::connect</tt> does.
  template <class Iterator, class ConnectCondition>
  Iterator connect(Iterator begin, Iterator end, ConnectCondition connect_condition) {
    return asio::connect(socket(), begin, end, connect_condition);
  }

  /// Connects to one of the endpoints (blocking; no timeout), as <tt>net::connect</tt> does.
  template <class Iterator, class ConnectCondition>
  Iterator connect(Iterator begin, Iterator end, ConnectCondition connect_condition,
                   error_code& ec) {
    return asio::connect(socket(), begin, end, connect_condition, ec);
  }

  /// Connects the socket to the endpoint, with the timeout in force.
  /**
   * @par Completion Signature
   * @code void(error_code ec) @endcode
   * <tt>boost::beast::error::timeout</tt> if the timeout passed first (the socket is then
   * closed).
   *
   * @par Per-Operation Cancellation
   * terminal, partial and total, as the socket's connect.
   */
  template <
      BOOST_BEAST_ASYNC_TPARAM1 ConnectHandler = asio::default_completion_token_t<executor_type>>
  BOOST_BEAST_ASYNC_RESULT1(ConnectHandler)
  async_connect(const endpoint_type& ep,
                ConnectHandler&& handler = asio::default_completion_token_t<executor_type>{});

  /// Connects to one of the endpoints, with the timeout in force over the whole attempt.
  /**
   * @par Completion Signature
   * @code void(error_code ec, typename Protocol::endpoint ep) @endcode
   */
  template <class EndpointSequence,
            BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, typename Protocol::endpoint))
                RangeConnectHandler = asio::default_completion_token_t<executor_type>,
            class = std::enable_if_t<asio::is_endpoint_sequence<EndpointSequence>::value>>
  BOOST_ASIO_INITFN_RESULT_TYPE(RangeConnectHandler, void(error_code, typename Protocol::endpoint))
  async_connect(const EndpointSequence& endpoints,
                RangeConnectHandler&& handler = asio::default_completion_token_t<executor_type>{});

  /// Connects to the first endpoint that @c connect_condition accepts, with the timeout in
  /// force over the whole attempt.
  /**
   * @par Completion Signature
   * @code void(error_code ec, typename Protocol::endpoint ep) @endcode
   */
  template <class EndpointSequence, class ConnectCondition,
            BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, typename Protocol::endpoint))
                RangeConnectHandler = asio::default_completion_token_t<executor_type>,
            class = std::enable_if_t<asio::is_endpoint_sequence<EndpointSequence>::value>>
  BOOST_ASIO_INITFN_RESULT_TYPE(RangeConnectHandler, void(error_code, typename Protocol::endpoint))
  async_connect(const EndpointSequence& endpoints, ConnectCondition connect_condition,
                RangeConnectHandler&& handler = asio::default_completion_token_t<executor_type>{});

  /// Connects to one of the endpoints in <tt>[begin, end)</tt>, with the timeout in force.
  /**
   * @par Completion Signature
   * @code void(error_code ec, Iterator it) @endcode
   */
  template <class Iterator,
            BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, Iterator))
                IteratorConnectHandler = asio::default_completion_token_t<executor_type>>
  BOOST_ASIO_INITFN_RESULT_TYPE(IteratorConnectHandler, void(error_code, Iterator))
  async_connect(
      Iterator begin, Iterator end,
      IteratorConnectHandler&& handler = asio::default_completion_token_t<executor_type>{});

  /// Connects to the first endpoint in <tt>[begin, end)</tt> that @c connect_condition
  /// accepts, with the timeout in force.
  /**
   * @par Completion Signature
   * @code void(error_code ec, Iterator it) @endcode
   */
  template <class Iterator, class ConnectCondition,
            BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, Iterator))
                IteratorConnectHandler = asio::default_completion_token_t<executor_type>>
  BOOST_ASIO_INITFN_RESULT_TYPE(IteratorConnectHandler, void(error_code, Iterator))
  async_connect(
      Iterator begin, Iterator end, ConnectCondition connect_condition,
      IteratorConnectHandler&& handler = asio::default_completion_token_t<executor_type>{});

  /// Reads some data (blocking; no timeout), as the socket's read_some() does.
  template <class MutableBufferSequence>
  std::size_t read_some(const MutableBufferSequence& buffers) {
    return impl_->socket.read_some(buffers);
  }

  /// Reads some data (blocking; no timeout), as the socket's read_some() does.
  template <class MutableBufferSequence>
  std::size_t read_some(const MutableBufferSequence& buffers, error_code& ec) {
    return impl_->socket.read_some(buffers, ec);
  }

  /// Reads some data, with the timeout in force and the rate policy's limit.
  /**
   * @par Completion Signature
   * @code void(error_code ec, std::size_t bytes_transferred) @endcode
   * <tt>boost::beast::error::timeout</tt> if the timeout passed first (the socket is then
   * closed).
   *
   * @par Per-Operation Cancellation
   * terminal, partial and total, as the socket's read.
   */
  template <class MutableBufferSequence,
            BOOST_BEAST_ASYNC_TPARAM2 ReadHandler = asio::default_completion_token_t<executor_type>>
  BOOST_BEAST_ASYNC_RESULT2(ReadHandler)
  async_read_some(const MutableBufferSequence& buffers,
                  ReadHandler&& handler = asio::default_completion_token_t<executor_type>{});

  /// Writes some data (blocking; no timeout), as the socket's write_some() does.
  template <class ConstBufferSequence>
  std::size_t write_some(const ConstBufferSequence& buffers) {
    return impl_->socket.write_some(buffers);
  }

  /// Writes some data (blocking; no timeout), as the socket's write_some() does.
  template <class ConstBufferSequence>
  std::size_t write_some(const ConstBufferSequence& buffers, error_code& ec) {
    return impl_->socket.write_some(buffers, ec);
  }

  /// Writes some data, with the timeout in force and the rate policy's limit.
  /**
   * @par Completion Signature
   * @code void(error_code ec, std::size_t bytes_transferred) @endcode
   * <tt>boost::beast::error::timeout</tt> if the timeout passed first (the socket is then
   * closed).
   *
   * @par Per-Operation Cancellation
   * terminal, partial and total, as the socket's write.
   */
  template <class ConstBufferSequence,
            BOOST_BEAST_ASYNC_TPARAM2 WriteHandler = asio::default_completion_token_t<Executor>>
  BOOST_BEAST_ASYNC_RESULT2(WriteHandler)
  async_write_some(const ConstBufferSequence& buffers,
                   WriteHandler&& handler = asio::default_completion_token_t<Executor>{});
};

/// Closes the stream's socket (Beast's customization point, used by its teardown).
template <class Protocol, class Executor, class RatePolicy>
void beast_close_socket(basic_stream<Protocol, Executor, RatePolicy>& stream);

/// Tears down the connection for a websocket close, as for Beast's stream.
template <class Protocol, class Executor, class RatePolicy>
void teardown(::boost::beast::role_type role, basic_stream<Protocol, Executor, RatePolicy>& stream,
              error_code& ec);

/// Tears down the connection for a websocket close, asynchronously, as for Beast's stream.
template <class Protocol, class Executor, class RatePolicy, class TeardownHandler>
void async_teardown(::boost::beast::role_type role,
                    basic_stream<Protocol, Executor, RatePolicy>& stream,
                    TeardownHandler&& handler);

} // namespace asio_wheel

#include <asio_wheel/beast/impl/basic_stream.hpp>

#endif // ASIO_WHEEL_BEAST_BASIC_STREAM_HPP
