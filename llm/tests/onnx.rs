//! The ONNX Runtime policy stack on a tiny randomly initialised model that goes through the same
//! GGUF -> ONNX conversion as the real models: cached decoding against full recomputation,
//! batched against single rows, logits against the independent numpy reference, int4 against
//! fp32, the tokenizer and chat template, sampling and stop strings, bad input, and the policy
//! acting in a real environment.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use frognano_core::{Policy, PolicyContext};
use frognano_env::{EnvConfig, EnvPool, taskset};
use frognano_llm::{
    ChatMessage, DecoderModel, FinishReason, GenerationOptions, InferenceError, ModelOptions,
    OnnxPolicy, OnnxPolicyConfig, TextCodec, assets, generate,
};
use frognano_sandbox::{Sandbox, SandboxOptions};

/// The tiny model, made once per test binary.
fn tiny() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::Builder::new()
            .prefix("frognano-tiny-")
            .tempdir()
            .expect("temp dir")
            .keep();
        assets::make_tiny_model(&dir, 0, &|m| eprintln!("tiny: {m}")).expect("tiny model");
        dir
    })
}

fn load(precision: &str) -> (DecoderModel, TextCodec) {
    let dir = tiny().join(precision);
    let model = DecoderModel::load(&dir, &ModelOptions::default()).expect("load model");
    let codec = TextCodec::load(&dir).expect("load tokenizer");
    (model, codec)
}

fn log_softmax_at(logits: &[f32], token: usize) -> f64 {
    frognano_llm::sampling::log_softmax(logits, 1.0)[token]
}

fn argmax(values: &[f32]) -> usize {
    frognano_llm::sampling::argmax(values)
}

fn chat_prompt(codec: &TextCodec, text: &str) -> Vec<u32> {
    let rendered = codec
        .render_chat(&[ChatMessage::new("user", text)], true)
        .expect("render");
    codec.encode(&rendered).expect("encode")
}

#[test]
fn cached_decoding_matches_full_recomputation() {
    for precision in ["fp32", "int4"] {
        let (mut model, codec) = load(precision);
        let prompt = chat_prompt(&codec, "def add(a, b): return a - b  # fix me");
        let options = GenerationOptions {
            stop_token_ids: Some(Vec::new()),
            ..GenerationOptions::greedy(24)
        };
        let (out, _) = generate(&mut model, &codec, std::slice::from_ref(&prompt), &options)
            .expect("generate");
        let generation = &out[0];
        assert_eq!(generation.token_ids.len(), 24);
        assert_eq!(generation.finish_reason, FinishReason::Length);
        let mut sequence = prompt.clone();
        sequence.extend(&generation.token_ids[..generation.token_ids.len() - 1]);
        let full = model.full_logits(&sequence).expect("full logits");
        let vocab = model.config.vocab_size;
        for (i, (&token, &logprob)) in generation
            .token_ids
            .iter()
            .zip(&generation.logprobs)
            .enumerate()
        {
            let position = prompt.len() - 1 + i;
            let row = &full[position * vocab..(position + 1) * vocab];
            assert_eq!(argmax(row), token as usize, "{precision}: token {i}");
            let expected = log_softmax_at(row, token as usize);
            assert!(
                (expected - logprob as f64).abs() < 2e-3,
                "{precision}: log-prob {i}: cached {logprob} vs recomputed {expected}"
            );
        }
    }
}

#[test]
fn a_batch_gives_each_row_what_it_gets_alone() {
    let (mut model, codec) = load("fp32");
    let prompts: Vec<Vec<u32>> = [
        "x",
        "print the sum of 12 and 30",
        "a much longer prompt about fixing a failing test in a parser module",
    ]
    .iter()
    .map(|p| chat_prompt(&codec, p))
    .collect();
    assert!(
        prompts[0].len() < prompts[2].len(),
        "rows need different lengths"
    );
    let options = GenerationOptions {
        stop_token_ids: Some(Vec::new()),
        ..GenerationOptions::greedy(16)
    };
    let (batched, _) = generate(&mut model, &codec, &prompts, &options).expect("batch");
    for (row, prompt) in prompts.iter().enumerate() {
        let (single, _) =
            generate(&mut model, &codec, std::slice::from_ref(prompt), &options).expect("single");
        assert_eq!(batched[row].token_ids, single[0].token_ids, "row {row}");
        for (a, b) in batched[row].logprobs.iter().zip(&single[0].logprobs) {
            assert!((a - b).abs() < 1e-3, "row {row}: {a} vs {b}");
        }
    }
}

