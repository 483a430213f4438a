"""The one grader: known traps, real benchmark golds, time limits that hold anywhere,
counters, and hostile model output (no execution, bounded time, zero reward)."""

import contextlib
import gc
import json
import multiprocessing
import os
import signal
import sys
import threading
import time

import pytest

from conftest import SHARED_BENCHMARKS
from nudgerl.evaluation import grading
from nudgerl.evaluation.grading import GRADER_MODES, OUTCOMES, GradeStats, grade, judge

BENCHMARKS = SHARED_BENCHMARKS
# No limit would end this: sympy is asked to compare 10^(10^(10^10)) with 5.
TOWER = "\\boxed{10^{10^{10^{10}}}}"
LIMIT = 1.0
# The bounds below are hang guards, not speed checks (speeds are measured, not asserted:
# benchmarks/grading_cost.py, its "hostile" and worker_start_seconds figures). An item whose
# limit did not hold would not return at all (nothing ends TOWER), so a bound far above what a
# loaded machine needs still tells the two apart.
# In process, on a main thread: the alarm, and its repeats after a dropped one (~1 s here;
# 4.1 s once in a full CI run's process).
SLACK = 60.0
IN_PROCESS_BOUND = LIMIT + SLACK
# In a grading process: the item may first wait for its process to start (the first one, or the
# replacement of one killed at a time-out: ~1.5 s idle, 7-15 s on 2 cores at load 8-10), which
# is outside the item's limit; the grader allows WORKER_START_SECONDS for it, then raises.
ISOLATED_BOUND = LIMIT + grading.WORKER_START_SECONDS + SLACK


class Hung(BaseException):
    """Raised by hang_guard: a BaseException, so that no ``except Exception`` on the way swallows it."""


@contextlib.contextmanager
def hang_guard(cpu_seconds: float):
    """Fails the test (Hung, raised in the main thread) once the block has used ``cpu_seconds``
    of this process's CPU time: what ends an in-process item whose own limit did not hold, where
    a check of its elapsed time afterwards would never be reached. CPU time (ITIMER_PROF, which
    the grader leaves alone), not wall time: a loaded machine slows the block, it does not make
    it use more; and the kernel's signal reaches a main thread stuck in one long C call (a big
    power), which a watchdog thread could not (it would wait for the GIL)."""
    def on_signal(signum, frame):
        raise Hung(f"{cpu_seconds:.0f} CPU seconds and still running: the time limit did not hold")

    previous = signal.signal(signal.SIGPROF, on_signal)
    signal.setitimer(signal.ITIMER_PROF, cpu_seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)


