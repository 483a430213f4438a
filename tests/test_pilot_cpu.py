"""The pilot (config/paper.yaml + config/pilot.yaml, docs/cluster.md) end to end on this CPU,
through the local one-node Slurm cluster (scripts/slurm-local.sh, fake GPU GRES) with the
project's profile (profiles/slurm), as issue 44 asks before any GPU-day is spent.

The paper's DAG as the pilot plans it (task math, every rule of the paper once: the model's
snapshot, data prep, the helper-LLM DVC stages for pools and oracles, rank_hints, GRPO at
N = 8 and 64, the eps_high sweep, NudgeRL and its top_ranked ablation, POPE, the field's
baselines, evaluation, curves, tables, claims, the compute table and the audit), with a CPU
overlay written into the scratch copy that changes only what a CPU forces (OVERLAY below,
each key says why). Checked: the run finishes, every rule the pilot's dry run plans ran,
every job of a rule that is not a local rule ran as a Slurm job (every GPU rule's), nothing
is written under results/paper/, training took the pilot's 4 steps, evaluation drew 2 samples
a problem, Table 1 and the claims table exist and the audit passes.

`test_pilot_cpu_locally` runs the same command with `--cores 2` and no Slurm (the DAG's own
cost, for a failure that is not the scheduler's). Both are slow (minutes); the Slurm one is
skipped (or fails under NUDGERL_SLURM_LOCAL=1) without a cluster, as tests/test_slurm_local.py.
"""

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import copy_workflow, job_counts, save_tiny_model
from openai_server import FakeOpenAI
from test_slurm_local import FINISHED, SUBMITTED, _env, _squeue, partition  # noqa: F401 (a fixture)

# Not in CI (its hour): 7 min here with --cores 2, 24 min through the local Slurm cluster, where
# each of its 43 Slurm jobs costs about 27 s of starts and imports (docs/engines-in-ci.md).
pytestmark = [pytest.mark.slow, pytest.mark.release]

PILOT = ("config/paper.yaml", "config/pilot.yaml")
CPU_OVERLAY = "config/pilot_cpu.yaml"
RUN = Path("results/pilot")
MODEL = "tiny"
# A Hub id, not a local folder: rule snapshot_model (a paper rule) runs and takes it from the
# Hugging Face cache the test builds (HF_HUB_OFFLINE=1: no network), as on a submit host.
HUB_ID = "nudgerl-test/tiny-organism"
FAKE_COMMIT = "0123456789abcdef0123456789abcdef01234567"
GPU_RULES = ("train_grpo", "train_grpo_eps", "train_baseline", "train_nudgerl", "train_pope", "evaluate",
             "curve_eval", "rank_hints")
BENCHMARKS = ("aime24", "aime25", "amc23", "math500", "apex")

# The tiny model has 128 positions (nudgerl.organism.base_model.new_model); the authors'
# prompts with the organism tokenizer (unknown words -> <unk>) are 40-76 tokens on these
# problems (NudgeRL's, with two hints, the longest): prompt + completion must fit in 128.
MAX_PROMPT, MAX_NEW = 80, 32
OVERLAY = {
    # One tiny random Llama with the organism tokenizer instead of Qwen3-4B and Olmo-3-7B
    # (no 4B/7B model on a CPU). A Hub id, so the paper's snapshot rule runs (see HUB_ID).
    "models": [{"name": MODEL, "path": HUB_ID, "revision": "main"}],
    # Local files written by the test instead of the Hub datasets (no network): the offline
    # config's shape (config/offline.yaml), its field names, a few problems each.
    "data": {
        "train": {"hf": None, "hf_config": None, "revision": None, "path": "train.jsonl",
                  "problem_field": "problem", "answer_field": "answer", "id_field": "id"},
        "benchmarks": {name: {"hf": None, "revision": None, "path": f"{name}.jsonl", "problem_field": "problem",
                              "id_field": "id"} for name in BENCHMARKS},
    },
    "grpo": {
        "optim": "adamw_torch",      # 8-bit AdamW: bitsandbytes needs CUDA
        "bf16": False,               # mixed precision for the GPU: this CPU has no bf16 units
                                     # (no avx512_bf16 / amx_bf16), so it trains in fp32
        "use_vllm": False,           # no vLLM here: TRL generates with transformers
        "max_prompt_length": MAX_PROMPT,       # the tiny model's 128 positions
        "max_completion_length": MAX_NEW,
    },
    # vLLM -> transformers for evaluation and hint ranking; lengths for the 128 positions
    "eval": {"backend": "transformers", "max_new_tokens": MAX_NEW, "max_model_len": MAX_PROMPT + MAX_NEW},
    "ranking": {"backend": "transformers", "max_new_tokens": MAX_NEW, "max_model_len": MAX_PROMPT + MAX_NEW},
    "resources": {
        # (gpu: 0 is on the command line, NO_GPU below: the schema's per-rule values start at 1)
        # 2 CPU cores here, not 8 a GPU
        "threads": {rule: 1 for rule in GPU_RULES},
        # the paper's 64 GB a job: more than this machine has (Slurm would never start the job)
        "mem_mb": {rule: 3000 for rule in GPU_RULES},
    },
}


