//
// soak_mt_test.cpp
// ~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// Soak: an io_context run by 4 threads; many timers under random arm, cancel, cancel_one,
// reset (expires_after on a pending wait), per-operation cancellation, cancel_after, move and
// destroy, for a bounded time.
//
// Ownership. The timers are spread over many strands; each timer is only ever touched on
// its strand (as Asio requires: one timer object, one thread at a time), and every handler
// is bound to its timer's strand. Operations are posted to random strands from all 4 run
// threads (by handlers, and by operations spreading more operations) and from 2 foreign
// threads. An operation picks a random timer of its strand and does one random thing to it.
// The number of operations in flight is capped, so the queues stay bounded.
//
// Checked at the end:
//   * every started wait completed exactly once (success or operation_aborted; never
//     twice, never lost): each wait has a unique id, and its handler counts per id;
//   * handler objects destroyed == handler objects created (each handler owns a tracker
//     counting every construction, copies and moves included, and every destruction);
//   * a success never before the expiry (recorded when the wait starts, checked at entry);
//   * every handler ran on its strand;
//   * once the work is done, io_context::run() returns in all 4 threads (no driver left
//     armed), promptly.
//
// asio::steady_timer runs the same soak, as the reference. Asio 1.22's steady_timer keeps
// a pointer to the timer object in a per-operation cancellation handler, so emitting a
// slot after the timer was moved or destroyed is a use-after-free there (wheel_timer's
// refers to the operation: see the README). For steady_timer only, the timers of odd
// slots carry the per-operation cancellation and cancel_after waits and are never moved
// or destroyed, and those of even slots are moved and destroyed but carry neither. For
// wheel_timer every timer gets everything.
//
// Size and time. By default: 3 s per timer type with 40000 timers (2 s with 8000 under a
// sanitizer), about 7 s for the file in Debug. The long version is run by hand, e.g.:
//   cmake --preset release && cmake --build --preset release --target asio_wheel_soak_mt_test
//   export ASIO_WHEEL_SOAK_SECONDS=120 ASIO_WHEEL_SOAK_TIMERS=1000000
//   build/release/bin/asio_wheel_soak_mt_test -tc='*wheel_timer>'
// ASIO_WHEEL_SOAK_SECONDS is per timer type; -tc picks one (omit it for both). With a
// million timers the first seconds go to arming and expiring the initial million waits
// (in Debug, most of a 10 s run), so give it minutes. ASIO_WHEEL_SOAK_SEED picks the
// random seed (the seed used is printed); the thread interleaving differs run to run.
//

#include <asio_wheel/cancel_after.hpp>
#include <asio_wheel/wheel_timer.hpp>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/bind_executor.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/cancellation_type.hpp>
#include <asio/error.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <asio/strand.hpp>

#include <doctest/doctest.h>

#include "asio_test_support.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <system_error>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace {

using namespace std::chrono_literals;
using namespace asio_wheel::test;
using strand_type = asio::strand<asio::io_context::executor_type>;

#if defined(ASIO_WHEEL_TEST_SANITIZED)
constexpr double kDefaultSeconds = 2.0;
constexpr std::size_t kDefaultTimers = 8000;
#else
constexpr double kDefaultSeconds = 3.0;
constexpr std::size_t kDefaultTimers = 40000;
#endif
constexpr int kRunThreads = 4;
constexpr int kForeignThreads = 2;

// ---------------------------------------------------------------------------------------
// Configuration

struct soak_config {
  double seconds = kDefaultSeconds;
  std::size_t timers = kDefaultTimers;
  std::size_t strands = 0;
  std::uint64_t seed = 20240611;
  std::size_t max_inflight = 4096;
  std::size_t id_capacity = 0; // waits that can be started (one byte each)
  // How long the wind-down may take (operations in flight to drain, every timer to be
  // cancelled on its strand) before the test gives up and stops the context.
  sclock::duration wind_down_limit{};
  // After the last timer is cancelled, every run() must return within this. Both grow
  // with the number of timers: a million aborted waits take a while in a Debug build.
  sclock::duration prompt{};
};

