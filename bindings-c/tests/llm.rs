//! Local language models through the exported C functions (the `FrognanoModel` handle and
//! `frognano_evaluate` with an `onnx:` policy), on a tiny randomly initialised model made once
//! per test binary through the same conversion as the real ones.

use std::ffi::{CString, c_char};
use std::path::{Path, PathBuf};
use std::ptr;
use std::sync::OnceLock;

use frognano::*;
use serde_json::{Value, json};

mod common;
use common::{assert_ok, cstring, not_utf8, owned, take_error, take_json};

/// The tiny model's fp32 folder, made once per test binary.
fn tiny() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("frognano-c-tiny-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        frognano_policy::llm::assets::make_tiny_model(&dir, 0, &|m| eprintln!("tiny: {m}"))
            .expect("tiny model");
        dir.join("fp32")
    })
}

fn tiny_c() -> CString {
    cstring(tiny().to_str().expect("UTF-8 path"))
}

/// A loaded model, freed on drop.
struct Model(*mut FrognanoModel);

impl Drop for Model {
    fn drop(&mut self) {
        // SAFETY: the handle was returned by `frognano_model_load` and is freed exactly once.
        unsafe { frognano_model_free(self.0) };
    }
}

/// Loads a model (checking that `out` stays untouched on failure).
fn load(model: &str, options: Option<&str>) -> Result<Model, (FrognanoErrorCode, String)> {
    let model = cstring(model);
    let options = options.map(cstring);
    let mut out = ptr::null_mut();
    // SAFETY: valid strings (or NULL) and a valid out-pointer.
    let error = unsafe {
        frognano_model_load(
            model.as_ptr(),
            options.as_ref().map_or(ptr::null(), |o| o.as_ptr()),
            &mut out,
        )
    };
    owned(error, out).map(Model)
}

