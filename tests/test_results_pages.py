"""`nudgerl results-pages`: one Markdown page per run folder, its tables verbatim between
markers, a provenance line from the run's sidecars, and `--check` against the folder."""

import json
import subprocess
from pathlib import Path

import pytest

from nudgerl.cli import run as nudgerl
from nudgerl.reporting.results_pages import (
    extract_blocks,
    extract_provenance,
    render_page,
)

RUN = "results/demo"

TABLE1 = """**Table 1: pass@1 (%) with 95% bootstrap interval over problems and replicates; 2 replicates.**

| Method | AIME24 | Avg |
|---|---|---|
| Base | 21.1 [9.3, 36.1] † | 26.0 [20.9, 31.6] |
| GRPO (N=8) | 98.1 [96.1, 99.6] | 97.8 [96.6, 98.9] |
"""
CLAIMS = """**The paper's claims beside ours.**

| # | claim | ours | verdict |
|---|---|---|---|
| 1 | NudgeRL (N=8) >= GRPO (N=32) | +0.1 [-0.7, +1.3] | **inconclusive** |
"""
ABLATIONS = {"pdrop": "| Method | Avg |\n|---|---|\n| p_drop = 0 | 92.8 |\n",
             "distill": "| Method | Avg |\n|---|---|\n| lambda_distill = 0 | 97.0 |\n"}


def sidecar(outputs: list[str], command: list[str], **extra) -> dict:
    """Shaped like results/embedded/tables/*.provenance.json (nudgerl.io.provenance)."""
    return {"code_version": "1fa7ebc95c6f", "python": "3.11.7",
            "platform": "Linux-6.18.44-fc-v1098-x86_64-with-glibc2.36",
            "packages": {"torch": "2.13.0+cpu", "transformers": "5.17.0", "numpy": "2.3.5"},
            "config": {"methods": ["base", "grpo8"], "benchmarks": ["aime24"], "reference": "grpo8"},
            "seeds": {"runs": [0, 1]}, "inputs": {f"{RUN}/eval/base/seed0/aime24.problems.jsonl": "c47d"},
            "outputs": {o: "d7c0" for o in outputs}, "command": command, **extra}


def write_json(path: Path, record: dict) -> None:
    path.write_text(json.dumps(record, indent=2))


@pytest.fixture
def run_dir(tmp_path, monkeypatch):
    """A small run folder: Table 1 (own sidecar), claims (recorded in claims.csv's sidecar, as
    the real rule does), two ablations (one without a sidecar); no replicates, base models, map."""
    monkeypatch.chdir(tmp_path)
    tables = tmp_path / RUN / "tables"
    tables.mkdir(parents=True)
    (tables / "table1.md").write_text(TABLE1)
    write_json(tables / "table1.md.provenance.json",
               sidecar([f"{RUN}/tables/table1.md"], ["nudgerl", "table", "--title", "Table 1"]))
    (tables / "claims.md").write_text(CLAIMS)
    (tables / "claims.csv").write_text("claim,verdict\n1,inconclusive\n")
    write_json(tables / "claims.csv.provenance.json",
               sidecar([f"{RUN}/tables/claims.csv", f"{RUN}/tables/claims.md", f"{RUN}/tables/claims.html"],
                       ["nudgerl", "claims", "--out-prefix", f"{RUN}/tables/claims"]))
    for name, text in ABLATIONS.items():
        (tables / f"ablation_{name}.md").write_text(text)
    write_json(tables / "ablation_pdrop.md.provenance.json",
               sidecar([f"{RUN}/tables/ablation_pdrop.md"], ["nudgerl", "table", "--title", "Ablation: p_drop"]))
    return tmp_path / RUN


def generate(out="page.md", *extra) -> Path:
    assert nudgerl(["results-pages", "--results", RUN, "--out", out, *extra]) == 0
    return Path(out)


