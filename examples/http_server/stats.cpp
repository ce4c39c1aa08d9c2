//
// examples/http_server/stats.cpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#include "stats.hpp"

#include <asio_wheel/statistics.hpp>

#include <cstdio>
#include <string>
#include <utility>

namespace http_example {

namespace {

class exposition {
public:
  // One metric family: its # HELP and # TYPE lines.
  void family(const std::string& name, const char* type, const char* help) {
    out_ += "# HELP " + name + ' ' + help + "\n# TYPE " + name + ' ' + type + '\n';
  }
  void sample(const std::string& name, const std::string& value) {
    out_ += name + ' ' + value + '\n';
  }
  void metric(const std::string& name, const char* type, const char* help,
              const std::string& value) {
    family(name, type, help);
    sample(name, value);
  }
  std::string take() { return std::move(out_); }

private:
  std::string out_;
};

std::string num(auto v) {
  return std::to_string(v);
}

std::string fixed(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3f", v);
  return b;
}

std::string seconds(double v) {
  char b[40];
  std::snprintf(b, sizeof b, "%.9g", v);
  return b;
}

void wheel_metrics(exposition& e, asio::io_context& ctx) {
  const asio_wheel::wheel_statistics s = asio_wheel::get_statistics<clock_type>(ctx);
  const double tick = std::chrono::duration<double>(s.tick).count();
  e.metric("asio_wheel_tick_seconds", "gauge", "Length of one tick of the timing wheel.",
           seconds(tick));
  e.metric("asio_wheel_timers_pending", "gauge", "Timers with at least one pending wait.",
           num(s.timers_pending));
  e.metric("asio_wheel_waits_pending", "gauge", "Waits started and not yet decided.",
           num(s.waits_pending()));
  e.family("asio_wheel_timers_in_wheel", "gauge",
           "Entries linked in the wheel per level (including lazily kept cancelled ones).");
  for (std::size_t k = 0; k < s.timers_per_level.size(); ++k)
    e.sample("asio_wheel_timers_in_wheel{level=\"" + num(k) + "\"}", num(s.timers_per_level[k]));
  if (s.next_expiry)
    e.metric("asio_wheel_next_expiry_seconds", "gauge",
             "Time until the wheel's driver next wakes (absent when nothing is pending).",
             seconds(std::chrono::duration<double>(*s.next_expiry).count()));
  const std::pair<const char*, std::uint64_t> counters[] = {
      {"waits_started", s.waits_started}, {"waits_succeeded", s.waits_succeeded},
      {"waits_aborted", s.waits_aborted}, {"waits_expired_at_start", s.waits_expired_at_start},
      {"driver_turns", s.driver_turns},   {"empty_turns", s.empty_turns},
      {"lazy_refiles", s.lazy_refiles},   {"batches", s.batches},
      {"budget_turns", s.budget_turns}};
  const char* helps[] = {
      "Waits started on the wheel.",
      "Waits completed with success (expired).",
      "Waits completed with operation_aborted.",
      "Waits already expired when started (completed without the wheel).",
      "Driver turns (wake-ups of the wheel's one Asio timer, and budget continuations).",
      "Driver turns that found no wait due (lazy re-arm, cascades).",
      "Timers re-filed at their tick for a later expiry (lazy re-arm).",
      "Batches of completions run from one handler.",
      "Driver turns that hit the expiry or cascade budget."};
  for (std::size_t i = 0; i < std::size(counters); ++i)
    e.metric(std::string("asio_wheel_") + counters[i].first + "_total", "counter", helps[i],
             num(counters[i].second));
  e.metric("asio_wheel_largest_batch", "gauge", "The largest batch of completions so far.",
           num(s.largest_batch));
  // Bucket k holds [2^(k-1), 2^k) ticks late: cumulative up to 2^k - 1 ticks.
  e.family("asio_wheel_lateness_seconds", "histogram",
           "How late the driver completed timer expiries past their deadline tick.");
  std::size_t last = 0;
  for (std::size_t k = 0; k < s.lateness.size(); ++k)
    if (s.lateness[k] != 0)
      last = k;
  std::uint64_t cumulative = 0;
  for (std::size_t k = 0; k <= std::max<std::size_t>(last, 12) && k < 64; ++k) {
    cumulative += s.lateness[k];
    e.sample(
        "asio_wheel_lateness_seconds_bucket{le=\"" +
            seconds(static_cast<double>(asio_wheel::wheel_statistics::bucket_upper(k)) * tick) +
            "\"}",
        num(cumulative));
  }
  e.sample("asio_wheel_lateness_seconds_bucket{le=\"+Inf\"}", num(s.lateness_count()));
  e.sample("asio_wheel_lateness_seconds_sum", seconds(static_cast<double>(s.lateness_sum) * tick));
  e.sample("asio_wheel_lateness_seconds_count", num(s.lateness_count()));
}

} // namespace

std::string stats_text(const server_state& st) {
  const auto& s = st.stats;
  exposition e;
  e.metric("http_server_info{timer=\"" + std::string(to_string(st.opts.timer)) + "\"}", "gauge",
           "The timer implementation (label) of this build.", "1");
  e.metric("threads", "gauge", "Threads running the io_context.", num(st.opts.threads));
  e.metric("idle_timeout_ms", "gauge", "Idle timeout, ms (its maximum, for a range).",
           num(to_ms(st.opts.idle_timeout.max)));
  e.metric("idle_timeout_min_ms", "gauge", "Idle timeout under full pressure, ms.",
           num(to_ms(st.opts.idle_timeout.min)));
  e.metric("request_timeout_ms", "gauge", "Request deadline, ms (its maximum, for a range).",
           num(to_ms(st.opts.request_timeout.max)));
  e.metric("request_timeout_min_ms", "gauge", "Request deadline under full pressure, ms.",
           num(to_ms(st.opts.request_timeout.min)));
  e.metric("pressure_connections", "gauge", "Connection limit of the pressure monitor (0: none).",
           num(st.opts.pressure_connections));
  e.metric("pressure_rss_bytes", "gauge", "Memory limit of the pressure monitor (0: none).",
           num(st.opts.pressure_rss_bytes));
  e.metric("timeout_factor", "gauge",
           "The io_context's asio_wheel::timeout_scale factor (1: no pressure).",
           fixed(st.factor()));
  e.metric("pressure_lowerings", "counter", "Times the pressure monitor lowered the factor to 0.",
           num(s.pressure_lowerings.load()));
  e.metric("pressure_first_lowered_ns", "gauge",
           "steady_clock time of the first lowering, ns (0: never).",
           num(s.pressure_first_lowered_ns.load()));
  e.metric("pressure_lowered_ns", "gauge", "steady_clock time of the last lowering, ns.",
           num(s.pressure_lowered_ns.load()));
  e.metric("pressure_relieved_ns", "gauge", "steady_clock time of the last return to 1, ns.",
           num(s.pressure_relieved_ns.load()));
  e.metric("shed_idle", "counter", "Idle closes before the idle timeout at factor 1.",
           num(s.shed_idle.load()));
  e.metric("shed_request", "counter", "Request-deadline closes before the deadline at factor 1.",
           num(s.shed_request.load()));
  e.metric("accepted", "counter", "Connections accepted.", num(s.accepted.load()));
  e.metric("accept_errors", "counter", "Accept errors.", num(s.accept_errors.load()));
  e.metric("open", "gauge", "Connections open.", num(s.open.load()));
  e.metric("requests", "counter", "Requests answered.", num(s.requests.load()));
  for (std::size_t i = 1; i < reason_names.size(); ++i)
    e.metric("closed_" + std::string(reason_names[i]), "counter",
             "Connections closed for this reason.", num(s.closed[i].load()));
  for (auto [name, log] : {std::pair{"idle_late_ms", &s.idle_late},
                           std::pair{"request_timeout_late_ms", &s.deadline_late},
                           std::pair{"shed_delay_ms", &s.shed_delay}}) {
    const auto sum = log->get();
    const std::string n(name);
    e.metric(n + "_count", "gauge", "Timeout closes sampled.", num(sum.count));
    e.metric(n + "_min", "gauge", "Lateness of timeout closes, ms: minimum.", fixed(sum.min_ms));
    e.metric(n + "_p50", "gauge", "Lateness of timeout closes, ms: median.", fixed(sum.p50_ms));
    e.metric(n + "_p99", "gauge", "Lateness of timeout closes, ms: 99th percentile.",
             fixed(sum.p99_ms));
    e.metric(n + "_max", "gauge", "Lateness of timeout closes, ms: maximum.", fixed(sum.max_ms));
  }
  if (st.context != nullptr && st.opts.timer == timer_kind::wheel)
    wheel_metrics(e, *st.context);
  std::string out = e.take();
  if (st.opts.timer != timer_kind::wheel)
    out += "# asio_wheel_* metrics: not served by the asio::steady_timer build (Asio's timer "
           "queue has no statistics).\n";
  return out;
}

} // namespace http_example
