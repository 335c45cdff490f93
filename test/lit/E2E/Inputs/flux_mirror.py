"""PyTorch mirror of the Flux.1-dev transformer, making reference data for sd.

The model follows diffusers' FluxTransformer2DModel with guidance_embeds
on (Flux.1-dev): linear embedders for the packed image latents and the
text tokens; a conditioning vector from sinusoidal timestep and guidance
projections (each through a SiLU MLP) plus a SiLU MLP of the pooled text
embedding; dual-stream blocks (adaLN-Zero modulation of each stream, one
joint attention over text-then-image tokens with per-head RMS q/k norms
and rotary embeddings, separate output projections and tanh-GELU
feed-forwards); single-stream blocks over the concatenated sequence
(attention in parallel with an MLP, one output projection, a gate); a
continuously modulated output norm (scale before shift) and a linear
projection.  The rotary table is built from per-token (axis 0, row,
column) ids over the axes dimensions, rotating interleaved pairs.
Parameter names and shapes are those of the reference's state_dict();
torch 1.13 has no RMSNorm module and no fused attention, so both are
written out.

Unlike the reference's initialisation, every parameter is random (norm
weights around 1), so that every path contributes to the output.
Everything runs in float32 on one CPU thread.

  flux_mirror.py write --out-dir DIR [--height 8] [--width 8]
      [--latent-channels 4] [--heads 2] [--head-dim 32] [--layers 1]
      [--single-layers 2] [--joint-attention-dim 32] [--pooled-dim 16]
      [--text-len 8] [--axes-dims-rope A,B,C] [--guidance 3.5] [--batch 2]
      [--seed 0] [--dtype F32|BF16|F16] [--shards 1]
        --height/--width are the (even) latent sizes H, W and
        --latent-channels the latent channels C; the model sees 2x2 packed
        latents, in_channels = 4C.  --axes-dims-rope defaults to
        (Dh - 4s, 2s, 2s) with s = 7 Dh // 32 (16,56,56 for Dh = 128).
        Writes into DIR: the weights (diffusion_pytorch_model.safetensors,
        or with --shards N > 1 diffusion_pytorch_model-0000K-of-0000N
        .safetensors plus diffusion_pytorch_model.safetensors.index.json),
        inputs.safetensors (all F32, as the reference's forward takes them:
        hidden_states [B, H/2 * W/2, 4C], encoder_hidden_states [B,
        text_len, joint_dim], pooled_projections [B, pooled_dim], timestep
        [B] in (0, 1), img_ids [H/2 * W/2, 3] = (0, row, col), txt_ids
        [text_len, 3] = 0, guidance [B]), expected.safetensors (out [B,
        H/2 * W/2, 4C] = the model's output from the stored weights) and
        config.json (diffusers' config for the class).
  flux_mirror.py check --out-dir DIR
        reloads DIR's weights, config and inputs, recomputes the output and
        exits 1 unless it equals expected.safetensors exactly.
  flux_mirror.py compare ACTUAL EXPECTED [--tolerance 1e-4]
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

CLASS_NAME = "FluxTransformer2DModel"
DIFFUSERS_VERSION = "0.33.0"
ROPE_THETA = 10000
TIME_CHANNELS = 256
EPS = 1e-6


# ----------------------------------------------------------------------------
# Model
# ----------------------------------------------------------------------------

def layer_norm(x):
    """Layer norm without affine parameters, eps 1e-6."""
    return F.layer_norm(x, x.shape[-1:], eps=EPS)


def modulate(x, shift, scale):
    return layer_norm(x) * (1 + scale[:, None]) + shift[:, None]


class MLP(nn.Module):
    """linear_1, SiLU, linear_2."""

    def __init__(self, in_features, hidden):
        super().__init__()
        self.linear_1 = nn.Linear(in_features, hidden)
        self.linear_2 = nn.Linear(hidden, hidden)

    def forward(self, x):
        return self.linear_2(F.silu(self.linear_1(x)))


class Modulation(nn.Module):
    """SiLU then "linear": count modulation vectors of width dim."""

    def __init__(self, dim, count):
        super().__init__()
        self.count = count
        self.linear = nn.Linear(dim, count * dim)

    def forward(self, temb):
        return self.linear(F.silu(temb)).chunk(self.count, dim=1)


def rope_tables(ids, axes_dims):
    """(cos, sin), each [S, Dh] float32, from ids [S, len(axes_dims)].

    Axis i owns axes_dims[i] channels; pair j of it turns by
    ids[:, i] * theta^(-2j / axes_dims[i]).  The angles and their cos and
    sin are computed in float64, then rounded; each value is repeated for
    both members of its pair.
    """
    cos_parts, sin_parts = [], []
    for axis, dim in enumerate(axes_dims):
        exponents = torch.arange(0, dim, 2, dtype=torch.float64) / dim
        inverse = 1.0 / (ROPE_THETA ** exponents)
        angles = torch.outer(ids[:, axis].double(), inverse)
        cos_parts.append(angles.cos().repeat_interleave(2, dim=1).float())
        sin_parts.append(angles.sin().repeat_interleave(2, dim=1).float())
    return torch.cat(cos_parts, dim=-1), torch.cat(sin_parts, dim=-1)


def rotate_pairs(x, cos, sin):
    """x [B, S, heads, Dh] with each pair (x[2i], x[2i+1]) turned by the
    angle of cos, sin [S, Dh] (equal within a pair)."""
    cos = cos[None, :, None, :]
    sin = sin[None, :, None, :]
    even, odd = x[..., 0::2], x[..., 1::2]
    quarter_turn = torch.stack([-odd, even], dim=-1).flatten(-2)
    return x * cos + quarter_turn * sin


class Attention(nn.Module):
    """Attention with per-head RMS q/k norms and rotary embeddings.

    With context=True it is the joint attention of a dual-stream block:
    the text stream has its own projections and norms, the text tokens go
    first, and each stream gets its own output projection.  With
    pre_only=True (single-stream blocks) there is no output projection.
    """

    def __init__(self, dim, heads, head_dim, context, pre_only):
        super().__init__()
        self.head_dim = head_dim
        inner = heads * head_dim
        self.norm_q = RMSNorm(head_dim, EPS)
        self.norm_k = RMSNorm(head_dim, EPS)
        self.to_q = nn.Linear(dim, inner)
        self.to_k = nn.Linear(dim, inner)
        self.to_v = nn.Linear(dim, inner)
        if not pre_only:
            self.to_out = nn.ModuleList([nn.Linear(inner, dim)])
        if context:
            self.norm_added_q = RMSNorm(head_dim, EPS)
            self.norm_added_k = RMSNorm(head_dim, EPS)
            self.add_q_proj = nn.Linear(dim, inner)
            self.add_k_proj = nn.Linear(dim, inner)
            self.add_v_proj = nn.Linear(dim, inner)
            self.to_add_out = nn.Linear(inner, dim)

    def heads_of(self, x):
        return x.unflatten(-1, (-1, self.head_dim))

    def forward(self, x, rope, text=None):
        q = self.norm_q(self.heads_of(self.to_q(x)))
        k = self.norm_k(self.heads_of(self.to_k(x)))
        v = self.heads_of(self.to_v(x))
        if text is not None:
            q = torch.cat([self.norm_added_q(self.heads_of(
                self.add_q_proj(text))), q], dim=1)
            k = torch.cat([self.norm_added_k(self.heads_of(
                self.add_k_proj(text))), k], dim=1)
            v = torch.cat([self.heads_of(self.add_v_proj(text)), v], dim=1)
        q = rotate_pairs(q, *rope)
        k = rotate_pairs(k, *rope)
        out = attention(q.transpose(1, 2), k.transpose(1, 2),
                        v.transpose(1, 2)).transpose(1, 2).flatten(2)
        if text is None:
            return out
        text_out, image_out = out.split([text.shape[1],
                                         x.shape[1]], dim=1)
        return self.to_out[0](image_out), self.to_add_out(text_out)


class DualStreamBlock(nn.Module):
    def __init__(self, dim, heads, head_dim):
        super().__init__()
        self.norm1 = Modulation(dim, 6)
        self.norm1_context = Modulation(dim, 6)
        self.attn = Attention(dim, heads, head_dim, context=True,
                              pre_only=False)
        self.ff = FeedForward(dim, 4 * dim)
        self.ff_context = FeedForward(dim, 4 * dim)

    @staticmethod
    def stream_update(x, attn_out, modulation, ff):
        shift, scale, gate, ff_shift, ff_scale, ff_gate = modulation
        x = x + gate[:, None] * attn_out
        return x + ff_gate[:, None] * ff(modulate(x, ff_shift, ff_scale))

    def forward(self, image, text, temb, rope):
        image_mod = self.norm1(temb)
        text_mod = self.norm1_context(temb)
        image_out, text_out = self.attn(
            modulate(image, image_mod[0], image_mod[1]), rope,
            text=modulate(text, text_mod[0], text_mod[1]))
        image = self.stream_update(image, image_out, image_mod, self.ff)
        text = self.stream_update(text, text_out, text_mod, self.ff_context)
        return image, text


class SingleStreamBlock(nn.Module):
    def __init__(self, dim, heads, head_dim):
        super().__init__()
        self.norm = Modulation(dim, 3)
        self.proj_mlp = nn.Linear(dim, 4 * dim)
        self.proj_out = nn.Linear(dim + 4 * dim, dim)
        self.attn = Attention(dim, heads, head_dim, context=False,
                              pre_only=True)

    def forward(self, x, temb, rope):
        shift, scale, gate = self.norm(temb)
        h = modulate(x, shift, scale)
        mlp = F.gelu(self.proj_mlp(h), approximate="tanh")
        both = torch.cat([self.attn(h, rope), mlp], dim=2)
        return x + gate[:, None] * self.proj_out(both)


class TimeTextGuidanceEmbedder(nn.Module):
    def __init__(self, dim, pooled_dim):
        super().__init__()
        self.timestep_embedder = MLP(TIME_CHANNELS, dim)
        self.guidance_embedder = MLP(TIME_CHANNELS, dim)
        self.text_embedder = MLP(pooled_dim, dim)

    def forward(self, timestep, guidance, pooled):
        time = self.timestep_embedder(sinusoidal_embedding(timestep,
                                                           TIME_CHANNELS))
        scale = self.guidance_embedder(sinusoidal_embedding(guidance,
                                                            TIME_CHANNELS))
        return (time + scale) + self.text_embedder(pooled)


class FluxTransformer2D(nn.Module):
    def __init__(self, patch_size, in_channels, out_channels, num_layers,
                 num_single_layers, attention_head_dim, num_attention_heads,
                 joint_attention_dim, pooled_projection_dim, axes_dims_rope):
        super().__init__()
        dim = num_attention_heads * attention_head_dim
        out_channels = out_channels or in_channels
        self.axes_dims_rope = list(axes_dims_rope)
        self.time_text_embed = TimeTextGuidanceEmbedder(
            dim, pooled_projection_dim)
        self.context_embedder = nn.Linear(joint_attention_dim, dim)
        self.x_embedder = nn.Linear(in_channels, dim)
        self.transformer_blocks = nn.ModuleList(
            DualStreamBlock(dim, num_attention_heads, attention_head_dim)
            for _ in range(num_layers))
        self.single_transformer_blocks = nn.ModuleList(
            SingleStreamBlock(dim, num_attention_heads, attention_head_dim)
            for _ in range(num_single_layers))
        self.norm_out = Modulation(dim, 2)
        self.proj_out = nn.Linear(dim, patch_size ** 2 * out_channels)

    def forward(self, hidden_states, encoder_hidden_states,
                pooled_projections, timestep, img_ids, txt_ids, guidance):
        image = self.x_embedder(hidden_states)
        temb = self.time_text_embed(timestep * 1000, guidance * 1000,
                                    pooled_projections)
        text = self.context_embedder(encoder_hidden_states)
        rope = rope_tables(torch.cat([txt_ids, img_ids], dim=0),
                           self.axes_dims_rope)
        for block in self.transformer_blocks:
            image, text = block(image, text, temb, rope)
        text_len = text.shape[1]
        x = torch.cat([text, image], dim=1)
        for block in self.single_transformer_blocks:
            x = block(x, temb, rope)
        image = x[:, text_len:]
        scale, shift = self.norm_out(temb)
        return self.proj_out(modulate(image, shift, scale))


def build_model(config):
    if config.get("_class_name") != CLASS_NAME:
        raise ValueError("config is for %s, not %s"
                         % (config.get("_class_name"), CLASS_NAME))
    if not config["guidance_embeds"]:
        raise ValueError("only guidance_embeds true (Flux.1-dev) is mirrored")
    if sum(config["axes_dims_rope"]) != config["attention_head_dim"]:
        raise ValueError("axes_dims_rope %s does not sum to %d"
                         % (config["axes_dims_rope"],
                            config["attention_head_dim"]))
    model = FluxTransformer2D(
        config["patch_size"], config["in_channels"], config["out_channels"],
        config["num_layers"], config["num_single_layers"],
        config["attention_head_dim"], config["num_attention_heads"],
        config["joint_attention_dim"], config["pooled_projection_dim"],
        config["axes_dims_rope"])
    return model.eval()


def randomize(model, seed):
    """Random weights on every path: norm weights near 1, biases small,
    matrices scaled by 1/sqrt(fan-in)."""
    torch.manual_seed(seed)
    norm_weights = {name + ".weight" for name, module in model.named_modules()
                    if isinstance(module, RMSNorm)}
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name in norm_weights:
                param.normal_(1.0, 0.1)
            elif name.endswith(".bias"):
                param.normal_(0.0, 0.05)
            else:
                param.normal_(0.0, 1.0 / math.sqrt(param[0].numel()))


# ----------------------------------------------------------------------------
# Commands
# ----------------------------------------------------------------------------

def default_axes_dims(head_dim):
    share = 7 * head_dim // 32
    return [head_dim - 4 * share, 2 * share, 2 * share]


def pack_latents(latents):
    """[B, C, H, W] -> [B, H/2 * W/2, 4C]: 2x2 patches, features (C, 2, 2),
    as the Flux pipeline packs them."""
    b, c, h, w = latents.shape
    x = latents.view(b, c, h // 2, 2, w // 2, 2).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(b, (h // 2) * (w // 2), c * 4)


def image_ids(rows, cols):
    """[rows * cols, 3] = (0, row, col) per packed token, row-major."""
    ids = torch.zeros(rows, cols, 3)
    ids[..., 1] = torch.arange(rows, dtype=torch.float32)[:, None]
    ids[..., 2] = torch.arange(cols, dtype=torch.float32)[None, :]
    return ids.reshape(rows * cols, 3)


def distinct_timesteps(batch, generator):
    """batch distinct values in (0, 1): one uniform draw from the middle
    90% of each of batch equal strata, in random order."""
    strata = torch.randperm(batch, generator=generator).float()
    draws = 0.05 + 0.9 * torch.rand(batch, generator=generator)
    return (strata + draws) / batch


def make_inputs(args):
    generator = torch.Generator().manual_seed(args.seed + 1)
    latents = torch.randn(args.batch, args.latent_channels, args.height,
                          args.width, generator=generator)
    text = torch.randn(args.batch, args.text_len, args.joint_attention_dim,
                       generator=generator)
    pooled = torch.randn(args.batch, args.pooled_dim, generator=generator)
    timestep = distinct_timesteps(args.batch, generator)
    return {"hidden_states": pack_latents(latents),
            "encoder_hidden_states": text,
            "pooled_projections": pooled,
            "timestep": timestep,
            "img_ids": image_ids(args.height // 2, args.width // 2),
            "txt_ids": torch.zeros(args.text_len, 3),
            # A distilled guidance strength per sample, as the pipeline
            # feeds it (one value there; several here, to tell them apart).
            "guidance": args.guidance + 0.75 * torch.arange(args.batch)}


def run_model(model, weights, inputs):
    model.load_state_dict(weights, strict=True)
    with torch.no_grad():
        return model(inputs["hidden_states"], inputs["encoder_hidden_states"],
                     inputs["pooled_projections"], inputs["timestep"],
                     inputs["img_ids"], inputs["txt_ids"], inputs["guidance"])


def config_from_args(args):
    """diffusers' config.json: every __init__ argument of the class."""
    return {"_class_name": CLASS_NAME,
            "_diffusers_version": DIFFUSERS_VERSION,
            "patch_size": 1,
            "in_channels": 4 * args.latent_channels,
            "out_channels": None,
            "num_layers": args.layers,
            "num_single_layers": args.single_layers,
            "attention_head_dim": args.head_dim,
            "num_attention_heads": args.heads,
            "joint_attention_dim": args.joint_attention_dim,
            "pooled_projection_dim": args.pooled_dim,
            "guidance_embeds": True,
            "axes_dims_rope": list(args.axes_dims_rope)}


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


