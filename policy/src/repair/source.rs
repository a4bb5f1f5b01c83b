//! Reading Python source and failure text: enclosing scopes, identifiers, number literals,
//! test files, and the modules a problem statement names.

use std::collections::BTreeSet;
use std::sync::OnceLock;

use regex::Regex;

/// True for files of the test suite (never repaired, and not evidence of where the bug is).
pub(super) fn is_test_file(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    path.starts_with("tests/")
        || path.contains("/tests/")
        || path.starts_with("test/")
        || path.contains("/test/")
        || name.starts_with("test_")
        || name.ends_with("_test.py")
        || name == "conftest.py"
}

/// Dotted module names in backticks in the problem statement (`pkg.mod`).
pub(super) fn statement_modules(statement: &str) -> Vec<String> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = RE.get_or_init(|| {
        Regex::new(r"`([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)`")
            .unwrap_or_else(|e| panic!("{e}"))
    });
    let mut out = Vec::new();
    for c in re.captures_iter(statement) {
        let module = c[1].to_string();
        if !out.contains(&module) {
            out.push(module);
        }
    }
    out
}

/// Identifiers of two characters or more in `text`.
pub(super) fn identifiers(text: &str) -> BTreeSet<String> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let re =
        RE.get_or_init(|| Regex::new(r"[A-Za-z_][A-Za-z0-9_]*").unwrap_or_else(|e| panic!("{e}")));
    re.find_iter(text)
        .map(|m| m.as_str().to_string())
        .filter(|w| w.len() > 1)
        .collect()
}

/// Integer literals (whole words of digits) in `text`.
pub(super) fn literals(text: &str) -> BTreeSet<String> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = RE.get_or_init(|| Regex::new(r"\b\d+\b").unwrap_or_else(|e| panic!("{e}")));
    re.find_iter(text).map(|m| m.as_str().to_string()).collect()
}

/// The dotted scope (`Class.method`) of the innermost def/class whose body holds line `line`,
/// by indentation.
pub(super) fn scope_at(text: &str, line: usize) -> Option<String> {
    let lines: Vec<&str> = text.lines().collect();
    let target = lines.get(line.checked_sub(1)?)?;
    let mut indent = target.len() - target.trim_start().len();
    let mut names = Vec::new();
    for l in lines[..line - 1].iter().rev() {
        let trimmed = l.trim_start();
        if trimmed.is_empty() {
            continue;
        }
        let depth = l.len() - trimmed.len();
        if depth < indent {
            let rest = trimmed
                .strip_prefix("def ")
                .or_else(|| trimmed.strip_prefix("async def "))
                .or_else(|| trimmed.strip_prefix("class "));
            if let Some(rest) = rest {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                names.push(name);
            }
            indent = depth;
            if depth == 0 {
                break;
            }
        }
    }
    if names.is_empty() {
        return None;
    }
    names.reverse();
    Some(names.join("."))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_follow_indentation() {
        let text =
            "class A:\n    def f(self):\n        x = 1\n\n        return x\n\ndef g():\n    pass\n";
        assert_eq!(scope_at(text, 5).as_deref(), Some("A.f"));
        assert_eq!(scope_at(text, 8).as_deref(), Some("g"));
        assert_eq!(scope_at(text, 1), None);
    }

    #[test]
    fn names_literals_and_modules_are_found() {
        assert!(is_test_file("tests/test_m.py") && is_test_file("pkg/conftest.py"));
        assert!(!is_test_file("pkg/m.py"));
        assert_eq!(
            statement_modules("In `pkg.m` and `pkg.m`, not `x y`."),
            vec!["pkg.m".to_string()]
        );
        let names = identifiers("assert clamp(5, 0, 3) == 3 x");
        assert!(names.contains("clamp") && !names.contains("x"));
        assert_eq!(
            literals("a1 = 12 + 3"),
            ["12", "3"].map(String::from).into()
        );
    }
}
