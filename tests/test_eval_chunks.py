"""Evaluation resumes per chunk of problems: chunked sampling gives an unchunked run's samples, a
run stopped for its time budget exits 75 with its finished chunks saved, and the rerun samples
only the chunks left and ends with the unbroken run's results."""

import json
from pathlib import Path

import pytest

from nudgerl.evaluation.benchmarks import (BUDGET_VAR, RESUME_DIR, STOPPED_EXIT_CODE, EvaluationStopped, TimeBudget,
                                           chunk_bounds, evaluate_model)
from nudgerl.evaluation.sampling import SamplingParams
from nudgerl.organism import task

from nudgerl.attempts import ATTEMPT_VAR, FAILED_FILE
from nudgerl.io import ATTEMPTS_LOG

from conftest import save_tiny_model

# Two samples a problem, four a batch: a batch holds two problems, so a chunk of 3 problems is
# cut at 4 (a batch boundary) and the 10-problem benchmark in chunks of 4, 4 and 2.
PARAMS = SamplingParams(n=2, max_new_tokens=12, batch_size=4, seed=3)
BENCH_SIZES = {"b1": (10, 0.5), "b2": (5, 0.5)}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return save_tiny_model(tmp_path_factory.mktemp("tiny_eval"))


@pytest.fixture(scope="module")
def benchmarks():
    return {name: [p.to_record() for p in problems]
            for name, problems in task.evaluation_sets(0, BENCH_SIZES).items()}


def _run(model_dir, benchmarks, out, **kwargs):
    logs = []
    try:
        # parse_strategy: what `nudgerl evaluate` records on the organism (compared below)
        summaries = evaluate_model(model_dir, benchmarks, PARAMS, [1, 2], out, progress=False, log=logs.append,
                                   parse_strategy=task.parse_strategy, **kwargs)
    except EvaluationStopped as stop:
        return None, logs, stop
    return summaries, logs, None


def _records(out: Path) -> dict:
    """The evaluation's records (not its attempts log)."""
    return {p.name: p.read_text() for p in sorted(out.glob("*.jsonl")) if p.name != ATTEMPTS_LOG}


def _without_seconds(summaries: dict) -> dict:
    return {b: {k: v for k, v in s.items() if k != "seconds"} for b, s in summaries.items()}


@pytest.fixture(scope="module")
def unbroken(model_dir, benchmarks, tmp_path_factory):
    out = tmp_path_factory.mktemp("unbroken")
    summaries, _, _ = _run(model_dir, benchmarks, out)
    return out, summaries


def test_chunk_bounds_cover_the_problems_and_end_on_batch_boundaries():
    for n_problems, chunk, n, batch in [(10, 3, 2, 4), (281, 16, 128, 128), (30, 7, 8, 512), (9, 4, 3, 5)]:
        bounds = chunk_bounds(n_problems, chunk, n, batch)
        assert bounds[0][0] == 0 and bounds[-1][1] == n_problems
        assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))  # contiguous, no problem twice
        assert all((start * n) % batch == 0 for start, _ in bounds)  # each chunk starts a batch
        assert all(end - start >= min(chunk, n_problems - start) for start, end in bounds)
    assert chunk_bounds(10, None, 2, 4) == [(0, 10)]
    assert chunk_bounds(10, 3, 2, 4, batch_aligned=False) == [(0, 3), (3, 6), (6, 9), (9, 10)]


def test_chunked_records_equal_unchunked(model_dir, benchmarks, unbroken, tmp_path):
    out, summaries = unbroken
    chunked, logs, _ = _run(model_dir, benchmarks, tmp_path, chunk_problems=3)
    assert len(list((tmp_path / RESUME_DIR).glob("b1.chunk*.json"))) == 3  # really cut: 4 + 4 + 2
    assert _records(tmp_path) == _records(out)
    assert _without_seconds(chunked) == _without_seconds(summaries)
    # the samples are random draws, not one repeated completion (equality above could not fail)
    completions = [json.loads(line)["completion"] for line in _records(out)["b1.samples.jsonl"].splitlines()]
    assert len(set(completions)) > len(completions) // 2


def test_stop_for_budget_then_rerun_samples_only_the_rest(model_dir, benchmarks, unbroken, tmp_path):
    out, summaries = unbroken
    # a budget already spent: the first chunk runs (nothing measured yet to say it will not fit),
    # then the estimate from its seconds stops the run before the second
    spent = TimeBudget(deadline=0.0, clock=lambda: 1.0)
    stopped, _, stop = _run(model_dir, benchmarks, tmp_path, chunk_problems=3, budget=spent)
    assert stopped is None and "b1: stopped before problems 4-7 (chunk 2 of 3" in str(stop)
    assert sorted(p.name for p in (tmp_path / RESUME_DIR).iterdir()) == ["b1.chunk0000.json"]
    assert not (tmp_path / "b1.samples.jsonl").exists()

    # a retry whose budget is spent as well still samples one chunk (progress), then stops
    _, logs, stop = _run(model_dir, benchmarks, tmp_path, chunk_problems=3, budget=spent)
    assert "before problems 8-9 (chunk 3 of 3" in str(stop) and len(logs) == 1  # chunk 1 resumed, 2 sampled
    assert sorted(p.name for p in (tmp_path / RESUME_DIR).iterdir()) == ["b1.chunk0000.json", "b1.chunk0001.json"]

    resumed, logs, _ = _run(model_dir, benchmarks, tmp_path, chunk_problems=3)
    assert logs == [f"b1: resumed from {tmp_path / RESUME_DIR / f'b1.chunk000{k}.json'} (4 problems, not sampled again)"
                    for k in (0, 1)]
    assert _records(tmp_path) == _records(out)
    assert _without_seconds(resumed) == _without_seconds(summaries)


