"""Compares two sdrun loss curves (--metrics JSON lines) window by window.

  compare_curves.py REFERENCE.jsonl OTHER.jsonl WINDOW TOLERANCE

Each curve's losses are averaged over consecutive windows of WINDOW steps;
the script prints each window's relative difference |other - reference| /
reference and the largest, and compares what each curve learned (its first
window minus its last). Exits 1 when a window's difference exceeds
TOLERANCE, a curve did not go down, or the other curve learned less or more
than the reference by more than TOLERANCE of what the reference learned.
"""

import json
import sys


def losses(path):
    rows = [json.loads(line) for line in open(path) if line.strip()]
    return [float(r["loss"]) for r in sorted(rows, key=lambda r: int(r["step"]))]


def windows(values, size):
    return [sum(values[i:i + size]) / size
            for i in range(0, len(values) - size + 1, size)]


def main():
    ref_path, other_path, size, tolerance = sys.argv[1:5]
    size, tolerance = int(size), float(tolerance)
    ref, other = windows(losses(ref_path), size), windows(losses(other_path), size)
    if len(ref) != len(other) or not ref:
        sys.exit("compare_curves.py: the curves have %d and %d windows"
                 % (len(ref), len(other)))
    worst = 0.0
    for i, (a, b) in enumerate(zip(ref, other)):
        diff = abs(b - a) / abs(a)
        worst = max(worst, diff)
        print("window %d: reference %.6f other %.6f relative difference %.4f"
              % (i + 1, a, b, diff))
    learned = ref[-1] < ref[0] and other[-1] < other[0]
    progress = abs((other[0] - other[-1]) - (ref[0] - ref[-1])) / abs(ref[0] - ref[-1])
    print("largest relative difference %.4f (tolerance %g): %s"
          % (worst, tolerance, "ok" if worst <= tolerance else "FAILED"))
    print("both curves went down: %s" % ("yes" if learned else "no"))
    print("learned: reference %.6f other %.6f, relative difference %.4f: %s"
          % (ref[0] - ref[-1], other[0] - other[-1], progress,
             "ok" if progress <= tolerance else "FAILED"))
    sys.exit(0 if worst <= tolerance and learned and progress <= tolerance else 1)


if __name__ == "__main__":
    main()
