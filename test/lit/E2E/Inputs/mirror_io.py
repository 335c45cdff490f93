"""Model-independent file handling shared by the PyTorch mirrors.

dit_mirror.py, wan_mirror.py and flux_mirror.py build a model, give it
random weights and write a test case directory:

  diffusion_pytorch_model.safetensors        the weights, or with --shards
  diffusion_pytorch_model-0000K-of-0000N.safetensors plus
  diffusion_pytorch_model.safetensors.index.json   (diffusers' layout)
  inputs.safetensors                         the forward pass's inputs
  expected.safetensors                       tensor "out", the output
  config.json                                the model's configuration

This module holds what does not depend on the model: safetensors
(de)serialisation through safetensors_tool, writing and reading single or
sharded weights, the write/check/compare command skeletons and the
command-line options every mirror shares.  Nothing here prints except the
commands themselves.
"""
import argparse
import glob
import json
import os
import sys

import numpy as np
import torch

import safetensors_tool

WEIGHTS = "diffusion_pytorch_model"
NUMPY_TYPES = {"F32": "<f4", "F16": "<f2", "F64": "<f8", "I64": "<i8"}
# The dtypes a mirror may store its weights in.
WEIGHT_DTYPES = ("F32", "BF16", "F16")


# ----------------------------------------------------------------------------
# Tensor (de)serialisation
# ----------------------------------------------------------------------------

def encode(tensor, dtype):
    """Tensor -> safetensors tuple (dtype, shape, bytes), rounding to dtype."""
    shape = list(tensor.shape)
    if dtype == "BF16":
        bits = tensor.detach().to(torch.bfloat16).view(torch.int16)
        raw = bits.numpy().astype("<i2").tobytes()
    elif dtype == "F16":
        raw = tensor.detach().to(torch.float16).numpy().astype("<f2").tobytes()
    else:
        array = tensor.detach().numpy().astype(NUMPY_TYPES[dtype])
        raw = array.tobytes()
    return dtype, shape, raw


def decode(entry):
    """safetensors tuple -> tensor (float32 for float types, int64 for I64)."""
    dtype, shape, raw = entry
    if dtype == "BF16":
        bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
        array = bits.view(np.float32)
    elif dtype == "I64":
        array = np.frombuffer(raw, dtype="<i8").astype(np.int64)
    elif dtype in NUMPY_TYPES:
        array = np.frombuffer(raw, dtype=NUMPY_TYPES[dtype]).astype(np.float32)
    else:
        raise ValueError("unsupported dtype %s" % dtype)
    return torch.from_numpy(array.reshape(shape).copy())


def read_tensors(path):
    """A safetensors file's tensors as {name: (dtype, shape, bytes)}."""
    _, entries = safetensors_tool.read(path)
    return entries


def read_decoded(path):
    """A safetensors file's tensors as {name: tensor}."""
    return {name: decode(entry) for name, entry in read_tensors(path).items()}


def encode_state(state_dict, dtype):
    """(entries, weights): the state stored as dtype, and widened back.

    A mirror computes its expected output from the widened weights, so the
    output is a function of exactly what is written.
    """
    entries = {name: encode(tensor, dtype)
               for name, tensor in state_dict.items()}
    weights = {name: decode(entry) for name, entry in entries.items()}
    return entries, weights


# ----------------------------------------------------------------------------
# Weights files (single or diffusers-sharded)
# ----------------------------------------------------------------------------

def shard_name(index, count):
    return "%s-%05d-of-%05d.safetensors" % (WEIGHTS, index + 1, count)


def assign_shards(sizes, count):
    """Contiguous, non-empty shard index per tensor, balancing the bytes."""
    if count > len(sizes):
        raise ValueError("%d shards for %d tensors" % (count, len(sizes)))
    total = sum(sizes)
    assignment, before, previous = [], 0, 0
    for i, size in enumerate(sizes):
        by_bytes = int((before + size / 2) * count / max(total, 1))
        # Enough tensors must remain for the later shards; none may be skipped.
        wanted = max(previous, by_bytes, count - len(sizes) + i)
        previous = 0 if i == 0 else min(previous + 1, wanted)
        assignment.append(previous)
        before += size
    return assignment


def remove_old_weights(out_dir):
    pattern = os.path.join(out_dir, WEIGHTS + "*.safetensors*")
    for path in glob.glob(pattern):
        os.remove(path)


def write_weights(out_dir, entries, shards):
    """Writes the weights; returns the paths written."""
    metadata = {"format": "pt"}
    remove_old_weights(out_dir)
    if shards == 1:
        path = os.path.join(out_dir, WEIGHTS + ".safetensors")
        safetensors_tool.write(path, entries, metadata)
        return [path]
    names = list(entries)
    sizes = [len(entries[name][2]) for name in names]
    assignment = assign_shards(sizes, shards)
    weight_map, paths = {}, []
    for shard in range(shards):
        file_name = shard_name(shard, shards)
        part = {n: entries[n] for n, s in zip(names, assignment) if s == shard}
        weight_map.update({name: file_name for name in part})
        paths.append(os.path.join(out_dir, file_name))
        safetensors_tool.write(paths[-1], part, metadata)
    index = {"metadata": {"total_size": sum(sizes)}, "weight_map": weight_map}
    paths.append(os.path.join(out_dir, WEIGHTS + ".safetensors.index.json"))
    write_json(paths[-1], index)
    return paths


