//
// examples/idle_heartbeat_server.cpp
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
//
// Distributed under the Boost Software License, Version 1.0. (See accompanying
// file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
//
// A TCP line server that keeps many mostly idle connections alive with one
// asio_wheel::heartbeat per connection (or, with --group, one asio_wheel::heartbeat_group for
// the whole server, each session embedding its member hook; one group per strand when
// several threads run the io_context, see --threads):
//
//   * every line received marks activity (touch(): one store, no timer operation) and is
//     echoed back, except "PONG", which only marks activity;
//   * a peer quiet for ping_after gets "PING\n" (event::ping, once per quiet spell);
//   * a peer quiet for drop_after is disconnected (event::drop).
//
// And a client that opens many connections of three kinds, round robin:
//   silent      never sends anything: pinged once, then dropped by the server;
//   responsive  answers every PING with PONG: pinged again after every quiet spell, never
//               dropped;
//   chatty      sends a line every ping_after/3: never quiet long enough to be pinged.
// It reports how many connections of each kind were pinged and dropped, and when.
//
// Usage:
//   idle_heartbeat_server [--mode both|server|client] [--host H] [--port P]
//                         [--connections N] [--ping-ms T] [--drop-ms T] [--observe-ms T]
//                         [--group] [--threads N]
//   idle_heartbeat_server --smoke [--group] [--threads N]
//
//   --mode both     (default) server and client in one process, on 127.0.0.1
//   --mode server   serve on --port (default 7777) until SIGINT/SIGTERM
//   --mode client   connect --connections to --host:--port, observe, report
//   --connections   default 10000. Each connection is a file descriptor (two in --mode both):
//                   the soft RLIMIT_NOFILE is raised to the hard limit, and N is capped, with
//                   a message, to what that allows.
//   --ping-ms, --drop-ms   the heartbeat thresholds (default 2000 and 5000)
//   --group         the server keeps its sessions in one heartbeat_group (a 56-byte hook per
//                   session, a callback per event) instead of a heartbeat each (an
//                   asynchronous operation per session, awaited by a coroutine)
//   --threads N     threads running the one io_context (default 1). With N > 1, a group
//                   must only be used on its executor (watch(), unwatch(), destruction), so
//                   --group keeps N heartbeat_groups, each on a strand of its own, and gives
//                   each accepted connection, round robin, to one strand and its group: the
//                   socket is accepted onto that strand, so the session's handlers, its
//                   group's watch()/unwatch() and the group's events all run on that one
//                   strand and never race; touch() needs no strand. Without --group, each
//                   session's socket is on a strand of its own. The acceptor and the client
//                   side have a strand each.
//   --observe-ms    how long the client keeps its connections open once all are connected
//                   (default: max(3 * drop, drop + 2000))
//   --smoke         --mode both, 200 connections (unless --connections says), ping 400 ms,
//                   drop 2000 ms, observed for 4.5 s; exits 0 if and only if every silent
//                   connection was pinged and then dropped within drop_after + 2500 ms of
//                   connecting, and every active connection survived.
//
// The memory an idle connection costs is printed at startup (and measured on the heap in
// the client and both modes).

#include <asio_wheel/cancel_after.hpp>
#include <asio_wheel/heartbeat.hpp>
#include <asio_wheel/heartbeat_group.hpp>
#include <asio_wheel/wheel_timer.hpp>

#include <asio/buffer.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/error.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/post.hpp>
#include <asio/read_until.hpp>
#include <asio/signal_set.hpp>
#include <asio/steady_timer.hpp>
#include <asio/strand.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>

#include "asio_tokens.hpp"

#include <malloc.h>
#if !defined(_WIN32)
#include <sys/resource.h>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

using namespace std::chrono_literals;
using asio::awaitable;
using asio::use_awaitable;
using asio::ip::tcp;
using example_tokens::as_tuple;
using clock_type = std::chrono::steady_clock;
using ms = std::chrono::milliseconds;
using heartbeat = asio_wheel::heartbeat;

// ---------------------------------------------------------------------------------------
// Options

enum class run_mode { both, server, client };

struct options {
  run_mode mode = run_mode::both;
  std::string host = "127.0.0.1";
  std::uint16_t port = 0; // 0: ephemeral (both), 7777 otherwise
  std::size_t connections = 10000;
  ms ping{2000};
  ms drop{5000};
  ms observe{-1};
  ms slack{2000}; // how late a drop may be and still count as "on time"
  bool smoke = false;
  bool group = false;
  unsigned threads = 1; // running the one io_context
};

[[noreturn]] void usage_error(const char* what) {
  std::fprintf(stderr,
               "idle_heartbeat_server: %s\n"
               "usage: idle_heartbeat_server [--mode both|server|client] [--host H] [--port P]\n"
               "       [--connections N] [--ping-ms T] [--drop-ms T] [--observe-ms T] [--group]\n"
               "       [--threads N] | --smoke [--group] [--threads N]\n",
               what);
  std::exit(2);
}

