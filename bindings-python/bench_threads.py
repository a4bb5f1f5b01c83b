"""Serial vs two Python threads running sandboxes (the GIL is released during runs).

    python bindings-python/bench_threads.py [REPO_DIR] [ROUNDS]
"""

import statistics
import sys
import threading
import time
from pathlib import Path

import frognano

repo = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1] / "examples" / "repos" / "tinyparse"
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
sandbox = frognano.Sandbox()
sandbox.run_tests(repo)  # warm-up (builds the bytecode cache)
serial, threaded = [], []
for _ in range(rounds):
    started = time.perf_counter()
    sandbox.run_tests(repo)
    sandbox.run_tests(repo)
    serial.append(time.perf_counter() - started)
    workers = [threading.Thread(target=sandbox.run_tests, args=(repo,)) for _ in range(2)]
    started = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    threaded.append(time.perf_counter() - started)
s, t = statistics.median(serial), statistics.median(threaded)
print(f"two runs serially:       {s:.3f} s (median of {rounds})")
print(f"two runs in two threads: {t:.3f} s")
print(f"ratio threads/serial:    {t / s:.2f}")
