#!/usr/bin/env python3
#
# Distributed under the Boost Software License, Version 1.0. (See accompanying
# file LICENSE or copy at http://www.boost.org/LICENSE_1_0.txt)
#
"""Where the instructions of one timer operation go: the account of docs/completion_path.md.

Usage: scripts/callgrind_account.py [options]

Runs benchmarks/callgrind_ops under callgrind (the invocation of scripts/bench, plus
--dump-instr=yes and --separate-callers=12), once per implementation and operation (arm,
cancel, reset, fire), one run at a time, and splits the instructions per operation into parts
(lock, time, wheel or heap, op storage, ...: PARTS below) by the functions, inlined or not,
they were executed in. Prints Markdown: the totals with their ratios to asio::steady_timer,
then per operation a table with one row per part and one column per implementation. The rows
of a column sum to its total, which is the figure scripts/bench reports for the same K.

Implementations: steady (asio::steady_timer), wheel (asio_wheel::wheel_timer), and the
stripped prototype of benchmarks/support/floor_timer.hpp, which does only what Asio's contract
requires: floor, and floor-stopped (the same, checking io_context::stopped() per handler as
wheel_timer does). The prototype runs in callgrind_floor, a build of callgrind_ops.cpp of its
own, so that callgrind_ops is the very program scripts/bench measures.

Options:
  -k N            operations per run (default 100000)
  --build-dir D   where the programs are built (default build/callgrind-account): the release
                  preset plus -g. -g does not change the code GCC generates (compare
                  `objdump -d` with build/release/bin/callgrind_ops), so the counts are those
                  of the release build; it lets addr2line name the inlined functions.
  --no-build      use the programs already in --build-dir
  --keep DIR      keep the callgrind output files in DIR (callgrind.<impl>.<op>.out)
  --from DIR      do not run valgrind: read the files a --keep run left in DIR (the programs
                  in --build-dir must be the ones that ran)
  --explain N     after the tables, the N largest contributions to each part: the frame that
                  decided it and the innermost frame (to audit the rules)
  --impls, --ops  comma-separated subsets (default steady,wheel,floor,floor-stopped and
                  arm,cancel,reset,fire)

How an instruction is assigned to a part. callgrind records, per instruction address, the
instructions executed there and the inclusive cost of every call made from there
(--dump-instr=yes), each function split by its chain of callers (--separate-callers=12), so
that a function reached along two paths is two entries. The script walks the call graph down
from callgrind_measured_region, and asks addr2line for the chain of functions inlined at each
address of the program, so that every instruction has a stack of frames, outermost first. Each
frame is matched against NAME_RULES (its name without template arguments, and its source
file); the innermost frame of our own headers, when it is only "glue", also against LINE_RULES
(the text of its source line). The innermost frame with a part decides; going outwards, a
frame of another part takes over if its part absorbs the one found so far (a block taken for a
wait that leaves its timer is "moving out", though block_cache::allocate says "op storage"),
and the search ends at the first frame whose part does not. What no rule matches is "other".
Where a function is reached along one caller chain from several call sites, its cost is shared
in proportion to the inclusive cost of each call site (callgrind does not say more).

Standard library only; needs valgrind, addr2line (binutils), cmake and a compiler.
"""

import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile

# --- The parts -------------------------------------------------------------------------------
#
# (key, row label, absorbs): `absorbs` is the set of parts that, found inside a frame of this
# part, count as this part ("*": all of them; "-x": but not x).
PARTS = [
    ("lock", "lock: the timer service's mutex (wheel: futex_mutex; steady: the reactor's)",
     {"*"}),
    ("time", "time: Clock::now, saturating add, tick rounding", {"*"}),
    ("queue", "wheel link/unlink, filing (wheel) / timer_queue heap (steady)",
     {"op", "free", "time", "other"}),
    ("reactor", "epoll_reactor timer glue (steady)", set()),
    ("driver", "driver timer: re-arm, disarm (wheel)", {"*", "-work"}),
    ("op", "op construction and storage", {"*", "-executor", "-work"}),
    ("moveout", "moving a wait out of its timer (relocate, spare block)", {"*"}),
    ("executor", "choosing the handler's executor", {"*", "-work"}),
    ("work", "work counting", {"*"}),
    ("slot", "cancellation-slot bookkeeping", {"*"}),
    ("post", "posting to the scheduler (steady: per op; wheel: the drain)", {"*", "-work"}),
    ("loop", "run loop: the scheduler's, and the drain's", {"lock"}),
    ("stopped", "drain: io_context::stopped() per handler", {"*"}),
    ("call", "handler call: move out of the op, error_code, invoke", set()),
    ("free", "freeing the op's memory", {"*"}),
    ("body", "the handler's own body (the benchmark's lambda; same code in both)", {"*"}),
    ("glue", "API and service glue: checks, wait lists, ready queue", set()),
    ("bench", "benchmark loop (callgrind_ops.cpp)", set()),
    ("other", "other (no rule matched)", set()),
]
PART_KEYS = [p[0] for p in PARTS]
ABSORBS = {p[0]: p[2] for p in PARTS}

