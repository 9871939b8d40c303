#!/usr/bin/env python3
"""torch.compile versions of the fused kernels in bench/llama3-8b-layer.mlir
(same shapes and math), timed in the same run as octet's kernels, and merged
with octet-fused-bench's JSON into one result.

usage: torch_fused.py OCTET_JSON OUT_JSON [OCTET_JSON OUT_JSON]...
(several octet results, e.g. kernels built with different options in the
same run, each get the same torch.compile timings)
"""
import json, math, sys, time
import torch
import torch.nn.functional as F

torch.manual_seed(0)
dev = "cuda"
B, S, D, FF, HQ, HKV, DH = 1, 8192, 4096, 14336, 32, 8, 128
T = B * S
E4, E5 = torch.float8_e4m3fn, torch.float8_e5m2
bf = torch.bfloat16


def q8(x, scale, dt):
    m = 448.0 if dt == E4 else 57344.0
    return (x.float() * scale).clamp(-m, m).to(dt)


def attn_norm(x, r, w, s):
    h = x + r
    hf = h.float()
    n = (hf * torch.rsqrt(hf.pow(2).mean(-1, keepdim=True) + 1e-5) * w.float()).to(bf)
    return h, q8(n, s, E4), n.abs().amax().float()


def attn_norm_bwd(dy, x, w, dres):
    xf = x.float()
    inv = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5)
    xhat = xf * inv
    wdy = dy.float() * w.float()
    dx = ((wdy - xhat * (wdy * xhat).mean(-1, keepdim=True)) * inv).to(bf)
    return dx + dres, (dy.float() * xhat).sum(0)


def layer_norm(x, w, b, s):
    n = F.layer_norm(x.float(), (D,), w.float(), b.float(), 1e-5).to(bf)
    return q8(n, s, E4), n.abs().amax().float()


def layer_norm_bwd(dy, x, w):
    xf = x.float()
    mean = xf.mean(-1, keepdim=True)
    inv = torch.rsqrt((xf - mean).pow(2).mean(-1, keepdim=True) + 1e-5)
    xhat = (xf - mean) * inv
    wdy = dy.float() * w.float()
    dx = ((wdy - wdy.mean(-1, keepdim=True) - xhat * (wdy * xhat).mean(-1, keepdim=True)) * inv).to(bf)
    return dx, (dy.float() * xhat).sum(0), dy.float().sum(0)


def swiglu(g, u, s):
    a = (F.silu(g.float()) * u.float()).to(bf)
    return q8(a, s, E4), a.abs().amax().float()


def swiglu_bwd(dy, g, u, s):
    gf, uf, dyf = g.float(), u.float(), dy.float()
    sg = torch.sigmoid(gf)
    dg = (dyf * uf * sg * (1 + gf * (1 - sg))).to(bf)
    du = (dyf * gf * sg).to(bf)
    return q8(dg, s, E5), q8(du, s, E5), dg.abs().amax().float(), du.abs().amax().float()


def gelu(x, s):
    a = F.gelu(x.float(), approximate="tanh").to(bf)
    return q8(a, s, E4), a.abs().amax().float()


