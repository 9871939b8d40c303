#!/usr/bin/env python3
"""PyTorch peer for octet's training benchmark: a Llama decoder written in
plain PyTorch, trained with torch.compile, in BF16 or with FP8 linears.

Modes:
  bf16  every matmul in BF16 (fp32 master weights, cast per use), fp32 norms
        and softmax statistics, AdamW (fused) on fp32 weights.
  fp8   the transformer-block linears (q, k, v, o, gate, up, down) through
        torch._scaled_mm with tensorwise dynamic ("current") scaling: E4M3
        activations and weights in forward with fast accumulation, E5M2
        output gradients in backward without it. Embedding and LM head stay
        BF16, as octet's default precision policy keeps them.

Compilation follows torchtitan: each transformer block and the LM head +
loss are compiled (one compiled graph shared by all blocks), the rest runs
eagerly. Attention is F.scaled_dot_product_attention (flash backend, causal,
GQA).

Model FLOPs per token (the figure behind TFLOP/s and MFU):
    6 * N_matmul + 6 * L * H * Dh * S
N_matmul counts the parameters that enter matrix products (every linear of
every block and the LM head; the embedding lookup is no matmul). The second
term is causal attention: QK^T and PV are 2 * 2 * S * H * Dh FLOPs per token
forward if the full S x S square were computed, halved for the causal
triangle, times 3 for forward + backward. (PaLM's 12 * L * H * Dh * S counts
the full square.)

Writes one JSON object per run (see --out).
"""

import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

BF16_PEAK_TFLOPS = 989.0  # H100 SXM dense BF16
FP8_PEAK_TFLOPS = 1979.0  # H100 SXM dense FP8

MODELS = {
    # meta-llama/Llama-3.2-1B
    "llama3.2-1b": dict(vocab=128256, dim=2048, layers=16, heads=32,
                        kv_heads=8, ffn=8192, rope_theta=500000.0,
                        tie_embeddings=True),
    # meta-llama/Meta-Llama-3-8B shapes with 8 of its 32 layers
    "llama3-8b-8l": dict(vocab=128256, dim=4096, layers=8, heads=32,
                         kv_heads=8, ffn=14336, rope_theta=500000.0,
                         tie_embeddings=False),
    # for smoke tests on a CPU
    "tiny": dict(vocab=512, dim=128, layers=2, heads=4, kv_heads=2, ffn=256,
                 rope_theta=10000.0, tie_embeddings=False),
}

E4M3_MAX = torch.finfo(torch.float8_e4m3fn).max
E5M2_MAX = torch.finfo(torch.float8_e5m2).max


def to_fp8(x, dtype, fmax):
    """Tensorwise current scaling: returns (x * scale in fp8, 1 / scale)."""
    amax = x.abs().amax().float().clamp(min=1e-12)
    scale = fmax / amax
    x8 = (x.float() * scale).clamp(-fmax, fmax).to(dtype)
    return x8, scale.reciprocal()


class Fp8Matmul(torch.autograd.Function):
    """y = x @ w^T with x [M, K] bf16 and w [N, K]."""

    @staticmethod
    def forward(ctx, x, w):
        x8, xs_inv = to_fp8(x, torch.float8_e4m3fn, E4M3_MAX)
        w8, ws_inv = to_fp8(w, torch.float8_e4m3fn, E4M3_MAX)
        # _scaled_mm wants A row-major and B column-major (TN).
        y = torch._scaled_mm(x8, w8.t(), scale_a=xs_inv, scale_b=ws_inv,
                             out_dtype=torch.bfloat16, use_fast_accum=True)
        ctx.save_for_backward(x8, xs_inv, w8, ws_inv)
        return y

    @staticmethod
    def backward(ctx, gy):
        x8, xs_inv, w8, ws_inv = ctx.saved_tensors
        g8, gs_inv = to_fp8(gy, torch.float8_e5m2, E5M2_MAX)
        # dgrad: dx [M, K] = gy [M, N] @ w [N, K]; B must be column-major.
        w8_cm = w8.t().contiguous().t()
        dx = torch._scaled_mm(g8, w8_cm, scale_a=gs_inv, scale_b=ws_inv,
                              out_dtype=torch.bfloat16, use_fast_accum=False)
        # wgrad: dw [N, K] = gy^T [N, M] @ x [M, K].
        g8_t = g8.t().contiguous()
        x8_cm = x8.t().contiguous().t()
        dw = torch._scaled_mm(g8_t, x8_cm, scale_a=gs_inv, scale_b=xs_inv,
                              out_dtype=torch.float32, use_fast_accum=False)
        return dx, dw