# Rules on frames, in order: the first that matches gives the frame's part; None makes the
# frame transparent (it takes the part of the frame that calls it). A frame is matched as
# "simplified name [file:line]", the name without template arguments and parameter lists
# (see simplify()): "asio_wheel::detail::wheel_service<>::file() [wheel_service.hpp:571]".
# Inlined frames may have unqualified names ("create_at<>"), hence the file names. Frames no
# rule matches (std::vector, std::atomic, std::exchange, ...) are transparent.
W = r"asio_wheel::detail::"
A = r"asio::detail::"
F = r"asio_wheel::bench::floor::"
NAME_RULES = [
    # Wrappers: transparent whatever their names say.
    (None, r"io_executor_holder<>::visit<>|^operator\(\)<> \[basic_wheel_timer|"
     r"^operator\(\)<> \[basic_waitable_timer|^async_initiate<>|^initiate<> \[async_result|"
     r"op_queue<>::|op_queue_access::"),
    # The user's handler, whatever it calls.
    ("body", r"^anon::handler\(\)::\{lambda\(\)#1\}::operator\(\)"),
    # io_context::stopped() from the drain: takes the scheduler's mutex, once per handler.
    ("stopped", r"asio::io_context::stopped\(\)|" + A + r"scheduler::stopped\(\)"),
    # Moving a wait out of its timer's inline storage.
    ("moveout", W + r"(evict|move_inline|move_waits)\(|spare_block|block_reserve::|" + W +
     r"wait_op::relocate\(|_Optional_payload|_Optional_base|std::optional<>::~optional|" + F +
     r"floor_service::evict\(|" + F + r"arena::(take|grow)\("),
    # Locks.
    ("lock", r"futex_mutex|posix_mutex|conditionally_enabled_mutex::|pthread_mutex_(un)?lock|"
     r"__pthread_mutex_unlock_usercnt|lll_lock_wait|std::unique_lock<>|std::lock_guard<>"),
    # Time.
    ("time", r"steady_clock::now|clock_gettime|tick_scale<>|chrono_time_traits<>::|"
     r"(basic_wheel_timer|wheel_timer_impl)<>::add\(|wheel_driver<>::turn_at\(|std::chrono::"),
    # Work counting.
    ("work", A + r"scheduler::(work_started|work_finished|compensating_work_started)\(|"
     r"work_cleanup|task_cleanup|executor_work_guard|on_work_(started|finished)|"
     r"outstanding_work"),
    # The wheel, and the timer queue's heap.
    ("queue", W + r"timing_wheel::|" + W + r"timer_queue<>::(file|refile|unfile)\(|" + A +
     r"timer_queue<>::|"
     r"timer_queue_set::|heap_entry"),
    # The reactor's timer glue.
    ("reactor", A + r"epoll_reactor::|timerfd_settime|epoll_wait|epoll_ctl"),
    # The wheel's one Asio timer.
    ("driver", W + r"wheel_service<>::(arm_if_earlier|start)\(|" + W + r"service_alarm<>::|" +
     W + r"wheel_driver<>::(needs_alarm|armed_for|disarm|armed)\(|" + F +
     r"floor_service::(arm|disarm|start)\("),
    # Choosing the handler's executor.
    ("executor", r"get_associated_executor|associated_executor<>|is_home|target_if|target_type|"
     r"type_info::operator==|context_executor|basic_executor_type<>::(query|context|context_ptr)|"
     r"asio_query_fn|asio_prefer_fn|asio_require_fn|handler_work_base<>::|^handler_work \[|"
     r"^~handler_work \[|any_io_executor::|any_executor<>::|any_executor_base::"
     r"(any_executor_base|~any_executor_base|destroy_void|move_void|copy_void|target_type_ex)|"
     r"io_executor_holder<>::(heap|context|get)\("),
    # Cancellation slots.
    ("slot", r"cancellation_slot|cancellation_signal|op_cancellation|unlink_cancellation|"
     r"cancellation_handler|associated_cancellation"),
    # Posting to the scheduler.
    ("post", r"asio::post<>|initiate_post|post_immediate_completion|post_deferred_completion|" +
     A + r"scheduler::post\(|scheduler::do_dispatch|"
     r"executor_op<>::ptr|executor_function::executor_function|executor_function::impl<>|"
     r"any_executor_base::execute|basic_executor_type<>::execute|" + W +
     r"service_home::post|" + W + r"own_post<>::post|ready_queue::push_front|"
     r"complete\(\)::\{lambda"),
    # Op construction and storage.
    ("op", W + r"wait_handler_op<>::(create|create_at|wait_handler_op)|^create_at<>|^create<>|"
     r"^wait_handler_op<> \[|" + W + r"wait_op::wait_op|block_cache::(allocate|lists)|"
     r"block_cache_allocator<>::allocate|" + W + r"discard\(|" + W + r"make_wait_op<>|"
     r"wait_handler<>::ptr::allocate|^wait_handler \[|" + A + r"wait_handler<>::wait_handler|" +
     A + r"wait_op::wait_op|scheduler_operation::scheduler_operation|"
     r"thread_info_base::allocate|recycling_allocator<>::allocate|aligned_new|"
     r"asio_handler_allocate|^allocate|hook_allocator<>::allocate|^malloc|_int_malloc|"
     r"^operator new|alloc_perturb|sysmalloc|malloc_consolidate|tcache|" + F +
     r"floor_timer::handler_wait<>::handler_wait\(|^handler_wait \[floor_timer"),
    # Freeing.
    ("free", r"block_cache::deallocate|block_cache_allocator<>::deallocate|"
     r"thread_info_base::deallocate|aligned_delete|asio_handler_deallocate|^deallocate|"
     r"recycling_allocator<>::deallocate|hook_allocator<>::deallocate|wait_handler<>::ptr::|"
     r"^~ptr \[|~wait_handler_op|^~wait_handler|^operator delete|^free|_int_free|" + F +
     r"arena::give\(|~handler_wait"),
    # Calling the handler.
    ("call", W + r"wait_handler_op<>::do_fn|^do_fn|" + W + r"direct_completion::complete|" + F +
     r"floor_timer::handler_wait<>::do_fn|"
     r"^complete<> \[wait_op|error_code::error_code|make_error_code|system_category|"
     r"error_code::operator=|" + A + r"wait_handler<>::do_complete|handler_work<>::complete|"
     r"^complete<> \[handler_work|binder1|asio_handler_invoke|fenced_block|"
     r"^invoke<> \[handler_invoke|^operator\(\) \[bind_handler"),
    # Run loops: the scheduler's, and the drain's.
    ("loop", A + r"scheduler::(run|poll|do_run_one|do_poll_one|run_one|poll_one|restart|stop|"
     r"wake_one_thread)\(|asio::io_context::(run|poll|run_one|poll_one)\(|"
     r"scheduler_operation::complete|call_stack|top_of_thread_call_stack|keyword_tss_ptr|"
     r"rethrow_pending_exception|executor_op<>::do_complete|executor_function::complete|" + W +
     r"wheel_service<>::(drain|complete)\(|" + W + r"complete_batch<>|" + W + r"wait_op::complete\(|requeue_rest|" + F +
     r"floor_service::drain\(|"
     r"make_ready\(\)::\{lambda\(\)#1\}::operator|binder0"),
    # The benchmark's own loop.
    ("bench", r"\[callgrind_ops\.cpp|callgrind_measured_region|_Function_handler|std::function<>"),
    # What remains of our own code and of Asio's timer service: checks, lists, queues.
    ("glue", W + r"(wheel_service|timer_queue|wheel_timer_impl|wheel_driver)<>|" + W +
     r"(timer_entry|ready_queue|expiry_batch)|basic_wheel_timer<>|async_wait<>|"
     r"\[(wheel_service|timer_queue|timer_entry|completion|wheel_timer_impl|wheel_driver|"
     r"service_alarm|handler_executor)\.hpp|"
     r"\[basic_wheel_timer\.hpp|\[wait_op\.hpp|initiate_async_wait|"
     r"deadline_timer_service<>|basic_waitable_timer<>|io_object_impl|" + A +
     r"wait_op\b|per_timer_data|" + F + r"|\[floor_timer\.hpp"),
]