options parse(int argc, char* argv[]) {
  options o;
  bool port_given = false;
  bool connections_given = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    auto value = [&]() -> std::string_view {
      if (i + 1 >= argc)
        usage_error("missing value");
      return argv[++i];
    };
    auto number = [&]() -> long long {
      const std::string v(value());
      char* end = nullptr;
      const long long n = std::strtoll(v.c_str(), &end, 10);
      if (end == v.c_str() || *end != '\0' || n < 0)
        usage_error("not a non-negative number");
      return n;
    };
    if (a == "--smoke") {
      o.smoke = true;
    } else if (a == "--group") {
      o.group = true;
    } else if (a == "--mode") {
      const std::string_view m = value();
      if (m == "both")
        o.mode = run_mode::both;
      else if (m == "server")
        o.mode = run_mode::server;
      else if (m == "client")
        o.mode = run_mode::client;
      else
        usage_error("unknown mode");
    } else if (a == "--host") {
      o.host = std::string(value());
    } else if (a == "--port") {
      o.port = static_cast<std::uint16_t>(number());
      port_given = true;
    } else if (a == "--connections") {
      o.connections = static_cast<std::size_t>(number());
      connections_given = true;
    } else if (a == "--ping-ms") {
      o.ping = ms(number());
    } else if (a == "--drop-ms") {
      o.drop = ms(number());
    } else if (a == "--observe-ms") {
      o.observe = ms(number());
    } else if (a == "--threads") {
      const long long n = number();
      if (n < 1 || n > 256)
        usage_error("--threads: need 1 to 256 threads");
      o.threads = static_cast<unsigned>(n);
    } else {
      usage_error("unknown argument");
    }
  }
  if (o.smoke) {
    // Thresholds seconds apart: a smoke run is a test on a loaded CI machine under a
    // sanitizer, which may stall the process for a second or two between a ping and its
    // answer, or between a silent connection's ping and its drop.
    o.mode = run_mode::both;
    if (!connections_given)
      o.connections = 200;
    o.ping = 400ms;
    o.drop = 2000ms;
    o.slack = 2500ms;
    if (o.observe < ms::zero())
      o.observe = o.drop + o.slack;
    o.port = 0;
  } else if (!port_given && o.mode != run_mode::both) {
    o.port = 7777;
  }
  if (o.ping <= ms::zero() || o.drop <= o.ping)
    usage_error("need 0 < ping < drop");
  if (o.observe < ms::zero())
    o.observe = std::max(3 * o.drop, o.drop + o.slack);
  return o;
}

// Raises the soft fd limit to the hard one and caps the number of connections to fit. Windows
// has no such limit on sockets (they are kernel handles, bounded only by memory).
void fit_fd_limit([[maybe_unused]] options& o) {
#if !defined(_WIN32)
  if (o.mode == run_mode::server)
    return;
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0)
    return;
  if (rl.rlim_cur < rl.rlim_max) {
    rlimit raised = rl;
    raised.rlim_cur = rl.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0)
      rl = raised;
  }
  const std::size_t per_connection = o.mode == run_mode::both ? 2 : 1;
  const std::size_t reserve = 64; // stdio, the acceptor, the reactor, ...
  const std::size_t limit = rl.rlim_cur == RLIM_INFINITY ? static_cast<std::size_t>(-1)
                                                         : static_cast<std::size_t>(rl.rlim_cur);
  const std::size_t fit = limit > reserve ? (limit - reserve) / per_connection : 0;
  if (o.connections > fit) {
    std::printf("note: capping --connections from %zu to %zu: RLIMIT_NOFILE is %zu (soft, raised "
                "to the hard limit), and each connection takes %zu descriptor%s in this mode\n",
                o.connections, fit, limit, per_connection, per_connection == 1 ? "" : "s");
    o.connections = fit;
  }
#endif
}

std::size_t heap_in_use() {
#if defined(_WIN32)
  // The C runtime's heap, block by block (mingw-w64's msvcrt has no mallinfo).
  std::size_t used = 0;
  _HEAPINFO entry{};
  while (::_heapwalk(&entry) == _HEAPOK)
    if (entry._useflag == _USEDENTRY)
      used += entry._size;
  return used;
#else
  const struct mallinfo2 mi = ::mallinfo2();
  return mi.uordblks + mi.hblkhd;
#endif
}