fn tiny_model() -> Model {
    load(
        tiny().to_str().expect("UTF-8"),
        Some(r#"{"intra_threads": 1}"#),
    )
    .expect("load")
}

/// Runs a generation request (checking that `out_json` stays untouched on failure).
fn generate(model: &Model, request: &str) -> Result<Value, (FrognanoErrorCode, String)> {
    let request = cstring(request);
    let mut out = ptr::null_mut();
    // SAFETY: a live model used by this thread only, a valid string and out-pointer.
    let error = unsafe { frognano_model_generate(model.0, request.as_ptr(), &mut out) };
    if error.is_null() {
        Ok(take_json(out))
    } else {
        assert!(out.is_null(), "out-parameter written on failure");
        Err(take_error(error))
    }
}

fn greedy(model: &Model, prompts: Value, tokens: usize) -> Vec<Value> {
    let request = json!({
        "prompts": prompts,
        "options": {"temperature": 0, "max_new_tokens": tokens, "stop_token_ids": []},
    });
    let out = generate(model, &request.to_string()).expect("generate");
    out["generations"].as_array().expect("generations").clone()
}

fn ids(generation: &Value) -> Vec<u64> {
    generation["token_ids"]
        .as_array()
        .expect("token_ids")
        .iter()
        .map(|v| v.as_u64().expect("id"))
        .collect()
}

#[test]
fn a_model_describes_itself() {
    let model = tiny_model();
    let mut out = ptr::null_mut();
    // SAFETY: a live model and a valid out-pointer.
    assert_ok(unsafe { frognano_model_config_json(model.0, &mut out) });
    let config = take_json(out);
    assert_eq!(config["vocab_size"], 448);
    assert_eq!(config["has_chat_template"], true);
    assert!(config["context_length"].as_u64().expect("context") > 0);
    assert_eq!(
        config["path"].as_str().map(PathBuf::from),
        Some(tiny().to_path_buf())
    );
}

#[test]
fn greedy_generation_of_token_and_text_prompts() {
    let model = tiny_model();
    let request = json!({
        "prompts": [[1, 5, 6, 7], "def add(a, b):"],
        "options": {"temperature": 0, "max_new_tokens": 8, "stop_token_ids": []},
    })
    .to_string();
    let out = generate(&model, &request).expect("generate");
    let generations = out["generations"].as_array().expect("generations");
    assert_eq!(generations.len(), 2);
    assert_eq!(generations[0]["prompt_tokens"], 4);
    for generation in generations {
        assert_eq!(generation["finish_reason"], "length");
        assert_eq!(ids(generation).len(), 8);
        let logprobs = generation["logprobs"].as_array().expect("logprobs");
        assert_eq!(logprobs.len(), 8);
        for logprob in logprobs {
            let logprob = logprob.as_f64().expect("a finite number");
            assert!(logprob <= 0.0, "{logprob}");
        }
        assert!(generation["text"].is_string());
    }
    assert_eq!(out["timing"]["generated_tokens"], 16);
    // Greedy decoding is deterministic, and a batch gives each row what it gets alone.
    let again = generate(&model, &request).expect("again");
    assert_eq!(again["generations"], out["generations"]);
    let single = greedy(&model, json!(["def add(a, b):"]), 8);
    assert_eq!(ids(&single[0]), ids(&generations[1]));
}

#[test]
fn chat_requests_use_the_chat_template() {
    let model = tiny_model();
    let request = json!({
        "prompts": [[{"role": "user", "content": "hi"}], "hi"],
        "chat": true,
        "options": {"temperature": 0, "max_new_tokens": 6},
    })
    .to_string();
    let out = generate(&model, &request).expect("chat");
    let rows = out["generations"].as_array().expect("generations");
    assert_eq!(ids(&rows[0]), ids(&rows[1]));
    assert_eq!(rows[0]["prompt_tokens"], rows[1]["prompt_tokens"]);
    let raw = greedy(
        &model,
        json!(["<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"]),
        6,
    );
    assert_eq!(raw[0]["prompt_tokens"], rows[0]["prompt_tokens"]);
}

#[test]
fn seeded_sampling_is_reproducible() {
    let model = tiny_model();
    let request = |seed: u64| {
        json!({
            "prompts": ["x", "import os"],
            "options": {"temperature": 1.0, "top_p": 0.9, "seed": seed, "max_new_tokens": 12,
                        "stop_token_ids": []},
        })
        .to_string()
    };
    let first = generate(&model, &request(5)).expect("first")["generations"].clone();
    let again = generate(&model, &request(5)).expect("again")["generations"].clone();
    assert_eq!(first, again);
    let other = generate(&model, &request(6)).expect("other")["generations"].clone();
    assert_ne!(first, other);
}

#[test]
fn bad_requests_are_error_objects() {
    let model = tiny_model();
    let cases: &[(&str, &str)] = &[
        ("{not json", "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        (r#"{"prompt": ["x"]}"#, "unknown key `prompt`"),
        (r#"{"chat": true}"#, "`prompts`"),
        (r#"{"prompts": "x"}"#, "`prompts`"),
        (r#"{"prompts": [3]}"#, "`prompts[0]`"),
        (r#"{"prompts": [[1, -2]]}"#, "`prompts[0][1]`"),
        (r#"{"prompts": [[1, 99999]]}"#, "outside the vocabulary"),
        (r#"{"prompts": [[]]}"#, "empty"),
        (r#"{"prompts": [[1]], "chat": 1}"#, "`chat`"),
        (r#"{"prompts": [[1]], "chat": true}"#, "conversation"),
        (
            r#"{"prompts": [[1]], "options": {"temprature": 0}}"#,
            "temprature",
        ),
        (
            r#"{"prompts": [[1]], "options": {"temperature": -1}}"#,
            "temperature",
        ),
        (r#"{"prompts": [[1]], "options": {"top_p": 0}}"#, "top_p"),
        (
            r#"{"prompts": [[1]], "options": {"max_new_tokens": 0}}"#,
            "max_new_tokens",
        ),
        (r#"{"prompts": [[1]], "options": {"stop": [""]}}"#, "stop"),
    ];
    for (request, expected) in cases {
        let (code, message) = generate(&model, request).expect_err(request);
        assert_eq!(
            code,
            FrognanoErrorCode::InvalidOption,
            "{request}: {message}"
        );
        assert!(message.contains(expected), "{request}: {message}");
    }
    // The model is still usable after errors.
    assert_eq!(greedy(&model, json!([[1, 2]]), 2).len(), 1);
    let empty = generate(&model, r#"{"prompts": []}"#).expect("no prompts");
    assert_eq!(empty["generations"], json!([]));
}

#[test]
fn load_errors_are_error_objects() {
    let missing = std::env::temp_dir().join("frognano-c-no-such-model");
    let (code, message) = load(missing.to_str().expect("UTF-8"), None)
        .err()
        .expect("missing");
    assert_eq!(code, FrognanoErrorCode::Inference);
    assert!(message.contains("not a model folder"), "{message}");
    let (code, message) = load("no-such-model", None).err().expect("unknown name");
    assert_eq!(code, FrognanoErrorCode::Inference);
    assert!(message.contains("smollm2-135m"), "{message}");
    let tiny = tiny().to_str().expect("UTF-8");
    for (options, expected) in [
        ("{", "not valid JSON"),
        ("3", "must be a JSON object"),
        (r#"{"threads": 2}"#, "threads"),
        (r#"{"intra_threads": -1}"#, "intra_threads"),
    ] {
        let (code, message) = load(tiny, Some(options)).err().expect(options);
        assert_eq!(
            code,
            FrognanoErrorCode::InvalidOption,
            "{options}: {message}"
        );
        assert!(message.contains(expected), "{options}: {message}");
    }
    // One ONNX Runtime per process: another library than the loaded one is refused.
    drop(tiny_model());
    let (code, message) = load(tiny, Some(r#"{"runtime_library": "libonnxruntime.so.0"}"#))
        .err()
        .expect("another runtime");
    assert_eq!(code, FrognanoErrorCode::Inference);
    assert!(message.contains("already loaded"), "{message}");
}

#[test]
fn null_pointers_and_bad_strings_are_handled() {
    let model = tiny_model();
    let path = tiny_c();
    let request = cstring(r#"{"prompts": [[1]]}"#);
    let mut out_model = ptr::null_mut();
    let mut out_json: *mut c_char = ptr::null_mut();
    // SAFETY: every pointer is NULL or valid for the duration of the call.
    unsafe {
        let (code, message) = take_error(frognano_model_load(
            ptr::null(),
            ptr::null(),
            &mut out_model,
        ));
        assert_eq!(code, FrognanoErrorCode::NullPointer);
        assert!(message.contains("model"), "{message}");
        let (code, _) = take_error(frognano_model_load(
            path.as_ptr(),
            ptr::null(),
            ptr::null_mut(),
        ));
        assert_eq!(code, FrognanoErrorCode::NullPointer);
        let (code, _) = take_error(frognano_model_load(not_utf8(), ptr::null(), &mut out_model));
        assert_eq!(code, FrognanoErrorCode::InvalidUtf8);
        assert!(out_model.is_null());

        let (code, _) = take_error(frognano_model_generate(
            ptr::null_mut(),
            request.as_ptr(),
            &mut out_json,
        ));
        assert_eq!(code, FrognanoErrorCode::NullPointer);
        let (code, message) =
            take_error(frognano_model_generate(model.0, ptr::null(), &mut out_json));
        assert_eq!(code, FrognanoErrorCode::NullPointer);
        assert!(message.contains("request_json"), "{message}");
        let (code, _) = take_error(frognano_model_generate(
            model.0,
            request.as_ptr(),
            ptr::null_mut(),
        ));
        assert_eq!(code, FrognanoErrorCode::NullPointer);
        let (code, _) = take_error(frognano_model_generate(model.0, not_utf8(), &mut out_json));
        assert_eq!(code, FrognanoErrorCode::InvalidUtf8);
        assert!(out_json.is_null());

        let (code, _) = take_error(frognano_model_config_json(ptr::null(), &mut out_json));
        assert_eq!(code, FrognanoErrorCode::NullPointer);
        let (code, _) = take_error(frognano_model_config_json(model.0, ptr::null_mut()));
        assert_eq!(code, FrognanoErrorCode::NullPointer);
        frognano_model_free(ptr::null_mut());
    }
}

#[test]
fn evaluate_takes_a_local_model_as_its_policy() {
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/tasks/sample.jsonl");
    let sample = cstring(sample.to_str().expect("UTF-8"));
    let mut sandbox = ptr::null_mut();
    let mut all = ptr::null_mut();
    let mut task = ptr::null_mut();
    // SAFETY: valid strings and out-pointers; each handle is freed once below.
    unsafe {
        assert_ok(frognano_sandbox_new(ptr::null(), &mut sandbox));
        assert_ok(frognano_tasks_load(sample.as_ptr(), &mut all));
        assert_ok(frognano_task_set_get_json(all, 0, &mut task));
        frognano_task_set_free(all);
    }
    // One task (the record holds the absolute repository path) in a file of its own.
    let one =
        std::env::temp_dir().join(format!("frognano-c-llm-task-{}.jsonl", std::process::id()));
    let task = take_json(task);
    std::fs::write(&one, format!("{task}\n")).expect("write task");
    let one_c = cstring(one.to_str().expect("UTF-8"));
    let mut tasks = ptr::null_mut();
    // SAFETY: as above.
    unsafe { assert_ok(frognano_tasks_load(one_c.as_ptr(), &mut tasks)) };
    let _ = std::fs::remove_file(&one);

    let policy = cstring(&format!("onnx:{}", tiny().display()));
    let mut summary = ptr::null_mut();
    // SAFETY: live handles, a valid string and out-pointer.
    unsafe {
        assert_ok(frognano_evaluate(
            sandbox,
            tasks,
            policy.as_ptr(),
            1,
            &mut summary,
        ))
    };
    let summary = take_json(summary);
    assert_eq!(summary["episodes"], 1, "{summary}");
    assert_eq!(summary["resolved"], 0, "{summary}");

    let missing = cstring("onnx:/no/such/model/folder");
    let mut untouched = ptr::null_mut();
    // SAFETY: as above.
    let error = unsafe { frognano_evaluate(sandbox, tasks, missing.as_ptr(), 1, &mut untouched) };
    let (code, message) = take_error(error);
    assert_eq!(code, FrognanoErrorCode::Inference);
    assert!(message.contains("not a model folder"), "{message}");
    assert!(untouched.is_null());
    // SAFETY: each handle is freed exactly once.
    unsafe {
        frognano_task_set_free(tasks);
        frognano_sandbox_free(sandbox);
    }
}
