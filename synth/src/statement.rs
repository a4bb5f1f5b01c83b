//! Problem statements without a language model, from what the failing tests show.
//!
//! The hint level is a difficulty knob; each level adds to the one below:
//! - 0: which module is wrong, nothing more;
//! - 1: the names of the failing tests;
//! - 2: their assertion and error messages (pytest's `E ` lines);
//! - 3: the enclosing function or class of the bug and traceback excerpts.
//!
//! A statement never contains the fix: any message line that holds a line of the clean code
//! the bug removed is dropped.

use std::collections::BTreeSet;

use frognano_core::TestRecord;

/// Highest hint level.
pub const MAX_HINT_LEVEL: u8 = frognano_core::Difficulty::MAX_HINT_LEVEL;

const MAX_TESTS_NAMED: usize = 12;
const MAX_MESSAGES: usize = 5;
const MAX_MESSAGE_LINES: usize = 6;
const MAX_TRACEBACK_CHARS: usize = 1200;

/// What a statement is written from.
#[derive(Debug, Clone)]
pub struct StatementInput<'a> {
    /// Dotted module names (or paths) the bug lives in.
    pub modules: Vec<String>,
    /// Qualified names of the functions/classes holding the bug ("" at module level).
    pub scopes: Vec<String>,
    /// The failing tests with their failure messages, as the buggy run reported them.
    pub failing: Vec<&'a TestRecord>,
    /// Lines of clean code the bug removed or changed (never to be shown).
    pub secret_lines: BTreeSet<String>,
}

/// Writes the statement for `input` at `level` (clamped to [`MAX_HINT_LEVEL`]).
pub fn write_statement(input: &StatementInput<'_>, level: u8) -> String {
    let level = level.min(MAX_HINT_LEVEL);
    let mut out = String::new();
    let modules = input
        .modules
        .iter()
        .map(|m| format!("`{m}`"))
        .collect::<Vec<_>>()
        .join(", ");
    if input.modules.len() > 1 {
        out.push_str(&format!(
            "Something is wrong in modules {modules}: their behaviour no longer matches what the \
             project's test suite expects. Find the bugs and fix them without changing the tests.\n"
        ));
    } else {
        out.push_str(&format!(
            "Something is wrong in module {modules}: its behaviour no longer matches what the \
             project's test suite expects. Find the bug and fix it without changing the tests.\n"
        ));
    }
    if level >= 3 {
        let scopes: Vec<String> = input
            .scopes
            .iter()
            .filter(|s| !s.is_empty())
            .map(|s| format!("`{s}`"))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        if !scopes.is_empty() {
            out.push_str(&format!("The problem is in {}.\n", scopes.join(", ")));
        }
    }
    if level >= 1 && !input.failing.is_empty() {
        out.push_str(&format!(
            "\n{} failing test{}:\n",
            input.failing.len(),
            if input.failing.len() == 1 { "" } else { "s" }
        ));
        for test in input.failing.iter().take(MAX_TESTS_NAMED) {
            out.push_str(&format!("- {}\n", test.id));
        }
        if input.failing.len() > MAX_TESTS_NAMED {
            out.push_str(&format!(
                "- ... and {} more\n",
                input.failing.len() - MAX_TESTS_NAMED
            ));
        }
    }
    if level >= 2 {
        // Tests that fail the same way are shown once, with how many share the message.
        let mut groups: Vec<(String, Vec<&str>)> = Vec::new();
        for test in &input.failing {
            let Some(message) = &test.message else {
                continue;
            };
            let body = if level >= 3 {
                traceback_excerpt(message, &input.secret_lines)
            } else {
                error_lines(message, &input.secret_lines)
            };
            if body.trim().is_empty() {
                continue;
            }
            match groups.iter_mut().find(|(b, _)| *b == body) {
                Some((_, ids)) => ids.push(&test.id),
                None => groups.push((body, vec![&test.id])),
            }
        }
        for (body, ids) in groups.iter().take(MAX_MESSAGES) {
            let also = match ids.len() {
                1 => String::new(),
                2 => " (and 1 more test)".to_string(),
                n => format!(" (and {} more tests)", n - 1),
            };
            out.push_str(&format!(
                "\n{}{also}:\n```\n{}\n```\n",
                ids[0],
                body.trim_end()
            ));
        }
    }
    out
}

