#!/usr/bin/python3
"""One reduced SD-2-style UNet training step in PyTorch, as sd trains it.

The baseline of bench/unet_step.sh. The network is the project's PyTorch
mirror of diffusers' UNet2DConditionModel (test/lit/E2E/Inputs/
unet_mirror.py, variant "sd2", imported from there, not copied), the
architecture sdgen writes for

  sdgen --preset=sd2-base --block-channels=64,128,256,256
        --attention-heads=2,4,8,8 --transformer-layers=1,1,1,1
        --latent-size=32 --text-dim=256 --text-length=77

that is: block_out_channels [64, 128, 256, 256], CrossAttnDownBlock2D x 3
+ DownBlock2D (the up path the reverse), layers_per_block 2,
attention_head_dim (heads) [2, 4, 8, 8], one transformer block per level,
32 norm groups, cross_attention_dim 256, 4 channels in and out, 32 x 32
latents; 34,966,724 parameters in 686 tensors, sd's count (bench/
unet_step.sh checks the two agree).

The step is sd's @loss for epsilon prediction (docs/sdgen.md, "Prediction
types") and sdrun's optimizer:

* x0, noise: [B, 4, 32, 32] standard normal (NCHW, PyTorch's layout; sd's
  is NHWC), t ~ U[0, 1) per sample, text states [B, 77, 256] standard
  normal;
* x_t = cos(pi t / 2) x0 + sin(pi t / 2) noise; the UNet sees x_t, the
  timestep t * 1000 and the text; target = noise; loss = mean((pred -
  target)^2);
* AdamW: lr 1e-4, b1 0.9, b2 0.999, eps 1e-8, weight decay 1e-2 except on
  the parameters sdrun excludes by default (*bias, *norm*,
  *embedding_table*), no clipping, no warm-up; f32 throughout (but see --autocast).

Weights start from PyTorch's own initialisation (seeded); the starting
values change no operation count.

Mixed precision (--autocast): the forward and the loss run under
torch.autocast("cpu", dtype=torch.bfloat16), PyTorch's CPU autocast
(convolutions, linear layers and matmuls in bf16, the rest as its op lists
say), with f32 parameters, gradients and AdamW state, as
bench/pytorch_dit_s2.py's --autocast. PyTorch 1.13's CPU autocast leaves
group norm and layer norm off its lists, and its CPU kernels refuse a bf16
input with f32 weights; under --autocast both compute in f32 on the
widened input, as CUDA autocast's f32 list makes them.

Data-parallel (--processes=2 --threads=1): torch.distributed with gloo on
127.0.0.1, one process per rank, each with a DistributedDataParallel
replica and its slice of the global batch (8 -> 4 + 4, cut from the same
global batch); DDP averages the gradients with its bucketed all-reduce
during the backward. A step's time is the slowest rank's, measured after a
barrier. Without --processes: one process on --threads threads.

Prints "parameters: N elements in T tensors", one line per step (the first
is warm-up) and a summary line for scripts:
  pytorch_unet step_s=S params=N threads=T [processes=P backend=gloo]

Run with Debian's interpreter: /usr/bin/python3 bench/pytorch_unet.py
"""

import argparse
import fnmatch
import math
import os
import socket
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

MIRROR_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                          "test", "lit", "E2E", "Inputs")
sys.path.insert(0, MIRROR_DIR)
import unet_mirror  # noqa: E402  (needs MIRROR_DIR on sys.path)

# The model options of unet_mirror.py's count/write commands.
MODEL_OPTIONS = ["--variant", "sd2", "--block-out-channels", "64,128,256,256",
                 "--layers-per-block", "2", "--heads", "2,4,8,8",
                 "--transformer-layers", "1", "--norm-groups", "32",
                 "--cross-attention-dim", "256", "--in-channels", "4"]
LATENT = 32
TEXT_LENGTH = 77
# sdrun's default weight_decay_exclude.
NO_DECAY = ("*bias", "*norm*", "*embedding_table*")


def model_config():
    """diffusers' config of the model, through the mirror's own helpers."""
    args = unet_mirror.parse_args(["count"] + MODEL_OPTIONS)
    return unet_mirror.config_from_args(args, LATENT)


class EpsilonLoss(torch.nn.Module):
    """The UNet and sd's epsilon @loss as one module (what DDP wraps)."""

    def __init__(self, config):
        super().__init__()
        self.unet = unet_mirror.build_model(config).train()

    def forward(self, x0, noise, t, text):
        angle = (math.pi / 2) * t[:, None, None, None]
        xt = torch.cos(angle) * x0 + torch.sin(angle) * noise
        pred = self.unet(xt, t * 1000.0, text)
        return torch.mean((pred - noise) ** 2)


