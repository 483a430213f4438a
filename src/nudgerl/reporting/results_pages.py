"""One Markdown page per run folder (``nudgerl results-pages``): its tables included verbatim
between marker comments naming their file, a provenance line read from the run's own
``*.provenance.json`` sidecars, and links to its figures' committed copies. ``--check`` reads
a page back and compares every table block with its file and the provenance line with the
records as they are now. Deterministic: no timestamps of its own, ablations sorted."""

from __future__ import annotations

import json
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

NOT_RECORDED = "not recorded"
NO_FINAL_NEWLINE = " (no newline at end of file)"
PROVENANCE_BEGIN, PROVENANCE_END = "<!-- provenance -->", "<!-- end provenance -->"
_BLOCK = re.compile(r"^<!-- from (\S+?)( \(no newline at end of file\))? -->\n\n(.*?)\n<!-- end \1 -->$",
                    re.MULTILINE | re.DOTALL)
_BEGIN = re.compile(r"^<!-- from (\S+?)(?: \(no newline at end of file\))? -->$", re.MULTILINE)


class CheckFailed(Exception):
    """The page does not match its run folder (``--check`` exits 2)."""


@dataclass(frozen=True)
class TableSource:
    title: str
    rel: str  # path inside the run folder
    produced_by: str  # the rule (and where it lives) that writes it


def table_sources(run: Path) -> list[TableSource]:
    """The tables of the page, in its order, only those whose file is in the run folder."""
    report = "(workflow/rules/report.smk)"
    ablations = [TableSource(f"Ablation: {name}", f"tables/{p.name}", f"rule `ablation_table`, ablation={name} {report}")
                 for p in sorted((run / "tables").glob("ablation_*.md")) for name in [p.stem.removeprefix("ablation_")]]
    study = "of `snakemake study` (workflow/rules/study.smk)"
    cell_tables = [TableSource(f"The field's exploration fixes, regime map cell {cell}", f"tables/{p.name}",
                               f"rule `regime_map_cell_baselines_table`, cell={cell} {study}")
                   for p in sorted((run / "tables").glob("baselines_share*.md"))
                   for cell in [p.stem.removeprefix("baselines_")]]
    tables = [TableSource("Table 1", "tables/table1.md", f"rule `table1` {report}"),
              TableSource("Table 1 per replicate", "tables/table1_replicates.md", f"rule `replicate_table` {report}"),
              TableSource("Exploration success", "tables/exploration.md", f"rule `exploration_table` {report}"),
              TableSource("The paper's claims beside ours", "tables/claims.md", f"rule `claims` {report}"),
              TableSource("What each table can detect", "tables/power.md", f"rule `power_table` {report}"),
              *ablations,
              TableSource("The field's exploration fixes", "tables/baselines.md", f"rule `baselines_table` {report}"),
              TableSource("Base models of the replicates", "diagnostics/base_models.md",
                          "rule `base_model_table` (workflow/rules/base.smk)"),
              TableSource("Regime map", "tables/regime_map.md", "rule `regime_map_figure` of `snakemake regime_map "
                          "--cores 2` (workflow/rules/regime_map.smk)"),
              TableSource("Regime map: the field's exploration fixes in its cells", "tables/regime_map_baselines.md",
                          "rule `regime_map_baselines` (workflow/rules/regime_map.smk)"),
              TableSource("Regime map: the second axis (accuracy after an unhinted choice)",
                          "tables/regime_map_accuracy.md", "rule `regime_map_accuracy` (workflow/rules/regime_map.smk)"),
              *cell_tables,
              TableSource("Exploration success on two seed sets", "tables/seed_set_agreement.md",
                          f"rule `seed_set_agreement` {study}"),
              TableSource("RL works in the common regime", "tables/rl_works.md", f"rule `rl_works` {study}")]
    return [t for t in tables if (run / t.rel).is_file()]


def require_run(run: Path) -> list[TableSource]:
    """The run folder's tables; a clear error naming the path when there is no folder or no table."""
    if not run.is_dir():
        raise FileNotFoundError(f"results folder {run} does not exist (or is not a folder)")
    sources = table_sources(run)
    if not sources:
        raise FileNotFoundError(f"results folder {run} has none of the tables of a results page "
                                f"(tables/table1.md, tables/claims.md, tables/ablation_*.md, diagnostics/base_models.md, …)")
    return sources


def find_sidecar(run: Path, rel: str) -> Path | None:
    """The provenance sidecar that records ``rel``: its own, or a sibling's whose ``outputs``
    name it (claims.md and table1_replicates.md are recorded in their .csv's sidecar)."""
    f = run / rel
    own = f.with_name(f.name + ".provenance.json")
    if own.is_file():
        return own
    for side in sorted(f.parent.glob("*.provenance.json")):
        try:
            outputs = json.loads(side.read_text()).get("outputs", {})
        except (OSError, ValueError, AttributeError):
            continue
        if any(Path(k).name == f.name and Path(k).parent.name == f.parent.name for k in outputs):
            return side
    return None


