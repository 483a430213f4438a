"""A local transformers model as the helper LLM of the pool and oracle stages (no network).

The paper's helpers are API models (gpt-4o-mini for hints, deepseek-reasoner for oracle
solutions). Where no endpoint is reachable, ``backend: transformers`` in a params.yaml
section runs a local causal LM instead (``model``: a local folder, e.g. the SmolLM2 folder
converted from its GGUF). Generation goes through :mod:`nudgerl.evaluation.sampling` (the same batched
sampler evaluation uses). A stage's problems are sampled in one batch up front
(:meth:`LocalChatModel.prefetch`); each problem then reads its samples, and only a problem
whose samples were unusable samples again on its own.
"""

from __future__ import annotations

from pathlib import Path


class LocalHelperBackend:
    """What the pool and oracle stages' transformers backends share: the local model, its
    sampling parameters (a new seed per attempt) and the up-front batch. Subclasses define
    ``_prompt(record)``; ``cfg`` has model, threads, samples, temperature, top_p, max_tokens, seed."""

    BATCH_SIZE = 256  # sequences per generate call (not a params.yaml key)

    def __init__(self, cfg):
        self.cfg = cfg
        self.llm = LocalChatModel(cfg.model, threads=cfg.threads)

    def _params(self, attempt: int):
        from nudgerl.evaluation.sampling import sampling_params

        c = self.cfg  # a helper stage's section: its max_tokens is the sampler's max_new_tokens
        section = {"temperature": c.temperature, "top_p": c.top_p, "max_new_tokens": c.max_tokens,
                   "batch_size": self.BATCH_SIZE}
        return sampling_params(section, c.samples, seed=c.seed + attempt)

    def prefetch(self, records: list[dict]) -> None:
        self.llm.prefetch({r["id"]: self._prompt(r) for r in records}, self._params(0))


class LocalChatModel:
    """A local chat model: ``messages -> samples``, with token accounting like the API client."""

    def __init__(self, path: str, threads: int = 1):
        if not path:
            raise ValueError("a transformers helper backend needs 'model' (a local model folder)")
        if not Path(path).is_dir():
            raise FileNotFoundError(f"helper model folder {path} does not exist (params.yaml 'model')")
        import torch

        from nudgerl.evaluation.sampling import load_policy

        torch.set_num_threads(threads)
        self.path = path
        self.model, self.tokenizer = load_policy(path)
        self.cache: dict[str, list[tuple[str, int]]] = {}

    def prompt(self, messages: list[dict], assistant_prefix: str = "") -> str:
        """Chat-formatted text; ``assistant_prefix`` starts the answer (e.g. "1." for a list)."""
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True) + assistant_prefix

    def sample(self, prompts: list[str], params) -> list[list[tuple[str, int]]]:
        from nudgerl.evaluation.sampling import generate

        return generate(self.model, self.tokenizer, prompts, params)

    def usage(self, prompt: str, samples: list[tuple[str, int]]) -> dict:
        n_prompt = len(self.tokenizer(prompt, add_special_tokens=False)["input_ids"])
        return {"calls": 1, "prompt_tokens": n_prompt * len(samples),
                "completion_tokens": sum(n for _, n in samples)}

    def prefetch(self, keyed_prompts: dict[str, str], params) -> None:
        """Sample every problem's prompt in one batched call; results wait in ``cache``."""
        keys = list(keyed_prompts)
        for key, samples in zip(keys, self.sample([keyed_prompts[k] for k in keys], params)):
            self.cache[key] = samples

    def samples_for(self, key: str, prompt: str, params, first_try: bool) -> list[tuple[str, int]]:
        if first_try and key in self.cache:
            return self.cache.pop(key)
        return self.sample([prompt], params)[0]
