/*
 * Helpers shared by the C examples: error reporting, command-line flags and the oracle
 * evaluation. Static inline functions, so each example includes this header and compiles on
 * its own (`#include "example_util.h"` is found next to the example; no extra -I needed).
 */

#ifndef FROGNANO_EXAMPLE_UTIL_H
#define FROGNANO_EXAMPLE_UTIL_H

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "frognano.h"

/* Prints an error with a context, frees it, and returns 2 (the error exit status). */
static inline int report_error(const char *context, FrognanoError *error) {
    fprintf(stderr, "%s: error %d: %s\n", context, (int)frognano_error_code(error),
            frognano_error_message(error));
    frognano_error_free(error);
    return 2;
}

/* Whether `error` is an error of kind `code` (never true of NULL); frees it. */
static inline bool take_error_of(FrognanoError *error, FrognanoErrorCode code) {
    bool matches = frognano_error_code(error) == code;
    frognano_error_free(error);
    return matches;
}

/* Consumes the option `flag` when it is the argument at `*arg`: returns whether it was. */
static inline bool take_flag(int argc, char **argv, int *arg, const char *flag) {
    if (*arg < argc && strcmp(argv[*arg], flag) == 0) {
        (*arg)++;
        return true;
    }
    return false;
}

/* Rolls out the oracle policy (it applies each task's gold patch) over every task of a set,
 * one worker per CPU, and prints the summary JSON. Returns the exit status: 0 when the oracle
 * resolved every task, 1 when it did not, 2 on an error. */
static inline int evaluate_oracle(const FrognanoSandbox *sandbox, const FrognanoTaskSet *tasks) {
    char *summary = NULL;
    /* 0 workers: one per CPU. */
    FrognanoError *error = frognano_evaluate(sandbox, tasks, "oracle", 0, &summary);
    if (error != NULL) {
        return report_error("evaluate", error);
    }
    printf("oracle: %s\n", summary);
    int status = 0;
    if (strstr(summary, "\"resolved_rate\":1.0") == NULL) {
        fprintf(stderr, "the oracle did not resolve every task\n");
        status = 1;
    }
    frognano_string_free(summary);
    return status;
}

#endif /* FROGNANO_EXAMPLE_UTIL_H */
