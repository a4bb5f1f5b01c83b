//! Helpers of the unit tests: the mutants an operator makes of a source, and assertions on
//! them.

use crate::find::find_mutations;
use crate::mutation::{Mutation, apply};
use crate::syntax::parses;

pub(crate) fn mutants(src: &str, op: &str) -> Vec<(Mutation, String)> {
    find_mutations(src, &[op])
        .expect("find_mutations")
        .into_iter()
        .map(|m| {
            let out = apply(src, &m.edits).expect("apply");
            (m, out)
        })
        .collect()
}

pub(crate) fn outputs(src: &str, op: &str) -> Vec<String> {
    mutants(src, op).into_iter().map(|(_, s)| s).collect()
}

#[track_caller]
pub(crate) fn assert_produces(src: &str, op: &str, expected: &str) {
    let outs = outputs(src, op);
    assert!(
        outs.iter().any(|o| o == expected),
        "{op} did not produce\n{expected}\n--- got {} mutants:\n{}",
        outs.len(),
        outs.join("\n-----\n")
    );
}

/// Asserts that `op` makes exactly `count` mutants of `src`, each of `expected` among them.
#[track_caller]
pub(crate) fn assert_mutants(src: &str, op: &str, count: usize, expected: &[&str]) {
    for e in expected {
        assert_produces(src, op, e);
    }
    assert_eq!(outputs(src, op).len(), count, "{op} mutants of\n{src}");
}

#[track_caller]
pub(crate) fn assert_none(src: &str, op: &str) {
    let outs = outputs(src, op);
    assert!(
        outs.is_empty(),
        "{op} should find no site, got:\n{}",
        outs.join("\n-----\n")
    );
}

#[track_caller]
pub(crate) fn check_mutation(src: &str, m: &Mutation) {
    assert!(!m.edits.is_empty());
    for w in m.edits.windows(2) {
        assert!(w[0].end <= w[1].start, "edits unsorted/overlapping: {m:?}");
    }
    assert!(m.start_line >= 1 && m.start_line <= m.end_line, "{m:?}");
    let out = apply(src, &m.edits).expect("apply");
    assert_ne!(out, src, "{m:?}");
    assert!(parses(&out), "mutant does not parse: {m:?}\n{out}");
}
