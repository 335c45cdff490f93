"""Compares two sdrun runs: their losses step by step and their weights.

  compare_runs.py A.jsonl B.jsonl A.safetensors B.safetensors LOSS_TOL WEIGHT_TOL
  compare_runs.py --same-weights A.safetensors B.safetensors
  compare_runs.py --ema PREV.safetensors NEXT.safetensors EMA.safetensors D TOL
  compare_runs.py --lora-merged BASE ADAPTERS MERGED SCALE TOL
  compare_runs.py --same-losses A.jsonl B.jsonl

The losses (--metrics JSON lines) must agree to LOSS_TOL relative at every
step; the exported weights (--export) tensor by tensor to WEIGHT_TOL,
relative to the tensor's largest magnitude (at least 1e-3, so that a tensor
still near zero is compared absolutely). Prints the largest differences and
exits 1 when either exceeds its bound. With --same-weights, the two exports'
tensors must be exactly equal, value by value (−0 equals 0; their metadata,
such as the step, may differ): it prints "same weights" or the first tensor that differs. With
--ema, EMA must be D·PREV + (1 − D)·NEXT (the EMA update of a step whose
decay is D from an EMA equal to PREV) to TOL relative to each tensor's
largest magnitude. With --lora-merged, each weight X.weight of MERGED must
be BASE's plus SCALE·B·A for the pair X.lora_A.weight [r, in],
X.lora_B.weight [out, r] of ADAPTERS (PEFT's layout; BASE's own otherwise)
to TOL relative, and ADAPTERS must hold nothing else. With --same-losses,
the losses of the steps both runs logged must be exactly equal.
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
        if a[name][:2] != b[name][:2] or floats(a[name]) != floats(b[name]):
            print("tensor '%s' differs" % name)
            return 1
    print("same weights: %d tensors" % len(a))
    return 0


def ema_update(prev_path, next_path, ema_path, decay, tol):
    _, prev = read(prev_path)
    _, nxt = read(next_path)
    _, ema = read(ema_path)
    worst, worst_name = 0.0, ""
    for name in sorted(ema):
        p, q, e = floats(prev[name]), floats(nxt[name]), floats(ema[name])
        scale = max(1e-3, max(abs(v) for v in e))
        diff = max(abs(decay * a + (1 - decay) * b - c)
                   for a, b, c in zip(p, q, e)) / scale
        if diff > worst:
            worst, worst_name = diff, name
    ok = worst <= tol
    print("EMA = %.6g * previous + %.6g * parameters: largest difference %.3g "
          "in '%s' (bound %g): %s" % (decay, 1 - decay, worst, worst_name, tol,
                                      "ok" if ok else "FAILED"))
    return 0 if ok else 1


def lora_merged(base_path, adapters_path, merged_path, scale, tol):
    _, base = read(base_path)
    _, adapters = read(adapters_path)
    _, merged = read(merged_path)
    modules = set()
    for name in adapters:
        for suffix in (".lora_A.weight", ".lora_B.weight"):
            if name.endswith(suffix):
                modules.add(name[:-len(suffix)])
                break
        else:
            print("tensor '%s' is not an adapter" % name)
            return 1
    worst, worst_name = 0.0, ""
    for name in sorted(merged):
        w = list(floats(base[name]))
        module = name[:-len(".weight")]
        if module in modules:
            a_shape, b_shape = adapters[module + ".lora_A.weight"][1], \
                adapters[module + ".lora_B.weight"][1]
            a = floats(adapters[module + ".lora_A.weight"])
            b = floats(adapters[module + ".lora_B.weight"])
            rank, inner = a_shape
            outer = b_shape[0]
            for o in range(outer):
                for i in range(inner):
                    w[o * inner + i] += scale * sum(
                        b[o * rank + k] * a[k * inner + i] for k in range(rank))
        m = floats(merged[name])
        size = max(1e-3, max(abs(v) for v in m))
        diff = max(abs(x - y) for x, y in zip(w, m)) / size
        if diff > worst:
            worst, worst_name = diff, name
    ok = worst <= tol
    print("merged = base + %g * B·A for %d modules: largest difference %.3g "
          "in '%s' (bound %g): %s" % (scale, len(modules), worst, worst_name,
                                      tol, "ok" if ok else "FAILED"))
    return 0 if ok else 1


def same_losses(a_path, b_path):
    a, b = losses(a_path), losses(b_path)
    common = sorted(set(a) & set(b))
    if not common:
        print("the runs share no step")
        return 1
    for step in common:
        if a[step] != b[step]:
            print("step %d: loss %.9g and %.9g" % (step, a[step], b[step]))
            return 1
    print("same losses at steps %s" % ", ".join(map(str, common)))
    return 0


def main():
    if sys.argv[1] == "--same-losses":
        return same_losses(sys.argv[2], sys.argv[3])
    if sys.argv[1] == "--lora-merged":
        return lora_merged(sys.argv[2], sys.argv[3], sys.argv[4],
                           float(sys.argv[5]), float(sys.argv[6]))
    if sys.argv[1] == "--same-weights":
        return same_weights(sys.argv[2], sys.argv[3])
    if sys.argv[1] == "--ema":
        return ema_update(sys.argv[2], sys.argv[3], sys.argv[4],
                          float(sys.argv[5]), float(sys.argv[6]))
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
