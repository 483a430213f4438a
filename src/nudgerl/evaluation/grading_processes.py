"""Grading processes: the time-limited path of :func:`nudgerl.evaluation.grading.grade` off the
main thread (or with ``isolate=True``). An item past its limit has its process killed and
replaced; a process's start-up (about a second, once) is not part of any item's limit.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time

from nudgerl.evaluation.answers import judge_unbounded, warm_up_modes

# Starting a grading process imports sympy; generous, since it is paid once per process.
WORKER_START_SECONDS = 120.0
MAX_WORKERS = 4


# ---------------------------------------------------------------------------------------
# Bounded path 2: persistent grading processes, killed and replaced when an item overruns.
# Plain subprocesses speaking JSON lines on stdin/stdout: they work from any thread, from
# daemonic multiprocessing workers (which may not have multiprocessing children), and do
# not re-import the caller's __main__ the way multiprocessing's spawn does.


class _Worker:
    def __init__(self):
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "nudgerl.evaluation.grading_processes", "--serve"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, close_fds=True,
        )
        self._buffer = b""
        self.ready = False

    def _read_line(self, deadline: float) -> bytes | None:
        """One reply line, or None at the deadline or when the process has gone."""
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buffer:
            wait = deadline - time.monotonic()
            if wait <= 0 or not select.select([fd], [], [], wait)[0]:
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line

    def wait_ready(self) -> None:
        if self.ready:
            return
        line = self._read_line(time.monotonic() + WORKER_START_SECONDS)
        if line is None or json.loads(line) != {"ready": True}:
            self.kill()
            raise RuntimeError(f"grading process did not start within {WORKER_START_SECONDS:.0f} s "
                               f"(exit code {self.proc.poll()}); see its stderr above")
        self.ready = True

    def judge(self, item: tuple, limit: float) -> str:
        self.wait_ready()
        completion, gold, mode, region = item
        request = {"completion": completion, "gold": gold, "mode": mode, "region": region}
        try:
            self.proc.stdin.write(json.dumps(request).encode() + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            self.kill()
            return "error"
        line = self._read_line(time.monotonic() + limit)
        if line is None:
            timed_out = self.proc.poll() is None
            self.kill()
            return "timeout" if timed_out else "error"  # killed by us, or died (e.g. out of memory)
        return json.loads(line)["outcome"]

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass

    def close(self) -> None:
        try:
            self.proc.stdin.close()  # end of input: the process exits by itself
            self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.kill()


class _WorkerPool:
    """Up to ``size`` grading processes; a thread borrows one per item."""

    def __init__(self, size: int = MAX_WORKERS):
        self.pid = os.getpid()
        self._slots = threading.BoundedSemaphore(size)
        self._lock = threading.Lock()
        self._idle: list[_Worker] = []

    def judge(self, item: tuple, limit: float) -> str:
        with self._slots:
            with self._lock:
                worker = self._idle.pop() if self._idle else None
            if worker is None or not worker.alive():
                worker = _Worker()
            try:
                outcome = worker.judge(item, limit)
            except BaseException:
                worker.kill()
                raise
            if not worker.alive():
                worker = _Worker()  # start the replacement now; its start-up overlaps the caller's work
            with self._lock:
                self._idle.append(worker)
            return outcome

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.close()


_POOL: _WorkerPool | None = None
_POOL_LOCK = threading.Lock()


def worker_pool() -> _WorkerPool:
    global _POOL
    with _POOL_LOCK:
        # A forked child must not share its parent's pipes: it starts its own processes.
        if _POOL is None or _POOL.pid != os.getpid():
            _POOL = _WorkerPool()
        return _POOL


def shutdown_workers() -> None:
    """Stop the grading processes (they also stop by themselves when this process exits)."""
    global _POOL
    with _POOL_LOCK:
        pool, _POOL = _POOL, None
    if pool is not None and pool.pid == os.getpid():
        pool.close()


atexit.register(shutdown_workers)


def _serve() -> None:
    """A grading process: one JSON request per stdin line, one JSON reply per stdout line."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is the caller's to handle; we stop at end of input
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # stray prints must not corrupt the replies
    warm_up_modes()  # imports, and math-verify's lazily built regexes
    replies.write('{"ready": true}\n')
    replies.flush()
    for line in sys.stdin:
        request = json.loads(line)
        outcome = judge_unbounded(request["completion"], request["gold"], request["mode"], request["region"])
        replies.write(json.dumps({"outcome": outcome}) + "\n")
        replies.flush()


if __name__ == "__main__" and sys.argv[1:] == ["--serve"]:
    _serve()
