#!/usr/bin/env bash
# What one acquire + release cycle costs the Redis server, in instructions, counted by
# valgrind's callgrind: repeatable whatever else the machine does, unlike timings on a shared
# VM. Compares distlock's scripts (lock-redis/lua: fenced, fencing(false), and fenced with
# holder_metadata) with the hand-written locks of the load tool (SET NX PX + a
# compare-and-delete script; fenced: benches/lua/hand_acquire_fenced.lua + the same).
#
# Each workload runs N and 2N cycles against a fresh redis-server under callgrind on a free
# loopback port; the difference divided by N is the cost of one cycle, free of start-up and
# shutdown. Then one call of each holder description script (describe_holder, with the note and
# before it; annotate). Needs valgrind, redis-server, redis-cli and python3. A few minutes.
#
# SERVER=valkey runs the same workloads on valkey-server (scripts/ensure-valkey.sh installs it,
# or $DISTLOCK_VALKEY_SERVER), plus the native paths Valkey has: a release by DELIFEQ (the lock,
# then the waiting mark) and an extension by SET IFEQ PX, each against its script.
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-20000}
SERVER=${SERVER:-redis}
server_bin=redis-server
if [ "$SERVER" = valkey ]; then
  server_bin=${DISTLOCK_VALKEY_SERVER:-$(command -v valkey-server || echo "${XDG_CACHE_HOME:-$HOME/.cache}/distlock/valkey-9.1.2/valkey-server")}
  [ -x "$server_bin" ] || { echo "script-cost: no valkey-server; run scripts/ensure-valkey.sh" >&2; exit 1; }
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

for tool in valgrind "$server_bin" redis-cli python3; do
  command -v "$tool" >/dev/null || { echo "script-cost: $tool is missing" >&2; exit 1; }
done

sed 's/PUBLISH_COMMAND/PUBLISH/' lock-redis/lua/release.lua >"$work/release.lua"
cat lock-redis/lua/fence.lua lock-redis/lua/acquire.lua >"$work/acquire.lua" # as scripts.rs assembles it
cp lock-redis/lua/extend.lua "$work/extend.lua"
cp benches/lua/hand_acquire_fenced.lua "$work/hand_acquire.lua"
cp lock-redis/lua/annotate.lua "$work/annotate.lua"
cp lock-redis/lua/describe_holder.lua "$work/describe_holder.lua"
cat >"$work/hand_release.lua" <<'EOF'
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
EOF

# free_port, callgrind_start/_pipe/_stop: the callgrind harness the cost scripts share.
source scripts/lib/callgrind.sh

# The commands of N acquire + release cycles on one name, as RESP, for redis-cli --pipe.
cat >"$work/workload.py" <<'EOF'
import hashlib, os, sys
kind, cycles = sys.argv[1], int(sys.argv[2])
work = os.environ["WORK"]
def sha(script):
    # redis-cli script load "$(cat f)" drops the trailing newline: hash what was loaded.
    return hashlib.sha1(open(os.path.join(work, script + ".lua"), "rb").read().rstrip(b"\n")).hexdigest()
