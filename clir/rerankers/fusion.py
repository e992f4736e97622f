"""The fusion layer: component scores and extra features in, one relevance score out."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from clir.errors import ConfigError
from clir.rerankers.base import check_choice, check_positive, torch_seed

FUSIONS = ("linear", "mlp")


class Fusion(nn.Module):
    """A small learned layer over ``[component scores; features]``.

    ``"linear"`` is ``w · x + b``, the form of POSIT-DRMM's final layer (McDonald et al. 2018)
    and the inferred form of Zhang et al. (ACL 2019); ``"mlp"`` adds one tanh hidden layer.

    Args:
        n_inputs: Number of inputs (components + features), at least 1.
        kind: ``"linear"`` or ``"mlp"``.
        hidden: Hidden units of the MLP.
        seed: Seed of the weight initialisation.

    Raises:
        ConfigError: On a bad ``kind``, ``n_inputs`` or ``hidden``.
    """

    def __init__(self, n_inputs: int, kind: str = "linear", hidden: int = 8, seed: int = 0) -> None:
        super().__init__()
        check_positive("n_inputs (components + features)", n_inputs)
        check_choice("fusion", kind, FUSIONS)
        check_positive("fusion_hidden", hidden)
        self.n_inputs, self.kind, self.hidden = n_inputs, kind, hidden
        with torch_seed(seed):
            if kind == "linear":
                self.net: nn.Module = nn.Linear(n_inputs, 1)
            else:
                self.net = nn.Sequential(nn.Linear(n_inputs, hidden), nn.Tanh(), nn.Linear(hidden, 1))

    def forward(self, inputs: Tensor) -> Tensor:
        """Fuse (B, n_inputs) into scores (B,)."""
        if inputs.dim() != 2 or inputs.shape[1] != self.n_inputs:
            raise ConfigError(
                f"fusion expects inputs of shape (B, {self.n_inputs}), got {tuple(inputs.shape)}"
            )
        first = self.net if self.kind == "linear" else self.net[0]
        return self.net(inputs.to(first.weight.dtype)).squeeze(-1)

    def contributions(self, inputs: Tensor) -> Tensor:
        """Each input's additive share of the score before the bias, (B, n_inputs).

        Linear fusion: exactly ``w_k · x_k``. MLP fusion: gradient × input (a first-order
        attribution, not exact).
        """
        if self.kind == "linear":
            return inputs * self.net.weight[0]
        with torch.enable_grad():
            x = inputs.detach().clone().requires_grad_(True)
            (grad,) = torch.autograd.grad(self(x).sum(), x)
        return (grad * x).detach()
