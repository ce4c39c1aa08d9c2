//
// detail/io_executor_holder.hpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_DETAIL_IO_EXECUTOR_HOLDER_HPP
#define ASIO_WHEEL_DETAIL_IO_EXECUTOR_HOLDER_HPP

#include <asio_wheel/detail/asio_forward.hpp>

#include <cassert>
#include <cstdint>
#include <mutex>
#include <optional>
#include <utility>

namespace asio_wheel::detail {

// The plain executor of one io_context as an any_io_executor, kept once per context by its
// wheel service (wheel_service::own_executor) for all the timers constructed from it: they
// point to it instead of each holding a copy, and their get_executor() can return a
// reference to it, as Asio's I/O objects do from 1.26.
struct shared_context_executor {
  explicit shared_context_executor(asio::io_context& io)
      : context(&io), executor(io.get_executor()) {}

  asio::io_context* context;
  asio::any_io_executor executor;
};

// A context's shared_context_executor, made once, by the first timer that asks.
class shared_context_executor_once {
public:
  const shared_context_executor& get(asio::io_context& io) {
    std::call_once(once_, [&] { executor_.emplace(io); });
    assert(executor_->context == &io);
    return *executor_;
  }

private:
  std::once_flag once_;
  std::optional<shared_context_executor> executor_;
};

// A timer's I/O executor. visit() passes the executor in its most specific known type, so
// that the service can recognise its own context without going through a type-erased
// executor on every wait. `Contexts` (the timer's wheel service) provides
// own_executor(asio::io_context&), the shared_context_executor of its context.
template <typename Executor>
class io_executor_holder {
public:
  template <typename Contexts>
  io_executor_holder(const Executor& ex, Contexts&) : executor_(ex) {}

  const Executor& get() const noexcept { return executor_; }

  template <typename F>
  decltype(auto) visit(F&& f) const {
    return std::forward<F>(f)(executor_);
  }

private:
  Executor executor_;
};

// asio::any_io_executor takes 56 bytes, in every timer of a server that may hold millions.
// Nearly every timer is constructed from its io_context, whose plain executor is a pointer
// to that context: it is kept as a pointer to the context's shared_context_executor (8
// bytes). Any other executor (a strand, an executor with properties, a thread pool's) is
// kept as a heap copy, tagged in the same word; that costs one allocation per timer, never
// one per wait.
template <>
class io_executor_holder<asio::any_io_executor> {
public:
  template <typename Contexts>
  io_executor_holder(const asio::any_io_executor& ex, Contexts& contexts)
      : word_(encode(ex, contexts)) {}

  // Asio's moved-from timers keep their executor, so a move is a copy.
  io_executor_holder(const io_executor_holder& other)
      : word_(other.heap() != nullptr ? encode_heap(*other.heap()) : other.word_) {}

  io_executor_holder& operator=(const io_executor_holder& other) {
    if (this != &other) {
      // Copy first: if it throws, this holder is unchanged.
      const std::uintptr_t word =
          other.heap() != nullptr ? encode_heap(*other.heap()) : other.word_;
      release();
      word_ = word;
    }
    return *this;
  }

  ~io_executor_holder() { release(); }

  const asio::any_io_executor& get() const noexcept {
    if (const asio::any_io_executor* ex = heap())
      return *ex;
    return shared()->executor;
  }

  template <typename F>
  decltype(auto) visit(F&& f) const {
    if (const asio::any_io_executor* ex = heap())
      return std::forward<F>(f)(*ex);
    return std::forward<F>(f)(shared()->context->get_executor());
  }

private:
  static constexpr std::uintptr_t heap_bit = 1;
  static_assert(alignof(shared_context_executor) > heap_bit &&
                    alignof(asio::any_io_executor) > heap_bit,
                "the tag bit must be free in both pointers");

  template <typename Contexts>
  static std::uintptr_t encode(const asio::any_io_executor& ex, Contexts& contexts) {
    using io_executor = asio::io_context::executor_type;
    // Equal to the context's own executor: not only the same type, but also no run-time
    // property bits (blocking.never, relationship.continuation) that get_executor() would
    // not give back.
    if (const io_executor* io = target_if<io_executor>(ex)) {
      // The context by query, not io->context(): ASIO_NO_TS_EXECUTORS removes that member.
      asio::io_context& context = asio::query(*io, asio::execution::context);
      if (*io == context.get_executor())
        return reinterpret_cast<std::uintptr_t>(&contexts.own_executor(context));
    }
    return encode_heap(ex);
  }

  static std::uintptr_t encode_heap(const asio::any_io_executor& ex) {
    return reinterpret_cast<std::uintptr_t>(new asio::any_io_executor(ex)) | heap_bit;
  }

  const asio::any_io_executor* heap() const noexcept {
    return (word_ & heap_bit) != 0
               ? reinterpret_cast<const asio::any_io_executor*>(word_ & ~heap_bit)
               : nullptr;
  }

  const shared_context_executor* shared() const noexcept {
    return reinterpret_cast<const shared_context_executor*>(word_);
  }

  void release() noexcept { delete heap(); }

  // The context's shared_context_executor, or (heap_bit set) a heap-allocated
  // any_io_executor owned by this holder.
  std::uintptr_t word_;
};

} // namespace asio_wheel::detail

#endif // ASIO_WHEEL_DETAIL_IO_EXECUTOR_HOLDER_HPP
