//
// detail/handler_executor.hpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_DETAIL_HANDLER_EXECUTOR_HPP
#define ASIO_WHEEL_DETAIL_HANDLER_EXECUTOR_HPP

// Where the service's own handlers run (its home), which waits' handlers may be called
// directly from there instead of being dispatched to their executors, and so which
// operation a new wait gets.

#include <asio_wheel/detail/context_of.hpp>
#include <asio_wheel/detail/futex_mutex.hpp>
#include <asio_wheel/detail/own_memory.hpp>
#include <asio_wheel/detail/timer_entry.hpp>
#include <asio_wheel/detail/wait_op.hpp>

#include <asio_wheel/detail/asio_forward.hpp>

#include <atomic>
#include <cassert>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <type_traits>
#include <utility>

namespace asio_wheel::detail {

// Detection traits (C++17 has no requires-expressions).
template <typename Executor, typename = void>
struct has_context_member : std::false_type {}; // a Networking TS executor's context()
template <typename Executor>
struct has_context_member<Executor,
                          std::void_t<decltype(std::declval<const Executor&>().context())>>
    : std::true_type {};

template <typename Executor, typename = void>
struct has_inner_executor : std::false_type {}; // a strand's get_inner_executor()
template <typename Executor>
struct has_inner_executor<
    Executor, std::void_t<decltype(std::declval<const Executor&>().get_inner_executor())>>
    : std::true_type {};

// The home of one wheel service: the executor that the alarm's handler, the drains and the
// continuations run on, chosen once, at the context's first wait (or the first is_home()
// question), as the context's own plain executor: Asio's timer service completes on its
// context's scheduler. Never the timer's or the handler's executor, which may be a strand
// or a user's executor: the alarm and every batch would run inside it, serializing the
// handlers of unrelated timers with its own (and blocking one that waits on work posted to
// it). One per service, shared by its shards.
class service_home {
public:
  explicit service_home(asio::execution_context& context) noexcept : context_(context) {}

  service_home(const service_home&) = delete;
  service_home& operator=(const service_home&) = delete;

  // Chooses the home from the timer's I/O executor or, if that tells nothing, the handler's,
  // unless it is found. Strong guarantee. Any thread; a shard calls it with its own lock
  // held (the order is: a shard's lock, then the home's). Out of line: it runs once per
  // shard, and inlined it would cost every wait's start its inlining budget. Only the
  // reading of the executors' types is a template: the probing of an any_io_executor and
  // the choice are not (adopt(), kind_of_any()), so that they are compiled once per
  // translation unit, or once in all with ASIO_WHEEL_SEPARATE_COMPILATION, instead of once
  // per pair of executor types.
  template <typename IoExecutor, typename Executor>
  [[gnu::cold, gnu::noinline]] void find(const IoExecutor& io_ex, const Executor& ex) {
    // Acquire: a shard that finds the home found by another thread then reads executor_.
    if (found_.load(std::memory_order_acquire))
      return;
    // Reading the executors needs no lock: it reads only them and context_, which is fixed.
    context_kind kind = kind_of(io_ex);
    if (!kind)
      kind = kind_of(ex);
    adopt(kind);
  }

  // True when a handler on `ex` may be called directly from the service's own handlers:
  // `ex` is an executor of the io_context that those handlers run on, and allows
  // blocking.possibly. Work tracking and the continuation hint do not matter for a direct
  // call; Asio's composed operations, for one, carry the work-tracking variant. Without the
  // lock. Per executor type: a call in builds for tests (see ASIO_WHEEL_INLINE_PER_WAIT), not
  // a copy in every handler's make_wait_op().
  template <typename Executor>
  ASIO_WHEEL_INLINE_PER_WAIT bool is_home(const Executor& ex) {
    if constexpr (std::is_same_v<Executor, asio::any_io_executor>) {
      // The template Bits of io_context::basic_executor_type: 4 is outstanding_work.tracked
      // (detail::io_context_bits); blocking.never is a run-time bit, checked in is_home_io.
      return is_home_any<0>(ex) || is_home_any<4>(ex);
    } else {
      return is_home_io(ex);
    }
  }

  // The executor the service's handlers run on; valid once found.
  const asio::any_io_executor& executor() const noexcept { return executor_; }

  // The io_context behind the home, if it is one (else nullptr): its stop() interrupts a
  // batch. Without the lock.
  asio::io_context* io_context() const noexcept {
    return io_context_.load(std::memory_order_relaxed);
  }

