"""`nudgerl audit` on a small provenance chain built by the real writers: data -> model ->
evaluation records -> table (the `nudgerl table` CLI). Clean passes; a hand edit fails and
names the file; a regenerated input makes its consumer stale."""

import json
import os
import subprocess

import pytest

from nudgerl.audit import audit
from nudgerl.cli import main
from nudgerl.io import write_jsonl, write_provenance


@pytest.fixture
def chain(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # sidecar paths are relative to the workflow root, as in the DAG
    data = "results/data/eval/aime24.jsonl"
    write_jsonl(data, [{"id": f"aime24-{i}", "problem": "p", "answer": "1"} for i in range(4)])
    write_provenance(data, {"organism": {}}, {"organism": 0})
    os.makedirs("results/runs/grpo8/seed0/model")
    with open("results/runs/grpo8/seed0/model/model.safetensors", "w") as f:
        f.write("weights")
    write_provenance("results/runs/grpo8/seed0/model", {}, {"train": 0}, [data])
    for method, cs in [("grpo8", [1, 2, 3, 4]), ("nudgerl8", [4, 4, 3, 4])]:
        d = f"results/eval/{method}/seed0"
        write_jsonl(f"{d}/aime24.problems.jsonl", [{"id": f"aime24-{i}", "n": 4, "c": c} for i, c in enumerate(cs)])
        with open(f"{d}/summary.json", "w") as f:
            json.dump({"aime24": {"pass@1": sum(cs) / 16}}, f)
        model = "results/runs/grpo8/seed0/model" if method == "grpo8" else data
        write_provenance(f"{d}/summary.json", {}, {"sampling": 0}, [model, data],
                         outputs=[f"{d}/aime24.problems.jsonl"])
    rc = main(["table", "--eval-root", "results/eval", "--methods", "grpo8", "nudgerl8", "--benchmarks", "aime24",
               "--seeds", "0", "--title", "Table 1", "--bootstrap-samples", "100", "--reference", "grpo8",
               "--out-prefix", "results/tables/table1"])
    assert rc == 0
    return tmp_path


def test_clean_chain_passes(chain):
    report = audit("results", check_dvc=False)
    assert report.ok, report.text()
    assert len(report.roots) == 3  # table1.csv, .md, .tex
    # table -> eval sidecars -> model sidecar -> data sidecar
    assert report.sidecars_checked == 3 + 2 + 1 + 1
    assert "OK" in report.text()


def test_hand_edited_record_fails_and_is_named(chain):
    path = "results/eval/nudgerl8/seed0/aime24.problems.jsonl"
    text = open(path).read()
    with open(path, "w") as f:
        f.write(text.replace('"c": 3', '"c": 4'))
    report = audit("results", check_dvc=False)
    assert not report.ok
    assert any(f.kind == "modified" and f.path == path for f in report.findings), report.text()
    assert path in report.text()
    proc = subprocess.run(["nudgerl", "audit", "--no-dvc"], cwd=chain, capture_output=True, text=True)
    assert proc.returncode == 1 and path in proc.stdout


def test_edited_checkpoint_weights_are_found(chain):
    with open("results/runs/grpo8/seed0/model/model.safetensors", "a") as f:
        f.write("tampered")
    report = audit("results", check_dvc=False)
    assert [f.path for f in report.findings if f.kind == "modified"] == ["results/runs/grpo8/seed0/model/model.safetensors"]


def test_regenerated_input_makes_consumer_stale(chain):
    d = "results/eval/grpo8/seed0"
    write_jsonl(f"{d}/aime24.problems.jsonl", [{"id": f"aime24-{i}", "n": 4, "c": 0} for i in range(4)])
    write_provenance(f"{d}/summary.json", {}, {"sampling": 0}, [], outputs=[f"{d}/aime24.problems.jsonl"])
    report = audit("results", check_dvc=False)
    stale = [f for f in report.findings if f.kind == "stale"]
    assert stale and all(f.path.startswith("results/tables/table1") for f in stale), report.text()
    assert not [f for f in report.findings if f.kind == "modified"]


def test_deleted_record_is_missing(chain):
    os.remove("results/eval/grpo8/seed0/aime24.problems.jsonl")
    report = audit("results", check_dvc=False)
    assert any(f.kind == "missing" and f.path.endswith("grpo8/seed0/aime24.problems.jsonl") for f in report.findings)


def test_dvc_status_is_checked(chain):
    subprocess.run(["git", "init", "-q"], check=True)
    subprocess.run(["dvc", "init", "-q"], check=True)
    with open("dvc.yaml", "w") as f:
        f.write("stages:\n  pools_x:\n    cmd: cp results/data/eval/aime24.jsonl pools.jsonl\n"
                "    deps: [results/data/eval/aime24.jsonl]\n    outs: [pools.jsonl]\n")
    report = audit("results")
    # never reproduced: dvc status reports the stage as changed
    assert any(f.kind == "dvc" and "pools_x" in f.path for f in report.findings), report.text()
    subprocess.run(["dvc", "repro", "-q", "pools_x"], check=True, capture_output=True)
    report = audit("results")
    assert report.ok, report.text()
