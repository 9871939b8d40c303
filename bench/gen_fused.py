#!/usr/bin/env python3
"""Writes the fused kernels of one llama-style transformer layer as kernel.fused
regions (what the fusion passes produce), for the GPU tests and the bench.

usage: gen_fused.py --batch B --seq S [--hidden 4096 --ffn 14336 --heads 32
                    --kv-heads 8 --head-dim 128] [--small-params] > layer.mlir
"""
import argparse

p = argparse.ArgumentParser()
p.add_argument("--batch", type=int, default=1)
p.add_argument("--seq", type=int, default=8192)
p.add_argument("--hidden", type=int, default=4096)
p.add_argument("--ffn", type=int, default=14336)
p.add_argument("--heads", type=int, default=32)
p.add_argument("--kv-heads", type=int, default=8)
p.add_argument("--head-dim", type=int, default=128)
p.add_argument("--small-params", action="store_true",
               help="AdamW over small tensors (one with a ragged tail) instead of the layer's weights")
p.add_argument("--cast-tests", action="store_true",
               help="add quantize-only kernels that the GPU tests check bit for bit")
a = p.parse_args()

B, S, D, F = a.batch, a.seq, a.hidden, a.ffn
T = B * S
Hq, Hkv, Dh = a.heads, a.kv_heads, a.head_dim
E4, E5 = "f8E4M3FN", "f8E5M2"


def t(*shape, dt="bf16"):
    return "tensor<" + "x".join(str(s) for s in shape) + ("x" if shape else "") + dt + ">"


out = []
emit = out.append
args = []  # (name, type) of @layer


def arg(name, ty):
    args.append((name, ty))
    return "%a_" + name


def fused(name, kind, ins, body, results):
    """ins: list of (outer value, type); body: lines using %i0.. ; results: [(value, type)]"""
    rnames = ", ".join("%" + name.replace(".", "_") + "_r" + str(i) for i in range(len(results)))
    emit(f'  {rnames} = kernel.fused "{name}" kind("{kind}") ins('
         + ", ".join(v for v, _ in ins) + " : " + ", ".join(ty for _, ty in ins) + ") {")
    emit("  ^bb0(" + ", ".join(f"%i{k}: {ty}" for k, (_, ty) in enumerate(ins)) + "):")
    for line in body:
        emit("    " + line)
    emit("    kernel.yield " + ", ".join(v for v, _ in results) + " : "
         + ", ".join(ty for _, ty in results))
    emit("  } : " + ", ".join(ty for _, ty in results))


x, r, w, s = arg("x", t(T, D)), arg("res", t(T, D)), arg("norm_w", t(D)), arg("scale", t(dt="f32"))
# 1. residual add + RMSNorm + FP8 quantize + amax.
fused("attn_norm", "row", [(x, t(T, D)), (r, t(T, D)), (w, t(D)), (s, t(dt="f32"))], [
    f"%h = graph.add %i0, %i1 : {t(T, D)}",
    f"%n = graph.rms_norm %h, %i2 {{eps = 1.0e-5 : f64}} : ({t(T, D)}, {t(D)}) -> {t(T, D)}",
    f"%q, %m = fp8.quantize %n, %i3 : ({t(T, D)}, tensor<f32>) -> ({t(T, D, dt=E4)}, tensor<f32>)",
], [("%h", t(T, D)), ("%q", t(T, D, dt=E4)), ("%m", "tensor<f32>")])

dy, dres = arg("dy", t(T, D)), arg("dres", t(T, D))
# 2. its backward: RMSNorm grad (dx, dweight) + the residual stream's gradient.
fused("attn_norm_bwd", "row", [(dy, t(T, D)), (x, t(T, D)), (w, t(D)), (dres, t(T, D))], [
    f"%dx, %dw = graph.rms_norm_grad %i0, %i1, %i2 {{eps = 1.0e-5 : f64}} : ({t(T, D)}, {t(T, D)}, {t(D)}) -> ({t(T, D)}, {t(D, dt='f32')})",
    f"%g = graph.add %dx, %i3 : {t(T, D)}",
], [("%g", t(T, D)), ("%dw", t(D, dt="f32"))])

