//! [`PolicySpec`]: the policy a short string names, parsed and built in one place for the CLI's
//! `--policy`, Python's `evaluate(tasks, "...")` and C's `frognano_evaluate`.

use std::path::PathBuf;
use std::str::FromStr;

use frognano_core::{Error, Policy, Result, Task};
use frognano_llm::GenerationOptions;
use frognano_llm::assets::Progress;

use crate::{NoopPolicy, OnnxPolicy, OnnxPolicyConfig, OraclePolicy, RandomPolicy};

/// The names a spec may start with, as shown in error messages.
pub const POLICY_SPEC_FORMS: &str =
    "oracle, noop, random[:SEED], repair[:CHECKPOINT], onnx:MODEL or openai:URL@MODEL";

/// A policy named by a string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicySpec {
    /// `oracle`: derives each task's fix from its bug and applies it.
    Oracle,
    /// `noop`: submits at once.
    Noop,
    /// `random[:SEED]`: random, often malformed, actions (seed 0 when absent).
    Random {
        /// The seed.
        seed: u64,
    },
    /// `repair[:CHECKPOINT]`: the learnable repair policy, untrained or restored from a
    /// checkpoint written by the trainer (a bare policy state is accepted too); greedy, as for
    /// evaluation.
    Repair {
        /// The checkpoint to restore.
        checkpoint: Option<PathBuf>,
    },
    /// `onnx:MODEL`: a local language model (a model folder, an `.onnx` file in one, or a
    /// registry name such as `smollm2-135m` or `smollm2-135m:fp32`) with the default settings.
    Onnx {
        /// The model argument.
        model: String,
    },
    /// `openai:URL@MODEL`: a model behind an OpenAI-compatible server (vLLM, SGLang, Ollama,
    /// llama.cpp's server, `frognano serve`), e.g. `openai:http://127.0.0.1:11434/v1@qwen2.5-coder:7b`;
    /// chat completions with the default settings (see [`crate::HttpPolicyConfig`]).
    Http {
        /// The API's base URL.
        base_url: String,
        /// The model name the server knows.
        model: String,
    },
}

impl FromStr for PolicySpec {
    type Err = Error;

    fn from_str(spec: &str) -> Result<Self> {
        let (name, arg) = match spec.split_once(':') {
            Some((name, arg)) => (name, Some(arg)),
            None => (spec, None),
        };
        match (name, arg) {
            ("oracle", None) => Ok(PolicySpec::Oracle),
            ("noop", None) => Ok(PolicySpec::Noop),
            ("random", None) => Ok(PolicySpec::Random { seed: 0 }),
            ("random", Some(seed)) => {
                let seed = seed.parse::<u64>().map_err(|e| {
                    Error::invalid(
                        "policy",
                        format!("{spec:?}: the seed must be an integer: {e}"),
                    )
                })?;
                Ok(PolicySpec::Random { seed })
            }
            ("repair", checkpoint) => Ok(PolicySpec::Repair {
                checkpoint: checkpoint.map(PathBuf::from),
            }),
            ("onnx", Some(model)) if !model.is_empty() => Ok(PolicySpec::Onnx {
                model: model.to_string(),
            }),
            ("onnx", _) => Err(Error::invalid(
                "policy",
                format!("{spec:?}: name the model, as in onnx:smollm2-135m or onnx:DIR"),
            )),
            ("openai", Some(target)) => match target.rsplit_once('@') {
                Some((url, model)) if !url.is_empty() && !model.is_empty() => {
                    Ok(PolicySpec::Http {
                        base_url: url.to_string(),
                        model: model.to_string(),
                    })
                }
                _ => Err(Error::invalid(
                    "policy",
                    format!(
                        "{spec:?}: give the server and the model, as in \
                         openai:http://127.0.0.1:8000/v1@MODEL"
                    ),
                )),
            },
            ("openai", None) => Err(Error::invalid(
                "policy",
                format!(
                    "{spec:?}: give the server and the model, as in openai:http://127.0.0.1:8000/v1@MODEL"
                ),
            )),
            _ => Err(Error::invalid(
                "policy",
                format!("unknown policy {spec:?}: use {POLICY_SPEC_FORMS}"),
            )),
        }
    }
}

impl PolicySpec {
    /// Builds the policy. `tasks` are the tasks it will face (the oracle needs them);
    /// `progress` hears what fetching a registry model is doing (a model is fetched, verified
    /// and converted on first use). A model that cannot be loaded is an
    /// [`ErrorKind::Inference`](frognano_core::ErrorKind::Inference) error.
    pub fn build(&self, tasks: &[Task], progress: Progress<'_>) -> Result<Box<dyn Policy>> {
        self.build_with(tasks, progress, None, None)
    }

