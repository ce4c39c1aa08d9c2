//
// detail/impl/wheel_service.hpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_DETAIL_IMPL_WHEEL_SERVICE_HPP
#define ASIO_WHEEL_DETAIL_IMPL_WHEEL_SERVICE_HPP

// The wheel service's members that are off the path of a wait: making a shard, shutdown,
// statistics and virtual time. Out of the class body, as Asio's detail/impl/ files are;
// included at the bottom of wheel_service.hpp, and includes it, so that it compiles alone.

#include <asio_wheel/detail/wheel_service.hpp>

namespace asio_wheel::detail {

template <typename Clock, typename WaitTraits>
auto wheel_service<Clock, WaitTraits>::make_shard(unsigned index) -> shard_type& {
  if (index == no_shard)
    index = take_thread_shard();
  std::lock_guard lock(mutex_);
  shard_type* s = shards_[index].load(std::memory_order_relaxed);
  if (s == nullptr) {
    s = new shard_type(home_, static_cast<std::uint8_t>(index), tick_, shut_down_,
                       may_sweep() ? static_cast<drain_sweep*>(this) : nullptr);
    shards_[index].store(s, std::memory_order_release);
    if (++shards_made_ >= sweep_from_shards && may_sweep())
      sweeping_.store(true, std::memory_order_relaxed);
  }
  return *s;
}

template <typename Clock, typename WaitTraits>
void wheel_service<Clock, WaitTraits>::sweep() {
  sweep_queued_.start();
  struct part {
    shard_type* shard;
    wait_op* list;
    std::size_t first_hint;
    std::size_t hinted;
  };
  part parts[max_shards];
  unsigned count = 0;
  std::uint64_t waits = 0;
  batch_hints hints;
  pending_.for_each([&](unsigned index) {
    if (waits >= batch_hints::capacity)
      return false;
    if (!pending_.take(index))
      return true; // another sweep took it
    shard_type* const shard = shards_[index].load(std::memory_order_acquire);
    std::uint64_t taken = 0;
    const std::size_t first_hint = hints.size;
    wait_op* const list = shard->take_ready(taken, hints);
    waits += taken;
    if (list != nullptr)
      parts[count++] = {shard, list, first_hint, hints.size - first_hint};
    else
      shard->give_back(nullptr); // nothing to complete: the take ends here
    return true;
  });
  // Shards left pending: another sweep, which another thread may run meanwhile.
  if (pending_.any() && sweep_queued_.claim())
    post_sweep();

  // A part that a throw or a stop() keeps from its turn goes back to its shard, whole.
  unsigned next = 0;
  struct requeue_rest {
    part* parts;
    const unsigned& next;
    unsigned count;
    ~requeue_rest() {
      for (unsigned i = next; i < count; ++i)
        parts[i].shard->give_back(parts[i].list);
    }
  } guard{parts, next, count};
  // One batch for stop(): its countdown runs on from one part to the next.
  unsigned until_check = stop_check_interval;
  while (next < count) {
    const part& p = parts[next++];
    if (!p.shard->complete_swept(p.list, hints.ops + p.first_hint, p.hinted, until_check))
      return;
  }
}

template <typename Clock, typename WaitTraits>
void wheel_service<Clock, WaitTraits>::shutdown() {
  // The home's own thread, if any, may be in a turn or a drain: it finishes that, without
  // the locks held here, and runs nothing more. What it had queued goes with it, below.
  home_.stop();
  {
    std::lock_guard lock(mutex_);
    shut_down_ = true;
  }
  // Every shard stops before any destroys its waits: a handler's destructor may release a
  // timer of another shard, which must find it shut down (nothing posted, nothing armed).
  for_each_shard([](shard_type& s) { s.stop_for_shutdown(); });
  for_each_shard([](shard_type& s) { s.destroy_for_shutdown(); });
  home_.release();
}

template <typename Clock, typename WaitTraits>
wheel_statistics wheel_service<Clock, WaitTraits>::statistics(bool count_levels) const {
  wheel_statistics total;
  {
    std::lock_guard lock(mutex_);
    total.tick = std::chrono::duration_cast<std::chrono::nanoseconds>(tick_);
  }
  for_each_shard([&](const shard_type& s) { accumulate(total, s.statistics(count_levels)); });
  return total;
}

template <typename Clock, typename WaitTraits>
template <typename C>
auto wheel_service<Clock, WaitTraits>::virtual_next() const -> std::optional<time_point> {
  static_assert(is_virtual_clock<C>::value);
  if (shard_type* s = shards_[0].load(std::memory_order_acquire))
    return s->virtual_next();
  return std::nullopt;
}

template <typename Clock, typename WaitTraits>
template <typename C>
bool wheel_service<Clock, WaitTraits>::virtual_fire() {
  static_assert(is_virtual_clock<C>::value);
  if (shard_type* s = shards_[0].load(std::memory_order_acquire))
    return s->virtual_fire();
  return false;
}

} // namespace asio_wheel::detail

#endif // ASIO_WHEEL_DETAIL_IMPL_WHEEL_SERVICE_HPP
