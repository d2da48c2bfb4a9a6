"""remat.Tensor and NumPy: values both ways, no copy to NumPy nor from it with
from_numpy, dtypes, errors."""
import array
import gc
import subprocess
import sys
import weakref

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


def data_bytes():
    return remat.scheduler.memory_stats()["live"]["data"]


def test_dlpack_consumers_share_the_tensors_memory():
    t = remat.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    shared = np.from_dlpack(t)
    assert t.__dlpack_device__() == (1, 0)
    assert np.shares_memory(shared, t.numpy())
    np.testing.assert_array_equal(shared, t.numpy())


def test_from_numpy_shares_the_arrays_memory_and_counts_it_while_it_lives():
    before = data_bytes()
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = remat.from_numpy(a, requires_grad=True)
    assert np.shares_memory(t.numpy(), a) and t.shape == (3, 4) and t.requires_grad
    assert data_bytes() - before == a.nbytes  # the allocator's accounting, though the bytes are NumPy's
    a[0, 0] = 5.0
    assert t.numpy()[0, 0] == 5.0
    (t * t).sum().backward()
    remat.optim.SGD([t], lr=0.5).step()  # t -= 0.5 * 2t: written into the array
    np.testing.assert_array_equal(a, np.zeros((3, 4), dtype=np.float32))
    alive = weakref.ref(a)
    del a  # the tensor keeps the array alive
    assert alive() is not None and t.numpy().sum() == 0.0
    del t
    gc.collect()
    assert alive() is None  # handed back to NumPy
    assert data_bytes() == before


def test_from_numpy_shares_strided_views_and_refuses_what_it_cannot_share():
    base = np.arange(24, dtype=np.float64).reshape(4, 6)
    view = base[::2, 1::2].T  # strides of whole elements, not contiguous
    before = data_bytes()
    t = remat.from_numpy(view)
    assert data_bytes() - before == ((3 - 1) * 2 + (2 - 1) * 12 + 1) * 8  # its first element to its last
    np.testing.assert_array_equal(t.numpy(), view)
    np.testing.assert_array_equal((t * 2.0).numpy(), view * 2)
    assert np.shares_memory(t.numpy(), base)
    with pytest.raises(remat.Error, match="steps backwards"):
        remat.from_numpy(base[::-1])
    frozen = np.ones(3, dtype=np.float32)
    frozen.flags.writeable = False
    with pytest.raises(remat.Error, match="cannot be shared: it is read-only"):
        remat.from_numpy(frozen)
    with pytest.raises(remat.Error, match="byte order"):
        remat.from_numpy(np.ones(3, dtype=">f8"))
    misaligned = np.ndarray((4,), np.float32, buffer=bytearray(20), offset=1)
    with pytest.raises(remat.Error, match="not aligned"):
        remat.from_numpy(misaligned)
    with pytest.raises(remat.Error, match="a NumPy array, not a list"):
        remat.from_numpy([1.0, 2.0])
    with pytest.raises(remat.Error, match="a NumPy array, not a array"):
        remat.from_numpy(array.array("d", [1.0, 2.0]))  # its buffer could move under the tensor
    with pytest.raises(remat.Error, match="from_numpy: NumPy dtype"):
        remat.from_numpy(np.ones(2, dtype=np.int32))
    assert remat.from_numpy(np.ones((0, 3), dtype=np.float32)).shape == (0, 3)
    assert remat.from_numpy(np.array(2.5)).numpy() == 2.5


def test_arrays_shared_at_exit_are_let_go_without_a_leak():
    """A global tensor over an array of a class defined beside it: a cycle
    through C++ that only the exit hook breaks."""
    code = ("import numpy as np, remat\n"
            "class Noisy(np.ndarray):\n"
            "    def __del__(self):\n"
            "        print('released', flush=True)\n"
            "kept = remat.from_numpy(np.zeros(4).view(Noisy))\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert "leaked" not in run.stderr and run.stdout == "released\n", (run.stdout, run.stderr)


def test_a_transposed_view_reaches_numpy_with_its_strides():
    t = remat.tensor(np.arange(6, dtype=np.float32).reshape(2, 3)).transpose(0, 1)
    np.testing.assert_array_equal(t.numpy(), np.arange(6, dtype=np.float32).reshape(2, 3).T)


def test_python_floats_default_to_float32_and_ints_to_int64():
    assert remat.tensor([1.5, 2.0]).dtype == "float32"
    assert remat.tensor([1, 2]).dtype == "int64"
    assert remat.tensor(np.ones(2)).dtype == "float64"


@pytest.mark.parametrize("value, dtype", [(np.float32(3), "float32"), (np.float64(3), "float64"),
                                          (np.int64(3), "int64"), (np.array(3.0), "float64"),
                                          (np.array(3, dtype=np.int32), "int64"), (3.0, "float32"), (3, "int64")])
def test_numbers_and_numpy_scalars_make_0_d_tensors(value, dtype):
    t = remat.tensor(value)
    assert t.shape == () and t.dtype == dtype and t.item() == 3
    assert t.numpy().shape == () and remat.tensor(value, dtype="float64").shape == ()
    assert remat.tensor(np.float32(3), requires_grad=True).requires_grad


def test_an_unsupported_dtype_is_an_error():
    with pytest.raises(remat.Error, match="complex"):
        remat.tensor(np.ones(2, dtype=np.complex64))


def test_engine_errors_arrive_as_remat_error_with_the_shapes():
    a, b = remat.zeros([2, 3]), remat.zeros([4, 5])
    with pytest.raises(remat.Error, match=r"\(2, 3\) and \(4, 5\)"):
        remat.matmul(a, b)
    assert issubclass(remat.Error, RuntimeError)
