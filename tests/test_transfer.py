"""The transfer probe (nudgerl.evaluation.transfer): its inner products against hand values, the
hint-changed token selection, the bootstrap interval's level, and the probe end to end on a
tiny model."""

import json
import math

import numpy as np
import pytest
import torch

from nudgerl.evaluation import transfer as tr


def _log_linear(theta, biases, y):
    """Per-token log pi(y_t) of a log-linear policy: logits theta + b_t (b_t: the context's bias)."""
    return torch.stack([torch.log_softmax(theta + b, dim=0)[t] for b, t in zip(biases, y)])


def test_hand_computed_log_linear_policy():
    """Three actions, theta = 0: hint-free, the policy is uniform; the hint adds log 3 to action 0
    (p_h = 3/5, 1/5, 1/5). grad_theta log pi(a) = e_a - p, so for y = (0):
    g_0 = (2/3, -1/3, -1/3), g_h = (2/5, -1/5, -1/5), <g_0, g_h> = 2/5, <g_0, g_0> = 2/3, transfer 3/5."""
    theta = torch.zeros(3, dtype=torch.float64, requires_grad=True)
    zero, hint = torch.zeros(3, dtype=torch.float64), torch.tensor([math.log(3), 0, 0], dtype=torch.float64)
    terms = tr.trajectory_terms(_log_linear(theta, [zero], [0]), _log_linear(theta, [hint], [0]), [theta], 1.0)
    assert terms["whole"]["num"] == pytest.approx(2 / 5, abs=1e-6)
    assert terms["whole"]["den"] == pytest.approx(2 / 3, abs=1e-6)
    assert terms["whole"]["num"] / terms["whole"]["den"] == pytest.approx(3 / 5, abs=1e-6)

    # y = (0, 1), the hint biasing only the first step. Whole: g_0 = e_0 + e_1 - 2u = (1/3, 1/3, -2/3),
    # g_h = (e_0 - p_h) + (e_1 - u) = (1/15, 7/15, -8/15): <g_0, g_h> = 24/45, <g_0, g_0> = 2/3,
    # transfer 4/5. The hint changes only token 0's log-probability, so the top half of the
    # tokens is token 0 alone: transfer 3/5 there, as for y = (0).
    y = [0, 1]
    terms = tr.trajectory_terms(_log_linear(theta, [zero, zero], y), _log_linear(theta, [hint, zero], y), [theta], 0.5)
    assert terms["tokens"] == 2 and terms["changed_tokens"] == 1
    assert terms["whole"]["num"] == pytest.approx(24 / 45, abs=1e-6)
    assert terms["whole"]["den"] == pytest.approx(2 / 3, abs=1e-6)
    assert terms["changed"]["num"] == pytest.approx(2 / 5, abs=1e-6)
    assert terms["changed"]["num"] / terms["changed"]["den"] == pytest.approx(3 / 5, abs=1e-6)

    # a hint that dictates the action leaves no gradient on it: transfer ~ 0
    dictate = torch.tensor([30.0, 0, 0], dtype=torch.float64)
    terms = tr.trajectory_terms(_log_linear(theta, [zero], [0]), _log_linear(theta, [dictate], [0]), [theta], 1.0)
    assert abs(terms["whole"]["num"] / terms["whole"]["den"]) < 1e-9


def test_transfer_of_plain_vectors():
    g_0, g_h = np.array([1.0, 2.0, 2.0]), np.array([2.0, 0.0, 1.0])
    assert tr.inner_products(g_0, g_h) == (4.0, 9.0)
    assert tr.transfer(g_0, g_h) == pytest.approx(4 / 9)
    t0, th = torch.tensor(g_0, dtype=torch.float32), torch.tensor(g_h, dtype=torch.float32)
    assert tr.transfer(t0, th) == pytest.approx(4 / 9)
    with pytest.raises(ValueError, match="different lengths"):
        tr.transfer(g_0, g_h[:2])


