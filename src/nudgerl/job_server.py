"""A warm interpreter for local jobs: the heavy imports once, one forked child per job.

A job of the embedded default computes for 5-60 s on one core; a fresh interpreter spends about
5 s importing torch, transformers and TRL first (x 96 jobs, a fifth of the default's job time,
`benchmarks/efficiency.py`). So a local ``snakemake`` run starts one server (Snakefile
``onstart``, config ``job_server``, local execution only), and ``nudgerl`` hands its command
line, environment, working folder and standard streams to it over a Unix socket: the server
forks a child that already holds the imports, and the child runs the command as the job's own
process would (``nudgerl.cli.run``). The client waits for the child's exit status, passes signals on
(SIGTERM, SIGINT, SIGUSR1: a training job's stop-and-checkpoint) and exits with the child's code.

The server changes where a command runs, never what it computes: no server, a refused request
(a job whose environment differs from the server's in what imports read, or that asks for a
GPU), or a server that cannot be reached, and the command runs in the client's own process.
A child dies with the server (PR_SET_PDEATHSIG), the server with the ``snakemake`` that started
it, and a child whose client has gone (a killed job) is killed.

Snakemake's ``benchmark:`` records see the client only; the child's CPU seconds and peak memory
(from ``wait4``) end the job's log as a ``USAGE_PREFIX`` line, which the compute table reads
(:func:`nudgerl.job_client.logged_usage`).

This is the server's side, run as ``python -m nudgerl.job_server``; the client's side (``forward``,
``start``, ``stop``) is :mod:`nudgerl.job_client`, which every ``nudgerl`` process imports first.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import select
import signal
import socket
import sys
import threading

from nudgerl.job_client import ENV, FORWARDED_SIGNALS, MAX_MESSAGE, USAGE_PREFIX, send

# Imported by the server before it forks: what a training, evaluation or report job imports.
PRELOAD = ("torch", "transformers", "transformers.models.llama.modeling_llama", "trl.trainer.grpo_trainer", "pandas",
           "matplotlib.pyplot",
           "nudgerl.training.nudgerl", "nudgerl.evaluation.benchmarks", "nudgerl.evaluation.diagnostics",
           "nudgerl.organism.base_model", "nudgerl.reporting.tables", "nudgerl.reporting.figures")
# Environment read at import time: a job whose values differ runs in a fresh process instead.
IMPORT_TIME_ENV = re.compile(r"(HF_|HUGGINGFACE_|TRANSFORMERS_|TRL_|ACCELERATE_|TORCH|PYTORCH_|CUDA_|TOKENIZERS_"
                             r"|MPL|KMP_|LD_|PYTHON|WANDB_|DS_|NCCL_)")
_PR_SET_PDEATHSIG = 1


def _die_with_parent(sig: int = signal.SIGKILL) -> None:
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)


def _import_env(env: dict) -> dict:
    return {k: v for k, v in env.items() if IMPORT_TIME_ENV.match(k)}


# Threads that may run in the server when it forks: jemalloc's purging thread (pyarrow's
# allocator, imported with TRL's datasets) takes its locks in its own fork handlers and is
# restarted lazily in the child. Any other thread makes the server refuse to serve.
FORK_SAFE_THREADS = ("jemalloc_bg_thd",)


def unsafe_threads() -> list[str]:
    """Names of this process's OS threads other than the calling one and FORK_SAFE_THREADS."""
    me, names = str(threading.get_native_id()), []
    for tid in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{tid}/comm") as f:
            name = f.read().strip()
        if tid != me and name not in FORK_SAFE_THREADS:
            names.append(name)
    return names


def _run_child(request: dict) -> None:
    """In the forked child: become the job's process and run its command; never returns."""
    code = 1
    try:
        for sig in FORWARDED_SIGNALS + (signal.SIGCHLD,):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.environ.clear()
        os.environ.update({k: v for k, v in request["env"].items() if k != ENV})
        os.chdir(request["cwd"])
        threads = os.environ.get("OMP_NUM_THREADS")
        if threads and threads.isdigit():
            import torch

            torch.set_num_threads(int(threads))
        sys.argv = ["nudgerl", *request["argv"]]
        from nudgerl import cli

        code = cli.run(request["argv"])
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if isinstance(e.code, str):
            print(e.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 - the child reports any failure as the process would
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        try:
            import atexit

            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code if isinstance(code, int) else 1)


