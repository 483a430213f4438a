"""Per-problem calls to a helper model (strategy pools, oracle solutions): the shared driver.

- :func:`openai_client`: an OpenAI-compatible client whose key comes from an environment
  variable, with the library's own retries (exponential backoff on 429/5xx/time-outs,
  Retry-After honoured) and a counter of every HTTP attempt.
- :func:`run_per_problem`: runs ``propose(record) -> (payload, usage)`` over many problems
  with a concurrency limit, appends each finished problem to ``<out>.partial`` (fsync'd),
  so a killed or failed run resumes and asks only for what is missing; writes the output
  atomically with a ``<out>.stats.json`` sidecar, or raises naming the failed problems.

The output and its stats are what DVC caches and a team shares, so they hold no wall-clock
values: recomputing a deterministic stage writes the same bytes (dvc.lock keeps its hashes,
the run-cache one entry). What is particular to this machine's run (seconds, the DVC stage,
when) goes to ``<out>.run.json``, which DVC does not track: a checkout that restored the
output from the cache has none, which is how ``nudgerl audit`` tells the two apart.
"""

from __future__ import annotations

import json
import os
import threading
import time
from datetime import datetime, timezone
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, ClassVar

from nudgerl.io import atomic_write_text, sha256_file
from nudgerl.sections import from_section


class HelperStageError(RuntimeError):
    pass


@dataclass
class HelperEndpointConfig:
    """What the pool and oracle stages' helper model needs, whichever the stage: the backend,
    the OpenAI-compatible endpoint (``openai``), the local model (``transformers``: ``model`` is
    a folder, ``samples`` answers per problem and try) and the sampling. A subclass (a stage's
    params.yaml section, :class:`~nudgerl.offline.pools.PoolConfig`,
    :class:`~nudgerl.offline.oracles.OracleConfig`) adds its own keys and re-declares the
    defaults that differ (``prompt``, ``temperature``, ``max_tokens``, ``timeout``, ``samples``).
    The config keys are the fields' names: a section is flat."""

    SECTION: ClassVar[str] = "helper"  # the section named in errors when the caller names none
    PROMPT_KIND: ClassVar[str] = ""  # nudgerl.data.prompts.HELPER_PROMPTS kind: "hints" | "oracle"
    # The order of the config in the stage's stats sidecar (DVC hashes its bytes): each stage's own.
    STATS_KEYS: ClassVar[tuple[str, ...]] = ()

    backend: str = "organism"  # "openai" | "organism" | "transformers"
    base_url: str | None = None
    model: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    prompt: str = ""  # openai and transformers backends (nudgerl.data.prompts.HELPER_PROMPTS)
    temperature: float = 1.0
    max_tokens: int = 256
    concurrency: int = 4
    max_retries: int = 4  # HTTP retries (429/5xx/timeouts), exponential backoff, Retry-After honoured
    timeout: float = 60.0
    top_p: float = 1.0
    samples: int = 1
    seed: int = 0
    threads: int = 1
    extra: dict = field(default_factory=dict)  # passed through to the chat request (openai)

    def __post_init__(self):
        from nudgerl.data.prompts import helper_prompt

        helper_prompt(self.prompt, self.PROMPT_KIND)

    def stats_config(self) -> dict:
        """The config as the stats sidecar records it (every key but ``extra``, in STATS_KEYS order)."""
        return {k: getattr(self, k) for k in self.STATS_KEYS}

    @classmethod
    def from_dict(cls, d: dict, section: str | None = None):
        """From a params.yaml section (named in errors); unknown keys are errors."""
        return from_section(cls, d, section or cls.SECTION)


# API keys in use in this process: scrubbed from every error text, in case an endpoint
# echoes the key back in an error body (some proxies do).
_SECRETS: set[str] = set()


def scrub(text: str) -> str:
    for secret in _SECRETS:
        text = text.replace(secret, "***")
    return text


def error_text(e: BaseException | None) -> str:
    # Exception class and a short message only: never request headers (the key).
    return scrub(f"{type(e).__name__}: {str(e)[:200]}")


class CountingOpenAI:
    """An ``openai.OpenAI`` client plus ``http_requests``, the number of HTTP attempts."""

    def __init__(self, base_url: str | None, api_key_env: str, max_retries: int, timeout: float):
        from openai import DefaultHttpxClient, OpenAI

        if not base_url:
            raise ValueError("an openai backend needs 'base_url'")
        key = os.environ.get(api_key_env)
        if not key:
            raise ValueError(f"environment variable {api_key_env} (api_key_env) is not set")
        _SECRETS.add(key)
        self.http_requests = 0
        self._lock = threading.Lock()

        def count(_request):
            with self._lock:
                self.http_requests += 1

        self.client = OpenAI(
            base_url=base_url,
            api_key=key,
            max_retries=max_retries,
            timeout=timeout,
            http_client=DefaultHttpxClient(event_hooks={"request": [count]}, timeout=timeout),
        )

    def chat(self, usage: dict, **kwargs) -> str | None:
        """One chat completion; adds its token counts to ``usage``; None when truncated."""
        usage["calls"] = usage.get("calls", 0) + 1
        resp = self.client.chat.completions.create(**kwargs)
        if resp.usage is not None:
            usage["prompt_tokens"] = usage.get("prompt_tokens", 0) + (resp.usage.prompt_tokens or 0)
            usage["completion_tokens"] = usage.get("completion_tokens", 0) + (resp.usage.completion_tokens or 0)
        return resp.choices[0].message.content if resp.choices else None


