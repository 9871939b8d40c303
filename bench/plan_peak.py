#!/usr/bin/env python3
"""What a bundle's activation region holds at a program's busiest step.

Reads `octet inspect --all-slots BUNDLE` (each slot's bytes, dtype, shape
and live steps per program), finds the step of PROGRAM where the region's
live bytes peak, and prints the slots live there, grouped by name with the
layer index taken out, largest first. The peak equals the plan's
`peak live` for that program (step-local gradients included); the groups
are what docs/DESIGN.md's memory table names.

    octet compile bench/specs/llama3-8b-8l-fp8.pbtxt -o B.octet
    octet inspect --all-slots B.octet > B.slots
    bench/plan_peak.py B.slots [--program train_microbatch]
"""
import argparse
import collections
import re
import sys

BYTES = {"f64": 8, "i64": 8, "f32": 4, "i32": 4, "bf16": 2, "f16": 2,
         "e4m3": 1, "e5m2": 1, "u8": 1, "i8": 1}
SLOT = re.compile(r"\s+(.*?)\s+(\d+)\s+[\d.]+ \S+\s+(\S+)\s+(\S+)\s+"
                  r"\[([\d, ]*)\]\s*(.*)$")
SPAN = re.compile(r"(\w+)\[(\d+), (\d+|end)\]")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("slots", help="`octet inspect --all-slots` output")
    p.add_argument("--program", default="train_microbatch")
    args = p.parse_args()
    live = []
    with open(args.slots) as f:
        for line in f:
            m = SLOT.match(line)
            if not m:
                continue
            name, _, kind, dtype, shape, spans = m.groups()
            if dtype not in BYTES:
                sys.exit(f"plan_peak: unknown dtype '{dtype}' of slot '{name}'")
            n = BYTES[dtype]
            for d in shape.split(","):
                if d.strip():
                    n *= int(d)
            for s in SPAN.finditer(spans):
                if s.group(1) == args.program:
                    end = sys.maxsize if s.group(3) == "end" else int(s.group(3))
                    live.append((name, int(s.group(2)), end, n, dtype, shape))
    if not live:
        sys.exit(f"plan_peak: no slot is live in '{args.program}'")
    delta = collections.Counter()
    for _, first, last, n, _, _ in live:
        delta[first] += n
        delta[last + 1] -= n
    now = peak = at = 0
    for step in sorted(delta):
        now += delta[step]
        if now > peak:
            peak, at = now, step
    print(f"{args.program}: peak live {peak / 2**30:.2f} GiB at step {at}")
    groups = collections.defaultdict(lambda: [0, 0])
    for name, first, last, n, dtype, shape in live:
        if first <= at <= last:
            key = re.sub(r"layers\.\d+\.", "layers.N.", name)
            key = re.sub(rf"^{args.program}:", "", key)
            groups[(key, dtype, shape)][0] += n
            groups[(key, dtype, shape)][1] += 1
    for (key, dtype, shape), (n, count) in sorted(
            groups.items(), key=lambda kv: -kv[1][0]):
        print(f"{n / 2**30:8.3f} GiB  {count:3d} x  {key}  {dtype} [{shape}]")


if __name__ == "__main__":
    main()
