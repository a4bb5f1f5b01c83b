//! A decoder-only language model in ONNX, run with ONNX Runtime.
//!
//! Two export layouts are read: Hugging Face optimum's (`input_ids`, `attention_mask`,
//! `position_ids`, `past_key_values.{i}.key/value` in, `logits` and `present.{i}.key/value` out)
//! and onnxruntime-genai's builder layout (the same tensors, names taken from
//! `genai_config.json`, `position_ids` optional, weights possibly int4 `MatMulNBits`). The key/
//! value cache stays in ONNX Runtime's tensors: each step's `present.*` outputs are moved (not
//! copied) into the next step's `past_key_values.*` inputs.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use ort::session::builder::GraphOptimizationLevel;
use ort::session::{Session, SessionInputValue};
use ort::value::{DynValue, Tensor, ValueType};
use serde_json::Value;

use super::error::{InferenceError, Result};
use super::runtime::init_runtime;

/// What the runtime needs to know about a model, read from `config.json` (Hugging Face) or
/// `genai_config.json` (onnxruntime-genai).
#[derive(Debug, Clone, PartialEq)]
pub struct ModelConfig {
    /// Transformer blocks.
    pub num_layers: usize,
    /// Key/value heads (fewer than query heads with grouped-query attention).
    pub num_kv_heads: usize,
    /// Size of one head.
    pub head_dim: usize,
    /// Vocabulary size (logits per position).
    pub vocab_size: usize,
    /// Longest sequence (prompt + generated) the model accepts.
    pub context_length: usize,
    /// Tokens that end a generation.
    pub eos_token_ids: Vec<u32>,
    /// Beginning-of-sequence token, if the model has one.
    pub bos_token_id: Option<u32>,
    /// Token used for left padding (never attended to).
    pub pad_token_id: u32,
    /// The ONNX file, relative to the model folder.
    pub model_file: String,
    /// Name pattern of the past inputs, `%d` standing for the layer (`past_key_values.%d.key`).
    pub past_key_pattern: String,
    /// Same for values.
    pub past_value_pattern: String,
    /// Name pattern of the present outputs (`present.%d.key`).
    pub present_key_pattern: String,
    /// Same for values.
    pub present_value_pattern: String,
}

fn read_json(path: &Path) -> Result<Option<Value>> {
    if !path.is_file() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(path)
        .map_err(InferenceError::io(format!("read {}", path.display())))?;
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| InferenceError::model(path, format!("invalid JSON: {e}")))
}

fn token_ids(value: Option<&Value>) -> Vec<u32> {
    match value {
        Some(Value::Number(n)) => n.as_u64().map(|n| vec![n as u32]).unwrap_or_default(),
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|v| v.as_u64().map(|n| n as u32))
            .collect(),
        _ => Vec::new(),
    }
}

impl ModelConfig {
    /// The model's shape and special tokens as a JSON object: what the bindings report as a
    /// loaded model's configuration (each adding what it knows beside it).
    pub fn shape_json(&self) -> serde_json::Map<String, Value> {
        use serde_json::json;
        [
            ("num_layers", json!(self.num_layers)),
            ("num_kv_heads", json!(self.num_kv_heads)),
            ("head_dim", json!(self.head_dim)),
            ("vocab_size", json!(self.vocab_size)),
            ("context_length", json!(self.context_length)),
            ("eos_token_ids", json!(self.eos_token_ids)),
            ("bos_token_id", json!(self.bos_token_id)),
            ("pad_token_id", json!(self.pad_token_id)),
        ]
        .into_iter()
        .map(|(key, value)| (key.to_string(), value))
        .collect()
    }

