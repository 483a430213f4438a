"""Strategy pools: parsing, the openai backend against a local HTTP server, faults, resume,
the organism's noisy helper, and DVC caching (deleting the output makes zero backend calls)."""

import json
import subprocess

import pytest
import yaml

from nudgerl.io import read_jsonl
from nudgerl.offline.pools import HintParseError, PoolBuildError, PoolConfig, build_pools, parse_numbered_hints
from openai_server import FakeOpenAI

SECRET = "sk-test-SECRET-do-not-log-0123456789"
PROBLEMS = [{"id": f"p{i}", "problem": f"Compute the area of polygon number {i}.", "answer": str(i)} for i in range(6)]


def test_parse_strips_markdown_and_validates():
    text = "Here are hints:\n1. **Shoelace formula**\n2) `Pick's theorem`\n3. _Coordinate geometry_.\n"
    assert parse_numbered_hints(text, 3) == ["Shoelace formula", "Pick's theorem", "Coordinate geometry"]
    with pytest.raises(HintParseError, match="expected 3"):
        parse_numbered_hints("1. one\n2. two", 3)
    with pytest.raises(HintParseError, match="distinct"):
        parse_numbered_hints("1. same\n2. Same\n3. other", 3)
    with pytest.raises(HintParseError):
        parse_numbered_hints("1. **\n2. two\n3. three", 3)


@pytest.fixture
def api_key(monkeypatch):
    monkeypatch.setenv("TEST_POOL_KEY", SECRET)
    return "TEST_POOL_KEY"


def _cfg(server, api_key, **kw):
    # A timeout far above the local server's milliseconds: on a loaded machine a slow answer must
    # not time out and be asked again, which would change the request counts asserted below.
    # The one test about time-outs sets its own (test_retries_429_500_timeouts_and_bad_answers).
    base = dict(backend="openai", n=5, base_url=server.url, model="helper-mini", api_key_env=api_key,
                concurrency=3, max_retries=3, timeout=60.0)
    return PoolConfig(**{**base, **kw})


def test_openai_backend_builds_validated_pools(tmp_path, api_key):
    with FakeOpenAI() as server:
        stats = build_pools(PROBLEMS, _cfg(server, api_key), tmp_path / "pools.jsonl")
    rows = read_jsonl(tmp_path / "pools.jsonl")
    assert [r["id"] for r in rows] == [p["id"] for p in PROBLEMS]
    assert all(len(r["hints"]) == 5 and not any("*" in h for h in r["hints"]) for r in rows)
    assert len(server.requests) == 6 and stats["calls"] == 6 and stats["http_requests"] == 6
    assert stats["prompt_tokens"] == 66 and stats["completion_tokens"] == 42
    body = server.requests[0]
    assert body["model"] == "helper-mini" and body["temperature"] == 0.7
    assert server.auth_headers[0] == f"Bearer {SECRET}"
    side = (tmp_path / "pools.jsonl.stats.json").read_text()
    assert SECRET not in side and SECRET not in (tmp_path / "pools.jsonl").read_text()


def test_shared_files_hold_no_timings_and_the_run_record_names_this_computation(tmp_path, api_key, monkeypatch):
    """pools + stats are what DVC shares: the same answers give the same bytes. The run's own
    facts (seconds, DVC stage, when) are in <out>.run.json, which matches only the file it wrote."""
    from nudgerl.offline.helper_llm import computed_here

    monkeypatch.setenv("DVC_STAGE", "pools_test@run")
    outs = []
    with FakeOpenAI() as server:
        for name in ("a", "b"):
            out = tmp_path / name / "pools.jsonl"
            build_pools(PROBLEMS, _cfg(server, api_key), out)
            outs.append(out)
    for suffix in ("", ".stats.json"):
        assert (outs[0].parent / f"pools.jsonl{suffix}").read_bytes() == (outs[1].parent / f"pools.jsonl{suffix}").read_bytes()
    assert "seconds" not in json.loads((outs[0].parent / "pools.jsonl.stats.json").read_text())
    record = computed_here(outs[0])
    assert record["dvc_stage"] == "pools_test@run" and record["asked"] == 6 and record["seconds"] >= 0
    outs[0].write_text(outs[0].read_text() + "\n")  # no longer the file this run wrote
    assert computed_here(outs[0]) is None
    (outs[1].parent / "pools.jsonl.run.json").unlink()  # e.g. restored from a DVC cache
    assert computed_here(outs[1]) is None


def test_retries_429_500_timeouts_and_bad_answers(tmp_path, api_key):
    with FakeOpenAI() as server:
        server.plan = ["429", "500", "timeout", "malformed", "wrong_count", "truncated"]
        # The "timeout" fault answers after 1.5 s, so this client's 1 s timeout always fires on it.
        # On a loaded machine a good answer can also pass 1 s and be asked again: retry budgets
        # with room for that (the six faults alone take 3 HTTP retries and 3 new samples of the
        # first problem), and request counts bounded by them rather than exact.
        cfg = _cfg(server, api_key, concurrency=1, timeout=1.0, max_retries=6, parse_retries=5)
        stats = build_pools(PROBLEMS[:2], cfg, tmp_path / "pools.jsonl")
    assert len(read_jsonl(tmp_path / "pools.jsonl")) == 2
    assert stats["failures"] == {}
    # 6 faulty answers + 2 good ones at least, every one a real HTTP request; at most what the
    # retry policy allows (per problem: 1 + parse_retries samples of 1 + max_retries requests)
    most = 2 * (1 + cfg.parse_retries) * (1 + cfg.max_retries)
    assert 8 <= len(server.requests) == stats["http_requests"] <= most


