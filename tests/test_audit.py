"""`nudgerl audit` on a small provenance chain built by the real writers: data -> model ->
evaluation records -> table (the `nudgerl table` CLI). Clean passes; a hand edit fails and
names the file; a regenerated input makes its consumer stale."""

import json
import os
import subprocess

import pytest

from nudgerl.reporting.audit import audit
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
    assert len(report.roots) == 4  # table1.csv, .md, .tex, .html
    # table -> eval sidecars -> model sidecar -> data sidecar
    assert report.sidecars_checked == 4 + 2 + 1 + 1
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


def test_result_folders_per_run_and_model(tmp_path):
    from nudgerl.reporting.audit import result_folders, run_of_results

    for d in ("results/smoke/tables", "results/paper/qwen/figures", "results/paper/data", "results/empty"):
        (tmp_path / d).mkdir(parents=True)
    assert result_folders(tmp_path / "results") == [tmp_path / "results/paper/qwen", tmp_path / "results/smoke"]
    assert run_of_results("results/paper/qwen") == "paper" and run_of_results("results/smoke") == "smoke"
    assert run_of_results("results") is None


def test_stage_origin_from_the_run_record(tmp_path):
    from nudgerl.reporting.audit import stage_origin
    from nudgerl.offline.helper_llm import write_run_record

    out = tmp_path / "p.jsonl"
    out.write_text("{}\n")
    locked = {"outs": [{"path": "p.jsonl"}, {"path": "p.jsonl.stats.json"}]}
    assert "from the DVC cache" in stage_origin(tmp_path, "pools_x@r", locked)
    write_run_record(out, seconds=1.5, asked=3, http_requests=4)
    assert "computed here" in stage_origin(tmp_path, "pools_x@r", locked) and "4 HTTP request(s)" in \
        stage_origin(tmp_path, "pools_x@r", locked)
    assert "never run or pulled here" in stage_origin(tmp_path, "pools_x@r", None)


@pytest.mark.slow
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
    # a shell command made pools.jsonl, not a helper stage: no run record, so not "computed here"
    assert report.stage_origins == ["pools_x: from the DVC cache (pulled or restored, not computed in this checkout)"]
    dvc_only = audit("results", check_artifacts=False)
    assert dvc_only.ok and dvc_only.roots == [] and "DVC stages only" in dvc_only.text()


def test_audit_from_given_artifacts_walks_only_their_chain(chain):
    """A rule's audit starts from its declared inputs: a table another job is rewriting at that
    moment is not read, while an edit anywhere upstream of the given artifacts still fails."""
    write_jsonl("results/tables/other.csv", [{"x": 1}])
    write_provenance("results/tables/other.csv", {}, {}, [])
    with open("results/tables/other.csv", "a") as f:
        f.write("half-written\n")  # another job's table, mid-write
    assert not audit("results", check_dvc=False).ok
    given = ["results/tables/table1.csv", "results/tables/table1.md", "results/logs/marker.done"]
    report = audit("results", check_dvc=False, artifacts=given)
    assert report.ok, report.text()
    assert len(report.roots) == 2 and "1 of 3 given artifact(s) have no provenance sidecar" in report.text()
    with open("results/runs/grpo8/seed0/model/model.safetensors", "a") as f:
        f.write("tampered")
    report = audit("results", check_dvc=False, artifacts=given)
    assert [f.path for f in report.findings] == ["results/runs/grpo8/seed0/model/model.safetensors"]
    none = audit("results", check_dvc=False, artifacts=["results/logs/marker.done"])
    assert not none.ok and "none of the given artifacts" in none.text()
    proc = subprocess.run(["nudgerl", "audit", "--no-dvc", "--results", "results", "--artifacts", *given[:2]],
                          cwd=chain, capture_output=True, text=True)
    assert proc.returncode == 1 and "model.safetensors" in proc.stdout