def test_hint_changed_tokens_picks_the_largest_changes():
    logp_0 = np.array([-1.0, -1.0, -1.0, -1.0, -1.0])
    logp_h = np.array([-0.9, -3.0, -0.5, 2.0, -1.0])  # |change|: 0.1, 2.0, 0.5, 3.0, 0.0
    assert tr.hint_changed_tokens(logp_h, logp_0, 0.4).tolist() == [False, True, False, True, False]
    assert tr.hint_changed_tokens(logp_h, logp_0, 0.6).tolist() == [False, True, True, True, False]
    # ceil(0.2 * 5) = 1; a tiny fraction still keeps one token; 1.0 keeps all
    assert tr.hint_changed_tokens(logp_h, logp_0, 0.2).tolist() == [False, False, False, True, False]
    assert tr.hint_changed_tokens(logp_h, logp_0, 0.01).sum() == 1
    assert tr.hint_changed_tokens(logp_h, logp_0, 1.0).all()
    # 0.2 of 10 tokens is 2, though 0.2 * 10 is 2.0000000000000004 in floats
    assert tr.hint_changed_tokens(np.arange(10.0), np.zeros(10), 0.2).tolist() == [False] * 8 + [True] * 2
    # ties go to the earlier token
    assert tr.hint_changed_tokens(np.zeros(4), np.zeros(4), 0.5).tolist() == [True, True, False, False]
    for bad in (0.0, 1.5):
        with pytest.raises(ValueError, match="fraction"):
            tr.hint_changed_tokens(logp_h, logp_0, bad)


def test_ratio_of_sums_and_its_interval():
    assert tr.ratio_of_sums([1.0, 2.0, 3.0], [2.0, 2.0, 2.0]) == pytest.approx(1.0)
    rng = np.random.default_rng(1)
    den = rng.uniform(0.5, 2.0, 40)
    num = 0.5 * den + rng.normal(0, 0.3, 40)
    point, lo95, hi95 = tr.ratio_interval(num, den, 0.95, 2000, seed=0)
    _, lo90, hi90 = tr.ratio_interval(num, den, 0.90, 2000, seed=0)
    assert point == pytest.approx(num.sum() / den.sum())
    assert lo95 < lo90 < point < hi90 < hi95
    assert tr.ratio_interval(num, den, 0.95, 2000, seed=0) == (point, lo95, hi95)  # seeded
    assert tr.ratio_interval([1.0], [2.0]) == (0.5, None, None)  # one problem: no interval


def test_interval_covers_at_its_level():
    """Over 200 data sets drawn around a known ratio (0.5), the 95 % interval holds it about 95 %
    of the time and the 50 % one about half the time: the level reaches scipy as a level."""
    rng = np.random.default_rng(7)
    hits = {0.95: 0, 0.5: 0}
    for i in range(200):
        den = rng.uniform(0.5, 2.0, 30)
        num = 0.5 * den + rng.normal(0, 0.3, 30)
        for level in hits:
            _, lo, hi = tr.ratio_interval(num, den, level, 500, seed=i)
            hits[level] += lo <= 0.5 <= hi
    assert 0.88 <= hits[0.95] / 200 <= 1.0
    assert 0.35 <= hits[0.5] / 200 <= 0.65


@pytest.fixture(scope="module")
def tiny(tiny_model_dir):
    from nudgerl.evaluation.sampling import load_policy

    model, tokenizer = load_policy(tiny_model_dir)  # one torch thread: conftest sets OMP_NUM_THREADS
    return model, tokenizer


def test_an_empty_hint_transfers_exactly_one(tiny):
    """xh == x0: the two gradients are the same computation, so transfer is 1 exactly, on the
    whole trajectory and on any token subset; a real hint line changes it."""
    model, tokenizer = tiny
    problem = "find the next term mod 10 : 0 3 0 1"
    x0 = tr.prompt_ids(tokenizer, tr.ORGANISM_TEMPLATE, problem, None)
    y = tokenizer("strategy : difference table . 3 - 0 = 3", add_special_tokens=False)["input_ids"]
    terms = tr.probe_trajectory(model, x0, list(x0), y, 0.2)
    for part in ("whole", "changed"):
        assert terms[part]["den"] > 0
        assert terms[part]["num"] / terms[part]["den"] == 1.0
    xh = tr.prompt_ids(tokenizer, tr.ORGANISM_TEMPLATE, problem, "use the difference table")
    assert len(xh) > len(x0)  # the trainer's hint line: 'hint : ... .' in front of the problem
    hinted = tr.probe_trajectory(model, x0, xh, y, 0.2)
    assert hinted["whole"]["den"] == pytest.approx(terms["whole"]["den"], rel=1e-5)  # g_0 is g_0
    assert hinted["whole"]["num"] != pytest.approx(terms["whole"]["num"], rel=1e-3)


