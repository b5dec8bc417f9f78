"""One module per ``scalarlab`` subcommand, and the light table that names them.

Each module defines ``NAME`` (the subcommand), ``add_arguments(parser)`` and ``run(args) ->
int`` (the exit status).  :data:`COMMANDS` maps each name to its module and one-line help:
``scalarlab --help`` and ``--version`` read only this table, and ``experiments.cli``
imports a command's module only when that command runs (or its own ``--help`` is asked),
so starting the CLI costs no more than the command needs.  Adding a command means adding
its module here and one row to the table (``tests/experiments/test_cli_startup.py``
checks that both agree).
"""
from __future__ import annotations

from typing import NamedTuple


class Command(NamedTuple):
    module: str     # the module's name in this package
    help: str       # one line, plain text (no %-escapes: the CLI escapes it for argparse)


COMMANDS: dict[str, Command] = {
    "bound": Command("bound", "sound upper bound on |format execution - exact real result| "
                              "over an input box (FPTaylor's symbolic Taylor forms, interval "
                              "derivatives, branch and bound), with the largest sampled "
                              "error, the ratio and the time; FPTaylor's published binary64 "
                              "bound beside its benchmarks"),
    "check": Command("check", "validate a graph: structure (ids, parents, arity), shapes, "
                              "payload (finite weights); prints ok or the error"),
    "compare": Command("compare", "evaluate a graph in several contexts against an oracle: "
                                  "per node x context max/mean absolute, relative, ULP and "
                                  "bits of error, and where divergence starts"),
    "contexts": Command("contexts", "list every scalar context with its properties (exact?, "
                                    "interval?, format, ...) and the accepted aliases"),
    "eval": Command("eval", "evaluate a graph (built-in or file) in a scalar context: output "
                            "or all node values"),
    "export": Command("export_model", "export a graph (built-in name or graph file) and its "
                                      "payload as an ONNX model"),
    "fpbench": Command("fpbench", "rounding error of FPCore benchmarks: per benchmark x "
                                  "context mean/max bits of error against a proven Arb oracle "
                                  "(Herbie's counting: NaN/inf outputs score the format's "
                                  "width), max ULPs, % samples over 1 bit, where error "
                                  "starts, invalid and unsettled samples, precondition "
                                  "rejections and skip reasons"),
    "gaps": Command("gaps", "distribution of a context's output rounding gap over sampled "
                            "inputs: percentiles, max and mean of ULPs and bits of error, with "
                            "a histogram plot"),
    "graph-semantics": Command("graph_semantics", "any graph (default six-node): centre "
                                                  "value, IBP box per node, sampled "
                                                  "containment check"),
    "import": Command("import_model", "import an ONNX model (initializers -> payload) and "
                                      "write a scalarlab graph file"),
    "ir-axis-ops": Command("ir_axis_ops", "the IR axis tutorial: softmax/layernorm/concat at "
                                          "axis 1 on [2,3,4], shapes and values"),
    "libm": Command("libm", "how far from correctly rounded are numpy's, torch's and the C "
                            "library's exp, log, sin, ...: max ulps, worst input, % not "
                            "correctly rounded, special values apart"),
    "provider-diff": Command("provider_diff", "per node ULP gap between the numba-cuda "
                                              "kernels and the binary32 reference (needs a "
                                              "GPU or NUMBA_ENABLE_CUDASIM=1)"),
    "quickstart-mlp": Command("quickstart_mlp", "train a small MLP on the 25-point "
                                                "regression set (eager or typed-graph "
                                                "execution)"),
    "reduction-order": Command("reduction_order", "evaluate a graph in binary32 and bfloat16 "
                                                  "under sequential, pairwise, fma and native "
                                                  "(float64-accumulated) orders: ULP gaps "
                                                  "between orders, per node"),
    "report": Command("report", "run the standard experiments (compare, gaps, "
                                "reduction-order) on the built-in graphs (or any graph files) "
                                "and write report.md with its tables (CSV) and plots (PNG)"),
    "show": Command("show", "print a graph (built-in name or JSON file) as a node listing or "
                            "GraphViz DOT"),
    "sweep": Command("sweep", "sampled containment sweep (radii x contexts x sample counts), "
                              "serial or on Dask"),
    "tape-demo": Command("tape_demo", "walk the tape example: recorded nodes, (4, 5), "
                                      "forward 22.5, gradients 4x and 2x"),
}


def help_of(name: str) -> str:
    """The one-line help of command ``name`` (for a module's docstring or HELP)."""
    return COMMANDS[name].help
