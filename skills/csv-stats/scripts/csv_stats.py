#!/usr/bin/env python3
"""Streaming data-quality statistics for a CSV file.

Usage: python3 csv_stats.py FILE|- [--delimiter D] [--no-header] [--encoding E]
                                   [--max-columns N] [--json]

One pass, bounded memory: per column it keeps counters, running moments
(Welford), a bounded distinct set and a fixed-seed reservoir sample for
quartiles. Duplicate rows are found by 8-byte row digests (exact for the first
5 million rows). Standard library only.
"""
import argparse
import csv
import hashlib
import io
import json
import math
import random
import re
import sys

MISSING = {"", "na", "n/a", "nan", "null", "none", "nil", "-", "?", "#n/a"}
BOOLS = {"true", "false", "yes", "no", "t", "f", "y", "n"}
INT_RE = re.compile(r"^[+-]?\d+$")
FLOAT_RE = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")
DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$|^\d{1,2}/\d{1,2}/\d{4}$")
DATETIME_RE = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?$")
DISTINCT_CAP = 10000
SAMPLE_CAP = 10000
DUP_CAP = 5_000_000
TYPES = ("int", "float", "bool", "date", "datetime", "text")


def kind(v):
    if INT_RE.match(v):
        return "int"
    if FLOAT_RE.match(v):
        return "float"
    lv = v.lower()
    if lv in BOOLS:
        return "bool"
    if DATE_RE.match(v):
        return "date"
    if DATETIME_RE.match(v):
        return "datetime"
    return "text"


class Column:
    def __init__(self, name, seed):
        self.name = name
        self.missing = 0
        self.types = dict.fromkeys(TYPES, 0)
        self.odd = {}  # first example of each type
        self.distinct = set()
        self.distinct_over = False
        self.n = 0
        self.mean = 0.0
        self.m2 = 0.0
        self.min = None
        self.max = None
        self.sample = []
        self.seen = 0
        self.rng = random.Random(seed)
        self.minlen = None
        self.maxlen = 0

    def add(self, raw):
        v = raw.strip()
        if v.lower() in MISSING:
            self.missing += 1
            return
        k = kind(v)
        self.types[k] += 1
        self.odd.setdefault(k, v)
        if not self.distinct_over:
            self.distinct.add(v)
            if len(self.distinct) > DISTINCT_CAP:
                self.distinct_over = True
                self.distinct = set()
        ln = len(v)
        self.maxlen = max(self.maxlen, ln)
        self.minlen = ln if self.minlen is None else min(self.minlen, ln)
        if k in ("int", "float"):
            x = float(v)
            if math.isinf(x):
                return
            self.n += 1
            d = x - self.mean
            self.mean += d / self.n
            self.m2 += d * (x - self.mean)
            self.min = x if self.min is None else min(self.min, x)
            self.max = x if self.max is None else max(self.max, x)
            self.seen += 1
            if len(self.sample) < SAMPLE_CAP:
                self.sample.append(x)
            else:
                j = self.rng.randrange(self.seen)
                if j < SAMPLE_CAP:
                    self.sample[j] = x

    def summary(self, rows):
        present = rows - self.missing
        counts = {k: c for k, c in self.types.items() if c}
        dominant = "empty"
        share = 0.0
        if present > 0 and counts:
            numeric = self.types["int"] + self.types["float"]
            if self.types["float"] and numeric >= max(counts.values()):
                dominant, fit = "float", numeric
            else:
                dominant = max(counts, key=lambda k: (counts[k], -TYPES.index(k)))
                fit = counts[dominant]
            share = fit / present
        out = {
            "name": self.name,
            "type": dominant,
            "type_share": round(share, 4),
            "missing": self.missing,
            "distinct": (">%d" % DISTINCT_CAP) if self.distinct_over else len(self.distinct),
        }
        if share < 1 and present:
            fits = ("int", "float") if dominant == "float" else (dominant,)
            for k in TYPES:
                if k not in fits and k in self.odd:
                    out["odd"] = self.odd[k]
                    break
        if self.n:
            s = sorted(self.sample)
            q = lambda p: s[min(len(s) - 1, int(p * (len(s) - 1) + 0.5))]
            out.update(min=num(self.min), max=num(self.max), mean=num(self.mean),
                       sd=num(math.sqrt(self.m2 / (self.n - 1)) if self.n > 1 else 0.0),
                       p25=num(q(0.25)), p50=num(q(0.5)), p75=num(q(0.75)))
        elif present:
            out.update(minlen=self.minlen, maxlen=self.maxlen)
        return out


