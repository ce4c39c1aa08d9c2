//
// test_shard.hpp
// ~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_TEST_TEST_SHARD_HPP
#define ASIO_WHEEL_TEST_TEST_SHARD_HPP

#include <cstddef>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace asio_wheel::test {

// A randomized test whose configurations take a minute in one process runs as several ctest
// processes instead (asio_wheel_add_sharded_test in tests/CMakeLists.txt), so that on a
// machine with spare cores the stage waits for the slowest shard, not for the sum. Each
// process gets ASIO_WHEEL_TEST_SHARD="k/n" and runs the configurations whose index i has
// i % n == k; run by hand without it, the program runs them all. Every configuration runs in
// exactly one shard, so sharding never drops a case.
class test_shard {
public:
  test_shard() {
    const char* text = std::getenv("ASIO_WHEEL_TEST_SHARD");
    if (text == nullptr || *text == '\0')
      return;
    const std::string s(text);
    const std::size_t slash = s.find('/');
    std::size_t end_k = 0, end_n = 0;
    try {
      if (slash != std::string::npos) {
        index_ = std::stoul(s.substr(0, slash), &end_k);
        count_ = std::stoul(s.substr(slash + 1), &end_n);
      }
    } catch (const std::exception&) {
      count_ = 0;
    }
    if (slash == std::string::npos || end_k != slash || end_n != s.size() - slash - 1 ||
        count_ == 0 || index_ >= count_)
      throw std::invalid_argument("ASIO_WHEEL_TEST_SHARD='" + s +
                                  "': expected 'k/n' with 0 <= k < n, e.g. '0/3'");
  }

  // Whether configuration i of this test runs in this process.
  bool runs(std::size_t i) const { return i % count_ == index_; }

private:
  std::size_t index_ = 0;
  std::size_t count_ = 1; // 1: not sharded, everything runs
};

} // namespace asio_wheel::test

#endif // ASIO_WHEEL_TEST_TEST_SHARD_HPP
