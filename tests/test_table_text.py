"""The one table writer (nudgerl.table_text): a ``|`` in a cell keeps a Markdown row's columns,
LaTeX specials are escaped in data and not in the code's own markup, and every report table
written through it survives a ``|`` in a method name or label."""

import re
from dataclasses import replace

import pandas as pd
import pytest

from nudgerl.reporting.report_pages import markdown_html
from nudgerl.table_text import Latex, latex_escape, latex_row, latex_table, markdown_escape, markdown_table

PIPE = "a|b"  # what a label or name with a pipe in it looks like

UNESCAPED_PIPE = re.compile(r"(?<!\\)\|")


def _cells(line: str) -> list[str]:
    """A Markdown row's cells, split on the pipes no backslash precedes (GFM's and markdown-it's rule)."""
    return UNESCAPED_PIPE.split(line.strip())[1:-1]


def _tables(md: str) -> list[list[str]]:
    """The Markdown tables of a text: runs of lines starting with '|'."""
    tables, current = [], []
    for line in md.splitlines():
        if line.startswith("|"):
            current.append(line)
        elif current:
            tables.append(current)
            current = []
    return tables + ([current] if current else [])


def assert_tables_hold(md: str, needle: str = PIPE) -> None:
    """Every table's rows have its header's width, the parser agrees, and ``needle`` is one cell's text."""
    tables = _tables(md)
    assert tables, md
    for table in tables:
        widths = [len(_cells(line)) for line in table]
        assert len(set(widths)) == 1, "\n".join(table)
        assert re.fullmatch(r"\|(:?-{3,}:?\|)+", table[1]), table[1]
    html = markdown_html(md)
    parsed = html.split("<table>")[1:]
    assert len(parsed) == len(tables)
    for table, body in zip(tables, parsed):
        body = body.split("</table>")[0]
        header_cells = len(re.findall(r"<th[ >]", body))
        assert header_cells == len(_cells(table[0]))
        body_rows = re.findall(r"<tr>(.*?)</tr>", body, re.S)[1:]
        assert len(body_rows) == len(table) - 2
        assert all(len(re.findall(r"<td[ >]", row)) == header_cells for row in body_rows)
    assert needle in html and needle.replace("|", r"\|") not in html


def assert_tabular_holds(tex: str) -> None:
    """Every row of the tabular has the header's number of unescaped '&'."""
    body = tex.split(r"\toprule")[1].split(r"\bottomrule")[0]
    rows = [line for line in body.splitlines() if line.endswith(r"\\")]
    counts = {len(re.findall(r"(?<!\\)&", line)) for line in rows}
    assert len(counts) == 1, rows


# ---------------------------------------------------------------- the helper


def test_markdown_table_is_the_pages_layout():
    md = markdown_table(["Method", "Avg"], [["GRPO (N=8)", "46.7 [21.7, 73.7]"], ["Base", ""]])
    assert md == ("| Method | Avg |\n|---|---|\n| GRPO (N=8) | 46.7 [21.7, 73.7] |\n| Base |  |")
    # None is a blank cell (the plan-cost total row), '' an empty one; alignment per column
    md = markdown_table(["a", "b", "c"], [["**total**", None, 3]], align="-rl")
    assert md == "| a | b | c |\n|---|---:|:---|\n| **total** | | 3 |"
    assert markdown_table(["x"], [], align=["c"]) == "| x |\n|:---:|"


def test_a_pipe_in_a_cell_keeps_the_row_s_columns():
    md = markdown_table(["Method", "note"], [[PIPE, "x | y"], ["`c|d`", "back\\slash|e"], ["two\nlines", "ok"]])
    assert md.splitlines()[2] == r"| a\|b | x \| y |"
    assert "| two lines | ok |" in md  # a line break would end the row
    assert_tables_hold(md)
    assert "<code>c|d</code>" in markdown_html(md)  # a code span's pipe too
    assert markdown_escape("no specials **here**") == "no specials **here**"


def test_a_row_of_another_width_is_an_error():
    with pytest.raises(ValueError, match="row 0 has 1 cells, the header 2"):
        markdown_table(["a", "b"], [["only"]])
    with pytest.raises(ValueError, match="alignments"):
        markdown_table(["a", "b"], [], align="r")
    with pytest.raises(ValueError, match="is not one of"):
        markdown_table(["a"], [], align="x")
    with pytest.raises(ValueError, match="row 0 has 3 cells"):
        latex_table(["a", "b"], [["1", "2", "3"]])


