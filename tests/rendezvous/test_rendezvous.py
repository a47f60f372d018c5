"""Rendezvous through etcd, end to end: a real etcd (Debian's etcd-server) on
127.0.0.1 with free ports and a temporary data directory, and rdv_peer
processes (tests/rendezvous/rdv_peer.c): one writer, two readers. Nothing
but 127.0.0.1 is contacted. Every wait is bounded; every process is ended by
the test (SIGKILL as the last resort)."""

import os
import queue
import random
import shutil
import signal
import socket
import subprocess
import threading
import time

import pytest

PEER = os.environ.get("RDV_PEER", "")
LINE_WAIT_S = 30  # the longest any one answer of a process may take


def free_port():
    """A port that binds now, below the ephemeral range (where outgoing
    connections, ours included, would take it away again)."""
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(15000, 32000)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
                return port
            except OSError:
                continue
    raise RuntimeError("no free port in 15000..32000")


def env_for(url, **extra):
    e = dict(os.environ)
    for k in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        e.pop(k, None)
    e.update(TPX_ETCD_ENDPOINTS=url, TPX_ETCD_JOB="job1", TPX_ETCD_TIMEOUT_MS="3000", TPX_ETCD_TTL_S="3")
    e.update({k: str(v) for k, v in extra.items()})
    return e


class Proc:
    """A process with a line protocol on stdin/stdout; stderr to a file."""

    def __init__(self, args, env, errpath):
        self.err = open(errpath, "w+")
        self.p = subprocess.Popen([PEER] + args, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=self.err, text=True, bufsize=1)
        # a thread reads the lines: select() on the pipe would miss lines already buffered
        self.q = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for ln in self.p.stdout:
            self.q.put(ln.strip())
        self.q.put(None)  # EOF

    def line(self, timeout=LINE_WAIT_S):
        try:
            got = self.q.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError("no answer within %d s (stderr: %s)" % (timeout, self.stderr()))
        assert got is not None, "the process ended (stderr: %s)" % self.stderr()
        return got

    def expect(self, word, timeout=LINE_WAIT_S):
        got = self.line(timeout)
        assert got == word + " ok", "expected '%s ok', got '%s' (stderr: %s)" % (word, got, self.stderr())
        return got

    def send(self, text):
        self.p.stdin.write(text + "\n")
        self.p.stdin.flush()

    def stderr(self):
        self.err.flush()
        self.err.seek(0)
        return self.err.read()

    def stop(self):
        if self.p.poll() is None:
            try:
                self.send("quit")
                self.p.wait(timeout=LINE_WAIT_S)
            except (BrokenPipeError, subprocess.TimeoutExpired):
                self.p.kill()
                self.p.wait(timeout=LINE_WAIT_S)
        return self.p.returncode


def lookup(env, name, ms=None):
    args = [PEER, "lookup", name] + ([str(ms)] if ms is not None else [])
    r = subprocess.run(args, env=env, capture_output=True, text=True, timeout=LINE_WAIT_S + 30)
    return r.stdout.strip()


def parse_fail(line):
    """'WORD fail rc=N ms=T detail' -> (N, T, detail). T is the caller's clock;
    the library's deadline is in whole milliseconds: allow 10 ms of rounding."""
    parts = line.split(" ", 4)
    assert parts[1] == "fail", line
    return int(parts[2][3:]), float(parts[3][3:]), parts[4]


class Etcd:
    def __init__(self, tmp):
        exe = shutil.which("etcd") or ("/usr/bin/etcd" if os.path.exists("/usr/bin/etcd") else None)
        if not exe:
            pytest.skip("etcd-server is not installed (scripts/deps.sh --test installs it)")
        logpath = os.path.join(tmp, "etcd.log")
        for attempt in range(5):  # a port taken between the check and etcd's bind: other ports
            if self.start(exe, tmp, logpath, attempt):
                return
            if "address already in use" not in open(logpath).read():
                break
        pytest.fail("etcd did not come up: " + open(logpath).read()[-2000:])

    def start(self, exe, tmp, logpath, attempt):
        cport, pport = free_port(), free_port()
        self.url = "http://127.0.0.1:%d" % cport
        peer = "http://127.0.0.1:%d" % pport
        self.log = open(logpath, "w")
        self.p = subprocess.Popen(
            [exe, "--name", "t", "--data-dir", os.path.join(tmp, "etcd-data-%d" % attempt),
             "--listen-client-urls", self.url, "--advertise-client-urls", self.url,
             "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
             "--initial-cluster", "t=" + peer],
            stdout=self.log, stderr=subprocess.STDOUT)
        # ready when a lookup is answered (absent: ENOENT), bounded
        env = env_for(self.url)
        for _ in range(100):
            if self.p.poll() is not None:
                break
            if "rc=-11 " in lookup(env, "nobody"):
                return True
            time.sleep(0.2)
        self.kill()
        return False

    def kill(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGKILL)
            self.p.wait(timeout=30)