def check(out="page.md", capsys=None) -> tuple[int, str]:
    try:
        code = nudgerl(["results-pages", "--results", RUN, "--out", out, "--check"])
    except SystemExit as e:
        code = e.code
    return code, (capsys.readouterr().err if capsys else "")


def test_page_includes_each_table_verbatim_in_order_and_skips_missing_ones(run_dir):
    page = generate().read_text()
    blocks = extract_blocks(page)
    assert list(blocks) == ["tables/table1.md", "tables/claims.md", "tables/ablation_distill.md",
                            "tables/ablation_pdrop.md"]  # ablations sorted
    for rel, text in blocks.items():
        assert text == (run_dir / rel).read_text()
        assert f"<!-- from {rel} -->\n\n{text}\n<!-- end {rel} -->" in page
    headings = [line for line in page.splitlines() if line.startswith("## ")]
    assert headings == ["## Table 1", "## The paper's claims beside ours", "## Ablation: distill", "## Ablation: pdrop"]
    assert "per replicate" not in page and "Base models" not in page and "Regime map" not in page
    assert "rule `table1`" in page and "recorded command: `nudgerl table --title 'Table 1'`" in page
    assert "rule `claims`" in page and "rule `ablation_table`, ablation=pdrop" in page
    assert "must not be edited by hand" in page and f"    nudgerl results-pages --results {RUN} --out page.md\n" in page
    assert "## Figures" not in page  # only with --figures-dir


def test_replicates_base_models_and_regime_map_in_their_places(run_dir):
    (run_dir / "tables" / "table1_replicates.md").write_text("| seed | 0 |\n|---|---|\n")
    (run_dir / "tables" / "exploration.md").write_text("| Method | Found |\n|---|---|\n| GRPO (N=8) | 1 of 3 |\n")
    (run_dir / "diagnostics").mkdir()
    (run_dir / "diagnostics" / "base_models.md").write_text("| seed | in regime |\n|---|---|\n| 0 | yes |\n")
    (run_dir / "tables" / "regime_map.md").write_text("| share | pass@1 |\n|---|---|\n| 0.05 | 0.4 |\n")
    write_json(run_dir / "tables" / "regime_map.csv.provenance.json",
               sidecar([f"{RUN}/tables/regime_map.csv", f"{RUN}/tables/regime_map.md"], ["nudgerl", "regime-map"]))
    page = render_page(RUN, "page.md")
    assert list(extract_blocks(page)) == ["tables/table1.md", "tables/table1_replicates.md",
                                          "tables/exploration.md", "tables/claims.md", "tables/ablation_distill.md", "tables/ablation_pdrop.md",
                                          "diagnostics/base_models.md", "tables/regime_map.md"]
    assert "rule `regime_map_figure` of `snakemake regime_map --cores 2`" in page
    assert "rule `exploration_table`" in page
    assert "recorded command: `nudgerl regime-map`" in page


def test_provenance_line_says_what_is_recorded_and_never_invents(run_dir):
    line = extract_provenance(generate().read_text())
    assert line.startswith("**Provenance** (as recorded in 3 of the 4 tables' `*.provenance.json` sidecars; "
                           "no sidecar records `tables/ablation_distill.md`)")
    for part in ["code version `1fa7ebc95c6f`", "platform `Linux-6.18.44-fc-v1098-x86_64-with-glibc2.36`",
                 "Python `3.11.7`", "torch `2.13.0+cpu`", "config file(s) not recorded", "config hash not recorded",
                 "CPU model not recorded", "torch device capability not recorded", "host not recorded",
                 "date not recorded"]:
        assert part in line, part


