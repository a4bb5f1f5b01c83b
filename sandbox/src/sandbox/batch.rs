//! Batched test runs: many jobs at once, up to the sandbox's worker count.

use std::path::{Path, PathBuf};

use frognano_core::TestReport;

use super::{PreparedRepo, Sandbox, TestRequest};
use crate::error::{Result, SandboxError};

impl Sandbox {
    /// Runs many test jobs, up to [`Sandbox::workers`] at once on as many threads; results
    /// are in job order.
    pub fn run_tests_many(&self, jobs: &[(PathBuf, TestRequest)]) -> Vec<Result<TestReport>> {
        // Preparation may run maintenance guests of its own, so it happens before the batch.
        // A repository that appears in several jobs is prepared once.
        let mut by_repo: std::collections::HashMap<&Path, PreparedRepo> =
            std::collections::HashMap::new();
        let mut prepared = Vec::with_capacity(jobs.len());
        let mut results = Vec::with_capacity(jobs.len());
        for (repo, _) in jobs {
            let ready = match by_repo.get(repo.as_path()) {
                Some(ready) => Ok(ready.clone()),
                None => self.prepare_repo(repo, &|_| {}).inspect(|ready| {
                    by_repo.insert(repo, ready.clone());
                }),
            };
            match ready {
                Ok(ready) => {
                    prepared.push(Some(ready));
                    results.push(std::sync::Mutex::new(None));
                }
                Err(err) => {
                    prepared.push(None);
                    results.push(std::sync::Mutex::new(Some(Err(err))));
                }
            }
        }
        let next = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|scope| {
            for _ in 0..self.workers.min(jobs.len()) {
                scope.spawn(|| {
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some((_, request)) = jobs.get(i) else {
                            break;
                        };
                        let Some(ready) = &prepared[i] else { continue };
                        let result = self.run_tests_prepared(ready, request);
                        if let Ok(mut slot) = results[i].lock() {
                            *slot = Some(result);
                        }
                    }
                });
            }
        });
        results
            .into_iter()
            .map(|slot| {
                slot.into_inner().ok().flatten().unwrap_or_else(|| {
                    Err(SandboxError::Runtime("a worker thread panicked".into()))
                })
            })
            .collect()
    }
}