@pytest.mark.parametrize(
    "completion, gold, expected",
    [
        # leading zeros, either side (AIME golds are normalised, raw files zero-pad)
        ("so the answer is \\boxed{016}", "16", 1.0),
        ("\\boxed{16}", "016", 1.0),
        # text-wrapped numbers
        ("\\boxed{\\text{13}}", "13", 1.0),
        ("\\boxed{13}", "\\text{13}", 1.0),
        # several boxes: the latest wins
        ("first \\boxed{3}, corrected: \\boxed{5}", "5", 1.0),
        ("first \\boxed{3}, corrected: \\boxed{5}", "3", 0.0),
        ("$\\boxed{5}$ wait, \\boxed{7}", "7", 1.0),
        # a box is preferred over later unboxed text
        ("\\boxed{3} and then the answer is 5", "3", 1.0),
        ("\\boxed{3} and then the answer is 5", "5", 0.0),
        # degrees
        ("\\boxed{30^\\circ}", "30", 1.0),
        ("\\boxed{30}", "30^\\circ", 1.0),
        ("\\boxed{336^\\circ}", "336", 1.0),
        # fractions vs decimals: equal when equal to 6 decimal places (math-verify's rounding)
        ("\\boxed{\\frac{1}{2}}", "0.5", 1.0),
        ("\\boxed{0.5}", "\\frac{1}{2}", 1.0),
        ("\\boxed{\\dfrac{1}{2}}", "1/2", 1.0),
        ("\\boxed{0.333}", "\\frac{1}{3}", 0.0),
        # percent means /100
        ("\\boxed{10\\%}", "10", 0.0),
        # plain-text equations and phrases
        ("therefore x = 7", "7", 1.0),
        ("The answer is 5", "5", 1.0),
        ("The answer is 5.", "5", 1.0),
        ("so the answer is $x = 5$", "5", 1.0),
        ("the answer is 12 apples", "12", 1.0),
        ("\\boxed{x=5}", "5", 1.0),
        # negative numbers
        ("\\boxed{-3}", "-3", 1.0),
        ("\\boxed{3}", "-3", 0.0),
        ("the answer is -3", "-3", 1.0),
        ("\\boxed{−3}", "-3", 1.0),  # unicode minus
        # thousands separators, and dollar signs in MATH golds
        ("\\boxed{1,000}", "1000", 1.0),
        ("\\boxed{1000}", "1,000", 1.0),
        ("\\boxed{1{,}000}", "1000", 1.0),
        ("\\boxed{32348}", "\\$32,\\!348", 1.0),
        ("\\boxed{\\$36}", "36", 1.0),
        # intervals and sets
        ("\\boxed{[1,3)}", "[1,3)", 1.0),
        ("\\boxed{(1,3)}", "[1,3)", 0.0),
        ("\\boxed{\\{2,1\\}}", "\\{1,2\\}", 1.0),
        # symbolic equality
        ("\\boxed{2\\sqrt{3}}", "\\sqrt{12}", 1.0),
        ("\\boxed{5}", "5.0", 1.0),
        # the organism's format
        ("strategy : difference table . answer : \\boxed{ 26 }", "26", 1.0),
        ("answer : \\boxed{ 25 }", "26", 0.0),
        ("I don't know", "26", 0.0),
    ],
)
def test_known_traps(completion, gold, expected):
    assert grade(completion, gold) == expected


@pytest.mark.parametrize("bench", ["aime24", "aime25", "amc23", "math500", "apex_shortlist"])
def test_every_benchmark_gold_matches_itself_boxed(bench):
    path = BENCHMARKS / f"{bench}.jsonl"
    if not path.exists():
        pytest.skip(f"{path} not on this machine")
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    stats = GradeStats()
    wrong = [r["answer"] for r in rows
             if grade(f"We check every case. The final answer is \\boxed{{{r['answer']}}}.", r["answer"], stats) != 1.0]
    assert wrong == [] and stats.as_dict()["correct"] == len(rows)
    # ... and an integer gold does not match its neighbour.
    integers = [r["answer"] for r in rows if r["answer"].lstrip("-").isdigit()]
    assert all(grade(f"\\boxed{{{int(a) + 1}}}", a) == 0.0 for a in integers)


# --- where the answer is read: the template's region, in every format the templates produce ---


def test_the_last_solution_region_is_graded_even_on_raw_text():
    # the authors' answer format: an answer in the working-out must not count, the region must
    assert grade("<start_working_out>6*7 = 42<end_working_out><SOLUTION>41</SOLUTION>", "42") == 0.0
    assert grade("<SOLUTION>42</SOLUTION>", "42") == 1.0
    assert grade("<SOLUTION>41</SOLUTION> on second thought <SOLUTION>42</SOLUTION>", "42") == 1.0
    # ... unless the caller names another region, or none (the whole completion)
    assert grade("<start_working_out>6*7 = 42<end_working_out><SOLUTION>41</SOLUTION>", "42", region=None) == 1.0
    assert grade("<final>42</final> <SOLUTION>41</SOLUTION>", "42", region=r"<final>(.*?)</final>") == 1.0
    with pytest.raises(ValueError, match="exactly one regex group"):
        grade("<SOLUTION>42</SOLUTION>", "42", region=r"<SOLUTION>.*</SOLUTION>")
    with pytest.raises(ValueError, match="unknown grader mode 'lenient'.*grading.mode"):
        grade("42", "42", mode="lenient")


