"""Row-wise AdamW for the batched micro-tuning path: every text owns one row of each tuned vector."""

from __future__ import annotations

from collections.abc import Sequence

import torch


class BatchedAdamW:
    """``torch.optim.AdamW`` (torch defaults, no amsgrad) applied row-wise: row t is text t's own parameter.

    Every text takes the same number of steps, so one step counter serves all rows; the update is the
    elementwise formula of torch's single-tensor AdamW, step for step.
    """

    def __init__(self, params: Sequence[torch.Tensor], lr: float, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8, weight_decay: float = 1e-2) -> None:
        self.params = list(params)
        self.lr, self.betas, self.eps, self.weight_decay = lr, betas, eps, weight_decay
        self.exp_avg = [torch.zeros_like(param) for param in self.params]
        self.exp_avg_sq = [torch.zeros_like(param) for param in self.params]
        self.step_count = 0

    @torch.no_grad()
    def step(self, grads: Sequence[torch.Tensor]) -> None:
        beta1, beta2 = self.betas
        self.step_count += 1
        step = float(self.step_count)
        bias_correction1 = 1 - beta1**step
        bias_correction2 = 1 - beta2**step
        step_size = self.lr / bias_correction1
        bias_correction2_sqrt = bias_correction2**0.5
        for param, grad, exp_avg, exp_avg_sq in zip(self.params, grads, self.exp_avg, self.exp_avg_sq):
            param.mul_(1 - self.lr * self.weight_decay)
            exp_avg.lerp_(grad, 1 - beta1)
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(self.eps)
            param.addcdiv_(exp_avg, denom, value=-step_size)
