import fcntl
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from nudgerl.tools import put_environment_first_on_path, tool_command

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
# Tests run `snakemake`, `nudgerl` and `dvc` as commands: they must be this environment's even
# when pytest is started as `.venv/bin/python -m pytest` without activating the venv.
put_environment_first_on_path()

REPO = Path(__file__).resolve().parents[1]
# The real benchmark files, beside the checkout (../shared) unless NUDGERL_SHARED_BENCHMARKS names them
SHARED_BENCHMARKS = Path(os.environ.get("NUDGERL_SHARED_BENCHMARKS", REPO.parent / "shared" / "data" / "benchmarks"))


# the extras scripts/lock.sh resolves into requirements/*-lock.txt (and CI installs): the tests'
# own, and the two optional features CI also tests (SmolLM2's GGUF reader, W&B)
LOCKED_EXTRAS = ("test", "smollm2", "tracking")

WORKFLOW_FILES = ("Snakefile", "workflow", "config", "profiles", "dvc.yaml", "params.yaml", ".gitignore")


def load_script(relative: str):
    """A script of the repository that is not a package module (benchmarks/, scripts/), imported
    from its file so that tests can call its functions."""
    import importlib.util

    path = REPO / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def copy_workflow(dest: Path) -> Path:
    """A scratch copy of the workflow in its own git + DVC repo, as a user's clone is:
    runs never touch this checkout's results/, and DVC's git checks (ignored files) apply."""
    for name in WORKFLOW_FILES:
        src = REPO / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, dest / name)
    subprocess.run(["git", "init", "-q"], cwd=dest, check=True)
    subprocess.run([*tool_command("dvc"), "init", "-q"], cwd=dest, check=True)
    return dest


def merged_config(*overlays: str) -> dict:
    """config/config.yaml with the named config/ overlays merged over it, as Snakemake's
    --configfile merges them."""
    from nudgerl.io import merged_configfiles

    return merged_configfiles(REPO / "config" / "config.yaml", *(REPO / "config" / name for name in overlays))


def job_counts(out: str) -> dict[str, int]:
    table = out.split("Job stats:", 1)[1].split("total", 1)[0]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)\s*$", table, re.M)}


def failed_rule_logs(workdir: Path, snakemake_output: str) -> str:
    """The logs of the rules a failed Snakemake run names (its "log: X (check log file(s) ...)"
    lines), to print with the failure: a test's temporary folder is gone by the time CI's
    output is read."""
    paths = re.findall(r"log: (\S+) \(check log file", snakemake_output)
    return "".join(f"\n--- {p}:\n{(workdir / p).read_text()[-3000:]}" for p in dict.fromkeys(paths)
                   if (workdir / p).is_file())


def stand_in_data(workdir) -> str:
    """Empty files where config/smollm2.yaml's datasets are: preflight checks that local
    datasets exist before any job starts, and a dry run reads none of them."""
    cfg = yaml.safe_load((REPO / "config" / "smollm2.yaml").read_text())["data"]
    data = workdir / "stand-in-data"
    data.mkdir(exist_ok=True)
    for spec in [cfg["train"], *cfg["benchmarks"].values()]:
        (data / spec["path"]).write_text("")
    (workdir / "config" / "stand_in_data.yaml").write_text(yaml.safe_dump({"data": {"local_dir": str(data)}}))
    return "config/stand_in_data.yaml"


@pytest.fixture
def workdir(tmp_path):
    return copy_workflow(tmp_path)


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory):
    """One finished `snakemake --cores 2 --configfile config/smoke.yaml` in a scratch git + DVC
    checkout, shared by the tests that read its results (the DAG is the slow part). Under
    pytest-xdist it is built once for all workers: the first to ask builds it under a file
    lock in their shared temporary folder, the others wait and read the same checkout (tests
    that change it take smoke_run_copy)."""
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # every worker's basetemp lies in one session folder
    workdir, built, failed = shared / "smoke-run", shared / "smoke-run.built", shared / "smoke-run.failed"
    with open(shared / "smoke-run.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not built.exists() and not failed.exists():
            workdir.mkdir()
            copy_workflow(workdir)
            try:
                proc = subprocess.run(["snakemake", "--cores", "2", "--configfile", "config/smoke.yaml"], cwd=workdir,
                                      capture_output=True, text=True, timeout=1800)  # a hang guard, not a speed target
                (built if proc.returncode == 0 else failed).write_text(
                    proc.stderr[-4000:] + ("" if proc.returncode == 0 else failed_rule_logs(workdir, proc.stderr)))
            except subprocess.TimeoutExpired as e:
                failed.write_text(f"no end after {e.timeout} s:\n{(e.stderr or b'')[-4000:]!r}")
    # a build that failed fails every test that asked for it, once built, with its Snakemake log
    assert built.exists(), f"the smoke run failed in {workdir}:\n{failed.read_text()}"
    return workdir


@pytest.fixture
def smoke_run_copy(smoke_run, tmp_path):
    """A copy of the finished smoke run's checkout (git, DVC cache, Snakemake metadata, results,
    mtimes kept) for a test that changes it: the shared run stays as the DAG left it, so the
    tests that read it pass in any order."""
    return Path(shutil.copytree(smoke_run, tmp_path / "smoke_copy", symlinks=True, ignore=_snakemake_run_files))


def _snakemake_run_files(folder: str, names: list[str]) -> list[str]:
    """Snakemake's per-invocation logs and locks: a test reading the shared run may be running
    Snakemake in it (a dry run, --lint) while another worker copies it."""
    return [n for n in names if n in ("log", "locks")] if Path(folder).name == ".snakemake" else []


def save_tiny_model(path: Path) -> str:
    """A randomly initialised 1-layer organism model and its tokenizer, saved at ``path``."""
    from nudgerl.organism.base_config import BaseModelConfig
    from nudgerl.organism.base_model import save_random_model

    return save_random_model(path, BaseModelConfig(hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2))


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory):
    """One tiny random model per test module (read-only: tests train copies in their tmp dirs)."""
    return save_tiny_model(tmp_path_factory.mktemp("tiny"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """Skips are not passes where the engine is meant to be there: .ci/run sets
    NUDGERL_VLLM_REQUIRED=1 for the run in .venv-vllm, and then a skipped `vllm` test fails."""
    report = yield
    if report.skipped and item.get_closest_marker("vllm") and os.environ.get("NUDGERL_VLLM_REQUIRED") == "1":
        report.outcome = "failed"
        report.longrepr = f"skipped, but NUDGERL_VLLM_REQUIRED=1 (the real vLLM must run here): {report.longrepr}"
    return report


def organism_training_inputs(d: Path) -> Path:
    """The smoke config's base model (it solves some problems, so gradients are not zero), a
    training split of 16 problems and pools of three hints per problem, in ``d``."""
    import json

    from nudgerl.organism import task
    from nudgerl.organism.base_config import BaseModelConfig
    from nudgerl.organism.base_model import train_base_model

    smoke = yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())
    train_base_model(BaseModelConfig(**smoke["base_model"], seed=0), d / "base", log=lambda s: None)
    problems = [p.to_record() for p in task.training_problems(0, 16, 0.7)]
    (d / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in problems))
    hints = [s.hint for s in task.STRATEGIES.values()]
    (d / "pools.jsonl").write_text("".join(json.dumps({"id": r["id"], "hints": hints[:3]}) + "\n" for r in problems))
    return d


