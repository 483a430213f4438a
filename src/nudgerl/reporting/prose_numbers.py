"""Numbers quoted in prose, checked against the generated files they come from.

A page's prose (README.md, docs/*.md) quotes a run's figures: found counts, pass@1, times. Each
such number is written between two marker comments naming a key, invisible when rendered::

    NudgeRL-8 <!--n:default.found.nudgerl8-->4<!--/n--> (...)

and the key is defined in ``docs/numbers.yaml`` (:func:`load_registry`): where the number comes from (a cell of a
generated Markdown table, by page, table block, row and column, or a value of a JSON file by
path), a regular expression whose first group is the number inside that cell, and an optional
format. ``nudgerl prose-numbers`` reads every marker and says where the prose and its source
disagree (``--write`` puts the source's value in instead). The generated pages themselves
(docs/results/) are checked against their run folders by ``nudgerl results-pages --check``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

MARKER = re.compile(r"<!--n:([A-Za-z0-9_.\-]+)-->(.*?)<!--/n-->")
# a marker left open or a closing one with no key: a typo that would hide a number from the check
_LOOSE = re.compile(r"<!--n:|<!--/n-->")
REGISTRY = "docs/numbers.yaml"
# the pages whose prose is checked (generated results pages are --check'ed against their runs)
PAGES = ("README.md", "docs/*.md", "benchmarks/README.md")


class ProseNumberError(ValueError):
    """A registry entry or a marker that cannot be read (names the file and key)."""


@dataclass(frozen=True)
class Mismatch:
    page: str
    line: int
    key: str
    prose: str
    source: str
    where: str

    def __str__(self) -> str:
        return (f"{self.page}:{self.line}: {self.key} reads {self.prose!r} in the prose, its source "
                f"({self.where}) gives {self.source!r}")


def _table_block(page_text: str, block: str, page: str, key: str) -> str:
    """The text of a generated page's table block (``<!-- from BLOCK -->``, results_pages)."""
    from nudgerl.reporting.results_pages import extract_blocks

    text = extract_blocks(page_text).get(block)
    if text is None:
        raise ProseNumberError(f"{REGISTRY}: key {key!r}: {page} has no table block {block!r}")
    return text


def markdown_cell(text: str, row: str, column: str, where: str) -> str:
    """The cell of the first Markdown table in ``text`` whose first cell is ``row``, in ``column``."""
    from nudgerl.table_text import read_markdown_table

    header, rows = read_markdown_table(text)
    if not header:
        raise ProseNumberError(f"{where}: no Markdown table")
    if column not in header:
        raise ProseNumberError(f"{where}: no column {column!r} (columns: {', '.join(header)})")
    for cells in rows:
        if cells[0] == row:
            return cells[header.index(column)]
    raise ProseNumberError(f"{where}: no row {row!r}")


def _json_value(data, path: str, where: str):
    for part in path.split("."):
        try:
            data = data[int(part)] if isinstance(data, list) else data[part]
        except (KeyError, IndexError, ValueError, TypeError):
            raise ProseNumberError(f"{where}: no {path!r} (at {part!r})") from None
    return data


def source_value(key: str, entry: dict, root: Path) -> tuple[str, str]:
    """(the number as the prose must read it, where it came from) for one registry entry."""
    fmt = entry.get("format", "{}")
    if "page" in entry:
        where = f"{entry['page']}, {entry['table']}, row {entry['row']!r}, column {entry['column']!r}"
        text = (root / entry["page"]).read_text()
        cell = markdown_cell(_table_block(text, entry["table"], entry["page"], key), entry["row"], entry["column"],
                             f"{REGISTRY}: key {key!r}: {where}")
        m = re.search(entry.get("pattern", r"(.+)"), cell)
        if not m:
            raise ProseNumberError(f"{REGISTRY}: key {key!r}: {where}: {entry.get('pattern')!r} does not match "
                                   f"the cell {cell!r}")
        value = m.group(1)
        if "format" in entry:
            value = fmt.format(float(value) * entry.get("scale", 1))
        return value, where
    if "json" in entry:
        where = f"{entry['json']}, {entry['path']}"
        data = json.loads((root / entry["json"]).read_text())
        value = _json_value(data, entry["path"], f"{REGISTRY}: key {key!r}: {where}")
        return fmt.format(value * entry.get("scale", 1) if "scale" in entry else value), where
    raise ProseNumberError(f"{REGISTRY}: key {key!r}: names neither a 'page' table cell nor a 'json' value")


def load_registry(root: Path) -> dict:
    """Key -> entry. An entry with ``rows`` (suffix -> row) stands for one key per row,
    ``KEY.SUFFIX``, each the same table's cell in that row."""
    path = root / REGISTRY
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except FileNotFoundError:
        raise ProseNumberError(f"{path}: no registry of prose numbers") from None
    registry = {}
    for key, entry in raw.items():
        if isinstance(entry, dict) and "rows" in entry:
            rest = {k: v for k, v in entry.items() if k != "rows"}
            registry.update({f"{key}.{suffix}": {**rest, "row": row, "group": key}
                             for suffix, row in entry["rows"].items()})
        else:
            registry[key] = entry
    for key, entry in registry.items():
        if not isinstance(entry, dict):
            raise ProseNumberError(f"{REGISTRY}: key {key!r}: not a mapping")
        if "page" in entry and not {"table", "row", "column"} <= set(entry):
            raise ProseNumberError(f"{REGISTRY}: key {key!r}: a table cell needs 'table', 'row' and 'column'")
    return registry


def pages(root: Path) -> list[Path]:
    return sorted({p for pattern in PAGES for p in root.glob(pattern)})


def check(root: Path, write: bool = False) -> tuple[list[Mismatch], int]:
    """Every marker of every page against its source: (mismatches, markers read). ``write``:
    the pages get their sources' values instead (and no mismatch is left)."""
    registry = load_registry(root)
    values: dict[str, tuple[str, str]] = {}
    mismatches, seen, used = [], 0, set()
    for page in pages(root):
        rel = str(page.relative_to(root))
        text = page.read_text()
        out = []
        for lineno, line in enumerate(text.splitlines(keepends=True), 1):
            if len(MARKER.findall(line)) * 2 != len(_LOOSE.findall(line)):
                raise ProseNumberError(f"{rel}:{lineno}: a prose-number marker is not closed on its line "
                                       "(<!--n:KEY-->number<!--/n-->)")

            def sub(m: re.Match) -> str:
                nonlocal seen
                key, prose = m.group(1), m.group(2)
                if key not in registry:
                    raise ProseNumberError(f"{rel}:{lineno}: {key!r} is not a key of {REGISTRY}")
                if key not in values:
                    values[key] = source_value(key, registry[key], root)
                seen += 1
                used.add(key)
                value, where = values[key]
                if prose != value:
                    mismatches.append(Mismatch(rel, lineno, key, prose, value, where))
                return f"<!--n:{key}-->{value}<!--/n-->" if write else m.group(0)

            out.append(MARKER.sub(sub, line))
        if write and "".join(out) != text:
            page.write_text("".join(out))
    # a family of keys (``rows``) is quoted when any of its rows is
    unused = sorted({e.get("group", k) for k, e in registry.items()} - {registry[k].get("group", k) for k in used})
    if unused:
        raise ProseNumberError(f"{REGISTRY}: keys no page quotes: {', '.join(unused)}")
    return mismatches, seen
