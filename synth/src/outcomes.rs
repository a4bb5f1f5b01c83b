//! How a validation run is read: the SWE-smith buckets of a candidate's test outcomes, the
//! records of failing and missing tests, rejection names, and module names of test files.

use std::collections::{BTreeMap, BTreeSet};

use frognano_core::{TestOutcome, TestRecord};

use crate::impact::test_file;
use crate::options::Rejection;

pub(crate) fn reason_name(reason: Rejection) -> &'static str {
    match reason {
        Rejection::NoFailingTest => "no_failing_test",
        Rejection::NoPassingTest => "no_passing_test",
        Rejection::Limit => "limit",
        Rejection::NotReproducible => "not_reproducible",
        Rejection::BrokenSuite => "broken_suite",
        Rejection::Error => "error",
    }
}

pub(crate) struct Buckets {
    pub(crate) fail_to_pass: Vec<String>,
    pub(crate) pass_to_pass: Vec<String>,
}

/// FAIL_TO_PASS: selected passing tests that failed, errored or went missing with the bug.
/// PASS_TO_PASS: every other passing test, except selected ones whose outcome changed
/// otherwise (e.g. now skipped); tests not selected cannot see the bug and still pass.
pub(crate) fn bucket(
    passing: &BTreeSet<String>,
    selected: &BTreeSet<String>,
    ran: &[TestRecord],
) -> Buckets {
    let outcomes: BTreeMap<&str, TestOutcome> =
        ran.iter().map(|t| (t.id.as_str(), t.outcome)).collect();
    let mut fail_to_pass = Vec::new();
    let mut pass_to_pass = Vec::new();
    for id in passing {
        if !selected.contains(id) {
            pass_to_pass.push(id.clone());
            continue;
        }
        match outcomes.get(id.as_str()) {
            Some(TestOutcome::Passed) => pass_to_pass.push(id.clone()),
            Some(TestOutcome::Failed | TestOutcome::Error) | None => fail_to_pass.push(id.clone()),
            Some(_) => {}
        }
    }
    Buckets {
        fail_to_pass,
        pass_to_pass,
    }
}

/// The failure records of `ids` (a test never reported gets one saying why).
pub(crate) fn failing_records(ids: &[String], ran: &[TestRecord]) -> Vec<TestRecord> {
    ids.iter()
        .map(|id| {
            ran.iter()
                .find(|t| &t.id == id)
                .cloned()
                .unwrap_or_else(|| missing_record(id, ran))
        })
        .collect()
}

/// A failure record for a test the buggy run never reported (its module failed to import).
pub(crate) fn missing_record(id: &str, ran: &[TestRecord]) -> TestRecord {
    let file = test_file(id);
    let message = ran
        .iter()
        .find(|t| t.id == file || t.id.starts_with(&format!("{file}::")) && t.message.is_some())
        .and_then(|t| t.message.clone())
        .or_else(|| Some("the test was not collected (its module failed to import)".into()));
    TestRecord {
        message,
        ..TestRecord::new(id, TestOutcome::Error)
    }
}

/// The dotted module name of a file under one of the import roots.
pub fn module_name(path: &str, roots: &[String]) -> String {
    let mut best = path;
    for root in roots {
        if root == "." || root.is_empty() {
            continue;
        }
        if let Some(rest) = path.strip_prefix(&format!("{}/", root.trim_end_matches('/'))) {
            best = rest;
        }
    }
    let stem = best.strip_suffix(".py").unwrap_or(best);
    stem.strip_suffix("/__init__")
        .unwrap_or(stem)
        .replace('/', ".")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_follow_the_swe_smith_rule() {
        let passing: BTreeSet<String> = ["a::1", "a::2", "a::3", "b::1", "c::1"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let selected: BTreeSet<String> = ["a::1", "a::2", "a::3", "b::1"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let ran = vec![
            TestRecord::new("a::1", TestOutcome::Failed),
            TestRecord::new("a::2", TestOutcome::Passed),
            TestRecord::new("a::3", TestOutcome::Skipped),
        ];
        let b = bucket(&passing, &selected, &ran);
        // b::1 was selected but never reported: its module broke.
        assert_eq!(b.fail_to_pass, vec!["a::1", "b::1"]);
        assert_eq!(b.pass_to_pass, vec!["a::2", "c::1"]);
    }

    #[test]
    fn module_names_strip_import_roots() {
        let roots = vec![".".to_string(), "src".to_string()];
        assert_eq!(module_name("src/pkg/core.py", &roots), "pkg.core");
        assert_eq!(module_name("pkg/__init__.py", &roots), "pkg");
        assert_eq!(module_name("top.py", &roots), "top");
    }
}
