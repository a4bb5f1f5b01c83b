"""The exceptions FrogNano raises.

Limit outcomes of a sandboxed run (timeout, memory, output, crash) are values of the returned
report, not exceptions: a policy that writes an infinite loop has produced a result. Exceptions
mean the call itself could not be made.
"""


class FrognanoError(Exception):
    """Base class of every FrogNano error."""


class SetupError(FrognanoError):
    """A runtime asset could not be fetched, verified or prepared."""


class SandboxFailure(FrognanoError):
    """The WebAssembly runtime failed (not the code inside it)."""


class RepoNotFoundError(FrognanoError, FileNotFoundError):
    """The repository directory does not exist or cannot be read."""


class ConfigError(FrognanoError):
    """frognano.toml or the repository's metadata is malformed."""


class RequirementsError(ConfigError):
    """A test requirement has no pure-Python wheel."""


class InvalidArgumentError(FrognanoError, ValueError):
    """An argument (limit, image name, worker count) is invalid."""


class TaskError(FrognanoError, ValueError):
    """A task record or task file is malformed, or its bug does not apply to its repository."""


class EpisodeError(FrognanoError, RuntimeError):
    """An environment was stepped with no running episode (reset first), or used after close()."""


class ActionError(FrognanoError, ValueError):
    """parse_action could not understand an action (environments report this as an observation)."""


class SynthesisError(FrognanoError):
    """A repository's clean test suite cannot validate synthesized bugs (no tests, none passing
    reliably, or a suite that times out or crashes), or a mutation could not be applied."""


class TrainingError(FrognanoError):
    """Training could not go on: no tasks to train on, a checkpoint that cannot be written or
    read back, or a failing learner or task source. (An invalid training configuration is a
    ConfigError; a Python policy's or synthesizer's own exception propagates as itself.)"""


class InferenceError(FrognanoError):
    """A local model could not be loaded or run: the ONNX Runtime library was not found or not
    loadable, a model folder is missing a file or unusable (an unknown registry name included),
    the tokenizer or chat template failed, the inference environment could not be set up or a
    model fetched and converted, or ONNX Runtime failed while running. (Invalid generation
    options or prompts are an InvalidArgumentError.)"""


class ClusterError(FrognanoError):
    """Work could not be spread over a Ray cluster: Ray is not installed (the message says what
    to install), the cluster cannot be reached, or no FrogNano worker could be started on it.
    (A unit of work that fails on a worker is reported in the results, not raised.)"""


__all__ = [
    "FrognanoError",
    "SetupError",
    "SandboxFailure",
    "RepoNotFoundError",
    "ConfigError",
    "RequirementsError",
    "InvalidArgumentError",
    "TaskError",
    "EpisodeError",
    "ActionError",
    "SynthesisError",
    "TrainingError",
    "InferenceError",
    "ClusterError",
]