class Linear(nn.Module):
    def __init__(self, fan_in, fan_out, fp8):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(fan_out, fan_in))
        nn.init.normal_(self.weight, std=0.02)
        self.fp8 = fp8

    def forward(self, x):
        if self.fp8:
            shape = x.shape
            y = Fp8Matmul.apply(x.reshape(-1, shape[-1]), self.weight)
            return y.reshape(*shape[:-1], y.shape[-1])
        return F.linear(x, self.weight.to(torch.bfloat16))


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (y * self.weight).to(torch.bfloat16)


def rope_tables(seq, head_dim, theta, device):
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, device=device).float()
                           / head_dim))
    t = torch.arange(seq, device=device).float()
    freqs = torch.outer(t, inv)
    return freqs.cos(), freqs.sin()


def apply_rope(x, cos, sin):
    # x [B, S, H, Dh], rotate-half convention (HF Llama).
    x1, x2 = x.float().chunk(2, dim=-1)
    c = cos[None, :, None, :]
    s = sin[None, :, None, :]
    out = torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)
    return out.to(torch.bfloat16)


class Block(nn.Module):
    def __init__(self, cfg, fp8):
        super().__init__()
        d, h, kv = cfg["dim"], cfg["heads"], cfg["kv_heads"]
        self.h, self.kv, self.dh = h, kv, d // h
        self.attn_norm = RMSNorm(d)
        self.wq = Linear(d, h * self.dh, fp8)
        self.wk = Linear(d, kv * self.dh, fp8)
        self.wv = Linear(d, kv * self.dh, fp8)
        self.wo = Linear(h * self.dh, d, fp8)
        self.mlp_norm = RMSNorm(d)
        self.w1 = Linear(d, cfg["ffn"], fp8)
        self.w3 = Linear(d, cfg["ffn"], fp8)
        self.w2 = Linear(cfg["ffn"], d, fp8)

    def forward(self, x, cos, sin):
        b, s, _ = x.shape
        n = self.attn_norm(x)
        q = apply_rope(self.wq(n).view(b, s, self.h, self.dh), cos, sin)
        k = apply_rope(self.wk(n).view(b, s, self.kv, self.dh), cos, sin)
        v = self.wv(n).view(b, s, self.kv, self.dh)
        a = F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
            is_causal=True, enable_gqa=True)
        x = x + self.wo(a.transpose(1, 2).reshape(b, s, -1))
        n = self.mlp_norm(x)
        return x + self.w2(F.silu(self.w1(n)) * self.w3(n))


class Head(nn.Module):
    def __init__(self, cfg, embedding):
        super().__init__()
        self.norm = RMSNorm(cfg["dim"])
        self.tied = embedding if cfg["tie_embeddings"] else None
        if self.tied is None:
            self.weight = nn.Parameter(torch.empty(cfg["vocab"], cfg["dim"]))
            nn.init.normal_(self.weight, std=0.02)

    def forward(self, x, labels):
        w = self.tied.weight if self.tied is not None else self.weight
        logits = F.linear(self.norm(x), w.to(torch.bfloat16))
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]),
                               labels.reshape(-1))


class Llama(nn.Module):
    def __init__(self, cfg, fp8):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg["vocab"], cfg["dim"])
        nn.init.normal_(self.embed.weight, std=0.02)
        self.blocks = nn.ModuleList(Block(cfg, fp8)
                                    for _ in range(cfg["layers"]))
        self.head = Head(cfg, self.embed)

    def forward(self, tokens, labels, cos, sin):
        x = self.embed(tokens).to(torch.bfloat16)
        for blk in self.blocks:
            x = blk(x, cos, sin)
        return self.head(x, labels)


