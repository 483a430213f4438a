"""The docs point at things that exist (fast, no network): in README.md and docs/**/*.md,

- every relative link ([text](path), ![alt](path), <a href>, <img src>) names a file or folder
  of the repository (relative to the Markdown file; URLs and anchor-only links are not checked)
  that git does not ignore (a clone would lack it);
- every relative path in backticks (inline code and fenced blocks) whose first folder is one of
  the repository's top-level entries exists (`{a,b}` is expanded; placeholders such as `<run>`,
  `{ext}`, `*`, `...`, paths under results/ and other git-ignored paths, which runs and setup
  produce, are not checked);
- every `nudgerl <subcommand>` is one of `nudgerl --help`'s subcommands;
- every `snakemake <target>` (and the rules `--forcerun`, `--until`, ... name) is a rule of
  the workflow (`rule X:` in the Snakefile and workflow/**/*.smk);
- every script a command runs (`python scripts/X`, `bash scripts/X`, `python benchmarks/X`, ...)
  exists.

A failure names the file, the line and the dead path.
"""

import argparse
import re
import subprocess
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# Produced by runs (or by setup), not kept in the repository.
PRODUCED = ("results",)
PLACEHOLDER = re.compile(r"[<>{}*?$\[\]]|\.\.\.|…")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")  # http:, https:, mailto:, s3:, ...
SHELL_SEPARATORS = re.compile(r"\s*(?:&&|\|\||;|\||\(|\))\s*")
ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
PREFIX_WORDS = {"$", "time", "sudo", "env", "exec", "nohup", "command"}
SCRIPT_RUNNERS = {"python", "python3", "bash", "sh"}
# output, not a command: `nudgerl job server: ran in a forked child ...`, `nudgerl audit: OK`
LOG_LINE = re.compile(r"^nudgerl(?:\s+[\w-]+){1,2}:(?:\s|$)")

# Snakemake options that take no value: the word after one of these is a target.
SNAKEMAKE_FLAGS = {
    "-n", "--dry-run", "--dryrun", "-p", "--printshellcmds", "--unlock", "--rerun-incomplete", "--ri", "--lint",
    "-F", "--forceall", "-f", "--force", "-k", "--keep-going", "--quiet", "-q", "--dag", "--rulegraph",
    "--filegraph", "--summary", "--detailed-summary", "--list", "-l", "--list-rules", "--list-target-rules",
    "--lt", "--touch", "-t", "--use-conda", "--use-singularity", "--use-apptainer", "--nolock", "--notemp",
    "--cleanup-metadata", "--version", "-v", "-h", "--help", "--verbose", "--debug-dag", "--show-failed-logs",
    "-r", "--reason", "--cleanup-shadow", "--conda-create-envs-only", "--delete-all-output",
    "--delete-temp-output", "--containerize", "--no-hooks",
}
# Snakemake options whose values are rule names.
SNAKEMAKE_RULE_OPTIONS = {"--forcerun", "-R", "--until", "-U", "--omit-from", "-O", "--allowed-rules"}
# Snakemake options that take exactly one value (the others may take several: --configfile a b).
SNAKEMAKE_ONE_VALUE = {"--cores", "-c", "--jobs", "-j", "--profile", "--report", "--snakefile", "-s",
                       "--directory", "-d", "--latency-wait", "-w", "--max-jobs-per-second", "--executor", "-e",
                       "--workflow-profile", "--rerun-triggers", "--retries", "--local-cores", "--keep-storage-local-copies"}


@dataclass(frozen=True)
class Code:
    """A piece of code in a Markdown file: an inline code span or a line of a fenced block
    (lines continued with a backslash joined)."""

    doc: Path
    line: int
    text: str

    def where(self) -> str:
        return f"{self.doc.relative_to(REPO)}:{self.line}"


