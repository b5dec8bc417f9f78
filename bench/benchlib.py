"""What the side-by-side benchmarks share: one thread for every numeric library, the
timing of several callables interleaved (best of k, wall and CPU seconds), and the MLP
workloads (an IR graph; a tape step and its torch counterpart).

Import it before numpy: the thread settings must be in the environment first.  The
scripts run as ``python bench/NAME.py``, so this folder is on ``sys.path``.
"""
from __future__ import annotations

import os
import time

for _var in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")


def interleaved(fns, repeats: int, *, inner: int = 1, warm: bool = False):
    """``(wall, cpu)``: best-of-``repeats`` seconds per call of each function, the calls
    interleaved (f0, f1, ..., f0, f1, ...) so all see the same machine load; ``inner``
    calls per timing; ``warm``: call each once first (allocations, BLAS threads)."""
    wall = [float("inf")] * len(fns)
    cpu = [float("inf")] * len(fns)
    if warm:
        for f in fns:
            f()
    for _ in range(repeats):
        for k, f in enumerate(fns):
            c, t = time.process_time(), time.perf_counter()
            for _ in range(inner):
                f()
            wall[k] = min(wall[k], (time.perf_counter() - t) / inner)
            cpu[k] = min(cpu[k], (time.process_time() - c) / inner)
    return wall, cpu


def mlp_graph(sizes, rng):
    """``(Graph, Payload)``: linear layers of the given widths with relu between them,
    He-scaled normal weights."""
    import numpy as np
    from scalarlab.graph import Graph, Node, Payload
    nodes = [Node(0, [], "input", [sizes[0]])]
    payload = {}
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        nid = len(nodes)
        nodes.append(Node(nid, [nid - 1], "linear", [b]))
        payload[nid] = {"W": rng.standard_normal((b, a)) / np.sqrt(a),
                        "b": rng.standard_normal(b) * 0.01}
        if i < len(sizes) - 2:
            nodes.append(Node(nid + 1, [nid], "relu", [b]))
    return Graph(nodes), Payload(payload)


def mlp_tape(ctx, params, x, y):
    """One forward + backward of the 2-layer relu MLP with MSE loss on the tape in ``ctx``:
    ``(loss, [dW1, db1, dW2, db2])``."""
    from scalarlab.tape import TapeBuilder, backward
    b = TapeBuilder(ctx)
    W1, b1, W2, b2 = (b.leaf(p, name=n) for p, n in zip(params, ("W1", "b1", "W2", "b2")))
    xi, yi = b.const(x, name="x"), b.const(y, name="y")
    h = b.relu(b.linear(xi, W1, b1))
    loss = b.apply("mse_loss", b.linear(h, W2, b2), yi)
    g = backward(b.tape, loss)
    return b.tape.value(loss), [g[W1], g[b1], g[W2], g[b2]]


def mlp_torch(torch, params, x, y):
    """The same step in torch autograd: ``(loss, grads)``."""
    ps = [p.detach().requires_grad_(True) for p in params]
    h = torch.relu(torch.nn.functional.linear(x, ps[0], ps[1]))
    loss = torch.nn.functional.mse_loss(torch.nn.functional.linear(h, ps[2], ps[3]), y)
    loss.backward()
    return loss, [p.grad for p in ps]


def run_json_child(code: str, nan_fields, timeout: float | None = None) -> dict:
    """Run ``python -c code`` in a fresh process (peak memory of one run alone) and return
    the JSON object on its last stdout line; on failure, NaN ``nan_fields`` and a status
    naming the exit code and the child's last stderr line; past ``timeout`` seconds (wall)
    the child is killed and the status is ``"timeout"``."""
    import json
    import subprocess
    import sys
    try:
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return dict({k: float("nan") for k in nan_fields}, status="timeout")
    if r.returncode != 0:
        return dict({k: float("nan") for k in nan_fields},
                    status=f"failed (exit {r.returncode}"
                           + ("; killed: out of memory?" if r.returncode == -9 else "") + "): "
                           + (r.stderr.strip().splitlines() or [""])[-1])
    return json.loads(r.stdout.strip().splitlines()[-1])