@pytest.fixture
def etcd(tmp_path):
    assert PEER, "RDV_PEER (the rdv_peer binary) is not set"
    e = Etcd(str(tmp_path))
    yield e
    e.kill()


@pytest.fixture
def procs():
    started = []
    yield started
    for p in started:
        if p.p.poll() is None:
            p.p.kill()
            p.p.wait(timeout=LINE_WAIT_S)


def start(procs, tmp_path, args, env, tag):
    p = Proc(args, env, str(tmp_path / (tag + ".err")))
    procs.append(p)
    return p


def test_publish_lookup_one_writer_two_readers(etcd, procs, tmp_path):
    env = env_for(etcd.url)
    w = start(procs, tmp_path, ["writer", "w0"], env, "w0")
    w.expect("PUBLISH")
    w.expect("READY")
    # readers started before and after: a lookup waits for the name
    r1 = start(procs, tmp_path, ["reader", "r1", "w0"], env, "r1")
    r2 = start(procs, tmp_path, ["reader", "r2", "w0"], env, "r2")
    r1.expect("READ")
    r2.expect("READ")
    assert lookup(env, "w0") == "LOOKUP ok"
    # another job does not see it
    assert "rc=-11 " in lookup(env_for(etcd.url, TPX_ETCD_JOB="job2"), "w0")
    # a name nobody publishes: TPX_ETIMEDOUT after the wait, naming the key
    rc, ms, detail = parse_fail(lookup(env, "nobody", 700))
    assert rc == -8 and ms >= 700 - 10 and "tpx/job1/nobody/conn" in detail, detail
    for p in (r1, r2):
        assert p.stop() == 0, p.stderr()
    # a clean close revokes the lease: the keys are gone at once
    assert w.stop() == 0, w.stderr()
    assert "rc=-11 " in lookup(env, "w0")


def test_reader_waits_for_late_writer(etcd, procs, tmp_path):
    env = env_for(etcd.url, TPX_ETCD_TIMEOUT_MS=20000)
    r1 = start(procs, tmp_path, ["reader", "r1", "late"], env, "r1")
    time.sleep(0.5)  # the reader is looking the writer up already (not a timing assertion)
    w = start(procs, tmp_path, ["writer", "late"], env, "late")
    w.expect("PUBLISH")
    r1.expect("READ")
    assert r1.stop() == 0 and w.stop() == 0


def test_lease_expires_after_sigkill(etcd, procs, tmp_path):
    env = env_for(etcd.url, TPX_ETCD_TTL_S=2)
    w = start(procs, tmp_path, ["writer", "doomed"], env, "doomed")
    w.expect("PUBLISH")
    assert lookup(env, "doomed") == "LOOKUP ok"
    w.p.send_signal(signal.SIGKILL)
    w.p.wait(timeout=LINE_WAIT_S)
    # the lease (TTL 2 s) is no longer kept alive: etcd drops the keys; bounded poll
    gone = None
    for _ in range(60):
        gone = lookup(env, "doomed")
        if "rc=-11 " in gone:
            break
        time.sleep(0.5)
    assert "rc=-11 " in gone, "the key outlived its publisher: " + gone


def etcd_post(url, path, body):
    """A request of the test's own to its etcd (127.0.0.1; no proxy)."""
    import json
    import urllib.request
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    req = urllib.request.Request(url + path, data=json.dumps(body).encode(), method="POST")
    with opener.open(req, timeout=10) as r:
        return json.loads(r.read())


def test_lost_lease_is_replaced(etcd, procs, tmp_path):
    """etcd forgets the lease (revoked behind the writer's back): the writer's
    keepalive notices, takes a new lease and publishes its keys again."""
    env = env_for(etcd.url, TPX_ETCD_TTL_S=3, TPX_LOG="warn")
    w = start(procs, tmp_path, ["writer", "w0"], env, "w0")
    w.expect("PUBLISH")
    w.expect("READY")
    leases = etcd_post(etcd.url, "/v3/lease/leases", {}).get("leases", [])
    assert len(leases) == 1, leases
    etcd_post(etcd.url, "/v3/lease/revoke", {"ID": leases[0]["ID"]})
    assert "rc=-11 " in lookup(env, "w0")
    # a publish right now finds the lease gone (or the keepalive has replaced it): it succeeds either way
    w.send("put extra")
    w.expect("PUT")
    # back within a keepalive interval (1 s); the lookup waits up to 10 s
    assert lookup(env, "w0", 10000) == "LOOKUP ok"
    assert "lost lease" in w.stderr()
    r1 = start(procs, tmp_path, ["reader", "r1", "w0"], env, "r1")
    r1.expect("READ")  # the descriptor came back too
    assert r1.stop() == 0 and w.stop() == 0


