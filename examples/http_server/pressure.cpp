//
// examples/http_server/pressure.cpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#include "pressure.hpp"

#include <asio/error.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace http_example {

namespace {

// Below this share of every limit, the factor comes back up.
constexpr double relief = 0.8;
// The factor regained per check once relieved.
constexpr double step_up = 0.25;

std::int64_t ns_now() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(clock_type::now().time_since_epoch())
      .count();
}

} // namespace

pressure_monitor::pressure_monitor(const asio::any_io_executor& ex, timer_kind kind,
                                   server_state& st)
    : st_(st) {
  if (kind == timer_kind::wheel)
    wheel_.emplace(ex);
  else
    steady_.emplace(ex);
}

std::uint64_t pressure_monitor::resident_bytes() {
  // statm: size resident shared text lib data dt, in pages.
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr)
    return 0;
  unsigned long long size = 0, resident = 0;
  const int n = std::fscanf(f, "%llu %llu", &size, &resident);
  std::fclose(f);
  if (n != 2)
    return 0;
  return resident * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
}

void pressure_monitor::start() {
  if (st_.opts.pressure_connections == 0 && st_.opts.pressure_rss_bytes == 0)
    return;
  arm();
}

void pressure_monitor::stop() {
  stopped_ = true;
  if (wheel_)
    wheel_->cancel();
  if (steady_)
    steady_->cancel();
}

void pressure_monitor::arm() {
  auto next = [this](const asio::error_code& ec) {
    if (!ec && !stopped_)
      check();
  };
  if (wheel_) {
    wheel_->expires_after(st_.opts.pressure_period);
    wheel_->async_wait(next);
  } else {
    steady_->expires_after(st_.opts.pressure_period);
    steady_->async_wait(next);
  }
}

void pressure_monitor::check() {
  // The load against each limit: 1 means the limit is reached.
  double load = 0;
  if (st_.opts.pressure_connections != 0) {
    const auto open = static_cast<double>(std::max<std::int64_t>(0, st_.stats.open.load()));
    load = std::max(load, open / static_cast<double>(st_.opts.pressure_connections));
  }
  if (st_.opts.pressure_rss_bytes != 0)
    load = std::max(load, static_cast<double>(resident_bytes()) /
                              static_cast<double>(st_.opts.pressure_rss_bytes));
  const double f = st_.factor();
  if (load >= 1.0 && f > 0.0) {
    const std::int64_t now = ns_now();
    st_.stats.pressure_lowered_ns.store(now);
    std::int64_t never = 0;
    st_.stats.pressure_first_lowered_ns.compare_exchange_strong(never, now);
    st_.stats.pressure_lowerings.fetch_add(1);
    st_.scale->set(0.0);
  } else if (load < relief && f < 1.0) {
    const double up = std::min(1.0, f + step_up);
    st_.scale->set(up);
    if (up == 1.0)
      st_.stats.pressure_relieved_ns.store(ns_now());
  }
  arm();
}

} // namespace http_example
