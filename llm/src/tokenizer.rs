//! Tokenizer (`tokenizers`' `tokenizer.json`) and chat template (minijinja, rendered the way
//! transformers' `apply_chat_template` does: trimmed blocks, Python string methods, a
//! `raise_exception` function).

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::error::{InferenceError, Result};

/// One chat message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// `system`, `user` or `assistant`.
    pub role: String,
    /// The text.
    pub content: String,
}

impl ChatMessage {
    /// A message with the given role.
    pub fn new(role: &str, content: impl Into<String>) -> Self {
        ChatMessage {
            role: role.to_string(),
            content: content.into(),
        }
    }
}

/// A model's tokenizer and chat template.
#[derive(Debug)]
pub struct TextCodec {
    tokenizer: tokenizers::Tokenizer,
    chat_template: Option<String>,
    bos_token: String,
    eos_token: String,
}

fn special_token_text(config: &Value, key: &str) -> String {
    match config.get(key) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Object(o)) => o
            .get("content")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        _ => String::new(),
    }
}

impl TextCodec {
    /// Loads `tokenizer.json` and the chat template (`tokenizer_config.json`'s `chat_template`,
    /// else `chat_template.jinja`) from a model folder.
    pub fn load(dir: &Path) -> Result<Self> {
        let path = dir.join("tokenizer.json");
        let tokenizer = tokenizers::Tokenizer::from_file(&path)
            .map_err(|e| InferenceError::Tokenizer(format!("{}: {e}", path.display())))?;
        let config_path = dir.join("tokenizer_config.json");
        let config: Value = if config_path.is_file() {
            let text = std::fs::read_to_string(&config_path).map_err(InferenceError::io(
                format!("read {}", config_path.display()),
            ))?;
            serde_json::from_str(&text)
                .map_err(|e| InferenceError::model(&config_path, format!("invalid JSON: {e}")))?
        } else {
            Value::Null
        };
        let chat_template = match config.get("chat_template") {
            Some(Value::String(s)) => Some(s.clone()),
            // A list of named templates: the default one.
            Some(Value::Array(items)) => items
                .iter()
                .find(|t| t.get("name").and_then(Value::as_str) == Some("default"))
                .or_else(|| items.first())
                .and_then(|t| t.get("template"))
                .and_then(Value::as_str)
                .map(str::to_string),
            _ => {
                let jinja = dir.join("chat_template.jinja");
                if jinja.is_file() {
                    Some(
                        std::fs::read_to_string(&jinja)
                            .map_err(InferenceError::io(format!("read {}", jinja.display())))?,
                    )
                } else {
                    None
                }
            }
        };
        Ok(TextCodec {
            tokenizer,
            chat_template,
            bos_token: special_token_text(&config, "bos_token"),
            eos_token: special_token_text(&config, "eos_token"),
        })
    }

    /// Token ids of `text`, special-token markup (`<|im_start|>`) recognised, nothing added.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        let encoding = self
            .tokenizer
            .encode(text, false)
            .map_err(|e| InferenceError::Tokenizer(format!("encode: {e}")))?;
        Ok(encoding.get_ids().to_vec())
    }

    /// Text of `ids`; special tokens are dropped when `skip_special` is set.
    pub fn decode(&self, ids: &[u32], skip_special: bool) -> Result<String> {
        self.tokenizer
            .decode(ids, skip_special)
            .map_err(|e| InferenceError::Tokenizer(format!("decode: {e}")))
    }

    /// The id of a token's exact text, if it is in the vocabulary.
    pub fn token_id(&self, token: &str) -> Option<u32> {
        self.tokenizer.token_to_id(token)
    }

    /// Vocabulary size including added tokens.
    pub fn vocab_size(&self) -> usize {
        self.tokenizer.get_vocab_size(true)
    }

    /// Whether the model has a chat template.
    pub fn has_chat_template(&self) -> bool {
        self.chat_template.is_some()
    }

    /// Renders a conversation with the model's chat template; `add_generation_prompt` appends
    /// the header of the assistant's next turn.
    pub fn render_chat(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
    ) -> Result<String> {
        let template = self
            .chat_template
            .as_deref()
            .ok_or_else(|| InferenceError::ChatTemplate("the model has no chat template".into()))?;
        let mut env = minijinja::Environment::new();
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function(
            "raise_exception",
            |message: String| -> std::result::Result<String, minijinja::Error> {
                Err(minijinja::Error::new(
                    minijinja::ErrorKind::InvalidOperation,
                    message,
                ))
            },
        );
        env.add_template("chat", template)
            .map_err(|e| InferenceError::ChatTemplate(format!("parse: {e}")))?;
        let compiled = env
            .get_template("chat")
            .map_err(|e| InferenceError::ChatTemplate(e.to_string()))?;
        compiled
            .render(minijinja::context! {
                messages => messages,
                add_generation_prompt => add_generation_prompt,
                bos_token => &self.bos_token,
                eos_token => &self.eos_token,
            })
            .map_err(|e| InferenceError::ChatTemplate(format!("render: {e}")))
    }
}
