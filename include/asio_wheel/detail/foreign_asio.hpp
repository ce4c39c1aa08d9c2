//
// detail/foreign_asio.hpp
// ~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_DETAIL_FOREIGN_ASIO_HPP
#define ASIO_WHEEL_DETAIL_FOREIGN_ASIO_HPP

#include <asio_wheel/detail/asio_forward.hpp>

#include <type_traits>
#include <utility>

namespace asio_wheel::detail {

// An execution context or executor of the other Asio flavour: a boost::asio::io_context
// given to a timer compiled for standalone Asio (the user included Boost.Asio after the
// library, and did not link asio_wheel::asio_wheel_boost), or the reverse. Its constructors
// take such an argument only to fail with foreign_asio_error's one line, instead of 60 lines
// of overloads that do not match. Neither flavour can name the other's types, so it is told
// by shape: an executor (execute(), or a Networking TS one's context()) whose execution
// context this flavour cannot query or convert to its own; a context (executor_type and
// get_executor()) whose executor is such. An executor of this flavour that the timer does not
// take (say, another strand type) is not one: it fails as before.
struct noop_function {
  void operator()() const noexcept {}
};

template <typename T, typename = void>
struct has_execute : std::false_type {};
template <typename T>
struct has_execute<T, std::void_t<decltype(std::declval<const T&>().execute(noop_function{}))>>
    : std::true_type {};

template <typename T, typename = void>
struct has_own_context_fn : std::false_type {};
template <typename T>
struct has_own_context_fn<T, std::void_t<decltype(std::declval<const T&>().context())>>
    : std::is_convertible<decltype(std::declval<const T&>().context()), asio::execution_context&> {
};

template <typename T, typename = void>
struct has_context_fn : std::false_type {};
template <typename T>
struct has_context_fn<T, std::void_t<decltype(std::declval<const T&>().context())>>
    : std::true_type {};

template <typename T>
inline constexpr bool
    is_foreign_executor_v = std::is_class_v<T> &&
                            (has_execute<T>::value || has_context_fn<T>::value) &&
                            !asio::can_query<const T&, asio::execution::context_t>::value &&
                            !has_own_context_fn<T>::value;

template <typename T, typename = void>
struct is_foreign_context : std::false_type {};
template <typename T>
struct is_foreign_context<
    T, std::void_t<typename T::executor_type, decltype(std::declval<T&>().get_executor())>>
    : std::bool_constant<
          !std::is_convertible_v<T&, asio::execution_context&> &&
          is_foreign_executor_v<std::decay_t<decltype(std::declval<T&>().get_executor())>>> {};

// T as passed to a constructor; Executor: the timer's executor type.
template <typename T, typename Executor, typename U = std::remove_cv_t<std::remove_reference_t<T>>>
inline constexpr bool is_foreign_asio_v =
    std::is_class_v<U> && !std::is_convertible_v<const U&, Executor> &&
    (is_foreign_executor_v<U> || is_foreign_context<U>::value);

// Instantiated only to fail: the first error says what to do.
template <typename Foreign>
struct foreign_asio_error {
#if defined(ASIO_WHEEL_USE_BOOST_ASIO)
  static_assert(sizeof(Foreign) == 0,
                "asio_wheel is compiled for Boost.Asio (ASIO_WHEEL_USE_BOOST_ASIO is defined), "
                "and this is not a Boost.Asio execution context or executor: for standalone "
                "Asio, link the CMake target asio_wheel::asio_wheel instead of "
                "asio_wheel::asio_wheel_boost, and do not define ASIO_WHEEL_USE_BOOST_ASIO");
#else
  static_assert(sizeof(Foreign) == 0,
                "asio_wheel is compiled for standalone Asio, and this is not one of its "
                "execution contexts or executors: for Boost.Asio, link the CMake target "
                "asio_wheel::asio_wheel_boost (it defines ASIO_WHEEL_USE_BOOST_ASIO), or define "
                "ASIO_WHEEL_USE_BOOST_ASIO in every translation unit");
#endif
};

} // namespace asio_wheel::detail

#endif // ASIO_WHEEL_DETAIL_FOREIGN_ASIO_HPP