def param_groups(module):
    decay, no_decay = [], []
    for name, p in module.unet.named_parameters():
        excluded = any(fnmatch.fnmatchcase(name, pat) for pat in NO_DECAY)
        (no_decay if excluded else decay).append(p)
    return [{"params": decay, "weight_decay": 1e-2},
            {"params": no_decay, "weight_decay": 0.0}]


def train(args, rank=0, world=1):
    """The warm-up and args.steps timed steps on this rank; returns the step
    times (the slowest rank's when data-parallel) and the parameter count."""
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    if args.autocast:
        # In every process (DDP's ranks are spawned afresh).
        torch.nn.GroupNorm.forward = group_norm_in_f32
        torch.nn.LayerNorm.forward = layer_norm_in_f32
    config = model_config()
    module = EpsilonLoss(config)
    state = module.unet.state_dict()
    count = sum(t.numel() for t in state.values())
    lead = rank == 0
    if lead:
        print("parameters: %d elements in %d tensors (%.1f MB f32)"
              % (count, len(state), count * 4 / 1e6))
        sys.stdout.flush()
    if args.channels_last:
        module = module.to(memory_format=torch.channels_last)
    groups = param_groups(module)
    step_loss = module
    if world > 1:
        step_loss = torch.nn.parallel.DistributedDataParallel(module)
    opt = torch.optim.AdamW(groups, lr=1e-4, betas=(0.9, 0.999), eps=1e-8)
    gen = torch.Generator().manual_seed(args.seed + 1)
    local = args.batch // world
    in_channels = config["in_channels"]
    cross = config["cross_attention_dim"]

    def batch_inputs():
        shape = (args.batch, in_channels, LATENT, LATENT)
        x0 = torch.randn(shape, generator=gen)
        noise = torch.randn(shape, generator=gen)
        t = torch.rand((args.batch,), generator=gen)
        text = torch.randn((args.batch, TEXT_LENGTH, cross), generator=gen)
        if args.channels_last:
            x0 = x0.contiguous(memory_format=torch.channels_last)
            noise = noise.contiguous(memory_format=torch.channels_last)
        return tuple(x[rank * local:(rank + 1) * local]
                     for x in (x0, noise, t, text))

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
        if lead:
            tag = "warm-up" if step == 0 else "step %d" % step
            print("%s: loss=%.6f time_s=%.3f" % (tag, loss.item(), elapsed))
            sys.stdout.flush()
        if step > 0:
            times.append(elapsed)
    return times, count


def group_norm_in_f32(self, x):
    """torch.nn.GroupNorm.forward as CUDA autocast runs it: in f32."""
    return F.group_norm(x.float(), self.num_groups, self.weight, self.bias,
                        self.eps)


def layer_norm_in_f32(self, x):
    """torch.nn.LayerNorm.forward as CUDA autocast runs it: in f32."""
    return F.layer_norm(x.float(), self.normalized_shape, self.weight,
                        self.bias, self.eps)


def report(args, times, count, world):
    line = "pytorch_unet step_s=%.4f params=%d threads=%d" % (
        statistics.median(times), count, args.threads)
    if world > 1:
        line += " processes=%d backend=gloo" % world
    if args.channels_last:
        line += " channels_last=1"
    if args.autocast:
        line += " autocast=bfloat16"
    print(line)
    sys.stdout.flush()


def ddp_worker(rank, args, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=args.processes)
    try:
        times, count = train(args, rank, args.processes)
        if rank == 0:
            report(args, times, count, args.processes)
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
    ap.add_argument("--steps", type=int, default=3,
                    help="timed steps, after one warm-up step")
    ap.add_argument("--batch", type=int, default=8, help="global batch")
    ap.add_argument("--processes", type=int, default=1,
                    help="> 1: data-parallel over this many processes "
                         "(torch.distributed, gloo on 127.0.0.1), the "
                         "global batch split evenly")
    ap.add_argument("--channels-last", action="store_true",
                    help="parameters and latents in torch.channels_last")
    ap.add_argument("--autocast", action="store_true",
                    help="the forward under torch.autocast('cpu', "
                         "dtype=torch.bfloat16)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.processes < 1 or args.threads < 1 or args.steps < 1:
        sys.exit("pytorch_unet.py: --processes, --threads and --steps must "
                 "be positive")
    if args.batch % args.processes:
        sys.exit("pytorch_unet.py: --batch %d is not divisible by "
                 "--processes %d" % (args.batch, args.processes))
    if args.processes == 1:
        times, count = train(args)
        report(args, times, count, 1)
        return
    torch.multiprocessing.spawn(ddp_worker, args=(args, free_port()),
                                nprocs=args.processes, join=True)


if __name__ == "__main__":
    main()
