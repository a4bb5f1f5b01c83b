//! Local language models: the model handle, its loading options and generation.

use std::ffi::c_char;

use frognano_policy::llm::{
    ChatMessage, DecoderModel, GenerationOptions, ModelOptions, TextCodec, assets, generate,
};

use crate::error::{FrognanoError, invalid_option};
use crate::ffi::{
    HandleArg, HandleArgMut, free_handle, guard, json_object_arg, optional_str_arg, out_arg,
    parse_json_object, str_arg, write_handle, write_json,
};

/// A local decoder language model on ONNX Runtime, with its tokenizer and chat template.
///
/// Created by `frognano_model_load`, freed with `frognano_model_free`. Thread safety: used by
/// one thread at a time (it may be handed from thread to thread); different models may be used
/// on different threads at once.
#[derive(Debug)]
pub struct FrognanoModel {
    model: DecoderModel,
    codec: TextCodec,
}

/// The options of `frognano_model_load`.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
struct ModelLoadOptions {
    intra_threads: usize,
    runtime_library: Option<std::path::PathBuf>,
}

/// Loads a local language model.
///
/// - `model`: a model folder (holding `model.onnx`, `config.json`, `tokenizer.json` and,
///   for chat requests, a chat template), an `.onnx` file in one, or a registry name such as
///   `"smollm2-135m"` (int4) or `"smollm2-135m:fp32"`, fetched, verified and converted into the
///   cache on first use (minutes; nothing is printed).
/// - `options_json`: `NULL` for the defaults, or a JSON object with `intra_threads` (ONNX
///   Runtime threads; 0, the default, is one per core) and `runtime_library` (the path of the
///   `libonnxruntime` to load). Unknown keys are an error.
///
/// ONNX Runtime is loaded once per process, by the first model: from `runtime_library`, else
/// `FROGNANO_ORT_LIBRARY` (or `ORT_DYLIB_PATH`), else the inference environment in the cache
/// (`frognano models setup`), else the `onnxruntime` package of the host Python. A later
/// `runtime_library` must name the library already loaded.
///
/// On success writes an owned handle to `*out` (free it with `frognano_model_free`) and returns
/// `NULL`. On failure returns an owned error and leaves `*out` untouched:
/// `FROGNANO_ERROR_CODE_INFERENCE` for a missing or unusable model folder, an unknown registry
/// name or an ONNX Runtime that cannot be found or loaded, `FROGNANO_ERROR_CODE_INVALID_OPTION`
/// for malformed `options_json`. Thread safety: may be called from any thread.
///
/// # Safety
///
/// `model` must be `NULL` or a NUL-terminated string; `options_json` must be `NULL` or a
/// NUL-terminated string; `out` must be `NULL` or point to writable storage for a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_model_load(
    model: *const c_char,
    options_json: *const c_char,
    out: *mut *mut FrognanoModel,
) -> *mut FrognanoError {
    guard(|| {
        // SAFETY: the caller passes NULL or a valid NUL-terminated string.
        let model = unsafe { str_arg(model, "model") }?;
        // SAFETY: the caller passes NULL or a valid NUL-terminated string.
        let options_json = unsafe { optional_str_arg(options_json, "options_json") }?;
        out_arg(out, "out")?;
        let options: ModelLoadOptions = match options_json {
            None => ModelLoadOptions::default(),
            Some(text) => {
                json_object_arg(parse_json_object(text, "options_json")?, "options_json")?
            }
        };
        let dir = assets::resolve_model(model, &|_| {})?;
        let model = DecoderModel::load(
            &dir,
            &ModelOptions {
                intra_threads: options.intra_threads,
                runtime_library: options.runtime_library,
            },
        )?;
        let codec = TextCodec::load(&dir)?;
        // SAFETY: `out` is non-NULL (checked above) and the caller guarantees it is writable.
        unsafe { write_handle(out, FrognanoModel { model, codec }) };
        Ok(())
    })
}

