#!/usr/bin/env python3
"""Group error lines of a log by normalised signature.

Usage: python3 triage.py [FILE|-]... [--top N] [--all] [--match REGEX] [--width N]

Reads files or stdin (journalctl output works), keeps error-like lines, masks
the parts that vary (timestamps, numbers, hex ids, UUIDs, IPs, paths, quoted
strings), and prints one compact block per signature: count, first and last
timestamp seen (or line numbers), the signature and one example. Standard
library only; reads its input once, in constant memory per signature.
"""
import argparse
import re
import sys

ERROR_RE = re.compile(
    r"\b(error|err|fatal|fail(ed|ure)?|panic|critical|crit|emerg|alert|exception|traceback|"
    r"segfault|oom|killed|denied|refused|timed? ?out|unreachable|abort(ed)?)\b|level=(error|fatal|crit)",
    re.IGNORECASE,
)
# Leading timestamps: ISO 8601, syslog "Mon DD HH:MM:SS", and bracketed variants.
TS_PATTERNS = [
    re.compile(r"^\[?(\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?)\]?\s*"),
    re.compile(r"^\[?([A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2})\]?\s*"),
    re.compile(r"^\[?(\d{2}/[A-Z][a-z]{2}/\d{4}:\d{2}:\d{2}:\d{2}(?: [+-]\d{4})?)\]?\s*"),
    re.compile(r"^\[\s*(\d+\.\d+)\]\s*"),  # dmesg seconds since boot
]
# "host prog[pid]: " after a syslog/journal timestamp.
SYSLOG_PREFIX = re.compile(r"^([\w.-]+) ([\w./@-]+)(\[\d+\])?: ")
MASKS = [
    (re.compile(r"\b\d{4}[-/]\d{2}[-/]\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?"), "<ts>"),
    (re.compile(r"\b\d{2}:\d{2}:\d{2}(?:[.,]\d+)?\b"), "<ts>"),
    (re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"), "<uuid>"),
    (re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}(?::\d+)?\b"), "<ip>"),
    (re.compile(r"\b(?:[0-9a-fA-F]{1,4}:){2,7}[0-9a-fA-F]{1,4}\b"), "<ip>"),
    (re.compile(r"\b0x[0-9a-fA-F]+\b"), "<hex>"),
    (re.compile(r"\b(?=[0-9a-fA-F]*\d)(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{8,}\b"), "<hex>"),
    (re.compile(r"(?<![\w.])(?:/[\w.@%+-]+){2,}/?"), "<path>"),
    (re.compile(r"\"[^\"]*\"|'[^']*'"), "<str>"),
    (re.compile(r"(?<![A-Za-z])[-+]?\d+(?:\.\d+)?(?:ms|s|m|h|kB|KB|MB|GB|B|%)?(?![A-Za-z])"), "<n>"),
]
SPACES = re.compile(r"\s+")


def split_timestamp(line):
    """Return (timestamp or None, rest of the line, whether it is syslog-style)."""
    for i, pat in enumerate(TS_PATTERNS):
        m = pat.match(line)
        if m:
            return m.group(1), line[m.end():], i == 1
    return None, line, False


def signature(rest, syslog):
    """Mask the variable parts of a log line (timestamp already removed)."""
    m = SYSLOG_PREFIX.match(rest) if syslog else None
    if m:
        rest = m.group(2) + ": " + rest[m.end():]
    for pat, repl in MASKS:
        rest = pat.sub(repl, rest)
    return SPACES.sub(" ", rest).strip()[:240]


def read_lines(paths):
    for path in paths:
        if path == "-":
            stream = sys.stdin
            for n, line in enumerate(stream, 1):
                yield "-", n, line
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            for n, line in enumerate(f, 1):
                yield path, n, line


def cut(s, width):
    return s if len(s) <= width else s[: width - 1] + "…"


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", default=["-"], help="log files, or - for stdin (default)")
    ap.add_argument("--top", type=int, default=15, help="signatures to show (default 15)")
    ap.add_argument("--all", action="store_true", help="group every line, not only error-like ones")
    ap.add_argument("--match", help="group only lines matching this regular expression")
    ap.add_argument("--width", type=int, default=160, help="example width (default 160)")
    args = ap.parse_args(argv)
    select = re.compile(args.match) if args.match else (None if args.all else ERROR_RE)

    groups = {}
    total = picked = 0
    for path, n, raw in read_lines(args.files or ["-"]):
        total += 1
        line = raw.rstrip("\r\n")
        if not line.strip() or line.startswith("-- "):  # journalctl "-- Boot …" markers
            continue
        if select is not None and not select.search(line):
            continue
        picked += 1
        ts, rest, syslog = split_timestamp(line)
        sig = signature(rest, syslog)
        where = ts or ("line %d" % n if len(args.files) <= 1 else "%s:%d" % (path, n))
        g = groups.get(sig)
        if g is None:
            groups[sig] = [1, where, where, line.strip()]
        else:
            g[0] += 1
            g[2] = where

    ordered = sorted(groups.items(), key=lambda kv: (-kv[1][0], kv[0]))
    shown = ordered[: max(args.top, 0)]
    print("lines %d, matched %d, signatures %d%s" % (
        total, picked, len(groups),
        ", showing top %d" % len(shown) if len(shown) < len(ordered) else ""))
    for sig, (count, first, last, example) in shown:
        seen = first if first == last else "%s → %s" % (first, last)
        print("\n%6d  %s" % (count, seen))
        print("  sig: %s" % cut(sig, args.width))
        print("  ex:  %s" % cut(example, args.width))
    if len(shown) < len(ordered):
        rest = sum(g[0] for _, g in ordered[len(shown):])
        print("\n… %d more signatures (%d lines); use --top to see them" % (len(ordered) - len(shown), rest))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BrokenPipeError:
        sys.exit(0)
    except (OSError, re.error) as e:
        print("triage: %s" % e, file=sys.stderr)
        sys.exit(1)
