//
// detail/impl/handler_executor.ipp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_DETAIL_IMPL_HANDLER_EXECUTOR_IPP
#define ASIO_WHEEL_DETAIL_IMPL_HANDLER_EXECUTOR_IPP

// service_home's members that depend on no executor type: included by handler_executor.hpp
// header-only, else by <asio_wheel/src.hpp> (ASIO_WHEEL_DECL, config.hpp).

#include <asio_wheel/detail/handler_executor.hpp>

#include <asio_wheel/detail/asio_strand.hpp>

namespace asio_wheel::detail {

ASIO_WHEEL_DECL void service_home::adopt(const context_kind& kind) {
  std::lock_guard lock(mutex_);
  if (found_.load(std::memory_order_relaxed))
    return;
  if (kind.io != nullptr) {
    executor_ = kind.io->get_executor();
    io_context_.store(kind.io, std::memory_order_release);
  } else if (kind.pool != nullptr) {
    executor_ = kind.pool->get_executor();
  } else if (kind.plain) {
    executor_ = kind.plain;
  } else {
    // A context of a kind unknown here (or an io_context seen only through a user's
    // executor, type-erased) has no executor that can be named from it. Asio's timer
    // service, there, runs a scheduler on a thread of its own in the context; the wheel
    // runs a one-thread pool (for the system context with the TS executor, as many as that
    // context runs: system_home()). Its waits complete on their handlers' executors, which
    // keep the work, so nothing of the context's own run() changes.
    own_thread_.emplace(kind.own_threads != 0 ? kind.own_threads : 1);
    executor_ = own_thread_->get_executor();
  }
  found_.store(true, std::memory_order_release);
}

ASIO_WHEEL_DECL void service_home::post(const own_handler& handler) {
  if (asio::io_context* const home = io_context())
    asio::post(home->get_executor(), handler);
  else if (const auto* pool = target_if<asio::thread_pool::executor_type>(executor_))
    asio::post(*pool, handler);
  else
    asio::post(executor_, handler);
}

ASIO_WHEEL_DECL auto service_home::kind_of_any(const asio::any_io_executor& ex) noexcept
    -> context_kind {
  using io = asio::io_context::executor_type;
  using io_tracked = std::decay_t<decltype(asio::prefer(
      std::declval<const io&>(), asio::execution::outstanding_work.tracked))>;
  using pool = asio::thread_pool::executor_type;
  using pool_tracked = std::decay_t<decltype(asio::prefer(
      std::declval<const pool&>(), asio::execution::outstanding_work.tracked))>;
  context_kind kind =
      kind_of_target<io, io_tracked, pool, pool_tracked, asio::strand<io>, asio::strand<io_tracked>,
                     asio::strand<pool>, asio::strand<pool_tracked>,
                     asio::strand<asio::any_io_executor>>(ex);
  // The system context's executors, already type-erased: the plain one kept as it is
  // (context_kind), the others made plain by the any_io_executor's own preferences, and
  // the context compared by its query: nothing that names system_context is compiled here.
  // (A strand of the system executor: a thread of the wheel's own.) With the TS executor:
  // see system_home().
  using never = std::decay_t<decltype(asio::require(std::declval<const asio::system_executor&>(),
                                                    asio::execution::blocking.never))>;
  using continuation = std::decay_t<decltype(asio::prefer(
      std::declval<const asio::system_executor&>(), asio::execution::relationship.continuation))>;
  using never_continuation = std::decay_t<decltype(asio::prefer(
      std::declval<const never&>(), asio::execution::relationship.continuation))>;
  if (!kind && ex &&
      (target_if<asio::system_executor>(ex) != nullptr || target_if<never>(ex) != nullptr ||
       target_if<continuation>(ex) != nullptr || target_if<never_continuation>(ex) != nullptr) &&
      &static_cast<asio::execution_context&>(context_of(ex)) == &context_) {
#if defined(ASIO_WHEEL_ASIO_TS_EXECUTOR_AS_DEFAULT)
    system_home(kind, ex);
#else
    system_home(kind, asio::prefer(asio::prefer(ex, asio::execution::blocking.possibly),
                                   asio::execution::relationship.fork));
#endif
  }
#if defined(ASIO_WHEEL_ASIO_TS_EXECUTOR_AS_DEFAULT) &&                                             \
    defined(ASIO_WHEEL_ASIO_HAS_IO_CONTEXT_STRAND)
  // asio::executor may hold the legacy strand of code written for that configuration; not
  // found, the wheel would run its own thread and virtual time could not drive it.
  if (!kind)
    return kind_of_target<asio::io_context::strand>(ex);
#endif
  return kind;
}

} // namespace asio_wheel::detail

#endif // ASIO_WHEEL_DETAIL_IMPL_HANDLER_EXECUTOR_IPP
