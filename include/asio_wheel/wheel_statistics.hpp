//
// wheel_statistics.hpp
// ~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//

#ifndef ASIO_WHEEL_WHEEL_STATISTICS_HPP
#define ASIO_WHEEL_WHEEL_STATISTICS_HPP

#include <array>
#include <asio_wheel/detail/bit_ops.hpp>
#include <asio_wheel/detail/min_max.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>

namespace asio_wheel {

/// A snapshot of the timing wheel of one execution context and clock.
/**
 * Returned by get_statistics(). A context's wheel is cut into shards, one per thread that
 * starts waits (up to the number of hardware threads); each shard's fields are read under
 * its lock at one instant, so they agree with each other, and the snapshot is their sum
 * (largest_batch: their maximum; next_expiry: the earliest). So waits_pending() is exact,
 * the sum of each shard's pending waits at the instant it was read. The totals
 * count from the wheel's creation (the context's first wheel wait on that clock) and only
 * grow. A context without a wheel for the clock gives a snapshot of zeros.
 *
 * "Tick" is the wheel's tick (the @c tick field; 1 ms unless set_tick() changed it).
 */
struct wheel_statistics {
  /// Levels of the wheel (64 slots each; level k holds deadlines up to 64^(k+1) ticks ahead).
  static constexpr std::size_t levels = 11;
  /// Buckets of the lateness histogram: 0 ticks late, then [2^(k-1), 2^k) ticks for k >= 1.
  static constexpr std::size_t lateness_buckets = 65;

  /// The wheel's tick length; zero when the context has no wheel for this clock.
  std::chrono::nanoseconds tick{0};

  /// The shards the wheel is cut into so far: one for each thread that started waits, up
  /// to the number of hardware threads (rounded up to a power of two; ASIO_WHEEL_SHARDS
  /// fixes it, ASIO_WHEEL_MAX_SHARDS bounds it), and one for a virtual clock.
  std::size_t shards = 0;

  // --- Now. ---

  /// Timers (wheel_timer objects, idle timers, heartbeats, groups' timers) with at least one
  /// pending wait. Several waits on one timer count once here (they share its expiry).
  std::size_t timers_pending = 0;
  /// Entries linked in the wheel, per level. Includes timers whose waits were cancelled but
  /// which the wheel keeps until their tick (lazy re-arm), so the sum may exceed
  /// timers_pending. Counted at the snapshot by a walk over the wheel's lists (keeping the
  /// counts per link and unlink cost 2% of an expiry's instructions): all zero when
  /// get_statistics() was asked not to count them.
  std::array<std::size_t, levels> timers_per_level{};
  /// Time until the wheel's driver next wakes, read from the clock at the snapshot: never
  /// later than the earliest pending wait's expiry (it may be earlier: the driver also wakes
  /// for a cancelled timer's tick or to re-file an upper-level slot). Zero if the wake-up is
  /// overdue (a wait already due when started, say); nanoseconds::max() if it is further
  /// than that can tell; empty when nothing is pending (the driver is not armed).
  std::optional<std::chrono::nanoseconds> next_expiry;

  // --- Totals since the wheel was created. ---

  /// Waits started (async_wait calls that reached the wheel).
  std::uint64_t waits_started = 0;
  /// Waits decided as expired (their handler gets a success error_code), including those
  /// whose expiry had already passed when they started (see waits_expired_at_start).
  std::uint64_t waits_succeeded = 0;
  /// Waits decided as aborted (cancel(), expires_at()/expires_after() on a busy timer,
  /// destruction, per-operation cancellation): their handler gets operation_aborted.
  std::uint64_t waits_aborted = 0;
  /// Waits whose expiry had passed when they started. As in Asio's timer queue, such a
  /// wait stays pending until the next expiry turn (queued at once, without the driver), so
  /// cancel() before then still aborts it; it is filed at the wheel's current tick, so its
  /// lateness counts only the wheel's own delay.
  std::uint64_t waits_expired_at_start = 0;
  /// Driver turns: each run of the driver's handler (a wake-up of the one Asio timer behind
  /// the wheel, or the continuation of a turn that hit its budget).
  std::uint64_t driver_turns = 0;
  /// Of driver_turns: turns that found no wait due (woken for a tick whose waits had been
  /// cancelled, or re-armed for later: the cost of lazy re-arm; or a turn that only staged
  /// an upper-level slot ahead of time).
  std::uint64_t empty_turns = 0;
  /// Timers found at their filed tick with waits re-armed for a later expiry, and filed
  /// again (lazy re-arm: one re-file per tick reached, however many re-arms).
  std::uint64_t lazy_refiles = 0;
  /// Batches of completions: lists of decided waits completed from one handler on the
  /// context (one per driver turn that found waits due, one per drain of aborted waits; a
  /// sweep, on a context with 8 shards in use run by several threads, counts one per shard
  /// it took from).
  std::uint64_t batches = 0;
  /// The largest batch so far, in waits.
  std::uint64_t largest_batch = 0;
  /// Driver turns that stopped at the expiry budget (4096 expiries) or, for an upper-level
  /// slot that came due before it could be staged ahead, the cascade budget (512 re-filed
  /// entries), and left the rest to a new turn, so that the context's other handlers get a
  /// turn. Turns that only stage entries ahead of their slot are not counted.
  std::uint64_t budget_turns = 0;

