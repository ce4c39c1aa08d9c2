//
// over_aligned_handler_test.cpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Handlers whose state asks for more than operator new's default alignment (alignas(64),
// a cache line) are accepted, called exactly once, and kept aligned wherever the timer
// stores, moves or calls them: on the context's executor, bound to a strand, with an
// associated allocator of their own, and as lambdas holding such state.
//
// Asio's configuration. In its default configuration Asio 1.22 allocates a timer's
// operation through the deprecated asio_handler_allocate hook, which ignores alignment, so
// asio::steady_timer stores such a handler misaligned. Without the deprecated hooks
// (ASIO_NO_DEPRECATED) it passes the alignment on, and does aligned allocations with
// aligned_alloc, if libstdc++ has said it has one (_GLIBCXX_HAVE_ALIGNED_ALLOC) by the time
// asio/detail/config.hpp is read (Asio 1.28's config.hpp includes <cstddef> itself, 1.22's
// does not). This file configures Asio so, before any Asio header: that is the
// configuration in which Asio keeps the promise, so the asio::steady_timer instance of each
// case states it. With libc++, Asio 1.22 looks for _LIBCPP_HAS_ALIGNED_ALLOC, which libc++
// 19 no longer defines although it has std::aligned_alloc, so the file says so itself. The
// wheel's own storage of a handler does not depend on Asio's configuration; a strand's
// queued copy of it is Asio's.
//

#define ASIO_NO_DEPRECATED 1
#include <cstddef>
#if defined(_LIBCPP_VERSION) && !defined(_WIN32) && !defined(ASIO_HAS_STD_ALIGNED_ALLOC)
#define ASIO_HAS_STD_ALIGNED_ALLOC 1
#endif

#include <asio_wheel/wheel_timer.hpp>

#include <asio/bind_executor.hpp>
#include <asio/error.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <asio/strand.hpp>

#include <doctest/doctest.h>

#include "asio_test_support.hpp"
#include "executor_test_support.hpp"

#include <chrono>
#include <cstdint>

namespace {

using namespace std::chrono_literals;
using namespace asio_wheel::test;

constexpr std::size_t kAlign = 64;

bool aligned(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % kAlign == 0;
}

// A handler whose state asks for 64-byte alignment. Every object of it, wherever the timer
// constructs, moves or calls it, checks its own address.
struct alignas(kAlign) aligned_handler {
  aligned_handler(outcome& o, bool& all_aligned) : o_(&o), all_aligned_(&all_aligned) { note(); }
  aligned_handler(const aligned_handler& other) : o_(other.o_), all_aligned_(other.all_aligned_) {
    note();
  }
  aligned_handler(aligned_handler&& other) noexcept
      : o_(other.o_), all_aligned_(other.all_aligned_) {
    note();
  }
  aligned_handler& operator=(const aligned_handler&) = delete;

  void operator()(asio::error_code ec) {
    note();
    o_->complete(ec);
  }

  void note() noexcept {
    if (!aligned(this) || !aligned(state_))
      *all_aligned_ = false;
  }

  outcome* o_;
  bool* all_aligned_;
  alignas(kAlign) unsigned char state_[kAlign] = {};
};

static_assert(alignof(aligned_handler) > __STDCPP_DEFAULT_NEW_ALIGNMENT__);

} // namespace

TEST_CASE_TEMPLATE("an over-aligned handler is accepted, and kept aligned wherever it lives", Timer,
                   TIMER_TYPES) {
  asio::io_context ioc;
  outcome fired, aborted;
  bool all_aligned = true;
  alloc_stats stats;
  const auto strand = asio::make_strand(ioc);
  Timer t(ioc, 5ms);
  Timer c(ioc, kFar);
  const auto expiry = t.expiry();

  SUBCASE("on the context's executor") {
    t.async_wait(aligned_handler(fired, all_aligned));
    c.async_wait(aligned_handler(aborted, all_aligned));
  }
  SUBCASE("bound to a strand") {
    t.async_wait(asio::bind_executor(strand, aligned_handler(fired, all_aligned)));
    c.async_wait(asio::bind_executor(strand, aligned_handler(aborted, all_aligned)));
  }
  SUBCASE("with an associated allocator") {
    t.async_wait(with_counting_allocator(stats, aligned_handler(fired, all_aligned)));
    c.async_wait(with_counting_allocator(stats, aligned_handler(aborted, all_aligned)));
  }
  SUBCASE("with an associated allocator, bound to a strand") {
    t.async_wait(asio::bind_executor(
        strand, with_counting_allocator(stats, aligned_handler(fired, all_aligned))));
    c.async_wait(asio::bind_executor(
        strand, with_counting_allocator(stats, aligned_handler(aborted, all_aligned))));
  }
  SUBCASE("a lambda holding over-aligned state") {
    struct alignas(kAlign) block {
      unsigned char bytes[kAlign];
    };
    t.async_wait([&, state = block{}](asio::error_code ec) {
      if (!aligned(&state))
        all_aligned = false;
      fired.complete(ec);
    });
    c.async_wait([&, state = block{}](asio::error_code ec) {
      if (!aligned(&state))
        all_aligned = false;
      aborted.complete(ec);
    });
  }
  c.cancel();
  const auto r = guarded_run(ioc);
  CHECK_FALSE(r.timed_out);
  CHECK_SUCCESS_AT(fired, expiry);
  CHECK_ABORTED(aborted);
  CHECK(all_aligned);
  CHECK(stats.allocs == stats.deallocs);
  CHECK(stats.bytes_live == 0);
}
