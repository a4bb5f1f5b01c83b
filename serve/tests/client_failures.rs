//! How `HttpPolicy` meets a server that misbehaves: each fault below is served for real over
//! loopback by a small axum server whose handler picks its behaviour from the episode's first
//! observation, so one `act` call can mix healthy and failing episodes.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use frognano_core::{Action, Observation, PolicyContext};
use frognano_serve::{HttpPolicy, HttpPolicyConfig, ServeError};
use serde_json::{Value, json};

#[derive(Default)]
struct Faults {
    /// Requests seen per behaviour.
    flaky_seen: AtomicUsize,
    requests: AtomicUsize,
}

fn chat_reply(text: &str) -> Value {
    json!({
        "id": "x",
        "object": "chat.completion",
        "model": "m",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "finish_reason": "stop",
            "logprobs": {"content": [
                {"token": "token_id:11", "logprob": -0.25},
                {"token": "token_id:12", "logprob": -0.5}
            ]}
        }],
        "prompt_token_ids": [1, 2, 3],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
    })
}

async fn chat(State(faults): State<Arc<Faults>>, body: String) -> Response {
    faults.requests.fetch_add(1, Ordering::SeqCst);
    let request: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let first = request["messages"][1]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    match first.as_str() {
        "flaky" => {
            // Two 503s, then an answer.
            if faults.flaky_seen.fetch_add(1, Ordering::SeqCst) < 2 {
                (StatusCode::SERVICE_UNAVAILABLE, "busy").into_response()
            } else {
                axum::Json(chat_reply("submit")).into_response()
            }
        }
        "always-500" => (
            StatusCode::INTERNAL_SERVER_ERROR,
            axum::Json(json!({"error": {"message": "the model crashed"}})),
        )
            .into_response(),
        "malformed" => (StatusCode::OK, "{\"choices\": [ this is not json").into_response(),
        "never-ends" => {
            // Headers, then a body that never finishes.
            let stream = futures_util::stream::unfold((), |()| async {
                tokio::time::sleep(Duration::from_millis(200)).await;
                Some((
                    Ok::<_, std::io::Error>(axum::body::Bytes::from_static(b" ")),
                    (),
                ))
            });
            Response::new(Body::from_stream(stream))
        }
        "enormous" => {
            // 64 MiB of one JSON string, sent without a length.
            let chunk = axum::body::Bytes::from(vec![b'a'; 1 << 20]);
            let head = futures_util::stream::iter([Ok::<_, std::io::Error>(
                axum::body::Bytes::from_static(b"{\"choices\": [{\"message\": {\"content\": \""),
            )]);
            let tail = futures_util::stream::iter((0..64).map(move |_| Ok(chunk.clone())));
            Response::new(Body::from_stream(futures_util::StreamExt::chain(
                head, tail,
            )))
        }
        _ => axum::Json(chat_reply("submit")).into_response(),
    }
}

async fn models() -> axum::Json<Value> {
    axum::Json(json!({"object": "list", "data": [{"id": "m", "object": "model"}]}))
}

/// A running fault server and the runtime that drives it.
struct FaultServer {
    url: String,
    faults: Arc<Faults>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl FaultServer {
    fn start() -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let faults = Arc::new(Faults::default());
        let app = Router::new()
            .route("/v1/models", get(models))
            .route("/v1/chat/completions", post(chat))
            .with_state(faults.clone());
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        runtime.spawn(async move { axum::serve(listener, app).await });
        FaultServer {
            url: format!("http://{addr}/v1"),
            faults,
            runtime: Some(runtime),
        }
    }

    /// Stops the server: its socket closes and in-flight connections drop.
    fn kill(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_timeout(Duration::from_secs(1));
        }
    }
}

fn context(first_observation: &str) -> PolicyContext {
    PolicyContext {
        task_id: first_observation.into(),
        initial: Observation {
            text: first_observation.into(),
            ..Observation::default()
        },
        history: Vec::new(),
    }
}

fn config(url: &str) -> HttpPolicyConfig {
    HttpPolicyConfig {
        timeout_s: 2.0,
        connect_timeout_s: 2.0,
        retries: 3,
        backoff_s: 0.05,
        max_reply_bytes: 1 << 20,
        ..HttpPolicyConfig::new(url, "m")
    }
}

