//! `frognano serve`: FrogNano's ONNX models behind an OpenAI-compatible HTTP server.
