"""Checks sdsample's outputs with the standard library alone.

  sdsample_check.py summary FILE            shape, labels per class, range
  sdsample_check.py compare A B TOL         A's and B's samples agree within
                                            TOL (absolute), labels equal
  sdsample_check.py rows FULL PART TOL      PART's samples of each class are
                                            the first ones of that class in
                                            FULL (within TOL)
  sdsample_check.py drop IN OUT NAME        IN without tensor NAME
  sdsample_check.py png FILE                the PNG's width and height
"""
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_tool import read, write  # noqa: E402


def floats(raw):
    return struct.unpack("<%df" % (len(raw) // 4), raw)


def load(path):
    """(shape, samples, labels) of an sdsample output file."""
    _, tensors = read(path)
    dtype, shape, raw = tensors["samples"]
    assert dtype == "F32", dtype
    labels = floats(tensors["labels"][2]) if "labels" in tensors else None
    return shape, floats(raw), labels


def per_sample(shape):
    n = 1
    for d in shape[1:]:
        n *= d
    return n


def main():
    command = sys.argv[1]
    if command == "summary":
        shape, samples, labels = load(sys.argv[2])
        counts = {}
        for label in labels or []:
            counts[int(label)] = counts.get(int(label), 0) + 1
        finite = all(v == v and abs(v) != float("inf") for v in samples)
        print("samples", "x".join(map(str, shape)), "finite" if finite else "NOT FINITE")
        print("labels", " ".join("%d:%d" % kv for kv in sorted(counts.items())))
        print("range [%.2f, %.2f]" % (min(samples), max(samples)))
    elif command == "compare":
        shape_a, a, labels_a = load(sys.argv[2])
        shape_b, b, labels_b = load(sys.argv[3])
        tolerance = float(sys.argv[4])
        assert shape_a == shape_b, (shape_a, shape_b)
        assert labels_a == labels_b
        worst = max(abs(x - y) for x, y in zip(a, b))
        print("largest difference %s: %s" % (
            "0" if worst == 0 else "%.1e" % worst,
            "ok" if worst <= tolerance else "FAILED"))
        sys.exit(worst > tolerance)
    elif command == "rows":
        shape, full, full_labels = load(sys.argv[2])
        _, part, part_labels = load(sys.argv[3])
        tolerance = float(sys.argv[4])
        n = per_sample(shape)
        taken = {}
        worst = 0.0
        for i, label in enumerate(part_labels):
            k = taken.get(label, 0)
            taken[label] = k + 1
            rows = [j for j, l in enumerate(full_labels) if l == label]
            j = rows[k]
            worst = max([worst] + [abs(x - y) for x, y in zip(
                part[i * n:(i + 1) * n], full[j * n:(j + 1) * n])])
        print("rows of the full run: largest difference %s: %s" % (
            "0" if worst == 0 else "%.1e" % worst,
            "ok" if worst <= tolerance else "FAILED"))
        sys.exit(worst > tolerance)
    elif command == "drop":
        metadata, tensors = read(sys.argv[2])
        del tensors[sys.argv[4]]
        write(sys.argv[3], tensors, metadata)
    elif command == "png":
        data = open(sys.argv[2], "rb").read()
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
        width, height = struct.unpack(">II", data[16:24])
        print("png %dx%d" % (width, height))


if __name__ == "__main__":
    main()
