/*
 * Drives FrogNano's agent environment from C: one bug-fix episode by hand, then an evaluation
 * of the oracle baseline over a whole task set.
 *
 *   agent_env [--skip-evaluate] [TASKS_JSONL]    (TASKS_JSONL defaults to
 *                                                 examples/tasks/sample.jsonl)
 *
 * The episode resets an environment on the set's first task, runs the tests (the bug makes
 * some fail), prints the observation's first line, submits the unfixed code and prints the
 * reward (0). The evaluation rolls out the oracle policy (it applies each task's gold patch)
 * over every task and prints the summary JSON. --skip-evaluate leaves the evaluation out: CI
 * uses it under valgrind, where the dozens of sandboxed test runs of a full evaluation would
 * take many minutes, while the episode alone exercises every environment function.
 *
 * The image is the default one unless FROGNANO_IMAGE names another (e.g. python-3.12).
 * Exit status: 0 when everything behaved as expected (the oracle resolves every task), 1 when
 * a result was unexpected, 2 on an error.
 *
 * Build (from the repository root, after `cargo build -p frognano-c`):
 *   gcc -std=c11 -I bindings-c/include examples/c/agent_env.c \
 *       -L target/debug -lfrognano -o agent_env
 *   LD_LIBRARY_PATH=target/debug ./agent_env
 */

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frognano.h"
#include "example_util.h"

/* Prints the first line of a text. */
static void print_first_line(const char *label, const char *text) {
    size_t length = strcspn(text, "\n");
    printf("%s: %.*s\n", label, (int)length, text);
}

/* One episode on task 0 of the set: test, then submit the buggy code. Returns the exit
 * status (0 when the episode behaved as expected). */
static int run_episode(const FrognanoSandbox *sandbox, const FrognanoTaskSet *tasks) {
    char *task = NULL;
    FrognanoError *error = frognano_task_set_get_json(tasks, 0, &task);
    if (error != NULL) {
        return report_error("reading task 0", error);
    }

    FrognanoEnv *env = NULL;
    error = frognano_env_new(sandbox, 0, &env); /* 0: the default step budget */
    if (error != NULL) {
        frognano_string_free(task);
        return report_error("creating the environment", error);
    }

    char *observation = NULL;
    error = frognano_env_reset(env, task, &observation);
    frognano_string_free(task);
    if (error != NULL) {
        frognano_env_free(env);
        return report_error("reset", error);
    }
    print_first_line("reset", observation);
    frognano_string_free(observation);

    FrognanoStep *step = NULL;
    error = frognano_env_step(env, "test", &step);
    if (error != NULL) {
        frognano_env_free(env);
        return report_error("step test", error);
    }
    print_first_line("test", frognano_step_observation(step));
    bool tested = !frognano_step_terminated(step) && !frognano_step_is_error(step);
    frognano_step_free(step);

    error = frognano_env_step(env, "submit", &step);
    if (error != NULL) {
        frognano_env_free(env);
        return report_error("step submit", error);
    }
    double reward = frognano_step_reward(step);
    bool ended = frognano_step_terminated(step);
    printf("submit: reward %.1f, terminated %s\n", reward, ended ? "yes" : "no");
    frognano_step_free(step);
    step = NULL;

    /* The episode is over: another step is an episode error, not a crash. */
    error = frognano_env_step(env, "test", &step);
    bool refused = take_error_of(error, FROGNANO_ERROR_CODE_EPISODE) && step == NULL;

    char *record = NULL;
    error = frognano_env_record_json(env, &record);
    frognano_env_free(env);
    if (error != NULL) {
        return report_error("episode record", error);
    }
    printf("record: %zu bytes of JSON\n", strlen(record));
    frognano_string_free(record);

    if (!tested || !ended || reward != 0.0 || !refused) {
        fprintf(stderr, "unexpected episode (tested %d, ended %d, reward %f, refused %d)\n",
                (int)tested, (int)ended, reward, (int)refused);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    int arg = 1;
    bool evaluate = !take_flag(argc, argv, &arg, "--skip-evaluate");
    const char *path = arg < argc ? argv[arg] : "examples/tasks/sample.jsonl";

    FrognanoTaskSet *tasks = NULL;
    FrognanoError *error = frognano_tasks_load(path, &tasks);
    if (error != NULL) {
        return report_error(path, error);
    }
    printf("%zu tasks in %s\n", frognano_task_set_len(tasks), path);

    /* NULL selects the default image. */
    FrognanoSandbox *sandbox = NULL;
    error = frognano_sandbox_new(getenv("FROGNANO_IMAGE"), &sandbox);
    if (error != NULL) {
        frognano_task_set_free(tasks);
        return report_error("creating the sandbox", error);
    }

    int status = run_episode(sandbox, tasks);
    if (status == 0 && evaluate) {
        status = evaluate_oracle(sandbox, tasks);
    }

    frognano_sandbox_free(sandbox);
    frognano_task_set_free(tasks);
    return status;
}