    /// [`PolicySpec::build`], with the sampling of a model policy (`onnx:` or `openai:`) set to
    /// `generation` instead of its default (greedy, 384 tokens) and its system prompt to
    /// `system_prompt` instead of the default one; other policies ignore both. A
    /// served model's server is asked first whether it serves the model (see
    /// [`crate::HttpPolicy::connect`]).
    pub fn build_with(
        &self,
        tasks: &[Task],
        progress: Progress<'_>,
        generation: Option<&GenerationOptions>,
        system_prompt: Option<&str>,
    ) -> Result<Box<dyn Policy>> {
        Ok(match self {
            PolicySpec::Oracle => Box::new(OraclePolicy::new(tasks)),
            PolicySpec::Noop => Box::new(NoopPolicy),
            PolicySpec::Random { seed } => Box::new(RandomPolicy::new(*seed, 0.02)),
            PolicySpec::Repair { checkpoint } => {
                let mut policy = crate::RepairPolicy::new(crate::RepairConfig {
                    greedy: true,
                    ..crate::RepairConfig::default()
                })?;
                if let Some(path) = checkpoint {
                    let text = std::fs::read_to_string(path).map_err(|e| Error::Path {
                        path: path.clone(),
                        message: format!("cannot read the policy checkpoint: {e}"),
                    })?;
                    let state: serde_json::Value = serde_json::from_str(&text)?;
                    // A trainer checkpoint holds the policy under "policy".
                    let state = state.get("policy").unwrap_or(&state);
                    frognano_core::Learner::load_state(&mut policy, state)?;
                }
                Box::new(policy)
            }
            PolicySpec::Onnx { model } => {
                let dir = frognano_llm::assets::resolve_model(model, progress)?;
                let mut config = OnnxPolicyConfig::default();
                if let Some(generation) = generation {
                    config.generation = generation.clone();
                }
                config.system_prompt = system_prompt.map(str::to_string);
                Box::new(OnnxPolicy::load(&dir, config)?)
            }
            PolicySpec::Http { base_url, model } => {
                let mut config = crate::HttpPolicyConfig::new(base_url.clone(), model.clone());
                if let Some(generation) = generation {
                    config.generation = generation.clone();
                }
                config.system_prompt = system_prompt.map(str::to_string);
                progress(&format!("connecting to {base_url}"));
                Box::new(crate::HttpPolicy::connect(config)?)
            }
        })
    }
}

/// Parses `spec` and builds its policy: [`PolicySpec::from_str`] then [`PolicySpec::build`].
pub fn policy_from_spec(
    spec: &str,
    tasks: &[Task],
    progress: Progress<'_>,
) -> Result<Box<dyn Policy>> {
    spec.parse::<PolicySpec>()?.build(tasks, progress)
}

#[cfg(test)]
mod tests {
    use super::*;
    use frognano_core::ErrorKind;

    #[test]
    fn specs_parse_into_their_forms() {
        let parse = |s: &str| s.parse::<PolicySpec>().ok();
        assert_eq!(parse("oracle"), Some(PolicySpec::Oracle));
        assert_eq!(parse("noop"), Some(PolicySpec::Noop));
        assert_eq!(parse("random"), Some(PolicySpec::Random { seed: 0 }));
        assert_eq!(parse("random:7"), Some(PolicySpec::Random { seed: 7 }));
        assert_eq!(
            parse("repair:ck.json"),
            Some(PolicySpec::Repair {
                checkpoint: Some("ck.json".into())
            })
        );
        assert_eq!(
            parse("openai:http://127.0.0.1:11434/v1@qwen2.5-coder:7b"),
            Some(PolicySpec::Http {
                base_url: "http://127.0.0.1:11434/v1".into(),
                model: "qwen2.5-coder:7b".into()
            })
        );
        for bad in [
            "openai",
            "openai:",
            "openai:http://h/v1",
            "openai:@m",
            "openai:http://h@",
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
        assert_eq!(
            parse("onnx:smollm2-135m:fp32"),
            Some(PolicySpec::Onnx {
                model: "smollm2-135m:fp32".into()
            })
        );
    }

    #[test]
    fn bad_specs_are_invalid_arguments_naming_the_policy() {
        for bad in ["genius", "random:x", "oracle:1", "", "onnx:", "onnx"] {
            let err = bad.parse::<PolicySpec>().expect_err(bad);
            assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{bad}");
            assert!(err.to_string().contains("policy"), "{err}");
        }
    }

    #[test]
    fn baselines_build_without_tasks() {
        for good in ["oracle", "noop", "random", "random:7", "repair"] {
            assert!(policy_from_spec(good, &[], &|_| {}).is_ok(), "{good}");
        }
        let missing = policy_from_spec("repair:/nonexistent/checkpoint.json", &[], &|_| {});
        assert_eq!(missing.err().map(|e| e.kind()), Some(ErrorKind::NotFound));
    }

    #[test]
    fn a_missing_model_is_an_inference_error() {
        let err = policy_from_spec("onnx:/nonexistent/model-folder", &[], &|_| {}).err();
        assert_eq!(err.map(|e| e.kind()), Some(ErrorKind::Inference));
    }
}
