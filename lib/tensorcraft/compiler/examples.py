"""A small model zoo for tests, benchmarks and notebooks: each one exercises a different pass.

    MLP            Linear -> GELU -> Linear            (fusion of the bias-free glue, extern matmuls)
    ConvBNReLU     Conv -> BatchNorm -> ReLU, twice     (conv+bn folding in eval mode, in-place ReLU)
    NormSoftmax    LayerNorm -> scale -> softmax -> +x  (decomposition, reductions at the end of chains)
    Attention      multi-head attention with einsum and reshapes
    TransformerBlock  a pre-norm causal block written with tc.einsum and tc.rearrange (notebook 11's
                   stand-in where a learner's block is not written yet; not in model_zoo)
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class MLP(nn.Module):
    def __init__(self, d_in: int = 16, hidden: int = 32, d_out: int = 8) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d_in, hidden), nn.Linear(hidden, d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x)) * 0.5 + 0.25)


class ConvBNReLU(nn.Module):
    def __init__(self, channels: int = 3, width: int = 8, classes: int = 5) -> None:
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(channels, width, 3, padding=1), nn.BatchNorm2d(width)
        self.conv2, self.bn2 = nn.Conv2d(width, width, 3, padding=1, bias=False), nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.head = nn.Linear(width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.relu(self.bn2(self.conv2(x)))
        return self.head(x.mean(dim=(2, 3)))


class NormSoftmax(nn.Module):
    def __init__(self, d: int = 32) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.scale = nn.Parameter(torch.linspace(0.5, 1.5, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.norm(x) * self.scale
        return torch.softmax(y, dim=-1) + torch.sigmoid(x) * x


class Attention(nn.Module):
    def __init__(self, d: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        h = self.heads
        qkv = self.qkv(x).reshape(b, t, 3, h, d // h)
        q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
        scores = torch.einsum("bihd,bjhd->bhij", q, k) * (d // h) ** -0.5
        weights = scores.softmax(dim=-1)
        mixed = torch.einsum("bhij,bjhd->bihd", weights, v).reshape(b, t, d)
        return x + self.out(mixed)


class TransformerBlock(nn.Module):
    """x + proj(attention(ln1(x))), then + fc2(gelu(fc1(ln2(x)))); causal attention with heads split as (h e)."""

    def __init__(self, d: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        from tensorcraft.einops.ops import rearrange
        from tensorcraft.einstein.api import einsum

        q, k, v = (rearrange(z, "b t (h e) -> b h t e", h=self.heads) for z in self.qkv(self.ln1(x)).chunk(3, dim=-1))
        t = x.shape[1]
        scores = einsum("bhqe,bhke->bhqk", q, k) * q.shape[-1] ** -0.5
        future = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        weights = scores.masked_fill(future, float("-inf")).softmax(dim=-1)
        x = x + self.proj(rearrange(einsum("bhqk,bhke->bhqe", weights, v), "b h t e -> b t (h e)"))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


def model_zoo() -> dict[str, tuple[nn.Module, tuple[int, ...]]]:
    """name -> (a freshly seeded model, the input shape it expects)."""
    torch.manual_seed(0)
    models = {"mlp": (MLP(), (4, 16)), "cnn": (ConvBNReLU(), (2, 3, 8, 8)),
              "norm_softmax": (NormSoftmax(), (3, 5, 32)), "attention": (Attention(), (2, 6, 32))}
    with torch.no_grad():  # non-trivial batchnorm statistics, so that folding them matters
        for module in models["cnn"][0].modules():
            if isinstance(module, nn.BatchNorm2d):
                module.running_mean.uniform_(-0.5, 0.5)
                module.running_var.uniform_(0.5, 2.0)
                module.weight.uniform_(0.5, 1.5)
                module.bias.uniform_(-0.2, 0.2)
    return models
