//! `HttpPolicy` against a real third-party server: llama.cpp's OpenAI-compatible server
//! (`llama-server`'s code in the pinned xllamacpp wheel of the serving environment) on
//! loopback, serving the SmolLM2-135M-Instruct GGUF. Episodes run end to end in real sandboxed
//! environments through it, with the token log-probs the server returns recorded.

use std::path::Path;
use std::time::{Duration, Instant};

use frognano_core::{Action, Observation, PolicyContext};
use frognano_env::{EnvConfig, EnvPool};
use frognano_llm::GenerationOptions;
use frognano_llm::assets;
use frognano_sandbox::testing::shared_sandbox;
use frognano_serve::{HttpApi, HttpPolicy, HttpPolicyConfig, LlamaCppServer};

const ALIAS: &str = "smollm2-135m-gguf";

fn start_llama_server() -> LlamaCppServer {
    let progress = |m: &str| eprintln!("setup: {m}");
    let gguf = assets::model_gguf("smollm2-135m", &progress).expect("gguf");
    LlamaCppServer::start(&gguf, ALIAS, 2, 2, &progress).expect("llama.cpp's server")
}

fn policy_config(server: &LlamaCppServer) -> HttpPolicyConfig {
    HttpPolicyConfig {
        generation: GenerationOptions {
            temperature: 0.7,
            seed: 1,
            ..GenerationOptions::greedy(24)
        },
        concurrency: 2,
        timeout_s: 120.0,
        ..HttpPolicyConfig::new(server.url(), ALIAS)
    }
}

fn context(text: &str) -> PolicyContext {
    PolicyContext {
        task_id: "t".into(),
        initial: Observation {
            text: text.into(),
            ..Observation::default()
        },
        history: Vec::new(),
    }
}

#[test]
fn llama_cpp_serves_episodes_end_to_end_with_logprobs() {
    let server = start_llama_server();

    // Chat: a reply and one finite log-prob per token.
    let mut policy = HttpPolicy::connect(policy_config(&server)).expect("connect");
    let outputs = policy
        .reply(&[context("Reply with the word: submit"), context("Say test.")])
        .expect("reply");
    for output in &outputs {
        assert_eq!(output.error, None);
        let Action::Text { text } = &output.action else {
            panic!("a text action: {:?}", output.action);
        };
        assert!(!text.is_empty());
        assert!(!output.logprobs.is_empty(), "llama.cpp returns log-probs");
        assert!(output.logprobs.iter().all(|l| l.is_finite() && *l <= 0.0));
        assert!(output.logprobs.len() <= 24);
    }

    // Plain completions, the prompt rendered by the model's own chat template and sent as
    // token ids: the recorded prompt ids are exact.
    let model_dir = assets::resolve_model("smollm2-135m", &|_| {}).expect("model folder");
    let mut completions = HttpPolicy::connect(HttpPolicyConfig {
        api: HttpApi::Completions,
        chat_template_dir: Some(model_dir),
        ..policy_config(&server)
    })
    .expect("connect");
    let outputs = completions.reply(&[context("Say test.")]).expect("reply");
    assert_eq!(outputs[0].error, None);
    assert!(
        outputs[0]
            .prompt_ids
            .as_ref()
            .is_some_and(|ids| ids.len() > 10)
    );
    assert!(!outputs[0].logprobs.is_empty());

    // Real episodes in real sandboxes through the server.
    let tasks_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/tasks/sample.jsonl");
    let mut tasks = frognano_env::taskset::load_tasks(&tasks_path).expect("tasks");
    tasks.truncate(2);
    let mut pool = EnvPool::new(
        shared_sandbox(),
        2,
        0,
        EnvConfig {
            max_steps: 2,
            ..EnvConfig::default()
        },
    )
    .expect("pool");
    let (records, stats) = frognano_env::testing::rollout_in(&mut pool, &mut policy, &tasks);
    assert_eq!((stats.episodes, stats.failed_episodes), (2, 0));
    for record in &records {
        assert_eq!(record.policy_error, None);
        assert!(!record.steps.is_empty());
        for step in &record.steps {
            assert!(!step.logprobs.is_empty(), "log-probs recorded per step");
            let decision = step.decision.as_ref().expect("decision");
            assert_eq!(decision["model"], ALIAS);
        }
    }

    // The server dies mid-run: the next step fails its episodes, and nothing hangs.
    drop(server);
    let started = Instant::now();
    let outputs = policy.reply(&[context("Say test.")]).expect("reply");
    assert!(outputs[0].error.is_some());
    assert!(started.elapsed() < Duration::from_secs(30));
}
