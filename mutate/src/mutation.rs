//! Mutations as data: byte-span [`Edit`]s of the original source, applying them, and merging
//! mutations of one file that do not touch each other.

use serde::{Deserialize, Serialize};

use crate::error::MutateError;
use crate::syntax::parses;

/// One replacement of a byte span of the original source.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Edit {
    /// First byte of the replaced span (UTF-8 offset into the original source).
    pub start: usize,
    /// One past the last byte of the replaced span; equal to `start` for an insertion.
    pub end: usize,
    /// The text that replaces the span.
    pub replacement: String,
}

/// One candidate bug in one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mutation {
    /// Stable operator name (several joined with `+` for a [`combine`]d mutation).
    pub operator: String,
    /// Sorted, non-overlapping edits, relative to the ORIGINAL source.
    pub edits: Vec<Edit>,
    /// 1-based first line of the smallest enclosing statement (simple or compound) containing
    /// all edits.
    pub start_line: u32,
    /// 1-based last line of that statement.
    pub end_line: u32,
    /// Dotted qualified name of the enclosing def/class (e.g. `Parser.parse.inner`); `""` at
    /// module level.
    pub scope: String,
    /// True iff every edit lies inside the body block of some `def` (code that runs at call
    /// time, not import time). Decorators, default values, parameters and the `def` line of a
    /// top-level or class-level function are not in a function body.
    pub in_function_body: bool,
    /// Short human description for debugging/metadata, e.g. "`<` -> `<=`" (never shown to
    /// agents).
    pub description: String,
}

pub(crate) fn edit(start: usize, end: usize, replacement: impl Into<String>) -> Edit {
    Edit {
        start,
        end,
        replacement: replacement.into(),
    }
}

/// True iff [`apply`] would accept `edits` for `source`.
pub(crate) fn edits_are_valid(source: &str, edits: &[Edit]) -> bool {
    let mut pos = 0;
    edits.iter().all(|e| {
        let ok = pos <= e.start
            && e.start <= e.end
            && e.end <= source.len()
            && source.is_char_boundary(e.start)
            && source.is_char_boundary(e.end);
        pos = e.end;
        ok
    })
}

/// Applies sorted, non-overlapping `edits` (relative to `source`) and returns the new text.
///
/// Errors on an edit that is out of range, reversed, not on a UTF-8 character boundary, or
/// that starts before the previous edit ends.
pub fn apply(source: &str, edits: &[Edit]) -> Result<String, MutateError> {
    let mut out = String::with_capacity(source.len() + 64);
    let mut pos = 0usize;
    for (i, e) in edits.iter().enumerate() {
        if e.start > e.end || e.end > source.len() {
            return Err(MutateError::InvalidEdit(format!(
                "edit {i} spans {}..{} of a {}-byte source",
                e.start,
                e.end,
                source.len()
            )));
        }
        if !source.is_char_boundary(e.start) || !source.is_char_boundary(e.end) {
            return Err(MutateError::InvalidEdit(format!(
                "edit {i} ({}..{}) is not on a character boundary",
                e.start, e.end
            )));
        }
        if e.start < pos {
            return Err(MutateError::InvalidEdit(format!(
                "edit {i} ({}..{}) overlaps the previous edit or is out of order",
                e.start, e.end
            )));
        }
        out.push_str(&source[pos..e.start]);
        out.push_str(&e.replacement);
        pos = e.end;
    }
    out.push_str(&source[pos..]);
    Ok(out)
}

/// True iff some edit of `a` and some edit of `b` intersect; touching spans count as overlap.
pub fn overlaps(a: &Mutation, b: &Mutation) -> bool {
    a.edits
        .iter()
        .any(|x| b.edits.iter().any(|y| x.start <= y.end && y.start <= x.end))
}

