// The two implementations of cancel_after / cancel_at under one name each, for the tests that
// are a TEST_CASE_TEMPLATE over both (CANCEL_ADAPTERS): Asio's own (asio::cancel_after and
// asio::cancel_at, Asio 1.31 and later; compiled out before, where only asio_wheel's run) and
// asio_wheel's. A test over both first proves Asio's behaviour, then holds ours to it.

#ifndef ASIO_WHEEL_TEST_CANCEL_ADAPTERS_HPP
#define ASIO_WHEEL_TEST_CANCEL_ADAPTERS_HPP

#include <asio_wheel/cancel_after.hpp>
#include <asio_wheel/detail/config.hpp>

#if ASIO_WHEEL_ASIO_HAS_CANCEL_AFTER
#include <asio/cancel_after.hpp>
#include <asio/cancel_at.hpp>
#endif

#include <utility>

namespace asio_wheel::test {

struct wheel_adapters {
  static constexpr bool is_asio = false;
  template <class... A>
  static auto after(A&&... a) {
    return asio_wheel::cancel_after(std::forward<A>(a)...);
  }
  template <class... A>
  static auto at(A&&... a) {
    return asio_wheel::cancel_at(std::forward<A>(a)...);
  }
};

#if ASIO_WHEEL_ASIO_HAS_CANCEL_AFTER
struct asio_adapters {
  static constexpr bool is_asio = true;
  template <class... A>
  static auto after(A&&... a) {
    return asio::cancel_after(std::forward<A>(a)...);
  }
  template <class... A>
  static auto at(A&&... a) {
    return asio::cancel_at(std::forward<A>(a)...);
  }
};
#define CANCEL_ADAPTERS ::asio_wheel::test::asio_adapters, ::asio_wheel::test::wheel_adapters
#else
#define CANCEL_ADAPTERS ::asio_wheel::test::wheel_adapters
#endif

} // namespace asio_wheel::test

#endif // ASIO_WHEEL_TEST_CANCEL_ADAPTERS_HPP
