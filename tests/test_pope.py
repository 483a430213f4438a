"""POPE: prefix construction, guided assignment, zero loss on the prefix, oracle stage."""

import json
import subprocess

import pytest
import torch
import yaml

from nudgerl.io import read_jsonl
from nudgerl.offline.oracles import HelperStageError, OracleConfig, build_oracles
from nudgerl.organism import task
from nudgerl.organism.tokenizer import build_tokenizer
from nudgerl.training.pope_prompts import guided_problems, guided_prompt, oracle_prefix
from nudgerl.training.grpo import build_trainer
from nudgerl.training.grpo_config import GRPORunConfig
from nudgerl.training.pope import POPEConfig, pope_records
from openai_server import FakeOpenAI

SECRET = "sk-oracle-SECRET-0123456789"


def test_prefix_length_and_content():
    tok = build_tokenizer()
    solution = task.trace((2, 6, 2, 0), task.RARE_CORRECT_STRATEGY)
    n = len(tok(solution, add_special_tokens=False)["input_ids"])
    prefix = oracle_prefix(solution, tok, 0.15, 512)
    assert len(tok(prefix, add_special_tokens=False)["input_ids"]) == int(0.15 * n)
    assert solution.startswith(prefix) and prefix.startswith("strategy : difference table")
    assert oracle_prefix(solution, tok, 0.15, 3) == "strategy : difference"  # the token cap wins
    assert oracle_prefix(solution, tok, 0.0, 512) == ""
    with pytest.raises(ValueError):
        oracle_prefix(solution, tok, 1.5, 512)


def test_guided_assignment_is_seeded_and_near_the_fraction():
    ids = [f"p{i}" for i in range(4000)]
    a = guided_problems(ids, 0.5, seed=0)
    assert a == guided_problems(ids, 0.5, seed=0) and a != guided_problems(ids, 0.5, seed=1)
    assert abs(sum(a.values()) / len(ids) - 0.5) < 0.03
    assert abs(sum(guided_problems(ids, 0.2, seed=0).values()) / len(ids) - 0.2) < 0.03


def test_prompt_styles():
    tok = build_tokenizer()
    p = guided_prompt(tok, "find the next term mod 10 : 1 2 3 4", "strategy : difference", "prefill")
    assert p.endswith("<|im_start|> assistant strategy : difference")
    with pytest.raises(ValueError):
        guided_prompt(tok, "x", "y", "sideways")


