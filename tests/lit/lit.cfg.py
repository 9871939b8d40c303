# lit configuration for octet's FileCheck tests.
import ctypes
import os
import sys

import lit.formats

config.name = "octet"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".mlir", ".test"]
config.excludes = ["Inputs", "lit.cfg.py", "lit.site.cfg.py.in", "CMakeLists.txt"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.octet_binary_dir, "tests", "lit")
# ctest runs each test as a lit process of its own, several at once: lit
# reads .lit_test_times.txt from the exec root at start and rewrites it at
# the end, so a shared exec root lets one process read another's half-written
# file and fail before running anything (and every later one with it). One
# exec root per test path given keeps each process to its own file.
_paths = [a for a in sys.argv[1:] if not a.startswith("-")]
if len(_paths) == 1:
    _given = os.path.relpath(os.path.abspath(_paths[0]), config.test_exec_root)
    if not _given.startswith(".."):
        config.test_exec_root = os.path.join(config.test_exec_root, "runs", _given)

config.environment["PATH"] = os.pathsep.join(
    [config.llvm_tools_dir, config.environment.get("PATH", os.environ.get("PATH", ""))])

tools = {
    "%octet-opt": os.path.join(config.octet_binary_dir, "tools", "octet-opt", "octet-opt"),
    "%octet": os.path.join(config.octet_binary_dir, "tools", "octet", "octet"),
}
for name, path in tools.items():
    config.substitutions.append((name, path))
config.substitutions.append(("%examples", os.path.join(config.octet_source_dir, "examples")))
config.substitutions.append(("%fixtures", os.path.join(config.octet_source_dir, "tests", "fixtures")))
# The interpreter lit runs on, for helper scripts beside the tests.
config.substitutions.append(("%python", sys.executable))
# bench/'s checkpoint comparisons read tensors with numpy, which lit's own
# interpreter may lack: the first of it and python3 on PATH that has numpy.
import shutil
import subprocess
for _candidate in [sys.executable, shutil.which("python3")]:
    if _candidate and subprocess.run([_candidate, "-c", "import numpy"],
                                     capture_output=True).returncode == 0:
        config.available_features.add("numpy")
        config.substitutions.insert(0, ("%python-numpy", _candidate))
        break
config.substitutions.append(("%bench", os.path.join(config.octet_source_dir, "bench")))
# octet-run is built only with CUDA; it is tested here where it runs
# without a GPU (its command line, and a host with no driver).
octet_run = os.path.join(config.octet_binary_dir, "tools", "octet-run", "octet-run")
if os.path.exists(octet_run):
    config.available_features.add("octet-run")
    # Before %octet, which is a prefix of it.
    config.substitutions.insert(0, ("%octet-run", octet_run))
try:
    ctypes.CDLL("libcuda.so.1")
    config.available_features.add("cuda-driver")
except OSError:
    pass
if config.ptxas:
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas", config.ptxas))