# For the innermost frame, when it is in our own headers and its part is glue: the statement on
# its line, for the control flow of wheel_service::async_wait and the like, which mixes parts.
LINE_RULES = [
    ("slot", r"cancellation|\bslot\b"),
    ("op", r"inline_busy_|create_at|create\(|home_op|fits_inline|op_type|busy_slot"),
    ("executor", r"is_home|get_associated_executor|executor_\.visit"),
    ("time", r"scale_\.|scale\(\)\.|time_point::max|clock_type::now"),
    ("queue", r"wheel_->|wheel\(\)\.|file\(|enqueue\("),
    ("driver", r"alarm_|arm_if_earlier|armed_|arm\("),
    ("moveout", r"spare|evict|relocate"),
]

COMPILED_NAME_RULES = [(part, re.compile(rx)) for part, rx in NAME_RULES]
COMPILED_LINE_RULES = [(part, re.compile(rx)) for part, rx in LINE_RULES]
OWN_HEADER = re.compile(r"include/asio_wheel/|benchmarks/support/floor_timer\.hpp")

IMPLS = ["steady", "wheel", "floor", "floor-stopped"]
OPS = ["arm", "cancel", "reset", "fire"]


# --- callgrind output -------------------------------------------------------------------------


class Profile:
    """One callgrind output file (--dump-instr=yes): per function, the instructions executed at
    each address, and the calls made from each address with their inclusive cost."""

    def __init__(self, path):
        self.names = {}  # function id -> name (with callgrind's 'caller'chain suffix)
        self.objects = {}  # object id -> path
        self.fn_object = {}  # function id -> object id
        self.self_cost = collections.defaultdict(lambda: collections.defaultdict(int))
        self.calls = collections.defaultdict(list)  # fn -> [(address, callee, inclusive)]
        self.totals = 0
        self._read(path)

    @staticmethod
    def _compressed(table, spec):
        # "(id) name" defines an id, "(id)" refers to one.
        m = re.match(r"\((\d+)\)(?: (.*))?$", spec)
        if not m:
            return spec
        key = int(m.group(1))
        if m.group(2) is not None:
            table[key] = m.group(2)
        return key

    def _read(self, path):
        fn = None
        obj = None
        callee = None
        pending_call = None
        last_addr = 0
        with open(path) as f:
            for line in f:
                line = line.rstrip("\n")
                if not line:
                    continue
                c = line[0]
                if c.isdigit() or c in "+-*":
                    fields = line.split()
                    a = fields[0]
                    if a.startswith("0x"):
                        addr = int(a, 16)
                    elif a[0] == "+":
                        addr = last_addr + int(a[1:])
                    elif a[0] == "-":
                        addr = last_addr - int(a[1:])
                    elif a == "*":
                        addr = last_addr
                    else:
                        addr = int(a)
                    last_addr = addr
                    cost = int(fields[2]) if len(fields) > 2 else 0
                    if pending_call is not None:
                        self.calls[fn].append((addr, pending_call, cost))
                        pending_call = None
                    else:
                        self.self_cost[fn][addr] += cost
                    continue
                key, _, value = line.partition("=")
                if key == "ob":
                    obj = self._compressed(self.objects, value)
                elif key == "fn":
                    fn = self._compressed(self.names, value)
                    self.fn_object.setdefault(fn, obj)
                elif key == "cob":
                    self._compressed(self.objects, value)
                elif key == "cfn":
                    callee = self._compressed(self.names, value)
                elif key == "calls":
                    pending_call = callee
                elif key == "totals":
                    self.totals = int(value.split()[0])
                elif line.startswith("summary:"):
                    self.totals = self.totals or int(line.split()[1])

    def base_name(self, fn):
        # callgrind's --separate-callers suffix: name'caller'caller...
        return self.names[fn].split("'")[0]


