from conftest import load_script
from nudgerl.organism import families


def _module():
    return load_script("benchmarks/execution_errors.py")


def test_the_first_wrong_step_of_a_trace_is_the_step_a_model_got_wrong():
    first_wrong_step = _module().first_wrong_step
    problem = families.validation_problems(0, 8)[0]
    reference = families.trace(problem.terms, "difference_table")
    assert first_wrong_step(reference, reference) is None
    steps = reference.split(" . ")
    left, right = steps[3].split(" = ")
    wrong = " . ".join([*steps[:3], f"{left} = {(int(right) + 1) % 10}", *steps[4:]])
    assert first_wrong_step(wrong, reference) == 3
    # the choice itself
    assert first_wrong_step(families.trace(problem.terms, "common_difference"), reference) == 0
    # a trace that stops early differs where it stops
    assert first_wrong_step(" . ".join(steps[:2]), reference) == 2