/// Merges non-overlapping mutations of the same `source` into one mutation.
///
/// Operator names and descriptions are joined (`+` and `; `), the line range is the union,
/// `in_function_body` holds only if it holds for all, and the scope is the first mutation's.
/// Returns `None` for an empty list, if any two mutations [`overlaps`], or if the combined
/// source does not parse or equals the original.
pub fn combine(source: &str, mutations: &[&Mutation]) -> Option<Mutation> {
    let first = mutations.first()?;
    for (i, a) in mutations.iter().enumerate() {
        if mutations[i + 1..].iter().any(|b| overlaps(a, b)) {
            return None;
        }
    }
    let mut edits: Vec<Edit> = mutations.iter().flat_map(|m| m.edits.clone()).collect();
    edits.sort_by_key(|e| (e.start, e.end));
    let new = apply(source, &edits).ok()?;
    if new == source || !parses(&new) {
        return None;
    }
    Some(Mutation {
        operator: mutations
            .iter()
            .map(|m| m.operator.as_str())
            .collect::<Vec<_>>()
            .join("+"),
        edits,
        start_line: mutations.iter().map(|m| m.start_line).min()?,
        end_line: mutations.iter().map(|m| m.end_line).max()?,
        scope: first.scope.clone(),
        in_function_body: mutations.iter().all(|m| m.in_function_body),
        description: mutations
            .iter()
            .map(|m| m.description.as_str())
            .collect::<Vec<_>>()
            .join("; "),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::find::find_mutations;

    #[test]
    fn apply_validates_edits() {
        let src = "héllo";
        assert_eq!(
            apply(src, &[edit(0, 1, "j"), edit(3, 5, "LO")]).expect("apply"),
            "jéLOo"
        );
        assert_eq!(apply(src, &[edit(6, 6, "!")]).expect("insert"), "héllo!");
        assert!(apply(src, &[edit(0, 7, "")]).is_err());
        assert!(apply(src, &[edit(2, 3, "")]).is_err()); // inside `é`
        assert!(apply(src, &[edit(0, 3, ""), edit(2, 4, "")]).is_err());
        assert!(apply(src, &[edit(3, 4, ""), edit(0, 1, "")]).is_err());
        assert!(apply(src, &[edit(3, 2, "")]).is_err());
    }

    #[test]
    fn combine_merges_non_overlapping_mutations() {
        let src = "def f(a, b):\n    if a < b:\n        return a + b\n    return a - b\n";
        let muts = find_mutations(src, &[]).expect("find_mutations");
        let lt = muts
            .iter()
            .find(|m| m.operator == "boundary_condition")
            .expect("boundary");
        let minus = muts
            .iter()
            .find(|m| m.operator == "op_change" && m.description == "`-` -> `+`")
            .expect("op_change");
        let c = combine(src, &[lt, minus]).expect("combinable");
        assert_eq!(c.operator, "boundary_condition+op_change");
        assert_eq!(
            apply(src, &c.edits).expect("apply"),
            "def f(a, b):\n    if a <= b:\n        return a + b\n    return a + b\n"
        );
        assert_eq!((c.start_line, c.end_line), (2, 4));
        assert!(c.in_function_body);
        assert_eq!(c.scope, "f");
        // Overlapping (same token) and containing mutations don't combine.
        let flip = muts
            .iter()
            .find(|m| m.operator == "flip_operators" && m.description == "`<` -> `>`")
            .expect("flip");
        assert!(overlaps(lt, flip));
        assert!(combine(src, &[lt, flip]).is_none());
        let rm_if = muts
            .iter()
            .find(|m| m.operator == "remove_cond")
            .expect("remove_cond");
        assert!(combine(src, &[rm_if, lt]).is_none());
        assert!(combine(src, &[]).is_none());
        // Each alone is fine, together the block would be empty.
        let src2 = "def f():\n    x = 1\n    # note\n    y = 2\n";
        let muts2 = find_mutations(src2, &["remove_assign"]).expect("find");
        assert_eq!(muts2.len(), 2);
        assert!(!overlaps(&muts2[0], &muts2[1]));
        assert!(combine(src2, &[&muts2[0], &muts2[1]]).is_none());
    }
}
