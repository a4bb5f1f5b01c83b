//! Problem statements without a language model, from what the failing tests show.
//!
//! The hint level is a difficulty knob; each level adds to the one below:
//! - 0: which module is wrong, nothing more;
//! - 1: the names of the failing tests;
//! - 2: their assertion and error messages (pytest's `E ` lines);
//! - 3: the enclosing function or class of the bug and traceback excerpts;
//! - 4: the file of the bug and the buggy code itself (its enclosing function), so that a small
//!   model can answer with the fixed function;
//! - 5: the buggy line(s) with their line number, and what is wrong there in words (the
//!   operator's symptom, "an operator on this line is wrong"), still not the fix, at the top of
//!   the statement;
//! - 6: the fix itself: the lines to replace and what to replace them with. The bottom rung of
//!   a reverse curriculum: a policy that cannot yet find a bug can still learn to make an edit
//!   that the tests accept, and the frontier moves up from there.
//!
//! Levels 5 and 6 are for small models: they show the line instead of the whole function
//! (level 4) and the assertion lines instead of the tracebacks (level 3), so that the
//! statement stays short; everything else of the levels below stays.
//!
//! Below level 6 a statement never contains the fix: any message line that holds a line of the
//! clean code the bug removed is dropped.

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
    /// The buggy code around each bug, shown at level 4.
    pub excerpts: Vec<CodeExcerpt>,
    /// Where each changed file differs from the clean one, shown at levels 5 and 6.
    pub fixes: Vec<FixHunk>,
}

/// The lines a bug changed in one file: the buggy ones (with where they start) and the clean
/// ones that fix them. A bug that only deleted lines gets a line of unchanged context on both
/// sides, so that the buggy side is never empty (an edit needs something to find).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FixHunk {
    /// Repository path of the file.
    pub path: String,
    /// 1-based line of the buggy file where `buggy` starts.
    pub line: usize,
    /// The buggy lines.
    pub buggy: String,
    /// The clean lines that replace them.
    pub clean: String,
    /// What is wrong there, in words (the operators' symptoms).
    pub symptom: String,
}

/// The hunk between `clean` and `buggy` texts of `path`: the lines between their common head
/// and common tail. `None` when the texts have the same lines.
pub fn fix_hunk(path: &str, clean: &str, buggy: &str, symptom: &str) -> Option<FixHunk> {
    let clean: Vec<&str> = clean.lines().collect();
    let buggy: Vec<&str> = buggy.lines().collect();
    let (head, tail) = frognano_core::lines::common_ends(&clean, &buggy);
    let (mut first, clean_end, buggy_end) = (head, clean.len() - tail, buggy.len() - tail);
    if first == clean_end && first == buggy_end {
        return None;
    }
    let (mut clean_end, mut buggy_end) = (clean_end, buggy_end);
    // Lines before the change join the hunk while its buggy lines also occur elsewhere in the
    // file (or its clean lines already do), indentation aside, so that the hunk says where it
    // goes.
    let count = |block: &[&str]| {
        if block.is_empty() {
            0
        } else {
            buggy
                .windows(block.len())
                .filter(|w| w.iter().zip(block).all(|(a, b)| a.trim() == b.trim()))
                .count()
        }
    };
    let mut widened = 0;
    while first > 0
        && first < buggy_end
        && widened < 3
        && (count(&buggy[first..buggy_end]) > 1 || count(&clean[first..clean_end]) > 0)
    {
        first -= 1;
        widened += 1;
    }
    if first == buggy_end {
        // Only deletions: anchor on the line before (or, at the top, the line after).
        if first > 0 {
            first -= 1;
        } else {
            clean_end = (clean_end + 1).min(clean.len());
            buggy_end = (buggy_end + 1).min(buggy.len());
        }
    }
    Some(FixHunk {
        path: path.to_string(),
        line: first + 1,
        buggy: buggy[first..buggy_end].join("\n"),
        clean: clean[first..clean_end].join("\n"),
        symptom: symptom.to_string(),
    })
}

/// Buggy code shown in a statement: a file's lines `first..=last`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeExcerpt {
    /// Repository path of the file.
    pub path: String,
    /// 1-based first line.
    pub first: usize,
    /// 1-based last line.
    pub last: usize,
    /// The lines.
    pub code: String,
}

/// Longest excerpt shown, in lines; a longer function is cut to a window around the bug.
const MAX_EXCERPT_LINES: usize = 60;
/// Lines of context either side of a bug outside any function, or in a function too long to
/// show whole.
const EXCERPT_CONTEXT: usize = 8;

fn indent_of(line: &str) -> usize {
    line.chars().take_while(|c| c.is_whitespace()).count()
}

/// The name a `def`/`class` line defines.
fn defined_name(line: &str) -> Option<&str> {
    let rest = line.trim_start();
    let rest = rest.strip_prefix("async ").map_or(rest, str::trim_start);
    let rest = rest
        .strip_prefix("def ")
        .or_else(|| rest.strip_prefix("class "))?
        .trim_start();
    let end = rest
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    (end > 0).then(|| &rest[..end])
}

