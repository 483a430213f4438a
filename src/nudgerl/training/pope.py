"""POPE baseline on TRL: GRPOTrainer on prompts that carry an oracle prefix for guided problems."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from nudgerl.sections import from_section

# Keys of the ``pope`` section that the workflow reads, not the run's POPE settings: the
# group size (--num-generations) and the DVC stage of the oracle solutions.
WORKFLOW_KEYS = ("num_generations", "oracle_stage")


@dataclass
class POPEConfig:
    """The NudgeRL authors' POPE settings: 15% of the oracle's tokens, at most 512,
    half of the problems guided (decided once per problem, fixed seed)."""

    prefix_ratio: float = 0.15
    max_prefix_tokens: int = 512
    guided_fraction: float = 0.5
    seed: int = 0
    prompt_style: str = "prefill"  # "prefill" (organism) | "instruct" (chat models)

    @classmethod
    def from_dict(cls, d: dict, section: str = "pope") -> POPEConfig:
        """From the ``pope`` section; its workflow keys (N, the oracle stage) are skipped."""
        return from_section(cls, d, section, ignore=WORKFLOW_KEYS)


def pope_records(tokenizer, train: list[dict], oracles: dict[str, str], cfg: POPEConfig, template=None) -> list[dict]:
    """Training rows with plain-text (already chat-formatted) prompts, guided or not.
    ``template`` (a PromptTemplate) gives the system prompt and user turn; None: the bare problem."""
    from nudgerl.training.pope_prompts import guided_problems, guided_prompt, oracle_prefix

    guided = guided_problems([r["id"] for r in train], cfg.guided_fraction, cfg.seed)
    rows = []
    for r in train:
        if guided[r["id"]]:
            if r["id"] not in oracles:
                raise KeyError(f"no oracle solution for guided training problem {r['id']!r}")
            prefix = oracle_prefix(oracles[r["id"]], tokenizer, cfg.prefix_ratio, cfg.max_prefix_tokens)
            prompt = guided_prompt(tokenizer, r["problem"], prefix, cfg.prompt_style, template=template)
        else:
            messages = template.messages(r["problem"]) if template is not None else [
                {"role": "user", "content": r["problem"]}]
            prompt = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        row = {"prompt": prompt, "answer": r["answer"], "id": r["id"], "guided": guided[r["id"]]}
        if template is not None and template.answer_region:
            row["answer_region"] = template.answer_region
        rows.append(row)
    return rows


def train_pope(model_dir: str, train: list[dict], oracles: dict[str, str], cfg, pope: POPEConfig, run_dir,
               template=None, revision: str | None = None) -> dict:
    from transformers import AutoTokenizer

    from nudgerl.training.estimator_trainer import grpo_trainer
    from nudgerl.training.grpo import run_training

    records = pope_records(AutoTokenizer.from_pretrained(model_dir, revision=revision), train, oracles, pope, template)
    trainer_cls, extra = grpo_trainer(cfg)
    report = run_training(trainer_cls, model_dir, records, cfg, Path(run_dir), revision=revision, **extra)
    report["pope"] = asdict(pope)
    report["guided_problems"] = sum(r["guided"] for r in records)
    return report
