"""PyTorch mirror of the DiT model, used to make reference data for sd.

The model follows the DiT class of facebookresearch/DiT's models.py
(Peebles & Xie, "Scalable Diffusion Models with Transformers"): a conv
patch embedding plus a fixed 2-D sin-cos position table, a sinusoidal
timestep embedder, a class-label embedder (with a "null" class row when
class dropout is on), DiT blocks with adaLN-Zero conditioning, a
modulated final layer and unpatchify.  Parameter names and shapes are
those of the reference's state_dict().  timm's PatchEmbed, Attention and
Mlp are re-implemented here with the same parameter layout.

Unlike the reference, every parameter (adaLN modulation and final layer
included) is random, so that every path contributes to the output; the
position table is the reference's fixed sin-cos table.  Everything runs
in float32 on one CPU thread.

  dit_mirror.py write --out-dir DIR [--input-size 16] [--patch 2]
      [--in-channels 4] [--hidden 64] [--depth 2] [--heads 4]
      [--mlp-ratio 4.0] [--num-classes 10] [--class-dropout 0.1]
      [--learn-sigma | --no-learn-sigma] [--batch 2] [--seed 0]
      [--dtype F32|BF16|F16] [--shards 1]
        writes into DIR: the weights (diffusion_pytorch_model.safetensors,
        or with --shards N > 1 diffusion_pytorch_model-0000K-of-0000N
        .safetensors plus diffusion_pytorch_model.safetensors.index.json),
        inputs.safetensors (x, t, y), expected.safetensors (out = model(x,
        t, y) from the stored weights) and config.json.
  dit_mirror.py check --out-dir DIR
        reloads DIR's weights, config and inputs, recomputes the output and
        exits 1 unless it equals expected.safetensors exactly.
  dit_mirror.py compare ACTUAL EXPECTED [--tolerance 1e-4]
        prints max|a - e| / max|e| over tensor "out"; exits 1 above the
        tolerance.

The file handling shared with the other mirrors is in mirror_io.py.
"""
import argparse
import math
import os
import sys

import numpy as np
import torch
from torch import nn

import mirror_io
from mirror_io import encode

CONFIG_KEYS = ("input_size", "patch_size", "in_channels", "hidden_size",
               "depth", "num_heads", "mlp_ratio", "class_dropout_prob",
               "num_classes", "learn_sigma")


# ----------------------------------------------------------------------------
# Model
# ----------------------------------------------------------------------------

def modulate(x, shift, scale):
    return x * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1)


