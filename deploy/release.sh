#!/usr/bin/env bash
# Builds the release: for each architecture (amd64 and arm64; ARCHES overrides) a static
# thinbot binary (CGO_ENABLED=0, -trimpath), a tarball (binary, skill packs, deploy files,
# README) and a Debian package, each with a SHA-256 sum.
# Usage: deploy/release.sh [OUTDIR]   (default: dist/). Needs go, tar, dpkg-deb.
#        deploy/release.sh --version   prints the Debian version it would give the package.
#
# The Debian package installs /usr/bin/thinbot, the systemd unit, the skill packs in
# /usr/share/thinbot/skills (root-owned, written by `thinbot skills install`), and
# /etc/thinbot/thinbot.example.yaml (a conffile). postinst creates the `thinbot` system user,
# /etc/thinbot (0750 root:thinbot) and /var/lib/thinbot (0700 thinbot:thinbot); the service is
# not enabled until /etc/thinbot/thinbot.yaml exists and an operator enables it. Purge removes
# /etc/thinbot and /var/lib/thinbot (the event chain!); remove keeps them.
set -euo pipefail
cd "$(dirname "$0")/.."

# Versions. The binary reports `git describe` (v1.2.3, v1.2.3-4-gabc1234, or a bare
# commit). The Debian version must sort in release order whatever the commit hash is:
#   tag v1.2.3 on HEAD          -> 1.2.3
#   4 commits after v1.2.3      -> 1.2.3+git<UTC commit time>.<hash>   (above 1.2.3, below 1.2.4)
#   no tag before HEAD          -> 0.0~git<UTC commit time>.<hash>     (below any release)
# The commit time (yyyymmddhhmmss, UTC, committer date) orders two untagged builds; the
# hash only names the commit. A dirty tree adds ".dirty". tests/deb_test.go checks the
# order with dpkg --compare-versions.
debian_version() {
  local tag when hash dirty=""
  when=$(TZ=UTC git log -1 --format=%cd --date=format-local:%Y%m%d%H%M%S HEAD)
  hash=$(git rev-parse --short=7 HEAD)
  git diff --quiet HEAD 2>/dev/null || dirty=.dirty
  if tag=$(git describe --tags --abbrev=0 --match 'v[0-9]*' HEAD 2>/dev/null); then
    if [ "$(git rev-parse "$tag^{commit}")" = "$(git rev-parse HEAD)" ]; then
      echo "${tag#v}${dirty:++git${when}.${hash}${dirty}}"
    else
      echo "${tag#v}+git${when}.${hash}${dirty}"
    fi
  else
    echo "0.0~git${when}.${hash}${dirty}"
  fi
}
if [ "${1:-}" = --version ]; then
  # deploy/release.sh --version: print the Debian version of this checkout and exit.
  debian_version
  exit 0
fi
out=${1:-dist}
mkdir -p "$out"
out=$(cd "$out" && pwd)
version=$(git describe --tags --always --dirty 2>/dev/null || echo dev)
debversion=$(debian_version)
goos=linux
arches=${ARCHES:-amd64 arm64}
mtime='2026-01-01 00:00Z'

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
hostarch=$(go env GOARCH)
for goarch in $arches; do
  CGO_ENABLED=0 GOOS=$goos GOARCH=$goarch go build -trimpath \
    -ldflags "-s -w -X main.version=${version}" -o "$work/thinbot-$goarch" ./cmd/thinbot
done
# A binary for this machine writes the skill packs out of itself (thinbot skills install).
if [ -x "$work/thinbot-$hostarch" ]; then
  cp "$work/thinbot-$hostarch" "$work/thinbot-host"
else
  go build -trimpath -o "$work/thinbot-host" ./cmd/thinbot
fi

