"""PyTorch mirror of the Stable Diffusion U-Net, making reference data for sd.

The model follows diffusers' UNet2DConditionModel as Stable Diffusion 2
and SDXL configure it (use_linear_projection, GEGLU feed-forwards, the
"positional" time embedding; read in diffusers 0.40.0.dev0, commit
58eb52c, whose unet_2d_condition.py, unet_2d_blocks.py, resnet.py,
transformer_2d.py, attention.py, attention_processor.py, embeddings.py,
activations.py, downsampling.py and upsampling.py do the same for this
configuration as in 0.33.0): a 3x3 conv_in; a sinusoidal timestep
projection (cosines first, no frequency shift) through a SiLU MLP; for
SDXL ("text_time") the pooled text embedding concatenated with the
sinusoidal features of the six raw time ids through a second SiLU MLP,
added to the time embedding; down blocks of ResNet blocks (GroupNorm,
SiLU, 3x3 convs, the SiLU of the time embedding projected and added per
channel, a 1x1 shortcut when the width changes), each followed in a
cross-attention block by a Transformer2DModel (GroupNorm, linear
proj_in, pre-LayerNorm transformer blocks of self-attention,
cross-attention to the text and an exact-GELU GEGLU feed-forward,
linear proj_out, input residual), and a stride-2 3x3 conv after every
block but the last; a mid block (ResNet, transformer, ResNet); up
blocks of layers_per_block + 1 ResNet blocks, each taking the channel
concatenation [hidden, skip] with the skips popped from the end of the
down path's outputs (conv_in's output first, then every ResNet,
transformer and downsampler output), and a nearest-2x upsample plus
3x3 conv after every block but the last; GroupNorm, SiLU and a 3x3
conv_out.

diffusers' attention_head_dim is, for this class, the number of heads
of each block (its num_attention_heads defaults to it); a head is
channels / heads wide.  The up path uses the reversed block widths,
heads and transformer_layers_per_block.  Parameter names, shapes and
their order are those of the reference's state_dict() (down_blocks,
then up_blocks, then mid_block, as the reference registers them); with
the reference's code run on the same weights and inputs (0.33.0, float32)
the output agrees to about 1e-6 relative.
torch 1.13 has no fused attention, so it is written out.

Unlike the reference's initialisation, every parameter is random (norm
weights around 1), so that every path contributes to the output.
Everything runs in float32 on one CPU thread.

  unet_mirror.py write --out-dir DIR [--variant sd2|sdxl] [--height 8]
      [--width 8] [--in-channels 4] [--out-channels N (default: in)]
      [--block-out-channels 32,64] [--layers-per-block 1] [--heads 2,4]
      [--transformer-layers 1,1] [--norm-groups 8]
      [--cross-attention-dim 32] [--text-len 8] [--pooled-dim 16]
      [--addition-time-embed-dim 8] [--batch 2] [--seed 0]
      [--dtype F32|BF16|F16] [--shards 1]
        --variant sd2 (SD 2.x): CrossAttnDownBlock2D for every block but
        the last, which is a DownBlock2D; sdxl: a DownBlock2D first, then
        CrossAttnDownBlock2D, and the "text_time" addition embedding
        (--pooled-dim, --addition-time-embed-dim; ignored for sd2).  The
        up blocks are the down blocks' kinds in reverse.  --heads (the
        reference's attention_head_dim) and --transformer-layers give one
        value per down block, or one value for all; --height/--width are
        the latent sizes, multiples of 2^(blocks - 1).  Writes into DIR:
        the weights (diffusion_pytorch_model.safetensors, or with
        --shards N > 1 diffusion_pytorch_model-0000K-of-0000N.safetensors
        plus diffusion_pytorch_model.safetensors.index.json),
        inputs.safetensors (sample [B, C, H, W], timestep [B] in [0,
        1000), encoder_hidden_states [B, text_len, cross_attention_dim]
        and for sdxl text_embeds [B, pooled_dim] and time_ids [B, 6] =
        (original height, width, crop top, left, target height, width) in
        pixels, 8x the latent sizes, varying per sample; all F32),
        expected.safetensors (out [B, out_channels, H, W] = the model's
        output from the stored weights) and config.json (diffusers' config
        for the class).
  unet_mirror.py count [--variant sd2|sdxl] [the model options of write]
      [--list]
        prints the parameter count ("N parameters (N with separators), T
        tensors"), building the model on the meta device (no weights are
        allocated); --list first prints each tensor's name and shape in
        state_dict order.
  unet_mirror.py check --out-dir DIR
        reloads DIR's weights, config and inputs, recomputes the output and
        exits 1 unless it equals expected.safetensors exactly.
  unet_mirror.py compare ACTUAL EXPECTED [--tolerance 1e-4]
        prints max|a - e| / max|e| over tensor "out"; exits 1 above the
        tolerance.

With SD 2 base's configuration (count --variant sd2 --block-out-channels
320,640,1280,1280 --layers-per-block 2 --heads 5,10,20,20
--transformer-layers 1 --norm-groups 32 --cross-attention-dim 1024) the
model has 865,910,724 parameters; with SDXL base's (count --variant sdxl
--block-out-channels 320,640,1280 --layers-per-block 2 --heads 5,10,20
--transformer-layers 1,2,10 --norm-groups 32 --cross-attention-dim 2048
--pooled-dim 1280 --addition-time-embed-dim 256) 2,567,463,684.

The file handling shared with the other mirrors is in mirror_io.py.
"""
import math
import sys