/// The token ids of prompt `index` of a request.
fn request_prompt(
    codec: &TextCodec,
    prompt: &serde_json::Value,
    index: usize,
    chat: bool,
) -> Result<Vec<u32>, FrognanoError> {
    use serde_json::Value;
    let at = format!("prompts[{index}]");
    if chat {
        let messages: Vec<ChatMessage> = match prompt {
            Value::String(text) => vec![ChatMessage::new("user", text.clone())],
            Value::Array(_) => serde_json::from_value(prompt.clone()).map_err(|e| {
                invalid_option(format!(
                    "request_json: `{at}`: a conversation is an array of {{\"role\", \"content\"}} \
                     objects: {e}"
                ))
            })?,
            _ => {
                return Err(invalid_option(format!(
                    "request_json: `{at}` must be a string (one user message) or an array of \
                     {{\"role\", \"content\"}} objects when `chat` is true"
                )));
            }
        };
        return Ok(codec.encode(&codec.render_chat(&messages, true)?)?);
    }
    match prompt {
        Value::String(text) => Ok(codec.encode(text)?),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                item.as_u64()
                    .and_then(|id| u32::try_from(id).ok())
                    .ok_or_else(|| {
                        invalid_option(format!(
                            "request_json: `{at}[{i}]`: a token id is an integer from 0 to \
                             4294967295, got {item}"
                        ))
                    })
            })
            .collect(),
        _ => Err(invalid_option(format!(
            "request_json: `{at}` must be a string (raw text) or an array of token ids"
        ))),
    }
}

/// Generates a continuation of each prompt of a request, all rows in one batch.
///
/// `request_json` is a JSON object:
/// - `prompts` (required): an array; each prompt is raw text (encoded with the tokenizer;
///   special-token markup such as `<|im_start|>` is recognised, nothing is added) or an array
///   of token ids. With `"chat": true` each prompt is instead a conversation, an array of
///   `{"role", "content"}` objects (or a string: one user message), rendered with the model's
///   chat template and the header of the assistant's turn.
/// - `chat`: see above (default `false`).
/// - `options`: `max_new_tokens` (default 256), `temperature` (default 1.0; 0 decodes
///   greedily), `top_k` (0: off), `top_p` (1: off), `seed` (row r samples from a generator
///   seeded by (seed, r), so a request is reproducible), `stop` (strings that end a row; the
///   text stops before the first), `stop_token_ids` (default: the model's end-of-sequence
///   tokens). Unknown keys are an error.
///
/// On success writes an owned UTF-8 JSON object to `*out_json` (free it with
/// `frognano_string_free`) and returns `NULL`: `generations`, one object per prompt with
/// `token_ids` (every token sampled, a final stop token included), `logprobs` (one per token:
/// its log-probability under the distribution it was sampled from), `text` (special tokens
/// removed, cut before a stop string), `finish_reason` (`"eos"`, `"stop"` or `"length"`) and
/// `prompt_tokens`; and `timing` (`prefill_s`, `decode_s`, `first_token_s`, `prompt_tokens`,
/// `generated_tokens`, `decode_steps`). On failure returns an owned error and leaves
/// `*out_json` untouched: `FROGNANO_ERROR_CODE_INVALID_OPTION` for malformed JSON, a bad
/// prompt (empty, a token outside the vocabulary, longer than the context) or bad options,
/// `FROGNANO_ERROR_CODE_INFERENCE` when the tokenizer, the chat template or ONNX Runtime fails.
/// Thread safety: one call at a time per model.
///
/// # Safety
///
/// `model` must be `NULL` or a model returned by this library and not yet freed, with no other
/// call on it in progress; `request_json` must be `NULL` or a NUL-terminated string;
/// `out_json` must be `NULL` or point to writable storage for a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_model_generate(
    model: *mut FrognanoModel,
    request_json: *const c_char,
    out_json: *mut *mut c_char,
) -> *mut FrognanoError {
    guard(|| {
        // SAFETY: the caller passes NULL or a live model handle used by this call only.
        let model = unsafe { model.live_mut("model") }?;
        // SAFETY: the caller passes NULL or a valid NUL-terminated string.
        let request_json = unsafe { str_arg(request_json, "request_json") }?;
        out_arg(out_json, "out_json")?;
        let serde_json::Value::Object(mut request) =
            parse_json_object(request_json, "request_json")?
        else {
            return Err(invalid_option("request_json must be a JSON object"));
        };
        if let Some(key) = request
            .keys()
            .find(|k| !["prompts", "chat", "options"].contains(&k.as_str()))
        {
            return Err(invalid_option(format!(
                "request_json: unknown key `{key}` (known: prompts, chat, options)"
            )));
        }
        let chat = match request.remove("chat") {
            None | Some(serde_json::Value::Null) => false,
            Some(serde_json::Value::Bool(chat)) => chat,
            Some(other) => {
                return Err(invalid_option(format!(
                    "request_json: `chat` must be true or false, got {other}"
                )));
            }
        };
        let options: GenerationOptions = match request.remove("options") {
            None | Some(serde_json::Value::Null) => GenerationOptions::default(),
            Some(value) => json_object_arg(value, "request_json: `options`")?,
        };
        options.validate()?;
        let Some(serde_json::Value::Array(prompts)) = request.remove("prompts") else {
            return Err(invalid_option(
                "request_json: `prompts` (an array of prompts) is required",
            ));
        };
        let prompts = prompts
            .iter()
            .enumerate()
            .map(|(i, p)| request_prompt(&model.codec, p, i, chat))
            .collect::<Result<Vec<_>, _>>()?;
        let (generations, timing) = generate(&mut model.model, &model.codec, &prompts, &options)?;
        // SAFETY: `out_json` is non-NULL (checked above) and the caller guarantees it is
        // writable.
        unsafe {
            write_json(
                out_json,
                &serde_json::json!({"generations": generations, "timing": timing}),
                "generations",
            )
        }
    })
}

