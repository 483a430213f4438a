"""The client side of the local job server (:mod:`nudgerl.job_server`): what ``nudgerl`` in a job
and the workflow that starts the server need, and nothing heavy.

``forward`` hands a command to the server named in ``NUDGERL_JOB_SERVER`` (None: no server, or it
declined, and the caller runs the command itself); ``start``/``stop`` run one server for a local
``snakemake`` (Snakefile ``onstart``); ``logged_usage`` reads the child's CPU seconds and peak
memory that a served job's log ends with (Snakemake's ``benchmark:`` records see the client only).

This module imports only the standard library: every ``nudgerl`` process runs it first.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

ENV = "NUDGERL_JOB_SERVER"  # the server's socket path, set for the jobs of the snakemake that started it
USAGE_PREFIX = "nudgerl job server:"
# Set per job by Snakemake (its `threads`); applied in the child (torch.set_num_threads).
THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGHUP, signal.SIGQUIT)
MAX_MESSAGE = 1 << 20


def send(conn: socket.socket, obj: dict, fds: list[int] = ()) -> None:
    """One JSON message, with file descriptors passed along (SCM_RIGHTS) when given."""
    data = json.dumps(obj).encode()
    if fds:
        socket.send_fds(conn, [data], list(fds))
    else:
        conn.send(data)


def forward(argv: list[str]) -> int | None:
    """Run ``nudgerl argv`` in the server's forked child; its exit code, or None when there is no
    server to take it (the caller then runs the command itself)."""
    path = os.environ.get(ENV)
    if not path or os.environ.get("NUDGERL_REQUIRE_CUDA"):
        return None
    try:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        conn.connect(path)
        send(conn, {"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)}, [0, 1, 2])
        reply = json.loads(conn.recv(MAX_MESSAGE) or b"{}")
    except OSError:
        return None
    if "pid" not in reply:
        print(f"{USAGE_PREFIX} not used ({reply.get('refused', 'no answer')}): the command runs in this process",
              file=sys.stderr)
        return None
    pid = reply["pid"]

    def pass_on(sig, _frame):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass

    for sig in FORWARDED_SIGNALS:
        signal.signal(sig, pass_on)
    data = conn.recv(MAX_MESSAGE)  # a forwarded signal interrupts it and it resumes (PEP 475)
    if not data:  # the server died; its child dies with it (PR_SET_PDEATHSIG)
        print(f"{USAGE_PREFIX} the server went away while it ran the command", file=sys.stderr)
        return 1
    done = json.loads(data)
    sys.stderr.write(f"{USAGE_PREFIX} ran in a forked child (pid {pid}): exit {done['exit']} "
                     f"cpu_s={done['cpu_s']:.2f} max_rss_mb={done['max_rss_mb']:.1f}\n")
    return done["exit"]


_USAGE_LINE = re.compile(re.escape(USAGE_PREFIX) + r" .*cpu_s=([0-9.]+) max_rss_mb=([0-9.]+)")


def logged_usage(log: str | os.PathLike) -> dict | None:
    """The child's CPU seconds and peak memory from the last usage line of a job's log (None:
    the job ran in its own process, or wrote no log)."""
    try:
        with open(log, errors="replace") as f:
            found = [m for m in map(_USAGE_LINE.search, f) if m]
    except OSError:
        return None
    return {"cpu_s": float(found[-1].group(1)), "max_rss_mb": float(found[-1].group(2))} if found else None


def start(log: str | os.PathLike | None = None, timeout: float = 120.0) -> tuple[subprocess.Popen, str] | None:
    """Start a server for this process's jobs (its socket in a fresh temporary folder); sets ENV
    in this process's environment, which local jobs inherit. None if it did not come up."""
    folder = tempfile.mkdtemp(prefix="nudgerl-jobs-")
    path = os.path.join(folder, "socket")
    out = open(log, "ab") if log else subprocess.DEVNULL
    proc = subprocess.Popen([sys.executable, "-P", "-m", "nudgerl.job_server", path, str(os.getpid())],
                            stdout=out, stderr=out, stdin=subprocess.DEVNULL,
                            env={**os.environ, **{v: os.environ.get(v, "1") for v in THREAD_ENV}})
    if log:
        out.close()  # the server holds its own copy
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            return None
        time.sleep(0.05)
    os.environ[ENV] = path
    return proc, path


def stop(handle: tuple[subprocess.Popen, str] | None) -> None:
    os.environ.pop(ENV, None)
    if handle is None:
        return
    proc, path = handle
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
    try:
        os.rmdir(os.path.dirname(path))
    except OSError:
        pass
