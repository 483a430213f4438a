"""The transfer probe: how far a policy-gradient step on a *hinted* success moves the *hint-free*
policy toward the same trajectory, against the same step on that trajectory found hint-free.

For a problem with hint-free prompt x0 and hinted prompt xh (the same prompt with the hint
inserted the way the trainers insert it: :meth:`nudgerl.data.prompts.PromptTemplate.apply_hint`),
and a trajectory y sampled under xh:

- a policy-gradient step on the hinted success moves the parameters along
  ``g_h = grad_theta log pi(y | xh)``;
- to first order it changes the hint-free log-probability of y by ``<g_0, g_h>``, where
  ``g_0 = grad_theta log pi(y | x0)``;
- the same step on the same y found hint-free (what GRPO gets had it sampled y without the
  hint) changes it by ``<g_0, g_0>``.

``transfer = <g_0, g_h> / <g_0, g_0>``: 1, a hinted success is worth as much to the hint-free
policy as an unhinted one; 0, it is worth nothing (a hint that dictates the trajectory leaves
``g_h`` near 0 on the tokens it decides). Measured (a) over the whole trajectory and (b) on the
tokens the hint changes most: the top ``fraction`` of y's tokens by
``|log pi(y_t | xh, y_<t) - log pi(y_t | x0, y_<t)|``, the objective restricted to those terms.
Over problems the figure is a ratio of sums (each problem's mean inner products over its
trajectories, so a problem counts once however many successes it had), with a percentile
bootstrap interval that resamples problems (:func:`ratio_interval`). Beside it, the median over
problems of each problem's own ratio (:func:`median_interval`): the ratio of sums weighs a problem
by <g_0, g_0>, the size of the step it makes, so a few surprising trajectories can carry it.

The math is :func:`transfer`, :func:`hint_changed_tokens`, :func:`ratio_of_sums`,
:func:`ratio_interval`, :func:`median_interval` (pure) and :func:`trajectory_terms` (autograd on the given parameters);
:func:`run_probe` samples, grades with the project's grader, measures and writes a JSON result
with its provenance; :func:`transfer_page` renders probe results as the generated
``benchmarks/transfer.md``.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import numpy as np

from nudgerl.data.prompts import PromptTemplate
from nudgerl.organism import task
from nudgerl.table_text import markdown_table

# ---------------------------------------------------------------- the math, pure


def transfer(g_0, g_h) -> float:
    """``<g_0, g_h> / <g_0, g_0>`` of two flat gradients (torch or numpy vectors)."""
    num, den = inner_products(g_0, g_h)
    return num / den


def inner_products(g_0, g_h) -> tuple[float, float]:
    """``(<g_0, g_h>, <g_0, g_0>)``: the first-order change of log pi(y | x0) from a unit step
    along the hinted gradient, and from the same step along the hint-free one. Accumulated in
    float64 in chunks: a 135M-parameter float32 dot product loses digits, and a float64 copy of
    the whole vector would cost a gigabyte per gradient."""
    return _dot(g_0, g_h), _dot(g_0, g_0)


_CHUNK = 1 << 22


def _dot(a, b) -> float:
    if len(a) != len(b):
        raise ValueError(f"gradients of different lengths: {len(a)} and {len(b)}")
    if isinstance(a, np.ndarray):
        return float(np.dot(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)))
    total = 0.0
    for start in range(0, len(a), _CHUNK):
        total += float((a[start:start + _CHUNK].double() * b[start:start + _CHUNK].double()).sum())
    return total


def hint_changed_tokens(logp_h, logp_0, fraction: float) -> np.ndarray:
    """Boolean mask of the tokens the hint changes most: the ``ceil(fraction * T)`` tokens
    (at least one) of largest ``|log pi(y_t | xh) - log pi(y_t | x0)|``; ties go to the earlier
    token (a stable sort), so the mask is a function of the numbers alone."""
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    change = np.abs(np.asarray(logp_h, dtype=np.float64) - np.asarray(logp_0, dtype=np.float64))
    if change.ndim != 1 or len(change) == 0:
        raise ValueError(f"need one log-probability per token of a non-empty trajectory, got shape {change.shape}")
    k = max(1, math.ceil(fraction * len(change) - 1e-9))  # 1e-9: 0.2 * 10 is 2.0000000000000004
    chosen = np.argsort(-change, kind="stable")[:k]
    mask = np.zeros(len(change), dtype=bool)
    mask[chosen] = True
    return mask


def ratio_of_sums(num, den) -> float:
    """``sum(num) / sum(den)`` over problems: the transfer of all problems' steps taken together."""
    num, den = np.asarray(num, dtype=np.float64), np.asarray(den, dtype=np.float64)
    if num.shape != den.shape or num.ndim != 1 or len(num) == 0:
        raise ValueError(f"need two equal non-empty vectors, got shapes {num.shape} and {den.shape}")
    return float(num.sum() / den.sum())


