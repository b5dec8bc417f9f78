"""Live progress on stderr: the run's header first, then per chunk of samples and per node
of the fold, with an ETA weighted by each node's estimated cost.

One sample of a real network through an oracle context takes minutes per node, so a bar
that moves per chunk of samples sits still for the whole run: the fold reports every node
it ran (``graph.denote_all(..., on_node=...)``) and the bar advances by that node's share
of the work, ``cost(node) x rows in the chunk``.  A ticker thread redraws the bar every
second (elapsed time, the running node and how long it has run), so the screen moves from
the first second even while one node computes.

Shown when stderr is a TTY, unless ``--quiet``; ``--progress`` or
``SCALARLAB_PROGRESS=1`` forces it on (a log file, a CI console), ``SCALARLAB_PROGRESS=0``
off.  The CLI opens one :func:`session` per command with that decision; code that runs
evaluations reads it through :func:`shown`, :func:`header` and :func:`evaluation` (the
Python API opens no session: silent unless ``quiet=False`` on a TTY).  Nothing here runs
numerics; only this module and the commands print.
"""
from __future__ import annotations

import os
import sys
import threading
import time
from contextlib import contextmanager


#: environment override: 1/on/yes/true forces progress on, 0/off/no/false off
ENV = "SCALARLAB_PROGRESS"
_ON = ("1", "on", "yes", "true", "always")
_OFF = ("0", "off", "no", "false", "never")
#: seconds between redraws of the open bars by the ticker thread
TICK_S = 1.0
#: a scalar function (exp, tanh, ...) counts as this many multiply-adds in the cost
#: estimate: mpmath at 200 bits spends ~10x a multiplication on exp; the ETA only needs
#: the right order of magnitude per node, not a benchmark
FUNCTION_WEIGHT = 8

_SESSION = None


def add_arguments(p, *, quiet: bool = False) -> None:
    """``--progress`` (and ``--quiet`` for commands that had none)."""
    p.add_argument("--progress", action="store_true",
                   help=f"show progress on stderr even when it is not a terminal "
                        f"(default: only on a terminal; {ENV}=0/1 sets the default)")
    if quiet:
        p.add_argument("--quiet", action="store_true", help="no progress bars")


def _isatty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def wanted(quiet: bool = False, force: bool = False, stream=None) -> bool:
    """The run's decision: ``--quiet`` wins, then ``--progress``, then ``SCALARLAB_PROGRESS``,
    else whether ``stream`` (stderr) is a terminal."""
    if quiet:
        return False
    if force:
        return True
    env = os.environ.get(ENV, "").strip().lower()
    if env in _ON:
        return True
    if env in _OFF:
        return False
    if env:
        from .errors import ExperimentError   # (here: --help loads no contexts)
        raise ExperimentError(f"{ENV}={os.environ[ENV]!r}: give 1 (progress on stderr "
                              f"even when it is not a terminal) or 0 (never)")
    return _isatty(sys.stderr if stream is None else stream)


class Session:
    """One command's progress decision and the stream it writes to."""

    def __init__(self, enabled: bool, stream):
        self.enabled, self.stream = bool(enabled), stream


@contextmanager
def session(enabled: bool, stream=None):
    """Within the block, :func:`shown`, :func:`header` and :func:`evaluation` follow
    ``enabled`` (the CLI's :func:`wanted`) and write to ``stream`` (default stderr)."""
    global _SESSION
    prev = _SESSION
    _SESSION = Session(enabled, sys.stderr if stream is None else stream)
    try:
        yield _SESSION
    finally:
        _SESSION = prev


def _stream():
    return _SESSION.stream if _SESSION is not None else sys.stderr


def shown(quiet: bool = False) -> bool:
    """Whether a progress display is wanted here: never with ``quiet``; else the open
    session's decision, or (no session: the Python API) whether stderr is a terminal."""
    if quiet:
        return False
    if _SESSION is not None:
        return _SESSION.enabled
    return _isatty(sys.stderr)


def header_shown() -> bool:
    """Whether :func:`header` prints (a command's progress is shown): build the lines only
    then."""
    return _SESSION is not None and _SESSION.enabled


def header(lines) -> None:
    """Print a command's header lines to the progress stream before its work starts, when
    progress is shown (stdout keeps its own header and table at the end, unchanged)."""
    if not header_shown():
        return
    out = _SESSION.stream
    try:
        out.write("".join(f"{line}\n" for line in lines))
        out.flush()
    except (OSError, ValueError):                          # pragma: no cover
        pass


