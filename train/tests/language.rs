//! The language-model loop on the tiny random model with the real PyTorch learner (in the
//! learner environment) and real ONNX Runtime: log-prob parity before and after the hand-back,
//! the direction of an update, clear errors for bad batches and a failing learner, and rollouts
//! through a served model that reloads every update's weights.

use std::path::PathBuf;

use frognano_core::{ErrorKind, Learner, TokenBatch};
use frognano_train::{
    LanguageModelConfig, LanguageModelPolicy, LearnerBenchOptions, LearnerProcess, RolloutServer,
    TrainError, bench_learner,
};
use serde_json::json;

fn tiny_fp32() -> PathBuf {
    let quiet = |_: &str| {};
    frognano_llm::assets::resolve_model("tiny:fp32", &quiet).expect("tiny model")
}

fn settings(value: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
    value.as_object().cloned().expect("an object")
}

/// The learner scores the rollout tokens as ONNX Runtime sampled them, before and after the
/// update and hand-back.
fn assert_parity(figures: &frognano_train::LearnerBench) {
    assert!(
        figures.parity_max_abs_diff <= 1e-3,
        "rollout vs learner log-probs: {}",
        figures.parity_max_abs_diff
    );
    assert!(
        figures.handback_parity_max_abs_diff <= 1e-3,
        "learner vs ONNX Runtime after the hand-back: {}",
        figures.handback_parity_max_abs_diff
    );
}

#[test]
fn the_learner_and_onnx_runtime_agree_before_and_after_an_update() {
    let scratch = tempfile::tempdir().expect("scratch");
    let model = tiny_fp32();
    let options = LearnerBenchOptions {
        int4_model: model.parent().map(|p| p.join("int4")),
        model,
        episodes: 4,
        new_tokens: 16,
        sampling: None,
        learner: settings(json!({"learning_rate": 1e-3, "seed": 0})),
        python: None,
        scratch: scratch.path().to_path_buf(),
    };
    let figures = bench_learner(&options, &|_| {}).expect("bench");
    assert_eq!(figures.tokens, 64);
    assert_parity(&figures);
    // One step with advantages +1 / -1 moves the log-probs of the tokens that way.
    assert!(
        figures.positive_logprob_change > 0.0,
        "{}",
        figures.positive_logprob_change
    );
    assert!(
        figures.negative_logprob_change < 0.0,
        "{}",
        figures.negative_logprob_change
    );
    let ratio = figures
        .int4_ratio
        .expect("the tiny model has an int4 folder");
    assert_eq!(ratio.tokens, 64);
    assert!(ratio.mean.is_finite() && ratio.p50 > 0.0);
}

/// Parity under the sampling a user sets: a temperature other than 1, top-k and top-p
/// (log-probs of the truncated distribution on both sides) and a stop string that ends some
/// episodes early (the stop token is the last one trained on).
#[test]
fn parity_holds_at_another_temperature_with_top_k_top_p_and_stops() {
    let scratch = tempfile::tempdir().expect("scratch");
    let new_tokens = 24;
    let options = LearnerBenchOptions {
        model: tiny_fp32(),
        int4_model: None,
        episodes: 6,
        new_tokens,
        sampling: Some(frognano_llm::GenerationOptions {
            temperature: 0.7,
            top_k: 20,
            top_p: 0.8,
            seed: 3,
            stop: vec!["e".into()],
            ..frognano_llm::GenerationOptions::default()
        }),
        learner: settings(json!({"learning_rate": 1e-3, "seed": 0})),
        python: None,
        scratch: scratch.path().to_path_buf(),
    };
    let figures = bench_learner(&options, &|_| {}).expect("bench");
    assert!(
        figures.tokens < 6 * new_tokens,
        "some episodes end at the stop string: {} tokens",
        figures.tokens
    );
    assert_parity(&figures);
}

