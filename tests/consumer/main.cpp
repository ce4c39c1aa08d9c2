// Consumer test program: built by tests/consumer/{find_package,add_subdirectory} against the
// installed package and the source tree. Exits 0 if one wheel_timer fired, not early.

#include <asio_wheel.hpp>

#include <asio/io_context.hpp>

#include <chrono>
#include <cstdio>

int main() {
  asio::io_context ctx;
  const auto start = std::chrono::steady_clock::now();

  // Spelled exactly as with asio::steady_timer.
  asio_wheel::wheel_timer t(ctx, std::chrono::milliseconds(1));
  bool fired = false;
  asio::error_code result = asio::error::would_block;
  t.async_wait([&](asio::error_code ec) {
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
  std::puts("asio_wheel consumer: ok");
  return 0;
}
