#!/usr/bin/python3
"""One DiT-S/2 training step in PyTorch, mirroring sd's models/dit_s2.mlir.

The baseline sd's own training step is compared against (bench/train_step.sh).
It mirrors lib/ModelGen/DiT.cpp (and Layers.cpp, ModelBuilder.cpp) exactly:

* latents, noise: [B, 32, 32, 4] (channel-last), t ~ U[0, 1], labels one-hot
  over 1001 classes (1000 + the null class), embedded by a matmul with the
  [1001, 384] table.
* flow-matching noising (sd's default loss): x_t = x0 + t·(noise − x0),
  target = noise − x0; loss = mean((pred − target)²).
* patchify channel-major ([B, h, w, C, p, p] → 16 features per token), linear
  patch embedding, fixed 2-D sin-cos position table.
* timestep embedding: t·1000·exp(−ln(1e4)·k/128), [cos, sin] (256) → Linear →
  SiLU → Linear; c = temb + yemb; SiLU(c) feeds every adaLN.
* 12 adaLN-Zero blocks: LayerNorm (no affine, eps 1e-6), modulate
  x·(1 + scale) + shift, fused qkv [384, 3, 384], softmax(QKᵀ/√64)·V over 6
  heads, proj, gated residual, MLP 384 → 1536 → 384 with tanh-GELU.
* final layer: adaLN (2 chunks) modulated LayerNorm, Linear 384 → 32
  (learn_sigma: 2·4 channels per cell), first 4 channels per cell kept,
  unpatchify channel-minor.
* AdamW: lr 1e-4, b1 0.9, b2 0.999, eps 1e-8, weight decay 1e-2 on every
  parameter (sd-differentiate's defaults), no clipping, no warm-up.

Weights are stored in sd's layout ([in, out], fused [in, k, out]) so the
parameter count and shapes are those of sd (32,865,056 elements in 131
tensors for DiT-S/2).

Data-parallel (--processes=2 --threads=1): torch.distributed with gloo on
127.0.0.1, one process per rank, each holding a replica wrapped in
DistributedDataParallel and its slice of the global batch (8 → 4 + 4); the
gradients are averaged by DDP's bucketed all-reduce during the backward.
A step's time is the slowest rank's.

Mixed precision (--autocast): the forward and the loss run under
torch.autocast("cpu", dtype=torch.bfloat16), PyTorch's CPU autocast (its
bf16 ops: matmuls, linear layers; its f32 list: softmax, layer norm, the
loss), with f32 parameters and AdamW state, as sd's weights_dtype and
activations_dtype bfloat16 train from f32 master weights.

Run with Debian's interpreter: /usr/bin/python3 bench/pytorch_dit_s2.py
"""

import argparse
import math
import os
import socket
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F


class Config:
    def __init__(self, depth=12, hidden=384, heads=6, patch=2, latent=32,
                 channels=4, out_channels=8, num_classes=1000, freq_dim=256,
                 mlp_ratio=4):
        self.depth = depth
        self.hidden = hidden
        self.heads = heads
        self.patch = patch
        self.latent = latent
        self.channels = channels
        self.out_channels = out_channels
        self.num_classes = num_classes
        self.freq_dim = freq_dim
        self.mlp = mlp_ratio * hidden

    @property
    def grid(self):
        return self.latent // self.patch

    @property
    def tokens(self):
        return self.grid * self.grid


PRESETS = {
    "dit-tiny": dict(depth=2, hidden=64, heads=4),
    "dit-s2": dict(depth=12, hidden=384, heads=6),
    "dit-b2": dict(depth=12, hidden=768, heads=12),
}


def xavier(shape_in, shape_out_total, shape, gen):
    # PyTorch's xavier_uniform_ on Linear(in, out_total): bound from fans.
    bound = math.sqrt(6.0 / (shape_in + shape_out_total))
    return (torch.rand(shape, generator=gen) * 2 - 1) * bound