import torch
import torch.nn.functional as F
from torch import nn

import mirror_io
from mirror_layers import attention, sinusoidal_embedding
from wan_mirror import distinct_timesteps

CLASS_NAME = "UNet2DConditionModel"
DIFFUSERS_VERSION = "0.33.0"
MID_BLOCK_TYPE = "UNetMidBlock2DCrossAttn"
DOWN_BLOCK, CROSS_DOWN_BLOCK = "DownBlock2D", "CrossAttnDownBlock2D"
UP_BLOCK, CROSS_UP_BLOCK = "UpBlock2D", "CrossAttnUpBlock2D"
# Transformer2DModel's own epsilons (not the U-Net's norm_eps).
TRANSFORMER_GROUP_NORM_EPS = 1e-6
TRANSFORMER_LAYER_NORM_EPS = 1e-5
TIME_IDS = 6
# Config values this mirror implements: anything else is refused.
FIXED_CONFIG = {
    "mid_block_type": MID_BLOCK_TYPE,
    "center_input_sample": False,
    "flip_sin_to_cos": True,
    "freq_shift": 0,
    "only_cross_attention": False,
    "downsample_padding": 1,
    "mid_block_scale_factor": 1,
    "dropout": 0.0,
    "act_fn": "silu",
    "reverse_transformer_layers_per_block": None,
    "encoder_hid_dim": None,
    "encoder_hid_dim_type": None,
    "num_attention_heads": None,
    "dual_cross_attention": False,
    "use_linear_projection": True,
    "class_embed_type": None,
    "num_class_embeds": None,
    "resnet_time_scale_shift": "default",
    "resnet_skip_time_act": False,
    "resnet_out_scale_factor": 1.0,
    "time_embedding_type": "positional",
    "time_embedding_dim": None,
    "time_embedding_act_fn": None,
    "timestep_post_act": None,
    "time_cond_proj_dim": None,
    "conv_in_kernel": 3,
    "conv_out_kernel": 3,
    "attention_type": "default",
    "class_embeddings_concat": False,
    "mid_block_only_cross_attention": None,
    "cross_attention_norm": None,
    "addition_embed_type_num_heads": 64,
}
# diffusers' defaults for keys that published configs may leave out.
DEFAULT_CONFIG = {
    "in_channels": 4,
    "out_channels": 4,
    "layers_per_block": 2,
    "attention_head_dim": 8,
    "transformer_layers_per_block": 1,
    "cross_attention_dim": 1280,
    "norm_num_groups": 32,
    "norm_eps": 1e-5,
    "addition_embed_type": None,
    "addition_time_embed_dim": None,
    "projection_class_embeddings_input_dim": None,
}
VARIANTS = ("sd2", "sdxl")


