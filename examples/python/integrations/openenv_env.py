"""FrogNano served over OpenEnv's HTTP/WebSocket API and driven by OpenEnv's own client.

Starts the OpenEnv app over the bundled sample tasks in a background thread
(`frognano.integrations.openenv.start_server`; `serve_openenv(tasks, host, port)` serves it in
the foreground, as an OpenEnv environment's server does), opens a session with the typed
OpenEnv client, applies one task's reference fix as JSON tool calls, submits and prints the
graded outcome. Any OpenEnv client (GenericEnvClient, TRL's OpenEnv rollouts) talks to the same
server.
"""

import json
import pathlib

import frognano
from frognano.integrations import fix_actions
from frognano.integrations.openenv import FrogNanoAction, FrogNanoEnvClient, start_server

ROOT = pathlib.Path(__file__).resolve().parents[3]
SAMPLE_TASKS = ROOT / "examples" / "tasks" / "sample.jsonl"


def main() -> None:
    task = frognano.load_tasks(SAMPLE_TASKS)[0]
    with start_server(SAMPLE_TASKS, port=0) as server:
        with FrogNanoEnvClient(base_url=server.url).sync() as env:
            result = env.reset(task_id=task["id"])
            for action in fix_actions(task):  # what a perfect agent would send
                result = env.step(FrogNanoAction(command=json.dumps(action)))
            result = env.step(FrogNanoAction(command="submit"))
            state = env.state()
    resolved = int(bool(result.observation.outcome and result.observation.outcome["resolved"]))
    print(f"openenv: resolved {resolved}/1 with the reference fix, reward {result.reward:.1f}, "
          f"{state.step_count} steps, served at {server.url}")


if __name__ == "__main__":
    main()
