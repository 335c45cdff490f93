#!/usr/bin/env python3
"""Regenerates the binary seed inputs of fuzz/corpus/{safetensors,manifest}
and the generated regression inputs of fuzz/regressions/ (docs/fuzzing.md).

Manifests are written as protobuf text in fuzz/seeds/*.txtpb, encoded with
protoc and sealed as lib/Checkpoint/ManifestIO.cpp seals them (tag 0xa5 0x06,
then the CRC-32 of the bytes before it, little-endian).
Usage: fuzz/make_seeds.py (from anywhere; needs protoc on PATH).
"""
import os
import re
import struct
import subprocess
import sys
import zlib

FUZZ = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(FUZZ, "..", "test", "lit", "E2E", "Inputs"))
import safetensors_tool  # noqa: E402
PROTO_DIR = os.path.join(FUZZ, "..", "lib", "Checkpoint")


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def safetensors(path, tensors, metadata=None):
    """A file as Python's safetensors writes it (the lit tests' writer)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    safetensors_tool.write(path, tensors, metadata)


def manifest(text):
    encoded = subprocess.run(
        ["protoc", "--proto_path=" + PROTO_DIR,
         "--encode=sd.checkpoint.Manifest", "Manifest.proto"],
        input=text.encode(), capture_output=True, check=True).stdout
    return encoded + bytes([0xA5, 0x06]) + struct.pack("<I", zlib.crc32(encoded))


def main():
    corpus = os.path.join(FUZZ, "corpus", "safetensors")
    safetensors(os.path.join(corpus, "seed-f32"), {
        "w": ("F32", [2, 3], struct.pack("<6f", *range(6)))}, {"format": "pt"})
    safetensors(os.path.join(corpus, "seed-dtypes"), {
        "a": ("F16", [2], struct.pack("<2e", 1.5, -2)),
        "b": ("BF16", [1], b"\x80\x3f"),
        "c": ("F64", [], struct.pack("<d", 3.0))})
    safetensors(os.path.join(corpus, "seed-empty"), {})
    safetensors(os.path.join(corpus, "seed-zero"), {
        "e": ("F32", [0, 4], b""), "s": ("F32", [], struct.pack("<f", 1))},
        {"k": "v"})
    # Header length, then a header nested 30,000 levels deep.
    nested = b'{"__metadata__":{"k":' + b"[" * 30000 + b"]" * 30000 + b"}}"
    write(os.path.join(FUZZ, "regressions", "safetensors", "deeply-nested-json"),
          struct.pack("<Q", len(nested)) + nested)

    seeds = os.path.join(FUZZ, "seeds")
    base = open(os.path.join(seeds, "manifest-1.txtpb")).read()
    for n in (1, 2):
        text = open(os.path.join(seeds, "manifest-%d.txtpb" % n)).read()
        write(os.path.join(FUZZ, "corpus", "manifest", "seed-%d" % n),
              manifest(text))
    regressions = os.path.join(FUZZ, "regressions", "manifest")
    for name, step in (("step-minus-5", "-5"),
                       ("step-int64-min", "-9223372036854775808")):
        write(os.path.join(regressions, name),
              manifest(base.replace("step: 2\n", "step: %s\n" % step, 1)))
    # A 2^40 x 6 parameter in four shard files of 200 bytes.
    half = str(1 << 39)
    enormous = base.replace("global_shape: 4 global_shape: 6",
                            "global_shape: %d global_shape: 6" % (1 << 40))
    enormous = enormous.replace("shape: 2 shape: 3", "shape: %s shape: 3" % half)
    enormous = re.sub(r"offset: 2 offset", "offset: %s offset" % half, enormous)
    write(os.path.join(regressions, "enormous-tensor"), manifest(enormous))

    mlir = os.path.join(FUZZ, "regressions", "mlir")
    write(os.path.join(mlir, "nested-modules"),
          b"module {\n" * 5000 + b"}\n" * 5000)
    write(os.path.join(mlir, "nested-attribute-arrays"),
          b"module attributes {x = " + b"[" * 20000 + b"]" * 20000 + b"} {}\n")
    write(os.path.join(mlir, "nested-types"),
          b"func.func private @f(" + b"tuple<" * 20000 + b"f32" +
          b">" * 20000 + b")\n")


if __name__ == "__main__":
    main()