# ----------------------------------------------------------------------------
# Model
# ----------------------------------------------------------------------------
#
# Every module takes device (None, or "meta" to count parameters without
# allocating them).

class TimestepEmbedding(nn.Module):
    """linear_1, SiLU, linear_2."""

    def __init__(self, in_features, dim, device):
        super().__init__()
        self.linear_1 = nn.Linear(in_features, dim, device=device)
        self.linear_2 = nn.Linear(dim, dim, device=device)

    def forward(self, x):
        return self.linear_2(F.silu(self.linear_1(x)))


class ResnetBlock(nn.Module):
    """The reference's ResnetBlock2D ("default" time embedding norm)."""

    def __init__(self, in_channels, out_channels, temb_channels, groups, eps,
                 device):
        super().__init__()
        self.norm1 = nn.GroupNorm(groups, in_channels, eps=eps, device=device)
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, padding=1,
                               device=device)
        self.time_emb_proj = nn.Linear(temb_channels, out_channels,
                                       device=device)
        self.norm2 = nn.GroupNorm(groups, out_channels, eps=eps,
                                  device=device)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, padding=1,
                               device=device)
        self.conv_shortcut = None
        if in_channels != out_channels:
            self.conv_shortcut = nn.Conv2d(in_channels, out_channels, 1,
                                           device=device)

    def forward(self, x, temb):
        h = self.conv1(F.silu(self.norm1(x)))
        h = h + self.time_emb_proj(F.silu(temb))[:, :, None, None]
        h = self.conv2(F.silu(self.norm2(h)))
        shortcut = x if self.conv_shortcut is None else self.conv_shortcut(x)
        return shortcut + h


class Attention(nn.Module):
    """Multi-head attention: to_q/to_k/to_v without bias, to_out.0 with."""

    def __init__(self, dim, heads, context_dim, device):
        super().__init__()
        self.heads = heads
        self.to_q = nn.Linear(dim, dim, bias=False, device=device)
        self.to_k = nn.Linear(context_dim, dim, bias=False, device=device)
        self.to_v = nn.Linear(context_dim, dim, bias=False, device=device)
        self.to_out = nn.ModuleList([nn.Linear(dim, dim, device=device)])

    def heads_first(self, x):
        """[B, S, dim] -> [B, heads, S, dim / heads]."""
        return x.unflatten(2, (self.heads, -1)).transpose(1, 2)

    def forward(self, x, context):
        out = attention(self.heads_first(self.to_q(x)),
                        self.heads_first(self.to_k(context)),
                        self.heads_first(self.to_v(context)))
        return self.to_out[0](out.transpose(1, 2).flatten(2))


class GEGLU(nn.Module):
    """proj to 2 x hidden; the first half times the exact GELU of the
    second."""

    def __init__(self, dim, hidden, device):
        super().__init__()
        self.proj = nn.Linear(dim, 2 * hidden, device=device)

    def forward(self, x):
        hidden, gate = self.proj(x).chunk(2, dim=-1)
        return hidden * F.gelu(gate)


class GatedFeedForward(nn.Module):
    """net.0 (GEGLU), net.1 (dropout, no-op), net.2."""

    def __init__(self, dim, device):
        super().__init__()
        self.net = nn.ModuleList([GEGLU(dim, 4 * dim, device), nn.Identity(),
                                  nn.Linear(4 * dim, dim, device=device)])

    def forward(self, x):
        for layer in self.net:
            x = layer(x)
        return x


