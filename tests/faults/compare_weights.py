#!/usr/bin/env python3
"""Max abs and relative difference between the f32 tensors of two safetensors files (same names):
prints one JSON line and exits 1 when the max abs difference exceeds TOL. I64 tensors (BatchNorm's
num_batches_tracked) must be equal. No numpy needed.
Usage: compare_weights.py A.safetensors B.safetensors TOL"""
import array
import json
import struct
import sys


def load(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        assert meta["dtype"] in ("F32", "I64"), (name, meta["dtype"])
        b, e = meta["data_offsets"]
        a = array.array("f" if meta["dtype"] == "F32" else "q")
        a.frombytes(data[8 + n + b:8 + n + e])
        out[name] = a
    return out


a, b, tol = load(sys.argv[1]), load(sys.argv[2]), float(sys.argv[3])
assert a.keys() == b.keys(), (sorted(a), sorted(b))
max_abs = max_rel = 0.0
worst = None
ints_equal = True
for k in a:
    if a[k].typecode == "q" or b[k].typecode == "q":
        ints_equal = ints_equal and a[k] == b[k]
        continue
    for x, y in zip(a[k], b[k]):
        d = abs(x - y)
        if d > max_abs:
            max_abs, worst = d, k
        max_rel = max(max_rel, d / max(abs(x), 1e-3))
print(json.dumps({"max_abs_diff": max_abs, "max_rel_diff": max_rel, "worst": worst, "ints_equal": ints_equal,
                  "tolerance": tol}))
sys.exit(0 if max_abs <= tol and ints_equal else 1)