def make_params(c, gen):
    """Parameters in sd's order, names and shapes."""
    d, p = c.hidden, c.patch
    params = {}

    def linear(name, i, o, init="xavier", std=0.0):
        if init == "xavier":
            w = xavier(i, o, (i, o), gen)
        elif init == "normal":
            w = torch.randn((i, o), generator=gen) * std
        else:
            w = torch.zeros((i, o))
        params[name + ".weight"] = w
        params[name + ".bias"] = torch.zeros(o)

    def fused(name, i, k, o, init="xavier"):
        if init == "xavier":
            w = xavier(i, k * o, (i, k, o), gen)
        else:
            w = torch.zeros((i, k, o))
        params[name + ".weight"] = w
        params[name + ".bias"] = torch.zeros((k, o))

    linear("x_embedder.proj", p * p * c.channels, d)
    linear("t_embedder.mlp.0", c.freq_dim, d, "normal", 0.02)
    linear("t_embedder.mlp.2", d, d, "normal", 0.02)
    params["y_embedder.embedding_table.weight"] = (
        torch.randn((c.num_classes + 1, d), generator=gen) * 0.02)
    for i in range(c.depth):
        s = "blocks.%d." % i
        fused(s + "attn.qkv", d, 3, d)
        linear(s + "attn.proj", d, d)
        linear(s + "mlp.fc1", d, c.mlp)
        linear(s + "mlp.fc2", c.mlp, d)
        fused(s + "adaLN_modulation.1", d, 6, d, "zeros")
    linear("final_layer.linear", d, p * p * c.out_channels, "zeros")
    fused("final_layer.adaLN_modulation.1", d, 2, d, "zeros")
    return {k: v.requires_grad_(True) for k, v in params.items()}


def inverse_frequencies(n, denominator, theta=10000.0):
    return torch.exp(torch.arange(n, dtype=torch.float32) *
                     (-math.log(theta) / denominator))


def timestep_embedding(t, dim):
    half = dim // 2
    freqs = inverse_frequencies(half, half) * 1000.0
    args = t[:, None] * freqs[None, :]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=1)


def sincos_2d(grid_h, grid_w, dim):
    quarter = dim // 4
    omega = inverse_frequencies(quarter, quarter)
    col = torch.arange(grid_w, dtype=torch.float32)[None, :, None].expand(
        grid_h, grid_w, quarter) * omega
    row = torch.arange(grid_h, dtype=torch.float32)[:, None, None].expand(
        grid_h, grid_w, quarter) * omega
    emb = torch.cat([torch.sin(col), torch.cos(col), torch.sin(row),
                     torch.cos(row)], dim=2)
    return emb.reshape(grid_h * grid_w, dim)


def linear(x, params, name):
    return x @ params[name + ".weight"] + params[name + ".bias"]


def fused_chunks(x, params, name):
    w = params[name + ".weight"]  # [in, k, out]
    i, k, o = w.shape
    y = x @ w.reshape(i, k * o)
    y = y.reshape(*x.shape[:-1], k, o) + params[name + ".bias"]
    return y.unbind(dim=-2)


def layer_norm(x):
    return F.layer_norm(x, (x.shape[-1],), eps=1e-6)


def modulate(x, shift, scale):
    return x + x * scale[:, None, :] + shift[:, None, :]


def dit_block(c, x, cond_silu, params, prefix):
    b, s, d = x.shape
    hd = d // c.heads
    mod = fused_chunks(cond_silu, params, prefix + "adaLN_modulation.1")
    h = modulate(layer_norm(x), mod[0], mod[1])
    q, k, v = fused_chunks(h, params, prefix + "attn.qkv")
    q, k, v = (t.reshape(b, s, c.heads, hd).transpose(1, 2) for t in (q, k, v))
    scores = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(hd))
    o = torch.softmax(scores, dim=-1) @ v
    o = o.transpose(1, 2).reshape(b, s, d)
    attn = linear(o, params, prefix + "attn.proj")
    x = x + mod[2][:, None, :] * attn
    h = modulate(layer_norm(x), mod[3], mod[4])
    act = F.gelu(linear(h, params, prefix + "mlp.fc1"), approximate="tanh")
    mlp = linear(act, params, prefix + "mlp.fc2")
    return x + mod[5][:, None, :] * mlp


