#!/usr/bin/env python3
#
# Distributed under the Boost Software License, Version 1.0. (See accompanying
# file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
#
"""The report of scripts/bench: benchmarks/RESULTS.md and the charts, from benchmarks/results/.

Usage: scripts/bench_report.py [ROOT]

ROOT is the repository (default: the one holding this script). Reads what scripts/bench left
in ROOT/benchmarks/results/ (meta.txt and status.txt, the JSON of every program, the CDF data,
callgrind.txt), writes the wheel_timer_bench_<op>.dat tables and the PNG charts there (gnuplot,
benchmarks/plot/*.gnuplot), and ROOT/benchmarks/RESULTS.md. Every figure on the page comes
from those files; what is missing is reported as not run. Exit status 1 if a file was
unreadable or a chart could not be drawn (the page says which), else 0. Standard library only.
"""

import itertools
import json
import math
import os
import platform
import re
import subprocess
import sys


class Results:
    """One run's benchmarks/results/, and the problems met reading it or drawing from it (the
    last lines of the report)."""

    def __init__(self, root):
        self.dir = os.path.join(root, "benchmarks", "results")
        self.plot_dir = os.path.join(root, "benchmarks", "plot")
        self.problems = []
        self.meta = {}
        meta_path = self.path("meta.txt")
        if os.path.exists(meta_path):
            with open(meta_path) as f:
                for line in f:
                    if "\t" in line:
                        key, value = line.rstrip("\n").split("\t", 1)
                        self.meta[key] = value
        self.quick = self.meta.get("quick") == "1"
        self.status = []
        status_path = self.path("status.txt")
        if os.path.exists(status_path):
            with open(status_path) as f:
                self.status = [l.rstrip("\n").split("\t", 1) for l in f if "\t" in l]

    def path(self, name):
        return os.path.join(self.dir, name)

    def gbench(self):
        """The Google Benchmark programs that ran, as scripts/bench listed them."""
        return self.meta.get("gbench", "").split()

    def load(self, name):
        path = self.path(name)
        if not os.path.exists(path):
            return None
        try:
            with open(path) as f:
                return json.load(f)
        except (OSError, ValueError) as e:
            self.problems.append(f"results/{name} is unreadable ({e}): left out")
            return None

    def gnuplot(self, script, **params):
        args = ["gnuplot"]
        for k, v in params.items():
            args += ["-e", f"{k}='{v}'" if isinstance(v, str) else f"{k}={v}"]
        args.append(os.path.join(self.plot_dir, script))
        try:
            r = subprocess.run(args, capture_output=True, text=True)
        except OSError as e:  # not installed: --report-only installs nothing
            self.problems.append(f"gnuplot {script}: not run ({e.strerror}): the chart is the previous one")
            return False
        if r.returncode != 0:
            self.problems.append(f"gnuplot {script}: {r.stderr.strip()[:500]}")
            return False
        return True


# ---- formatting --------------------------------------------------------------------------
def sh(*cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True).stdout
    except OSError:
        return ""


def num(v, digits=0):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if abs(v) >= 1000 and digits == 0:
        return f"{v:,.0f}"
    return f"{v:,.{digits}f}"


def ms(us):
    return "-" if us is None else (f"{us / 1000:.0f} ms" if abs(us) >= 100000 else f"{us / 1000:.2f} ms")


def compact(v):
    a = abs(v)
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if a >= div * 10:
            return f"{v / div:.1f}{suffix}"
    return f"{v:.3g}" if a < 100 else f"{v:.0f}"


def ratio(s, w, name="wheel"):
    if s is None or w is None:
        return ""
    if w == 0 and s == 0:
        return "="
    if w == 0:
        return f"{name}: 0"
    if w < 0 or s < 0:
        return "n/a"
    q = s / w
    return f"**{q:.0f}x**" if q >= 100 else f"**{q:.1f}x**" if q >= 10 else f"**{q:.2f}x**"


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return lines


# ---- machine -----------------------------------------------------------------------------
def gbench_context(r):
    """The "context" of the first Google Benchmark JSON that loads (CPU caches, build type)."""
    for name in r.gbench():
        j = r.load(f"{name}.json")
        if j:
            return j.get("context")
    return None


