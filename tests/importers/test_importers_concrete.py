"""Concrete shapes at import (``--shape``, ``concrete=True``, or the fallback when the
per-example import refuses a model), integer token-id inputs and the ``take`` op.

Oracles: onnxruntime on the float32 model (binary32 within a few ulps of the output
scale) and onnx's reference evaluator on the model widened to float64 (float64 within
1e-12 relative)."""
from __future__ import annotations

import contextlib
import io
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from onnx.reference import ReferenceEvaluator

from scalarlab import graph, scalars
from scalarlab.experiments.cli import main as cli_main
from scalarlab.graph.errors import GraphError
from scalarlab.scalars.errors import ContextError
from scalarlab.graph.importers.onnx import from_onnx
from scalarlab.graph.importers.onnx_shapes import parse_shape
from scalarlab.scalars.values import Interval
from test_importers_zoo import widened


class TinyDecoder(torch.nn.Module):
    """Token ids -> embedding + positions -> causal self-attention (tril mask built from
    the run-time length) -> logits: what GPT-style exports hold (Shape of the batch,
    Range, Trilu/Where, Expand of booleans, reshapes that move the batch axis)."""

    def __init__(self, vocab=11, d=8, heads=2):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, d)
        self.pos = torch.nn.Embedding(16, d)
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.out = torch.nn.Linear(d, vocab)
        self.h = heads

    def forward(self, ids):
        n, t = ids.shape
        x = self.emb(ids) + self.pos(torch.arange(t).unsqueeze(0).expand(n, t))
        q, k, v = self.qkv(x).split(x.shape[-1], dim=-1)
        sh = lambda z: z.view(n, t, self.h, -1).transpose(1, 2)   # noqa: E731
        q, k, v = sh(q), sh(k), sh(v)
        s = q @ k.transpose(-1, -2) / (q.shape[-1] ** 0.5)
        mask = torch.tril(torch.ones(t, t, dtype=torch.bool)).expand(n, 1, t, t)
        s = s.masked_fill(~mask, -1e4)
        a = (s.softmax(-1) @ v).transpose(1, 2).reshape(n, t, -1)
        return self.out(a)


def _export(path):
    torch.manual_seed(0)
    m = TinyDecoder().eval()
    ids = torch.randint(0, 11, (2, 5))
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        torch.onnx.export(m, (ids,), str(path), dynamo=False, opset_version=17,
                          input_names=["ids"], output_names=["y"],
                          dynamic_axes={"ids": {0: "N", 1: "T"}, "y": {0: "N", 1: "T"}})
    return onnx.load(str(path))


@pytest.fixture(scope="module")
def decoder(tmp_path_factory):
    path = tmp_path_factory.mktemp("concrete") / "decoder.onnx"
    return path, _export(path)


def test_parse_shape():
    assert parse_shape("ids=1x8") == ("ids", (1, 8))
    assert parse_shape("x=3") == ("x", (3,))
    for bad in ("ids", "=1x2", "x=1x0", "x=1xa", "x=-1"):
        with pytest.raises(GraphError, match="expected NAME=D1xD2"):
            parse_shape(bad)


@pytest.mark.parametrize("shape", [(1, 5), (2, 7)])
def test_token_id_decoder_against_onnxruntime(decoder, shape):
    path, m = decoder
    with pytest.raises(GraphError):
        from_onnx(m, concrete=False)            # the per-example path refuses it
    g, p = from_onnx(m, shapes={"ids": shape})
    assert g.nodes[0].out_shape == shape
    assert "take" in [n.kind.op for n in g]
    ids = np.random.default_rng(1).integers(0, 11, shape)
    ref64 = ReferenceEvaluator(widened(m)).run(None, {"ids": ids})[0]
    ref32 = ort.InferenceSession(m.SerializeToString(),
                                 providers=["CPUExecutionProvider"]).run(None, {"ids": ids})[0]
    y64 = np.asarray(graph.denote(g, p, ids.astype(np.float64), "float64"))
    rel = np.linalg.norm(y64 - ref64) / np.linalg.norm(ref64)
    assert rel <= 1e-12, rel
    c32 = scalars.get("binary32")
    y32 = np.asarray(c32.to_float64(graph.denote(g, p, ids.astype(np.float64), c32)))
    ulps = np.abs(y32 - ref32).max() / np.spacing(np.float32(np.abs(ref32).max()))
    assert ulps <= 8, ulps
    # the lab's sample axis stays in front of the model's full shape: 3 samples at once
    batch = np.random.default_rng(2).integers(0, 11, (3,) + shape)
    ys = np.asarray(graph.denote(g, p, batch.astype(np.float64), "float64"))
    for k in range(3):
        np.testing.assert_array_equal(
            ys[k], graph.denote(g, p, batch[k].astype(np.float64), "float64"))


