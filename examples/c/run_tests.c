/*
 * Runs a Python repository's pytest suite in a FrogNano sandbox and prints the results.
 *
 *   run_tests [REPO_DIR [PYTEST_ARG...]]     (REPO_DIR defaults to examples/repos/textkit)
 *
 * The image is the default one unless FROGNANO_IMAGE names another (e.g. python-3.12); the run's
 * wall-clock limit is 60 s unless FROGNANO_TIMEOUT_S gives another (runs under valgrind are
 * tens of times slower).
 * Exit status: 0 when the run passed, 1 when it did not, 2 on an error.
 *
 * Build (from the repository root, after `cargo build -p frognano-c`):
 *   gcc -std=c11 -I bindings-c/include examples/c/run_tests.c \
 *       -L target/debug -lfrognano -o run_tests
 *   LD_LIBRARY_PATH=target/debug ./run_tests examples/repos/textkit
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frognano.h"
#include "example_util.h"

/* Setup progress (only reported the first time on a machine, while the runtime is fetched
 * and compiled). May be called from another thread; fprintf is thread-safe. */
static void on_progress(const char *message, void *user_data) {
    (void)user_data;
    fprintf(stderr, "setup: %s\n", message);
}

/* An expected failure: running a directory that does not exist must give a repo error and
 * leave the out-parameter untouched. Returns 0 when the library behaves so. */
static int check_missing_repo(const FrognanoSandbox *sandbox) {
    FrognanoReport *report = NULL;
    FrognanoError *error = frognano_sandbox_run_tests(
        sandbox, "/nonexistent/frognano-example", NULL, NULL, 0, &report);
    if (error == NULL) {
        fprintf(stderr, "a missing directory was accepted\n");
        frognano_report_free(report);
        return 1;
    }
    int ok = frognano_error_code(error) == FROGNANO_ERROR_CODE_REPO && report == NULL;
    printf("expected error (code %d): %s\n", (int)frognano_error_code(error),
           frognano_error_message(error));
    frognano_error_free(error);
    return ok ? 0 : 1;
}

int main(int argc, char **argv) {
    const char *repo = argc > 1 ? argv[1] : "examples/repos/textkit";
    /* Extra arguments go to pytest (node ids, -k EXPR, ...). */
    const char *const *pytest_args = argc > 2 ? (const char *const *)(argv + 2) : NULL;
    size_t n_pytest_args = argc > 2 ? (size_t)(argc - 2) : 0;

    printf("frognano %s\n", frognano_version());

    /* NULL selects the default image. */
    const char *image = getenv("FROGNANO_IMAGE");
    FrognanoSandbox *sandbox = NULL;
    FrognanoError *error = frognano_sandbox_new_with_progress(image, on_progress, NULL, &sandbox);
    if (error != NULL) {
        return report_error("creating the sandbox", error);
    }
    printf("image %s\n", frognano_sandbox_image(sandbox));

    if (check_missing_repo(sandbox) != 0) {
        frognano_sandbox_free(sandbox);
        return 2;
    }

    /* NULL limits would take the repository's frognano.toml values; here they are explicit. */
    FrognanoLimits limits = frognano_limits_default();
    limits.timeout_s = 60.0;
    const char *timeout = getenv("FROGNANO_TIMEOUT_S");
    if (timeout != NULL) {
        char *end = NULL;
        double seconds = strtod(timeout, &end);
        if (end == timeout || *end != '\0' || !(seconds > 0.0)) {
            fprintf(stderr, "FROGNANO_TIMEOUT_S must be a positive number of seconds, got '%s'\n",
                    timeout);
            frognano_sandbox_free(sandbox);
            return 2;
        }
        limits.timeout_s = seconds;
    }

    FrognanoReport *report = NULL;
    error = frognano_sandbox_run_tests(sandbox, repo, &limits, pytest_args, n_pytest_args,
                                       &report);
    if (error != NULL) {
        frognano_sandbox_free(sandbox);
        return report_error(repo, error);
    }

    size_t count = frognano_report_test_count(report);
    for (size_t i = 0; i < count; i++) {
        printf("%-8s %s\n", frognano_report_test_outcome_name(report, i),
               frognano_report_test_id(report, i));
        const char *message = frognano_report_test_message(report, i);
        if (message != NULL) {
            printf("    %s\n", message);
        }
    }
    const char *detail = frognano_report_detail(report);
    if (detail != NULL) {
        printf("detail: %s\n", detail);
    }

    char *json = NULL;
    error = frognano_report_to_json(report, &json);
    if (error != NULL) {
        frognano_report_free(report);
        frognano_sandbox_free(sandbox);
        return report_error("serialising the report", error);
    }
    printf("json: %zu bytes\n", strlen(json));
    frognano_string_free(json);

    printf("%s: %zu passed, %zu failed, %zu errors, %zu skipped, %zu xfailed, %zu xpassed "
           "in %.2f s\n",
           frognano_report_outcome_name(report), frognano_report_passed(report),
           frognano_report_failed(report), frognano_report_errors(report),
           frognano_report_skipped(report), frognano_report_xfailed(report),
           frognano_report_xpassed(report), frognano_report_duration_s(report));

    int status = frognano_report_outcome(report) == FROGNANO_RUN_OUTCOME_PASSED ? 0 : 1;
    frognano_report_free(report);
    frognano_sandbox_free(sandbox);
    return status;
}
