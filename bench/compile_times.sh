#!/usr/bin/env bash
# Wall time of `octet compile SPEC -o X.octet` (every stage, codegen, ptxas
# and the bundle) for the Llama 3 8B and 70B examples, RUNS times each, on
# this machine; writes the times, their median, the load average before each
# run, the machine, the commit and the commands as JSON.
#
#   bash bench/compile_times.sh [OCTET] [OUT_JSON]     (RUNS=5 by default)
#
# The 70B example asks for tensor and pipeline parallelism and optimizer
# sharding, which the compiler refuses (checkParallelLayout); as in
# tests/lit/examples/llama3-70b.test its layout is replaced by two
# data-parallel ranks, the model unchanged. Goals (issue 24): 8B <= 20 s,
# 70B <= 60 s on the 2-core build machine. Other work on the machine shows
# in the load averages: rerun when they are high.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
octet="$(realpath "${1:-$root/build/tools/octet/octet}")"
out="${2:-$here/results/compile-times.json}"
runs="${RUNS:-5}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

sed 's/parallel {.*}/parallel { data: 2 }/' "$root/examples/llama3-70b.pbtxt" \
  > "$work/llama3-70b-data2.pbtxt"

cases=(
  "llama3-8b|examples/llama3-8b.pbtxt|$root/examples/llama3-8b.pbtxt|20"
  "llama3-70b|sed 's/parallel {.*}/parallel { data: 2 }/' examples/llama3-70b.pbtxt|$work/llama3-70b-data2.pbtxt|60"
)

records="$work/records.tsv"
: > "$records"
for c in "${cases[@]}"; do
  IFS='|' read -r name source spec goal <<<"$c"
  for ((i = 1; i <= runs; ++i)); do
    load="$(cut -d' ' -f1-3 /proc/loadavg)"
    rm -f "$work/$name.octet"
    # Wall seconds, and the CPU seconds (user + system) of the compile and
    # the ptxas processes it starts, which other load changes less.
    /usr/bin/time -f '%e %U %S' -o "$work/time" \
      "$octet" compile "$spec" -o "$work/$name.octet" 2> "$work/$name.err" ||
      { cat "$work/$name.err" >&2; exit 1; }
    read -r seconds user system < "$work/time"
    cpu="$(echo "$user + $system" | bc)"
    bytes="$(stat -c %s "$work/$name.octet")"
    echo "$name run $i: $seconds s, $cpu CPU s (load average before: $load)" >&2
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$source" "$goal" \
      "$seconds" "$cpu" "$load" "$bytes" >> "$records"
  done
done

mkdir -p "$(dirname "$out")"
python3 - "$records" "$out" "$octet" "$root" "$runs" <<'EOF'
import json, os, platform, shutil, statistics, subprocess, sys
records, out, octet, root, runs = sys.argv[1:6]
def run(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, cwd=root,
                              check=True).stdout.strip()
    except Exception:
        return ""
cpu_model = ""
for line in open("/proc/cpuinfo"):
    if line.startswith("model name"):
        cpu_model = line.split(":", 1)[1].strip()
        break
cases = {}
for line in open(records):
    name, source, goal, seconds, cpu, load, size = line.rstrip("\n").split("\t")
    c = cases.setdefault(name, {
        "spec": source, "goal_s": float(goal),
        "command": "octet compile SPEC -o OUT.octet", "seconds": [],
        "cpu_seconds": [], "load_average_before": [],
        "bundle_bytes": int(size)})
    c["seconds"].append(round(float(seconds), 2))
    c["cpu_seconds"].append(round(float(cpu), 2))
    c["load_average_before"].append(load)
for c in cases.values():
    c["median_s"] = round(statistics.median(c["seconds"]), 2)
    c["median_cpu_s"] = round(statistics.median(c["cpu_seconds"]), 2)
    c["meets_goal"] = c["median_s"] <= c["goal_s"]
build_type = ""
cache = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(octet))),
                     "CMakeCache.txt")
if os.path.exists(cache):
    for line in open(cache):
        if line.startswith("CMAKE_BUILD_TYPE:"):
            build_type = line.split("=", 1)[1].strip()
result = {
    "command": "bash bench/compile_times.sh (RUNS=%s)" % runs,
    "commit": run(["git", "rev-parse", "HEAD"]),
    "worktree_clean": run(["git", "status", "--porcelain", "--untracked-files=no"]) == "",
    "octet": run([octet, "--version"]),
    "build_type": build_type,
    "ptxas": (run([shutil.which("ptxas") or "/usr/local/cuda/bin/ptxas",
                   "--version"]).splitlines() or [""])[-1],
    "machine": {"nproc": os.cpu_count(), "cpu_model": cpu_model,
                "kernel": platform.release()},
    "runs": int(runs),
    "cases": cases,
}
with open(out, "w") as f:
    json.dump(result, f, indent=2)
    f.write("\n")
for name, c in cases.items():
    print("%s: median %.2f s of %s, %.2f CPU s (goal %.0f s)" % (
          name, c["median_s"], c["seconds"], c["median_cpu_s"], c["goal_s"]))
EOF
echo "wrote $out" >&2