Estimate = tuple[float, float | None, float | None]  # point, interval low, high (None: no interval)


def ratio_interval(num, den, level: float = 0.95, n_boot: int = 2000, seed: int = 0) -> Estimate:
    """:func:`ratio_of_sums` and its percentile bootstrap interval at ``level``, resampling
    problems (num and den of a problem move together: ``scipy.stats.bootstrap``, paired).
    Fewer than two problems: no interval (None, None)."""
    point = ratio_of_sums(num, den)
    if len(num) < 2:
        return point, None, None
    from scipy import stats

    def statistic(n, d, axis=-1):
        return n.sum(axis=axis) / d.sum(axis=axis)

    res = stats.bootstrap((np.asarray(num, dtype=np.float64), np.asarray(den, dtype=np.float64)), statistic,
                          paired=True, vectorized=True, confidence_level=level, n_resamples=n_boot,
                          method="percentile", rng=np.random.default_rng(seed))
    return point, float(res.confidence_interval.low), float(res.confidence_interval.high)


def median_interval(values, level: float = 0.95, n_boot: int = 2000, seed: int = 0) -> Estimate:
    """The median of per-problem transfers and its percentile bootstrap interval over problems: a
    figure a few high-gradient trajectories cannot carry (the ratio of sums weighs each problem
    by <g_0, g_0>, i.e. by how large a step it makes)."""
    x = np.asarray(values, dtype=np.float64)
    point = float(np.median(x))
    if len(x) < 2:
        return point, None, None
    from scipy import stats

    res = stats.bootstrap((x,), np.median, vectorized=True, confidence_level=level, n_resamples=n_boot,
                          method="percentile", rng=np.random.default_rng(seed))
    return point, float(res.confidence_interval.low), float(res.confidence_interval.high)


# ---------------------------------------------------------------- gradients (torch)


def flat_gradient(objective, params):
    """``grad_params objective`` as one flat float32 vector (zeros for a parameter the objective
    does not reach). The graph is kept: the caller takes several gradients of one forward."""
    import torch

    grads = torch.autograd.grad(objective, params, retain_graph=True, allow_unused=True)
    return torch.cat([(torch.zeros_like(p) if g is None else g).reshape(-1).float() for p, g in zip(params, grads)])


def trajectory_terms(logp_0, logp_h, params, fraction: float) -> dict:
    """The probe's inner products for one trajectory y.

    ``logp_0``, ``logp_h``: y's per-token log-probabilities under x0 and xh (1-D tensors that
    depend on ``params``). Whole trajectory: g_0 and g_h of ``sum_t log pi(y_t | .)``; hint-changed
    tokens: the same sums over :func:`hint_changed_tokens` only."""
    mask = hint_changed_tokens(logp_h.detach().cpu().numpy(), logp_0.detach().cpu().numpy(), fraction)
    import torch

    keep = torch.as_tensor(mask, device=logp_0.device)
    out = {"tokens": int(len(mask)), "changed_tokens": int(mask.sum()),
           "logp_0": float(logp_0.detach().sum()), "logp_h": float(logp_h.detach().sum())}
    for name, select in (("whole", None), ("changed", keep)):
        g_0 = flat_gradient(logp_0.sum() if select is None else logp_0[select].sum(), params)
        g_h = flat_gradient(logp_h.sum() if select is None else logp_h[select].sum(), params)
        out[name] = dict(zip(("num", "den"), inner_products(g_0, g_h)))
        del g_0, g_h
    return out


