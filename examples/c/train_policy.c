/*
 * Reinforcement learning from C: FrogNano's group advantages as building blocks for a trainer
 * of your own, then a tiny training run of the bundled repair policy on tasks synthesized from
 * a repository.
 *
 *   train_policy [--skip-training] [REPO_DIR]    (REPO_DIR defaults to examples/repos/textkit)
 *
 * Part 1 computes the advantages of one group of rewards with each estimator (GRPO, Dr. GRPO,
 * RLOO) and checks them against hand-computed values, prints the learnability score of a few
 * success rates, and shows an error object (an unknown estimator).
 *
 * Part 2 makes a trainer with a tiny configuration (2 held-out tasks, a static curriculum of
 * 3 tasks, 2 tasks x 2 rollouts per iteration), runs one iteration, evaluates the greedy
 * policy on the held-out tasks, saves a checkpoint and resumes it. It also shows that a
 * configuration with a misspelt key is refused. The last line printed is the held-out
 * summary. --skip-training stops after part 1 and the refused configuration (no task is
 * synthesized and no episode runs).
 *
 * The image is the default one unless FROGNANO_IMAGE names another (e.g. python-3.12).
 * Exit status: 0 when everything behaved as expected, 1 when a result was unexpected, 2 on an
 * error.
 *
 * Build (from the repository root, after `cargo build -p frognano-c`):
 *   gcc -std=c11 -I bindings-c/include examples/c/train_policy.c \
 *       -L target/debug -lfrognano -o train_policy
 *   LD_LIBRARY_PATH=target/debug ./train_policy
 */

#define _POSIX_C_SOURCE 200809L /* mkstemp, close */

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "frognano.h"
#include "example_util.h"

/* Reads the number of `"key":NUMBER` in `json` (its first occurrence). Returns false when it is
 * not there. Enough for the compact JSON the library writes. */
static bool json_number(const char *json, const char *key, double *value) {
    char pattern[64];
    snprintf(pattern, sizeof pattern, "\"%s\":", key);
    const char *start = strstr(json, pattern);
    if (start == NULL) {
        return false;
    }
    start += strlen(pattern);
    char *end = NULL;
    *value = strtod(start, &end);
    return end != start;
}

