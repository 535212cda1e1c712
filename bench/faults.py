#!/usr/bin/env python3
"""Client and report of scripts/faults.

  faults.py run BASE SECONDS THREADS OUT
      THREADS workers search for SECONDS, each request a new anonymous visitor (no cookies)
      with a query never asked before, so every answered search is exactly one counted unit.
      One JSON line per request (start, seconds, status, and for answers: semantic, ranking).
  faults.py report OUT NAME:START [NAME:START ...]
      A table per phase (a phase runs from its start to the next one's).
"""
import json
import random
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request


def run(base, seconds, threads, out):
    records, lock = [], threading.Lock()
    deadline = time.time() + float(seconds)

    def worker(number):
        n = 0
        while time.time() < deadline:
            n += 1
            query = f"a story {number} {n} {random.randint(0, 10**12)}"
            url = f"{base}/api/search?q={urllib.parse.quote(query)}"
            started = time.time()
            record = {"t": started}
            try:
                with urllib.request.urlopen(url, timeout=30) as response:
                    body = json.loads(response.read())
                    record.update(status=response.status, semantic=body.get("semantic"),
                                  ranking=body.get("ranking"))
            except urllib.error.HTTPError as error:
                record["status"] = error.code
            except Exception:  # connection refused, reset, timeout
                record["status"] = 0
            record["s"] = time.time() - started
            with lock:
                records.append(record)

    workers = [threading.Thread(target=worker, args=(i,)) for i in range(int(threads))]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    with open(out, "w") as f:
        for record in records:
            f.write(json.dumps(record) + "\n")


def report(out, *phases):
    records = [json.loads(line) for line in open(out)]
    bounds = [(name, float(start)) for name, start in (p.split(":", 1) for p in phases)]
    print("| phase | requests | 200 | 503 | other | words only | fused order | p50 ms | p95 ms | max ms |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for i, (name, start) in enumerate(bounds):
        end = bounds[i + 1][1] if i + 1 < len(bounds) else float("inf")
        rs = [r for r in records if start <= r["t"] < end]
        times = sorted(r["s"] * 1000 for r in rs) or [0]
        pick = lambda q: times[min(len(times) - 1, int(q * len(times)))]
        ok = [r for r in rs if r["status"] == 200]
        unavailable = sum(r["status"] == 503 for r in rs)
        words_only = sum(r.get("semantic") is False for r in ok)
        fused = sum(r.get("ranking") == "Fallback" for r in ok)
        print(f"| {name} | {len(rs)} | {len(ok)} | {unavailable} | {len(rs) - len(ok) - unavailable} "
              f"| {words_only} | {fused} | {pick(0.5):.0f} | {pick(0.95):.0f} | {times[-1]:.0f} |")
    return records


if __name__ == "__main__":
    if sys.argv[1] == "run":
        run(*sys.argv[2:6])
    else:
        report(sys.argv[2], *sys.argv[3:])
