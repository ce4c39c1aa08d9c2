//
// examples/http_server/stats.hpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// What the server counts: connections, requests, closes by reason, and how late the timeout
// closes were past their due time. Shared by every connection, hence atomic; GET /stats and
// the exit report print it as text.

#ifndef ASIO_WHEEL_EXAMPLE_HTTP_STATS_HPP
#define ASIO_WHEEL_EXAMPLE_HTTP_STATS_HPP

#include "options.hpp"

#include <asio/io_context.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace http_example {

// ---------------------------------------------------------------------------------------
// Counters

enum class close_reason : int {
  none,
  peer,             // the client closed (or reset) the connection
  idle,             // idle timeout
  request_timeout,  // request deadline
  connection_close, // "Connection: close", or HTTP/1.0 without keep-alive
  bad_request,      // 400, 413, 431, 501: answered, then closed
  error,            // any other I/O error
  count
};

constexpr std::array<const char*, static_cast<std::size_t>(close_reason::count)> reason_names = {
    "none", "peer", "idle", "request_timeout", "connection_close", "bad_request", "error"};

// How late the timeout closes of one kind were, past their due time.
class lateness_log {
public:
  struct summary {
    std::size_t count = 0;
    double min_ms = 0, p50_ms = 0, p99_ms = 0, max_ms = 0;
  };

  void add(clock_type::duration late) {
    std::lock_guard lock(mutex_);
    if (samples_.size() < max_samples)
      samples_.push_back(late);
  }

  summary get() const {
    std::vector<clock_type::duration> s;
    {
      std::lock_guard lock(mutex_);
      s = samples_;
    }
    summary r;
    r.count = s.size();
    if (s.empty())
      return r;
    std::sort(s.begin(), s.end());
    auto at = [&](double q) {
      return to_ms_double(s[std::min(s.size() - 1, static_cast<std::size_t>(q * s.size()))]);
    };
    r.min_ms = to_ms_double(s.front());
    r.p50_ms = at(0.50);
    r.p99_ms = at(0.99);
    r.max_ms = to_ms_double(s.back());
    return r;
  }

private:
  static constexpr std::size_t max_samples = 1 << 20;
  mutable std::mutex mutex_;
  std::vector<clock_type::duration> samples_;
};

struct server_stats {
  std::atomic<std::uint64_t> accepted{0};
  std::atomic<std::uint64_t> accept_errors{0};
  std::atomic<std::uint64_t> requests{0};
  std::atomic<std::int64_t> open{0};
  std::array<std::atomic<std::uint64_t>, static_cast<std::size_t>(close_reason::count)> closed{};
  lateness_log idle_late;     // close time - (last activity + idle timeout in force)
  lateness_log deadline_late; // close time - request deadline in force

  // Pressure (pressure.hpp). A timeout close is "shed" when it came before the timeout at
  // factor 1 had passed: a lower factor closed it (the one in force then, for the wheel's
  // timers; the one in force when it was armed, for a steady_timer). shed_delay: close time
  // - max(its due time at that factor, the last lowering of the factor): how fast.
  std::atomic<std::uint64_t> pressure_lowerings{0};
  std::atomic<std::int64_t> pressure_first_lowered_ns{0}; // steady_clock, 0: never
  std::atomic<std::int64_t> pressure_lowered_ns{0};       // the last lowering
  std::atomic<std::int64_t> pressure_relieved_ns{0};      // the last return to factor 1
  std::atomic<std::uint64_t> shed_idle{0};
  std::atomic<std::uint64_t> shed_request{0};
  lateness_log shed_delay;

  std::uint64_t closes(close_reason r) const {
    return closed[static_cast<std::size_t>(r)].load(std::memory_order_relaxed);
  }
};

struct server_state {
  server_options opts;
  server_stats stats;
  // The context whose timing wheel GET /stats reports (asio_wheel::get_statistics).
  asio::io_context* context = nullptr;
  // The io_context's scale factor, which the pressure monitor sets and every timeout reads.
  asio_wheel::timeout_scale* scale = nullptr;

  double factor() const { return scale->factor(); }
  clock_type::time_point lowered_at() const {
    return clock_type::time_point(
        clock_type::duration(stats.pressure_lowered_ns.load(std::memory_order_relaxed)));
  }

  // Counts a timeout close: its lateness past `due` (the due time at the factor in force),
  // and whether the pressure shed it (due at factor 1 still ahead).
  void timeout_closed(lateness_log& late, clock_type::time_point due,
                      clock_type::time_point due_unpressed, std::atomic<std::uint64_t>& shed) {
    const auto now = clock_type::now();
    late.add(now - due);
    if (now < due_unpressed) {
      shed.fetch_add(1, std::memory_order_relaxed);
      stats.shed_delay.add(now - std::max(due, lowered_at()));
    }
  }
};

// The options and counters in the Prometheus text exposition format (version 0.0.4): the
// server's own counters under their historical names (scripts/loadtest reads them), then
// the timing wheel's statistics as asio_wheel_* metrics, lateness as a histogram in seconds.
std::string stats_text(const server_state& st);

} // namespace http_example

#endif // ASIO_WHEEL_EXAMPLE_HTTP_STATS_HPP
