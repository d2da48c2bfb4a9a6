#!/usr/bin/python3
"""GPT gradient parity, PyTorch half: does remat's GPT give PyTorch's loss and gradients?

A C++ test writes a directory from remat's GPT (nn/gpt.h); this script rebuilds
the same model in PyTorch (bench/torch_gpt.py), loads the same weights, runs
forward and backward on the same batch and compares:

  DIR/config.json         {vocab_size, block_size, n_layer, n_head, n_embd, tie_weights,
                           dtype "float32"|"float64"}  (layer_norm_eps optional, 1e-5)
  DIR/weights.safetensors every parameter, named as in bench/torch_gpt.py
  DIR/batch.safetensors   "ids" and "targets", int64 (B, T)
  DIR/grads.safetensors   d loss / d parameter, for every parameter, same names
  DIR/loss.json           {"loss": float}

Dropout is 0 whatever the config says. Per tensor, the error is
max|remat - torch| / max(max|torch|, tiny); it must be <= 1e-4 for float32 and
<= 1e-10 for float64, for the loss and for every gradient.

  /usr/bin/python3 tests/torch/gpt_parity.py DIR

Exit status: 0 all agree, 1 a mismatch (the worst tensor is named), 2 the
directory is malformed or does not fit the model, 77 torch cannot be imported
(CTest's skip code; Debian's /usr/bin/python3 sees python3-torch).
"""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TOLERANCE = {"float32": 1e-4, "float64": 1e-10}
TINY = 1e-30
EXIT_OK, EXIT_MISMATCH, EXIT_BAD_INPUT, EXIT_SKIP = 0, 1, 2, 77
CONFIG_KEYS = ("vocab_size", "block_size", "n_layer", "n_head", "n_embd", "tie_weights", "dtype")


class BadInput(Exception):
    pass


def read_json(path):
    try:
        with open(path) as file:
            return json.load(file)
    except (OSError, ValueError) as error:
        raise BadInput("%s: %s" % (path, error))


def read_tensors(path):
    from safetensors_io import SafetensorsError, read_safetensors
    try:
        return read_safetensors(path)[0]
    except (OSError, SafetensorsError) as error:
        raise BadInput(str(error))


def relative_error(actual, expected):
    """max|actual - expected| / max(max|expected|, tiny), in float64."""
    actual, expected = actual.double(), expected.double()
    scale = max(expected.abs().max().item() if expected.numel() else 0.0, TINY)
    return (actual - expected).abs().max().item() / scale if expected.numel() else 0.0


def load_model(torch, torch_gpt, directory):
    config_json = read_json(os.path.join(directory, "config.json"))
    missing = [key for key in CONFIG_KEYS if key not in config_json]
    if missing:
        raise BadInput("config.json lacks %s" % ", ".join(missing))
    if config_json["dtype"] not in TOLERANCE:
        raise BadInput("config.json: dtype %r, expected float32 or float64" % config_json["dtype"])
    config = torch_gpt.GPTConfig.from_dict(dict(config_json, dropout=0.0))
    model = torch_gpt.GPT(config)
    model.eval()  # dropout is 0 anyway; eval makes sure of it

    weights = read_tensors(os.path.join(directory, "weights.safetensors"))
    expected = model.state_dict()
    unknown = sorted(set(weights) - set(expected))
    absent = sorted(set(expected) - set(weights))
    if unknown or absent:
        raise BadInput("weights.safetensors does not match the model: missing %s, unexpected %s"
                       % (absent or "none", unknown or "none"))
    for name, tensor in expected.items():
        if weights[name].shape != tensor.shape or weights[name].dtype != tensor.dtype:
            raise BadInput("weights.safetensors: %s is %s %s, the model has %s %s" % (
                name, weights[name].dtype, list(weights[name].shape), tensor.dtype, list(tensor.shape)))
    model.load_state_dict(weights, strict=True)
    return model, config_json["dtype"]


def main():
    if len(sys.argv) != 2:
        print("usage: %s DIR" % sys.argv[0], file=sys.stderr)
        return EXIT_BAD_INPUT
    directory = sys.argv[1]
    try:
        import torch
    except (ImportError, OSError) as error:
        print("SKIP: cannot import torch (%s); run with Debian's /usr/bin/python3 and python3-torch" % error)
        return EXIT_SKIP
    sys.path[:0] = [HERE, os.path.join(ROOT, "bench")]
    import torch_gpt

    try:
        model, dtype = load_model(torch, torch_gpt, directory)
        batch = read_tensors(os.path.join(directory, "batch.safetensors"))
        grads = read_tensors(os.path.join(directory, "grads.safetensors"))
        loss_json = read_json(os.path.join(directory, "loss.json"))
        if "ids" not in batch or "targets" not in batch:
            raise BadInput("batch.safetensors must hold 'ids' and 'targets', it holds %s" % sorted(batch))
        ids, targets = batch["ids"], batch["targets"]
        if ids.dtype != torch.int64 or targets.dtype != torch.int64 or ids.dim() != 2 or ids.shape != targets.shape:
            raise BadInput("batch.safetensors: ids %s %s and targets %s %s must both be int64 (B, T)" % (
                ids.dtype, list(ids.shape), targets.dtype, list(targets.shape)))
        if not isinstance(loss_json, dict) or not isinstance(loss_json.get("loss"), (int, float)):
            raise BadInput("loss.json must be {\"loss\": number}, it is %r" % (loss_json,))
        parameters = dict(model.named_parameters())
        unknown, absent = sorted(set(grads) - set(parameters)), sorted(set(parameters) - set(grads))
        if unknown or absent:
            raise BadInput("grads.safetensors does not match the model: missing %s, unexpected %s"
                           % (absent or "none", unknown or "none"))
        for name, parameter in parameters.items():
            if grads[name].shape != parameter.shape:
                raise BadInput("grads.safetensors: %s has shape %s, the parameter %s" % (
                    name, list(grads[name].shape), list(parameter.shape)))
    except BadInput as error:
        print("ERROR: %s" % error, file=sys.stderr)
        return EXIT_BAD_INPUT

    torch.set_num_threads(1)  # deterministic sums
    _, loss = model(ids, targets)
    loss.backward()

    tolerance = TOLERANCE[dtype]
    rows = [("loss", relative_error(torch.tensor(float(loss_json["loss"]), dtype=torch.float64), loss.detach()))]
    rows += [(name, relative_error(grads[name], parameter.grad)) for name, parameter in parameters.items()]
    width = max(len(name) for name, _ in rows)
    print("GPT gradient parity, %s, batch %s, %d parameters, tolerance %.0e" % (
        dtype, "x".join(str(s) for s in ids.shape), sum(p.numel() for p in parameters.values()), tolerance))
    print("loss: remat %.10g, torch %.10g" % (loss_json["loss"], loss.item()))
    print("%-*s  %s" % (width, "tensor", "max rel error"))
    for name, error in rows:
        print("%-*s  %.3e%s" % (width, name, error, "" if error <= tolerance else "  MISMATCH"))
    worst_name, worst = max(rows, key=lambda row: (row[1] != row[1], row[1]))  # NaN is the worst
    if not worst <= tolerance:  # NaN fails too
        bad = sum(1 for _, error in rows if not error <= tolerance)
        print("FAIL: %d of %d tensors differ; worst %s, max rel error %.3e > %.0e"
              % (bad, len(rows), worst_name, worst, tolerance))
        return EXIT_MISMATCH
    print("OK: %d tensors agree; worst %s, max rel error %.3e <= %.0e" % (len(rows), worst_name, worst, tolerance))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