    /// Reads the configuration of the model folder `dir`.
    pub fn load(dir: &Path) -> Result<Self> {
        let hf = read_json(&dir.join("config.json"))?;
        let genai = read_json(&dir.join("genai_config.json"))?;
        let generation = read_json(&dir.join("generation_config.json"))?;
        let decoder = genai.as_ref().and_then(|g| g.pointer("/model/decoder"));
        let pick = |hf_keys: &[&str], genai_keys: &[&str]| -> Option<u64> {
            hf_keys
                .iter()
                .find_map(|k| hf.as_ref().and_then(|h| h.get(*k)).and_then(Value::as_u64))
                .or_else(|| {
                    genai_keys
                        .iter()
                        .find_map(|k| decoder.and_then(|d| d.get(*k)).and_then(Value::as_u64))
                })
        };
        let missing = |what: &str| {
            InferenceError::model(
                dir,
                format!("config.json / genai_config.json do not give {what}"),
            )
        };
        let num_layers = pick(&["num_hidden_layers", "n_layer"], &["num_hidden_layers"])
            .ok_or_else(|| missing("the number of layers"))? as usize;
        let num_heads = pick(&["num_attention_heads"], &["num_attention_heads"]);
        let num_kv_heads = pick(&["num_key_value_heads"], &["num_key_value_heads"])
            .or(num_heads)
            .ok_or_else(|| missing("the number of key/value heads"))?
            as usize;
        let head_dim = match pick(&["head_dim"], &["head_size"]) {
            Some(d) => d as usize,
            None => {
                let hidden = pick(&["hidden_size"], &["hidden_size"])
                    .ok_or_else(|| missing("head_dim or hidden_size"))?;
                let heads = num_heads.ok_or_else(|| missing("the number of heads"))?;
                (hidden / heads.max(1)) as usize
            }
        };
        let vocab_size = pick(&["vocab_size"], &[])
            .or_else(|| {
                genai
                    .as_ref()
                    .and_then(|g| g.pointer("/model/vocab_size"))
                    .and_then(Value::as_u64)
            })
            .ok_or_else(|| missing("vocab_size"))? as usize;
        let context_length = pick(&["max_position_embeddings", "n_positions"], &[])
            .or_else(|| {
                genai
                    .as_ref()
                    .and_then(|g| g.pointer("/model/context_length"))
                    .and_then(Value::as_u64)
            })
            .unwrap_or(2048) as usize;
        let mut eos_token_ids = token_ids(generation.as_ref().and_then(|g| g.get("eos_token_id")));
        if eos_token_ids.is_empty() {
            eos_token_ids = token_ids(hf.as_ref().and_then(|h| h.get("eos_token_id")));
        }
        if eos_token_ids.is_empty() {
            eos_token_ids = token_ids(
                genai
                    .as_ref()
                    .and_then(|g| g.pointer("/model/eos_token_id")),
            );
        }
        // The first id under `name` in the Hugging Face config, else in the genai config.
        let first_id = |name: &str| {
            token_ids(hf.as_ref().and_then(|h| h.get(name)))
                .first()
                .copied()
                .or_else(|| {
                    let pointer = format!("/model/{name}");
                    token_ids(genai.as_ref().and_then(|g| g.pointer(&pointer)))
                        .first()
                        .copied()
                })
        };
        let bos_token_id = first_id("bos_token_id");
        let pad_token_id = first_id("pad_token_id")
            .or_else(|| eos_token_ids.first().copied())
            .unwrap_or(0);
        let text = |pointer: &str, default: &str| -> String {
            decoder
                .and_then(|d| d.pointer(pointer))
                .and_then(Value::as_str)
                .unwrap_or(default)
                .to_string()
        };
        Ok(ModelConfig {
            num_layers,
            num_kv_heads,
            head_dim,
            vocab_size,
            context_length,
            eos_token_ids,
            bos_token_id,
            pad_token_id,
            model_file: text("/filename", "model.onnx"),
            past_key_pattern: text("/inputs/past_key_names", "past_key_values.%d.key"),
            past_value_pattern: text("/inputs/past_value_names", "past_key_values.%d.value"),
            present_key_pattern: text("/outputs/present_key_names", "present.%d.key"),
            present_value_pattern: text("/outputs/present_value_names", "present.%d.value"),
        })
    }
}

/// Session options.
#[derive(Debug, Clone, Default)]
pub struct ModelOptions {
    /// Threads ONNX Runtime uses inside an operator (0: one per core).
    pub intra_threads: usize,
    /// An explicit ONNX Runtime library (else found automatically; see [`super::runtime`]).
    pub runtime_library: Option<PathBuf>,
}

/// One cache tensor pair per layer, owned by ONNX Runtime; `len` positions long.
#[derive(Debug)]
pub struct KvCache {
    values: Vec<DynValue>,
    /// Positions held (prompt + generated so far, padding included).
    pub len: usize,
    /// Rows.
    pub batch: usize,
}

/// The inputs of one forward step over a batch, row-major.
#[derive(Debug, Clone)]
pub struct StepInput<'a> {
    /// Rows.
    pub batch: usize,
    /// New positions per row.
    pub seq: usize,
    /// `batch x seq` token ids.
    pub input_ids: &'a [i64],
    /// `batch x (past + seq)`: 1 for real tokens, 0 for padding.
    pub attention_mask: &'a [i64],
    /// `batch x seq` positions.
    pub position_ids: &'a [i64],
}

/// A loaded decoder model.
#[derive(Debug)]
pub struct DecoderModel {
    /// Its folder.
    pub dir: PathBuf,
    /// Its configuration.
    pub config: ModelConfig,
    session: Session,
    past_inputs: Vec<String>,
    present_outputs: Vec<String>,
    has_attention_mask: bool,
    has_position_ids: bool,
    /// Weight bytes of the ONNX files (the bandwidth floor's numerator).
    pub weight_bytes: u64,
}

