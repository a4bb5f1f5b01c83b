"""Evaluate a policy on a Ray cluster: FrogNano's workers (Ray actors, one Sandbox each) run the
episodes, and the records come back in task order, as from a single machine.

    python examples/python/cluster_eval.py [RAY_ADDRESS]

RAY_ADDRESS: "auto" for the cluster this machine belongs to, HOST:PORT, or "local" (the
default here: a private cluster started in this process). Needs pip install 'frognano[ray]'.
"""

import sys
from pathlib import Path

import frognano
from frognano.distributed import Cluster


def main() -> int:
    address = sys.argv[1] if len(sys.argv) > 1 else "local"
    tasks = frognano.load_tasks(Path(__file__).resolve().parents[1] / "tasks" / "sample.jsonl")[:4]
    with Cluster(address) as cluster:
        report, records = cluster.evaluate(
            tasks, "oracle", progress=lambda done, total: print(f"{done}/{total} episodes"))
        print(f"{cluster.actors} workers, {len(cluster.events)} worker deaths")
    for record in records:
        print(f"{record['task_id']:<44} resolved={record['outcome']['resolved']} "
              f"steps={record['outcome']['steps']}")
    print(f"resolved {report['resolved']} of {report['episodes']} in {report['wall_s']:.1f} s")
    return 0 if report["resolved"] == len(tasks) else 1


if __name__ == "__main__":
    sys.exit(main())