def test_etcd_killed_mid_job(etcd, procs, tmp_path):
    env = env_for(etcd.url, TPX_ETCD_TIMEOUT_MS=1500, TPX_ETCD_TTL_S=3)
    wenv = dict(env, TPX_LOG="warn")  # the keepalive warnings
    w = start(procs, tmp_path, ["writer", "w0"], wenv, "w0")
    w.expect("PUBLISH")
    r1 = start(procs, tmp_path, ["reader", "r1", "w0"], env, "r1")
    r2 = start(procs, tmp_path, ["reader", "r2", "w0"], env, "r2")
    r1.expect("READ")
    r2.expect("READ")
    etcd.kill()
    # connected peers keep working
    for r in (r1, r2):
        r.send("read")
        r.expect("READ")
    # new lookups fail with a clear error once the timeout has passed
    r1.send("lookup w0")
    rc, ms, detail = parse_fail(r1.line())
    assert rc == -6 and ms >= 1500 - 10, (rc, ms, detail)
    assert etcd.url in detail and "did not answer" in detail, detail
    # the writer's keepalive fails and says so (one line per interval of TTL/3 = 1 s); bounded wait
    for _ in range(100):
        if "keepalive of job 'job1' failed" in w.stderr():
            break
        time.sleep(0.1)
    err = w.stderr()
    assert "keepalive of job 'job1' failed" in err and etcd.url in err, err
    # and the transfers still work after that
    r2.send("read")
    r2.expect("READ")
    for p in (r1, r2, w):
        assert p.stop() == 0, p.stderr()


def test_bench_and_launcher_through_etcd(etcd, tmp_path):
    """tpx-bench server --name / client --peer, and scripts/launch.sh --etcd
    with two GPU indices (host memory, every byte checked)."""
    bench, src = os.environ.get("TPX_BENCH", ""), os.environ.get("TPX_SOURCE_DIR", "")
    assert bench and src, "TPX_BENCH and TPX_SOURCE_DIR must be set (ctest sets them)"
    env = env_for(etcd.url, TPX_ETCD_JOB="benchjob", TPX_ETCD_TIMEOUT_MS=20000)
    srv = subprocess.Popen([bench, "server", "--name", "srv", "--host", "127.0.0.1", "--port", "0"], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        cli = subprocess.run([bench, "client", "--peer", "srv", "--size", "1M", "--iters", "2", "--warmup", "0",
                              "--check", "--progress", "off"], env=env, capture_output=True, text=True, timeout=120)
        out, _ = srv.communicate(timeout=60)
    finally:
        if srv.poll() is None:
            srv.kill()
            srv.wait(timeout=30)
    assert cli.returncode == 0 and srv.returncode == 0, cli.stdout + cli.stderr + out
    assert "[SERVER] published as 'srv' in job 'benchjob'" in out, out
    assert "[CHECK] server: ok" in out and "[PERF]" in cli.stdout, out + cli.stdout
    # the launcher: both sides local, the clients find their servers by name
    lenv = dict(env, LAUNCH_IFNAME="lo")
    r = subprocess.run(["sh", os.path.join(src, "scripts", "launch.sh"), "--etcd", etcd.url, "--job", "launchjob",
                        "--bench", bench, "--gpus", "0-1", "--logdir", str(tmp_path / "launch"),
                        "--timeout", "120", "local", "local", "--", "--size", "1M", "--iters", "2", "--channels", "1"],
                       env=lenv, capture_output=True, text=True, timeout=200)
    assert r.returncode == 0, r.stdout + r.stderr
    for g in (0, 1):
        assert any(line.split()[:1] == [str(g)] and "ok" in line.split() for line in r.stdout.splitlines()), r.stdout


def test_etcd_absent(tmp_path, procs):
    assert PEER, "RDV_PEER (the rdv_peer binary) is not set"
    url = "http://127.0.0.1:%d" % free_port()  # nobody listens there
    env = env_for(url, TPX_ETCD_TIMEOUT_MS=1200)
    rc, ms, detail = parse_fail(lookup(env, "w0", 1200))
    assert rc == -6 and ms >= 1200 - 10 and url in detail and "did not answer" in detail, detail
    # one look (timeout 0) fails at once, with the same clear reason
    rc, ms, detail = parse_fail(lookup(env, "w0"))
    assert rc == -6 and url in detail, detail
    # publishing fails too (within the timeout), and the writer exits
    w = start(procs, tmp_path, ["writer", "w0"], env, "w0")
    rc, ms, detail = parse_fail(w.line())
    assert rc == -6 and url in detail, detail
    assert w.p.wait(timeout=LINE_WAIT_S) == 1
    # a malformed endpoint list is refused before anything is sent
    rc, ms, detail = parse_fail(lookup(env_for("ftp://127.0.0.1:1"), "w0"))
    assert rc == -4 and "ftp://127.0.0.1:1" in detail, detail
