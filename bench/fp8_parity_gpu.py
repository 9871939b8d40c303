#!/usr/bin/env python3
"""FP8 loss parity at GPU scale: bench/fp8_parity_gpu.pbtxt (four layers of
Llama 3 8B on the English documentation corpus) trained 1000 steps with the
bf16 recipe and each FP8 recipe (delayed, current, blockwise), from the same
initial weights and batches (one seed; only the precision block differs, as
in the CPU parity bench, bench/fp8_loss_parity.py, whose recipes these are).

Two halves, because the GPU host has CUDA but no MLIR:

  compile   (here)  writes one spec per recipe and its bundle, and copies
                    octet-run and the token datasets beside them, into a
                    folder to carry to the GPU host (checked against the
                    carry budget):
      bench/fp8_parity_gpu.py compile [--octet build/tools/octet/octet]
          [--octet-run build/tools/octet-run/octet-run]
          [--data data/en-docs] [--out carry/fp8-parity]
  report    (there, after bench/fp8_parity_gpu.sh has run the four)
                    reads the runs' logs and writes the JSON and the PNG:
      bench/fp8_parity_gpu.py report LOG_DIR --json OUT.json --png OUT.png
          [--sources data/en-docs/sources.json]
  plot      draws the PNG again from the JSON (matplotlib):
      bench/fp8_parity_gpu.py plot OUT.json OUT.png

Final loss: the mean training loss of the last 100 steps; bound: each FP8
recipe within 1% of bf16's. No NaN: octet-run stops with an error at a
non-finite loss or gradient norm, so a run that logs all its steps with
finite values and exits 0 had none. The held-out loss is octet-run's EVAL
program over the same held-out batches every eval_interval steps.
"""

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from fp8_loss_parity import (  # noqa: E402
    RECIPES, compare_with_bf16, spec_with_precision)

SPEC = "bench/fp8_parity_gpu.pbtxt"
TAIL = 100
BOUND = 0.01
# What travels to the GPU host besides the repository (~6 MiB): the device
# tool takes 64 MiB in all.
CARRY_BUDGET = 56 << 20
STEP = re.compile(r"^step\s+(\d+)/(\d+)\s+loss\s+(\S+)\s+grad_norm\s+(\S+)"
                  r".*?tokens/s\s+(\S+)")
EVAL = re.compile(r"^eval at step (\d+): loss (\S+) over (\d+) held-out")


def compile_bundles(a):
    with open(os.path.join(ROOT, SPEC)) as f:
        spec_text = f.read()
    os.makedirs(os.path.join(a.out, "data"), exist_ok=True)
    for recipe in RECIPES:
        spec = os.path.join(a.out, f"{recipe}.pbtxt")
        with open(spec, "w") as f:
            f.write(spec_with_precision(spec_text, RECIPES[recipe]))
        bundle = os.path.join(a.out, f"{recipe}.octet")
        print(f"== {recipe}: {bundle}", flush=True)
        subprocess.run([a.octet, "compile", spec, "-o", bundle], check=True,
                       cwd=ROOT)
    shutil.copy2(a.octet_run, os.path.join(a.out, "octet-run"))
    for split in ("train", "heldout"):
        for ext in (".bin", ".idx"):
            src = os.path.join(a.data, split + ext)
            if not os.path.exists(src):
                sys.exit(f"fp8_parity_gpu: {src} is missing: run "
                         f"scripts/make-en-data.sh")
            shutil.copy2(src, os.path.join(a.out, "data", split + ext))
    shutil.copy2(os.path.join(a.data, "sources.json"),
                 os.path.join(a.out, "data", "sources.json"))
    total = 0
    for base, _, files in os.walk(a.out):
        for name in files:
            total += os.path.getsize(os.path.join(base, name))
    print(f"fp8_parity_gpu: {a.out}: {total / 2**20:.1f} MiB to carry")
    if total > CARRY_BUDGET:
        sys.exit(f"fp8_parity_gpu: {a.out} is {total / 2**20:.1f} MiB, over "
                 f"the {CARRY_BUDGET >> 20} MiB left for it in a device call")