def cmd(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out
key, token = "lock:cycle", "0123456789abcdef0123456789abcdef"
fence, channel = "{lock:cycle}:distlock-fence", "{lock:cycle}:distlock-released"
if kind == "hand":
    one = cmd("SET", key, token, "NX", "PX", 30000)
    one += cmd("EVALSHA", sha("hand_release"), 1, key, token)
elif kind == "hand-fenced":
    # benches/src/handwritten_fenced.rs: the grant script, then the same compare-and-delete.
    one = cmd("EVALSHA", sha("hand_acquire"), 2, key, key + ":fence", token, 30000)
    one += cmd("EVALSHA", sha("hand_release"), 1, key, token)
elif kind == "described":
    # holder_metadata: the description as lock-redis/src/holder.rs writes it.
    holder = "{lock:cycle}:distlock-holder"
    about = ('{"host":"worker-17","pid":48213,"note":"nightly settlement","token":"%s",'
             '"since_ms":1795523795491}' % token)
    one = cmd("EVALSHA", sha("acquire"), 2, key, fence, token, 30000, 86400000, about)
    one += cmd("EVALSHA", sha("release"), 1, key, token, channel, holder)
elif kind == "native-unfenced":
    # kinds/mutex.rs with a server that has DELIFEQ: the lock, then the waiting mark.
    one = cmd("SET", key, token, "NX", "PX", 30000, "GET")
    one += cmd("DELIFEQ", key, token) + cmd("DELIFEQ", channel, token)
elif kind == "native-fenced":
    one = cmd("EVALSHA", sha("acquire"), 2, key, fence, token, 30000, 86400000)
    one += cmd("DELIFEQ", key, token) + cmd("DELIFEQ", channel, token)
elif kind == "extend":
    # One renewal of a held lock (the workload sets the key once, below).
    one = cmd("EVALSHA", sha("extend"), 1, key, token, 30000)
elif kind == "native-extend":
    one = cmd("SET", key, token, "IFEQ", token, "PX", 30000)
elif kind == "annotate":
    # Lock::annotate on a held lock (set once, below): the leader's election record.
    one = cmd("EVALSHA", sha("annotate"), 2, key, "{lock:cycle}:distlock-note", token,
              1795523795491234, "distlock-leader 1795523795491\npod-a:8080", 86400000)
elif kind.startswith("describe"):
    # Lock::describe_holder of a held lock, with its note (describe) or before it (counter).
    one = cmd("EVALSHA", sha("describe_holder"), 4, key, "{lock:cycle}:distlock-note", fence,
              "{lock:cycle}:distlock-holder")
else:
    if kind == "fenced":
        one = cmd("EVALSHA", sha("acquire"), 2, key, fence, token, 30000, 86400000)
    else:
        one = cmd("SET", key, token, "NX", "PX", 30000, "GET")
    one += cmd("EVALSHA", sha("release"), 1, key, token, channel)
if kind.endswith("extend") or kind in ("annotate", "describe", "describe-counter"):
    sys.stdout.buffer.write(cmd("SET", key, token, "PX", 30000))
    sys.stdout.buffer.write(cmd("SET", fence, 1795523795491234))
if kind == "describe":
    sys.stdout.buffer.write(cmd("SET", "{lock:cycle}:distlock-note",
        "%s\n1795523795491234\ndistlock-leader 1795523795491\npod-a:8080" % token))
sys.stdout.buffer.write(one * cycles)
EOF

run() { # run <label> <kind>
  local label=$1 kind=$2 totals=()
  for cycles in "$N" $((2 * N)); do
    local out="$work/callgrind.$kind.$cycles"
    callgrind_start "$server_bin" "$out"
    for script in acquire release hand_release hand_acquire extend annotate describe_holder; do
      redis-cli -p "$CG_PORT" script load "$(cat "$work/$script.lua")" >/dev/null
    done
    WORK="$work" python3 "$work/workload.py" "$kind" "$cycles" |
      callgrind_pipe "script-cost ($kind)" || exit 1
    totals+=("$(callgrind_stop "$out")")
  done
  printf '%-34s %8d instructions per cycle\n' "$label" $(((totals[1] - totals[0]) / N))
}

echo "Server instructions per acquire + release cycle on $SERVER (callgrind, N=$N):"
run "hand-written (SET NX PX + CAD)" hand
run "hand-written fenced (script + CAD)" hand-fenced
run "distlock, fencing(false)" unfenced
run "distlock (fenced, the default)" fenced
run "distlock, fenced + holder_metadata" described
if [ "$SERVER" = valkey ]; then
  run "distlock, fencing(false), DELIFEQ" native-unfenced
  run "distlock (fenced), DELIFEQ" native-fenced
  echo "Server instructions per extension:"
  run "extend script" extend
  run "SET IFEQ PX" native-extend
fi
echo "Server instructions per holder description (leader election's observers and record):"
run "describe_holder, with the note" describe
run "describe_holder, before a note" describe-counter
run "annotate" annotate