def matmul_params(cfg):
    d, h, kv, f = cfg["dim"], cfg["heads"], cfg["kv_heads"], cfg["ffn"]
    dh = d // h
    per_layer = d * h * dh + 2 * d * kv * dh + h * dh * d + 3 * d * f
    return cfg["layers"] * per_layer + cfg["vocab"] * d


def flops_per_token(cfg, seq):
    dh = cfg["dim"] // cfg["heads"]
    return (6 * matmul_params(cfg)
            + 6 * cfg["layers"] * cfg["heads"] * dh * seq)


def run(args):
    cfg = MODELS[args.model]
    dev = torch.device(args.device)
    torch.manual_seed(0)
    model = Llama(cfg, fp8=(args.mode == "fp8")).to(dev)
    total_params = sum(p.numel() for p in model.parameters())
    if args.compile:
        for blk in model.blocks:
            blk.compile()
        model.head.compile()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95),
                            weight_decay=0.1, fused=(dev.type == "cuda"))
    cos, sin = rope_tables(args.seq, cfg["dim"] // cfg["heads"],
                           cfg["rope_theta"], dev)
    gen = torch.Generator(device="cpu").manual_seed(1)

    def batch():
        t = torch.randint(0, cfg["vocab"], (args.batch, args.seq + 1),
                          generator=gen)
        t = t.to(dev, non_blocking=True)
        return t[:, :-1], t[:, 1:]

    def step():
        tokens, labels = batch()
        loss = model(tokens, labels, cos, sin)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()

    t0 = time.perf_counter()
    losses = []
    for _ in range(args.warmup):
        losses.append(step().item())
    sync()
    warm_s = time.perf_counter() - t0
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(args.steps):
        t = time.perf_counter()
        loss = step()
        sync()
        times.append(time.perf_counter() - t)
        losses.append(loss.item())
    times.sort()
    median = times[len(times) // 2]
    tokens = args.batch * args.seq
    tps = tokens / median
    fpt = flops_per_token(cfg, args.seq)
    tflops = tps * fpt / 1e12
    res = dict(
        peer="torch.compile" if args.compile else "torch eager",
        mode=args.mode, model=args.model, seq=args.seq, batch=args.batch,
        tokens_per_step=tokens, params=total_params,
        matmul_params=matmul_params(cfg), torch=torch.__version__,
        device=(torch.cuda.get_device_name(dev) if dev.type == "cuda"
                else "cpu"),
        warmup_steps=args.warmup, timed_steps=args.steps,
        warmup_s=round(warm_s, 2),
        step_s_median=median, step_s_min=times[0], step_s_max=times[-1],
        tokens_per_s=tps,
        flops_per_token=fpt,
        flop_formula="6*N_matmul + 6*L*H*Dh*S (causal attention)",
        model_tflops=tflops,
        mfu_bf16_peak=tflops / BF16_PEAK_TFLOPS,
        mfu_fp8_peak=tflops / FP8_PEAK_TFLOPS,
        peaks_tflops=dict(bf16=BF16_PEAK_TFLOPS, fp8=FP8_PEAK_TFLOPS),
        losses=[round(x, 4) for x in losses],
    )
    if dev.type == "cuda":
        res["peak_mem_allocated_gib"] = torch.cuda.max_memory_allocated() / 2**30
        res["peak_mem_reserved_gib"] = torch.cuda.max_memory_reserved() / 2**30
    if not all(math.isfinite(x) for x in losses):
        res["error"] = "non-finite loss"
    return res


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", choices=sorted(MODELS), required=True)
    p.add_argument("--mode", choices=["bf16", "fp8"], required=True)
    p.add_argument("--seq", type=int, required=True)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--device", default="cuda")
    p.add_argument("--no-compile", dest="compile", action="store_false")
    p.add_argument("--out", help="write the JSON result here")
    args = p.parse_args()
    try:
        res = run(args)
    except torch.OutOfMemoryError as e:
        res = dict(mode=args.mode, model=args.model, seq=args.seq,
                   batch=args.batch, error="out of memory: " + str(e)[:300])
    text = json.dumps(res, indent=1)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 1 if "error" in res else 0


if __name__ == "__main__":
    sys.exit(main())