def loss_fn(c, params, pos, x0, noise, t, labels):
    b = x0.shape[0]
    p, g, ch = c.patch, c.grid, c.channels
    # Flow matching: x_t = x0 + t·(noise − x0), target = noise − x0.
    target = noise - x0
    xt = x0 + t[:, None, None, None] * target
    # Patchify, channel-major: [B, h, p, w, p, C] → [B, h, w, C, p, p].
    patches = xt.reshape(b, g, p, g, p, ch).permute(0, 1, 3, 5, 2, 4)
    patches = patches.reshape(b, g * g, p * p * ch)
    x = linear(patches, params, "x_embedder.proj") + pos

    temb = timestep_embedding(t, c.freq_dim)
    temb = F.silu(linear(temb, params, "t_embedder.mlp.0"))
    temb = linear(temb, params, "t_embedder.mlp.2")
    yemb = labels @ params["y_embedder.embedding_table.weight"]
    cond_silu = F.silu(temb + yemb)

    for i in range(c.depth):
        x = dit_block(c, x, cond_silu, params, "blocks.%d." % i)

    shift, scale = fused_chunks(cond_silu, params,
                                "final_layer.adaLN_modulation.1")
    h = modulate(layer_norm(x), shift, scale)
    out = linear(h, params, "final_layer.linear")  # [B, S, p·p·outC]
    if c.out_channels != ch:
        out = out.reshape(b, g * g, p * p, c.out_channels)[..., :ch]
    # Unpatchify, channel-minor: [B, h, w, p, p, C] → [B, h, p, w, p, C].
    pred = out.reshape(b, g, g, p, p, ch).permute(0, 1, 3, 2, 4, 5)
    pred = pred.reshape(b, g * p, g * p, ch)
    return torch.mean((pred - target) ** 2)


def training_flops(c, batch):
    """Analytic FLOPs of one training step: matmuls (2·m·n·k each, backward
    twice the forward) plus attention's two batched products. Elementwise
    work and the optimizer are left out (a few percent)."""
    d, s, m = c.hidden, c.tokens, c.mlp
    tok = batch * s
    hd = d // c.heads
    per_block = (2 * tok * d * 3 * d + 2 * tok * d * d + 2 * tok * d * m * 2
                 + 2 * batch * d * 6 * d
                 + 2 * 2 * batch * c.heads * s * s * hd)
    fwd = (c.depth * per_block
           + 2 * tok * c.patch ** 2 * c.channels * d
           + 2 * batch * (c.freq_dim * d + d * d + (c.num_classes + 1) * d)
           + 2 * batch * d * 2 * d
           + 2 * tok * d * c.patch ** 2 * c.out_channels)
    return fwd, 3 * fwd


class DiTModule(torch.nn.Module):
    """The parameters as a Module, for DistributedDataParallel: forward is
    loss_fn. ParameterDict keys may not hold dots, so "." becomes "__"."""

    def __init__(self, c, params, pos):
        super().__init__()
        self.c = c
        self.names = list(params)
        self.p = torch.nn.ParameterDict(
            {n.replace(".", "__"): torch.nn.Parameter(t.detach())
             for n, t in params.items()})
        self.register_buffer("pos", pos)

    def forward(self, x0, noise, t, labels):
        params = {n: self.p[n.replace(".", "__")] for n in self.names}
        return loss_fn(self.c, params, self.pos, x0, noise, t, labels)


