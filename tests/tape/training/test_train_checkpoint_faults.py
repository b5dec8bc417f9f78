"""Checkpoints under faults: every corrupted metadata field is a one-line error that
leaves the session as it was, and a save killed at any moment leaves the old or the new
checkpoint, loadable and equal to a state the training went through; a save on a full disk
(a 4 KiB file-size limit) is one line and keeps the previous checkpoint."""
from __future__ import annotations

import io
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

from scalarlab.tape.errors import TapeError
from scalarlab.tape.training import checkpoint_io

from checkpoint_kill_child import build

HERE = Path(__file__).resolve().parent


def _state(sess, loader) -> tuple:
    """Everything a load may change, as comparable plain data (values bit for bit)."""
    def arr(v):
        a = np.asarray(v)
        return (str(a.dtype), a.shape, a.tobytes() if a.dtype != object else
                tuple(str(t) for t in a.ravel()))
    opt = sess.optimizer
    return ({n: arr(v) for n, v in sess.params.items()},
            {n: arr(v) for n, v in sess.buffers.items()},
            {s: {n: arr(v) for n, v in d.items()} for s, d in opt.slots.items()},
            opt.step_count, json.dumps(sess.rng.bit_generator.state), sess.mode, sess.steps,
            json.dumps(loader.position), loader._order is None)


_MEMBERS: dict = {}


def _write(src: Path, dst: Path, meta_bytes: bytes) -> None:
    """``src`` with another ``meta.json`` (the members are read once per source)."""
    if src not in _MEMBERS:
        with zipfile.ZipFile(src) as zi:
            _MEMBERS[src] = [(i.filename, zi.read(i)) for i in zi.infolist()]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zo:
        for name, data in _MEMBERS[src]:
            zo.writestr(name, meta_bytes if name == "meta.json" else data)
    dst.write_bytes(buf.getvalue())


def _paths(node, prefix=()):
    """Every (path, parent container) below ``node``: dict keys and list positions."""
    items = node.items() if isinstance(node, dict) else enumerate(node)
    for k, v in items:
        yield prefix + (k,)
        if isinstance(v, (dict, list)):
            yield from _paths(v, prefix + (k,))


def _set(meta, path, value, delete=False):
    node = meta
    for k in path[:-1]:
        node = node[k]
    if delete:
        del node[path[-1]]
    else:
        node[path[-1]] = value


DEEP = "[" * 200_000 + "]" * 200_000
PARSER_CASES = ("<deep>", "<huge>", "<inf>")
BAD_VALUES = [None, True, "x", 1.5, -3, [], {}, 2 ** 70, *PARSER_CASES]
# replacements that are legal values of their field (an execution name is informative
# only; the seed is recorded, not restored; PCG64 takes any 128-bit state and increment)
LEGAL = {(("execution",), "x"), (("seed",), -3), (("rng", "state", "state"), 2 ** 70),
         (("rng", "state", "inc"), 2 ** 70)}


def _mutations(meta):
    first = next(iter(meta["entries"]))
    for path in _paths(meta):
        # one entry / state item stands for all of them (they share one checker)
        if len(path) > 1 and ((path[0] == "entries" and path[1] != first)
                              or (path[0] == "state" and path[1] != 0)):
            continue
        if isinstance(path[-1], str):
            yield path, "<missing>"
        node = meta
        for k in path:
            node = node[k]
        for v in BAD_VALUES:
            if v == node and type(v) is type(node):     # no change
                continue
            if v in PARSER_CASES and len(path) > 2:      # refused by the parser anywhere
                continue
            if not any(path == lp and v == lv and type(v) is type(lv) for lp, lv in LEGAL):
                yield path, v


def _encode(meta, path, value) -> bytes:
    m = json.loads(json.dumps(meta))
    if value == "<missing>":
        _set(m, path, None, delete=True)
        return json.dumps(m).encode()
    marker = "@@VALUE@@"
    _set(m, path, marker)
    literal = {"<deep>": DEEP, "<huge>": "9" * 5000, "<inf>": "1e999"}.get(
        value, None) if isinstance(value, str) else None
    text = json.dumps(m).replace(json.dumps(marker), literal or json.dumps(value))
    return text.encode()