  /// Lateness of the timer expiries completed by the driver, in ticks: how many whole ticks
  /// after its deadline tick the driver turn that completed a timer's waits came. Counted
  /// once per timer (a timer's waits share its expiry; almost every timer has one wait).
  /// Bucket 0: on time (in the deadline's own tick); bucket k >= 1: late by [2^(k-1), 2^k)
  /// ticks. The time from that turn to the handler's call (the context's queue) is not
  /// included.
  std::array<std::uint64_t, lateness_buckets> lateness{};
  /// Sum of the lateness, in ticks, of the expiries counted in the histogram.
  std::uint64_t lateness_sum = 0;

  /// Waits started and not yet decided: waits_started - waits_succeeded - waits_aborted.
  std::uint64_t waits_pending() const noexcept {
    return waits_started - waits_succeeded - waits_aborted;
  }

  /// Number of timer expiries in the lateness histogram.
  std::uint64_t lateness_count() const noexcept {
    std::uint64_t n = 0;
    for (std::uint64_t b : lateness)
      n += b;
    return n;
  }

  /// Upper bound, in ticks, of the lateness of the waits of bucket @c k (exclusive for
  /// k >= 1: bucket k holds [2^(k-1), 2^k) ticks; bucket 0 holds exactly 0).
  static constexpr std::uint64_t bucket_upper(std::size_t k) noexcept {
    return k == 0 ? 0 : (k >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << k) - 1);
  }

  /// The smallest bucket bound (bucket_upper) at or under which a fraction @c q (0 to 1) of
  /// the histogram's expiries lies: a p50/p99 read-out, in ticks. Zero when it is empty.
  std::uint64_t lateness_quantile(double q) const noexcept {
    const std::uint64_t total = lateness_count();
    if (total == 0)
      return 0;
    std::uint64_t seen = 0;
    for (std::size_t k = 0; k < lateness_buckets; ++k) {
      seen += lateness[k];
      if (static_cast<double>(seen) >= q * static_cast<double>(total))
        return bucket_upper(k);
    }
    return bucket_upper(lateness_buckets - 1);
  }
};

namespace detail {

// The wheel service's totals, kept under its lock; see wheel_statistics for each one.
struct wheel_counters {
  std::uint64_t started = 0;
  // Indexed by "aborted": [0] succeeded, [1] aborted; one increment in make_ready().
  std::uint64_t decided[2] = {0, 0};
  std::uint64_t expired_at_start = 0;
  std::uint64_t turns = 0;
  std::uint64_t empty_turns = 0;
  std::uint64_t refiles = 0;
  std::uint64_t batches = 0;
  std::uint64_t largest_batch = 0;
  std::uint64_t budget_turns = 0;
  std::uint64_t lateness[wheel_statistics::lateness_buckets] = {};
  std::uint64_t lateness_sum = 0;

  void batch(std::uint64_t n) noexcept {
    if (n == 0)
      return;
    ++batches;
    if (n > largest_batch)
      largest_batch = n;
  }

  // An expiry turn that completed `n` waits (`found`: it found some due, those it queued
  // behind an earlier wait of their timer included).
  void turn(std::uint64_t n, bool found) noexcept {
    ++turns;
    empty_turns += !found;
    batch(n);
    decided[0] += n;
  }

  // `timers` timers expired `ticks` late.
  void late(std::uint64_t ticks, std::uint64_t timers) noexcept {
    lateness[detail::bit_width(ticks)] += timers;
    lateness_sum += ticks * timers;
  }

  void snapshot(wheel_statistics& s) const noexcept {
    s.waits_started = started;
    s.waits_succeeded = decided[0];
    s.waits_aborted = decided[1];
    s.waits_expired_at_start = expired_at_start;
    s.driver_turns = turns;
    s.empty_turns = empty_turns;
    s.lazy_refiles = refiles;
    s.batches = batches;
    s.largest_batch = largest_batch;
    s.budget_turns = budget_turns;
    for (std::size_t k = 0; k < wheel_statistics::lateness_buckets; ++k)
      s.lateness[k] = lateness[k];
    s.lateness_sum = lateness_sum;
  }
};

// Adds one shard's snapshot `part` to `total` (see wheel_statistics); tick is the caller's.
inline void accumulate(wheel_statistics& total, const wheel_statistics& part) noexcept {
  ++total.shards;
  total.timers_pending += part.timers_pending;
  for (std::size_t i = 0; i < wheel_statistics::levels; ++i)
    total.timers_per_level[i] += part.timers_per_level[i];
  if (part.next_expiry && (!total.next_expiry || *part.next_expiry < *total.next_expiry))
    total.next_expiry = part.next_expiry;
  total.waits_started += part.waits_started;
  total.waits_succeeded += part.waits_succeeded;
  total.waits_aborted += part.waits_aborted;
  total.waits_expired_at_start += part.waits_expired_at_start;
  total.driver_turns += part.driver_turns;
  total.empty_turns += part.empty_turns;
  total.lazy_refiles += part.lazy_refiles;
  total.batches += part.batches;
  total.largest_batch = detail::max_of(total.largest_batch, part.largest_batch);
  total.budget_turns += part.budget_turns;
  for (std::size_t k = 0; k < wheel_statistics::lateness_buckets; ++k)
    total.lateness[k] += part.lateness[k];
  total.lateness_sum += part.lateness_sum;
}

} // namespace detail
} // namespace asio_wheel

#endif // ASIO_WHEEL_WHEEL_STATISTICS_HPP
