//
// tick_scale_test.cpp
// ~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// detail::tick_scale, exhaustively on an 8-bit clock (every time point, every boundary,
// ticks of 1 to 40 units) and at the ends of a 64-bit one: every time point of the clock
// maps, before the boundary too (a clock stepped back to before its wheel was created);
// floor() is the tick that contains t, ceil() the first tick starting at or after t,
// time_of() inverts them, and the given boundary is a tick boundary.

#include <asio_wheel/detail/tick_scale.hpp>

#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <string>

namespace {

using asio_wheel::detail::tick_scale;
using asio_wheel::detail::tick_type;

template <typename Rep>
struct tiny_clock {
  using rep = Rep;
  using period = std::ratio<1>;
  using duration = std::chrono::duration<rep, period>;
  using time_point = std::chrono::time_point<tiny_clock>;
  static constexpr bool is_steady = false;
  static time_point now() noexcept { return time_point(); }
};

} // namespace

TEST_CASE("tick_scale on an 8-bit clock: every time point, every boundary, every tick length") {
  using clock = tiny_clock<std::int8_t>;
  using tp = clock::time_point;
  using d = clock::duration;
  for (int n = 1; n <= 40; ++n) {
    for (int b = -128; b <= 127; ++b) {
      const tick_scale<clock> s(d(static_cast<std::int8_t>(n)), tp(d(static_cast<std::int8_t>(b))));
      INFO("tick " << n << ", boundary " << b);
      const tp boundary(d(static_cast<std::int8_t>(b)));
      REQUIRE(s.time_of(s.floor(boundary)) == boundary);
      REQUIRE(s.ceil(boundary) == s.floor(boundary));
      REQUIRE(s.time_of(0) == tp::min());
      // Checked without doctest in the inner loop (2.6 million time points): the first
      // broken property is reported.
      std::string broken;
      auto expect = [&](bool ok, const char* what, int t) {
        if (!ok && broken.empty())
          broken = std::string(what) + " at t = " + std::to_string(t);
      };
      tick_type last_floor = 0;
      for (int t = -128; t <= 127; ++t) {
        const tp at(d(static_cast<std::int8_t>(t)));
        const tick_type f = s.floor(at);
        const tick_type c = s.ceil(at);
        expect(f >= last_floor, "floor not monotonic", t);
        last_floor = f;
        expect(s.time_of(f) <= at, "floor's tick begins after t", t);
        if (at != tp::max())
          expect(s.time_of(f + 1) > at || s.time_of(f + 1) == tp::max(),
                 "the tick after floor's has begun", t);
        expect(c == f || c == f + 1, "ceil is neither floor nor the next", t);
        expect(s.time_of(c) >= at, "ceil's tick begins before t (early)", t);
        expect((c == f) == (s.time_of(f) == at), "ceil differs from floor on a boundary", t);
        // Boundaries are every n units from b, and tick 0 begins at time_point::min().
        expect((s.time_of(f) == at) == (t == -128 || ((t - b) % n + n) % n == 0),
               "a tick begins where no boundary is", t);
      }
      CHECK_MESSAGE(broken.empty(), broken);
    }
  }
}

TEST_CASE("tick_scale on a 64-bit clock: the ends of the range") {
  using clock = tiny_clock<std::int64_t>;
  using tp = clock::time_point;
  using d = clock::duration;
  const std::int64_t ticks[] = {1, 2, 3, 1'000'000, 60'000'000'000};
  const tp boundaries[] = {tp::min(), tp(d(-1)), tp(d(0)), tp(d(123'456'789)), tp::max()};
  for (const auto n : ticks) {
    for (const tp b : boundaries) {
      const tick_scale<clock> s(d(n), b);
      INFO("tick " << n << ", boundary " << b.time_since_epoch().count());
      CHECK(s.time_of(s.floor(b)) == b);
      CHECK(s.floor(tp::min()) == 0);
      CHECK(s.time_of(0) == tp::min());
      CHECK(s.time_of(s.ceil(tp::max())) == tp::max());
      CHECK(s.time_of(s.floor(tp::max())) <= tp::max());
      CHECK(s.time_of(~tick_type{0}) == tp::max());
      for (const tp t : {tp::min(), tp::min() + d(1), tp(d(-1)), tp(d(0)), tp(d(1)),
                         tp::max() - d(1), tp::max()}) {
        CHECK(s.time_of(s.floor(t)) <= t);
        CHECK(s.time_of(s.ceil(t)) >= t);
        CHECK(s.ceil(t) - s.floor(t) <= 1);
      }
    }
  }
}
