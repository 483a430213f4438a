"""Stand-alone HTML pages of the tables and text results, for ``snakemake --report``.

Snakemake's HTML report shows images, PDFs and HTML inline; any other file (CSV, Markdown,
plain text) is only a download link. So every table and text result the report lists also
gets an ``.html`` page rendered from the same text the ``.md``/``.txt`` holds (one source, no
second table formatter): Markdown through markdown-it-py (CommonMark plus tables), a CSV as
a pandas HTML table, plain text as preformatted text.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

from nudgerl.io import atomic_write_text

_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 1.5em; color: #1f2937; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.92em; }
th, td { border: 1px solid #d1d5db; padding: 0.35em 0.7em; text-align: left; vertical-align: top; }
/* long cells (claims, file paths) wrap instead of running off the page */
td { max-width: 36em; overflow-wrap: break-word; }
th { background: #f3f4f6; }
tr:nth-child(even) td { background: #fafafa; }
pre { font-size: 0.9em; line-height: 1.35; white-space: pre-wrap; }
p strong { font-weight: 600; }
"""


def page(title: str, body_html: str) -> str:
    return (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
            f"<style>{_STYLE}</style></head>\n<body>\n{body_html}\n</body></html>\n")


def markdown_html(text: str) -> str:
    from markdown_it import MarkdownIt

    # html=False: text in a table cell is escaped, never interpreted as markup
    return MarkdownIt("commonmark", {"html": False}).enable("table").render(text)


def write_markdown_page(md_text: str, out: str | Path, title: str) -> Path:
    atomic_write_text(out, page(title, markdown_html(md_text)))
    return Path(out)


def write_text_page(text: str, out: str | Path, title: str) -> Path:
    atomic_write_text(out, page(title, f"<pre>{html.escape(text)}</pre>"))
    return Path(out)


def write_csv_page(csv_path: str | Path, out: str | Path, title: str) -> Path:
    import pandas as pd

    df = pd.read_csv(csv_path)
    table = df.to_html(index=False, na_rep="", border=0, float_format="{:.4g}".format)
    # a line break may follow each "/" of a cell (file paths), so long paths wrap on the page
    table = re.sub(r"<td>([^<]*)</td>", lambda m: "<td>" + m.group(1).replace("/", "/<wbr>") + "</td>", table)
    body = f"<h3>{html.escape(title)}</h3>\n" + table
    atomic_write_text(out, page(title, body))
    return Path(out)
