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
  lateness_log idle_late;     // close time - (last activity + idle timeout)
  lateness_log deadline_late; // close time - request deadline

  std::uint64_t closes(close_reason r) const {
    return closed[static_cast<std::size_t>(r)].load(std::memory_order_relaxed);
  }
};

struct server_state {
  server_options opts;
  server_stats stats;
};

// The options and counters as "name value" lines.
std::string stats_text(const server_state& st);

} // namespace http_example

#endif // ASIO_WHEEL_EXAMPLE_HTTP_STATS_HPP