double to_ms(clock_type::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

clock_type::time_point t_start;

double now_ms() {
  return to_ms(clock_type::now() - t_start);
}

struct summary {
  std::vector<double> v;
  void add(double x) { v.push_back(x); }
  void print(const char* label) {
    if (v.empty()) {
      std::printf("      %-28s -\n", label);
      return;
    }
    std::sort(v.begin(), v.end());
    std::printf("      %-28s min %8.1f  median %8.1f  max %8.1f ms\n", label, v.front(),
                v[v.size() / 2], v.back());
  }
};

// ---------------------------------------------------------------------------------------
// Server

// Updated by the sessions, which run on several strands at once when several threads run the
// context: the counts are atomic (relaxed: each is read on its own, and orders nothing else),
// and the drop times, one entry per dropped session, are taken under a lock.
struct server_stats {
  std::atomic<std::size_t> accepted{0};
  std::atomic<std::size_t> open{0};
  std::atomic<std::size_t> pings_sent{0};
  std::atomic<std::size_t> drops{0};
  std::atomic<std::size_t> lines_echoed{0};
  std::atomic<std::size_t> pongs{0};

  static void count(std::atomic<std::size_t>& counter) noexcept {
    counter.fetch_add(1, std::memory_order_relaxed);
  }

  void dropped_after_quiet(double quiet_ms) {
    count(drops);
    std::lock_guard lock(idle_at_drop_mutex);
    idle_at_drop.add(quiet_ms);
  }

  std::mutex idle_at_drop_mutex;
  summary idle_at_drop; // how long the peer had been quiet when dropped; under the mutex
};

using heartbeat_group = asio_wheel::heartbeat_group;

// Where the sessions go. With one thread, everything runs on the context's executor. With
// several, a heartbeat_group must still be used on its executor only (watch(), unwatch(),
// its destruction; its events are delivered there), so the server keeps one group per
// strand: a shard. An accepted connection is given to a shard, round robin, and its socket
// is accepted onto the shard's strand; the session then runs all its handlers there, so it,
// its group and the other sessions of its group never race, while the shards run in
// parallel. (member::touch() is safe from any thread, but here it runs on the strand anyway.)
struct server_state {
  server_state(asio::io_context& context, server_stats& counters, const options& opt)
      : ctx(context), stats(counters),
        threads(opt.threads), hb_options{.ping_after = opt.ping, .drop_after = opt.drop} {
    if (!opt.group)
      return;
    for (unsigned i = 0; i < threads; ++i) {
      const asio::any_io_executor ex = fresh_executor();
      groups.push_back(std::make_unique<heartbeat_group>(
          ex, heartbeat_group::options{.ping_after = opt.ping, .drop_after = opt.drop},
          &on_group_event));
    }
  }

  // The executor of a new session: its group's (--group), else a strand of its own when
  // several threads run the context (its handlers never run concurrently).
  asio::any_io_executor session_executor(std::size_t shard) {
    if (!groups.empty())
      return groups[shard]->get_executor();
    return fresh_executor();
  }

  asio::any_io_executor fresh_executor() {
    if (threads > 1)
      return asio::make_strand(ctx);
    return ctx.get_executor();
  }

  // The shard for the next connection (round robin); only the accept loop calls it.
  std::size_t next_shard() noexcept {
    const std::size_t shard = next;
    next = groups.empty() ? 0 : (next + 1) % groups.size();
    return shard;
  }

  static void on_group_event(heartbeat_group::member& m, heartbeat_group::event ev);

  asio::io_context& ctx;
  server_stats& stats;
  const unsigned threads;
  const heartbeat::options hb_options;
  // --group: one per shard, each on its strand (the context's executor with one thread).
  // Destroyed before the context (their waits are on it) and, by the program, after the
  // threads have returned from run(); each unwatches the sessions it still watches, which
  // the context's pending handlers may own and destroy later.
  std::vector<std::unique_ptr<heartbeat_group>> groups;
  std::size_t next = 0;
};

// The two ways to keep a session alive; a session derives from one of them.
//   own_heartbeat  an asio_wheel::heartbeat: an asynchronous operation per session, awaited
//                  by a coroutine of its own;
//   group_member   the session is a member of one of the server's heartbeat_groups (its
//                  shard's), which calls back.
struct own_heartbeat {
  own_heartbeat(tcp::socket& sock, const server_state& server, heartbeat_group*)
      : hb(sock.get_executor(), server.hb_options) {}
  void touch() noexcept { hb.touch(); }
  clock_type::time_point last_activity() const noexcept { return hb.last_activity(); }
  heartbeat hb;
};

struct group_member : heartbeat_group::member {
  group_member(tcp::socket&, const server_state&, heartbeat_group* group) noexcept
      : my_group(*group) {}
  heartbeat_group& my_group; // on the executor of the session's socket
};

template <class Keepalive>
class server_session : public std::enable_shared_from_this<server_session<Keepalive>>,
                       public Keepalive {
  static constexpr bool grouped = std::is_same_v<Keepalive, group_member>;

public:
  // The socket's executor is the session's: a strand of its own or its group's when several
  // threads run the context. The stats outlive the context; the server_state may not (a
  // pending handler may own a session when the context is destroyed).
  server_session(tcp::socket sock, const server_state& server, heartbeat_group* group)
      : Keepalive(sock, server, group), sock_(std::move(sock)), stats_(server.stats) {
    server_stats::count(stats_.open);
  }

  ~server_session() { stats_.open.fetch_sub(1, std::memory_order_relaxed); }

  // Called by the accept loop, on the acceptor's executor: everything else happens on the
  // session's.
  void start() {
    const auto ex = sock_.get_executor();
    asio::co_spawn(ex, read_loop(this->shared_from_this()), asio::detached);
    if constexpr (!grouped)
      asio::co_spawn(ex, keepalive_loop(this->shared_from_this()), asio::detached);
  }

  void close() {
    if (closed_)
      return;
    closed_ = true;
    asio::error_code ignored;
    sock_.close(ignored);
    if constexpr (grouped) {
      if (this->is_watched())
        this->my_group.unwatch(*this);
    } else {
      this->hb.cancel();
    }
  }

  // A heartbeat_group's event handler (--group), on the group's executor: the session's.
  static void on_group_event(heartbeat_group::member& m, heartbeat_group::event ev) {
    auto& self = static_cast<server_session&>(static_cast<group_member&>(m));
    if (ev == heartbeat_group::event::drop)
      self.on_drop();
    else
      self.on_ping();
  }

private:
  awaitable<void> read_loop([[maybe_unused]] std::shared_ptr<server_session> self) {
    // On the session's executor, which is its group's: watch() must not run on the
    // acceptor's, where start() is called.
    if constexpr (grouped)
      this->my_group.watch(*this);
    for (;;) {
      auto [ec, n] = co_await asio::async_read_until(sock_, asio::dynamic_buffer(in_, 1024), '\n',
                                                     as_tuple(use_awaitable));
      if (ec)
        break;
      this->touch(); // any input is activity: one store
      const std::string_view line(in_.data(), n);
      if (line == "PONG\n") {
        server_stats::count(stats_.pongs);
      } else {
        server_stats::count(stats_.lines_echoed);
        send(std::string(line));
      }
      in_.erase(0, n);
    }
    close();
  }

  awaitable<void> keepalive_loop([[maybe_unused]] std::shared_ptr<server_session> self) {
    for (;;) {
      auto [ec, ev] = co_await this->hb.async_next(as_tuple(use_awaitable));
      if (ec)
        break; // cancelled: the session is closing
      if (ev == heartbeat::event::drop) {
        on_drop();
        break;
      }
      on_ping();
    }
  }

  void on_ping() {
    server_stats::count(stats_.pings_sent);
    send("PING\n");
  }

  void on_drop() {
    stats_.dropped_after_quiet(to_ms(clock_type::now() - this->last_activity()));
    close();
  }

  // Writes are queued so that an echo and a ping never interleave.
  void send(std::string msg) {
    if (closed_)
      return;
    out_.push_back(std::move(msg));
    if (!writing_)
      write_next();
  }

  void write_next() {
    if (out_.empty() || closed_) {
      writing_ = false;
      return;
    }
    writing_ = true;
    asio::async_write(sock_, asio::buffer(out_.front()),
                      [self = this->shared_from_this()](asio::error_code ec, std::size_t) {
                        self->out_.pop_front();
                        if (ec) {
                          self->close();
                          self->writing_ = false;
                          return;
                        }
                        self->write_next();
                      });
  }

  tcp::socket sock_;
  server_stats& stats_;
  std::string in_;
  std::deque<std::string> out_;
  bool writing_ = false;
  bool closed_ = false;
};

using grouped_session = server_session<group_member>;
using heartbeat_session = server_session<own_heartbeat>;

void server_state::on_group_event(heartbeat_group::member& m, heartbeat_group::event ev) {
  grouped_session::on_group_event(m, ev);
}

// On the acceptor's executor (a strand when several threads run the context: it is closed
// from the client's).
awaitable<void> accept_loop(tcp::acceptor& acceptor, server_state& server) {
  for (;;) {
    const std::size_t shard = server.next_shard();
    // The new socket is on the session's executor (its shard's strand), not the acceptor's.
    auto [ec, sock] =
        co_await acceptor.async_accept(server.session_executor(shard), as_tuple(use_awaitable));
    if (ec == asio::error::operation_aborted || !acceptor.is_open())
      co_return;
    if (ec) {
      // Out of descriptors, typically: back off briefly rather than spin.
      std::fprintf(stderr, "accept: %s\n", ec.message().c_str());
      asio_wheel::wheel_timer pause(co_await asio::this_coro::executor, 50ms);
      co_await pause.async_wait(as_tuple(use_awaitable));
      continue;
    }
    server_stats::count(server.stats.accepted);
    if (!server.groups.empty())
      std::make_shared<grouped_session>(std::move(sock), server, server.groups[shard].get())
          ->start();
    else
      std::make_shared<heartbeat_session>(std::move(sock), server, nullptr)->start();
  }
}

// Once the threads have returned from run(): nothing else reads or writes the stats then,
// nor the groups (whose statistics() belong to their executors).
void print_server_stats(server_stats& s, const server_state& server) {
  std::printf("server: %zu accepted, %zu pings sent, %zu dropped, %zu lines echoed, %zu pongs\n",
              s.accepted.load(), s.pings_sent.load(), s.drops.load(), s.lines_echoed.load(),
              s.pongs.load());
  s.idle_at_drop.print("quiet for, when dropped");
  if (server.groups.size() > 1)
    for (std::size_t i = 0; i < server.groups.size(); ++i) {
      const auto st = server.groups[i]->statistics();
      std::printf("      group %zu (its own strand): %llu pings, %llu drops, %zu still watched\n",
                  i, static_cast<unsigned long long>(st.pings),
                  static_cast<unsigned long long>(st.drops), st.members);
    }
}

// ---------------------------------------------------------------------------------------
// Client

enum class kind { silent, responsive, chatty };
constexpr const char* kind_names[] = {"silent", "responsive", "chatty"};

struct client_stats;

class client_conn : public std::enable_shared_from_this<client_conn> {
public:
  // The client's executor: a strand when several threads run the context, so that the
  // connections and client_stats, which they all update, never race.
  client_conn(const asio::any_io_executor& ex, kind k) : kind_(k), sock_(ex), chat_timer_(ex) {}

  awaitable<void> run(std::shared_ptr<client_conn> self, tcp::endpoint server, client_stats& stats);

  void close() {
    if (closed_)
      return;
    closed_ = true;
    asio::error_code ignored;
    sock_.close(ignored);
    chat_timer_.cancel();
  }

  kind kind_;
  clock_type::time_point connect_started{}, connected_at{}, first_ping_at{}, closed_at{};
  int pings = 0;
  int echoes = 0;
  bool connected = false;
  bool dropped = false; // closed by the server (eof) while the client was observing

private:
  awaitable<void> chat_loop([[maybe_unused]] std::shared_ptr<client_conn> self, ms interval) {
    for (int i = 0; !closed_; ++i) {
      chat_timer_.expires_after(interval);
      auto [ec] = co_await chat_timer_.async_wait(as_tuple(use_awaitable));
      if (ec || closed_)
        break;
      send("hello " + std::to_string(i) + "\n");
    }
  }

  void send(std::string msg) {
    if (closed_)
      return;
    out_.push_back(std::move(msg));
    if (!writing_)
      write_next();
  }

  void write_next() {
    if (out_.empty() || closed_) {
      writing_ = false;
      return;
    }
    writing_ = true;
    asio::async_write(sock_, asio::buffer(out_.front()),
                      [self = shared_from_this()](asio::error_code ec, std::size_t) {
                        self->out_.pop_front();
                        if (ec) {
                          self->writing_ = false;
                          return; // the reader sees the error too
                        }
                        self->write_next();
                      });
  }

  tcp::socket sock_;
  asio_wheel::wheel_timer chat_timer_;
  std::string in_;
  std::deque<std::string> out_;
  bool writing_ = false;
  bool closed_ = false;
};

struct client_stats {
  asio::any_io_executor ex; // the client's: see client_conn
  const options& opt;
  std::vector<std::shared_ptr<client_conn>> conns;
  std::size_t launched = 0;
  std::size_t in_flight = 0;
  std::size_t done_connecting = 0;
  std::size_t connect_failures = 0;
  bool stopping = false;
  clock_type::time_point all_connected_at{};
  std::size_t heap_before = 0;
  double heap_per_pair = 0;
  std::function<void()> on_all_connected;

  static constexpr std::size_t max_in_flight = 256; // connects pending at once
  tcp::endpoint server;

  void launch_more() {
    while (in_flight < max_in_flight && launched < conns.size()) {
      auto& c = conns[launched++];
      ++in_flight;
      asio::co_spawn(ex, c->run(c, server, *this), asio::detached);
    }
  }

  void connect_done(bool ok) {
    --in_flight;
    ++done_connecting;
    if (!ok)
      ++connect_failures;
    launch_more();
    if (done_connecting == conns.size()) {
      all_connected_at = clock_type::now();
      if (on_all_connected)
        on_all_connected();
    }
  }
};

awaitable<void> client_conn::run(std::shared_ptr<client_conn> self, tcp::endpoint server,
                                 client_stats& stats) {
  // Taken before connecting: the server's heartbeat for this connection starts later, so a
  // drop measured from here is never shorter than the server's idle time.
  connect_started = clock_type::now();
  auto [cec] =
      co_await sock_.async_connect(server, asio_wheel::cancel_after(10s, as_tuple(use_awaitable)));
  connected = !cec;
  connected_at = clock_type::now();
  stats.connect_done(connected);
  if (!connected) {
    close();
    co_return;
  }
  if (kind_ == kind::chatty)
    asio::co_spawn(sock_.get_executor(), chat_loop(self, stats.opt.ping / 3), asio::detached);
  for (;;) {
    auto [ec, n] = co_await asio::async_read_until(sock_, asio::dynamic_buffer(in_, 1024), '\n',
                                                   as_tuple(use_awaitable));
    if (ec) {
      if (!stats.stopping && !closed_) {
        dropped = true; // the server closed it
        closed_at = clock_type::now();
      }
      break;
    }
    const std::string_view line(in_.data(), n);
    if (line == "PING\n") {
      if (pings++ == 0)
        first_ping_at = clock_type::now();
      if (kind_ == kind::responsive)
        send("PONG\n");
    } else {
      ++echoes;
    }
    in_.erase(0, n);
  }
  close();
}

// Prints the report; returns true if the outcome is the expected one.
bool report(client_stats& cs) {
  const options& o = cs.opt;
  bool ok = cs.connect_failures == 0;
  std::printf("client: %zu connections (%zu failed to connect), all up %.0f ms after start\n",
              cs.conns.size(), cs.connect_failures, to_ms(cs.all_connected_at - t_start));
  if (cs.heap_per_pair > 0)
    std::printf("client: heap per connection (%s, with pending operations and coroutine frames, "
                "measured once all were up and idle): %.0f bytes\n",
                o.mode == run_mode::both ? "server session + client side" : "client side",
                cs.heap_per_pair);
  for (int k = 0; k < 3; ++k) {
    std::size_t count = 0, pinged = 0, pings = 0, dropped = 0, early = 0, late = 0, echoed = 0;
    summary first_ping, drop_after_connect;
    for (const auto& c : cs.conns) {
      if (static_cast<int>(c->kind_) != k || !c->connected)
        continue;
      ++count;
      pings += static_cast<std::size_t>(c->pings);
      echoed += c->echoes > 0 ? 1 : 0;
      if (c->pings > 0) {
        ++pinged;
        first_ping.add(to_ms(c->first_ping_at - c->connect_started));
      }
      if (c->dropped) {
        ++dropped;
        const auto after = c->closed_at - c->connect_started;
        drop_after_connect.add(to_ms(after));
        if (after < o.drop)
          ++early;
        if (after > o.drop + o.slack)
          ++late;
      }
    }
    std::printf("  %-10s %5zu connections: %5zu pinged (%zu pings), %5zu dropped", kind_names[k],
                count, pinged, pings, dropped);
    if (k == static_cast<int>(kind::chatty))
      std::printf(", %zu got echoes", echoed);
    std::printf("\n");
    first_ping.print("first ping after connecting");
    drop_after_connect.print("dropped after connecting");
    if (k == static_cast<int>(kind::silent)) {
      // Every silent connection: pinged, then dropped within drop_after + slack.
      if (pinged != count || dropped != count || late != 0)
        ok = false;
      if (early != 0)
        std::printf("  warning: %zu silent connection%s dropped before drop_after (%lld ms)\n",
                    early, early == 1 ? "" : "s", static_cast<long long>(o.drop.count()));
      std::printf("  silent: %zu of %zu dropped within drop_after + %lld ms\n", dropped - late,
                  count, static_cast<long long>(o.slack.count()));
    } else {
      if (dropped != 0)
        ok = false; // an active connection must survive
      if (k == static_cast<int>(kind::responsive) && pinged != count)
        ok = false; // quiet between pings: each must have been pinged
    }
  }
  return ok;
}

// ---------------------------------------------------------------------------------------

void print_memory_notes(bool group) {
  if (group) {
    std::printf(
        "memory per idle connection, server side (this build, --group):\n"
        "  sizeof(heartbeat_group::member) = %3zu bytes  the keep-alive state: a hook in the\n"
        "                                              group's wheel, the activity mark, the\n"
        "                                              spell last pinged, the group\n"
        "  sizeof(asio::ip::tcp::socket)   = %3zu bytes\n"
        "  sizeof(server_session)          = %3zu bytes  socket + member + buffers + queue\n"
        "  On the heap, per connection: the session, a coroutine frame for the reader and one\n"
        "  pending read. The group has one wait for all its sessions (one group per strand\n"
        "  with --threads N).\n",
        sizeof(heartbeat_group::member), sizeof(tcp::socket), sizeof(grouped_session));
    return;
  }
  std::printf(
      "memory per idle connection, server side (this build):\n"
      "  sizeof(asio_wheel::heartbeat)   = %3zu bytes  the keep-alive state: a wheel timer\n"
      "                                              (executor, expiry, wheel entry, room for\n"
      "                                              its wait), the activity mark, the two\n"
      "                                              thresholds\n"
      "  sizeof(asio::ip::tcp::socket)   = %3zu bytes\n"
      "  sizeof(server_session)          = %3zu bytes  socket + heartbeat + buffers + queue\n"
      "  (for comparison: sizeof(asio::steady_timer) = %zu bytes)\n"
      "  On the heap, per connection: the session, a coroutine frame for the reader and one for\n"
      "  the keep-alive loop, and one pending read. The pending wheel wait of a coroutine\n"
      "  lives in the heartbeat, however much traffic there is: touch() is a store, it\n"
      "  allocates nothing and arms nothing. (--group: a 56-byte member hook instead.)\n",
      sizeof(heartbeat), sizeof(tcp::socket), sizeof(heartbeat_session),
      sizeof(asio::steady_timer));
}

// Runs the context on `threads` threads, this one included, until it runs out of work or is
// stopped. A handler that throws ends the program, as it does with one thread.
void run_on_threads(asio::io_context& ctx, unsigned threads) {
  std::vector<std::thread> others;
  others.reserve(threads - 1);
  for (unsigned i = 1; i < threads; ++i)
    others.emplace_back([&ctx] { ctx.run(); });
  ctx.run();
  for (auto& t : others)
    t.join();
}

} // namespace