def read_weights(out_dir):
    """Single or sharded weights as {name: tensor}; checks the index."""
    index_path = os.path.join(out_dir, WEIGHTS + ".safetensors.index.json")
    if not os.path.exists(index_path):
        return read_decoded(os.path.join(out_dir, WEIGHTS + ".safetensors"))
    with open(index_path) as f:
        index = json.load(f)
    weight_map = index["weight_map"]
    tensors, total = {}, 0
    for file_name in sorted(set(weight_map.values())):
        entries = read_tensors(os.path.join(out_dir, file_name))
        for name, entry in entries.items():
            if weight_map.get(name) != file_name:
                raise ValueError("%s in %s, index says %s"
                                 % (name, file_name, weight_map.get(name)))
            total += len(entry[2])
            tensors[name] = decode(entry)
    missing = set(weight_map) - set(tensors)
    if missing:
        raise ValueError("index names missing tensors: %s" % sorted(missing))
    if total != index["metadata"]["total_size"]:
        raise ValueError("total_size %d, tensors hold %d bytes"
                         % (index["metadata"]["total_size"], total))
    return tensors


def write_json(path, value):
    with open(path, "w") as f:
        json.dump(value, f, indent=2, sort_keys=True)
        f.write("\n")


def read_json(path):
    with open(path) as f:
        return json.load(f)


# ----------------------------------------------------------------------------
# Test case directories
# ----------------------------------------------------------------------------

def write_case(out_dir, entries, shards, inputs, out, config):
    """Writes a case directory and prints the paths written, one a line.

    entries: the encoded weights; inputs: {name: encoded tensor}; out: the
    expected output tensor (stored as F32 "out"); config: config.json's
    value.
    """
    paths = write_weights(out_dir, entries, shards)
    paths.append(os.path.join(out_dir, "inputs.safetensors"))
    safetensors_tool.write(paths[-1], inputs)
    paths.append(os.path.join(out_dir, "expected.safetensors"))
    safetensors_tool.write(paths[-1], {"out": encode(out, "F32")})
    paths.append(os.path.join(out_dir, "config.json"))
    write_json(paths[-1], config)
    for path in paths:
        print(path)
    return 0


def write_model_case(args, config, model, inputs, run_model):
    """A mirror's write command after it has built and randomized `model`.

    inputs: {name: float tensor}, stored as F32; run_model(model, weights,
    inputs) gives the expected output from the stored (rounded) weights.
    Writes args.out_dir with args.dtype weights in args.shards files.
    """
    os.makedirs(args.out_dir, exist_ok=True)
    entries, weights = encode_state(model.state_dict(), args.dtype)
    out = run_model(model, weights, inputs)
    encoded = {name: encode(tensor, "F32") for name, tensor in inputs.items()}
    return write_case(args.out_dir, entries, args.shards, encoded, out, config)


def check_case(out_dir, compute):
    """Recomputes a case directory's output and compares it bitwise.

    compute(config, weights, inputs) returns the output; weights and inputs
    are {name: tensor}.  Prints the largest difference; returns 1 unless it
    is 0.
    """
    config = read_json(os.path.join(out_dir, "config.json"))
    weights = read_weights(out_dir)
    inputs = read_decoded(os.path.join(out_dir, "inputs.safetensors"))
    expected = decode(read_tensors(
        os.path.join(out_dir, "expected.safetensors"))["out"])
    out = compute(config, weights, inputs)
    if out.shape != expected.shape:
        print("shape %s, expected %s"
              % (list(out.shape), list(expected.shape)))
        return 1
    diff = (out - expected).abs().max().item()
    print("max abs diff: %g" % diff)
    return 0 if diff == 0 else 1


def compare(actual_path, expected_path, tolerance):
    """Prints max|a - e| / max|e| over tensor "out"; 1 above tolerance."""
    actual = read_tensors(actual_path).get("out")
    expected = read_tensors(expected_path).get("out")
    if actual is None or expected is None:
        print("no tensor 'out' in %s" % (actual_path if actual is None
                                         else expected_path))
        return 1
    if list(actual[1]) != list(expected[1]):
        print("shape mismatch: actual %s, expected %s"
              % (list(actual[1]), list(expected[1])))
        return 1
    a = decode(actual).double().numpy()
    e = decode(expected).double().numpy()
    if a.size == 0:
        error = 0.0
    else:
        error = np.max(np.abs(a - e)) / max(np.max(np.abs(e)), 1e-30)
    print("max relative error: %g" % error)
    return 0 if error <= tolerance else 1


def command_compare(args):
    return compare(args.actual, args.expected, args.tolerance)


# ----------------------------------------------------------------------------
# Command line
# ----------------------------------------------------------------------------

def make_parser(doc):
    """(parser, commands, write): the top-level parser, its subcommands and
    the "write" subcommand with --out-dir; the mirror adds its sizes to
    write, then calls add_write_options and add_check_and_compare."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    write = commands.add_parser("write", help="write weights, inputs, output")
    write.add_argument("--out-dir", required=True)
    return parser, commands, write


def add_write_options(write):
    """--batch, --seed, --dtype and --shards, in that order."""
    write.add_argument("--batch", type=int, default=2)
    write.add_argument("--seed", type=int, default=0)
    write.add_argument("--dtype", choices=WEIGHT_DTYPES, default="F32")
    write.add_argument("--shards", type=int, default=1)


def add_check_and_compare(commands):
    check = commands.add_parser("check", help="verify a written directory")
    check.add_argument("--out-dir", required=True)

    compare_parser = commands.add_parser("compare",
                                         help="compare tensor 'out'")
    compare_parser.add_argument("actual")
    compare_parser.add_argument("expected")
    compare_parser.add_argument("--tolerance", type=float, default=1e-4)


def run(args, commands):
    """Runs commands[args.command](args) on one CPU thread; expected
    errors become a one-line message and exit status 1."""
    torch.set_num_threads(1)
    try:
        return commands[args.command](args)
    except (OSError, KeyError, ValueError, RuntimeError) as error:
        print("error: %s" % error, file=sys.stderr)
        return 1
