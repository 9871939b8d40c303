#!/usr/bin/env python3
"""FP8 loss parity on the CPU: the same tiny model, data and seed trained with
the bf16 recipe and with each FP8 recipe (delayed, current, blockwise) through
`octet train` (the reference interpreter, exact E4M3/E5M2 rounding). Writes
bench/results/fp8_loss_parity.json with the table and the command that made
it, and exits non-zero when a recipe misses its bound or produces NaN.

Bounds (issue 4): the FP8 final loss is within 2% of bf16's for delayed and
current scaling, within 3% for blockwise. "Final loss" is the mean training
loss over the last 20 steps: every recipe sees the same batches, so the mean
only smooths the batch-to-batch noise of a single step (the last step's loss
is reported too).

usage: bench/fp8_loss_parity.py [--octet build/tools/octet/octet]
           [--spec bench/fp8_parity.pbtxt] [--steps 300] [--data FILE]
"""

import argparse
import json
import math
import os
import platform
import re
import shlex
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

RECIPES = {
    "bf16": 'precision { recipe: "bf16" }',
    "delayed": 'precision { recipe: "delayed" format: "hybrid" '
               'amax_history_len: 16 amax_algorithm: "max" margin: 0 }',
    "current": 'precision { recipe: "current" format: "hybrid" }',
    # Blockwise as DeepSeek-V3 trains: E4M3 for gradients too, the block
    # scales carrying the range.
    "blockwise": 'precision { recipe: "blockwise" format: "e4m3" }',
}
BOUNDS = {"delayed": 0.02, "current": 0.02, "blockwise": 0.03}
TAIL = 20
STEP_LINE = re.compile(r"^step\s+(\d+)/(\d+)\s+loss\s+(\S+)")


def spec_with_precision(text, block):
    start = text.index("  precision {")
    depth, end = 0, start
    while True:
        ch = text[end]
        depth += ch == "{"
        depth -= ch == "}"
        end += 1
        if ch == "}" and depth == 0:
            break
    return text[:start] + "  " + block + text[end:]


def train(octet, spec_text, recipe, steps, data):
    with tempfile.NamedTemporaryFile("w", suffix=f"-{recipe}.pbtxt",
                                     delete=False) as f:
        f.write(spec_with_precision(spec_text, RECIPES[recipe]))
        path = f.name
    cmd = [octet, "train", path, "--steps", str(steps)]
    if data:
        cmd += ["--text", data]
    start = time.time()
    try:
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    finally:
        os.unlink(path)
    seconds = time.time() - start
    losses = []
    for line in proc.stdout.splitlines():
        m = STEP_LINE.match(line)
        if m:
            losses.append(float(m.group(3)))
    finite = all(math.isfinite(x) for x in losses)
    ok_run = proc.returncode == 0 and len(losses) == steps and finite
    result = {
        "recipe": recipe,
        "precision": RECIPES[recipe],
        "steps_run": len(losses),
        "nan": not finite or proc.returncode != 0,
        "seconds": round(seconds, 1),
        "first_loss": losses[0] if losses else None,
        "last_step_loss": losses[-1] if losses else None,
        "final_loss": (sum(losses[-TAIL:]) / len(losses[-TAIL:])
                       if ok_run else None),
    }
    if not ok_run:
        result["error"] = (proc.stderr.strip().splitlines() or ["?"])[-1]
    print(f"{recipe:10s} {result['steps_run']} steps in {seconds:.0f} s, "
          f"final loss {result['final_loss']}", file=sys.stderr, flush=True)
    return result


def compare_with_bf16(results, bounds):
    """Gives each FP8 recipe of `results` (bf16 first) its final loss
    relative to bf16's and whether that is within bounds[recipe] without a
    NaN; True when every one is."""
    base = results[0]["final_loss"]
    all_ok = base is not None and not results[0]["nan"]
    for r in results[1:]:
        r["bound"] = bounds[r["recipe"]]
        if base is None or r["final_loss"] is None:
            r["relative_to_bf16"] = None
            r["within_bound"] = False
        else:
            rel = (r["final_loss"] - base) / base
            r["relative_to_bf16"] = round(rel, 5)
            r["within_bound"] = abs(rel) <= r["bound"] and not r["nan"]
        all_ok = all_ok and r["within_bound"]
    return all_ok


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--octet", default="build/tools/octet/octet")
    parser.add_argument("--spec", default="bench/fp8_parity.pbtxt")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--data", default="")
    parser.add_argument("--output",
                        default="bench/results/fp8_loss_parity.json")
    args = parser.parse_args()

    with open(os.path.join(ROOT, args.spec)) as f:
        spec_text = f.read()
    results = [train(args.octet, spec_text, r, args.steps, args.data)
               for r in RECIPES]
    all_ok = compare_with_bf16(results, BOUNDS)

    report = {
        "benchmark": "fp8_loss_parity",
        "command": " ".join(shlex.quote(a) for a in [
            "bench/fp8_loss_parity.py", "--octet", args.octet, "--spec",
            args.spec, "--steps", str(args.steps)] +
            (["--data", args.data] if args.data else [])),
        "spec": args.spec,
        "steps": args.steps,
        "final_loss_definition": f"mean training loss of the last {TAIL} "
                                 "steps (same batches for every recipe)",
        "baseline": "bf16 recipe: no FP8; the CPU interpreter computes this "
                    "model in float32",
        "machine": f"{platform.machine()} {platform.system()}, "
                   f"{os.cpu_count()} CPUs, CPU reference interpreter",
        "results": results,
        "all_within_bounds": all_ok,
    }
    out = os.path.join(ROOT, args.output)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(report, f, indent=2)
        f.write("\n")

    print(f"{'recipe':10s} {'final loss':>10s} {'vs bf16':>9s} "
          f"{'bound':>6s}  ok")
    for r in results:
        rel = r.get("relative_to_bf16")
        loss = "NaN" if r["final_loss"] is None else f"{r['final_loss']:.4f}"
        rel_text = "" if rel is None else f"{100 * rel:+.2f}%"
        bound = r.get("bound")
        bound_text = "" if bound is None else f"{100 * bound:.0f}%"
        ok = "" if r["recipe"] == "bf16" else str(r["within_bound"])
        print(f"{r['recipe']:10s} {loss:>10s} {rel_text:>9s} "
              f"{bound_text:>6s}  {ok}")
    print(f"wrote {args.output}")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