lw, lb = arg("ln_w", t(D)), arg("ln_b", t(D))
# 3. LayerNorm + quantize, and its backward.
fused("layer_norm", "row", [(x, t(T, D)), (lw, t(D)), (lb, t(D)), (s, t(dt="f32"))], [
    f"%n = graph.layer_norm %i0, %i1, %i2 {{eps = 1.0e-5 : f64}} : ({t(T, D)}, {t(D)}, {t(D)}) -> {t(T, D)}",
    f"%q, %m = fp8.quantize %n, %i3 : ({t(T, D)}, tensor<f32>) -> ({t(T, D, dt=E4)}, tensor<f32>)",
], [("%q", t(T, D, dt=E4)), ("%m", "tensor<f32>")])
fused("layer_norm_bwd", "row", [(dy, t(T, D)), (x, t(T, D)), (lw, t(D))], [
    f"%dx, %dw, %db = graph.layer_norm_grad %i0, %i1, %i2 {{eps = 1.0e-5 : f64}} : ({t(T, D)}, {t(T, D)}, {t(D)}) -> ({t(T, D)}, {t(D, dt='f32')}, {t(D, dt='f32')})",
], [("%dx", t(T, D)), ("%dw", t(D, dt="f32")), ("%db", t(D, dt="f32"))])

gate, up, dmlp = arg("gate", t(T, F)), arg("up", t(T, F)), arg("dmlp", t(T, F))
# 4. SwiGLU + quantize (input of the down projection), and its backward.
fused("swiglu", "row", [(gate, t(T, F)), (up, t(T, F)), (s, t(dt="f32"))], [
    f"%a = graph.swiglu %i0, %i1 : {t(T, F)}",
    f"%q, %m = fp8.quantize %a, %i2 : ({t(T, F)}, tensor<f32>) -> ({t(T, F, dt=E4)}, tensor<f32>)",
], [("%q", t(T, F, dt=E4)), ("%m", "tensor<f32>")])
fused("swiglu_bwd", "row", [(dmlp, t(T, F)), (gate, t(T, F)), (up, t(T, F)), (s, t(dt="f32"))], [
    f"%dg, %du = graph.swiglu_grad %i0, %i1, %i2 : {t(T, F)}",
    f"%qg, %mg = fp8.quantize %dg, %i3 : ({t(T, F)}, tensor<f32>) -> ({t(T, F, dt=E5)}, tensor<f32>)",
    f"%qu, %mu = fp8.quantize %du, %i3 : ({t(T, F)}, tensor<f32>) -> ({t(T, F, dt=E5)}, tensor<f32>)",
], [("%qg", t(T, F, dt=E5)), ("%qu", t(T, F, dt=E5)), ("%mg", "tensor<f32>"), ("%mu", "tensor<f32>")])

# 5. GELU (tanh) + quantize.
fused("gelu", "elementwise", [(gate, t(T, F)), (s, t(dt="f32"))], [
    f'%a = graph.gelu %i0 {{approximate = "tanh"}} : {t(T, F)}',
    f"%q, %m = fp8.quantize %a, %i1 : ({t(T, F)}, tensor<f32>) -> ({t(T, F, dt=E4)}, tensor<f32>)",
], [("%q", t(T, F, dt=E4)), ("%m", "tensor<f32>")])

q, k, pos = arg("q", t(B, S, Hq, Dh)), arg("k", t(B, S, Hkv, Dh)), arg("pos", t(B, S, dt="i32"))
rope_attrs = '{theta = 500000.0 : f64, scaling = "llama3", factor = 8.0 : f64, low_freq_factor = 1.0 : f64, high_freq_factor = 4.0 : f64, original_max_position = 8192 : i64'
# 6. RoPE on q and k (llama3 frequencies), and its inverse for the backward.
for name, inv in (("rope", ""), ("rope_bwd", ", inverse")):
    fused(name, "row", [(q, t(B, S, Hq, Dh)), (k, t(B, S, Hkv, Dh)), (pos, t(B, S, dt="i32"))], [
        f"%rq = graph.rope %i0, %i2 {rope_attrs}{inv}}} : ({t(B, S, Hq, Dh)}, {t(B, S, dt='i32')}) -> {t(B, S, Hq, Dh)}",
        f"%rk = graph.rope %i1, %i2 {rope_attrs}{inv}}} : ({t(B, S, Hkv, Dh)}, {t(B, S, dt='i32')}) -> {t(B, S, Hkv, Dh)}",
    ], [("%rq", t(B, S, Hq, Dh)), ("%rk", t(B, S, Hkv, Dh))])