# No CUDA here: a job given a GPU stops at once (NUDGERL_REQUIRE_CUDA=1, nudgerl.hardware;
# test_slurm_local.py's fake-GRES test shows it), so every GPU rule asks for none. On the command
# line, because the config schema's resources.gpu.<rule> starts at 1; --set-resources changes
# only what it names (config/paper.yaml's other per-rule requests stay).
NO_GPU = ("--set-resources", *(f"{rule}:gpu=0" for rule in GPU_RULES))


def _write_data(folder: Path) -> None:
    """A few short math problems per benchmark and 8 training problems (config/pilot.yaml's
    data.train.size 8 takes them all), with the fields config/offline.yaml reads; MATH-500's
    rows carry the level it filters on."""
    folder.mkdir(parents=True, exist_ok=True)

    def rows(prefix, n, **extra):
        return [{"id": f"{prefix}-{i}", "problem": f"What is {i} + {i + 2} ?", "answer": str(2 * i + 2), **extra}
                for i in range(n)]

    files = {"train.jsonl": rows("dapo", 8), **{f"{b}.jsonl": rows(b, 2) for b in BENCHMARKS}}
    files["math500.jsonl"] = rows("math500", 3, level=5) + rows("math500-easy", 1, level=1)  # filter: level 5
    for name, records in files.items():
        (folder / name).write_text("".join(json.dumps(r) + "\n" for r in records))


def _fake_hub_cache(cache: Path) -> None:
    """The tiny model as the Hugging Face cache holds a download of HUB_ID at main."""
    repo = cache / f"models--{HUB_ID.replace('/', '--')}"
    save_tiny_model(repo / "snapshots" / FAKE_COMMIT)
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(FAKE_COMMIT)


