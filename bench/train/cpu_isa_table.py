"""Issue 52's table on one CPU path: tandem-bench-train's mlp b128, cnn b64, gpt small and cnn b64
under --amp f16 / bf16, one thread, under TANDEM_CPU_ISA=<isa>, side by side with PyTorch 1.13 in
interleaved rounds (tandem, PyTorch, tandem, PyTorch, ...: a shared machine's load moves both), then
medians. Prints one JSON line per run, then one per row with the medians, the median of the rounds'
own ratios (tandem / PyTorch; for the amp rows tandem amp / tandem fp32 of the same round) and the
fraction of the ISA's peak (tandem-bench-train's fraction_of_peak, or mfu for the GPT); also the best
run of each side and their ratio: a shared machine's noise only ever slows a run (seen: one side's
rounds 30% slower for tens of seconds), so the best is the nearest to a quiet machine. Tooling only.

    /usr/bin/python3 bench/train/cpu_isa_table.py --build build --isa avx2 --rounds 3 \\
        --openblas /tmp/oblas/usr/lib/x86_64-linux-gnu/openblas-pthread

PyTorch side: Debian's torch 1.13 with the same models, batches and steps (bench/train/torch_step.py
--device cpu, torch_gpt.py). With --openblas (a `dpkg -x` of libopenblas0-pthread) it runs on
OpenBLAS instead of Debian's reference BLAS, capped to the same ISA (OPENBLAS_CORETYPE,
ATEN_CPU_CAPABILITY, DNNL_MAX_CPU_ISA). Every run is prefixed with --prefix (e.g. "chrt -f 10").
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# (row, tandem-bench-train arguments, PyTorch command or None for the amp rows, throughput field)
ROWS = [
    ("mlp b128", ["--model", "mlp", "--batch-size", "128", "--steps", "60"],
     ["torch_step.py", "--model", "mlp", "--batch-size", "128", "--steps", "60", "--device", "cpu"], "samples_per_s"),
    ("cnn b64", ["--model", "cnn", "--batch-size", "64", "--steps", "30"],
     ["torch_step.py", "--model", "cnn", "--batch-size", "64", "--steps", "30", "--device", "cpu"], "samples_per_s"),
    ("gpt small", ["--model", "gpt", "--gpt-size", "small", "--steps", "12"],
     ["torch_gpt.py", "--gpt-size", "small", "--batch-size", "8", "--steps", "12"], "tokens_per_s"),
    ("cnn b64 amp f16", ["--model", "cnn", "--batch-size", "64", "--steps", "30", "--amp", "f16"], None, "samples_per_s"),
    ("cnn b64 amp bf16", ["--model", "cnn", "--batch-size", "64", "--steps", "30", "--amp", "bf16"], None,
     "samples_per_s"),
]

# What a CPU path means for PyTorch's libraries (their own caps, not tandem's variable).
TORCH_ISA = {
    "avx2": {"OPENBLAS_CORETYPE": "Haswell", "ATEN_CPU_CAPABILITY": "avx2", "DNNL_MAX_CPU_ISA": "AVX2"},
    "avx512": {"OPENBLAS_CORETYPE": "SkylakeX", "ATEN_CPU_CAPABILITY": "avx512", "DNNL_MAX_CPU_ISA": "AVX512_CORE"},
    "generic": {"OPENBLAS_CORETYPE": "Prescott", "ATEN_CPU_CAPABILITY": "default", "DNNL_MAX_CPU_ISA": "SSE41"},
}


def run_json(cmd, env):
    """Runs cmd, returns its last stdout line that parses as JSON (raises with stderr's tail if none)."""
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    for line in reversed(p.stdout.strip().splitlines()):
        try:
            return json.loads(line)
        except ValueError:
            continue
    raise RuntimeError("no JSON from %s (exit %d): %s" % (" ".join(cmd), p.returncode, p.stderr[-800:]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build", help="tandem build folder (bench/train/tandem-bench-train)")
    ap.add_argument("--isa", default="avx2", choices=sorted(TORCH_ISA), help="TANDEM_CPU_ISA for tandem")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rows", default="", help="comma-separated row names (default: all)")
    ap.add_argument("--openblas", default="", help="folder with libopenblas.so.0 / libblas.so.3 for PyTorch")
    ap.add_argument("--python", default="/usr/bin/python3", help="the interpreter with torch 1.13")
    ap.add_argument("--prefix", default="", help="command prefix for every run, e.g. 'chrt -f 10'")
    a = ap.parse_args()

    bench = os.path.join(a.build, "bench", "train", "tandem-bench-train")
    prefix = shlex.split(a.prefix)
    base = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    tandem_env = dict(base, TANDEM_CPU_ISA=a.isa)
    torch_env = dict(base, **TORCH_ISA[a.isa])
    if a.openblas:
        torch_env["LD_LIBRARY_PATH"] = a.openblas + (":" + base["LD_LIBRARY_PATH"] if base.get("LD_LIBRARY_PATH") else "")
    wanted = [r.strip() for r in a.rows.split(",") if r.strip()]
    rows = [r for r in ROWS if not wanted or r[0] in wanted]

    results = {name: {"tandem": [], "torch": [], "peak": [], "ratio": []} for name, *_ in rows}
    fp32_cnn = {}  # round -> tandem cnn b64 fp32 throughput (the amp rows' reference)
    for rnd in range(a.rounds):
        for name, targs, tcmd, field in rows:
            if name.startswith("cnn b64 amp") and rnd not in fp32_cnn:
                ref = run_json(prefix + [bench, "--threads", "1", "--device", "cpu"] + ROWS[1][1], tandem_env)
                fp32_cnn[rnd] = ref[field]
            t = run_json(prefix + [bench, "--threads", "1", "--device", "cpu"] + targs, tandem_env)
            t.update(row=name, side="tandem", round=rnd, isa_cap=a.isa)
            print(json.dumps(t), flush=True)
            if name == "cnn b64":
                fp32_cnn[rnd] = t[field]
            r = results[name]
            r["tandem"].append(t[field])
            r["peak"].append(t.get("fraction_of_peak", t.get("mfu")))
            if tcmd is None:
                r["ratio"].append(t[field] / fp32_cnn[rnd])
                continue
            p = run_json(prefix + [a.python, os.path.join(HERE, tcmd[0]), "--threads", "1"] + tcmd[1:]
                         if tcmd[0] == "torch_gpt.py" else prefix + [a.python, os.path.join(HERE, tcmd[0])] + tcmd[1:],
                         torch_env)
            p.update(row=name, side="torch", round=rnd)
            print(json.dumps(p), flush=True)
            r["torch"].append(p[field])
            r["ratio"].append(t[field] / p[field])

    for name, targs, tcmd, field in rows:
        r = results[name]
        med = lambda v: statistics.median(v) if v else None
        peaks = [x for x in r["peak"] if x is not None]
        best = max(r["tandem"]) if r["tandem"] else None
        reference = max(fp32_cnn.values()) if tcmd is None and fp32_cnn else max(r["torch"]) if r["torch"] else None
        print(json.dumps({"summary": name, "isa": a.isa, "rounds": a.rounds, "unit": field,
                          "tandem_median": med(r["tandem"]), "torch_median": med(r["torch"]),
                          "ratio_median": med(r["ratio"]),
                          "ratio_is": "tandem amp / tandem fp32" if tcmd is None else "tandem / torch",
                          "fraction_of_peak_median": med(peaks), "tandem_best": best,
                          "reference_best": reference, "ratio_best": best / reference if best and reference else None}),
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
