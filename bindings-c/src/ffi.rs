//! Shared helpers of the exported functions: panic guards, argument readers, owned C strings
//! and JSON, with the string and version functions.

use std::ffi::{CStr, CString, c_char};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::ptr;

use crate::error::{FrognanoError, FrognanoErrorCode};

/// Frees a string returned as `char *` by this library (e.g. by `frognano_report_to_json`).
/// `NULL` is accepted and ignored. Never pass a string from any other allocator.
///
/// # Safety
///
/// `string` must be `NULL` or a string returned as `char *` by this library and not yet freed;
/// it must not be used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_string_free(string: *mut c_char) {
    guard_value((), || {
        if !string.is_null() {
            // SAFETY: a non-NULL `string` was created by `CString::into_raw` in this library
            // and the caller hands back its ownership exactly once.
            drop(unsafe { CString::from_raw(string) });
        }
    });
}

/// Frees an owned handle of this library, as every `frognano_*_free` function does: `NULL` is
/// ignored, and a panic while dropping the handle is contained.
///
/// # Safety
/// `handle` is NULL or was created by `Box::into_raw` in this library and not yet freed; the
/// caller hands back its ownership exactly once, no other thread is using it and no call on it
/// is in progress, and it is not used afterwards.
pub(crate) unsafe fn free_handle<T>(handle: *mut T) {
    guard_value((), || {
        if !handle.is_null() {
            // SAFETY: a non-NULL `handle` was created by `Box::into_raw` in this library and
            // the caller hands back its ownership exactly once, with nothing else using it.
            drop(unsafe { Box::from_raw(handle) });
        }
    });
}

/// Moves `value` into an owned handle and writes it to a non-NULL out-parameter.
///
/// # Safety
/// `out` is non-NULL and writable.
pub(crate) unsafe fn write_handle<T>(out: *mut *mut T, value: T) {
    let handle = Box::into_raw(Box::new(value));
    // SAFETY: the caller guarantees `out` is non-NULL and writable.
    unsafe { out.write(handle) };
}

/// Borrows a required handle argument: `FROGNANO_ERROR_CODE_NULL_POINTER` naming `what` when
/// it is NULL.
pub(crate) trait HandleArg<T> {
    /// # Safety
    /// `self` is NULL or a live handle of this library that stays valid for `'a`, not mutated
    /// by anyone while borrowed.
    unsafe fn live<'a>(self, what: &str) -> Result<&'a T, FrognanoError>;
}

impl<T> HandleArg<T> for *const T {
    unsafe fn live<'a>(self, what: &str) -> Result<&'a T, FrognanoError> {
        // SAFETY: the caller guarantees `self` is NULL or a live handle valid for `'a`.
        unsafe { self.as_ref() }.ok_or_else(|| FrognanoError::null(what))
    }
}

/// Borrows a required handle argument mutably: `FROGNANO_ERROR_CODE_NULL_POINTER` naming
/// `what` when it is NULL.
pub(crate) trait HandleArgMut<T> {
    /// # Safety
    /// `self` is NULL or a live handle of this library that stays valid for `'a` and is used
    /// by no one else (no other thread, no other call) while borrowed.
    unsafe fn live_mut<'a>(self, what: &str) -> Result<&'a mut T, FrognanoError>;
}

impl<T> HandleArgMut<T> for *mut T {
    unsafe fn live_mut<'a>(self, what: &str) -> Result<&'a mut T, FrognanoError> {
        // SAFETY: the caller guarantees `self` is NULL or a live handle valid for `'a` and
        // used by this call only.
        unsafe { self.as_mut() }.ok_or_else(|| FrognanoError::null(what))
    }
}

/// Reads a field of a handle for an infallible accessor: `read`'s value, or `fallback` when
/// the handle is NULL, `read` gives `None` or it panics.
///
/// # Safety
/// `handle` is NULL or a live handle of this library.
pub(crate) unsafe fn read_handle<H, T>(
    handle: *const H,
    fallback: T,
    read: impl FnOnce(&H) -> Option<T>,
) -> T {
    // SAFETY: the caller guarantees `handle` is NULL or a live handle.
    let handle = unsafe { handle.as_ref() };
    match catch_unwind(AssertUnwindSafe(|| handle.and_then(read))) {
        Ok(Some(value)) => value,
        Ok(None) | Err(_) => fallback,
    }
}

/// Returns the library's version (e.g. `"0.1.0"`): a static string, never freed.
#[unsafe(no_mangle)]
pub extern "C" fn frognano_version() -> *const c_char {
    const VERSION: &CStr =
        match CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
            Ok(version) => version,
            Err(_) => c"unknown",
        };
    VERSION.as_ptr()
}

/// Makes a C string from Rust text; NUL bytes (which would end it early) become U+FFFD.
pub(crate) fn c_string(text: &str) -> CString {
    let text = if text.contains('\0') {
        text.replace('\0', "\u{FFFD}")
    } else {
        text.to_owned()
    };
    CString::new(text).unwrap_or_default()
}

/// Runs the body of a fallible exported function: `Ok` becomes `NULL`, `Err` and panics become
/// an owned error object.
pub(crate) fn guard(body: impl FnOnce() -> Result<(), FrognanoError>) -> *mut FrognanoError {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => ptr::null_mut(),
        Ok(Err(error)) => error.into_raw(),
        Err(payload) => FrognanoError::from_panic(payload.as_ref()).into_raw(),
    }
}

