"""Every job count the README and docs/ quote is the count the workflow plans now: each quoted
number is read out of its page's prose and compared with a dry run of its configuration
(`scripts/dag_jobs.py`, `--forceall`: every job, whatever results exist). A page that says 119
where the DAG has 203 fails here, naming the page and the sentence."""

import re

import pytest
import yaml

from conftest import REPO, load_script

# a Snakemake dry run per configuration (10-40 s each)
pytestmark = pytest.mark.slow


def _dag_jobs():
    return load_script("scripts/dag_jobs.py")


# (page, pattern whose group 1 is the quoted count, configuration as scripts/dag_jobs.py takes it)
QUOTED = [
    ("README.md", r"the embedded default \((\d+) jobs", "config.yaml"),
    ("docs/cluster.md", r"dry run \((\d+) jobs\)", "paper.yaml"),
    ("README.md", r"12-h GPU training jobs, (\d+) jobs", "paper.yaml"),
    ("docs/cluster.md", r"the DAG: (\d+) jobs for 2 models", "paper.yaml"),
    ("docs/methods.md", r"an audit of every artifact: (\d+) jobs", "config.yaml"),
    ("docs/methods.md", r"evaluated again\s+on every replicate, below\): (\d+) jobs", "config.yaml+single_family.yaml"),
    ("docs/methods.md", r"It plans (\d+) jobs, \d+ of them the A/A pair", "config.yaml+single_family.yaml+study.yaml:study"),
    ("docs/regime-map.md", r"The target plans (\d+) jobs", "config.yaml+single_family.yaml:regime_map"),
    ("docs/performance.md", r"the default has (\d+) jobs", "config.yaml"),
    ("docs/smollm2.md", r"end to end, in (\d+) jobs", "smollm2.yaml"),
    ("docs/configuration.md", r"\(`regime_map` target: (\d+)\)", "config.yaml+single_family.yaml:regime_map"),
]

# docs/configuration.md's table of configurations: its first column names the files, its fifth
# the jobs
CONFIGURATION_ROWS = {
    "`config/config.yaml`": "config.yaml",
    "`config/single_family.yaml`": "config.yaml+single_family.yaml",
    "`config/common.yaml` (over `config/single_family.yaml`)": "config.yaml+single_family.yaml+common.yaml",
    "`config/study.yaml` (over `config/single_family.yaml`), target `study`": "config.yaml+single_family.yaml+study.yaml:study",
    "`config/families.yaml`": "config.yaml+families.yaml",
    "`config/smoke.yaml`": "smoke.yaml",
    "`config/paper.yaml`": "paper.yaml",
    "`config/offline.yaml` (over `config/paper.yaml`)": "paper.yaml+offline.yaml",
    "`config/smollm2.yaml`": "smollm2.yaml",
    "`config/smollm2_arith.yaml`": "smollm2_arith.yaml",
}


def quoted_counts(root=REPO) -> list[tuple[str, str, int, str]]:
    """(page, sentence, quoted count, configuration) for every count above, from the pages
    under ``root``."""
    found = []
    for page, pattern, spec in QUOTED:
        text = (root / page).read_text()
        match = re.search(pattern, text)
        assert match, f"{page}: no sentence matches {pattern!r} (reworded? update QUOTED)"
        found.append((page, match.group(0), int(match.group(1)), spec))
    table = (root / "docs" / "configuration.md").read_text()
    for files, count in re.findall(r"^\| (`config/[^|]*?) \| [^|]* \| [^|]* \| (\d+)[^|]*\|", table, re.M):
        assert files in CONFIGURATION_ROWS, f"docs/configuration.md: a row for {files} (add it to CONFIGURATION_ROWS)"
        found.append(("docs/configuration.md", f"| {files} | ... | {count} |", int(count), CONFIGURATION_ROWS[files]))
    assert sum(page == "docs/configuration.md" and sentence.startswith("|") for page, sentence, *_ in found) \
        == len(CONFIGURATION_ROWS)
    return found


def mismatches(found, planned: dict[str, int]) -> list[str]:
    return [f"{page}: {sentence!r} says {count}; {spec} plans {planned[spec]}"
            for page, sentence, count, spec in found if count != planned[spec]]


# the configurations whose preflight checks that their local dataset files exist
READS_LOCAL_DATA = ("smollm2.yaml", "offline.yaml")


def stand_in_local_data(folder) -> str:
    """Empty files where config/smollm2.yaml and config/offline.yaml look for their datasets (a
    checkout without ../shared, as CI's), and an overlay pointing data.local_dir at them: the
    preflight checks they exist, a dry run reads none of them."""
    names = set()
    for name in READS_LOCAL_DATA:
        data = yaml.safe_load((REPO / "config" / name).read_text())["data"]
        names |= {data["train"]["path"], *(b["path"] for b in data["benchmarks"].values())}
    for name in names:
        (folder / name).write_text("")
    overlay = folder / "local_data.yaml"
    overlay.write_text(yaml.safe_dump({"data": {"local_dir": str(folder)}}))
    return str(overlay)


def test_every_quoted_job_count_is_what_the_workflow_plans(tmp_path):
    dag_jobs = _dag_jobs()
    found = quoted_counts()
    overlay = stand_in_local_data(tmp_path)

    def planned_jobs(spec: str) -> int:
        reads_local = any(name in spec.partition(":")[0].split("+") for name in READS_LOCAL_DATA)
        return len(dag_jobs.jobs(dag_jobs.dry_run(spec, (overlay,) if reads_local else ()))[0])

    planned = {spec: planned_jobs(spec) for spec in dict.fromkeys(f[3] for f in found)}
    print(planned)
    wrong = mismatches(found, planned)
    assert not wrong, "\n".join(wrong)


def test_a_number_planted_in_a_page_is_named(tmp_path):
    """What the check compares is read from the pages themselves: one number changed in one
    page's prose is the one mismatch, named with its page."""
    for page in {page for page, *_ in QUOTED} | {"docs/configuration.md"}:
        (tmp_path / page).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / page).write_text((REPO / page).read_text())
    found = quoted_counts()
    as_quoted = {spec: count for page, _, count, spec in found if page == "README.md"}
    readme = tmp_path / "README.md"
    readme.write_text(re.sub(r"(the embedded default \()(\d+)", r"\g<1>1\2", readme.read_text(), count=1))
    wrong = mismatches([f for f in quoted_counts(tmp_path) if f[0] == "README.md"], as_quoted)
    assert wrong == [f"README.md: 'the embedded default (1{as_quoted['config.yaml']} jobs' says "
                     f"1{as_quoted['config.yaml']}; config.yaml plans {as_quoted['config.yaml']}"]