#[test]
fn healthy_replies_become_actions_with_logprobs_and_ids() {
    let server = FaultServer::start();
    let mut policy = HttpPolicy::connect(config(&server.url)).expect("connect");
    let outputs = policy.reply(&[context("fine")]).expect("reply");
    assert_eq!(
        outputs[0].action,
        Action::Text {
            text: "submit".into()
        }
    );
    assert_eq!(outputs[0].logprobs, vec![-0.25, -0.5]);
    assert_eq!(outputs[0].token_ids, Some(vec![11, 12]));
    assert_eq!(outputs[0].prompt_ids, Some(vec![1, 2, 3]));
    assert_eq!(outputs[0].error, None);
}

#[test]
fn a_server_that_is_not_running_is_a_clear_error_or_failed_episodes() {
    // A port that was free a moment ago.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port")
        .port();
    let url = format!("http://127.0.0.1:{port}/v1");
    let started = Instant::now();
    let error = HttpPolicy::connect(config(&url)).expect_err("nothing listens");
    assert!(matches!(error, ServeError::Connect { .. }), "{error}");
    assert!(error.to_string().contains(&url), "{error}");
    let mut policy = HttpPolicy::new(config(&url)).expect("policy");
    let outputs = policy.reply(&[context("a"), context("b")]).expect("reply");
    assert!(outputs.iter().all(|o| {
        o.error
            .as_deref()
            .is_some_and(|e| e.contains("cannot reach"))
    }));
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[test]
fn a_wrong_model_name_names_what_the_server_serves() {
    let server = FaultServer::start();
    let error = HttpPolicy::connect(HttpPolicyConfig {
        model: "gpt-none".into(),
        ..config(&server.url)
    })
    .expect_err("wrong model");
    let text = error.to_string();
    assert!(
        text.contains("gpt-none") && text.contains("serves: m"),
        "{text}"
    );
}

#[test]
fn server_errors_are_retried_until_one_succeeds() {
    let server = FaultServer::start();
    let mut policy = HttpPolicy::new(config(&server.url)).expect("policy");
    let outputs = policy.reply(&[context("flaky")]).expect("reply");
    assert_eq!(outputs[0].error, None, "{:?}", outputs[0].error);
    assert_eq!(
        outputs[0].decision.as_ref().map(|d| d["attempts"].clone()),
        Some(json!(3))
    );
    // A server that keeps failing fails the episode after the retries, with its message.
    let outputs = policy.reply(&[context("always-500")]).expect("reply");
    let error = outputs[0].error.as_deref().unwrap_or_default();
    assert!(
        error.contains("500") && error.contains("the model crashed"),
        "{error}"
    );
}

#[test]
fn bad_replies_fail_their_episode_and_the_others_go_on() {
    let server = FaultServer::start();
    let mut policy = HttpPolicy::new(config(&server.url)).expect("policy");
    let started = Instant::now();
    let outputs = policy
        .reply(&[
            context("fine"),
            context("malformed"),
            context("never-ends"),
            context("enormous"),
            context("fine"),
        ])
        .expect("reply");
    let errors: Vec<Option<&str>> = outputs.iter().map(|o| o.error.as_deref()).collect();
    assert_eq!(errors[0], None);
    assert_eq!(errors[4], None);
    assert!(
        errors[1].is_some_and(|e| e.contains("not JSON")),
        "{errors:?}"
    );
    assert!(
        errors[2].is_some_and(|e| e.contains("did not answer within")),
        "{errors:?}"
    );
    assert!(
        errors[3].is_some_and(|e| e.contains("larger than")),
        "{errors:?}"
    );
    // The stalled request is bounded: its timeout and retries, not forever.
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn a_server_killed_mid_episode_fails_the_next_step_without_a_hang() {
    let mut server = FaultServer::start();
    let mut policy = HttpPolicy::new(config(&server.url)).expect("policy");
    let first = policy
        .reply(&[context("fine"), context("fine")])
        .expect("reply");
    assert!(first.iter().all(|o| o.error.is_none()));
    let asked = server.faults.requests.load(Ordering::SeqCst);
    server.kill();
    let started = Instant::now();
    let next = policy
        .reply(&[context("fine"), context("fine")])
        .expect("reply");
    assert!(next.iter().all(|o| o.error.is_some()), "{next:?}");
    assert!(started.elapsed() < Duration::from_secs(20));
    assert_eq!(asked, 2);
}
