"""Long jobs print plain progress lines (step i of N, elapsed, ETA): when a line is due, the
estimate (a resumed run's pace counts its own steps only), and the lines that training,
sampling (both backends) and evaluation print through their real code paths."""

import re
from types import SimpleNamespace

import pytest

from nudgerl.progress import (MAX_SILENCE_S, Progress, clock_text, eta_seconds, progress_line, report_interval,
                              should_report)

LINE = re.compile(r"^progress: (\w+) (\d+)/(\d+) \((\d+)%\)(, .*)?, elapsed \d+:\d\d:\d\d, "
                  r"ETA (\d+:\d\d:\d\d|unknown)$")


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def _lines(text: str, what: str) -> list[re.Match]:
    return [m for m in map(LINE.match, text.splitlines()) if m and m.group(1) == what]


# --------------------------------------------------------------- the pure rules


def test_about_twenty_lines_a_run_by_count():
    assert report_interval(400) == 20
    assert report_interval(19) == report_interval(1) == report_interval(0) == 1


def test_a_line_is_due_first_last_at_each_interval_and_after_a_silence():
    assert should_report(1, 400, None, 0.0, 20)  # the first: the job shows it started
    assert should_report(400, 400, 399, 0.0, 20)  # the last
    assert should_report(40, 400, 39, 0.0, 20) and not should_report(41, 400, 40, 0.0, 20)
    # work that advances by more than one unit (a batch of samples) reports on passing a multiple
    assert should_report(1024, 8000, 512, 0.0, 400) and not should_report(1100, 8000, 1024, 0.0, 400)
    # slow units: one that ends a minute after the last line is reported whatever its count
    assert should_report(3, 400, 2, MAX_SILENCE_S, 20) and not should_report(3, 400, 2, MAX_SILENCE_S - 1, 20)


def test_eta_is_the_mean_pace_of_this_run():
    assert eta_seconds(100, 400, elapsed_s=200.0) == 600.0  # 2 s a step, 300 left
    assert eta_seconds(0, 400, elapsed_s=5.0) is None  # nothing finished: no pace yet
    assert eta_seconds(400, 400, elapsed_s=800.0) == 0.0


def test_a_resumed_run_paces_on_its_own_steps_and_has_n_minus_k_left():
    # resumed at step 300 of 400: 10 steps in 50 s here is 5 s a step, 90 steps left. Counting the
    # 300 steps another job trained would make it look 31 times faster.
    assert eta_seconds(310, 400, elapsed_s=50.0, start=300) == 450.0
    assert eta_seconds(300, 400, elapsed_s=50.0, start=300) is None


def test_the_line_reads_step_of_total_percent_elapsed_and_eta():
    assert clock_text(0) == "0:00:00" and clock_text(3725.4) == "1:02:05" and clock_text(30 * 3600) == "30:00:00"
    assert progress_line("step", 120, 400, 2462, 5745) == \
        "progress: step 120/400 (30%), elapsed 0:41:02, ETA 1:35:45"
    assert progress_line("problems", 16, 500, 61, None, "apex chunk 1/32, 2048 samples") == \
        "progress: problems 16/500 (3%), apex chunk 1/32, 2048 samples, elapsed 0:01:01, ETA unknown"


def test_progress_logs_only_the_due_lines():
    clock, lines = FakeClock(), []
    p = Progress("step", 100, log=lines.append, clock=clock)
    for step in range(1, 101):
        clock.now += 2.0  # 2 s a step: never a minute's silence between lines 5 steps apart
        p.update(step)
    steps = [int(LINE.match(line).group(2)) for line in lines]
    assert steps == [1, *range(5, 101, 5)]
    assert lines[0] == "progress: step 1/100 (1%), elapsed 0:00:02, ETA 0:03:18"
    assert lines[-1] == "progress: step 100/100 (100%), elapsed 0:03:20, ETA 0:00:00"


def test_reused_work_counts_as_done_but_not_in_the_pace():
    clock, lines = FakeClock(), []
    p = Progress("problems", 40, log=lines.append, clock=clock)
    p.skip(30)  # chunks an earlier attempt saved
    clock.now += 100.0  # a model load
    p.restart()
    clock.now += 20.0
    assert p.update(35) == "progress: problems 35/40 (87%), elapsed 0:00:20, ETA 0:00:20"


# --------------------------------------------------------------- training


