"""Autograd from Python: every op's gradient against float64 central
differences, no_grad, leaves and grad_fn."""
import numpy as np
import pytest

import remat


def numeric_gradient(f, x, eps=1e-6):
    grad = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        plus, minus = x.copy(), x.copy()
        plus[i] += eps
        minus[i] -= eps
        grad[i] = (f(plus) - f(minus)) / (2 * eps)
    return grad


rng = np.random.default_rng(0)
W = rng.normal(size=(4, 3))
T = np.array([0, 2, 1])
OPS = {
    "matmul": lambda x: remat.matmul(x, remat.tensor(W)),
    "relu": remat.relu, "gelu": remat.gelu, "tanh": remat.tanh, "sigmoid": remat.sigmoid, "exp": remat.exp,
    "log": lambda x: remat.log(x * x + 1.0),
    "softmax": remat.softmax, "log_softmax": remat.log_softmax,
    "layer_norm": lambda x: remat.layer_norm(x, remat.tensor(np.linspace(0.5, 1.5, 4)),
                                             remat.tensor(np.linspace(-0.1, 0.1, 4))),
    "arithmetic": lambda x: (x * 3.0 - x / (x * x + 2.0) + 1.0) @ remat.tensor(W),
    "mean": lambda x: x.mean(axes=[1], keepdim=True) * x,
}


@pytest.mark.parametrize("name", sorted(OPS))
def test_the_gradient_equals_finite_differences(name):
    op = OPS[name]
    weights = rng.normal(size=(3, 4)) if name not in ("matmul", "arithmetic") else rng.normal(size=(3, 3))

    def loss(x):
        return (op(x) * remat.tensor(weights)).sum()

    x0 = rng.normal(size=(3, 4))
    x = remat.tensor(x0, requires_grad=True)
    loss(x).backward()
    expected = numeric_gradient(lambda v: loss(remat.tensor(v)).item(), x0)
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-6, atol=1e-8)


def test_cross_entropy_gradient_equals_finite_differences():
    x0 = rng.normal(size=(3, 5))
    x = remat.tensor(x0, requires_grad=True)
    remat.cross_entropy(x, remat.tensor(T)).backward()
    expected = numeric_gradient(lambda v: remat.cross_entropy(remat.tensor(v), remat.tensor(T)).item(), x0)
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-6, atol=1e-8)


def test_causal_softmax_is_masked_softmax_and_its_gradient_equals_finite_differences():
    x0 = rng.normal(size=(2, 4, 4))
    weights = rng.normal(size=(2, 4, 4))
    y = remat.causal_softmax(remat.tensor(x0)).numpy()
    masked = np.where(np.tril(np.ones((4, 4))) > 0, x0, -np.inf)
    expected = np.exp(masked - masked.max(axis=-1, keepdims=True))
    np.testing.assert_allclose(y, expected / expected.sum(axis=-1, keepdims=True), rtol=1e-12, atol=0)

    def loss(v):
        return (remat.causal_softmax(v) * remat.tensor(weights)).sum()

    x = remat.tensor(x0, requires_grad=True)
    loss(x).backward()
    numeric = numeric_gradient(lambda v: loss(remat.tensor(v)).item(), x0)
    np.testing.assert_allclose(x.grad.numpy(), numeric, rtol=1e-6, atol=1e-8)
    with pytest.raises(remat.Error, match="causal_softmax"):
        remat.causal_softmax(remat.tensor(np.ones((2, 3))))


def test_no_grad_records_nothing():
    x = remat.tensor(np.ones((2, 2)), requires_grad=True)
    with remat.no_grad():
        y = x * 2.0
    assert y.grad_fn is None and not y.requires_grad
    z = x * 2.0
    assert z.grad_fn == "mul" and not z.is_leaf
    assert x.is_leaf and x.grad is None
