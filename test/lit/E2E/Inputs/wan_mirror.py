"""PyTorch mirror of the Wan 2.1 transformer, making reference data for sd.

The model follows diffusers' WanTransformer3DModel (Wan 2.1 text-to-video;
the image-conditioned I2V parts are left out): a Conv3d patch embedding, a
3-D rotary position embedding (the head dimension split into frame, row
and column parts, rotating interleaved pairs), a condition embedder (a
sinusoidal timestep projection, a SiLU MLP for the time embedding, a
linear layer giving six modulation vectors per block, and a tanh-GELU MLP
for the text), transformer blocks (modulated self-attention with RMS
q/k norms over all heads and RoPE, a layer-normed cross-attention to the
text added without a gate, a modulated tanh-GELU feed-forward), a
modulated output norm, a linear projection and unpatchify.  Parameter
names and shapes are those of the reference's state_dict(); torch 1.13
has no RMSNorm module and no fused attention, so both are written out.

Unlike the reference's initialisation, every parameter is random (norm
weights around 1), so that every path contributes to the output.
Everything runs in float32 on one CPU thread.

  wan_mirror.py write --out-dir DIR [--frames 2] [--height 8] [--width 8]
      [--patch 1,2,2] [--in-channels 4] [--out-channels N (default: in)]
      [--heads 2] [--head-dim 16] [--text-dim 32] [--text-len 8]
      [--freq-dim 32] [--ffn-dim 64] [--layers 2] [--batch 2] [--seed 0]
      [--dtype F32|BF16|F16] [--shards 1]
        --frames/--height/--width are the latent sizes.  Writes into DIR:
        the weights (diffusion_pytorch_model.safetensors, or with
        --shards N > 1 diffusion_pytorch_model-0000K-of-0000N.safetensors
        plus diffusion_pytorch_model.safetensors.index.json),
        inputs.safetensors (hidden_states [B, C, F, H, W], timestep [B] in
        [0, 1000), encoder_hidden_states [B, text_len, text_dim], all F32),
        expected.safetensors (out [B, out_channels, F, H, W] = the model's
        output from the stored weights) and config.json (diffusers' config
        for the class).
  wan_mirror.py check --out-dir DIR
        reloads DIR's weights, config and inputs, recomputes the output and
        exits 1 unless it equals expected.safetensors exactly.
  wan_mirror.py compare ACTUAL EXPECTED [--tolerance 1e-4]
        prints max|a - e| / max|e| over tensor "out"; exits 1 above the
        tolerance.

The file handling shared with the other mirrors is in mirror_io.py.
"""
import math
import sys

import torch
import torch.nn.functional as F
from torch import nn

import mirror_io
from mirror_layers import (FeedForward, RMSNorm, attention,
                           sinusoidal_embedding)

CLASS_NAME = "WanTransformer3DModel"
DIFFUSERS_VERSION = "0.33.0"
ROPE_THETA = 10000.0


# ----------------------------------------------------------------------------
# Model
# ----------------------------------------------------------------------------

class MLP(nn.Module):
    """linear_1, activation, linear_2 (the reference's TimestepEmbedding
    with SiLU, or its text projection with tanh GELU)."""

    def __init__(self, in_features, hidden, activation):
        super().__init__()
        self.linear_1 = nn.Linear(in_features, hidden)
        self.activation = activation
        self.linear_2 = nn.Linear(hidden, hidden)

    def forward(self, x):
        return self.linear_2(self.activation(self.linear_1(x)))


