//
// beast/beast_stream_bench.cpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// The per-request cost of a timeout: boost::beast::basic_stream against asio_wheel's, as a
// Beast server uses it (expires_after before every read and every write).
//
// K idle streams each have a read pending with a 300 s timeout (a server's open connections:
// for Beast's stream, K waits in the reactor's timer heap; for ours, K wheel waits). P active
// streams then do N request cycles between them, each cycle on one stream:
//
//   expires_after(30s); async_read_some (1 byte from the peer) -> expires_after(30s);
//   async_write_some (1 byte back)
//
// over a socketpair (AF_UNIX), the peer a plain socket. With "never" the same cycles run with
// expires_never() and no expires_after: the difference is the timeout's part of a cycle.
// The measured cycles run inside `callgrind_measured_region`, so that
//
//   valgrind --tool=callgrind --collect-atstart=no --toggle-collect=callgrind_measured_region
//            beast_stream_bench beast timeout 10000 20000
//
// counts their instructions alone (divide by N). Prints one line:
//   <kind> <timeout|never> K=<K> P=<P> N=<N> ns_per_cycle=<wall time per cycle>
//
// Usage: beast_stream_bench <beast|wheel> <timeout|never> <K idle> <N cycles> [P active=16]
//                           [streams|timers]
// "streams" (the default) opens the K idle streams, with 2K descriptors (RLIMIT_NOFILE is
// raised if it can be, else the run fails saying so). "timers" stands for them by what they
// add to the timer structures, one 300 s timer wait each: for Beast's stream a steady_timer
// wait in the reactor's heap, for ours a wait in the context's wheel (a wheel_timer): for a K
// beyond the descriptors a process may have (2P + 64 are needed either way).

#include <asio_wheel/beast/basic_stream.hpp>
#include <asio_wheel/wheel_timer.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/connect_pair.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/basic_stream.hpp>

#include <sys/resource.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace net = boost::asio;
using protocol = net::local::stream_protocol;
using error_code = boost::system::error_code;
using namespace std::chrono_literals;

extern "C" __attribute__((noinline)) void
callgrind_measured_region(const std::function<void()>* body) {
  (*body)();
}

namespace {

bool enough_descriptors(rlim_t needed) {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0)
    return false;
  if (lim.rlim_cur >= needed)
    return true;
  lim.rlim_cur = needed;
  if (lim.rlim_max < needed)
    lim.rlim_max = needed;
  return setrlimit(RLIMIT_NOFILE, &lim) == 0;
}

template <class Stream>
struct active {
  Stream stream;
  protocol::socket peer;
  std::array<char, 1> in{};
  std::array<char, 1> peer_in{};
  char ping = 'p';

  explicit active(net::io_context& ioc) : stream(ioc), peer(ioc) {
    net::local::connect_pair(stream.socket(), peer);
  }
};

