//
// fuzz/timing_wheel_fuzz.cpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

// libFuzzer target: differential testing of detail::timing_wheel against reference_wheel.
//
// The input is read as a bit stream: a few bits of configuration (node count, start tick,
// whether to check invariants inside callbacks), then operations decoded by the same
// apply_random_operation() the randomized doctest suite uses, until the bytes run out. So a
// crashing input replays as a short, deterministic operation list, and the harness's
// message (printed before the trap) names the step and the recent operations.
//
//   clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined \
//     -I include -I tests/support tests/fuzz/timing_wheel_fuzz.cpp -o timing_wheel_fuzz

#include "reference_wheel.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <stdexcept>

namespace {

using asio_wheel::test::tick_type;

// Bits from the input, least significant first; zeros once the input is used up, so every
// decoding choice is total and a truncated input is still a valid one.
class byte_entropy {
public:
  byte_entropy(const std::uint8_t* data, std::size_t size) noexcept : data_(data), size_(size) {}

  bool exhausted() const noexcept { return pos_ == size_ && avail_ == 0; }

  std::uint64_t bits(unsigned count) noexcept {
    std::uint64_t value = 0;
    for (unsigned done = 0; done < count;) {
      if (avail_ == 0) {
        if (pos_ == size_)
          return value;
        buffer_ = data_[pos_++];
        avail_ = 8;
      }
      const unsigned take = std::min(count - done, avail_);
      value |= (std::uint64_t{buffer_} & ((1u << take) - 1)) << done;
      buffer_ >>= take;
      avail_ -= take;
      done += take;
    }
    return value;
  }

private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
  unsigned buffer_ = 0;
  unsigned avail_ = 0;
};

// Keeps every input fast: libFuzzer explores better with many short runs than a few long ones.
constexpr int max_operations = 4096;

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace asio_wheel::test;

  byte_entropy in(data, size);
  // Few nodes, so that ids collide: re-arming, removing and reacting on the same entries.
  const std::size_t node_count = 1 + static_cast<std::size_t>(in.bits(6));
  tick_type start = 0;
  switch (in.bits(2)) {
  case 0:
    start = in.bits(8);
    break;
  case 1:
    // Crossing the top bit exercises the top level and the most significant digits.
    start = (tick_type{1} << 63) - in.bits(12);
    break;
  case 2:
    start = max_tick - in.bits(16);
    break;
  default:
    start = in.bits(64);
    break;
  }
  differential_harness::options opts;
  opts.check_invariants_in_callbacks = in.bits(1) != 0;
  // Half the inputs run with a small cascade limit (1 to 8 moves per advance), so that the
  // staging of the levels' next slots spans calls and windows come due half staged.
  // Half of those re-file a window that comes due whole (heartbeat_group's wheel), where a
  // limit of 0 (a run's staging allowance spent) is allowed too.
  if (in.bits(1) != 0) {
    opts.refile_whole = in.bits(1) != 0;
    opts.cascade_limit = static_cast<std::size_t>(in.bits(3)) + (opts.refile_whole ? 0 : 1);
  }

  try {
    differential_harness h(node_count, start, opts);
    for (int i = 0; i < max_operations && !in.exhausted(); ++i)
      apply_random_operation(h, in);
  } catch (const std::logic_error& e) {
    // Trap rather than return: libFuzzer then saves the input and reports a crash.
    std::fprintf(stderr, "%s\n", e.what());
    __builtin_trap();
  }
  return 0;
}