def test_provenance_line_shows_recorded_host_date_and_differing_versions(run_dir):
    tables = run_dir / "tables"
    for side in tables.glob("*.provenance.json"):
        record = json.loads(side.read_text())
        # as nudgerl.io.provenance records them
        record.update(created="2026-12-02T15:45:04+00:00", config_files=["config/config.yaml"], config_sha256="ab12",
                      machine={"hostname": "node1", "cpu_model": "AMD EPYC 9654", "torch_capability": "AVX512"})
        write_json(side, record)
    record = json.loads((tables / "table1.md.provenance.json").read_text())
    write_json(tables / "table1.md.provenance.json", {**record, "code_version": "0000aaaa1111-dirty"})
    line = extract_provenance(render_page(RUN, "page.md"))
    for part in ["date `2026-12-02`", "config file(s) `config/config.yaml`", "config hash `ab12`",
                 "host `node1`", "CPU model `AMD EPYC 9654`", "torch device capability `AVX512`",
                 "code version `0000aaaa1111-dirty` / `1fa7ebc95c6f` (differ between tables)"]:
        assert part in line, part


def test_provenance_names_config_files_as_the_repository_does_not_by_a_machines_folders(run_dir):
    from nudgerl.reporting.results_pages import repository_path

    assert repository_path("/work/bt/study/config/study.yaml") == "config/study.yaml"
    assert repository_path("config/config.yaml") == "config/config.yaml"
    assert repository_path("/home/me/overlay.yaml") == "/home/me/overlay.yaml"  # outside a repository's config/
    for side in (run_dir / "tables").glob("*.provenance.json"):
        write_json(side, {**json.loads(side.read_text()),
                          "config_files": ["/work/main/config/common.yaml", "config/config.yaml"]})
    line = extract_provenance(render_page(RUN, "page.md"))
    assert "config file(s) `config/common.yaml, config/config.yaml`" in line and "/work/" not in line


def test_page_is_deterministic(run_dir):
    first = generate().read_bytes()
    assert generate().read_bytes() == first


def test_check_passes_on_the_fresh_page(run_dir, capsys):
    generate()
    assert check(capsys=capsys) == (0, "")


def test_check_fails_naming_the_table_after_its_file_changes(run_dir, capsys):
    generate()
    table1 = run_dir / "tables" / "table1.md"
    table1.write_text(table1.read_text().replace("98.1 [96.1, 99.6]", "98.2 [96.1, 99.6]"))
    code, err = check(capsys=capsys)
    assert code == 2
    assert "table tables/table1.md (Table 1) differs" in err and "line 6:" in err and "98.2 [96.1" in err
    assert "claims" not in err


def test_check_fails_naming_the_table_after_the_page_is_edited(run_dir, capsys):
    page = generate()
    page.write_text(page.read_text().replace("**inconclusive**", "**supported**"))
    code, err = check(capsys=capsys)
    assert code == 2 and "table tables/claims.md (The paper's claims beside ours) differs" in err
    assert "line 5:" in err and "**supported**" in err


def test_check_fails_on_a_changed_provenance_or_a_new_or_removed_table(run_dir, capsys):
    generate()
    side = run_dir / "tables" / "table1.md.provenance.json"
    write_json(side, {**json.loads(side.read_text()), "code_version": "2222bbbb3333"})
    code, err = check(capsys=capsys)
    assert code == 2 and "provenance line differs" in err and "2222bbbb3333" in err

    generate()
    (run_dir / "tables" / "table1_replicates.md").write_text("| seed |\n|---|\n| 0 |\n")
    (run_dir / "tables" / "ablation_distill.md").unlink()
    code, err = check(capsys=capsys)
    assert code == 2
    assert "table tables/table1_replicates.md (Table 1 per replicate): in results/demo but not in page.md" in err
    assert "table tables/ablation_distill.md: in page.md but not (any more) in results/demo" in err


def test_check_fails_on_a_missing_page_or_broken_markers(run_dir, capsys):
    code, err = check("nowhere.md", capsys=capsys)
    assert code == 2 and "nowhere.md: no page to check" in err
    page = generate()
    page.write_text(page.read_text().replace("<!-- end tables/claims.md -->", ""))
    code, err = check(capsys=capsys)
    assert code == 2 and "table tables/claims.md: its block in page.md is broken" in err