def machine_section(r, cfg, gb_ctx):
    meta, quick = r.meta, r.quick
    lscpu = sh("lscpu")

    def lscpu_field(name):
        m = re.search(rf"^{name}:\s*(.+)$", lscpu, re.M)
        return m.group(1).strip() if m else "unknown"

    caches = ""
    if gb_ctx and gb_ctx.get("caches"):
        seen = []
        for c in gb_ctx["caches"]:
            label = f"L{c['level']}{'d' if c['type'] == 'Data' else 'i' if c['type'] == 'Instruction' else ''} {c['size'] // 1024} KiB"
            if label not in seen:
                seen.append(label)
        caches = ", ".join(seen)

    threads_per_core = lscpu_field(r"Thread\(s\) per core")
    now = meta.get("date", "unknown")
    hyper = lscpu_field("Hypervisor vendor")
    machine_rows = [
        ["CPU", f"{lscpu_field('Model name')} ({lscpu_field('Architecture')}{', ' + hyper + ' guest' if hyper != 'unknown' else ''})"],
        ["cores", f"{os.cpu_count()} ({threads_per_core} thread(s) per core)"],
        ["caches", caches or "unknown"],
        ["memory", f"{int(os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30)} GiB"],
        ["kernel", f"{platform.system()} {platform.release()}"],
        ["compiler", f"{meta.get('compiler', 'unknown')}, Release flags `{meta.get('cxx_flags', '').strip()}`"],
        ["Asio", cfg.get("asio_version", "unknown")],
        ["Google Benchmark", meta.get("benchmark_version", "unknown")],
        ["asio-wheel", meta.get("git", "unknown")],
        ["date (start of the run)", now],
        ["load average (1, 5, 15 min)", f"{meta.get('load_start')} at the start, {meta.get('load_end')} at the end"],
        ["duration", f"{int(meta.get('elapsed', '0')) // 60} min {int(meta.get('elapsed', '0')) % 60} s" + (" (`--quick`)" if quick else "")],
    ]

    out = ["# Benchmark results", "",
           "Generated by `scripts/bench`" + (" --quick" if quick else "") +
           ": every figure on this page comes from that one run, on the machine below, but the "
           "build cost section, which says its own run. Raw data "
           "(Google Benchmark JSON, scenario JSON, CDF data, callgrind counts) is in "
           "[`results/`](results/). Regenerate with `scripts/bench`.", ""]
    if quick:
        out += ["> **Quick run** (`scripts/bench --quick`): small sizes, one repetition. "
                "Not representative; run `scripts/bench` for real figures.", ""]
    out += ["## Machine", ""] + table(["", ""], machine_rows) + [""]
    if gb_ctx and gb_ctx.get("library_build_type") == "debug":
        out += ["> Google Benchmark reports that its own library (Debian's package) was built as "
                "debug. That concerns only its harness around the timed regions; the benchmarks "
                "themselves are built with the Release flags above.", ""]
    load1 = float((meta.get("load_start") or "0").split()[0])
    if load1 > 0.5 * (os.cpu_count() or 1):
        out += [f"> The load average was {meta.get('load_start')} when the run started on "
                f"{os.cpu_count()} cores: other processes were competing for the CPU, so wall "
                "times, lateness and round lag carry their noise (the preemption counts below "
                "show how much). CPU times and instruction counts are the more robust figures.", ""]
    return out


# ---- heartbeat scenario ------------------------------------------------------------------
SCEN_ROWS = [
    ("run: CPU time (user+sys)", "run_cpu_s", lambda v: f"{v:.2f} s", True),
    ("run: CPU time per read", "run_cpu_ns_per_touch", lambda v: f"{v:.0f} ns", True),
    ("run: wall time", "run_wall_s", lambda v: f"{v:.2f} s", True),
    ("run: CPU utilisation", "run_cpu_pct", lambda v: f"{v:.0f} %", True),
    ("opening the connections (wall)", "open_wall_s", lambda v: f"{v:.2f} s", True),
    ("max RSS", "maxrss_mib", lambda v: f"{v:.0f} MiB", True),
    ("memory per connection (RSS at the end of the run)", "run_bytes_per_connection", lambda v: f"{v:.0f} B", True),
    ("memory per connection (max RSS)", "bytes_per_connection", lambda v: f"{v:.0f} B", True),
    ("sizeof(connection)", "sizeof_connection", lambda v: f"{v:.0f} B", True),
    ("reads (touches)", "touches", lambda v: num(v), False),
    ("handlers run", "handlers", lambda v: num(v), True),
    ("&nbsp;&nbsp;aborted (operation_aborted)", "aborted", lambda v: num(v), True),
    ("&nbsp;&nbsp;fired: pings", "pings", lambda v: num(v), False),
    ("&nbsp;&nbsp;fired: drops", "drops", lambda v: num(v), False),
    ("&nbsp;&nbsp;stale (re-armed after it fired)", "stale", lambda v: num(v), False),
    ("lateness of pings and drops: min", "lateness_min_us", ms, False),
    ("lateness p50", "lateness_p50_us", ms, True),
    ("lateness p99", "lateness_p99_us", ms, True),
    ("lateness max", "lateness_max_us", ms, True),
    ("early completions", "lateness_early", lambda v: num(v), False),
    ("round lag p50 (traffic rounds starting late)", "round_lag_p50_us", ms, True),
    ("round lag p99", "round_lag_p99_us", ms, True),
    ("round lag max", "round_lag_max_us", ms, True),
    ("run: preempted (involuntary context switches)", "run_nivcsw", lambda v: num(v), False),
]


