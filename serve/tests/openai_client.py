"""The official `openai` Python client against a running `frognano serve`.

Usage: FROGNANO_SERVE_URL=http://127.0.0.1:8000/v1 [FROGNANO_SERVE_MODEL=name] python openai_client.py

Checks chat and plain completions, streaming (the deltas add up to the non-streamed reply with
greedy decoding), log-probs (one finite value per completion token), vLLM's token-id extension
through `extra_body`, and an error reply; exits non-zero on the first failure.
"""

import math
import os
import sys

import openai


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def main():
    base_url = os.environ.get("FROGNANO_SERVE_URL")
    if not base_url:
        print("set FROGNANO_SERVE_URL to the server's /v1 URL", file=sys.stderr)
        return 2
    client = openai.OpenAI(
        base_url=base_url,
        api_key=os.environ.get("FROGNANO_SERVE_API_KEY", "unused"),
        timeout=120,
        max_retries=0,
    )
    models = client.models.list()
    model = os.environ.get("FROGNANO_SERVE_MODEL") or models.data[0].id
    check(any(m.id == model for m in models.data), f"{model} not in {models.data}")
    messages = [{"role": "user", "content": "Say hello."}]

    chat = client.chat.completions.create(
        model=model, messages=messages, max_tokens=8, temperature=0, logprobs=True, top_logprobs=0
    )
    choice = chat.choices[0]
    check(isinstance(choice.message.content, str), "chat content is not a string")
    check(choice.finish_reason in ("stop", "length"), f"finish reason {choice.finish_reason}")
    entries = choice.logprobs.content
    check(len(entries) == chat.usage.completion_tokens, "one log-prob per completion token")
    check(all(math.isfinite(e.logprob) and e.logprob <= 0 for e in entries), "bad log-probs")
    check(
        chat.usage.total_tokens == chat.usage.prompt_tokens + chat.usage.completion_tokens,
        "usage does not add up",
    )

    pieces = []
    finish = None
    for chunk in client.chat.completions.create(
        model=model, messages=messages, max_tokens=8, temperature=0, stream=True
    ):
        if chunk.choices:
            delta = chunk.choices[0].delta
            if delta.content:
                pieces.append(delta.content)
            finish = chunk.choices[0].finish_reason or finish
    check("".join(pieces) == choice.message.content, "streamed chat differs from the reply")
    check(finish == choice.finish_reason, "streamed finish reason differs")

    completion = client.completions.create(
        model=model,
        prompt="def add(a, b):",
        max_tokens=6,
        temperature=0,
        logprobs=1,
        extra_body={"return_token_ids": True},
    )
    choice = completion.choices[0]
    check(isinstance(choice.text, str), "completion text is not a string")
    logprobs = choice.logprobs.token_logprobs
    check(len(logprobs) == completion.usage.completion_tokens, "completion log-probs")
    check(all(math.isfinite(lp) for lp in logprobs), "completion log-probs are not finite")
    token_ids = (choice.model_extra or {}).get("token_ids")
    check(token_ids is not None and len(token_ids) == len(logprobs), "token_ids missing")

    streamed = "".join(
        c.choices[0].text
        for c in client.completions.create(
            model=model, prompt="def add(a, b):", max_tokens=6, temperature=0, stream=True
        )
        if c.choices
    )
    check(streamed == choice.text, "streamed completion differs from the reply")

    try:
        client.chat.completions.create(model="no-such-model", messages=messages, max_tokens=2)
    except openai.NotFoundError:
        pass
    else:
        raise AssertionError("an unknown model must be a 404")

    print("openai client: all checks passed")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except AssertionError as failure:
        print(f"openai client check failed: {failure}", file=sys.stderr)
        sys.exit(1)
