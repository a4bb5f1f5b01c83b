//! Test reports: the run and test outcome enums and the report accessors.

use std::ffi::{CStr, CString, c_char};
use std::ptr;

use frognano_core::{RunOutcome, TestOutcome, TestReport};

use crate::error::FrognanoError;
use crate::ffi::{HandleArg, c_string, free_handle, guard, out_arg, read_handle, write_json};

/// How a whole sandboxed run ended.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FrognanoRunOutcome {
    /// Every selected test passed (or was skipped, xfailed or xpassed).
    Passed = 0,
    /// At least one test failed or errored.
    Failed = 1,
    /// The time limit ended the run (the guest's own time, or the wall-clock backstop at four
    /// times it).
    Timeout = 2,
    /// The guest asked for more memory than its cap.
    MemoryExceeded = 3,
    /// The guest wrote more output than its cap.
    OutputExceeded = 4,
    /// The guest trapped (e.g. stack exhaustion in C code) or the test runner itself failed.
    Crashed = 5,
    /// No test was collected.
    NoTests = 6,
}

impl From<RunOutcome> for FrognanoRunOutcome {
    fn from(outcome: RunOutcome) -> Self {
        match outcome {
            RunOutcome::Passed => FrognanoRunOutcome::Passed,
            RunOutcome::Failed => FrognanoRunOutcome::Failed,
            RunOutcome::Timeout => FrognanoRunOutcome::Timeout,
            RunOutcome::MemoryExceeded => FrognanoRunOutcome::MemoryExceeded,
            RunOutcome::OutputExceeded => FrognanoRunOutcome::OutputExceeded,
            RunOutcome::Crashed => FrognanoRunOutcome::Crashed,
            RunOutcome::NoTests => FrognanoRunOutcome::NoTests,
        }
    }
}

/// The outcome of one test, as pytest reports it.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FrognanoTestOutcome {
    /// The test ran and passed.
    Passed = 0,
    /// An assertion or exception failed the test.
    Failed = 1,
    /// Setup or teardown failed, or the test could not be collected.
    Error = 2,
    /// The test was skipped.
    Skipped = 3,
    /// The test failed and was expected to (`xfail`).
    Xfailed = 4,
    /// The test passed but was expected to fail (non-strict `xfail`).
    Xpassed = 5,
}

impl From<TestOutcome> for FrognanoTestOutcome {
    fn from(outcome: TestOutcome) -> Self {
        match outcome {
            TestOutcome::Passed => FrognanoTestOutcome::Passed,
            TestOutcome::Failed => FrognanoTestOutcome::Failed,
            TestOutcome::Error => FrognanoTestOutcome::Error,
            TestOutcome::Skipped => FrognanoTestOutcome::Skipped,
            TestOutcome::Xfailed => FrognanoTestOutcome::Xfailed,
            TestOutcome::Xpassed => FrognanoTestOutcome::Xpassed,
        }
    }
}

/// The structured result of one test run: outcome, counts, per-test records, captured output.
///
/// Returned by `frognano_sandbox_run_tests`, freed with `frognano_report_free`. Immutable:
/// any number of threads may read it at once. Strings read from it are borrowed and stay valid
/// until it is freed. Text from the guest is UTF-8; a NUL byte in it reads as U+FFFD in the
/// borrowed strings (the JSON form keeps it as `\u0000`).
#[derive(Debug)]
pub struct FrognanoReport {
    report: TestReport,
    ids: Vec<CString>,
    messages: Vec<Option<CString>>,
    detail: Option<CString>,
    stdout: CString,
    stderr: CString,
}

impl FrognanoReport {
    pub(crate) fn new(report: TestReport) -> Self {
        FrognanoReport {
            ids: report.tests.iter().map(|t| c_string(&t.id)).collect(),
            messages: report
                .tests
                .iter()
                .map(|t| t.message.as_deref().map(c_string))
                .collect(),
            detail: report.detail.as_deref().map(c_string),
            stdout: c_string(&report.stdout),
            stderr: c_string(&report.stderr),
            report,
        }
    }
}

