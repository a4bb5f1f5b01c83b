//! Strict reading of configuration records given as JSON (the C API's `*_json` options,
//! Python's option dicts): one function, so every surface rejects the same mistakes with the
//! same message.

use serde::de::DeserializeOwned;

use crate::{Error, ErrorKind, Result};

/// Reads a `T` from a JSON value that must be an object. Missing fields take the defaults
/// `T`'s serde attributes give; a type error or an unknown key (for types that deny unknown
/// fields, at any depth) is an [`Error::Invalid`] of `kind` whose message names the field by
/// its dotted path, e.g. ``invalid training configuration: `policy.learning_rat`: unknown
/// field ...``.
pub fn from_json_strict<T: DeserializeOwned>(
    value: serde_json::Value,
    what: &'static str,
    kind: ErrorKind,
) -> Result<T> {
    if !value.is_object() {
        return Err(Error::invalid_as(kind, what, "must be a JSON object"));
    }
    serde_path_to_error::deserialize(value).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner().to_string();
        let message = if path == "." {
            inner
        } else {
            format!("`{path}`: {inner}")
        };
        Error::invalid_as(kind, what, message)
    })
}

/// [`from_json_strict`] over JSON text; text that is not JSON is an error of `kind` too.
pub fn from_json_text_strict<T: DeserializeOwned>(
    text: &str,
    what: &'static str,
    kind: ErrorKind,
) -> Result<T> {
    let value: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| Error::invalid_as(kind, what, format!("not valid JSON: {e}")))?;
    from_json_strict(value, what, kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Default, PartialEq, serde::Deserialize)]
    #[serde(default, deny_unknown_fields)]
    struct Inner {
        rate: f64,
    }

    #[derive(Debug, Default, PartialEq, serde::Deserialize)]
    #[serde(default, deny_unknown_fields)]
    struct Outer {
        seed: u64,
        inner: Inner,
    }

    fn message(text: &str) -> String {
        from_json_text_strict::<Outer>(text, "options", ErrorKind::Config)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    }

    #[test]
    fn good_records_take_defaults_for_missing_fields() {
        let outer: Outer =
            from_json_text_strict(r#"{"inner": {"rate": 0.5}}"#, "options", ErrorKind::Config)
                .unwrap_or_default();
        assert_eq!(outer.inner.rate, 0.5);
        assert_eq!(outer.seed, 0);
    }

    #[test]
    fn mistakes_name_the_field() {
        assert!(message("{nope").contains("not valid JSON"));
        assert!(message("[1]").contains("must be a JSON object"));
        assert!(message(r#"{"sed": 1}"#).contains("unknown field `sed`"));
        let nested = message(r#"{"inner": {"rat": 1}}"#);
        assert!(nested.contains("`inner.rat`"), "{nested}");
        assert!(nested.contains("unknown field `rat`"), "{nested}");
        let typed = message(r#"{"seed": "three"}"#);
        assert!(typed.contains("`seed`"), "{typed}");
        let err = from_json_text_strict::<Outer>("{}", "options", ErrorKind::Config).err();
        assert!(err.is_none());
        let err = from_json_text_strict::<Outer>("3", "options", ErrorKind::InvalidArgument);
        assert_eq!(
            err.err().map(|e| e.kind()),
            Some(ErrorKind::InvalidArgument)
        );
    }
}
