"""How a hint enters a prompt (x1) and how it leaves (x0)."""

from __future__ import annotations


def organism_apply_hint(messages: list[dict], hint: str) -> list[dict]:
    """x1 for the organism: a ``hint : ...`` line in front of the problem (see task.prompt_text)."""
    from .organism.task import prompt_text

    last = messages[-1]
    return [*messages[:-1], {**last, "content": prompt_text(last["content"], f"hint : {hint}")}]


HINT_STYLES = {"organism": organism_apply_hint}