/// Returns how the run ended. A `NULL` report reads as `FROGNANO_RUN_OUTCOME_CRASHED`.
///
/// # Safety
///
/// `report` must be `NULL` or a report returned by this library and not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_report_outcome(
    report: *const FrognanoReport,
) -> FrognanoRunOutcome {
    // SAFETY: same contract as this function.
    unsafe {
        read_handle(report, FrognanoRunOutcome::Crashed, |r| {
            Some(r.report.outcome.into())
        })
    }
}

/// Returns the run outcome's name as in the JSON form (`"passed"`, `"failed"`, `"timeout"`,
/// `"memory_exceeded"`, `"output_exceeded"`, `"crashed"`, `"no_tests"`): a static string,
/// never freed; `NULL` when `report` is `NULL`.
///
/// # Safety
///
/// `report` must be `NULL` or a report returned by this library and not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_report_outcome_name(
    report: *const FrognanoReport,
) -> *const c_char {
    // SAFETY: same contract as this function.
    unsafe {
        read_handle(report, ptr::null(), |r| {
            Some(run_outcome_name(r.report.outcome).as_ptr())
        })
    }
}

fn run_outcome_name(outcome: RunOutcome) -> &'static CStr {
    match outcome {
        RunOutcome::Passed => c"passed",
        RunOutcome::Failed => c"failed",
        RunOutcome::Timeout => c"timeout",
        RunOutcome::MemoryExceeded => c"memory_exceeded",
        RunOutcome::OutputExceeded => c"output_exceeded",
        RunOutcome::Crashed => c"crashed",
        RunOutcome::NoTests => c"no_tests",
    }
}

fn test_outcome_name(outcome: TestOutcome) -> &'static CStr {
    match outcome {
        TestOutcome::Passed => c"passed",
        TestOutcome::Failed => c"failed",
        TestOutcome::Error => c"error",
        TestOutcome::Skipped => c"skipped",
        TestOutcome::Xfailed => c"xfailed",
        TestOutcome::Xpassed => c"xpassed",
    }
}

/// Returns the number of passed tests (xpassed not included); 0 for a `NULL` report.
///
/// # Safety
///
/// `report` must be `NULL` or a report returned by this library and not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_report_passed(report: *const FrognanoReport) -> usize {
    // SAFETY: same contract as this function.
    unsafe { read_handle(report, 0, |r| Some(r.report.passed)) }
}

/// Returns the number of failed tests; 0 for a `NULL` report.
///
/// # Safety
///
/// `report` must be `NULL` or a report returned by this library and not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_report_failed(report: *const FrognanoReport) -> usize {
    // SAFETY: same contract as this function.
    unsafe { read_handle(report, 0, |r| Some(r.report.failed)) }
}

/// Returns the number of tests with setup, teardown or collection errors; 0 for a `NULL`
/// report.
///
/// # Safety
///
/// `report` must be `NULL` or a report returned by this library and not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_report_errors(report: *const FrognanoReport) -> usize {
    // SAFETY: same contract as this function.
    unsafe { read_handle(report, 0, |r| Some(r.report.errors)) }
}

/// Returns the number of skipped tests; 0 for a `NULL` report.
///
/// # Safety
///
/// `report` must be `NULL` or a report returned by this library and not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_report_skipped(report: *const FrognanoReport) -> usize {
    // SAFETY: same contract as this function.
    unsafe { read_handle(report, 0, |r| Some(r.report.skipped)) }
}

/// Returns the number of expected failures (`xfail`); 0 for a `NULL` report.
///
/// # Safety
///
/// `report` must be `NULL` or a report returned by this library and not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_report_xfailed(report: *const FrognanoReport) -> usize {
    // SAFETY: same contract as this function.
    unsafe { read_handle(report, 0, |r| Some(r.report.xfailed)) }
}

