"""``scalarlab``: one CLI, one subcommand per module in :mod:`experiments.commands`.

Exit status of every command (README "Exit status"):

* 0: the command ran and whatever it checks held;
* 1: an error (``scalarlab <cmd>: error: ...`` on stderr: bad value, unknown context or
  graph, unreadable input, unwritable output, full disk) or a check that failed or checked
  nothing (violations, a row without a box or a successful sample, non-finite weights);
* 2: a malformed command line (unknown flag, bad flag value), refused before any work;
* 3: an internal error (a bug: the one line names the exception; ``SCALARLAB_TRACEBACK=1``
  shows the traceback);
* 128+n: ended by signal n: 130 Ctrl-C (SIGINT), 143 SIGTERM, 129 SIGHUP; outputs being
  written are left as they were (the one line says which were already published).
"""
from __future__ import annotations

import argparse
import errno
import importlib
import os
import re
import sys

# Nothing of the lab is imported here: ``scalarlab --help`` and ``--version`` read the light
# command table (experiments.commands.COMMANDS) and package metadata only, and a command's
# module (with numpy, the op table, the contexts and their kernels) is imported when that
# command is parsed for running or for its own --help.
from .commands import COMMANDS

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 130

# A value that starts with "-" but is a number or a list of numbers: "-0.3,0.2", "-1e-3".
_NEGATIVE_VALUE = re.compile(r"-(\d|\.\d|inf|nan)", re.IGNORECASE)


class _HelpFormatter(argparse.HelpFormatter):
    """Every option's help ends with its default (unless the text already states it)."""

    def _get_help_string(self, action):
        text = action.help or ""
        d = action.default
        if ("default" not in text and d is not None and d is not False
                and d != argparse.SUPPRESS and action.option_strings and action.nargs != 0):
            if isinstance(d, (list, tuple)):
                d = ",".join(map(str, d))
            text += f" (default: {d})"
        return text


class _Parser(argparse.ArgumentParser):
    """argparse with the lab's rules: an option given twice is refused (``--steps 1
    --steps 2``) unless it collects its values (``contexts --name a --name b``); a
    negative number after an option is its value (``--input -0.3,0.2``);
    errors are one line ``<prog>: error: ...`` with exit status 2."""

    def __init__(self, *a, **kw):
        kw.setdefault("formatter_class", _HelpFormatter)
        # an abbreviation (--cont for --contexts) is an unknown flag, not a guess
        kw["allow_abbrev"] = False
        super().__init__(*a, **kw)

    def parse_known_args(self, args=None, namespace=None):
        args = list(sys.argv[1:] if args is None else args)
        glued, seen = [], set()
        for i, tok in enumerate(args):
            if tok == "--":
                glued.extend(args[i:])
                break
            prev = glued[-1] if glued else None
            if (prev is not None and _NEGATIVE_VALUE.match(tok) and "=" not in prev
                    and prev in self._option_string_actions
                    and self._option_string_actions[prev].nargs is None
                    and self._option_string_actions[prev].option_strings):
                glued[-1] = f"{prev}={tok}"          # --input -0.3,0.2 -> --input=-0.3,0.2
                continue
            if tok.startswith("--"):
                key = tok.split("=", 1)[0]
                # each parser checks its own options (a command's parser gets its tokens)
                action = self._option_string_actions.get(key)
                repeatable = isinstance(action, (argparse._AppendAction,
                                                 argparse._CountAction))
                if key in seen and action is not None and not repeatable:
                    self.error(f"option {key} given more than once")
                seen.add(key)
            glued.append(tok)
        return super().parse_known_args(glued, namespace)

    #: the subcommand being parsed (set by main), so that the top-level parser's errors
    #: about the subcommand's arguments ("unrecognized arguments") name it
    command = ""
    commands: tuple = ()

    def error(self, message):
        message = " ".join(str(message).split())
        prog = f"{self.prog} {self.command}" if self.command else self.prog
        self.exit(EXIT_USAGE, f"{prog}: error: {message} (see {prog} --help)\n")


def command_module(name: str):
    """The module of command ``name`` (imported now, on first use)."""
    return importlib.import_module(f"{__package__}.commands.{COMMANDS[name].module}")


def _version() -> str:
    # package metadata, not imports: --version must not pay for numpy/gmpy2/mpmath imports
    from importlib.metadata import PackageNotFoundError, version

    def v(dist):
        try:
            return version(dist)
        except PackageNotFoundError:
            return "not installed"
    return (f"scalarlab {v('scalarlab')} (numpy {v('numpy')}, gmpy2 {v('gmpy2')}, "
            f"mpmath {v('mpmath')}, python {sys.version.split()[0]})")


class _VersionAction(argparse.Action):
    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS,
                 help="print the versions of scalarlab, numpy, gmpy2, mpmath and exit"):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(_version())
        parser.exit()


def build_parser(only: str | None = "*") -> argparse.ArgumentParser:
    """The ``scalarlab`` parser.  ``only``: the command whose arguments are added (its
    module imported); the others get their name and help line from the light table.
    The default ``"*"`` adds every command's arguments (tests and docs walk them all);
    ``None`` adds none (``scalarlab --help``)."""
    parser = _Parser(prog="scalarlab",
                     description="scalarlab: what floating point does to a computation.",
                     epilog="exit status: 0 ok; 1 error or failed check; 2 bad command line; "
                            "3 internal error; 130 interrupted")
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, entry in COMMANDS.items():
        # help= is %-formatted by argparse, description= is not: escape only the former
        p = sub.add_parser(name, help=entry.help.replace("%", "%%"), description=entry.help)
        if only == "*" or only == name:
            mod = command_module(name)
            mod.add_arguments(p)
            p.set_defaults(_run=mod.run)
    parser.commands = tuple(sub.choices)
    return parser


