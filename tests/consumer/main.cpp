// Consumer test program: built by tests/consumer/{find_package,add_subdirectory} against the
// installed package and the source tree, with either flavour's target, header-only or
// separately compiled (its _compiled target), with second.cpp. Exits 0 if one
// wheel_timer fired, not early. The flavour comes from the target alone: nothing here
// defines ASIO_WHEEL_USE_BOOST_ASIO.

#include <asio_wheel.hpp>

#include <chrono>
#include <cstdio>
#include <type_traits>

// asio_wheel.hpp brings the version (include/asio_wheel/version.hpp).
#if !defined(ASIO_WHEEL_VERSION) || ASIO_WHEEL_VERSION < 100000
#error "asio_wheel.hpp did not define ASIO_WHEEL_VERSION (1.0.0 or later)"
#endif

// The consumer project says which flavour it linked (ASIO_WHEEL_CONSUMER_BOOST, 0 or 1).
#if ASIO_WHEEL_CONSUMER_BOOST != defined(ASIO_WHEEL_USE_BOOST_ASIO)
#error "the flavour's target did not select the flavour it stands for"
#endif

// And which mode (ASIO_WHEEL_CONSUMER_COMPILED, 0 or 1): the _compiled target's.
#if ASIO_WHEEL_CONSUMER_COMPILED != defined(ASIO_WHEEL_SEPARATE_COMPILATION)
#error "the target did not select the mode it stands for (asio_wheel_compiled: separate)"
#endif

bool consumer_second_tu(); // second.cpp

#if defined(ASIO_WHEEL_USE_BOOST_ASIO)
#include <boost/asio/io_context.hpp>
#include <boost/system/error_code.hpp>
namespace asio = boost::asio;
static_assert(std::is_same_v<asio_wheel::error_code, boost::system::error_code>);
#else
#include <asio/io_context.hpp>
static_assert(std::is_same_v<asio_wheel::error_code, asio::error_code>);
#endif

int main() {
  asio::io_context ctx;
  const auto start = std::chrono::steady_clock::now();

  // Spelled exactly as with asio::steady_timer.
  asio_wheel::wheel_timer t(ctx, std::chrono::milliseconds(1));
  bool fired = false;
  asio_wheel::error_code result = asio::error::would_block;
  t.async_wait([&](asio_wheel::error_code ec) {
    fired = true;
    result = ec;
  });
  ctx.run();

  const auto elapsed = std::chrono::steady_clock::now() - start;
  if (!fired || result) {
    std::fprintf(stderr, "asio_wheel consumer: wait %s (%s)\n",
                 fired ? "failed" : "never completed", result.message().c_str());
    return 1;
  }
  if (elapsed < std::chrono::milliseconds(1)) {
    std::fprintf(stderr, "asio_wheel consumer: timer fired early\n");
    return 1;
  }
  if (!consumer_second_tu()) {
    std::fprintf(stderr, "asio_wheel consumer: the second translation unit's timers failed\n");
    return 1;
  }
  std::puts("asio_wheel consumer: ok");
  return 0;
}
