"""One way to read a config section into a dataclass: every key must be a field.

A low-level module (the standard library only), so any part of the package can use it
without an import pointing back up. A config dataclass keeps a thin ``from_dict`` that
calls :func:`from_section` with the section's name (the config key a user writes, e.g.
``grpo`` or a params.yaml section such as ``pools_organism``), so a typo names the key,
the section and what the section accepts instead of being dropped or failing later.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

T = TypeVar("T")


class UnknownKeysError(ValueError):
    """Keys of a config section that its dataclass does not take."""

    def __init__(self, section: str, unknown: Iterable[str], accepted: Iterable[str], cls_name: str = ""):
        self.section = section
        self.unknown = sorted(unknown)
        self.accepted = sorted(accepted)
        of = f" of {cls_name}" if cls_name else ""
        super().__init__(f"config section {section!r}: unknown key(s) {self.unknown} (unknown field(s){of}); "
                         f"accepted keys: {self.accepted}")


def accepted_keys(cls, ignore: Iterable[str] = ()) -> list[str]:
    """The keys a section read into ``cls`` may hold: its fields, and ``ignore`` (keys of the
    same section that other readers use, e.g. the workflow's)."""
    return sorted({f.name for f in dataclasses.fields(cls) if f.init} | set(ignore))


def _nested_types(cls) -> dict[str, type]:
    """Fields of ``cls`` whose type is itself a dataclass (read as a nested section)."""
    try:
        hints = typing.get_type_hints(cls)
    except Exception:  # an annotation this module cannot resolve: no nesting
        return {}
    return {name: tp for name, tp in hints.items() if dataclasses.is_dataclass(tp) and isinstance(tp, type)}


def from_section(cls: type[T], data: Mapping[str, Any] | None, section: str, ignore: Iterable[str] = ()) -> T:
    """``cls(**data)`` for a dataclass ``cls`` read from config section ``section``.

    A key that is not a field of ``cls`` raises :class:`UnknownKeysError` (a ValueError)
    naming the key(s), the section and the accepted keys; keys in ``ignore`` belong to other
    readers of the section and are skipped. A field whose type is a dataclass, given a
    mapping, is read the same way as the nested section ``<section>.<field>``."""
    if not dataclasses.is_dataclass(cls) or not isinstance(cls, type):
        raise TypeError(f"from_section needs a dataclass, got {cls!r}")
    data = dict(data or {})
    ignore = set(ignore)
    fields = {f.name for f in dataclasses.fields(cls) if f.init}
    unknown = set(data) - fields - ignore
    if unknown:
        raise UnknownKeysError(section, unknown, accepted_keys(cls, ignore), cls.__name__)
    kwargs = {k: v for k, v in data.items() if k in fields}
    for name, tp in _nested_types(cls).items():
        if isinstance(kwargs.get(name), Mapping):
            kwargs[name] = from_section(tp, kwargs[name], f"{section}.{name}")
    return cls(**kwargs)


# Sections a real model's entry (config ``models[]``) may set keys of for that model's jobs only:
# what a GPU job needs of its card differs by model (a 7 B model without GQA needs a larger
# vLLM share than a 4 B one with it), while the method's settings stay the same for all models.
MODEL_OVERRIDE_SECTIONS = ("grpo", "eval", "ranking")


def section_for_model(config: Mapping[str, Any], name: str, model: str | None = None) -> dict:
    """Config section ``name`` as model ``model``'s jobs read it: the section with the keys of
    the model entry's own ``<name>`` mapping (``models[].<name>``) in place of the section's.
    The section alone where ``model`` is None (the organism) or its entry sets none."""
    merged = dict(config.get(name) or {})
    if model is None or name not in MODEL_OVERRIDE_SECTIONS:
        return merged
    entries = [m for m in config.get("models") or [] if m.get("name") == model]
    if not entries:
        raise KeyError(f"config key 'models': no model named {model!r} (known: "
                       f"{[m.get('name') for m in config.get('models') or []]})")
    return {**merged, **(entries[0].get(name) or {})}


__all__ = ["MODEL_OVERRIDE_SECTIONS", "UnknownKeysError", "accepted_keys", "from_section", "section_for_model"]