def _read_sidecar(path: Path | None) -> dict:
    if path is None:
        return {}
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def _lookup(record: dict, *keys: str):
    """The first of ``keys`` recorded, at the top level or under host/machine."""
    for where in (record, record.get("host"), record.get("machine")):
        if isinstance(where, dict):
            for k in keys:
                if where.get(k) not in (None, "", [], {}):
                    return where[k]
    return None


def _fmt(value) -> str:
    if isinstance(value, (list, tuple)):
        return ", ".join(map(str, value))
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    return str(value)


# What the line says, and the keys a sidecar may record it under (the first found counts).
_FIELDS = [("code version", ("code_version",)),
           ("config file(s)", ("config_files", "config_file", "configfiles")),
           ("config hash", ("config_hash", "config_sha256")),
           ("host", ("hostname", "host_name", "node")),
           ("platform", ("platform",)),
           ("CPU model", ("cpu_model", "cpu", "processor")),
           ("Python", ("python",)),
           ("torch", ("torch",)),
           ("torch device capability", ("torch_capability", "device_capability", "cuda_capability")),
           ("date", ("date", "created", "finished", "timestamp"))]


def repository_path(path: str) -> str:
    """A recorded config file as the repository names it: an absolute path (another machine's
    checkout, e.g. /work/bt/study/config/study.yaml) from its last ``config/`` folder on, so a page
    names no machine's folders; a relative path as it is."""
    parts = Path(path).parts
    if not Path(path).is_absolute() or "config" not in parts:
        return path
    i = len(parts) - 1 - parts[::-1].index("config")
    return str(Path(*parts[i:]))


def provenance_line(run: Path, sources: list[TableSource]) -> str:
    """One line: what the tables' sidecars record, each field's distinct values (sorted), or
    "not recorded"; nothing is filled in that the records do not say."""
    records, missing = [], []
    for t in sources:
        side = find_sidecar(run, t.rel)
        (records.append(_read_sidecar(side)) if side else missing.append(t.rel))
    parts = []
    for label, keys in _FIELDS:
        values = set()
        for r in records:
            v = _lookup(r, *keys)
            if v is None and label == "torch":
                v = (r.get("packages") or {}).get("torch") if isinstance(r.get("packages"), dict) else None
            if v is not None and label == "config file(s)":
                v = [repository_path(str(f)) for f in (v if isinstance(v, (list, tuple)) else [v])]
            if v is not None:
                values.add(_fmt(v)[:10] if label == "date" else _fmt(v))  # the day: tables are written minutes apart
        if not values:
            parts.append(f"{label} {NOT_RECORDED}")
        elif len(values) == 1:
            parts.append(f"{label} `{values.pop()}`")
        else:
            parts.append(f"{label} " + " / ".join(f"`{v}`" for v in sorted(values)) + " (differ between tables)")
    where = f"{len(records)} of the {len(sources)} tables' `*.provenance.json` sidecars"
    if missing:
        where += "; no sidecar records " + ", ".join(f"`{m}`" for m in missing)
    return f"**Provenance** (as recorded in {where}): " + "; ".join(parts) + "."


def table_block(rel: str, text: str) -> str:
    """The file's text verbatim between two markers naming it (blank lines around it, so
    Markdown renders the table; the markers say exactly what was added)."""
    flag = "" if text.endswith("\n") or not text else NO_FINAL_NEWLINE
    return f"<!-- from {rel}{flag} -->\n\n{text}{chr(10) if flag else ''}\n<!-- end {rel} -->"


def extract_blocks(page: str) -> dict[str, str]:
    """Each included table's text as it stands in the page, by source file."""
    blocks = {}
    for m in _BLOCK.finditer(page):
        blocks[m.group(1)] = m.group(3)[:-1] if m.group(2) else m.group(3)
    return blocks


def extract_provenance(page: str) -> str | None:
    m = re.search(rf"^{re.escape(PROVENANCE_BEGIN)}\n(.*?)\n{re.escape(PROVENANCE_END)}$", page,
                  re.MULTILINE | re.DOTALL)
    return m.group(1) if m else None


def regenerate_command(results: str, out: str, figures_dir: str | None = None) -> str:
    words = ["nudgerl", "results-pages", "--results", str(results), "--out", str(out)]
    return shlex.join(words + (["--figures-dir", str(figures_dir)] if figures_dir else []))


def _read(path: Path) -> str:
    return path.read_bytes().decode("utf-8")