#[test]
fn bad_settings_bad_batches_and_failed_requests_are_clear_errors() {
    let model = tiny_fp32();
    let quiet = |_: &str| {};
    let err = LearnerProcess::start(
        None,
        &model,
        &settings(json!({"learning_rat": 1e-3})),
        &quiet,
    )
    .expect_err("a misspelt setting");
    assert!(
        matches!(&err, TrainError::Learner { kind, .. } if kind == "config"),
        "{err}"
    );
    assert!(err.to_string().contains("learning_rat"), "{err}");
    assert_eq!(err.kind(), ErrorKind::Config);

    let mut learner =
        LearnerProcess::start(None, &model, &settings(json!({})), &quiet).expect("learner");
    let missing = learner
        .request(json!({"op": "learn", "batch": "/nonexistent/batch.safetensors"}))
        .expect_err("no such batch");
    assert!(missing.to_string().contains("learn"), "{missing}");
    // A batch the Rust side would refuse, written anyway, is refused by the learner too.
    let dir = tempfile::tempdir().expect("dir");
    let garbage = dir.path().join("garbage.safetensors");
    std::fs::write(&garbage, b"not a batch").expect("write");
    let refused = learner
        .request(json!({"op": "learn", "batch": garbage}))
        .expect_err("garbage");
    assert!(
        matches!(&refused, TrainError::Learner { kind, .. } if kind == "batch"),
        "{refused}"
    );
    // The process is still serving.
    let info = learner
        .request(json!({"op": "save", "path": dir.path().join("state.pt")}))
        .expect("save after errors");
    assert!(info.is_object());
}

#[test]
fn a_policy_checkpoint_restores_the_same_weights() {
    let model = tiny_fp32();
    let work = tempfile::tempdir().expect("work");
    let config = sampled_config(&model);
    let quiet = |_: &str| {};
    let mut policy =
        LanguageModelPolicy::new(&config, &model, work.path(), &quiet).expect("policy");
    use frognano_core::Policy;
    let outputs = policy.act(&two_contexts()).expect("act");
    let batch = one_group(&outputs);
    assert!(TokenBatch::from_batch(&batch).is_ok());
    let stats = policy.learn(&batch).expect("learn");
    assert!(
        stats["loss"].is_number() && stats["handback_s"].is_number(),
        "{stats:?}"
    );
    let state = policy.state().expect("state");
    let weights = |dir: PathBuf| std::fs::read(dir.join("model.onnx.data")).expect("weights");
    let saved = weights(policy.weights().lock().expect("lock").clone());
    // Another update moves the weights; loading the state brings the saved ones back exactly.
    policy.learn(&batch).expect("second update");
    let moved = weights(policy.weights().lock().expect("lock").clone());
    assert_ne!(moved, saved);
    policy.load_state(&state).expect("load");
    let restored = weights(policy.weights().lock().expect("lock").clone());
    assert!(
        restored == saved,
        "restored weights differ from the checkpoint's"
    );
    // A batch whose tokens lost their prompt is refused before the learner sees it.
    let mut broken = batch.clone();
    broken.trajectories[0].steps[0].prompt_ids = None;
    let err = policy.learn(&broken).expect_err("no prompt ids");
    assert!(err.to_string().contains("prompt ids"), "{err}");
}

/// The tiny model at `model`, sampled at temperature 1 (8 tokens a reply), with a learner that
/// moves its weights visibly in one update.
fn sampled_config(model: &std::path::Path) -> LanguageModelConfig {
    LanguageModelConfig {
        model: model.display().to_string(),
        generation: frognano_llm::GenerationOptions {
            temperature: 1.0,
            ..frognano_llm::GenerationOptions::greedy(8)
        },
        learner: settings(json!({"learning_rate": 1e-2, "seed": 3, "mask_length_limited": false})),
        ..LanguageModelConfig::default()
    }
}

/// Two episodes of one task, the way the loop asks the policy.
fn two_contexts() -> Vec<frognano_core::PolicyContext> {
    vec![
        frognano_core::PolicyContext {
            task_id: "t".into(),
            initial: frognano_core::Observation {
                text: "Problem: fix add() in calc.py".into(),
                is_error: false,
                test_run: None,
            },
            history: Vec::new(),
        };
        2
    ]
}

/// One group of the outputs: the first with advantage -1, the others +1.
fn one_group(outputs: &[frognano_core::PolicyOutput]) -> frognano_core::TrainingBatch {
    use frognano_core::Trajectory;
    frognano_core::TrainingBatch::one_group(
        outputs
            .iter()
            .enumerate()
            .map(|(i, o)| {
                let advantage = if i == 0 { -1.0 } else { 1.0 };
                Trajectory::single_step("t", o, i as f64, advantage)
            })
            .collect(),
    )
}

