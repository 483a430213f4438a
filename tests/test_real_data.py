"""Real datasets: loaders (HF dataset folder, local files), subsets, errors, and the offline
data-preparation rules run by Snakemake on the shared copies (row counts, hashes)."""

import json
import re
import subprocess

import pytest

from conftest import SHARED_BENCHMARKS
from nudgerl.data.prepare import DatasetSpec, load_rows, prepare
from nudgerl.io import read_problems

SHARED = SHARED_BENCHMARKS
needs_shared = pytest.mark.skipif(not (SHARED / "MANIFEST.md").exists(), reason=f"no shared data at {SHARED}")


def _write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_local_file_fields_filter_subset_and_float_answers(tmp_path):
    rows = [{"question": f"q{i}", "answer": float(i), "level": i % 2, "uid": f"u{i}"} for i in range(10)]
    _write_jsonl(tmp_path / "b.jsonl", rows)
    spec = DatasetSpec.from_dict({"path": "b.jsonl", "problem_field": "question", "id_field": "uid",
                                  "filter": {"level": 1}, "keep_fields": ["level"], "size": 3})
    got, source = load_rows(spec, "bench", local_dir=tmp_path)
    assert [r["id"] for r in got] == ["u1", "u3", "u5"]  # filtered, then the first 3
    assert got[0] == {"id": "u1", "problem": "q1", "answer": "1", "level": 1}  # 1.0 -> "1"
    assert source["rows"] == 10 and source["rows_after_filter"] == 5 and len(source["sha256"]) == 64
    random4 = {"path": str(tmp_path / "b.jsonl"), "problem_field": "question", "size": 4, "selection": "random",
               "seed": 1}
    rnd = load_rows(DatasetSpec.from_dict(random4), "bench")[0]
    assert len(rnd) == 4 and rnd == load_rows(DatasetSpec.from_dict(random4), "bench")[0]  # seeded
    assert rnd != load_rows(DatasetSpec.from_dict({**random4, "seed": 2}), "bench")[0]
    assert [r["id"] for r in rnd] == sorted((r["id"] for r in rnd), key=lambda s: int(s.split("-")[1]))


def test_hf_loader_reads_a_dataset_folder(tmp_path):
    # `hf` goes through datasets.load_dataset, which takes a hub id or a dataset folder.
    folder = tmp_path / "mini_dapo"
    (folder / "data").mkdir(parents=True)
    _write_jsonl(folder / "data" / "train.jsonl", [{"prompt": f"p{i}", "solution": str(i)} for i in range(6)])
    stats = prepare({"hf": str(folder), "split": "train", "problem_field": "prompt", "answer_field": "solution",
                     "id_prefix": "dapo17k", "size": 4}, "train", tmp_path / "out" / "train.jsonl")
    rows = read_problems(tmp_path / "out" / "train.jsonl")
    assert [r["id"] for r in rows] == ["dapo17k-0", "dapo17k-1", "dapo17k-2", "dapo17k-3"]
    assert stats["source"]["rows"] == 6 and stats["source"]["hf"] == str(folder)
    prov = json.loads((tmp_path / "out" / "train.jsonl.provenance.json").read_text())
    assert prov["data"]["sha256"] == stats["sha256"] and prov["config"]["spec"]["size"] == 4


def test_bad_specs_and_rows_name_the_problem(tmp_path):
    with pytest.raises(ValueError, match="exactly one of 'hf'"):
        DatasetSpec.from_dict({"hf": "a/b", "path": "x.jsonl"}, "data.train")
    with pytest.raises(ValueError, match="unknown key"):
        DatasetSpec.from_dict({"path": "x.jsonl", "problem_feld": "q"}, "data.train")
    _write_jsonl(tmp_path / "b.jsonl", [{"problem": "p"}])
    with pytest.raises(KeyError, match="no field 'answer'"):
        load_rows(DatasetSpec(path=str(tmp_path / "b.jsonl")), "b")
    with pytest.raises(FileNotFoundError, match="local_dir"):
        load_rows(DatasetSpec(path="missing.jsonl"), "b", local_dir=tmp_path)
    with pytest.raises(ValueError, match="size 5 > 1"):
        load_rows(DatasetSpec(path=str(tmp_path / "b.jsonl"), answer_field="problem", size=5), "b")


def _manifest_hashes():
    text = (SHARED / "MANIFEST.md").read_text()
    return {m.group(1): m.group(2) for m in re.finditer(r"^\| (\w+)\.jsonl \|.*\| ([0-9a-f]{16}) \|$", text, re.M)}


@needs_shared
@pytest.mark.slow
def test_offline_data_rules_reproduce_manifest_row_counts(workdir):
    """config/paper.yaml + config/offline.yaml through the real prepare_* rules."""
    (workdir / "local.yaml").write_text(f"data:\n  local_dir: {SHARED}\n")
    data = "results/paper_offline/data"  # offline.yaml's run folder
    targets = [f"{data}/train.jsonl"] + [f"{data}/eval/{b}.jsonl"
                                       for b in ("aime24", "aime25", "amc23", "math500", "apex")]
    proc = subprocess.run(["snakemake", *targets, "--cores", "2", "--configfile", "config/paper.yaml",
                           "config/offline.yaml", "local.yaml"], cwd=workdir, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    counts = {b: len(read_problems(workdir / t)) for b, t in zip(["train", "aime24", "aime25", "amc23", "math500",
                                                                   "apex"], targets)}
    assert counts == {"train": 250, "aime24": 30, "aime25": 30, "amc23": 40, "math500": 134, "apex": 47}
    hashes = _manifest_hashes()
    files = {"train": "dapo_math_17k", "aime24": "aime24", "aime25": "aime25", "amc23": "amc23",
             "math500": "math500", "apex": "apex_shortlist"}
    for name, target in zip(counts, targets):
        prov = json.loads((workdir / f"{target}.provenance.json").read_text())["data"]
        assert prov["source"]["sha256"].startswith(hashes[files[name]]), name  # the copy MANIFEST.md describes
        assert prov["rows"] == counts[name]
    dapo = json.loads((workdir / f"{data}/train.jsonl.provenance.json").read_text())["data"]["source"]
    assert dapo["rows"] == 17255  # MANIFEST.md: 17,255 after deduplication
    first = read_problems(workdir / f"{data}/train.jsonl")[0]
    assert first["id"] == json.loads((SHARED / "dapo_math_17k.jsonl").open().readline())["id"]  # selection: first
    assert all(r["level"] == 5 for r in read_problems(workdir / f"{data}/eval/math500.jsonl"))