/* Part 1: group advantages and learnability. Returns the exit status. */
static int advantages_demo(void) {
    /* One group: four rollouts of the same task, two of which resolved it. */
    const double rewards[4] = {1.0, 0.0, 0.0, 1.0};
    /* Mean 0.5; GRPO divides by the sample standard deviation sqrt(1/3) (+ 1e-6); RLOO takes
     * each reward minus the mean of the other three (1 - 1/3 = 2/3). */
    const char *estimators[3] = {"grpo", "dr_grpo", "rloo"};
    const double expected_first[3] = {0.5 / (0.5773502691896257 + 1e-6), 0.5, 2.0 / 3.0};
    int status = 0;
    for (int e = 0; e < 3; e++) {
        double advantages[4];
        FrognanoError *error = frognano_group_advantages(rewards, 4, estimators[e], advantages);
        if (error != NULL) {
            return report_error(estimators[e], error);
        }
        printf("%-8s advantages: %+.4f %+.4f %+.4f %+.4f\n", estimators[e], advantages[0],
               advantages[1], advantages[2], advantages[3]);
        if (fabs(advantages[0] - expected_first[e]) > 1e-9 ||
            fabs(advantages[1] + expected_first[e]) > 1e-9) {
            fprintf(stderr, "%s: expected +-%.6f\n", estimators[e], expected_first[e]);
            status = 1;
        }
    }

    /* In place, and a group without signal (all rewards equal): advantages 0. */
    double flat[3] = {1.0, 1.0, 1.0};
    FrognanoError *error = frognano_group_advantages(flat, 3, "grpo", flat);
    if (error != NULL) {
        return report_error("flat group", error);
    }
    if (flat[0] != 0.0 || flat[1] != 0.0 || flat[2] != 0.0) {
        fprintf(stderr, "a flat group should have zero advantages\n");
        status = 1;
    }

    /* An unknown estimator is an error object, and the output is left untouched. */
    double untouched[4] = {9.0, 9.0, 9.0, 9.0};
    error = frognano_group_advantages(rewards, 4, "ppo", untouched);
    if (error == NULL || frognano_error_code(error) != FROGNANO_ERROR_CODE_INVALID_OPTION ||
        untouched[0] != 9.0) {
        fprintf(stderr, "an unknown estimator should be refused\n");
        status = 1;
    } else {
        printf("ppo: refused: %s\n", frognano_error_message(error));
    }
    frognano_error_free(error);

    /* Learnability: tasks solved about half the time teach the most. */
    printf("learnability (target 0.5):");
    const double rates[5] = {0.0, 0.25, 0.5, 0.75, 1.0};
    double scores[5] = {0};
    for (int i = 0; i < 5; i++) {
        error = frognano_learnability(rates[i], 0.5, &scores[i]);
        if (error != NULL) {
            report_error("frognano_learnability", error);
            return 1;
        }
        printf(" p=%.2f: %.2f%s", rates[i], scores[i], i < 4 ? "," : "\n");
    }
    if (fabs(scores[2] - 1.0) > 1e-12 || fabs(scores[1] - 0.75) > 1e-12) {
        fprintf(stderr, "unexpected learnability\n");
        status = 1;
    }
    double never_written = -1.0;
    error = frognano_learnability(0.5, 1.0, &never_written);
    if (error == NULL || frognano_error_code(error) != FROGNANO_ERROR_CODE_INVALID_OPTION ||
        never_written != -1.0) {
        fprintf(stderr, "a target of 1 should be refused\n");
        status = 1;
    } else {
        printf("target 1: refused: %s\n", frognano_error_message(error));
    }
    frognano_error_free(error);
    return status;
}

/* Writes `text` into `out` (of `size` bytes) as the inside of a JSON string. Returns false when
 * it does not fit. */
static bool json_escape(const char *text, char *out, size_t size) {
    size_t n = 0;
    for (const char *p = text; *p != '\0'; p++) {
        char c = *p;
        if (c == '"' || c == '\\') {
            if (n + 2 >= size) {
                return false;
            }
            out[n++] = '\\';
            out[n++] = c;
        } else if ((unsigned char)c >= 0x20) {
            if (n + 1 >= size) {
                return false;
            }
            out[n++] = c;
        }
    }
    if (n >= size) {
        return false;
    }
    out[n] = '\0';
    return true;
}