def token_logps(model, prompt_ids: list[int], y_ids: list[int]):
    """``log pi(y_t | prompt, y_<t)`` for every token of y (1-D, with the graph to the parameters)."""
    import torch

    ids = torch.tensor([list(prompt_ids) + list(y_ids)])
    logits = model(input_ids=ids).logits[0, len(prompt_ids) - 1:-1].float()
    return torch.log_softmax(logits, dim=-1).gather(1, torch.tensor(y_ids)[:, None])[:, 0]


def probe_trajectory(model, x0_ids: list[int], xh_ids: list[int], y_ids: list[int], fraction: float) -> dict:
    """:func:`trajectory_terms` of a causal LM on every parameter that trains."""
    params = [p for p in model.parameters() if p.requires_grad]
    return trajectory_terms(token_logps(model, x0_ids, y_ids), token_logps(model, xh_ids, y_ids), params, fraction)


# ---------------------------------------------------------------- prompts

# The organism's problems and hints in plain English, for a real LM (no words rendering existed):
# the same sequence and question, each catalogue strategy's hint said as a person would say it.
WORDS_HINTS = {
    "common_difference": "Use the common difference: add the last difference (the last term minus the "
                         "term before it) to the last term.",
    "first_difference": "Use the first difference: add the difference between the first two terms to the "
                        "last term.",
    "sum_of_last_two": "Add the last two terms.",
    "difference_table": "Use a difference table: write the differences between consecutive terms, then the "
                        "differences of those differences, and extend the table by one column to get the next term.",
}
# The hint goes between the problem and the request, as in the authors' NudgeRL prompt
# (nudgerl.data.prompts.AUTHORS_HINT_BLOCK); x0 is the same text without it.
WORDS_TEMPLATE = PromptTemplate(name="organism_words", user="{problem}\n{hint_block}Put the final answer in \\boxed{}.",
                                hint_block="Hint: {hint}\n")
ORGANISM_TEMPLATE = PromptTemplate(name="organism", style="organism")
STYLES = ("organism", "words")


def words_problem(record: dict) -> str:
    """An organism problem in plain English: its four terms and the mod-10 rule."""
    terms = record.get("terms") or [int(t) for t in record["problem"].split(":")[-1].split()]
    return (f"What is the next term of the sequence {', '.join(str(t) for t in terms)}? "
            "Every number is taken mod 10 (keep only its last digit).")


def render(record: dict, hint: str | None, style: str) -> tuple[PromptTemplate, str, str | None]:
    """(template, problem text, hint text) of a problem in ``style``: the organism's own prompt,
    or its words rendering with the catalogue hint said in words."""
    if style == "organism":
        return ORGANISM_TEMPLATE, record["problem"], hint
    if style == "words":
        if hint is None:
            return WORDS_TEMPLATE, words_problem(record), None
        strategy = task.hint_strategy(hint)
        if strategy is None:
            raise ValueError(f"hint {hint!r} names no catalogue strategy; the words style says only those")
        return WORDS_TEMPLATE, words_problem(record), WORDS_HINTS[strategy]
    raise ValueError(f"unknown style {style!r}; use one of {STYLES}")


def prompt_ids(tokenizer, template: PromptTemplate, problem: str, hint: str | None) -> list[int]:
    """x0 (hint None) or xh as token ids, built as the NudgeRL trainer builds them: the
    template's messages through the chat template, tokenized without added special tokens."""
    text = tokenizer.apply_chat_template(template.messages(problem, hint), tokenize=False, add_generation_prompt=True)
    return tokenizer(text, add_special_tokens=False)["input_ids"]