def scenario_sentence(c):
    reads = c["touch_fraction"] * c["connections"] * 1000 / c["round_ms"]
    arrive = (f"arriving at an even rate over the first {c['ramp_s']:g} s"
              if c["ramp_s"] > 0 else "all opened before the run starts")
    return (f"{c['connections']:,} connections ({arrive}), each with a heartbeat: ping after "
            f"{c['ping_s']:g} s of silence, drop after {c['idle_s']:g} s. Traffic: "
            f"{reads:,.0f} reads/s ({c['touch_fraction'] * 100:g}% of the open connections "
            f"every {c['round_ms']:g} ms, fixed seed {c['seed']}), {c['silent_fraction'] * 100:g}% of the "
            f"connections falling silent, {c['seconds']:g} s run, one thread, `io_context(1)`. "
            f"Medians of {c['repeat']} run(s) per implementation, each in its own process, "
            f"alternating (ABBA).")


# The asio-wheel ways, each against steady_timer; results from before the group have no
# "group" entry, and their tables stay as they were.
WHEEL_WAYS = [("wheel", "asio-wheel (heartbeat)"), ("group", "asio-wheel (heartbeat_group)")]
SHORT_NAMES = {"wheel": "asio-wheel", "group": "heartbeat_group"}


def wheel_ways(j):
    return [(k, label) for k, label in WHEEL_WAYS if k == "wheel" or k in j["median"]]


def scenario_table(j):
    med = j["median"]
    s = med.get("steady", {})
    ways = wheel_ways(j)
    rows = []
    for label, key, show, with_ratio in SCEN_ROWS:
        sv = s.get(key)
        values = [med.get(k, {}).get(key) for k, _ in ways]
        rows.append([label, show(sv) if sv is not None else "-"] +
                    [show(v) if v is not None else "-" for v in values] +
                    [ratio(sv, v, k) if with_ratio else "" for (k, _), v in zip(ways, values)])
    return table(["", "asio::steady_timer"] + [label for _, label in ways] +
                 [f"steady / {k}" for k, _ in ways], rows)


def scenario_section(scen, burst):
    out = ["## Heartbeat scenario: a server's keep-alive timers", ""]
    if scen:
        c = scen["config"]
        out += [scenario_sentence(c), "",
                "The **steady_timer way**: one `asio::steady_timer` per connection; every read does "
                "`expires_after(ping)` + `async_wait`, aborting the pending wait (one "
                "`operation_aborted` handler per read). The **asio-wheel way**: one "
                "`asio_wheel::heartbeat` per connection; every read is `touch()`, one store; the "
                "wheel re-arms lazily, once per ping interval." +
                (" The **group way**: one `asio_wheel::heartbeat_group` for the server, whose "
                 "member hook each connection derives from (no wait and no heap block per "
                 "connection); every read is `touch()`, one store; the group files a member again "
                 "lazily, once per threshold, and waits on one wheel timer for all of them."
                 if "group" in scen["median"] else "") +
                " Lateness is measured at handler entry "
                "against the true time of the last read + the threshold "
                "([`heartbeat_scenario.cpp`](heartbeat_scenario.cpp)).", ""]
        out += scenario_table(scen) + [""]
        m = scen["median"]
        if "steady" in m:
            for k, _ in wheel_ways(scen):
                if k not in m:
                    continue
                early = m[k].get("lateness_early", 0)
                if early:
                    # Observations explains heartbeat's early completions only.
                    out += [f"> **Early completions ({SHORT_NAMES[k]}): {early:,.0f}** of "
                            f"{m[k]['lateness_n']:,.0f} pings/drops completed before their due "
                            f"time, by up to {-m[k]['lateness_min_us'] / 1000:.2f} ms." +
                            (" See *Observations*." if k == "wheel" else ""), ""]
    else:
        out += ["Not run (see *Status*).", ""]

    if burst:
        c = burst["config"]
        out += ["### Mass reconnect: every connection opened at once", "",
                f"The same scenario with `--ramp 0`, one run per implementation: all "
                f"{c['connections']:,} connections are opened before the run, as after a restart "
                "when every client reconnects. The heartbeats' lazy re-arms then come due together, "
                "one ping interval after the opening, instead of spread out.", ""]
        out += scenario_table(burst) + [""]
    return out


