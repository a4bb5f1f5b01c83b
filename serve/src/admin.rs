//! Administration of a running `frognano serve`: loading new weights into it
//! (`POST /v1/frognano/reload`, on a server started with `--allow-reload`).

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::error::{Result, ServeError};

/// How long a reload may take: the server finishes the batch it runs, then loads the weights.
const RELOAD_TIMEOUT: Duration = Duration::from_secs(600);

/// Asks the server at `base_url` (`http://HOST:PORT/v1`; a URL without a path gets `/v1`) to
/// serve the weights of the model folder `model_dir` (a path on the server's machine), sending
/// `api_key` as a bearer token when given. Returns the server's answer,
/// `{"model_dir": ..., "reloads": N}`, once the new weights serve; a server that refuses
/// (403: started without `--allow-reload`; 400: no model there, or another vocabulary) is a
/// [`ServeError::Status`] with its message.
pub fn reload_weights(base_url: &str, api_key: Option<&str>, model_dir: &Path) -> Result<Value> {
    let url = reload_url(base_url)?;
    let body = json!({"model_dir": model_dir});
    let api_key = api_key.map(str::to_string);
    let request = async move {
        let client = reqwest::Client::builder()
            .timeout(RELOAD_TIMEOUT)
            .build()
            .map_err(|e| ServeError::invalid("http client", e.to_string()))?;
        let mut request = client.post(&url).json(&body);
        if let Some(key) = &api_key {
            request = request.bearer_auth(key);
        }
        let response = request.send().await.map_err(|e| {
            if e.is_timeout() {
                ServeError::Timeout {
                    url: url.clone(),
                    seconds: RELOAD_TIMEOUT.as_secs_f64(),
                }
            } else {
                ServeError::Connect {
                    url: url.clone(),
                    message: e.to_string(),
                }
            }
        })?;
        let status = response.status();
        let text = response.text().await.map_err(|e| ServeError::BadReply {
            url: url.clone(),
            message: format!("cannot read the reply: {e}"),
        })?;
        let value: Option<Value> = serde_json::from_str(&text).ok();
        if !status.is_success() {
            let message = value
                .as_ref()
                .and_then(|v| v["error"]["message"].as_str())
                .map(str::to_string)
                .unwrap_or_else(|| text.trim().chars().take(500).collect());
            return Err(ServeError::Status {
                url,
                status: status.as_u16(),
                message,
            });
        }
        value.ok_or_else(|| ServeError::BadReply {
            url,
            message: "the reply is not JSON".into(),
        })
    };
    run_blocking(request)
}

/// `BASE/frognano/reload` of a base URL, checked.
fn reload_url(base_url: &str) -> Result<String> {
    let parsed = reqwest::Url::parse(base_url).map_err(|e| {
        ServeError::invalid(
            "base_url",
            format!("{base_url:?} is not a URL ({e}); e.g. http://127.0.0.1:8000/v1"),
        )
    })?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(ServeError::invalid(
            "base_url",
            format!("{base_url:?}: only http and https are supported"),
        ));
    }
    let mut base = base_url.trim_end_matches('/').to_string();
    if parsed.path() == "/" || parsed.path().is_empty() {
        base.push_str("/v1");
    }
    Ok(format!("{base}/frognano/reload"))
}

/// Runs `future` to completion on a runtime of its own, on a thread of its own when the caller
/// is already inside an async runtime (where blocking on another would panic).
fn run_blocking<F>(future: F) -> Result<Value>
where
    F: std::future::Future<Output = Result<Value>> + Send,
{
    let run = move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|source| ServeError::Io {
                context: "start the HTTP client's runtime".into(),
                source,
            })?
            .block_on(future)
    };
    if tokio::runtime::Handle::try_current().is_ok() {
        std::thread::scope(|scope| {
            scope
                .spawn(run)
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        })
    } else {
        run()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reload_url_is_under_the_api_base() {
        assert_eq!(
            reload_url("http://127.0.0.1:8000/v1/").expect("url"),
            "http://127.0.0.1:8000/v1/frognano/reload"
        );
        assert_eq!(
            reload_url("http://127.0.0.1:8000").expect("url"),
            "http://127.0.0.1:8000/v1/frognano/reload"
        );
        assert!(reload_url("ftp://x").is_err());
        assert!(reload_url("not a url").is_err());
    }
}