def inline_stacks(binary, addresses):
    """address -> [(function, file, line)], outermost first, from addr2line -i."""
    addresses = sorted(set(addresses))
    if not addresses:
        return {}
    out = subprocess.run(["addr2line", "-e", binary, "-f", "-i", "-C", "-a"],
                         input="".join("0x%x\n" % a for a in addresses), capture_output=True,
                         text=True, check=True).stdout.splitlines()
    result = {}
    current = None
    frames = []
    i = 0
    while i < len(out):
        line = out[i]
        if re.fullmatch(r"0x[0-9a-f]+", line):
            if current is not None:
                result[current] = frames[::-1]
            current = int(line, 16)
            frames = []
            i += 1
            continue
        location = out[i + 1] if i + 1 < len(out) else "??:0"
        location = re.sub(r" \(discriminator \d+\)", "", location)
        path, _, lineno = location.rpartition(":")
        frames.append((line, path, int(lineno) if lineno.isdigit() else 0))
        i += 2
    if current is not None:
        result[current] = frames[::-1]
    return result


# --- classification ---------------------------------------------------------------------------

OPERATOR_TOKENS = [("operator<=>", "operator@cmp"), ("operator<<", "operator@shl"),
                   ("operator>>", "operator@shr"), ("operator<", "operator@lt"),
                   ("operator>", "operator@gt"), ("operator()", "operator@call"),
                   ("operator->", "operator@arrow"), ("operator<=", "operator@le"),
                   ("operator>=", "operator@ge")]