# ---- idle check --------------------------------------------------------------------------
def idle_section(scen):
    out = ["## Idle wakeups", ""]
    if scen and "steady" in scen["median"] and "wheel" in scen["median"]:
        st, wh = scen["median"]["steady"], scen["median"]["wheel"]
        cols = [st, wh] + ([scen["median"]["group"]] if "group" in scen["median"] else [])
        out += [f"The quiet phase of the scenario: every connection's timer is moved an hour away"
                + (" (heartbeat_group: its members move to a second group that pings after an hour)"
                   if len(cols) > 2 else "") + ", "
                f"then the process's voluntary context switches (`ru_nvcsw`) are counted for "
                f"{scen['config']['quiet_s']:g} s while nothing is due (less the one wakeup of the "
                "timer that ends the phase).", ""]
        out += table(["", "asio::steady_timer", "asio-wheel"] +
                     (["asio-wheel (heartbeat_group)"] if len(cols) > 2 else []), [
            ["wakeups per second"] + [f"{c['quiet_wakeups_per_s']:.2f}" for c in cols],
            ["voluntary context switches"] + [num(c["quiet_nvcsw"]) for c in cols],
            ["CPU time"] + [f"{c['quiet_cpu_s'] * 1000:.1f} ms" for c in cols],
        ]) + [""]
    else:
        out += ["Not run.", ""]
    return out


# ---- precision ---------------------------------------------------------------------------
def precision_section(prec):
    out = ["## Precision", ""]
    if prec:
        c = prec["config"]
        names = {"steady": "asio::steady_timer", "wheel": "asio_wheel::wheel_timer",
                 "idle_timer": "asio_wheel::idle_timer", "heartbeat": "asio_wheel::heartbeat (ping)"}
        out += [f"`precision_bench`: {c['timers']:,} timers due uniformly over "
                f"{c['spread_s']:g} s (from 50 ms after arming), nothing else running, default tick. "
                "Check: p99 lateness <= one tick + 1 ms and no early completion. idle_timer and "
                "heartbeat are never touched: due at construction + timeout.", ""]
        rows = []
        for key, r in prec["results"].items():
            rows.append([names.get(key, key), num(r["lateness_n"]), ms(r["lateness_min_us"]),
                         ms(r["lateness_p50_us"]), ms(r["lateness_p99_us"]), ms(r["lateness_max_us"]),
                         num(r["lateness_early"]), f"{r['tick_us'] / 1000:g} ms",
                         ("PASS" if r.get("pass") else "**FAIL**") + f" (p99 <= {ms(r['limit_us'])})"])
        out += table(["", "fired", "min", "p50", "p99", "max", "early", "tick", "check"], rows) + [""]
        cc = prec.get("coarse_clock")
        if cc:
            out += [f"CLOCK_MONOTONIC_COARSE, the cheap clock that touch() does *not* read: "
                    f"resolution {cc['resolution_us'] / 1000:g} ms; behind CLOCK_MONOTONIC by "
                    f"{ms(cc['lag_p50_us'])} (p50), {ms(cc['lag_p99_us'])} (p99), "
                    f"{ms(cc['lag_max_us'])} (max) over {cc['samples']:,.0f} samples taken after "
                    "short sleeps. A lag beyond the resolution would make an activity stamp taken "
                    "from it (even plus one resolution) earlier than the true activity, and idle "
                    "timeouts early; touch() reads steady_clock instead.", ""]
    else:
        out += ["Not run.", ""]
    return out


# ---- tail latency ------------------------------------------------------------------------
def machine_line(r, name):
    """The "Machine:" line a tail_latency_bench run printed (its wake-up baseline), if any."""
    path = r.path(name)
    if not os.path.exists(path):
        return []
    with open(path) as f:
        for line in f:
            if line.startswith("Machine:"):
                return [line.strip(), ""]
    return []


