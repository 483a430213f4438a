"""The attempts of a training run or an evaluation: retry only the planned stop, and never two
jobs on one run folder.

A run longer than its job's time limit spans several jobs: each stops itself (training with a
complete checkpoint, evaluation after its last finished chunk of problems) and exits
:data:`PLANNED_STOP_EXIT_CODE`, and the rule's ``retries`` resubmit it to resume there. Any other failure (a crash, a config error, an
out-of-memory kill the trainer saw) would come back the same on every retry, each costing a
job's start and model load, on a GPU. So:

- **The failed marker** (``failed.json`` in the run folder): an attempt that ends with any
  error but the planned stop records it (error, traceback tail, log, Slurm job, attempt) before
  it exits. Later attempts of the same Snakemake job (the workflow's ``attempt`` > 1, passed as
  :data:`ATTEMPT_VAR` by the launcher) refuse at once and print the record. A new invocation of
  the workflow (attempt 1) is the user asking again: it moves the marker aside
  (``failed.previous.json``) and trains.
- **The run lock** (``attempt.json``): each attempt records its Slurm job id (or host and
  process id outside Slurm). After a restart of the Snakemake process, ``--rerun-incomplete``
  may resubmit a run whose old job is still training; the new attempt, seeing its predecessor
  alive in ``squeue``, refuses instead of removing the predecessor's half-written checkpoint.

A job killed without Python seeing it (SIGKILL, a lost node) leaves no marker and is retried:
those are the failures a retry can mend.

Every guarded attempt also appends a row to ``attempts.jsonl`` (its seconds and how it ended),
so the compute table counts every attempt of a run, not only the last job's benchmark.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import traceback
from contextlib import contextmanager
from pathlib import Path

from nudgerl.io import ATTEMPTS_LOG, atomic_write_text

# The exit of a job that stopped itself before its time limit for a retry to resume (75,
# EX_TEMPFAIL): training (nudgerl.training.run_state) and evaluation (nudgerl.evaluation.benchmarks)
PLANNED_STOP_EXIT_CODE = 75
FAILED_FILE = "failed.json"
FAILED_PREVIOUS_FILE = "failed.previous.json"
ATTEMPT_FILE = "attempt.json"
# Set by the workflow's launchers (PlanResources.launcher, eval_launcher): Snakemake's attempt number
# of this job (1, then 2, ... on each retry) and the job's log.
ATTEMPT_VAR = "NUDGERL_ATTEMPT"
LOG_VAR = "NUDGERL_LOG"
# squeue's states of a job that may still write into the run folder (finished jobs stay listed
# for MinJobAge in COMPLETED, FAILED, CANCELLED, TIMEOUT, ...: those are not alive)
LIVE_SLURM_STATES = frozenset({"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "STOPPED",
                               "RESIZING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "SIGNALING", "STAGE_OUT"})


class RunFailedBefore(RuntimeError):
    """A retry of a run whose earlier attempt failed for a reason a retry does not mend."""


class PredecessorAlive(RuntimeError):
    """Another job of the same run is still alive (pending or training)."""


def this_attempt(environ=None) -> dict:
    environ = os.environ if environ is None else environ
    return {"slurm_job_id": environ.get("SLURM_JOB_ID") or None, "host": socket.gethostname(), "pid": os.getpid(),
            "attempt": int(environ.get(ATTEMPT_VAR) or 1), "log": environ.get(LOG_VAR) or None,
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}


def slurm_job_state(job_id: str, squeue: str = "squeue") -> str | None:
    """The job's state as squeue lists it, or None when Slurm no longer knows it (or squeue is
    missing: a run folder written under Slurm, read outside it)."""
    try:
        out = subprocess.run([squeue, "-h", "--states=all", "-j", str(job_id), "-o", "%T"],
                             capture_output=True, text=True, timeout=60)
    except (FileNotFoundError, subprocess.TimeoutExpired):
        return None
    states = out.stdout.split()
    return states[0] if out.returncode == 0 and states else None


def process_alive(pid: int) -> bool:
    """A process of this machine with this id runs a nudgerl command (not a reused id)."""
    try:
        cmdline = Path(f"/proc/{int(pid)}/cmdline").read_bytes()
    except (OSError, ValueError):
        return False
    return b"nudgerl" in cmdline


def live_predecessor(record: dict | None, here: dict, squeue: str = "squeue") -> str | None:
    """Why the recorded attempt may still be training (None: it is not)."""
    if not record:
        return None
    job = record.get("slurm_job_id")
    if job:
        if job == here.get("slurm_job_id"):
            return None  # this very job (a requeued Slurm job keeps its id)
        state = slurm_job_state(job, squeue)
        return f"Slurm job {job} is {state}" if state in LIVE_SLURM_STATES else None
    pid = record.get("pid")
    if record.get("host") == here["host"] and pid and pid != here["pid"] and process_alive(pid):
        return f"process {pid} on {record['host']} is still running"
    return None


def _failure_record(err: BaseException, here: dict) -> dict:
    tail = traceback.format_exception(type(err), err, err.__traceback__)
    return {**here, "ended": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "error": f"{type(err).__name__}: {err}",
            "traceback_tail": "".join(tail)[-4000:]}


def describe_failure(path: Path) -> str:
    """One paragraph on a failed marker: when, where, the error and the log to read."""
    try:
        rec = json.loads(path.read_text())
    except (OSError, ValueError):
        return f"{path} (unreadable)"
    where = f"Slurm job {rec['slurm_job_id']}" if rec.get("slurm_job_id") else f"process {rec.get('pid')} on {rec.get('host')}"
    log = f"; its log: {rec['log']}" if rec.get("log") else ""
    return f"attempt {rec.get('attempt')} ({where}, ended {rec.get('ended')}) failed with {rec.get('error')}{log}"


@contextmanager
def guarded_attempt(run_dir: Path, environ=None, main: bool = True, squeue: str = "squeue", log=print):
    """Around one attempt of a training run or an evaluation: refuse a retry of a failed run and a second live
    job on the run; record this attempt; on an error other than the planned stop (exit 75) or a
    user's interrupt, write the failed marker. ``main``: only the main process of a multi-process
    job reads and writes these files (the others run the body unguarded)."""
    if not main:
        yield
        return
    run_dir = Path(run_dir)
    here = this_attempt(environ)
    failed = run_dir / FAILED_FILE
    if failed.exists():
        if here["attempt"] > 1:
            raise RunFailedBefore(
                f"{run_dir}: not retried, an earlier attempt of this job failed for a reason a retry would meet "
                f"again: {describe_failure(failed)}. Fix the cause and run the workflow again (its first attempt "
                f"moves {failed.name} aside), or delete {failed}")
        os.replace(failed, run_dir / FAILED_PREVIOUS_FILE)
        log(f"{failed} from an earlier run of the workflow moved to {FAILED_PREVIOUS_FILE}; trying again")
    lock = run_dir / ATTEMPT_FILE
    try:
        previous = json.loads(lock.read_text()) if lock.exists() else None
    except ValueError:
        previous = None  # torn by a kill mid-write: nothing to protect
    alive = live_predecessor(previous, here, squeue)
    if alive:
        raise PredecessorAlive(
            f"{run_dir}: another job of this run is alive ({alive}, started {previous.get('started')}); this "
            "attempt would remove its half-written checkpoint. Wait for it to end, or cancel it "
            f"(scancel {previous.get('slurm_job_id') or ''}) and run again")
    atomic_write_text(lock, json.dumps(here, indent=2))
    t0, ended = time.monotonic(), "finished"
    try:
        yield
    except KeyboardInterrupt:
        ended = "interrupted"
        raise
    except SystemExit as e:
        ended = "stopped for the time limit" if e.code == PLANNED_STOP_EXIT_CODE else "finished"
        if e.code not in (0, None, PLANNED_STOP_EXIT_CODE):
            ended = "failed"
            atomic_write_text(failed, json.dumps(_failure_record(e, here), indent=2))
        raise
    except BaseException as e:
        ended = "failed"
        atomic_write_text(failed, json.dumps(_failure_record(e, here), indent=2))
        raise
    finally:
        row = {"attempt": here["attempt"], "slurm_job_id": here["slurm_job_id"], "host": here["host"],
               "started": here["started"], "seconds": round(time.monotonic() - t0, 3), "ended": ended}
        with open(run_dir / ATTEMPTS_LOG, "a") as f:
            f.write(json.dumps(row) + "\n")