int main(int argc, char* argv[]) {
  options opt = parse(argc, argv);
  fit_fd_limit(opt);
  t_start = clock_type::now();
  print_memory_notes(opt.group);

  server_stats sstats; // outlives the context, whose pending handlers may own sessions
  asio::io_context ctx(static_cast<int>(opt.threads));
  // Its groups are destroyed before the context (their waits are on it), once the threads
  // have returned; see server_state.
  server_state server(ctx, sstats, opt);
  // Everything that is not a server session: the acceptor, and the client and its timers,
  // each on an executor of its own (a strand when several threads run the context), so that
  // closing the acceptor from the client's side is posted to the acceptor's.
  const asio::any_io_executor accept_ex = server.fresh_executor();
  const asio::any_io_executor client_ex = server.fresh_executor();
  std::unique_ptr<tcp::acceptor> acceptor;
  tcp::endpoint server_endpoint;
  const auto close_acceptor = [&] {
    if (acceptor)
      asio::post(accept_ex, [&] {
        asio::error_code ignored;
        acceptor->close(ignored);
      });
  };

  try {
    if (opt.mode != run_mode::client) {
      const auto address = opt.mode == run_mode::both
                               ? asio::ip::address(asio::ip::address_v4::loopback())
                               : asio::ip::make_address(opt.host);
      acceptor = std::make_unique<tcp::acceptor>(accept_ex, tcp::endpoint(address, opt.port));
      server_endpoint = acceptor->local_endpoint();
      std::printf(
          "server: listening on %s:%u (ping after %lld ms, drop after %lld ms; %u "
          "thread%s; %s)\n",
          server_endpoint.address().to_string().c_str(),
          static_cast<unsigned>(server_endpoint.port()), static_cast<long long>(opt.ping.count()),
          static_cast<long long>(opt.drop.count()), opt.threads, opt.threads == 1 ? "" : "s",
          !opt.group         ? (opt.threads == 1 ? "a heartbeat per session"
                                                 : "a heartbeat per session, a strand each")
          : opt.threads == 1 ? "one heartbeat_group"
                             : "a heartbeat_group per strand, sessions round robin");
      asio::co_spawn(accept_ex, accept_loop(*acceptor, server), asio::detached);
    } else {
      server_endpoint = tcp::endpoint(asio::ip::make_address(opt.host), opt.port);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "idle_heartbeat_server: %s\n", e.what());
    return 1;
  }

  if (opt.mode == run_mode::server) {
    asio::signal_set signals(accept_ex, SIGINT, SIGTERM); // on the acceptor's executor
    signals.async_wait([&](asio::error_code, int) {
      acceptor->close();
      ctx.stop();
    });
    const std::size_t heap_at_start = heap_in_use();
    asio::steady_timer stats_timer(ctx);
    std::function<void()> tick = [&] {
      stats_timer.expires_after(5s);
      stats_timer.async_wait([&](asio::error_code ec) {
        if (ec)
          return;
        const std::size_t heap_now = heap_in_use();
        const std::size_t open = sstats.open.load(std::memory_order_relaxed);
        std::printf(
            "[%8.0f ms] server: %zu open, %zu accepted, %zu pings, %zu drops; heap %+.0f "
            "bytes per open session\n",
            now_ms(), open, sstats.accepted.load(), sstats.pings_sent.load(), sstats.drops.load(),
            open == 0 ? 0.0
                      : (static_cast<double>(heap_now) - static_cast<double>(heap_at_start)) /
                            static_cast<double>(open));
        tick();
      });
    };
    tick();
    run_on_threads(ctx, opt.threads);
    print_server_stats(sstats, server);
    return 0;
  }

  // Client (and, in --mode both, the server on the same io_context).
  client_stats cstats{client_ex, opt, {}, 0, 0, 0, 0, false, {}, 0, 0, {}, server_endpoint};
  cstats.conns.reserve(opt.connections);
  for (std::size_t i = 0; i < opt.connections; ++i)
    cstats.conns.push_back(std::make_shared<client_conn>(client_ex, static_cast<kind>(i % 3)));
  std::printf("client: opening %zu connections to %s:%u (silent / responsive / chatty, round "
              "robin)\n",
              opt.connections, server_endpoint.address().to_string().c_str(),
              static_cast<unsigned>(server_endpoint.port()));

  // The client's timers and handlers below all run on client_ex.
  asio_wheel::wheel_timer observe(client_ex);
  bool observed = false;
  auto stop_all = [&] {
    cstats.stopping = true;
    for (auto& c : cstats.conns)
      c->close();
    close_acceptor(); // the server sessions end when they see their peers go
  };
  // The heap is measured half a ping period after the last connection is up: every session
  // has started and is idle (waiting for input and for its heartbeat), none has been pinged.
  asio_wheel::wheel_timer measure(client_ex);
  cstats.on_all_connected = [&] {
    measure.expires_after(opt.ping / 2);
    measure.async_wait([&](asio::error_code ec) {
      const std::size_t heap_now = heap_in_use();
      if (!ec && !cstats.conns.empty() && heap_now > cstats.heap_before)
        cstats.heap_per_pair = static_cast<double>(heap_now - cstats.heap_before) /
                               static_cast<double>(cstats.conns.size());
    });
    std::printf("[%8.0f ms] client: all %zu connections up; observing for %lld ms\n", now_ms(),
                cstats.conns.size(), static_cast<long long>(opt.observe.count()));
    observe.expires_after(opt.observe);
    observe.async_wait([&](asio::error_code ec) {
      if (ec)
        return;
      observed = true;
      std::printf("[%8.0f ms] client: observation over, closing everything\n", now_ms());
      stop_all();
    });
  };
  // A watchdog: a run that hangs fails rather than blocks.
  asio::steady_timer watchdog(client_ex, opt.observe + 120s);
  bool watchdog_fired = false;
  watchdog.async_wait([&](asio::error_code ec) {
    if (!ec) {
      std::fprintf(stderr, "idle_heartbeat_server: watchdog: giving up\n");
      watchdog_fired = true;
      stop_all();
      ctx.stop();
    }
  });

  cstats.heap_before = heap_in_use();
  if (opt.connections == 0)
    cstats.on_all_connected();
  cstats.launch_more();

  // Progress while connecting large numbers.
  asio::steady_timer progress(client_ex);
  std::function<void()> progress_tick = [&] {
    progress.expires_after(1s);
    progress.async_wait([&](asio::error_code ec) {
      if (ec || cstats.stopping)
        return;
      std::printf("[%8.0f ms] client: %zu of %zu connected; server: %zu open, %zu pings, %zu "
                  "drops\n",
                  now_ms(), cstats.done_connecting, cstats.conns.size(), sstats.open.load(),
                  sstats.pings_sent.load(), sstats.drops.load());
      progress_tick();
    });
  };
  if (!opt.smoke)
    progress_tick();

  // Stop the watchdog and the progress ticker once everything else has finished: the
  // observation is over and (with a server here) every session has closed.
  asio::co_spawn(
      client_ex,
      [&]() -> awaitable<void> {
        asio::steady_timer poll(co_await asio::this_coro::executor);
        while (!watchdog_fired && !(observed && sstats.open.load(std::memory_order_relaxed) == 0)) {
          poll.expires_after(20ms);
          co_await poll.async_wait(as_tuple(use_awaitable));
        }
        watchdog.cancel();
        progress.cancel();
      },
      asio::detached);

  run_on_threads(ctx, opt.threads);

  const bool ok = report(cstats) && observed && !watchdog_fired;
  if (opt.mode == run_mode::both)
    print_server_stats(sstats, server);
  if (!ok) {
    std::fprintf(stderr, "idle_heartbeat_server: FAILED: unexpected outcome (see above)\n");
    return 1;
  }
  std::puts("all silent connections dropped on time, all active ones survived");
  return 0;
}
