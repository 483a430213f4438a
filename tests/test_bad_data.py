"""Bad problem files fail with the file and line named, never a silent zero reward."""

import json
import subprocess

import pytest

from nudgerl.io import read_problems


def _write(tmp_path, rows, raw=None):
    path = tmp_path / "problems.jsonl"
    path.write_text(raw if raw is not None else "".join(json.dumps(r) + "\n" for r in rows))
    return path


GOOD = {"id": "a", "problem": "What is 1 + 1?", "answer": "2"}


@pytest.mark.parametrize(
    "rows, message",
    [
        ([GOOD, {"id": "b", "problem": "no answer here"}], r"problems.jsonl:2: problem 'b' has no answer"),
        ([GOOD, {"id": "b", "problem": "blank", "answer": "  "}], r":2: problem 'b' has no answer"),
        ([GOOD, {"id": "b", "problem": 42, "answer": "1"}], r":2: 'problem' must be a non-empty string"),
        ([{"problem": "x", "answer": "1"}], r":1: 'id' must be a non-empty string"),
        ([GOOD, GOOD], r":2: duplicate id 'a' \(first on line 1\)"),
        ([], r"no problems \(empty file\)"),
    ],
)
def test_bad_rows_are_named(tmp_path, rows, message):
    with pytest.raises(ValueError, match=message):
        read_problems(_write(tmp_path, rows))


def test_malformed_json_line_is_named(tmp_path):
    with pytest.raises(ValueError, match=r"problems.jsonl:2: not valid JSON"):
        read_problems(_write(tmp_path, None, raw=json.dumps(GOOD) + "\n{oops\n"))


def test_numeric_answers_become_strings(tmp_path):
    rows = read_problems(_write(tmp_path, [{"id": "a", "problem": "p", "answer": 16}]))
    assert rows[0]["answer"] == "16"


def test_cli_reports_the_bad_row_and_exits_nonzero(tmp_path):
    path = _write(tmp_path, [GOOD, {"id": "b", "problem": "no answer"}])
    proc = subprocess.run(["nudgerl", "make-pools", "--section", "x", "--problems", str(path),
                           "--params-file", str(_params(tmp_path)), "--out", str(tmp_path / "o.jsonl")],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert "problems.jsonl:2: problem 'b' has no answer" in proc.stderr
    assert not (tmp_path / "o.jsonl").exists()


def _params(tmp_path):
    p = tmp_path / "params.yaml"
    p.write_text("x:\n  backend: organism\n")
    return p


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.parametrize(
    "rows, message",
    [
        ([{"id": "a", "hints": ["x"]}, {"id": "b"}], r"pools.jsonl:2: problem 'b' has no usable 'hints'"),
        ([{"id": "a", "hints": []}], r":1: problem 'a' has no usable 'hints'"),
        ([{"id": "a", "hints": ["x", "  "]}], r":1: problem 'a' has no usable 'hints'"),
        ([{"id": "a", "hints": ["x"]}, {"id": "a", "hints": ["y"]}], r":2: duplicate id 'a' \(first on line 1\)"),
        ([{"hints": ["x"]}], r":1: expected an object with a string 'id'"),
    ],
)
def test_bad_pool_rows_are_named(tmp_path, rows, message):
    from nudgerl.offline.outputs import read_pools

    with pytest.raises(ValueError, match=message):
        read_pools(_jsonl(tmp_path / "pools.jsonl", rows))


def test_oracle_rows_without_solution_are_named_and_strangers_counted(tmp_path):
    from nudgerl.offline.outputs import read_oracles

    path = _jsonl(tmp_path / "oracles.jsonl", [{"id": "a", "solution": "s"}, {"id": "b", "solution": ""}])
    with pytest.raises(ValueError, match=r"oracles.jsonl:2: problem 'b' has no usable 'solution'"):
        read_oracles(path)
    path = _jsonl(tmp_path / "oracles.jsonl", [{"id": "a", "solution": "s"}, {"id": "zz", "solution": "t"}])
    logs = []
    assert read_oracles(path, train_ids={"a"}, log=logs.append) == {"a": "s"}
    assert "skipped 1 row(s) for problems not in the training split" in logs[0]


@pytest.mark.slow
def test_training_problem_without_a_pool_stops_the_job(tmp_path):
    train = _write(tmp_path, [GOOD, {"id": "b", "problem": "p", "answer": "1"}])
    pools = _jsonl(tmp_path / "pools.jsonl", [{"id": "a", "hints": ["x", "y"]}])
    proc = subprocess.run(["nudgerl", "train-nudgerl", "--model", str(tmp_path / "no-model"), "--train", str(train),
                           "--pools", str(pools), "--params", "{}", "--nudge", "{}", "--out-dir", str(tmp_path / "run")],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert "pools.jsonl has no pool for training problem 'b'" in proc.stderr