def tail_latency_section(r):
    out = ["## Tail latency: many timers armed at once", ""]
    # The runs made by hand for issue #36, session by session, are docs/tail_latency.md's:
    # this page is written whole, so nothing hand-written may live in it.
    history = ["Every earlier run, by hand, with its commit and the acceptance figures of issue "
               "#36: [docs/tail_latency.md](../docs/tail_latency.md).", ""]
    tl = r.load("tail_latency.json")
    if not tl:
        return out + ["Not run by `scripts/bench`."] + [""] + history
    out += ["`tail_latency_bench`: N timers armed at once, then `run()` on one thread "
            "(`io_context(1)`, 1 ms tick), due uniformly over [5 s, 13 s] (spread) or [5 s, 6 s] "
            "(burst); lateness at handler entry, and the loop's worst stall by a 1 ms "
            f"`asio::steady_timer` probe. Medians of the repetitions; load average {tl.get('loadavg', '?')}.", ""]
    names = {"steady": "asio::steady_timer", "wheel": "asio_wheel::wheel_timer"}
    rows = [[x["shape"], num(x["n"]), names.get(x["impl"], x["impl"]), f"{x['p50_ms']:.2f} ms",
             f"{x['p99_ms']:.2f} ms", f"{x['p999_ms']:.2f} ms", f"{x['max_ms']:.2f} ms",
             f"{x['probe_max_ms']:.2f} ms", num(x["early"])] for x in tl.get("runs", [])]
    out += table(["shape", "N", "", "p50", "p99", "p99.9", "max", "probe max", "early"], rows) + [""]
    out += machine_line(r, "tail_latency.txt")
    busy = r.load("tail_latency_busy.json")
    if busy:
        out += ["The same with the loop kept busy (`--busy`: a handler that reposts itself, as a "
                "server's I/O would, so that the loop never sleeps and the machine's late wake-ups "
                f"count for neither timer); load average {busy.get('loadavg', '?')}:", ""]
        rows = [[x["shape"], num(x["n"]), names.get(x["impl"], x["impl"]), f"{x['p50_ms']:.2f} ms",
                 f"{x['p99_ms']:.2f} ms", f"{x['p999_ms']:.2f} ms", f"{x['max_ms']:.2f} ms",
                 f"{x['probe_max_ms']:.2f} ms", num(x["early"])] for x in busy.get("runs", [])]
        out += table(["shape", "N", "", "p50", "p99", "p99.9", "max", "probe max", "early"],
                     rows) + [""]
        out += machine_line(r, "tail_latency_busy.txt")
    if os.path.exists(r.path("tail_latency.trace.dat")) and r.gnuplot(
            "tail_latency.gnuplot", after=r.path("tail_latency.trace.dat"),
            outfile=r.path("tail_latency.png")):
        out += ["![lateness against due time](results/tail_latency.png)", ""]
    core = r.path("tail_latency_core.txt")
    if os.path.exists(core):
        with open(core) as f:
            text = [l.rstrip("\n") for l in f if l.startswith("|")]
        out += ["The wheel alone (`--core`): `detail::timing_wheel` advanced tick by tick with the "
                "driver's budgets, each turn's thread CPU time (the machine's other load does not "
                "count); a tick's time runs from its first turn until its expiries are done.", ""]
        out += text + [""]
        if os.path.exists(r.path("tail_latency_core.trace.dat")) and r.gnuplot(
                "tail_latency.gnuplot", core=1, after=r.path("tail_latency_core.trace.dat"),
                outfile=r.path("tail_latency_core.png")):
            out += ["![the wheel alone](results/tail_latency_core.png)", ""]
    return out + history


# ---- callgrind ---------------------------------------------------------------------------
def callgrind_section(r):
    out = ["## Instructions per operation (callgrind)", ""]
    cgp = r.path("callgrind.txt")
    cg = {}
    if os.path.exists(cgp):
        with open(cgp) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 4:
                    cg[(parts[0], parts[1])] = int(parts[3]) / int(parts[2])
    if cg:
        k = None
        with open(cgp) as f:
            first = f.readline().split()
            k = int(first[2]) if len(first) == 4 else 0
        out += [f"`valgrind --tool=callgrind --toggle-collect=callgrind_measured_region "
                f"callgrind_ops <impl> <op> {k}`: exactly K = {k:,} operations of one kind, setup "
                "excluded, divided by K ([`callgrind_ops.cpp`](callgrind_ops.cpp)). cancel and "
                "reset include running the aborted handler; fire is `run()` completing K timers "
                "that are all due.", ""]
        rows = []
        for op, desc in [("arm", "expires_after + async_wait (idle timer)"),
                         ("cancel", "cancel() + its aborted handler"),
                         ("reset", "expires_after on a pending wait + async_wait + aborted handler"),
                         ("fire", "completion of a due timer")]:
            s, w = cg.get(("steady", op)), cg.get(("wheel", op))
            rows.append([f"{op}: {desc}", num(s) if s else "-", num(w) if w else "-",
                         ratio(s, w) if s and w else ""])
        t = cg.get(("idle", "touch"))
        if t:
            s = cg.get(("steady", "reset"))
            rows.append(["a read, the asio-wheel way: `idle_timer::touch()`", "", num(t),
                         (ratio(s, t) + " vs steady reset") if s else ""])
        out += table(["operation", "asio::steady_timer", "asio_wheel::wheel_timer", "steady / wheel"], rows) + [""]
    else:
        out += ["Not run.", ""]
    return out


# ---- Google Benchmark programs -----------------------------------------------------------
def gb_rows(j):
    """Median aggregate rows (or plain rows when there are no aggregates)."""
    bms = j.get("benchmarks", [])
    med = [b for b in bms if b.get("aggregate_name") == "median"]
    return med if med else [b for b in bms if b.get("run_type") != "aggregate"]


def to_ns(b, key="real_time"):
    unit = b.get("time_unit", "ns")
    return b.get(key, 0) * {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}.get(unit, 1)


