"""usage: same-tensor.py A.safetensors B.safetensors NAME

Exit 0 when tensor NAME holds the same bytes (shape, dtype and every
element) in A and B; else prints the first differing element and exits 1."""
import json
import struct
import sys


def tensor(path, name):
    with open(path, "rb") as f:
        raw = f.read()
    (size,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + size])
    if name not in header:
        sys.exit("%s: no tensor %s" % (path, name))
    info = header[name]
    begin, end = info["data_offsets"]
    return info["dtype"], info["shape"], raw[8 + size + begin:8 + size + end]


a = tensor(sys.argv[1], sys.argv[3])
b = tensor(sys.argv[2], sys.argv[3])
if a[:2] != b[:2]:
    sys.exit("%s: %s %s against %s %s" % (sys.argv[3], a[0], a[1], b[0], b[1]))
if a[2] != b[2]:
    width = {"F32": 4, "BF16": 2, "I64": 8}.get(a[0], 1)
    at = next(i for i in range(len(a[2])) if a[2][i] != b[2][i]) // width
    sys.exit("%s: element %d differs" % (sys.argv[3], at))
print("%s: the same %s %s" % (sys.argv[3], a[0], a[1]))
