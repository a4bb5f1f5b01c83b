//! `frognano serve` on the tiny random model: both generation endpoints, streaming against the
//! non-streamed reply, log-probs and token ids, seeds alone and batched, batching under
//! concurrency, the error replies, graceful shutdown, weight reloads (refused unless allowed),
//! and the official `openai` Python client.

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use frognano_llm::{ChatMessage, TextCodec, assets};
use frognano_serve::server::{ServerConfig, ServerHandle, ServerStats, start};
use serde_json::{Value, json};

const MODEL_NAME: &str = "tiny-test";

/// The tiny model's fp32 folder, made once per test binary.
fn tiny() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        assets::tiny_model(&|m| eprintln!("tiny: {m}"))
            .expect("tiny model")
            .join("fp32")
    })
}

fn config() -> ServerConfig {
    ServerConfig {
        served_model_name: Some(MODEL_NAME.into()),
        port: 0,
        max_request_bytes: 64 * 1024,
        default_max_tokens: 16,
        intra_threads: 1,
        ..ServerConfig::new(tiny())
    }
}

/// The server most tests share.
fn shared() -> &'static ServerHandle {
    static SERVER: OnceLock<ServerHandle> = OnceLock::new();
    SERVER.get_or_init(|| ServerHandle::spawn(config()).expect("start the server"))
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(120))
        .build()
        .expect("client")
}

async fn post(url: &str, body: Value) -> (u16, Value) {
    let response = client().post(url).json(&body).send().await.expect("send");
    let status = response.status().as_u16();
    let body = response.json::<Value>().await.expect("JSON reply");
    (status, body)
}

/// The JSON the server answers a GET of `path` (under its API root) with.
async fn get_json(server: &ServerHandle, path: &str) -> Value {
    let response = client().get(format!("{}{path}", server.url())).send();
    response.await.expect("send").json().await.expect("JSON")
}

async fn chat(server: &ServerHandle, body: Value) -> (u16, Value) {
    post(&format!("{}/chat/completions", server.url()), body).await
}

async fn complete(server: &ServerHandle, body: Value) -> (u16, Value) {
    post(&format!("{}/completions", server.url()), body).await
}

/// The `data:` payloads of a server-sent event stream, `[DONE]` excluded; checks it ends so.
fn sse_payloads(text: &str) -> Vec<Value> {
    let data: Vec<&str> = text
        .split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .map(|e| e.strip_prefix("data: ").expect("a data event"))
        .collect();
    assert_eq!(data.last(), Some(&"[DONE]"), "stream must end with [DONE]");
    data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).expect("chunk JSON"))
        .collect()
}

async fn stream(url: &str, body: Value) -> Vec<Value> {
    let response = client().post(url).json(&body).send().await.expect("send");
    assert_eq!(response.status().as_u16(), 200);
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    assert!(
        content_type.starts_with("text/event-stream"),
        "{content_type}"
    );
    sse_payloads(&response.text().await.expect("body"))
}

/// The text of a completion streamed with `body` (`stream` set), its chunks' texts joined.
async fn streamed_text(server: &ServerHandle, mut body: Value) -> String {
    body["stream"] = json!(true);
    let chunks = stream(&format!("{}/completions", server.url()), body).await;
    chunks
        .iter()
        .filter_map(|c| c["choices"][0]["text"].as_str())
        .collect()
}

fn hello() -> Value {
    json!([{"role": "user", "content": "Say hello."}])
}

