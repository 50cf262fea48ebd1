#!/usr/bin/env python3
"""Opens an HTML report of `dsatopk-audit report` in headless Chromium and checks that it loads
with no console message, that the rendered DOM holds the expected elements, and that nothing in it
can run or fetch (no script, no event-handler attribute, no src, no link leaving the page); saves a
screenshot when asked.

Console messages are read from Chromium's own log (--enable-logging=stderr): every message a page
logs, including Content-Security-Policy violations and failed loads, appears there as a
"CONSOLE" line. The report has no script, so any such line about it is an error. Before trusting
that, a probe page that does log is opened: if its message is not seen, the check fails rather
than passing blind.

usage: check_report.py [--screenshot PNG] [--window W,H] [--records N] [--min-svg N]
                       [--expect-text TEXT]... [--chromium PATH] REPORT.html
exit: 0 ok, 1 a check failed, 2 usage, 77 no Chromium (skipped)
"""
import argparse
import html.parser
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
CONSOLE_LINE = re.compile(r":CONSOLE(?:\(|:|\])|Uncaught ")
TIMEOUT_S = 120


def find_chromium(explicit):
    if explicit:
        return explicit if shutil.which(explicit) else None
    if os.environ.get("CHROMIUM"):  # when set, it is the browser (or there is none)
        return os.environ["CHROMIUM"] if shutil.which(os.environ["CHROMIUM"]) else None
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


