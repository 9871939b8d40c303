#!/usr/bin/env python3
"""Fails on an #include that points the wrong way between octet's layers.

The layers, bottom up (docs/DESIGN.md, "Layers"):

  support                      Status, DType, numerics, init draws, LR
                               schedule, pipeline schedules, atomic files,
                               SHA-256
  spec, bundle, hf             the contracts: the spec read in, the bundle
                               handed from compiler to runtime, Hugging Face
                               formats
  dialects                     graph, fp8, kernel
  frontends, compiler          MLIR side          | runtime (never MLIR)
  tools, tests, bench          on top: may include anything

A file may include its own layer and those the table below lists for it.
Besides the directories, the MLIR-free layers may not include MLIR or LLVM
headers, and only the runtime's CUDA parts and the GPU tests include CUDA.

  python3 scripts/check-layers.py [ROOT]     check the tree (default: repo)
  python3 scripts/check-layers.py --self-test
"""

import os
import re
import sys
import tempfile

# Layer → the layers its files may include (besides its own).
ALLOWED = {
    "support": set(),
    "spec": {"support"},
    "bundle": {"support", "hf"},
    "hf": {"support", "spec"},
    "dialects": {"support"},
    "frontends": {"support", "spec", "dialects"},
    "compiler": {"support", "spec", "bundle", "hf", "dialects"},
    "runtime": {"support", "bundle", "hf"},
}
# Top-level folders whose files may include any layer.
UNRESTRICTED = {"tools", "tests", "bench"}
# Layers that never see MLIR or LLVM (the runtime must link without them).
MLIR_FREE = {"support", "spec", "bundle", "hf", "runtime"}
# Where CUDA headers may appear (path prefixes). In runtime/comm only the
# NCCL binding: its store, watchdog and launcher build without CUDA.
CUDA_DIRS = ("runtime/core/", "runtime/blas/", "runtime/exec/", "tests/gpu/",
             "bench/", "runtime/comm/NcclLibrary", "runtime/comm/Communicator",
             "runtime/comm/CommStream")

SOURCE_SUFFIXES = (".h", ".cpp", ".cc", ".cu", ".inc")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
CUDA_HEADERS = re.compile(r"^(cuda|cublas|cublasLt|nccl|cudaTypedefs)\b")


def layer_of(path):
    top = path.split("/", 1)[0]
    if top in ALLOWED or top in UNRESTRICTED:
        return top
    return None


def check_file(root, path):
    """Returns the problems of one file, each a line naming file:line."""
    layer = layer_of(path)
    if layer is None or layer in UNRESTRICTED:
        return []
    problems = []
    with open(os.path.join(root, path), encoding="utf-8",
              errors="replace") as f:
        for number, line in enumerate(f, 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            quote, target = m.groups()
            where = f"{path}:{number}: includes {target}"
            top = target.split("/", 1)[0]
            if quote == '"' and "/" in target and (top in ALLOWED or
                                                    top in UNRESTRICTED):
                if top != layer and top not in ALLOWED[layer]:
                    may = sorted(ALLOWED[layer] | {layer})
                    problems.append(
                        f"{where}: {layer}/ may include only "
                        f"{', '.join(may)}; move the shared code down a "
                        f"layer (docs/DESIGN.md, Layers)")
            if layer in MLIR_FREE and top in ("mlir", "llvm"):
                problems.append(f"{where}: {layer}/ must build without "
                                f"MLIR and LLVM")
            if CUDA_HEADERS.match(target) and not path.startswith(CUDA_DIRS):
                problems.append(f"{where}: CUDA headers belong to "
                                f"{', '.join(CUDA_DIRS)}")
    return problems


def check_tree(root):
    problems = []
    for top in sorted(ALLOWED):
        base = os.path.join(root, top)
        for directory, _, files in os.walk(base):
            for name in sorted(files):
                if name.endswith(SOURCE_SUFFIXES):
                    path = os.path.relpath(os.path.join(directory, name), root)
                    problems += check_file(root, path.replace(os.sep, "/"))
    return problems


def self_test():
    """The check must fail on each kind of wrong include and pass on a
    right one."""
    cases = {
        "runtime/exec/A.cpp": ('#include "compiler/Interpreter/X.h"', True),
        "compiler/Emit/B.cpp": ('#include "runtime/core/Status.h"', True),
        "frontends/C.cpp": ('#include "runtime/data/Y.h"', True),
        "support/D.h": ('#include "bundle/Bundle.h"', True),
        "bundle/E.cpp": ('#include "mlir/IR/Builders.h"', True),
        "compiler/F.cpp": ("#include <cuda.h>", True),
        "runtime/exec/G.cpp": ('#include "bundle/Bundle.h"', False),
        "compiler/H.cpp": ('#include "hf/HfWeights.h"', False),
        "tools/octet/I.cpp": ('#include "runtime/exec/Trainer.h"', False),
        "runtime/comm/Store.cpp": ("#include <cuda.h>", True),
        "runtime/comm/NcclLibrary.h": ("#include <nccl.h>", False),
    }
    failures = 0
    for path, (line, bad) in cases.items():
        with tempfile.TemporaryDirectory() as root:
            os.makedirs(os.path.join(root, os.path.dirname(path)))
            with open(os.path.join(root, path), "w") as f:
                f.write(line + "\n")
            found = check_file(root, path)
            if bool(found) != bad:
                failures += 1
                print(f"self-test: {path} with {line!r}: expected "
                      f"{'a problem' if bad else 'none'}, got {found}")
    print(f"self-test: {len(cases) - failures} passed, {failures} failed")
    return 1 if failures else 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    root = argv[1] if len(argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..")
    problems = check_tree(root)
    for p in problems:
        print(p)
    if problems:
        print(f"check-layers: {len(problems)} include(s) point the wrong way")
        return 1
    print("check-layers: every include points down or across its layer")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
