//! The C entry points, called as a C program would: arbitrary bytes in every string and JSON
//! argument (cut at the first NUL, as C would read them), arbitrary numbers, and every error
//! that comes back read and freed. Entry points that start long work on valid input (training,
//! synthesis, evaluation, test runs) get a NULL sandbox, so only their argument checks run.

use std::ffi::{CStr, CString, c_char};
use std::ptr;
use std::sync::{Mutex, OnceLock};

use frognano::*;

/// `bytes` up to its first NUL, as a C string.
fn c_text(bytes: &[u8]) -> CString {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    CString::new(&bytes[..end]).expect("no NUL before the end")
}

/// Reads an error as a C caller would (its code, its message as a C string) and frees it.
fn consume(error: *mut FrognanoError) -> bool {
    if error.is_null() {
        return true;
    }
    // SAFETY: a non-NULL error returned by the library, freed once below.
    unsafe {
        let _ = frognano_error_code(error);
        let message = frognano_error_message(error);
        assert!(!message.is_null(), "an error without a message");
        let _ = CStr::from_ptr(message)
            .to_str()
            .expect("error messages are UTF-8");
        frognano_error_free(error);
    }
    false
}

/// Reads and frees a string the library returned.
fn take_string(string: *mut c_char) {
    if string.is_null() {
        return;
    }
    // SAFETY: a string returned by the library, freed once.
    unsafe {
        let _ = CStr::from_ptr(string).to_bytes();
        frognano_string_free(string);
    }
}

fn f64_at(bytes: &[u8], i: usize) -> f64 {
    let mut word = [0u8; 8];
    for (k, b) in word.iter_mut().enumerate() {
        *b = bytes.get(i * 8 + k).copied().unwrap_or(0);
    }
    f64::from_le_bytes(word)
}

fn tiny_model_path() -> CString {
    CString::new(crate::tiny_model_dir().to_string_lossy().as_bytes()).expect("a path without NUL")
}

/// The tiny test model, loaded once through the C API.
struct Model(*mut FrognanoModel);
// SAFETY: the handle is only used under the mutex, one call at a time, as the C API requires.
unsafe impl Send for Model {}

fn tiny_model() -> &'static Mutex<Model> {
    static MODEL: OnceLock<Mutex<Model>> = OnceLock::new();
    MODEL.get_or_init(|| {
        let dir = tiny_model_path();
        let mut model = ptr::null_mut();
        // SAFETY: valid strings and out-pointer.
        let error = unsafe { frognano_model_load(dir.as_ptr(), ptr::null(), &mut model) };
        assert!(consume(error), "the tiny model loads");
        Mutex::new(Model(model))
    })
}