  // Posts `handler` home. The operation lives in the handler's memory on an io_context or a
  // thread pool, whose executors take the handler's allocator: nothing to throw. Any other
  // executor may allocate, and throw.
  ASIO_WHEEL_DECL void post(const own_handler& handler);

  // Shutdown, without the lock: the own thread, if any, finishes what it runs (a turn or a
  // drain) and runs nothing more.
  void stop() {
    if (own_thread_) {
      own_thread_->stop();
      own_thread_->join();
    }
  }

  // After shutdown has destroyed what used the home: what the own thread had queued goes.
  void release() noexcept { own_thread_.reset(); }

private:
  // The context behind an executor, as the kind of context it is, when that can be told
  // from the executor's type: every standard executor names its context's type in its
  // context query (strands and property variants forward it), and a type-erased
  // any_io_executor is looked into for the targets Asio itself makes.
  struct context_kind {
    asio::io_context* io = nullptr;
    asio::thread_pool* pool = nullptr;
    // The context's own plain executor, for a context of another kind that has one (the
    // system context): found already type-erased in an any_io_executor, it is kept as it is,
    // so that probing one does not compile the conversion of every variant of the system
    // executor into any_io_executor in every translation unit.
    asio::any_io_executor plain;
    // The system context with the TS executor as the default: the threads of the wheel's own
    // pool that stands in for it (see system_home()).
    unsigned own_threads = 0;
    explicit operator bool() const noexcept { return io || pool || plain || own_threads != 0; }
  };

  template <typename Context>
  context_kind kind_of_context(Context& context) noexcept {
    context_kind kind;
    if (&static_cast<asio::execution_context&>(context) != &context_)
      return kind; // a handler's executor on another context says nothing of this one
    if constexpr (std::is_base_of_v<asio::io_context, Context>)
      kind.io = &context;
    else if constexpr (std::is_base_of_v<asio::thread_pool, Context>)
      kind.pool = &context;
    else if constexpr (std::is_base_of_v<asio::system_context, Context>)
      system_home(kind, context.get_executor());
    return kind;
  }

  // The system context as the home: its plain executor `ex` (any_io_executor holds the
  // system executor in place). Not with the Networking TS's executor as any_io_executor:
  // asio::executor holds the system executor through a process-wide object (its first
  // making allocates, here where nothing may throw) that exit destroys before the system
  // context, whose shutdown destroys the service and with it the home's executor and the
  // alarm's. There the home is a pool of the wheel's own with as many threads as the system
  // context runs (twice the hardware's): handlers bound to the system executor, which runs
  // what it is given at once on the calling thread, run on them, as concurrently as on the
  // system context's, so that one that blocks until another timer fires does not stop the
  // wheel.
  template <typename SystemExecutor>
  static void system_home(context_kind& kind, [[maybe_unused]] const SystemExecutor& ex) noexcept {
#if defined(ASIO_WHEEL_ASIO_TS_EXECUTOR_AS_DEFAULT)
    const unsigned hardware = std::thread::hardware_concurrency();
    kind.own_threads = hardware != 0 ? 2 * hardware : 2;
#else
    kind.plain = ex;
#endif
  }

  template <typename Executor>
  context_kind kind_of(const Executor& ex) noexcept {
    if constexpr (std::is_same_v<Executor, asio::any_io_executor>) {
      return kind_of_any(ex);
    } else if constexpr (asio::can_query<const Executor&, asio::execution::context_t>::value ||
                         has_context_member<Executor>::value) {
      return kind_of_context(context_of(ex));
    } else {
      return {}; // use_future's executor, for one, has no context
    }
  }

  // The home found from `kind` (or the own thread's, if it tells nothing), unless another
  // thread found it first. Strong guarantee.
  [[gnu::cold]] ASIO_WHEEL_DECL void adopt(const context_kind& kind);

  // kind_of() of a type-erased executor: the targets Asio itself makes are tried in turn.
  ASIO_WHEEL_DECL context_kind kind_of_any(const asio::any_io_executor& ex) noexcept;

  template <typename... Targets>
  context_kind kind_of_target(const asio::any_io_executor& ex) noexcept {
    context_kind kind;
    ((kind = kind ? kind : kind_of_target_if<Targets>(ex)), ...);
    return kind;
  }

  template <typename Target>
  context_kind kind_of_target_if(const asio::any_io_executor& ex) noexcept {
    if (const Target* target = target_if<Target>(ex)) {
      if constexpr (has_inner_executor<Target>::value)
        return kind_of(target->get_inner_executor());
      else
        return kind_of(*target);
    }
    return {};
  }

