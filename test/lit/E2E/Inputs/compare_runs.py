"""Compares two sdrun runs: their losses step by step and their weights.

  compare_runs.py A.jsonl B.jsonl A.safetensors B.safetensors LOSS_TOL WEIGHT_TOL
  compare_runs.py --same-weights A.safetensors B.safetensors

The losses (--metrics JSON lines) must agree to LOSS_TOL relative at every
step; the exported weights (--export) tensor by tensor to WEIGHT_TOL,
relative to the tensor's largest magnitude (at least 1e-3, so that a tensor
still near zero is compared absolutely). Prints the largest differences and
exits 1 when either exceeds its bound. With --same-weights, the two exports'
tensors must be bitwise equal (their metadata, such as the step, may
differ): it prints "same weights" or the first tensor that differs.
"""
import json
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_tool import read  # noqa: E402


def losses(path):
    rows = [json.loads(line) for line in open(path) if line.strip()]
    return {int(r["step"]): float(r["loss"]) for r in rows}


def floats(entry):
    dtype, _, raw = entry
    assert dtype == "F32", dtype
    return struct.unpack("<%df" % (len(raw) // 4), raw)


def same_weights(a_path, b_path):
    _, a = read(a_path)
    _, b = read(b_path)
    if sorted(a) != sorted(b):
        print("the exports hold other tensors")
        return 1
    for name in sorted(a):
        if a[name] != b[name]:
            print("tensor '%s' differs" % name)
            return 1
    print("same weights: %d tensors" % len(a))
    return 0


def main():
    if sys.argv[1] == "--same-weights":
        return same_weights(sys.argv[2], sys.argv[3])
    a_metrics, b_metrics, a_weights, b_weights = sys.argv[1:5]
    loss_tol, weight_tol = float(sys.argv[5]), float(sys.argv[6])
    a, b = losses(a_metrics), losses(b_metrics)
    if sorted(a) != sorted(b):
        print("the runs have other steps: %s and %s" % (sorted(a), sorted(b)))
        return 1
    loss_diff = max(abs(a[s] - b[s]) / abs(a[s]) for s in a)
    _, wa = read(a_weights)
    _, wb = read(b_weights)
    if sorted(wa) != sorted(wb):
        print("the exports hold other tensors")
        return 1
    worst, worst_name = 0.0, ""
    for name in sorted(wa):
        x, y = floats(wa[name]), floats(wb[name])
        scale = max(1e-3, max(abs(v) for v in x))
        diff = max(abs(p - q) for p, q in zip(x, y)) / scale
        if diff > worst:
            worst, worst_name = diff, name
    ok = loss_diff <= loss_tol and worst <= weight_tol
    print("%d steps: largest loss difference %.3g (bound %g); largest weight "
          "difference %.3g in '%s' (bound %g): %s"
          % (len(a), loss_diff, loss_tol, worst, worst_name, weight_tol,
             "ok" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