if a.cast_tests:
    xf = arg("xf", t(T, D, dt="f32"))
    for name, src, srct, dst in (("quant_e4m3", xf, "f32", E4), ("quant_e5m2", x, "bf16", E5)):
        fused(name, "elementwise", [(src, t(T, D, dt=srct)), (s, t(dt="f32"))], [
            f"%q, %m = fp8.quantize %i0, %i1 : ({t(T, D, dt=srct)}, tensor<f32>) -> ({t(T, D, dt=dst)}, tensor<f32>)",
        ], [("%q", t(T, D, dt=dst)), ("%m", "tensor<f32>")])

# 7. Multi-tensor AdamW over the layer's parameters, writing next step's FP8
# weights and their amax for the matrices.
if a.small_params:
    params = [("wa", (256, D), True), ("wb", (100, 24), True), ("norm", (D,), False)]
else:
    params = [("wq", (Hq * Dh, D), True), ("wk", (Hkv * Dh, D), True), ("wv", (Hkv * Dh, D), True),
              ("wo", (D, Hq * Dh), True), ("w1", (F, D), True), ("w3", (F, D), True),
              ("w2", (D, F), True), ("attn_norm", (D,), False), ("mlp_norm", (D,), False)]
lr, step, gs = arg("lr", t(dt="f32")), arg("step", t(dt="i64")), arg("gscale", t(dt="f32"))
ins, body, res = [], [], []
for name, shape, fp8 in params:
    pt, gt = t(*shape, dt="f32"), t(*shape)
    base = len(ins)
    ins += [(arg(name, pt), pt), (arg(name + "_g", gt), gt), (arg(name + "_m", pt), pt), (arg(name + "_v", pt), pt)]
    if fp8:
        ins.append((arg(name + "_s", t(dt="f32")), t(dt="f32")))
    wd = "0.1" if fp8 else "0.0"
    body.append(f"%{name}_g32 = graph.cast %i{base + 1} : ({gt}) -> {pt}")
    body.append(f"%{name}_n:3 = graph.adamw_update %i{base}, %{name}_g32, %i{base + 2}, %i{base + 3}, %L, %T, %G "
                f"{{beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-8 : f64, weight_decay = {wd} : f64}} : "
                f"({pt}, {pt}, {pt}, {pt}, tensor<f32>, tensor<i64>, tensor<f32>) -> ({pt}, {pt}, {pt})")
    res += [(f"%{name}_n#0", pt), (f"%{name}_n#1", pt), (f"%{name}_n#2", pt)]
    if fp8:
        body.append(f"%{name}_q, %{name}_a = fp8.quantize %{name}_n#0, %i{base + 4} : ({pt}, tensor<f32>) -> ({t(*shape, dt=E4)}, tensor<f32>)")
        res += [(f"%{name}_q", t(*shape, dt=E4)), (f"%{name}_a", "tensor<f32>")]
n = len(ins)
ins += [(lr, t(dt="f32")), (step, t(dt="i64")), (gs, t(dt="f32"))]
body = [l.replace("%L", f"%i{n}").replace("%T", f"%i{n + 1}").replace("%G", f"%i{n + 2}") for l in body]
fused("adamw", "multi_tensor", ins, body, res)

print("// Generated by bench/gen_fused.py " + " ".join(
    f"--{k.replace('_', '-')} {v}" if not isinstance(v, bool) else (f"--{k.replace('_', '-')}" if v else "")
    for k, v in vars(a).items()).strip())
print("func.func @layer(" + ", ".join(f"%a_{n}: {ty}" for n, ty in args) + ") {")
print("\n".join(out))
print("  return")
print("}")
