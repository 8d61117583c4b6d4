#!/usr/bin/env bash
# Builds the release: for each architecture (this machine's by default; ARCHES="amd64 arm64"
# for a published release) a static thinbot binary (CGO_ENABLED=0, -trimpath), a tarball
# (binary, skill packs, deploy files, README) and a Debian package, each with a SHA-256 sum.
# Usage: deploy/release.sh [OUTDIR]   (default: dist/). Needs go, tar, dpkg-deb, gzip.
#        deploy/release.sh --version   prints the Debian version it would give the package.
# DEBFULLNAME and DEBEMAIL (Debian's variables) name the package's maintainer.
#
# The Debian package installs /usr/bin/thinbot, its man page (generated from the binary's
# own help), the systemd unit, the skill packs in /usr/share/thinbot/skills (root-owned,
# written by `thinbot skills install`), /usr/share/doc/thinbot (copyright: thinbot and every
# Go module linked into the binary, with their licenses; changelog.gz) and
# /etc/thinbot/thinbot.example.yaml (a conffile). postinst creates the `thinbot` system user,
# /etc/thinbot (0750 root:thinbot) and /var/lib/thinbot (0700 thinbot:thinbot); the service is
# not enabled until /etc/thinbot/thinbot.yaml exists and an operator enables it. Remove and
# purge keep the audit chain: see postrm below. lintian reports nothing but the overrides
# below, each with its reason (tests/deb_test.go runs it).
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
  if ! git rev-parse --verify -q HEAD >/dev/null 2>&1; then
    echo "0.0~dev" # not a git checkout (an exported tree): below every release
    return
  fi
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
# This machine's architecture unless told: building every one took 12 minutes on two cores.
arches=${ARCHES:-$(go env GOARCH)}
mtime='2026-01-01 00:00Z'
maintainer="${DEBFULLNAME:-thinbot maintainers} <${DEBEMAIL:-thinbot@localhost}>"

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

# manpage: thinbot(1) in roff, from the binary's own help (`thinbot help` and each command's
# -h), so that it says what the binary does.
manpage() {
  local bin=$1 c
  roff() { sed -e 's/\\/\\e/g' -e "s/^[.']/\\\\\&&/"; }
  printf '.TH THINBOT 1 "%s" "thinbot %s" "User Commands"\n' "$(date -u -d "$mtime" +%Y-%m-%d)" "$version"
  printf '.SH NAME\nthinbot \\- a thin, audited LLM agent for chat threads and terminals\n'
  printf '.SH SYNOPSIS\n.B thinbot\n.I COMMAND\n[flags] [args]\n.SH DESCRIPTION\n.nf\n'
  "$bin" help | roff
  printf '.fi\n.SH COMMANDS\n'
  for c in $("$bin" help | awk '/^commands:/ {on=1; next} on && NF == 0 {exit} on {print $1}'); do
    [ "$c" = help ] && continue
    printf '.SS %s\n.nf\n' "$c"
    "$bin" "$c" -h 2>&1 | roff
    printf '.fi\n'
  done
  for c in verify export tail timeline rebuild archive restore; do
    printf '.SS audit %s\n.nf\n' "$c"
    "$bin" audit "$c" -h 2>&1 | roff
    printf '.fi\n'
  done
  printf '.SH FILES\n.TP\n/etc/thinbot/thinbot.yaml\nthe daemon'"'"'s config (see thinbot.example.yaml beside it)\n'
  printf '.TP\n/var/lib/thinbot\nthe daemon'"'"'s state: the event chain (events.db) and its journal (audit.jsonl)\n'
  printf '.SH SEE ALSO\n/usr/share/doc/thinbot/README.md\n'
}

