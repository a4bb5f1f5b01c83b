//! Validation of candidates by re-parsing a small self-contained excerpt around their edits.

use tree_sitter::{Node, Parser};

use super::text::is_inline_ws;
use super::{Grammar, NodeKind, has_empty_block, parse_tree};
use crate::mutation::{Edit, apply, edit, edits_are_valid};

/// Statements longer than this are checked on the smallest expression around the edits.
const EXCERPT_LIMIT: usize = 1000;

/// What to re-parse to validate a candidate.
#[derive(Debug, Clone, Copy)]
pub(crate) enum ExcerptPlan<'t> {
    /// All edits lie inside `node`, whose nearest enclosing statement (or itself) is `statement`
    /// and nearest enclosing `elif`/`except`/`case` clause below `statement` is `clause`.
    Within {
        node: Node<'t>,
        statement: Option<Node<'t>>,
        clause: Option<Node<'t>>,
    },
    /// The edits rewrite the run of sibling statements `first..=last` of one block; `others`
    /// says whether the block has further statements (or is the module).
    Run {
        first: Node<'t>,
        last: Node<'t>,
        others: bool,
    },
}

/// Validates mutated sources by parsing a small self-contained excerpt around the edits.
///
/// Re-parsing a whole file per candidate is too slow (and tree-sitter-python's incremental
/// re-parse often degrades to a full parse), so each mutation is checked on an excerpt that
/// parses the same way in isolation: the mutated simple statement; the header of a compound
/// statement or of an `elif`/`except`/`case` clause (with `pass` as body); the smallest
/// expression around the edits when the statement is huge; or the run of sibling statements
/// touched by the edits, placed under an `if 1:` header when it is indented (with a `pass`
/// standing for the block's other statements when something is deleted, so that only a block
/// emptied for real is an error). Anything else falls back to a full parse of the mutated file.
pub(crate) struct Checker<'a> {
    grammar: &'static Grammar,
    parser: Parser,
    src: &'a str,
}

/// A stand-alone excerpt to re-parse instead of the whole mutated file.
enum Excerpt {
    /// `prefix`, then `source[start..end]` with the edits applied, then `suffix`.
    Region {
        start: usize,
        end: usize,
        prefix: &'static str,
        suffix: String,
    },
    /// A ready-made text (the skeleton of a statement swap).
    Text(String),
}

impl<'a> Checker<'a> {
    /// A checker of candidate edits of `src`, re-parsing with `parser`.
    pub(crate) fn new(grammar: &'static Grammar, parser: Parser, src: &'a str) -> Self {
        Checker {
            grammar,
            parser,
            src,
        }
    }

    /// True iff the edits apply, change the source and leave it parseable.
    pub(crate) fn ok(&mut self, edits: &[Edit], plan: &ExcerptPlan<'_>) -> bool {
        if edits.is_empty() || !edits_are_valid(self.src, edits) {
            return false;
        }
        if edits
            .iter()
            .all(|e| self.src.get(e.start..e.end) == Some(e.replacement.as_str()))
        {
            return false;
        }
        let raw_lo = edits.iter().map(|e| e.start).min().unwrap_or(0);
        let raw_hi = edits.iter().map(|e| e.end).max().unwrap_or(0);
        let excerpt = match *plan {
            ExcerptPlan::Within {
                node,
                statement,
                clause,
            } => self.within_excerpt(node, statement, clause),
            ExcerptPlan::Run {
                first,
                last,
                others,
            } => self.run_excerpt(first, last, others, edits),
        };
        let text = match excerpt {
            Some(Excerpt::Region {
                start,
                end,
                prefix,
                suffix,
            }) if start <= raw_lo && raw_hi <= end => {
                let local: Vec<Edit> = edits
                    .iter()
                    .map(|e| edit(e.start - start, e.end - start, e.replacement.as_str()))
                    .collect();
                let Some(region) = self.src.get(start..end) else {
                    return false;
                };
                let Ok(body) = apply(region, &local) else {
                    return false;
                };
                format!("{prefix}{body}{suffix}")
            }
            Some(Excerpt::Text(text)) => text,
            _ => match apply(self.src, edits) {
                Ok(all) => all,
                Err(_) => return false,
            },
        };
        let Some(tree) = parse_tree(&mut self.parser, &text) else {
            return false;
        };
        let root = tree.root_node();
        !root.has_error() && !has_empty_block(self.grammar, root)
    }

