#!/usr/bin/env python3
"""Time of a data-parallel gradient reduction on its own, under torchrun.

All-reduces (sum) the given f32 element counts, one NCCL call per bucket,
as octet's bundle issues them (`octet inspect BUNDLE` lists the calls and
elements), with nothing else on the GPUs. Beside a data-parallel step's
time, it says how much of the communication the step hid behind compute:
    exposed = step(data 2) - step(one GPU),  hidden = 1 - exposed / alone.

    torchrun --nproc-per-node 2 bench/allreduce_time.py --elements N [N ...] --out F.json
"""
import argparse
import json
import os
import time

import torch
import torch.distributed as dist


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--elements", type=int, nargs="+", required=True,
                    help="f32 elements of each bucket, in issue order")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    if os.environ.get("NCCL_NVLS_ENABLE", "0") != "0":
        raise SystemExit("NCCL_NVLS_ENABLE must stay 0 on this host")
    os.environ["NCCL_NVLS_ENABLE"] = "0"
    rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl")
    buckets = [torch.ones(n, dtype=torch.float32, device="cuda")
               for n in a.elements]

    def reduce_all():
        for b in buckets:
            dist.all_reduce(b)

    for _ in range(2):
        reduce_all()
    torch.cuda.synchronize()
    dist.barrier()
    times = []
    for _ in range(a.iters):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        reduce_all()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    total = sum(a.elements)
    median = times[len(times) // 2]
    if dist.get_rank() == 0:
        result = {
            "world_size": dist.get_world_size(),
            "buckets": len(a.elements),
            "elements": total,
            "bytes": 4 * total,
            "median_ms": median,
            "min_ms": times[0],
            "bus_gb_per_s": 2 * (dist.get_world_size() - 1) / dist.get_world_size()
                            * 4 * total / (median * 1e-3) / 1e9,
            "torch": torch.__version__,
            "nccl": ".".join(map(str, torch.cuda.nccl.version())),
        }
        with open(a.out, "w") as f:
            json.dump(result, f, indent=1)
        print(json.dumps(result))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