def wheel_timer_bench_section(r):
    """Per-operation cost against N: the table, the .dat files and the chart drawn from them."""
    quick = r.quick
    wtb = r.load("wheel_timer_bench.json")
    if not wtb:
        return []
    out = ["## Per-operation cost against N: `wheel_timer_bench`", ""]
    grid = {}   # op -> N -> impl -> value
    for b in gb_rows(wtb):
        parts = b.get("run_name", b["name"]).split("/")
        if len(parts) < 3 or not parts[2].isdigit():
            continue
        op, impl, n = parts[0], parts[1], int(parts[2])
        if b.get("error_occurred"):
            v = None
        elif op == "bytes":
            v = b.get("B/timer")
        else:
            v = to_ns(b)
        grid.setdefault(op, {}).setdefault(n, {})[impl] = v
    known = ["arm", "cancel", "cancel_warm", "reset", "reset_warm", "fire", "bytes"]
    ops = [o for o in known if o in grid] + [o for o in grid if o not in known]
    for op in ops:
        with open(r.path(f"wheel_timer_bench_{op}.dat"), "w") as f:
            f.write(f"# {op}: N steady wheel\n")
            for n in sorted(grid[op]):
                row = grid[op][n]
                f.write(f"{n} {row.get('steady') if row.get('steady') is not None else 'NaN'} "
                        f"{row.get('wheel') if row.get('wheel') is not None else 'NaN'}\n")
    chart_ok = r.gnuplot("ops_vs_n.gnuplot", datadir=r.dir, ops=" ".join(ops),
                         outfile=r.path("ops_vs_n.png"))
    out += ["asio::steady_timer against asio_wheel::wheel_timer with N timers pending, one "
            "thread; arm, cancel and reset are wall ns per operation on K random timers, fire is "
            "process CPU ns per completed handler, bytes is sizeof(timer) + heap per pending "
            "wait ([`wheel_timer_bench.cpp`](wheel_timer_bench.cpp)). The `_warm` rows read "
            "each timer object just before (untimed), as a server's read handler has just "
            "touched the connection that holds it: what is left is the cost of the timer "
            "machinery. wheel_timer's cancel() leaves the entry in the wheel (lazy re-arm): its "
            "unlink is paid by a later re-arm for an earlier expiry (included in reset), by the "
            "destructor, or by the driver. Medians of "
            f"{1 if quick else 3} repetition(s). The program's own console output, with its "
            "ratio table, is in `results/wheel_timer_bench.txt`.", ""]
    if chart_ok:
        out += ["![per-operation cost against N](results/ops_vs_n.png)", ""]
    ns_all = sorted({n for op in ops for n in grid[op]})
    header = ["operation"] + [f"N = {n:,}" for n in ns_all]
    rows = []
    for op in ops:
        unit = " B" if op == "bytes" else " ns"
        for impl in ("steady", "wheel"):
            rows.append([f"{op} / {impl}"] + [
                (num(grid[op].get(n, {}).get(impl), 0 if (grid[op].get(n, {}).get(impl) or 0) >= 100 else 1) + unit)
                if grid[op].get(n, {}).get(impl) is not None else "-" for n in ns_all])
        rows.append([f"{op}: steady / wheel"] + [
            ratio(grid[op].get(n, {}).get("steady"), grid[op].get(n, {}).get("wheel")) for n in ns_all])
    out += table(header, rows) + [""]
    return out


def gbench_sections(r):
    """A table for each Google Benchmark program but wheel_timer_bench: medians, counters."""
    quick = r.quick
    out = []
    for name in r.gbench():
        if name == "wheel_timer_bench":
            continue
        j = r.load(f"{name}.json")
        if not j:
            continue
        out += [f"## `{name}`", ""]
        rows = []
        counter_keys = []
        skip = {"name", "run_name", "run_type", "aggregate_name", "aggregate_unit", "family_index",
                "per_family_instance_index", "repetitions", "repetition_index", "threads",
                "iterations", "real_time", "cpu_time", "time_unit", "error_occurred", "error_message"}
        for b in gb_rows(j):
            for key in b:
                if key not in skip and key not in counter_keys and isinstance(b[key], (int, float)):
                    counter_keys.append(key)
        for b in gb_rows(j):
            rn = b.get("run_name", b["name"])
            if b.get("error_occurred"):
                rows.append([f"`{rn}`", "error: " + b.get("error_message", "")] + [""] * (1 + len(counter_keys)))
                continue
            rows.append([f"`{rn}`", f"{to_ns(b):,.1f} ns", f"{to_ns(b, 'cpu_time'):,.1f} ns"] +
                        [compact(b[key]) if key in b else "" for key in counter_keys])
        out += [f"Google Benchmark medians of {'1' if quick else '3'} repetition(s) "
                f"([`{name}.cpp`]({name}.cpp)).", ""]
        out += table(["benchmark", "real time", "CPU time"] + counter_keys, rows) + [""]
    return out