@pytest.mark.parametrize(
    "completion, gold, expected",
    [
        # boxed (no tags): the organism-style and the generic instruct answer
        ("We add them: 20 + 22. So \\boxed{42}.", "42", 1.0),
        ("first \\boxed{41}, then \\boxed{42}", "41", 0.0),
        # the authors' SOLUTION format: tight, spaced, with $...$, with a box, as a sentence
        ("<start_working_out>x<end_working_out>\n<SOLUTION>\\frac{1}{2}</SOLUTION>", "\\frac12", 1.0),
        ("<start_working_out>x<end_working_out>\n<SOLUTION>\n7\\pi\n</SOLUTION>", "7\\pi", 1.0),
        ("<SOLUTION>7\\pi</SOLUTION>", "7", 0.0),  # bare math is read whole, not as "7 ..."
        ("<SOLUTION>$(3, \\frac{\\pi}{2})$</SOLUTION>", "\\left( 3, \\frac{\\pi}{2} \\right)", 1.0),
        ("<SOLUTION>\\boxed{\\$32,\\!348}</SOLUTION>", "\\$32,\\!348", 1.0),
        ("<SOLUTION>The final answer is $42$.</SOLUTION>", "42", 1.0),
        ("<start_working_out>try \\boxed{5}<end_working_out><SOLUTION>7</SOLUTION>", "7", 1.0),
        ("<start_working_out>try \\boxed{5}<end_working_out><SOLUTION>7</SOLUTION>", "5", 0.0),
    ],
)
def test_each_template_format(completion, gold, expected):
    assert grade(completion, gold) == expected


def test_organism_rewards_are_unchanged_by_the_region_default():
    """Organism traces have no <SOLUTION> tags: the default region grades them exactly as the
    whole completion (the grader before regions), for every strategy, right or wrong."""
    from nudgerl.organism import task
    from nudgerl.training.rewards import correctness_reward

    problems = task.training_problems(0, 40, 0.5)
    texts, golds = [], []
    for p in problems:
        for strategy in task.STRATEGIES:
            texts.append(task.trace(p.terms, strategy))
            golds.append(str(p.answer))
    assert not any("<SOLUTION>" in t for t in texts)
    whole = [grade(t, g, region=None) for t, g in zip(texts, golds)]
    assert [grade(t, g) for t, g in zip(texts, golds)] == whole
    assert correctness_reward(None, texts, golds) == whole  # the TRL reward of organism rows
    assert 0 < sum(whole) < len(whole)  # both outcomes occur


def test_authors_mode_is_math_verify_over_the_whole_completion():
    from math_verify import parse, verify

    cases = [
        ("<start_working_out>6*7 = 42<end_working_out><SOLUTION>41</SOLUTION>", "42"),
        ("<SOLUTION>42</SOLUTION>", "42"),  # their rule finds no answer in "N>42<": tight tags score 0
        ("<SOLUTION>\n42\n</SOLUTION>", "42"),
        ("<SOLUTION>\\boxed{\\frac{1}{2}}</SOLUTION>", "\\frac{1}{2}"),
        ("so \\boxed{16}", "016"),
        # their rule reads a bare LaTeX gold as "3" and finds nothing in the right answer
        ("<SOLUTION>(3, \\frac{\\pi}{2})</SOLUTION>", "\\left( 3, \\frac{\\pi}{2} \\right)"),
        ("the answer is 3", "\\left( 3, \\frac{\\pi}{2} \\right)"),
    ]
    theirs = [float(verify(parse(gold), parse(completion))) for completion, gold in cases]
    assert [grade(c, g, mode="authors") for c, g in cases] == theirs == [1.0, 0.0, 1.0, 1.0, 1.0, 0.0, 1.0]
    assert [grade(c, g) for c, g in cases] == [0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0]  # the standard mode
    # a template's region does not apply to their rule
    assert grade(cases[0][0], "42", mode="authors", region=r"<SOLUTION>(.*?)</SOLUTION>") == 1.0
    assert grade("<SOLUTION>42</SOLUTION>", "42", mode="authors", isolate=True) == 0.0  # same in a grading process


