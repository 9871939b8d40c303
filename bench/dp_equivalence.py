#!/usr/bin/env python3
"""Does a data-parallel run train as one GPU does at the same global batch?

Compares two runs of the same model, data and seed that each wrote a
checkpoint after step 1 (octet-run --steps 1 --checkpoint-dir DIR): the
step-1 loss and grad norm printed by each (their step lines), and every
tensor of the two checkpoints (parameters, AdamW moments, FP8 scale state).
The bounds are the golden check's, read from their one definition
(golden::tolerancesFor in runtime/exec/Golden.cpp, kFp8StateTolerance in
Golden.h), for the numerics named: the loss and grad norm by relative
error; each tensor by the relative L2 error of all its values and of its
norm, AdamW's second moments as their square roots, the FP8 scale state
(fp8.*) within one E5M2 unit. A checkpoint of ZeRO-1 ranks holds the
moments whole (rank 0 joins the ranks' parts), so it compares as well.

  python3 bench/dp_equivalence.py --numerics fp8 \\
      --one one.log one-ckpt/step-1 --data2 dp2.log dp2-ckpt/step-1 \\
      --out result.json

Reads safetensors with numpy (F32, BF16, F8_E4M3, F8_E5M2, integers).
Exits 1 when anything is outside its bound. tests/lit/train/dp-equivalence.test
runs it on CPU checkpoints of tiny-llama.
"""

import argparse
import glob
import json
import mmap
import os
import re
import struct
import sys

import numpy as np

GOLDEN_CPP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                          "runtime", "exec", "Golden.cpp")
GOLDEN_H = os.path.join(os.path.dirname(GOLDEN_CPP), "Golden.h")

STEP = re.compile(r"step\s+1/\d+\s+loss\s+([-+0-9.eE]+|nan|inf)\s+grad_norm\s+([-+0-9.eE]+|nan|inf)")


def golden_tolerances(cpp=GOLDEN_CPP, header=GOLDEN_H):
    """The bounds of golden::tolerancesFor and kFp8StateTolerance, read from
    their one definition so that this check and octet-run --golden cannot
    drift apart: {"fp8": {...}, "bf16": {...}}, and the FP8 state bound."""
    try:
        text = open(cpp, encoding="utf-8").read()
        head = open(header, encoding="utf-8").read()
    except OSError as e:
        sys.exit(f"dp_equivalence.py: the golden tolerances are read from "
                 f"runtime/exec/Golden.cpp and Golden.h beside bench/: {e}")
    body = re.search(r"Tolerances tolerancesFor\(.*?\n}\n", text, re.S)
    rows = body and re.findall(r"return \{([^}]*)\}", body.group(0))
    state = re.search(r"kFp8StateTolerance\s*=\s*([0-9.eE+-]+)", head)
    if not rows or len(rows) != 2 or not state:
        sys.exit(f"dp_equivalence.py: {cpp}: no tolerancesFor with an fp8 "
                 "and a default return, or no kFp8StateTolerance in "
                 f"{header}: update golden_tolerances() to their new form")
    tables = []
    for row in rows:
        fields = dict(re.findall(r"/\*(\w+)=\*/\s*([0-9.eE+-]+)", row))
        try:
            tables.append({"loss": float(fields["loss"]),
                           "grad_norm": float(fields["gradNorm"]),
                           "tensor": float(fields["tensor"]),
                           "tensor_norm": float(fields["tensorNorm"])})
        except KeyError as e:
            sys.exit(f"dp_equivalence.py: {cpp}: tolerancesFor names no {e}")
    # tolerancesFor returns the FP8 bounds under `numerics == "fp8"`, the
    # BF16 ones otherwise.
    return {"fp8": tables[0], "bf16": tables[1]}, float(state.group(1))


def fp8_table(exponent_bits, mantissa_bits, finite_only):
    """The 256 values of an FP8 format (E4M3FN when finite_only: no
    infinities, only S.1111.111 is NaN; E5M2 IEEE-like)."""
    bias = (1 << (exponent_bits - 1)) - 1
    top = (1 << exponent_bits) - 1
    out = np.empty(256, dtype=np.float32)
    for byte in range(256):
        sign = -1.0 if byte & 0x80 else 1.0
        e = (byte >> mantissa_bits) & top
        m = byte & ((1 << mantissa_bits) - 1)
        if finite_only and e == top and m == (1 << mantissa_bits) - 1:
            v = float("nan")
        elif not finite_only and e == top:
            v = float("inf") if m == 0 else float("nan")
        elif e == 0:
            v = m / (1 << mantissa_bits) * 2.0 ** (1 - bias)
        else:
            v = (1 + m / (1 << mantissa_bits)) * 2.0 ** (e - bias)
        out[byte] = sign * v
    return out


E4M3 = fp8_table(4, 3, True)
E5M2 = fp8_table(5, 2, False)
PLAIN = {"F32": np.float32, "F64": np.float64, "F16": np.float16,
         "I32": np.int32, "I64": np.int64, "U8": np.uint8, "I8": np.int8}


