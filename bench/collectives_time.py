#!/usr/bin/env python3
"""A data-parallel bundle's collectives timed alone, under torchrun.

Reads `octet inspect --collectives BUNDLE` (one line per NCCL call: op,
reduction, dtype, count, stream, program) and issues rank 0's calls of each
program, in their order, with torch.distributed's NCCL on the same GPUs and
nothing else running: every call of @train_microbatch (those of the last
microbatch, the step's), then every call of @optimizer_step. Their time
alone, beside a step's, says how much of the communication the step hid
behind compute:
    exposed = step(data 2) - step(one GPU)   (what data 2 added to a step)
    hidden  = 1 - max(0, exposed) / alone
which charges to communication whatever else data 2 adds (waiting for the
slower rank, NCCL's SMs and memory traffic slowing the kernels beside it).

    octet inspect --collectives B.octet > B.collectives
    torchrun --nproc-per-node 2 bench/collectives_time.py B.collectives --out F.json
"""
import argparse
import csv
import json
import os
import sys
import time

DTYPES = {"f32": "float32", "bf16": "bfloat16", "f16": "float16",
          "f64": "float64", "i32": "int32", "i64": "int64", "u8": "uint8",
          "e4m3": "uint8", "e5m2": "uint8"}


def read_calls(path, rank=0):
    """Rank `rank`'s calls: a list of dicts, in issue order."""
    with open(path, encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    want = {"rank", "program", "op", "reduce", "dtype", "group_size",
            "stream", "last_microbatch", "tensors", "count"}
    if not rows or not want <= set(rows[0]):
        sys.exit(f"{path}: not `octet inspect --collectives` output (columns "
                 f"{sorted(want)})")
    calls = []
    for r in rows:
        if int(r["rank"]) != rank:
            continue
        if r["dtype"] not in DTYPES:
            sys.exit(f"{path}: dtype {r['dtype']} is not one collectives_time.py issues")
        calls.append({"program": r["program"], "op": r["op"],
                      "reduce": r["reduce"], "dtype": r["dtype"],
                      "group_size": int(r["group_size"]),
                      "stream": int(r["stream"]),
                      "count": int(r["count"]), "tensors": int(r["tensors"])})
    return calls


def bus_bytes(call, world):
    """Bytes each rank moves over the links, NCCL's bus bandwidth
    convention: all_reduce 2(n-1)/n of the buffer, reduce_scatter and
    all_gather (n-1)/n of the whole buffer."""
    size = {"float32": 4, "bfloat16": 2, "float16": 2, "float64": 8,
            "int32": 4, "int64": 8, "uint8": 1}[DTYPES[call["dtype"]]]
    n = world
    if call["op"] == "all_reduce":
        return 2 * (n - 1) / n * call["count"] * size
    return (n - 1) * call["count"] * size


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("collectives", help="`octet inspect --collectives` output")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    calls = read_calls(a.collectives)
    if os.environ.get("NCCL_NVLS_ENABLE", "0") != "0":
        raise SystemExit("NCCL_NVLS_ENABLE must stay 0 on this host")
    os.environ["NCCL_NVLS_ENABLE"] = "0"
    import torch
    import torch.distributed as dist
    rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl")
    world = dist.get_world_size()
    if any(c["group_size"] != world for c in calls):
        sys.exit(f"{a.collectives}: a group of another size than the "
                 f"{world} ranks started")
    ops = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX}

    def prepare(c):
        dt = getattr(torch, DTYPES[c["dtype"]])
        n = c["count"]
        if c["op"] == "all_reduce":
            buf = torch.ones(n, dtype=dt, device="cuda")
            return lambda: dist.all_reduce(buf, op=ops[c["reduce"]])
        if c["op"] == "reduce_scatter":
            src = torch.ones(n * world, dtype=dt, device="cuda")
            dst = torch.empty(n, dtype=dt, device="cuda")
            return lambda: dist.reduce_scatter_tensor(dst, src, op=ops[c["reduce"]])
        if c["op"] == "all_gather":
            src = torch.ones(n, dtype=dt, device="cuda")
            dst = torch.empty(n * world, dtype=dt, device="cuda")
            return lambda: dist.all_gather_into_tensor(dst, src)
        sys.exit(f"{a.collectives}: op {c['op']} is not one collectives_time.py issues")

    programs = {}
    for c in calls:
        programs.setdefault(c["program"], []).append(c)
    result = {"world_size": world, "collectives": os.path.abspath(a.collectives),
              "definition": "each program's NCCL calls of one step, in order, "
                            "alone on the GPUs; median of --iters",
              "programs": {}}
    total = 0.0
    for name, cs in programs.items():
        issue = [prepare(c) for c in cs]

        def run():
            for f in issue:
                f()
        for _ in range(2):
            run()
        torch.cuda.synchronize()
        dist.barrier()
        times = []
        for _ in range(a.iters):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            run()
            torch.cuda.synchronize()
            times.append((time.perf_counter() - t0) * 1e3)
        times.sort()
        median = times[len(times) // 2]
        moved = sum(bus_bytes(c, world) for c in cs)
        result["programs"][name] = {
            "calls": len(cs), "tensors": sum(c["tensors"] for c in cs),
            "ops": sorted({c["op"] for c in cs}),
            "median_ms": median, "min_ms": times[0],
            "bus_gb_per_s": moved / (median * 1e-3) / 1e9}
        # The share of the program's bytes the bundle puts on the
        # communication stream (beside compute) rather than on the compute
        # stream (in its way).
        comm = sum(bus_bytes(c, world) for c in cs if c["stream"] > 0)
        result["programs"][name]["comm_stream_bytes_share"] = comm / moved if moved else 0.0
        total += median
        del issue
        torch.cuda.empty_cache()
    result["median_ms"] = total
    result["torch"] = torch.__version__
    result["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
    if dist.get_rank() == 0:
        with open(a.out, "w") as f:
            json.dump(result, f, indent=1)
        print(json.dumps(result))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