def test_counters_add_up():
    stats = GradeStats()
    grade("no number here at all", "5", stats)
    grade("\\boxed{5}", "5", stats)
    grade("\\boxed{4}", "5", stats)
    grade("\\boxed{5}", " ", stats)  # a gold that does not parse
    counts = stats.as_dict()
    assert counts == {"graded": 4, "correct": 1, "wrong": 1, "no_answer": 1, "gold_unparsed": 1,
                      "timeout": 0, "error": 0}
    assert set(counts) == {"graded", *OUTCOMES}


# --- time limits: main thread, other threads, grading processes, worker processes -------


def test_a_time_out_is_counted_on_the_main_thread():
    stats = GradeStats()
    with hang_guard(IN_PROCESS_BOUND):
        assert grade(TOWER, "5", stats, time_limit=LIMIT) == 0.0
    assert stats.as_dict()["timeout"] == 1 and stats.as_dict()["graded"] == 1
    assert grade("\\boxed{5}", "5", stats) == 1.0  # the grader is fine afterwards


def test_a_time_out_is_counted_off_the_main_thread():
    stats = GradeStats()
    results = []
    t = threading.Thread(target=lambda: results.append(
        (grade(TOWER, "5", stats, time_limit=LIMIT), grade("\\boxed{42}", "42", stats))))
    t.start()
    t.join(LIMIT + 2 * grading.WORKER_START_SECONDS)
    assert not t.is_alive()
    assert results == [(0.0, 1.0)]
    assert stats.as_dict()["timeout"] == 1 and stats.as_dict()["correct"] == 1


def test_isolated_grading_kills_and_replaces_a_stuck_process():
    grade("\\boxed{1}", "1", isolate=True)
    # Earlier tests may have left several idle processes; the pool lends the most recently
    # returned one, which is the one that just graded.
    before = [w.proc.pid for w in grading.worker_pool()._idle]
    stuck = before[-1]
    stats = GradeStats()
    assert grade(TOWER, "5", stats, time_limit=LIMIT, isolate=True) == 0.0
    assert stats.as_dict()["timeout"] == 1
    after = [w.proc.pid for w in grading.worker_pool()._idle]
    assert stuck not in after and len(after) == len(before)  # killed, and replaced
    assert set(before) - {stuck} <= set(after)  # the idle ones are untouched
    with pytest.raises(ProcessLookupError):
        os.kill(stuck, 0)
    assert grade("\\boxed{7}", "7", isolate=True) == 1.0


def test_concurrent_threads_grade_correctly():
    items = [(f"\\boxed{{{i}}}", str(i if i % 3 else i + 1)) for i in range(40)]
    expected = [1.0 if i % 3 else 0.0 for i in range(40)]
    got = [None] * len(items)
    stats = GradeStats()

    def work(k):
        for i in range(k, len(items), 4):
            got[i] = grade(*items[i], stats)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert got == expected
    assert stats.as_dict()["graded"] == 40