# Markers that mean "needs something the fast path (-m "not slow") must not need": the package
# index (`network`), the vLLM venv (`vllm`). Each such test is also `slow`, so that the fast path
# deselects it; a test that forgets is a collection error, not a network call in the fast path.
NEEDS_SLOW = ("network", "vllm", "release")


# The files that take longest (minutes: a Slurm cluster's jobs, whole smoke runs), in that order.
# With two workers (CI: pytest -n 2 --dist loadfile) a long file that starts last runs alone while
# the other worker idles; started first, the others fill the second worker meanwhile.
# The three files that read the shared smoke run (smoke_run) are apart: the second worker starts
# long files of its own while the first builds the run, not wait on its lock.
LONGEST_FILES = ("test_slurm_local.py", "test_smoke_dag.py", "test_regime_map.py", "test_dvc_sharing.py",
                 "test_gpu_install.py", "test_one_checkout.py", "test_results_pages.py")


def pytest_collection_modifyitems(config, items):
    missing = [f"{item.nodeid} (marked {name}, not slow)" for item in items for name in NEEDS_SLOW
               if item.get_closest_marker(name) and not item.get_closest_marker("slow")]
    if missing:
        raise pytest.UsageError("these tests must also be marked slow (pyproject.toml's markers):\n  "
                                + "\n  ".join(missing))
    # after pytest-randomly's shuffle (it reorders first); a stable sort keeps its order otherwise
    rank = {name: i for i, name in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


# What the fast path (-m "not slow") must not start: a Snakemake run (a dry run included: each
# plans a whole workflow, 10-20 s) or a DVC pipeline (`dvc repro`, `dvc exp`). A test that does is
# marked slow; one that forgets fails here, at its first such command, instead of quietly making
# the fast path slow again.
WORKFLOW_DVC_COMMANDS = {"repro", "exp", "pull", "push", "fetch", "checkout"}


def starts_a_workflow(args) -> bool:
    """Whether a subprocess's ``args`` (a list or a shell string) start Snakemake or a DVC
    pipeline: ``snakemake ...``, ``python -m snakemake ...``, ``dvc repro``, ``python -m dvc exp``."""
    words = args.split() if isinstance(args, (str, bytes)) else [os.fspath(a) for a in args]
    words = [w.decode() if isinstance(w, bytes) else w for w in words]
    for i, word in enumerate(words):
        name = os.path.basename(word)
        if name == "-m" or name.startswith("python"):
            continue
        if name == "snakemake":
            return True
        if name == "dvc":
            rest = [w for w in words[i + 1:] if not w.startswith("-")]
            return bool(rest) and rest[0] in WORKFLOW_DVC_COMMANDS
        return False
    return False


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Around a fast test's setup, call and teardown: Snakemake or a DVC pipeline started in a
    subprocess fails the test, naming the marker it needs."""
    if item.get_closest_marker("slow"):
        return (yield)
    real_init = subprocess.Popen.__init__

    def guarded_init(self, args, *a, **kw):
        if starts_a_workflow(args):
            raise AssertionError(f"{item.nodeid} is in the fast path (not marked slow) and starts a workflow: "
                                 f"{args!r}; mark it @pytest.mark.slow")
        real_init(self, args, *a, **kw)

    subprocess.Popen.__init__ = guarded_init
    try:
        return (yield)
    finally:
        subprocess.Popen.__init__ = real_init


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """The test order's seed at the end, also under -q (which hides pytest-randomly's header
    line): `-p randomly --randomly-seed=N` replays the order (and the per-test reseeding of
    random/numpy) of a failed run."""
    seed = getattr(config.option, "randomly_seed", None)
    if config.pluginmanager.hasplugin("randomly") and isinstance(seed, int):
        terminalreporter.write_line(f"test order: pytest-randomly seed {seed}; replay it with "
                                    f"-p randomly --randomly-seed={seed}")