fn layer_name(pattern: &str, layer: usize) -> String {
    pattern.replace("%d", &layer.to_string())
}

impl DecoderModel {
    /// Loads the model in folder `dir` (see the module docs for the layouts read).
    pub fn load(dir: &Path, options: &ModelOptions) -> Result<Self> {
        let config = ModelConfig::load(dir)?;
        let file = dir.join(&config.model_file);
        if !file.is_file() {
            return Err(InferenceError::model(
                dir,
                format!("{} is missing", config.model_file),
            ));
        }
        let runtime = init_runtime(options.runtime_library.as_deref())?;
        let threads = if options.intra_threads == 0 {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        } else {
            options.intra_threads
        };
        let session = Session::builder(&runtime.environment)?
            .with_optimization_level(GraphOptimizationLevel::Level3)
            .map_err(ort::Error::from)?
            .with_intra_threads(threads)
            .map_err(ort::Error::from)?
            .commit_from_file(&file)
            .map_err(|e| {
                InferenceError::model(&file, format!("ONNX Runtime cannot load it: {e}"))
            })?;
        let input_names: Vec<String> = session
            .inputs()
            .iter()
            .map(|i| i.name().to_string())
            .collect();
        let output_names: Vec<String> = session
            .outputs()
            .iter()
            .map(|o| o.name().to_string())
            .collect();
        if !input_names.iter().any(|n| n == "input_ids") {
            return Err(InferenceError::model(
                &file,
                "the graph has no input_ids input",
            ));
        }
        if !output_names.iter().any(|n| n == "logits") {
            return Err(InferenceError::model(
                &file,
                "the graph has no logits output",
            ));
        }
        let mut past_inputs = Vec::new();
        let mut present_outputs = Vec::new();
        for layer in 0..config.num_layers {
            for (past, present) in [
                (&config.past_key_pattern, &config.present_key_pattern),
                (&config.past_value_pattern, &config.present_value_pattern),
            ] {
                let past = layer_name(past, layer);
                let present = layer_name(present, layer);
                if !input_names.contains(&past) || !output_names.contains(&present) {
                    return Err(InferenceError::model(
                        &file,
                        format!(
                            "expected cache input {past} and output {present} (layer {layer} of \
                             {}); is this a decoder exported with its key/value cache?",
                            config.num_layers
                        ),
                    ));
                }
                past_inputs.push(past);
                present_outputs.push(present);
            }
        }
        if let Some(ValueType::Tensor { ty, shape, .. }) = session
            .inputs()
            .iter()
            .find(|i| i.name() == past_inputs[0])
            .map(|outlet| outlet.dtype())
        {
            {
                if *ty != ort::value::TensorElementType::Float32 {
                    return Err(InferenceError::model(
                        &file,
                        format!(
                            "key/value cache of type {ty:?}; only float32 caches are supported"
                        ),
                    ));
                }
                let dims: Vec<i64> = shape.iter().copied().collect();
                if dims.len() == 4
                    && ((dims[1] > 0 && dims[1] as usize != config.num_kv_heads)
                        || (dims[3] > 0 && dims[3] as usize != config.head_dim))
                {
                    return Err(InferenceError::model(
                        &file,
                        format!(
                            "cache shape {dims:?} disagrees with the config ({} key/value heads of \
                             size {})",
                            config.num_kv_heads, config.head_dim
                        ),
                    ));
                }
            }
        }
        let weight_bytes = Self::weight_file_bytes(dir)?;
        Ok(DecoderModel {
            dir: dir.to_path_buf(),
            has_attention_mask: input_names.iter().any(|n| n == "attention_mask"),
            has_position_ids: input_names.iter().any(|n| n == "position_ids"),
            config,
            session,
            past_inputs,
            present_outputs,
            weight_bytes,
        })
    }

    /// Bytes of the model's ONNX files (graph and external weights) in `dir`.
    pub fn weight_file_bytes(dir: &Path) -> Result<u64> {
        Ok(std::fs::read_dir(dir)
            .map_err(InferenceError::io(format!("list {}", dir.display())))?
            .filter_map(|e| e.ok())
            .filter(|e| {
                let name = e.file_name().to_string_lossy().to_string();
                name.ends_with(".onnx") || name.ends_with(".onnx.data") || name.ends_with(".data")
            })
            .filter_map(|e| e.metadata().ok().map(|m| m.len()))
            .sum())
    }

    /// Whether the graph takes explicit positions (needed for left-padded batches).
    pub fn has_position_ids(&self) -> bool {
        self.has_position_ids
    }

