"""The attention bench's peers: PyTorch's cuDNN and flash SDPA backends at
the bench's shapes (bf16, causal, 32 query / 8 kv heads, head dim 128),
forward and forward+backward timed with CUDA events, the backend confirmed
by the names of the kernels torch.profiler sees in one call. Packed
documents (--documents N) run through the flash backend's variable-length
kernel (torch.ops.aten._flash_attention_forward with cumulative lengths, the
same cuts as octet's bench: --seed). Prints one JSON list, one object per
backend: forward and backward milliseconds and TFLOP/s (backward = the time
of forward+backward minus forward; FLOPs 4·Hq·Dh·Σ L²/2 forward for causal
documents of length L, 2.5× that backward).

  python3 bench/attention_torch.py [--cases 8192:0,4096:0,8192:8] [--iterations 20]

Each case is SEQ:DOCUMENTS (0: one causal sequence).
"""
import argparse
import json
import random

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def timed(fn, iterations):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    stop = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iterations):
        fn()
    stop.record()
    torch.cuda.synchronize()
    return start.elapsed_time(stop) / iterations


def kernel_names(fn):
    """CUDA kernels one call of fn launches, by total time."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    names = {}
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA:
            names[ev.name] = names.get(ev.name, 0) + ev.device_time_total
    return [n for n, _ in sorted(names.items(), key=lambda x: -x[1])][:6]


def document_cuts(tokens, documents):
    """Lengths from half to 1.5 times tokens / documents in a fixed pattern
    (octet's bench draws the same), the last taking what is left."""
    mean = tokens // documents
    cuts = [0]
    for d in range(documents - 1):
        cuts.append(min(cuts[-1] + mean // 2 + mean * ((d * 37) % 11) // 10, tokens))
    cuts.append(tokens)
    return cuts


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--cases", default="8192:0,4096:0,8192:8")
    p.add_argument("--q-heads", type=int, default=32)
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--iterations", type=int, default=20)
    a = p.parse_args()
    results = []
    for case in a.cases.split(","):
        seq, documents = (int(x) for x in case.split(":"))
        run_case(a, seq, documents, results)
    print(json.dumps(results))


def run_case(a, S, documents, results):
    dev = "cuda"
    group = a.q_heads // a.kv_heads
    Hq, Hkv, Dh = a.q_heads, a.kv_heads, a.head_dim

    def record(backend, fwd, fwd_bwd, flops_fwd, note, extra_ms=0.0):
        with torch.no_grad():
            fwd_ms = timed(fwd, a.iterations)
        total_ms = timed(fwd_bwd, a.iterations)
        kernels = kernel_names(fwd_bwd)
        bwd_ms = total_ms - fwd_ms
        fwd_ms -= extra_ms
        results.append({
            "backend": backend, "torch": torch.__version__,
            "device": torch.cuda.get_device_name(), "seq": S,
            "documents": documents, "q_heads": Hq, "kv_heads": Hkv,
            "head_dim": Dh, "causal": True, "kernels": kernels, "note": note,
            "fwd_ms": round(fwd_ms, 4),
            "fwd_tflops": round(flops_fwd / fwd_ms / 1e9, 1),
            "bwd_ms": round(bwd_ms, 4),
            "bwd_tflops": round(2.5 * flops_fwd / bwd_ms / 1e9, 1),
            "iterations": a.iterations})

    if documents == 0:
        q = torch.randn(1, Hq, S, Dh, device=dev, dtype=torch.bfloat16, requires_grad=True)
        k = torch.randn(1, Hkv, S, Dh, device=dev, dtype=torch.bfloat16, requires_grad=True)
        v = torch.randn(1, Hkv, S, Dh, device=dev, dtype=torch.bfloat16, requires_grad=True)
        do = torch.randn(1, Hq, S, Dh, device=dev, dtype=torch.bfloat16)
        flops_fwd = 4.0 * Hq * S * S * Dh / 2
        for name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION),
                              ("flash", SDPBackend.FLASH_ATTENTION)):
            # Neither backend takes GQA here: k, v are expanded to the query
            # heads first; the forward figure subtracts the expansion, the
            # backward includes its gradient (a sum over each group).
            def expand():
                return (k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1))

            def fwd():
                ke, ve = expand()
                return F.scaled_dot_product_attention(q, ke, ve, is_causal=True)

            def fwd_bwd():
                fwd().backward(do)

            try:
                with sdpa_kernel([backend]):
                    with torch.no_grad():
                        expand_ms = timed(expand, a.iterations)
                    record(name, fwd, fwd_bwd, flops_fwd,
                           "k, v expanded to the query heads (forward: "
                           "expansion subtracted)", expand_ms)
            except RuntimeError as err:
                results.append({"backend": name, "seq": S, "documents": documents, "error": str(err)[:300]})
    else:
        cuts = document_cuts(S, documents)
        lengths = [cuts[i + 1] - cuts[i] for i in range(documents)]
        flops_fwd = 4.0 * Hq * Dh * sum(L * L for L in lengths) / 2
        q = torch.randn(S, Hq, Dh, device=dev, dtype=torch.bfloat16, requires_grad=True)
        k = torch.randn(S, Hkv, Dh, device=dev, dtype=torch.bfloat16, requires_grad=True)
        v = torch.randn(S, Hkv, Dh, device=dev, dtype=torch.bfloat16, requires_grad=True)
        do = torch.randn(S, Hq, Dh, device=dev, dtype=torch.bfloat16)
        cu = torch.tensor(cuts, device=dev, dtype=torch.int32)
        longest = max(lengths)

        def fwd():
            ke = k.repeat_interleave(group, dim=1)
            ve = v.repeat_interleave(group, dim=1)
            return torch.ops.aten._flash_attention_forward(
                q, ke, ve, cu, cu, longest, longest, 0.0, True, False,
                scale=Dh ** -0.5)[0]

        def fwd_bwd():
            fwd().backward(do)

        try:
            record("flash-varlen", fwd, fwd_bwd, flops_fwd,
                   "aten._flash_attention_forward over cu_seqlens; k, v "
                   "expanded (included)")
        except RuntimeError as err:
            results.append({"backend": "flash-varlen", "seq": S, "documents": documents, "error": str(err)[:300]})


if __name__ == "__main__":
    main()