def test_default_fallback_fixes_symbolic_dimensions_at_1(decoder):
    _, m = decoder
    g, _ = from_onnx(m)
    assert g.nodes[0].out_shape == (1, 1)


def test_token_ids_must_be_integers_in_range(decoder):
    _, m = decoder
    g, p = from_onnx(m, shapes={"ids": (1, 3)})
    with pytest.raises(GraphError, match=r"take: index 2.5 is not an integer in \[-11, 11\)"):
        graph.denote(g, p, np.array([[1.0, 2.5, 3.0]]), "float64")
    with pytest.raises(GraphError, match=r"take: index 11.0 is not an integer"):
        graph.denote(g, p, np.array([[1.0, 11.0, 3.0]]), "float64")


def test_take_over_an_index_box_is_the_hull_of_the_rows():
    from scalarlab.graph.optable import OPS
    ctx = scalars.get("interval:float64")
    table = np.arange(12.0).reshape(4, 3) * np.array([1.0, -1.0, 0.5])
    idx = Interval(np.array([0.5, 3.0]), np.array([2.2, 3.0]))     # {1, 2} and {3}
    y = OPS["take"].forward(ctx, [ctx.convert(table), idx], {"axis": 0}, 0)
    np.testing.assert_array_equal(y.lo, [np.minimum(table[1], table[2]), table[3]])
    np.testing.assert_array_equal(y.hi, [np.maximum(table[1], table[2]), table[3]])
    with pytest.raises(GraphError, match="holds no integer"):
        OPS["take"].forward(ctx, [ctx.convert(table), Interval(np.array([0.2]),
                                                               np.array([0.8]))],
                            {"axis": 0}, 0)


def test_cli_shape_and_input_file(decoder, tmp_path, capsys):
    path, _ = decoder
    out = tmp_path / "g.json"
    assert cli_main(["import", str(path), "-o", str(out), "--shape", "ids=1x6"]) == 0
    assert "concrete shapes: ids=1x6" in capsys.readouterr().out
    assert graph.load(str(out))[0].nodes[0].out_shape == (1, 6)
    np.save(tmp_path / "ids.npy", np.zeros((2, 4), dtype=np.int64))
    assert cli_main(["import", str(path), "-o", str(out), "--input-file",
                     str(tmp_path / "ids.npy")]) == 0
    assert graph.load(str(out))[0].nodes[0].out_shape == (2, 4)
    assert cli_main(["import", str(path), "-o", str(out), "--shape", "x=1x6"]) == 1
    assert "--shape names ['x'], which are not inputs" in capsys.readouterr().err
    assert cli_main(["import", str(path), "-o", str(out), "--shape", "ids=1x6x2"]) == 1
    assert "declares rank 2" in capsys.readouterr().err


def test_cast_to_int_and_bool_and_run_time_masks():
    """Cast float -> int64 truncates toward zero, -> bool is x != 0; a comparison's mask
    drives Where at run time: against onnxruntime, exactly (no arithmetic rounds)."""
    from onnx import TensorProto, helper
    F, I, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
    nodes = [helper.make_node("Cast", ["x"], ["i"], to=I),
             helper.make_node("Cast", ["i"], ["fi"], to=F),
             helper.make_node("Cast", ["x"], ["b"], to=B),
             helper.make_node("Cast", ["b"], ["fb"], to=F),
             helper.make_node("Less", ["x", "zero"], ["m"]),
             helper.make_node("Where", ["m", "fi", "fb"], ["w"]),
             helper.make_node("Add", ["w", "fi"], ["y"])]
    gr = helper.make_graph(nodes, "cast", [helper.make_tensor_value_info("x", F, ["N", 6])],
                           [helper.make_tensor_value_info("y", F, None)],
                           initializer=[onnx.numpy_helper.from_array(np.float32(0), "zero")])
    m = helper.make_model(gr, opset_imports=[helper.make_opsetid("", 17)])
    g, p = from_onnx(m)
    x = np.array([[-2.75, -0.5, 0.0, 0.25, 3.5, -7.0], [1.0, -1.0, 2.5, -0.0, 9.75, -3.25]])
    ref = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": x.astype(np.float32)})[0]
    for ctx in ("float64", "binary32", "rational"):
        y = scalars.get(ctx).to_float64(graph.denote(g, p, x, ctx))
        np.testing.assert_array_equal(np.asarray(y, dtype=np.float64), ref)