def _state(step, max_steps=10, main=True):
    return SimpleNamespace(global_step=step, max_steps=max_steps, is_world_process_zero=main)


def test_the_callback_reports_from_the_resume_step_on_the_main_process_only():
    from nudgerl.training.run_state import progress_callback

    clock, lines = FakeClock(), []
    cb = progress_callback(log=lines.append, clock=clock)
    cb.on_train_begin(None, _state(6), None)  # resumed from checkpoint-6
    for step in (7, 8):
        clock.now += 30.0
        cb.on_step_end(None, _state(step), None)
    assert lines == ["progress: step 7/10 (70%), elapsed 0:00:30, ETA 0:01:30",
                     "progress: step 8/10 (80%), elapsed 0:01:00, ETA 0:01:00"]
    other = progress_callback(log=lines.append, clock=clock)
    other.on_train_begin(None, _state(0, main=False), None)
    other.on_step_end(None, _state(1, main=False), None)
    assert len(lines) == 2


def test_training_and_its_curve_print_progress_lines(tiny_model_dir, tmp_path, capsys):
    """The whole training path (train_grpo, TRL's loop): a line for the first and the last step;
    then the run's checkpoint curve (the base model and the final one): a line per checkpoint."""
    from nudgerl.evaluation.curves import evaluate_checkpoints
    from nudgerl.evaluation.sampling import SamplingParams
    from nudgerl.organism import task
    from nudgerl.training.grpo import train_grpo
    from nudgerl.training.grpo_config import GRPORunConfig

    records = [{"prompt": [{"role": "user", "content": p.text()}], "answer": str(p.answer), "id": p.id}
               for p in task.training_problems(0, 4, 1.0)]
    cfg = GRPORunConfig(num_generations=2, prompts_per_step=2, max_steps=2, max_completion_length=4,
                        checkpoint_every=100)
    train_grpo(str(tiny_model_dir), records, cfg, tmp_path / "run")
    out = capsys.readouterr().out
    steps = [(int(m.group(2)), int(m.group(3))) for m in _lines(out, "step")]
    assert steps == [(1, 2), (2, 2)], out

    bench = {"b": [p.to_record() for p in task.training_problems(1, 2, 1.0, prefix="eval")]}
    evaluate_checkpoints(tmp_path / "run", tiny_model_dir, bench, 2, SamplingParams(n=2, max_new_tokens=4),
                         tmp_path / "curve.jsonl")
    lines = _lines(capsys.readouterr().out, "checkpoint")
    assert [(m.group(2), m.group(3), m.group(5)) for m in lines] == [("1", "2", ", step 0"), ("2", "2", ", step 2")]


# --------------------------------------------------------------- sampling and evaluation


@pytest.fixture(scope="module")
def benchmarks():
    from nudgerl.organism import task

    return {name: [p.to_record() for p in problems]
            for name, problems in task.evaluation_sets(0, {"b1": (6, 0.5), "b2": (4, 0.5)}).items()}


def test_transformers_sampling_reports_per_batch(tiny_model_dir, capsys):
    from nudgerl.evaluation.sampling import SamplingParams, chat_prompt, generate, load_policy

    model, tok = load_policy(tiny_model_dir)
    prompts = [chat_prompt(tok, f"{i} + 1 = ?") for i in range(5)]
    capsys.readouterr()  # the model load's own output
    out = generate(model, tok, prompts, SamplingParams(n=2, max_new_tokens=4, batch_size=4), progress=True)
    assert [len(o) for o in out] == [2] * 5
    captured = capsys.readouterr()
    assert [int(m.group(2)) for m in _lines(captured.out, "samples")] == [4, 8, 10]  # 20 lines' worth: each batch
    assert "\r" not in captured.out + captured.err  # no bar
    generate(model, tok, prompts, SamplingParams(n=2, max_new_tokens=4, batch_size=4))
    assert capsys.readouterr().out == ""  # progress is asked for, not the default