  template <std::uintptr_t Bits>
  bool is_home_any(const asio::any_io_executor& ex) {
    using target = asio::io_context::basic_executor_type<std::allocator<void>, Bits>;
    const target* io = target_if<target>(ex);
    return io != nullptr && is_home_io(*io);
  }

  template <typename Allocator, std::uintptr_t Bits>
  [[gnu::always_inline]] bool
  is_home_io(const asio::io_context::basic_executor_type<Allocator, Bits>& ex) {
    // Relaxed: the answer is the pointer itself; nothing else of the home is read here.
    asio::io_context* const home = io_context_.load(std::memory_order_relaxed);
    // By query, not ex.context(): ASIO_NO_TS_EXECUTORS removes that member.
    asio::io_context& context = asio::query(ex, asio::execution::context);
    if (&context != home) {
      if (home != nullptr || found_.load(std::memory_order_relaxed) || find_from(ex) != &context)
        return false;
    }
    return asio::query(ex, asio::execution::blocking) != asio::execution::blocking.never;
  }

  // The first wait's handler is bound to an io_context's executor, before the service has a
  // home: if it is this context's, that is the home. The answer is needed before the wait is
  // built (it decides how its handler is called), so it cannot wait for the first wait.
  template <typename Allocator, std::uintptr_t Bits>
  [[gnu::cold, gnu::noinline]] asio::io_context*
  find_from(const asio::io_context::basic_executor_type<Allocator, Bits>& ex) {
    if (&static_cast<asio::execution_context&>(asio::query(ex, asio::execution::context)) !=
        &context_)
      return nullptr; // another context's: the timer's own executor will tell, later
    find(ex, ex);
    return io_context_.load(std::memory_order_relaxed);
  }

  // Anything else is dispatched: a strand (its handlers must not overlap), a legacy
  // io_context::strand, another context's executor, or a user's executor, even one that
  // posts into this context (it may do more than post: count, serialize, log).
  template <typename Executor>
  static bool is_home_io(const Executor&) noexcept {
    return false;
  }

  asio::execution_context& context_;
  // Guards find(): the members below until found_ is set.
  futex_mutex mutex_;
  // Only for a context of a kind find() cannot tell: the thread the home runs on. Declared
  // before executor_, which refers to it, so that it outlives it.
  std::optional<asio::thread_pool> own_thread_;
  // Set, once, by find(), after executor_, io_context_ and own_thread_, which do not change
  // after; read without the lock by is_home().
  std::atomic<bool> found_{false};
  // The io_context behind executor_, if it is one: handlers bound to its plain executor are
  // called directly from the drains. Set once, by find(); read without the lock.
  std::atomic<asio::io_context*> io_context_{nullptr};
  // The context's own plain executor (untracked, not a strand), or own_thread_'s. Guarded
  // by mutex_ until found_ is set.
  asio::any_io_executor executor_;
};

// The operation of a new wait on `entry` for `handler`, whose associated executor is `ex`:
// called directly from the service's batches if `ex` is `home`'s (in the timer's own storage
// when it fits and is free), else dispatched to `ex`, kept busy meanwhile if TrackWork (not
// for a virtual clock: see tracked_executor).
template <bool TrackWork, typename Handler, typename Executor>
[[gnu::always_inline]] inline wait_op* make_wait_op(timer_entry& entry, Handler&& handler,
                                                    const Executor& ex, service_home& home) {
  using handler_type = std::decay_t<Handler>;
  if (home.is_home(ex)) {
    using home_op = wait_handler_op<handler_type, direct_completion>;
    if constexpr (fits_inline<handler_type>) {
      // Only this thread (the timer's owner) sets the flag; a stale true, from a wait that
      // just left on another thread, only costs a block.
      if (!entry.inline_busy_.load(std::memory_order_acquire)) {
        wait_op* const op = home_op::create_at(entry.inline_, std::forward<Handler>(handler));
        entry.inline_busy_.store(true, std::memory_order_relaxed);
        return op;
      }
    }
    return home_op::create(std::forward<Handler>(handler));
  }
  return wait_handler_op<handler_type, tracked_executor<Executor, TrackWork>>::create(
      std::forward<Handler>(handler), ex);
}

} // namespace asio_wheel::detail

#if defined(ASIO_WHEEL_HEADER_ONLY)
#include <asio_wheel/detail/impl/handler_executor.ipp>
#endif

#endif // ASIO_WHEEL_DETAIL_HANDLER_EXECUTOR_HPP