/// The first byte picks the entry point; the rest are its arguments.
pub fn c_api(data: &[u8]) {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let text = c_text(rest);
    // SAFETY (every call below): strings are NUL-terminated, out-pointers are valid locals,
    // array lengths match their arrays, and handles come from the library.
    unsafe {
        match which % 8 {
            0 => {
                let dir = tempfile::tempdir().expect("scratch folder");
                let path = dir.path().join("tasks.jsonl");
                std::fs::write(&path, rest).expect("task file");
                let path = CString::new(path.to_string_lossy().as_bytes()).expect("path");
                let mut tasks = ptr::null_mut();
                if consume(frognano_tasks_load(path.as_ptr(), &mut tasks)) {
                    let n = frognano_task_set_len(tasks);
                    for i in 0..=n {
                        let mut json = ptr::null_mut();
                        let ok = consume(frognano_task_set_get_json(tasks, i, &mut json));
                        assert_eq!(ok, i < n, "task {i} of {n}");
                        take_string(json);
                    }
                    frognano_task_set_free(tasks);
                }
            }
            1 => {
                let n = rest.first().map_or(0, |&b| usize::from(b % 16));
                let mut rewards: Vec<f64> = (0..n).map(|i| f64_at(&rest[1..], i)).collect();
                let estimator = c_text(rest.get(1 + 8 * n..).unwrap_or_default());
                let mut out = vec![0.0; n];
                let _ = consume(frognano_group_advantages(
                    rewards.as_ptr(),
                    n,
                    estimator.as_ptr(),
                    out.as_mut_ptr(),
                ));
                // In place, as the header allows.
                let _ = consume(frognano_group_advantages(
                    rewards.as_ptr(),
                    n,
                    estimator.as_ptr(),
                    rewards.as_mut_ptr(),
                ));
            }
            2 => {
                let mut score = 0.0;
                let _ = consume(frognano_learnability(
                    f64_at(rest, 0),
                    f64_at(rest, 1),
                    &mut score,
                ));
                let limits = FrognanoLimits {
                    timeout_s: f64_at(rest, 2),
                    memory_mb: f64_at(rest, 3).to_bits(),
                    output_bytes: f64_at(rest, 4).to_bits() as usize,
                };
                let _ = consume(frognano_limits_validate(&limits));
            }
            3 => {
                let model = tiny_model().lock().unwrap_or_else(|p| p.into_inner());
                let mut json = ptr::null_mut();
                if consume(frognano_model_generate(model.0, text.as_ptr(), &mut json)) {
                    take_string(json);
                }
            }
            4 => {
                let dir = tiny_model_path();
                let mut model = ptr::null_mut();
                if consume(frognano_model_load(dir.as_ptr(), text.as_ptr(), &mut model)) {
                    let mut json = ptr::null_mut();
                    assert!(consume(frognano_model_config_json(model, &mut json)));
                    take_string(json);
                    frognano_model_free(model);
                }
            }
            5 => {
                let sandbox = ptr::null();
                let mut report = ptr::null_mut();
                let _ = consume(frognano_train(sandbox, text.as_ptr(), &mut report));
                take_string(report);
                let mut trainer = ptr::null_mut();
                let _ = consume(frognano_trainer_new(sandbox, text.as_ptr(), &mut trainer));
                let (mut tasks, mut stats) = (ptr::null_mut(), ptr::null_mut());
                let _ = consume(frognano_synthesize(
                    sandbox,
                    text.as_ptr(),
                    usize::from(rest.first().copied().unwrap_or(0)),
                    text.as_ptr(),
                    &mut tasks,
                    &mut stats,
                ));
                let mut summary = ptr::null_mut();
                let _ = consume(frognano_evaluate(
                    sandbox,
                    ptr::null(),
                    text.as_ptr(),
                    1,
                    &mut summary,
                ));
                let args: Vec<CString> = rest.split(|&b| b == b' ').map(c_text).collect();
                let arg_ptrs: Vec<*const c_char> = args.iter().map(|a| a.as_ptr()).collect();
                let limits = frognano_limits_default();
                let mut run = ptr::null_mut();
                let _ = consume(frognano_sandbox_run_tests(
                    sandbox,
                    text.as_ptr(),
                    &limits,
                    arg_ptrs.as_ptr(),
                    arg_ptrs.len(),
                    &mut run,
                ));
            }
            6 => {
                // Accessors of absent handles answer their documented defaults.
                let index = usize::from(rest.first().copied().unwrap_or(0));
                let report = ptr::null();
                assert_eq!(frognano_report_passed(report), 0);
                assert_eq!(frognano_report_test_count(report), 0);
                let _ = frognano_report_test_id(report, index);
                let _ = frognano_report_test_message(report, index);
                let _ = frognano_step_observation(ptr::null());
                assert_eq!(frognano_task_set_len(ptr::null()), 0);
                let mut json = ptr::null_mut();
                assert!(consume(frognano_mutation_operators_json(&mut json)));
                take_string(json);
                frognano_string_free(ptr::null_mut());
            }
            _ => {
                let mut env = ptr::null_mut();
                let _ = consume(frognano_env_new(ptr::null(), 1, &mut env));
                let mut observation = ptr::null_mut();
                let _ = consume(frognano_env_reset(env, text.as_ptr(), &mut observation));
                let mut step = ptr::null_mut();
                let _ = consume(frognano_env_step(env, text.as_ptr(), &mut step));
                let mut image = ptr::null_mut();
                // Only names that are no image: a known one would load its sandbox.
                let known = text
                    .to_str()
                    .is_ok_and(|name| frognano_sandbox::ImageKind::parse(name).is_ok());
                if !known {
                    let _ = consume(frognano_sandbox_new(text.as_ptr(), &mut image));
                    frognano_sandbox_free(image);
                }
            }
        }
    }
}
