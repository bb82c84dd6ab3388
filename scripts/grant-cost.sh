#!/usr/bin/env bash
# What a fenced grant costs the server without the acquire script (issue 38, item 3): one
# acquire + release cycle on one name, counted in instructions by valgrind's callgrind
# (repeatable on a shared VM, unlike timings), for
#   - the hand-written lock of the load tool (SET NX PX + a compare-and-delete script);
#   - distlock fencing(false) (SET NX PX GET + release.lua);
#   - distlock fenced, the script (fence.lua + acquire.lua: SET NX PX GET, TIME, SET counter GET);
#   - the scriptless design: MULTI, SET key token NX PX ttl GET, SET counter <floor> NX PX
#     retention, INCR counter, PEXPIRE counter retention, EXEC (the floor is the client's clock
#     in microseconds; a failed grant burns a token), with the same release;
#   - the same with the floor read from the server's clock first (TIME: one more round trip);
#   - the scriptless design without PEXPIRE (the counter then lives `retention` from its first
#     grant, not its last: weaker, shown only as the floor of any MULTI design).
# Each workload runs N and 2N cycles against a fresh server under callgrind on a free loopback
# port; the difference divided by N is the cost of one cycle, free of start-up and shutdown.
# CPU=1 instead measures server CPU per cycle on an uninstrumented server (INFO cpu), with
# TASKS (default 1 and 32) threads of scripts/lib/grant_cpu.py, CYCLES per task.
# Needs valgrind, redis-server (SERVER=valkey: valkey-server), redis-cli and python3.
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-10000}
SERVER=${SERVER:-redis}
server_bin=redis-server
if [ "$SERVER" = valkey ]; then
  server_bin=${DISTLOCK_VALKEY_SERVER:-$(command -v valkey-server || echo "${XDG_CACHE_HOME:-$HOME/.cache}/distlock/valkey-9.1.2/valkey-server")}
fi
for tool in valgrind "$server_bin" redis-cli python3; do
  command -v "$tool" >/dev/null || { echo "grant-cost: $tool is missing" >&2; exit 1; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

sed 's/PUBLISH_COMMAND/PUBLISH/' lock-redis/lua/release.lua >"$work/release.lua"
cat lock-redis/lua/fence.lua lock-redis/lua/acquire.lua >"$work/acquire.lua" # as scripts.rs assembles it
cat >"$work/hand_release.lua" <<'EOF'
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
EOF

# free_port, callgrind_start/_pipe/_stop: the callgrind harness the cost scripts share.
source scripts/lib/callgrind.sh

cat >"$work/workload.py" <<'EOF'
import hashlib, os, sys
kind, cycles = sys.argv[1], int(sys.argv[2])
work = os.environ["WORK"]
def sha(script):
    return hashlib.sha1(open(os.path.join(work, script + ".lua"), "rb").read().rstrip(b"\n")).hexdigest()
def cmd(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out
key, token = "lock:cycle", "dl:0123456789abcdef0123456789abcdef"
fence, channel = "{lock:cycle}:distlock-fence", "{lock:cycle}:distlock-released"
floor = 1795523795491234
release = cmd("EVALSHA", sha("release"), 1, key, token, channel)
if kind == "hand":
    one = cmd("SET", key, token, "NX", "PX", 30000) + cmd("EVALSHA", sha("hand_release"), 1, key, token)
elif kind == "unfenced":
    one = cmd("SET", key, token, "NX", "PX", 30000, "GET") + release
elif kind == "fenced":
    one = cmd("EVALSHA", sha("acquire"), 2, key, fence, token, 30000, 86400000) + release
elif kind in ("multi", "multi-noexpire", "time-multi"):
    one = cmd("TIME") if kind == "time-multi" else b""
    one += cmd("MULTI") + cmd("SET", key, token, "NX", "PX", 30000, "GET")
    one += cmd("SET", fence, floor, "NX", "PX", 86400000) + cmd("INCR", fence)
    if kind == "multi":
        one += cmd("PEXPIRE", fence, 86400000)
    one += cmd("EXEC") + release
sys.stdout.buffer.write(one * cycles)
EOF

run() { # run <label> <kind>
  local label=$1 kind=$2 totals=()
  for cycles in "$N" $((2 * N)); do
    local out="$work/callgrind.$kind.$cycles"
    callgrind_start "$server_bin" "$out"
    for script in acquire release hand_release; do
      redis-cli -p "$CG_PORT" script load "$(cat "$work/$script.lua")" >/dev/null
    done
    WORK="$work" python3 "$work/workload.py" "$kind" "$cycles" |
      callgrind_pipe "grant-cost ($kind)" || exit 1
    totals+=("$(callgrind_stop "$out")")
  done
  local per=$(((totals[1] - totals[0]) / N))
  [ -z "${hand_cost:-}" ] && hand_cost=$per
  printf '%-46s %8d instructions per cycle (%s x hand-written)\n' "$label" "$per" \
    "$(python3 -c "print(f'{$per / $hand_cost:.2f}')")"
}

if [ "${CPU:-}" = 1 ]; then
  port=$(free_port)
  "$server_bin" --port "$port" --bind 127.0.0.1 --save '' --appendonly no >/dev/null 2>&1 &
  pid=$!
  for _ in $(seq 1 50); do
    redis-cli -p "$port" ping >/dev/null 2>&1 && break
    sleep 0.1
  done
  echo "Server CPU per acquire + release cycle on $SERVER ($("$server_bin" --version | awk '{print $3}')):"
  for tasks in ${TASKS:-1 32}; do
    python3 scripts/lib/grant_cpu.py "$port" "${CYCLES:-$((40000 / tasks))}" "$tasks" \
      hand unfenced fenced multi time-multi || { kill "$pid"; exit 1; }
  done
  redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
  wait "$pid" || true
  exit 0
fi

echo "Server instructions per acquire + release cycle on $SERVER (callgrind, N=$N):"
run "hand-written (SET NX PX + CAD)" hand
run "distlock, fencing(false)" unfenced
run "distlock fenced: acquire script" fenced
run "fenced, MULTI: SET NX PX GET, floor, INCR, PEXPIRE" multi
run "fenced, MULTI without PEXPIRE (weaker)" multi-noexpire
run "fenced, TIME then the same MULTI" time-multi
