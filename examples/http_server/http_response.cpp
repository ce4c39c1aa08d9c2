//
// examples/http_server/http_response.cpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#include "http_response.hpp"

#include <algorithm>
#include <ctime>
#include <string>
#include <utility>
#include <vector>

namespace http_example {

namespace {

constexpr std::array<int, 7> canned_statuses = {200, 400, 404, 405, 413, 431, 501};

const char* reason_phrase(int status) {
  switch (status) {
  case 200:
    return "OK";
  case 400:
    return "Bad Request";
  case 404:
    return "Not Found";
  case 405:
    return "Method Not Allowed";
  case 413:
    return "Content Too Large";
  case 431:
    return "Request Header Fields Too Large";
  case 501:
    return "Not Implemented";
  default:
    return "Unknown";
  }
}

} // namespace

std::string response_head_start(int status) {
  return "HTTP/1.1 " + std::to_string(status) + " " + reason_phrase(status) +
         "\r\nServer: asio-wheel-http\r\nDate: ";
}

std::string response_head_end(std::size_t content_length, conn_header conn,
                              const char* content_type) {
  std::string s = "\r\nContent-Type: ";
  s += content_type;
  s += "\r\nContent-Length: " + std::to_string(content_length) + "\r\n";
  if (conn == conn_header::close)
    s += "Connection: close\r\n";
  else if (conn == conn_header::keep_alive)
    s += "Connection: keep-alive\r\n";
  return s;
}

const canned_response& canned(int status, conn_header conn, bool head) {
  static const std::vector<canned_response> table = [] {
    std::vector<canned_response> t;
    for (int s : canned_statuses)
      for (conn_header c : {conn_header::none, conn_header::close, conn_header::keep_alive})
        for (bool h : {false, true}) {
          const std::string body =
              s == 200 ? std::string(hello_body) : std::string(reason_phrase(s)) + "\n";
          std::string suffix = response_head_end(body.size(), c);
          if (s == 405)
            suffix += "Allow: GET, HEAD\r\n";
          suffix += "\r\n";
          if (!h)
            suffix += body;
          t.push_back({response_head_start(s), std::move(suffix)});
        }
    return t;
  }();
  const auto i = static_cast<std::size_t>(
      std::find(canned_statuses.begin(), canned_statuses.end(), status) - canned_statuses.begin());
  return table[(i * 3 + static_cast<std::size_t>(conn)) * 2 + (head ? 1 : 0)];
}

const std::array<char, big_chunk_bytes>& big_chunk() {
  static const std::array<char, big_chunk_bytes> chunk = [] {
    std::array<char, big_chunk_bytes> a;
    a.fill('x');
    for (std::size_t i = 63; i < a.size(); i += 64)
      a[i] = '\n';
    return a;
  }();
  return chunk;
}

// The IMF-fixdate of now, cached per thread for the current second.
std::string_view http_date() {
  thread_local std::time_t cached = -1;
  thread_local std::array<char, 40> text{};
  thread_local std::size_t length = 0;
  const std::time_t now = std::time(nullptr);
  if (now != cached) {
    std::tm tm{};
    ::gmtime_r(&now, &tm);
    length = std::strftime(text.data(), text.size(), "%a, %d %b %Y %H:%M:%S GMT", &tm);
    cached = now;
  }
  return {text.data(), length};
}

} // namespace http_example
