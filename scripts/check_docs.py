#!/usr/bin/env python3
"""Opens the API reference in a real browser (headless Chromium) and checks what a reader sees.

For the index and the pages of wheel_timer, idle_timer, heartbeat_group, cancel_after and
tcp_stream, Chromium loads the page (scripts run) and dumps its DOM; each must show its title,
its brief (taken from the header or docs/reference/groups.dox, so the check follows the
source), its member list with the members named below, and, for a class, the paragraphs every
class page owes its reader (thread safety, completion signature, per-operation cancellation,
precision, lifetime). Every internal link of every generated page, and of the rendered DOMs,
must lead to a file that exists and to an anchor that is in it; so must the relative links of
README.md, CHANGELOG.md and docs/*.md (files, and headings' anchors as GitHub makes them). A screenshot of each checked
page is saved (--screenshots DIR) for a person to look at.

Usage: check_docs.py HTML_DIR [--screenshots DIR] [--chromium PATH]
Prints one line per check and "check_docs: N passed, N failed"; exit status 1 on a failure.
"""

import argparse
import concurrent.futures
import html.parser
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The rules every class page states, as the README's Rules section does for the library.
CLASS_SECTIONS = ["Thread Safety", "Completion Signature", "Per-Operation Cancellation",
                  "Precision", "Lifetime"]

PAGES = [
    # name, file, how to find its brief, members its member list must show, sections
    ("index", "index.html", ("mainpage", None),
     ["group__timers.html", "group__idle.html", "group__coroutine__timeouts.html",
      "group__beast.html", "group__scaled.html", "group__statistics.html",
      "group__virtual__time.html", "group__version.html"], []),
    ("wheel_timer", "classasio__wheel_1_1basic__wheel__timer.html",
     ("class", "include/asio_wheel/basic_wheel_timer.hpp", "basic_wheel_timer"),
     ["async_wait", "cancel", "cancel_one", "expires_after", "expires_at", "expiry", "wait",
      "set_tick", "tick", "get_executor"], CLASS_SECTIONS),
    ("idle_timer", "classasio__wheel_1_1basic__idle__timer.html",
     ("class", "include/asio_wheel/idle_timer.hpp", "basic_idle_timer"),
     ["touch", "async_wait", "cancel", "set_timeout"], CLASS_SECTIONS),
    ("heartbeat_group", "classasio__wheel_1_1basic__heartbeat__group.html",
     ("class", "include/asio_wheel/heartbeat_group.hpp", "basic_heartbeat_group"),
     ["watch", "unwatch", "member", "statistics", "get_executor"], CLASS_SECTIONS),
    ("cancel_after", "group__coroutine__timeouts.html",
     ("group", "docs/reference/groups.dox", "coroutine_timeouts"),
     ["cancel_after", "cancel_at", "basic_cancel_t", "basic_partial_cancel"], []),
    ("tcp_stream", "classasio__wheel_1_1basic__stream.html",
     ("class", "include/asio_wheel/beast/basic_stream.hpp", "basic_stream"),
     ["expires_after", "expires_at", "expires_never", "async_connect", "async_read_some",
      "async_write_some", "socket", "cancel", "close"], CLASS_SECTIONS),
]


def norm(text):
    return re.sub(r"\s+", " ", text).strip()


def class_brief(header, name):
    """The /// lines above the class's /** block (and template line) in the header."""
    lines = open(os.path.join(ROOT, header), encoding="utf-8").read().split("\n")
    at = next(i for i, l in enumerate(lines) if re.match(r"(class|struct) %s\b" % name, l))
    i = at - 1
    while i >= 0 and not lines[i].startswith("/**") and not lines[i].startswith("///"):
        i -= 1  # template <...> lines
    if lines[i].startswith(" */") or lines[i].startswith("/**"):
        pass
    while i >= 0 and not lines[i].startswith("///"):
        i -= 1  # the /** ... */ block
    brief = []
    while i >= 0 and lines[i].startswith("///"):
        brief.insert(0, lines[i][3:].strip())
        i -= 1
    return norm(" ".join(brief))


def group_brief(dox, group):
    text = open(os.path.join(ROOT, dox), encoding="utf-8").read()
    m = re.search(r"@defgroup %s [^\n]*\n@brief (.*?)\n\n" % group, text, re.S)
    return norm(m.group(1))


