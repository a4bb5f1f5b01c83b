"""Benchmark: episodes/s on a Ray cluster (1 and 2 FrogNano workers) against the in-process
EnvPool at the same parallelism, measured side by side in one run.

    python bindings-python/bench_distributed.py [--address HOST:PORT] [--repeat 2]

Without --address it starts a one-node Ray cluster on 127.0.0.1 (as many CPUs as workers)
and stops it afterwards. Needs Ray and the frognano package (pip install 'frognano[ray]').
Each configuration first runs a warm-up evaluation (workers started, runtime prepared,
repositories unpacked), then the timed one; worker start-up is reported apart.
"""

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import frognano
from frognano import distributed

ROOT = Path(__file__).resolve().parents[1]


def ray_cli(*args):
    return subprocess.run([sys.executable, "-m", "ray.scripts.scripts", *args], check=True,
                          capture_output=True, text=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", help="an existing Ray cluster (default: start one)")
    parser.add_argument("--repeat", type=int, default=2,
                        help="times the 12 sample tasks are evaluated per measurement")
    parser.add_argument("--parallelism", default="1,2")
    args = parser.parse_args()
    levels = [int(p) for p in args.parallelism.split(",")]
    tasks = frognano.load_tasks(ROOT / "examples" / "tasks" / "sample.jsonl") * args.repeat
    warmup = tasks[:2]

    started_here = None
    address = args.address
    if address is None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        temp = tempfile.mkdtemp(prefix="fnbench")
        ray_cli("start", "--head", f"--port={port}", "--node-ip-address=127.0.0.1",
                f"--num-cpus={max(levels)}", "--include-dashboard=false",
                "--disable-usage-stats", f"--temp-dir={temp}")
        started_here = temp
        address = f"127.0.0.1:{port}"
    rows = []
    try:
        sandbox = frognano.Sandbox(workers=max(levels))
        for parallel in levels:
            frognano.evaluate(warmup, "oracle", sandbox=sandbox, workers=parallel)
            t0 = time.perf_counter()
            local, _ = frognano.evaluate(tasks, "oracle", sandbox=sandbox, workers=parallel)
            local_wall = time.perf_counter() - t0

            with distributed.Cluster(address, actors=parallel) as cluster:
                t0 = time.perf_counter()
                cluster.evaluate(warmup, "oracle")
                startup = time.perf_counter() - t0
                t0 = time.perf_counter()
                remote, _ = cluster.evaluate(tasks, "oracle")
                remote_wall = time.perf_counter() - t0
            assert remote["resolved"] == local["resolved"], (remote, local)
            rows.append((parallel, len(tasks) / local_wall, len(tasks) / remote_wall, startup))
    finally:
        if started_here is not None:
            subprocess.run([sys.executable, "-m", "ray.scripts.scripts", "stop", "--force"],
                           capture_output=True)
            shutil.rmtree(started_here, ignore_errors=True)

    print(f"{len(tasks)} episodes (oracle policy, sample tasks) on {os.cpu_count()} cores")
    print(f"{'parallel':>8} | {'EnvPool ep/s':>12} | {'Ray ep/s':>9} | {'Ray/EnvPool':>11} | "
          f"{'overhead':>8} | {'worker start + warm-up':>22}")
    for parallel, local_rate, remote_rate, startup in rows:
        ratio = remote_rate / local_rate
        print(f"{parallel:>8} | {local_rate:>12.2f} | {remote_rate:>9.2f} | {ratio:>10.2f}x | "
              f"{100 * (1 - ratio):>7.1f}% | {startup:>20.1f} s")
    if len(rows) > 1:
        print(f"Ray scaling {rows[0][0]} -> {rows[-1][0]} workers: "
              f"{rows[-1][2] / rows[0][2]:.2f}x (EnvPool: {rows[-1][1] / rows[0][1]:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
