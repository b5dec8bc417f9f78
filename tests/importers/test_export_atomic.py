"""save_onnx writes atomically: a failed or interrupted save keeps the previous model."""
from __future__ import annotations

import onnx
import pytest

from scalarlab.graph import examples
from scalarlab.graph.exporters import onnx as exporter


def test_failed_onnx_save_keeps_the_previous_file(tmp_path, monkeypatch):
    g, p, _ = examples.six_node_mlp()
    path = tmp_path / "m.onnx"
    exporter.save_onnx(path, g, p)
    before = path.read_bytes()
    real_save = onnx.save

    def full_disk(model, f, *a, **k):
        with open(f, "wb") as fh:
            fh.write(b"\0" * 10)       # a partial file, then the disk is full
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(onnx, "save", full_disk)
    with pytest.raises(Exception, match="No space left"):
        exporter.save_onnx(path, g, p, dtype="float64")
    monkeypatch.setattr(onnx, "save", real_save)
    assert path.read_bytes() == before
    assert [q.name for q in tmp_path.iterdir()] == ["m.onnx"]
    onnx.checker.check_model(onnx.load(str(path)))
