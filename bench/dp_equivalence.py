#!/usr/bin/env python3
"""Does a data-parallel run train as one GPU does at the same global batch?

Compares two runs of the same model, data and seed that each wrote a
checkpoint after step 1 (octet-run --steps 1 --checkpoint-dir DIR): the
step-1 loss and grad norm printed by each (their step lines), and every
tensor of the two checkpoints (parameters, AdamW moments, FP8 scale state).
The bounds are the golden check's (runtime/exec/Golden.h), for the numerics
named: the loss and grad norm by relative error; each tensor by the relative
L2 error of its values and of its norm, AdamW's second moments as their
square roots, the FP8 scale state (fp8.*) within one E5M2 unit (0.25).

  python3 bench/dp_equivalence.py --numerics fp8 \\
      --one one.log one-ckpt/step-1 --data2 dp2.log dp2-ckpt/step-1 \\
      --out result.json

Reads safetensors with torch (the GPU host has it). Exits 1 when anything is
outside its bound.
"""

import argparse
import glob
import json
import math
import mmap
import re
import struct
import sys

import torch

# runtime/exec/Golden.cpp tolerancesFor: loss, grad norm, tensor, tensor norm.
TOLERANCES = {
    "bf16": {"loss": 1e-3, "grad_norm": 5e-3, "tensor": 2e-2, "tensor_norm": 2e-2},
    "fp8": {"loss": 2e-3, "grad_norm": 2e-2, "tensor": 0.5, "tensor_norm": 5e-2},
}
FP8_STATE_TOLERANCE = 0.25

STEP = re.compile(r"step\s+1/\d+\s+loss\s+([-+0-9.eE]+|nan|inf)\s+grad_norm\s+([-+0-9.eE]+|nan|inf)")

DTYPES = {
    "F32": torch.float32, "F64": torch.float64, "BF16": torch.bfloat16,
    "F16": torch.float16, "I32": torch.int32, "I64": torch.int64,
    "U8": torch.uint8, "I8": torch.int8,
    "F8_E4M3": torch.float8_e4m3fn, "F8_E5M2": torch.float8_e5m2,
}


def read_safetensors(path):
    # Mapped, not read: an 8B-shaped checkpoint is tens of GB.
    with open(path, "rb") as f:
        blob = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        dtype = DTYPES[info["dtype"]]
        t = torch.frombuffer(blob, dtype=dtype, offset=base + start,
                             count=(end - start) // dtype.itemsize) \
            if end > start else torch.empty(0, dtype=dtype)
        out[name] = t.reshape(info["shape"]).to(torch.float32)
    return out


def read_checkpoint_part(step_dir, part):
    """`part`.safetensors, or its shards (part-0000N-of-0000M.safetensors)."""
    files = sorted(glob.glob(f"{step_dir}/{part}.safetensors")) or \
        sorted(glob.glob(f"{step_dir}/{part}-*-of-*.safetensors"))
    if not files:
        sys.exit(f"{step_dir}: no {part}.safetensors or shards of it")
    out = {}
    for f in files:
        out.update(read_safetensors(f))
    return out


def step_one(log):
    with open(log, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = STEP.search(line)
            if m:
                return float(m.group(1)), float(m.group(2))
    sys.exit(f"{log}: no 'step 1/N loss X grad_norm Y' line")


def rel(a, b):
    return abs(a - b) / max(abs(a), abs(b), 1e-30)


def compare_tensors(one, two, tol):
    rows, worst = [], None
    for name in sorted(one):
        if name not in two:
            rows.append({"tensor": name, "error": "missing in the data-parallel run"})
            continue
        a, b = one[name], two[name]
        if a.shape != b.shape:
            rows.append({"tensor": name, "error": f"shape {list(a.shape)} vs {list(b.shape)}"})
            continue
        if name.startswith("adam_v."):
            a, b = a.clamp(min=0).sqrt(), b.clamp(min=0).sqrt()
        bound = FP8_STATE_TOLERANCE if name.startswith("fp8.") else tol["tensor"]
        norm_bound = FP8_STATE_TOLERANCE if name.startswith("fp8.") else tol["tensor_norm"]
        na, nb = float(a.norm()), float(b.norm())
        scale = max(na, nb)
        err = float((a - b).norm()) / scale if scale > 0 else 0.0
        norm_err = abs(na - nb) / scale if scale > 0 else 0.0
        ok = err <= bound and norm_err <= norm_bound
        row = {"tensor": name, "rel_l2": err, "rel_norm": norm_err,
               "bound": bound, "norm_bound": norm_bound, "ok": ok}
        rows.append(row)
        ratio = max(err / bound, norm_err / norm_bound)
        if worst is None or ratio > worst[0]:
            worst = (ratio, name)
    for name in sorted(set(two) - set(one)):
        rows.append({"tensor": name, "error": "missing in the one-GPU run"})
    return rows, worst


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--numerics", choices=sorted(TOLERANCES), required=True)
    ap.add_argument("--one", nargs=2, metavar=("LOG", "STEP_DIR"), required=True)
    ap.add_argument("--data2", nargs=2, metavar=("LOG", "STEP_DIR"), required=True)
    ap.add_argument("--name", default="")
    ap.add_argument("--out")
    args = ap.parse_args()
    tol = TOLERANCES[args.numerics]
    loss1, norm1 = step_one(args.one[0])
    loss2, norm2 = step_one(args.data2[0])
    result = {
        "name": args.name, "numerics": args.numerics, "tolerances": tol,
        "command": " ".join(sys.argv),
        "step1": {"loss_one_gpu": loss1, "loss_data2": loss2,
                  "loss_rel": rel(loss1, loss2),
                  "grad_norm_one_gpu": norm1, "grad_norm_data2": norm2,
                  "grad_norm_rel": rel(norm1, norm2)},
    }
    ok = result["step1"]["loss_rel"] <= tol["loss"] and \
        result["step1"]["grad_norm_rel"] <= tol["grad_norm"]
    tensors = {}
    for file in ("model", "train_state"):
        a = read_checkpoint_part(args.one[1], file)
        b = read_checkpoint_part(args.data2[1], file)
        rows, worst = compare_tensors(a, b, tol)
        tensors[file] = {"count": len(rows), "worst": worst and {
            "tensor": worst[1], "fraction_of_bound": worst[0]},
            "failed": [r for r in rows if not r.get("ok", False)]}
        ok = ok and not tensors[file]["failed"]
    result["tensors"] = tensors
    result["passed"] = ok
    text = json.dumps(result, indent=1)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    s = result["step1"]
    print(f"{args.name or 'data 2 vs one GPU'} ({args.numerics}): step-1 loss "
          f"{s['loss_one_gpu']:.6f} vs {s['loss_data2']:.6f} (rel {s['loss_rel']:.2e}, "
          f"bound {tol['loss']}), grad norm {s['grad_norm_one_gpu']:.6f} vs "
          f"{s['grad_norm_data2']:.6f} (rel {s['grad_norm_rel']:.2e}, bound "
          f"{tol['grad_norm']})")
    for file, t in tensors.items():
        w = t["worst"]
        print(f"  {file}: {t['count']} tensors, {len(t['failed'])} outside their "
              f"bounds; worst {w['tensor']} at {w['fraction_of_bound']:.3f} of its bound"
              if w else f"  {file}: no tensors")
        for r in t["failed"][:5]:
            print(f"    {r}")
    print("PASSED" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
