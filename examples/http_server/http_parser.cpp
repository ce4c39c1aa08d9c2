//
// examples/http_server/http_parser.cpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#include "http_parser.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <string>

namespace http_example {

namespace {

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

bool is_token_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) ||
         std::strchr("!#$%&'*+-.^_`|~", c) != nullptr;
}

// Parses a request head (request line and header lines, "\r\n\r\n" included).
request_info parse_head_fields(std::string_view head) {
  request_info r;
  const std::size_t eol = head.find("\r\n");
  const std::string_view line = head.substr(0, eol);
  const std::size_t sp1 = line.find(' ');
  const std::size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
    r.status = 400;
    return r;
  }
  const std::string_view method = line.substr(0, sp1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (method.empty() || !std::all_of(method.begin(), method.end(), is_token_char) ||
      target.empty()) {
    r.status = 400;
    return r;
  }
  if (version == "HTTP/1.0") {
    r.http10 = true;
  } else if (version != "HTTP/1.1") {
    r.status = 400;
    return r;
  }

  bool close = false, keep_alive = false, have_length = false, chunked = false;
  std::size_t pos = eol + 2;
  while (pos < head.size()) {
    const std::size_t end = head.find("\r\n", pos);
    if (end == pos)
      break; // the empty line
    const std::string_view field = head.substr(pos, end - pos);
    pos = end + 2;
    const std::size_t colon = field.find(':');
    if (colon == 0 || colon == std::string_view::npos ||
        !std::all_of(field.begin(), field.begin() + static_cast<std::ptrdiff_t>(colon),
                     is_token_char)) {
      r.status = 400;
      return r;
    }
    const std::string_view name = field.substr(0, colon);
    const std::string_view value = trim(field.substr(colon + 1));
    if (iequals(name, "connection")) {
      // A comma-separated list of options.
      std::string_view rest = value;
      while (!rest.empty()) {
        const std::size_t comma = rest.find(',');
        const std::string_view option = trim(rest.substr(0, comma));
        close |= iequals(option, "close");
        keep_alive |= iequals(option, "keep-alive");
        rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
      }
    } else if (iequals(name, "content-length")) {
      if (value.empty() || value.size() > 18 ||
          !std::all_of(value.begin(), value.end(),
                       [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
        r.status = 400;
        return r;
      }
      const std::uint64_t n = std::strtoull(std::string(value).c_str(), nullptr, 10);
      if (have_length && n != r.content_length) {
        r.status = 400;
        return r;
      }
      have_length = true;
      r.content_length = n;
    } else if (iequals(name, "transfer-encoding")) {
      chunked = true;
    }
  }
  r.keep_alive = r.http10 ? keep_alive && !close : !close;
  if (chunked) {
    r.status = 501; // request bodies in chunks are not supported
  } else if (r.content_length > max_body_bytes) {
    r.status = 413;
  } else if (method != "GET" && method != "HEAD") {
    r.status = 405;
  } else {
    r.head = method == "HEAD";
    r.target = target == "/"        ? route::hello
               : target == "/big"   ? route::big
               : target == "/stats" ? route::stats
                                    : route::not_found;
    if (r.target == route::not_found)
      r.status = 404;
  }
  return r;
}

} // namespace

request_info parse_head(std::string_view head) {
  request_info r = parse_head_fields(head);
  // Errors about the request's framing leave the connection in an unknown state: close it.
  if (r.status == 400 || r.status == 413 || r.status == 501)
    r.keep_alive = false;
  return r;
}

} // namespace http_example
