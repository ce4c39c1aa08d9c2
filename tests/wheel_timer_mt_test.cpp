//
// wheel_timer_mt_test.cpp
// ~~~~~~~~~~~~~~~~~~~~~~~
//
// Concurrency: an io_context run by 4 threads, with waits, cancels, expiry changes,
// per-operation cancellation, moves and destruction of timers coming from the context's
// threads (through a strand per timer) and from foreign threads. Asio timers are not
// thread-safe objects, so every timer is touched by one thread at a time: either only on
// its strand, or only by the foreign thread that owns it (its handlers never touch it).
//
// Each test is a template over asio::steady_timer and wheel_timer: what is asserted is
// what Asio's own timer does. Checked: every wait completes exactly once, never before its
// expiry on success; the counts returned by cancel/cancel_one/expires_* equal the waits
// that were aborted; every handler object is destroyed (nothing leaks); run() returns
// promptly once nothing is pending. Run time is bounded (a watchdog stops a hung context)
// and smaller under TSan. Failures are collected in atomics and checked on the main thread.
//

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
#include <future>
#include <memory>
#include <optional>
#include <random>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

namespace {

using namespace std::chrono_literals;
using namespace asio_wheel::test;

#if defined(ASIO_WHEEL_TEST_TSAN)
constexpr int kScale = 3; // TSan: fewer rounds
#else
constexpr int kScale = 1;
#endif
// "Promptly": generous for a loaded 2-core machine under a sanitizer, far below kFar.
constexpr auto kPrompt = 5s;
constexpr auto kMtWatchdog = 30s;
constexpr int kRunners = 4;

using strand_type = asio::strand<asio::io_context::executor_type>;

// Shared counters. Everything here is atomic: handlers run on any of the runner threads.
struct mt_stats {
  explicit mt_stats(std::size_t n) : invocations(new std::atomic<int>[n]), capacity(n) {
    for (std::size_t i = 0; i < n; ++i)
      invocations[i] = 0;
  }

  // Reserves an id for a new wait; false once the id space is used up (then the caller
  // starts no wait).
  bool new_id(std::size_t& id) {
    id = next_id++;
    if (id < capacity)
      return true;
    ++overflow;
    return false;
  }

  std::size_t started() const { return std::min<std::size_t>(next_id.load(), capacity); }

  std::unique_ptr<std::atomic<int>[]> invocations;
  std::size_t capacity;
  std::atomic<std::size_t> next_id{0};
  std::atomic<long> overflow{0};
  std::atomic<long> succeeded{0};
  std::atomic<long> aborted{0};
  std::atomic<long> other_errors{0};
  std::atomic<long> early{0};
  std::atomic<long> off_strand{0};
  std::atomic<long> expected_aborted{0}; // sum of what cancel/cancel_one/expires_* returned
  std::atomic<long> counted_aborted{0};  // aborted waits that those calls account for
  std::atomic<long> live_handlers{0};
  std::atomic<long> inconsistent{0}; // per-iteration count/outcome mismatches
  std::atomic<long> timeouts{0};
};

// Owned by every handler: counts live handler objects (copies and moves included).
struct live_token {
  explicit live_token(mt_stats& s) : s_(&s) { ++s_->live_handlers; }
  live_token(const live_token& o) : s_(o.s_) { ++s_->live_handlers; }
  live_token& operator=(const live_token&) = delete;
  ~live_token() { --s_->live_handlers; }
  mt_stats* s_;
};

void check_every_wait_completed_once(const mt_stats& s) {
  const std::size_t n = s.started();
  std::size_t never = 0, twice = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const int c = s.invocations[i].load();
    if (c == 0)
      ++never;
    if (c > 1)
      ++twice;
  }
  CHECK(n > 0);
  CHECK(never == 0);
  CHECK(twice == 0);
  CHECK(s.overflow == 0);
  CHECK(s.other_errors == 0);
  CHECK(s.early == 0);
  CHECK(static_cast<std::size_t>(s.succeeded + s.aborted) == n);
  CHECK(s.live_handlers == 0);
  MESSAGE(n << " waits: " << s.succeeded.load() << " succeeded, " << s.aborted.load()
            << " aborted");
}

