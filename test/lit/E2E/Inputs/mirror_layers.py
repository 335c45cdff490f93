"""Layers shared by the PyTorch mirrors of diffusers' transformers.

wan_mirror.py and flux_mirror.py build diffusers' WanTransformer3DModel and
FluxTransformer2DModel from these (torch 1.13 has no RMSNorm module and no
fused attention, so both are written out): the sinusoidal timestep
features, plain attention, RMS normalisation and the tanh-GELU feed-forward
whose parameter names (net.0.proj, net.2) are diffusers'.
"""
import math

import torch
from torch import nn
import torch.nn.functional as F


def sinusoidal_embedding(t, channels, max_period=10000):
    """Timestep features [cos(t f_k) | sin(t f_k)], f_k = P^(-k / half).

    The cosine half comes first (the reference's flip_sin_to_cos=True with
    no frequency shift); an odd channel count gets a zero column.
    """
    half = channels // 2
    exponent = -math.log(max_period) * torch.arange(half, dtype=torch.float32)
    frequencies = torch.exp(exponent / half)
    angles = t[:, None].float() * frequencies[None, :]
    features = torch.cat([torch.cos(angles), torch.sin(angles)], dim=-1)
    if channels % 2:
        features = F.pad(features, (0, 1))
    return features


def attention(q, k, v):
    """softmax(q k^T / sqrt(Dh)) v over [B, heads, S, Dh] tensors."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return scores.softmax(dim=-1) @ v


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * weight over the last dimension."""

    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        mean_square = x.pow(2).mean(dim=-1, keepdim=True)
        return x * torch.rsqrt(mean_square + self.eps) * self.weight


class ProjectThenGelu(nn.Module):
    """Linear "proj" then tanh GELU: the first entry of a feed-forward."""

    def __init__(self, dim, hidden):
        super().__init__()
        self.proj = nn.Linear(dim, hidden)

    def forward(self, x):
        return F.gelu(self.proj(x), approximate="tanh")


class FeedForward(nn.Module):
    """net.0 (projection + GELU), net.1 (dropout, no-op), net.2."""

    def __init__(self, dim, hidden):
        super().__init__()
        self.net = nn.ModuleList([ProjectThenGelu(dim, hidden), nn.Identity(),
                                  nn.Linear(hidden, dim)])

    def forward(self, x):
        for layer in self.net:
            x = layer(x)
        return x