def simplify(name):
    """A demangled name without template arguments and parameter lists:
    "ns::cls<T>::f<U>(int) const" -> "ns::cls<>::f<>() const"."""
    name = name.replace("(anonymous namespace)", "anon")
    for token, placeholder in OPERATOR_TOKENS:
        name = name.replace(token, placeholder)
    out = []
    depth = 0
    for c in name:
        if c in "<(":
            depth += 1
            if depth == 1:
                out.append(c)
        elif c in ">)":
            depth = max(depth - 1, 0)
            if depth == 0:
                out.append(c)
        elif depth == 0:
            out.append(c)
    name = "".join(out)
    for token, placeholder in OPERATOR_TOKENS:
        name = name.replace(placeholder, token)
    return name



class Classifier:
    def __init__(self):
        self.source_cache = {}
        self.frame_cache = {}

    def source_line(self, path, lineno):
        if path not in self.source_cache:
            try:
                with open(path) as f:
                    self.source_cache[path] = f.read().splitlines()
            except OSError:
                self.source_cache[path] = []
        lines = self.source_cache[path]
        return lines[lineno - 1] if 0 < lineno <= len(lines) else ""

    def frame_part(self, frame):
        if frame not in self.frame_cache:
            name, path, lineno = frame
            text = "%s [%s:%d]" % (simplify(name), os.path.basename(path), lineno)
            part = None
            for p, rx in COMPILED_NAME_RULES:
                if rx.search(text):
                    part = p
                    break
            self.frame_cache[frame] = part
        return self.frame_cache[frame]

    def line_part(self, frame):
        name, path, lineno = frame
        if not OWN_HEADER.search(path):
            return None
        text = re.sub(r"//.*", "", self.source_line(path, lineno))
        for p, rx in COMPILED_LINE_RULES:
            if rx.search(text):
                return p
        return None

    def classify(self, stack):
        """(part, deciding frame index) for a stack of frames, outermost first. The innermost
        frame with a part decides; going outwards, a frame of another part takes over if its
        part absorbs the current one, and ends the search if not."""
        part, where = None, None
        for i in range(len(stack) - 1, -1, -1):
            p = self.frame_part(stack[i])
            if part is None and p == "glue":
                p = self.line_part(stack[i]) or p
            if p is None:
                continue
            if part is None:
                part, where = p, i
            elif p != part:
                if not absorbs(p, part):
                    break
                part, where = p, i
        return (part or "other"), where


