#!/usr/bin/python3
"""PyTorch peer of tandem-bench-attention: causal attention written out (PyTorch 1.13 has no fused
attention: scores, additive -inf mask, softmax, product), forward + backward, median of --reps runs,
one JSON line. Run: /usr/bin/python3 attention_torch.py --b 8 --h 4 --t 128 --d 64 --threads 1"""
import argparse
import json
import math
import time

import torch

p = argparse.ArgumentParser()
for name, default in (("b", 8), ("h", 4), ("t", 128), ("d", 64), ("reps", 20), ("threads", 1)):
    p.add_argument("--" + name, type=int, default=default)
a = p.parse_args()
torch.set_num_threads(a.threads)
torch.manual_seed(0)
shape = (a.b, a.h, a.t, a.d)
q, k, v = (torch.randn(shape, requires_grad=True) for _ in range(3))
dout = torch.randn(shape)
mask = torch.triu(torch.full((a.t, a.t), float("-inf")), diagonal=1)


def once():
    att = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(a.d) + mask, dim=-1)
    y = att @ v
    torch.autograd.grad(y, [q, k, v], dout)


once()
ms = []
for _ in range(a.reps):
    t0 = time.perf_counter()
    once()
    ms.append((time.perf_counter() - t0) * 1e3)
ms.sort()
print(json.dumps({"bench": "attention", "path": "torch", "b": a.b, "h": a.h, "t": a.t, "d": a.d,
                  "threads": a.threads, "reps": a.reps, "fwd_bwd_ms_median": round(ms[len(ms) // 2], 3),
                  "fwd_bwd_ms_min": round(ms[0], 3), "torch": torch.__version__}))
