"""Context registry: ``scalars.get(name)`` and ``scalars.names()``.

Names are parsed, not just looked up, so families take parameters:
``binary(E,M)``, ``mpmath:PREC``, ``interval:BASE``, ``dual:BASE``.  A context family
module registers a *factory* with :func:`register_family`; concrete names listed by
``names()`` come from :func:`register_name`.
"""
from __future__ import annotations

import re
from typing import Callable

from .base import Context
from .errors import ContextError

_NAMED: dict[str, Callable[[], Context]] = {}
_FAMILIES: list[tuple[re.Pattern, Callable[..., Context], str]] = []
_CACHE: dict[str, Context] = {}


def register_name(name: str, factory: Callable[[], Context]) -> None:
    """Register a concrete context name (listed by ``names()``)."""
    _NAMED[name] = factory


def register_family(pattern: str, factory: Callable[..., Context], example: str) -> None:
    """Register a parametrised family; ``factory(match)`` builds the context."""
    _FAMILIES.append((re.compile(pattern + r"\Z"), factory, example))


def names() -> list[str]:
    """Every concrete registered context name (families show one example each)."""
    _load_all()
    return list(_NAMED)


def family_examples() -> list[str]:
    _load_all()
    return [ex for _, _, ex in _FAMILIES]


def get(name) -> Context:
    """The context called ``name`` (a Context passes through unchanged)."""
    if isinstance(name, Context):
        return name
    if not isinstance(name, str):
        raise ContextError(f"context name must be a string, got {type(name).__name__}")
    _load_all()
    key = name.strip()
    if key in _CACHE:
        return _CACHE[key]
    ctx = None
    if key in _NAMED:
        ctx = _NAMED[key]()
    else:
        for pat, factory, _ in _FAMILIES:
            m = pat.match(key)
            if m:
                ctx = factory(m)
                break
    if ctx is None:
        raise ContextError(
            f"unknown context {name!r}; known contexts: {', '.join(_NAMED)}; "
            f"families: {', '.join(ex for _, _, ex in _FAMILIES)}")
    _CACHE[key] = ctx
    return ctx


_LOADED = False


def _load_all() -> None:
    """Import the context modules (each registers itself) once."""
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    import importlib
    for mod in ("float64", "binary", "exact", "mpmath_ctx", "complex128", "interval", "dual"):
        try:
            importlib.import_module(f"{__package__}.{mod}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__package__}.{mod}":
                raise


# float64 is always present.
def _f64():
    from .float64 import Float64Context
    return Float64Context()


register_name("float64", _f64)