def read_log(path):
    steps, evals, stopped, gpu, rc = [], [], None, None, None
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.strip()
            m = STEP.match(line)
            if m:
                steps.append({"step": int(m.group(1)), "of": int(m.group(2)),
                              "loss": float(m.group(3)),
                              "grad_norm": float(m.group(4)),
                              "tokens_per_s": float(m.group(5))})
            m = EVAL.match(line)
            if m:
                evals.append({"step": int(m.group(1)),
                              "loss": float(m.group(2)),
                              "batches": int(m.group(3))})
            if "stopped:" in line or "error:" in line:
                stopped = line
            if line.startswith("gpu: "):
                gpu = line[5:]
            if line.startswith("exit: "):
                rc = int(line[6:])
    return steps, evals, stopped, gpu, rc


def median(values):
    values = sorted(values)
    return values[len(values) // 2] if values else None


def report(a):
    results, curves, gpus = [], {}, set()
    for recipe in RECIPES:
        log = os.path.join(a.log_dir, f"{recipe}.log")
        if not os.path.exists(log):
            sys.exit(f"fp8_parity_gpu: {log} is missing")
        steps, evals, stopped, gpu, rc = read_log(log)
        if gpu:
            gpus.add(gpu)
        total = steps[-1]["of"] if steps else 0
        logged = [s["step"] for s in steps]
        complete = rc == 0 and total > 0 and logged == list(range(1, total + 1))
        finite = all(math.isfinite(s["loss"]) and math.isfinite(s["grad_norm"])
                     for s in steps) and all(math.isfinite(e["loss"])
                                             for e in evals)
        losses = [s["loss"] for s in steps]
        r = {
            "recipe": recipe,
            "precision": RECIPES[recipe],
            "gpu": gpu,
            "exit_status": rc,
            "steps_run": len(steps),
            "complete": complete,
            "nan": not finite or stopped is not None,
            "first_loss": losses[0] if losses else None,
            "last_step_loss": losses[-1] if losses else None,
            "final_loss": (round(sum(losses[-TAIL:]) / TAIL, 5)
                           if complete and len(losses) >= TAIL else None),
            "heldout": evals,
            "final_heldout_loss": evals[-1]["loss"] if evals else None,
            # Graph replay only: step 1 runs eagerly before capture.
            "tokens_per_s_median": median([s["tokens_per_s"]
                                           for s in steps[1:]]),
        }
        if stopped:
            r["error"] = stopped
        results.append(r)
        curves[recipe] = {"loss": losses,
                          "grad_norm": [s["grad_norm"] for s in steps]}

    all_ok = compare_with_bf16(results, {r: BOUND for r in RECIPES})
    base = results[0]
    for r in results[1:]:
        if base["final_heldout_loss"] and r["final_heldout_loss"]:
            r["heldout_relative_to_bf16"] = round(
                (r["final_heldout_loss"] - base["final_heldout_loss"])
                / base["final_heldout_loss"], 5)

    data = None
    if a.sources and os.path.exists(a.sources):
        with open(a.sources) as f:
            data = json.load(f)
    out = {
        "benchmark": "fp8_parity_gpu",
        "command": "bash bench/fp8_parity_gpu.sh CARRY_DIR OUT_DIR "
                   "(bundles from bench/fp8_parity_gpu.py compile)",
        "spec": SPEC,
        "gpus": sorted(gpus),
        "final_loss_definition": f"mean training loss of the last {TAIL} "
                                 "steps (same batches for every recipe)",
        "bound": BOUND,
        "data": data,
        "results": results,
        "all_within_bounds": all_ok,
        "curves": curves,
    }
    os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
    with open(a.json, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")

    print(f"{'recipe':10s} {'steps':>5s} {'final loss':>10s} {'vs bf16':>8s} "
          f"{'held-out':>8s} {'vs bf16':>8s} {'tok/s':>7s}  nan  ok")
    for r in results:
        rel = r.get("relative_to_bf16")
        hrel = r.get("heldout_relative_to_bf16")
        fl = r["final_loss"]
        hl = r["final_heldout_loss"]
        tps = r["tokens_per_s_median"]
        print(f"{r['recipe']:10s} {r['steps_run']:>5d} "
              f"{'-' if fl is None else f'{fl:.4f}':>10s} "
              f"{'' if rel is None else f'{100 * rel:+.2f}%':>8s} "
              f"{'-' if hl is None else f'{hl:.4f}':>8s} "
              f"{'' if hrel is None else f'{100 * hrel:+.2f}%':>8s} "
              f"{'-' if tps is None else f'{tps:.0f}':>7s}  "
              f"{'yes' if r['nan'] else 'no':3s}  "
              f"{'' if r['recipe'] == 'bf16' else r['within_bound']}")
        if "error" in r:
            print(f"  {r['recipe']}: {r['error']}")
    print(f"wrote {a.json}")
    if a.png:
        plot(a.json, a.png)
    return 0 if all_ok else 1


def moving_average(values, window):
    out, acc = [], 0.0
    for i, v in enumerate(values):
        acc += v
        if i >= window:
            acc -= values[i - window]
        out.append(acc / min(i + 1, window))
    return out


def plot(json_path, png_path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("fp8_parity_gpu: matplotlib is missing: draw the PNG where it "
              f"is, with `bench/fp8_parity_gpu.py plot {json_path} PNG`")
        return
    with open(json_path) as f:
        report_data = json.load(f)
    curves = report_data["curves"]
    results = {r["recipe"]: r for r in report_data["results"]}
    fig, (ax_loss, ax_rel, ax_eval) = plt.subplots(1, 3, figsize=(17, 4.8))
    window = 20
    base = moving_average(curves["bf16"]["loss"], window)
    for recipe, curve in curves.items():
        smooth = moving_average(curve["loss"], window)
        steps = range(1, len(smooth) + 1)
        fl = results[recipe]["final_loss"]
        label = recipe + ("" if fl is None else f" (final {fl:.3f})")
        ax_loss.plot(steps, smooth, label=label, linewidth=1.2)
        if recipe != "bf16":
            n = min(len(smooth), len(base))
            ax_rel.plot(range(1, n + 1),
                        [100 * (smooth[i] - base[i]) / base[i]
                         for i in range(n)], label=recipe, linewidth=1.0)
        held = results[recipe]["heldout"]
        if held:
            ax_eval.plot([e["step"] for e in held], [e["loss"] for e in held],
                         marker="o", markersize=3, label=recipe)
    ax_loss.set(title=f"training loss ({window}-step mean)", xlabel="step",
                ylabel="loss", yscale="log")
    ax_rel.axhspan(-100 * BOUND, 100 * BOUND, color="0.9")
    ax_rel.axhline(0, color="0.5", linewidth=0.8)
    ax_rel.set(title=f"vs bf16 ({window}-step means; bound ±{100 * BOUND:.0f}%"
                     " on the last 100)", xlabel="step", ylabel="%")
    ax_rel.set_ylim(-5, 5)
    ax_eval.set(title="held-out loss", xlabel="step", ylabel="loss")
    for ax in (ax_loss, ax_rel, ax_eval):
        ax.grid(alpha=0.3)
        ax.legend()
    gpus = ", ".join(report_data.get("gpus") or [])
    fig.suptitle("FP8 recipes against bf16: 4 layers of Llama 3 8B, "
                 f"English docs corpus, 32k BPE ({gpus})")
    fig.tight_layout()
    fig.savefig(png_path, dpi=110)
    print(f"wrote {png_path}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("compile")
    c.add_argument("--octet", default="build/tools/octet/octet")
    c.add_argument("--octet-run", default="build/tools/octet-run/octet-run")
    c.add_argument("--data", default="data/en-docs")
    c.add_argument("--out", default="carry/fp8-parity")
    r = sub.add_parser("report")
    r.add_argument("log_dir")
    r.add_argument("--json", required=True)
    r.add_argument("--png")
    r.add_argument("--sources")
    g = sub.add_parser("plot")
    g.add_argument("json")
    g.add_argument("png")
    a = p.parse_args()
    if a.command == "compile":
        compile_bundles(a)
    elif a.command == "report":
        return report(a)
    else:
        plot(a.json, a.png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
