"""A synthetic text-conditioned task: the digits with a text encoder's states.

The "text encoder" is a table: the prompt "a photo of the digit d" has
fixed random states (seeded), and so has the empty prompt.  A data set of
cached latents and text-encoder outputs (MaxDiffusion's
cache_latents_text_encoder_outputs, sd's format in docs/data.md) pairs each
digit image with its digit's states; a fraction of the training samples get
the empty prompt's (caption dropout, so the model also learns the
unconditional prediction that classifier-free guidance needs).

  text_digits.py data DIGITS OUT [--frames F] --text-length L --text-dim D
                 [--pooled-dim P] [--drop 0.1] [--seed 0]
      the data set: latents [H, W, C] (or video [F, H, W, C], the image in
      every frame), labels, embeddings [L, D] (and pooled_embeddings [P])
  text_digits.py prompts OUT.safetensors --text-length L --text-dim D
                 [--pooled-dim P] [--seed 0] [--no-negative]
      sdsample --text-states: prompt_embeds [10, L, D] for the digits 0..9,
      pooled_prompt_embeds [10, P], and the empty prompt's states as
      negative_prompt_embeds [1, L, D] (negative_pooled_prompt_embeds)
      unless --no-negative
  text_digits.py score SAMPLES DIGITS [--min 0.5]
      how many samples are nearest (in pixels, first frame) to the mean
      training image of their prompt's digit; exit 1 below --min
"""
import argparse
import json
import os
import sys
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_tool import read, write  # noqa: E402

EMPTY = 10  # the empty prompt's row of the table


def table(args):
    """The states of the prompts 0..9 and of the empty prompt (row 10)."""
    rng = np.random.RandomState(args.seed)
    states = rng.standard_normal((11, args.text_length, args.text_dim))
    pooled = rng.standard_normal((11, max(args.pooled_dim, 1)))
    return states.astype(np.float32), pooled.astype(np.float32)


def tensor(array):
    array = np.ascontiguousarray(array, dtype="<f4")
    return ("F32", list(array.shape), array.tobytes())


def read_split(digits, index, split):
    """The images [n, H, W, C] and labels [n] of a split of sddata's set."""
    images, labels = [], []
    for shard in index["splits"][split]["shards"]:
        _, tensors = read(os.path.join(digits, shard["file"]))
        dtype, shape, raw = tensors["images"]
        images.append(np.frombuffer(raw, "<f4").reshape(shape))
        labels.append(np.frombuffer(tensors["labels"][2], "<f4"))
    return np.concatenate(images), np.concatenate(labels)


def write_data(args):
    with open(os.path.join(args.digits, "index.json")) as f:
        digits = json.load(f)
    states, pooled = table(args)
    os.makedirs(args.out, exist_ok=True)
    sample_shape = list(digits["features"]["images"]["shape"])
    if args.frames:
        sample_shape = [args.frames] + sample_shape
    features = {
        "latents": {"dtype": "F32", "shape": sample_shape, "range": [-1, 1]},
        "labels": {"dtype": "F32", "shape": []},
        "embeddings": {"dtype": "F32",
                       "shape": [args.text_length, args.text_dim]},
    }
    if args.pooled_dim:
        features["pooled_embeddings"] = {"dtype": "F32",
                                         "shape": [args.pooled_dim]}
    splits = {}
    for split in digits["splits"]:
        images, labels = read_split(args.digits, digits, split)
        n = len(labels)
        if args.frames:
            images = np.repeat(images[:, None], args.frames, axis=1)
        prompt = labels.astype(np.int64)
        if split == "train":
            # Every 1/drop-th sample (by a fixed draw) has the empty prompt.
            drop = np.random.RandomState(args.seed + 1).uniform(size=n)
            prompt = np.where(drop < args.drop, EMPTY, prompt)
        tensors = {"latents": tensor(images), "labels": tensor(labels),
                   "embeddings": tensor(states[prompt])}
        if args.pooled_dim:
            tensors["pooled_embeddings"] = tensor(pooled[prompt])
        name = "%s-00000.safetensors" % split
        path = os.path.join(args.out, name)
        write(path, tensors, {"format": "pt"})
        with open(path, "rb") as f:
            data = f.read()
        splits[split] = {"count": n, "shards": [{
            "file": name, "count": n, "size_bytes": len(data),
            "crc32": "0x%08x" % (zlib.crc32(data) & 0xffffffff)}]}
    index = {"format": "sd-dataset", "version": 1, "name": "text-digits",
             "source": "text_digits.py: sddata's digits with a table of "
                       "text-encoder states per digit",
             "num_classes": 10, "class_names": [str(d) for d in range(10)],
             "features": features, "splits": splits}
    with open(os.path.join(args.out, "index.json"), "w") as f:
        json.dump(index, f, indent=2)
    print("wrote %s: %s" % (args.out, ", ".join(
        "%s %d" % (s, splits[s]["count"]) for s in sorted(splits))))


