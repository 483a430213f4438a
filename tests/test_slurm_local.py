"""The workflow through a real Slurm cluster: the project's profile (profiles/slurm), the real
executor plugin, a one-node cluster on localhost (scripts/slurm-local.sh, started by .ci/run).

A slice of the smoke DAG: organism data, base model, the strategy-pool DVC stage, a NudgeRL
training run and its evaluation. Checked: every job ran as a Slurm job (none on the head
node), the per-rule requests and the account and partition from the environment reached
Slurm, a training job killed by Slurm resumes from its checkpoint on the rerun, a failing job
fails the run and names its log, and unfilled profile settings stop a run before any submit.
A training job that fails for another reason than the planned stop is not retried, and a run
whose recorded job is still alive in Slurm is not trained by a second job.
A GPU job on the node's fake GPUs (scripts/slurm-local.sh): the GPU type from the environment
reaches Slurm, and the job, finding no CUDA, fails fast with the hardware message.

The cluster has no accounting database, so the run uses what profiles/slurm documents for
such clusters: `--slurm-status-command squeue` (MinJobAge 600 s in the script's slurm.conf,
>= 3x the init seconds below). Slurm is machine-wide: this module must not run in parallel
with itself.
"""

import json
import os
import re
import shutil
import subprocess
import time

import pytest
import yaml

pytestmark = pytest.mark.slow

ACCOUNT = "nudgerl-ci"
TARGET = "results/smoke/eval/nudgerl2/seed0/summary.json"
RUN = "results/smoke/runs/nudgerl2/seed0"
TRAIN_LOG = "results/smoke/logs/train_nudgerl/nudgerl2_seed0.log"
MAX_STEPS = 12
# What the slice's rules ask for, beyond the profile's defaults (runtime 60, mem_mb 8000):
# per-rule values in the workflow's config (resources.<name>.<rule>) and one on the command
# line, as a user overrides one rule; none of them may drop the others or the account.
OVERLAY = {
    "grpo": {"max_steps": MAX_STEPS, "checkpoint_every": 2},
    "resources": {"mem_mb": {"train_nudgerl": 3500}, "cpus_per_task": {"train_nudgerl": 2}},
}
CLI_OVERRIDE = "train_nudgerl:runtime=25"
SUBMITTED = re.compile(r"Job (\d+) has been submitted with SLURM jobid (\d+) \(log: (\S+)\)\.")
FINISHED = re.compile(r"Finished jobid: (\d+) \(Rule: (\w+)\)")