# ---------------------------------------------------------------- sampling


def sample_ids(model, tokenizer, prompts: list[list[int]], n: int, temperature: float, top_p: float,
               max_new_tokens: int, seed: int, batch_size: int) -> list[list[list[int]]]:
    """``n`` completions (token ids up to and including the first eos) of each prompt, sampled
    as :func:`nudgerl.evaluation.sampling.generate` samples (left padding, static cache, top_k
    off) but kept as ids: re-tokenizing decoded text need not give back the sampled tokens."""
    import torch

    from nudgerl.models import GENERATE_CACHE

    jobs = [i for i in range(len(prompts)) for _ in range(n)]
    out: list[list[list[int]]] = [[] for _ in prompts]
    pad, eos = tokenizer.pad_token_id, tokenizer.eos_token_id
    torch.manual_seed(seed)
    for start in range(0, len(jobs), batch_size):
        chunk = jobs[start:start + batch_size]
        width = max(len(prompts[i]) for i in chunk)
        ids = torch.tensor([[pad] * (width - len(prompts[i])) + prompts[i] for i in chunk])
        mask = torch.tensor([[0] * (width - len(prompts[i])) + [1] * len(prompts[i]) for i in chunk])
        with torch.no_grad():
            gen = model.generate(input_ids=ids, attention_mask=mask, do_sample=True, temperature=temperature,
                                 top_p=top_p, top_k=0, max_new_tokens=max_new_tokens, pad_token_id=pad,
                                 eos_token_id=eos, **GENERATE_CACHE)
        for i, row in zip(chunk, gen[:, width:].tolist()):
            out[i].append(row[:row.index(eos) + 1] if eos in row else row)
    return out


# ---------------------------------------------------------------- the probe


def _problem_hints(records: list[dict], pool_path: str | None, hint: str | None) -> list[list[str]]:
    """Per problem, the hints probed: its pool's, ``hint``, or (neither given) the hint naming the
    problem's own always-right strategy (the families task: its family's)."""
    if pool_path is None:
        if hint is not None:
            return [[hint] for _ in records]
        from nudgerl.organism.base_config import record_rare_strategy, record_task

        return [[record_task(r).STRATEGIES[record_rare_strategy(r)].hint] for r in records]
    from nudgerl.io import read_jsonl

    pools = {r["id"]: r.get("hints") or [] for r in read_jsonl(pool_path)}
    return [pools.get(r["id"], []) for r in records]


def select_problems(records: list[dict], hard_only: bool, max_problems: int | None) -> list[dict]:
    """The problems probed: hard ones only (when the records say which), one per distinct
    problem text (a training split repeats problems; a repeat is not an independent unit of the
    bootstrap), the first ``max_problems`` in file order."""
    seen, out = set(), []
    for r in records:
        if hard_only and "hard" in r and not r["hard"]:
            continue
        if r["problem"] in seen:
            continue
        seen.add(r["problem"])
        out.append(r)
    return out[:max_problems] if max_problems else out


def summarize(problems: list[dict], level: float, n_boot: int, seed: int) -> dict:
    """Ratio-of-sums transfer, whole and on hint-changed tokens, with intervals, over the
    problems that have at least one trajectory."""
    used = [p for p in problems if p["trajectories"]]
    out = {"problems": len(used), "trajectories": sum(len(p["trajectories"]) for p in used)}
    for name in ("whole", "changed"):
        if not used:
            out[name] = {"transfer": None, "low": None, "high": None,
                         "median_per_problem": {"transfer": None, "low": None, "high": None}}
            continue
        num = [np.mean([t[name]["num"] for t in p["trajectories"]]) for p in used]
        den = [np.mean([t[name]["den"] for t in p["trajectories"]]) for p in used]
        point, low, high = ratio_interval(num, den, level, n_boot, seed)
        median, m_low, m_high = median_interval(np.divide(num, den), level, n_boot, seed)
        out[name] = {"transfer": point, "low": low, "high": high,
                     "median_per_problem": {"transfer": median, "low": m_low, "high": m_high}}
    return out