    /// The indentation before `byte` if only whitespace precedes it on its line.
    fn indent_of(&self, byte: usize) -> Option<&'a str> {
        let start = self.src.as_bytes()[..byte]
            .iter()
            .rposition(|b| *b == b'\n')
            .map_or(0, |i| i + 1);
        let prefix = self.src.get(start..byte)?;
        prefix.bytes().all(is_inline_ws).then_some(prefix)
    }

    /// The first suite (`block`) child of `n`.
    fn first_block<'t>(&self, n: Node<'t>) -> Option<Node<'t>> {
        let mut c = n.walk();
        n.children(&mut c)
            .find(|ch| self.grammar.kind(*ch) == NodeKind::Block)
    }

    /// The excerpt for edits inside `node`.
    fn within_excerpt(
        &self,
        node: Node,
        statement: Option<Node>,
        clause: Option<Node>,
    ) -> Option<Excerpt> {
        let region = |start: usize, end: usize, prefix: &'static str, suffix: &str| {
            if end - start > EXCERPT_LIMIT && self.grammar.is_expression(node) {
                Excerpt::Region {
                    start: node.start_byte(),
                    end: node.end_byte(),
                    prefix: "(",
                    suffix: ")".into(),
                }
            } else {
                Excerpt::Region {
                    start,
                    end,
                    prefix,
                    suffix: suffix.into(),
                }
            }
        };
        let statement = statement?;
        let Some(block) = self.first_block(statement) else {
            // A simple statement parses on its own, from its first byte.
            return Some(region(statement.start_byte(), statement.end_byte(), "", ""));
        };
        if node.end_byte() <= block.start_byte() {
            let body = if statement.kind() == "match_statement" {
                "\n case _: pass"
            } else {
                "pass"
            };
            return Some(region(statement.start_byte(), block.start_byte(), "", body));
        }
        let clause = clause?;
        let opener = match clause.kind() {
            "elif_clause" => "if 1: pass\n",
            "case_clause" => "match _:\n ",
            _ => "try: pass\n",
        };
        let b = self.first_block(clause)?;
        (node.end_byte() <= b.start_byte())
            .then(|| region(clause.start_byte(), b.start_byte(), opener, "pass"))
    }

    /// The excerpt for edits rewriting the statements `first..=last` of one block. A swap of
    /// two statements is checked on their headers only (their bodies move verbatim).
    fn run_excerpt(
        &self,
        first: Node,
        last: Node,
        others: bool,
        edits: &[Edit],
    ) -> Option<Excerpt> {
        let indent = self.indent_of(first.start_byte());
        let prefix = match indent {
            Some(i) if !i.is_empty() => "if 1:\n",
            _ => "",
        };
        let text = |n: Node| self.src.get(n.byte_range()).unwrap_or("");
        if let [ea, eb] = edits
            && first != last
            && (ea.start, ea.end, eb.start, eb.end)
                == (
                    first.start_byte(),
                    first.end_byte(),
                    last.start_byte(),
                    last.end_byte(),
                )
            && ea.replacement == text(last)
            && eb.replacement == text(first)
            && let Some(indent) = indent
            && self.indent_of(last.start_byte()) == Some(indent)
        {
            return Some(Excerpt::Text(format!(
                "{prefix}{indent}{}\n{indent}{}\n",
                self.abbreviate(last),
                self.abbreviate(first)
            )));
        }
        let deletes = edits.iter().any(|e| e.replacement.trim().is_empty());
        let suffix = if deletes && others {
            format!("\n{}pass\n", indent.unwrap_or(""))
        } else {
            String::new()
        };
        let raw_lo = edits.iter().map(|e| e.start).min()?;
        let raw_hi = edits.iter().map(|e| e.end).max()?;
        let start = first.start_byte() - indent.map_or(0, str::len);
        Some(Excerpt::Region {
            start: start.min(raw_lo),
            end: last.end_byte().max(raw_hi),
            prefix,
            suffix,
        })
    }

    /// A statement with every suite of a compound statement (its own and its clauses')
    /// replaced by `pass`.
    fn abbreviate(&self, s: Node) -> String {
        let def = if self.grammar.kind(s) == NodeKind::DecoratedDefinition {
            s.child_by_field_name("definition")
        } else {
            Some(s)
        };
        let mut suites = Vec::new();
        if let Some(def) = def {
            let is_match = def.kind() == "match_statement";
            let mut c = def.walk();
            for child in def.children(&mut c) {
                if self.grammar.kind(child) == NodeKind::Block {
                    if is_match {
                        let mut cc = child.walk();
                        suites.extend(
                            child
                                .named_children(&mut cc)
                                .filter_map(|case| self.first_block(case)),
                        );
                    } else {
                        suites.push(child);
                    }
                } else if matches!(
                    child.kind(),
                    "elif_clause"
                        | "else_clause"
                        | "except_clause"
                        | "except_group_clause"
                        | "finally_clause"
                ) {
                    suites.extend(self.first_block(child));
                }
            }
        }
        let edits: Vec<Edit> = suites
            .iter()
            .map(|b| {
                edit(
                    b.start_byte() - s.start_byte(),
                    b.end_byte() - s.start_byte(),
                    "pass",
                )
            })
            .collect();
        let text = self.src.get(s.byte_range()).unwrap_or("");
        apply(text, &edits).unwrap_or_else(|_| text.to_string())
    }
}

#[cfg(test)]
mod tests {
    use crate::find::find_mutations;
    use crate::mutation::apply;
    use crate::test_support::check_mutation;

    #[test]
    fn validation_handles_match_headers_patterns_and_continuations() {
        let src = "def f(x):\n    match 0:\n        case -0:\n            return g(1,\\\n                     2)\n\ndef h():\n    try:\n        a()\n    except KeyError:\n        pass\n    b()\n";
        let muts = find_mutations(src, &[]).expect("find_mutations");
        for m in &muts {
            check_mutation(src, m);
        }
        let outs: Vec<String> = muts
            .iter()
            .map(|m| apply(src, &m.edits).expect("apply"))
            .collect();
        // The match subject is mutated (its excerpt needs a `case`), `case -0` never becomes
        // `case --1`, and arguments split by a backslash continuation are swapped.
        assert!(outs.iter().any(|o| o.contains("    match 1:\n")));
        assert!(!outs.iter().any(|o| o.contains("--1")));
        assert!(
            outs.iter()
                .any(|o| o.contains("g(2,\\\n                     1)"))
        );
        // A `try` statement is swapped with its neighbour (checked on its skeleton).
        assert!(
            outs.iter()
                .any(|o| o.contains("    b()\n    try:\n        a()\n"))
        );
    }
}
