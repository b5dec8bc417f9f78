"""A module imported on first attribute access: the command modules name their heavy
dependencies (numpy, pandas, the contexts, the experiments) at the top as usual, and
``--help`` (which only builds the parser) never loads them."""
from __future__ import annotations

import importlib


class LazyModule:
    """Stands for module ``name`` and imports it when an attribute is first read."""

    __slots__ = ("_name",)

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr: str):
        return getattr(importlib.import_module(self._name), attr)

    def __repr__(self) -> str:
        return f"<lazy module {self._name}>"


def lazy(name: str) -> LazyModule:
    return LazyModule(name)