def test_the_callers_alarm_survives_a_grade():
    fired = []

    def handler(*_):
        fired.append(1)

    previous = signal.signal(signal.SIGALRM, handler)
    try:
        signal.setitimer(signal.ITIMER_REAL, 30.0)
        assert grade(TOWER, "5", time_limit=0.2) == 0.0
        remaining, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 0 < remaining < 30.0
        assert signal.getsignal(signal.SIGALRM) is handler
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert fired == []


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_deadline_dropped_inside_a_gc_callback_still_stops_the_item(monkeypatch):
    """Python prints and drops an exception raised in a GC callback; the alarm must fire again."""
    def spin(seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            pass

    def spin_in_gc(phase, info):
        if phase == "start":
            spin(0.03)

    def endless_judge(*item):
        end = time.monotonic() + 60.0
        while time.monotonic() < end:  # half the time inside a GC callback, half outside
            spin(0.03)
            gc.collect()
        return "correct"

    dropped = []
    monkeypatch.setattr(grading, "judge_unbounded", endless_judge)
    monkeypatch.setattr(sys, "unraisablehook", lambda u: dropped.append(u.exc_type))
    gc.callbacks.append(spin_in_gc)
    try:
        t0 = time.monotonic()
        outcome = grading._judge_under_alarm(("x", "1", "standard", None), LIMIT)
        elapsed = time.monotonic() - t0
    finally:
        gc.callbacks.remove(spin_in_gc)
    assert outcome == "timeout"
    # The alarm fired again after being dropped: the item stopped long before the judge's 60 s
    # (without the repeat the judge would end by itself and the outcome be "correct").
    # How long the retries take depends on the process and the machine's load (an alarm pending
    # through a long collection lands in the "stop" callback and is dropped): 4.1 s once in a full
    # CI run's process. Half the judge's run is a hang guard, not a speed check.
    assert elapsed < 30.0, (elapsed, dropped)


def test_a_deadline_that_lands_in_a_finalizer_reaches_no_other_unraisable_hook(monkeypatch):
    """An alarm inside a __del__ is handed to sys.unraisablehook: the grader's own signal, kept
    from the caller's hook (pytest's reports it as the test's error), and the item still stops."""
    class SlowToDelete:
        def __del__(self):
            time.sleep(60 * LIMIT)  # the first alarm lands here

    def judge_with_a_slow_finalizer(*item):
        SlowToDelete()  # deleted at once
        end = time.monotonic() + 60.0
        while time.monotonic() < end:
            pass
        return "correct"

    seen = []
    monkeypatch.setattr(grading, "judge_unbounded", judge_with_a_slow_finalizer)
    monkeypatch.setattr(sys, "unraisablehook", lambda u: seen.append(u.exc_type))
    t0 = time.monotonic()
    outcome = grading._judge_under_alarm(("x", "1", "standard", None), LIMIT)
    # the finalizer was interrupted: the item ended ~1 s in; an uninterrupted finalizer takes
    # 60 s, and half of that is a hang guard no loaded machine reaches
    assert outcome == "timeout" and time.monotonic() - t0 < 30 * LIMIT
    assert seen == []
    sys.unraisablehook(type("U", (), {"exc_type": ValueError})())  # the caller's hook is back
    assert seen == [ValueError]


def test_in_process_off_the_main_thread_is_refused():
    errors = []

    def work():
        try:
            judge("\\boxed{1}", "1", isolate=False)
        except RuntimeError as e:
            errors.append(str(e))

    t = threading.Thread(target=work)
    t.start()
    t.join(30)
    assert errors and "main thread" in errors[0]


def _grade_in_a_worker_process(completions: list[str]) -> list[tuple[str, str, float]]:
    """Runs inside a (daemonic) multiprocessing worker: its main thread, then a thread of it."""
    out = []
    for c in completions:
        t0 = time.monotonic()
        out.append(("main", judge(c, "5", time_limit=LIMIT), time.monotonic() - t0))
    box = []

    def in_thread():
        for c in completions:
            t0 = time.monotonic()
            box.append(("thread", judge(c, "5", time_limit=LIMIT), time.monotonic() - t0))

    t = threading.Thread(target=in_thread)
    t.start()
    t.join()
    grading.shutdown_workers()
    return out + box


def test_time_limits_hold_in_a_worker_process(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the worker (and the grading process it starts) run here
    completions = [TOWER, "\\boxed{5}", *PAYLOADS]
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        results = pool.apply_async(_grade_in_a_worker_process, (completions,)).get(600)
    for where in ("main", "thread"):
        outcomes = [outcome for w, outcome, _ in results if w == where]
        assert outcomes[:2] == ["timeout", "correct"] and "correct" not in outcomes[2:]
    # hang guards: the worker's thread waits for its grading processes to start (ISOLATED_BOUND)
    bound = {"main": IN_PROCESS_BOUND, "thread": ISOLATED_BOUND}
    assert all(seconds < bound[where] for where, _, seconds in results), results
    assert os.listdir(tmp_path) == []


# --- hostile or huge model output ---------------------------------------------------------

PAYLOADS = [
    "\\boxed{__import__('os').system('touch PWNED')}",
    "\\boxed{eval(\"open('PWNED','w')\")}",
    "```python\nopen('PWNED','w').write('x')\n```\n\\boxed{exec('import os; os.system(\"touch PWNED\")')}",
    "$(touch PWNED) `touch PWNED` \\boxed{$(touch PWNED)}",
    "the answer is __import__('subprocess').run(['touch','PWNED'])",
    "\\boxed{\\input{/etc/passwd}} \\write18{touch PWNED}",
]

HOSTILE = [
    ("x" * 1_000_000 + " so \\boxed{5}", 1.0),  # 1 MB: only the tail is parsed
    ("\\boxed{5}" + " lorem ipsum" * 100_000, 0.0),  # the box far before a 1 MB tail
    ("\\boxed{" + "\\frac{1}{" * 300 + "2" + "}" * 300 + "}", 0.0),  # deeply nested LaTeX
    ("\\boxed{" + "(" * 2000 + "1" + ")" * 2000 + "}", 0.0),  # deep parentheses
    ("\\boxed{" + "9" * 5000 + "}", 0.0),  # an enormous number
    (TOWER, 0.0),  # a power tower sympy must not evaluate
    ("\\boxed{123456789^{123456789}}", 0.0),  # a power with a billion digits
    ("the answer is 9**9**9**9", 0.0),
    ("\\boxed{100000!}", 0.0),
]


@pytest.fixture
def scratch_cwd(tmp_path, monkeypatch):
    """A fresh cwd, with grading processes started in it (they inherit the cwd)."""
    monkeypatch.chdir(tmp_path)
    grading.shutdown_workers()
    yield tmp_path
    grading.shutdown_workers()
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("mode", GRADER_MODES)
@pytest.mark.parametrize("where", ["main", "thread", "isolated"])
def test_payloads_execute_nothing(where, mode, scratch_cwd):
    def run():
        return [judge(p, "0", mode=mode, time_limit=LIMIT, isolate=True if where == "isolated" else None)
                for p in [*PAYLOADS, *(f"<SOLUTION>{p}</SOLUTION>" for p in PAYLOADS)]]

    if where == "thread":
        box = []
        t = threading.Thread(target=lambda: box.append(run()))
        t.start()
        t.join(600)
        outcomes = box[0]
    else:
        outcomes = run()
    assert "correct" not in outcomes
    assert not (scratch_cwd / "PWNED").exists()


HOSTILE_REGIONS = [
    ("<SOLUTION>" * 20_000 + "5", 0.0),  # 20k openers, no closer: the region search stays bounded
    ("<SOLUTION>" + "\\frac{1}{" * 300 + "2" + "}" * 300 + "</SOLUTION>", 0.0),  # nested bare math
]


# A deadline that lands in a GC callback (hypothesis installs one) is printed and dropped by
# Python, then raised again by the repeating timer: expected here, not a failure.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize("mode", GRADER_MODES)
@pytest.mark.parametrize("where", ["main", "thread"])
def test_hostile_completions_get_a_reward_in_bounded_time(where, mode, scratch_cwd):
    stats = GradeStats()
    got = []
    items = HOSTILE + HOSTILE_REGIONS

    def run():
        for completion, _ in items:
            t0 = time.monotonic()
            got.append((grade(completion, "5", stats, mode=mode, time_limit=LIMIT), time.monotonic() - t0))

    # A hang guard, not a speed check: off the main thread an item may also wait for its
    # grading process to start (the replacement of one a time-out killed), outside its limit.
    bound = ISOLATED_BOUND if where == "thread" else IN_PROCESS_BOUND
    if where == "thread":
        t = threading.Thread(target=run)
        t.start()
        # a hang guard: ~13 min, where the run takes ~40 s on a loaded 2-core machine
        t.join(len(items) * IN_PROCESS_BOUND + grading.WORKER_START_SECONDS)
        assert not t.is_alive()
    else:
        with hang_guard(len(items) * IN_PROCESS_BOUND):
            run()
    if mode == "standard":  # the authors' rule reads all of a 1 MB completion: it may time out instead
        assert [r for r, _ in got] == [expected for _, expected in items]
    assert all(seconds < bound for _, seconds in got), got
    counts = stats.as_dict()
    assert counts["graded"] == len(items) and counts["timeout"] >= 2  # at least the towers


# --- the counters reach the evaluation outputs --------------------------------------------


def test_evaluation_summaries_count_outcomes_and_time_outs(tiny_model_dir, tmp_path, monkeypatch):
    from nudgerl.evaluation.benchmarks import evaluate_model
    from nudgerl.organism import task
    from nudgerl.evaluation.sampling import SamplingParams

    benchmarks = {"bench": [p.to_record() for p in task.training_problems(0, 3, 0.5, prefix="eval")]}
    params = SamplingParams(n=4, max_new_tokens=24, seed=0)

    def grader_counts(out):
        evaluate_model(tiny_model_dir, benchmarks, params, [1], out, progress=False)
        counts = json.loads((out / "bench.summary.json").read_text())["grader"]
        rewards = [json.loads(line)["reward"] for line in (out / "bench.samples.jsonl").read_text().splitlines()]
        return counts, rewards

    counts, rewards = grader_counts(tmp_path / "normal")
    assert counts["graded"] == 12 == sum(counts[o] for o in OUTCOMES)
    assert counts["timeout"] == 0 and counts["correct"] == sum(rewards)
    # A limit no item can meet: every sample is a counted time-out with reward 0.
    monkeypatch.setattr(grading, "TIME_LIMIT_SECONDS", 1e-6)
    counts, rewards = grader_counts(tmp_path / "starved")
    assert counts["graded"] == 12 and counts["timeout"] == 12
    assert rewards == [0.0] * 12


# --- the grader-mode measurement (benchmarks/grader_modes.py) -------------------------------


def test_grader_mode_measurement_writes_its_numbers(tmp_path):
    import subprocess
    import sys

    from conftest import REPO

    out = tmp_path / "modes.json"
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "grader_modes.py"), "--limit", "3",
                           "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(out.read_text())
    assert out.with_suffix(".md").read_text().startswith("# Grader modes")
    cases = {c["case"]: c for c in result["cases"]}
    tight = cases["answer between tight tags (the format the authors' prompt asks for)"]
    assert (tight["standard"], tight["authors"]) == (1.0, 0.0)
    blind = [c for name, c in cases.items() if name.startswith("the standard mode's blind spot")][0]
    assert (blind["standard"], blind["authors"], blind["truth"]) == (0.0, 1.0, 1.0)
    assert all(c["standard"] == c["truth"] for c in result["cases"] if c is not blind and "both miss" not in c["case"])
    gold = result["gold_completions"]
    if gold["completions"]:  # the shared benchmark copies are on this machine
        d = gold["disagreements"]
        assert d["count"] == d.get("standard_right", 0) + d.get("authors_right", 0) > 0
        for mode in ("standard", "authors"):
            assert sum(gold["per_mode"][mode].values()) == gold["completions"]
