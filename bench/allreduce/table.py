# Formats tandem-bench-allreduce JSON lines as a markdown table: python3 table.py results.jsonl
import sys, json
rows = {}; mem = {}
for l in open(sys.argv[1]):
    try: d = json.loads(l)
    except Exception: continue
    if 'memcpy_GBps' in d: mem[d['memcpy_bytes']] = (d['memcpy_GBps'], d.get('memcpy_all_ranks_GBps')); continue
    if 'algo' not in d: continue  # the layout line
    rows.setdefault(d['bytes'], {})[d['algo']] = d
print("memcpy GB/s:", {f"{k>>20}MB": v for k, v in mem.items()})
algos = [a for a in ['ring', 'hier', 'native', 'mpi'] if any(a in r for r in rows.values())]
print("| bytes | " + " | ".join(f"{a} busbw GB/s (us)" for a in algos) + " | ring >= mpi |")
print("|---|" + "---|" * (len(algos) + 1))
for b, r in sorted(rows.items()):
    cells = [f"{r[a]['busbw_GBps']:.2f} ({r[a]['time_us']:.0f})" if a in r else "-" for a in algos]
    ok = 'yes' if 'ring' in r and 'mpi' in r and r['ring']['busbw_GBps'] >= r['mpi']['busbw_GBps'] else 'no'
    print(f"| {b} | " + " | ".join(cells) + f" | {ok} |")