# ---- lateness chart ----------------------------------------------------------------------
def cdf_xmax(path):
    # the 99.5th percentile of the slowest set: the tail beyond it is in the tables
    best = 0.0
    blocks = open(path).read().split("\n\n\n")
    for blk in blocks:
        pts = [tuple(map(float, l.split())) for l in blk.splitlines() if l and not l.startswith("#")]
        for x, y in pts:
            if y >= 0.995:
                best = max(best, x)
                break
    return best if best > 0 else 1.0


def cdf_xmin(path):
    lo = 0.0
    for l in open(path):
        if l and not l.startswith("#") and l.strip():
            lo = min(lo, float(l.split()[0]))
    return lo


def lateness_section(r, scen, prec):
    cdf_files = {k: r.path(f"{k}.cdf.dat") for k in ("heartbeat_scenario", "precision")}
    if not (all(os.path.exists(p) for p in cdf_files.values()) and scen and prec):
        return []
    limit_ms = max(x["limit_us"] for x in prec["results"].values()) / 1000
    ok = r.gnuplot("lateness_cdf.gnuplot", scenario=cdf_files["heartbeat_scenario"],
                   precision=cdf_files["precision"], outfile=r.path("lateness_cdf.png"),
                   sx0=cdf_xmin(cdf_files["heartbeat_scenario"]),
                   sx1=cdf_xmax(cdf_files["heartbeat_scenario"]) * 1.1,
                   px0=cdf_xmin(cdf_files["precision"]),
                   px1=max(cdf_xmax(cdf_files["precision"]), limit_ms) * 1.1,
                   limit=limit_ms,
                   blocks=" ".join({"steady": "steady_timer", "wheel": "wheel_timer"}.get(k, k)
                                   for k in prec["results"]))
    if not ok:
        return []
    return ["## Lateness distribution", "",
            "Empirical CDFs of the lateness at handler entry (negative = early). Left: the "
            "pings and drops of the heartbeat scenario (every run). Right: the precision "
            "check, with its bound (dashed). Data: `results/*.cdf.dat`.", "",
            "![lateness CDF](results/lateness_cdf.png)", ""]


# ---- observations ------------------------------------------------------------------------
# Stalls at the wheel's level-2 boundaries: every 64^2 ticks the wheel re-files a whole
# level-2 slot in one step (timing_wheel::advance() budgets expirations, not cascades).
# The group's own wheel has the same 1 ms tick, counted from about the same moment.
def cascade_hits(j, impl):
    if not j or impl not in j.get("runs", {}):
        return 0, 0, 0.0
    hits, worst = 0, 0.0
    runs = j["runs"][impl]
    for r in runs:
        if "round_lag_max_at_s" not in r:
            continue
        tick_ms = 1.0  # the default tick, as used by the scenario
        t = (r["round_lag_max_at_s"] + r.get("setup_wall_s", 0)) * 1000 / tick_ms
        span = 64 ** 2
        k = round(t / span)
        if k >= 1 and abs(t - k * span) <= 50:
            hits += 1
            worst = max(worst, r["round_lag_max_us"])
    return hits, len(runs), worst