def test_a_table_without_final_newline_round_trips(run_dir, capsys):
    (run_dir / "tables" / "table1.md").write_text(TABLE1.rstrip("\n"))
    page = generate().read_text()
    assert "<!-- from tables/table1.md (no newline at end of file) -->" in page
    assert extract_blocks(page)["tables/table1.md"] == TABLE1.rstrip("\n")
    assert check(capsys=capsys) == (0, "")
    (run_dir / "tables" / "table1.md").write_text(TABLE1)  # only the final newline differs
    code, err = check(capsys=capsys)
    assert code == 2 and "tables/table1.md" in err


def test_check_layout_ignores_the_numbers_but_not_the_tables_or_headings(run_dir, capsys):
    """A page committed from another machine's run: other numbers pass --check-layout (not
    --check); a missing table, a renamed heading or no provenance line fail it."""
    def layout(out="page.md"):
        try:
            return nudgerl(["results-pages", "--results", RUN, "--out", out, "--check-layout"])
        except SystemExit as e:
            return e.code

    page = generate()
    text = page.read_text()
    page.write_text(text.replace("98.1 [96.1, 99.6]", "97.0 [95.0, 99.0]"))
    assert layout() == 0 and check()[0] == 2
    page.write_text(text.replace("## Ablation: pdrop", "## Ablation: p_drop"))
    assert layout() == 2 and "headings" in capsys.readouterr().err
    (run_dir / "tables" / "ablation_hint_sampling.md").write_text("| a |\n|---|\n| 1 |\n")
    page.write_text(text)
    assert layout() == 2 and "tables/ablation_hint_sampling.md" in capsys.readouterr().err


def test_figures_link_to_the_committed_copies(run_dir):
    (run_dir / "figures").mkdir()
    for name in ["training_curves.png", "case_study.png"]:
        (run_dir / "figures" / name).write_bytes(b"png")
    Path("docs/figures").mkdir(parents=True)
    Path("docs/figures/training_curves.png").write_bytes(b"png")
    page = generate("docs/results/demo.md", "--figures-dir", "docs/figures").read_text()
    assert "![training_curves](../figures/training_curves.png)" in page
    assert "- case_study: `figures/case_study.png` has no committed copy in `docs/figures`" in page
    assert "--figures-dir docs/figures" in page  # the regenerating command says it too


@pytest.mark.parametrize("make", [lambda p: None, lambda p: p.mkdir(parents=True)], ids=["missing", "empty"])
def test_a_missing_or_empty_run_folder_is_an_error_naming_it(tmp_path, monkeypatch, make):
    monkeypatch.chdir(tmp_path)
    make(tmp_path / "results" / "none")
    for extra in ([], ["--check"]):
        with pytest.raises(SystemExit) as e:
            nudgerl(["results-pages", "--results", "results/none", "--out", "page.md", *extra])
        assert "results folder results/none" in str(e.value.code)
    assert not Path("page.md").exists()


@pytest.mark.slow
def test_smoke_run_page_is_generated_and_checks(smoke_run, tmp_path):
    out = tmp_path / "smoke.md"
    for extra in ([], ["--check"]):
        proc = subprocess.run(["nudgerl", "results-pages", "--results", "results/smoke", "--out", str(out), *extra],
                              cwd=smoke_run, capture_output=True, text=True, timeout=120, check=False)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    page = out.read_text()
    blocks = extract_blocks(page)
    assert {"tables/table1.md", "tables/table1_replicates.md", "tables/claims.md",
            "diagnostics/base_models.md"} <= set(blocks)
    for rel, text in blocks.items():
        assert text == (smoke_run / "results/smoke" / rel).read_text()
    assert extract_provenance(page).startswith("**Provenance** (as recorded in ")
