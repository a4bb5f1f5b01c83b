//! What the corpus's build and synthesis share to run entries on worker threads.

use std::sync::atomic::Ordering;

use frognano_sandbox::{CancelFlag, Sandbox};

/// Whether the caller's cancel flag, if any, is set.
pub(crate) fn is_cancelled(cancel: Option<&CancelFlag>) -> bool {
    cancel.is_some_and(|c| c.load(Ordering::SeqCst))
}

/// Entries worked on at once: `requested`, or the sandbox's worker count when it is 0; never
/// more than there are entries.
pub(crate) fn job_count(requested: usize, sandbox: &Sandbox, entries: usize) -> usize {
    let jobs = if requested == 0 {
        sandbox.workers().max(1)
    } else {
        requested
    };
    jobs.min(entries.max(1))
}

/// Runs `worker` on `jobs` threads at once and returns when every one has returned.
pub(crate) fn run_on_threads(jobs: usize, worker: impl Fn() + Sync) {
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(&worker);
        }
    });
}