def num(x):
    if x == int(x) and abs(x) < 1e15:
        return int(x)
    return float("%.6g" % x)


def sniff(head, path):
    if path.endswith((".tsv", ".tab")):
        return "\t"
    try:
        return csv.Sniffer().sniff(head, delimiters=",;\t|").delimiter
    except csv.Error:
        return ","


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file", help="CSV file, or - for stdin")
    ap.add_argument("--delimiter")
    ap.add_argument("--no-header", action="store_true")
    ap.add_argument("--encoding", default="utf-8")
    ap.add_argument("--max-columns", type=int, default=60)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)

    if a.file == "-":
        stream = io.TextIOWrapper(sys.stdin.buffer, encoding=a.encoding, errors="replace", newline="")
    else:
        stream = open(a.file, encoding=a.encoding, errors="replace", newline="")
    with stream:
        head = stream.read(65536)
        delim = a.delimiter or sniff(head, a.file)
        if delim == "\\t":
            delim = "\t"
        rest = stream
        csv.field_size_limit(16 << 20)
        reader = csv.reader(chain(head, rest), delimiter=delim)
        header = None if a.no_header else next(reader, None)
        cols = []
        if header is not None:
            cols = [Column(h.strip() or "c%d" % (i + 1), i) for i, h in enumerate(header)]
        rows = ragged = empty = dups = 0
        hashes = set()
        dup_capped = False
        for rec in reader:
            if not rec or (len(rec) == 1 and not rec[0].strip()):
                empty += 1
                continue
            rows += 1
            if header is None and not cols:
                cols = [Column("c%d" % (i + 1), i) for i in range(len(rec))]
            width = len(cols)
            if len(rec) != width:
                ragged += 1
                if header is None and len(rec) > width:
                    cols += [Column("c%d" % (i + 1), i) for i in range(width, len(rec))]
            for c, v in zip(cols, rec):
                c.add(v)
            for c in cols[len(rec):]:
                c.missing += 1
            if rows <= DUP_CAP:
                h = hashlib.blake2b("\x1f".join(rec).encode("utf-8", "replace"), digest_size=8).digest()
                if h in hashes:
                    dups += 1
                else:
                    hashes.add(h)
            else:
                dup_capped = True

    result = {
        "file": a.file,
        "delimiter": delim,
        "rows": rows,
        "columns": len(cols),
        "ragged_rows": ragged,
        "empty_lines": empty,
        "duplicate_rows": dups,
        "duplicates_exact": not dup_capped,
        "column_stats": [c.summary(rows) for c in cols],
    }
    if a.json:
        json.dump(result, sys.stdout, ensure_ascii=False)
        print()
        return 0
    print("file %s  delimiter %r  rows %d  columns %d  ragged %d  empty-lines %d  duplicates %d%s" % (
        a.file, delim, rows, len(cols), ragged, empty, dups,
        "" if not dup_capped else " (counted over the first %d rows)" % DUP_CAP))
    for s in result["column_stats"][: a.max_columns]:
        parts = ["%-20s" % s["name"][:20], "%s" % s["type"]]
        if s["type_share"] < 1 and s["type"] != "empty":
            parts[-1] += " %.1f%%" % (100 * s["type_share"])
        if rows:
            parts.append("missing %d (%.1f%%)" % (s["missing"], 100.0 * s["missing"] / rows))
        parts.append("distinct %s" % s["distinct"])
        if "min" in s:
            parts.append("min %s max %s mean %s sd %s p25 %s p50 %s p75 %s" % (
                s["min"], s["max"], s["mean"], s["sd"], s["p25"], s["p50"], s["p75"]))
        elif "minlen" in s:
            parts.append("len %s-%s" % (s["minlen"], s["maxlen"]))
        if "odd" in s:
            parts.append("odd: %r" % s["odd"][:40])
        print("  " + "  ".join(parts))
    if len(cols) > a.max_columns:
        print("  … %d more columns (use --max-columns or --json)" % (len(cols) - a.max_columns))
    return 0


def chain(head, rest):
    """Yield the lines of head followed by the rest of the stream."""
    buf = io.StringIO(head)
    last = ""
    for line in buf:
        if not line.endswith("\n"):
            last = line
            break
        yield line
    first = True
    for line in rest:
        if first:
            line, first = last + line, False
        yield line
    if first and last:
        yield last


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BrokenPipeError:
        sys.exit(0)
    except (OSError, csv.Error, UnicodeError) as e:
        print("csv_stats: %s" % e, file=sys.stderr)
        sys.exit(1)
