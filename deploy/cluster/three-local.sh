#!/usr/bin/env bash
# Three thinbot nodes of one cluster on this host, on loopback ports (deploy/cluster.md):
# a try-out of failover, and the shape of a three-host deployment.
#
#   deploy/cluster/three-local.sh up   BASE.yaml DIR   # certs, configs, three `thinbot serve`
#   deploy/cluster/three-local.sh status DIR           # each node's /readyz
#   deploy/cluster/three-local.sh down DIR             # SIGTERM all three
#
# BASE.yaml is a thinbot config without listen, state_dir and cluster (platform, model,
# channels, ...); each node gets a copy with listen 127.0.0.1:808N, state_dir DIR/nN/state and
# a cluster section (raft on 127.0.0.1:730N, mutual TLS from a CA made here with openssl, one
# shared button key). The chat's callback URL in BASE.yaml may name any node: followers forward
# to the leader. THINBOT names the binary (default: thinbot on PATH); HTTP_BASE and RAFT_BASE
# move the ports (defaults 8080 and 7300: nodes on BASE+1..BASE+3).
set -euo pipefail
thinbot=${THINBOT:-thinbot}
cmd=${1:-}
http_base=${HTTP_BASE:-8080}
raft_base=${RAFT_BASE:-7300}

node_pid() { cat "$1/n$2/pid" 2>/dev/null || true; }

case "$cmd" in
up)
	base=$2 dir=$3
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	umask 077
	if [ ! -f "$dir/ca.pem" ]; then
		openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 3650 \
			-subj "/CN=thinbot cluster CA" -keyout "$dir/ca.key" -out "$dir/ca.pem" 2>/dev/null
		head -c 32 /dev/urandom >"$dir/action.key"
	fi
	peers=""
	for n in 1 2 3; do
		peers+="    - {id: n$n, raft_address: \"127.0.0.1:$((raft_base + n))\", http_address: \"http://127.0.0.1:$((http_base + n))\"}"$'\n'
	done
	for n in 1 2 3; do
		d=$dir/n$n
		mkdir -p "$d/state"
		if [ ! -f "$d/node.pem" ]; then
			openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=n$n" \
				-keyout "$d/node.key" -out "$d/node.csr" 2>/dev/null
			openssl x509 -req -in "$d/node.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" -CAcreateserial \
				-days 3650 -out "$d/node.pem" \
				-extfile <(printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n') 2>/dev/null
		fi
		{
			cat "$base"
			printf '\nlisten: 127.0.0.1:%s\nstate_dir: %s\n' "$((http_base + n))" "$d/state"
			printf 'cluster:\n  id: local-three\n  node_id: n%s\n  action_key_file: %s\n' "$n" "$dir/action.key"
			printf '  tls: {cert_file: %s, key_file: %s, ca_file: %s}\n' "$d/node.pem" "$d/node.key" "$dir/ca.pem"
			printf '  peers:\n%s' "$peers"
		} >"$d/thinbot.yaml"
		"$thinbot" config check --config "$d/thinbot.yaml" >/dev/null
	done
	for n in 1 2 3; do
		d=$dir/n$n
		nohup "$thinbot" serve --config "$d/thinbot.yaml" >>"$d/thinbot.log" 2>&1 &
		echo $! >"$d/pid"
	done
	echo "started n1 n2 n3 (logs: $dir/nN/thinbot.log); '$0 status $dir' shows who leads"
	;;
status)
	dir=$2
	for n in 1 2 3; do
		pid=$(node_pid "$dir" "$n")
		state=down
		if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
			state=$(curl -s -m 2 "http://127.0.0.1:$((http_base + n))/readyz" | head -n 1 || true)
			[ -n "$state" ] || state="starting"
		fi
		echo "n$n: $state"
	done
	;;
down)
	dir=$2
	for n in 1 2 3; do
		pid=$(node_pid "$dir" "$n")
		[ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null || true
		rm -f "$dir/n$n/pid"
	done
	;;
*)
	sed -n '2,14p' "$0" >&2
	exit 2
	;;
esac