def write_prompts(args):
    states, pooled = table(args)
    tensors = {"prompt_embeds": tensor(states[:EMPTY])}
    if args.pooled_dim:
        tensors["pooled_prompt_embeds"] = tensor(pooled[:EMPTY])
    if not args.no_negative:
        tensors["negative_prompt_embeds"] = tensor(states[EMPTY:])
        if args.pooled_dim:
            tensors["negative_pooled_prompt_embeds"] = tensor(pooled[EMPTY:])
    write(args.out, tensors, {"format": "pt"})
    print("wrote %s: %s" % (args.out, ", ".join(
        "%s %s" % (name, tensors[name][1]) for name in sorted(tensors))))


def nearest_digits(samples_path, digits_dir):
    """The samples' tensors, and per sample the digit whose mean training
    image is nearest (in pixels; a video's first frame)."""
    with open(os.path.join(digits_dir, "index.json")) as f:
        digits = json.load(f)
    images, labels = read_split(digits_dir, digits, "train")
    means = np.stack([images[labels == d].mean(axis=0) for d in range(10)])
    means = means.reshape(10, -1)
    _, tensors = read(samples_path)
    dtype, shape, raw = tensors["samples"]
    samples = np.frombuffer(raw, "<f4").reshape(shape)
    if len(shape) == 5:  # video: the first frame
        samples = samples[:, 0]
    samples = samples.reshape(shape[0], -1)
    distances = ((samples[:, None, :] - means[None]) ** 2).sum(axis=2)
    return tensors, distances.argmin(axis=1)


def score(args):
    tensors, nearest = nearest_digits(args.samples, args.digits)
    prompts = np.frombuffer(tensors["prompts"][2], "<f4").astype(np.int64)
    hits = int((nearest == prompts).sum())
    fraction = hits / len(prompts)
    for d in sorted(set(prompts.tolist())):
        mask = prompts == d
        print("prompt %d: %d of %d nearest its digit" %
              (d, int((nearest[mask] == d).sum()), int(mask.sum())))
    verdict = "ok" if fraction >= args.min else "FAILED"
    print("steered: %d of %d samples (%.0f%%) nearest their prompt's digit, "
          "chance 10%%, bound %.0f%%: %s" %
          (hits, len(prompts), 100 * fraction, 100 * args.min, verdict))
    return 0 if fraction >= args.min else 1


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("data", "prompts"):
        p = sub.add_parser(name)
        if name == "data":
            p.add_argument("digits")
            p.add_argument("--frames", type=int, default=0)
            p.add_argument("--drop", type=float, default=0.1)
        else:
            p.add_argument("--no-negative", action="store_true")
        p.add_argument("out")
        p.add_argument("--text-length", type=int, required=True)
        p.add_argument("--text-dim", type=int, required=True)
        p.add_argument("--pooled-dim", type=int, default=0)
        p.add_argument("--seed", type=int, default=0)
    p = sub.add_parser("score")
    p.add_argument("samples")
    p.add_argument("digits")
    p.add_argument("--min", type=float, default=0.5)
    args = parser.parse_args()
    if args.command == "data":
        write_data(args)
    elif args.command == "prompts":
        write_prompts(args)
    else:
        return score(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