    /// An empty cache for `batch` rows.
    pub fn empty_cache(&self, batch: usize) -> Result<KvCache> {
        let shape = [batch, self.config.num_kv_heads, 0, self.config.head_dim];
        let values = (0..self.past_inputs.len())
            .map(|_| Ok(Tensor::<f32>::from_array((shape, Vec::<f32>::new()))?.into_dyn()))
            .collect::<Result<Vec<_>>>()?;
        Ok(KvCache {
            values,
            len: 0,
            batch,
        })
    }

    /// Runs one step: the new positions of every row over the cache. Returns the logits of
    /// each row's last position (`batch x vocab`, row-major) and the grown cache.
    pub fn step(&mut self, input: &StepInput<'_>, cache: KvCache) -> Result<(Vec<f32>, KvCache)> {
        let StepInput {
            batch,
            seq,
            input_ids,
            attention_mask,
            position_ids,
        } = *input;
        let total = cache.len + seq;
        if cache.batch != batch
            || input_ids.len() != batch * seq
            || attention_mask.len() != batch * total
            || position_ids.len() != batch * seq
            || seq == 0
        {
            return Err(InferenceError::InvalidRequest(format!(
                "step shapes disagree: batch {batch}, seq {seq}, cache {}x{}, ids {}, mask {}, \
                 positions {}",
                cache.batch,
                cache.len,
                input_ids.len(),
                attention_mask.len(),
                position_ids.len()
            )));
        }
        let mut inputs: Vec<(Cow<'_, str>, SessionInputValue<'_>)> = Vec::new();
        inputs.push((
            "input_ids".into(),
            Tensor::from_array(([batch, seq], input_ids.to_vec()))?.into(),
        ));
        if self.has_attention_mask {
            inputs.push((
                "attention_mask".into(),
                Tensor::from_array(([batch, total], attention_mask.to_vec()))?.into(),
            ));
        }
        if self.has_position_ids {
            inputs.push((
                "position_ids".into(),
                Tensor::from_array(([batch, seq], position_ids.to_vec()))?.into(),
            ));
        }
        for (name, value) in self.past_inputs.iter().zip(cache.values.iter()) {
            inputs.push((Cow::Borrowed(name.as_str()), value.into()));
        }
        let vocab = self.config.vocab_size;
        let mut outputs = self.session.run(inputs)?;
        let logits = {
            let (shape, data) = outputs["logits"].try_extract_tensor::<f32>()?;
            let dims: Vec<i64> = shape.iter().copied().collect();
            if dims.len() != 3 || dims[0] as usize != batch || dims[2] as usize != vocab {
                return Err(InferenceError::Inference(format!(
                    "logits of shape {dims:?}, expected [{batch}, seq, {vocab}]"
                )));
            }
            let positions = dims[1] as usize;
            let mut last = Vec::with_capacity(batch * vocab);
            for row in 0..batch {
                let start = (row * positions + positions - 1) * vocab;
                last.extend_from_slice(&data[start..start + vocab]);
            }
            last
        };
        let mut values = Vec::with_capacity(self.present_outputs.len());
        for name in &self.present_outputs {
            let value = outputs
                .remove(name.as_str())
                .ok_or_else(|| InferenceError::Inference(format!("no output {name}")))?;
            values.push(value);
        }
        Ok((
            logits,
            KvCache {
                values,
                len: total,
                batch,
            },
        ))
    }

    /// Logits of every position of one unpadded sequence, computed without a cache
    /// (`seq x vocab`): the reference that cached decoding is checked against.
    pub fn full_logits(&mut self, ids: &[u32]) -> Result<Vec<f32>> {
        let seq = ids.len();
        let input_ids: Vec<i64> = ids.iter().map(|&t| t as i64).collect();
        let mask = vec![1i64; seq];
        let positions: Vec<i64> = (0..seq as i64).collect();
        let cache = self.empty_cache(1)?;
        let mut inputs: Vec<(Cow<'_, str>, SessionInputValue<'_>)> = vec![(
            "input_ids".into(),
            Tensor::from_array(([1, seq], input_ids))?.into(),
        )];
        if self.has_attention_mask {
            inputs.push((
                "attention_mask".into(),
                Tensor::from_array(([1, seq], mask))?.into(),
            ));
        }
        if self.has_position_ids {
            inputs.push((
                "position_ids".into(),
                Tensor::from_array(([1, seq], positions))?.into(),
            ));
        }
        for (name, value) in self.past_inputs.iter().zip(cache.values.iter()) {
            inputs.push((Cow::Borrowed(name.as_str()), value.into()));
        }
        let outputs = self.session.run(inputs)?;
        let (_, data) = outputs["logits"].try_extract_tensor::<f32>()?;
        Ok(data.to_vec())
    }
}
