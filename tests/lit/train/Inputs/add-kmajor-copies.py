"""usage: add-kmajor-copies.py FILE.safetensors

Adds to a train_state file, for every 2-D FP8 weight cache fp8w.<param>
it holds, the tensor fp8w.<param>.t (its transpose), as checkpoints held
while those K-major copies were optimizer state; prints how many."""
import json
import struct
import sys

path = sys.argv[1]
with open(path, "rb") as f:
    (size,) = struct.unpack("<Q", f.read(8))
    header = json.loads(f.read(size))
    data = f.read()

itemsize = {"F32": 4, "I64": 8}
added = 0
for name, info in list(header.items()):
    if name == "__metadata__" or not name.startswith("fp8w.") \
            or len(info["shape"]) != 2 or name + ".t" in header:
        continue
    rows, cols = info["shape"]
    width = itemsize[info["dtype"]]
    begin, _ = info["data_offsets"]
    element = lambda r, c: data[begin + (r * cols + c) * width:
                                begin + (r * cols + c + 1) * width]
    transposed = b"".join(element(r, c) for c in range(cols)
                          for r in range(rows))
    header[name + ".t"] = {"dtype": info["dtype"], "shape": [cols, rows],
                           "data_offsets": [len(data),
                                            len(data) + len(transposed)]}
    data += transposed
    added += 1

text = json.dumps(header, separators=(",", ":")).encode()
text += b" " * (-len(text) % 8)
with open(path, "wb") as f:
    f.write(struct.pack("<Q", len(text)))
    f.write(text)
    f.write(data)
print("added %d K-major copies" % added)
