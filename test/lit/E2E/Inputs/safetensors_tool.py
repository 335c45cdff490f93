"""Reads and writes safetensors files the way Hugging Face's library lays
them out (8-byte little-endian header size, JSON header, data), without
the library.

  safetensors_tool.py list FILE            print name dtype shape per tensor
  safetensors_tool.py write FILE NAME:DTYPE:D0xD1[:V] ... tensors of V (0.5),
                                           DTYPE F32 or F16
  safetensors_tool.py copy-bf16 IN OUT     IN's F32 tensors as BF16
"""
import json
import struct
import sys

SIZES = {"F32": 4, "F16": 2, "BF16": 2, "F64": 8, "I64": 8}


def read(path):
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    tensors = {}
    end = 0
    for name, info in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0] if kv[0] != "__metadata__" else -1):
        if name == "__metadata__":
            continue
        begin, stop = info["data_offsets"]
        assert begin == end, (name, begin, end)
        count = 1
        for d in info["shape"]:
            count *= d
        assert stop - begin == count * SIZES[info["dtype"]], name
        tensors[name] = (info["dtype"], info["shape"], body[begin:stop])
        end = stop
    assert end == len(body), (end, len(body))
    return header.get("__metadata__", {}), tensors


def write(path, tensors, metadata=None):
    header, offset = {}, 0
    if metadata:
        header["__metadata__"] = metadata
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    # Written tensor by tensor: joining gigabytes of weights in memory first
    # would copy them again for every tensor.
    with open(path, "wb") as out:
        out.write(struct.pack("<Q", len(text)) + text)
        for _, (_, _, raw) in tensors.items():
            out.write(raw)


def main():
    command = sys.argv[1]
    if command == "list":
        metadata, tensors = read(sys.argv[2])
        for key in sorted(metadata):
            print("metadata", key, metadata[key] if key != "model" else "...")
        for name in sorted(tensors):
            dtype, shape, _ = tensors[name]
            print(name, dtype, "x".join(map(str, shape)))
    elif command == "write":
        tensors = {}
        for spec in sys.argv[3:]:
            # NAME:F32:D0xD1[:VALUE] (or F16), every element VALUE (default 0.5; nan, inf).
            name, dtype, dims, *fill = spec.split(":")
            value = float(fill[0]) if fill else 0.5
            shape = [int(d) for d in dims.split("x")] if dims else []
            count = 1
            for d in shape:
                count *= d
            code = {"F32": "f", "F16": "e"}[dtype]
            tensors[name] = (dtype, shape, struct.pack("<%d%s" % (count, code), *([value] * count)))
        write(sys.argv[2], tensors)
    elif command == "copy-bf16":
        _, tensors = read(sys.argv[2])
        out = {}
        for name, (dtype, shape, raw) in tensors.items():
            assert dtype == "F32"
            words = struct.unpack("<%dI" % (len(raw) // 4), raw)
            # Truncation: the BF16 values are exactly representable in F32.
            out[name] = ("BF16", shape, struct.pack("<%dH" % len(words), *[w >> 16 for w in words]))
        write(sys.argv[3], out)


# fuzz/make_seeds.py imports write().
if __name__ == "__main__":
    main()