/// Reads a little-endian float32 .npy file.
fn read_npy(path: &Path) -> (Vec<usize>, Vec<f32>) {
    let bytes = std::fs::read(path).expect("read npy");
    assert_eq!(&bytes[..6], b"\x93NUMPY");
    let (header_len, start) = if bytes[6] == 1 {
        (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10)
    } else {
        (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        )
    };
    let header = std::str::from_utf8(&bytes[start..start + header_len]).expect("header");
    assert!(header.contains("'<f4'"), "float32 expected: {header}");
    assert!(header.contains("'fortran_order': False"));
    let shape_text = &header[header.find("'shape': (").expect("shape") + 10..];
    let shape: Vec<usize> = shape_text[..shape_text.find(')').expect("shape end")]
        .split(',')
        .filter_map(|d| d.trim().parse().ok())
        .collect();
    let data = bytes[start + header_len..]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    (shape, data)
}

#[test]
fn logits_match_the_numpy_reference_over_the_gguf_weights() {
    let (mut fp32, codec) = load("fp32");
    let (mut int4, _) = load("int4");
    let ids = chat_prompt(&codec, "return the largest value, 42 or 7?");
    let out = tempfile::tempdir().expect("temp dir");
    let npy = out.path().join("reference.npy");
    let ids_arg = ids.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
    assets::run_converter(
        &[
            "reference".into(),
            "--gguf".into(),
            tiny().join("tiny.gguf").display().to_string(),
            "--ids".into(),
            ids_arg,
            "--out".into(),
            npy.display().to_string(),
        ],
        &|_| {},
    )
    .expect("numpy reference");
    let (shape, reference) = read_npy(&npy);
    let vocab = fp32.config.vocab_size;
    assert_eq!(shape, vec![1, ids.len(), vocab]);
    let ours = fp32.full_logits(&ids).expect("fp32 logits");
    let scale = reference.iter().fold(0f32, |m, v| m.max(v.abs()));
    let max_diff = ours
        .iter()
        .zip(&reference)
        .fold(0f32, |m, (a, b)| m.max((a - b).abs()));
    // fp32 ONNX vs float64-accumulated numpy over the same dequantized weights.
    assert!(
        max_diff <= 1e-3 * scale.max(1.0),
        "fp32 max |diff| {max_diff} (scale {scale})"
    );
    let quantized = int4.full_logits(&ids).expect("int4 logits");
    let agree = (0..ids.len())
        .filter(|&p| {
            argmax(&quantized[p * vocab..(p + 1) * vocab])
                == argmax(&reference[p * vocab..(p + 1) * vocab])
        })
        .count();
    assert!(
        agree * 10 >= ids.len() * 7,
        "int4 argmax agrees with the reference at {agree} of {} positions",
        ids.len()
    );
}

#[test]
fn tokenizer_round_trips_and_knows_its_special_tokens() {
    let (_, codec) = load("fp32");
    for text in [
        "def f(x):\n    return x + 1\n",
        "digits 0123456789 and 3.14159",
        "unicode: café, naïve, 日本語, emoji 🐸",
        "  leading and trailing spaces  ",
    ] {
        let ids = codec.encode(text).expect("encode");
        assert_eq!(codec.decode(&ids, false).expect("decode"), text);
    }
    let digits = codec.encode("12345").expect("encode");
    assert_eq!(digits.len(), 5, "digits are split one by one: {digits:?}");
    let start = codec.token_id("<|im_start|>").expect("im_start");
    let end = codec.token_id("<|im_end|>").expect("im_end");
    let ids = codec
        .encode("<|im_start|>user\nhi<|im_end|>")
        .expect("encode");
    assert_eq!(ids.first(), Some(&start));
    assert_eq!(ids.last(), Some(&end));
    assert_eq!(codec.decode(&ids, true).expect("decode"), "user\nhi");
    let rendered = codec
        .render_chat(
            &[
                ChatMessage::new("system", "be brief"),
                ChatMessage::new("user", "hello"),
            ],
            true,
        )
        .expect("render");
    assert_eq!(
        rendered,
        "<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n"
    );
}