def _command_name(argv) -> str:
    for tok in argv:
        if not tok.startswith("-"):
            return tok
    return ""


def _say(cmd: str, text: str) -> None:
    prog = f"scalarlab {cmd}" if cmd else "scalarlab"
    try:
        print(f"{prog}: {text}", file=sys.stderr)
        sys.stderr.flush()
    except (OSError, ValueError):                            # pragma: no cover
        pass


def _silence_stdout() -> None:
    """After a failed write to stdout (closed pipe, full disk): point the descriptor at
    /dev/null so the interpreter's final flush does not print a second error."""
    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, sys.stdout.fileno())
        os.close(fd)
    except (OSError, ValueError, AttributeError):            # pragma: no cover
        pass


def _lab_error():
    from scalarlab.scalars.errors import ScalarLabError
    return ScalarLabError


#: optional dependencies (top-level import name -> the extra that installs it)
OPTIONAL_EXTRAS = {"dask": "dask", "distributed": "dask", "torch": "torch", "onnx": "onnx",
                   "onnxruntime": "onnx", "onnxscript": "onnx", "numba_cuda": "cuda"}


def missing_extra(exc: BaseException) -> str | None:
    """The one-line hint for an ImportError of an optional dependency, else None."""
    if not isinstance(exc, ImportError):
        return None
    top = (getattr(exc, "name", None) or "").split(".")[0]
    extra = OPTIONAL_EXTRAS.get(top)
    if extra is None:
        return None
    return (f"error: this needs {top}, an optional dependency that is not installed: "
            f"pip install 'scalarlab[{extra}]'")


def _check_outputs(parser, args) -> None:
    """Before the work: outputs vs inputs, sidecars, plot backend, stale temporaries."""
    from . import outputs
    problem = outputs.prepare(args)
    if problem:
        parser.error(problem)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    cmd = _command_name(argv)
    command_line = None
    from . import interrupts
    undo = interrupts.setup_process()
    try:
        # --help, --version, usage errors: SystemExit; only the named command is built
        parser = build_parser(cmd if cmd in COMMANDS else None)
        if cmd in parser.commands:
            parser.command = cmd
        args = parser.parse_args(argv)
        if not getattr(args, "_run", None):
            parser.print_help()
            return EXIT_USAGE
        cmd = args.command
        from . import outputs
        command_line = outputs.COMMAND_LINE
        command_line[:] = argv
        _check_outputs(parser, args)
        from . import progress      # --quiet / --progress / SCALARLAB_PROGRESS / a TTY
        shown = progress.wanted(bool(getattr(args, "quiet", False)),
                                bool(getattr(args, "progress", False)))
        from .first_run import watch     # one line if compiling kernels keeps us waiting
        watcher = watch(lambda text: _say(cmd, text), bool(getattr(args, "quiet", False)))
        try:
            with progress.session(shown):
                status = int(args._run(args) or 0)
        finally:
            if watcher is not None:
                watcher.stop()
        sys.stdout.flush()
        return status
    except SystemExit:
        raise
    except KeyboardInterrupt as exc:       # Ctrl-C, SIGTERM, SIGHUP (interrupts.Terminated)
        _say(cmd, interrupts.message(exc))
        return interrupts.exit_status(exc)
    except _lab_error() as exc:          # evaluated only when an exception gets here
        _say(cmd, "error: " + " ".join(str(exc).split("\n")))
        return EXIT_ERROR
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_OK                   # `scalarlab ... | head`: the reader had enough
    except OSError as exc:
        stdout_failed = exc.errno in (errno.ENOSPC, errno.EIO, errno.EPIPE, errno.EBADF)
        if stdout_failed:
            _silence_stdout()
        where = f"{exc.filename}: " if exc.filename else ("standard output: " if stdout_failed
                                                         else "")
        _say(cmd, f"error: {where}{exc.strerror or exc}")
        return EXIT_ERROR
    except MemoryError:
        _say(cmd, "error: out of memory (use fewer samples or a smaller graph)")
        return EXIT_ERROR
    except ImportError as exc:
        hint = missing_extra(exc)
        if hint is None:
            return _internal(cmd, exc)
        _say(cmd, hint)
        return EXIT_ERROR
    except Exception as exc:                       # a bug: one line, traceback on request
        return _internal(cmd, exc)
    finally:
        if command_line is not None:
            command_line.clear()
        undo()


def _internal(cmd: str, exc: BaseException) -> int:
    """A bug: one line naming the exception (the traceback with SCALARLAB_TRACEBACK=1)."""
    if os.environ.get("SCALARLAB_TRACEBACK"):
        raise exc
    msg = " ".join(str(exc).split())
    _say(cmd, f"error: internal error: {type(exc).__name__}: {msg} "
              "(SCALARLAB_TRACEBACK=1 shows the traceback)")
    return EXIT_INTERNAL


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
