"""Progress from the first second (issue 31), measured on a small CNN whose mpmath
reference takes seconds per node: when the header and the first bar reach stderr, how
often the screen changes, how good the cost-weighted ETA is against a count of nodes,
and what the fold's per-node hook costs.

    python bench/progress.py [--side 32] [--samples 1]

Prints figures and ratios (CPU seconds where stated: the machine may be shared).
"""
from __future__ import annotations

import argparse
import io
import os
import sys
import tempfile
import time

import benchlib  # noqa: F401  (thread settings before numpy)
import numpy as np


def cnn(side: int, rng):
    """conv(3->16) relu conv(16->32, stride 2) relu conv(32->32) relu flatten linear(->10)."""
    from scalarlab.graph import Graph, Node, OpKind, Payload
    h = (side + 1) // 2
    g = Graph([Node(0, [], "input", [3, side, side]),
               Node(1, [0], OpKind("conv2d", kernel_size=3, out_channels=16, padding=1),
                    [16, side, side]),
               Node(2, [1], "relu", [16, side, side]),
               Node(3, [2], OpKind("conv2d", kernel_size=3, out_channels=32, padding=1,
                                   stride=2), [32, h, h]),
               Node(4, [3], "relu", [32, h, h]),
               Node(5, [4], OpKind("conv2d", kernel_size=3, out_channels=32, padding=1),
                    [32, h, h]),
               Node(6, [5], "relu", [32, h, h]),
               Node(7, [6], "flatten", [32 * h * h]),
               Node(8, [7], "linear", [10])])
    p = Payload()
    for i, (o, c) in {1: (16, 3), 3: (32, 16), 5: (32, 32)}.items():
        p.set(i, {"weight": rng.normal(0, (2 / (9 * c)) ** 0.5, (o, c, 3, 3)),
                  "bias": rng.normal(0, 0.1, o)}, op="conv2d")
    p.set(8, {"W": rng.normal(0, (1 / (32 * h * h)) ** 0.5, (10, 32 * h * h)),
              "b": rng.normal(0, 0.1, 10)}, op="linear")
    return g, p


def first_output(path, xpath, samples: int) -> None:
    """The CLI in a fresh process (cold imports included), stderr and stdout read as they
    come: when the header, the first bar and the first advance reach the screen."""
    import selectors
    import subprocess
    argv = [sys.executable, "-m", "scalarlab.experiments", "compare", path, "--input", xpath,
            "--contexts", "float64,binary32,bfloat16"] + \
        (["--samples", str(samples)] if samples > 1 else [])
    env = dict(os.environ, SCALARLAB_PROGRESS="1")
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    sel = selectors.DefaultSelector()
    sel.register(proc.stderr, selectors.EVENT_READ, "err")
    sel.register(proc.stdout, selectors.EVENT_READ, "out")
    log = {"err": [], "out": []}
    open_ = 2
    while open_:
        for key, _ in sel.select():
            data = os.read(key.fileobj.fileno(), 65536)
            if not data:
                sel.unregister(key.fileobj)
                open_ -= 1
                continue
            log[key.data].append((time.perf_counter() - t0, data.decode(errors="replace")))
    rc = proc.wait()
    total = time.perf_counter() - t0
    import resource
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    err = log["err"]
    head = next(t for t, s in err if "scalarlab compare:" in s)
    draws = [(t, s) for t, s in err if "%|" in s]
    moved = next((t for t, s in draws if any(p.split("%|")[0].strip()[-3:].strip() not in
                                             ("0", "") for p in s.split("\r") if "%|" in p)),
                 float("nan"))
    gaps = np.diff([t for t, _ in err] + [total])
    print(f"compare {os.path.basename(path)} ({samples} sample(s), 3 contexts + mpmath:200), "
          f"a fresh process: exit {rc}, {total:.1f} s wall, "
          f"{cpu.ru_utime + cpu.ru_stime:.1f} s CPU; load {os.getloadavg()[0]:.1f}")
    print(f"  header on stderr at {head:.2f} s; first bar at {draws[0][0]:.2f} s; first "
          f"advance at {moved:.2f} s; {len(err)} writes to stderr, longest silence "
          f"{gaps.max():.2f} s; stdout's first byte at {log['out'][0][0]:.1f} s "
          f"(without progress, the first output at all)")