def test_budget_from_environment():
    assert TimeBudget.from_env(100.0, environ={}) is None
    assert TimeBudget.from_env(100.0, environ={BUDGET_VAR: " "}) is None
    budget = TimeBudget.from_env(100.0, environ={BUDGET_VAR: "60"}, clock=lambda: 150.0)
    assert budget.fits(10.0) and not budget.fits(10.1)
    with pytest.raises(ValueError, match=BUDGET_VAR):
        TimeBudget.from_env(0.0, environ={BUDGET_VAR: "1h"})


def test_planned_stop_exits_75_and_rerun_finishes(model_dir, benchmarks, unbroken, tmp_path, monkeypatch):
    from nudgerl.cli import run
    from nudgerl.training.run_state import TIME_LIMIT_EXIT_CODE

    assert STOPPED_EXIT_CODE == TIME_LIMIT_EXIT_CODE  # the one code the rules' retries treat as planned
    files = []
    for name, problems in benchmarks.items():
        files.append(tmp_path / f"{name}.jsonl")
        files[-1].write_text("".join(json.dumps(p) + "\n" for p in problems))
    section = {"samples_per_problem": PARAMS.n, "max_new_tokens": PARAMS.max_new_tokens,
               "batch_size": PARAMS.batch_size, "ks": [1, 2], "chunk_problems": 3}
    argv = ["evaluate", "--model", model_dir, "--benchmarks", *map(str, files), "--seed", str(PARAMS.seed),
            "--params", json.dumps(section), "--out-dir", str(tmp_path / "eval")]
    monkeypatch.setenv(BUDGET_VAR, "0")
    with pytest.raises(SystemExit) as stop:
        run(argv)
    assert stop.value.code == STOPPED_EXIT_CODE
    assert not (tmp_path / "eval" / "summary.json").exists()
    # the planned stop is not a failure: no marker, so the retry resumes (nudgerl.attempts)
    assert not (tmp_path / "eval" / FAILED_FILE).exists()
    ended = [json.loads(line)["ended"] for line in (tmp_path / "eval" / ATTEMPTS_LOG).read_text().splitlines()]
    assert ended == ["stopped for the time limit"]

    monkeypatch.delenv(BUDGET_VAR)
    assert run(argv) == 0
    assert _records(tmp_path / "eval") == _records(unbroken[0])
    assert not (tmp_path / "eval" / RESUME_DIR).exists()
    provenance_free = json.loads((tmp_path / "eval" / "summary.json").read_text())
    assert _without_seconds(provenance_free) == _without_seconds(unbroken[1])


def test_bad_chunk_size_names_the_key():
    from nudgerl.evaluation.cli import chunk_size

    assert chunk_size({}) is None and chunk_size({"chunk_problems": 16}) == 16
    for bad in (0, -1, 2.5, "16", True):
        with pytest.raises(SystemExit, match="eval.chunk_problems"):
            chunk_size({"chunk_problems": bad})


def test_a_failed_evaluation_is_not_retried_but_rerun_by_a_new_invocation(model_dir, tmp_path, monkeypatch, capsys):
    """Only the planned stop is retried: a crash (here a corrupt benchmark file) leaves the failed
    marker, a retry of the same job (attempt 2) refuses at once naming the error, and the user's
    next invocation (attempt 1) tries again."""
    from nudgerl.cli import run

    bench = tmp_path / "b1.jsonl"
    bench.write_text("{not json\n")
    argv = ["evaluate", "--model", model_dir, "--benchmarks", str(bench), "--seed", "0",
            "--params", json.dumps({"samples_per_problem": 2, "max_new_tokens": 4, "ks": [1]}),
            "--out-dir", str(tmp_path / "eval")]
    assert run(argv) == 2
    marker = json.loads((tmp_path / "eval" / FAILED_FILE).read_text())
    assert "b1.jsonl" in marker["error"] and "not valid JSON" in marker["error"]
    monkeypatch.setenv(ATTEMPT_VAR, "2")
    assert run(argv) == 2
    assert "not retried, an earlier attempt of this job failed" in capsys.readouterr().err
    assert json.loads((tmp_path / "eval" / FAILED_FILE).read_text()) == marker  # the first failure's record
    monkeypatch.setenv(ATTEMPT_VAR, "1")
    assert run(argv) == 2  # tried again (and fails again: the file is still corrupt)
    assert (tmp_path / "eval" / "failed.previous.json").exists()
    assert "not valid JSON" in capsys.readouterr().err
