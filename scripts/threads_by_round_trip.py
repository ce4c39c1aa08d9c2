#!/usr/bin/env python3
# Distributed under the Boost Software License, Version 1.0. (See accompanying
# file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
"""Medians of threads_bench rounds, split by the cache line's round trip measured before each.

On a VM the threads' placement (two vCPUs sharing a cache or not) can change from one minute
to the next, and with it the cost of every line that crosses between the threads, which is
what one io_context on several threads pays and several contexts do not. threads_bench
--tb_stats=1 measures that round trip right before each measurement; this script reads
one or more of its outputs (several invocations may be concatenated; a line
"=== ... in_handlers=0|1" before an invocation's output says its mode, otherwise the
mode is read from its header line) and prints, per mode and thread count, the median
re-arms/s of each timer and layout over the rounds whose round trip is below --split ns,
at or above it, and all of them, with shared / per-thread and wheel / steady ratios.

Usage: scripts/threads_by_round_trip.py [--split NS] FILE...
"""

import argparse
import re
import statistics
import sys

ROUND = re.compile(
    r"round \d+\s+(?P<impl>\w+)\s+(?P<layout>shared|per-thread)\s+T=(?P<t>\d+)\s+"
    r"(?P<rate>[\d.]+) M re-arms/s.*line round trip (?P<rt>\d+) ns")
MARK = re.compile(r"=== .*in_handlers=(?P<mode>[01])")
HEADER = re.compile(r"threads_bench: .*re-arms (?P<how>in a loop|inside handlers)")


def read(paths):
    rows = []
    for path in paths:
        mode = None
        with open(path, encoding="utf-8") as f:
            for line in f:
                m = MARK.match(line)
                if m:
                    mode = "loop" if m["mode"] == "0" else "handlers"
                    continue
                m = HEADER.match(line)
                if m:
                    mode = "loop" if m["how"] == "in a loop" else "handlers"
                    continue
                m = ROUND.match(line)
                if m and mode is not None:
                    rows.append((mode, int(m["t"]), m["impl"], m["layout"], float(m["rate"]),
                                 int(m["rt"])))
    return rows


def median(values):
    return statistics.median(values) if values else None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", type=int, default=200,
                        help="round trip (ns) that separates the two groups (default 200)")
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()
    rows = read(args.files)
    if not rows:
        sys.exit("no rounds with a line round trip found: run threads_bench with --tb_stats=1")

    groups = [(f"round trip < {args.split} ns", lambda rt: rt < args.split),
              (f"round trip >= {args.split} ns", lambda rt: rt >= args.split),
              ("all rounds", lambda rt: True)]
    print("| mode | T | rounds | wheel, shared (M/s) | wheel, per-thread | shared / per-thread"
          " | steady, shared | wheel / steady | idle: shared / per-thread |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|")
    for mode in ("loop", "handlers"):
        for t in sorted({r[1] for r in rows if r[0] == mode}):
            for name, keep in groups:
                def rates(impl, layout):
                    return [r[4] for r in rows
                            if r[0] == mode and r[1] == t and r[2] == impl and r[3] == layout
                            and keep(r[5])]
                ws, wp = rates("wheel", "shared"), rates("wheel", "per-thread")
                ss = rates("steady", "shared")
                ish, ipt = rates("idle", "shared"), rates("idle", "per-thread")
                if not ws:
                    continue

                def ratio(a, b):
                    return f"{median(a) / median(b):.2f}x" if a and b else "-"

                def rng(v):
                    return f"{median(v):.1f} ({min(v):.1f} to {max(v):.1f}, n={len(v)})"
                print(f"| {mode} | {t} | {name} | {rng(ws)} | {median(wp) or 0:.1f} | "
                      f"{ratio(ws, wp)} | {median(ss) or 0:.2f} | {ratio(ws, ss)} | "
                      f"{ratio(ish, ipt)} |")


if __name__ == "__main__":
    main()
