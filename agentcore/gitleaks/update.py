#!/usr/bin/env python3
"""Regenerate rules.json from gitleaks' default config (MIT, see LICENSE).

    git clone --depth 1 https://github.com/gitleaks/gitleaks /tmp/gitleaks
    python3 agentcore/gitleaks/update.py /tmp/gitleaks/config/gitleaks.toml \
        "$(git -C /tmp/gitleaks rev-parse HEAD)" > agentcore/gitleaks/rules.json

Only what agentcore's masker reads is kept: per rule its id, regex, secret
group, entropy, keywords and the allowlists that apply to text (regexes,
stopwords); the global allowlist's regexes and stopwords. Rules that match
file paths only are left out (command output has no path).
"""
import json
import sys
import tomllib

src, commit = sys.argv[1], sys.argv[2]
with open(src, "rb") as f:
    c = tomllib.load(f)


def allow(a):
    out = {}
    for k in ("regexes", "stopwords"):
        if a.get(k):
            out[k] = a[k]
    if a.get("regexTarget"):
        out["regexTarget"] = a["regexTarget"]
    if a.get("condition"):
        out["condition"] = a["condition"]
    if a.get("paths"):
        out["paths"] = True  # a path criterion: never met by command output
    return out


rules = []
for r in c["rules"]:
    if "regex" not in r:
        continue
    rule = {"id": r["id"], "regex": r["regex"], "keywords": [k.lower() for k in r.get("keywords", [])]}
    if r.get("secretGroup"):
        rule["secretGroup"] = r["secretGroup"]
    if r.get("entropy"):
        rule["entropy"] = r["entropy"]
    al = [allow(a) for a in r.get("allowlists", [])]
    al = [a for a in al if a]
    if al:
        rule["allowlists"] = al
    rules.append(rule)
g = c.get("allowlist", {})
out = {
    "source": "https://github.com/gitleaks/gitleaks/blob/%s/config/gitleaks.toml" % commit,
    "allowlist": {"regexes": g.get("regexes", []), "stopwords": g.get("stopwords", [])},
    "rules": rules,
}
json.dump(out, sys.stdout, indent=1, sort_keys=True)
sys.stdout.write("\n")
