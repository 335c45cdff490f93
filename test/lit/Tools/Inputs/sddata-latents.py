"""Writes a small dataset of cached latents (no labels, with text-encoder
embeddings) in sd's dataset format using only Python's standard library:
what docs/data.md describes for users who cache latents themselves (there
with numpy and the safetensors package), checked by sddata-latents.test.

Usage: sddata-latents.py OUT_DIR [--nan]
(--nan: sample 5's latents hold a NaN, which sd must refuse.)
"""
import json
import os
import struct
import sys
import zlib

H, W, C = 4, 4, 4  # latents, channels last
L, D = 3, 8  # embeddings per sample
SAMPLES, SHARD_SIZE = 10, 4


def save_safetensors(path, tensors, metadata):
    """What safetensors.numpy.save_file writes, for F32 tensors."""
    header = {"__metadata__": metadata}
    data = b""
    for name, (shape, values) in tensors.items():
        raw = struct.pack("<%df" % len(values), *values)
        header[name] = {"dtype": "F32", "shape": shape,
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


def main(out):
    os.makedirs(out, exist_ok=True)
    shards = []
    for start in range(0, SAMPLES, SHARD_SIZE):
        count = min(SHARD_SIZE, SAMPLES - start)
        samples = range(start, start + count)
        latents = [i * 0.5 + k * 0.01 - 2 for i in samples for k in range(H * W * C)]
        if NAN and start <= 5 < start + count:
            latents[(5 - start) * H * W * C + 7] = float("nan")
        embeddings = [i + k / 100 for i in samples for k in range(L * D)]
        name = "train-%05d.safetensors" % len(shards)
        path = os.path.join(out, name)
        save_safetensors(path, {"latents": ([count, H, W, C], latents),
                                "embeddings": ([count, L, D], embeddings)},
                         {"format": "pt"})
        data = open(path, "rb").read()
        shards.append({"file": name, "count": count, "size_bytes": len(data),
                       "crc32": "0x%08x" % zlib.crc32(data)})
    index = {
        "format": "sd-dataset", "version": 1, "name": "cached-latents",
        "source": "sddata-latents.py", "num_classes": 0, "class_names": [],
        "features": {"latents": {"dtype": "F32", "shape": [H, W, C]},
                     "embeddings": {"dtype": "F32", "shape": [L, D]}},
        "splits": {"train": {"count": SAMPLES, "shards": shards}},
    }
    # The index last, atomically: a reader never sees one without its shards.
    tmp = os.path.join(out, "index.json.tmp")
    with open(tmp, "w") as f:
        json.dump(index, f, indent=2)
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, os.path.join(out, "index.json"))


NAN = "--nan" in sys.argv[2:]

if __name__ == "__main__":
    main(sys.argv[1])
