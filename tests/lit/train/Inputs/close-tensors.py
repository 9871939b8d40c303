"""usage: close-tensors.py A.safetensors B.safetensors MAX_REL_L2

Every tensor of A against B's of the same name (F32 or I64): both files
hold the same names and shapes, and each tensor's relative L2 error,
|a - b| / max(|b|, 1e-30), is at most MAX_REL_L2. Prints the largest."""
import json
import math
import struct
import sys


def load(path):
    with open(path, "rb") as f:
        raw = f.read()
    (size,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + size])
    body = raw[8 + size:]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        code = {"F32": "f", "I64": "q"}[info["dtype"]]
        count = (end - begin) // struct.calcsize(code)
        values = struct.unpack("<%d%s" % (count, code), body[begin:end])
        tensors[name] = (info["shape"], values)
    return tensors


a, b, bound = load(sys.argv[1]), load(sys.argv[2]), float(sys.argv[3])
if sorted(a) != sorted(b):
    sys.exit("the files hold different tensors: %s against %s"
             % (sorted(set(a) - set(b)), sorted(set(b) - set(a))))
worst, worst_name = 0.0, ""
for name in sorted(a):
    (shape_a, x), (shape_b, y) = a[name], b[name]
    if shape_a != shape_b:
        sys.exit("%s: shape %s against %s" % (name, shape_a, shape_b))
    diff = math.sqrt(sum((p - q) ** 2 for p, q in zip(x, y)))
    norm = math.sqrt(sum(q * q for q in y))
    error = diff / max(norm, 1e-30) if diff > 0 else 0.0
    if error > worst:
        worst, worst_name = error, name
    if error > bound:
        sys.exit("%s: relative L2 error %.3g, above %.3g" % (name, error, bound))
print("%d tensors agree; largest relative L2 error %.3g%s"
      % (len(a), worst, " (" + worst_name + ")" if worst_name else ""))
