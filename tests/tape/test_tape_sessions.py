"""Eager sessions: handles carry (session, generation, id); stale handles are errors."""
import numpy as np
import pytest

from scalarlab.tape import EagerOps, Handle, PlainOps, Session, TapeError


def program(ops, x):
    return ops.sum(ops.add(ops.mul(x, x), ops.detach(ops.mul(x, x))))


def test_eager_interpreter_records_the_detached_tape():
    ops = EagerOps("float64")
    x = ops.input(["3", "-1.5"], name="x")
    out = program(ops, x)
    s = ops.session
    assert isinstance(out, Handle)
    assert (out.session, out.generation, out.id) == (s.id, 0, 5)
    assert s.tape.nodes()[3] == ("detach", [2])
    g = s.backward(out)
    np.testing.assert_array_equal(s.grad(g, x), [6.0, -3.0])
    assert float(s.value(out)) == 22.5


def test_plain_interpreter_same_value_no_tape():
    ops = PlainOps("float64")
    assert float(program(ops, ops.input(["3", "-1.5"]))) == 22.5


def test_reset_makes_old_handles_stale():
    s = Session("float64")
    x = s.leaf([1.0, 2.0], name="x")
    assert s.reset() == 1
    y = s.leaf([5.0, 6.0], name="y")
    assert y.id == x.id == 0                      # the number alone cannot tell them apart
    np.testing.assert_array_equal(s.value(y), [5.0, 6.0])
    with pytest.raises(TapeError, match=rf"stale handle: node 0 of session {s.id} generation 0; "
                                        rf"the session was reset and is at generation 1"):
        s.value(x)
    with pytest.raises(TapeError, match="stale handle"):
        s.apply("mul", x, y)


def test_handle_from_another_session():
    a, b = Session("float64"), Session("float64")
    ha = a.leaf([1.0], name="x")
    with pytest.raises(TapeError, match=rf"belongs to session {a.id} \(generation 0\), not to "
                                        rf"this session"):
        b.detach(ha)


def test_non_handle_is_rejected():
    s = Session("float64")
    with pytest.raises(TapeError, match="expected a Handle, got int"):
        s.value(0)
