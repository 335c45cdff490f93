"""The digits of some classes, and how well samples show their class.

  digit_subset.py write DIGITS OUT --classes 0,1,...
      a copy of sddata's digits data set (sd's format, docs/data.md) with
      the samples of the listed classes alone (labels keep their values,
      so the model keeps all ten classes and the null class)
  digit_subset.py score SAMPLES DIGITS --classes 9 [--min 0.5]
      of the samples (sdsample's output: samples, labels) of the listed
      classes, how many are nearest (in pixels) to the mean training image
      of their own class among the ten; exit 1 below --min
  digit_subset.py heldout BEFORE.log AFTER.log [--below 0.9]
      the last "held-out loss at step N: L" of two sdrun logs: exit 1
      unless AFTER's is below --below times BEFORE's
"""
import argparse
import json
import os
import re
import sys
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_tool import write  # noqa: E402
from text_digits import nearest_digits, read_split, tensor  # noqa: E402


def classes(text):
    return sorted({int(c) for c in text.split(",")})


def write_subset(args):
    with open(os.path.join(args.digits, "index.json")) as f:
        index = json.load(f)
    os.makedirs(args.out, exist_ok=True)
    keep = classes(args.classes)
    for split in index["splits"]:
        images, labels = read_split(args.digits, index, split)
        mask = np.isin(labels.astype(np.int64), keep)
        name = "%s-00000.safetensors" % split
        path = os.path.join(args.out, name)
        write(path, {"images": tensor(images[mask]),
                     "labels": tensor(labels[mask])}, {"format": "pt"})
        with open(path, "rb") as f:
            data = f.read()
        index["splits"][split] = {"count": int(mask.sum()), "shards": [{
            "file": name, "count": int(mask.sum()), "size_bytes": len(data),
            "crc32": "0x%08x" % (zlib.crc32(data) & 0xffffffff)}]}
    index["name"] = "digits-%s" % "".join(map(str, keep))
    with open(os.path.join(args.out, "index.json"), "w") as f:
        json.dump(index, f, indent=2)
    print("wrote %s: classes %s, %s" % (args.out, args.classes, ", ".join(
        "%s %d" % (s, index["splits"][s]["count"])
        for s in sorted(index["splits"]))))


def score(args):
    tensors, nearest = nearest_digits(args.samples, args.digits)
    sampled = np.frombuffer(tensors["labels"][2], "<f4").astype(np.int64)
    mask = np.isin(sampled, classes(args.classes))
    hits = int((nearest[mask] == sampled[mask]).sum())
    fraction = hits / max(int(mask.sum()), 1)
    verdict = "ok" if fraction >= args.min else "FAILED"
    print("classes %s: %d of %d samples (%.0f%%) nearest their class, "
          "bound %.0f%%: %s" % (args.classes, hits, int(mask.sum()),
                                100 * fraction, 100 * args.min, verdict))
    return 0 if fraction >= args.min else 1


def heldout(args):
    def last(path):
        found = re.findall(r"held-out loss at step (\d+): ([0-9.eE+-]+)",
                           open(path).read())
        return int(found[-1][0]), float(found[-1][1])
    (before_step, before), (after_step, after) = last(args.before), last(
        args.after)
    ok = after < args.below * before
    print("held-out loss %.4f (step %d) -> %.4f (step %d): %.1f%% of it, "
          "bound %.0f%%: %s" % (before, before_step, after, after_step,
                                100 * after / before, 100 * args.below,
                                "ok" if ok else "FAILED"))
    return 0 if ok else 1


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("write")
    p.add_argument("digits")
    p.add_argument("out")
    p.add_argument("--classes", required=True)
    p = sub.add_parser("score")
    p.add_argument("samples")
    p.add_argument("digits")
    p.add_argument("--classes", required=True)
    p.add_argument("--min", type=float, default=0.5)
    p = sub.add_parser("heldout")
    p.add_argument("before")
    p.add_argument("after")
    p.add_argument("--below", type=float, default=0.9)
    args = parser.parse_args()
    if args.command == "heldout":
        return heldout(args)
    if args.command == "write":
        write_subset(args)
        return 0
    return score(args)


if __name__ == "__main__":
    sys.exit(main())
