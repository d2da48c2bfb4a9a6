"""Safetensors files read and written with torch alone (no `safetensors` package).

The Python twin of nn/safetensors.h, for the PyTorch halves of remat's
parity tests (tests/torch/gpt_parity.py) and for scripts that hand tensors to
the C++ side. The format: an 8-byte little-endian header length N, N bytes of
JSON {"name": {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]},
..., "__metadata__": {...}} (maybe padded with spaces), then the body holding
each tensor's raw little-endian row-major bytes at [begin, end) relative to
the body's start.
"""

import ctypes
import json
import struct
import sys

import torch

DTYPES = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8,
    "U8": torch.uint8, "BOOL": torch.bool,
}
NAMES = {dtype: name for name, dtype in DTYPES.items()}
METADATA_KEY = "__metadata__"
MAX_HEADER_BYTES = 100 * 1024 * 1024


class SafetensorsError(ValueError):
    pass


def read_safetensors(path):
    """{name: tensor} of the file at `path` (contiguous CPU tensors, header order) and its metadata dict."""
    if sys.byteorder != "little":
        raise SafetensorsError("%s: reading safetensors needs a little-endian machine" % path)
    with open(path, "rb") as file:
        data = file.read()
    if len(data) < 8:
        raise SafetensorsError("%s: %d bytes, too short for the 8-byte header length" % (path, len(data)))
    (header_bytes,) = struct.unpack("<Q", data[:8])
    if header_bytes > min(MAX_HEADER_BYTES, len(data) - 8):
        raise SafetensorsError("%s: header length %d, but the file has %d bytes after the length"
                               % (path, header_bytes, len(data) - 8))
    try:
        header = json.loads(data[8:8 + header_bytes].decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        raise SafetensorsError("%s: header is not JSON: %s" % (path, error))
    if not isinstance(header, dict):
        raise SafetensorsError("%s: header is %s, expected a JSON object" % (path, type(header).__name__))
    body = bytearray(data[8 + header_bytes:])  # writable, so torch.frombuffer does not warn
    metadata = header.pop(METADATA_KEY, {}) or {}
    tensors = {}
    for name, entry in header.items():
        try:
            dtype = DTYPES[entry["dtype"]]
            shape = [int(size) for size in entry["shape"]]
            begin, end = (int(offset) for offset in entry["data_offsets"])
        except (KeyError, TypeError, ValueError) as error:
            raise SafetensorsError("%s: tensor %r has a malformed header entry %r (%s)" % (path, name, entry, error))
        numel = 1
        for size in shape:
            if size < 0:
                raise SafetensorsError("%s: tensor %r has shape %s" % (path, name, shape))
            numel *= size
        nbytes = numel * torch.empty((), dtype=dtype).element_size()
        if not 0 <= begin <= end <= len(body) or end - begin != nbytes:
            raise SafetensorsError("%s: tensor %r (%s %s, %d bytes) has data_offsets [%d, %d] in a body of %d bytes"
                                   % (path, name, entry["dtype"], shape, nbytes, begin, end, len(body)))
        if nbytes == 0:
            tensors[name] = torch.empty(shape, dtype=dtype)
        else:
            tensors[name] = torch.frombuffer(body, dtype=dtype, count=numel, offset=begin).reshape(shape).clone()
    return tensors, metadata


def write_safetensors(path, tensors, metadata=None):
    """Writes {name: tensor} (in the dict's order) to `path`, header padded to a multiple of 8."""
    header, chunks, offset = {}, [], 0
    for name, tensor in tensors.items():
        tensor = tensor.detach().cpu().contiguous()
        if tensor.dtype not in NAMES:
            raise SafetensorsError("%s: tensor %r has dtype %s, not supported" % (path, name, tensor.dtype))
        # The raw bytes, copied straight from the tensor's memory (no numpy needed).
        raw = ctypes.string_at(tensor.data_ptr(), tensor.numel() * tensor.element_size()) if tensor.numel() else b""
        header[name] = {"dtype": NAMES[tensor.dtype], "shape": list(tensor.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    if metadata:
        header[METADATA_KEY] = {str(key): str(value) for key, value in metadata.items()}
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    with open(path, "wb") as file:
        file.write(struct.pack("<Q", len(text)))
        file.write(text)
        for raw in chunks:
            file.write(raw)