def test_evaluation_reports_problems_over_all_benchmarks(tiny_model_dir, benchmarks, tmp_path, capsys):
    from nudgerl.evaluation.benchmarks import evaluate_model
    from nudgerl.evaluation.sampling import SamplingParams

    params = SamplingParams(n=2, max_new_tokens=4, batch_size=4)
    logs = []
    evaluate_model(tiny_model_dir, benchmarks, params, [1], tmp_path, log=logs.append, chunk_problems=2)
    lines = [LINE.match(line) for line in logs]
    assert [int(m.group(2)) for m in lines] == [2, 4, 6, 8, 10]  # a chunk of 2 problems each
    assert [m.group(3) for m in lines] == ["10"] * 5
    assert lines[2].group(5) == ", b1 chunk 3/3, 12 samples"
    assert capsys.readouterr().out == ""  # chunked: no sample lines from inside each chunk

    # unchunked: the sample lines from inside, then a line as each benchmark ends
    evaluate_model(tiny_model_dir, benchmarks, params, [1], tmp_path / "whole", log=logs.append)
    assert [int(m.group(2)) for m in _lines(capsys.readouterr().out, "samples")] == [4, 8, 12, 4, 8]


def test_evaluation_resumed_reports_only_what_it_samples(tiny_model_dir, benchmarks, tmp_path):
    from nudgerl.evaluation.benchmarks import RESUME_DIR, evaluate_model
    from nudgerl.evaluation.sampling import SamplingParams

    params = SamplingParams(n=2, max_new_tokens=4, batch_size=4)
    evaluate_model(tiny_model_dir, benchmarks, params, [1], tmp_path, progress=False, chunk_problems=2)
    for kept in ("b1.chunk0000.json", "b1.chunk0001.json", "b1.chunk0002.json"):
        assert (tmp_path / RESUME_DIR / kept).exists()
    for dropped in ("b2.chunk0000.json", "b2.chunk0001.json"):  # b2 is sampled again
        (tmp_path / RESUME_DIR / dropped).unlink()
    logs = []
    evaluate_model(tiny_model_dir, benchmarks, params, [1], tmp_path, log=logs.append, chunk_problems=2)
    lines = [m for m in map(LINE.match, logs) if m]
    assert [int(m.group(2)) for m in lines] == [8, 10]  # b1's 6 problems reused: no line each
    assert all(m.group(6) != "unknown" for m in lines)  # the pace of the 2 sampled chunks


def _vllm_engine_loop(use_tqdm, prompts, n):
    """What vLLM 0.31's LLM.generate does with a tqdm factory (vllm/entrypoints/offline_utils.py:
    the request-adding pass wrapped by maybe_tqdm, then _run_engine's bar over the samples)."""
    for _ in use_tqdm(prompts, desc="Adding requests", total=len(prompts)):
        pass
    pbar = use_tqdm(total=len(prompts) * n, desc="Processed prompts", dynamic_ncols=True,
                    postfix="est. speed input: 0.00 toks/s, output: 0.00 toks/s")
    for _ in prompts:
        assert pbar.format_dict["elapsed"] >= 0
        pbar.postfix = "est. speed input: 1.00 toks/s, output: 1.00 toks/s"
        pbar.update(n)
        if pbar.n == len(prompts) * n:
            pbar.refresh()
    pbar.close()


class ProgressLLM:
    """Stands in for vllm.LLM: drives the bar factory as the engine does, answers in its shape."""

    def get_tokenizer(self):
        return "tokenizer"

    def generate(self, prompts, sampling_params, lora_request=None, use_tqdm=True):
        n = sampling_params["n"]
        if use_tqdm:
            _vllm_engine_loop(use_tqdm, prompts, n)
        out = SimpleNamespace
        return [out(outputs=[out(text=f"{p}#{j}", token_ids=[0]) for j in range(n)]) for p in prompts]


def test_vllm_sampling_reports_finished_samples_without_a_bar(capsys):
    from nudgerl.evaluation.sampling import SamplingParams, VLLMPolicy, generate

    policy = VLLMPolicy("base", llm=ProgressLLM(), lora_request_cls=None, sampling_params_cls=dict)
    prompts = [f"p{i}" for i in range(3)]
    out = generate(policy, policy.tokenizer, prompts, SamplingParams(n=4), progress=True)
    assert [len(o) for o in out] == [4, 4, 4]
    captured = capsys.readouterr()
    assert [int(m.group(2)) for m in _lines(captured.out, "samples")] == [4, 8, 12]
    assert "Processed prompts" not in captured.out + captured.err and "Adding requests" not in captured.err
    generate(policy, policy.tokenizer, prompts, SamplingParams(n=4))
    assert capsys.readouterr().out == ""