# copyright: thinbot's notice, then each Go module linked into the binary (go version -m)
# with its license file from the module cache; Apache-2.0 and MPL-2.0 by reference to
# /usr/share/common-licenses, as Debian Policy 12.5 asks.
copyright() {
  local bin=$1 mod ver dir f
  cat <<HEAD
thinbot
Source: https://github.com/thinbot/thinbot

Copyright: the thinbot authors.
License: the thinbot repository carries no license file yet; until it does, no license is
 granted beyond what the authors grant you directly.

/usr/bin/thinbot is a static Go binary: it contains the Go standard library and the Go
modules below, and the gitleaks secret rules (agentcore/gitleaks), each under its license.

HEAD
  printf 'Go %s (the standard library and runtime)\n' "$(go env GOVERSION)"
  license "$(go env GOROOT)/LICENSE"
  printf 'gitleaks rules (agentcore/gitleaks/rules.json)\n'
  license agentcore/gitleaks/LICENSE
  go version -m "$bin" | awk '$1 == "dep" {print $2, $3}' | while read -r mod ver; do
    dir=$(go mod download -json "$mod@$ver" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')
    printf '%s %s\n' "$mod" "$ver"
    found=
    shopt -s nocaseglob
    for f in "$dir"/licen[cs]e* "$dir"/copying* "$dir"/notice*; do
      [ -f "$f" ] && license "$f" && found=1
    done
    shopt -u nocaseglob
    [ -n "$found" ] || { echo "release.sh: no license file in $mod $ver ($dir)" >&2; exit 1; }
  done
}
license() {
  if grep -q 'Apache License' "$1" && grep -q 'Version 2.0' "$1"; then
    echo ' Apache-2.0: see /usr/share/common-licenses/Apache-2.0'
  elif grep -q 'Mozilla Public License' "$1" && grep -q 'Version 2.0' "$1"; then
    echo ' MPL-2.0: see /usr/share/common-licenses/MPL-2.0'
  else
    # A dual license that appends the GPL's full text (libcap's psx): its own
    # words, then the GPL by reference.
    awk '/^[[:space:]]*GNU GENERAL PUBLIC LICENSE[[:space:]]*$/ {gpl = 1}
      gpl && /^[[:space:]]*Version [23],/ {v = $2; sub(/,/, "", v); print " GPL-" v ": see /usr/share/common-licenses/GPL-" v; exit}
      !gpl {print}' "$1" | sed -e 's/^[[:space:]]*$/./' -e 's/^/ /'
  fi
  echo
}

for goarch in $arches; do
  name="thinbot-${version}-${goos}-${goarch}"
  stage="$work/$name"
  mkdir -p "$stage/deploy"
  cp "$work/thinbot-$goarch" "$stage/thinbot"

  # Tarball: binary, skill packs (text and scripts, from the binary), deploy files, README.
  "$work/thinbot-host" skills install --bot-user 65534 "$stage/skills" >/dev/null
  cp skills/README.md "$stage/skills/"
  cp deploy/thinbot.example.yaml deploy/thinbot.service deploy/mattermost.md deploy/slack.md deploy/slack-manifest.yaml deploy/fleet.md deploy/alerts.md \
    deploy/operations.md deploy/console.md deploy/security.md deploy/audit.md deploy/measurements.md "$stage/deploy/"
  cp README.md "$stage/"
  tar -C "$work" --sort=name --owner=0 --group=0 --numeric-owner --mtime="$mtime" -czf "$out/$name.tar.gz" "$name"
  (cd "$out" && sha256sum "$name.tar.gz" > "$name.tar.gz.sha256")
  cp "$stage/thinbot" "$out/thinbot-${goos}-${goarch}"
  echo "$out/$name.tar.gz"

  # Debian package.
  root="$work/deb-$goarch"
  install -d -m 0755 "$root/DEBIAN" "$root/usr/bin" "$root/usr/lib/systemd/system" \
    "$root/usr/share/thinbot" "$root/usr/share/doc/thinbot" "$root/usr/share/man/man1" \
    "$root/usr/share/lintian/overrides"
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
  install -m 0644 README.md deploy/mattermost.md deploy/slack.md deploy/slack-manifest.yaml deploy/fleet.md deploy/alerts.md \
    deploy/operations.md deploy/console.md deploy/security.md deploy/audit.md deploy/measurements.md "$root/usr/share/doc/thinbot/"
  manpage "$work/thinbot-host" | gzip -9n > "$root/usr/share/man/man1/thinbot.1.gz"
  copyright "$stage/thinbot" > "$root/usr/share/doc/thinbot/copyright"
  # The package is native (its version has no Debian revision: thinbot packages itself), so
  # Policy 12.7 names its changelog changelog.gz, not changelog.Debian.gz.
  cat <<CHANGELOG | gzip -9n > "$root/usr/share/doc/thinbot/changelog.gz"
thinbot (${debversion}) unstable; urgency=medium

  * Built from commit $(git rev-parse --short=12 HEAD 2>/dev/null || echo "(none: not a git checkout)") (git describe: ${version}).
    The changes: the repository's history.

 -- ${maintainer}  $(TZ=UTC git log -1 --format=%cd --date=format-local:'%a, %d %b %Y %H:%M:%S +0000' HEAD 2>/dev/null || date -u -d "$mtime" -R)
CHANGELOG
  # Each override says why the tag does not apply (lintian prints the tag otherwise).
  {
    echo '# Go binaries are static on purpose (CGO_ENABLED=0): no libc dependency, one file to'
    echo '# copy; lintian exempts them only when it sees golang-go among the build dependencies.'
    echo 'thinbot: statically-linked-binary [usr/bin/thinbot]'
    echo '# /etc/thinbot holds the bot tokens and API keys the operator writes: root:thinbot'
    echo '# 0750, and its example config 0640 like the configs written from it (postinst sets them).'
    echo 'thinbot: non-standard-dir-perm 0750 != 0755 [etc/thinbot/]'
    echo 'thinbot: non-standard-file-perm 0640 != 0644 [etc/thinbot/thinbot.example.yaml]'
    echo '# No debhelper builds this package: its scripts call systemctl as dh_installsystemd'"'"'s'
    echo '# snippets do, only where systemd runs (/run/systemd/system) and never failing the script.'
    echo 'thinbot: maintainer-script-calls-systemctl'
    if [ -z "${DEBEMAIL:-}" ]; then
      echo '# Built without DEBEMAIL: a local build, not a release to publish.'
      echo 'thinbot: bogus-mail-host'
      echo 'thinbot: bogus-mail-host-in-debian-changelog'
    fi
  } > "$root/usr/share/lintian/overrides/thinbot"
  chmod 0644 "$root/usr/share/man/man1/thinbot.1.gz" "$root/usr/share/doc/thinbot/copyright" \
    "$root/usr/share/doc/thinbot/changelog.gz" "$root/usr/share/lintian/overrides/thinbot"
  size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
  cat > "$root/DEBIAN/control" <<CONTROL
Package: thinbot
Version: ${debversion}
Architecture: ${goarch}
Maintainer: ${maintainer}
Installed-Size: ${size}
Depends: adduser
Recommends: python3
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
# Purge removes what the package made and nothing else: dpkg removes the
# conffile (thinbot.example.yaml), and the two directories postinst made go if
# they are empty. What the operator and the daemon wrote stays where it is:
# the config and secrets in /etc/thinbot, and the audit chain in
# /var/lib/thinbot (events.db, audit.jsonl, archives), which is evidence: a
# purge must not destroy it, and left in place a reinstall continues the same
# chain rather than starting a second one at seq 1. Deleting it is the
# operator's own step, said here. The system user stays too (Debian practice:
# files elsewhere may still carry its uid).
if [ "$1" = purge ]; then
  for d in /etc/thinbot /var/lib/thinbot; do
    [ -d "$d" ] && rmdir --ignore-fail-on-non-empty "$d"
  done
  if [ -d /var/lib/thinbot ]; then
    echo "thinbot: purge kept /var/lib/thinbot: the audit chain (events.db, audit.jsonl, archives) is evidence." >&2
    echo "thinbot: archive or copy it (thinbot audit export), then delete it yourself: rm -r /var/lib/thinbot" >&2
  fi
  if [ -d /etc/thinbot ]; then
    echo "thinbot: purge kept /etc/thinbot: the config and secrets written there are not the package's." >&2
  fi
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