// ---------------------------------------------------------------------------------------
// Chains: one timer per strand, driven round after round from its own handlers.

template <class Timer>
struct chain {
  chain(asio::io_context& ioc, unsigned seed)
      : strand(asio::make_strand(ioc)), timer(std::make_unique<Timer>(ioc)), rng(seed) {}

  strand_type strand;
  std::unique_ptr<Timer> timer;
  asio::cancellation_signal sig;
  std::mt19937 rng;
  int rounds_left = 0;
  int pending = 0;
  int mode = -1;
  // While the wait bound to `sig` is pending (on the strand). The emit is made only then:
  // Asio 1.22's timer leaves its cancellation handler in the slot after the wait completes,
  // pointing into the timer, so an emit after a later round moved and destroyed that timer
  // is a use-after-free inside asio::steady_timer (TSan saw it), whatever ours does.
  bool slot_pending = false;
};

enum chain_mode : int {
  m_plain,      // one wait
  m_cancel,     // three waits, cancel()
  m_cancel_one, // two waits, cancel_one()
  m_expires,    // two waits, expires_after() aborts them, one more wait
  m_move,       // two waits, the timer is moved to a new object
  m_slot,       // a wait with a slot and a plain one; the slot is emitted on the strand
  m_destroy,    // two waits, the timer is destroyed and replaced
  m_count
};

template <class Timer>
class chain_driver {
public:
  chain_driver(asio::io_context& ioc, mt_stats& stats) : ioc_(ioc), stats_(stats) {}

  void start(chain<Timer>& c, int rounds) {
    c.rounds_left = rounds;
    asio::post(c.strand, [this, &c] { next_round(c); });
  }

  // A foreign intervention, run on the chain's strand. Skipped in the rounds whose aborts
  // are not accounted by return values (per-operation cancellation, destruction).
  void intervene(chain<Timer>& c, int what, sclock::duration d) {
    if (c.mode == m_slot || c.mode == m_destroy)
      return;
    switch (what) {
    case 0:
      stats_.expected_aborted += static_cast<long>(c.timer->cancel());
      break;
    case 1:
      stats_.expected_aborted += static_cast<long>(c.timer->cancel_one());
      break;
    default:
      stats_.expected_aborted += static_cast<long>(c.timer->expires_after(d));
      break;
    }
  }

  std::atomic<int> chains_done{0};

private:
  sclock::duration random_delay(chain<Timer>& c, int max_us = 3000) {
    return std::chrono::microseconds(std::uniform_int_distribution<int>(0, max_us)(c.rng));
  }

  void start_wait(chain<Timer>& c, bool counted, bool with_slot = false) {
    std::size_t id = 0;
    if (!stats_.new_id(id))
      return;
    ++c.pending;
    const auto expiry = c.timer->expiry();
    auto handler = [this, &c, id, expiry, counted, with_slot,
                    tok = live_token(stats_)](asio::error_code ec) {
      ++stats_.invocations[id];
      if (with_slot)
        c.slot_pending = false;
      if (!c.strand.running_in_this_thread())
        ++stats_.off_strand;
      if (!ec) {
        ++stats_.succeeded;
        if (sclock::now() < expiry)
          ++stats_.early;
      } else if (ec == kAborted) {
        ++stats_.aborted;
        if (counted)
          ++stats_.counted_aborted;
      } else {
        ++stats_.other_errors;
      }
      if (--c.pending == 0)
        next_round(c);
    };
    if (with_slot) {
      c.slot_pending = true;
      c.timer->async_wait(
          asio::bind_executor(c.strand, asio::bind_cancellation_slot(c.sig.slot(), handler)));
    } else
      c.timer->async_wait(asio::bind_executor(c.strand, handler));
  }

  void add_expected(std::size_t n) { stats_.expected_aborted += static_cast<long>(n); }

