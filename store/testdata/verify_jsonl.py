#!/usr/bin/env python3
"""Verify a thinbot audit.jsonl without thinbot: python3 verify_jsonl.py FILE."""
import hashlib, json, sys

prev, seq = "0" * 64, 0
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
        prev = ev["hash"]
print(f"ok {seq} events, last hash {prev}")