class TransformerBlock(nn.Module):
    """The reference's BasicTransformerBlock ("layer_norm", GEGLU)."""

    def __init__(self, dim, heads, context_dim, device):
        super().__init__()
        eps = TRANSFORMER_LAYER_NORM_EPS
        self.norm1 = nn.LayerNorm(dim, eps=eps, device=device)
        self.attn1 = Attention(dim, heads, dim, device)
        self.norm2 = nn.LayerNorm(dim, eps=eps, device=device)
        self.attn2 = Attention(dim, heads, context_dim, device)
        self.norm3 = nn.LayerNorm(dim, eps=eps, device=device)
        self.ff = GatedFeedForward(dim, device)

    def forward(self, x, context):
        h = self.norm1(x)
        x = self.attn1(h, h) + x
        x = self.attn2(self.norm2(x), context) + x
        return self.ff(self.norm3(x)) + x


class Transformer2D(nn.Module):
    """The reference's Transformer2DModel on continuous inputs with linear
    projections: [B, C, H, W] in and out, tokens in row-major order."""

    def __init__(self, channels, heads, layers, context_dim, groups,
                 device):
        super().__init__()
        self.norm = nn.GroupNorm(groups, channels,
                                 eps=TRANSFORMER_GROUP_NORM_EPS,
                                 device=device)
        self.proj_in = nn.Linear(channels, channels, device=device)
        self.transformer_blocks = nn.ModuleList(
            TransformerBlock(channels, heads, context_dim, device)
            for _ in range(layers))
        self.proj_out = nn.Linear(channels, channels, device=device)

    def forward(self, x, context):
        b, c, h, w = x.shape
        tokens = self.norm(x).permute(0, 2, 3, 1).reshape(b, h * w, c)
        tokens = self.proj_in(tokens)
        for block in self.transformer_blocks:
            tokens = block(tokens, context)
        tokens = self.proj_out(tokens)
        return tokens.reshape(b, h, w, c).permute(0, 3, 1, 2) + x


class Downsample(nn.Module):
    """conv: 3x3, stride 2, padding 1."""

    def __init__(self, channels, device):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, stride=2, padding=1,
                              device=device)

    def forward(self, x):
        return self.conv(x)


class Upsample(nn.Module):
    """Nearest-neighbour 2x, then conv: 3x3, padding 1."""

    def __init__(self, channels, device):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1, device=device)

    def forward(self, x):
        return self.conv(F.interpolate(x, scale_factor=2.0, mode="nearest"))


class BlockShape:
    """What a down or up block is built from (see Unet2DCondition)."""

    def __init__(self, layers, cross, heads, transformer_layers, sample):
        self.layers = layers
        self.cross = cross
        self.heads = heads
        self.transformer_layers = transformer_layers
        self.sample = sample


def attentions_of(channels, shape, context, groups, device):
    """A CrossAttn block's transformers, one per ResNet; None without."""
    if not shape.cross:
        return None
    return nn.ModuleList(
        Transformer2D(channels, shape.heads, shape.transformer_layers, context,
                      groups, device)
        for _ in range(shape.layers))


class DownBlock(nn.Module):
    """DownBlock2D, or with cross=True CrossAttnDownBlock2D.

    forward returns (hidden, outputs): outputs holds every ResNet (or
    ResNet + transformer) output, then the downsampler's.
    """

    def __init__(self, in_channels, out_channels, shape, common):
        super().__init__()
        temb, context, groups, eps, device = common
        self.attentions = attentions_of(out_channels, shape, context, groups,
                                        device)
        self.resnets = nn.ModuleList(
            ResnetBlock(in_channels if i == 0 else out_channels,
                        out_channels, temb, groups, eps, device)
            for i in range(shape.layers))
        self.downsamplers = None
        if shape.sample:
            self.downsamplers = nn.ModuleList([Downsample(out_channels,
                                                          device)])

    def forward(self, x, temb, context):
        outputs = []
        for i, resnet in enumerate(self.resnets):
            x = resnet(x, temb)
            if self.attentions is not None:
                x = self.attentions[i](x, context)
            outputs.append(x)
        if self.downsamplers is not None:
            x = self.downsamplers[0](x)
            outputs.append(x)
        return x, outputs