#[test]
fn rollouts_through_a_served_model_reload_every_update() {
    use frognano_core::Policy;
    use frognano_serve::server::{ServerConfig, ServerHandle};

    let model = tiny_fp32();
    let server = ServerHandle::spawn(ServerConfig {
        served_model_name: Some("tiny-rollouts".into()),
        port: 0,
        allow_reload: true,
        intra_threads: 1,
        ..ServerConfig::new(&model)
    })
    .expect("start the rollout server");
    let work = tempfile::tempdir().expect("work");
    let config = LanguageModelConfig {
        rollout_server: Some(RolloutServer::new(server.url(), server.model_name())),
        ..sampled_config(&model)
    };
    let quiet = |_: &str| {};
    let mut policy =
        LanguageModelPolicy::new(&config, &model, work.path(), &quiet).expect("policy");

    let outputs = policy.act(&two_contexts()).expect("act");
    let served = server.stats();
    assert_eq!(served.requests, 2, "{served:?}");
    let batch = one_group(&outputs);
    let mut served_tokens = 0;
    for trajectory in &batch.trajectories {
        let step = &trajectory.steps[0];
        let prompt = step.prompt_ids.as_ref().expect("the server's prompt ids");
        let reply = step.token_ids.as_ref().expect("the server's token ids");
        assert!(!prompt.is_empty() && !reply.is_empty());
        assert_eq!(reply.len(), step.logprobs.len());
        served_tokens += reply.len() as u64;
    }
    assert_eq!(served.generated_tokens, served_tokens, "{served:?}");
    for output in &outputs {
        let decision = output
            .decision
            .as_ref()
            .expect("the served reply's decision");
        assert_eq!(decision["model"], "tiny-rollouts");
    }
    assert!(TokenBatch::from_batch(&batch).is_ok());

    let start_weights = policy.weights().lock().expect("lock").clone();
    let stats = policy.learn(&batch).expect("learn");
    assert!(
        stats["loss"].is_number() && stats["handback_s"].is_number(),
        "{stats:?}"
    );
    assert_eq!(policy.updates(), 1);
    let new_weights = policy.weights().lock().expect("lock").clone();
    assert_ne!(new_weights, start_weights);
    assert!(new_weights.join("model.onnx").is_file());
    assert_eq!(server.stats().reloads, 1);
    // The next rollouts run on the new weights, through the same server.
    let again = policy.act(&two_contexts()).expect("act after the reload");
    assert!(again.iter().all(|o| o.token_ids.is_some()));
    assert_eq!(server.stats().requests, 4);
    drop(policy);
    server.stop().expect("stop the server");
}

#[test]
fn a_rollout_server_needs_a_url_a_model_and_a_running_server() {
    let model = tiny_fp32();
    let bad_url = LanguageModelConfig {
        model: model.display().to_string(),
        rollout_server: Some(RolloutServer::new("localhost:8000", "m")),
        ..LanguageModelConfig::default()
    };
    let err = bad_url.validate().expect_err("no scheme");
    assert!(err.to_string().contains("rollout_server.url"), "{err}");
    let no_model = LanguageModelConfig {
        rollout_server: Some(RolloutServer::new("http://127.0.0.1:9/v1", " ")),
        ..bad_url.clone()
    };
    assert!(no_model.validate().is_err());
    let parsed: Result<LanguageModelConfig, _> = toml::from_str(
        "model = \"tiny\"\n[rollout_server]\nurl = \"http://127.0.0.1:8000/v1\"\nmodel = \"m\"\nconcurency = 2\n",
    );
    assert!(parsed.is_err(), "a misspelt key is refused");
    let parsed: LanguageModelConfig = toml::from_str(
        "model = \"tiny\"\n[rollout_server]\nurl = \"http://127.0.0.1:8000/v1\"\nmodel = \"m\"\n",
    )
    .expect("a rollout server");
    assert_eq!(
        parsed.rollout_server.as_ref().map(|s| s.concurrency),
        Some(8)
    );
    // Nothing listens there: a clear error before the learner starts.
    let work = tempfile::tempdir().expect("work");
    let unreachable = LanguageModelConfig {
        rollout_server: Some(RolloutServer::new("http://127.0.0.1:9/v1", "m")),
        ..bad_url
    };
    let quiet = |_: &str| {};
    let err =
        LanguageModelPolicy::new(&unreachable, &model, work.path(), &quiet).expect_err("no server");
    assert!(err.to_string().contains("rollout_server"), "{err}");
}
