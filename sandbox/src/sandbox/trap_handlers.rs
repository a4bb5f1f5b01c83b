//! Keeps wasmtime's trap handlers first in line.
//!
//! A guest's out-of-bounds memory access (CPython overflowing its stack in linear memory, for
//! one) reaches wasmtime as a fault on a guard page, which its process-wide signal handlers,
//! installed when the first engine is made, turn into a trap: the run fails, the host goes on.
//! A library that installs its own handler for those signals afterwards sees the fault first.
//! Ray does, in every driver process that connects to a cluster (a crash logger that re-raises
//! the signal), and a guest's trap then kills the host process. So the handlers are recorded
//! once wasmtime has installed them and, before each guest run, put back where another has
//! taken their place. The displaced handler loses only the host's own faults, which wasmtime
//! passes on to the handler that was installed before it (Python's faulthandler, for one).

#[cfg(target_os = "linux")]
mod linux {
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// The signals wasmtime handles on Linux.
    const TRAP_SIGNALS: [libc::c_int; 4] =
        [libc::SIGSEGV, libc::SIGBUS, libc::SIGILL, libc::SIGFPE];

    struct Recorded(Vec<(libc::c_int, libc::sigaction)>);

    static RECORDED: OnceLock<Recorded> = OnceLock::new();
    static TOLD: AtomicBool = AtomicBool::new(false);

    fn signal_name(signal: libc::c_int) -> &'static str {
        match signal {
            libc::SIGSEGV => "SIGSEGV",
            libc::SIGBUS => "SIGBUS",
            libc::SIGILL => "SIGILL",
            libc::SIGFPE => "SIGFPE",
            _ => "a signal",
        }
    }

    fn current(signal: libc::c_int) -> Option<libc::sigaction> {
        // SAFETY: a null new action only reads the current one into `action`, which is
        // plain data that the kernel fills in whole.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            (libc::sigaction(signal, std::ptr::null(), &mut action) == 0).then_some(action)
        }
    }

    pub(crate) fn record() {
        RECORDED.get_or_init(|| {
            Recorded(
                TRAP_SIGNALS
                    .iter()
                    .filter_map(|&signal| current(signal).map(|action| (signal, action)))
                    .collect(),
            )
        });
    }

    pub(crate) fn reinstate() -> Vec<libc::c_int> {
        let Some(recorded) = RECORDED.get() else {
            return Vec::new();
        };
        let mut replaced = Vec::new();
        for (signal, ours) in &recorded.0 {
            let Some(now) = current(*signal) else {
                continue;
            };
            if now.sa_sigaction != ours.sa_sigaction {
                // SAFETY: `ours` is the action that was installed for this signal, read back
                // from the kernel; installing it again restores wasmtime's handler as it was.
                if unsafe { libc::sigaction(*signal, ours, std::ptr::null_mut()) } == 0 {
                    replaced.push(*signal);
                }
            }
        }
        if !replaced.is_empty() && !TOLD.swap(true, Ordering::Relaxed) {
            let names: Vec<&str> = replaced.iter().map(|&signal| signal_name(signal)).collect();
            eprintln!(
                "frognano: another library replaced the handlers that turn a guest's faults \
                 into traps ({}); the sandbox put its own back",
                names.join(", ")
            );
        }
        replaced
    }
}

/// Records the trap handlers as they are now; call right after making an engine (only the
/// first call in a process records).
pub(crate) fn record() {
    #[cfg(target_os = "linux")]
    linux::record();
}

/// Puts back recorded trap handlers that another handler replaced; returns those signals.
pub(crate) fn reinstate() -> Vec<i32> {
    #[cfg(target_os = "linux")]
    return linux::reinstate();
    #[cfg(not(target_os = "linux"))]
    Vec::new()
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use wasmtime::{Config, Engine, Instance, Module, Store, Trap};

    /// A crash logger as Ray installs one: it reports and hands the signal to the default
    /// action, so a fault that reaches it ends the process.
    extern "C" fn crash_logger(_: libc::c_int) {
        // SAFETY: resetting a signal's action is async-signal-safe.
        unsafe {
            libc::signal(libc::SIGSEGV, libc::SIG_DFL);
        }
    }

    #[test]
    fn a_guest_fault_still_traps_after_another_library_took_the_signal() {
        let engine = Engine::new(&Config::new()).expect("an engine installs the trap handlers");
        record();
        // SAFETY: installs a plain handler for SIGSEGV, replaced by `reinstate` below.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = crash_logger as extern "C" fn(libc::c_int) as usize;
            assert_eq!(
                libc::sigaction(libc::SIGSEGV, &action, std::ptr::null_mut()),
                0
            );
        }
        assert_eq!(reinstate(), vec![libc::SIGSEGV]);
        assert!(reinstate().is_empty(), "nothing left to put back");

        // A load far past the one-page memory faults on a guard page.
        let module = Module::new(
            &engine,
            r#"(module (memory 1) (func (export "oob") (result i32) (i32.load (i32.const 0x7ffffff0))))"#,
        )
        .expect("valid module");
        let mut store = Store::new(&engine, ());
        let instance = Instance::new(&mut store, &module, &[]).expect("instantiates");
        let oob = instance
            .get_typed_func::<(), i32>(&mut store, "oob")
            .expect("exported");
        let err = oob.call(&mut store, ()).expect_err("out of bounds");
        assert_eq!(err.downcast_ref::<Trap>(), Some(&Trap::MemoryOutOfBounds));
    }
}