def _pilot_checkout(workdir: Path, server_url: str) -> dict:
    """The scratch checkout's CPU overlay, data, Hub cache and helper endpoints; returns the
    environment the run needs."""
    data, cache = workdir / "pilot-data", workdir / "hf-cache"
    _write_data(data)
    _fake_hub_cache(cache)
    overlay = {**OVERLAY, "data": {**OVERLAY["data"], "local_dir": str(data)}}
    (workdir / CPU_OVERLAY).write_text(yaml.safe_dump(overlay, sort_keys=False))
    # The helper LLM and the oracle (params.yaml's DVC stages pools_dapo, oracles_dapo): the
    # local stand-in server instead of gpt-4o-mini and deepseek-reasoner (no network, no key).
    params = yaml.safe_load((workdir / "params.yaml").read_text())
    for section in ("pools_dapo", "oracles_dapo"):
        params[section]["base_url"] = server_url
    (workdir / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    keys = {params[s]["api_key_env"]: "sk-dummy-pilot-test" for s in ("pools_dapo", "oracles_dapo")}
    return {**keys, "HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}


def _planned_rules(workdir: Path, env: dict) -> set[str]:
    """The rules the pilot's own dry run plans (paper + pilot, no CPU overlay)."""
    proc = subprocess.run(["snakemake", "all", "-n", "--configfile", *PILOT], cwd=workdir, capture_output=True,
                          text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return set(job_counts(proc.stdout + proc.stderr))


def _check_results(workdir: Path, log: str, planned: set[str]) -> None:
    ran = {rule for _, rule in FINISHED.findall(log)}
    assert ran == planned, f"planned, not run: {sorted(planned - ran)}; run, not planned: {sorted(ran - planned)}"
    assert set(GPU_RULES) <= ran
    assert not (workdir / "results" / "paper").exists()
    run = workdir / RUN / MODEL
    reports = sorted(run.glob("runs/*/seed0/train_report.json"))
    assert len(reports) == 13, reports  # 2 GRPO, 1 eps_high, 2 NudgeRL, POPE, 7 baselines
    for path in reports:
        assert json.loads(path.read_text())["global_step"] == 4, path  # pilot: grpo.max_steps 4
    evals = sorted(run.glob("eval/*/seed0/summary.json"))
    assert len(evals) == 14, evals  # base + every trained run
    for path in evals:
        for bench in BENCHMARKS:
            counts = {}
            for line in (path.parent / f"{bench}.samples.jsonl").read_text().splitlines():
                pid = json.loads(line)["id"]
                counts[pid] = counts.get(pid, 0) + 1
            # pilot: eval.samples_per_problem 2, on every problem (MATH-500: its 3 of level 5)
            assert len(counts) == (3 if bench == "math500" else 2) and set(counts.values()) == {2}, (path, bench)
    for table in ("tables/table1.md", "tables/claims.md", "tables/compute.csv"):
        assert (run / table).stat().st_size > 0, table
    audit = (run / "audit" / "audit.txt").read_text()
    assert audit.startswith("nudgerl audit: OK"), audit[-3000:]


def _snakemake(*extra) -> list[str]:
    # Targets before --configfile: it takes every following argument as a file.
    return ["snakemake", "all", *NO_GPU, *extra, "--configfile", *PILOT, CPU_OVERLAY]


def test_pilot_cpu_locally(tmp_path):
    workdir = copy_workflow(tmp_path)
    with FakeOpenAI() as server:
        env = {**os.environ, **_pilot_checkout(workdir, server.url)}
        planned = _planned_rules(workdir, env)
        proc = subprocess.run(_snakemake("--cores", "2"), cwd=workdir, capture_output=True, text=True,
                              timeout=3600, env=env)  # a hang guard, not a speed target
    assert proc.returncode == 0, proc.stderr[-5000:]
    assert server.requests  # pools and oracles asked the stand-in
    _check_results(workdir, proc.stderr, planned)


def test_pilot_cpu_through_slurm(tmp_path, partition):  # noqa: F811 (the imported fixture)
    workdir = copy_workflow(tmp_path)
    with FakeOpenAI() as server:
        env = _env(partition, **_pilot_checkout(workdir, server.url))
        planned = _planned_rules(workdir, env)
        command = _snakemake(
            "--profile", "profiles/slurm", "--jobs", "2",
            # for a cluster without accounting (profiles/slurm/config.yaml; test_slurm_local.py)
            "--slurm-status-command", "squeue", "--slurm-init-seconds-before-status-checks", "2",
            "--slurm-keep-successful-logs", "--latency-wait", "5", "--retries", "0")
        proc = subprocess.run(command, cwd=workdir, capture_output=True, text=True, timeout=3600, env=env)
    assert proc.returncode == 0, proc.stderr[-5000:]
    assert server.requests
    _check_results(workdir, proc.stderr, planned)
    # every job of a rule that is no local rule of the workflow ran as a Slurm job, and there
    assert _ran_in_slurm(proc.stderr, workdir) >= set(GPU_RULES)


# The workflow's local rules here (localrule: the Hub download, the helper-LLM stages that call
# an API, checkpoint deletion, the target): they run on the submit host, not in Slurm.
LOCAL_RULES = ("snapshot_model", "prepare_train", "prepare_benchmark", "strategy_pools", "oracle_solutions",
               "prune_checkpoints", "all")


def _ran_in_slurm(output: str, workdir: Path) -> set[str]:
    """The rules whose jobs ran as Slurm jobs; every finished job of another rule than
    LOCAL_RULES is one, and its Slurm log (written by the job step on the node) shows it ran.
    test_slurm_local.py's _assert_all_in_slurm, except that Slurm's own record is checked only
    while squeue still shows it: MinJobAge (600 s) is shorter than this run."""
    submitted = {m.group(1): (m.group(2), m.group(3)) for m in SUBMITTED.finditer(output)}
    finished = FINISHED.findall(output)
    outside = sorted({rule for job, rule in finished if job not in submitted} - set(LOCAL_RULES))
    assert not outside, f"jobs that ran outside Slurm: {outside}"
    records = _squeue([slurm_id for slurm_id, _ in submitted.values()])
    rules = set()
    for job, rule in finished:
        if job not in submitted:
            continue
        slurm_id, slurm_log = submitted[job]
        if slurm_id in records:
            record = records[slurm_id]
            assert record["state"] == "COMPLETED" and record["comment"].startswith(f"rule_{rule}"), record
        text = Path(slurm_log).read_text()
        assert f"rule {rule}:" in text and "Finished jobid" in text, text[-2000:]
        assert str(workdir) in slurm_log
        rules.add(rule)
    return rules
