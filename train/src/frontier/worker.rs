//! The frontier's synthesis thread and the state it shares with the proposals.

use std::collections::{BTreeSet, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;

use frognano_core::Task;
use frognano_synth::{SynthRequest, Synthesizer};

use crate::curriculum::FamilyKey;

/// State shared with the synthesis thread.
#[derive(Debug, Default)]
pub(super) struct Shared {
    pub(super) buffers: Vec<VecDeque<Task>>,
    /// Tasks wanted in each family's buffer.
    pub(super) targets: Vec<usize>,
    /// Order in which the worker serves deficits (higher first).
    pub(super) priority: Vec<f64>,
    /// Per family, per repository: synthesis came back empty.
    pub(super) dry: Vec<Vec<bool>>,
    pub(super) next_repo: Vec<usize>,
    pub(super) in_flight: Option<usize>,
    /// Tasks made per family (their sum is the tasks generated). Among families the worker
    /// ranks equal, the one with the fewest goes first (proposals drain buffers as they fill,
    /// so the deficit alone would keep serving the first family).
    pub(super) made: Vec<u64>,
    pub(super) synth_s: f64,
    pub(super) errors: Vec<String>,
    pub(super) stop: bool,
    /// Task ids never to hand out (a held-out set), and every id handed out already; and
    /// bug-function keys whose tasks are never handed out.
    pub(super) seen: BTreeSet<String>,
    /// Most tasks kept buffered in all (synthesis pauses at this many).
    pub(super) capacity: usize,
    /// Buffered tasks dropped to make room for wanted families.
    pub(super) evicted: u64,
}

pub(super) fn lock(shared: &(Mutex<Shared>, Condvar)) -> MutexGuard<'_, Shared> {
    // A panic in the worker cannot leave the state half-written in a way that matters here.
    shared.0.lock().unwrap_or_else(|e| e.into_inner())
}

/// The synthesis thread: serves the family with the largest buffer deficit (highest priority
/// first), one task at a time, round-robin over the repositories that can serve it.
pub(super) fn synthesis_loop(
    mut synthesizers: Vec<Synthesizer>,
    keys: Vec<FamilyKey>,
    shared: Arc<(Mutex<Shared>, Condvar)>,
) {
    loop {
        let (family, repo) = {
            let mut guard = lock(&shared);
            loop {
                if guard.stop {
                    return;
                }
                let buffered: usize = guard.buffers.iter().map(VecDeque::len).sum();
                if buffered >= guard.capacity {
                    // Full: make room by dropping a task of a family no longer wanted, if a
                    // wanted family is short of tasks.
                    let wanted = (0..keys.len()).any(|f| {
                        guard.buffers[f].len() < guard.targets[f]
                            && guard.dry[f].iter().any(|d| !*d)
                    });
                    let stale = (0..keys.len())
                        .filter(|&f| guard.targets[f] == 0 && !guard.buffers[f].is_empty())
                        .min_by(|&a, &b| guard.priority[a].total_cmp(&guard.priority[b]));
                    if let (true, Some(f)) = (wanted, stale) {
                        guard.buffers[f].pop_back();
                        guard.evicted += 1;
                    }
                }
                let buffered: usize = guard.buffers.iter().map(VecDeque::len).sum();
                let next = (0..keys.len())
                    .filter(|_| buffered < guard.capacity)
                    .filter(|&f| {
                        guard.buffers[f].len() < guard.targets[f]
                            && guard.dry[f].iter().any(|d| !*d)
                    })
                    .max_by(|&a, &b| {
                        let deficit = |f: usize| guard.targets[f] - guard.buffers[f].len();
                        guard.priority[a]
                            .total_cmp(&guard.priority[b])
                            .then(deficit(a).cmp(&deficit(b)))
                            .then(guard.made[b].cmp(&guard.made[a]))
                            .then(b.cmp(&a))
                    });
                if let Some(f) = next {
                    let repos = guard.dry[f].len();
                    let start = guard.next_repo[f];
                    let repo = (0..repos)
                        .map(|i| (start + i) % repos)
                        .find(|&r| !guard.dry[f][r]);
                    if let Some(r) = repo {
                        guard.next_repo[f] = (r + 1) % repos;
                        guard.in_flight = Some(f);
                        break (f, r);
                    }
                }
                guard = shared.1.wait(guard).unwrap_or_else(|e| e.into_inner());
            }
        };
        let key = &keys[family];
        let request = SynthRequest {
            count: 1,
            operators: vec![key.operator.clone()],
            min_bugs: key.bugs,
            max_bugs: key.bugs,
            hint_levels: vec![key.hint],
        };
        let started = Instant::now();
        let result = synthesizers[repo].generate_request(&request, &|_| {});
        let mut guard = lock(&shared);
        guard.in_flight = None;
        guard.synth_s += started.elapsed().as_secs_f64();
        match result {
            Ok(tasks) => {
                let fresh: Vec<Task> = tasks
                    .into_iter()
                    .filter(|t| !crate::pools::is_excluded(t, &guard.seen))
                    .collect();
                if fresh.is_empty() {
                    guard.dry[family][repo] = true;
                }
                for t in fresh {
                    guard.seen.insert(t.id.clone());
                    guard.made[family] += 1;
                    guard.buffers[family].push_back(t);
                }
            }
            Err(frognano_synth::SynthError::Cancelled) => return,
            Err(e) => {
                guard.dry[family][repo] = true;
                guard.errors.push(format!("{}: {e}", key.label()));
            }
        }
        shared.1.notify_all();
    }
}
