#!/usr/bin/env bash
# Builds a release tarball: the static thinbot binary, the skill packs (text and scripts only),
# the deploy files and the README, with SHA-256 sums. Reproducible inputs: -trimpath, no cgo,
# the version from git. Usage: deploy/release.sh [OUTDIR]   (default: dist/)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-dist}
version=$(git describe --tags --always --dirty 2>/dev/null || echo dev)
goos=${GOOS:-linux} goarch=${GOARCH:-amd64}
name="thinbot-${version}-${goos}-${goarch}"
stage="$out/$name"
rm -rf "$stage" && mkdir -p "$stage/skills" "$stage/deploy"
stage=$(cd "$stage" && pwd)

CGO_ENABLED=0 GOOS=$goos GOARCH=$goarch go build -trimpath \
  -ldflags "-s -w -X main.version=${version}" -o "$stage/thinbot" ./cmd/thinbot

# Skill packs: every folder under skills/ with a SKILL.md, without Go tests or test data.
for d in skills/*/; do
  [ -f "$d/SKILL.md" ] || continue
  mkdir -p "$stage/$d"
  (cd "$d" && find . -type f ! -name '*_test.go' ! -path './testdata/*' -print0 | xargs -0 -I{} cp --parents {} "$stage/$d")
done
cp skills/README.md "$stage/skills/"
cp deploy/thinbot.example.yaml deploy/thinbot.service deploy/mattermost.md deploy/slack.md deploy/slack-manifest.yaml "$stage/deploy/"
cp README.md "$stage/"

tar -C "$(dirname "$stage")" --sort=name --owner=0 --group=0 --numeric-owner --mtime='2026-01-01 00:00Z' -czf "$out/$name.tar.gz" "$name"
(cd "$out" && sha256sum "$name.tar.gz" > "$name.tar.gz.sha256")
echo "$out/$name.tar.gz"
echo "Install: tar -xzf $name.tar.gz; install -m 0755 $name/thinbot /usr/local/bin/;"
echo "  cp -r $name/skills /usr/share/thinbot/ (root-owned: sys-doctor's read-only scripts need it)"