def test_persistent_failure_names_problem_and_resume_calls_only_missing(tmp_path, api_key):
    out = tmp_path / "pools.jsonl"
    with FakeOpenAI() as server:
        server.fail_ids = ["number 4."]
        with pytest.raises(PoolBuildError) as e:
            build_pools(PROBLEMS, _cfg(server, api_key, max_retries=1), out)
        assert "p4" in str(e.value) and SECRET not in str(e.value)
        assert not out.exists()
        stats = json.loads((tmp_path / "pools.jsonl.stats.json").read_text())
        assert list(stats["failures"]) == ["p4"] and SECRET not in json.dumps(stats)
        before = len(server.requests)
        server.fail_ids = []
        stats = build_pools(PROBLEMS, _cfg(server, api_key), out)
        assert len(server.requests) - before == 1  # only the missing problem
        assert stats["resumed"] == 5
    assert [r["id"] for r in read_jsonl(out)] == [p["id"] for p in PROBLEMS]


def test_missing_key_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    cfg = PoolConfig(backend="openai", base_url="http://127.0.0.1:9/v1", model="m", api_key_env="NO_SUCH_KEY_VAR")
    with pytest.raises(ValueError, match="NO_SUCH_KEY_VAR"):
        build_pools(PROBLEMS, cfg, tmp_path / "pools.jsonl")


def test_organism_helper_is_noisy_and_unverified(tmp_path):
    from nudgerl.organism import task

    records = [p.to_record() for p in task.training_problems(0, 400, 0.7)]
    build_pools(records, PoolConfig(backend="organism", n=3, p_correct=0.6), tmp_path / "pools.jsonl")
    rows = read_jsonl(tmp_path / "pools.jsonl")
    catalogue = {s.hint for s in task.STRATEGIES.values()}
    right = task.STRATEGIES[task.RARE_CORRECT_STRATEGY].hint
    assert all(len(set(r["hints"])) == 3 and set(r["hints"]) <= catalogue for r in rows)
    share = sum(right in r["hints"] for r in rows) / len(rows)
    assert 0.5 < share < 0.7  # present only for some problems
    first_two = sum(right in r["hints"][:2] for r in rows) / len(rows)
    assert 0.3 < first_two < 0.5  # and not placed first: the helper does not know


@pytest.mark.slow
def test_dvc_restores_deleted_pools_without_calling_the_backend(tmp_path, api_key):
    subprocess.run(["dvc", "init", "--no-scm", "-q"], cwd=tmp_path, check=True)
    (tmp_path / "problems.jsonl").write_text("".join(json.dumps(p) + "\n" for p in PROBLEMS))
    with FakeOpenAI() as server:
        (tmp_path / "params.yaml").write_text(yaml.safe_dump({"pools_test": {
            "backend": "openai", "n": 5, "base_url": server.url, "model": "helper-mini", "api_key_env": api_key}}))
        (tmp_path / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"pools_test": {
            "cmd": "nudgerl make-pools --section pools_test --problems problems.jsonl --out pools/p.jsonl",
            "deps": ["problems.jsonl"], "params": ["pools_test"], "outs": ["pools/p.jsonl"]}}}))

        def repro():
            proc = subprocess.run(["dvc", "--wait-for-lock", "repro", "pools_test"], cwd=tmp_path,
                                  capture_output=True, text=True, timeout=300)
            assert proc.returncode == 0, proc.stderr
            assert SECRET not in proc.stdout + proc.stderr
            return proc

        repro()
        assert len(server.requests) == 6
        first = (tmp_path / "pools" / "p.jsonl").read_text()
        (tmp_path / "pools" / "p.jsonl").unlink()
        repro()
        assert len(server.requests) == 6  # restored from DVC's cache: zero backend calls
        assert (tmp_path / "pools" / "p.jsonl").read_text() == first
        for f in ("dvc.lock", "dvc.yaml", "params.yaml"):
            assert SECRET not in (tmp_path / f).read_text()


def test_torn_partial_line_from_a_killed_run_is_asked_again(tmp_path, api_key):
    """A kill mid-append leaves a torn last line in <out>.partial: the rerun drops it, asks
    the endpoint only for that problem and the ones never finished, and appends cleanly."""
    out = tmp_path / "pools.jsonl"
    hints = [f"hint {i}" for i in range(5)]
    partial = tmp_path / "pools.jsonl.partial"
    partial.write_text("".join(json.dumps({"id": f"p{i}", "status": "ok", "hints": hints}) + "\n" for i in range(3))
                       + '{"id": "p3", "status": "ok", "hin')
    with FakeOpenAI() as server:
        stats = build_pools(PROBLEMS, _cfg(server, api_key), out)
    assert stats["resumed"] == 3 and len(server.requests) == 3  # p3 (torn), p4, p5
    rows = read_jsonl(out)
    assert [r["id"] for r in rows] == [p["id"] for p in PROBLEMS] and rows[0]["hints"] == hints
    assert not partial.exists()


def test_an_endpoint_echoing_the_key_never_puts_it_in_errors_or_stats(tmp_path, api_key):
    out = tmp_path / "pools.jsonl"
    with FakeOpenAI() as server:
        server.plan = ["echo_key"] * 10  # a 400 is not retried: the problem fails at once
        with pytest.raises(PoolBuildError) as e:
            build_pools(PROBLEMS[:1], _cfg(server, api_key, concurrency=1), out)
    stats = (tmp_path / "pools.jsonl.stats.json").read_text()
    assert "bad request from Bearer ***" in stats  # the server did echo it; we scrubbed it
    assert SECRET not in stats and SECRET not in str(e.value)