/// Whether `line` reveals a secret line (a line of the clean code the bug changed).
fn reveals(line: &str, secrets: &BTreeSet<String>) -> bool {
    let squeezed: String = line.split_whitespace().collect();
    secrets.iter().any(|secret| {
        let secret: String = secret.split_whitespace().collect();
        secret.len() >= 3 && squeezed.contains(&secret)
    })
}

/// pytest's `E   ...` lines (the assertion with its introspection), or else the last line.
fn error_lines(message: &str, secrets: &BTreeSet<String>) -> String {
    let lines: Vec<&str> = message
        .lines()
        .filter(|l| l.starts_with("E ") || *l == "E")
        .filter(|l| !reveals(l, secrets))
        .take(MAX_MESSAGE_LINES)
        .collect();
    if !lines.is_empty() {
        return lines.join("\n");
    }
    message
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty() && !reveals(l, secrets))
        .unwrap_or("")
        .to_string()
}

/// The tail of the failure report, without lines that would reveal the fix.
fn traceback_excerpt(message: &str, secrets: &BTreeSet<String>) -> String {
    let kept: Vec<&str> = message.lines().filter(|l| !reveals(l, secrets)).collect();
    let mut text = kept.join("\n");
    if text.len() > MAX_TRACEBACK_CHARS {
        let mut cut = text.len() - MAX_TRACEBACK_CHARS;
        while !text.is_char_boundary(cut) {
            cut += 1;
        }
        text = format!("...\n{}", &text[cut..]);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use frognano_core::TestOutcome;

    fn failing(id: &str, message: &str) -> TestRecord {
        TestRecord {
            id: id.into(),
            outcome: TestOutcome::Failed,
            duration_s: 0.0,
            message: Some(message.into()),
        }
    }

    #[test]
    fn levels_add_information_and_never_the_fix() {
        let message = "    def test_clamp():\n>       assert clamp(5, 0, 3) == 3\nE       assert 4 == 3\nE        +  where 4 = clamp(5, 0, 3)\n\ntextkit/num.py:7: in clamp\n    return min(hi + 1, value)\n    return min(hi, value)\nE   AssertionError";
        let test = failing("tests/test_num.py::test_clamp", message);
        let input = StatementInput {
            modules: vec!["textkit.num".into()],
            scopes: vec!["clamp".into()],
            failing: vec![&test],
            secret_lines: BTreeSet::from(["return min(hi, value)".to_string()]),
        };
        let texts: Vec<String> = (0..=3).map(|l| write_statement(&input, l)).collect();
        assert!(texts[0].contains("`textkit.num`"));
        assert!(!texts[0].contains("test_clamp"));
        assert!(texts[1].contains("tests/test_num.py::test_clamp"));
        assert!(!texts[1].contains("assert 4 == 3"));
        assert!(texts[2].contains("E       assert 4 == 3"));
        assert!(!texts[2].contains("`clamp`"));
        assert!(texts[3].contains("`clamp`"));
        assert!(texts[3].contains("return min(hi + 1, value)"));
        for text in &texts {
            assert!(!text.contains("return min(hi, value)"), "{text}");
        }
        for pair in texts.windows(2) {
            assert!(pair[1].len() > pair[0].len());
        }
    }

    #[test]
    fn many_failures_are_summarised() {
        let tests: Vec<TestRecord> = (0..20)
            .map(|i| failing(&format!("t.py::test_{i}"), &format!("E   boom {}", i % 7)))
            .collect();
        let input = StatementInput {
            modules: vec!["a".into(), "b".into()],
            scopes: vec![],
            failing: tests.iter().collect(),
            secret_lines: BTreeSet::new(),
        };
        let text = write_statement(&input, 2);
        assert!(text.contains("modules `a`, `b`"));
        assert!(text.contains("20 failing tests"));
        assert!(text.contains("... and 8 more"));
        assert_eq!(text.matches("E   boom").count(), MAX_MESSAGES);
        // 20 failures with 7 distinct messages: shown once each, with the count of the rest.
        assert!(text.contains("t.py::test_0 (and 2 more tests):"));
    }
}
