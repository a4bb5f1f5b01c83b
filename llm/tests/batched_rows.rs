//! Batched generation on the tiny model (it needs the runtime: ONNX Runtime and the converted
//! tiny model): rows with their own options give what they give alone, the observer sees every
//! token and finish, a row can be cancelled, and `generate` derives its per-row seeds as
//! `generate_with` documents.

use frognano_llm::generate::{GenerationObserver, RowRequest, generate_with, seed_of_row};
use frognano_llm::{
    ChatMessage, DecoderModel, FinishReason, Generation, GenerationOptions, ModelOptions,
    TextCodec, assets, generate,
};

fn tiny() -> (DecoderModel, TextCodec) {
    let dir = assets::tiny_model(&|_| {})
        .expect("tiny model")
        .join("fp32");
    let model = DecoderModel::load(&dir, &ModelOptions::default()).expect("load");
    let codec = TextCodec::load(&dir).expect("tokenizer");
    (model, codec)
}

fn prompt(codec: &TextCodec, text: &str) -> Vec<u32> {
    let rendered = codec
        .render_chat(&[ChatMessage::new("user", text)], true)
        .expect("render");
    codec.encode(&rendered).expect("encode")
}

/// Counts tokens per row and cancels row `cancel` after its `after`-th token.
struct Recorder {
    tokens: Vec<Vec<u32>>,
    finished: Vec<Option<Generation>>,
    cancel: usize,
    after: usize,
}

impl GenerationObserver for Recorder {
    fn on_token(&mut self, row: usize, token_id: u32, _logprob: f32) -> bool {
        self.tokens[row].push(token_id);
        !(row == self.cancel && self.tokens[row].len() >= self.after)
    }

    fn on_finish(&mut self, row: usize, generation: &Generation) {
        assert!(self.finished[row].is_none(), "row {row} finished twice");
        self.finished[row] = Some(generation.clone());
    }
}

#[test]
fn rows_with_their_own_options_match_their_runs_alone_and_report_as_they_go() {
    let (mut model, codec) = tiny();
    let prompts = [
        prompt(&codec, "a"),
        prompt(&codec, "a longer prompt than the first one"),
        prompt(&codec, "third"),
    ];
    let options = [
        GenerationOptions {
            seed: 11,
            top_k: 20,
            stop_token_ids: Some(Vec::new()),
            ..GenerationOptions::greedy(7)
        },
        GenerationOptions {
            temperature: 1.0,
            top_p: 0.9,
            seed: 5,
            stop_token_ids: Some(Vec::new()),
            ..GenerationOptions::greedy(12)
        },
        GenerationOptions {
            temperature: 0.8,
            seed: 9,
            stop_token_ids: Some(Vec::new()),
            ..GenerationOptions::greedy(10)
        },
    ];
    let rows: Vec<RowRequest<'_>> = prompts
        .iter()
        .zip(&options)
        .map(|(prompt, options)| RowRequest {
            prompt,
            options: options.clone(),
        })
        .collect();
    let mut recorder = Recorder {
        tokens: vec![Vec::new(); 3],
        finished: vec![None; 3],
        cancel: 2,
        after: 4,
    };
    let (batched, _) = generate_with(&mut model, &codec, &rows, &mut recorder).expect("batched");
    for row in 0..2 {
        let (alone, _) =
            generate_with(&mut model, &codec, &rows[row..row + 1], &mut ()).expect("alone");
        // Padding changes the arithmetic slightly, not the tokens.
        assert_eq!(batched[row].token_ids, alone[0].token_ids, "row {row}");
        assert_eq!(batched[row].text, alone[0].text, "row {row}");
        for (a, b) in batched[row].logprobs.iter().zip(&alone[0].logprobs) {
            assert!((a - b).abs() < 1e-3, "row {row}: {a} vs {b}");
        }
        assert_eq!(recorder.tokens[row], batched[row].token_ids);
        assert_eq!(recorder.finished[row].as_ref(), Some(&batched[row]));
    }
    assert_eq!(batched[0].token_ids.len(), 7);
    assert_eq!(batched[1].token_ids.len(), 12);
    assert_eq!(batched[2].finish_reason, FinishReason::Cancelled);
    assert_eq!(batched[2].token_ids.len(), 4);

    // `generate` is `generate_with` with the seeds it derives per row.
    let same = GenerationOptions {
        temperature: 1.0,
        seed: 3,
        stop_token_ids: Some(Vec::new()),
        ..GenerationOptions::greedy(6)
    };
    let (whole, _) = generate(&mut model, &codec, &prompts, &same).expect("generate");
    let row = RowRequest {
        prompt: &prompts[1],
        options: GenerationOptions {
            seed: seed_of_row(3, 1),
            ..same.clone()
        },
    };
    let (one, _) = generate_with(&mut model, &codec, &[row], &mut ()).expect("one row");
    assert_eq!(whole[1].token_ids, one[0].token_ids);
}