def run_probe(model_dir: str, problems_path: str, out: str, *, pool_path: str | None = None,
              hint: str | None = None, style: str = "organism", trajectories: str = "successes",
              samples: int = 8, fraction: float = 0.2, seed: int = 0, hard_only: bool = True,
              max_problems: int | None = None, probe_per_problem: int | None = None, temperature: float = 1.0,
              top_p: float = 1.0, max_new_tokens: int | None = None, batch_size: int = 64,
              level: float = 0.95, n_boot: int = 2000, label: str | None = None, log=print) -> dict:
    """Probe a model and write ``out`` (JSON) and its provenance sidecar.

    Per problem and hint (``pool_path``: every hint of the problem's pool; else ``hint`` on
    every problem, by default the organism's always-right strategy's), ``samples`` rollouts of
    xh and of x0 at ``temperature``; graded by the project's grader. ``trajectories``:
    ``successes`` probes the correct hinted rollouts (what NudgeRL reinforces), ``all`` every
    hinted rollout (when the model is right too rarely for successes to be more than luck).
    ``max_new_tokens`` (default): the longest trace of the problems' organism task.
    ``probe_per_problem``: probe at most this many of a problem's trajectories (the first ones;
    a 135M model's four backward passes per trajectory are what the probe's time goes to), while
    every sample still counts in the success rates.
    The whole result, every trajectory's inner products included, is in the JSON."""
    import torch

    from nudgerl.evaluation.grading import grade, grading_region
    from nudgerl.evaluation.sampling import load_policy
    from nudgerl.io import atomic_write_text, provenance, read_problems, sidecar_path, write_provenance

    if trajectories not in ("successes", "all"):
        raise ValueError(f"trajectories must be 'successes' or 'all', got {trajectories!r}")
    from nudgerl.organism.base_config import record_task

    started = time.monotonic()
    records = select_problems(read_problems(problems_path), hard_only, max_problems)
    if not records:
        raise ValueError(f"{problems_path}: no problems to probe (hard_only={hard_only})")
    max_new_tokens = max_new_tokens or record_task(records[0]).MAX_TRACE_TOKENS
    model, tokenizer = load_policy(model_dir)
    model.float()  # gradients in float32 (a converted GGUF folder may be bf16)
    hints = _problem_hints(records, pool_path, hint)

    # one prompt per (problem, hint) and one x0 per problem; rendered as the trainer renders them
    units, x0 = [], []
    for i, (r, hs) in enumerate(zip(records, hints)):
        template, problem, _ = render(r, None, style)
        x0.append(prompt_ids(tokenizer, template, problem, None))
        for h in hs:
            template, problem, said = render(r, h, style)
            units.append((i, h, prompt_ids(tokenizer, template, problem, said)))
    region = grading_region(WORDS_TEMPLATE if style == "words" else None)

    def sample(prompts, offset):
        return sample_ids(model, tokenizer, prompts, samples, temperature, top_p, max_new_tokens, seed + offset,
                          batch_size)

    def right(ids, answer):
        return grade(tokenizer.decode(ids, skip_special_tokens=True), answer, region=region) > 0

    hinted = sample([u[2] for u in units], 0)
    unhinted = sample(x0, 1)
    log(f"transfer probe: sampled {len(units)} hinted and {len(x0)} hint-free prompts x {samples} "
        f"({time.monotonic() - started:.0f} s)")
    per_problem = [{"id": r["id"], "hinted": [0, 0], "hint_free": [0, 0], "trajectories": []} for r in records]
    for i, outs in enumerate(unhinted):
        per_problem[i]["hint_free"] = [sum(right(y, records[i]["answer"]) for y in outs), len(outs)]
    chosen = []
    for (i, h, xh), outs in zip(units, hinted):
        ok = [right(y, records[i]["answer"]) for y in outs]
        per_problem[i]["hinted"][0] += sum(ok)
        per_problem[i]["hinted"][1] += len(outs)
        chosen += [(i, h, xh, y, good) for y, good in zip(outs, ok) if y and (good or trajectories == "all")]
    if probe_per_problem is not None:
        capped, taken = [], [0] * len(records)
        for c in chosen:
            if taken[c[0]] < probe_per_problem:
                capped.append(c)
                taken[c[0]] += 1
        chosen = capped

    for p in model.parameters():
        p.requires_grad_(True)
    for done, (i, h, xh, y, good) in enumerate(chosen, 1):
        terms = probe_trajectory(model, x0[i], xh, y, fraction)
        per_problem[i]["trajectories"].append({"hint": h, "correct": bool(good), **terms})
        if done % 10 == 0 or done == len(chosen):
            log(f"transfer probe: {done}/{len(chosen)} trajectories ({time.monotonic() - started:.0f} s)")

    def rate(key):
        k = sum(p[key][0] for p in per_problem)
        n = sum(p[key][1] for p in per_problem)
        return k / n if n else None

    settings = {"style": style, "trajectories": trajectories, "hint": None if pool_path else hint,
                "pool": pool_path, "samples": samples, "fraction": fraction, "hard_only": hard_only,
                "max_problems": max_problems, "probe_per_problem": probe_per_problem, "temperature": temperature,
                "top_p": top_p,
                "max_new_tokens": max_new_tokens, "batch_size": batch_size, "level": level,
                "bootstrap_samples": n_boot, "torch_threads": torch.get_num_threads(),
                "template": (WORDS_TEMPLATE if style == "words" else ORGANISM_TEMPLATE).to_dict(),
                "words_hints": WORDS_HINTS if style == "words" else None}
    seeds = {"sampling_hinted": seed, "sampling_hint_free": seed + 1, "bootstrap": seed}
    inputs = [model_dir, problems_path, *([pool_path] if pool_path else [])]
    result = {
        "label": label or Path(model_dir).name,
        "model": model_dir,
        "problems_file": problems_path,
        "parameters": sum(p.numel() for p in model.parameters()),
        "summary": {
            **summarize(per_problem, level, n_boot, seed),
            "problems_probed": len(records),
            "problems_with_hinted_success": sum(1 for p in per_problem if p["hinted"][0] > 0),
            "hinted_success_rate": rate("hinted"),
            "hint_free_success_rate": rate("hint_free"),
        },
        "settings": settings,
        "seconds": round(time.monotonic() - started, 1),
        "provenance": provenance(settings, seeds, inputs),
        "problems": per_problem,
        "examples": {"hinted_prompt": tokenizer.decode(units[0][2]) if units else None,
                     "hint_free_prompt": tokenizer.decode(x0[0]) if x0 else None,
                     "hinted_rollouts": [tokenizer.decode(y, skip_special_tokens=True) for y in hinted[0][:3]]
                     if hinted else []},
    }
    atomic_write_text(out, json.dumps(result, indent=2))
    write_provenance(out, settings, seeds, inputs)
    log(f"transfer probe: wrote {out} and {sidecar_path(out)}")
    return result


