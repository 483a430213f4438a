"""Numbers quoted in README.md and docs/ against the generated files they come from
(nudgerl.reporting.prose_numbers, docs/numbers.yaml)."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from nudgerl.reporting.prose_numbers import ProseNumberError, check, load_registry, markdown_cell

REPO = Path(__file__).resolve().parents[1]


def test_every_quoted_number_in_the_repository_matches_its_source():
    mismatches, seen = check(REPO)
    assert mismatches == [] and seen >= 30


@pytest.fixture
def copy(tmp_path):
    """The README, the docs (the registry and the generated pages among them), in a scratch repository."""
    shutil.copy(REPO / "README.md", tmp_path / "README.md")
    shutil.copytree(REPO / "docs", tmp_path / "docs", ignore=shutil.ignore_patterns("*.png", "*.pdf"))
    return tmp_path


def test_a_planted_disagreement_is_named_by_page_line_and_key(copy):
    readme = copy / "README.md"
    text = readme.read_text()
    old = next(line for line in text.splitlines() if "<!--n:default.families.nudgerl8-->" in line)
    lineno = text.splitlines().index(old) + 1
    quoted = old.split("<!--n:default.families.nudgerl8-->")[1].split("<!--/n-->")[0]
    readme.write_text(text.replace(f"<!--n:default.families.nudgerl8-->{quoted}<!--/n-->",
                                   f"<!--n:default.families.nudgerl8-->{int(quoted) + 1}<!--/n-->"))
    mismatches, _ = check(copy)
    assert [(m.page, m.line, m.key, m.prose, m.source) for m in mismatches] == \
        [("README.md", lineno, "default.families.nudgerl8", str(int(quoted) + 1), quoted)]
    out = subprocess.run([Path(sys.executable).parent / "nudgerl", "prose-numbers", "--root", copy],
                         capture_output=True, text=True)
    assert out.returncode == 2 and f"README.md:{lineno}: default.families.nudgerl8" in out.stderr
    # --write puts the source's value back, and the check passes again
    assert len(check(copy, write=True)[0]) == 1 and check(copy)[0] == []
    assert readme.read_text() == text


def test_a_changed_source_is_caught_too(copy):
    """The generated page changes (a new run), the prose does not: the prose is stale."""
    page = copy / "docs" / "results" / "embedded.md"
    text = page.read_text()
    # Table 1's NudgeRL-8 row: its Found cell ends "families k of n" (the families found)
    row = next(line for line in text.splitlines() if line.startswith("| NudgeRL (N=8) |") and "families " in line)
    k, n = row.split("families ")[1].split(" |")[0].split(" of ")
    page.write_text(text.replace(row, row.replace(f"families {k} of {n}", f"families {(int(k) + 1) % (int(n) + 1)} of {n}"), 1))
    assert {m.key for m in check(copy)[0]} == {"default.families.nudgerl8"}


def test_bad_markers_and_registry_entries_are_named(copy):
    readme = copy / "README.md"
    text = readme.read_text()
    readme.write_text(text + "\nan unknown <!--n:no.such.key-->3<!--/n-->\n")
    with pytest.raises(ProseNumberError, match=r"README.md:\d+: 'no.such.key' is not a key of docs/numbers.yaml"):
        check(copy)
    readme.write_text(text + "\nleft open <!--n:default.replicates-->5\n")
    with pytest.raises(ProseNumberError, match="not closed on its line"):
        check(copy)
    readme.write_text(text)
    registry = copy / "docs" / "numbers.yaml"
    registry.write_text(registry.read_text() + "\nunquoted:\n  json: x.json\n  path: a\n")
    with pytest.raises(ProseNumberError, match="keys no page quotes: unquoted"):
        check(copy)
    registry.write_text(registry.read_text() + "\nbroken:\n  page: docs/results/embedded.md\n  table: t.md\n")
    with pytest.raises(ProseNumberError, match="key 'broken': a table cell needs"):
        load_registry(copy)


def test_a_markdown_cell_by_row_and_column():
    table = "| Method | Found |\n|---|---|\n| Base | 0 of 5 |\n| GRPO (N=8) | 2 of 5 |\n"
    assert markdown_cell(table, "GRPO (N=8)", "Found", "t") == "2 of 5"
    with pytest.raises(ProseNumberError, match="t: no row 'POPE'"):
        markdown_cell(table, "POPE", "Found", "t")
    with pytest.raises(ProseNumberError, match="no column 'Avg' \\(columns: Method, Found\\)"):
        markdown_cell(table, "Base", "Avg", "t")


def test_the_readmes_result_table_is_the_claims_by_regime_pages(copy):
    from nudgerl.reporting.front_table import update

    assert update(REPO, check=True)
    page = copy / "docs" / "results" / "claims_by_regime.md"
    text = page.read_text()
    assert "+6.8 [" in text
    page.write_text(text.replace("+6.8 [", "+25.0 [", 1))  # a new run of the page
    out = subprocess.run([Path(sys.executable).parent / "nudgerl", "front-table", "--root", copy, "--check"],
                         capture_output=True, text=True)
    assert out.returncode == 2 and "claims_by_regime.md" in out.stderr
    assert not update(copy, check=False) and update(copy, check=True)
    assert "descriptive: +25.0 points; families found 8 of 20 vs 5 of 20" in (copy / "README.md").read_text()


def test_a_claims_cell_compacted():
    from nudgerl.reporting.front_table import compact_cell

    assert compact_cell("**descriptive (n = 5)**: +0.4 [-3.5, +4.8], p = 0.25 / 0.78, found 4 of 5 vs 4 of 5 "
                        "(McNemar p = 1) (5 replicates)") == "descriptive: +0.4 points; found 4 of 5 vs 4 of 5"
    assert compact_cell("**supported**: +3.0 [+0.9, +5.3], p = 0.01 / 1; -2.1 [-4.7, +0.6], p = 1 / 0.5 "
                        "(12 replicates)") == "supported: +3.0 / -2.1 points"
    assert compact_cell("yes, 3 of 3") == "yes, 3 of 3"
    assert compact_cell("**descriptive (n = 5)**: +6.8 [-4.8, +22.4], p = 0.28 / 0.75, families found 8 of 20 vs "
                        "5 of 20 (sign-flip p = 0.5) (5 replicates)") == \
        "descriptive: +6.8 points; families found 8 of 20 vs 5 of 20"


def test_the_per_machine_table_has_a_row_per_results_page_of_the_default(copy):
    from nudgerl.reporting.front_table import render_machines, update

    assert update(REPO, check=True)
    (copy / "benchmarks" / "default_runs").mkdir(parents=True)
    page = (copy / "docs" / "results" / "embedded.md").read_text()
    other = page.replace("CPU model `", "CPU model `Intel Xeon, was ").replace("| NudgeRL (N=8) | 8 of 20 |",
                                                                             "| NudgeRL (N=8) | 1 of 20 |")
    (copy / "benchmarks" / "default_runs" / "xeon.md").write_text(other)
    table = render_machines(copy)
    rows = [ln for ln in table.splitlines() if ln.startswith("| ") and "date" not in ln]
    assert len(rows) == 2 and any("Intel Xeon" in r and "| families 1 of 20 |" in r for r in rows)
    assert not update(copy, check=True) and not update(copy, check=False) and update(copy, check=True)
    assert "Intel Xeon, was" in (copy / "README.md").read_text()


def test_the_per_machine_table_shows_families_found_and_only_the_methods_a_run_has(tmp_path):
    """A families run's exploration block has two tables (replicates that found every family,
    then families found): the machine row shows the families found; a method no page has (the
    families default trains GRPO-8 alone of the GRPOs) gets no column."""
    from nudgerl.reporting.front_table import render_machines

    page = "\n".join([
        "**Provenance**: CPU model `Test CPU`; torch device capability `AVX2`; date `2026-12-07`.",
        "<!-- from tables/exploration.md -->", "",
        "**Exploration success: runs ...**", "",
        "| Method | Found | Success probability |", "|---|---|---|",
        "| GRPO (N=8) | 0 of 5 | 0 % [0, 52] |", "| NudgeRL (N=8) | 1 of 5 | 20 % [1, 72] |", "",
        "**Families found: ...**", "",
        "| Method | Families found | Per replicate |", "|---|---|---|",
        "| GRPO (N=8) | 5 of 20 | 1 / 1 / 1 / 1 / 1 |", "| NudgeRL (N=8) | 9 of 20 | 4 / 2 / 1 / 1 / 1 |", "",
        "<!-- end tables/exploration.md -->", "",
        "<!-- from tables/claims.md -->", "",
        "**The paper's claims ...**", "",
        "| # | claim | verdict |", "|---|---|---|", "| 3 | NudgeRL > POPE | **descriptive (n = 5)** |", "",
        "<!-- end tables/claims.md -->", ""])
    (tmp_path / "docs" / "results").mkdir(parents=True)
    (tmp_path / "docs" / "results" / "embedded.md").write_text(page)
    table = render_machines(tmp_path)
    assert "| CPU (torch kernels) | date | NudgeRL (N=8) found | GRPO (N=8) found | claim 3 |" in table
    assert "| Test CPU (AVX2) | 2026-12-07 | families 9 of 20 | families 5 of 20 | descriptive (n = 5) |" in table