def train(args, rank=0, world=1):
    """Runs the warm-up and args.steps timed steps on this rank; returns the
    step times (the slowest rank's, when data-parallel) and the parameter
    count. With world > 1 every rank draws the same global batch and keeps
    its slice (batch / world samples); DDP averages the gradients."""
    torch.set_num_threads(args.threads)
    c = Config(**PRESETS[args.preset])
    gen = torch.Generator().manual_seed(args.seed)
    params = make_params(c, gen)
    count = sum(p.numel() for p in params.values())
    lead = rank == 0
    if lead:
        print("parameters: %d elements in %d tensors (%.1f MB f32)"
              % (count, len(params), count * 4 / 1e6))
    if args.flops and lead:
        fwd, step = training_flops(c, args.batch)
        print("flops: forward %.1f GFLOP, training step %.1f GFLOP"
              % (fwd / 1e9, step / 1e9))
    pos = sincos_2d(c.grid, c.grid, c.hidden)
    if world > 1:
        # The position table is a constant: nothing to broadcast per step.
        model = torch.nn.parallel.DistributedDataParallel(
            DiTModule(c, params, pos), broadcast_buffers=False)
        weights = list(model.parameters())
        step_loss = model
    else:
        weights = list(params.values())

        def step_loss(*inputs):
            return loss_fn(c, params, pos, *inputs)
    opt = torch.optim.AdamW(weights, lr=1e-4, betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=1e-2)
    local = args.batch // world

    def batch_inputs():
        shape = (args.batch, c.latent, c.latent, c.channels)
        x0 = torch.randn(shape, generator=gen)
        noise = torch.randn(shape, generator=gen)
        t = torch.rand((args.batch,), generator=gen)
        ids = torch.randint(0, c.num_classes, (args.batch,), generator=gen)
        labels = F.one_hot(ids, c.num_classes + 1).to(torch.float32)
        return tuple(x[rank * local:(rank + 1) * local]
                     for x in (x0, noise, t, labels))

    times = []
    for step in range(1 + args.steps):
        inputs = batch_inputs()
        if world > 1:
            dist.barrier()
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16,
                            enabled=args.autocast):
            loss = step_loss(*inputs)
        loss.backward()
        opt.step()
        elapsed = time.perf_counter() - start
        loss = loss.detach()
        if world > 1:
            # Outside the timed region: the slowest rank's time, the global
            # batch's loss.
            stats = torch.tensor([elapsed, loss.item()], dtype=torch.float64)
            dist.all_reduce(stats[:1], op=dist.ReduceOp.MAX)
            dist.all_reduce(stats[1:], op=dist.ReduceOp.SUM)
            elapsed, loss = stats[0].item(), stats[1] / world
        tag = "warm-up" if step == 0 else "step %d" % step
        if lead:
            print("%s: loss=%.6f time_s=%.3f" % (tag, loss.item(), elapsed))
            sys.stdout.flush()
        if step > 0:
            times.append(elapsed)
    return times, count, c


def report(args, times, count, c, world):
    median = statistics.median(times) if times else float("nan")
    line = "pytorch_dit_s2 step_s=%.4f params=%d threads=%d" % (
        median, count, args.threads)
    if world > 1:
        line += " processes=%d backend=gloo" % world
    if args.autocast:
        line += " autocast=bfloat16"
    if args.flops:
        line += " gflops=%.2f" % (training_flops(c, args.batch)[1] / 1e9
                                  / median)
    print(line)
    sys.stdout.flush()


def ddp_worker(rank, args, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=args.processes)
    try:
        times, count, c = train(args, rank, args.processes)
        if rank == 0:
            report(args, times, count, c, args.processes)
    finally:
        dist.destroy_process_group()


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2,
                    help="threads per process")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--batch", type=int, default=8, help="global batch")
    ap.add_argument("--processes", type=int, default=1,
                    help="> 1: data-parallel over this many processes "
                         "(torch.distributed, gloo on 127.0.0.1), the "
                         "global batch split evenly")
    ap.add_argument("--preset", default="dit-s2", choices=sorted(PRESETS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--flops", action="store_true",
                    help="print the analytic training FLOPs per step")
    ap.add_argument("--autocast", action="store_true",
                    help="the forward under torch.autocast('cpu', "
                         "dtype=torch.bfloat16)")
    args = ap.parse_args()
    if args.processes < 1 or args.threads < 1 or args.steps < 1:
        sys.exit("pytorch_dit_s2.py: --processes, --threads and --steps must "
                 "be positive")
    if args.batch % args.processes:
        sys.exit("pytorch_dit_s2.py: --batch %d is not divisible by "
                 "--processes %d" % (args.batch, args.processes))
    if args.processes == 1:
        times, count, c = train(args)
        report(args, times, count, c, 1)
        return
    torch.multiprocessing.spawn(ddp_worker, args=(args, free_port()),
                                nprocs=args.processes, join=True)


if __name__ == "__main__":
    main()
