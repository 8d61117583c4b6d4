#!/usr/bin/env python3
"""Verify a thinbot audit.jsonl without thinbot: python3 verify_jsonl.py FILE [SEQ:HASH].

SEQ:HASH is the anchor a file starts after: the head of the archive before it
(its seal's "head"; for an archive's lines, the seal's "prev")."""
import hashlib, json, sys

prev, seq, n = "0" * 64, 0, 0
if len(sys.argv) > 2:
    seq, prev = int(sys.argv[2].split(":")[0]), sys.argv[2].split(":")[1]
with open(sys.argv[1], "rb") as f:
    for line in f:
        if not line.endswith(b"\n"):
            sys.exit(f"seq {seq + 1}: last line is cut")
        ev = json.loads(line)
        suffix = b',"hash":"' + ev["hash"].encode() + b'"}\n'
        if not line.endswith(suffix):
            sys.exit(f"seq {seq + 1}: line does not end with its hash")
        body = line[: -len(suffix)] + b"}"
        seq += 1
        if ev["seq"] != seq or ev["prev"] != prev:
            sys.exit(f"seq {seq}: found seq {ev['seq']}, prev {ev['prev'][:12]}: chain broken")
        if hashlib.sha256(body).hexdigest() != ev["hash"]:
            sys.exit(f"seq {seq}: hash mismatch")
        prev, n = ev["hash"], n + 1
print(f"ok {n} events, last seq {seq}, last hash {prev}")
