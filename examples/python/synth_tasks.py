"""Synthesize validated bug-fix tasks from a repository whose test suite passes, print them as a
table, and check them with the oracle baseline (it applies each task's fix).

    python examples/python/synth_tasks.py [REPO_DIR] [-n N] [--seed SEED] [-o TASKS.jsonl]

REPO_DIR defaults to examples/repos/textkit. Exit status 1 when the oracle does not resolve
every task.
"""

import argparse
import sys
from pathlib import Path

import frognano


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repo", nargs="?", type=Path,
                        default=Path(__file__).resolve().parents[1] / "repos" / "textkit")
    parser.add_argument("-n", type=int, default=6, help="number of tasks (default 6)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("-o", "--out", type=Path, help="also write the tasks as JSONL")
    args = parser.parse_args()

    sandbox = frognano.Sandbox()
    synth = frognano.Synthesizer(args.repo, sandbox=sandbox, seed=args.seed, hint_levels=(1, 2))
    print(f"intake: {len(synth.intake['passing'])} tests pass reliably, "
          f"{sum(synth.sites_per_operator.values())} mutation sites reached by tests")
    tasks = synth.generate(args.n)
    stats = synth.stats

    print(f"{'task':<44} {'operator':<20} {'F2P':>4} {'P2P':>4} {'hint':>4}")
    for task in tasks:
        difficulty = task["metadata"]["difficulty"]
        print(f"{task['id']:<44} {'+'.join(difficulty['operators']):<20} "
              f"{len(task['fail_to_pass']):>4} {len(task['pass_to_pass']):>4} {difficulty['hint_level']:>4}")
    print(f"{stats['valid']} tasks from {stats['candidates']} candidates in {stats['elapsed_s']:.1f} s "
          f"({stats['tasks_per_minute']:.0f} tasks/minute)")
    if args.out:
        frognano.save_tasks(args.out, tasks)
        print(f"wrote {args.out}")
    if not tasks:
        print("no task could be made", file=sys.stderr)
        return 1

    summary, _ = frognano.evaluate(tasks, "oracle", sandbox=sandbox)
    print(f"oracle: resolved {summary['resolved']}/{summary['episodes']} "
          f"({summary['resolved_rate']:.0%})")
    return 0 if summary["resolved_rate"] == 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