class UpBlock(nn.Module):
    """UpBlock2D, or with cross=True CrossAttnUpBlock2D.

    ResNet i takes [hidden, skip]: hidden has prev_channels (i = 0) or
    out_channels, the skip in_channels (the last ResNet) or out_channels.
    """

    def __init__(self, in_channels, prev_channels, out_channels, shape,
                 common):
        super().__init__()
        temb, context, groups, eps, device = common
        self.attentions = attentions_of(out_channels, shape, context, groups,
                                        device)
        resnets = []
        for i in range(shape.layers):
            hidden = prev_channels if i == 0 else out_channels
            skip = in_channels if i == shape.layers - 1 else out_channels
            resnets.append(ResnetBlock(hidden + skip, out_channels, temb,
                                       groups, eps, device))
        self.resnets = nn.ModuleList(resnets)
        self.upsamplers = None
        if shape.sample:
            self.upsamplers = nn.ModuleList([Upsample(out_channels, device)])

    def forward(self, x, skips, temb, context):
        """skips: this block's skips, the first one last."""
        for i, resnet in enumerate(self.resnets):
            x = resnet(torch.cat([x, skips[-1 - i]], dim=1), temb)
            if self.attentions is not None:
                x = self.attentions[i](x, context)
        if self.upsamplers is not None:
            x = self.upsamplers[0](x)
        return x


class MidBlock(nn.Module):
    """UNetMidBlock2DCrossAttn: resnets.0, attentions.0, resnets.1."""

    def __init__(self, channels, heads, transformer_layers, common):
        super().__init__()
        temb, context, groups, eps, device = common
        self.attentions = nn.ModuleList([Transformer2D(
            channels, heads, transformer_layers, context, groups, device)])
        self.resnets = nn.ModuleList(
            ResnetBlock(channels, channels, temb, groups, eps, device)
            for _ in range(2))

    def forward(self, x, temb, context):
        x = self.resnets[0](x, temb)
        x = self.attentions[0](x, context)
        return self.resnets[1](x, temb)


class Unet2DCondition(nn.Module):
    """down: one BlockShape per down block; up: per up block (in the up
    path's order); add_time: None, or (addition_time_embed_dim,
    projection_class_embeddings_input_dim) for "text_time"."""

    def __init__(self, in_channels, out_channels, block_out_channels, down,
                 up, mid_heads, mid_layers, cross_attention_dim, groups, eps,
                 add_time, device=None):
        super().__init__()
        channels = list(block_out_channels)
        time_dim = 4 * channels[0]
        self.time_channels = channels[0]
        common = (time_dim, cross_attention_dim, groups, eps, device)
        self.conv_in = nn.Conv2d(in_channels, channels[0], 3, padding=1,
                                 device=device)
        self.time_embedding = TimestepEmbedding(channels[0], time_dim, device)
        self.add_time_channels = None
        if add_time is not None:
            self.add_time_channels = add_time[0]
            self.add_embedding = TimestepEmbedding(add_time[1], time_dim,
                                                   device)
        down_blocks = []
        out = channels[0]
        for i, shape in enumerate(down):
            previous, out = out, channels[i]
            down_blocks.append(DownBlock(previous, out, shape, common))
        self.down_blocks = nn.ModuleList(down_blocks)
        reversed_channels = channels[::-1]
        up_blocks = []
        out = reversed_channels[0]
        for i, shape in enumerate(up):
            previous, out = out, reversed_channels[i]
            skip = reversed_channels[min(i + 1, len(channels) - 1)]
            up_blocks.append(UpBlock(skip, previous, out, shape, common))
        self.up_blocks = nn.ModuleList(up_blocks)
        self.mid_block = MidBlock(channels[-1], mid_heads, mid_layers, common)
        self.conv_norm_out = nn.GroupNorm(groups, channels[0], eps=eps,
                                          device=device)
        self.conv_out = nn.Conv2d(channels[0], out_channels, 3, padding=1,
                                  device=device)

    def time_embed(self, timestep, text_embeds, time_ids):
        temb = self.time_embedding(sinusoidal_embedding(timestep,
                                                        self.time_channels))
        if self.add_time_channels is None:
            return temb
        if text_embeds is None or time_ids is None:
            raise ValueError("addition_embed_type text_time needs text_embeds "
                             "and time_ids")
        time_features = sinusoidal_embedding(time_ids.flatten(),
                                             self.add_time_channels)
        time_features = time_features.reshape(text_embeds.shape[0], -1)
        return temb + self.add_embedding(torch.cat([text_embeds,
                                                    time_features], dim=-1))

    def forward(self, sample, timestep, encoder_hidden_states,
                text_embeds=None, time_ids=None):
        temb = self.time_embed(timestep, text_embeds, time_ids)
        x = self.conv_in(sample)
        skips = [x]
        for block in self.down_blocks:
            x, outputs = block(x, temb, encoder_hidden_states)
            skips.extend(outputs)
        x = self.mid_block(x, temb, encoder_hidden_states)
        for block in self.up_blocks:
            count = len(block.resnets)
            x = block(x, skips[len(skips) - count:], temb,
                      encoder_hidden_states)
            del skips[len(skips) - count:]
        return self.conv_out(F.silu(self.conv_norm_out(x)))