/* Part 2: a tiny training run. Returns the exit status. */
static int training_demo(const FrognanoSandbox *sandbox, const char *repo) {
    char escaped[1024];
    if (!json_escape(repo, escaped, sizeof escaped)) {
        fprintf(stderr, "repository path too long\n");
        return 2;
    }
    char config[2048];
    snprintf(config, sizeof config,
             "{\"repos\": [\"%s\"], \"curriculum\": \"static\", \"iterations\": 1, "
             "\"seed\": 1, \"held_out\": 2, \"static_tasks\": 3, "
             "\"trainer\": {\"tasks_per_iteration\": 2, \"group_size\": 2, "
             "\"estimator\": \"rloo\"}}",
             escaped);

    /* Synthesizes the held-out set and the static curriculum's tasks (seconds). */
    FrognanoTrainer *trainer = NULL;
    FrognanoError *error = frognano_trainer_new(sandbox, config, &trainer);
    if (error != NULL) {
        return report_error("creating the trainer", error);
    }
    printf("trainer: static curriculum of 3 tasks from %s, 2 held out\n", repo);

    char *metrics = NULL;
    error = frognano_trainer_iterate(trainer, &metrics);
    if (error != NULL) {
        frognano_trainer_free(trainer);
        return report_error("iterate", error);
    }
    double rollouts = -1, resolved_rate = -1, groups = -1, zero_variance = -1;
    json_number(metrics, "rollouts", &rollouts);
    json_number(metrics, "resolved_rate", &resolved_rate);
    json_number(metrics, "groups", &groups);
    json_number(metrics, "zero_variance_groups", &zero_variance);
    printf("iteration 0: %.0f rollouts, resolved rate %.2f, %.0f groups (%.0f without signal)\n",
           rollouts, resolved_rate, groups, zero_variance);
    frognano_string_free(metrics);
    int status = rollouts == 4.0 ? 0 : 1;

    /* A checkpoint in a fresh temporary file, then resumed: the iteration count survives. */
    const char *tmpdir = getenv("TMPDIR");
    char checkpoint[1024];
    snprintf(checkpoint, sizeof checkpoint, "%s/frognano-checkpoint-XXXXXX",
             tmpdir != NULL && tmpdir[0] != '\0' ? tmpdir : "/tmp");
    int fd = mkstemp(checkpoint);
    if (fd < 0) {
        perror("mkstemp");
        frognano_trainer_free(trainer);
        return 2;
    }
    close(fd);
    error = frognano_trainer_save_checkpoint(trainer, checkpoint);
    if (error == NULL) {
        error = frognano_trainer_resume(trainer, checkpoint);
    }
    remove(checkpoint);
    if (error != NULL) {
        frognano_trainer_free(trainer);
        return report_error("checkpoint", error);
    }
    size_t iteration = frognano_trainer_iteration(trainer);
    printf("checkpoint saved and resumed: iteration %zu\n", iteration);
    if (iteration != 1) {
        status = 1;
    }

    char *state = NULL;
    error = frognano_trainer_policy_json(trainer, &state);
    if (error != NULL) {
        frognano_trainer_free(trainer);
        return report_error("policy state", error);
    }
    double updates = -1;
    json_number(state, "updates", &updates);
    printf("policy: %.0f update(s), %zu bytes of JSON state\n", updates, strlen(state));
    frognano_string_free(state);

    /* The greedy policy with the current weights on the held-out tasks. */
    char *summary = NULL;
    error = frognano_trainer_evaluate(trainer, &summary);
    frognano_trainer_free(trainer);
    if (error != NULL) {
        return report_error("evaluate", error);
    }
    double episodes = -1;
    json_number(summary, "episodes", &episodes);
    if (episodes != 2.0) {
        fprintf(stderr, "expected 2 held-out episodes\n");
        status = 1;
    }
    printf("held-out: %s\n", summary);
    frognano_string_free(summary);
    return status;
}

int main(int argc, char **argv) {
    int arg = 1;
    bool train = !take_flag(argc, argv, &arg, "--skip-training");
    const char *repo = arg < argc ? argv[arg] : "examples/repos/textkit";

    int status = advantages_demo();
    if (status != 0) {
        return status;
    }

    /* NULL selects the default image. */
    FrognanoSandbox *sandbox = NULL;
    FrognanoError *error = frognano_sandbox_new(getenv("FROGNANO_IMAGE"), &sandbox);
    if (error != NULL) {
        return report_error("creating the sandbox", error);
    }

    /* A configuration is read strictly: a misspelt key is refused before anything runs. */
    FrognanoTrainer *trainer = NULL;
    error = frognano_trainer_new(sandbox, "{\"iteration\": 1}", &trainer);
    if (error == NULL || frognano_error_code(error) != FROGNANO_ERROR_CODE_CONFIG ||
        trainer != NULL) {
        fprintf(stderr, "a configuration with an unknown key should be refused\n");
        status = 1;
    } else {
        printf("misspelt key: refused: %s\n", frognano_error_message(error));
    }
    frognano_error_free(error);
    frognano_trainer_free(trainer);

    if (status == 0 && train) {
        status = training_demo(sandbox, repo);
    }
    frognano_sandbox_free(sandbox);
    return status;
}