def rope_axis_dims(head_dim):
    """(frame, row, column) shares of the head dimension."""
    spatial = 2 * (head_dim // 6)
    return head_dim - 2 * spatial, spatial, spatial


def rope_angles(dim, positions):
    """[positions, dim / 2] angles p * theta^(-2i / dim), in float64."""
    exponents = torch.arange(0, dim, 2, dtype=torch.float64) / dim
    inverse = 1.0 / (ROPE_THETA ** exponents)
    return torch.outer(torch.arange(positions, dtype=torch.float64), inverse)


def rope_tables(head_dim, grid, max_seq_len):
    """(cos, sin), each [f*h*w, head_dim / 2] float32, tokens in (f, h, w)
    order.  Each axis's table is built in float64 over max_seq_len
    positions and rounded to float32, like the reference's buffers."""
    cos_parts, sin_parts = [], []
    for axis, (dim, size) in enumerate(zip(rope_axis_dims(head_dim), grid)):
        angles = rope_angles(dim, max_seq_len)[:size]
        shape = [1, 1, 1, dim // 2]
        shape[axis] = size
        cos_parts.append(angles.cos().float().view(shape).expand(
            *grid, dim // 2))
        sin_parts.append(angles.sin().float().view(shape).expand(
            *grid, dim // 2))
    tokens = grid[0] * grid[1] * grid[2]
    cos = torch.cat(cos_parts, dim=-1).reshape(tokens, head_dim // 2)
    sin = torch.cat(sin_parts, dim=-1).reshape(tokens, head_dim // 2)
    return cos, sin


def rotate_pairs(x, cos, sin):
    """Rotates each pair (x[2i], x[2i+1]) of x [B, S, heads, Dh] by the
    angle whose cos, sin [S, Dh / 2] are given."""
    cos = cos[None, :, None, :]
    sin = sin[None, :, None, :]
    even, odd = x[..., 0::2], x[..., 1::2]
    rotated = torch.stack([even * cos - odd * sin, even * sin + odd * cos],
                          dim=-1)
    return rotated.flatten(-2)


class Attention(nn.Module):
    """Multi-head attention with RMS norms on the full q and k widths."""

    def __init__(self, dim, heads, eps):
        super().__init__()
        self.heads = heads
        self.to_q = nn.Linear(dim, dim)
        self.to_k = nn.Linear(dim, dim)
        self.to_v = nn.Linear(dim, dim)
        self.to_out = nn.ModuleList([nn.Linear(dim, dim)])
        self.norm_q = RMSNorm(dim, eps)
        self.norm_k = RMSNorm(dim, eps)

    def forward(self, x, context=None, rope=None):
        source = x if context is None else context
        q = self.norm_q(self.to_q(x)).unflatten(2, (self.heads, -1))
        k = self.norm_k(self.to_k(source)).unflatten(2, (self.heads, -1))
        v = self.to_v(source).unflatten(2, (self.heads, -1))
        if rope is not None:
            q = rotate_pairs(q, *rope)
            k = rotate_pairs(k, *rope)
        out = attention(q.transpose(1, 2), k.transpose(1, 2),
                        v.transpose(1, 2))
        return self.to_out[0](out.transpose(1, 2).flatten(2))


class Block(nn.Module):
    def __init__(self, dim, ffn_dim, heads, cross_attn_norm, eps):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps, elementwise_affine=False)
        self.attn1 = Attention(dim, heads, eps)
        self.attn2 = Attention(dim, heads, eps)
        self.norm2 = (nn.LayerNorm(dim, eps, elementwise_affine=True)
                      if cross_attn_norm else nn.Identity())
        self.ffn = FeedForward(dim, ffn_dim)
        self.norm3 = nn.LayerNorm(dim, eps, elementwise_affine=False)
        self.scale_shift_table = nn.Parameter(torch.zeros(1, 6, dim))

    def forward(self, x, context, modulation, rope):
        # modulation [B, 6, dim]; each piece below is [B, 1, dim].
        (shift, scale, gate, ff_shift, ff_scale,
         ff_gate) = (self.scale_shift_table + modulation).chunk(6, dim=1)
        h = self.norm1(x) * (1 + scale) + shift
        x = x + self.attn1(h, rope=rope) * gate
        x = x + self.attn2(self.norm2(x), context=context)
        h = self.norm3(x) * (1 + ff_scale) + ff_shift
        return x + self.ffn(h) * ff_gate


class ConditionEmbedder(nn.Module):
    def __init__(self, dim, freq_dim, text_dim):
        super().__init__()
        self.freq_dim = freq_dim
        self.time_embedder = MLP(freq_dim, dim, nn.SiLU())
        self.time_proj = nn.Linear(dim, 6 * dim)
        self.text_embedder = MLP(text_dim, dim, nn.GELU(approximate="tanh"))

    def forward(self, timestep, text):
        """(temb [B, dim], modulation [B, 6, dim], context [B, L, dim])."""
        temb = self.time_embedder(sinusoidal_embedding(timestep,
                                                       self.freq_dim))
        modulation = self.time_proj(F.silu(temb)).unflatten(1, (6, -1))
        return temb, modulation, self.text_embedder(text)


class WanTransformer3D(nn.Module):
    def __init__(self, patch_size, num_attention_heads, attention_head_dim,
                 in_channels, out_channels, text_dim, freq_dim, ffn_dim,
                 num_layers, cross_attn_norm, eps, rope_max_seq_len):
        super().__init__()
        dim = num_attention_heads * attention_head_dim
        self.patch_size = tuple(patch_size)
        self.head_dim = attention_head_dim
        self.out_channels = out_channels or in_channels
        self.rope_max_seq_len = rope_max_seq_len
        self.patch_embedding = nn.Conv3d(in_channels, dim, self.patch_size,
                                         stride=self.patch_size)
        self.condition_embedder = ConditionEmbedder(dim, freq_dim, text_dim)
        self.blocks = nn.ModuleList(
            Block(dim, ffn_dim, num_attention_heads, cross_attn_norm, eps)
            for _ in range(num_layers))
        self.norm_out = nn.LayerNorm(dim, eps, elementwise_affine=False)
        self.proj_out = nn.Linear(
            dim, self.out_channels * math.prod(self.patch_size))
        self.scale_shift_table = nn.Parameter(torch.zeros(1, 2, dim))

    def unpatchify(self, x, grid):
        """[B, f*h*w, pt*ph*pw*C] -> [B, C, f*pt, h*ph, w*pw]; a token's
        features are ordered (pt, ph, pw, C)."""
        (f, h, w), (pt, ph, pw) = grid, self.patch_size
        x = x.reshape(x.shape[0], f, h, w, pt, ph, pw, self.out_channels)
        x = x.permute(0, 7, 1, 4, 2, 5, 3, 6)
        return x.reshape(x.shape[0], self.out_channels, f * pt, h * ph,
                         w * pw)

    def forward(self, hidden_states, timestep, encoder_hidden_states):
        grid = [size // patch for size, patch
                in zip(hidden_states.shape[2:], self.patch_size)]
        rope = rope_tables(self.head_dim, grid, self.rope_max_seq_len)
        x = self.patch_embedding(hidden_states).flatten(2).transpose(1, 2)
        temb, modulation, context = self.condition_embedder(
            timestep, encoder_hidden_states)
        for block in self.blocks:
            x = block(x, context, modulation, rope)
        shift, scale = (self.scale_shift_table
                        + temb.unsqueeze(1)).chunk(2, dim=1)
        x = self.proj_out(self.norm_out(x) * (1 + scale) + shift)
        return self.unpatchify(x, grid)


def build_model(config):
    if config.get("_class_name") != CLASS_NAME:
        raise ValueError("config is for %s, not %s"
                         % (config.get("_class_name"), CLASS_NAME))
    for key in ("image_dim", "added_kv_proj_dim", "pos_embed_seq_len"):
        if config.get(key) is not None:
            raise ValueError("%s %s: image conditioning is not mirrored"
                             % (key, config[key]))
    if config["qk_norm"] != "rms_norm_across_heads":
        raise ValueError("qk_norm %s is not mirrored" % config["qk_norm"])
    model = WanTransformer3D(
        config["patch_size"], config["num_attention_heads"],
        config["attention_head_dim"], config["in_channels"],
        config["out_channels"], config["text_dim"], config["freq_dim"],
        config["ffn_dim"], config["num_layers"], config["cross_attn_norm"],
        config["eps"], config["rope_max_seq_len"])
    return model.eval()


def randomize(model, seed):
    """Random weights on every path: norm weights near 1, biases small,
    matrices scaled by 1/sqrt(fan-in), scale_shift_tables as initialised
    by the reference (randn / sqrt(dim))."""
    torch.manual_seed(seed)
    norm_weights = {name + ".weight" for name, module in model.named_modules()
                    if isinstance(module, (RMSNorm, nn.LayerNorm))}
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name in norm_weights:
                param.normal_(1.0, 0.1)
            elif name.endswith("scale_shift_table"):
                param.normal_(0.0, 1.0 / math.sqrt(param.shape[-1]))
            elif name.endswith(".bias"):
                param.normal_(0.0, 0.05)
            else:
                param.normal_(0.0, 1.0 / math.sqrt(param[0].numel()))


# ----------------------------------------------------------------------------
# Commands
# ----------------------------------------------------------------------------

def distinct_timesteps(batch, generator, high):
    """batch distinct values in [0, high): one uniform draw from each of
    batch equal strata, in random order."""
    strata = torch.randperm(batch, generator=generator).float()
    t = (strata + torch.rand(batch, generator=generator)) * (high / batch)
    return torch.minimum(t, torch.nextafter(torch.tensor(float(high)),
                                            torch.tensor(0.0)))


def make_inputs(args):
    generator = torch.Generator().manual_seed(args.seed + 1)
    hidden_states = torch.randn(args.batch, args.in_channels, args.frames,
                                args.height, args.width, generator=generator)
    timestep = distinct_timesteps(args.batch, generator, 1000)
    text = torch.randn(args.batch, args.text_len, args.text_dim,
                       generator=generator)
    return {"hidden_states": hidden_states, "timestep": timestep,
            "encoder_hidden_states": text}


def run_model(model, weights, inputs):
    model.load_state_dict(weights, strict=True)
    with torch.no_grad():
        return model(inputs["hidden_states"], inputs["timestep"],
                     inputs["encoder_hidden_states"])


def config_from_args(args):
    """diffusers' config.json: every __init__ argument of the class."""
    return {"_class_name": CLASS_NAME,
            "_diffusers_version": DIFFUSERS_VERSION,
            "patch_size": list(args.patch),
            "num_attention_heads": args.heads,
            "attention_head_dim": args.head_dim,
            "in_channels": args.in_channels,
            "out_channels": args.out_channels or args.in_channels,
            "text_dim": args.text_dim,
            "freq_dim": args.freq_dim,
            "ffn_dim": args.ffn_dim,
            "num_layers": args.layers,
            "cross_attn_norm": True,
            "qk_norm": "rms_norm_across_heads",
            "eps": 1e-6,
            "image_dim": None,
            "added_kv_proj_dim": None,
            "rope_max_seq_len": 1024,
            "pos_embed_seq_len": None}


def command_write(args):
    config = config_from_args(args)
    model = build_model(config)
    randomize(model, args.seed)
    return mirror_io.write_model_case(args, config, model, make_inputs(args),
                                      run_model)


def command_check(args):
    def compute(config, weights, inputs):
        return run_model(build_model(config), weights, inputs)
    return mirror_io.check_case(args.out_dir, compute)


def patch_triple(text):
    parts = text.split(",")
    if len(parts) != 3:
        raise ValueError("expected T,H,W")
    return tuple(int(part) for part in parts)


def parse_args(argv):
    parser, commands, write = mirror_io.make_parser(__doc__)
    write.add_argument("--frames", type=int, default=2)
    write.add_argument("--height", type=int, default=8)
    write.add_argument("--width", type=int, default=8)
    write.add_argument("--patch", type=patch_triple, default=(1, 2, 2),
                       metavar="T,H,W")
    write.add_argument("--in-channels", type=int, default=4)
    write.add_argument("--out-channels", type=int, default=None,
                       help="default: --in-channels")
    write.add_argument("--heads", type=int, default=2)
    write.add_argument("--head-dim", type=int, default=16)
    write.add_argument("--text-dim", type=int, default=32)
    write.add_argument("--text-len", type=int, default=8)
    write.add_argument("--freq-dim", type=int, default=32)
    write.add_argument("--ffn-dim", type=int, default=64)
    write.add_argument("--layers", type=int, default=2)
    mirror_io.add_write_options(write)
    mirror_io.add_check_and_compare(commands)

    args = parser.parse_args(argv)
    if args.command == "write":
        validate(write, args)
    return args


def validate(parser, args):
    sizes = [args.frames, args.height, args.width, *args.patch,
             args.in_channels, args.heads, args.head_dim, args.text_dim,
             args.text_len, args.freq_dim, args.ffn_dim, args.batch,
             args.shards]
    if args.out_channels is not None:
        sizes.append(args.out_channels)
    if min(sizes) < 1:
        parser.error("sizes, --batch and --shards must be positive")
    if args.layers < 0:
        parser.error("--layers must not be negative")
    for name, size, patch in zip(("--frames", "--height", "--width"),
                                 (args.frames, args.height, args.width),
                                 args.patch):
        if size % patch:
            parser.error("%s must be a multiple of its --patch size" % name)
        if size // patch > 1024:
            parser.error("%s: more than 1024 (rope_max_seq_len) patches"
                         % name)
    if args.head_dim % 2:
        parser.error("--head-dim must be even (rotary pairs)")


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    commands = {"write": command_write, "check": command_check,
                "compare": mirror_io.command_compare}
    return mirror_io.run(args, commands)


if __name__ == "__main__":
    sys.exit(main())