def test_token_id_graph_exports_back_to_onnx(decoder):
    """The imported decoder (take included) exported by ``to_onnx`` runs in onnxruntime:
    float64 export against our float64 fold, equal to rounding of the operation order."""
    from scalarlab.graph.exporters.onnx import to_onnx
    _, m = decoder
    g, p = from_onnx(m, shapes={"ids": (1, 5)})
    back = to_onnx(g, p, dtype="float64")
    ids = np.random.default_rng(4).integers(0, 11, (3, 1, 5)).astype(np.float64)
    sess = ort.InferenceSession(back.SerializeToString(), providers=["CPUExecutionProvider"])
    got = sess.run(None, {sess.get_inputs()[0].name: ids})[0]
    ours = np.asarray(graph.denote(g, p, ids, "float64"))
    assert rel_err(got, ours) <= 1e-13


def rel_err(a, b):
    return float(np.linalg.norm(np.asarray(a) - b) / np.linalg.norm(b))


def test_take_refuses_a_format_that_cannot_hold_every_index():
    """e4m3 holds integers exactly up to 16: an index into 20 rows may have been rounded
    to another index when the context read it, so take refuses instead of guessing (a
    limit of the context, so that compare's partial mode reports it as not evaluated)."""
    from scalarlab.graph.optable import OPS
    table = np.arange(40.0).reshape(20, 2)
    ctx = scalars.get("e4m3")
    with pytest.raises(ContextError, match=r"axis of length 20 has indices beyond 2\^4"):
        OPS["take"].forward(ctx, [ctx.convert(table), ctx.convert(np.array([3.0]))],
                            {"axis": 0}, 0)
    small = scalars.get("e4m3")
    # 17 rows: the largest index, 16, is still exact in e4m3
    y = OPS["take"].forward(small, [small.convert(table[:17]), small.convert(np.array([3.0]))],
                            {"axis": 0}, 0)
    np.testing.assert_array_equal(small.to_float64(y), [table[3]])


def test_from_torch_embedding_takes_token_ids():
    """nn.Embedding through from_torch: integer example ids, the weight a const node
    (recorded under its state_dict key), the lookup the IR's take: equal to torch."""
    from scalarlab.graph.importers.torch_fx import from_torch

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.e = torch.nn.Embedding(11, 4, padding_idx=0)
            self.lin = torch.nn.Linear(4, 2)

        def forward(self, ids):
            return self.lin(self.e(ids))

    torch.manual_seed(0)
    m = M().eval()
    ids = torch.randint(0, 11, (3, 5))
    torch._dynamo.mark_dynamic(ids, 0)
    g, p = from_torch(m, ids)
    assert [n.kind.op for n in g] == ["input", "const", "take", "linear"]
    assert g.nodes[0].out_shape == (5,)
    y = graph.denote(g, p, ids.numpy().astype(np.float64), "float64")
    with torch.no_grad():
        ref = copy_double(m)(ids).numpy()
    np.testing.assert_array_equal(y, ref)


def copy_double(m):
    import copy
    return copy.deepcopy(m).double()


@pytest.mark.parametrize("dynamic", [True, False], ids=["batch-axis", "fixed"])
def test_from_torch_groupnorm(dynamic):
    """nn.GroupNorm through from_torch (composed: group mean, biased variance, affine),
    with and without a batch axis: float64 against torch float64."""
    from scalarlab.graph.importers.torch_fx import from_torch
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(6, 6), torch.nn.GroupNorm(2, 4)).eval()
    with torch.no_grad():
        m[1].weight.normal_()
        m[1].bias.normal_()
    x = torch.randn(2 if dynamic else 1, 4, 3, 6)
    if dynamic:
        torch._dynamo.mark_dynamic(x, 0)
    g, p = from_torch(m, x)
    y = graph.denote(g, p, x.numpy().astype(np.float64), "float64")
    with torch.no_grad():
        ref = copy_double(m)(x.double()).numpy()
    assert rel_err(y, ref) <= 1e-15
