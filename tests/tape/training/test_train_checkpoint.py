"""Training checkpoints: bit-identical resume, exact rationals, clear errors."""
from __future__ import annotations

import json

import numpy as np
import pytest

from scalarlab.tape.training import checkpoint_io
from scalarlab.tape.training.data import Loader, regression25
from scalarlab.tape.errors import TapeError
from scalarlab.tape.training.layers import BatchNorm1d, Dropout, Linear, ReLU, Sequential
from scalarlab.tape.training.optim import SGD, Adam
from scalarlab.tape.training.trainer import TrainingSession


def _model(ctx, hidden=6):
    if ctx == "rational":   # BatchNorm needs sqrt, which rational cannot do exactly
        return Sequential(Linear(2, 3), ReLU(), Dropout("0.5"), Linear(3, 1))
    return Sequential(Linear(2, hidden), BatchNorm1d(hidden), ReLU(), Dropout("0.25"),
                      Linear(hidden, 1))


def _setup(ctx, opt, seed, hidden=6, loader_seed=None, execution="eager"):
    sess = TrainingSession(_model(ctx, hidden), ctx, opt, seed=seed, execution=execution)
    X, Y = regression25()
    loader = Loader(sess.ctx.convert(X), sess.ctx.convert(Y), 5,
                    seed=seed if loader_seed is None else loader_seed)
    return sess, loader


def _same(a, b):
    if a.dtype == object:
        return a.shape == b.shape and all(x == y for x, y in zip(a.ravel(), b.ravel()))
    return np.array_equal(a, b) and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("ctx,opt", [("float64", lambda: Adam("0.01")),
                                     ("binary32", lambda: SGD("0.05", "0.9")),
                                     ("rational", lambda: SGD("1/16", "1/2")),
                                     ("fp32-real", lambda: SGD("0.05", "0.9"))])
def test_resume_is_bit_identical(tmp_path, ctx, opt):
    steps_total, cut = 9, 4   # 25 points in batches of 5: the run crosses an epoch
    full, loader = _setup(ctx, opt(), seed=21)
    losses_full = [full.step(*loader.next()) for _ in range(steps_total)]
    part, loader2 = _setup(ctx, opt(), seed=21)
    for _ in range(cut):
        part.step(*loader2.next())
    npz, meta = checkpoint_io.save(tmp_path / "ck", part, loader2)
    assert npz.name == "ck.npz" and meta.name == "ck.json"

    # a fresh session with another seed and loader position, executing as a typed graph:
    # everything comes from disk, and the two execution paths compute the same numbers
    fresh, loader3 = _setup(ctx, opt(), seed=999, loader_seed=21, execution="typed-graph")
    loader3.next()
    checkpoint_io.load(tmp_path / "ck.npz", fresh, loader3)
    assert fresh.steps == cut and fresh.mode == "train"
    losses_resumed = [fresh.step(*loader3.next()) for _ in range(steps_total - cut)]
    for a, b in zip(losses_full[cut:], losses_resumed):
        assert _same(np.asarray(a), np.asarray(b))
    for n in full.params:
        assert _same(full.params[n], fresh.params[n]), n
    for n in full.buffers:
        assert _same(full.buffers[n], fresh.buffers[n]), n
    for slot in full.optimizer.slots:
        for n in full.optimizer.slots[slot]:
            assert _same(full.optimizer.slots[slot][n], fresh.optimizer.slots[slot][n])
    if ctx in ("rational", "fp32-real"):   # exact p/q strings on disk
        z = np.load(npz)
        assert any("/" in s for k in z.files for s in z[k].ravel().tolist())