/// The code around the bug at 1-based lines `start..=end` of `text`: the innermost function or
/// class of `scope` (a dotted qualified name) holding it, else a few lines either side.
pub fn excerpt_around(
    path: &str,
    text: &str,
    scope: &str,
    start: usize,
    end: usize,
) -> CodeExcerpt {
    let lines: Vec<&str> = text.lines().collect();
    let total = lines.len().max(1);
    let start = start.clamp(1, total);
    let end = end.clamp(start, total);
    let window = |first: usize, last: usize| CodeExcerpt {
        path: path.to_string(),
        first,
        last,
        code: lines
            .get(first - 1..last.min(lines.len()))
            .unwrap_or_default()
            .join("\n"),
    };
    let around = || {
        window(
            start.saturating_sub(EXCERPT_CONTEXT).max(1),
            (end + EXCERPT_CONTEXT).min(total),
        )
    };
    let Some(name) = scope.rsplit('.').next().filter(|n| !n.is_empty()) else {
        return around();
    };
    // The nearest definition of `name` at or above the bug.
    let Some(def) = (0..start)
        .rev()
        .find(|&i| lines.get(i).and_then(|l| defined_name(l)) == Some(name))
    else {
        return around();
    };
    let indent = indent_of(lines[def]);
    let mut last = def;
    for (i, line) in lines.iter().enumerate().skip(def + 1) {
        if line.trim().is_empty() {
            continue;
        }
        if indent_of(line) <= indent && !line.trim_start().starts_with([')', ']', '}']) {
            break;
        }
        last = i;
    }
    let (first, last) = (def + 1, last + 1);
    if last < end || last + 1 - first > MAX_EXCERPT_LINES {
        return around();
    }
    window(first, last)
}

