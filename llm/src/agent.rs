//! [`OnnxPolicy`]: a local language model acting through the environment's tool protocol.
//!
//! Each episode becomes a chat: a system prompt, the environment's first observation (problem
//! statement, repository map and the command grammar) as the user's message, then one assistant
//! message per action and one user message per observation. The model's reply is the action
//! (`Action::Text`); the environment parses it with its grammar and answers malformed replies
//! with an error observation the model sees next turn. All episodes of an `act` call are
//! generated as one left-padded batch.

use std::path::Path;

use frognano_core::{Action, Policy, PolicyContext, PolicyOutput};
use serde::{Deserialize, Serialize};

use super::error::{InferenceError, Result};
use super::generate::{GenerationOptions, generate};
use super::model::{DecoderModel, ModelOptions};
use super::tokenizer::{ChatMessage, TextCodec};

/// The system prompt used unless the configuration gives another.
pub const DEFAULT_SYSTEM_PROMPT: &str = "You are a careful software engineer fixing a bug in a \
Python repository. You cannot run code yourself: you act only through commands, one command per \
reply, with no explanation and no code block around it. Start by running the tests, read the code \
the failures point to, make one small edit, run the tests again, and submit when they pass.
Example replies:
test
view src/pkg/module.py 1-60
search \"def parse\" src
edit src/pkg/module.py
<<<<<<< SEARCH
    return a - b
=======
    return a + b
>>>>>>> REPLACE
submit";

/// The chat of an episode as every chat-model policy prompts it: the system prompt
/// ([`DEFAULT_SYSTEM_PROMPT`] when none is given), the first observation as the user's message,
/// a note when the oldest `skip_turns` turns are left out to fit a context, then one assistant
/// message (the action's text) and one user message (the observation) per turn.
pub fn episode_messages(
    system_prompt: Option<&str>,
    context: &PolicyContext,
    skip_turns: usize,
) -> Vec<ChatMessage> {
    let system = system_prompt.unwrap_or(DEFAULT_SYSTEM_PROMPT).to_string();
    let mut messages = vec![
        ChatMessage::new("system", system),
        ChatMessage::new("user", context.initial.text.clone()),
    ];
    if skip_turns > 0 {
        messages.push(ChatMessage::new(
            "user",
            format!("({skip_turns} earlier turns omitted to fit the context.)"),
        ));
    }
    for turn in context.history.iter().skip(skip_turns) {
        messages.push(ChatMessage::new("assistant", action_text(&turn.action)));
        messages.push(ChatMessage::new("user", turn.observation.text.clone()));
    }
    messages
}

/// The text of an action as the model would have written it (a tool call as its JSON).
pub fn action_text(action: &Action) -> String {
    match action {
        Action::Text { text } => text.clone(),
        Action::Tool(call) => serde_json::to_string(call).unwrap_or_default(),
    }
}

/// An episode's chat ([`episode_messages`]) rendered with `codec`'s chat template, as text and
/// token ids, with at least `min_skip` of the oldest turns left out and more dropped until it
/// fits `budget` tokens; when even the first observation alone does not fit, the end of it is
/// cut (marked `[truncated]`). The one way every policy that renders its own prompts (local
/// models, and served models on the completions API) fits a context.
pub fn fitted_prompt(
    codec: &TextCodec,
    system_prompt: Option<&str>,
    context: &PolicyContext,
    budget: usize,
    min_skip: usize,
) -> Result<(String, Vec<u32>)> {
    let render = |context: &PolicyContext, skip: usize| -> Result<(String, Vec<u32>)> {
        let text = codec.render_chat(&episode_messages(system_prompt, context, skip), true)?;
        let ids = codec.encode(&text)?;
        Ok((text, ids))
    };
    let mut skip = min_skip.min(context.history.len());
    loop {
        let (text, ids) = render(context, skip)?;
        if ids.len() <= budget {
            return Ok((text, ids));
        }
        if skip < context.history.len() {
            skip += 1;
            continue;
        }
        break;
    }
    // Even the first observation alone is too long: keep as much of its beginning as fits
    // next to the system prompt and the template.
    let mut shortened = context.clone();
    shortened.history.clear();
    let full_text = std::mem::take(&mut shortened.initial.text);
    let overhead = render(&shortened, 0)?.1.len() + 8;
    if overhead >= budget {
        return Err(InferenceError::InvalidRequest(format!(
            "the system prompt and chat template alone take {overhead} of the {budget} prompt tokens"
        )));
    }
    let mut keep = full_text.len();
    for _ in 0..8 {
        let tokens = codec.encode(&full_text[..keep])?.len().max(1);
        let room = budget - overhead;
        if tokens <= room {
            break;
        }
        keep = keep * room / tokens * 9 / 10;
        while !full_text.is_char_boundary(keep) {
            keep -= 1;
        }
    }
    shortened.initial.text = format!("{}\n[truncated]", &full_text[..keep]);
    let (text, ids) = render(&shortened, 0)?;
    if ids.len() <= budget {
        Ok((text, ids))
    } else {
        Err(InferenceError::InvalidRequest(format!(
            "the prompt does not fit in {budget} tokens even truncated"
        )))
    }
}