class Server:
    def __init__(self, parent: int, env: dict):
        self.parent = parent
        self.env = _import_env(env)  # as the preloaded imports saw it
        # variables those imports set themselves (transformers' model import sets
        # TORCHINDUCTOR_CACHE_DIR): a job that inherited the same value imports the same way
        self.set_by_imports = {k: v for k, v in _import_env(os.environ).items() if k not in self.env}
        self.jobs: dict[int, socket.socket] = {}  # child pid -> its client's connection
        self.exits: dict[int, int] = {}  # child pid -> its pidfd
        self.stopping = False

    def refusal(self, request: dict) -> str | None:
        if request["env"].get("NUDGERL_REQUIRE_CUDA"):
            return "the job asks for a GPU"
        env = _import_env(request["env"])
        differ = sorted(k for k in env.keys() | self.env.keys() if env.get(k) != self.env.get(k)
                        and not (k in self.set_by_imports and env.get(k) == self.set_by_imports[k]))
        return f"environment differs from the server's in {', '.join(differ)}" if differ else None

    def accept(self, listener: socket.socket) -> None:
        conn, _ = listener.accept()
        try:
            data, fds, _, _ = socket.recv_fds(conn, MAX_MESSAGE, 3)
            request = json.loads(data)
        except (OSError, ValueError):
            conn.close()
            return
        reason = self.refusal(request) if len(fds) == 3 else "no standard streams received"
        if reason:
            send(conn, {"refused": reason})
            conn.close()
            for fd in fds:
                os.close(fd)
            return
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            try:
                _die_with_parent()
                if os.getppid() != self.server_pid:
                    os._exit(1)
                listener.close()
                for other in self.jobs.values():
                    other.close()
                conn.close()
                for target, fd in enumerate(fds):
                    os.dup2(fd, target)
                    os.close(fd)
            except BaseException:  # noqa: BLE001
                os._exit(1)
            _run_child(request)
        for fd in fds:
            os.close(fd)
        self.jobs[pid] = conn
        self.exits[pid] = os.pidfd_open(pid)  # readable once the child has ended: wakes select
        send(conn, {"pid": pid})

    def reap(self) -> None:
        while self.jobs:
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.jobs.pop(pid, None)
            os.close(self.exits.pop(pid))
            if conn is None:
                continue
            code = os.waitstatus_to_exitcode(status)
            code = 128 - code if code < 0 else code  # killed by a signal: as a shell reports it
            try:
                send(conn, {"exit": code, "cpu_s": usage.ru_utime + usage.ru_stime,
                             "max_rss_mb": usage.ru_maxrss / 1024})
            except OSError:
                pass
            conn.close()

    def serve(self, listener: socket.socket) -> None:
        self.server_pid = os.getpid()
        signal.signal(signal.SIGTERM, lambda *_: setattr(self, "stopping", True))
        while not self.stopping and os.getppid() == self.parent:
            readable, _, _ = select.select([listener, *self.jobs.values(), *self.exits.values()], [], [], 1.0)
            for r in readable:
                if r is listener:
                    self.accept(listener)
                elif isinstance(r, int):
                    continue  # a child ended: reaped below
                else:  # a client's end closed (or sent anything) while its child runs: it was killed
                    pid = next((p for p, c in self.jobs.items() if c is r), None)
                    if pid is None:
                        continue
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
            self.reap()
        for pid in self.jobs:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def serve(path: str, parent: int) -> int:
    """Preload, check the process is still single-threaded (fork copies only the calling
    thread: a helper thread's locks would hang a child), then serve until the parent is gone."""
    _die_with_parent(signal.SIGTERM)
    started_with = dict(os.environ)
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    import gc

    # The preloaded objects go to the collector's permanent generation: a child's collections
    # then neither walk them nor write their headers (which would copy their pages).
    gc.collect()
    gc.freeze()
    if unsafe_threads():
        print(f"{USAGE_PREFIX} not serving: threads {unsafe_threads()} run after the imports", file=sys.stderr)
        return 1
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path + ".tmp")
    listener.listen(64)
    os.replace(path + ".tmp", path)  # clients connect only once it listens
    try:
        Server(parent, started_with).serve(listener)
    finally:
        listener.close()
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(serve(sys.argv[1], int(sys.argv[2])))
