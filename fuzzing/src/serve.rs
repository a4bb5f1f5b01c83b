//! The request bodies of `frognano serve`'s two generation endpoints, checked as the server
//! checks them (on the tiny test model's tokenizer and chat template), without generating.

use std::sync::OnceLock;

use frognano_serve::server::{Endpoint, RequestChecker, ServerConfig};

fn checker() -> &'static RequestChecker {
    static CHECKER: OnceLock<RequestChecker> = OnceLock::new();
    CHECKER.get_or_init(|| {
        RequestChecker::load(&ServerConfig::new(crate::tiny_model_dir()))
            .expect("a checker over the tiny model")
    })
}

/// A request body: its first byte picks the endpoint, the rest is the body. A refusal must be
/// a client error (4xx), never a server error.
pub fn serve_request(data: &[u8]) {
    let Some((&first, body)) = data.split_first() else {
        return;
    };
    let endpoint = if first % 2 == 0 {
        Endpoint::ChatCompletions
    } else {
        Endpoint::Completions
    };
    if let Err(rejection) = checker().check(endpoint, body) {
        assert!(
            (400..500).contains(&rejection.status),
            "a request was refused with {}: {}",
            rejection.status,
            rejection.message
        );
    }
}
