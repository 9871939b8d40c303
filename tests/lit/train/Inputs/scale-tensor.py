"""usage: scale-tensor.py FILE.safetensors NAME FACTOR

Multiplies the F32 tensor NAME of FILE by FACTOR in place: a checkpoint
with one tensor wrong, for a comparison that must notice it."""
import json
import struct
import sys

path, name, factor = sys.argv[1], sys.argv[2], float(sys.argv[3])
with open(path, "r+b") as f:
    (size,) = struct.unpack("<Q", f.read(8))
    header = json.loads(f.read(size))
    if name not in header or header[name]["dtype"] != "F32":
        sys.exit("%s: no F32 tensor '%s'" % (path, name))
    begin, end = header[name]["data_offsets"]
    count = (end - begin) // 4
    f.seek(8 + size + begin)
    values = struct.unpack("<%df" % count, f.read(end - begin))
    f.seek(8 + size + begin)
    f.write(struct.pack("<%df" % count, *(v * factor for v in values)))