def test_truncated_and_mismatched_checkpoints(tmp_path):
    sess, loader = _setup("float64", SGD("0.1", "0.9"), seed=3)
    sess.step(*loader.next())
    npz, meta = checkpoint_io.save(tmp_path / "a", sess, loader)

    # truncated array file
    data = npz.read_bytes()
    bad = tmp_path / "t.npz"
    bad.write_bytes(data[: len(data) // 2])
    (tmp_path / "t.json").write_text(meta.read_text())
    with pytest.raises(TapeError, match=r"t\.npz.*(truncated|cannot)"):
        checkpoint_io.load(bad, sess, loader)

    # truncated metadata
    (tmp_path / "j.npz").write_bytes(data)
    (tmp_path / "j.json").write_text(meta.read_text()[:100])
    with pytest.raises(TapeError, match="not valid JSON"):
        checkpoint_io.load(tmp_path / "j", sess, loader)

    # a checkpoint of a wider model: the entry and both shapes are named
    other, oloader = _setup("float64", SGD("0.1", "0.9"), seed=3, hidden=8)
    with pytest.raises(TapeError, match=r"'0\.weight' has shape \[6, 2\].*\[8, 2\]"):
        checkpoint_io.load(tmp_path / "a", other, oloader)

    # another context, another optimizer
    b32, bl = _setup("binary32", SGD("0.1", "0.9"), seed=3)
    with pytest.raises(TapeError, match="saved in context float64.*binary32"):
        checkpoint_io.load(tmp_path / "a", b32, bl)
    adam, al = _setup("float64", Adam("0.1"), seed=3)
    with pytest.raises(TapeError, match="optimizer is 'sgd'"):
        checkpoint_io.load(tmp_path / "a", adam, al)

    # npz and json that are not a pair: checksum names the entry
    sess.step(*loader.next())
    checkpoint_io.save(tmp_path / "b", sess, loader)
    (tmp_path / "mix.npz").write_bytes((tmp_path / "b.npz").read_bytes())
    (tmp_path / "mix.json").write_text(meta.read_text())
    with pytest.raises(TapeError, match=r"entry '(param|buffer)/[^']+' does not match its checksum"):
        checkpoint_io.load(tmp_path / "mix", sess, loader)

    # an array file that lacks one entry (the metadata still lists it)
    m = json.loads(meta.read_text())
    gone = m["entries"]["param/0.bias"]["key"]
    with np.load(npz) as z:
        kept = {k: z[k] for k in z.files if k != gone}
    np.savez(tmp_path / "miss.npz", **kept)
    (tmp_path / "miss.json").write_text(meta.read_text())
    with pytest.raises(TapeError, match="entry 'param/0.bias' is missing from the array file"):
        checkpoint_io.load(tmp_path / "miss", sess, loader)
    # an array the metadata does not list
    np.savez(tmp_path / "extra.npz", **{**kept, gone: np.zeros(6), "zz": np.ones(2)})
    (tmp_path / "extra.json").write_text(meta.read_text())
    with pytest.raises(TapeError, match="array 'zz' is not listed"):
        checkpoint_io.load(tmp_path / "extra", sess, loader)

    with pytest.raises(TapeError, match="cannot read the metadata"):
        checkpoint_io.load(tmp_path / "nothing", sess, loader)
    # nothing was changed by the failed loads: the session still trains
    assert sess.steps == 2


def test_interrupted_save_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    """A save interrupted while writing leaves the old pair and no temporaries; a save cut
    between its two renames (new npz, old metadata) is refused by load, never mixed."""
    sess, loader = _setup("float64", SGD("0.05", "0.9"), seed=3)
    sess.step(*loader.next())
    npz, meta = checkpoint_io.save(tmp_path / "ck", sess, loader)
    old = (npz.read_bytes(), meta.read_bytes())
    sess.step(*loader.next())

    real_savez = np.savez

    def interrupted_savez(fh, **arrays):
        real_savez(fh, **arrays)
        raise KeyboardInterrupt

    monkeypatch.setattr(checkpoint_io.np, "savez", interrupted_savez)
    with pytest.raises(KeyboardInterrupt):
        checkpoint_io.save(tmp_path / "ck", sess, loader)
    monkeypatch.setattr(checkpoint_io.np, "savez", real_savez)
    assert (npz.read_bytes(), meta.read_bytes()) == old
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ck.json", "ck.npz"]

    import os
    real_replace, calls = os.replace, []

    def replace_once(src, dst):
        calls.append(dst)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        real_replace(src, dst)

    monkeypatch.setattr(checkpoint_io.os, "replace", replace_once)
    with pytest.raises(OSError):
        checkpoint_io.save(tmp_path / "ck", sess, loader)
    monkeypatch.setattr(checkpoint_io.os, "replace", real_replace)
    assert npz.read_bytes() != old[0] and meta.read_bytes() == old[1]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ck.json", "ck.npz"]
    fresh, loader2 = _setup("float64", SGD("0.05", "0.9"), seed=4)
    with pytest.raises(TapeError, match="not a pair|checksum"):
        checkpoint_io.load(tmp_path / "ck.npz", fresh, loader2)
