# The server-side instruction counts of scripts/script-cost.sh, fence-cost.sh and grant-cost.sh,
# written once: a redis-server (or valkey-server) under valgrind's callgrind on a free loopback
# port, fed a workload by its caller, shut down, and its instruction total read. Sourced from
# the repository's root.

# A free loopback port, as the OS hands it out.
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# callgrind_start SERVER_BIN OUT: SERVER_BIN under callgrind (its profile in OUT), nothing kept
# on disk, on a free port; waits until it answers (at most 30 s). Sets CG_PORT and CG_PID.
callgrind_start() {
  CG_PORT=$(free_port)
  valgrind --tool=callgrind --callgrind-out-file="$2" \
    "$1" --port "$CG_PORT" --bind 127.0.0.1 --save '' --appendonly no >/dev/null 2>&1 &
  CG_PID=$!
  for _ in $(seq 1 150); do
    redis-cli -p "$CG_PORT" ping >/dev/null 2>&1 && return 0
    sleep 0.2
  done
}

# callgrind_pipe WHAT: redis-cli --pipe of stdin into the server; stops it and fails, naming
# WHAT, if a command of the workload failed.
callgrind_pipe() {
  redis-cli -p "$CG_PORT" --pipe 2>&1 | tail -1 | grep -q "errors: 0" || {
    echo "$1: the workload had errors" >&2
    kill "$CG_PID" 2>/dev/null || true
    return 1
  }
}

# callgrind_stop OUT: shuts the server down and prints the instructions it executed in all.
callgrind_stop() {
  redis-cli -p "$CG_PORT" shutdown nosave >/dev/null 2>&1 || true
  wait "$CG_PID" || true
  awk '/^(summary|totals):/ {print $2; exit}' "$1"
}
