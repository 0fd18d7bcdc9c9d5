"""PyTorch's training step for tandem-bench-train's models, timed the same way (median of per-step
wall times, a device synchronisation ending each step), to put tandem's GPU figures beside it.
Tooling only: tandem itself never needs Python.

    python3 bench/train/torch_step.py --model cnn --batch-size 128 [--amp bf16] [--device cuda]
"""
import argparse
import json
import statistics
import time

import torch
import torch.nn as nn


def make(model):
    if model == "mlp":
        return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))


def median_step_seconds(opt, forward_loss, dev, warmup, steps):
    """Runs `warmup` untimed then `steps` timed training steps (zero_grad, forward_loss() under the
    caller's autocast, backward, opt.step, a device synchronisation); returns the median step time."""
    return step_seconds(opt, forward_loss, dev, warmup, steps)[0]


def step_seconds(opt, forward_loss, dev, warmup, steps):
    """As median_step_seconds; returns (median wall seconds, mean process CPU seconds) of a step. The
    CPU time leaves out other processes time-sharing the cores (tandem-bench-train's *_cpu_time)."""
    def step():
        opt.zero_grad(set_to_none=False)
        forward_loss().backward()
        opt.step()
        if dev.type == "cuda":
            torch.cuda.synchronize()

    for _ in range(warmup):
        step()
    times = []
    c0 = time.process_time()
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), (time.process_time() - c0) / steps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="cnn", choices=["mlp", "cnn"])
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--amp", default="off", choices=["off", "bf16", "f16"])
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args()
    # tandem's f32 convolutions and GEMMs use plain FMA math: no TF32 here either.
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.device(a.device)
    net = make(a.model).to(dev)
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    shape = (a.batch_size, 1, 28, 28) if a.model == "cnn" else (a.batch_size, 784)
    x = torch.randn(shape, device=dev)
    y = (torch.arange(a.batch_size, device=dev) * 7) % 10
    dtype = {"bf16": torch.bfloat16, "f16": torch.float16}.get(a.amp)

    def forward_loss():
        with torch.autocast(dev.type, dtype=dtype, enabled=dtype is not None):
            return nn.functional.cross_entropy(net(x), y)

    med, cpu = step_seconds(opt, forward_loss, dev, a.warmup, a.steps)
    print(json.dumps({"impl": "torch " + torch.__version__, "model": a.model, "batch": a.batch_size,
                      "amp": a.amp, "device": str(dev), "threads": torch.get_num_threads(),
                      "samples_per_s": a.batch_size / med, "step_ms_median": 1e3 * med,
                      "samples_per_cpu_s": a.batch_size / cpu}))


if __name__ == "__main__":
    main()
