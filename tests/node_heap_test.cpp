//
// node_heap_test.cpp
// ~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// detail::node_heap, the queue of one span of the scaled timeouts, against a model (a sorted
// set of (key, push order)): random pushes (in order, as most are, and out of order), pops
// and removals of any node; after every operation the front is the model's least, first in
// first out among equal keys, and every node knows whether and where it is linked.

#include <asio_wheel/detail/node_heap.hpp>

#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <random>
#include <set>
#include <utility>
#include <vector>

namespace {

using asio_wheel::detail::node_heap;
using asio_wheel::detail::wheel_node;

struct node : wheel_node {
  std::size_t id = 0;
};

} // namespace

TEST_CASE("node_heap: least key first, first in first out among equal keys, any node "
          "removable; against a sorted set") {
  for (unsigned seed = 1; seed <= 20; ++seed) {
    CAPTURE(seed);
    std::mt19937_64 rng(seed);
    constexpr std::size_t n = 300;
    std::vector<node> nodes(n);
    for (std::size_t i = 0; i < n; ++i)
      nodes[i].id = i;
    using heap_t = node_heap<std::int64_t>;
    heap_t heap(heap_t::first_id + 3);
    // (key, push number) -> node id
    std::set<std::pair<std::pair<std::int64_t, std::uint64_t>, std::size_t>> model;
    std::vector<std::pair<std::int64_t, std::uint64_t>> where(n);
    std::uint64_t pushes = 0;
    std::int64_t clock = 0; // keys mostly follow it, as joins on time do
    for (int step = 0; step < 4000; ++step) {
      CAPTURE(step);
      const auto roll = rng() % 10;
      node& x = nodes[rng() % n];
      if (roll < 5 && !x.is_linked()) {
        clock += static_cast<std::int64_t>(rng() % 3);
        // Keys before the clock: a waiter that joined late. Negative keys too.
        const std::int64_t key =
            rng() % 3 == 0 ? clock - static_cast<std::int64_t>(rng() % 500) : clock - 250;
        heap.push(x, key);
        where[x.id] = {key, pushes};
        model.insert({{key, pushes}, x.id});
        ++pushes;
      } else if (roll < 8 && !heap.empty()) {
        const node& front = static_cast<node&>(heap.front());
        REQUIRE(front.id == model.begin()->second);
        CHECK(heap.front_key() == model.begin()->first.first);
        node& popped = static_cast<node&>(heap.pop_front());
        CHECK(&popped == &front);
        model.erase(model.begin());
        CHECK_FALSE(popped.is_linked());
      } else if (x.is_linked()) {
        CHECK(heap.holds(x));
        CHECK(heap_t::id_of(x) == heap.id());
        heap.remove(x);
        model.erase({where[x.id], x.id});
        CHECK_FALSE(x.is_linked());
        CHECK(heap_t::id_of(x) == 0);
      }
      REQUIRE(heap.size() == model.size());
      if (!model.empty())
        REQUIRE(static_cast<node&>(heap.front()).id == model.begin()->second);
    }
    std::vector<std::size_t> order;
    heap.clear([&](wheel_node& w) { order.push_back(static_cast<node&>(w).id); });
    std::vector<std::size_t> expected;
    for (const auto& e : model)
      expected.push_back(e.second);
    CHECK(order == expected);
    for (const node& x : nodes)
      CHECK_FALSE(x.is_linked());
  }
}
