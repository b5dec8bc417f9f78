"""``scalarlab``: one CLI, one subcommand per module in :mod:`experiments.commands`."""
from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from scalarlab.scalars.errors import ScalarLabError

from . import commands


class _Parser(argparse.ArgumentParser):
    """argparse that rejects an option given twice (``--steps 1 --steps 2``)."""

    def parse_known_args(self, args=None, namespace=None):
        args = list(sys.argv[1:] if args is None else args)
        seen = set()
        for tok in args:
            if tok == "--":
                break
            if tok.startswith("--"):
                key = tok.split("=", 1)[0]
                if key in seen:
                    self.error(f"option {key} given more than once")
                seen.add(key)
        return super().parse_known_args(args, namespace)


def _command_modules():
    mods = []
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        mod = importlib.import_module(f"{commands.__name__}.{info.name}")
        if hasattr(mod, "NAME") and hasattr(mod, "run"):
            mods.append(mod)
    return mods


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="scalarlab",
                     description="scalarlab: what floating point does to a computation.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for mod in _command_modules():
        p = sub.add_parser(mod.NAME, help=getattr(mod, "HELP", ""),
                           description=getattr(mod, "HELP", ""))
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    try:
        return int(args._run(args) or 0)
    except ScalarLabError as exc:
        print(f"scalarlab {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # pragma: no cover
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