soak_config make_config() {
  soak_config c;
  if (const char* s = std::getenv("ASIO_WHEEL_SOAK_SECONDS")) {
    const double v = std::strtod(s, nullptr);
    if (v > 0)
      c.seconds = v;
  }
  if (const char* s = std::getenv("ASIO_WHEEL_SOAK_TIMERS")) {
    const unsigned long long v = std::strtoull(s, nullptr, 10);
    if (v > 0)
      c.timers = static_cast<std::size_t>(v);
  }
  if (const char* s = std::getenv("ASIO_WHEEL_SOAK_SEED"))
    c.seed = std::strtoull(s, nullptr, 10);
  c.timers = std::max<std::size_t>(c.timers, 64);
  c.strands = std::clamp<std::size_t>(c.timers / 64, 16, 512);
  const double ids = static_cast<double>(c.timers) * 4 + c.seconds * 3e6;
  c.id_capacity = static_cast<std::size_t>(std::clamp(ids, double(1u << 22), double(1u << 30)));
  const auto per_timer = std::chrono::microseconds(c.timers * 30);
  c.wind_down_limit = 30s + per_timer;
  c.prompt = 10s + per_timer;
  return c;
}

// ---------------------------------------------------------------------------------------
// Shared counters (atomics: handlers run on all 4 run threads).

enum op_kind : int {
  k_arm,        // async_wait, 1 or 2 waits, sometimes after a new expiry
  k_reset,      // expires_after() on the (maybe pending) timer, then a new wait
  k_cancel,     // cancel()
  k_cancel_one, // cancel_one()
  k_emit,       // per-operation cancellation of a random pending wait of the strand
  k_move,       // move the timer to another slot (construct or assign)
  k_destroy,    // destroy the timer
  k_spread,     // post two more operations to random strands
  k_count
};

const char* const op_names[k_count] = {"arm",  "reset", "cancel",  "cancel_one",
                                       "emit", "move",  "destroy", "spread"};

enum wait_flavor : int { f_plain, f_slot, f_cancel_after, f_cancel_after_slot, f_count };

struct soak_stats {
  explicit soak_stats(std::size_t cap)
      : capacity(cap), calls(new std::atomic<std::uint8_t>[cap]()) {}

  const std::size_t capacity;
  std::unique_ptr<std::atomic<std::uint8_t>[]> calls; // completions per wait id
  std::atomic<std::uint64_t> next_id{0};
  std::atomic<long long> ids_exhausted{0};
  std::atomic<long long> handlers_created{0};
  std::atomic<long long> handlers_destroyed{0};
  std::atomic<long long> succeeded{0};
  std::atomic<long long> aborted{0};
  std::atomic<long long> other_errors{0};
  std::atomic<long long> early{0};
  std::atomic<long long> twice{0};
  std::atomic<long long> off_strand{0};
  std::atomic<long long> ops[k_count]{};
  std::atomic<long long> flavors[f_count]{};
  std::atomic<long long> emitted{0};
  std::atomic<long long> issued_by_run_threads{0};
  std::atomic<long long> issued_by_foreign_threads{0};
  std::atomic<long long> inflight{0}; // operations posted and not yet run
  std::atomic<bool> stopping{false};

  std::size_t started() const {
    return static_cast<std::size_t>(std::min<std::uint64_t>(next_id.load(), capacity));
  }
};

// Owned by every handler: counts every construction (copies and moves too) and destruction.
struct tracker {
  explicit tracker(soak_stats& s) : s_(&s) {
    s_->handlers_created.fetch_add(1, std::memory_order_relaxed);
  }
  tracker(const tracker& o) : s_(o.s_) {
    s_->handlers_created.fetch_add(1, std::memory_order_relaxed);
  }
  tracker& operator=(const tracker&) = delete;
  ~tracker() { s_->handlers_destroyed.fetch_add(1, std::memory_order_relaxed); }
  soak_stats* s_;
};

// True on the foreign threads (those that do not run the io_context).
thread_local bool t_foreign = false;

// ---------------------------------------------------------------------------------------
// The soak.

template <class Timer>
class soak {
  // Asio 1.22's steady_timer: per-operation cancellation only on timers that are never
  // moved or destroyed while waits are pending (see the top of the file).
  static constexpr bool restricted = !std::is_same_v<Timer, asio_wheel::wheel_timer>;