def decided():
    """The open session's decision (True/False), or None outside a session."""
    return None if _SESSION is None else _SESSION.enabled


def stream():
    """Where progress goes: the session's stream, else stderr."""
    return _stream()


def loop(items, desc: str, unit: str = "it"):
    """Iterate ``items`` (a sequence) with a bar on the progress stream, redrawn every
    second, inside a command whose progress is shown; plain iteration otherwise (the
    Python API opens no session, so it stays silent)."""
    if not (_SESSION is not None and _SESSION.enabled):
        yield from items
        return
    from tqdm.auto import tqdm
    b = tqdm(total=len(items), desc=desc, unit=unit, leave=False, file=_SESSION.stream,
             dynamic_ncols=True)
    try:
        with ticking(b):
            for item in items:
                yield item
                b.update(1)
    finally:
        b.close()


# ----------------------------------------------------------------------- node costs
def _size(shape) -> int:
    n = 1
    for s in shape:
        n *= int(s)
    return n


def node_cost(graph, node) -> int:
    """Estimated scalar operations of one node per sample: output size x fan-in for dot
    products (linear, conv: the weight's entries per output channel; matmul: the inner
    dimension), input size for other reductions (sum, softmax, pooling), output size for
    elementwise and shape ops (x :data:`FUNCTION_WEIGHT` for scalar functions).  Input
    nodes cost 0 (converted, not evaluated)."""
    from scalarlab.graph.optable import OPS, full_attrs
    op = node.kind.op
    if op == "input":
        return 0
    out = max(1, _size(node.out_shape))
    rec = OPS.get(op)
    if rec is None:
        return out
    in_shapes = [tuple(graph.nodes[p].out_shape) for p in node.parents]
    if rec.dot:
        fan_in = 1
        if rec.params and rec.param_shapes is not None:
            try:
                shapes = rec.param_shapes(in_shapes, full_attrs(rec, node.kind.attrs),
                                          tuple(node.out_shape))
                w = tuple(shapes[rec.params[0]])
                fan_in = _size(w[1:]) if len(w) > 1 else 1
            except Exception:            # an estimate: a shape rule's refusal is no error here
                fan_in = 1
        elif in_shapes and in_shapes[0]:
            fan_in = int(in_shapes[0][-1])
        return out * max(1, fan_in)
    if rec.reduces:
        return max(out, sum(_size(s) for s in in_shapes))
    from scalarlab.scalars.functions import FUNCTIONS
    return out * (FUNCTION_WEIGHT if op in FUNCTIONS else 1)


def node_costs(graph) -> list:
    """:func:`node_cost` of every node, in id order."""
    return [node_cost(graph, n) for n in graph.nodes]


class Ticker:
    """Calls ``redraw()`` every :data:`TICK_S` seconds on a daemon thread until
    :meth:`stop`: a bar whose next update is minutes away still shows its elapsed time
    moving (tqdm redraws only when updated)."""

    def __init__(self, redraw):
        self._redraw = redraw
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="scalarlab-progress",
                                        daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(TICK_S):
            try:
                self._redraw()
            except Exception:            # pragma: no cover - a closed stream: stop drawing
                return

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join()


@contextmanager
def ticking(bar):
    """Within the block, the tqdm ``bar`` (if shown) is redrawn every second."""
    if bar is None or getattr(bar, "disable", False):
        yield bar
        return
    t = Ticker(bar.refresh)
    try:
        yield bar
    finally:
        t.stop()