  // Runs on the chain's strand, when none of its waits is pending.
  void next_round(chain<Timer>& c) {
    if (c.rounds_left-- <= 0) {
      c.mode = -1;
      ++chains_done;
      return;
    }
    c.mode = std::uniform_int_distribution<int>(0, m_count - 1)(c.rng);
    Timer& t = *c.timer;
    add_expected(t.expires_after(random_delay(c)));
    switch (c.mode) {
    case m_plain:
      start_wait(c, true);
      break;
    case m_cancel:
      for (int i = 0; i < 3; ++i)
        start_wait(c, true);
      add_expected(t.cancel());
      break;
    case m_cancel_one:
      start_wait(c, true);
      start_wait(c, true);
      add_expected(t.cancel_one());
      break;
    case m_expires:
      start_wait(c, true);
      start_wait(c, true);
      add_expected(t.expires_after(random_delay(c)));
      start_wait(c, true);
      break;
    case m_move:
      start_wait(c, true);
      start_wait(c, true);
      c.timer = std::make_unique<Timer>(std::move(t));
      break;
    case m_slot: {
      start_wait(c, false, true);
      start_wait(c, true);
      static const asio::cancellation_type_t types[] = {asio::cancellation_type::terminal,
                                                        asio::cancellation_type::partial,
                                                        asio::cancellation_type::total};
      const auto type = types[std::uniform_int_distribution<int>(0, 2)(c.rng)];
      asio::post(c.strand, [&c, type] {
        if (c.slot_pending)
          c.sig.emit(type);
      });
      break;
    }
    case m_destroy:
      start_wait(c, false);
      start_wait(c, false);
      c.timer = std::make_unique<Timer>(ioc_);
      break;
    default:
      break;
    }
    if (c.pending == 0) { // id space exhausted: end this chain
      c.rounds_left = 0;
      asio::post(c.strand, [this, &c] { next_round(c); });
    }
  }

  asio::io_context& ioc_;
  mt_stats& stats_;
};

} // namespace

TEST_CASE_TEMPLATE("4 threads: a strand per timer; waits, cancels, expiry changes, moves, "
                   "per-operation cancellation and destruction, also from foreign threads",
                   Timer, TIMER_TYPES) {
  const int n_chains = 12;
  const int rounds = 120 / kScale;
  const int foreign_threads = 2;
  const int interventions = 300 / kScale;

  mt_stats stats(static_cast<std::size_t>(n_chains) * rounds * 3 + 64);
  {
    asio::io_context ioc;
    std::vector<std::unique_ptr<chain<Timer>>> chains;
    for (int i = 0; i < n_chains; ++i)
      chains.push_back(std::make_unique<chain<Timer>>(ioc, 1000u + static_cast<unsigned>(i)));
    chain_driver<Timer> driver(ioc, stats);

    runner_threads run(ioc, kRunners, kMtWatchdog);
    for (auto& c : chains)
      driver.start(*c, rounds);

    std::vector<std::thread> foreign;
    for (int f = 0; f < foreign_threads; ++f)
      foreign.emplace_back([&, f] {
        std::mt19937 rng(77u + static_cast<unsigned>(f));
        for (int i = 0; i < interventions; ++i) {
          std::this_thread::sleep_for(
              std::chrono::microseconds(std::uniform_int_distribution<int>(0, 800)(rng)));
          auto& c = *chains[std::uniform_int_distribution<std::size_t>(0, chains.size() - 1)(rng)];
          const int what = std::uniform_int_distribution<int>(0, 2)(rng);
          const auto d =
              std::chrono::microseconds(std::uniform_int_distribution<int>(0, 3000)(rng));
          asio::post(c.strand, [&driver, &c, what, d] { driver.intervene(c, what, d); });
        }
      });
    for (auto& t : foreign)
      t.join();

    const bool finished = run.join();
    CHECK_MESSAGE(finished, "the io_context had to be stopped by the watchdog");
    CHECK(driver.chains_done == n_chains);
  }
  check_every_wait_completed_once(stats);
  CHECK(stats.off_strand == 0);
  CHECK(stats.counted_aborted == stats.expected_aborted);
}

// ---------------------------------------------------------------------------------------

