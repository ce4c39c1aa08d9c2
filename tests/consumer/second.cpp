// Consumer test program, its second translation unit: the program is built from several, as a
// user's is, so that the separately compiled mode (ASIO_WHEEL_CONSUMER_COMPILED) is checked
// where it matters: each of them uses the clock classes that asio_wheel_compiled holds once,
// and the header-only mode links the same program with its own copies. A timer on
// std::chrono::system_clock, the other clock compiled there.

#include <asio_wheel.hpp>

#include <chrono>

#if defined(ASIO_WHEEL_USE_BOOST_ASIO)
#include <boost/asio/io_context.hpp>
namespace asio = boost::asio;
#else
#include <asio/io_context.hpp>
#endif

bool consumer_second_tu() {
  asio::io_context ctx;
  asio_wheel::basic_wheel_timer<std::chrono::system_clock> system_timer(
      ctx, std::chrono::milliseconds(1));
  asio_wheel::wheel_timer steady_timer(ctx, std::chrono::milliseconds(2));
  int fired = 0;
  system_timer.async_wait([&](asio_wheel::error_code ec) { fired += ec ? 0 : 1; });
  steady_timer.async_wait([&](asio_wheel::error_code ec) { fired += ec ? 0 : 1; });
  ctx.run();
  return fired == 2;
}