def markdown_plain(text):
    """The brief as a reader sees it: `code` without its backquotes."""
    return text.replace("`", "")


def doxygen_plain(text):
    """Doxygen commands in a brief (@c x, <tt>x</tt>) as rendered text."""
    text = re.sub(r"[@\\](c|p|e|a|b) ", "", text)
    return re.sub(r"</?tt>", "", text)


class Page(html.parser.HTMLParser):
    """Text, links and anchors of one HTML document."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.text = []
        self.links = []
        self.anchors = set()
        self.member_names = []
        self.title = ""
        self._in = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for key in ("id", "name"):
            if a.get(key):
                self.anchors.add(a[key])
        if tag == "a" and a.get("href"):
            self.links.append(a["href"])
        if tag in ("link", "script", "img") and (a.get("href") or a.get("src")):
            self.links.append(a.get("href") or a.get("src"))
        cls = a.get("class", "")
        self._in.append((tag, cls))

    def handle_endtag(self, tag):
        while self._in:
            t, _ = self._in.pop()
            if t == tag:
                break

    def handle_data(self, data):
        classes = [c for _, c in self._in]
        if any("memItemRight" in c or "memTemplItemRight" in c for c in classes):
            self.member_names.append(data.strip())
        if any("title" == c for c in classes):
            self.title += data
        if not any(t in ("script", "style") for t, _ in self._in):
            self.text.append(data)


def parse(path_or_text, is_text=False):
    p = Page()
    p.feed(path_or_text if is_text else open(path_or_text, encoding="utf-8").read())
    p.text = norm(" ".join(p.text))
    return p


def broken_links(html_dir, page_file, page, cache):
    """Internal links of `page` (found in page_file) that lead nowhere."""
    bad = []
    for href in page.links:
        url = urllib.parse.urlsplit(href)
        if url.scheme in ("http", "https", "mailto", "javascript", "data"):
            continue
        if url.scheme == "file":
            target = urllib.parse.unquote(url.path)
        elif url.path:
            target = os.path.normpath(os.path.join(os.path.dirname(page_file),
                                                   urllib.parse.unquote(url.path)))
        else:
            target = page_file
        if not os.path.isfile(target):
            bad.append("%s -> %s (no such file)" % (os.path.basename(page_file), href))
            continue
        if url.fragment and target.endswith(".html"):
            if target not in cache:
                cache[target] = parse(target).anchors
            if url.fragment not in cache[target]:
                bad.append("%s -> %s (no anchor '%s')" % (os.path.basename(page_file), href,
                                                         url.fragment))
    return bad


def github_slug(heading):
    """The anchor GitHub gives a Markdown heading."""
    text = re.sub(r"[`*]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def markdown_links():
    """Relative links of README.md, CHANGELOG.md and docs/*.md that lead nowhere."""
    files = ["README.md", "CHANGELOG.md"] + sorted(
        os.path.join("docs", f) for f in os.listdir(os.path.join(ROOT, "docs")) if f.endswith(".md"))
    bad, count = [], 0
    for md in files:
        text = open(os.path.join(ROOT, md), encoding="utf-8").read()
        text = re.sub(r"```.*?```", "", text, flags=re.S)  # code blocks hold no links
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            count += 1
            path, _, anchor = target.partition("#")
            full = os.path.normpath(os.path.join(ROOT, os.path.dirname(md), path)) if path \
                else os.path.join(ROOT, md)
            if not os.path.exists(full):
                bad.append("%s -> %s (no such file)" % (md, target))
            elif anchor and full.endswith(".md"):
                headings = re.findall(r"^#+ (.*)$", re.sub(
                    r"```.*?```", "", open(full, encoding="utf-8").read(), flags=re.S), re.M)
                if anchor not in {github_slug(h) for h in headings}:
                    bad.append("%s -> %s (no heading with that anchor)" % (md, target))
    return files, count, bad


def chromium(browser, args, url):
    with tempfile.TemporaryDirectory() as profile:
        cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               "--no-first-run", "--user-data-dir=" + profile] + args + [url]
        out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        return out.returncode, out.stdout.decode("utf-8", "replace")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("html_dir")
    ap.add_argument("--screenshots")
    ap.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    opts = ap.parse_args()
    html_dir = os.path.abspath(opts.html_dir)
    if not os.path.isfile(opts.chromium):
        print("check_docs: no chromium at %s (Debian: apt-get install chromium)" % opts.chromium)
        print("check_docs: 0 passed, 1 failed")
        return 1
    started = time.time()
    passed, failed = 0, 0

    def verdict(ok, what):
        nonlocal passed, failed
        print("%s: %s" % ("passed" if ok else "FAILED", what))
        if ok:
            passed += 1
        else:
            failed += 1

    # Load each page in the browser: its DOM after scripts ran, and a screenshot.
    def render(entry):
        name, file = entry[0], entry[1]
        url = "file://" + os.path.join(html_dir, file)
        rc, dom = chromium(opts.chromium, ["--dump-dom"], url)
        shot = None
        if opts.screenshots:
            shot = os.path.join(opts.screenshots, name + ".png")
            chromium(opts.chromium, ["--screenshot=" + shot, "--window-size=1280,1400"], url)
        return name, file, rc, dom, shot

    if opts.screenshots:
        os.makedirs(opts.screenshots, exist_ok=True)
    with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
        rendered = list(pool.map(render, PAGES))

    anchor_cache = {}
    for (name, file, how, members, sections), (_, _, rc, dom, shot) in zip(PAGES, rendered):
        page_file = os.path.join(html_dir, file)
        verdict(rc == 0 and "</html>" in dom, "%s: Chromium rendered %s" % (name, file))
        page = parse(dom, is_text=True)
        if how[0] == "mainpage":
            verdict("API reference" in page.title, "%s: title '%s'" % (name, norm(page.title)))
            missing = [m for m in members if m not in page.links]
            verdict(not missing, "%s: links to every group page%s" % (
                name, " (missing: %s)" % ", ".join(missing) if missing else ""))
        else:
            brief = (class_brief(*how[1:]) if how[0] == "class" else group_brief(*how[1:]))
            brief = doxygen_plain(markdown_plain(brief))
            # At the top of the page, before its first "More..." (which ends the brief there;
            # a brief seen only in the detailed description below does not count). Compared
            # without white space: the DOM's text nodes split at each link.
            top = page.text.split("More...", 1)[0]
            shown_brief = re.sub(r"\s", "", brief) in re.sub(r"\s", "", top)
            verdict(shown_brief, "%s: brief shown at the top: \"%s\"" % (name, brief))
            shown = set()
            for text in page.member_names:
                m = re.search(r"([A-Za-z_][A-Za-z_0-9]*)\s*(\(|<|$)", text)
                if m:
                    shown.add(m.group(1))
            missing = [m for m in members if m not in shown]
            verdict(not missing, "%s: member list shows %s%s" % (
                name, ", ".join(members), " (missing: %s)" % ", ".join(missing) if missing
                else ""))
            gone = [s for s in sections if s not in page.text]
            if sections:
                verdict(not gone, "%s: states %s%s" % (
                    name, ", ".join(sections), " (missing: %s)" % ", ".join(gone) if gone
                    else ""))
        bad = broken_links(html_dir, page_file, page, anchor_cache)
        verdict(not bad, "%s: %d links in the rendered page, none broken%s" % (
            name, len(page.links), "".join("\n    " + b for b in bad[:20])))
        if shot:
            verdict(os.path.isfile(shot) and os.path.getsize(shot) > 10000,
                    "%s: screenshot %s" % (name, shot))

    # Every generated page's links, as written.
    bad, n_links, n_pages = [], 0, 0
    for entry in sorted(os.listdir(html_dir)):
        if entry.endswith(".html"):
            path = os.path.join(html_dir, entry)
            page = parse(path)
            n_pages += 1
            n_links += len(page.links)
            bad += broken_links(html_dir, path, page, anchor_cache)
    verdict(not bad, "all %d pages: %d internal links, none broken%s" % (
        n_pages, n_links, "".join("\n    " + b for b in bad[:20])))

    files, count, bad = markdown_links()
    verdict(not bad, "Markdown: %d relative links in %d files (README.md, CHANGELOG.md, docs/), "
            "none broken%s" % (count, len(files), "".join("\n    " + b for b in bad[:20])))

    print("check_docs: %d passed, %d failed (%.0f s)" % (passed, failed, time.time() - started))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