namespace {

// The state of one iteration of a foreign thread: up to 3 waits.
struct iteration {
  explicit iteration(int waits) : remaining(waits) {}
  std::atomic<int> remaining;
  asio::error_code ec[3];
  std::promise<void> done;
};

} // namespace

TEST_CASE_TEMPLATE("4 threads run the context while foreign threads own timers and wait, "
                   "cancel and change expiries directly",
                   Timer, TIMER_TYPES) {
  const int owners = 3;
  const int iterations = 150 / kScale;
  mt_stats stats(static_cast<std::size_t>(owners) * iterations * 3 + 16);
  {
    asio::io_context ioc;
    runner_threads run(ioc, kRunners, kMtWatchdog);

    std::vector<std::thread> threads;
    for (int f = 0; f < owners; ++f)
      threads.emplace_back([&, f] {
        std::mt19937 rng(500u + static_cast<unsigned>(f));
        auto us = [&](int max) {
          return std::chrono::microseconds(std::uniform_int_distribution<int>(0, max)(rng));
        };
        // Only this thread touches the timer; its handlers do not.
        auto timer = std::make_unique<Timer>(ioc);
        for (int i = 0; i < iterations; ++i) {
          const int mode = std::uniform_int_distribution<int>(0, 4)(rng);
          const int waits = mode == 0 || mode == 2 ? 1 : mode == 3 ? 3 : 2;
          auto it = std::make_shared<iteration>(waits);
          auto wait = [&](int k) {
            std::size_t id = 0;
            if (!stats.new_id(id)) {
              if (--it->remaining == 0)
                it->done.set_value();
              return;
            }
            const auto expiry = timer->expiry();
            timer->async_wait(
                [&stats, it, k, id, expiry, tok = live_token(stats)](asio::error_code ec) {
                  ++stats.invocations[id];
                  it->ec[k] = ec;
                  if (!ec) {
                    ++stats.succeeded;
                    if (sclock::now() < expiry)
                      ++stats.early;
                  } else if (ec == kAborted) {
                    ++stats.aborted;
                  } else {
                    ++stats.other_errors;
                  }
                  if (--it->remaining == 0)
                    it->done.set_value();
                });
          };
          timer->expires_after(us(2000));
          std::size_t n = 0;
          switch (mode) {
          case 0: // plain: must succeed
            wait(0);
            break;
          case 1: // cancel() right away (a zero expiry may already be being completed)
            wait(0);
            wait(1);
            n = timer->cancel();
            break;
          case 2: // cancel_one() racing the expiry
            wait(0);
            std::this_thread::sleep_for(us(2000));
            n = timer->cancel_one();
            break;
          case 3: // expires_after() aborts the first two; the third must succeed
            wait(0);
            wait(1);
            n = timer->expires_after(us(2000));
            wait(2);
            break;
          case 4: // destroyed with waits pending, then replaced
            wait(0);
            wait(1);
            timer = std::make_unique<Timer>(ioc);
            break;
          }
          auto fut = it->done.get_future();
          if (fut.wait_for(kMtWatchdog) != std::future_status::ready) {
            ++stats.timeouts;
            break;
          }
          // The returned count and the outcomes agree.
          int aborted_first = 0;
          for (int k = 0; k < std::min(waits, 2); ++k)
            if (it->ec[k] == kAborted)
              ++aborted_first;
          switch (mode) {
          case 0:
            if (it->ec[0])
              ++stats.inconsistent;
            break;
          case 1:
          case 2:
            if (static_cast<std::size_t>(aborted_first) != n)
              ++stats.inconsistent;
            break;
          case 3:
            if (static_cast<std::size_t>(aborted_first) != n || it->ec[2])
              ++stats.inconsistent;
            break;
          default:
            break;
          }
        }
      });
    for (auto& t : threads)
      t.join();
    const bool finished = run.join();
    CHECK_MESSAGE(finished, "the io_context had to be stopped by the watchdog");
  }
  CHECK(stats.timeouts == 0);
  CHECK(stats.inconsistent == 0);
  check_every_wait_completed_once(stats);
}

namespace {

struct countdown {
  explicit countdown(int n) : remaining(n) {}
  std::atomic<int> remaining;
  std::promise<void> done;
};

} // namespace

