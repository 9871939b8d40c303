#!/usr/bin/env python3
"""Does a GPU run follow the CPU interpreter's loss curve?

Reads the step lines of two runs of the same spec, data and seed (`octet
train SPEC --cpu` here, `octet-run BUNDLE --text CORPUS` on the GPU), averages
the loss over windows of --window steps and compares each window's mean. The
two runs agree step for step at first (`octet golden` checks 20 steps within
1e-3); over hundreds of steps rounding differences (GEMM summation order,
FP8 casts one unit apart) move them apart like two seeds would, so the bound
is on window means: --bound relative (default 2%, the delayed FP8 recipe's
bound against the wide baseline in bench/fp8_loss_parity.py).

  python3 bench/loss_curve.py CPU.log GPU.log --out bench/results/X.json

Steps are compared where both logs have a line (octet-run logs every
log_interval steps). Exits 1 when a window differs by more than the bound
or the runs end at different steps.
"""

import argparse
import json
import re
import sys

STEP = re.compile(r"^step\s+(\d+)/(\d+)\s+loss\s+([-+0-9.eE]+|nan|inf)")


def losses(path):
    out = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = STEP.match(line.strip())
            if m:
                out[int(m.group(1))] = float(m.group(3))
    if not out:
        sys.exit(f"{path}: no 'step N/M loss X' lines")
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("cpu_log")
    p.add_argument("gpu_log")
    p.add_argument("--window", type=int, default=100)
    p.add_argument("--bound", type=float, default=0.02)
    p.add_argument("--out")
    a = p.parse_args()
    cpu, gpu = losses(a.cpu_log), losses(a.gpu_log)
    # The runs may log at different intervals: compare the steps both have.
    steps = sorted(set(cpu) & set(gpu))
    if max(cpu) != max(gpu) or len(steps) < 10:
        sys.exit(f"the runs do not cover the same steps: {min(cpu)}-{max(cpu)} "
                 f"in {a.cpu_log}, {min(gpu)}-{max(gpu)} in {a.gpu_log}, "
                 f"{len(steps)} in common")
    windows = []
    for lo in range(0, steps[-1], a.window):
        chunk = [s for s in steps if lo < s <= lo + a.window]
        if not chunk:
            continue
        c = sum(cpu[s] for s in chunk) / len(chunk)
        g = sum(gpu[s] for s in chunk) / len(chunk)
        windows.append({"steps": [chunk[0], chunk[-1]], "cpu_mean": c,
                        "gpu_mean": g, "rel_diff": (g - c) / c})
    worst = max(windows, key=lambda w: abs(w["rel_diff"]))
    ok = abs(worst["rel_diff"]) <= a.bound
    print(f"{'steps':>11} {'cpu mean':>9} {'gpu mean':>9} {'rel diff':>9}")
    for w in windows:
        print(f"{w['steps'][0]:>5}-{w['steps'][1]:<5} {w['cpu_mean']:9.4f} "
              f"{w['gpu_mean']:9.4f} {w['rel_diff']:+9.4f}")
    print(f"first step: cpu {cpu[steps[0]]:.4f}, gpu {gpu[steps[0]]:.4f}; "
          f"last: cpu {cpu[steps[-1]]:.4f}, gpu {gpu[steps[-1]]:.4f}")
    print(f"worst window {worst['steps']}: {worst['rel_diff']:+.4f} "
          f"(bound {a.bound}): {'follows' if ok else 'DIVERGES'}")
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"cpu_log": a.cpu_log, "gpu_log": a.gpu_log,
                       "window": a.window, "bound": a.bound, "follows": ok,
                       "windows": windows,
                       "first": {"cpu": cpu[steps[0]], "gpu": gpu[steps[0]]},
                       "last": {"cpu": cpu[steps[-1]], "gpu": gpu[steps[-1]]}},
                      f, indent=2)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