def test_latex_specials_are_escaped_in_data_only():
    assert latex_escape(r"a & b % c $ d # e _ f { g } h ~ i ^ j \ k | l") == (
        r"a \& b \% c \$ d \# e \_ f \{ g \} h \textasciitilde{} i \textasciicircum{} j \textbackslash{} k "
        r"\textbar{} l")
    assert latex_escape("p_drop = 0.5 (50 %)") == r"p\_drop = 0.5 (50 \%)"
    assert latex_escape("plain text, 1.5 [0.2, 3]") == "plain text, 1.5 [0.2, 3]"
    markup = Latex(r"42.7\,[15.8, 70.3]$^\dagger$")
    assert latex_escape(markup) == markup  # the code's own markup passes
    assert latex_row(["x_1", markup]) == r"x\_1 & 42.7\,[15.8, 70.3]$^\dagger$ \\"


def test_latex_table_is_the_booktabs_float():
    tex = latex_table(["Method", "A&B"], [["p_drop", Latex(r"1\,[0, 2]")]], caption="50 % of it")
    assert tex == "\n".join([r"\begin{table}[t]", r"\centering", r"\caption{50 \% of it}",
                             r"\begin{tabular}{lc}", r"\toprule", r"Method & A\&B \\", r"\midrule",
                             r"p\_drop & 1\,[0, 2] \\", r"\bottomrule", r"\end{tabular}", r"\end{table}"])
    assert r"\caption" not in latex_table(["a"], [])


# ---------------------------------------------------------------- every writer, a pipe in a label


def test_table1_and_its_latex_take_a_pipe_and_specials_in_a_label():
    from nudgerl.reporting.tables import render

    rows = []
    for m, base in (("m1", 0.4), ("m2", 0.5)):
        for b in ("aime24", "avg"):
            rows.append({"method": m, "benchmark": b, "pass@1": base, "ci_low": base - 0.1, "ci_high": base + 0.1,
                         "samples": 4, "p_vs_ref": 0.01 if m == "m2" else None,
                         **({"found": 1, "found_replicates": 2, "found_rate": 0.5, "found_ci_low": 0.01,
                             "found_ci_high": 0.99} if b == "avg" else {})})
    md, tex = render(pd.DataFrame(rows), ["m1", "m2"], ["aime24"], [0], 4, title="T_1 & co",
                     labels=[f"{PIPE} & p_drop", "plain"], reference="m1",
                     exploration={"strategy": "difference_table", "success_share": 0.5, "confidence": 0.95})
    assert_tables_hold(md)
    assert r"| a\|b & p_drop | 40.0 [30.0, 50.0] |" in md
    assert_tabular_holds(tex)
    assert r"a\textbar{}b \& p\_drop & 40.0\,[30.0, 50.0] & 40.0\,[30.0, 50.0] & 1 of 2 (50 \% [1, 99]) \\" in tex
    assert r"50.0\,[40.0, 60.0]$^\dagger$" in tex  # the code's markup, unescaped
    assert r"\caption{T\_1 \& co: pass@1 (\%)" in tex and r"$^\dagger$ = differs from m (N=1)" in tex


def test_replicate_table_takes_a_pipe_in_a_method():
    from nudgerl.reporting.tables import render_replicates

    df = pd.DataFrame([{"seed": s, "method": m, "avg_pass@1": 0.3, "delta": 0.1, "ci_low": 0.0, "ci_high": 0.2}
                       for s in (0, 1) for m in ("base", PIPE)])
    assert_tables_hold(render_replicates(df, ["base", PIPE], 4))


def test_exploration_table_takes_a_pipe_in_a_label():
    from nudgerl.reporting.exploration import render_markdown

    table = pd.DataFrame([{"method": m, "found": 1, "replicates": 2, "rate": 0.5, "ci_low": 0.01, "ci_high": 0.99,
                           "p_vs_reference": None if m == "base" else 1.0} for m in ("base", "nudgerl8")])
    rows = pd.DataFrame([{"method": m, "seed": s, "strategy_share": 0.5} for m in ("base", "nudgerl8") for s in (0, 1)])
    md = render_markdown(table, rows, "base", "difference_table", 0.5, 0.95, label=lambda m: f"{m} {PIPE}")
    assert_tables_hold(md)