def markdown_files() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def split_markdown(doc: Path) -> tuple[str, list[Code]]:
    """The file's prose (code blanked out, line numbers kept) and its code pieces."""
    lines = doc.read_text(encoding="utf-8").split("\n")
    prose, code = [], []
    fence = None
    pending, pending_line = "", 0
    for number, line in enumerate(lines, 1):
        marker = re.match(r"^\s*(```+|~~~+)", line)
        if fence is None and marker:
            fence = marker.group(1)
            prose.append("")
            continue
        if fence is not None:
            if line.strip().startswith(fence) and not line.strip()[len(fence):].strip():
                fence = None
                if pending:
                    code.append(Code(doc, pending_line, pending))
                    pending = ""
            else:
                if not pending:
                    pending_line = number
                pending += line.rstrip("\\") + " " if line.rstrip().endswith("\\") else line
                if not line.rstrip().endswith("\\"):
                    code.append(Code(doc, pending_line, pending))
                    pending = ""
            prose.append("")
            continue
        prose.append(line)
    text = "\n".join(prose)
    # inline code spans (one or more backticks, the same number closing; within a paragraph)
    blanked = []
    last = 0
    for m in re.finditer(r"(`+)((?:(?!\n[ \t]*\n).)+?)(?<!`)\1(?!`)", text, re.S):
        code.append(Code(doc, _line_of(text, m.start()), m.group(2).strip()))
        blanked.append(text[last:m.start()])
        blanked.append(re.sub(r"[^\n]", " ", m.group(0)))
        last = m.end()
    blanked.append(text[last:])
    return "".join(blanked), code


@cache
def parsed(doc: Path) -> tuple[str, tuple[Code, ...]]:
    prose, code = split_markdown(doc)
    return prose, tuple(code)


def all_code() -> list[Code]:
    return [c for doc in markdown_files() for c in parsed(doc)[1]]


def expand_braces(path: str) -> list[str]:
    """`a.{json,md}` -> a.json, a.md (a brace without a comma is a placeholder: kept)."""
    m = re.search(r"\{([^{}]*,[^{}]*)\}", path)
    if not m:
        return [path]
    return [p for alt in m.group(1).split(",") for p in expand_braces(path[:m.start()] + alt + path[m.end():])]


def _clean(token: str) -> str:
    token = token.strip("\"'`(),;")
    token = token.split("=", 1)[1] if token.startswith("-") and "=" in token else token
    return token.rstrip(".:")


@cache
def top_level() -> frozenset[str]:
    return frozenset(p.name for p in REPO.iterdir()) - set(PRODUCED)


def repository_paths(text: str) -> list[str]:
    """The words of a piece of code that are paths in the repository: their first folder is a
    top-level entry of the checkout (others are relative to a run folder, another repository,
    ...). Placeholders and produced paths (results/) are left out."""
    found = []
    for word in text.split():
        for token in expand_braces(_clean(word)):
            token = token.removeprefix("./")
            if "/" not in token or token.startswith(("/", "../", "~")) or SCHEME.match(token):
                continue
            if PLACEHOLDER.search(token) or token.split("/", 1)[0] not in top_level():
                continue
            found.append(token)
    return found


def commands(text: str) -> list[list[str]]:
    """The simple commands in a piece of code: words, with leading `$`, `time`, VAR=value
    and the comment dropped; the first word is the program's basename."""
    text = re.sub(r"(^|\s)#.*$", "", text)
    out = []
    for part in SHELL_SEPARATORS.split(text):
        words = part.split()
        while words and (words[0] in PREFIX_WORDS or ENV_ASSIGNMENT.match(words[0])):
            words = words[1:]
        if words:
            out.append([words[0].rsplit("/", 1)[-1], *words[1:]])
    return out


@cache
def nudgerl_subcommands() -> frozenset[str]:
    from nudgerl.cli import build_parser

    parser = build_parser()
    return frozenset(name for action in parser._actions if isinstance(action, argparse._SubParsersAction)
                     for name in action.choices)


@cache
def workflow_rules() -> frozenset[str]:
    names = set()
    for path in [REPO / "Snakefile", *sorted((REPO / "workflow").rglob("*.smk"))]:
        text = path.read_text(encoding="utf-8")
        names |= set(re.findall(r"^\s*(?:rule|checkpoint)\s+(\w+)\s*:", text, re.M))
        names |= set(re.findall(r"^\s*use\s+rule\s+\S+(?:\s+from\s+\w+)?\s+as\s+(\w+)", text, re.M))
    return frozenset(names)