  struct sig_entry {
    std::uint64_t id;
    std::unique_ptr<asio::cancellation_signal> sig;
  };

  // Everything of one strand; touched only on that strand (and by the main thread before
  // the run threads start and after they have all returned).
  struct strand_state {
    strand_state(asio::io_context& ioc, std::uint64_t seed)
        : strand(asio::make_strand(ioc)), rng(seed) {}
    strand_type strand;
    std::vector<std::unique_ptr<Timer>> timers; // a slot is empty after k_destroy
    std::vector<sig_entry> sigs;                // pending waits with a cancellation slot
    std::unordered_map<std::uint64_t, std::size_t> sig_index;
    std::mt19937_64 rng;
  };

public:
  soak(asio::io_context& ioc, const soak_config& cfg, soak_stats& stats)
      : ioc_(ioc), cfg_(cfg), stats_(stats) {
    for (std::size_t i = 0; i < cfg.strands; ++i) {
      strands_.push_back(std::make_unique<strand_state>(ioc, cfg.seed * 7919 + i));
      const std::size_t n = cfg.timers / cfg.strands + (i < cfg.timers % cfg.strands ? 1 : 0);
      strands_.back()->timers.resize(n);
    }
  }

  // From the main thread, before the soak: fills and arms every strand's timers.
  void start() {
    for (auto& st : strands_) {
      stats_.inflight.fetch_add(1);
      asio::post(st->strand, [this, s = st.get()] {
        if (!stats_.stopping)
          for (std::size_t i = 0; i < s->timers.size(); ++i)
            arm(*s, i, true);
        stats_.inflight.fetch_sub(1);
      });
    }
  }

  // Any thread: posts one operation to a random strand, unless winding down or at the cap.
  template <class Rng>
  void issue(Rng& rng) {
    // Increment first, then look at `stopping` (both seq_cst): the main thread sets
    // `stopping` then waits for inflight == 0, so no operation is posted after that.
    if (stats_.inflight.fetch_add(1) >= static_cast<long long>(cfg_.max_inflight) ||
        stats_.stopping) {
      stats_.inflight.fetch_sub(1);
      return;
    }
    (t_foreign ? stats_.issued_by_foreign_threads : stats_.issued_by_run_threads)
        .fetch_add(1, std::memory_order_relaxed);
    strand_state& st = *strands_[rng() % strands_.size()];
    asio::post(st.strand, [this, &st] {
      execute(st);
      stats_.inflight.fetch_sub(1);
    });
  }

  // The wind-down, from the main thread once no operation is in flight: every timer is
  // cancelled or destroyed on its strand. Returns when all strands have done it.
  bool cancel_everything(sclock::duration limit) {
    // Shared: if this gives up, the functions still queued must not touch its frame.
    auto done = std::make_shared<std::atomic<std::size_t>>(0);
    for (auto& st : strands_)
      asio::post(st->strand, [s = st.get(), done] {
        for (std::size_t i = 0; i < s->timers.size(); ++i) {
          auto& t = s->timers[i];
          if (!t)
            continue;
          // steady_timer: odd slots carry cancellation slots, so they stay alive until
          // the end; all their waits are cancelled here.
          if ((restricted && i % 2 == 1) || s->rng() % 2 == 0)
            t->cancel();
          else
            t.reset();
        }
        ++*done;
      });
    const auto deadline = sclock::now() + limit;
    while (done->load() < strands_.size()) {
      if (sclock::now() > deadline)
        return false;
      std::this_thread::sleep_for(1ms);
    }
    return true;
  }

