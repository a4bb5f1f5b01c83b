//! The time limit of a guest run, counted in the guest's own time.
//!
//! A wall-clock limit makes verdicts depend on the machine's load: a suite that passes in 64 s
//! on an idle machine times out at 120 s when a compile runs beside it, having used 47 s of CPU.
//! The guest runs on the thread that polls its future (WASI calls block that thread, it never
//! hands work to others), so that thread's clocks are the guest's: its own time is the
//! wall-clock time of the run less the time the thread waited for a core (the kernel's
//! scheduler statistics say how long), which is its CPU time plus the time it waited of its own
//! accord (a sleep, a blocking read), whatever else the machine runs. A test that sleeps thus
//! ends at the limit like one that spins. Where the kernel keeps no scheduler statistics, the
//! thread's CPU time stands in, and a sleeping guest is stopped by a wall-clock backstop.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;
use std::time::Instant;

/// The wall-clock backstop is this many times the time limit: room for a loaded machine (the
/// guest gets a quarter of a core and still finishes), and an end for a sleeping guest where
/// the kernel keeps no scheduler statistics.
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

/// Time the calling thread has waited for a core so far (the second field of
/// `/proc/thread-self/schedstat`: time on a core, time waiting on a run queue, slices), or
/// `None` where the kernel keeps no scheduler statistics.
fn thread_queue_wait() -> Option<Duration> {
    let stats = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let nanos = stats.split_whitespace().nth(1)?.parse().ok()?;
    Some(Duration::from_nanos(nanos))
}

/// A run's own time (see the module's documentation), read on the thread that started it.
pub(super) struct OwnClock {
    started: Instant,
    queue_wait_at_start: Option<Duration>,
    cpu_at_start: Duration,
}

impl OwnClock {
    /// Starts the clock; it must be read on this thread.
    pub(super) fn start() -> Self {
        OwnClock {
            started: Instant::now(),
            queue_wait_at_start: thread_queue_wait(),
            cpu_at_start: thread_cpu_time(),
        }
    }

    /// The run's own time so far: the wall-clock time less the time the thread waited for a
    /// core, or its CPU time where the kernel does not say how long it waited.
    pub(super) fn elapsed(&self) -> Duration {
        match (self.queue_wait_at_start, thread_queue_wait()) {
            (Some(before), Some(now)) => self
                .started
                .elapsed()
                .saturating_sub(now.saturating_sub(before)),
            _ => thread_cpu_time().saturating_sub(self.cpu_at_start),
        }
    }

    /// Ends once the run's own time passes `budget`: it sleeps for what is left of the budget
    /// (own time runs no faster than the wall clock), then looks again. It ends a guest that
    /// waits between polls of its future (an asynchronous sleep), which [`Metered`] does
    /// not see.
    pub(super) async fn reached(&self, budget: Duration) {
        loop {
            let left = budget.saturating_sub(self.elapsed());
            if left.is_zero() {
                return;
            }
            tokio::time::sleep(left).await;
        }
    }
}

/// Wraps a guest's future: counts the thread CPU time each poll spends in `used` and ends with
/// `None` once the run's own time (`clock`) passes `budget`. The guest yields at every epoch
/// tick, so the budget is checked every few milliseconds of guest work.
pub(super) struct Metered<'a, F> {
    inner: Pin<Box<F>>,
    budget: Duration,
    clock: &'a OwnClock,
    used: &'a AtomicU64,
}

impl<'a, F: Future> Metered<'a, F> {
    pub(super) fn new(
        inner: F,
        budget: Duration,
        clock: &'a OwnClock,
        used: &'a AtomicU64,
    ) -> Self {
        Metered {
            inner: Box::pin(inner),
            budget,
            clock,
            used,
        }
    }
}

impl<F: Future> Future for Metered<'_, F> {
    type Output = Option<F::Output>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let before = thread_cpu_time();
        let poll = self.inner.as_mut().poll(cx);
        let spent = thread_cpu_time().saturating_sub(before);
        let spent = u64::try_from(spent.as_nanos()).unwrap_or(u64::MAX);
        self.used.fetch_add(spent, Ordering::Relaxed);
        match poll {
            Poll::Ready(value) => Poll::Ready(Some(value)),
            Poll::Pending if self.clock.elapsed() > self.budget => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// The wall-clock backstop of a run whose time limit is `timeout_s`.
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

    #[test]
    fn the_own_clock_counts_sleep_but_not_waiting_for_a_core() {
        if thread_queue_wait().is_none() {
            return; // a kernel without scheduler statistics: the CPU clock stands in
        }
        let clock = OwnClock::start();
        std::thread::sleep(Duration::from_millis(200));
        assert!(
            clock.elapsed() >= Duration::from_millis(195),
            "{:?}",
            clock.elapsed()
        );
        // Twice as many busy threads as cores compete with this one: the time it waits for a
        // core is not its own, so its own time stays with its CPU time, well below the wall's.
        let stop = std::sync::atomic::AtomicBool::new(false);
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        std::thread::scope(|scope| {
            for _ in 0..2 * cores {
                scope.spawn(|| {
                    let mut x = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        x = std::hint::black_box(x.wrapping_add(1));
                    }
                });
            }
            let clock = OwnClock::start();
            let cpu_start = thread_cpu_time();
            let begun = Instant::now();
            let mut x = 0u64;
            while begun.elapsed() < Duration::from_millis(600) {
                x = std::hint::black_box(x.wrapping_add(1));
            }
            let own = clock.elapsed();
            let cpu = thread_cpu_time().saturating_sub(cpu_start);
            stop.store(true, Ordering::Relaxed);
            assert!(
                own <= cpu.mul_f64(1.1) + Duration::from_millis(30),
                "own {own:?}, CPU {cpu:?}, wall {:?}",
                begun.elapsed()
            );
        });
    }
}