def _map_cells(share_sets, methods, reference, key="share_set"):
    rows = []
    for share in share_sets:
        for m in methods:
            rows.append({key: share, "method": m, "kind": "pass@1", "mean": 0.5, "ci_low": 0.4, "ci_high": 0.6})
        for m in methods:
            if m != reference:
                rows.append({key: share, "method": f"{reference} - {m}", "kind": "paired difference", "mean": 0.1,
                             "ci_low": 0.0, "ci_high": 0.2, "p_for": 0.02, "p_against": 1.0, "replicates": 6,
                             "verdict": "supported"})
    return pd.DataFrame(rows)


def test_regime_map_tables_take_a_pipe_in_a_method():
    from nudgerl.reporting.regime_map import render_accuracy_markdown, render_baselines_markdown, render_markdown

    methods, ref = [PIPE, "nudgerl8"], "nudgerl8"
    runs = pd.DataFrame([{"share_set": share, "seed": s, "method": m, "share_measured": share,
                          "tokens_to_reach": 1000.0, "rollout_tokens": 2000.0}
                         for share in (0.01, 0.1) for s in (0, 1) for m in methods])
    cells = _map_cells((0.01, 0.1), methods, ref)
    assert_tables_hold(render_markdown(runs, cells, 0.5, 4, 10))
    assert_tables_hold(render_baselines_markdown(runs, cells, ref, [PIPE], 4))
    acc_runs = pd.DataFrame([{"accuracy_set": a, "seed": s, "method": m, "accuracy_measured": 0.9,
                              "share_measured": 0.1, "hinted_rare_pass@1_hard": 0.98}
                             for a in (1.0, 0.2) for s in (0, 1) for m in methods])
    checkpoints = pd.DataFrame([{"accuracy_set": a, "method": m, "seed": s, "step": step, "hard_pass@1": 0.5,
                                 "rollout_tokens": 100.0 * step}
                                for a in (1.0, 0.2) for m in methods for s in (0, 1) for step in (0, 10)])
    md = render_accuracy_markdown(acc_runs, _map_cells((1.0, 0.2), methods, ref, "accuracy_set"), checkpoints, 0.1, 4)
    assert_tables_hold(md)


