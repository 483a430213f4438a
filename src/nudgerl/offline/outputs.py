"""Reading the helper-LLM stages' outputs (strategy pools, oracle solutions) for training.

Each row is checked: a row without its field, with an empty one, or a duplicate id stops
the job with an error naming file and line, never a silent hint-free run or zero reward.
Rows for problems that are not in the training split are skipped and counted.
"""

from __future__ import annotations

from pathlib import Path

from nudgerl.io import json_rows


def _rows(path: str | Path):
    for line_no, row in json_rows(path):
        if not isinstance(row, dict) or not isinstance(row.get("id"), str) or not row["id"]:
            raise ValueError(f"{path}:{line_no}: expected an object with a string 'id'")
        yield line_no, row


def _read_by_id(path, field: str, check, what: str, train_ids=None, log=print) -> dict:
    out, seen, skipped = {}, {}, 0
    for line_no, row in _rows(path):
        pid = row["id"]
        if pid in seen:
            raise ValueError(f"{path}:{line_no}: duplicate id {pid!r} (first on line {seen[pid]})")
        seen[pid] = line_no
        if not check(row.get(field)):
            raise ValueError(f"{path}:{line_no}: problem {pid!r} has no usable '{field}' ({what})")
        if train_ids is not None and pid not in train_ids:
            skipped += 1
            continue
        out[pid] = row[field]
    if skipped:
        log(f"{path}: skipped {skipped} row(s) for problems not in the training split")
    return out


def read_pools(path, train_ids=None, log=print) -> dict[str, list[str]]:
    """{problem id: hints}; every row needs a non-empty list of non-empty string hints."""
    def ok(hints):
        return isinstance(hints, list) and hints and all(isinstance(h, str) and h.strip() for h in hints)

    return _read_by_id(path, "hints", ok, "a non-empty list of non-empty strings", train_ids, log)


def read_oracles(path, train_ids=None, log=print) -> dict[str, str]:
    """{problem id: oracle solution}; every row needs a non-empty string solution."""
    return _read_by_id(path, "solution", lambda s: isinstance(s, str) and bool(s.strip()),
                       "a non-empty string", train_ids, log)