def test_words_rendering_and_hint_block():
    record = {"id": "a", "problem": "find the next term mod 10 : 0 3 0 1", "answer": "6", "terms": [0, 3, 0, 1]}
    template, problem, hint = tr.render(record, "use the difference table", "words")
    assert "0, 3, 0, 1" in problem and "mod 10" in problem and hint == tr.WORDS_HINTS["difference_table"]
    x0 = template.messages(problem)[-1]["content"]
    xh = template.messages(problem, hint)[-1]["content"]
    assert xh == x0.replace("\nPut", f"\nHint: {hint}\nPut")  # x0 is xh without the hint line
    assert tr.render({**record, "terms": None}, None, "words")[1] == problem  # terms read from the text
    with pytest.raises(ValueError, match="catalogue"):
        tr.render(record, "think harder", "words")


def test_probe_end_to_end_and_page(tiny_model_dir, tmp_path):
    """run_probe on the tiny random model (every hinted rollout probed: a random model is rarely
    right), its JSON, provenance sidecar and the generated page."""
    problems = tmp_path / "problems.jsonl"
    rows = [{"id": f"p{i}", "problem": f"find the next term mod 10 : {i} 3 0 1", "answer": "6", "hard": True,
             "terms": [i, 3, 0, 1]} for i in range(3)]
    rows.append({"id": "easy", "problem": "find the next term mod 10 : 1 2 3 4", "answer": "5", "hard": False})
    rows.append({**rows[0], "id": "repeat"})
    problems.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "probe.json"
    result = tr.run_probe(tiny_model_dir, str(problems), str(out), trajectories="all", samples=3, max_new_tokens=6,
                          probe_per_problem=2,
                          n_boot=200, label="tiny", log=lambda s: None)
    saved = json.loads(out.read_text())
    assert saved["summary"] == result["summary"]
    s = saved["summary"]
    assert s["problems_probed"] == 3  # hard and distinct only
    assert s["problems"] == 3 and s["trajectories"] == 6
    assert [p["hinted"][1] for p in saved["problems"]] == [3, 3, 3]  # every sample graded, 2 probed
    assert s["whole"]["low"] <= s["whole"]["transfer"] <= s["whole"]["high"]
    assert saved["provenance"]["code_version"] and str(problems) in saved["provenance"]["inputs"]
    assert (tmp_path / "probe.json.provenance.json").exists()
    assert "hint : use the difference table" in saved["examples"]["hinted_prompt"]

    page = tr.write_page([str(out)], str(tmp_path / "transfer.md"), "nudgerl transfer-page ...")
    row = next(line for line in page.splitlines() if line.startswith("| tiny "))
    assert f"{s['whole']['transfer']:.3f} [{s['whole']['low']:.3f}, {s['whole']['high']:.3f}]" in row
    assert "| 3 | 6 |" in row


def test_cli_registers_the_probe():
    from nudgerl.cli import build_parser

    args = build_parser().parse_args(["transfer-probe", "--model", "m", "--problems", "p.jsonl", "--out", "o.json",
                                      "--fraction", "0.1", "--style", "words"])
    assert args.command == "transfer-probe" and args.fraction == 0.1 and args.style == "words"
    assert args.trajectories == "successes" and args.samples == 8
    args = build_parser().parse_args(["transfer-page", "--probes", "a.json", "b.json", "--out", "t.md"])
    assert args.probes == ["a.json", "b.json"]