def run_chromium(chromium, profile, extra, url):
    """Runs headless Chromium once; returns (returncode, stdout, stderr)."""
    command = [chromium, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run",
               "--disable-extensions", "--hide-scrollbars", "--enable-logging=stderr", "--v=0",
               "--user-data-dir=" + profile] + extra + [url]
    try:
        done = subprocess.run(command, capture_output=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return 124, "", "chromium did not finish within %d s" % TIMEOUT_S
    return (done.returncode, done.stdout.decode("utf-8", "replace"),
            done.stderr.decode("utf-8", "replace"))


def console_lines(log):
    return [line for line in log.splitlines() if CONSOLE_LINE.search(line)]


class DomSummary(html.parser.HTMLParser):
    """What the checks need from the rendered DOM."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags = {}
        self.ids = set()
        self.record_sections = 0
        self.unsafe = []
        self.text = []

    def handle_starttag(self, tag, attrs):
        self.tags[tag] = self.tags.get(tag, 0) + 1
        for name, value in attrs:
            value = value or ""
            if name == "id":
                self.ids.add(value)
            if name.startswith("on"):
                self.unsafe.append("<%s %s=...>" % (tag, name))
            if name in ("src", "srcset", "action", "formaction", "background", "poster"):
                self.unsafe.append("<%s %s=%r>" % (tag, name, value[:60]))
            if name in ("href", "xlink:href") and not value.startswith("#"):
                self.unsafe.append("<%s %s=%r>" % (tag, name, value[:60]))
        if tag == "details" and "rec" in (dict(attrs).get("class") or "").split():
            self.record_sections += 1
        if tag in ("script", "iframe", "object", "embed", "link", "base", "form", "img"):
            self.unsafe.append("<%s>" % tag)

    def handle_data(self, data):
        self.text.append(data)


def png_size(path):
    with open(path, "rb") as png:
        head = png.read(24)
    if len(head) < 24 or head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        return None
    return struct.unpack(">II", head[16:24])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", help="the HTML page to check")
    parser.add_argument("--screenshot", help="save a PNG screenshot here")
    parser.add_argument("--window", default="1280,2000", help="window size W,H (default 1280,2000)")
    parser.add_argument("--records", type=int, help="expected number of record sections")
    parser.add_argument("--min-svg", type=int, default=1, help="at least this many SVG plots")
    parser.add_argument("--expect-text", action="append", default=[],
                        help="text that the rendered page must contain (repeatable)")
    parser.add_argument("--chromium", help="the browser binary (default: $CHROMIUM, else the "
                        "first of %s on PATH)" % ", ".join(CHROMIUM_NAMES))
    args = parser.parse_args()
    if not re.fullmatch(r"\d+,\d+", args.window):
        parser.error("--window: expected W,H")
    if not os.path.isfile(args.report):
        print("check_report: %s: no such file" % args.report)
        return 2

    chromium = find_chromium(args.chromium)
    if not chromium:
        print("check_report: skipped: no Chromium found (install the Debian package chromium)")
        return 77
    version = subprocess.run([chromium, "--version"], capture_output=True, timeout=60)
    print("browser:", version.stdout.decode("utf-8", "replace").strip() or chromium)

    failures = []
    url = "file://" + os.path.abspath(args.report)
    with tempfile.TemporaryDirectory(prefix="dsatopk-browser.") as work:
        # The probe: a page whose console message must show up in the log we read.
        token = "dsatopk-console-probe-%d" % os.getpid()
        probe = os.path.join(work, "probe.html")
        with open(probe, "w") as page:
            page.write("<!DOCTYPE html><html><body><script>console.error(%r)</script></body></html>"
                       % token)
        code, _, log = run_chromium(chromium, os.path.join(work, "profile-probe"), ["--dump-dom"],
                                    "file://" + probe)
        if token not in log:
            print("check_report: FAIL: the probe page's console message is not in Chromium's log "
                  "(exit %d); console errors cannot be detected this way" % code)
            print("\n".join(log.splitlines()[-10:]))
            return 1

        code, dom, log = run_chromium(chromium, os.path.join(work, "profile-dom"), ["--dump-dom"], url)
        if code != 0 or "<body" not in dom:
            failures.append("--dump-dom exit %d, %d bytes of DOM" % (code, len(dom)))
        messages = console_lines(log)
        if messages:
            failures.append("%d console message(s) while loading the page:\n    %s"
                            % (len(messages), "\n    ".join(m[:300] for m in messages[:10])))

        summary = DomSummary()
        summary.feed(dom)
        text = " ".join("".join(summary.text).split())
        print("DOM: %d elements, %d record sections, %d svg, %d table, %d details"
              % (sum(summary.tags.values()), summary.record_sections, summary.tags.get("svg", 0),
                 summary.tags.get("table", 0), summary.tags.get("details", 0)))
        for section in ("context", "backends", "records"):
            if section not in summary.ids:
                failures.append("no element with id %r" % section)
        if args.records is not None and summary.record_sections != args.records:
            failures.append("%d record sections, expected %d" % (summary.record_sections, args.records))
        if summary.tags.get("svg", 0) < args.min_svg:
            failures.append("%d svg elements, expected at least %d"
                            % (summary.tags.get("svg", 0), args.min_svg))
        if summary.unsafe:
            failures.append("elements or attributes that could run or fetch: %s"
                            % ", ".join(sorted(set(summary.unsafe))[:10]))
        for wanted in args.expect_text:
            if wanted not in text:
                failures.append("the rendered text lacks %r" % wanted)

        if args.screenshot:
            target = os.path.abspath(args.screenshot)
            if os.path.exists(target):
                os.unlink(target)
            code, _, log = run_chromium(chromium, os.path.join(work, "profile-shot"),
                                        ["--screenshot=" + target, "--window-size=" + args.window],
                                        url)
            size = png_size(target) if os.path.exists(target) else None
            width, height = (int(v) for v in args.window.split(","))
            if code != 0 or size is None:
                failures.append("no screenshot written (exit %d)" % code)
            elif size != (width, height):
                failures.append("screenshot is %dx%d, expected %dx%d" % (size + (width, height)))
            else:
                print("screenshot: %s (%dx%d, %d bytes)" % (target, width, height,
                                                            os.path.getsize(target)))
            messages = console_lines(log)
            if messages:
                failures.append("console message(s) while taking the screenshot: %s"
                                % messages[0][:300])

    for failure in failures:
        print("check_report: FAIL:", failure)
    if not failures:
        print("check_report: ok: %s" % args.report)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
