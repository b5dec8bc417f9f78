"""complex128 context: numpy's complex arithmetic; order-based ops refuse by name."""
import cmath

import numpy as np
import pytest

from scalarlab import scalars
from scalarlab.scalars import ContextError

C = scalars.get("complex128")


def test_convert_and_arithmetic_match_python_complex():
    z = C.convert(["1+2j", 3, 0.5, "-1.5-0.25j"])
    w = C.convert([2j, "1-1j", -4, 1])
    zs, ws = [complex(t) for t in z], [complex(t) for t in w]
    assert z.dtype == np.complex128 and zs == [1 + 2j, 3, 0.5, -1.5 - 0.25j]
    assert C.add(z, w).tolist() == [a + b for a, b in zip(zs, ws)]
    assert C.sub(z, w).tolist() == [a - b for a, b in zip(zs, ws)]
    assert C.mul(z, w).tolist() == [a * b for a, b in zip(zs, ws)]
    np.testing.assert_allclose(C.div(z, w), [a / b for a, b in zip(zs, ws)], rtol=1e-15)
    for op, f in [("exp", cmath.exp), ("log", cmath.log), ("sqrt", cmath.sqrt),
                  ("tanh", cmath.tanh), ("sin", cmath.sin), ("cos", cmath.cos)]:
        np.testing.assert_allclose(getattr(C, op)(z), [f(a) for a in zs], rtol=1e-14, err_msg=op)
    np.testing.assert_allclose(C.sigmoid(z), [1 / (1 + cmath.exp(-a)) for a in zs], rtol=1e-14)
    assert C.sum(z)[()] == sum(zs)
    assert C.matmul(C.reshape(z, (2, 2)), C.reshape(w, (2, 2))).tolist() == \
        (np.array(zs).reshape(2, 2) @ np.array(ws).reshape(2, 2)).tolist()
    assert C.format(C.convert("1-2j"), 2) == "(1.00-2.00j)"
    assert C.to_float64(C.convert([1.5, -2])).tolist() == [1.5, -2.0]


@pytest.mark.parametrize("op,args", [("maximum", 2), ("minimum", 2), ("less", 2), ("heaviside", 1),
                                     ("sign", 1), ("amax", 1)])
def test_order_ops_raise_naming_op_and_context(op, args):
    z = C.convert([1j, 2])
    with pytest.raises(ContextError, match=rf"context complex128 cannot compute {op} honestly"):
        getattr(C, op)(*([z] * args))
    with pytest.raises(ContextError, match="argmax"):
        C.argmax(z, 0)


def test_foreign_values_and_imaginary_to_float64():
    with pytest.raises(ContextError, match=r"complex128: add: got a float64 ndarray"):
        C.add(C.convert([1]), np.ones(1))
    with pytest.raises(ContextError, match=r"non-zero imaginary part"):
        C.to_float64(C.convert(["1+1j"]))
    with pytest.raises(ContextError, match="broadcast"):
        C.mul(C.zeros(2), C.zeros(3))
    assert isinstance(C.add(C.convert(1), C.convert(2)), np.ndarray)
