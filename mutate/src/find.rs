//! Finding every mutation of one file: parse, walk with the enabled operators, drop
//! duplicates, sort, and validate each candidate.

use std::collections::HashSet;

use crate::analyzer::Analyzer;
use crate::error::MutateError;
use crate::mutation::{Edit, Mutation};
use crate::registry::{OPERATOR_COUNT, Operator};
use crate::syntax::checker::{Checker, ExcerptPlan};
use crate::syntax::text::line_of;
use crate::syntax::{Grammar, parse_tree};

/// Every site of every named operator in one file (an empty `operators` means all of them).
///
/// The result is deterministic, ordered by first edit start, then operator name, then
/// description. Every mutation changes the source and leaves it parseable. Errors with
/// [`MutateError::UnknownOperator`] for a name [`crate::operators`] does not list and with
/// [`MutateError::Parse`] when the source itself does not satisfy [`crate::parses`].
pub fn find_mutations(source: &str, operators: &[&str]) -> Result<Vec<Mutation>, MutateError> {
    find_mutations_with_rejects(source, operators).map(|(kept, _)| kept)
}

/// [`find_mutations`], also returning the candidates that were located but dropped.
///
/// Returns `(kept, rejected)`: `kept` is exactly what [`find_mutations`] returns; `rejected`
/// holds, in the same order and with the same fields, the candidates whose mutated source does
/// not parse (or does not change): how often an operator's candidates are rejected is
/// measured on them. Errors as [`find_mutations`] does.
pub fn find_mutations_with_rejects(
    source: &str,
    operators: &[&str],
) -> Result<(Vec<Mutation>, Vec<Mutation>), MutateError> {
    let mut enabled = [operators.is_empty(); OPERATOR_COUNT];
    for name in operators {
        let operator = Operator::from_name(name)
            .ok_or_else(|| MutateError::UnknownOperator((*name).to_string()))?;
        enabled[operator as usize] = true;
    }
    let grammar = Grammar::get();
    let mut parser = grammar.parser().ok_or(MutateError::Parse)?;
    let tree = parse_tree(&mut parser, source).ok_or(MutateError::Parse)?;
    let root = tree.root_node();
    if root.has_error() {
        return Err(MutateError::Parse);
    }

    let mut analyzer = Analyzer::new(source, grammar, enabled);
    analyzer.walk(root);
    if analyzer.empty_block {
        return Err(MutateError::Parse);
    }
    let candidates = analyzer.candidates;

    let mut seen: HashSet<(Operator, Vec<Edit>)> = HashSet::new();
    let mut located: Vec<(Mutation, ExcerptPlan)> = Vec::with_capacity(candidates.len());
    for c in candidates {
        if c.edits.is_empty()
            || (c.operator == Operator::CtrlShuffle && !c.in_function_body)
            || !seen.insert((c.operator, c.edits.clone()))
        {
            continue;
        }
        let (start_line, end_line) = match c.line_statement {
            Some(s) => (
                line_of(s.start_position().row),
                line_of(s.end_position().row),
            ),
            None => {
                let row = |b: usize| source.get(..b).map_or(0, |p| p.matches('\n').count());
                let lo = c.edits.first().map_or(0, |e| e.start);
                let hi = c.edits.last().map_or(0, |e| e.end.max(e.start + 1) - 1);
                (line_of(row(lo)), line_of(row(hi)))
            }
        };
        let mutation = Mutation {
            operator: c.operator.name().to_string(),
            edits: c.edits,
            start_line,
            end_line,
            scope: c.scope,
            in_function_body: c.in_function_body,
            description: c.description,
        };
        located.push((mutation, c.plan));
    }
    located.sort_by(|(a, _), (b, _)| {
        let ka = (a.edits[0].start, &a.operator, &a.description);
        let kb = (b.edits[0].start, &b.operator, &b.description);
        ka.cmp(&kb).then_with(|| {
            let ea: Vec<_> = a
                .edits
                .iter()
                .map(|e| (e.start, e.end, &e.replacement))
                .collect();
            let eb: Vec<_> = b
                .edits
                .iter()
                .map(|e| (e.start, e.end, &e.replacement))
                .collect();
            ea.cmp(&eb)
        })
    });

    let mut checker = Checker::new(grammar, parser, source);
    let mut kept = Vec::with_capacity(located.len());
    let mut rejected = Vec::new();
    for (m, plan) in located {
        if checker.ok(&m.edits, &plan) {
            kept.push(m);
        } else {
            rejected.push(m);
        }
    }
    Ok((kept, rejected))
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;
    use crate::mutation::apply;
    use crate::registry::operators;
    use crate::syntax::parses;
    use crate::test_support::check_mutation;

    #[test]
    fn errors_for_unknown_operators_and_unparseable_sources() {
        let err = find_mutations("x = 1\n", &["no_such_op"]).expect_err("unknown op");
        assert!(matches!(err, MutateError::UnknownOperator(ref n) if n == "no_such_op"));
        assert!(err.to_string().contains("op_change_const"));
        assert!(matches!(
            find_mutations("def f(:\n", &[]),
            Err(MutateError::Parse)
        ));
        // tree-sitter accepts an empty suite; Python does not.
        assert!(matches!(
            find_mutations("if x:\npass\n", &[]),
            Err(MutateError::Parse)
        ));
        assert!(parses("x = 1\n"));
        assert!(!parses("x = (1\n"));
        assert!(!parses("if x:\npass\n"));
    }

    fn python_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .expect("read_dir")
            .map(|e| e.expect("dir entry").path())
            .collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                python_files(&p, out);
            } else if p.extension().is_some_and(|e| e == "py") {
                out.push(p);
            }
        }
    }

    #[test]
    fn every_operator_finds_sites_in_the_sample_repos() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/repos");
        let mut files = Vec::new();
        python_files(&root, &mut files);
        assert!(files.len() > 10, "sample repos not found under {root:?}");
        let mut counts: std::collections::BTreeMap<String, usize> = Default::default();
        for f in &files {
            let src = std::fs::read_to_string(f).expect("read");
            let muts = find_mutations(&src, &[]).expect("find_mutations");
            for w in muts.windows(2) {
                let ka = (w[0].edits[0].start, &w[0].operator, &w[0].description);
                let kb = (w[1].edits[0].start, &w[1].operator, &w[1].description);
                assert!(ka <= kb, "unsorted output in {f:?}");
            }
            for m in &muts {
                check_mutation(&src, m);
                *counts.entry(m.operator.clone()).or_default() += 1;
            }
            // Deterministic.
            assert_eq!(muts, find_mutations(&src, &[]).expect("again"));
        }
        for op in operators() {
            assert!(
                counts.get(op.name).copied().unwrap_or(0) >= 1,
                "operator {} found no site in the sample repos: {counts:?}",
                op.name
            );
        }
    }

    const TRICKY: &str = r#"# -*- coding: utf-8 -*-
