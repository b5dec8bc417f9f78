"""``scalarlab quickstart-mlp``: train the 2-8-1 ReLU MLP on the built-in 25-point data set.

Prints a fixed-layout transcript: the held-out target and untrained prediction, the data
set size, the mean loss before training, a ``step k: loss=...`` line every ``--log-every``
steps (the loss of that single mini-batch update), the mean loss after, the run's
settings and the trained held-out prediction.  ``--execution typed-graph`` records the
loss once and re-evaluates it; its transcript is identical digit for digit, because both
paths run the same program text through the same op-table rules.
"""
from __future__ import annotations

import argparse
from . import help_of

NAME = "quickstart-mlp"
HELP = help_of(NAME)

HIDDEN = 8
BATCH = 5
LR = "0.1"
MOMENTUM = "0.9"


def _count(what):
    def parse(text):
        try:
            v = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what} must be an integer, got {text!r}") from None
        if v < 0 or (what == "log-every" and v < 1):
            raise argparse.ArgumentTypeError(f"{what} must be {'>= 1' if what == 'log-every' else '>= 0'}, got {v}")
        return v
    return parse


def _seed(text):
    try:
        v = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"seed must be an integer, got {text!r}") from None
    if v < 0:                                   # numpy generators take seeds >= 0
        raise argparse.ArgumentTypeError(f"seed must be >= 0, got {v}")
    return v


def _arithmetic(text):
    from scalarlab import scalars
    if text not in scalars.names():
        raise argparse.ArgumentTypeError(f"unknown arithmetic {text!r}; known: "
                                         f"{', '.join(scalars.names())}")
    return text


def add_arguments(parser) -> None:
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="cpu (reference capsules) or cuda (numba_cuda capsules, eager only)")
    parser.add_argument("--execution", choices=("eager", "typed-graph"), default="eager",
                        help="eager: a tape per step; typed-graph: record once, reuse")
    parser.add_argument("--steps", type=_count("steps"), default=2, help="training steps")
    parser.add_argument("--seed", type=_seed, default=2026, help="generator seed")
    parser.add_argument("--arithmetic", type=_arithmetic, default="binary32",
                        help="scalar context: binary32, float64, bfloat16, rational, ...")
    parser.add_argument("--log-every", type=_count("log-every"), default=1,
                        help="print the step loss every N steps, from step 0 (default 1: "
                             "one line per step; 10: steps 0, 10, 20, ...)")
    parser.add_argument("--show-backend", action="store_true",
                        help="print the capsule selected for each op, the first time")
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def build(args, announce=None):
    """``(session, loader, data)`` for the parsed arguments."""
    from scalarlab.tape.training.data import Loader, heldout, regression25
    from scalarlab.tape.training.layers import Linear, ReLU, Sequential
    from scalarlab.tape.training.optim import SGD
    from scalarlab.tape.training.trainer import TrainingSession
    model = Sequential(Linear(2, HIDDEN), ReLU(), Linear(HIDDEN, 1))
    sess = TrainingSession(model, args.arithmetic, SGD(LR, MOMENTUM),
                           execution=args.execution, device=args.device, seed=args.seed,
                           show_backend=announce)
    ctx = sess.ctx
    X, Y = regression25()
    hx, hy = heldout()
    X, Y, hx, hy = (ctx.convert(a) for a in (X, Y, hx, hy))
    return sess, Loader(X, Y, BATCH, args.seed), (X, Y, hx, hy)


def _vec(ctx, v) -> str:
    n = 1
    for d in ctx.shape(v):
        n *= int(d)
    return ctx.format(ctx.reshape(v, (n,)), 6)


def scalar_label(ctx) -> str:
    """The Python type that holds one scalar of the context's values."""
    import numpy as np
    v = np.asarray(ctx.convert([1]))
    return "float64" if v.dtype != object else type(v.reshape(-1)[0]).__name__


def transcript(args, out=print) -> dict:
    """Run the quickstart and emit its lines through ``out``; returns the figures."""
    lines_sink = out if args.show_backend else None
    sess, loader, (X, Y, hx, hy) = build(args, announce=lines_sink)
    ctx = sess.ctx
    out(f"== Quickstart: simple MLP training (seed={args.seed}, steps={args.steps}) ==")
    out(f"target(heldout)    = {_vec(ctx, hy)}")
    untrained = sess.predict(hx)
    out(f"untrained(heldout) = {_vec(ctx, untrained)}")
    out(f"dataset size = {len(X)}")
    before = sess.loss(X, Y)
    out(f"mean_loss(before training) = {ctx.format(before, 6)}")
    steps = []
    for k in range(args.steps):
        xb, yb = loader.next()
        loss = sess.step(xb, yb)
        steps.append(ctx.format(loss, 6))
        if k % args.log_every == 0:
            out(f"step {k}: loss={steps[-1]}")
    after = sess.loss(X, Y)
    out(f"mean_loss(after training) = {ctx.format(after, 6)}")
    out(f"steps={args.steps} arithmetic={ctx.name} scalar={scalar_label(ctx)}")
    out(f"  loss={ctx.format(before, 6)} -> {ctx.format(after, 6)}")
    trained = sess.predict(hx)
    out(f"trained(heldout) = {_vec(ctx, trained)}")
    return {"seed": args.seed, "steps": args.steps, "arithmetic": ctx.name,
            "execution": args.execution, "device": args.device,
            "scalar": scalar_label(ctx), "target": _vec(ctx, hy),
            "untrained": _vec(ctx, untrained), "dataset_size": len(X),
            "mean_loss_before": ctx.format(before, 6), "step_losses": steps,
            "mean_loss_after": ctx.format(after, 6), "trained": _vec(ctx, trained)}


def run(args) -> int:
    if args.json:
        lines: list = []
        report = transcript(args, out=lines.append)
        report["lines"] = lines
        from .. import outputs
        meta = {k: report[k] for k in ("seed", "steps", "arithmetic", "execution", "device")}
        outputs.print_document(outputs.document("quickstart-mlp", meta, tables=report))
    else:
        transcript(args)
    return 0