  // After every run() has returned.
  std::size_t pending_signals() const {
    std::size_t n = 0;
    for (const auto& st : strands_)
      n += st->sigs.size();
    return n;
  }
  // Destroys the timers and the strands (which must go before the context); the signals
  // move to `keep`, which outlives the context: if the watchdog had to stop it, waits
  // with a cancellation slot may still be queued, and are destroyed with it.
  void destroy_timers(std::vector<std::unique_ptr<asio::cancellation_signal>>& keep) {
    for (auto& st : strands_)
      st->timers.clear();
    for (auto& st : strands_)
      for (auto& e : st->sigs)
        keep.push_back(std::move(e.sig));
    strands_.clear();
  }

private:
  template <class Rng>
  static sclock::duration random_delay(Rng& rng) {
    const auto r = rng() % 100;
    const auto us = [&](int lo, int hi) {
      return std::chrono::microseconds(
          lo + static_cast<int>(rng() % static_cast<unsigned>(hi - lo + 1)));
    };
    if (r < 5)
      return -us(0, 5000); // already passed
    if (r < 10)
      return 0us;
    if (r < 45)
      return us(0, 2000);
    if (r < 75)
      return us(2000, 20000);
    if (r < 90)
      return us(20000, 300000);
    return 1h; // ended only by a cancel, reset, move-assign, destruction or deadline
  }

  template <class Rng>
  static sclock::duration random_timeout(Rng& rng) {
    const auto r = rng() % 100;
    if (r < 50)
      return std::chrono::microseconds(rng() % 10000);
    if (r < 80)
      return std::chrono::microseconds(10000 + rng() % 90000);
    return 1h;
  }

  static bool may_carry_slot(std::size_t slot) { return !restricted || slot % 2 == 1; }
  static bool may_move_or_destroy(std::size_t slot) { return !restricted || slot % 2 == 0; }

  // On the strand.
  void execute(strand_state& st) {
    if (stats_.stopping)
      return;
    auto& rng = st.rng;
    const std::size_t i = rng() % st.timers.size();
    const auto r = rng() % 100;
    op_kind kind = r < 30   ? k_arm
                   : r < 42 ? k_reset
                   : r < 52 ? k_cancel
                   : r < 60 ? k_cancel_one
                   : r < 70 ? k_emit
                   : r < 78 ? k_move
                   : r < 85 ? k_destroy
                            : k_spread;
    stats_.ops[kind].fetch_add(1, std::memory_order_relaxed);
    auto& t = st.timers[i];
    switch (kind) {
    case k_arm:
      arm(st, i, rng() % 5 < 2);
      break;
    case k_reset:
      if (!t)
        break;
      t->expires_after(random_delay(rng));
      start_wait(st, i);
      break;
    case k_cancel:
      if (t)
        t->cancel();
      break;
    case k_cancel_one:
      if (t)
        t->cancel_one();
      break;
    case k_emit: {
      if (st.sigs.empty())
        break;
      auto& e = st.sigs[rng() % st.sigs.size()];
      static constexpr asio::cancellation_type_t types[] = {
          asio::cancellation_type::terminal, asio::cancellation_type::partial,
          asio::cancellation_type::total, asio::cancellation_type::none};
      e.sig->emit(types[rng() % 4]); // `none` cancels nothing
      stats_.emitted.fetch_add(1, std::memory_order_relaxed);
      break;
    }
    case k_move: {
      std::size_t j = rng() % st.timers.size();
      std::size_t from = i;
      if (restricted) { // even slots only
        from &= ~std::size_t{1};
        j &= ~std::size_t{1};
      }
      if (from == j || !st.timers[from])
        break;
      if (st.timers[j])
        *st.timers[j] = std::move(*st.timers[from]); // aborts j's waits, takes from's
      else
        st.timers[j] = std::make_unique<Timer>(std::move(*st.timers[from]));
      break;
    }
    case k_destroy:
      if (may_move_or_destroy(i))
        t.reset();
      else if (t)
        t->cancel();
      break;
    case k_spread:
      issue(rng);
      issue(rng);
      break;
    default:
      break;
    }
  }

  // On the strand: (re)creates the timer if needed, and starts 1 or 2 waits.
  void arm(strand_state& st, std::size_t i, bool new_expiry) {
    auto& t = st.timers[i];
    if (!t) {
      t = std::make_unique<Timer>(ioc_);
      new_expiry = true;
    }
    if (new_expiry)
      t->expires_after(random_delay(st.rng));
    start_wait(st, i);
    if (st.rng() % 5 == 0)
      start_wait(st, i);
  }

