#!/usr/bin/env python3
"""Parses the monitor's Prometheus text (dump_metrics, or a URL's body) with prometheus_client's
text-format parser and checks the DCGM families: every family typed, and with the fake NVML
(--fake) the values and labels of its three GPUs."""
import argparse
import subprocess
import sys

from prometheus_client.parser import text_string_to_metric_families

GAUGES = ["DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_MEM_COPY_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE",
          "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_POWER_MGMT_LIMIT", "DCGM_FI_DEV_SM_CLOCK"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dump", help="the dump_metrics executable")
    ap.add_argument("--fake", action="store_true", help="the fake NVML is loaded: check its figures")
    args = ap.parse_args()
    text = subprocess.run([args.dump], check=True, capture_output=True, text=True).stdout
    families = {f.name: f for f in text_string_to_metric_families(text)}
    errors = []
    for name in GAUGES:
        if name not in families or families[name].type != "gauge":
            errors.append(f"{name}: missing or not a gauge")
    # The parser names a counter's family without the _total suffix that tandem's counters carry.
    if families.get("tandem_monitor_queries", None) is None or families["tandem_monitor_queries"].type != "counter":
        errors.append("tandem_monitor_queries_total: missing or not a counter")
    ecc = families.get("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL")
    if ecc is None or ecc.type != "counter":
        errors.append("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL: missing or not a counter")
    if args.fake:
        free = {s.labels["gpu"]: s for s in families["DCGM_FI_DEV_FB_FREE"].samples}
        if sorted(free) != ["0", "1", "2"]:
            errors.append(f"FB_FREE for gpus {sorted(free)}, expected 0 1 2")
        else:
            if free["1"].value != 70 * 1024:
                errors.append(f"FB_FREE of gpu 1 is {free['1'].value} MiB, expected 71680")
            labels = free["2"].labels
            if labels["modelName"] != 'Fake "GPU" \\ C' or labels["device"] != "nvidia2" or labels["rank"] != "0":
                errors.append(f"labels of gpu 2: {labels}")
            if not labels["UUID"].startswith("GPU-11112222"):
                errors.append(f"UUID of gpu 2: {labels['UUID']}")
        power = {s.labels["gpu"]: s.value for s in families["DCGM_FI_DEV_POWER_USAGE"].samples}
        if abs(power.get("0", 0) - 123.456) > 1e-9:
            errors.append(f"POWER_USAGE of gpu 0: {power.get('0')}")
        if ecc is not None and sorted(s.labels["gpu"] for s in ecc.samples) != ["0", "1"]:
            errors.append("ECC: gpu 2 has none (Not Supported) and must have no sample")
    else:
        for name in GAUGES:
            if name in families and families[name].samples and "Hostname" not in families[name].samples[0].labels:
                errors.append(f"{name}: no Hostname label")
    for e in errors:
        print("FAIL:", e)
    print(f"{len(families)} families parsed, {len(errors)} problems")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
