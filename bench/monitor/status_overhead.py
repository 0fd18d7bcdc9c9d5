#!/usr/bin/env python3
"""The monitoring overhead per step of tandem-train: interleaved runs of the same mlp training with
the status machinery off, on (--status-port 0: sampler thread, per-step snapshot, HTTP thread), and
on with a GPU monitor answering (TANDEM_NVML_LIBRARY, e.g. the tests' fake NVML, where the machine
has no GPU). Step time = per-process batch / the done record's train_samples_per_s. Prints one JSON
line per run and a summary line per configuration (median step time, ratio to off).

  bench/monitor/status_overhead.py build/apps/tandem-train/tandem-train --runs 7 --steps 400 \
      [--nvml build/tests/monitor/libfake_nvml.so]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile


def run(exe, extra, env_extra, steps, batch):
    with tempfile.NamedTemporaryFile(suffix=".jsonl") as m:
        cmd = [exe, "--model", "mlp", "--max-steps", str(steps), "--batch-size", str(batch), "--no-eval", "--threads",
               "1", "--metrics", m.name] + extra
        out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=dict(os.environ, **env_extra))
        done = [json.loads(l) for l in open(m.name) if '"done"' in l][-1]
    # With --status-port the run says what the status callback cost its training thread per step.
    own = re.search(r"status: ([0-9.]+) us per step on the training thread", out.stdout)
    return batch / done["train_samples_per_s"], float(own.group(1)) * 1e-6 if own else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("exe")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--period", type=float, default=1.0, help="--monitor-period of the 'on' runs")
    ap.add_argument("--nvml", help="a libnvidia-ml to load for a third configuration")
    args = ap.parse_args()
    configs = {"off": ([], {}), "on": (["--status-port", "0", "--monitor-period", str(args.period)], {})}
    if args.nvml:
        configs["on_nvml"] = (configs["on"][0], {"TANDEM_NVML_LIBRARY": args.nvml})
    times = {k: [] for k in configs}
    callback = {k: [] for k in configs}  # the status callback's share of the step, measured in the run
    for i in range(args.runs):
        for name, (extra, env) in configs.items():  # interleaved: every round runs each configuration
            t, own = run(args.exe, extra, env, args.steps, args.batch)
            times[name].append(t)
            if own is not None:
                callback[name].append(own / t)
            print(json.dumps({"bench": "status_overhead", "run": i, "config": name, "step_s": t,
                              "callback_s_per_step": own}), flush=True)
    base = statistics.median(times["off"])
    for name, ts in times.items():
        med = statistics.median(ts)
        print(json.dumps({"bench": "status_overhead", "config": name, "runs": len(ts), "steps": args.steps,
                          "batch": args.batch, "median_step_s": med, "ratio_to_off": med / base,
                          "min_step_s": min(ts), "max_step_s": max(ts),
                          "median_callback_share": statistics.median(callback[name]) if callback[name] else None}),
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