TEST_CASE_TEMPLATE("concurrent first use of a fresh context from many threads", Timer,
                   TIMER_TYPES) {
  const int contexts = 12 / kScale;
  const int creators = 4;
  const int per_creator = 20;
  mt_stats stats(static_cast<std::size_t>(contexts) * creators * per_creator);
  for (int round = 0; round < contexts; ++round) {
    asio::io_context ioc;
    runner_threads run(ioc, kRunners, kMtWatchdog);
    test_latch go(creators);
    std::vector<std::thread> threads;
    for (int f = 0; f < creators; ++f)
      threads.emplace_back([&] {
        // Handlers own it: safe even after a timeout.
        auto st = std::make_shared<countdown>(per_creator);
        std::vector<std::unique_ptr<Timer>> timers;
        go.arrive_and_wait(); // all threads hit the fresh context at once
        for (int i = 0; i < per_creator; ++i) {
          std::size_t id = 0;
          if (!stats.new_id(id)) {
            if (--st->remaining == 0)
              st->done.set_value();
            continue;
          }
          timers.push_back(std::make_unique<Timer>(ioc, std::chrono::milliseconds(i % 3)));
          const auto expiry = timers.back()->expiry();
          timers.back()->async_wait(
              [&stats, st, id, expiry, tok = live_token(stats)](asio::error_code ec) {
                ++stats.invocations[id];
                if (!ec) {
                  ++stats.succeeded;
                  if (sclock::now() < expiry)
                    ++stats.early;
                } else {
                  ++stats.other_errors;
                }
                if (--st->remaining == 0)
                  st->done.set_value();
              });
        }
        if (st->done.get_future().wait_for(kMtWatchdog) != std::future_status::ready)
          ++stats.timeouts;
      });
    for (auto& t : threads)
      t.join();
    const bool finished = run.join();
    CHECK(finished);
    if (stats.timeouts)
      break;
  }
  CHECK(stats.timeouts == 0);
  check_every_wait_completed_once(stats);
}

TEST_CASE_TEMPLATE("4 threads: cancelling far waits from a foreign thread lets every run() "
                   "return promptly",
                   Timer, TIMER_TYPES) {
  const int n = 64;
  mt_stats stats(n);
  sclock::time_point cancelled_at{};
  bool finished = false;
  sclock::time_point returned_at{};
  {
    asio::io_context ioc;
    std::vector<strand_type> strands;
    std::vector<std::unique_ptr<Timer>> timers;
    for (int i = 0; i < n; ++i) {
      strands.push_back(asio::make_strand(ioc));
      timers.push_back(std::make_unique<Timer>(ioc, kFar));
    }
    runner_threads run(ioc, kRunners, kMtWatchdog);
    test_latch armed(n);
    for (int i = 0; i < n; ++i)
      asio::post(strands[i], [&, i] {
        std::size_t id = 0;
        if (stats.new_id(id))
          timers[i]->async_wait(asio::bind_executor(
              strands[i], [&stats, id, tok = live_token(stats)](asio::error_code ec) {
                ++stats.invocations[id];
                if (ec == kAborted)
                  ++stats.aborted;
                else if (!ec)
                  ++stats.succeeded;
                else
                  ++stats.other_errors;
              }));
        armed.count_down();
      });
    armed.wait();
    std::this_thread::sleep_for(20ms); // the runners go idle, the driver sleeps
    // A foreign thread cancels each timer on its strand.
    std::thread canceller([&] {
      cancelled_at = sclock::now();
      for (int i = 0; i < n; ++i)
        asio::post(strands[i], [&, i] {
          if (i % 2)
            stats.expected_aborted += static_cast<long>(timers[i]->cancel());
          else
            timers[i].reset(); // destruction aborts too
        });
    });
    canceller.join();
    finished = run.join();
    returned_at = run.all_returned_at();
  }
  CHECK(finished);
  CHECK(returned_at - cancelled_at < kPrompt);
  CHECK(stats.expected_aborted == n / 2);
  CHECK(stats.aborted == n);
  check_every_wait_completed_once(stats);
}
