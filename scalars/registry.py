"""Context registry: ``scalars.get(name)`` and ``scalars.names()``.

Names are parsed, not just looked up, so families take parameters:
``binary(E,M)``, ``mpmath:PREC``, ``interval:BASE``, ``dual:BASE``.

Each context module says what it offers in two module-level tables, which the registry
reads when it first needs them; the context modules never import the registry, so the
import graph stays acyclic (registry -> context modules, never back):

* ``CONTEXT_NAMES``: ``{name: factory}``, the concrete names that ``names()`` lists;
  ``factory(get)`` builds the context, where ``get`` is :func:`get` (an interval or dual
  context resolves its base through it);
* ``CONTEXT_FAMILIES`` (optional): ``[(pattern, factory, example)]`` for parametrised
  names; ``factory(match, get)`` builds the context from the regular-expression match.

Code outside ``scalars`` may add its own contexts with :func:`register_name` and
:func:`register_family`.

Aliases (:data:`ALIASES`: ``float32``/``fp32``/``single`` for ``binary32``, ``double`` for
``float64``, ...) are the names other libraries use for the same formats; :func:`canonical`
rewrites them wherever a format name stands in a context name (``interval:fp32``,
``dual:double``, ``half+fma``), so an alias gives the very same context object as its
canonical name and every table names the canonical one.
"""
from __future__ import annotations

import importlib
import re
import threading
from typing import Callable

from .base import Context
from .errors import ContextError

# The context modules, in the order their names are listed by names().
CONTEXT_MODULES = ("float64", "binary", "mixed", "exact", "fp32_real", "mpmath_ctx", "complex128",
                   "interval", "dual", "ball")

#: other libraries' names for the lab's formats -> the canonical context name
ALIASES = {"float32": "binary32", "fp32": "binary32", "single": "binary32",
           "float16": "binary16", "fp16": "binary16", "half": "binary16",
           "bf16": "bfloat16", "double": "float64"}
# an alias is a whole format name: at the start, after a family's "prefix:" or a mixed
# context's "@", and at the end or before a variant suffix ("+fma", "/pairwise") or "@";
# "fp32-real" is a context of its own
_ALIAS = re.compile(r"(?:^|(?<=[:@]))(" + "|".join(map(re.escape, ALIASES)) + r")(?=$|[+/@])")


def canonical(name: str) -> str:
    """``name`` with every alias replaced by its canonical name (``interval:fp32`` ->
    ``interval:binary32``); other names come back stripped and otherwise unchanged."""
    return _ALIAS.sub(lambda m: ALIASES[m.group(1)], name.strip())


def aliases() -> dict[str, str]:
    """Alias -> canonical context name, for listings."""
    return dict(ALIASES)


_NAMED: dict[str, Callable[..., Context]] = {}
_FAMILIES: list[tuple[re.Pattern, Callable[..., Context], str]] = []
_CACHE: dict[str, Context] = {}
# One re-entrant lock for loading the tables and building contexts: a factory may call
# get() for its base while the lock is held (interval:binary32 builds binary32).
_LOCK = threading.RLock()
_LOADED = False


def register_name(name: str, factory: Callable[[], Context]) -> None:
    """Register a concrete context name (listed by ``names()``); ``factory()`` builds it."""
    with _LOCK:
        _NAMED[name] = lambda get: factory()


def register_family(pattern: str, factory: Callable[..., Context], example: str) -> None:
    """Register a parametrised family; ``factory(match)`` builds the context."""
    with _LOCK:
        _FAMILIES.append((re.compile(pattern + r"\Z"), lambda m, get: factory(m), example))


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
    key = canonical(name)
    ctx = _CACHE.get(key)
    if ctx is not None:
        return ctx
    with _LOCK:   # one instance per name, also when several threads ask at once
        ctx = _CACHE.get(key)
        if ctx is not None:
            return ctx
        if key in _NAMED:
            ctx = _NAMED[key](get)
        else:
            for pat, factory, _ in _FAMILIES:
                m = pat.match(key)
                if m:
                    ctx = factory(m, get)
                    break
        if ctx is None:
            raise ContextError(
                f"unknown context {name!r}; known contexts: {', '.join(_NAMED)}; "
                f"families: {', '.join(ex for _, _, ex in _FAMILIES)}; aliases: "
                f"{', '.join(ALIASES)}")
        _CACHE[key] = ctx
    return ctx


def _load_all() -> None:
    """Read the tables of every context module, once.  Double-checked: ``_LOADED`` is set
    only after every table is in, so a thread never sees a half-filled registry."""
    global _LOADED
    if _LOADED:
        return
    with _LOCK:
        if _LOADED:
            return
        # Names registered from outside before the first lookup keep their place after
        # the built-in ones.
        outside, outside_families = dict(_NAMED), list(_FAMILIES)
        _NAMED.clear()
        _FAMILIES.clear()
        for mod in CONTEXT_MODULES:
            try:
                module = importlib.import_module(f"{__package__}.{mod}")
            except ModuleNotFoundError as exc:
                if exc.name != f"{__package__}.{mod}":
                    raise
                continue
            _NAMED.update(module.CONTEXT_NAMES)
            _FAMILIES.extend((re.compile(pat + r"\Z"), factory, example)
                             for pat, factory, example in getattr(module, "CONTEXT_FAMILIES", ()))
        for nm, factory in outside.items():
            _NAMED.setdefault(nm, factory)
        _FAMILIES.extend(outside_families)
        _LOADED = True
