"""Training checkpoints: bit-identical resume, exact rationals, clear errors."""
from __future__ import annotations

import json
import zipfile

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
    npz = checkpoint_io.save(tmp_path / "ck", part, loader2)
    assert npz.name == "ck.npz" and sorted(p.name for p in tmp_path.iterdir()) == ["ck.npz"]

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
        with np.load(npz) as z:
            assert any("/" in s for k in z.files if k != "meta.json"
                       for s in z[k].ravel().tolist())


def _rewrite(src, dst, meta=None, drop=(), extra=None):
    """A copy of checkpoint ``src`` at ``dst`` with other metadata / members."""
    with zipfile.ZipFile(src) as zi, zipfile.ZipFile(dst, "w") as zo:
        for info in zi.infolist():
            if info.filename in drop:
                continue
            data = zi.read(info)
            if info.filename == "meta.json" and meta is not None:
                data = json.dumps(meta).encode()
            zo.writestr(info.filename, data)
        for name, arr in (extra or {}).items():
            with zo.open(name + ".npy", "w") as fh:
                np.lib.format.write_array(fh, arr)


def _meta(path):
    with zipfile.ZipFile(path) as z:
        return json.loads(z.read("meta.json"))


def test_truncated_and_mismatched_checkpoints(tmp_path):
    sess, loader = _setup("float64", SGD("0.1", "0.9"), seed=3)
    sess.step(*loader.next())
    npz = checkpoint_io.save(tmp_path / "a", sess, loader)

    # truncated file
    data = npz.read_bytes()
    bad = tmp_path / "t.npz"
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(TapeError, match=r"t\.npz.*(truncated|cannot)"):
        checkpoint_io.load(bad, sess, loader)

    # truncated metadata inside a whole archive
    m = _meta(npz)
    with zipfile.ZipFile(npz) as zi, zipfile.ZipFile(tmp_path / "j.npz", "w") as zo:
        for info in zi.infolist():
            body = zi.read(info)
            zo.writestr(info.filename, body[:100] if info.filename == "meta.json" else body)
    with pytest.raises(TapeError, match="not valid JSON"):
        checkpoint_io.load(tmp_path / "j", sess, loader)

    # a checkpoint of a wider model: the entry and both shapes are named
    other, oloader = _setup("float64", SGD("0.1", "0.9"), seed=3, hidden=8)
    with pytest.raises(TapeError, match=r"'0\.weight' has shape \[6, 2\].*\[8, 2\]"):
        checkpoint_io.load(tmp_path / "a", other, oloader)

    # another context, another optimizer, other hyperparameters
    b32, bl = _setup("binary32", SGD("0.1", "0.9"), seed=3)
    with pytest.raises(TapeError, match="saved in context 'float64'.*binary32"):
        checkpoint_io.load(tmp_path / "a", b32, bl)
    adam, al = _setup("float64", Adam("0.1"), seed=3)
    with pytest.raises(TapeError, match="optimizer is 'sgd'"):
        checkpoint_io.load(tmp_path / "a", adam, al)
    slow, sl = _setup("float64", SGD("0.2", "0.9"), seed=3)
    with pytest.raises(TapeError, match="hyperparameter 'lr' is '0.1' in the checkpoint, "
                                        "'0.2' in the session"):
        checkpoint_io.load(tmp_path / "a", slow, sl)

    # an array swapped in from another save: its checksum names the entry
    sess.step(*loader.next())
    b = checkpoint_io.save(tmp_path / "b", sess, loader)
    key = m["entries"]["param/0.weight"]["key"]
    with np.load(b) as z:
        newer = z[key]
    _rewrite(npz, tmp_path / "mix.npz", drop=(key + ".npy",), extra={key: newer})
    with pytest.raises(TapeError, match=r"entry 'param/0.weight' does not match its checksum"):
        checkpoint_io.load(tmp_path / "mix", sess, loader)

    # an archive that lacks one entry (the metadata still lists it)
    gone = m["entries"]["param/0.bias"]["key"]
    _rewrite(npz, tmp_path / "miss.npz", drop=(gone + ".npy",))
    with pytest.raises(TapeError, match="entry 'param/0.bias' is missing from the array file"):
        checkpoint_io.load(tmp_path / "miss", sess, loader)
    # an array the metadata does not list
    _rewrite(npz, tmp_path / "extra.npz", extra={"zz": np.ones(2)})
    with pytest.raises(TapeError, match="array 'zz' is not listed"):
        checkpoint_io.load(tmp_path / "extra", sess, loader)
    # a header that claims another shape or dtype than the metadata
    _rewrite(npz, tmp_path / "shape.npz", drop=(gone + ".npy",), extra={gone: np.zeros(7)})
    with pytest.raises(TapeError, match=r"'param/0.bias' has shape \[7\], the metadata says "
                                        r"\[6\]"):
        checkpoint_io.load(tmp_path / "shape", sess, loader)
    _rewrite(npz, tmp_path / "dtype.npz", drop=(gone + ".npy",),
             extra={gone: np.zeros(6, dtype=np.int64)})
    with pytest.raises(TapeError, match=r"'param/0.bias' has encoding 'float64' and dtype "
                                        r"int64"):
        checkpoint_io.load(tmp_path / "dtype", sess, loader)

    with pytest.raises(TapeError, match="nothing.npz: file not found"):
        checkpoint_io.load(tmp_path / "nothing", sess, loader)
    (tmp_path / "d.npz").mkdir()
    with pytest.raises(TapeError, match="d.npz: is a directory"):
        checkpoint_io.load(tmp_path / "d", sess, loader)
    # nothing was changed by the failed loads
    assert sess.steps == 2 and sess.optimizer.step_count == 2


