#!/usr/bin/env python3
"""Max abs and relative difference between the f32 tensors of two safetensors files (same names):
prints one JSON line and exits 1 when the max abs difference exceeds TOL. No numpy needed.
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
        assert meta["dtype"] == "F32", (name, meta["dtype"])
        b, e = meta["data_offsets"]
        a = array.array("f")
        a.frombytes(data[8 + n + b:8 + n + e])
        out[name] = a
    return out


a, b, tol = load(sys.argv[1]), load(sys.argv[2]), float(sys.argv[3])
assert a.keys() == b.keys(), (sorted(a), sorted(b))
max_abs = max_rel = 0.0
for k in a:
    for x, y in zip(a[k], b[k]):
        d = abs(x - y)
        max_abs = max(max_abs, d)
        max_rel = max(max_rel, d / max(abs(x), 1e-3))
print(json.dumps({"max_abs_diff": max_abs, "max_rel_diff": max_rel, "tolerance": tol}))
sys.exit(0 if max_abs <= tol else 1)