def render_page(results: str, out: str, figures_dir: str | None = None) -> str:
    """The page of the run folder ``results`` as it will stand at ``out``."""
    run = Path(results)
    sources = require_run(run)
    command = regenerate_command(results, out, figures_dir)
    lines = [(f"<!-- GENERATED by `nudgerl results-pages` from {results}: do not edit by hand; regenerate with "
              f"`{command}` -->"),
             f"# Results of `{results}`", "",
             (f"This page is generated from the run folder `{results}` and must not be edited by hand. "
              "Each table is its file, byte for byte, between two comments naming it. Regenerate it with:"), "",
             f"    {command}", "",
             ("and check it against the run folder (every table block and the provenance line) with the same "
              "command and `--check`."), "",
             PROVENANCE_BEGIN, provenance_line(run, sources), PROVENANCE_END, ""]
    for t in sources:
        record = _read_sidecar(find_sidecar(run, t.rel))
        how = f"From `{t.rel}`, written by {t.produced_by}"
        if isinstance(record.get("command"), list) and record["command"]:
            how += f"; recorded command: `{shlex.join(map(str, record['command']))}`"
        lines += [f"## {t.title}", "", how + ".", "", table_block(t.rel, _read(run / t.rel)), ""]
    if figures_dir:
        lines += _figure_lines(run, Path(figures_dir), Path(out).parent)
    return "\n".join(lines).rstrip("\n") + "\n"


def _figure_lines(run: Path, figures_dir: Path, page_dir: Path) -> list[str]:
    pngs = sorted((run / "figures").glob("*.png"))
    if not pngs:
        return []
    lines = ["## Figures", "", f"The run's `figures/*.png`, linked to their committed copies in `{figures_dir}`.", ""]
    for png in pngs:
        copy = figures_dir / png.name
        if copy.is_file():
            lines += [f"![{png.stem}]({Path(os.path.relpath(copy, page_dir)).as_posix()})", ""]
        else:
            lines.append(f"- {png.stem}: `figures/{png.name}` has no committed copy in `{figures_dir}`")
    return [*lines, ""]


def _first_difference(expected: str, found: str) -> str:
    exp, got = expected.split("\n"), found.split("\n")
    for i in range(max(len(exp), len(got))):
        e = exp[i] if i < len(exp) else "<end of text>"
        g = got[i] if i < len(got) else "<end of text>"
        if e != g:
            return f"line {i + 1}: the file has {e!r}, the page has {g!r}"
    return "they differ in line endings or the final newline"


def check_page(results: str, page: str | Path) -> list[str]:
    """What in the page at ``page`` no longer matches the run folder (empty: it matches)."""
    run, page = Path(results), Path(page)
    sources = require_run(run)
    if not page.is_file():
        return [f"{page}: no page to check (generate it with `nudgerl results-pages` without --check)"]
    text = _read(page)
    found, problems = extract_blocks(text), []
    begun = _BEGIN.findall(text)
    for rel in sorted(set(begun) - set(found)):
        problems.append(f"table {rel}: its block in {page} is broken (begin marker without a matching end marker)")
    for t in sources:
        if t.rel not in found:
            if t.rel not in begun:
                problems.append(f"table {t.rel} ({t.title}): in {run} but not in {page}")
            continue
        expected = _read(run / t.rel)
        if found[t.rel] != expected:
            problems.append(f"table {t.rel} ({t.title}) differs from {run / t.rel}: "
                            + _first_difference(expected, found[t.rel]))
    for rel in sorted(set(found) - {t.rel for t in sources}):
        problems.append(f"table {rel}: in {page} but not (any more) in {run}")
    recorded, stated = provenance_line(run, sources), extract_provenance(text)
    if stated is None:
        problems.append(f"provenance line: missing from {page}")
    elif stated != recorded:
        problems.append(f"provenance line differs from the run's records: the records say {recorded!r}, "
                        f"the page says {stated!r}")
    return problems


def layout_problems(results: str, page: str | Path) -> list[str]:
    """What in the page at ``page`` is not laid out as this run's page would be: the same tables
    in the same order under the same headings, and a provenance line. The numbers are not
    compared: a page committed from another machine's run passes when only they differ."""
    page = Path(page)
    if not page.is_file():
        return [f"{page}: no page (generate it with `nudgerl results-pages` without --check)"]
    fresh, text = render_page(results, str(page)), _read(page)
    problems = []
    if list(extract_blocks(text)) != list(extract_blocks(fresh)):
        problems.append(f"tables: {page} has {list(extract_blocks(text))}, this run has {list(extract_blocks(fresh))}")
    headings = [[line for line in t.splitlines() if line.startswith("## ") and line != "## Figures"] for t in (text, fresh)]
    if headings[0] != headings[1]:
        problems.append(f"headings: {page} has {headings[0]}, this run's page has {headings[1]}")
    if extract_provenance(text) is None:
        problems.append(f"provenance line: missing from {page}")
    return problems


def write_page(results: str, out: str, figures_dir: str | None = None) -> Path:
    from nudgerl.io import atomic_write_text

    atomic_write_text(out, render_page(results, out, figures_dir))
    return Path(out)