/// Runs the body of an infallible exported function; a panic gives `fallback`.
pub(crate) fn guard_value<T>(fallback: T, body: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or(fallback)
}

/// Reads a required C string argument.
///
/// # Safety
/// `ptr` is NULL or points to a NUL-terminated string that stays valid and unmodified for `'a`.
pub(crate) unsafe fn str_arg<'a>(ptr: *const c_char, what: &str) -> Result<&'a str, FrognanoError> {
    if ptr.is_null() {
        return Err(FrognanoError::null(what));
    }
    // SAFETY: non-NULL, and the caller guarantees a valid NUL-terminated string.
    let text = unsafe { CStr::from_ptr(ptr) };
    text.to_str().map_err(|e| {
        FrognanoError::new(
            FrognanoErrorCode::InvalidUtf8,
            format!("{what} is not valid UTF-8: {e}"),
        )
    })
}

/// Checks that an out-parameter is not NULL.
pub(crate) fn out_arg<T>(out: *mut T, what: &str) -> Result<(), FrognanoError> {
    if out.is_null() {
        Err(FrognanoError::null(what))
    } else {
        Ok(())
    }
}

/// Reads an optional C string argument (`NULL` gives `None`).
///
/// # Safety
/// `ptr` is NULL or points to a NUL-terminated string that stays valid and unmodified for `'a`.
pub(crate) unsafe fn optional_str_arg<'a>(
    ptr: *const c_char,
    what: &str,
) -> Result<Option<&'a str>, FrognanoError> {
    if ptr.is_null() {
        Ok(None)
    } else {
        // SAFETY: non-NULL, and the caller guarantees a valid NUL-terminated string.
        unsafe { str_arg(ptr, what) }.map(Some)
    }
}

/// Writes an owned C string to a non-NULL out-parameter.
///
/// # Safety
/// `out` is non-NULL and writable.
pub(crate) unsafe fn write_string(out: *mut *mut c_char, text: &str) {
    let text = c_string(text).into_raw();
    // SAFETY: the caller guarantees `out` is non-NULL and writable.
    unsafe { out.write(text) };
}

/// Serialises a value as JSON text and writes it as an owned C string to a non-NULL
/// out-parameter; on a serialisation error nothing is written.
///
/// # Safety
/// `out` is non-NULL and writable.
pub(crate) unsafe fn write_json(
    out: *mut *mut c_char,
    value: &impl serde::Serialize,
    what: &str,
) -> Result<(), FrognanoError> {
    let json = to_json(value, what)?;
    // SAFETY: the caller guarantees `out` is non-NULL and writable.
    unsafe { write_string(out, &json) };
    Ok(())
}

/// Serialises a value as JSON text.
pub(crate) fn to_json(value: &impl serde::Serialize, what: &str) -> Result<String, FrognanoError> {
    serde_json::to_string(value).map_err(|e| {
        FrognanoError::new(
            FrognanoErrorCode::Io,
            format!("serialise {what} as JSON: {e}"),
        )
    })
}

/// Parses a JSON object argument into `T` with the library's strict reader (missing fields
/// take their defaults, unknown ones are an error naming the field):
/// `FROGNANO_ERROR_CODE_INVALID_OPTION` on a mistake.
pub(crate) fn json_object_arg<T: serde::de::DeserializeOwned>(
    value: serde_json::Value,
    what: &'static str,
) -> Result<T, FrognanoError> {
    Ok(frognano_core::config::from_json_strict(
        value,
        what,
        frognano_core::ErrorKind::InvalidArgument,
    )?)
}

/// Parses `text` as a JSON value that must be an object.
pub(crate) fn parse_json_object(
    text: &str,
    what: &'static str,
) -> Result<serde_json::Value, FrognanoError> {
    Ok(frognano_core::config::from_json_text_strict(
        text,
        what,
        frognano_core::ErrorKind::InvalidArgument,
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{frognano_error_code, frognano_error_free, frognano_error_message};

    #[test]
    fn a_panic_becomes_an_error_object() {
        let error = guard(|| panic!("boom"));
        assert!(!error.is_null());
        // SAFETY: `error` was just returned by `guard` and is freed once below.
        unsafe {
            assert_eq!(frognano_error_code(error), FrognanoErrorCode::Panic);
            let message = CStr::from_ptr(frognano_error_message(error)).to_string_lossy();
            assert!(message.contains("boom"), "{message}");
            frognano_error_free(error);
        }
    }

    #[test]
    fn a_panic_in_an_accessor_gives_the_fallback() {
        assert_eq!(guard_value(7, || panic!("boom")), 7);
    }

    #[test]
    fn nul_bytes_do_not_truncate_strings() {
        assert_eq!(c_string("a\0b").to_str().ok(), Some("a\u{FFFD}b"));
    }

    #[test]
    fn version_matches_the_crate() {
        // SAFETY: `frognano_version` returns a static NUL-terminated string.
        let version = unsafe { CStr::from_ptr(frognano_version()) };
        assert_eq!(version.to_str().ok(), Some(env!("CARGO_PKG_VERSION")));
    }
}