/// Writes the statement for `input` at `level` (clamped to [`MAX_HINT_LEVEL`]).
pub fn write_statement(input: &StatementInput<'_>, level: u8) -> String {
    let level = level.min(MAX_HINT_LEVEL);
    let mut out = String::new();
    // Levels 5 and 6 open with the line (and the fix): what a small model needs first.
    if level >= 5 {
        for fix in &input.fixes {
            let lines = fix.buggy.lines().count();
            let at = if lines > 1 {
                format!("lines {}-{}", fix.line, fix.line + lines - 1)
            } else {
                format!("line {}", fix.line)
            };
            out.push_str(&format!(
                "The bug is at {at} of `{}`: {}.\n```python\n{}\n```\n",
                fix.path,
                fix.symptom,
                fix.buggy.trim_end()
            ));
            if level >= 6 {
                out.push_str(&format!(
                    "The fix: replace those lines with\n```python\n{}\n```\n",
                    fix.clean.trim_end()
                ));
            }
        }
    }
    if level >= 5 && !input.fixes.is_empty() {
        out.push('\n');
    }
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
    // Levels 5 and 6 show the line itself instead of the whole function and the tracebacks:
    // short statements for the small models these levels are for.
    if level == 4 {
        for excerpt in &input.excerpts {
            out.push_str(&format!(
                "The bug is in file `{}`, lines {}-{}:\n```python\n{}\n```\n",
                excerpt.path,
                excerpt.first,
                excerpt.last,
                excerpt.code.trim_end()
            ));
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
            let body = if (3..=4).contains(&level) {
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
            platform: None,
        }
    }

    /// A statement's input for the clamp bug (`min(hi, value)` made `min(hi + 1, value)`) in
    /// `scope` of `module`, failing `test`; no excerpts or fixes.
    fn clamp_input<'a>(module: &str, scope: &str, test: &'a TestRecord) -> StatementInput<'a> {
        StatementInput {
            modules: vec![module.into()],
            scopes: vec![scope.into()],
            failing: vec![test],
            secret_lines: BTreeSet::from(["return min(hi, value)".to_string()]),
            excerpts: Vec::new(),
            fixes: Vec::new(),
        }
    }

    #[test]
    fn levels_add_information_and_never_the_fix() {
        let message = "    def test_clamp():\n>       assert clamp(5, 0, 3) == 3\nE       assert 4 == 3\nE        +  where 4 = clamp(5, 0, 3)\n\ntextkit/num.py:7: in clamp\n    return min(hi + 1, value)\n    return min(hi, value)\nE   AssertionError";
        let test = failing("tests/test_num.py::test_clamp", message);
        let input = clamp_input("textkit.num", "clamp", &test);
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
            excerpts: Vec::new(),
            fixes: Vec::new(),
        };
        let text = write_statement(&input, 2);
        assert!(text.contains("modules `a`, `b`"));
        assert!(text.contains("20 failing tests"));
        assert!(text.contains("... and 8 more"));
        assert_eq!(text.matches("E   boom").count(), MAX_MESSAGES);
        // 20 failures with 7 distinct messages: shown once each, with the count of the rest.
        assert!(text.contains("t.py::test_0 (and 2 more tests):"));
    }

    #[test]
    fn level_four_shows_the_file_and_the_buggy_function() {
        let source = "import math\n\n\nclass Box:\n    def clamp(self, value, lo, hi):\n        if value < lo:\n            return lo\n        return min(hi + 1, value)\n\n    def other(self):\n        return 1\n";
        let excerpt = excerpt_around("textkit/num.py", source, "Box.clamp", 8, 8);
        assert_eq!((excerpt.first, excerpt.last), (5, 8));
        assert!(
            excerpt
                .code
                .starts_with("    def clamp(self, value, lo, hi):")
        );
        assert!(excerpt.code.ends_with("return min(hi + 1, value)"));
        // Module-level code (or an unknown scope) gets a window around the bug.
        let window = excerpt_around("textkit/num.py", source, "", 1, 1);
        assert_eq!((window.first, window.last), (1, 9));
        let missing = excerpt_around("textkit/num.py", source, "nowhere", 8, 8);
        assert_eq!(missing.first, 1);
        let test = failing("tests/test_num.py::test_clamp", "E       assert 4 == 3");
        let input = StatementInput {
            excerpts: vec![excerpt],
            ..clamp_input("textkit.num", "Box.clamp", &test)
        };
        let three = write_statement(&input, 3);
        let four = write_statement(&input, 4);
        assert!(!three.contains("textkit/num.py"));
        assert!(four.contains("The bug is in file `textkit/num.py`, lines 5-8:"));
        assert!(four.contains("```python\n    def clamp(self, value, lo, hi):"));
        assert!(four.contains(&three[three.find("1 failing test").unwrap_or(0)..]));
        assert!(!four.contains("return min(hi, value)"));
        assert_eq!(
            write_statement(&input, 9),
            write_statement(&input, MAX_HINT_LEVEL)
        );
    }

    #[test]
    fn levels_five_and_six_name_the_line_then_the_fix() {
        let clean = "def clamp(value, lo, hi):\n    if value < lo:\n        return lo\n    return min(hi, value)\n";
        let buggy = "def clamp(value, lo, hi):\n    if value < lo:\n        return lo\n    return min(hi + 1, value)\n";
        let fix = fix_hunk(
            "num.py",
            clean,
            buggy,
            "a number on this line is off by one",
        )
        .expect("a hunk");
        assert_eq!(fix.line, 4);
        assert_eq!(fix.buggy, "    return min(hi + 1, value)");
        assert_eq!(fix.clean, "    return min(hi, value)");
        assert_eq!(fix_hunk("num.py", clean, clean, "x"), None);
        // A deleted line is anchored on the line before it, on both sides.
        let deleted = "def clamp(value, lo, hi):\n    if value < lo:\n    return min(hi, value)\n";
        let anchored =
            fix_hunk("num.py", clean, deleted, "a statement is missing here").expect("a hunk");
        assert_eq!(
            (anchored.line, anchored.buggy.as_str()),
            (2, "    if value < lo:")
        );
        assert_eq!(anchored.clean, "    if value < lo:\n        return lo");
        // A fixed line that also occurs elsewhere comes with the line before it.
        let twice = "def f(a):\n    if a:\n        g(a)\n    h(a)\n    g(a)\n";
        let bug = "def f(a):\n    if a:\n        h(a)\n    h(a)\n    g(a)\n";
        let widened = fix_hunk("a.py", twice, bug, "wrong call").expect("a hunk");
        assert_eq!(
            (widened.line, widened.buggy.as_str()),
            (2, "    if a:\n        h(a)")
        );
        assert_eq!(widened.clean, "    if a:\n        g(a)");
        // ... and on the line after it when the first line went.
        let top = fix_hunk("a.py", "x = 1\ny = 2\n", "y = 2\n", "missing").expect("a hunk");
        assert_eq!(
            (top.line, top.buggy.as_str(), top.clean.as_str()),
            (1, "y = 2", "x = 1\ny = 2")
        );

        let test = failing("tests/test_num.py::test_clamp", "E       assert 4 == 3");
        let input = StatementInput {
            fixes: vec![fix],
            ..clamp_input("num", "clamp", &test)
        };
        let four = write_statement(&input, 4);
        let five = write_statement(&input, 5);
        let six = write_statement(&input, 6);
        assert!(!four.contains("line 4"));
        assert!(
            five.contains("The bug is at line 4 of `num.py`: a number on this line is off by one.")
        );
        assert!(five.contains("```python\n    return min(hi + 1, value)\n```"));
        assert!(!five.contains("return min(hi, value)"), "{five}");
        assert!(five.starts_with("The bug is at line 4"), "{five}");
        // Then the module, the scope, the failing tests and their assertion lines.
        let rest = &five[five.find("Something is wrong").expect("the module")..];
        assert!(six.ends_with(rest));
        assert!(rest.contains("`clamp`") && rest.contains("E       assert 4 == 3"));
        assert!(six.contains(
            "The fix: replace those lines with\n```python\n    return min(hi, value)\n```"
        ));
    }
}