def observations(scen, prec, burst):
    """What the figures above say that a reader might miss: one paragraph each."""
    obs = []
    if scen and "wheel" in scen["median"] and "steady" in scen["median"]:
        st, wh = scen["median"]["steady"], scen["median"]["wheel"]
        if wh.get("lateness_early", 0) > 0 or any(
                r.get("lateness_early", 0) > 0 for r in (prec or {}).get("results", {}).values()):
            pe = {k: r["lateness_early"] for k, r in (prec or {}).get("results", {}).items()}
            obs.append(
                "**Early completions.** "
                f"{wh.get('lateness_early', 0):,.0f} pings/drops of asio-wheel in the scenario (as "
                f"early as {-wh.get('lateness_min_us', 0) / 1000:.2f} ms), and in the precision "
                "check " + ", ".join(f"{k} {v:,.0f}" for k, v in pe.items()) + ", completed "
                "before their due time. Nothing in the design allows it (touch() stamps activity "
                "with steady_clock, and a wait completes only once its tick has passed): a bug to "
                "investigate.")
        if wh.get("maxrss_mib", 0) >= st.get("maxrss_mib", 1):
            obs.append(
                f"**Memory.** asio-wheel's max RSS ({wh['maxrss_mib']:.0f} MiB) is not below "
                f"steady_timer's ({st['maxrss_mib']:.0f} MiB): "
                f"{wh['bytes_per_connection'] - st['bytes_per_connection']:+.0f} B per connection "
                f"(sizeof: {wh['sizeof_connection']:.0f} B against {st['sizeof_connection']:.0f} B; "
                "the rest is heap).")
    if scen and "steady" in scen["median"]:
        st = scen["median"]["steady"]
        rm = scen["config"]["round_ms"] * 1000
        if st.get("round_lag_p50_us", 0) > rm:
            obs.append(
                f"**steady_timer fell behind.** Its traffic rounds started "
                f"{st['round_lag_p50_us'] / 1000:.0f} ms late at the median "
                f"({st['round_lag_p99_us'] / 1000:.0f} ms at p99): on this machine, with this load, "
                "it could not do one round's work within the round, so the same reads were spread "
                "over a longer wall time and its pings waited behind them (its lateness).")
    for (label, j), (impl, name) in itertools.product(
            (("the scenario", scen), ("the mass reconnect", burst)), SHORT_NAMES.items()):
        hits, n, worst = cascade_hits(j, impl)
        if hits:
            obs.append(
                f"**Cascade stalls.** In {hits} of the {n} {name} run(s) of {label}, the worst "
                f"round lag (up to {worst / 1000:.0f} ms) began within 50 ms of a multiple of "
                f"4096 ticks (64^2 at the 1 ms tick), where the timing wheel re-files a whole "
                "level-2 slot in one step: timing_wheel::advance() budgets expirations, not "
                "cascades, so with a million heartbeats one cascade holds up the loop.")
    if prec and "steady" in prec.get("results", {}) and not prec["results"]["steady"].get("pass"):
        obs.append(
            "**Precision under load.** asio::steady_timer misses the precision bound too (p99 "
            f"{prec['results']['steady']['lateness_p99_us'] / 1000:.2f} ms): the p99 measures the "
            "machine's scheduling delays here more than either timer. Early completions do not "
            "depend on load.")
    if burst and "wheel" in burst["median"] and scen and "wheel" in scen["median"]:
        bw, sw = burst["median"]["wheel"], scen["median"]["wheel"]
        if bw.get("round_lag_max_us", 0) > 2 * max(sw.get("round_lag_max_us", 1), 1):
            obs.append(
                f"**Mass reconnect.** With every connection opened at once, the heartbeats' lazy "
                f"re-arms come due together one ping interval later; the loop then falls behind by "
                f"up to {bw['round_lag_max_us'] / 1000:.0f} ms (round lag max), against "
                f"{sw['round_lag_max_us'] / 1000:.0f} ms when connections arrive over "
                f"{scen['config']['ramp_s']:g} s.")
    if not obs:
        return []
    return (["## Observations", "", "Drawn from the figures above by `scripts/bench`.", ""] +
            [f"- {o}" for o in obs] + [""])


# ---- status ------------------------------------------------------------------------------
def status_section(r):
    out = ["## Status", ""]
    out += table(["stage", "result"], [[f"`{a}`", b] for a, b in r.status]) + [""]
    if r.meta.get("failed"):
        out += [f"Failed: {r.meta['failed']}", ""]
    for p in r.problems:
        out += [f"- {p}"]
    out += ["Reproduce: `scripts/bench` (about 10 minutes; `--quick` for a smoke run). The flagship "
            "comparison alone: `scripts/demo`, or `build/release/bin/heartbeat_scenario`.", ""]
    return out


def threads_section():
    # Written by hand from a many-core machine: scripts/bench does not run these programs.
    return ["## Many threads, one io_context", "",
            "`threads_bench` and `scheduler_bench` run by hand on a many-core machine (not by",
            "`scripts/bench`): [results/threads.md](results/threads.md).", ""]


def build_cost_section(r):
    # scripts/build_cost's own report, taken whole: it carries its date, commit and load, for
    # it may come from another run than the rest of the page (scripts/bench --build-cost, or
    # scripts/build_cost alone).
    path = r.path("build_cost.md")
    if not os.path.exists(path):
        return ["## Build cost", "",
                "Not run: `scripts/build_cost` (or `scripts/bench --build-cost`) writes "
                "`results/build_cost.md`, which this section then shows.", ""]
    with open(path) as f:
        return f.read().rstrip("\n").split("\n") + [""]


def main(argv):
    root = argv[1] if len(argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    r = Results(root)
    scen = r.load("heartbeat_scenario.json")
    prec = r.load("precision.json")
    burst = r.load("heartbeat_scenario_burst.json")
    cfg = (scen or prec or {}).get("config", {})

    out = machine_section(r, cfg, gbench_context(r))
    out += scenario_section(scen, burst)
    out += threads_section()
    out += idle_section(scen)
    out += precision_section(prec)
    out += tail_latency_section(r)
    out += callgrind_section(r)
    out += wheel_timer_bench_section(r)
    out += gbench_sections(r)
    out += lateness_section(r, scen, prec)
    out += build_cost_section(r)
    out += observations(scen, prec, burst)
    out += status_section(r)

    with open(os.path.join(root, "benchmarks", "RESULTS.md"), "w") as f:
        f.write("\n".join(out))
    print("wrote benchmarks/RESULTS.md")
    for p in r.problems:
        print("problem:", p, file=sys.stderr)
    return 1 if r.problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