/// Returns the number of unexpected passes (`xpass`); 0 for a `NULL` report.
///
/// # Safety
///
/// `report` must be `NULL` or a report returned by this library and not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_report_xpassed(report: *const FrognanoReport) -> usize {
    // SAFETY: same contract as this function.
    unsafe { read_handle(report, 0, |r| Some(r.report.xpassed)) }
}

/// Returns the wall-clock seconds of the run; NaN for a `NULL` report.
///
/// # Safety
///
/// `report` must be `NULL` or a report returned by this library and not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_report_duration_s(report: *const FrognanoReport) -> f64 {
    // SAFETY: same contract as this function.
    unsafe { read_handle(report, f64::NAN, |r| Some(r.report.duration_s)) }
}

/// Writes pytest's exit code to `*out` and returns true when the guest finished normally;
/// returns false (leaving `*out` untouched) when a limit or crash ended the run, or when
/// `report` or `out` is `NULL`.
///
/// # Safety
///
/// `report` must be `NULL` or a report returned by this library and not yet freed. `out` must
/// be `NULL` or point to a writable `int32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_report_exit_code(
    report: *const FrognanoReport,
    out: *mut i32,
) -> bool {
    // SAFETY: same contract as this function.
    let code = unsafe { read_handle(report, None, |r| Some(r.report.exit_code)) };
    match code {
        Some(code) if !out.is_null() => {
            // SAFETY: non-NULL, and the caller guarantees `out` is writable.
            unsafe { out.write(code) };
            true
        }
        _ => false,
    }
}

/// Returns why a limit or crash ended the run (borrowed, valid until the report is freed), or
/// `NULL` when there is no such explanation or `report` is `NULL`.
///
/// # Safety
///
/// `report` must be `NULL` or a report returned by this library and not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_report_detail(report: *const FrognanoReport) -> *const c_char {
    // SAFETY: same contract as this function.
    unsafe {
        read_handle(report, ptr::null(), |r| {
            r.detail.as_ref().map(|d| d.as_ptr())
        })
    }
}

/// Returns the guest's captured standard output (borrowed, valid until the report is freed;
/// capped by the run's output limit); `NULL` when `report` is `NULL`.
///
/// # Safety
///
/// `report` must be `NULL` or a report returned by this library and not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_report_stdout(report: *const FrognanoReport) -> *const c_char {
    // SAFETY: same contract as this function.
    unsafe { read_handle(report, ptr::null(), |r| Some(r.stdout.as_ptr())) }
}

/// Returns the guest's captured standard error (borrowed, valid until the report is freed;
/// capped by the run's output limit); `NULL` when `report` is `NULL`.
///
/// # Safety
///
/// `report` must be `NULL` or a report returned by this library and not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_report_stderr(report: *const FrognanoReport) -> *const c_char {
    // SAFETY: same contract as this function.
    unsafe { read_handle(report, ptr::null(), |r| Some(r.stderr.as_ptr())) }
}

/// Returns the number of per-test records (in the order the tests finished); 0 for a `NULL`
/// report. Valid indices for the `frognano_report_test_*` functions are `0` to this minus 1.
///
/// # Safety
///
/// `report` must be `NULL` or a report returned by this library and not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_report_test_count(report: *const FrognanoReport) -> usize {
    // SAFETY: same contract as this function.
    unsafe { read_handle(report, 0, |r| Some(r.report.tests.len())) }
}

/// Returns the pytest node id of test `index` (e.g. `tests/test_x.py::test_y[1]`), borrowed
/// and valid until the report is freed; `NULL` when `index` is out of range or `report` is
/// `NULL`.
///
/// # Safety
///
/// `report` must be `NULL` or a report returned by this library and not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_report_test_id(
    report: *const FrognanoReport,
    index: usize,
) -> *const c_char {
    // SAFETY: same contract as this function.
    unsafe { read_handle(report, ptr::null(), |r| Some(r.ids.get(index)?.as_ptr())) }
}