def sincos_1d(dim, positions):
    """[sin(p * w_k), cos(p * w_k)] with w_k = 10000^(-k / (dim / 2))."""
    omega = 1.0 / 10000 ** (np.arange(dim // 2, dtype=np.float64) / (dim / 2))
    angles = np.outer(positions.reshape(-1), omega)
    return np.concatenate([np.sin(angles), np.cos(angles)], axis=1)


def sincos_2d(dim, grid_size):
    """Fixed position table [grid_size**2, dim], tokens in row-major order.

    As in the reference (from MAE), the first half of the channels encodes
    the column index and the second half the row index.
    """
    rows, cols = np.meshgrid(np.arange(grid_size, dtype=np.float32),
                             np.arange(grid_size, dtype=np.float32),
                             indexing="ij")
    return np.concatenate([sincos_1d(dim // 2, cols),
                           sincos_1d(dim // 2, rows)], axis=1)


class PatchEmbed(nn.Module):
    """Non-overlapping p x p patches to tokens (timm layout, no norm)."""

    def __init__(self, img_size, patch_size, in_channels, dim):
        super().__init__()
        self.num_patches = (img_size // patch_size) ** 2
        self.proj = nn.Conv2d(in_channels, dim, patch_size, stride=patch_size,
                              bias=True)

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)


class Attention(nn.Module):
    def __init__(self, dim, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=True)
        self.proj = nn.Linear(dim, dim, bias=True)

    def forward(self, x):
        b, n, d = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.num_heads, self.head_dim)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
        attn = (q * self.head_dim ** -0.5) @ k.transpose(-2, -1)
        out = attn.softmax(dim=-1) @ v
        return self.proj(out.transpose(1, 2).reshape(b, n, d))


class Mlp(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden, bias=True)
        self.act = nn.GELU(approximate="tanh")
        self.fc2 = nn.Linear(hidden, dim, bias=True)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class TimestepEmbedder(nn.Module):
    def __init__(self, hidden, frequency_size=256):
        super().__init__()
        self.frequency_size = frequency_size
        self.mlp = nn.Sequential(nn.Linear(frequency_size, hidden, bias=True),
                                 nn.SiLU(),
                                 nn.Linear(hidden, hidden, bias=True))

    @staticmethod
    def timestep_embedding(t, dim, max_period=10000):
        """[cos(t * f_k), sin(t * f_k)], f_k = max_period^(-k / half)."""
        half = dim // 2
        k = torch.arange(half, dtype=torch.float32)
        freqs = torch.exp(-math.log(max_period) * k / half)
        args = t[:, None].float() * freqs[None]
        emb = torch.cat([torch.cos(args), torch.sin(args)], dim=-1)
        if dim % 2:
            emb = torch.cat([emb, torch.zeros_like(emb[:, :1])], dim=-1)
        return emb

    def forward(self, t):
        return self.mlp(self.timestep_embedding(t, self.frequency_size))


class LabelEmbedder(nn.Module):
    """Label lookup; row num_classes (the null class) exists with dropout."""

    def __init__(self, num_classes, hidden, dropout_prob):
        super().__init__()
        rows = num_classes + (1 if dropout_prob > 0 else 0)
        self.embedding_table = nn.Embedding(rows, hidden)

    def forward(self, labels):
        return self.embedding_table(labels)


class DiTBlock(nn.Module):
    def __init__(self, hidden, num_heads, mlp_ratio):
        super().__init__()
        self.norm1 = nn.LayerNorm(hidden, elementwise_affine=False, eps=1e-6)
        self.attn = Attention(hidden, num_heads)
        self.norm2 = nn.LayerNorm(hidden, elementwise_affine=False, eps=1e-6)
        self.mlp = Mlp(hidden, int(hidden * mlp_ratio))
        self.adaLN_modulation = nn.Sequential(
            nn.SiLU(), nn.Linear(hidden, 6 * hidden, bias=True))

    def forward(self, x, c):
        (shift_msa, scale_msa, gate_msa,
         shift_mlp, scale_mlp, gate_mlp) = self.adaLN_modulation(c).chunk(6, 1)
        h = modulate(self.norm1(x), shift_msa, scale_msa)
        x = x + gate_msa.unsqueeze(1) * self.attn(h)
        h = modulate(self.norm2(x), shift_mlp, scale_mlp)
        return x + gate_mlp.unsqueeze(1) * self.mlp(h)


class FinalLayer(nn.Module):
    def __init__(self, hidden, patch_size, out_channels):
        super().__init__()
        self.norm_final = nn.LayerNorm(hidden, elementwise_affine=False,
                                       eps=1e-6)
        self.linear = nn.Linear(hidden, patch_size ** 2 * out_channels,
                                bias=True)
        self.adaLN_modulation = nn.Sequential(
            nn.SiLU(), nn.Linear(hidden, 2 * hidden, bias=True))

    def forward(self, x, c):
        shift, scale = self.adaLN_modulation(c).chunk(2, dim=1)
        return self.linear(modulate(self.norm_final(x), shift, scale))


class DiT(nn.Module):
    def __init__(self, input_size, patch_size, in_channels, hidden_size,
                 depth, num_heads, mlp_ratio, class_dropout_prob,
                 num_classes, learn_sigma):
        super().__init__()
        self.patch_size = patch_size
        self.out_channels = in_channels * (2 if learn_sigma else 1)
        self.x_embedder = PatchEmbed(input_size, patch_size, in_channels,
                                     hidden_size)
        self.t_embedder = TimestepEmbedder(hidden_size)
        self.y_embedder = LabelEmbedder(num_classes, hidden_size,
                                        class_dropout_prob)
        table = sincos_2d(hidden_size, input_size // patch_size)
        self.pos_embed = nn.Parameter(
            torch.from_numpy(table).float().unsqueeze(0), requires_grad=False)
        self.blocks = nn.ModuleList(
            DiTBlock(hidden_size, num_heads, mlp_ratio) for _ in range(depth))
        self.final_layer = FinalLayer(hidden_size, patch_size,
                                      self.out_channels)

    def unpatchify(self, x):
        """[N, T, p*p*C] -> [N, C, H, W]; a token's features are (p, q, c)."""
        p, c = self.patch_size, self.out_channels
        side = math.isqrt(x.shape[1])
        assert side * side == x.shape[1]
        x = x.reshape(x.shape[0], side, side, p, p, c)
        x = x.permute(0, 5, 1, 3, 2, 4)
        return x.reshape(x.shape[0], c, side * p, side * p)

    def forward(self, x, t, y):
        x = self.x_embedder(x) + self.pos_embed
        c = self.t_embedder(t) + self.y_embedder(y)
        for block in self.blocks:
            x = block(x, c)
        return self.unpatchify(self.final_layer(x, c))


def build_model(config):
    model = DiT(**{key: config[key] for key in CONFIG_KEYS})
    return model.eval()


def randomize(model, seed):
    """Random weights, all non-zero paths; pos_embed keeps its fixed table."""
    torch.manual_seed(seed)
    hidden = model.pos_embed.shape[-1]
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name == "pos_embed":
                continue
            if name.startswith("y_embedder."):
                param.normal_(0.0, 0.02 * math.sqrt(hidden))
            elif name.endswith(".bias"):
                param.normal_(0.0, 0.05)
            else:
                fan_in = param[0].numel()
                param.normal_(0.0, 1.0 / math.sqrt(fan_in))


# ----------------------------------------------------------------------------
# Commands
# ----------------------------------------------------------------------------

def make_inputs(config, batch, seed):
    generator = torch.Generator().manual_seed(seed + 1)
    size, channels = config["input_size"], config["in_channels"]
    x = torch.randn(batch, channels, size, size, generator=generator)
    t = torch.rand(batch, generator=generator) * 1000
    t = torch.minimum(t, torch.nextafter(torch.tensor(1000.0),
                                         torch.tensor(0.0)))
    y = torch.randint(0, config["num_classes"], (batch,), generator=generator)
    if config["class_dropout_prob"] > 0:
        y[-1] = config["num_classes"]
    return x, t, y


def run_model(model, weights, inputs):
    model.load_state_dict(weights, strict=True)
    with torch.no_grad():
        return model(inputs["x"], inputs["t"], inputs["y"])


def config_from_args(args):
    return {"input_size": args.input_size, "patch_size": args.patch,
            "in_channels": args.in_channels, "hidden_size": args.hidden,
            "depth": args.depth, "num_heads": args.heads,
            "mlp_ratio": args.mlp_ratio,
            "class_dropout_prob": args.class_dropout,
            "num_classes": args.num_classes, "learn_sigma": args.learn_sigma}


def command_write(args):
    config = config_from_args(args)
    os.makedirs(args.out_dir, exist_ok=True)
    model = build_model(config)
    randomize(model, args.seed)
    # The expected output is a function of the stored (rounded) weights.
    entries, weights = mirror_io.encode_state(model.state_dict(), args.dtype)
    x, t, y = make_inputs(config, args.batch, args.seed)
    out = run_model(model, weights, {"x": x, "t": t, "y": y})
    inputs = {"x": encode(x, "F32"), "t": encode(t, "F32"),
              "y": encode(y, "I64")}
    return mirror_io.write_case(args.out_dir, entries, args.shards, inputs,
                                out, config)


def command_check(args):
    def compute(config, weights, inputs):
        return run_model(build_model(config), weights, inputs)
    return mirror_io.check_case(args.out_dir, compute)


def parse_args(argv):
    parser, commands, write = mirror_io.make_parser(__doc__)
    write.add_argument("--input-size", type=int, default=16)
    write.add_argument("--patch", type=int, default=2)
    write.add_argument("--in-channels", type=int, default=4)
    write.add_argument("--hidden", type=int, default=64)
    write.add_argument("--depth", type=int, default=2)
    write.add_argument("--heads", type=int, default=4)
    write.add_argument("--mlp-ratio", type=float, default=4.0)
    write.add_argument("--num-classes", type=int, default=10)
    write.add_argument("--class-dropout", type=float, default=0.1)
    write.add_argument("--learn-sigma", action=argparse.BooleanOptionalAction,
                       default=True)
    mirror_io.add_write_options(write)
    mirror_io.add_check_and_compare(commands)

    args = parser.parse_args(argv)
    if args.command == "write":
        validate(write, args)
    return args


def validate(parser, args):
    if min(args.input_size, args.patch, args.in_channels, args.hidden,
           args.heads, args.num_classes, args.batch, args.shards) < 1:
        parser.error("sizes, --batch and --shards must be positive")
    if args.input_size % args.patch:
        parser.error("--input-size must be a multiple of --patch")
    if args.hidden % args.heads:
        parser.error("--hidden must be a multiple of --heads")
    if args.hidden % 4:
        parser.error("--hidden must be a multiple of 4 (2-D sin-cos table)")
    if int(args.hidden * args.mlp_ratio) < 1:
        parser.error("--mlp-ratio gives an empty MLP")


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    commands = {"write": command_write, "check": command_check,
                "compare": mirror_io.command_compare}
    return mirror_io.run(args, commands)


if __name__ == "__main__":
    sys.exit(main())