# ---------------------------------------------------------------- the generated page


def _fmt(x: float | None, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _with_interval(fig: dict) -> str:
    if fig["transfer"] is None:
        return "-"
    if fig["low"] is None:
        return _fmt(fig["transfer"])
    return f"{_fmt(fig['transfer'])} [{_fmt(fig['low'])}, {_fmt(fig['high'])}]"


def _said(settings: dict) -> str:
    """The words a words-style probe said its (catalogue) hint in."""
    strategy = task.hint_strategy(settings["hint"] or "")
    if settings["style"] != "words" or strategy is None:
        return ""
    return f" (said: {settings['words_hints'][strategy]!r})"


def _hint_said(st: dict) -> str:
    if st["pool"]:
        return f"from the pool {st['pool']!r}"
    return repr(st["hint"]) if st["hint"] else "naming each problem's own always-right strategy"


def _probed_note(r: dict) -> str:
    """How many probed trajectories the grader marks right, where not all are (``all``)."""
    trajs = [t for p in r["problems"] for t in p["trajectories"]]
    cap = r["settings"].get("probe_per_problem")
    note = f" (at most {cap} trajectory per problem probed)" if cap else ""
    if r["settings"]["trajectories"] == "all":
        note += f", {sum(t['correct'] for t in trajs)} of the {len(trajs)} probed trajectories graded right"
    return note


def transfer_page(results: list[dict], sources: list[str], command: str) -> str:
    """``benchmarks/transfer.md``: one row per probe result."""
    rows = []
    for r in results:
        s, st = r["summary"], r["settings"]
        rows.append([r["label"], st["style"], st["trajectories"], s["problems"], s["trajectories"],
                     f"{s['problems_with_hinted_success']} of {s['problems_probed']}",
                     _with_interval(s["whole"]), _with_interval(s["changed"]),
                     _with_interval(s["whole"]["median_per_problem"]),
                     _fmt(s["hinted_success_rate"]), _fmt(s["hint_free_success_rate"])])
    fractions = sorted({r["settings"]["fraction"] for r in results})
    levels = sorted({r["settings"]["level"] for r in results})
    lines = [
        "# Transfer probe: what a hinted success is worth to the hint-free policy",
        "",
        f"Generated by `{command}` from {', '.join(f'`{s}`' for s in sources)}; do not edit by hand.",
        "",
        "Transfer = <g_0, g_h> / <g_0, g_0> with g_h = grad log pi(y | xh) and g_0 = grad log pi(y | x0), "
        "for trajectories y sampled under the hinted prompt xh (x0: the same prompt without the hint): "
        "the first-order gain of log pi(y | x0) from a policy-gradient step on the hinted trajectory, over "
        "the gain from the same step on y found hint-free (1: as good as an unhinted success; 0: useless). "
        "A ratio of sums over problems (each problem's mean over its trajectories), with a "
        f"{', '.join(f'{100 * lv:g} %' for lv in levels)} percentile bootstrap interval over problems. "
        f"Hint-changed tokens: the top {', '.join(f'{100 * f:g} %' for f in fractions)} of each trajectory's "
        "tokens by |log pi(y_t | xh) - log pi(y_t | x0)|, the log-probability restricted to them. "
        "n: problems with at least one probed trajectory (`successes`: hinted rollouts the grader marks right; "
        "`all`: every hinted rollout, for a model right too rarely for its successes to be more than luck). "
        "Median over problems: each problem's own ratio, the median "
        "over problems with the same bootstrap (a figure a few high-gradient trajectories cannot carry; the "
        "ratio of sums weighs problems by <g_0, g_0>, as the step itself does). "
        "Success rates: graded samples at the probe's sampler.",
        "",
        markdown_table(["model", "prompts", "trajectories", "n problems", "trajectories probed",
                        "problems with a hinted success", "transfer, whole [CI]", "transfer, hint-changed tokens [CI]",
                        "median over problems, whole [CI]", "hinted success", "hint-free success"], rows,
                       align="lllrrrlllrr"),
        "",
        "Per probe (settings, seconds, code version):",
        "",
    ]
    for r, src in zip(results, sources):
        st = r["settings"]
        lines.append(f"- {r['label']}: `{src}`, model `{r['model']}`, {st['samples']} samples per prompt at "
                     f"temperature {st['temperature']:g}, max {st['max_new_tokens']} new tokens, hint "
                     f"{_hint_said(st)}{_said(st)}, "
                     f"{r['summary']['problems_probed']} problems probed"
                     f"{_probed_note(r)}, {r['seconds']:.0f} s, code "
                     f"{r['provenance']['code_version']}, {r['provenance']['machine']['cpu_model']}.")
    return "\n".join(lines) + "\n"


def write_page(probe_paths: list[str], out: str, command: str) -> str:
    from nudgerl.io import atomic_write_text

    results = [json.loads(Path(p).read_text()) for p in probe_paths]
    text = transfer_page(results, list(probe_paths), command)
    atomic_write_text(out, text)
    return text