#[test]
fn sampling_is_seeded_and_stop_strings_cut_the_text() {
    let (mut model, codec) = load("fp32");
    let prompt = chat_prompt(&codec, "write something");
    let sampled = |seed: u64, model: &mut DecoderModel| {
        let options = GenerationOptions {
            max_new_tokens: 20,
            temperature: 1.0,
            top_k: 50,
            top_p: 0.95,
            seed,
            stop_token_ids: Some(Vec::new()),
            ..GenerationOptions::default()
        };
        generate(model, &codec, std::slice::from_ref(&prompt), &options)
            .expect("generate")
            .0
            .remove(0)
    };
    let a = sampled(1, &mut model);
    let b = sampled(1, &mut model);
    let c = sampled(2, &mut model);
    assert_eq!(a.token_ids, b.token_ids);
    assert_ne!(a.token_ids, c.token_ids);
    assert!(a.logprobs.iter().all(|&l| l <= 0.0 && l.is_finite()));

    let options = GenerationOptions {
        stop_token_ids: Some(Vec::new()),
        ..GenerationOptions::greedy(30)
    };
    let (full, _) =
        generate(&mut model, &codec, std::slice::from_ref(&prompt), &options).expect("greedy");
    let text = &full[0].text;
    let chars: Vec<char> = text.chars().collect();
    assert!(chars.len() > 6, "greedy text too short to cut: {text:?}");
    let stop: String = chars[chars.len() / 2..chars.len() / 2 + 2].iter().collect();
    let cut_at = text.find(&stop).expect("stop occurs");
    let options = GenerationOptions {
        stop: vec![stop.clone()],
        ..options
    };
    let (stopped, _) = generate(&mut model, &codec, &[prompt], &options).expect("stopped");
    assert_eq!(stopped[0].finish_reason, FinishReason::Stop);
    assert_eq!(stopped[0].text, text[..cut_at]);
    assert!(stopped[0].token_ids.len() < full[0].token_ids.len());
    assert_eq!(
        stopped[0].token_ids,
        full[0].token_ids[..stopped[0].token_ids.len()]
    );
}

#[test]
fn bad_requests_get_clear_errors() {
    let (mut model, codec) = load("fp32");
    let vocab = model.config.vocab_size as u32;
    let bad = |options: GenerationOptions, prompts: Vec<Vec<u32>>, model: &mut DecoderModel| {
        generate(model, &codec, &prompts, &options).expect_err("must fail")
    };
    let err = bad(
        GenerationOptions::greedy(4),
        vec![vec![vocab + 5]],
        &mut model,
    );
    assert!(matches!(err, InferenceError::InvalidRequest(_)), "{err}");
    let err = bad(GenerationOptions::greedy(4), vec![vec![]], &mut model);
    assert!(err.to_string().contains("empty"), "{err}");
    let options = GenerationOptions {
        top_p: 0.0,
        ..GenerationOptions::greedy(4)
    };
    assert!(matches!(
        bad(options, vec![vec![1]], &mut model),
        InferenceError::InvalidRequest(_)
    ));
    let options = GenerationOptions {
        temperature: f32::NAN,
        ..GenerationOptions::greedy(4)
    };
    assert!(matches!(
        bad(options, vec![vec![1]], &mut model),
        InferenceError::InvalidRequest(_)
    ));
    let too_long = vec![1u32; model.config.context_length + 1];
    assert!(matches!(
        bad(GenerationOptions::greedy(4), vec![too_long], &mut model),
        InferenceError::InvalidRequest(_)
    ));

    let empty = tempfile::tempdir().expect("temp dir");
    let err = DecoderModel::load(empty.path(), &ModelOptions::default()).expect_err("no model");
    assert!(err.to_string().contains("config.json"), "{err}");
    std::fs::copy(
        tiny().join("fp32/config.json"),
        empty.path().join("config.json"),
    )
    .expect("copy");
    std::fs::write(empty.path().join("model.onnx"), b"not a model").expect("write");
    let err = DecoderModel::load(empty.path(), &ModelOptions::default()).expect_err("garbage");
    assert!(err.to_string().contains("cannot load"), "{err}");
    let err = assets::resolve_model("no-such-model", &|_| {}).expect_err("unknown");
    assert!(err.to_string().contains("smollm2-135m"), "{err}");
}