def per_block(config, key, count):
    """config[key] as a list of count values (an int stands for all)."""
    value = config[key]
    if isinstance(value, int):
        return [value] * count
    if len(value) != count or not all(isinstance(v, int) for v in value):
        raise ValueError("%s %s: need %d ints" % (key, value, count))
    return list(value)


def check_config(config):
    """Refuses configurations the mirror does not implement."""
    if config.get("_class_name") != CLASS_NAME:
        raise ValueError("config is for %s, not %s"
                         % (config.get("_class_name"), CLASS_NAME))
    for key, value in FIXED_CONFIG.items():
        if config.get(key, value) != value:
            raise ValueError("%s %s is not mirrored (only %s)"
                             % (key, config[key], value))
    count = len(config["block_out_channels"])
    downs, ups = config["down_block_types"], config["up_block_types"]
    if len(downs) != count or len(ups) != count:
        raise ValueError("%d block_out_channels, %d down and %d up blocks"
                         % (count, len(downs), len(ups)))
    for kind in downs:
        if kind not in (DOWN_BLOCK, CROSS_DOWN_BLOCK):
            raise ValueError("down block %s is not mirrored" % kind)
    for kind in ups:
        if kind not in (UP_BLOCK, CROSS_UP_BLOCK):
            raise ValueError("up block %s is not mirrored" % kind)
    if not isinstance(config["cross_attention_dim"], int):
        raise ValueError("only one cross_attention_dim is mirrored")
    if config["addition_embed_type"] not in (None, "text_time"):
        raise ValueError("addition_embed_type %s is not mirrored"
                         % config["addition_embed_type"])


def build_model(config, device=None):
    config = {**DEFAULT_CONFIG, **config}
    check_config(config)
    channels = list(config["block_out_channels"])
    count = len(channels)
    layers = per_block(config, "layers_per_block", count)
    heads = per_block(config, "attention_head_dim", count)
    transformer_layers = per_block(config, "transformer_layers_per_block",
                                   count)
    last = count - 1
    down = [BlockShape(layers[i], kind == CROSS_DOWN_BLOCK, heads[i],
                       transformer_layers[i], i < last)
            for i, kind in enumerate(config["down_block_types"])]
    up = [BlockShape(layers[last - i] + 1, kind == CROSS_UP_BLOCK,
                     heads[last - i], transformer_layers[last - i], i < last)
          for i, kind in enumerate(config["up_block_types"])]
    add_time = None
    if config["addition_embed_type"] == "text_time":
        add_time = (config["addition_time_embed_dim"],
                    config["projection_class_embeddings_input_dim"])
    model = Unet2DCondition(
        config["in_channels"], config["out_channels"], channels, down, up,
        heads[-1], transformer_layers[-1], config["cross_attention_dim"],
        config["norm_num_groups"], config["norm_eps"], add_time, device)
    return model.eval()


def randomize(model, seed):
    """Random weights on every path: norm weights near 1, biases small,
    matrices scaled by 1/sqrt(fan-in)."""
    torch.manual_seed(seed)
    norm_weights = {name + ".weight" for name, module in model.named_modules()
                    if isinstance(module, (nn.GroupNorm, nn.LayerNorm))}
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