def test_study_tables_take_a_pipe_in_a_label():
    from nudgerl.reporting.study import render_agreement, render_rl_works, rl_works, seed_set_agreement

    runs = pd.DataFrame([{"method": "m", "seed": s, "run_found": s < 3} for s in range(8)])
    sets = [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert_tables_hold(render_agreement(seed_set_agreement(runs, sets), sets, 0.95, label=lambda m: PIPE))
    regime = pd.DataFrame([{"share_set": 0.1, "share_measured": 0.1, "seed": s, "method": "grpo8",
                            "final_hard_pass@1": 0.5, "base_hard_pass@1": 0.1} for s in range(2)])
    assert_tables_hold(render_rl_works(rl_works(regime, [0.1], "grpo8"), label=lambda m: PIPE))


def test_power_table_takes_a_pipe_in_a_table_name():
    from nudgerl.reporting.power import render_markdown
    from nudgerl.verdicts import VerdictRule

    table = pd.DataFrame([{"table": f"`config/{PIPE}.yaml`: Table 1", "replicates": 6, "verdict_possible": True,
                           "detectable_sd": 1.2, "detectable_points": 3.0, "parity_points": 1.0,
                           "rate_from_0.1": 0.8, "rate_from_0.5": None}])
    table = table.astype(object).where(table.notna(), None)
    assert_tables_hold(render_markdown(table, VerdictRule()))
    assert_tables_hold(render_markdown(table, VerdictRule(), aa_sd=0.04, aa_source="the A/A pair"))


def _claims(text: str) -> pd.DataFrame:
    return pd.DataFrame([
        {"claim": 1, "text": text, "paper": "0.489 vs 0.487", "kind": "superiority", "replicates": 6,
         "seeds": "0 1 2 3 4 5", "better": PIPE, "worse": "grpo32", "delta": 0.01, "ci_low": 0.0, "ci_high": 0.02,
         "p_for": 0.0156, "p_against": 1.0, "verdict": "supported"},
        {"claim": 4, "text": f"not run {PIPE}", "paper": "0.598", "kind": "superiority", "replicates": 1,
         "seeds": "0", "verdict": "not run", "note": f"not in this DAG: {PIPE}"},
    ])


def test_claims_table_takes_a_pipe_in_a_claim_and_method():
    from nudgerl.reporting.claims import render_markdown

    assert_tables_hold(render_markdown(_claims(f"claim {PIPE}"), samples=8))
    regimes = pd.concat([_claims("c").assign(regime=f"rare {PIPE}"), _claims("c").assign(regime="common")])
    assert_tables_hold(render_markdown(regimes))


def test_claims_by_regime_takes_a_pipe_in_a_run_folder_and_claim(tmp_path):
    from nudgerl.reporting.claims_by_regime import render
    from test_claims_by_regime import _run

    run = _run(tmp_path, f"run{PIPE}", [0.01, 0.02], ("descriptive (n = 2)", 0.1, 0.0, 0.2), "not run")
    claims = pd.read_csv(f"{run}/tables/claims.csv")
    claims["text"] = claims["text"] + f" {PIPE}"
    claims.to_csv(f"{run}/tables/claims.csv", index=False)
    assert_tables_hold(render([run], str(tmp_path / "page.md")))


def test_gpu_hours_tables_take_a_pipe_in_a_model_name():
    from nudgerl.reporting import gpu_hours as cost
    from test_gpu_hours import CONFIG, EFF, TOY_GPU, _job

    cfg = {**CONFIG, "grpo": {**CONFIG["grpo"], "checkpoint_every": 4},
           "eval": {**CONFIG["eval"], "curve": {"every": 4}}}
    costs = [replace(cost.job_cost(_job("train_grpo", n="8"), cfg, TOY_GPU, EFF), model=PIPE),
             replace(cost.job_cost(_job("evaluate", method="base"), cfg, TOY_GPU, EFF), model=PIPE)]
    text = cost.render_markdown(costs, TOY_GPU, EFF, "toy.yaml", cfg, checkpoint_minutes=0.5)
    assert len(_tables(text)) == 2 and "| **total** | | 2 |" in text
    assert_tables_hold(text)


def test_base_model_diagnosis_takes_a_pipe_in_a_hint_and_figure():
    from nudgerl.evaluation.diagnostics import to_markdown

    summary = {"unhinted_pass@1": 0.1, "unhinted_pass@1_hard": 0.0, "dominant_strategy": "d",
               "dominant_strategy_share_unhinted": 0.9, "rare_strategy": "r", "rare_strategy_share_unhinted": 0.01,
               "hinted_pass@1": {PIPE: 0.9, "r": 0.95}, "hinted_pass@1_hard": {PIPE: 0.8, "r": 0.9},
               "hint_followed": {PIPE: 1.0, "r": 1.0}}
    report = {"summary": summary, "problems": 10, "hard_problems": 4, "samples_per_problem": 2,
              "rl_prompts": {"problems": ["p0", "p1"], "samples_per_problem": 4,
                             "counts": {PIPE: [[1, 4], [2, 4]], "unhinted_pass@1_hard": [[0, 4], [1, 4]]}}}
    assert_tables_hold(to_markdown(report))


def test_base_model_table_takes_a_pipe_in_a_seed():
    from nudgerl.evaluation.regime import TABLE_FIGURES, replicate_markdown

    row = {"seed": PIPE, "confidence": 0.95, "sft_steps": 100, "sft_check_passed_at": None, "in_regime": True}
    for f in TABLE_FIGURES:
        row.update({f: 0.5, f"{f}_low": 0.4, f"{f}_high": 0.6, f"{f}_margin_se": 2.0})
    assert_tables_hold(replicate_markdown(pd.DataFrame([row])))


def test_a_markdown_table_reads_back_as_written():
    from nudgerl.table_text import read_markdown_table

    table = markdown_table(["Method", "Found"], [["GRPO (N=8) | eps", "2 of 5"], ["Base", ""]])
    assert read_markdown_table(f"a caption\n\n{table}\n\n| another | table |\n|---|---|\n") == \
        (["Method", "Found"], [["GRPO (N=8) | eps", "2 of 5"], ["Base", ""]])
    assert read_markdown_table("no table here") == ([], [])
