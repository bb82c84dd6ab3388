#!/bin/bash
# Time and peak memory of `distlock ls` over 10,000 held locks (+ their fencing counters + 10,000 unrelated keys) on a throwaway server.
# Run from the workspace root after `cargo build --release -p distlock-cli` (or set D=path/to/distlock).
# The server is a throwaway redis-server on a free port, stopped by its PID.
D=${D:-target/release/distlock}
P=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
TMP=$(mktemp -d)
redis-server --port $P --save '' >/dev/null 2>&1 & RPID=$!
sleep 0.5
python3 - $P <<'PY' | redis-cli -p $P --pipe >/dev/null
import sys
def cmd(*a):
    out = "*%d\r\n" % len(a)
    for x in a:
        x = str(x); out += "$%d\r\n%s\r\n" % (len(x.encode()), x)
    sys.stdout.write(out)
for i in range(10000):
    cmd("SET", "job:%d" % i, "dl:%032x" % i, "PX", 600000)
    cmd("SET", "{job:%d}:distlock-fence" % i, 1000000 + i)
    cmd("SET", "cache:%d" % i, "x")
PY
redis-cli -p $P dbsize
for count in 100 1000; do
  /usr/bin/time -f "count=$count wall=%es maxrss=%MKB" $D --url redis://127.0.0.1:$P/ --json ls --count $count > "$TMP"/ls.json
  python3 -c 'import json,sys;d=json.load(open(sys.argv[1]));print("locks", len(d["locks"]), "keys_scanned", d["keys_scanned"])' "$TMP"/ls.json
done
/usr/bin/time -f "human table: wall=%es maxrss=%MKB" $D --url redis://127.0.0.1:$P/ ls > "$TMP"/ls.txt; echo "table lines: $(wc -l < "$TMP"/ls.txt)"
kill $RPID; rm -rf "$TMP"