def decode(raw, dtype):
    """float32 values of a safetensors tensor's bytes (float64 for F64)."""
    if dtype == "BF16":
        return (np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
    if dtype == "F8_E4M3":
        return E4M3[np.frombuffer(raw, dtype=np.uint8)]
    if dtype == "F8_E5M2":
        return E5M2[np.frombuffer(raw, dtype=np.uint8)]
    if dtype not in PLAIN:
        raise ValueError(f"dtype {dtype} is not read by dp_equivalence.py")
    return np.frombuffer(raw, dtype=PLAIN[dtype]).astype(
        np.float64 if dtype in ("F64", "I64") else np.float32)


def read_safetensors(path):
    # Mapped, not read: an 8B-shaped checkpoint is tens of GB.
    with open(path, "rb") as f:
        blob = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        raw = memoryview(blob)[base + start:base + end]
        out[name] = (info["dtype"], info["shape"], raw)
    return out


def read_checkpoint_part(step_dir, part):
    """`part`.safetensors, or its shards (part-0000N-of-0000M.safetensors):
    name -> (dtype, shape, bytes), decoded when compared."""
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


def l2(x, chunk=1 << 24):
    # In float64 (a sum over hundreds of millions of squares), a chunk at a
    # time (an 8B-shaped embedding is half a billion elements).
    total = 0.0
    for i in range(0, x.size, chunk):
        c = x[i:i + chunk].astype(np.float64)
        total += float(np.dot(c, c))
    return total ** 0.5


def compare_tensors(one, two, tol, state_bound):
    """Every tensor of `one` against `two`'s of the same name, as the golden
    check compares a slot: relative L2 error of the values and of the
    norms, AdamW's second moments as their square roots, the FP8 scale state
    (fp8.*) within state_bound. Rows and the worst (fraction of its bound,
    name)."""
    rows, worst = [], None
    for name in sorted(one):
        if name not in two:
            rows.append(one_layout_only(name, one, "data-parallel"))
            continue
        (da, sa, ra), (db, sb, rb) = one[name], two[name]
        if sa != sb:
            rows.append({"tensor": name, "error": f"shape {sa} vs {sb}"})
            continue
        a, b = decode(ra, da), decode(rb, db)
        if name.startswith("adam_v."):
            a, b = np.sqrt(np.maximum(a, 0)), np.sqrt(np.maximum(b, 0))
        state = name.startswith("fp8.")
        bound = state_bound if state else tol["tensor"]
        norm_bound = state_bound if state else tol["tensor_norm"]
        na, nb = l2(a), l2(b)
        scale = max(na, nb)
        err = l2(a - b) / scale if scale > 0 else 0.0
        norm_err = abs(na - nb) / scale if scale > 0 else 0.0
        # NaN compares false: a NaN anywhere fails the tensor.
        ok = err <= bound and norm_err <= norm_bound
        row = {"tensor": name, "dtype": [da, db], "rel_l2": err,
               "rel_norm": norm_err, "bound": bound, "norm_bound": norm_bound,
               "ok": ok}
        rows.append(row)
        ratio = max(err / bound, norm_err / norm_bound)
        if worst is None or not ratio <= worst[0]:
            worst = (ratio, name)
    for name in sorted(set(two) - set(one)):
        rows.append(one_layout_only(name, two, "one-GPU"))
    return rows, worst


def one_layout_only(name, saved, missing_in):
    """A tensor only one of the runs saved (`saved`, that run's tensors). An
    FP8 weight copy (fp8w.<param>, saved beside its amax or scale: the cast
    of a master weight that the runs compare) is kept between steps by
    layouts that cast in the optimizer (ZeRO-1) and made in the step by the
    others (train.codegen.fp8_weight_cast): not a difference. Anything else
    is."""
    copy = name.startswith("fp8w.") and any(
        name + suffix in saved for suffix in (".amax", ".scale"))
    if copy:
        return {"tensor": name, "ok": True,
                "note": f"an FP8 weight copy the {missing_in} run's layout does "
                        "not keep (train.codegen.fp8_weight_cast)"}
    return {"tensor": name, "error": f"missing in the {missing_in} run"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--numerics", choices=("bf16", "fp8"), required=True)
    ap.add_argument("--one", nargs=2, metavar=("LOG", "STEP_DIR"), required=True)
    ap.add_argument("--data2", nargs=2, metavar=("LOG", "STEP_DIR"), required=True)
    ap.add_argument("--name", default="")
    ap.add_argument("--out")
    args = ap.parse_args()
    tables, state_bound = golden_tolerances()
    tol = tables[args.numerics]
    loss1, norm1 = step_one(args.one[0])
    loss2, norm2 = step_one(args.data2[0])
    result = {
        "name": args.name, "numerics": args.numerics, "tolerances": tol,
        "fp8_state_tolerance": state_bound,
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
        rows, worst = compare_tensors(a, b, tol, state_bound)
        tensors[file] = {"count": len(rows), "worst": worst and {
            "tensor": worst[1], "fraction_of_bound": worst[0]},
            "failed": [r for r in rows if not r.get("ok", False)],
            "one_layout_only": [r for r in rows if "note" in r]}
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
        if t["one_layout_only"]:
            print(f"    {len(t['one_layout_only'])} FP8 weight copies kept by one "
                  "layout only, not compared (their master weights are)")
    print("PASSED" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