def absorbs(outer, inner):
    a = ABSORBS[outer]
    if "-" + inner in a:
        return False
    return "*" in a or inner in a


def show(frame):
    name, path, lineno = frame
    return "%s [%s:%d]" % (simplify(name), os.path.basename(path), lineno) if path else name


def account(profile, binary, root="callgrind_measured_region"):
    """part -> instructions, and part -> {(deciding frame, innermost frame): instructions}."""
    binary_objects = {k for k, v in profile.objects.items() if os.path.realpath(v) ==
                      os.path.realpath(binary)}
    addresses = set()
    for fn, costs in profile.self_cost.items():
        if profile.fn_object.get(fn) in binary_objects:
            addresses.update(costs)
    for fn, calls in profile.calls.items():
        if profile.fn_object.get(fn) in binary_objects:
            addresses.update(a for a, _, _ in calls)
    stacks = inline_stacks(binary, addresses)

    total_of = {}
    for fn in set(profile.self_cost) | set(profile.calls):
        total_of[fn] = sum(profile.self_cost[fn].values()) + sum(
            c for _, callee, c in profile.calls[fn] if callee != fn)
    roots = [fn for fn in total_of if profile.base_name(fn) == root]
    if not roots:
        raise SystemExit("callgrind_account: no %s in the profile" % root)
    start = max(roots, key=lambda fn: total_of[fn])

    classifier = Classifier()
    parts = collections.defaultdict(float)
    detail = collections.defaultdict(lambda: collections.defaultdict(float))

    def frames(fn, addr):
        if profile.fn_object.get(fn) in binary_objects and addr in stacks:
            return stacks[addr]
        return [(profile.base_name(fn), "", 0)]

    def add(stack, cost):
        part, where = classifier.classify(stack)
        parts[part] += cost
        detail[part][(show(stack[where]) if where is not None else "-", show(stack[-1]))] += cost

    def walk(fn, context, weight, on_path, depth):
        for addr, cost in profile.self_cost[fn].items():
            add(context + frames(fn, addr), weight * cost)
        for addr, callee, cost in profile.calls[fn]:
            if callee == fn:
                continue
            stack = context + frames(fn, addr)
            if callee in on_path or depth > 100 or total_of.get(callee, 0) == 0:
                add(stack + [(profile.base_name(callee), "", 0)], weight * cost)
            else:
                walk(callee, stack, weight * cost / total_of[callee], on_path | {callee},
                     depth + 1)

    walk(start, [], 1.0, {start}, 0)
    return parts, detail, total_of[start]


# --- running ----------------------------------------------------------------------------------


def build(root, build_dir, jobs):
    if not os.path.exists(os.path.join(build_dir, "CMakeCache.txt")):
        subprocess.run(["cmake", "--preset", "release", "-B", build_dir, "-DCMAKE_CXX_FLAGS=-g"],
                       cwd=root, check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", build_dir, "--target", "callgrind_ops", "callgrind_floor",
                    "-j", str(jobs)], cwd=root, check=True, stdout=subprocess.DEVNULL)


