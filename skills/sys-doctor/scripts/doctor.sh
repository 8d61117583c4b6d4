#!/usr/bin/env bash
# doctor.sh - read-only machine check-up for thinbot's sys-doctor skill.
# Usage: bash doctor.sh [--problems] [load|mem|disk|inodes|units|procs|ports|oom]...
# Reads /proc (or $DOCTOR_PROC, for tests) and runs read-only listing commands.
# It writes nothing and changes nothing. Lines starting with "!!" are problems.
set -u
export LC_ALL=C
PROC=${DOCTOR_PROC:-/proc}

have() { command -v "$1" >/dev/null 2>&1; }

sec_load() {
	echo "== load =="
	local l1 l5 l15 cpus up
	if ! read -r l1 l5 l15 _ <"$PROC/loadavg"; then echo "(loadavg unavailable)"; return; fi
	cpus=$(grep -c '^processor' "$PROC/cpuinfo" 2>/dev/null)
	[ "${cpus:-0}" -gt 0 ] || cpus=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
	up=$(awk '{printf "%dd %dh %dm", $1/86400, ($1%86400)/3600, ($1%3600)/60}' "$PROC/uptime" 2>/dev/null)
	echo "load $l1 $l5 $l15  cpus $cpus  up ${up:-?}"
	awk -v l="$l5" -v c="$cpus" 'BEGIN { if (l > c) printf "!! 5-minute load %s is above the %d CPUs\n", l, c }'
}

sec_mem() {
	echo "== mem =="
	awk '
		/^MemTotal:/ {t=$2} /^MemAvailable:/ {a=$2} /^SwapTotal:/ {st=$2} /^SwapFree:/ {sf=$2}
		END {
			if (t == 0) { print "(meminfo unavailable)"; exit }
			printf "mem total %.1fG available %.1fG (%.0f%%)  swap %.1fG used %.1fG\n", t/1048576, a/1048576, 100*a/t, st/1048576, (st-sf)/1048576
			if (a/t < 0.10) printf "!! only %.0f%% of memory available\n", 100*a/t
			if (st > 0 && (st-sf)/st > 0.80) printf "!! swap %.0f%% used\n", 100*(st-sf)/st
		}' "$PROC/meminfo" 2>/dev/null || echo "(meminfo unavailable)"
}

# df_report TITLE DF-FLAGS: filesystems at >= 90% get a "!!" line.
df_report() {
	if ! have df; then echo "(df unavailable)"; return; fi
	df -P "$2" -x tmpfs -x devtmpfs -x squashfs -x overlay 2>/dev/null | awk -v what="$1" '
		NR == 1 { next }
		{ use = $5; sub(/%/, "", use); if (use == "-" || use == "") next
		  printf "%-28s %5s%%  %s\n", $6, use, $1
		  if (use + 0 >= 90) bad = bad sprintf("!! %s %s at %s%%\n", $6, what, use) }
		END { printf "%s", bad }'
}

sec_disk() { echo "== disk =="; df_report "space" -k; }
sec_inodes() { echo "== inodes =="; df_report "inodes" -i; }

sec_units() {
	echo "== units =="
	if ! have systemctl || [ ! -d /run/systemd/system ]; then echo "(systemd unavailable)"; return; fi
	local failed
	failed=$(systemctl list-units --state=failed --no-legend --plain --no-pager 2>/dev/null | awk '{print $1}')
	if [ -z "$failed" ]; then echo "no failed units"; return; fi
	for u in $failed; do echo "!! failed unit $u"; done
}

sec_procs() {
	echo "== procs =="
	if ! have ps; then echo "(ps unavailable)"; return; fi
	echo "top by cpu:"
	ps -eo pid,user:12,pcpu,pmem,rss,comm --sort=-pcpu 2>/dev/null | head -n 6
	echo "top by memory:"
	ps -eo pid,user:12,pcpu,pmem,rss,comm --sort=-rss 2>/dev/null | sed -n '2,6p'
}

sec_ports() {
	echo "== ports =="
	if have ss; then
		ss -Htlnu 2>/dev/null | awk '{printf "%-4s %s\n", $1, $5}' | sort -u | head -n 40
		return
	fi
	# Fallback: listening TCP sockets from /proc/net/tcp{,6} (state 0A).
	local f
	for f in "$PROC/net/tcp" "$PROC/net/tcp6"; do
		[ -r "$f" ] || continue
		awk 'NR > 1 && $4 == "0A" { n = split($2, a, ":"); print a[n] }' "$f" 2>/dev/null
	done | sort -u | while read -r hex; do printf 'tcp  port %d\n' "0x$hex"; done | sort -n -k3 | head -n 40
}

sec_oom() {
	echo "== oom =="
	local lines=""
	if have journalctl; then
		lines=$(journalctl -k --since "-24h" --no-pager -q 2>/dev/null | grep -iE 'out of memory|oom-kill|killed process' | tail -n 5)
	fi
	if [ -z "$lines" ] && have dmesg; then
		lines=$(dmesg 2>/dev/null | grep -iE 'out of memory|oom-kill|killed process' | tail -n 5)
	fi
	if [ -z "$lines" ]; then echo "no OOM kills found"; return; fi
	echo "$lines" | sed 's/^/!! /'
}

# --problems prints only the problems ("!!" lines), or that there are none,
# and exits 1 when there are some: a check whose output changes only when
# its result does (the skill command "health", for scheduled checks).
problems=""
if [ "${1:-}" = "--problems" ]; then problems=1; shift; fi
sections=()
for s in "$@"; do [ -n "$s" ] && sections+=("$s"); done
[ ${#sections[@]} -gt 0 ] || sections=(load mem disk inodes units procs ports oom)
status=0
run() {
	for s in "${sections[@]}"; do
		case "$s" in
		load | mem | disk | inodes | units | procs | ports | oom) "sec_$s" ;;
		*) echo "doctor.sh: unknown section $s (load mem disk inodes units procs ports oom)" >&2; return 2 ;;
		esac
	done
}
if [ -z "$problems" ]; then
	run || status=$?
	exit $status
fi
out=$(run) || status=$?
[ $status -eq 0 ] || exit $status
found=$(printf '%s\n' "$out" | grep '^!!')
if [ -n "$found" ]; then
	printf '%s\n' "$found"
	exit 1
fi
echo "no problems found (${sections[*]})"
