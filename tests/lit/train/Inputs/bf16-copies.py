"""usage: bf16-copies.py STEP.safetensors OPTIMIZER.safetensors

STEP is what a run that casts its BF16 weights in the step wrote, OPTIMIZER
what the same run with train.codegen.bf16_weight_cast "optimizer" wrote.
Exit 0 when every tensor of STEP is in OPTIMIZER with the same bytes, and
OPTIMIZER's others are BF16 copies bf16w.<param>, each the round-to-nearest-
even BF16 cast of <param> (stored as BF16, or widened to F32 as octet golden
writes every tensor); prints how many copies. Else says what differs
and exits 1."""
import json
import struct
import sys


def tensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (size,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + size])
    header.pop("__metadata__", None)
    out = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        out[name] = (info["dtype"], info["shape"],
                     raw[8 + size + begin:8 + size + end])
    return out


def bf16_of_f32(data, dtype):
    """The BF16 cast of f32 `data`, as `dtype` stores it: BF16, or F32 (the
    golden files widen every tensor to f32)."""
    words = struct.unpack("<%dI" % (len(data) // 4), data)
    rounded = [((w + 0x7FFF + ((w >> 16) & 1)) >> 16) & 0xFFFF for w in words]
    if dtype == "F32":
        return struct.pack("<%dI" % len(rounded), *[r << 16 for r in rounded])
    return struct.pack("<%dH" % len(rounded), *rounded)


step = tensors(sys.argv[1])
optimizer = tensors(sys.argv[2])
bad = []
for name, value in step.items():
    if optimizer.get(name) != value:
        bad.append("%s differs" % name)
copies = [n for n in optimizer if n not in step]
for name in copies:
    param = name[len("bf16w."):] if name.startswith("bf16w.") else None
    if param is None or param not in optimizer:
        bad.append("%s: not a BF16 copy of a parameter" % name)
        continue
    dtype, shape, data = optimizer[name]
    pdtype, pshape, pdata = optimizer[param]
    if dtype not in ("BF16", "F32") or (shape, pdtype) != (pshape, "F32"):
        bad.append("%s: %s %s for %s %s" % (name, dtype, shape, pdtype, pshape))
    elif data != bf16_of_f32(pdata, dtype):
        bad.append("%s is not the BF16 cast of %s" % (name, param))
if bad or not copies:
    sys.exit("\n".join(bad) or "no BF16 copies")
print("%d BF16 copies, %d tensors the same" % (len(copies), len(step)))