def test_version_1_pair_is_still_read(tmp_path):
    """A checkpoint of the former layout (``.npz`` arrays + ``.json`` metadata) loads."""
    sess, loader = _setup("rational", SGD("1/16", "1/2"), seed=3)
    sess.step(*loader.next())
    npz = checkpoint_io.save(tmp_path / "new", sess, loader)
    m = _meta(npz)
    m["version"] = 1
    with np.load(npz) as z:
        np.savez(tmp_path / "old.npz", **{k: z[k] for k in z.files if k != "meta.json"})
    (tmp_path / "old.json").write_text(json.dumps(m))
    fresh, fl = _setup("rational", SGD("1/16", "1/2"), seed=8, loader_seed=3)
    checkpoint_io.load(tmp_path / "old.npz", fresh, fl)
    assert fresh.steps == 1 and fl.position == loader.position
    for n in sess.params:
        assert _same(sess.params[n], fresh.params[n]), n
    # a version-1 pair that is not a pair: the checksum refuses it
    sess.step(*loader.next())
    checkpoint_io.save(tmp_path / "newer", sess, loader)
    with np.load(tmp_path / "newer.npz") as z:
        np.savez(tmp_path / "old.npz", **{k: z[k] for k in z.files if k != "meta.json"})
    with pytest.raises(TapeError, match="does not match its checksum"):
        checkpoint_io.load(tmp_path / "old.npz", fresh, fl)
    # an archive with neither its own metadata nor a .json beside it
    (tmp_path / "old.json").unlink()
    with pytest.raises(TapeError, match="holds no meta.json and there is no version-1 "
                                        "metadata file old.json"):
        checkpoint_io.load(tmp_path / "old.npz", fresh, fl)
    assert fresh.steps == 1


def test_interrupted_save_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    """A save that fails while writing, or at its one rename, leaves the old file and no
    temporary; a temporary of a killed save is removed by the next save."""
    sess, loader = _setup("float64", SGD("0.05", "0.9"), seed=3)
    sess.step(*loader.next())
    npz = checkpoint_io.save(tmp_path / "ck", sess, loader)
    old = npz.read_bytes()
    sess.step(*loader.next())

    real_write = np.lib.format.write_array

    def interrupted_write(fh, arr, **kw):
        real_write(fh, arr, **kw)
        raise KeyboardInterrupt

    monkeypatch.setattr(checkpoint_io.np.lib.format, "write_array", interrupted_write)
    with pytest.raises(KeyboardInterrupt):
        checkpoint_io.save(tmp_path / "ck", sess, loader)
    monkeypatch.setattr(checkpoint_io.np.lib.format, "write_array", real_write)
    assert npz.read_bytes() == old
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ck.npz"]

    def full_disk(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(checkpoint_io.os, "replace", full_disk)
    with pytest.raises(TapeError, match=r"ck\.npz: cannot save: No space left on device; "
                                        "the previous checkpoint is unchanged"):
        checkpoint_io.save(tmp_path / "ck", sess, loader)
    monkeypatch.undo()
    (tmp_path / "dir.npz").mkdir()
    with pytest.raises(TapeError, match=r"dir\.npz: cannot save: .*nothing was written"):
        checkpoint_io.save(tmp_path / "dir", sess, loader)
    (tmp_path / "dir.npz").rmdir()
    assert npz.read_bytes() == old
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ck.npz"]
    fresh, loader2 = _setup("float64", SGD("0.05", "0.9"), seed=4, loader_seed=3)
    checkpoint_io.load(tmp_path / "ck.npz", fresh, loader2)
    assert fresh.steps == 1

    # temporaries of killed saves (their processes are gone) and of a running one
    dead = 2 ** 22 + 12345          # above the default pid_max: no such process
    stale = tmp_path / f".ck.npz.{dead}.0123abcd.tmp"
    stale.write_bytes(b"partial")
    import os
    live = tmp_path / f".ck.npz.{os.getppid()}.0123abcd.tmp"
    live.write_bytes(b"being written")
    other = tmp_path / f".other.npz.{dead}.0123abcd.tmp"
    other.write_bytes(b"another checkpoint's")
    checkpoint_io.save(tmp_path / "ck", sess, loader)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["ck.npz", live.name, other.name])