  // On the strand.
  void start_wait(strand_state& st, std::size_t i) {
    Timer& t = *st.timers[i];
    const auto flavor = may_carry_slot(i) ? static_cast<wait_flavor>(st.rng() % f_count) : f_plain;
    const std::uint64_t id = stats_.next_id.fetch_add(1);
    if (id >= stats_.capacity) {
      stats_.ids_exhausted.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    stats_.flavors[flavor].fetch_add(1, std::memory_order_relaxed);
    const bool has_sig = flavor == f_slot || flavor == f_cancel_after_slot;
    const auto expiry = t.expiry();
    auto handler = asio::bind_executor(
        st.strand, [this, &st, id, expiry, has_sig, tok = tracker(stats_)](asio::error_code ec) {
          completed(st, id, expiry, has_sig, ec);
        });
    asio::cancellation_signal* sig = nullptr;
    if (has_sig) {
      st.sig_index.emplace(id, st.sigs.size());
      st.sigs.push_back({id, std::make_unique<asio::cancellation_signal>()});
      sig = st.sigs.back().sig.get();
    }
    switch (flavor) {
    case f_plain:
      t.async_wait(std::move(handler));
      break;
    case f_slot:
      t.async_wait(asio::bind_cancellation_slot(sig->slot(), std::move(handler)));
      break;
    case f_cancel_after:
      t.async_wait(asio_wheel::cancel_after(random_timeout(st.rng), std::move(handler)));
      break;
    case f_cancel_after_slot:
      t.async_wait(asio_wheel::cancel_after(
          random_timeout(st.rng), asio::bind_cancellation_slot(sig->slot(), std::move(handler))));
      break;
    default:
      break;
    }
  }

  // The handler of every wait, on its strand.
  void completed(strand_state& st, std::uint64_t id, sclock::time_point expiry, bool has_sig,
                 const asio::error_code& ec) {
    const auto now = sclock::now();
    if (!st.strand.running_in_this_thread())
      stats_.off_strand.fetch_add(1);
    if (stats_.calls[id].fetch_add(1) != 0)
      stats_.twice.fetch_add(1);
    if (!ec) {
      stats_.succeeded.fetch_add(1, std::memory_order_relaxed);
      if (now < expiry)
        stats_.early.fetch_add(1);
    } else if (ec == kAborted) {
      stats_.aborted.fetch_add(1, std::memory_order_relaxed);
    } else {
      stats_.other_errors.fetch_add(1);
    }
    if (has_sig) {
      // The wait is over: its signal may go (swap with the last, pop).
      const auto it = st.sig_index.find(id);
      if (it != st.sig_index.end()) {
        const std::size_t at = it->second;
        st.sig_index.erase(it);
        if (at + 1 != st.sigs.size()) {
          st.sigs[at] = std::move(st.sigs.back());
          st.sig_index[st.sigs[at].id] = at;
        }
        st.sigs.pop_back();
      }
    }
    // Operations come from the run threads too.
    if (st.rng() % 2 == 0)
      issue(st.rng);
  }

  asio::io_context& ioc_;
  const soak_config& cfg_;
  soak_stats& stats_;
  std::vector<std::unique_ptr<strand_state>> strands_;
};

template <class Timer>
void run_soak(const std::string& name) {
  const soak_config cfg = make_config();
  MESSAGE(name << ": " << cfg.timers << " timers on " << cfg.strands << " strands, " << cfg.seconds
               << " s, seed " << cfg.seed << ", " << kRunThreads << " run threads, "
               << kForeignThreads << " foreign threads");
  soak_stats stats(cfg.id_capacity);
  int returned = 0;
  bool drained = false, cancelled = false;
  sclock::duration wind_down{};
  std::size_t signals_left = 0;
  std::vector<std::unique_ptr<asio::cancellation_signal>> signals_kept;
  {
    asio::io_context ioc;
    soak<Timer> s(ioc, cfg, stats);
    {
      runner_threads run(ioc, kRunThreads, 30s);
      s.start();

      std::vector<std::thread> foreign;
      for (int f = 0; f < kForeignThreads; ++f)
        foreign.emplace_back([&, f] {
          t_foreign = true;
          std::mt19937_64 rng(cfg.seed + 1000 + static_cast<std::uint64_t>(f));
          while (!stats.stopping) {
            if (stats.inflight.load() < static_cast<long long>(cfg.max_inflight) / 2)
              for (int k = 0; k < 256; ++k)
                s.issue(rng);
            std::this_thread::sleep_for(100us);
          }
        });

      std::this_thread::sleep_for(std::chrono::duration<double>(cfg.seconds));

      // Wind down: no new operations; let those in flight run; cancel everything left.
      stats.stopping = true;
      for (auto& t : foreign)
        t.join();
      // Drained once inflight has been seen at zero: an issue() from a handler after that
      // (see there) raises it for a moment and lowers it again without posting anything, so
      // a second read could see that 1 (it did, under TSan on a loaded machine).
      const auto drain_deadline = sclock::now() + cfg.wind_down_limit;
      while (!(drained = stats.inflight.load() == 0) && sclock::now() < drain_deadline)
        std::this_thread::sleep_for(1ms);
      cancelled = drained && s.cancel_everything(cfg.wind_down_limit);
      const auto t0 = sclock::now();
      run.join(cancelled ? cfg.prompt : 1s);
      returned = run.returned_by_themselves();
      wind_down = sclock::now() - t0;
    }
    signals_left = s.pending_signals();
    s.destroy_timers(signals_kept);
  }

  const std::size_t started = stats.started();
  std::size_t never = 0, twice = 0;
  for (std::size_t id = 0; id < started; ++id) {
    const auto c = stats.calls[id].load();
    if (c == 0)
      ++never;
    if (c > 1)
      ++twice;
  }
  std::string ops;
  for (int k = 0; k < k_count; ++k)
    ops += std::string(k ? ", " : "") + op_names[k] + " " + std::to_string(stats.ops[k].load());
  MESSAGE(name << ": " << started << " waits (plain " << stats.flavors[f_plain].load() << ", slot "
               << stats.flavors[f_slot].load() << ", cancel_after "
               << stats.flavors[f_cancel_after].load() << ", cancel_after+slot "
               << stats.flavors[f_cancel_after_slot].load() << "): " << stats.succeeded.load()
               << " succeeded, " << stats.aborted.load() << " aborted; operations: " << ops << "; "
               << stats.emitted.load() << " emits; run() returned "
               << std::chrono::duration_cast<std::chrono::milliseconds>(wind_down).count()
               << " ms after the last cancel; operations issued by the run threads "
               << stats.issued_by_run_threads.load() << ", by the foreign threads "
               << stats.issued_by_foreign_threads.load());
  if (stats.ids_exhausted > 0)
    MESSAGE(stats.ids_exhausted.load()
            << " waits not started: id space (" << cfg.id_capacity << ") used up");

  CHECK(drained);
  CHECK(cancelled);
  CHECK_MESSAGE(returned == kRunThreads, "run() had not returned in every thread: a driver "
                                         "left armed or a completion lost");
  CHECK(started > cfg.timers);
  CHECK(never == 0);
  CHECK(twice == 0);
  CHECK(stats.twice == 0);
  CHECK(stats.other_errors == 0);
  CHECK(stats.early == 0);
  CHECK(stats.off_strand == 0);
  CHECK(static_cast<std::size_t>(stats.succeeded + stats.aborted) == started);
  CHECK(signals_left == 0);
  CHECK(stats.handlers_created.load() == stats.handlers_destroyed.load());
  CHECK(stats.succeeded > 0);
  CHECK(stats.aborted > 0);
  CHECK(stats.issued_by_run_threads > 0);
  CHECK(stats.issued_by_foreign_threads > 0);
}

} // namespace

TEST_CASE_TEMPLATE("soak: 4 run threads and 2 foreign threads; random arm, cancel, cancel_one, "
                   "reset, per-operation cancellation, cancel_after, move and destroy; every "
                   "wait completes exactly once, nothing leaks, run() returns",
                   Timer, TIMER_TYPES) {
  run_soak<Timer>(std::is_same_v<Timer, asio::steady_timer> ? "steady_timer" : "wheel_timer");
}