#[test]
fn the_policy_acts_in_a_real_environment_with_token_level_records() {
    let dir = tiny().join("int4");
    let config = OnnxPolicyConfig {
        generation: GenerationOptions {
            max_new_tokens: 24,
            temperature: 1.0,
            seed: 3,
            ..GenerationOptions::default()
        },
        ..OnnxPolicyConfig::default()
    };
    let mut policy = OnnxPolicy::load(&dir, config).expect("policy");
    let tasks_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/tasks/sample.jsonl");
    let mut tasks = taskset::load_tasks(&tasks_path).expect("tasks");
    tasks.truncate(2);
    let sandbox = Arc::new(
        Sandbox::new(SandboxOptions::default(), &|m| eprintln!("setup: {m}")).expect("sandbox"),
    );
    let env_config = EnvConfig {
        max_steps: 3,
        ..EnvConfig::default()
    };
    let mut pool = EnvPool::for_tasks(sandbox, tasks.len(), 2, env_config).expect("pool");
    let mut records = Vec::new();
    pool.rollout(
        &mut policy,
        &tasks,
        |r| records.push(r),
        |task, err| panic!("{}: {err}", task.id),
    )
    .expect("rollout");
    assert_eq!(records.len(), 2);
    for record in &records {
        assert!(!record.outcome.resolved, "a random model does not fix bugs");
        assert!(!record.steps.is_empty());
        for step in &record.steps {
            let ids = step.token_ids.as_ref().expect("token ids recorded");
            assert_eq!(ids.len(), step.logprobs.len());
            assert!(!ids.is_empty() && ids.len() <= 24);
            assert!(step.logprobs.iter().all(|l| l.is_finite() && *l <= 0.0));
        }
    }
    // A direct call: the prompt carries the conversation, the output the generation.
    let context = PolicyContext {
        task_id: "t".into(),
        initial: frognano_core::Observation {
            text: "Fix the bug.".into(),
            is_error: false,
            test_run: None,
        },
        history: Vec::new(),
    };
    let outputs = policy
        .act(&[context.clone(), context.clone()])
        .expect("act");
    assert_eq!(outputs.len(), 2);

    // A long episode is cut to the context: oldest turns first, the latest turn kept.
    let mut long = context;
    for i in 0..40 {
        long.history.push(frognano_core::Turn {
            action: frognano_core::Action::Text {
                text: format!("view module_{i}.py"),
            },
            observation: frognano_core::Observation {
                text: format!("observation number {i}: ").repeat(8),
                is_error: false,
                test_run: None,
            },
        });
    }
    let ids = policy.prompt_ids(&long).expect("fits");
    let context_length = policy.model().config.context_length;
    assert!(ids.len() <= context_length - 24, "{} tokens", ids.len());
    let text = policy.codec().decode(&ids, false).expect("decode");
    assert!(
        text.contains("observation number 39"),
        "the latest turn is kept"
    );
    assert!(
        !text.contains("observation number 0:"),
        "the oldest turn is dropped"
    );
    assert!(text.contains("earlier turns omitted"));
    long.initial.text = "x ".repeat(5000);
    long.history.clear();
    let ids = policy
        .prompt_ids(&long)
        .expect("a huge first observation is truncated");
    assert!(ids.len() <= context_length - 24);
}

#[test]
fn the_genai_builder_layout_decodes_like_the_optimum_layout() {
    // The same tiny weights in onnxruntime-genai's builder layout: one GroupQueryAttention per
    // layer, rotary positions from the attention mask, no position_ids input.
    for precision in ["fp32", "int4"] {
        let (mut optimum, codec) = load(precision);
        let (mut genai, _) = load(&format!("genai-{precision}"));
        assert!(optimum.has_position_ids());
        assert!(!genai.has_position_ids(), "genai takes no position_ids");
        assert_eq!(genai.config.num_layers, optimum.config.num_layers);
        let prompts: Vec<Vec<u32>> = ["x", "print the sum of 12 and 30 and say why"]
            .iter()
            .map(|p| chat_prompt(&codec, p))
            .collect();
        assert_ne!(
            prompts[0].len(),
            prompts[1].len(),
            "rows of different lengths"
        );
        let options = GenerationOptions {
            stop_token_ids: Some(Vec::new()),
            ..GenerationOptions::greedy(16)
        };
        // Rows of different lengths go in one call; the genai graph cannot take left padding,
        // so the generator runs them one at a time and must still agree with the optimum graph.
        let (from_genai, _) = generate(&mut genai, &codec, &prompts, &options).expect("genai");
        let (from_optimum, _) =
            generate(&mut optimum, &codec, &prompts, &options).expect("optimum");
        let vocab = genai.config.vocab_size;
        for (row, prompt) in prompts.iter().enumerate() {
            let tokens = &from_genai[row].token_ids;
            assert_eq!(tokens.len(), 16);
            if precision == "fp32" {
                assert_eq!(
                    tokens, &from_optimum[row].token_ids,
                    "{precision} row {row}"
                );
            }
            // Cached decoding against full recomputation in the genai graph itself.
            let mut sequence = prompt.clone();
            sequence.extend(&tokens[..tokens.len() - 1]);
            let full = genai.full_logits(&sequence).expect("full logits");
            for (i, (&token, &logprob)) in tokens.iter().zip(&from_genai[row].logprobs).enumerate()
            {
                let position = prompt.len() - 1 + i;
                let logits = &full[position * vocab..(position + 1) * vocab];
                assert_eq!(
                    argmax(logits),
                    token as usize,
                    "{precision} row {row} token {i}"
                );
                let expected = log_softmax_at(logits, token as usize);
                assert!(
                    (expected - logprob as f64).abs() < 2e-3,
                    "{precision} row {row} token {i}: {logprob} vs {expected}"
                );
            }
        }
        // Equal-length rows share one batched run.
        let same = vec![prompts[1].clone(), prompts[1].clone()];
        let (batched, _) = generate(&mut genai, &codec, &same, &options).expect("batch");
        assert_eq!(batched[0].token_ids, from_genai[1].token_ids);
        assert_eq!(batched[1].token_ids, from_genai[1].token_ids);
    }
}