def int_triple(text):
    parts = text.split(",")
    if len(parts) != 3:
        raise ValueError("expected A,B,C")
    return [int(part) for part in parts]


def parse_args(argv):
    parser, commands, write = mirror_io.make_parser(__doc__)
    write.add_argument("--height", type=int, default=8)
    write.add_argument("--width", type=int, default=8)
    write.add_argument("--latent-channels", type=int, default=4)
    write.add_argument("--heads", type=int, default=2)
    write.add_argument("--head-dim", type=int, default=32)
    write.add_argument("--layers", type=int, default=1)
    write.add_argument("--single-layers", type=int, default=2)
    write.add_argument("--joint-attention-dim", type=int, default=32)
    write.add_argument("--pooled-dim", type=int, default=16)
    write.add_argument("--text-len", type=int, default=8)
    write.add_argument("--axes-dims-rope", type=int_triple, default=None,
                       metavar="A,B,C",
                       help="default: Dh - 4s, 2s, 2s with s = 7 Dh // 32")
    write.add_argument("--guidance", type=float, default=3.5)
    mirror_io.add_write_options(write)
    mirror_io.add_check_and_compare(commands)

    args = parser.parse_args(argv)
    if args.command == "write":
        validate(write, args)
    return args


def validate(parser, args):
    if min(args.height, args.width, args.latent_channels, args.heads,
           args.head_dim, args.joint_attention_dim, args.pooled_dim,
           args.text_len, args.batch, args.shards) < 1:
        parser.error("sizes, --batch and --shards must be positive")
    if min(args.layers, args.single_layers) < 0:
        parser.error("--layers and --single-layers must not be negative")
    if args.height % 2 or args.width % 2:
        parser.error("--height and --width must be even (2x2 packing)")
    if args.axes_dims_rope is None:
        args.axes_dims_rope = default_axes_dims(args.head_dim)
    if any(dim < 0 or dim % 2 for dim in args.axes_dims_rope):
        parser.error("--axes-dims-rope: each must be even (rotary pairs)")
    if sum(args.axes_dims_rope) != args.head_dim:
        parser.error("--axes-dims-rope must sum to --head-dim")


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    commands = {"write": command_write, "check": command_check,
                "compare": mirror_io.command_compare}
    return mirror_io.run(args, commands)


if __name__ == "__main__":
    sys.exit(main())
