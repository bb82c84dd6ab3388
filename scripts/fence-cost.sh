#!/usr/bin/env bash
# What a fenced write costs the Redis server against the same write unfenced, in instructions
# counted by valgrind's callgrind (repeatable on a shared VM, unlike timings): SET, FCALL
# distlock_fenced_set (a new token each write, and one holder's same token), the EVALSHA
# fallback of the same code, and a function doing nothing but the same two SETs (the floor of
# any fenced write done in a function: FCALL's own cost plus two redis.call).
#
# Each workload runs N and 2N writes against a fresh redis-server under callgrind on a free
# loopback port; the difference divided by N is the cost of one write, free of start-up and
# shutdown. Needs valgrind, redis-server, redis-cli and python3. SERVER=valkey runs it on
# valkey-server. About a minute.
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-20000}
SERVER=${SERVER:-redis}
server_bin=redis-server
if [ "$SERVER" = valkey ]; then
  server_bin=${DISTLOCK_VALKEY_SERVER:-$(command -v valkey-server || echo "${XDG_CACHE_HOME:-$HOME/.cache}/distlock/valkey-9.1.2/valkey-server")}
fi
for tool in valgrind "$server_bin" redis-cli python3; do
  command -v "$tool" >/dev/null || { echo "fence-cost: $tool is missing" >&2; exit 1; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
library=lock-redis/lua/fence_library.lua
# The EVAL fallback as lock-redis/src/fences/script.rs assembles it.
{ tail -n +2 "$library"; echo; echo 'return fenced_set(KEYS, ARGV)'; } >"$work/set.lua"
cat >"$work/floor.lua" <<'EOF'
#!lua name=floor
redis.register_function('two_sets', function(keys, args)
  redis.call('SET', '{' .. keys[1] .. '}:distlock-accepted', args[1], 'GET')
  return redis.call('SET', keys[1], args[2])
end)
EOF

# free_port, callgrind_start/_pipe/_stop: the callgrind harness the cost scripts share.
source scripts/lib/callgrind.sh

cat >"$work/workload.py" <<'EOF'
import hashlib, os, sys
kind, n = sys.argv[1], int(sys.argv[2])
work = os.environ["WORK"]
sha = hashlib.sha1(open(os.path.join(work, "set.lua"), "rb").read().rstrip(b"\n")).hexdigest()
def cmd(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out
value = "v" * 64
base = 1795523795491234
out = []
for i in range(n):
    token = base + i
    if kind == "set":
        out.append(cmd("SET", "acct", value))
    elif kind == "fenced":
        out.append(cmd("FCALL", "distlock_fenced_set", 1, "acct", token, value))
    elif kind == "fenced-same":
        out.append(cmd("FCALL", "distlock_fenced_set", 1, "acct", base, value))
    elif kind == "evalsha":
        out.append(cmd("EVALSHA", sha, 1, "acct", token, value))
    elif kind == "floor":
        out.append(cmd("FCALL", "two_sets", 1, "acct", token, value))
sys.stdout.buffer.write(b"".join(out))
EOF

run() { # run <label> <kind>
  local label=$1 kind=$2 totals=()
  for n in "$N" $((2 * N)); do
    local out="$work/callgrind.$kind.$n"
    callgrind_start "$server_bin" "$out"
    redis-cli -p "$CG_PORT" function load "$(cat "$library")" >/dev/null
    redis-cli -p "$CG_PORT" function load "$(cat "$work/floor.lua")" >/dev/null
    redis-cli -p "$CG_PORT" script load "$(cat "$work/set.lua")" >/dev/null
    WORK="$work" python3 "$work/workload.py" "$kind" "$n" |
      callgrind_pipe "fence-cost ($kind)" || exit 1
    totals+=("$(callgrind_stop "$out")")
  done
  local per=$(((totals[1] - totals[0]) / N))
  [ -z "${set_cost:-}" ] && set_cost=$per
  printf '%-44s %8d instructions per write (%s x SET)\n' "$label" "$per" \
    "$(python3 -c "print(f'{$per / $set_cost:.1f}')")"
}

# ONLY=fenced (a workload's kind) measures that one alone, against SET.
echo "Server instructions per write on $SERVER (callgrind, N=$N, 64-byte value):"
run "SET" set
for row in "FCALL distlock_fenced_set, a new token:fenced" \
  "FCALL distlock_fenced_set, the same token:fenced-same" \
  "EVALSHA fallback, a new token:evalsha" \
  "floor: FCALL of a function of two SETs:floor"; do
  kind=${row##*:}
  if [ -z "${ONLY:-}" ] || [ "$ONLY" = "$kind" ]; then run "${row%:*}" "$kind"; fi
done