import functools

GRÜßE = "héllo wörld ✓"  # multi-byte


def décorer(n=2, *, flag=False):
    def wrap(fn):
        @functools.wraps(fn)
        async def inner(*args, **kwargs):
            async with lock:
                résultat = await fn(*args, **kwargs)
            if (m := len(résultat)) > n and not flag:
                return résultat[:m - 1]
            return [x * 2 for x in résultat if x % 2 == 0]
        return inner
    return wrap


class Forme(Base, metaclass=Meta):
    """Docstring with code: a + b < c."""

    côtés: int = 4

    @décorer(n=3 + 1)
    def aire(self, échelle: float = 1.0, précision: int = 2) -> float:
        total = self.côtés * échelle \
            + 1
        f = f"{total + 1:>{self.côtés}} ✓ {'a' if total < 2 else 'b'}"
        key = lambda v, w=0: (v[0], -v[1] + w)
        match self.côtés:
            case 3:
                total -= 1
            case [a, b, *rest] if a < b:
                total += a
            case _:
                pass
        for i in range(len(f) - 1):
            total = total + i + 1  # trailing comment
            # comment at block end
        return total

	# (tab-indented code below)
def tabbed(x):
	if x < 0:
		return -x
	else:
		return x
	# comment at the end of a tab block


def semis(a, b): a += 1; return a - b
"#;

    #[test]
    fn tricky_code_is_handled() {
        let src = TRICKY.replace("\t# (tab-indented code below)\n", "");
        assert!(parses(&src), "fixture must parse");
        let muts = find_mutations(&src, &[]).expect("find_mutations");
        let mut ops: HashSet<&str> = HashSet::new();
        for m in &muts {
            check_mutation(&src, m);
            ops.insert(m.operator.as_str());
            // Nothing inside strings, f-strings, decorators or annotations.
            for e in &m.edits {
                let line_no = src[..e.start].matches('\n').count();
                let line = src.lines().nth(line_no).unwrap_or("");
                if !matches!(
                    m.operator.as_str(),
                    "remove_wrapper"
                        | "ctrl_invert_if"
                        | "ctrl_shuffle"
                        | "class_rm_funcs"
                        | "class_shuffle_funcs"
                        | "remove_cond"
                        | "remove_loop"
                        | "remove_assign"
                ) {
                    assert!(!line.trim_start().starts_with('@'), "{m:?} in decorator");
                    assert!(
                        !line.trim_start().starts_with("f = f\""),
                        "{m:?} in f-string"
                    );
                    assert!(!line.contains("Docstring"), "{m:?} in docstring");
                    assert!(!line.contains("GRÜßE"), "{m:?} in string");
                }
            }
        }
        for op in [
            "class_rm_base",
            "class_rm_funcs",
            "ctrl_invert_if",
            "ctrl_shuffle",
            "remove_assign",
            "remove_cond",
            "remove_loop",
            "remove_wrapper",
            "op_break_chains",
            "op_change_const",
            "op_change",
            "flip_operators",
            "off_by_one_range",
            "off_by_one_slice",
            "wrong_default_arg",
            "wrong_return_value",
            "drop_not",
            "boundary_condition",
        ] {
            assert!(ops.contains(op), "no {op} site in tricky code");
        }
        // Tab-indented if/else can be inverted.
        assert!(muts.iter().any(|m| {
            m.operator == "ctrl_invert_if"
                && apply(&src, &m.edits)
                    .expect("apply")
                    .contains("\tif x < 0:\n\t\treturn x\n\telse:\n\t\treturn -x\n")
        }));
        // The async with is unwrapped with the right indentation.
        assert!(muts.iter().any(|m| m.operator == "remove_wrapper"
            && apply(&src, &m.edits)
                .expect("apply")
                .contains("        async def inner(*args, **kwargs):\n            résultat = await fn(*args, **kwargs)\n")));
        // Scope names of nested functions and methods; decorator/default/body flags.
        let find = |operator: &str, needle: &str| {
            muts.iter()
                .find(|m| m.operator == operator && m.description.contains(needle))
                .unwrap_or_else(|| panic!("{operator} containing {needle:?}"))
        };
        for (operator, needle, scope, in_function_body) in [
            ("remove_wrapper", "", Some("décorer.wrap.inner"), true),
            ("wrong_default_arg", "précision", Some("Forme.aire"), false),
            ("wrong_default_arg", "`n`", Some("décorer"), false),
            ("wrong_default_arg", "`w`", None, true),
        ] {
            let m = find(operator, needle);
            if let Some(scope) = scope {
                assert_eq!(m.scope, scope);
            }
            assert_eq!(m.in_function_body, in_function_body, "{operator} {needle}");
        }
        // Semicolon-separated statements are never deleted line-wise.
        assert!(
            !muts
                .iter()
                .any(|m| m.operator == "remove_assign" && m.description.contains("a += 1"))
        );
    }
}