def block_types(variant, count):
    """(down_block_types, up_block_types) of a variant."""
    if variant == "sd2":
        down = [CROSS_DOWN_BLOCK] * (count - 1) + [DOWN_BLOCK]
    else:
        down = [DOWN_BLOCK] + [CROSS_DOWN_BLOCK] * (count - 1)
    up = [CROSS_UP_BLOCK if kind == CROSS_DOWN_BLOCK else UP_BLOCK
          for kind in reversed(down)]
    return down, up


def time_ids(batch, height, width):
    """[batch, 6] SDXL micro-conditioning in pixels (8x the latent sizes):
    original size (larger for later samples), crop top-left, target
    size."""
    rows = []
    for b in range(batch):
        rows.append([8 * height + 64 * b, 8 * width + 32 * b, 16 * b, 8 * b,
                     8 * height, 8 * width])
    return torch.tensor(rows, dtype=torch.float32)


def make_inputs(args):
    generator = torch.Generator().manual_seed(args.seed + 1)
    sample = torch.randn(args.batch, args.in_channels, args.height,
                         args.width, generator=generator)
    timestep = distinct_timesteps(args.batch, generator, 1000)
    text = torch.randn(args.batch, args.text_len, args.cross_attention_dim,
                       generator=generator)
    inputs = {"sample": sample, "timestep": timestep,
              "encoder_hidden_states": text}
    if args.variant == "sdxl":
        inputs["text_embeds"] = torch.randn(args.batch, args.pooled_dim,
                                            generator=generator)
        inputs["time_ids"] = time_ids(args.batch, args.height, args.width)
    return inputs


def run_model(model, weights, inputs):
    model.load_state_dict(weights, strict=True)
    with torch.no_grad():
        return model(inputs["sample"], inputs["timestep"],
                     inputs["encoder_hidden_states"],
                     inputs.get("text_embeds"), inputs.get("time_ids"))


def config_from_args(args, sample_size=None):
    """diffusers' config.json: every __init__ argument of the class."""
    count = len(args.block_out_channels)
    down, up = block_types(args.variant, count)
    config = {"_class_name": CLASS_NAME,
              "_diffusers_version": DIFFUSERS_VERSION,
              "sample_size": sample_size,
              "in_channels": args.in_channels,
              "out_channels": args.out_channels or args.in_channels,
              "down_block_types": down,
              "up_block_types": up,
              "block_out_channels": list(args.block_out_channels),
              "layers_per_block": args.layers_per_block,
              "norm_num_groups": args.norm_groups,
              "norm_eps": 1e-5,
              "cross_attention_dim": args.cross_attention_dim,
              "transformer_layers_per_block": list(args.transformer_layers),
              "attention_head_dim": list(args.heads),
              "upcast_attention": False,
              "addition_embed_type": None,
              "addition_time_embed_dim": None,
              "projection_class_embeddings_input_dim": None}
    config.update(FIXED_CONFIG)
    if args.variant == "sdxl":
        config.update({
            "addition_embed_type": "text_time",
            "addition_time_embed_dim": args.addition_time_embed_dim,
            "projection_class_embeddings_input_dim":
                args.pooled_dim + TIME_IDS * args.addition_time_embed_dim})
    return config


def command_write(args):
    size = (args.height if args.height == args.width
            else [args.height, args.width])
    config = config_from_args(args, size)
    model = build_model(config)
    randomize(model, args.seed)
    return mirror_io.write_model_case(args, config, model, make_inputs(args),
                                      run_model)


def command_check(args):
    def compute(config, weights, inputs):
        return run_model(build_model(config), weights, inputs)
    return mirror_io.check_case(args.out_dir, compute)


def command_count(args):
    model = build_model(config_from_args(args), device="meta")
    state = model.state_dict()
    if args.list:
        for name, tensor in state.items():
            print("%s %s" % (name, list(tensor.shape)))
    total = sum(tensor.numel() for tensor in state.values())
    print("%d parameters (%s), %d tensors" % (total, format(total, ","),
                                              len(state)))
    return 0


