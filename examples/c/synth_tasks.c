/*
 * Synthesizes bug-fix tasks from C: FrogNano injects bugs into a repository whose test suite
 * passes and keeps those its tests pin down; the oracle baseline then checks every task.
 *
 *   synth_tasks [REPO_DIR [COUNT]]    (REPO_DIR defaults to examples/repos/textkit, COUNT to 3)
 *
 * Prints each task's id and number of FAIL_TO_PASS tests, the synthesizer's statistics, and
 * the summary of `frognano_evaluate` with the oracle policy (it applies each task's fix).
 *
 * The image is the default one unless FROGNANO_IMAGE names another (e.g. python-3.12).
 * Exit status: 0 when the oracle resolves every task, 1 when a result was unexpected (no task,
 * or a task the oracle did not resolve), 2 on an error.
 *
 * Build (from the repository root, after `cargo build -p frognano-c`):
 *   gcc -std=c11 -I bindings-c/include examples/c/synth_tasks.c \
 *       -L target/debug -lfrognano -o synth_tasks
 *   LD_LIBRARY_PATH=target/debug ./synth_tasks
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frognano.h"
#include "example_util.h"

/* Prints the JSON string value of `"key":"..."` in `json` (its first occurrence), escapes
 * and all; prints "?" when it is not there. Enough for the compact JSON the library writes. */
static void print_string_field(const char *json, const char *key) {
    char pattern[64];
    snprintf(pattern, sizeof pattern, "\"%s\":\"", key);
    const char *start = strstr(json, pattern);
    if (start == NULL) {
        printf("?");
        return;
    }
    start += strlen(pattern);
    const char *end = start;
    while (*end != '\0' && *end != '"') {
        end += (end[0] == '\\' && end[1] != '\0') ? 2 : 1;
    }
    printf("%.*s", (int)(end - start), start);
}

/* Counts the strings in the task record's top-level "fail_to_pass" array. Inside a JSON
 * string every quote is escaped, so the key's pattern can only match the key itself (the
 * difficulty metadata's "fail_to_pass" is a number, not an array). Returns -1 when absent. */
static long count_fail_to_pass(const char *json) {
    const char *p = strstr(json, "\"fail_to_pass\":[");
    if (p == NULL) {
        return -1;
    }
    p += strlen("\"fail_to_pass\":[");
    long count = 0;
    while (*p != '\0' && *p != ']') {
        if (*p == '"') {
            count++;
            p++;
            while (*p != '\0' && *p != '"') {
                p += (p[0] == '\\' && p[1] != '\0') ? 2 : 1;
            }
        }
        if (*p != '\0') {
            p++;
        }
    }
    return count;
}

int main(int argc, char **argv) {
    const char *repo = argc > 1 ? argv[1] : "examples/repos/textkit";
    size_t count = 3;
    if (argc > 2) {
        char *end = NULL;
        unsigned long parsed = strtoul(argv[2], &end, 10);
        if (end == argv[2] || *end != '\0' || parsed == 0) {
            fprintf(stderr, "COUNT must be a positive integer, not %s\n", argv[2]);
            return 2;
        }
        count = (size_t)parsed;
    }

    /* NULL selects the default image. */
    FrognanoSandbox *sandbox = NULL;
    FrognanoError *error = frognano_sandbox_new(getenv("FROGNANO_IMAGE"), &sandbox);
    if (error != NULL) {
        return report_error("creating the sandbox", error);
    }

    /* Options are a JSON object of SynthConfig fields; NULL takes every default. */
    const char *options = "{\"seed\": 1, \"hint_levels\": [1, 2]}";
    FrognanoTaskSet *tasks = NULL;
    char *stats = NULL;
    error = frognano_synthesize(sandbox, repo, count, options, &tasks, &stats);
    if (error != NULL) {
        frognano_sandbox_free(sandbox);
        return report_error(repo, error);
    }

    int status = 0;
    size_t made = frognano_task_set_len(tasks);
    printf("%zu of %zu tasks from %s\n", made, count, repo);
    for (size_t i = 0; i < made && status == 0; i++) {
        char *task = NULL;
        error = frognano_task_set_get_json(tasks, i, &task);
        if (error != NULL) {
            status = report_error("reading a task", error);
            break;
        }
        printf("  ");
        print_string_field(task, "id");
        printf("  FAIL_TO_PASS: %ld\n", count_fail_to_pass(task));
        frognano_string_free(task);
    }
    printf("stats: %s\n", stats);
    frognano_string_free(stats);

    if (status == 0 && made == 0) {
        fprintf(stderr, "no task could be made\n");
        status = 1;
    }
    if (status == 0) {
        status = evaluate_oracle(sandbox, tasks);
    }

    frognano_task_set_free(tasks);
    frognano_sandbox_free(sandbox);
    return status;
}
