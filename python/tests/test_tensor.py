"""remat.Tensor and NumPy: values both ways, no copy to NumPy, dtypes, errors."""
import numpy as np
import pytest

import remat


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_a_numpy_round_trip_keeps_values_shape_and_dtype(dtype):
    a = (np.arange(24).reshape(2, 3, 4) - 5).astype(dtype)
    t = remat.tensor(a)
    assert t.shape == (2, 3, 4)
    assert t.dtype == np.dtype(dtype).name
    assert t.device == "cpu"
    back = t.numpy()
    assert back.dtype == dtype
    np.testing.assert_array_equal(back, a)


def test_to_numpy_shares_the_tensors_memory():
    t = remat.zeros([3, 4])
    first, second = t.numpy(), np.asarray(t)
    assert np.shares_memory(first, second)
    first[1, 2] = 7.0
    assert t.numpy()[1, 2] == 7.0
    del t  # the arrays keep the storage alive
    assert second[1, 2] == 7.0


def test_a_transposed_view_reaches_numpy_with_its_strides():
    t = remat.tensor(np.arange(6, dtype=np.float32).reshape(2, 3)).transpose(0, 1)
    np.testing.assert_array_equal(t.numpy(), np.arange(6, dtype=np.float32).reshape(2, 3).T)


def test_python_floats_default_to_float32_and_ints_to_int64():
    assert remat.tensor([1.5, 2.0]).dtype == "float32"
    assert remat.tensor([1, 2]).dtype == "int64"
    assert remat.tensor(np.ones(2)).dtype == "float64"


def test_an_unsupported_dtype_is_an_error():
    with pytest.raises(remat.Error, match="complex"):
        remat.tensor(np.ones(2, dtype=np.complex64))


def test_engine_errors_arrive_as_remat_error_with_the_shapes():
    a, b = remat.zeros([2, 3]), remat.zeros([4, 5])
    with pytest.raises(remat.Error, match=r"\(2, 3\) and \(4, 5\)"):
        remat.matmul(a, b)
    assert issubclass(remat.Error, RuntimeError)