/// How an [`OnnxPolicy`] prompts and samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OnnxPolicyConfig {
    /// Sampling options of each reply (default: greedy, 384 tokens).
    pub generation: GenerationOptions,
    /// The system prompt (default: [`DEFAULT_SYSTEM_PROMPT`]).
    pub system_prompt: Option<String>,
    /// Longest prompt in tokens; older turns are dropped to fit (0: the model's context minus
    /// the reply budget).
    pub max_prompt_tokens: usize,
    /// ONNX Runtime threads (0: one per core).
    pub intra_threads: usize,
}

impl Default for OnnxPolicyConfig {
    fn default() -> Self {
        OnnxPolicyConfig {
            generation: GenerationOptions::greedy(384),
            system_prompt: None,
            max_prompt_tokens: 0,
            intra_threads: 0,
        }
    }
}

/// A policy backed by a local ONNX decoder model.
#[derive(Debug)]
pub struct OnnxPolicy {
    model: DecoderModel,
    codec: TextCodec,
    config: OnnxPolicyConfig,
    calls: u64,
}

impl OnnxPolicy {
    /// Loads the model folder `dir` (see [`super::model`] for the layouts read).
    pub fn load(dir: &Path, config: OnnxPolicyConfig) -> Result<Self> {
        config.generation.validate()?;
        let model = DecoderModel::load(
            dir,
            &ModelOptions {
                intra_threads: config.intra_threads,
                runtime_library: None,
            },
        )?;
        let codec = TextCodec::load(dir)?;
        if !codec.has_chat_template() {
            return Err(InferenceError::model(
                dir,
                "no chat template (tokenizer_config.json chat_template or chat_template.jinja); \
                 the policy prompts an instruction-tuned chat model",
            ));
        }
        Ok(OnnxPolicy {
            model,
            codec,
            config,
            calls: 0,
        })
    }

    /// Swaps in the model folder `dir` (new weights after a learner's update, same tokenizer
    /// and prompting): the next `act` runs it. On error the current model stays loaded.
    pub fn reload(&mut self, dir: &Path) -> Result<()> {
        let model = DecoderModel::load(
            dir,
            &ModelOptions {
                intra_threads: self.config.intra_threads,
                runtime_library: None,
            },
        )?;
        let codec = TextCodec::load(dir)?;
        self.model = model;
        self.codec = codec;
        Ok(())
    }

    /// How replies are prompted and sampled.
    pub fn config(&self) -> &OnnxPolicyConfig {
        &self.config
    }

    /// Changes how replies are sampled (e.g. greedy for evaluation, sampling for rollouts).
    pub fn set_generation(&mut self, generation: GenerationOptions) -> Result<()> {
        generation.validate()?;
        self.config.generation = generation;
        Ok(())
    }

    /// The model.
    pub fn model(&mut self) -> &mut DecoderModel {
        &mut self.model
    }

    /// The tokenizer and chat template.
    pub fn codec(&self) -> &TextCodec {
        &self.codec
    }

    /// The chat of an episode, with its oldest `skip_turns` turns left out.
    pub fn messages(&self, context: &PolicyContext, skip_turns: usize) -> Vec<ChatMessage> {
        episode_messages(self.config.system_prompt.as_deref(), context, skip_turns)
    }

    fn prompt_budget(&self) -> usize {
        let context = self.model.config.context_length;
        let reply = self.config.generation.max_new_tokens.min(context / 2);
        let budget = context - reply;
        if self.config.max_prompt_tokens == 0 {
            budget
        } else {
            self.config.max_prompt_tokens.min(budget)
        }
    }

    /// Prompt token ids of an episode, dropping the oldest turns (then the end of the first
    /// observation) until it fits the prompt budget ([`fitted_prompt`]).
    pub fn prompt_ids(&self, context: &PolicyContext) -> Result<Vec<u32>> {
        let system = self.config.system_prompt.as_deref();
        fitted_prompt(&self.codec, system, context, self.prompt_budget(), 0).map(|(_, ids)| ids)
    }

    /// Replies to several episodes at once (one batch).
    pub fn reply(&mut self, contexts: &[PolicyContext]) -> Result<Vec<PolicyOutput>> {
        let prompts = contexts
            .iter()
            .map(|c| self.prompt_ids(c))
            .collect::<Result<Vec<_>>>()?;
        let options = GenerationOptions {
            // A different stream per call, still reproducible from the configured seed.
            seed: self.config.generation.seed.wrapping_add(self.calls),
            ..self.config.generation.clone()
        };
        self.calls += 1;
        let (generations, _) = generate(&mut self.model, &self.codec, &prompts, &options)?;
        Ok(generations
            .into_iter()
            .zip(prompts)
            .map(|(g, prompt)| PolicyOutput {
                action: Action::Text { text: g.text },
                decision: Some(serde_json::json!({
                    "prompt_tokens": g.prompt_tokens,
                    "finish_reason": g.finish_reason,
                    "temperature": options.temperature,
                    "top_k": options.top_k,
                    "top_p": options.top_p,
                })),
                logprobs: g.logprobs,
                prompt_ids: Some(prompt),
                // Every generated token is the model's own, the final stop token included.
                loss_mask: Some(vec![true; g.token_ids.len()]),
                token_ids: Some(g.token_ids),
                error: None,
            })
            .collect())
    }
}

impl Policy for OnnxPolicy {
    fn act(&mut self, contexts: &[PolicyContext]) -> frognano_core::Result<Vec<PolicyOutput>> {
        Ok(self.reply(contexts)?)
    }
}