def run_callgrind(binary, impl, op, k, out_path):
    cmd = ["valgrind", "--tool=callgrind", "--collect-atstart=no",
           "--toggle-collect=callgrind_measured_region", "--dump-instr=yes",
           "--separate-callers=12", "--callgrind-out-file=" + out_path, binary, impl, op, str(k)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.stderr.write(r.stderr[-2000:])
        raise SystemExit("callgrind_account: %s %s failed" % (impl, op))


def fmt(x):
    if abs(x) < 0.05:
        return "."
    return "{:,.0f}".format(x) if abs(x) >= 10 else "{:.1f}".format(x)


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 usage=argparse.SUPPRESS)
    ap.add_argument("-k", type=int, default=100000)
    ap.add_argument("--build-dir", default=os.path.join(root, "build", "callgrind-account"))
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--keep")
    ap.add_argument("--from", dest="from_dir")
    ap.add_argument("--explain", type=int, default=0)
    ap.add_argument("--impls", default=",".join(IMPLS))
    ap.add_argument("--ops", default=",".join(OPS))
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    impls = args.impls.split(",")
    ops = args.ops.split(",")
    bin_dir = os.path.join(os.path.abspath(args.build_dir), "bin")

    def binary_of(impl):
        # The prototype has a program of its own (see benchmarks/callgrind_ops.cpp).
        return os.path.join(bin_dir, "callgrind_floor" if impl.startswith("floor") else
                            "callgrind_ops")

    if not args.from_dir and not args.no_build:
        build(root, os.path.abspath(args.build_dir), args.jobs)
    for impl in impls:
        if not os.path.exists(binary_of(impl)):
            raise SystemExit("callgrind_account: %s not built" % binary_of(impl))

    keep = args.keep or args.from_dir
    tmp = None
    if keep is None:
        tmp = tempfile.TemporaryDirectory()
        keep = tmp.name
    os.makedirs(keep, exist_ok=True)

    columns = []
    results = {}
    k = args.k
    for op in ops:
        for impl in impls:
            path = os.path.join(keep, "callgrind.%s.%s.out" % (impl, op))
            if not args.from_dir:
                print("callgrind %s %s K=%d ..." % (impl, op, k), file=sys.stderr)
                run_callgrind(binary_of(impl), impl, op, k, path)
            if args.from_dir:
                m = re.search(r" (\d+)\s*$", open(path).read(4096).split("cmd:", 1)[1].split(
                    "\n", 1)[0])
                if m:
                    k = int(m.group(1))
            profile = Profile(path)
            parts, detail, total = account(profile, binary_of(impl))
            if abs(sum(parts.values()) - profile.totals) > 0.001 * profile.totals + 10:
                print("callgrind_account: %s %s: parts sum to %.0f, callgrind says %d" %
                      (impl, op, sum(parts.values()), profile.totals), file=sys.stderr)
            results[(impl, op)] = (parts, detail, profile.totals, k)
            columns.append((impl, op))

    def per_op(impl, op):
        return results[(impl, op)][2] / results[(impl, op)][3]

    # Totals, and the ratios to steady_timer.
    others = [i for i in impls if i != "steady"]
    print("| operation | %s |%s" % (" | ".join(impls), "".join(
        " steady / %s |" % i for i in others if "steady" in impls)))
    print("|---|" + "---:|" * len(impls) + ("---:|" * len(others) if "steady" in impls else ""))
    for op in ops:
        row = " | ".join(fmt(per_op(i, op)) for i in impls)
        if "steady" in impls:
            row += " | " + " | ".join("%.2fx" % (per_op("steady", op) / per_op(i, op))
                                      for i in others)
        print("| %s | %s |" % (op, row))
    print()

    # Per operation: one row per part, one column per implementation.
    for op in ops:
        print("%s (instructions per operation)\n" % op)
        print("| part | %s |" % " | ".join(impls))
        print("|---|" + "---:|" * len(impls))
        for key, label, _ in PARTS:
            values = [results[(i, op)][0].get(key, 0.0) / results[(i, op)][3] for i in impls]
            if key != "other" and all(abs(v) < 0.05 for v in values):
                continue
            print("| %s | %s |" % (label, " | ".join(fmt(v) for v in values)))
        print("| **total** | %s |" % " | ".join("**%s**" % fmt(per_op(i, op)) for i in impls))
        print()
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root,
                             capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "include", "benchmarks"],
                               cwd=root, capture_output=True, text=True).stdout.strip()
    except OSError:
        rev, dirty = "unknown", ""
    print("K = %s operations per run; sources at %s%s." % (
        "{:,}".format(k), rev or "unknown",
        " with uncommitted changes to include/ or benchmarks/" if dirty else ""))

    if args.explain:
        for c in columns:
            parts, detail, total, kk = results[c]
            print("\n## %s %s: %.1f per op" % (c[1], c[0], total / kk))
            for key in PART_KEYS:
                if parts.get(key, 0) / kk < 0.05:
                    continue
                print("  %-9s %8.1f" % (key, parts[key] / kk))
                items = sorted(detail[key].items(), key=lambda x: -x[1])[:args.explain]
                for (decider, inner), cost in items:
                    if cost / kk < 0.05:
                        break
                    print("      %7.1f  %s  <-  %s" % (cost / kk, decider[:100], inner[:100]))
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