def _names_field(msg: str, path: tuple) -> bool:
    words = [str(k) for k in path if isinstance(k, str)]
    words += [w.replace("_", " ") for w in words] + ["JSON", "nests too deeply"]
    return any(w in msg for w in words)


def test_every_corrupted_metadata_field_is_one_line_and_changes_nothing(tmp_path):
    saved, sl = build()
    saved.step(*sl.next())
    good = checkpoint_io.save(tmp_path / "good", saved, sl)
    with zipfile.ZipFile(good) as z:
        meta = json.loads(z.read("meta.json"))
    sess, loader = build(seed=9)
    for _ in range(3):
        sess.step(*loader.next())
    before = _state(sess, loader)
    bad = tmp_path / "bad.npz"
    count = 0
    for path, value in _mutations(meta):
        _write(good, bad, _encode(meta, path, value))
        try:
            checkpoint_io.load(bad, sess, loader)
        except TapeError as exc:
            msg = str(exc)
        else:
            raise AssertionError(f"{path} = {value!r} was accepted")
        assert "\n" not in msg and len(msg) < 400, (path, value, msg)
        assert msg.startswith(f"checkpoint {bad}"), (path, value, msg)
        assert _names_field(msg, path), (path, value, msg)
        assert _state(sess, loader) == before, (path, value, msg)
        count += 1
    assert count > 250
    # the field checks say what is wrong with the value
    for path, value, expect in [
            (("steps",), 1.5, "field 'steps' must be an integer, got 1.5"),
            (("steps",), -3, r"field 'steps' must be an integer in \[0, 2\^63-1\], got -3"),
            (("steps",), "<huge>", "not usable JSON"),
            (("steps",), "<deep>", "nests too deeply"),
            (("optimizer", "step"), "<missing>", "field 'optimizer.step' is missing"),
            (("rng", "state", "inc"), 2 ** 130, "field 'rng.state.inc' must be an integer "
                                                r"in \[0, 2\^128-1\], got an integer of 40"),
            (("loader", "shuffle"), 1, "field 'loader.shuffle' must be true or false")]:
        _write(good, bad, _encode(meta, path, value))
        with pytest.raises(TapeError, match=expect):
            checkpoint_io.load(bad, sess, loader)
    # the intact file loads (so the refusals above came from the corruptions)
    checkpoint_io.load(good, sess, loader)
    assert _state(sess, loader) != before and sess.steps == 1


