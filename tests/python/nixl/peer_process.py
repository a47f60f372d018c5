"""The other NIXL agent of a test, in a process of its own, spoken to line by
line over its stdin / stdout: a command out, one answer line back (lines
the peer prints with the "@@ " prefix; NIXL's own logging has none). Used by
tests/python/nixl/test_nixl_python.py and tests/gpu/tcpx_nixl.py."""

import subprocess


class PeerProcess:
    def __init__(self, cmd):
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def line(self) -> str:
        # The peer answers within its own bounded waits; readline returns at
        # its exit.
        while True:
            s = self.p.stdout.readline()
            if not s:
                raise RuntimeError(f"the peer process exited (rc {self.p.poll()})")
            if s.startswith("@@ "):
                return s[3:].strip()

    def ask(self, cmd: str) -> str:
        self.p.stdin.write(cmd + "\n")
        self.p.stdin.flush()
        return self.line()

    def close(self):
        if self.p.poll() is None:
            try:
                self.p.stdin.write("quit\n")
                self.p.stdin.flush()
                self.p.wait(timeout=30)
            except (BrokenPipeError, subprocess.TimeoutExpired):
                self.p.kill()
                self.p.wait(timeout=30)
