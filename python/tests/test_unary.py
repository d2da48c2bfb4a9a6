"""The unary ops from Python, every one of the C++ table (ops/unary.cpp's
unary_ops, as remat._remat._unary_ops lists it): exported under its name,
its node named after it, its gradient against float64 central differences,
float32 against float64; and the values of the ops NumPy can compute."""
import math

import numpy as np
import pytest

import remat

TABLE = {name: (low, high, kink) for name, low, high, kink in remat._remat._unary_ops()}
rng = np.random.default_rng(3)


def domain_values(name, shape):
    """Values where the op is defined and smooth: [low, high], off (-0.1, 0.1) at a kink."""
    low, high, kink = TABLE[name]
    x = rng.uniform(low, high, size=shape)
    if kink:
        x = np.where(np.abs(x) < 0.1, x + np.copysign(0.1, x), x)
    return x


def test_the_table_holds_the_ops_remat_always_had():
    assert {"neg", "relu", "tanh", "sigmoid", "exp", "log", "gelu"} <= set(TABLE)


@pytest.mark.parametrize("name", sorted(TABLE))
def test_each_op_is_exported_under_its_name(name):
    assert name in remat.__all__
    assert getattr(remat, name) is getattr(remat._remat, name)
    y = getattr(remat, name)(remat.tensor(domain_values(name, (2, 3)), requires_grad=True))
    assert y.grad_fn == name
    assert y.shape == (2, 3) and y.dtype == "float64"


@pytest.mark.parametrize("name", sorted(TABLE))
def test_the_gradient_equals_finite_differences(name):
    op = getattr(remat, name)
    x0 = domain_values(name, (3, 4))
    weights = rng.normal(size=(3, 4))

    def loss(v):
        return (op(remat.tensor(v)) * remat.tensor(weights)).sum().item()

    x = remat.tensor(x0, requires_grad=True)
    (op(x) * remat.tensor(weights)).sum().backward()
    eps = 1e-6
    numeric = np.zeros_like(x0)
    for i in np.ndindex(x0.shape):
        plus, minus = x0.copy(), x0.copy()
        plus[i] += eps
        minus[i] -= eps
        numeric[i] = (loss(plus) - loss(minus)) / (2 * eps)
    np.testing.assert_allclose(x.grad.numpy(), numeric, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name", sorted(TABLE))
def test_float32_agrees_with_float64(name):
    op = getattr(remat, name)
    x = domain_values(name, (1001,)).astype(np.float32)
    y32 = op(remat.tensor(x)).numpy()
    y64 = op(remat.tensor(x.astype(np.float64))).numpy()
    assert y32.dtype == np.float32
    np.testing.assert_allclose(y32, y64, rtol=4e-6, atol=4e-6)


def gelu(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


REFERENCES = {"neg": np.negative, "relu": lambda x: np.maximum(x, 0), "tanh": np.tanh,
              "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "exp": np.exp, "log": np.log, "gelu": gelu}


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_the_values_match_numpy(name):
    x = domain_values(name, (50,))
    np.testing.assert_allclose(getattr(remat, name)(remat.tensor(x)).numpy(), REFERENCES[name](x), rtol=1e-13,
                               atol=1e-15)
