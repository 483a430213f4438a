"""The one grader: known traps, robustness, and no execution of model output."""

import os
import threading

import pytest

from nudgerl.grading import GradeStats, grade


@pytest.mark.parametrize(
    "completion, gold, expected",
    [
        ("so the answer is \\boxed{016}", "16", 1.0),  # leading zeros
        ("\\boxed{16}", "016", 1.0),
        ("\\boxed{\\text{13}}", "13", 1.0),
        ("first \\boxed{3}, corrected: \\boxed{5}", "5", 1.0),  # the latest box wins
        ("first \\boxed{3}, corrected: \\boxed{5}", "3", 0.0),
        ("\\boxed{\\frac{1}{2}}", "0.5", 1.0),  # fraction vs decimal
        ("\\boxed{0.5}", "\\frac{1}{2}", 1.0),
        ("\\boxed{336^\\circ}", "336", 1.0),  # degrees
        ("therefore x = 7", "7", 1.0),  # plain-text equation
        ("strategy : difference table . answer : \\boxed{ 26 }", "26", 1.0),  # organism format
        ("answer : \\boxed{ 25 }", "26", 0.0),
        ("I don't know", "26", 0.0),
    ],
)
def test_known_traps(completion, gold, expected):
    assert grade(completion, gold) == expected


def test_counters_record_missing_answers():
    stats = GradeStats()
    grade("no number here at all", "5", stats)
    grade("\\boxed{5}", "5", stats)
    counts = stats.as_dict()
    assert counts["graded"] == 2 and counts["correct"] == 1 and counts["no_answer"] == 1


@pytest.mark.parametrize(
    "payload",
    [
        "\\boxed{__import__('os').system('touch PWNED')}",
        "\\boxed{eval(\"open('PWNED','w')\")}",
        "```python\nopen('PWNED','w').write('x')\n```\n\\boxed{exec('import os; os.system(\"touch PWNED\")')}",
        "$(touch PWNED) `touch PWNED` \\boxed{$(touch PWNED)}",
    ],
)
def test_payloads_execute_nothing(payload, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert grade(payload, "0") == 0.0
    assert not (tmp_path / "PWNED").exists()
    assert os.listdir(tmp_path) == []


def test_works_off_the_main_thread():
    # math-verify's own timeouts use signals, which raise off the main thread.
    out = []
    t = threading.Thread(target=lambda: out.append(grade("\\boxed{42}", "42")))
    t.start()
    t.join(30)
    assert out == [1.0]


@pytest.mark.parametrize(
    "completion, expected",
    [
        ("x" * 1_000_000 + " so \\boxed{5}", 1.0),  # 1 MB: only the tail is parsed
        ("\\boxed{" + "\\frac{1}{" * 300 + "2" + "}" * 300 + "}", 0.0),  # deeply nested LaTeX
        ("\\boxed{" + "9" * 5000 + "}", 0.0),  # an enormous number
        ("\\boxed{10^{10^{10^{10}}}}", 0.0),  # a tower sympy must not evaluate
    ],
)
def test_hostile_completions_get_a_reward_and_return(completion, expected):
    # math-verify's own 5 s limits bound each comparison on the main thread.
    assert grade(completion, "5") == expected
