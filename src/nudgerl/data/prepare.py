"""Real datasets: the training set (DAPO-Math-17k) and the evaluation benchmarks.

A dataset spec (a config entry under ``data.train`` or ``data.benchmarks.<name>``) names
one source: a Hugging Face dataset (``hf``, with a pinned ``revision``, optional ``hf_config``
and ``split``), a local file (``path``: .jsonl, .json or .parquet; a relative path is
resolved against ``data.local_dir``), or a generated set (``generate``: see
:func:`arithmetic_rows`, a real-LM task a 135M model partly solves). Field names map the source's columns to the
project's problem rows ``{id, problem, answer, ...}``; ``filter`` keeps rows whose fields
equal the given values (MATH-500 level 5); ``size`` + ``selection`` (``first`` | ``random``
with ``seed``) choose a subset. Every prepared file gets a provenance sidecar with the
source's identity (revision or sha256), the source row count and the output's sha256.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path

from nudgerl.io import atomic_write_text, sha256_file, write_jsonl, write_provenance
from nudgerl.sections import from_section


@dataclass
class DatasetSpec:
    hf: str | None = None  # Hugging Face dataset id
    revision: str | None = None  # commit / tag of the HF dataset (pin it)
    hf_config: str | None = None  # the HF dataset's config name ("en" for DAPO-Math-17k-Processed)
    split: str = "train"
    path: str | None = None  # local .jsonl / .json / .parquet instead of hf
    generate: dict | None = None  # a generated set instead: {kind: arithmetic, ...} (arithmetic_rows)
    id_field: str | None = None  # None: "<prefix>-<row index in the source>"
    id_prefix: str | None = None
    problem_field: str = "problem"
    answer_field: str = "answer"
    keep_fields: list[str] = field(default_factory=list)  # copied through (level, source, ...)
    filter: dict = field(default_factory=dict)
    size: int | None = None
    selection: str = "first"  # "first" | "random"
    seed: int = 0

    @classmethod
    def from_dict(cls, d: dict, where: str = "data") -> DatasetSpec:
        spec = from_section(cls, d, where)
        if sum(x is not None for x in (spec.hf, spec.path, spec.generate)) != 1:
            raise ValueError(f"{where}: give exactly one of 'hf' (a Hugging Face dataset id), 'path' (a local file) "
                             "or 'generate' (a generated set)")
        if spec.selection not in ("first", "random"):
            raise ValueError(f"{where}.selection: {spec.selection!r}; use 'first' or 'random'")
        return spec


def _local_rows(path: Path) -> list[dict]:
    if not path.exists():
        raise FileNotFoundError(f"dataset file {path} does not exist (check data.local_dir / the spec's 'path')")
    if path.suffix == ".parquet":
        import pandas as pd

        return pd.read_parquet(path).to_dict("records")
    if path.suffix == ".json":
        rows = json.loads(path.read_text())
        if not isinstance(rows, list):
            raise ValueError(f"{path}: expected a JSON list of objects")
        return rows
    rows = []
    with open(path) as f:
        for i, line in enumerate(f, start=1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise ValueError(f"{path}:{i}: not valid JSON ({e.msg})") from None
    return rows


def _hf_rows(spec: DatasetSpec) -> tuple[list[dict], dict]:
    import datasets

    ds = datasets.load_dataset(spec.hf, spec.hf_config, split=spec.split, revision=spec.revision)
    return ds.to_list(), {"hf": spec.hf, "hf_config": spec.hf_config, "split": spec.split,
                          "revision": spec.revision, "fingerprint": getattr(ds, "_fingerprint", None)}


ARITHMETIC_OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}
ARITHMETIC_OP_NAMES = {"+": "plus", "-": "minus", "*": "times"}  # problem ids: no operator characters


def arithmetic_rows(kind: str = "arithmetic", ops: list[str] = ("+", "*"), low: int = 1, high: int = 9,
                    part: str = "train", heldout_fraction: float = 0.4, seed: int = 0) -> list[dict]:
    """Every ``a <op> b`` with ``low <= a, b <= high``, as problems, split into two disjoint
    parts: the problems are shuffled with ``seed`` and the first ``heldout_fraction`` of
    them are ``heldout``, the rest ``train``. The same seed gives the same split for both
    parts, so a training set and a held-out benchmark never share a problem."""
    if kind != "arithmetic":
        raise ValueError(f"generate.kind: {kind!r}; the one generated set is 'arithmetic'")
    unknown = sorted(set(ops) - set(ARITHMETIC_OPS))
    if unknown or not ops:
        raise ValueError(f"generate.ops: {unknown or ops!r}; use some of {sorted(ARITHMETIC_OPS)}")
    if part not in ("train", "heldout"):
        raise ValueError(f"generate.part: {part!r}; use 'train' or 'heldout'")
    if not 0 < heldout_fraction < 1 or low > high:
        raise ValueError(f"generate: need 0 < heldout_fraction < 1 and low <= high (got {heldout_fraction}, {low}, {high})")
    problems = [(a, op, b) for op in ops for a in range(low, high + 1) for b in range(low, high + 1)]
    random.Random(seed).shuffle(problems)
    cut = round(len(problems) * heldout_fraction)
    chosen = problems[:cut] if part == "heldout" else problems[cut:]
    return [{"id": f"arith-{a}-{ARITHMETIC_OP_NAMES[op]}-{b}", "problem": f"What is {a} {op} {b}?", "answer": str(ARITHMETIC_OPS[op](a, b))}
            for a, op, b in chosen]


def _answer(value) -> str:
    # Some sources store integer answers as floats (AMC23: 27.0): write "27".
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


def load_rows(spec: DatasetSpec, name: str, local_dir: str | Path | None = None) -> tuple[list[dict], dict]:
    """Problem rows of a spec (filtered, subset chosen) and a description of the source."""
    if spec.generate is not None:
        try:
            raw = arithmetic_rows(**spec.generate)
        except TypeError as e:
            raise ValueError(f"data.{name}.generate: {e}") from None
        source = {"generate": dict(spec.generate)}
    elif spec.path is not None:
        path = Path(spec.path)
        if not path.is_absolute() and local_dir is not None:
            path = Path(local_dir) / path
        raw = _local_rows(path)
        source = {"path": str(path), "sha256": sha256_file(path)}
    else:
        raw, source = _hf_rows(spec)
    source["rows"] = len(raw)
    prefix = spec.id_prefix or name
    rows = []
    for i, r in enumerate(raw):
        if any(r.get(k) != v for k, v in spec.filter.items()):
            continue
        for key in (spec.problem_field, spec.answer_field):
            if key not in r:
                raise KeyError(f"{source.get('path') or spec.hf}: row {i} has no field {key!r} "
                               f"(fields: {sorted(r)}); set problem_field / answer_field")
        pid = str(r[spec.id_field]) if spec.id_field else f"{prefix}-{i}"
        row = {"id": pid, "problem": str(r[spec.problem_field]), "answer": _answer(r[spec.answer_field])}
        row.update({k: r.get(k) for k in spec.keep_fields})
        rows.append(row)
    source["rows_after_filter"] = len(rows)
    if spec.size is not None:
        if spec.size > len(rows):
            raise ValueError(f"{name}: size {spec.size} > {len(rows)} rows available")
        if spec.selection == "random":
            picked = sorted(random.Random(spec.seed).sample(range(len(rows)), spec.size))
            rows = [rows[i] for i in picked]
        else:
            rows = rows[: spec.size]
    return rows, source


def prepare(spec_dict: dict, name: str, out: str | Path, local_dir: str | Path | None = None) -> dict:
    """Write one prepared problem file and its provenance sidecar; returns the stats."""
    spec = DatasetSpec.from_dict(spec_dict, where=f"data.{name}")
    rows, source = load_rows(spec, name, local_dir)
    if not rows:
        raise ValueError(f"{name}: no rows left after filtering ({spec.filter})")
    write_jsonl(out, rows)
    stats = {"name": name, "rows": len(rows), "source": source, "sha256": sha256_file(out)}
    inputs = [source["path"]] if "path" in source else []
    side = write_provenance(out, {"spec": asdict(spec), "local_dir": str(local_dir) if local_dir else None},
                            {"selection": spec.seed}, inputs)
    prov = json.loads(side.read_text())
    prov["data"] = stats
    atomic_write_text(side, json.dumps(prov, indent=2, default=str))
    return stats