def test_truncated_and_foreign_files_are_one_line_and_change_nothing(tmp_path):
    saved, sl = build()
    saved.step(*sl.next())
    good = checkpoint_io.save(tmp_path / "good", saved, sl)
    data = good.read_bytes()
    sess, loader = build(seed=9)
    sess.step(*loader.next())
    before = _state(sess, loader)
    bad = tmp_path / "bad.npz"
    cuts = sorted({*range(0, len(data), max(1, len(data) // 40)), len(data) - 1,
                   len(data) - 22, 30, 31})
    candidates = [data[:n] for n in cuts]
    # one flipped byte in every 97th position: the archive's CRC or the checksums see it
    candidates += [data[:i] + bytes([data[i] ^ 0x5A]) + data[i + 1:]
                   for i in range(0, len(data), 97)]
    with zipfile.ZipFile(good) as z:
        text = z.read("meta.json")
    candidates_meta = [text[:n] for n in range(0, len(text), max(1, len(text) // 25))]
    candidates_meta += [b"\xff\xfe" + text, b"[]", b"null", b"{}",
                        json.dumps({"format": checkpoint_io.FORMAT}).encode()]
    loaded = 0
    for blob in candidates + [None] * len(candidates_meta):
        if blob is None:
            _write(good, bad, candidates_meta.pop())
        else:
            bad.write_bytes(blob)
        try:
            checkpoint_io.load(bad, sess, loader)
        except TapeError as exc:
            assert "\n" not in str(exc) and str(exc).startswith("checkpoint "), str(exc)
            assert _state(sess, loader) == before, str(exc)
        else:
            # a flip inside a member's padding or a name the reader does not use can
            # leave a valid file: then it must be exactly the saved state
            loaded += 1
            assert sess.steps == 1 and _state(sess, loader)[:-1] == _state(saved, sl)[:-1]
            sess, loader = build(seed=9)
            sess.step(*loader.next())
            before = _state(sess, loader)
    assert loaded <= len(candidates) // 10


def _kill_loop(tmp_path, kills: int, seed: int) -> dict:
    steps = 24
    ref_sess, ref_loader = build()
    refs = [_state(ref_sess, ref_loader)[:-1]]
    for _ in range(steps):
        ref_sess.step(*ref_loader.next())
        refs.append(_state(ref_sess, ref_loader)[:-1])
    ck = tmp_path / "ck.npz"
    server = subprocess.Popen([sys.executable, str(HERE / "checkpoint_kill_child.py"),
                               str(ck), str(steps)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    rnd = random.Random(seed)
    seen = {"steps": set(), "temporaries": 0, "old": 0}
    try:
        assert server.stdout.readline().strip() == "ready"
        # a full disk first: the save fails in one line and the first checkpoint stays
        server.stdin.write("full\n")
        server.stdin.flush()
        line = server.stdout.readline()
        assert line.startswith(f"error checkpoint {ck}: cannot save: File too large; the "
                               "previous checkpoint is unchanged"), line
        assert server.stdout.readline().startswith("reaped")
        sess, loader = build(seed=77)
        checkpoint_io.load(ck, sess, loader)
        assert _state(sess, loader)[:-1] == refs[0]
        assert sorted(p.name for p in tmp_path.iterdir()) == ["ck.npz"]
        last = 0
        slow = 1.0      # a loaded machine may not finish one save in 120 ms: wait longer
        for i in range(kills):
            server.stdin.write("go\n")
            server.stdin.flush()
            pid = int(server.stdout.readline())
            # a save takes ~20 ms (two fsyncs), a step ~5 ms: the kills fall in every
            # phase of the first few saves
            time.sleep(rnd.uniform(0, 0.12) * slow)
            os.kill(pid, signal.SIGKILL)
            server.stdin.write(f"reap {pid}\n")
            server.stdin.flush()
            assert server.stdout.readline().startswith("reaped")
            names = sorted(p.name for p in tmp_path.iterdir())
            temps = [n for n in names if n != "ck.npz"]
            assert "ck.npz" in names and all(
                re.fullmatch(r"\.ck\.npz\.\d+\.[0-9a-f]{8}\.tmp", n) for n in temps), names
            seen["temporaries"] += bool(temps)
            sess, loader = build(seed=1000 + i)
            checkpoint_io.load(ck, sess, loader)
            got = _state(sess, loader)[:-1]
            # old or new, never a mix: the state of some step of the one training run
            assert got == refs[sess.steps], (i, sess.steps)
            seen["steps"].add(sess.steps)
            seen["old"] += sess.steps == last
            slow = min(slow * 2, 32.0) if sess.steps == last else 1.0
            last = sess.steps
    finally:
        server.stdin.close()
        server.wait(timeout=30)
    # the next save removes what the killed savers left
    sess, loader = build()
    checkpoint_io.save(ck, sess, loader)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ck.npz"]
    return seen


def test_save_killed_at_random_points_leaves_old_or_new(tmp_path):
    seen = _kill_loop(tmp_path, kills=12, seed=1)
    assert len(seen["steps"]) > 1


@pytest.mark.slow
def test_save_killed_at_random_points_leaves_old_or_new_200(tmp_path):
    seen = _kill_loop(tmp_path, kills=200, seed=2)
    assert len(seen["steps"]) > 3 and seen["temporaries"] > 0