def _read_partial(partial: Path) -> list[dict]:
    """Finished rows of an earlier, interrupted run. A job killed mid-append leaves a torn
    line (later appends would glue onto it); such lines are dropped (their problems are asked
    again) and the file is rewritten clean before this run appends to it."""
    if not partial.exists():
        return []
    rows, torn = [], 0
    for line in partial.read_text().splitlines():
        try:
            row = json.loads(line) if line.strip() else None
        except json.JSONDecodeError:
            row = None
            torn += 1
        if isinstance(row, dict) and "id" in row:
            rows.append(row)
    if torn:
        print(f"{partial}: dropped {torn} torn line(s) left by a killed run; those problems are asked again")
        atomic_write_text(partial, "".join(json.dumps(r) + "\n" for r in rows))
    return rows


def run_per_problem(records: list[dict], propose: Callable[[dict], tuple[dict, dict]], out_path: str | Path,
                    concurrency: int = 4, what: str = "result", config: dict | None = None,
                    counter=None, prefetch: Callable[[list[dict]], None] | None = None) -> dict:
    out_path = Path(out_path)
    partial = out_path.with_name(out_path.name + ".partial")
    out_path.parent.mkdir(parents=True, exist_ok=True)
    done = {r["id"]: r for r in _read_partial(partial) if r.get("status") == "ok"}
    todo = [r for r in records if r["id"] not in done]
    stats = {"problems": len(records), "resumed": len(done), "calls": 0, "prompt_tokens": 0,
             "completion_tokens": 0, "failures": {}}
    lock = threading.Lock()
    t0 = time.perf_counter()
    if prefetch is not None and todo:  # a local model samples all missing problems in one batch
        prefetch(todo)

    def work(record):
        try:
            payload, usage = propose(record)
            return record, {"id": record["id"], "status": "ok", **payload}, usage, None
        except Exception as e:  # recorded per problem; the run goes on
            return record, None, getattr(e, "usage", {}), error_text(e)

    with open(partial, "a") as f, ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        for fut in as_completed([pool.submit(work, r) for r in todo]):
            record, row, usage, error = fut.result()
            with lock:
                for k in ("calls", "prompt_tokens", "completion_tokens"):
                    stats[k] += usage.get(k, 0)
                if error:
                    stats["failures"][record["id"]] = error
                else:
                    done[record["id"]] = row
                    f.write(json.dumps(row) + "\n")
                    f.flush()
                    os.fsync(f.fileno())
    stats["http_requests"] = getattr(counter, "http_requests", 0)
    stats["config"] = config or {}
    seconds = time.perf_counter() - t0
    print(f"{len(todo)} problem(s) asked in {seconds:.1f} s, {stats['http_requests']} HTTP request(s)")
    atomic_write_text(out_path.with_name(out_path.name + ".stats.json"), json.dumps(stats, indent=2))
    if stats["failures"]:
        ids = sorted(stats["failures"])
        raise HelperStageError(
            f"{len(ids)} problem(s) got no valid {what} after the retry budget: {', '.join(ids[:20])}"
            f"{' ...' if len(ids) > 20 else ''}; finished ones are kept in {partial}, rerun to retry only these"
        )
    rows = [dict(done[r["id"]], problem=r["problem"]) for r in records]
    atomic_write_text(out_path, "".join(json.dumps(r) + "\n" for r in rows))
    write_run_record(out_path, seconds=round(seconds, 3), asked=len(todo), http_requests=stats["http_requests"])
    partial.unlink(missing_ok=True)
    return stats


def run_record_path(out_path: str | Path) -> Path:
    out_path = Path(out_path)
    return out_path.with_name(out_path.name + ".run.json")


def write_run_record(out_path: str | Path, **facts) -> None:
    """``<out>.run.json``: this checkout computed ``out_path`` (its sha256 as written), when,
    under which DVC stage (DVC sets DVC_STAGE for the commands it runs), and how long it took."""
    record = {"output": str(out_path), "sha256": sha256_file(out_path), "dvc_stage": os.environ.get("DVC_STAGE"),
              "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"), **facts}
    atomic_write_text(run_record_path(out_path), json.dumps(record, indent=2))


def computed_here(out_path: str | Path) -> dict | None:
    """The run record of ``out_path`` when this checkout computed the file as it is now;
    None when it came from elsewhere (a DVC cache restore or pull) or has changed since."""
    record_path = run_record_path(out_path)
    if not record_path.exists() or not Path(out_path).exists():
        return None
    try:
        record = json.loads(record_path.read_text())
    except json.JSONDecodeError:
        return None
    return record if record.get("sha256") == sha256_file(out_path) else None
