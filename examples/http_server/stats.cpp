//
// examples/http_server/stats.cpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#include "stats.hpp"

#include <cstdio>
#include <string>
#include <utility>

namespace http_example {

std::string stats_text(const server_state& st) {
  const auto& s = st.stats;
  std::string out;
  auto line = [&](const char* name, const std::string& value) {
    out += name;
    out += ' ';
    out += value;
    out += '\n';
  };
  auto num = [](auto v) { return std::to_string(v); };
  auto fixed = [](double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.3f", v);
    return std::string(b);
  };
  line("timer", to_string(st.opts.timer));
  line("threads", num(st.opts.threads));
  line("idle_timeout_ms", num(to_ms(st.opts.idle_timeout)));
  line("request_timeout_ms", num(to_ms(st.opts.request_timeout)));
  line("accepted", num(s.accepted.load()));
  line("accept_errors", num(s.accept_errors.load()));
  line("open", num(s.open.load()));
  line("requests", num(s.requests.load()));
  for (std::size_t i = 1; i < reason_names.size(); ++i)
    line(("closed_" + std::string(reason_names[i])).c_str(), num(s.closed[i].load()));
  for (auto [name, log] : {std::pair{"idle_late_ms", &s.idle_late},
                           std::pair{"request_timeout_late_ms", &s.deadline_late}}) {
    const auto sum = log->get();
    const std::string n(name);
    line((n + "_count").c_str(), num(sum.count));
    line((n + "_min").c_str(), fixed(sum.min_ms));
    line((n + "_p50").c_str(), fixed(sum.p50_ms));
    line((n + "_p99").c_str(), fixed(sum.p99_ms));
    line((n + "_max").c_str(), fixed(sum.max_ms));
  }
  return out;
}

} // namespace http_example
