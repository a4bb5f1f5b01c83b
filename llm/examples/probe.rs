#![allow(clippy::unwrap_used)]
use frognano_core::{Observation, PolicyContext};
use frognano_llm::{GenerationOptions, OnnxPolicy, OnnxPolicyConfig};
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let system = std::fs::read_to_string(&args[1]).unwrap();
    let user = std::fs::read_to_string(&args[2]).unwrap();
    let n: usize = args.get(3).map(|s| s.parse().unwrap()).unwrap_or(4);
    let temp: f32 = args.get(4).map(|s| s.parse().unwrap()).unwrap_or(1.0);
    let quiet = |_: &str| {};
    let dir = frognano_llm::assets::resolve_model("smollm2-135m:fp32", &quiet).unwrap();
    let config = OnnxPolicyConfig {
        generation: GenerationOptions {
            temperature: temp,
            max_new_tokens: 64,
            stop: vec!["\n```\n".into()],
            ..GenerationOptions::default()
        },
        system_prompt: Some(system),
        ..OnnxPolicyConfig::default()
    };
    let mut policy = OnnxPolicy::load(&dir, config).unwrap();
    let ctx = PolicyContext {
        task_id: "t".into(),
        initial: Observation {
            text: user,
            is_error: false,
            test_run: None,
        },
        history: vec![],
    };
    let started = std::time::Instant::now();
    let out = policy.reply(&vec![ctx; n]).unwrap();
    for o in out {
        println!(
            "=== {:?}\n{}",
            o.decision,
            match o.action {
                frognano_core::Action::Text { text } => text,
                _ => String::new(),
            }
        );
    }
    eprintln!("{:?}", started.elapsed());
}