fn usage(reply: &Value, key: &str) -> usize {
    reply["usage"][key].as_u64().expect("usage") as usize
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_reply_has_text_usage_logprobs_and_token_ids() {
    let server = shared();
    let (status, reply) = chat(
        server,
        json!({
            "model": MODEL_NAME,
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": [{"type": "text", "text": "Say hello."}]},
            ],
            "max_tokens": 8,
            "temperature": 0,
            "logprobs": true,
            "top_logprobs": 1,
            "return_token_ids": true,
            "tools": [{"type": "function", "function": {"name": "ignored"}}],
        }),
    )
    .await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["object"], "chat.completion");
    assert_eq!(reply["model"], MODEL_NAME);
    let choice = &reply["choices"][0];
    assert_eq!(choice["message"]["role"], "assistant");
    assert!(choice["message"]["content"].is_string());
    let finish = choice["finish_reason"].as_str().expect("finish reason");
    assert!(finish == "stop" || finish == "length", "{finish}");
    let completion_tokens = usage(&reply, "completion_tokens");
    assert!((1..=8).contains(&completion_tokens));
    assert_eq!(
        usage(&reply, "total_tokens"),
        usage(&reply, "prompt_tokens") + completion_tokens
    );
    let logprobs = choice["logprobs"]["content"].as_array().expect("logprobs");
    assert_eq!(logprobs.len(), completion_tokens);
    for entry in logprobs {
        let logprob = entry["logprob"].as_f64().expect("a number");
        assert!(logprob.is_finite() && logprob <= 0.0, "{logprob}");
        assert!(entry["token"].is_string());
        assert_eq!(entry["top_logprobs"][0]["logprob"], entry["logprob"]);
    }
    let token_ids = choice["token_ids"].as_array().expect("token_ids");
    assert_eq!(token_ids.len(), completion_tokens);

    // The prompt ids are what the model's own tokenizer makes of the rendered chat.
    let codec = TextCodec::load(tiny()).expect("tokenizer");
    let rendered = codec
        .render_chat(
            &[
                ChatMessage::new("system", "Be brief."),
                ChatMessage::new("user", "Say hello."),
            ],
            true,
        )
        .expect("render");
    let expected = codec.encode(&rendered).expect("encode");
    assert_eq!(reply["prompt_token_ids"], json!(expected));
    assert_eq!(usage(&reply, "prompt_tokens"), expected.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completions_take_a_string_or_token_ids() {
    let server = shared();
    let request = |prompt: Value| {
        json!({
            "prompt": prompt,
            "max_tokens": 6,
            "temperature": 0,
            "logprobs": 0,
            "return_token_ids": true,
            "return_tokens_as_token_ids": true,
        })
    };
    // No `model`: the served one is meant.
    let (status, by_text) = complete(server, request(json!("def add(a, b):"))).await;
    assert_eq!(status, 200, "{by_text}");
    assert_eq!(by_text["object"], "text_completion");
    let choice = &by_text["choices"][0];
    let prompt_ids = choice["prompt_token_ids"].clone();
    let codec = TextCodec::load(tiny()).expect("tokenizer");
    assert_eq!(
        prompt_ids,
        json!(codec.encode("def add(a, b):").expect("encode"))
    );
    let token_ids = choice["token_ids"].as_array().expect("token ids");
    assert_eq!(token_ids.len(), usage(&by_text, "completion_tokens"));
    let logprobs = &choice["logprobs"];
    let tokens = logprobs["tokens"].as_array().expect("tokens");
    assert_eq!(tokens.len(), token_ids.len());
    for (label, id) in tokens.iter().zip(token_ids) {
        assert_eq!(label.as_str(), Some(format!("token_id:{id}").as_str()));
    }
    assert_eq!(
        logprobs["token_logprobs"].as_array().map(Vec::len),
        Some(token_ids.len())
    );
    assert_eq!(
        logprobs["text_offset"].as_array().map(Vec::len),
        Some(token_ids.len())
    );

    let (status, by_ids) = complete(server, request(prompt_ids.clone())).await;
    assert_eq!(status, 200, "{by_ids}");
    assert_eq!(by_ids["choices"][0]["text"], choice["text"]);
    assert_eq!(by_ids["choices"][0]["token_ids"], choice["token_ids"]);
    // A batch of one prompt is accepted too.
    let (status, nested) = complete(server, request(json!([prompt_ids]))).await;
    assert_eq!(status, 200, "{nested}");
    assert_eq!(nested["choices"][0]["text"], choice["text"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_deltas_add_up_to_the_reply() {
    let server = shared();
    for seeded in [false, true] {
        let sampling = if seeded {
            json!({"temperature": 1.0, "top_p": 0.9, "seed": 7})
        } else {
            json!({"temperature": 0})
        };
        let mut body = json!({
            "messages": hello(),
            "max_tokens": 12,
            "logprobs": true,
            "return_token_ids": true,
            "stream_options": {"include_usage": true},
        });
        for (key, value) in sampling.as_object().expect("object") {
            body[key] = value.clone();
        }
        let (status, whole) = chat(server, body.clone()).await;
        assert_eq!(status, 200, "{whole}");
        body["stream"] = json!(true);
        let chunks = stream(&format!("{}/chat/completions", server.url()), body).await;
        assert_eq!(chunks[0]["object"], "chat.completion.chunk");
        assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
        assert_eq!(chunks[0]["prompt_token_ids"], whole["prompt_token_ids"]);
        let mut text = String::new();
        let mut logprobs = Vec::new();
        let mut token_ids = Vec::new();
        let mut finish = None;
        let mut usage_seen = None;
        for chunk in &chunks {
            if let Some(u) = chunk.get("usage").filter(|u| !u.is_null()) {
                usage_seen = Some(u.clone());
                continue;
            }
            let choice = &chunk["choices"][0];
            if let Some(content) = choice["delta"]["content"].as_str() {
                text.push_str(content);
            }
            if let Some(entries) = choice["logprobs"]["content"].as_array() {
                logprobs.extend(entries.iter().map(|e| e["logprob"].clone()));
            }
            if let Some(ids) = choice["token_ids"].as_array() {
                token_ids.extend(ids.iter().cloned());
            }
            if let Some(reason) = choice["finish_reason"].as_str() {
                finish = Some(reason.to_string());
            }
        }
        let choice = &whole["choices"][0];
        assert_eq!(Some(text.as_str()), choice["message"]["content"].as_str());
        assert_eq!(finish.as_deref(), choice["finish_reason"].as_str());
        assert_eq!(json!(token_ids), choice["token_ids"]);
        let expected: Vec<Value> = choice["logprobs"]["content"]
            .as_array()
            .expect("logprobs")
            .iter()
            .map(|e| e["logprob"].clone())
            .collect();
        assert_eq!(logprobs, expected);
        assert_eq!(usage_seen, Some(whole["usage"].clone()));
    }

    // Completions stream too.
    let body = json!({"prompt": "hello", "max_tokens": 10, "temperature": 0});
    let (_, whole) = complete(server, body.clone()).await;
    let text = streamed_text(server, body).await;
    assert_eq!(Some(text.as_str()), whole["choices"][0]["text"].as_str());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_strings_cut_the_reply_streamed_or_not() {
    let server = shared();
    let body =
        json!({"prompt": "once upon", "max_tokens": 16, "temperature": 0, "ignore_eos": true});
    let (_, full) = complete(server, body.clone()).await;
    let text = full["choices"][0]["text"]
        .as_str()
        .expect("text")
        .to_string();
    let chars: Vec<char> = text.chars().collect();
    if chars.len() < 6 {
        // Too little text to cut in two; nothing to check.
        return;
    }
    let stop: String = chars[chars.len() / 2..chars.len() / 2 + 2].iter().collect();
    let cut = &text[..text.find(&stop).expect("stop occurs")];
    let mut stopped = body;
    stopped["stop"] = json!([stop]);
    let (_, reply) = complete(server, stopped.clone()).await;
    assert_eq!(reply["choices"][0]["text"], cut);
    assert_eq!(reply["choices"][0]["finish_reason"], "stop");
    assert_eq!(streamed_text(server, stopped).await, cut);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seed_gives_the_same_reply_alone_and_batched() {
    let server = ServerHandle::spawn(ServerConfig {
        batch_window_ms: 200,
        ..config()
    })
    .expect("start");
    let body = |seed: u64, prompt: &str| {
        json!({
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": 10,
            "temperature": 1.0,
            "top_k": 40,
            "seed": seed,
            "ignore_eos": true,
        })
    };
    let (_, alone) = chat(&server, body(42, "Tell me a story.")).await;
    let (_, again) = chat(&server, body(42, "Tell me a story.")).await;
    assert_eq!(alone["choices"][0], again["choices"][0]);
    let before = server.stats();
    let requests = [
        body(1, "Hi"),
        body(42, "Tell me a story."),
        body(
            3,
            "A much longer prompt than the others, to make the rows uneven in length.",
        ),
        body(4, "x"),
    ];
    let replies =
        futures_util::future::join_all(requests.into_iter().map(|b| chat(&server, b))).await;
    let after = server.stats();
    assert!(
        after.largest_batch > 1,
        "the four requests should have shared a batch: {before:?} -> {after:?}"
    );
    assert_eq!(replies[1].1["choices"][0], alone["choices"][0]);
    server.stop().expect("stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_are_batched() {
    let server = ServerHandle::spawn(ServerConfig {
        batch_window_ms: 50,
        ..config()
    })
    .expect("start");
    let requests = (0..8).map(|i| {
        json!({
            "messages": [{"role": "user", "content": format!("request {i}")}],
            "max_tokens": 8,
            "temperature": 0,
        })
    });
    let replies = futures_util::future::join_all(requests.map(|b| chat(&server, b))).await;
    for (status, reply) in &replies {
        assert_eq!(*status, 200, "{reply}");
    }
    let response = client()
        .get(format!("{}/frognano/stats", server.url()))
        .send()
        .await
        .expect("stats");
    let stats: ServerStats = response.json().await.expect("stats JSON");
    assert_eq!(stats.requests, 8);
    assert_eq!(stats.batched_requests, 8);
    assert!(stats.mean_batch_size > 1.0, "{stats:?}");
    assert!(stats.generated_tokens >= 8, "{stats:?}");
    server.stop().expect("stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_openai_shaped_errors() {
    let server = shared();
    let error_code = |reply: &Value| reply["error"]["code"].as_str().unwrap_or("").to_string();
    let (status, reply) = chat(server, json!({"model": "gpt-4o", "messages": hello()})).await;
    assert_eq!(status, 404);
    assert_eq!(error_code(&reply), "model_not_found");
    assert!(reply["error"]["message"].is_string());
    assert!(reply["error"]["type"].is_string());

    let (status, reply) = chat(server, json!({"messages": hello(), "n": 2})).await;
    assert_eq!(status, 400, "{reply}");
    let (status, _) = chat(server, json!({"messages": hello(), "temperature": -1})).await;
    assert_eq!(status, 400);
    let (status, _) = chat(server, json!({"messages": "not a list"})).await;
    assert_eq!(status, 400);
    let (status, _) = chat(server, json!({"messages": []})).await;
    assert_eq!(status, 400);
    let (status, _) = complete(server, json!({"prompt": ["a", "b"]})).await;
    assert_eq!(status, 400);
    let (status, _) = complete(server, json!({"prompt": [1, -2]})).await;
    assert_eq!(status, 400);
    let (status, _) = complete(server, json!({"prompt": [u32::MAX]})).await;
    assert_eq!(status, 400);

    let models = get_json(server, "/models").await;
    assert_eq!(models["data"][0]["id"], MODEL_NAME);
    let context = models["data"][0]["max_model_len"]
        .as_u64()
        .expect("context");
    let (status, reply) = complete(server, json!({"prompt": vec![1u32; context as usize]})).await;
    assert_eq!(status, 400);
    assert_eq!(error_code(&reply), "context_length_exceeded");

    for malformed in ["{\"messages\": [", "[]", ""] {
        let response = client()
            .post(format!("{}/chat/completions", server.url()))
            .header("content-type", "application/json")
            .body(malformed)
            .send()
            .await
            .expect("send");
        assert_eq!(response.status().as_u16(), 400, "{malformed:?}");
        let reply: Value = response.json().await.expect("JSON error");
        assert!(reply["error"]["message"].is_string());
    }

    let huge = "x".repeat(128 * 1024);
    let response = client()
        .post(format!("{}/completions", server.url()))
        .json(&json!({"prompt": huge}))
        .send()
        .await
        .expect("send");
    assert_eq!(response.status().as_u16(), 413);
    let reply: Value = response.json().await.expect("JSON error");
    assert_eq!(error_code(&reply), "request_too_large");

    // The server is still fine.
    let (status, _) = chat(server, json!({"messages": hello(), "max_tokens": 2})).await;
    assert_eq!(status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_key_is_required_when_configured() {
    let server = ServerHandle::spawn(ServerConfig {
        api_key: Some("sesame".into()),
        ..config()
    })
    .expect("start");
    let body = json!({"messages": hello(), "max_tokens": 2});
    let url = format!("{}/chat/completions", server.url());
    let missing = client().post(&url).json(&body).send().await.expect("send");
    assert_eq!(missing.status().as_u16(), 401);
    let reply: Value = missing.json().await.expect("JSON");
    assert_eq!(reply["error"]["code"], "invalid_api_key");
    // The status of the request sent with `key`.
    let status_with_key = async |key: &str| {
        let response = client().post(&url).bearer_auth(key).json(&body).send();
        response.await.expect("send").status().as_u16()
    };
    assert_eq!(status_with_key("sesame!").await, 401);
    let models = client()
        .get(format!("{}/models", server.url()))
        .send()
        .await
        .expect("send");
    assert_eq!(models.status().as_u16(), 401);
    assert_eq!(status_with_key("sesame").await, 200);
    server.stop().expect("stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_lets_in_flight_requests_finish() {
    let server = start(config()).await.expect("start");
    let url = server.url();
    let mut response = client()
        .post(format!("{url}/chat/completions"))
        .json(&json!({
            "messages": hello(),
            "max_tokens": 200,
            "temperature": 0,
            "ignore_eos": true,
            "stream": true,
        }))
        .send()
        .await
        .expect("send");
    assert_eq!(response.status().as_u16(), 200);
    let first = response
        .chunk()
        .await
        .expect("read")
        .expect("a first chunk");
    let shutdown = tokio::spawn(server.shutdown());
    let mut body = String::from_utf8_lossy(&first).into_owned();
    while let Some(chunk) = response.chunk().await.expect("read the rest") {
        body.push_str(&String::from_utf8_lossy(&chunk));
    }
    let chunks = sse_payloads(&body);
    let finish = chunks
        .iter()
        .rev()
        .find_map(|c| c["choices"][0]["finish_reason"].as_str());
    assert_eq!(finish, Some("length"));
    shutdown.await.expect("join").expect("graceful shutdown");
    // Nothing listens any more.
    let after = client()
        .get(format!("{url}/models"))
        .timeout(Duration::from_secs(5))
        .send()
        .await;
    assert!(after.is_err(), "the server still answers after shutdown");
}

/// The greedy reply's token ids to a fixed chat.
async fn greedy_ids(server: &ServerHandle) -> Vec<u64> {
    let (status, reply) = chat(
        server,
        json!({
            "messages": hello(),
            "max_tokens": 12,
            "temperature": 0,
            "ignore_eos": true,
            "return_token_ids": true,
        }),
    )
    .await;
    assert_eq!(status, 200, "{reply}");
    reply["choices"][0]["token_ids"]
        .as_array()
        .expect("token_ids")
        .iter()
        .map(|id| id.as_u64().expect("a token id"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reloads_are_refused_unless_allowed() {
    let server = shared();
    let (status, reply) = post(
        &format!("{}/frognano/reload", server.url()),
        json!({"model_dir": tiny()}),
    )
    .await;
    assert_eq!(status, 403, "{reply}");
    assert_eq!(reply["error"]["code"], "reload_not_allowed");
    assert!(reply["error"]["message"].is_string());
    let refused = frognano_serve::admin::reload_weights(&server.url(), None, tiny())
        .expect_err("not allowed");
    assert!(refused.to_string().contains("403"), "{refused}");
    assert_eq!(server.stats().reloads, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_serves_the_new_weights_and_a_bad_folder_changes_nothing() {
    // A second tiny model, same vocabulary, other weights.
    let other = tempfile::tempdir().expect("dir");
    let other_dir = other.path().to_path_buf();
    tokio::task::spawn_blocking(move || {
        assets::make_tiny_model(&other_dir, 7, &|m| eprintln!("tiny seed 7: {m}"))
    })
    .await
    .expect("join")
    .expect("the second tiny model");
    let other_fp32 = other.path().join("fp32");
    let expected = {
        let reference = ServerHandle::spawn(ServerConfig {
            model_dir: other_fp32.clone(),
            ..config()
        })
        .expect("start the reference server");
        let ids = greedy_ids(&reference).await;
        reference.stop().expect("stop");
        ids
    };

    let server = ServerHandle::spawn(ServerConfig {
        allow_reload: true,
        ..config()
    })
    .expect("start");
    let before = greedy_ids(&server).await;
    assert_ne!(
        before, expected,
        "the two tiny models should answer differently"
    );
    // A request in flight while the reload queues is answered (by one model or the other).
    let in_flight = {
        let url = format!("{}/chat/completions", server.url());
        tokio::spawn(async move {
            post(
                &url,
                json!({"messages": hello(), "max_tokens": 12, "temperature": 0}),
            )
            .await
        })
    };
    let url = server.url();
    let model_dir = other_fp32.clone();
    let answer = tokio::task::spawn_blocking(move || {
        frognano_serve::admin::reload_weights(&url, None, &model_dir)
    })
    .await
    .expect("join")
    .expect("reload");
    assert_eq!(answer["reloads"], 1, "{answer}");
    assert_eq!(
        answer["model_dir"].as_str(),
        Some(other_fp32.to_string_lossy().as_ref())
    );
    let (status, reply) = in_flight.await.expect("join");
    assert_eq!(status, 200, "{reply}");
    assert_eq!(greedy_ids(&server).await, expected);
    assert_eq!(server.stats().reloads, 1);

    // Folders that are not this model: 400, and the new weights keep serving.
    let reload_url = format!("{}/frognano/reload", server.url());
    let empty = tempfile::tempdir().expect("dir");
    let (status, reply) = post(&reload_url, json!({"model_dir": empty.path()})).await;
    assert_eq!(status, 400, "{reply}");
    assert!(
        reply["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("model.onnx")),
        "{reply}"
    );
    std::fs::write(empty.path().join("model.onnx"), b"not a model").expect("write");
    let (status, reply) = post(&reload_url, json!({"model_dir": empty.path()})).await;
    assert_eq!(status, 400, "{reply}");
    let (status, reply) = post(&reload_url, json!({"model_dir": 3})).await;
    assert_eq!(status, 400, "{reply}");
    assert_eq!(greedy_ids(&server).await, expected);
    let stats = get_json(&server, "/frognano/stats").await;
    assert_eq!(stats["reloads"], 1, "{stats}");
    assert_eq!(server.stats().failed_batches, 0);

    // Back to the first weights.
    let url = server.url();
    let answer = tokio::task::spawn_blocking(move || {
        frognano_serve::admin::reload_weights(&url, None, tiny())
    })
    .await
    .expect("join")
    .expect("reload");
    assert_eq!(answer["reloads"], 2, "{answer}");
    assert_eq!(greedy_ids(&server).await, before);
    server.stop().expect("stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_needs_the_api_key() {
    let server = ServerHandle::spawn(ServerConfig {
        api_key: Some("sesame".into()),
        allow_reload: true,
        ..config()
    })
    .expect("start");
    let (status, reply) = post(
        &format!("{}/frognano/reload", server.url()),
        json!({"model_dir": tiny()}),
    )
    .await;
    assert_eq!(status, 401, "{reply}");
    let url = server.url();
    let answer = tokio::task::spawn_blocking(move || {
        frognano_serve::admin::reload_weights(&url, Some("sesame"), tiny())
    })
    .await
    .expect("join")
    .expect("reload with the key");
    assert_eq!(answer["reloads"], 1, "{answer}");
    assert_eq!(server.stats().reloads, 1);
    server.stop().expect("stop");
}

#[test]
fn the_official_openai_client_works() {
    let env = assets::ensure_serving_env(&|m| eprintln!("serving env: {m}"))
        .expect("the serving environment");
    let server = shared();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/openai_client.py");
    let output = std::process::Command::new(&env.python)
        .arg(&script)
        .env("FROGNANO_SERVE_URL", server.url())
        .env("FROGNANO_SERVE_MODEL", server.model_name())
        .output()
        .expect("run the client script");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "openai_client.py failed:\n{stdout}\n{stderr}"
    );
}

/// A system prompt that leaves most of a small budget to the episode.
const SHORT_SYSTEM_PROMPT: &str = "Fix the bug.";

/// An episode of `turns` turns, each observation long enough to fill a small context.
fn long_episode(turns: usize) -> frognano_core::PolicyContext {
    use frognano_core::{Action, Observation, PolicyContext, Turn};
    PolicyContext {
        task_id: "t".into(),
        initial: Observation {
            text: "Fix the failing test of the parser.".into(),
            ..Observation::default()
        },
        history: (0..turns)
            .map(|i| Turn {
                action: Action::Text {
                    text: format!("view src/module_{i}.py"),
                },
                observation: Observation {
                    text: format!("line {i}: value = compute(x, y) + offset\n").repeat(6),
                    ..Observation::default()
                },
            })
            .collect(),
    }
}

#[test]
fn completions_prompts_are_fitted_to_max_prompt_tokens() {
    use frognano_core::Policy;
    use frognano_serve::{HttpApi, HttpPolicy, HttpPolicyConfig};
    let server = shared();
    let policy_with = |max_prompt_tokens: usize| {
        HttpPolicy::new(HttpPolicyConfig {
            api: HttpApi::Completions,
            chat_template_dir: Some(tiny().clone()),
            token_id_prompts: true,
            max_prompt_tokens,
            system_prompt: Some(SHORT_SYSTEM_PROMPT.into()),
            generation: frognano_llm::GenerationOptions::greedy(4),
            ..HttpPolicyConfig::new(server.url(), MODEL_NAME)
        })
        .expect("policy")
    };
    let context = long_episode(12);
    let unlimited = policy_with(0)
        .act(std::slice::from_ref(&context))
        .expect("act")
        .remove(0);
    let whole = unlimited.prompt_ids.expect("prompt ids").len();
    // Room for about half of the episode's turns.
    let budget = whole / 2;
    let fitted = policy_with(budget)
        .act(std::slice::from_ref(&context))
        .expect("act")
        .remove(0);
    assert!(fitted.error.is_none(), "{:?}", fitted.error);
    let ids = fitted.prompt_ids.expect("prompt ids");
    assert!(ids.len() <= budget, "{} > {budget}", ids.len());
    // The newest turns are kept: the prompt ends as the whole one does.
    let tail = 20;
    assert_eq!(ids[ids.len() - tail..], unlimited_tail(&context, tail)[..]);
    // Counting tokens needs the tokenizer that renders the prompt.
    let chat = HttpPolicy::new(HttpPolicyConfig {
        max_prompt_tokens: budget,
        ..HttpPolicyConfig::new(server.url(), MODEL_NAME)
    })
    .expect_err("chat API with a token budget");
    assert!(chat.to_string().contains("max_prompt_tokens"), "{chat}");
}

/// The last `n` prompt ids of `context` rendered whole with the tiny model's chat template.
fn unlimited_tail(context: &frognano_core::PolicyContext, n: usize) -> Vec<u32> {
    let codec = TextCodec::load(tiny()).expect("codec");
    let (_, ids) =
        frognano_llm::fitted_prompt(&codec, None, context, usize::MAX, 0).expect("render");
    ids[ids.len() - n..].to_vec()
}