/// Describes a model as one JSON object: `path` (its folder), `num_layers`, `num_kv_heads`,
/// `head_dim`, `vocab_size`, `context_length`, `eos_token_ids`, `bos_token_id` (or `null`),
/// `pad_token_id` and `has_chat_template`.
///
/// On success writes an owned UTF-8 string to `*out_json` (free it with
/// `frognano_string_free`) and returns `NULL`; on failure returns an owned error
/// (`FROGNANO_ERROR_CODE_NULL_POINTER`) and leaves `*out_json` untouched. Thread safety: may be
/// called from any thread while no `frognano_model_generate` runs on the model.
///
/// # Safety
///
/// `model` must be `NULL` or a model returned by this library and not yet freed; `out_json`
/// must be `NULL` or point to writable storage for a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_model_config_json(
    model: *const FrognanoModel,
    out_json: *mut *mut c_char,
) -> *mut FrognanoError {
    guard(|| {
        // SAFETY: the caller passes NULL or a live model handle.
        let model = unsafe { model.live("model") }?;
        out_arg(out_json, "out_json")?;
        let mut config = model.model.config.shape_json();
        config.insert(
            "path".into(),
            serde_json::json!(model.model.dir.to_string_lossy()),
        );
        config.insert(
            "has_chat_template".into(),
            serde_json::json!(model.codec.has_chat_template()),
        );
        // SAFETY: `out_json` is non-NULL (checked above) and the caller guarantees it is
        // writable.
        unsafe {
            write_json(
                out_json,
                &serde_json::Value::Object(config),
                "model configuration",
            )
        }
    })
}

/// Frees a model. `NULL` is accepted and ignored. No call on the model may be in progress, and
/// the handle must not be used afterwards. ONNX Runtime itself stays loaded for the process.
///
/// # Safety
///
/// `model` must be `NULL` or a model returned by this library and not yet freed, with no call
/// on it in progress; it must not be used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_model_free(model: *mut FrognanoModel) {
    // SAFETY: same contract as this function: `model` is NULL or an owned handle
    // handed back exactly once.
    unsafe { free_handle(model) };
}
