//! Validating candidates: the screen and grading runs in the sandbox, their limits, and the
//! verdict on each candidate.

use super::*;

impl Synthesizer {
    pub(super) fn validate_all(
        &self,
        batch: &[Candidate],
        workers: usize,
        progress: ProgressFn<'_>,
        valid_before: usize,
        target: usize,
        tried_before: usize,
    ) -> Vec<Verdict> {
        let next = AtomicUsize::new(0);
        let done = AtomicUsize::new(0);
        let slots: Vec<std::sync::Mutex<Option<Verdict>>> =
            batch.iter().map(|_| std::sync::Mutex::new(None)).collect();
        std::thread::scope(|scope| {
            for _ in 0..workers.min(batch.len()) {
                scope.spawn(|| {
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(candidate) = batch.get(i) else { break };
                        let verdict = self.validate(candidate);
                        if let Ok(mut slot) = slots[i].lock() {
                            *slot = Some(verdict);
                        }
                        let finished = done.fetch_add(1, Ordering::Relaxed) + 1;
                        progress(&SynthProgress {
                            valid: valid_before,
                            target,
                            tried: tried_before + finished,
                        });
                    }
                });
            }
        });
        slots
            .into_iter()
            .map(|slot| {
                slot.into_inner()
                    .ok()
                    .flatten()
                    .unwrap_or(Verdict::Rejected(Rejection::Error, 0, None, 0))
            })
            .collect()
    }

    pub(super) fn limits(&self) -> Limits {
        let mut limits = self.repo.prepared.config.limits();
        let budget = self.intake.suite_seconds * self.config.timeout_factor + 1.0;
        limits.timeout_s = limits.timeout_s.min(budget.max(2.0));
        limits
    }

    /// Limits recorded in a task: the repository's, with the time limit cut to ten times the
    /// clean suite (at least 10 s). An agent's edit that makes the code loop forever then costs
    /// seconds per test run instead of the repository's whole limit, while a correct fix (about
    /// as fast as the clean code) has a wide margin even on a loaded machine.
    pub(super) fn task_limits(&self) -> Limits {
        let mut limits = self.repo.prepared.config.limits();
        let budget = (self.intake.suite_seconds * 10.0).max(10.0);
        limits.timeout_s = limits.timeout_s.min(budget);
        limits
    }

    /// Runs the tests that can see the candidate (twice when reproducing) and buckets them.
    pub(super) fn validate(&self, candidate: &Candidate) -> Verdict {
        let spans: Vec<ChangedSpan<'_>> = candidate
            .sites
            .iter()
            .map(|&s| {
                let site = &self.sites[s];
                ChangedSpan {
                    file: &site.file,
                    start_line: site.mutation.start_line,
                    end_line: site.mutation.end_line,
                    in_function_body: site.mutation.in_function_body,
                }
            })
            .collect();
        let (selected, kind) = if self.config.select_tests {
            let selection = self.index.select(&spans);
            (selection.tests, selection.kind)
        } else {
            (self.intake.passing.clone(), SelectionKind::Full)
        };
        if selected.is_empty() {
            return Verdict::Rejected(Rejection::NoFailingTest, 0, None, 0);
        }
        let mut args = vec!["--continue-on-collection-errors".to_string()];
        if self.config.reproduce {
            // The screen only has to find one failing test: the confirm run buckets them all.
            args.push("--exitfirst".to_string());
        }
        if kind == SelectionKind::Full {
            args.extend(self.intake.passing.iter().cloned());
        } else if selected.len() <= 400 {
            // Node ids select exactly; past a few hundred, whole files are shorter to pass.
            args.extend(selected.iter().cloned());
        } else {
            let files: BTreeSet<&str> = selected.iter().map(|id| test_file(id)).collect();
            args.extend(files.into_iter().map(String::from));
        }
        let mut tree = self.repo.files.clone();
        for (path, data) in &candidate.files {
            tree.insert(path.clone(), data.clone());
        }
        // Screen: only the tests that can see the bug.
        let screen = match self.run_once(&tree, &args, self.config.reproduce) {
            Ok(report) => report,
            Err(reason) => return Verdict::Rejected(reason, 1, Some(kind), 0),
        };
        let mut tests_run = screen.tests.len();
        let screened = bucket(&self.intake.passing, &selected, &screen.tests);
        if screened.fail_to_pass.is_empty() {
            return Verdict::Rejected(Rejection::NoFailingTest, 1, Some(kind), tests_run);
        }
        if !self.config.reproduce {
            if screened.pass_to_pass.is_empty() {
                return Verdict::Rejected(Rejection::NoPassingTest, 1, Some(kind), tests_run);
            }
            let failing_records = failing_records(&screened.fail_to_pass, &screen.tests);
            return Verdict::Valid(Validated {
                fail_to_pass: screened.fail_to_pass,
                pass_to_pass: screened.pass_to_pass,
                failing_records,
                selection: kind,
                tests_run,
                runs: 1,
                selection_miss: false,
            });
        }
        // Confirm: exactly the run that will grade the task (every passing test by id, in
        // grading order). The test that failed the screen must fail again.
        let passing: Vec<String> = self.intake.passing.iter().cloned().collect();
        let confirm =
            match self.run_once(&tree, &frognano_sandbox::grading_args(&[], &passing), false) {
                Ok(report) => report,
                Err(reason) => return Verdict::Rejected(reason, 2, Some(kind), tests_run),
            };
        tests_run += confirm.tests.len();
        let confirmed = bucket(&self.intake.passing, &self.intake.passing, &confirm.tests);
        let screen_failed: Vec<&String> = screened
            .fail_to_pass
            .iter()
            .filter(|id| screen.tests.iter().any(|t| &&t.id == id))
            .collect();
        let reproduced = !confirmed.fail_to_pass.is_empty()
            && screen_failed
                .iter()
                .all(|id| confirmed.fail_to_pass.contains(id));
        if !reproduced {
            return Verdict::Rejected(Rejection::NotReproducible, 2, Some(kind), tests_run);
        }
        if confirmed.pass_to_pass.is_empty() {
            return Verdict::Rejected(Rejection::NoPassingTest, 2, Some(kind), tests_run);
        }
        // A failure outside the selection means the impact analysis missed a test: the task
        // stands (the confirm run is the truth), the miss is counted.
        let selection_miss = confirmed
            .fail_to_pass
            .iter()
            .any(|id| !selected.contains(id));
        let failing_records = failing_records(&confirmed.fail_to_pass, &confirm.tests);
        Verdict::Valid(Validated {
            fail_to_pass: confirmed.fail_to_pass,
            pass_to_pass: confirmed.pass_to_pass,
            failing_records,
            selection: kind,
            tests_run,
            runs: 2,
            selection_miss,
        })
    }

    /// One validation run; `exitfirst` accepts pytest's "interrupted" status (a run stopped
    /// at its first failure, which collection errors also count as).
    pub(super) fn run_once(
        &self,
        tree: &FileTree,
        args: &[String],
        exitfirst: bool,
    ) -> std::result::Result<frognano_core::TestReport, Rejection> {
        let work = tempfile::Builder::new()
            .prefix("frognano-synth-")
            .tempdir()
            .map_err(|_| Rejection::Error)?;
        materialise(tree, work.path()).map_err(|_| Rejection::Error)?;
        let request = TestRequest {
            pytest_args: args.to_vec(),
            limits: Some(self.limits()),
            cancel: self.cancel.clone(),
            ..TestRequest::default()
        };
        let report = self
            .sandbox
            .run_tests_in_workspace(&self.repo.prepared, work.path(), &request)
            .map_err(|_| Rejection::Error)?;
        match report.outcome {
            RunOutcome::Passed | RunOutcome::Failed | RunOutcome::NoTests => {}
            _ => return Err(Rejection::Limit),
        }
        match report.exit_code {
            Some(0 | 1 | 5) => Ok(report),
            Some(2) if exitfirst => Ok(report),
            _ => Err(Rejection::BrokenSuite),
        }
    }
}