for goarch in $arches; do
  name="thinbot-${version}-${goos}-${goarch}"
  stage="$work/$name"
  mkdir -p "$stage/deploy"
  cp "$work/thinbot-$goarch" "$stage/thinbot"

  # Tarball: binary, skill packs (text and scripts, from the binary), deploy files, README.
  "$work/thinbot-host" skills install --bot-user 65534 "$stage/skills" >/dev/null
  cp skills/README.md "$stage/skills/"
  cp deploy/thinbot.example.yaml deploy/thinbot.service deploy/mattermost.md deploy/slack.md deploy/slack-manifest.yaml deploy/fleet.md "$stage/deploy/"
  cp README.md "$stage/"
  tar -C "$work" --sort=name --owner=0 --group=0 --numeric-owner --mtime="$mtime" -czf "$out/$name.tar.gz" "$name"
  (cd "$out" && sha256sum "$name.tar.gz" > "$name.tar.gz.sha256")
  cp "$stage/thinbot" "$out/thinbot-${goos}-${goarch}"
  echo "$out/$name.tar.gz"

  # Debian package.
  root="$work/deb-$goarch"
  install -d -m 0755 "$root/DEBIAN" "$root/usr/bin" "$root/usr/lib/systemd/system" \
    "$root/usr/share/thinbot" "$root/usr/share/doc/thinbot"
  install -d -m 0750 "$root/etc/thinbot"
  install -m 0755 "$stage/thinbot" "$root/usr/bin/thinbot"
  # The packaged unit runs /usr/bin/thinbot, and starts even where /srv/ops (the example
  # workspace) does not exist: systemd fails a unit whose ReadWritePaths entry is missing
  # unless it is marked optional with "-".
  sed 's#^\(ExecStart[A-Za-z]*=\)/usr/local/bin/thinbot #\1/usr/bin/thinbot #; s#^ReadWritePaths=/var/lib/thinbot /srv/ops$#ReadWritePaths=/var/lib/thinbot -/srv/ops#' \
    deploy/thinbot.service > "$root/usr/lib/systemd/system/thinbot.service"
  chmod 0644 "$root/usr/lib/systemd/system/thinbot.service"
  install -m 0640 deploy/thinbot.example.yaml "$root/etc/thinbot/thinbot.example.yaml"
  "$work/thinbot-host" skills install --bot-user 65534 "$root/usr/share/thinbot/skills" >/dev/null
  install -m 0644 README.md deploy/mattermost.md deploy/slack.md deploy/slack-manifest.yaml deploy/fleet.md "$root/usr/share/doc/thinbot/"
  size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
  cat > "$root/DEBIAN/control" <<CONTROL
Package: thinbot
Version: ${debversion}
Architecture: ${goarch}
Maintainer: thinbot maintainers <thinbot@localhost>
Installed-Size: ${size}
Depends: adduser
Section: admin
Priority: optional
Homepage: https://github.com/thinbot/thinbot
Description: ChatOps agent daemon for Mattermost and Slack
 thinbot puts an LLM agent into chat threads: read-only commands run at once,
 changes wait for an approver's click, dangerous commands never run, and every
 decision lands in a hash-chained audit log.
CONTROL
  echo /etc/thinbot/thinbot.example.yaml > "$root/DEBIAN/conffiles"
  cat > "$root/DEBIAN/postinst" <<'SCRIPT'
#!/bin/sh
set -e
if [ "$1" = configure ]; then
  # The home is the state dir: adduser creates it (a home it cannot access makes adduser
  # warn on every fresh install), install -d below sets its owner and mode either way.
  if ! getent passwd thinbot >/dev/null; then
    adduser --system --group --home /var/lib/thinbot --shell /usr/sbin/nologin \
      --gecos 'thinbot ChatOps agent' thinbot >/dev/null
  fi
  install -d -m 0750 -o root -g thinbot /etc/thinbot
  chown root:thinbot /etc/thinbot/thinbot.example.yaml
  chmod 0640 /etc/thinbot/thinbot.example.yaml
  install -d -m 0700 -o thinbot -g thinbot /var/lib/thinbot
  if [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null 2>&1 || true
    # Restart a running service on upgrade; a new install waits for its config.
    if systemctl is-active --quiet thinbot.service; then systemctl restart thinbot.service || true; fi
  fi
fi
exit 0
SCRIPT
  cat > "$root/DEBIAN/prerm" <<'SCRIPT'
#!/bin/sh
set -e
if [ "$1" = remove ] && [ -d /run/systemd/system ]; then
  systemctl stop thinbot.service >/dev/null 2>&1 || true
  systemctl disable thinbot.service >/dev/null 2>&1 || true
fi
exit 0
SCRIPT
  cat > "$root/DEBIAN/postrm" <<'SCRIPT'
#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then
  systemctl daemon-reload >/dev/null 2>&1 || true
fi
# Only purge removes what the operator and the daemon wrote: the config and
# secrets in /etc/thinbot and the event chain in /var/lib/thinbot. The system
# user stays (Debian practice: files elsewhere may still carry its uid).
if [ "$1" = purge ]; then
  rm -rf /var/lib/thinbot /etc/thinbot
fi
exit 0
SCRIPT
  chmod 0755 "$root/DEBIAN/postinst" "$root/DEBIAN/prerm" "$root/DEBIAN/postrm"
  chmod 0644 "$root/DEBIAN/control" "$root/DEBIAN/conffiles"
  find "$root" -exec touch -h -d "$mtime" {} +
  deb="$out/thinbot_${debversion}_${goarch}.deb"
  SOURCE_DATE_EPOCH=$(date -d "$mtime" +%s) dpkg-deb --build --root-owner-group -Zxz "$root" "$deb" >/dev/null
  (cd "$out" && sha256sum "$(basename "$deb")" > "$(basename "$deb").sha256")
  echo "$deb"
done
