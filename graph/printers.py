"""Human printers for graphs: the seed-style listing and GraphViz DOT.

Neither is a serialization format (that is :mod:`graph.fileformat`); their layout may
change as the IR grows.
"""
from __future__ import annotations

from .node import Graph, fmt_shape


def node_line(n) -> str:
    ps = "[" + ", ".join(str(p) for p in n.parents) + "]"
    return f"{n.id}: {n.kind} parents={ps} out={fmt_shape(n.out_shape)}"


def listing(g: Graph) -> str:
    """``0: input parents=[] out=[4]`` — one line per node, in array order."""
    return "\n".join(node_line(n) for n in g.nodes)


def _dot_escape(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"')


def to_dot(g: Graph) -> str:
    """GraphViz text; edges point from producer to consumer (render with ``dot -Tpng``)."""
    lines = ["digraph IR {", "  rankdir=LR;", "  node [shape=box, fontsize=10];"]
    for n in g.nodes:
        label = _dot_escape(f"{n.id}: {n.kind}") + "\\n" + _dot_escape(f"out={fmt_shape(n.out_shape)}")
        lines.append(f'  n{n.id} [label="{label}"];')
    for n in g.nodes:
        for p in n.parents:
            lines.append(f"  n{p} -> n{n.id};")
    lines.append("}")
    return "\n".join(lines)