def test_prefix_tokens_carry_zero_loss_weight(tiny_model_dir, tmp_path):
    """TRL's loss weighs each token of prompt + completion by 0 (prompt) or the completion mask:
    laid over the whole sequence, those weights are 0 on every oracle-prefix token, wherever the
    trainer puts the prompt/completion boundary, and 1 on every token the policy generated."""
    tok = build_tokenizer()
    train = [p.to_record() for p in task.training_problems(0, 2, 1.0)]
    oracles = {r["id"]: task.trace(r["terms"], task.RARE_CORRECT_STRATEGY) for r in train}
    rows = pope_records(tok, train, oracles, POPEConfig(guided_fraction=1.0))
    cfg = GRPORunConfig(num_generations=2, prompts_per_step=2, max_steps=1, max_completion_length=8)
    trainer = build_trainer(__import__("trl").GRPOTrainer, tiny_model_dir, rows, cfg, tmp_path)
    trainer.model.train()
    batch = [rows[i // 2] for i in range(4)]
    out = trainer._generate_and_score_completions(batch)
    for i, row in enumerate(batch):
        # where the prefix lies, from the tokenizer alone: right after the chat head's assistant turn
        problem = next(r["problem"] for r in train if r["id"] == row["id"])
        head_ids = tok.apply_chat_template([{"role": "user", "content": problem}], tokenize=True,
                                           add_generation_prompt=True, return_dict=True)["input_ids"]
        prefix_ids = tok(oracle_prefix(oracles[row["id"]], tok), add_special_tokens=False)["input_ids"]
        assert 0 < len(prefix_ids) and row["guided"]
        prompt_ids = out["prompt_ids"][i][out["prompt_mask"][i].bool()].tolist()
        completion_ids = out["completion_ids"][i].tolist()
        weights = [0] * len(prompt_ids) + out["completion_mask"][i].tolist()
        sequence = prompt_ids + completion_ids
        at = slice(len(head_ids), len(head_ids) + len(prefix_ids))
        assert sequence[: at.start] == head_ids and sequence[at] == prefix_ids
        assert weights[at] == [0] * len(prefix_ids), f"row {i}: loss weights {weights[at]} on the oracle prefix"
        # every generated token (up to and with the first end of turn) weighs 1, the padding after it 0
        generated = completion_ids.index(tok.eos_token_id) + 1 if tok.eos_token_id in completion_ids \
            else len(completion_ids)
        assert weights[at.stop:] == [1] * generated + [0] * (len(completion_ids) - generated), \
            f"row {i}: loss weights {weights[at.stop:]} after the prefix ({generated} generated tokens)"
        assert 0 < generated <= cfg.max_completion_length
        assert prompt_ids[-len(prefix_ids):] == prefix_ids  # the prefix ends the prompt (prefill style)


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv("TEST_ORACLE_KEY", SECRET)
    return "TEST_ORACLE_KEY"


PROBLEMS = [{"id": f"q{i}", "problem": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(3)]


def test_filter_correct_discards_a_wrong_oracle(tmp_path, key):
    def answer(body):  # wrong first, right afterwards
        q = body["messages"][-1]["content"]
        i = int(q.split()[2])
        return f"The answer is \\boxed{{{2 * i + 1}}}" if not answer.seen.setdefault(q, False) else \
            f"The answer is \\boxed{{{2 * i}}}"

    answer.seen = {}

    def content(body):
        out = answer(body)
        answer.seen[body["messages"][-1]["content"]] = True
        return out

    with FakeOpenAI(content=content) as server:
        cfg = OracleConfig(backend="openai", base_url=server.url, model="reasoner", api_key_env=key,
                           filter_correct=True, concurrency=1, timeout=5)
        build_oracles(PROBLEMS, cfg, tmp_path / "o.jsonl")
        body = server.requests[0]
    rows = read_jsonl(tmp_path / "o.jsonl")
    assert [r["attempts"] for r in rows] == [2, 2, 2]
    assert all(f"\\boxed{{{2 * i}}}" in r["solution"] for i, r in enumerate(rows))
    assert body["temperature"] == 0.4 and body["max_tokens"] == 16384 and body["messages"][0]["role"] == "system"


def test_filter_correct_gives_up_after_five_and_names_the_problem(tmp_path, key):
    with FakeOpenAI(content=lambda body: "\\boxed{999}") as server:
        cfg = OracleConfig(backend="openai", base_url=server.url, model="r", api_key_env=key,
                           filter_correct=True, concurrency=1, timeout=5)
        with pytest.raises(HelperStageError, match="q0, q1, q2"):
            build_oracles(PROBLEMS, cfg, tmp_path / "o.jsonl")
        assert len(server.requests) == 15
    assert SECRET not in (tmp_path / "o.jsonl.stats.json").read_text()


@pytest.mark.slow
def test_oracle_stage_restores_from_dvc_with_zero_calls(tmp_path, key):
    subprocess.run(["dvc", "init", "--no-scm", "-q"], cwd=tmp_path, check=True)
    (tmp_path / "problems.jsonl").write_text("".join(json.dumps(p) + "\n" for p in PROBLEMS))
    with FakeOpenAI(content=lambda body: "so \\boxed{0}") as server:
        (tmp_path / "params.yaml").write_text(yaml.safe_dump({"oracles_test": {
            "backend": "openai", "base_url": server.url, "model": "r", "api_key_env": key}}))
        (tmp_path / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"oracles_test": {
            "cmd": "nudgerl make-oracles --section oracles_test --problems problems.jsonl --out o/o.jsonl",
            "deps": ["problems.jsonl"], "params": ["oracles_test"], "outs": ["o/o.jsonl"]}}}))
        for expected_calls in (3, 3):
            (tmp_path / "o" / "o.jsonl").unlink(missing_ok=True)
            proc = subprocess.run(["dvc", "--wait-for-lock", "repro", "oracles_test"], cwd=tmp_path,
                                  capture_output=True, text=True, timeout=300)
            assert proc.returncode == 0, proc.stderr
            assert len(server.requests) == expected_calls
    assert len(read_jsonl(tmp_path / "o" / "o.jsonl")) == 3
