"""The one writer (and reader) of Markdown and LaTeX tables: every report table is rendered here, its cells
escaped, so a ``|`` in a method name or label cannot split a Markdown row and a ``_`` or ``&`` in
a caption cannot break the LaTeX.

Markdown (GitHub's tables, what markdown-it and ``snakemake --report`` read): rows are
``| a | b |`` and the delimiter row is ``|---|---|`` (``---:`` right-aligned). A ``|`` in a cell
is written ``\\|`` (both parsers split a row only on a pipe no backslash precedes) and a line
break as a space; nothing else is touched, so a cell's Markdown (``**no**``, backticks) stays
markup. An empty string is an empty cell (``|  |``); ``None`` is a blank one (``| |``): the two
spellings the generated pages already use.

LaTeX: every cell, header and caption is escaped (``& % $ # _ { } ~ ^ \\`` and ``|``) unless it is a
:class:`Latex`, markup the code writes itself (``\\,[..]``, ``$^\\dagger$``), which passes as is.

Imports nothing of nudgerl: any subpackage may use it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence


class Latex(str):
    """Text that is LaTeX already (markup the code writes): :func:`latex_escape` leaves it alone."""


_MARKDOWN_ALIGN = {"-": "---", "l": ":---", "c": ":---:", "r": "---:"}

_LATEX_SPECIALS = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "|": r"\textbar{}",  # not a special, but OT1 text mode prints it as a dash
}


def markdown_escape(text) -> str:
    """A Markdown table cell's text: ``|`` as ``\\|``, a line break as a space."""
    return str(text).replace("\r\n", " ").replace("\n", " ").replace("\r", " ").replace("|", r"\|")


def markdown_row(cells: Iterable) -> str:
    """``| a | b |``; ``None`` is a blank cell (``| |``), anything else is ``str()``-ed and escaped."""
    return "|" + "".join(" |" if c is None else f" {markdown_escape(c)} |" for c in cells)


def markdown_table(header: Sequence, rows: Iterable[Sequence], align: str | Sequence[str | None] | None = None) -> str:
    """A Markdown table (no trailing newline): the header row, the delimiter row, one row per
    entry of ``rows``. ``align``: one letter per column, ``-`` (or None) plain ``---``, ``l``
    ``:---``, ``c`` ``:---:``, ``r`` ``---:``; default all plain. A row of another width than the
    header is an error (it would shift every cell after it)."""
    header = list(header)
    align = ["-"] * len(header) if align is None else ["-" if a is None else a for a in align]
    if len(align) != len(header):
        raise ValueError(f"markdown_table: {len(align)} alignments for {len(header)} columns")
    if unknown := [a for a in align if a not in _MARKDOWN_ALIGN]:
        raise ValueError(f"markdown_table: alignment {unknown[0]!r} is not one of {sorted(_MARKDOWN_ALIGN)}")
    lines = [markdown_row(header), "|" + "".join(f"{_MARKDOWN_ALIGN[a]}|" for a in align)]
    for i, row in enumerate(rows):
        row = list(row)
        if len(row) != len(header):
            raise ValueError(f"markdown_table: row {i} has {len(row)} cells, the header {len(header)}: {row!r}")
        lines.append(markdown_row(row))
    return "\n".join(lines)


def read_markdown_table(text: str) -> tuple[list[str], list[list[str]]]:
    """The first Markdown table in ``text``, as :func:`markdown_table` writes it: (header, rows),
    cells stripped, ``\\|`` read back as ``|``; ([], []) where ``text`` has no table."""
    lines: list[str] = []
    for line in text.splitlines():
        if line.startswith("|"):
            lines.append(line)
        elif lines:
            break

    def cells(line: str) -> list[str]:
        return [c.strip().replace(r"\|", "|") for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]

    if len(lines) < 2:
        return [], []
    return cells(lines[0]), [cells(line) for line in lines[2:]]


def latex_escape(text) -> str:
    """Text for LaTeX: ``& % $ # _ { } ~ ^ \\`` and ``|`` escaped; a :class:`Latex` is returned as it is."""
    if isinstance(text, Latex):
        return str(text)
    return "".join(_LATEX_SPECIALS.get(ch, ch) for ch in str(text))


def latex_row(cells: Iterable) -> str:
    """``a & b \\\\`` with every cell escaped (:func:`latex_escape`)."""
    return " & ".join(latex_escape(c) for c in cells) + r" \\"


def latex_table(header: Sequence, rows: Iterable[Sequence], align: str | None = None, caption=None,
                placement: str = "t") -> str:
    """A booktabs ``table`` float (no trailing newline): ``\\begin{table}[placement]``,
    ``\\centering``, the caption (escaped unless :class:`Latex`), a ``tabular`` with column spec
    ``align`` (default ``l`` then ``c`` for the rest), ``\\toprule``, the header, ``\\midrule``,
    the rows, ``\\bottomrule``."""
    header = list(header)
    align = align or "l" + "c" * (len(header) - 1)
    lines = [rf"\begin{{table}}[{placement}]", r"\centering"]
    if caption is not None:
        lines.append(rf"\caption{{{latex_escape(caption)}}}")
    lines += [rf"\begin{{tabular}}{{{align}}}", r"\toprule", latex_row(header), r"\midrule"]
    for i, row in enumerate(rows):
        row = list(row)
        if len(row) != len(header):
            raise ValueError(f"latex_table: row {i} has {len(row)} cells, the header {len(header)}: {row!r}")
        lines.append(latex_row(row))
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
    return "\n".join(lines)
