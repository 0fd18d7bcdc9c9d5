#!/usr/bin/env python3
"""tandem-train --status-port 0 end to end: starts a short mlp run (1 rank, or N under mpirun),
reads the port it prints, polls GET /health, /status and /metrics with curl while it trains, and
checks the fields, the per-rank entries of every rank, the Prometheus text (prometheus_client's
parser) and the JSON errors (404, 405). Ends the run once everything has been seen."""
import argparse
import json
import math
import os
import re
import signal
import subprocess
import sys
import time

from prometheus_client.parser import text_string_to_metric_families

problems = []


def check(cond, what):
    if not cond:
        problems.append(what)
        print("FAIL:", what, flush=True)
    return cond


def curl(url, method="GET"):
    """(status, content type, body) of one request, with curl (a real HTTP client)."""
    body_args = [] if method == "GET" else ["--data", ""]  # an empty body, with its Content-Length
    out = subprocess.run(["curl", "-s", "-X", method] + body_args +
                         ["-o", "-", "-w", "\n%{http_code} %{content_type}", "--max-time", "10", url],
                         capture_output=True, text=True)
    body, _, tail = out.stdout.rpartition("\n")
    code, _, ctype = tail.partition(" ")
    return int(code or 0), ctype, body


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=1)
    ap.add_argument("--mpirun", default="mpirun")
    ap.add_argument("tandem_train")
    args = ap.parse_args()
    n = args.ranks
    cmd = [args.tandem_train, "--model", "mlp", "--max-steps", "2000", "--batch-size", "32", "--no-eval", "--threads",
           "1", "--status-port", "0", "--monitor-period", "0.2"]
    if n > 1:
        cmd = [args.mpirun, "-np", str(n)] + cmd  # the build's tandem-mpiexec: its flags are its own
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_NUM_THREADS="1")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True)
    try:
        port = None
        deadline = time.time() + 120
        for line in proc.stdout:
            print(line, end="", flush=True)
            m = re.search(r"status: http://127\.0\.0\.1:(\d+)/status", line)
            if m:
                port = int(m.group(1))
                break
            if time.time() > deadline:
                break
        if not check(port, "no 'status: http://127.0.0.1:PORT/status' line"):
            return 1
        base = f"http://127.0.0.1:{port}"

        code, ctype, body = curl(base + "/health")
        check(code == 200 and json.loads(body).get("status") == "ok", f"/health: {code} {body}")

        # Poll /status until every rank has reported and training is well under way.
        seen_steps = []
        status = None
        deadline = time.time() + 120
        while time.time() < deadline and proc.poll() is None:
            code, ctype, body = curl(base + "/status")
            if code == 200:
                status = json.loads(body)
                seen_steps.append(status["step"])
                if status["step"] >= 20 and all(r["step"] is not None for r in status["ranks"]):
                    break
            time.sleep(0.2)
        if not check(status is not None, "no /status answer"):
            return 1
        print(json.dumps(status, indent=1)[:3000], flush=True)
        check(ctype.startswith("application/json"), f"/status content type {ctype}")
        check(seen_steps == sorted(seen_steps), f"steps went backwards: {seen_steps}")
        check(status["state"] == "running", f"state {status['state']}")
        check(status["model"] == "mlp" and status["world_size"] == n, "model or world size")
        check(status["mode"] == ("ddp" if n > 1 else "single"), f"mode {status['mode']}")
        # --device auto: the CPU, or one GPU a rank where the node has as many (seen on an H100 with 1 rank).
        on_gpu = status["devices"][0].startswith("cuda:")
        kind = "cuda:" if on_gpu else "cpu:"
        check(len(status["devices"]) == n and all(d.startswith(kind) for d in status["devices"]),
              f"devices {status['devices']}")
        check(status["device_reason"].startswith(kind), f"device_reason {status['device_reason']}")
        check(status["epoch"] == 1 and status["epochs"] == 5, f"epoch {status['epoch']} of {status['epochs']}")
        check(status["total_steps"] == 2000 and 20 <= status["step"] <= 2000, f"step {status['step']}")
        check(status["samples"] == status["step"] * 32 * n, f"samples {status['samples']}")
        check(math.isfinite(status["loss"]) and status["loss"] > 0, f"loss {status['loss']}")
        check(status["lr"] > 0, f"lr {status['lr']}")
        check(status["samples_per_second"] > 0, f"samples/s {status['samples_per_second']}")
        check(status["eta_seconds"] is not None and status["eta_seconds"] > 0, f"eta {status['eta_seconds']}")
        check(status["host"] and status["host"]["rss_bytes"] > 0, "host figures of rank 0")
        if status["device_reason"].startswith("cpu: no "):  # no GPU, no CUDA device: say why no figures
            check(status["gpu_unavailable"] != "", "no reason for the missing GPU figures")
        ranks = status["ranks"]
        check([r["rank"] for r in ranks] == list(range(n)), f"ranks {[r['rank'] for r in ranks]}")
        for r in ranks:
            check(r["step"] is not None and r["step"] > 0, f"rank {r['rank']}: step {r['step']}")
            check(r["step_seconds"] > 0, f"rank {r['rank']}: step_seconds {r['step_seconds']}")
            check(r["peak_rss_bytes"] >= r["rss_bytes"] > 0, f"rank {r['rank']}: rss {r['rss_bytes']} peak {r['peak_rss_bytes']}")
            if on_gpu:
                g = r["gpu"] or {}
                check(r["device"].startswith("cuda:") and g.get("name") and g.get("memory_total_bytes", 0) > 0,
                      f"rank {r['rank']}: device {r['device']} gpu {r['gpu']}")
            else:
                check(r["device"] == "cpu:0" and r["gpu"] is None, f"rank {r['rank']}: device {r['device']} gpu {r['gpu']}")
            check(r["host"] != "", f"rank {r['rank']}: no host")

        code, ctype, body = curl(base + "/metrics")
        check(code == 200 and ctype.startswith("text/plain; version=0.0.4"), f"/metrics: {code} {ctype}")
        families = {f.name: f for f in text_string_to_metric_families(body)}
        for name, typ in [("tandem_train_steps", "counter"), ("tandem_train_samples", "counter"),
                          ("tandem_train_loss", "gauge"), ("tandem_train_learning_rate", "gauge"),
                          ("tandem_train_samples_per_second", "gauge"), ("tandem_train_step_seconds", "gauge"),
                          ("tandem_train_peak_rss_bytes", "gauge"), ("tandem_train_cpu_seconds", "counter"),
                          ("tandem_train_eta_seconds", "gauge"), ("DCGM_FI_DEV_GPU_UTIL", "gauge"),
                          ("DCGM_FI_DEV_FB_USED", "gauge"), ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter")]:
            check(name in families and families[name].type == typ, f"/metrics: {name} missing or not a {typ}")
        if "tandem_train_steps" in families:
            check(families["tandem_train_steps"].samples[0].value >= 20, "tandem_train_steps_total < 20")
        for name in ["tandem_train_step_seconds", "tandem_train_peak_rss_bytes"]:
            if name in families:
                rs = sorted(s.labels.get("rank") for s in families[name].samples)
                check(rs == [str(r) for r in range(n)], f"/metrics {name}: ranks {rs}")

        code, ctype, body = curl(base + "/nope")
        check(code == 404 and "error" in json.loads(body or "{}"), f"/nope: {code} {body}")
        code, ctype, body = curl(base + "/status", "POST")
        check(code == 405 and "error" in json.loads(body or "{}"), f"POST /status: {code} {body}")
        code, _, _ = curl(base + "/metrics", "DELETE")
        check(code == 405, f"DELETE /metrics: {code}")
        check(proc.poll() is None, "the run ended before the checks")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    print(f"{len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
