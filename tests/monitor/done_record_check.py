#!/usr/bin/env python3
"""--device auto --min-free-memory: the run logs its device reason and writes it into the done
record (field device_reason), the same line on both."""
import json
import subprocess
import sys


def main():
    exe, metrics = sys.argv[1], sys.argv[2]
    out = subprocess.run([exe, "--model", "mlp", "--max-steps", "3", "--no-eval", "--threads", "1", "--device", "auto",
                          "--min-free-memory", "1GB", "--metrics", metrics], capture_output=True, text=True)
    print(out.stdout, out.stderr)
    if out.returncode != 0:
        print("FAIL: exit", out.returncode)
        return 1
    done = [json.loads(line) for line in open(metrics) if '"done"' in line][-1]
    reason = done.get("device_reason", "")
    logged = [l for l in out.stdout.splitlines() if l.startswith("tandem-train: device ")]
    ok = reason != "" and "\n" not in reason and reason.split(":")[0] == done["device"].split(":")[0] + ""
    ok = ok and logged and logged[0] == "tandem-train: device " + reason
    print("device", done["device"], "reason:", reason)
    if not ok:
        print("FAIL: device_reason missing, multi-line, or not the logged one")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