template <class Stream, class IdleTimer>
int run(bool timeout, std::size_t idle_count, std::size_t cycles, std::size_t pairs,
        bool idle_streams, const char* kind) {
  net::io_context ioc(1);

  // The open, idle connections: a read pending with a timeout each, or the timer wait that
  // such a read adds.
  std::vector<std::unique_ptr<Stream>> idle;
  std::vector<std::unique_ptr<protocol::socket>> idle_peers;
  std::vector<std::unique_ptr<IdleTimer>> idle_timers;
  std::array<char, 1> idle_buf{};
  std::size_t idle_done = 0;
  for (std::size_t i = 0; i < idle_count && !idle_streams; ++i) {
    idle_timers.push_back(std::make_unique<IdleTimer>(ioc, 300s));
    idle_timers.back()->async_wait([&](error_code ec) { idle_done += !ec; });
  }
  idle.reserve(idle_count);
  for (std::size_t i = 0; i < idle_count && idle_streams; ++i) {
    idle.push_back(std::make_unique<Stream>(ioc));
    idle_peers.push_back(std::make_unique<protocol::socket>(ioc));
    net::local::connect_pair(idle.back()->socket(), *idle_peers.back());
    idle.back()->expires_after(300s);
    idle.back()->async_read_some(net::buffer(idle_buf),
                                 [&](error_code, std::size_t) { ++idle_done; });
  }

  std::vector<std::unique_ptr<active<Stream>>> act;
  for (std::size_t i = 0; i < pairs; ++i)
    act.push_back(std::make_unique<active<Stream>>(ioc));

  std::size_t started = 0, finished = 0;
  bool failed = false;
  std::function<void(active<Stream>&)> cycle = [&](active<Stream>& a) {
    if (started == cycles)
      return;
    ++started;
    if (timeout)
      a.stream.expires_after(30s);
    a.stream.async_read_some(net::buffer(a.in), [&](error_code ec, std::size_t) {
      if (ec) {
        failed = true;
        return;
      }
      if (timeout)
        a.stream.expires_after(30s);
      a.stream.async_write_some(net::buffer(a.in), [&](error_code wec, std::size_t) {
        if (wec) {
          failed = true;
          return;
        }
        ++finished;
        cycle(a);
      });
    });
    // The peer's request, and its read of the answer.
    a.peer.async_write_some(net::buffer(&a.ping, 1), [&](error_code pec, std::size_t) {
      if (pec) {
        failed = true;
        return;
      }
      a.peer.async_read_some(net::buffer(a.peer_in), [&](error_code rec, std::size_t) {
        if (rec)
          failed = true;
      });
    });
  };

  auto run_cycles = [&](std::size_t n) {
    started = finished = 0;
    cycles = n;
    for (auto& a : act)
      cycle(*a);
    while (finished < n && !failed)
      ioc.run_one();
    // Let the peers' last reads complete, so that the next round starts clean.
    ioc.poll();
  };

  if (!timeout)
    for (auto& a : act)
      a->stream.expires_never();

  const std::size_t measured = cycles;
  run_cycles(measured / 10 + 1); // warm-up: caches, the wheel's blocks, the recycling allocator
  const std::function<void()> body = [&] { run_cycles(measured); };
  const auto start = std::chrono::steady_clock::now();
  callgrind_measured_region(&body);
  const auto elapsed = std::chrono::steady_clock::now() - start;
  if (failed || idle_done != 0) {
    std::fprintf(stderr, "beast_stream_bench: an operation failed or an idle read completed\n");
    return 1;
  }
  std::printf(
      "%s %s K=%zu (%s) P=%zu N=%zu ns_per_cycle=%.1f\n", kind, timeout ? "timeout" : "never",
      idle_count, idle_streams ? "streams" : "timers", pairs, measured,
      std::chrono::duration<double, std::nano>(elapsed).count() / static_cast<double>(measured));
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: beast_stream_bench <beast|wheel> <timeout|never> <K idle> "
                         "<N cycles> [P active, default 16]\n");
    return 2;
  }
  const std::string kind = argv[1];
  const std::string mode = argv[2];
  const std::size_t k = std::strtoull(argv[3], nullptr, 10);
  const std::size_t n = std::strtoull(argv[4], nullptr, 10);
  const std::size_t p = argc > 5 ? std::strtoull(argv[5], nullptr, 10) : 16;
  const std::string idle_kind = argc > 6 ? argv[6] : "streams";
  if ((kind != "beast" && kind != "wheel") || (mode != "timeout" && mode != "never") || n == 0 ||
      p == 0 || (idle_kind != "streams" && idle_kind != "timers")) {
    std::fprintf(stderr, "beast_stream_bench: kind must be beast or wheel, mode timeout or "
                         "never, N and P positive, the idle kind streams or timers\n");
    return 2;
  }
  const bool idle_streams = idle_kind == "streams";
  const rlim_t fds = 2 * ((idle_streams ? k : 0) + p) + 64;
  if (!enough_descriptors(fds)) {
    std::fprintf(stderr,
                 "beast_stream_bench: %zu idle streams need %llu descriptors and RLIMIT_NOFILE "
                 "could not be raised that far (run as root, or raise ulimit -n)\n",
                 k, static_cast<unsigned long long>(fds));
    return 2;
  }
  const bool timeout = mode == "timeout";
  if (kind == "beast")
    return run<boost::beast::basic_stream<protocol>, net::steady_timer>(timeout, k, n, p,
                                                                        idle_streams, "beast");
  return run<asio_wheel::basic_stream<protocol>, asio_wheel::wheel_timer>(timeout, k, n, p,
                                                                          idle_streams, "wheel");
}