def inv_freq():
    out = []
    for i in range(DH // 2):
        f = 500000.0 ** (-2.0 * i / DH)
        wl = 2 * math.pi / f
        if wl > 8192.0:
            f /= 8
        elif wl >= 8192.0 / 4:
            sm = (8192.0 / wl - 1) / 3
            f = (1 - sm) * f / 8 + sm * f
        out.append(f)
    return torch.tensor(out, device=dev, dtype=torch.float32)


def make_rope(sign):
    def rope(q, k, pos, freqs):
        ang = pos.float()[..., None] * freqs  # [B, S, DH/2]
        c = torch.cat([ang.cos(), ang.cos()], -1)[:, :, None, :]
        sn = torch.cat([ang.sin(), ang.sin()], -1)[:, :, None, :] * sign

        def rot(x):
            x1, x2 = x.float().chunk(2, -1)
            return (x.float() * c + torch.cat([-x2, x1], -1) * sn).to(bf)
        return rot(q), rot(k)
    return rope


PARAMS = [("wq", (HQ * DH, D), True), ("wk", (HKV * DH, D), True), ("wv", (HKV * DH, D), True),
          ("wo", (D, HQ * DH), True), ("w1", (FF, D), True), ("w3", (FF, D), True),
          ("w2", (D, FF), True), ("attn_norm", (D,), False), ("mlp_norm", (D,), False)]


def adamw(ps, gs, ms, vs, scales, lr, step, gscale):
    outs = []
    t = step.float()
    bc1 = 1 - torch.pow(torch.tensor(0.9, device=dev), t)
    bc2 = 1 - torch.pow(torch.tensor(0.95, device=dev), t)
    for i, (name, shape, fp8) in enumerate(PARAMS):
        p, g, m, v = ps[i], gs[i].float() * gscale, ms[i], vs[i]
        m1 = 0.9 * m + 0.1 * g
        v1 = 0.95 * v + 0.05 * g * g
        wd = 0.1 if fp8 else 0.0
        p1 = p - lr * (m1 / bc1) / (torch.sqrt(v1 / bc2) + 1e-8) - lr * wd * p
        outs += [p1, m1, v1]
        if fp8:
            outs += [q8(p1, scales[i], E4), p1.abs().amax()]
    return outs


def bench(fn, args, reps=20, warm=3):
    # As octet-fused-bench times: a 256 MiB fill before every repeat evicts
    # L2 and keeps the GPU busy while the call is enqueued, so the events
    # time the device, not the host's dispatch.
    flush = torch.empty(64 << 20, dtype=torch.int32, device=dev)
    for _ in range(warm):
        fn(*args)
    torch.cuda.synchronize()
    times = []
    for i in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        flush.fill_(i)
        s.record()
        fn(*args)
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    times.sort()
    return times[len(times) // 2]


def r(*shape, dt=bf, std=1.0, mean=0.0):
    return (torch.randn(*shape, device=dev) * std + mean).to(dt)


def main():
    sc = torch.tensor(96.0, device=dev)
    x, res, dy, dres = r(T, D), r(T, D), r(T, D), r(T, D)
    w, lw, lb = r(D, std=0.1, mean=1.0), r(D, std=0.1, mean=1.0), r(D, std=0.1)
    g, u, dm = r(T, FF), r(T, FF), r(T, FF)
    q, k = r(B, S, HQ, DH), r(B, S, HKV, DH)
    pos = torch.arange(S, device=dev, dtype=torch.int32)[None].expand(B, S).contiguous()
    fr = inv_freq()
    cases = {
        "attn_norm": (attn_norm, (x, res, w, sc)),
        "attn_norm_bwd": (attn_norm_bwd, (dy, x, w, dres)),
        "layer_norm": (layer_norm, (x, lw, lb, sc)),
        "layer_norm_bwd": (layer_norm_bwd, (dy, x, lw)),
        "swiglu": (swiglu, (g, u, sc)),
        "swiglu_bwd": (swiglu_bwd, (dm, g, u, sc)),
        "gelu": (gelu, (g, sc)),
        "rope": (make_rope(1.0), (q, k, pos, fr)),
        "rope_bwd": (make_rope(-1.0), (q, k, pos, fr)),
    }
    results = {}
    for name, (fn, args) in cases.items():
        c = torch.compile(fn)
        results[name] = bench(c, args)
        print(f"torch.compile {name}: {results[name]:.4f} ms", flush=True)
    del x, res, dy, dres, g, u, dm, q, k
    torch.cuda.empty_cache()
    ps = [r(*s, dt=torch.float32, std=0.02) for _, s, _ in PARAMS]
    gs = [r(*s, std=0.001) for _, s, _ in PARAMS]
    ms = [r(*s, dt=torch.float32, std=0.001) for _, s, _ in PARAMS]
    vs = [r(*s, dt=torch.float32, std=0.001) ** 2 for _, s, _ in PARAMS]
    scales = [torch.tensor(448 / 0.08, device=dev) for _ in PARAMS]
    lr, step, gsc = torch.tensor(3e-4, device=dev), torch.tensor(10, device=dev), torch.tensor(1.0, device=dev)
    c = torch.compile(adamw)
    results["adamw"] = bench(c, (ps, gs, ms, vs, scales, lr, step, gsc), reps=10)
    print(f"torch.compile adamw: {results['adamw']:.4f} ms", flush=True)

    if len(sys.argv) < 3 or len(sys.argv) % 2 == 0:
        sys.exit("usage: torch_fused.py OCTET_JSON OUT_JSON [OCTET_JSON OUT_JSON]...")
    for src, dst in zip(sys.argv[1::2], sys.argv[2::2]):
        merge(json.load(open(src)), results, dst)


def merge(octet, results, out_path):
    print(out_path)
    for kern in octet["kernels"]:
        tms = results.get(kern["name"])
        if tms:
            kern["torch_compile_ms"] = tms
            kern["speedup_vs_torch_compile"] = tms / kern["ms"]
    octet["torch"] = torch.__version__
    print(f"{'kernel':16s} {'octet ms':>9s} {'GB/s':>7s} {'of copy':>8s} {'torch ms':>9s} {'speedup':>8s}")
    for kern in octet["kernels"]:
        print(f"{kern['name']:16s} {kern['ms']:9.4f} {kern['GBps']:7.0f} {100*kern['share_of_copy']:7.1f}% "
              f"{kern.get('torch_compile_ms', float('nan')):9.4f} {kern.get('speedup_vs_torch_compile', float('nan')):7.2f}x")
    print(f"copy {octet['copy_GBps']:.0f} GB/s; geomean share of copy {100*octet['geomean_share_of_copy']:.1f}%")
    json.dump(octet, open(out_path, "w"), indent=2)


if __name__ == "__main__":
    main()