/// Returns the outcome of test `index`; `FROGNANO_TEST_OUTCOME_ERROR` when `index` is out of
/// range or `report` is `NULL`.
///
/// # Safety
///
/// `report` must be `NULL` or a report returned by this library and not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_report_test_outcome(
    report: *const FrognanoReport,
    index: usize,
) -> FrognanoTestOutcome {
    // SAFETY: same contract as this function.
    unsafe {
        read_handle(report, FrognanoTestOutcome::Error, |r| {
            Some(r.report.tests.get(index)?.outcome.into())
        })
    }
}

/// Returns the outcome name of test `index` as in the JSON form (`"passed"`, `"failed"`,
/// `"error"`, `"skipped"`, `"xfailed"`, `"xpassed"`): a static string, never freed; `NULL`
/// when `index` is out of range or `report` is `NULL`.
///
/// # Safety
///
/// `report` must be `NULL` or a report returned by this library and not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_report_test_outcome_name(
    report: *const FrognanoReport,
    index: usize,
) -> *const c_char {
    // SAFETY: same contract as this function.
    unsafe {
        read_handle(report, ptr::null(), |r| {
            Some(test_outcome_name(r.report.tests.get(index)?.outcome).as_ptr())
        })
    }
}

/// Returns the seconds test `index` spent in setup, call and teardown; NaN when `index` is out
/// of range or `report` is `NULL`.
///
/// # Safety
///
/// `report` must be `NULL` or a report returned by this library and not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_report_test_duration_s(
    report: *const FrognanoReport,
    index: usize,
) -> f64 {
    // SAFETY: same contract as this function.
    unsafe {
        read_handle(report, f64::NAN, |r| {
            Some(r.report.tests.get(index)?.duration_s)
        })
    }
}

/// Returns the short failure text of test `index` (borrowed, valid until the report is freed),
/// or `NULL` when the test has none (it did not fail), `index` is out of range or `report` is
/// `NULL`.
///
/// # Safety
///
/// `report` must be `NULL` or a report returned by this library and not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_report_test_message(
    report: *const FrognanoReport,
    index: usize,
) -> *const c_char {
    // SAFETY: same contract as this function.
    unsafe {
        read_handle(report, ptr::null(), |r| {
            Some(r.messages.get(index)?.as_ref()?.as_ptr())
        })
    }
}

/// Serialises the whole report as one JSON object: `outcome`, the counts (`passed`, `failed`,
/// `errors`, `skipped`, `xfailed`, `xpassed`), `duration_s`, `exit_code` and `detail` (left
/// out when absent), `stdout`, `stderr`, and `tests`, a list of
/// `{id, outcome, duration_s, message?}` (the fields of `frognano test --json` plus the
/// captured output).
///
/// On success writes an owned UTF-8 string to `*out_json` (free it with
/// `frognano_string_free`) and returns `NULL`; on failure returns an owned error and leaves
/// `*out_json` untouched. Thread safety: may be called from any thread.
///
/// # Safety
///
/// `report` must be `NULL` or a report returned by this library and not yet freed. `out_json`
/// must be `NULL` or point to writable storage for a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_report_to_json(
    report: *const FrognanoReport,
    out_json: *mut *mut c_char,
) -> *mut FrognanoError {
    guard(|| {
        // SAFETY: the caller passes NULL or a live report handle.
        let report = unsafe { report.live("report") }?;
        out_arg(out_json, "out_json")?;
        // JSON escapes NUL as \u0000, so the text has no interior NUL to replace.
        // SAFETY: `out_json` is non-NULL (checked above) and the caller guarantees it is
        // writable.
        unsafe { write_json(out_json, &report.report, "report") }
    })
}

/// Frees a report. `NULL` is accepted and ignored. Strings borrowed from it become invalid;
/// no other thread may still be reading it.
///
/// # Safety
///
/// `report` must be `NULL` or a report returned by this library and not yet freed, that no
/// other thread is reading; it must not be used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_report_free(report: *mut FrognanoReport) {
    // SAFETY: same contract as this function: `report` is NULL or an owned handle
    // handed back exactly once.
    unsafe { free_handle(report) };
}
