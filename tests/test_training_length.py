"""benchmarks/training_length.py: the rule that reads GRPO's training length off a pilot's curves."""

import json
from pathlib import Path

import pytest
from conftest import load_script

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def tl():
    return load_script("benchmarks/training_length.py")


def test_a_risen_curves_plateau_is_where_it_reaches_nine_tenths_of_its_rise(tl):
    curve = {0: 0.2, 10: 0.2, 20: 0.3, 30: 0.6, 40: 0.75, 50: 0.8, 60: 0.79}
    r = tl.plateau(curve, rise=0.2, fraction=0.9)
    assert r["rose"] and r["plateau_step"] == 40 and not r["max_at_last_checkpoint"]  # 0.2 + 0.9 * 0.6 = 0.74
    flat = tl.plateau({0: 0.2, 10: 0.25, 20: 0.3}, rise=0.2, fraction=0.9)
    assert not flat["rose"] and flat["plateau_step"] is None and flat["max_at_last_checkpoint"]
    rows = {1: r, 2: flat, 3: tl.plateau({0: 0.1, 10: 0.5, 20: 0.6}, 0.2, 0.9)}
    assert rows[3]["plateau_step"] == 20 and rows[3]["max_at_last_checkpoint"]
    assert tl.training_length(rows, 20) == 40 and tl.training_length({2: flat}, 10) is None
    assert tl.training_length({1: r}, 30) == 60  # rounded up to the checkpoint interval


def test_the_script_reads_a_runs_curves_and_writes_its_pages(tl, tmp_path):
    for seed, values in {10: [0.1, 0.1, 0.5, 0.9, 0.9], 11: [0.2, 0.2, 0.2, 0.25, 0.2]}.items():
        d = tmp_path / "run" / "curves" / "grpo8" / f"seed{seed}"
        d.mkdir(parents=True)
        rows = [{"step": 10 * i, "benchmark": b, "pass@1": v,
                 "problems": [{"id": f"{b}-{k}", "n": 10, "c": round(10 * v)} for k in range(3)]}
                for i, v in enumerate(values) for b in ("aime24", "aime25")]
        (d / "curve.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert tl.main(["--results", str(tmp_path / "run"), "--out-prefix", str(tmp_path / "tl")]) == 0
    record = json.loads((tmp_path / "tl.json").read_text())
    assert record["training_length"] == 30 and record["seeds"]["11"]["rose"] is False
    assert "**Training length: 30 steps** (1 of 2 seeds rose within 40 steps)" in (tmp_path / "tl.md").read_text()


def test_a_running_mean_keeps_a_lone_noisy_checkpoint_from_counting_as_a_rise(tl):
    noisy = {0: 0.15, 10: 0.15, 20: 0.27, 30: 0.15, 40: 0.15}  # one checkpoint 0.12 up: noise
    assert tl.plateau(noisy, rise=0.1, fraction=0.9)["rose"]
    smoothed = tl.running_mean(noisy, 3)
    assert smoothed[0] == 0.15 and smoothed[10] == 0.15 and smoothed[20] == pytest.approx(0.19)
    assert not tl.plateau(smoothed, rise=0.1, fraction=0.9)["rose"]
    found = {0: 0.15, 10: 0.15, 20: 0.35, 30: 0.35, 40: 0.35}  # a family found at step 20 and kept
    r = tl.plateau(tl.running_mean(found, 3), rise=0.1, fraction=0.9)
    assert r["rose"] and r["plateau_step"] == 40  # the mean of three catches up two checkpoints later
    assert tl.running_mean(found, 1) == found


def test_the_page_records_the_window_and_the_whole_command(tl, tmp_path):
    d = tmp_path / "run" / "curves" / "grpo8" / "seed5"
    d.mkdir(parents=True)
    rows = [{"step": 10 * i, "benchmark": "aime24", "pass@1": v,
             "problems": [{"id": "aime24-0", "n": 20, "c": round(20 * v)}]}
            for i, v in enumerate([0.15, 0.15, 0.4, 0.4, 0.4])]
    (d / "curve.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    argv = ["--results", str(tmp_path / "run"), "--rise", "0.1", "--window", "3", "--out-prefix", str(tmp_path / "tl")]
    assert tl.main(argv) == 0
    record = json.loads((tmp_path / "tl.json").read_text())
    assert record["rule"]["window"] == 3 and record["curves"]["5"]["20"] == 0.4
    assert record["smoothed"]["5"]["20"] == pytest.approx(0.7 / 3) and record["training_length"] == 40
    page = (tmp_path / "tl.md").read_text()
    assert "--rise 0.1 --window 3" in page and "the mean of its last 3 checkpoints" in page
    with pytest.raises(SystemExit, match="--window 0"):
        tl.main(argv[:4] + ["--window", "0"])
