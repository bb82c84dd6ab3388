"""Server CPU per acquire + release cycle, read from the server's own INFO (used_cpu_user +
used_cpu_sys), for the grant designs of scripts/grant-cost.sh, on a real (not instrumented)
server: TASKS threads, each its own connection and lock name, one cycle after another, each
step a round trip (the acquire's MULTI ... EXEC sent in one write, as redis-rs pipelines it).
Usage: grant_cpu.py PORT CYCLES_PER_TASK TASKS KIND... (KIND: hand, unfenced, fenced, multi, time-multi).
Prints one line per kind: cycles, server CPU µs per cycle and INFO commandstats calls per cycle."""
import hashlib, socket, sys, threading, time

FENCE = open("lock-redis/lua/fence.lua").read()
ACQUIRE = FENCE + open("lock-redis/lua/acquire.lua").read()
RELEASE = open("lock-redis/lua/release.lua").read().replace("PUBLISH_COMMAND", "PUBLISH")
HAND_RELEASE = ("if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end\n"
                "return 0")


def cmd(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def line(self):
        while b"\r\n" not in self.buf:
            self.buf += self.s.recv(65536)
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def reply(self):
        line = self.line()
        kind, rest = line[:1], line[1:]
        if kind == b"-":
            raise RuntimeError(rest.decode())
        if kind in (b"+", b":"):
            return rest
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                self.buf += self.s.recv(65536)
            data, self.buf = self.buf[:n], self.buf[n + 2:]
            return data
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self.reply() for _ in range(n)]
        raise RuntimeError("unexpected reply %r" % line)

    def call(self, payload, replies=1):
        self.s.sendall(payload)
        return [self.reply() for _ in range(replies)][-1]


def sha(text):
    return hashlib.sha1(text.encode()).hexdigest()


def task(port, kind, index, cycles):
    c = Conn(port)
    key, token = "lock:cpu:%d" % index, "dl:%032x" % index
    fence, channel = "{%s}:distlock-fence" % key, "{%s}:distlock-released" % key
    release = cmd("EVALSHA", sha(RELEASE), 1, key, token, channel)
    last = 0
    for _ in range(cycles):
        if kind == "hand":
            c.call(cmd("SET", key, token, "NX", "PX", 30000))
            c.call(cmd("EVALSHA", sha(HAND_RELEASE), 1, key, token))
            continue
        if kind == "unfenced":
            c.call(cmd("SET", key, token, "NX", "PX", 30000, "GET"))
        elif kind == "fenced":
            got = c.call(cmd("EVALSHA", sha(ACQUIRE), 2, key, fence, token, 30000, 86400000))
            assert got[0] == b"1", got
            fence_token = int(got[1])
        else:
            if kind == "time-multi":  # the floor is the server's clock, read first: a round trip
                t = c.call(cmd("TIME"))
                floor = int(t[0]) * 1000000 + int(t[1])
            else:  # multi: the floor is the client's clock in microseconds
                floor = time.time_ns() // 1000
            got = c.call(cmd("MULTI") + cmd("SET", key, token, "NX", "PX", 30000, "GET")
                         + cmd("SET", fence, floor, "NX", "PX", 86400000) + cmd("INCR", fence)
                         + cmd("PEXPIRE", fence, 86400000) + cmd("EXEC"), replies=6)
            assert got[0] is None, got
            fence_token = int(got[2])
        if kind in ("fenced", "multi", "time-multi"):
            assert fence_token > last, (fence_token, last)
            last = fence_token
        c.call(release)


def info(c, section):
    text = c.call(cmd("INFO", section)).decode()
    return dict(l.split(":", 1) for l in text.splitlines() if ":" in l)


def main():
    port, cycles, tasks = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    admin = Conn(port)
    for script in (ACQUIRE, RELEASE, HAND_RELEASE):
        admin.call(cmd("SCRIPT", "LOAD", script))
    for kind in sys.argv[4:]:
        admin.call(cmd("CONFIG", "RESETSTAT"))
        before = info(admin, "cpu")
        threads = [threading.Thread(target=task, args=(port, kind, i, cycles)) for i in range(tasks)]
        start = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.monotonic() - start
        after = info(admin, "cpu")
        cpu = sum(float(after[k]) - float(before[k]) for k in ("used_cpu_user", "used_cpu_sys"))
        stats = info(admin, "commandstats")
        total = cycles * tasks
        calls = sum(int(v.split("calls=")[1].split(",")[0]) for k, v in stats.items()
                    if k.startswith("cmdstat_") and k not in ("cmdstat_info", "cmdstat_config"))
        print("%-9s tasks=%-3d cycles=%-7d server CPU %6.2f us/cycle  commands %.1f/cycle  %7.0f cycles/s"
              % (kind, tasks, total, cpu / total * 1e6, calls / total, total / wall), flush=True)


main()