# ------------------------------------------------------------------ the evaluation bar
class Evaluation:
    """The bar of one evaluation of a graph over ``samples`` rows in chunks (one context's,
    or the reference's): ``chunk(start, rows)`` before each chunk, :meth:`node_done` as the
    fold's ``on_node`` hook, :meth:`close` at the end.  The bar's total is
    ``sum(cost) x samples``; its ETA is elapsed x remaining / done (no smoothing: nodes
    differ in cost by orders of magnitude, the weights already say how)."""

    def __init__(self, graph, samples: int, chunk_rows: int, desc: str, stream):
        from tqdm.auto import tqdm
        nodes = list(graph.nodes)
        self.costs = node_costs(graph)
        self.ops = [str(n.kind.op) for n in nodes]
        self.work = [i for i, n in enumerate(nodes) if n.kind.op != "input"]
        self._pos = {i: k for k, i in enumerate(self.work)}
        per_sample = max(1, sum(self.costs))
        self.samples = max(1, int(samples))
        self.step = max(1, int(chunk_rows))
        self.n_chunks = max(1, -(-self.samples // self.step))
        self.per_sample = per_sample
        self.bar = tqdm(total=per_sample * self.samples, desc=desc, leave=False, file=stream,
                        dynamic_ncols=True, smoothing=0, unit="op", unit_scale=True,
                        bar_format="{desc}: {percentage:3.0f}%|{bar}| "
                                   "{elapsed}<{remaining}{postfix}")
        self.k_chunk = 1
        self.rows = 0
        self.base = 0                    # work done before this chunk
        self.running = None              # node id now computing
        self.since = time.monotonic()
        self._lock = threading.RLock()
        self._drawn = 0.0                # monotonic time of the last redraw
        self._show(force=True)
        self._ticker = Ticker(lambda: self._show(force=True))

    # the fold's hooks
    def chunk(self, start: int, rows: int) -> None:
        """A chunk of ``rows`` samples starts at ``start``: the bar joins its boundary
        (nodes the fold skipped, such as dependents of a failed node, are done)."""
        with self._lock:
            self.base = self.per_sample * int(start)
            self.rows = int(rows)
            self.k_chunk = int(start) // self.step + 1
            self._goto(self.base)
            self._running(self.work[0] if self.work else None)
        self._show(force=True)

    def node_done(self, node_id: int) -> None:
        """``on_node`` of :func:`graph.denote_all`: node ``node_id`` ran on the chunk."""
        # no lock: plain assignments under the GIL; the ticker only reads them and draws
        # under the lock (a graph of thousands of tiny nodes pays ~1 us per node here)
        self.bar.n = min(self.bar.total, self.bar.n + self.costs[node_id] * self.rows)
        k = self._pos.get(node_id)
        self.running = self.work[k + 1] if k is not None and k + 1 < len(self.work) else None
        now = time.monotonic()
        self.since = now
        if now - self._drawn >= self.bar.mininterval:
            self._show(force=True)

    def end_chunk(self) -> None:
        with self._lock:
            self._goto(min(self.bar.total, self.base + self.per_sample * self.rows))
            self._running(None)
        self._show()

    def close(self) -> None:
        self._ticker.stop()
        self.bar.close()

    # display
    def _goto(self, n) -> None:
        self.bar.n = n

    def _running(self, node_id) -> None:
        self.running, self.since = node_id, time.monotonic()

    def postfix(self) -> str:
        """``chunk c/C, node i op (k/K), s s on it``: where the fold is now."""
        parts = []
        if self.n_chunks > 1:
            parts.append(f"chunk {self.k_chunk}/{self.n_chunks}")
        i = self.running
        if i is not None:
            k = self._pos.get(i, 0) + 1
            held = time.monotonic() - self.since
            parts.append(f"node {i} {self.ops[i]} ({k}/{len(self.work)})" +
                         (f", {held:.0f} s on it" if held >= 2 else ""))
        return ", ".join(parts)            # tqdm puts ", " before a postfix

    def _show(self, force: bool = False) -> None:
        """Redraw, at most every ``bar.mininterval`` seconds unless ``force``: a graph of
        thousands of cheap nodes must not spend its time writing to the terminal."""
        now = time.monotonic()
        if not force and now - self._drawn < self.bar.mininterval:
            return
        with self._lock:
            self._drawn = now
            self.bar.set_postfix_str(self.postfix(), refresh=False)
            self.bar.refresh()



class _Silent:
    """:class:`Evaluation`'s interface, doing nothing (progress not shown)."""

    def chunk(self, start, rows):
        pass

    def end_chunk(self):
        pass

    def close(self):
        pass

    node_done = None                     # the fold's hook stays None: zero cost


def evaluation(graph, samples: int, chunk_rows: int, desc: str, *, quiet: bool = False):
    """The progress of one evaluation of ``graph`` over ``samples`` rows in chunks of
    ``chunk_rows``: an :class:`Evaluation` when :func:`shown`, else a silent stand-in
    whose ``node_done`` is None (pass it as the fold's ``on_node``).  Use as::

        ev = progress.evaluation(graph, n, step, "reference mpmath:200")
        try:
            for start in range(0, n, step):
                ev.chunk(start, min(step, n - start))
                graph.denote_all(..., on_node=ev.node_done)
                ev.end_chunk()
        finally:
            ev.close()
    """
    if not shown(quiet):
        return _Silent()
    return Evaluation(graph, samples, chunk_rows, desc, _stream())
