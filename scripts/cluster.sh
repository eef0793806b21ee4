#!/usr/bin/env bash
# A 3-node nats-server cluster with JetStream on loopback, for running
# several hookgate instances against it (`make cluster`, `make cluster-down`).
#
#   scripts/cluster.sh install   install nats-server (the version in go.mod) if missing
#   scripts/cluster.sh start     start the three nodes (idempotent), wait for a meta leader
#   scripts/cluster.sh stop      stop them (idempotent); data stays in $CLUSTER_DIR
#   scripts/cluster.sh status    which nodes run, and the JetStream meta leader
#
# Environment: CLUSTER_DIR (default ./data/cluster), CLUSTER_PORT (first
# client port, default 24222; nodes use +0..+2, routes +2000.., monitoring
# +4000..), NATS_SERVER (the binary; default: GOBIN or GOPATH/bin).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
dir="${CLUSTER_DIR:-$root/data/cluster}"
base="${CLUSTER_PORT:-24222}"
name="hookgate"
nodes=(1 2 3)

go_bin_dir() {
	local gobin
	gobin="$(go env GOBIN)"
	if [[ -n "$gobin" ]]; then
		echo "$gobin"
	else
		echo "$(go env GOPATH | cut -d: -f1)/bin"
	fi
}

want_version() {
	(cd "$root" && go list -m -f '{{.Version}}' github.com/nats-io/nats-server/v2)
}

bin="${NATS_SERVER:-}"
resolve_bin() {
	if [[ -z "$bin" ]]; then
		bin="$(go_bin_dir)/nats-server"
	fi
}

install() {
	resolve_bin
	local want have
	want="$(want_version)"
	have="$("$bin" --version 2>/dev/null || true)"
	if [[ "$have" == "nats-server: $want" ]]; then
		return 0
	fi
	if [[ -n "${NATS_SERVER:-}" ]]; then
		echo "cluster: NATS_SERVER=$bin is '${have:-missing}', want $want" >&2
		exit 1
	fi
	echo "cluster: installing nats-server $want into $(go_bin_dir)" >&2
	(cd "$root" && go install "github.com/nats-io/nats-server/v2@$want")
}

client_port() { echo $((base + $1 - 1)); }
route_port() { echo $((base + 2000 + $1 - 1)); }
http_port() { echo $((base + 4000 + $1 - 1)); }

urls() {
	local out="" n
	for n in "${nodes[@]}"; do
		out+="${out:+,}nats://127.0.0.1:$(client_port "$n")"
	done
	echo "$out"
}

pid_of() {
	local f="$dir/n$1.pid" pid
	[[ -f "$f" ]] || return 1
	pid="$(cat "$f" 2>/dev/null || true)"
	[[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null || return 1
	# A recycled pid is not ours: check the command line names our config.
	grep -qa "n$1.conf" "/proc/$pid/cmdline" 2>/dev/null || return 1
	echo "$pid"
}

port_busy() {
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

write_conf() {
	local n="$1" routes="" m
	for m in "${nodes[@]}"; do
		routes+="    nats://127.0.0.1:$(route_port "$m")"$'\n'
	done
	mkdir -p "$dir/n$n"
	cat >"$dir/n$n.conf" <<EOF
# written by scripts/cluster.sh
server_name: "n$n"
listen: "127.0.0.1:$(client_port "$n")"
http: "127.0.0.1:$(http_port "$n")"
# hookgate needs max_body_bytes plus 64 KiB of headers; 1 MiB bodies need more
# than the default 1 MB.
max_payload: 4MB
pid_file: "$dir/n$n.pid"
log_file: "$dir/n$n.log"
# max_file_store is left to the server (75% of the free disk): streams reserve
# their max_bytes against it, and hookgate's default retention reserves
# 31 GB per node (10 GB webhooks + 10 GB grants + 1 GB dlq + 10 GB audit).
jetstream {
  store_dir: "$dir/n$n"
  max_memory_store: 256MB
}
cluster {
  name: "$name"
  listen: "127.0.0.1:$(route_port "$n")"
  routes: [
$routes  ]
}
EOF
}

healthy() {
	curl -fsS --max-time 2 "http://127.0.0.1:$(http_port "$1")/healthz" >/dev/null 2>&1
}

start() {
	install
	mkdir -p "$dir"
	local n started=0
	declare -A spawned=()
	for n in "${nodes[@]}"; do
		if pid_of "$n" >/dev/null; then
			continue
		fi
		local p
		for p in "$(client_port "$n")" "$(route_port "$n")" "$(http_port "$n")"; do
			if port_busy "$p"; then
				echo "cluster: port $p is taken by another process; set CLUSTER_PORT to move the cluster" >&2
				exit 1
			fi
		done
		write_conf "$n"
		nohup "$bin" -c "$dir/n$n.conf" >>"$dir/n$n.out" 2>&1 &
		spawned[$n]=$!
		started=$((started + 1))
	done
	# /healthz answers 200 once the node has JetStream and a meta leader.
	local deadline=$((SECONDS + 60))
	for n in "${nodes[@]}"; do
		until healthy "$n"; do
			if ((SECONDS > deadline)); then
				echo "cluster: node n$n not healthy after 60s; see $dir/n$n.log" >&2
				exit 1
			fi
			if [[ -n "${spawned[$n]:-}" ]] && ! kill -0 "${spawned[$n]}" 2>/dev/null; then
				echo "cluster: node n$n exited; see $dir/n$n.log and $dir/n$n.out" >&2
				exit 1
			fi
			sleep 0.2
		done
	done
	if ((started == 0)); then
		echo "cluster: already running"
	else
		echo "cluster: started $started node(s), data in $dir"
	fi
	echo "nats.url: \"$(urls)\""
	echo "nats.replicas: 3"
}

stop() {
	local n pid stopped=0
	for n in "${nodes[@]}"; do
		pid="$(pid_of "$n")" || { rm -f "$dir/n$n.pid"; continue; }
		kill -TERM "$pid" 2>/dev/null || true
		local i
		for i in $(seq 1 100); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$pid" 2>/dev/null; then
			kill -KILL "$pid" 2>/dev/null || true
		fi
		rm -f "$dir/n$n.pid"
		stopped=$((stopped + 1))
	done
	if ((stopped == 0)); then
		echo "cluster: not running"
	else
		echo "cluster: stopped $stopped node(s); data kept in $dir (rm -rf it for a fresh cluster)"
	fi
}

status() {
	local n pid running=0
	for n in "${nodes[@]}"; do
		if pid="$(pid_of "$n")"; then
			running=$((running + 1))
			if healthy "$n"; then
				echo "n$n: running (pid $pid), nats://127.0.0.1:$(client_port "$n"), healthy"
			else
				echo "n$n: running (pid $pid), nats://127.0.0.1:$(client_port "$n"), NOT healthy"
			fi
		else
			echo "n$n: stopped"
		fi
	done
	if ((running > 0)); then
		for n in "${nodes[@]}"; do
			local leader
			leader="$(curl -fsS --max-time 2 "http://127.0.0.1:$(http_port "$n")/jsz" 2>/dev/null |
				sed -n 's/.*"leader": *"\([^"]*\)".*/\1/p' | head -1)" || true
			if [[ -n "$leader" ]]; then
				echo "meta leader: $leader"
				break
			fi
		done
		echo "nats.url: \"$(urls)\""
	fi
	((running == ${#nodes[@]}))
}

case "${1:-}" in
install) install ;;
start) start ;;
stop) stop ;;
status) status ;;
*)
	echo "usage: $0 install|start|stop|status" >&2
	exit 2
	;;
esac