def _cluster_partition() -> str | None:
    """The default partition of a running cluster, or None when none answers."""
    if not shutil.which("sinfo"):
        return None
    try:
        out = subprocess.run(["sinfo", "-h", "-o", "%P %T"], capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        return None
    for line in out.stdout.splitlines():
        part, state = line.split()
        if part.endswith("*") and state in ("idle", "mixed", "allocated"):
            return part.rstrip("*")
    return None


@pytest.fixture(scope="module")
def partition():
    # .ci/run starts the cluster where it can (root, apt) and sets NUDGERL_SLURM_LOCAL=1: from
    # then on a missing cluster is a failure, not a skip.
    required = os.environ.get("NUDGERL_SLURM_LOCAL") == "1"
    part = _cluster_partition()
    if part is None:
        reason = ("no local Slurm cluster answers (`sinfo`); start one as root with "
                  "`bash scripts/slurm-local.sh start`")
        if os.geteuid() != 0:
            reason = "needs root: the local Slurm cluster's daemons and /etc/slurm are machine-wide"
        if required:
            pytest.fail(f"NUDGERL_SLURM_LOCAL=1 but {reason}")
        pytest.skip(reason)
    return part


def _env(partition, **extra):
    env = {**os.environ, "NUDGERL_SLURM_ACCOUNT": ACCOUNT, "NUDGERL_SLURM_PARTITION": partition,
           "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    env.update(extra)
    return {k: v for k, v in env.items() if v is not None}


def _command(*targets, extra=()):
    # Targets before --configfile (it takes every following argument as a file).
    return ["snakemake", *targets, "--profile", "profiles/slurm", "--configfile", "config/smoke.yaml",
            "config/slurm.yaml", "--jobs", "2", "--set-resources", CLI_OVERRIDE,
            # for a cluster without accounting (documented in profiles/slurm/config.yaml)
            "--slurm-status-command", "squeue", "--slurm-init-seconds-before-status-checks", "2",
            # keep every job's Slurm log, to check where each job ran
            "--slurm-keep-successful-logs", "--latency-wait", "5", "--retries", "0", *extra]


def _squeue(job_ids) -> dict[str, dict]:
    """Slurm's record of each job (finished ones stay visible for MinJobAge)."""
    fields = ["id", "comment", "mem", "time", "cpus", "partition", "account", "state"]
    out = subprocess.run(["squeue", "-h", "--states=all", "-j", ",".join(job_ids), "-o", "%i|%k|%m|%l|%C|%P|%a|%T"],
                         capture_output=True, text=True, check=True).stdout
    rows = [dict(zip(fields, line.split("|"))) for line in out.splitlines()]
    return {r["id"]: r for r in rows}


def _jobs_of(output: str) -> tuple[dict[str, tuple[str, str]], list[tuple[str, str]]]:
    """Snakemake job id -> (Slurm job id, Slurm log) for every submission, and the
    (Snakemake job id, rule) of every job that finished."""
    submitted = {m.group(1): (m.group(2), m.group(3)) for m in SUBMITTED.finditer(output)}
    return submitted, FINISHED.findall(output)


def _assert_all_in_slurm(output: str, workdir) -> dict[str, str]:
    """Every job Snakemake finished was a Slurm job, and its Slurm log shows it ran there.
    Returns rule (with wildcards, as Slurm's comment) -> Slurm job id."""
    submitted, finished = _jobs_of(output)
    assert finished, output[-3000:]
    outside = [(j, rule) for j, rule in finished if j not in submitted]
    assert not outside, f"jobs that ran outside Slurm: {outside}"
    by_comment = {}
    records = _squeue([slurm_id for slurm_id, _ in submitted.values()])
    for job, rule in finished:
        slurm_id, slurm_log = submitted[job]
        record = records[slurm_id]
        assert record["state"] == "COMPLETED" and record["comment"].startswith(f"rule_{rule}"), record
        text = open(slurm_log).read()  # written by the job step on the node
        assert f"rule {rule}:" in text and "Finished jobid" in text, text[-2000:]
        assert str(workdir) in slurm_log
        by_comment[record["comment"]] = slurm_id
    return by_comment


def _complete_checkpoints(run):
    # complete as the resume sees it: trainer_state.json written in full, not only created (a job
    # cancelled mid-save, likelier on a loaded machine, leaves one the resume removes)
    from nudgerl.training.run_state import checkpoint_complete

    return sorted(int(p.name.split("-")[1]) for p in (run / "checkpoints").glob("checkpoint-*")
                  if checkpoint_complete(p))


def _running_job(comment_prefix: str) -> str | None:
    out = subprocess.run(["squeue", "-h", "-t", "running", "-o", "%i|%k"], capture_output=True, text=True).stdout
    ids = [i for i, c in (line.split("|") for line in out.splitlines()) if c.startswith(comment_prefix)]
    return ids[0] if ids else None


def test_unfilled_profile_settings_stop_the_run_before_any_submit(workdir, partition):
    (workdir / "config" / "slurm.yaml").write_text(yaml.safe_dump(OVERLAY))
    before = subprocess.run(["squeue", "-h", "--states=all", "-o", "%i"], capture_output=True, text=True).stdout
    proc = subprocess.run(_command(TARGET), cwd=workdir, capture_output=True, text=True, timeout=300,
                          env=_env(partition, NUDGERL_SLURM_ACCOUNT=None))
    assert proc.returncode == 1
    assert "environment variable NUDGERL_SLURM_ACCOUNT is not set" in proc.stderr, proc.stderr[-3000:]
    assert "NUDGERL_SLURM_PARTITION" not in proc.stderr.split("unfilled scheduler settings")[1]  # that one is set
    after = subprocess.run(["squeue", "-h", "--states=all", "-o", "%i"], capture_output=True, text=True).stdout
    assert after == before and "submitted with SLURM jobid" not in proc.stderr


def test_smoke_slice_through_slurm(workdir, partition):
    (workdir / "config" / "slurm.yaml").write_text(yaml.safe_dump(OVERLAY))
    run = workdir / RUN

    # 1. The slice, with the training job killed by Slurm after its first checkpoint (as a
    #    time limit, a preemption or a lost node would).
    with open(workdir / "first.log", "w") as log:
        proc = subprocess.Popen(_command(TARGET), cwd=workdir, stdout=log, stderr=subprocess.STDOUT,
                                env=_env(partition))
    deadline = time.monotonic() + 600
    while not _complete_checkpoints(run):
        assert proc.poll() is None, (workdir / "first.log").read_text()[-3000:]
        assert time.monotonic() < deadline, "no checkpoint within 10 min"
        time.sleep(0.1)
    train_job = _running_job("rule_train_nudgerl")
    assert train_job, "the training job is not running in Slurm"
    subprocess.run(["scancel", train_job], check=True)
    assert proc.wait(timeout=300) == 1
    first = (workdir / "first.log").read_text()
    assert max(_complete_checkpoints(run)) < MAX_STEPS and not (run / "model").exists()
    assert f"SLURM-job '{train_job}' failed" in first, first[-3000:]
    assert TRAIN_LOG in first  # the failed job's log is named
    done_first = _assert_all_in_slurm(first, workdir)
    # Slurm's records of these jobs, read now: squeue forgets a job MinJobAge (600 s) after it
    # ended, and on a loaded machine step 2 alone can take longer than that.
    first_records = _squeue(list(done_first.values()))
    assert {c.split("_wildcards")[0] for c in done_first} == {
        "rule_organism_data", "rule_drilled_model", "rule_base_model", "rule_diagnose_base", "rule_regime_gate",
        "rule_strategy_pools"}

    # 2. The same command again: only the killed job and the evaluation run, and training
    #    resumes from its last complete checkpoint.
    kept = max(_complete_checkpoints(run))
    again = subprocess.run(_command(TARGET), cwd=workdir, capture_output=True, text=True, timeout=900,
                           env=_env(partition))
    assert again.returncode == 0, again.stderr[-4000:]
    done = _assert_all_in_slurm(again.stderr, workdir)
    assert set(done) == {"rule_train_nudgerl_wildcards_nudgerl2_0", "rule_evaluate_wildcards_nudgerl2_0"}
    assert f"at global step {kept}" in (workdir / TRAIN_LOG).read_text()
    report = json.loads((run / "train_report.json").read_text())
    assert report["resumed_from_step"] == kept and report["global_step"] == MAX_STEPS
    summary = json.loads((workdir / TARGET).read_text())
    assert set(summary) == {"aime24", "aime25", "amc23", "math500", "apex"}

    # 3. What each job asked for reached Slurm: profile defaults, per-rule config values and
    #    the command-line override side by side, account and partition from the environment.
    records = {**first_records, **_squeue(list(done.values()))}
    by_rule = {r["comment"].split("_wildcards")[0][len("rule_"):]: r for r in records.values()}
    assert all(r["account"] == ACCOUNT and r["partition"] == partition for r in records.values())
    train = by_rule["train_nudgerl"]
    assert (train["mem"], train["time"], train["cpus"]) == ("3500M", "25:00", "2")
    assert (by_rule["evaluate"]["mem"], by_rule["evaluate"]["time"]) == ("2000M", "1:00:00")  # rule default
    assert (by_rule["organism_data"]["mem"], by_rule["organism_data"]["time"]) == ("8000M", "1:00:00")  # profile

    # 4. A job that fails by itself (a corrupt benchmark file) fails the run and names its log.
    bench = workdir / "results" / "smoke" / "data" / "eval" / "apex.jsonl"
    stat = bench.stat()
    bench.write_text(bench.read_text() + "{not json\n")
    # same mtime: only the forced evaluation reads it (the diagnosis, which also reads the
    # benchmarks, would otherwise rerun first and be the job that fails)
    os.utime(bench, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    failed = subprocess.run(_command(TARGET, extra=("--forcerun", "evaluate")), cwd=workdir, capture_output=True,
                            text=True, timeout=600, env=_env(partition))
    assert failed.returncode == 1
    submitted, _ = _jobs_of(failed.stderr)
    (slurm_id, slurm_log), = submitted.values()
    assert f"SLURM-job '{slurm_id}' failed" in failed.stderr, failed.stderr[-3000:]
    assert "results/smoke/logs/evaluate/nudgerl2_seed0.log" in failed.stderr and slurm_log in failed.stderr
    assert _squeue([slurm_id])[slurm_id]["state"] == "FAILED"
    assert "apex.jsonl" in (workdir / "results" / "smoke" / "logs" / "evaluate" / "nudgerl2_seed0.log").read_text()


GPU_EVAL_TARGET = "results/smoke/eval/base/seed0/summary.json"
GPU_EVAL_LOG = "results/smoke/logs/evaluate/base_seed0.log"


def _cluster_gpu_type() -> str:
    """The type of the node's GPU GRES (scripts/slurm-local.sh: gpu:<type>:2)."""
    gres = subprocess.run(["sinfo", "-h", "-o", "%G"], capture_output=True, text=True, check=True).stdout.strip()
    m = re.fullmatch(r"gpu:(\w+):\d+(\(.*\))?", gres)
    assert m, f"the node has no GPU GRES ({gres!r}): restart it with `bash scripts/slurm-local.sh stop` and `start`"
    return m.group(1)


def _slurm_job_fields(job_id: str) -> dict[str, str]:
    out = subprocess.run(["scontrol", "show", "job", job_id], capture_output=True, text=True, check=True).stdout
    return dict(f.split("=", 1) for f in out.split() if "=" in f)


def test_gpu_job_asks_for_the_clusters_gpu_type_and_fails_fast_without_cuda(workdir, partition):
    """One evaluation job given a GPU, through the paper-shaped profile: the GPU type from
    NUDGERL_SLURM_GPU_TYPE reaches Slurm (--gpus=<type>:1, read back from the job), Slurm gives
    it one of the node's fake GPUs, and the job, finding no CUDA, stops within seconds with the
    message that names the torch build, the device count and CUDA_VISIBLE_DEVICES."""
    gpu_type = _cluster_gpu_type()
    (workdir / "config" / "slurm_gpu.yaml").write_text(yaml.safe_dump({"resources": {"gpu": {"evaluate": 1}}}))
    # The evaluation's inputs as empty stand-ins (only the evaluate rule may run): the job must
    # stop at the CUDA check, before it reads any of them.
    (workdir / "results" / "smoke" / "models" / "base" / "seed0").mkdir(parents=True)
    for bench in ("aime24", "aime25", "amc23", "math500", "apex"):
        path = workdir / "results" / "smoke" / "data" / "eval" / f"{bench}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
    command = ["snakemake", GPU_EVAL_TARGET, "--profile", "profiles/slurm", "--configfile", "config/smoke.yaml",
               "config/slurm_gpu.yaml", "--allowed-rules", "evaluate", "--jobs", "1",
               "--slurm-status-command", "squeue", "--slurm-init-seconds-before-status-checks", "2",
               "--latency-wait", "5", "--retries", "0"]
    proc = subprocess.run(command, cwd=workdir, capture_output=True, text=True, timeout=300,
                          env=_env(partition, NUDGERL_SLURM_GPU_TYPE=gpu_type))
    assert proc.returncode == 1, proc.stderr[-3000:]
    submitted, _ = _jobs_of(proc.stderr)
    (slurm_id, _slurm_log), = submitted.values()
    assert f"SLURM-job '{slurm_id}' failed" in proc.stderr and GPU_EVAL_LOG in proc.stderr, proc.stderr[-3000:]

    # What Slurm recorded: one GPU of the type from the environment, and the job held it.
    job = _slurm_job_fields(slurm_id)
    assert job["TresPerJob"] == f"gres:gpu:{gpu_type}:1", job
    assert job["JobState"] == "FAILED" and job["Account"] == ACCOUNT and job["Partition"] == partition, job
    # It failed fast: stopped at the check, before reading any input (the log and the missing
    # outputs below). RunTime (Snakemake's start inside the job, torch's import and the check) is
    # only bounded as a hang guard: a loaded machine slows those imports several times over.
    hours, minutes, seconds = (int(x) for x in job["RunTime"].split(":"))
    assert hours * 3600 + minutes * 60 + seconds < 240, job["RunTime"]

    log = (workdir / GPU_EVAL_LOG).read_text()
    assert log.startswith("nudgerl evaluate: error: this job asked for a GPU (NUDGERL_REQUIRE_CUDA=1)"), log
    assert "torch.version.cuda = None" in log and "torch.cuda.device_count() = 0" in log, log
    # Slurm set CUDA_VISIBLE_DEVICES for the GPU it assigned: the message tells the user that the
    # scheduler did its part and the torch build / driver is what to check.
    assert re.search(r"CUDA_VISIBLE_DEVICES = '\d'", log) and "the scheduler assigned GPUs" in log, log
    assert not (workdir / "results" / "smoke" / "eval" / "base" / "seed0").exists()


TRAIN_TARGET = "results/smoke/runs/nudgerl2/seed0/model"
TRAIN_RUN = "results/smoke/runs/nudgerl2/seed0"


def test_a_failed_training_job_is_not_retried_and_a_live_job_locks_its_run(workdir, partition):
    """The training rule's retries (nudgerl.attempts) through Slurm: a job that fails
    for a reason a retry meets again (a corrupt training file) records it, and its retry refuses
    at once, naming the error and the log. A run whose recorded job is still alive in Slurm (a
    Snakemake restart's resubmission) is not trained by a second job (that it trains once the
    recorded process is gone: tests/test_attempts.py)."""
    # Stand-in inputs: only train_nudgerl may run, and it fails reading the training file.
    data = workdir / "results" / "smoke"
    (data / "models" / "base" / "seed0").mkdir(parents=True)
    for path, text in (("diagnostics/base_model/seed0.regime.json", "{}"), ("data/train.jsonl", "{not json\n"),
                       ("pools/pools_organism.jsonl", "")):
        (data / path).parent.mkdir(parents=True, exist_ok=True)
        (data / path).write_text(text)
    log, run = workdir / TRAIN_LOG, workdir / TRAIN_RUN

    def train(retries: int):
        command = ["snakemake", TRAIN_TARGET, "--profile", "profiles/slurm", "--configfile", "config/smoke.yaml",
                   "--allowed-rules", "train_nudgerl", "--jobs", "1", "--slurm-status-command", "squeue",
                   "--slurm-init-seconds-before-status-checks", "2", "--latency-wait", "5", "--retries", str(retries)]
        return subprocess.run(command, cwd=workdir, capture_output=True, text=True, timeout=600, env=_env(partition))

    # 1. Two attempts (retries 1): the first fails on the file, the second refuses.
    proc = train(retries=1)
    assert proc.returncode == 1, proc.stderr[-3000:]
    jobs = [slurm_id for _, slurm_id, _ in SUBMITTED.findall(proc.stderr)]
    assert len(jobs) == 2, proc.stderr[-3000:]
    failure = json.loads((run / "failed.json").read_text())
    assert failure["attempt"] == 1 and failure["slurm_job_id"] == jobs[0] and "not valid JSON" in failure["error"]
    # the log Snakemake kept is the last attempt's: a refusal that names the first failure and its log
    text = log.read_text()
    assert text.startswith("nudgerl train-nudgerl: error: ") and "not retried, an earlier attempt" in text, text
    assert f"attempt 1 (Slurm job {jobs[0]}" in text and "train.jsonl:1: not valid JSON" in text and TRAIN_LOG in text
    assert [r["ended"] for r in map(json.loads, (run / "attempts.jsonl").read_text().splitlines())] == ["failed"]

    # 2. A live job recorded on the run (as a resubmission after a Snakemake restart finds it).
    # alive through the wait below and the refused run's own timeout (cancelled at the end)
    live = subprocess.run(["sbatch", "--parsable", "-A", ACCOUNT, "-p", partition, "-t", "20", "-c", "1",
                           "--mem", "100M", "--wrap", "sleep 900"],
                          capture_output=True, text=True, check=True).stdout.strip().split(";")[0]
    try:
        # a hang guard: Slurm may start a job only at its next scheduling pass, on a loaded machine later
        deadline = time.monotonic() + 180
        while _squeue([live])[live]["state"] != "RUNNING":
            assert time.monotonic() < deadline, _squeue([live])
            time.sleep(0.5)
        record = json.loads((run / "attempt.json").read_text())
        (run / "attempt.json").write_text(json.dumps({**record, "slurm_job_id": live}))
        blocked = train(retries=0)
        assert blocked.returncode == 1
        new = log.read_text()  # each job's log starts afresh under Slurm
        assert f"another job of this run is alive (Slurm job {live} is RUNNING" in new, new
        assert "not valid JSON" not in new  # refused before training began
    finally:
        subprocess.run(["scancel", live], check=True)


EVAL_TARGET = "results/smoke/eval/base/seed0/summary.json"
EVAL_DIR = "results/smoke/eval/base/seed0"
BENCHMARKS = ("aime24", "aime25", "amc23", "math500", "apex")


@pytest.mark.release  # 6 min here (5 Slurm jobs, each loading the model): not in CI's hour
def test_an_evaluation_stopped_before_its_limit_is_resumed_by_its_retries(workdir, partition, tmp_path):
    """Rule evaluate through Slurm with 1 s of budget (eval_stop_before_limit_s: the profile's
    60 min less 1 s): each job samples one chunk (one benchmark: no eval.chunk_problems), stops
    and exits 75, and the rule's own retries (eval_retries) resubmit it as a new Slurm job (never
    inside the stopped one: workflow/rules/common.smk) to resume there, until the fifth finishes.
    Its records are those of the same evaluation run in one go outside Slurm, and every attempt
    is recorded with its Slurm job."""
    from conftest import save_tiny_model
    from nudgerl.attempts import FAILED_FILE
    from nudgerl.io import ATTEMPTS_LOG
    from nudgerl.organism import task

    # Only rule evaluate may run: its inputs are a tiny random model and 3 problems a benchmark.
    data = workdir / "results" / "smoke"
    save_tiny_model(data / "models" / "base" / "seed0")
    for name, problems in task.evaluation_sets(0, {b: (3, 0.5) for b in BENCHMARKS}).items():
        path = data / "data" / "eval" / f"{name}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(p.to_record()) + "\n" for p in problems))
    alone = tmp_path / "alone"
    shutil.copytree(workdir, alone, symlinks=True)  # the same inputs, for the run in one go
    (workdir / "config" / "slurm_eval.yaml").write_text(yaml.safe_dump(
        {"eval_retries": 6, "eval_stop_before_limit_s": 60 * 60 - 1}))
    command = ["snakemake", EVAL_TARGET, "--profile", "profiles/slurm", "--configfile", "config/smoke.yaml",
               "config/slurm_eval.yaml", "--allowed-rules", "evaluate", "--jobs", "1",
               "--slurm-status-command", "squeue", "--slurm-init-seconds-before-status-checks", "2",
               "--latency-wait", "5", "--retries", "0"]
    proc = subprocess.run(command, cwd=workdir, capture_output=True, text=True, timeout=900, env=_env(partition))
    assert proc.returncode == 0, proc.stderr[-4000:]
    jobs = [slurm_id for _, slurm_id, _ in SUBMITTED.findall(proc.stderr)]
    assert len(jobs) == len(BENCHMARKS), proc.stderr[-4000:]  # one benchmark a job
    out = workdir / EVAL_DIR
    attempts = [json.loads(line) for line in (out / ATTEMPTS_LOG).read_text().splitlines()]
    assert [a["ended"] for a in attempts] == ["stopped for the time limit"] * 4 + ["finished"]
    assert [a["slurm_job_id"] for a in attempts] == jobs and not (out / FAILED_FILE).exists()

    local = subprocess.run(["snakemake", EVAL_TARGET, "--cores", "1", "--configfile", "config/smoke.yaml",
                            "--allowed-rules", "evaluate"], cwd=alone, capture_output=True, text=True, timeout=600)
    assert local.returncode == 0, local.stderr[-3000:]
    for bench in BENCHMARKS:
        for kind in ("samples.jsonl", "problems.jsonl"):
            assert (out / f"{bench}.{kind}").read_text() == (alone / EVAL_DIR / f"{bench}.{kind}").read_text()