def int_list(text):
    return [int(part) for part in text.split(",")]


def add_model_options(parser):
    """The options that shape the model (write and count)."""
    parser.add_argument("--variant", choices=VARIANTS, default="sd2")
    parser.add_argument("--in-channels", type=int, default=4)
    parser.add_argument("--out-channels", type=int, default=None,
                        help="default: --in-channels")
    parser.add_argument("--block-out-channels", type=int_list,
                        default=[32, 64], metavar="C0,C1,...")
    parser.add_argument("--layers-per-block", type=int, default=1)
    parser.add_argument("--heads", type=int_list, default=[2, 4],
                        metavar="H0,H1,...",
                        help="heads per down block (diffusers' "
                        "attention_head_dim); one value for all")
    parser.add_argument("--transformer-layers", type=int_list,
                        default=[1, 1], metavar="L0,L1,...",
                        help="transformer_layers_per_block; one value for "
                        "all")
    parser.add_argument("--norm-groups", type=int, default=8)
    parser.add_argument("--cross-attention-dim", type=int, default=32)
    parser.add_argument("--pooled-dim", type=int, default=16,
                        help="sdxl: the pooled text embedding's width")
    parser.add_argument("--addition-time-embed-dim", type=int, default=8,
                        help="sdxl: sinusoidal channels per time id")


def parse_args(argv):
    parser, commands, write = mirror_io.make_parser(__doc__)
    add_model_options(write)
    write.add_argument("--height", type=int, default=8)
    write.add_argument("--width", type=int, default=8)
    write.add_argument("--text-len", type=int, default=8)
    mirror_io.add_write_options(write)
    count = commands.add_parser("count", help="print the parameter count")
    add_model_options(count)
    count.add_argument("--list", action="store_true",
                       help="first print each tensor's name and shape")
    mirror_io.add_check_and_compare(commands)

    args = parser.parse_args(argv)
    if args.command == "write":
        validate_model(write, args)
        validate_write(write, args)
    elif args.command == "count":
        validate_model(count, args)
    return args


def validate_model(parser, args):
    channels = args.block_out_channels
    count = len(channels)
    sizes = [args.in_channels, args.layers_per_block, args.norm_groups,
             args.cross_attention_dim, args.pooled_dim,
             args.addition_time_embed_dim, *channels, *args.heads,
             *args.transformer_layers]
    if args.out_channels is not None:
        sizes.append(args.out_channels)
    if min(sizes) < 1:
        parser.error("sizes, layer and head counts must be positive")
    for name in ("heads", "transformer_layers"):
        values = getattr(args, name)
        if len(values) == 1:
            setattr(args, name, values * count)
        elif len(values) != count:
            parser.error("--%s: one value, or one per block (%d)"
                         % (name.replace("_", "-"), count))
    if any(c % args.norm_groups for c in channels):
        parser.error("--block-out-channels must be multiples of "
                     "--norm-groups")
    down, _ = block_types(args.variant, count)
    attended = [i for i, kind in enumerate(down) if kind == CROSS_DOWN_BLOCK]
    for i in attended + [count - 1]:  # the mid block has the last's heads
        if channels[i] % args.heads[i]:
            parser.error("--block-out-channels: block %d (%d channels) is "
                         "not a multiple of its --heads (%d)"
                         % (i, channels[i], args.heads[i]))


def validate_write(parser, args):
    if min(args.height, args.width, args.text_len, args.batch,
           args.shards) < 1:
        parser.error("sizes, --batch and --shards must be positive")
    factor = 2 ** (len(args.block_out_channels) - 1)
    if args.height % factor or args.width % factor:
        parser.error("--height and --width must be multiples of %d "
                     "(2^(blocks - 1))" % factor)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    commands = {"write": command_write, "check": command_check,
                "count": command_count,
                "compare": mirror_io.command_compare}
    return mirror_io.run(args, commands)


if __name__ == "__main__":
    sys.exit(main())