def eta_quality(g, p, x) -> None:
    """The ETA a bar would show after each node of one mpmath sample, weighted by the
    nodes' cost estimate vs by their count, against the time actually left."""
    from scalarlab import graph, scalars
    from scalarlab.experiments import progress
    ctx = scalars.get("mpmath:200")
    costs = progress.node_costs(g)
    stamps = []
    t0 = time.perf_counter()
    graph.denote_all(g, p, x, ctx, on_node=lambda i: stamps.append((i, time.perf_counter())))
    T = stamps[-1][1] - t0
    work = [i for i, _ in stamps]
    total_cost = sum(costs[i] for i in work)
    err_cost, err_count = [], []
    done_cost = 0
    for k, (i, t) in enumerate(stamps[:-1]):
        el = t - t0
        done_cost += costs[i]
        left = T - el
        eta_cost = el * (total_cost - done_cost) / done_cost
        eta_count = el * (len(work) - k - 1) / (k + 1)
        err_cost.append(abs(eta_cost - left) / T)
        err_count.append(abs(eta_count - left) / T)
    per = {g.nodes[i].kind.op + str(i): round(t - s, 2) for (i, t), (_, s) in
           zip(stamps, [(None, t0)] + stamps[:-1])}
    print(f"mpmath:200, one sample: {T:.1f} s; seconds per node {per}")
    print(f"  ETA error after each node, as a share of the run: cost-weighted mean "
          f"{np.mean(err_cost):.2f} max {np.max(err_cost):.2f}; by node count mean "
          f"{np.mean(err_count):.2f} max {np.max(err_count):.2f}")


def hook_cost() -> None:
    """CPU of the float64 fold of a 3000-node chain: no hook, a no-op hook, the bar."""
    from scalarlab import graph
    from scalarlab.experiments import progress
    from scalarlab.graph import Graph, Node
    n = 3000
    g = Graph([Node(0, [], "input", [8])] +
              [Node(i, [i - 1], "relu" if i % 2 else "neg", [8]) for i in range(1, n)])
    x = np.ones((4, 8))

    ev = progress.Evaluation(g, 4, 4, "chain", io.StringIO())

    def bar():
        ev.chunk(0, 4)
        graph.denote_all(g, None, x, "float64", on_node=ev.node_done)
        ev.end_chunk()

    def setup():
        progress.Evaluation(g, 4, 4, "chain", io.StringIO()).close()
    fns = [lambda: graph.denote_all(g, None, x, "float64"),
           lambda: graph.denote_all(g, None, x, "float64", on_node=lambda i: None), bar,
           setup]
    _, cpu = benchlib.interleaved(fns, 15, warm=True)
    ev.close()
    print(f"fold of a {n}-node float64 chain: {cpu[0] * 1e3:.1f} ms CPU without a hook; "
          f"no-op hook x{cpu[1] / cpu[0]:.3f}; the bar's per-node updates (StringIO) "
          f"x{cpu[2] / cpu[0]:.3f}; the bar's set-up and close (cost estimate of the "
          f"{n} nodes, tqdm, ticker thread) {cpu[3] * 1e3:.1f} ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--side", type=int, default=32)
    ap.add_argument("--samples", type=int, default=1)
    ap.add_argument("--skip-cli", action="store_true")
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    g, p = cnn(a.side, rng)
    hook_cost()
    x = rng.normal(0, 1, (1, 3, a.side, a.side))
    eta_quality(g, p, x)
    if not a.skip_cli:
        from scalarlab.graph import fileformat
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "cnn.json")
            fileformat.save(path, g, p, npz=True)
            xpath = os.path.join(d, "x.npy")
            np.save(xpath, x[0])
            first_output(path, xpath, a.samples)


if __name__ == "__main__":
    main()
