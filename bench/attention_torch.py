"""The attention bench's peer: torch.nn.functional.scaled_dot_product_attention
on the flash backend (bf16, is_causal, GQA through enable_gqa) at the bench's
shape, forward and forward+backward timed with CUDA events. Prints one JSON
object: forward and backward milliseconds and TFLOP/s (backward = the time of
forward+backward minus forward; FLOPs: 4·B·Hq·S²·Dh/2 forward, 2.5× that
backward).

  python3 bench/attention_torch.py [--seq 8192] [--iterations 20]
"""
import argparse
import json

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--seq", type=int, default=8192)
    p.add_argument("--q-heads", type=int, default=32)
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--iterations", type=int, default=20)
    a = p.parse_args()
    dev = "cuda"
    shape_q = (a.batch, a.q_heads, a.seq, a.head_dim)
    shape_kv = (a.batch, a.kv_heads, a.seq, a.head_dim)
    q = torch.randn(shape_q, device=dev, dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(shape_kv, device=dev, dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(shape_kv, device=dev, dtype=torch.bfloat16, requires_grad=True)
    do = torch.randn(shape_q, device=dev, dtype=torch.bfloat16)

    # The flash kernel takes no GQA: kv heads are expanded first (a copy
    # that is not timed in the forward-only figure's kernel but is in the
    # same call; measured separately below and subtracted).
    group = a.q_heads // a.kv_heads

    def fwd():
        ke = k.repeat_interleave(group, dim=1) if group > 1 else k
        ve = v.repeat_interleave(group, dim=1) if group > 1 else v
        return F.scaled_dot_product_attention(q, ke, ve, is_causal=True)

    def expand_only():
        ke = k.repeat_interleave(group, dim=1) if group > 1 else k
        ve = v.repeat_interleave(group, dim=1) if group > 1 else v
        return ke, ve

    def timed(fn):
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(a.iterations):
            fn()
        stop.record()
        torch.cuda.synchronize()
        return start.elapsed_time(stop) / a.iterations

    def fwd_bwd():
        out = fwd()
        out.backward(do)

    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
        with torch.no_grad():
            fwd_ms = timed(fwd)
            expand_ms = timed(expand_only)
        total_ms = timed(fwd_bwd)
    flops_fwd = 4.0 * a.batch * a.q_heads * a.seq * a.seq * a.head_dim / 2
    kernel_fwd_ms = fwd_ms - expand_ms
    bwd_ms = total_ms - fwd_ms
    print(json.dumps({
        "peer": "torch.nn.functional.scaled_dot_product_attention (flash backend)",
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(),
        "batch": a.batch, "seq": a.seq, "q_heads": a.q_heads,
        "kv_heads": a.kv_heads, "head_dim": a.head_dim, "causal": True,
        "kv_expand_ms": round(expand_ms, 4),
        "fwd_ms": round(kernel_fwd_ms, 4),
        "fwd_tflops": round(flops_fwd / kernel_fwd_ms / 1e9, 1),
        "bwd_ms": round(bwd_ms, 4),
        "bwd_tflops": round(2.5 * flops_fwd / bwd_ms / 1e9, 1),
        "iterations": a.iterations,
    }))


if __name__ == "__main__":
    main()
