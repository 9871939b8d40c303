#!/usr/bin/env bash
# Links build/tools/octet/octet-static: the compiler with Debian's MLIR and
# LLVM static archives instead of libMLIR.so/libLLVM.so, for a GPU host
# that has CUDA but no MLIR (it needs only libc, libz, libzstd and pcre2
# there; ptxas and libdevice come from the host's CUDA). Put it beside
# octet-run as a build does (build/tools/octet/octet and
# build/tools/octet-run/octet-run) and `octet train` runs there as here.
#
#   bash scripts/static-octet.sh [BUILD_DIR]
set -euo pipefail
build="${1:-$(cd "$(dirname "$0")/.." && pwd)/build}"
ninja -C "$build" octet
cd "$build"
ninja -t commands tools/octet/octet | tail -1 > link-octet.cmd
python3 - link-octet.cmd <<'PY'
import glob, shlex, sys
cmd = open(sys.argv[1]).read()
link = next(p for p in cmd.split("&&") if "-o tools/octet/octet" in p)
out = []
for t in shlex.split(link):
    if t.startswith("-Wl,-rpath") or "/libMLIR.so" in t or "/libLLVM.so" in t:
        continue
    if t.endswith("/libprotobuf.so"):
        t = t[:-3] + ".a"
    if t == "tools/octet/octet":
        t = "tools/octet/octet-static"
    out.append(t)
archives = sorted(glob.glob("/usr/lib/llvm-22/lib/libMLIR*.a")) + \
    sorted(glob.glob("/usr/lib/llvm-22/lib/libLLVM*.a"))
# The archives in one group: the linker takes only the objects it needs.
out += ["-Wl,--start-group"] + archives + ["-Wl,--end-group",
        "/usr/lib/x86_64-linux-gnu/libzstd.so.1", "-ltinfo", "-lz",
        "-lpthread", "-ldl", "-lrt", "-static-libstdc++", "-static-libgcc",
        "-Wl,--gc-sections", "-s"]
open(sys.argv[1], "w").write(" ".join(shlex.quote(x) for x in out) + "\n")
PY
bash link-octet.cmd
ls -l tools/octet/octet-static
