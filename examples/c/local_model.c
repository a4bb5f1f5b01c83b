/*
 * Runs a local language model from C: loads it, asks it a chat question greedily, and prints
 * the reply with the log-probability of its first tokens; then shows that a bad request is an
 * error object, not a crash.
 *
 *   local_model MODEL    (a model folder, e.g. one written by `frognano models tiny DIR`
 *                         (DIR/fp32), or a registry name such as smollm2-135m, fetched and
 *                         converted on first use)
 *
 * Requests and results are JSON text; this example reads the few fields it prints with a
 * minimal scanner (a real program would use a JSON library).
 * Exit status: 0 when everything behaved as expected, 1 when a result was unexpected, 2 on an
 * error.
 *
 * Build (from the repository root, after `cargo build -p frognano-c`):
 *   gcc -std=c11 -I bindings-c/include examples/c/local_model.c \
 *       -L target/debug -lfrognano -o local_model
 *   LD_LIBRARY_PATH=target/debug ./local_model DIR/fp32
 */

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frognano.h"
#include "example_util.h"

/* The text right after `"key":` in a JSON document, or NULL. */
static const char *json_value(const char *json, const char *key) {
    char pattern[64];
    snprintf(pattern, sizeof pattern, "\"%s\":", key);
    const char *found = strstr(json, pattern);
    return found == NULL ? NULL : found + strlen(pattern);
}

/* Prints a JSON string value (at `value`, its opening quote), decoding the common escapes;
 * other characters (UTF-8 included) are printed as they are. */
static void print_json_string(const char *value) {
    if (value == NULL || *value != '"') {
        return;
    }
    for (const char *c = value + 1; *c != '\0' && *c != '"'; c++) {
        if (*c != '\\') {
            putchar(*c);
            continue;
        }
        c++;
        switch (*c) {
        case 'n': putchar('\n'); break;
        case 't': putchar('\t'); break;
        case 'u':
            /* \uXXXX: printed as a placeholder to keep the scanner small. */
            fputs("\\u", stdout);
            break;
        case '\0': return;
        default: putchar(*c); break;
        }
    }
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL\n", argv[0]);
        return 2;
    }

    /* NULL options: one ONNX Runtime thread per core, the library found automatically. */
    FrognanoModel *model = NULL;
    FrognanoError *error = frognano_model_load(argv[1], NULL, &model);
    if (error != NULL) {
        return report_error("loading the model", error);
    }

    char *config = NULL;
    error = frognano_model_config_json(model, &config);
    if (error != NULL) {
        frognano_model_free(model);
        return report_error("model configuration", error);
    }
    const char *vocab = json_value(config, "vocab_size");
    printf("model: vocabulary of %ld tokens\n", vocab != NULL ? strtol(vocab, NULL, 10) : -1L);
    frognano_string_free(config);

    /* A chat request, greedy (temperature 0): the conversation is rendered with the model's
     * chat template. */
    const char *request =
        "{\"chat\": true,"
        " \"prompts\": [[{\"role\": \"user\","
        "               \"content\": \"Write a Python function that adds two numbers.\"}]],"
        " \"options\": {\"temperature\": 0, \"max_new_tokens\": 24}}";
    char *result = NULL;
    error = frognano_model_generate(model, request, &result);
    if (error != NULL) {
        frognano_model_free(model);
        return report_error("generate", error);
    }
    int status = 0;
    fputs("reply: ", stdout);
    print_json_string(json_value(result, "text"));
    putchar('\n');

    /* The first log-probabilities: one per generated token, each <= 0. */
    const char *logprobs = json_value(result, "logprobs");
    int shown = 0;
    if (logprobs != NULL && *logprobs == '[') {
        const char *cursor = logprobs + 1;
        fputs("first log-probs:", stdout);
        while (shown < 5 && *cursor != ']') {
            char *end = NULL;
            double logprob = strtod(cursor, &end);
            if (end == cursor) {
                break;
            }
            printf(" %.4f", logprob);
            if (logprob > 0.0) {
                status = 1;
            }
            shown++;
            cursor = end;
            while (*cursor == ',' || *cursor == ' ') {
                cursor++;
            }
        }
        putchar('\n');
    }
    const char *generated = json_value(result, "generated_tokens");
    printf("generated %ld tokens\n", generated != NULL ? strtol(generated, NULL, 10) : -1L);
    frognano_string_free(result);
    if (shown == 0) {
        fprintf(stderr, "no log-probabilities in the result\n");
        status = 1;
    }

    /* A bad request is an error object (the model stays usable): a negative temperature. */
    result = NULL;
    error = frognano_model_generate(
        model, "{\"prompts\": [\"x\"], \"options\": {\"temperature\": -1}}", &result);
    bool refused = error != NULL &&
                   frognano_error_code(error) == FROGNANO_ERROR_CODE_INVALID_OPTION &&
                   result == NULL;
    printf("bad request: %s\n", frognano_error_message(error));
    frognano_error_free(error);
    if (!refused) {
        fprintf(stderr, "the bad request was not refused as expected\n");
        status = 1;
    }

    frognano_model_free(model);
    return status;
}
