//! Helpers shared by the integration tests: the shared sandbox, C strings, owned results and
//! error objects, scratch repositories and evaluation, called as a C program would.

// Each test binary compiles this module and uses only some of its helpers.
#![allow(dead_code)]

use std::ffi::{CStr, CString, c_char};
use std::path::{Path, PathBuf};
use std::ptr;
use std::sync::OnceLock;

use frognano::*;

/// A sandbox shared by the tests of this binary (which run on several threads at once).
struct Shared(*mut FrognanoSandbox);

// SAFETY: `FrognanoSandbox` is documented as usable from several threads at once; the handle
// is created once and never freed.
unsafe impl Send for Shared {}
// SAFETY: as above.
unsafe impl Sync for Shared {}

pub fn shared_sandbox() -> *const FrognanoSandbox {
    static SANDBOX: OnceLock<Shared> = OnceLock::new();
    SANDBOX
        .get_or_init(|| {
            let mut sandbox = ptr::null_mut();
            // SAFETY: `sandbox` is a valid out-pointer.
            let error = unsafe { frognano_sandbox_new(ptr::null(), &mut sandbox) };
            assert_ok(error);
            assert!(!sandbox.is_null());
            Shared(sandbox)
        })
        .0
}

/// The path of the `textkit` example repository.
pub fn textkit_dir() -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/repos/textkit");
    dir.to_str().expect("UTF-8 path").to_owned()
}

/// The path of the `textkit` example repository, as a C string.
pub fn textkit() -> CString {
    cstring(&textkit_dir())
}

pub fn cstring(text: &str) -> CString {
    CString::new(text).expect("no NUL")
}

/// Reads a borrowed C string; `None` for NULL.
pub fn read(ptr: *const c_char) -> Option<String> {
    if ptr.is_null() {
        None
    } else {
        // SAFETY: the library returns NUL-terminated strings valid while their owner lives.
        Some(
            unsafe { CStr::from_ptr(ptr) }
                .to_str()
                .expect("UTF-8")
                .to_owned(),
        )
    }
}

/// Takes an owned string: its text, then frees it.
pub fn take_string(string: *mut c_char) -> String {
    let text = read(string).expect("a string");
    // SAFETY: `string` is an owned string returned by the library, freed exactly once here.
    unsafe { frognano_string_free(string) };
    text
}

/// Takes an owned JSON string: its parsed value, then frees it.
pub fn take_json(string: *mut c_char) -> serde_json::Value {
    serde_json::from_str(&take_string(string)).expect("JSON")
}

/// Takes an error object: its code and message, then frees it.
pub fn take_error(error: *mut FrognanoError) -> (FrognanoErrorCode, String) {
    assert!(!error.is_null(), "expected an error, got success");
    // SAFETY: `error` is a live error returned by the library, freed exactly once here.
    unsafe {
        let code = frognano_error_code(error);
        let message = read(frognano_error_message(error)).expect("message");
        frognano_error_free(error);
        (code, message)
    }
}

/// The result of a call that writes an owned handle to `out` on success: the handle, or the
/// error (checking that `out` stays untouched on failure).
pub fn owned<T>(
    error: *mut FrognanoError,
    out: *mut T,
) -> Result<*mut T, (FrognanoErrorCode, String)> {
    if error.is_null() {
        assert!(!out.is_null());
        Ok(out)
    } else {
        assert!(out.is_null(), "out-parameter written on failure");
        Err(take_error(error))
    }
}

/// A NUL-terminated string that is not valid UTF-8.
pub fn not_utf8() -> *const c_char {
    static NOT_UTF8: [u8; 3] = [0xff, 0xfe, 0x00];
    NOT_UTF8.as_ptr().cast::<c_char>()
}

pub fn assert_ok(error: *mut FrognanoError) {
    if !error.is_null() {
        let (code, message) = take_error(error);
        panic!("unexpected error {code:?}: {message}");
    }
}

/// Runs `frognano_evaluate` on the shared sandbox and returns the parsed summary.
pub fn evaluate(tasks: *const FrognanoTaskSet, policy: &str) -> serde_json::Value {
    let policy = cstring(policy);
    let mut json = ptr::null_mut();
    // SAFETY: live handles, valid string and out-pointer.
    assert_ok(unsafe { frognano_evaluate(shared_sandbox(), tasks, policy.as_ptr(), 0, &mut json) });
    serde_json::from_str(&take_string(json)).expect("summary JSON")
}

/// A scratch repository under the system temporary directory, removed on drop.
pub struct ScratchRepo(PathBuf);

impl ScratchRepo {
    pub fn new(name: &str, files: &[(&str, &str)]) -> Self {
        let dir =
            std::env::temp_dir().join(format!("frognano-c-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for (path, text) in files {
            let path = dir.join(path);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(path, text).expect("write");
        }
        ScratchRepo(dir)
    }

    pub fn path(&self) -> CString {
        cstring(self.0.to_str().expect("UTF-8 path"))
    }
}

impl Drop for ScratchRepo {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