def _report(failures: list[str], what: str) -> None:
    if failures:
        pytest.fail(f"{len(failures)} {what}:\n  " + "\n  ".join(dict.fromkeys(failures)), pytrace=False)


def _exists(path: str) -> bool:
    return (REPO / path).exists()


@cache
def _ignored(path: str) -> bool:
    """Git ignores the path (produced by a run or by setup: results/, .venv/, report.html): a
    fresh clone lacks it whether or not this checkout has it. False where git cannot tell."""
    try:
        proc = subprocess.run(["git", "check-ignore", "-q", "--", path], cwd=REPO, capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


# ---- the checks ---------------------------------------------------------------------------------


LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+[\"'(][^)]*)?\)"
                  r"|^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)"
                  r"|<(?:a|img|source)\b[^>]*?\b(?:href|src)\s*=\s*[\"']([^\"']+)[\"']", re.M)


def relative_links(doc: Path) -> list[tuple[int, str]]:
    prose = parsed(doc)[0]
    links = []
    for m in LINK.finditer(prose):
        target = next(g for g in m.groups() if g is not None)
        if SCHEME.match(target) or target.startswith(("#", "//")):
            continue
        links.append((_line_of(prose, m.start()), target.split("#", 1)[0].split("?", 1)[0]))
    return links


def test_relative_links_exist():
    failures = []
    for doc in markdown_files():
        for line, target in relative_links(doc):
            path = (doc.parent / target).resolve()
            try:
                rel = path.relative_to(REPO)
            except ValueError:
                failures.append(f"{doc.relative_to(REPO)}:{line}: link ({target}) leaves the repository")
                continue
            if rel.parts and rel.parts[0] in PRODUCED:
                continue
            if not path.exists():
                failures.append(f"{doc.relative_to(REPO)}:{line}: link ({target}): {rel} does not exist")
            elif _ignored(str(rel)):
                failures.append(f"{doc.relative_to(REPO)}:{line}: link ({target}): {rel} is ignored by git "
                                "(.gitignore), so a clone does not have it")
    _report(failures, "dead relative link(s)")


def test_paths_in_backticks_exist():
    failures = []
    for code in all_code():
        for path in repository_paths(code.text):
            if not _exists(path) and not _ignored(path):  # git-ignored: produced by setup or a run
                failures.append(f"{code.where()}: `{path}` does not exist (in `{code.text.strip()[:100]}`)")
    _report(failures, "dead path(s) in backticks")


def test_nudgerl_subcommands_exist():
    known = nudgerl_subcommands()
    failures = []
    for code in all_code():
        for words in commands(code.text):
            if words[0] == "nudgerl":
                if LOG_LINE.match(" ".join(words)):  # a quoted log line (`nudgerl job server: ...`)
                    continue
                args = words[1:]
            elif words[0] in ("python", "python3") and words[1:3] in (["-m", "nudgerl"], ["-m", "nudgerl.cli"]):
                args = words[3:]
            else:
                continue
            sub = _clean(args[0]) if args else ""
            if sub and not sub.startswith("-") and not PLACEHOLDER.search(sub) and sub not in known:
                failures.append(f"{code.where()}: `nudgerl {sub}` is no subcommand of `nudgerl --help` "
                                f"(in `{code.text.strip()[:100]}`)")
    _report(failures, "unknown nudgerl subcommand(s)")


def snakemake_targets(args: list[str]) -> tuple[list[str], list[str]]:
    """(targets, rule names given to --forcerun/--until/...) of a snakemake command's arguments."""
    targets, rules = [], []
    option, taken = None, 0
    for word in args:
        if word.startswith("-"):
            name = word.split("=", 1)[0]
            if "=" in word:
                if name in SNAKEMAKE_RULE_OPTIONS:
                    rules.append(word.split("=", 1)[1])
                option = None
            else:
                option, taken = (None, 0) if name in SNAKEMAKE_FLAGS else (name, 0)
            continue
        if option is None:
            targets.append(word)
            continue
        if option in SNAKEMAKE_RULE_OPTIONS:
            rules.append(word)
        elif option == "--set-resources" or option == "--set-threads":
            rules.append(re.split(r"[:=]", word, maxsplit=1)[0])
        taken += 1
        if option in SNAKEMAKE_ONE_VALUE and taken == 1:
            option = None
    return targets, rules


def test_snakemake_targets_are_rules():
    rules = workflow_rules()
    assert "all" in rules, "the rule parser found no `rule all:` (Snakefile, workflow/**/*.smk)"
    failures = []
    for code in all_code():
        for words in commands(code.text):
            if words[0] != "snakemake":
                continue
            targets, named = snakemake_targets(words[1:])
            for target in targets:
                target = _clean(target)
                if not target or PLACEHOLDER.search(target):
                    continue
                if "/" in target or "." in target:  # a file target
                    first = target.split("/", 1)[0]
                    if first not in PRODUCED and first in top_level() and not _exists(target):
                        failures.append(f"{code.where()}: `snakemake {target}`: no such file")
                elif target not in rules:
                    failures.append(f"{code.where()}: `snakemake {target}`: no rule {target} in the workflow "
                                    f"(in `{code.text.strip()[:100]}`)")
            for rule in named:
                rule = _clean(rule)
                if rule and not PLACEHOLDER.search(rule) and rule not in rules:
                    failures.append(f"{code.where()}: snakemake option names rule {rule}, which the workflow "
                                    f"does not define (in `{code.text.strip()[:100]}`)")
    _report(failures, "snakemake target(s) that name no rule")


def test_scripts_the_docs_run_exist():
    failures = []
    for code in all_code():
        for words in commands(code.text):
            if words[0] not in SCRIPT_RUNNERS or len(words) < 2:
                continue
            script = _clean(words[1]).removeprefix("./")
            if script.startswith("-") or PLACEHOLDER.search(script) or script.startswith(("/", "../")):
                continue
            if "/" in script and script.split("/", 1)[0] not in PRODUCED and not _exists(script):
                failures.append(f"{code.where()}: `{words[0]} {script}`: {script} does not exist")
    _report(failures, "script(s) the docs run that do not exist")


# ---- the parser itself, on a made-up page -------------------------------------------------------


def test_the_checks_find_what_they_should(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "See [the docs](docs/x.md#part), [a site](https://example.org), [here](#top) and\n"
        "`config/none.yaml`, `results/<run>/x`, `tables/t.{csv,md}`, `benchmarks/r.{json,md}`.\n"
        "```bash\n"
        "HF_HUB_OFFLINE=1 snakemake model_snapshots --configfile config/paper.yaml --cores 1 && \\\n"
        "  nudgerl audit  # nudgerl writes\n"
        "snakemake --cores 2 -n all --forcerun evaluate --set-resources train_grpo:runtime=1\n"
        "python scripts/none.py DIR\n"
        "```\n")
    prose, code = split_markdown(page)
    assert "config/none.yaml" not in prose and "snakemake" not in prose
    assert [c.line for c in code] == [4, 6, 7, 2, 2, 2, 2]
    assert relative_links(page) == [(1, "docs/x.md")]
    assert repository_paths("`config/none.yaml`") == ["config/none.yaml"]
    assert repository_paths("results/<run>/x tables/t.csv ../shared/x https://a/b") == []
    assert repository_paths("benchmarks/r.{json,md}") == ["benchmarks/r.json", "benchmarks/r.md"]
    assert commands(code[0].text) == [["snakemake", "model_snapshots", "--configfile", "config/paper.yaml",
                                       "--cores", "1"], ["nudgerl", "audit"]]
    assert snakemake_targets(commands(code[1].text)[0][1:]) == (["all"], ["evaluate", "train_grpo"])
    assert snakemake_targets(["--configfile", "a.yaml", "b.yaml"]) == ([], [])
    assert snakemake_targets(["-n", "all", "--cores", "2", "x"]) == (["all", "x"], [])
    assert LOG_LINE.match("nudgerl job server: ran") and not LOG_LINE.match("nudgerl train-grpo --model m")
    assert "audit" in nudgerl_subcommands() and {"all", "model_snapshots"} <= workflow_rules()
    if (REPO / ".git").exists():
        assert _ignored("results/smoke/x.md")
        assert not _ignored("README.md")
