"""What a workflow declares for `snakemake --report`, and what a built report holds.

``declared_report_files`` asks Snakemake itself (its API, in a separate process in the
workflow's folder) for every file of the DAG marked with ``report()``, so a result added to
the workflow later is expected in the report without editing a test. ``report_entries``
reads the entries back out of a built HTML report (Snakemake embeds them as the JavaScript
objects ``results`` and ``categories``).

    python tests/snakemake_report.py config/smoke.yaml   # in a workflow folder: the JSON list
"""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
from pathlib import Path

# file types the report shows inline; anything else is only a download link
INLINE = (".png", ".jpg", ".jpeg", ".svg", ".html", ".pdf")


def declared_report_files(workdir: Path, *configfiles: str) -> list[str]:
    proc = subprocess.run([sys.executable, __file__, *configfiles], cwd=workdir, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _js_object(html: str, name: str) -> dict:
    m = re.search(rf"var {name} = (\{{.*?\}});\s*</script>", html, re.S)
    assert m, f"report has no `var {name} = ...` object"
    return json.loads(m.group(1))


def report_entries(report: Path) -> tuple[dict, dict]:
    """(results, categories): path -> entry (name, caption, labels, data_uri, ...), and
    category -> subcategory -> [paths]."""
    html = Path(report).read_text(errors="replace")
    return _js_object(html, "results"), _js_object(html, "categories")


def embedded_bytes(entry: dict) -> bytes:
    """The file as the report embeds it (a base64 data URI)."""
    return base64.b64decode(entry["data_uri"].split(",", 1)[1])


def _main(configfiles: list[str]) -> None:
    from snakemake.api import SnakemakeApi
    from snakemake.io import is_flagged
    from snakemake.settings.types import ConfigSettings, DAGSettings, ResourceSettings

    with SnakemakeApi() as api:
        wf_api = api.workflow(resource_settings=ResourceSettings(cores=1),
                              config_settings=ConfigSettings(configfiles=[Path(p) for p in configfiles]),
                              snakefile=Path("Snakefile"))
        wf_api.dag(DAGSettings())  # attaches the DAG settings to the workflow
        # The DAG as `snakemake --report` builds it (Snakemake 9's Workflow.create_report).
        wf = wf_api._workflow
        wf._prepare_dag(forceall=False, ignore_incomplete=True, lock_warn_only=True, nolock=True)
        wf._build_dag()
        files = sorted({str(f) for job in wf.dag.jobs for f in [*job.output, *job.input] if is_flagged(f, "report")})
    print(json.dumps(files))


if __name__ == "__main__":
    _main(sys.argv[1:])
