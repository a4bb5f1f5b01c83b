//! The time limit of a guest run, counted in the guest's own CPU time.
//!
//! A wall-clock limit makes verdicts depend on the machine's load: a suite that passes in 64 s
//! on an idle machine times out at 120 s when a compile runs beside it, having used 47 s of CPU.
//! The guest runs on the thread that polls its future (WASI calls block that thread, it never
//! hands work to others), so the CPU time of that thread during each poll is the guest's work,
//! whatever else the machine runs. A guest that does not use the CPU (a sleep in a host call)
//! is stopped by a wall-clock backstop instead.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;
use std::time::Instant;

/// The wall-clock backstop is this many times the CPU-time limit: room for a loaded machine
/// (the guest gets a quarter of a core and still finishes), and an end for a sleeping guest.
pub(super) const WALL_BACKSTOP_FACTOR: f64 = 4.0;

/// CPU time of the calling thread so far (where no per-thread CPU clock answers: the wall
/// clock since the first call, which makes the limit a wall-clock one there).
pub(super) fn thread_cpu_time() -> Duration {
    #[cfg(unix)]
    {
        // Through the C library: a raw vDSO lookup (rustix's) faults under valgrind, whose
        // emulated process has no vDSO; the C library falls back to the system call.
        let mut t = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes one timespec into `t`, which outlives the call.
        if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) } == 0 {
            return Duration::new(
                u64::try_from(t.tv_sec).unwrap_or(0),
                u32::try_from(t.tv_nsec).unwrap_or(0),
            );
        }
    }
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    START.get_or_init(Instant::now).elapsed()
}

/// Wraps a guest's future: counts the thread CPU time each poll spends in `used` and ends with
/// `None` once that passes `budget`. The guest yields at every epoch tick, so the budget is
/// checked every few milliseconds of guest work.
pub(super) struct CpuMetered<'a, F> {
    inner: Pin<Box<F>>,
    budget: Duration,
    used: &'a AtomicU64,
}

impl<'a, F: Future> CpuMetered<'a, F> {
    pub(super) fn new(inner: F, budget: Duration, used: &'a AtomicU64) -> Self {
        CpuMetered {
            inner: Box::pin(inner),
            budget,
            used,
        }
    }
}

impl<F: Future> Future for CpuMetered<'_, F> {
    type Output = Option<F::Output>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let before = thread_cpu_time();
        let poll = self.inner.as_mut().poll(cx);
        let spent = thread_cpu_time().saturating_sub(before);
        let spent = u64::try_from(spent.as_nanos()).unwrap_or(u64::MAX);
        let used = self
            .used
            .fetch_add(spent, Ordering::Relaxed)
            .saturating_add(spent);
        match poll {
            Poll::Ready(value) => Poll::Ready(Some(value)),
            Poll::Pending if Duration::from_nanos(used) > self.budget => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// The wall-clock backstop of a run whose CPU-time limit is `timeout_s`.
pub(super) fn wall_backstop(timeout_s: f64) -> Duration {
    Duration::from_secs_f64(timeout_s * WALL_BACKSTOP_FACTOR)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_thread_clock_counts_work_not_sleep() {
        let start = thread_cpu_time();
        std::thread::sleep(Duration::from_millis(200));
        let slept = thread_cpu_time().saturating_sub(start);
        assert!(slept < Duration::from_millis(50), "{slept:?}");
        // Busy work advances it, by no more than the wall clock (however loaded the machine:
        // the loop ends on the thread clock, with a generous wall-clock cap).
        let start = thread_cpu_time();
        let begun = Instant::now();
        let mut x = 0u64;
        let mut worked = Duration::ZERO;
        while worked < Duration::from_millis(100) && begun.elapsed() < Duration::from_secs(30) {
            x = std::hint::black_box(x.wrapping_add(1));
            worked = thread_cpu_time().saturating_sub(start);
        }
        let wall = begun.elapsed();
        assert!(
            worked >= Duration::from_millis(100),
            "{worked:?} in {wall:?}"
        );
        assert!(
            worked <= wall + Duration::from_millis(5),
            "{worked:?} in {wall:?}"
        );
    }
}
