//! A small evaluator of PEP 508 environment markers, for the sandbox's targets.
//!
//! pip evaluates markers itself when it fetches the layer; this only decides which detected
//! requirements clearly cannot apply to the WASI interpreter (`python_version < "3"`,
//! `sys_platform == "win32"`, `platform_python_implementation == "PyPy"`), so that they are
//! left out with a reason instead of failing a download. Anything it does not understand
//! counts as "may apply".

/// Python versions of the sandbox's images (a marker must exclude all of them).
const TARGET_VERSIONS: &[(u32, u32)] = &[(3, 12), (3, 15)];

/// Splits `requirement ; marker` into its two parts (marker trimmed, `None` without one).
pub fn split_marker(requirement: &str) -> (&str, Option<&str>) {
    match requirement.split_once(';') {
        Some((req, marker)) if !marker.trim().is_empty() => (req.trim(), Some(marker.trim())),
        Some((req, _)) => (req.trim(), None),
        None => (requirement.trim(), None),
    }
}

/// True when the marker is false for every target interpreter (so the requirement never
/// applies in the sandbox).
pub fn excludes_all_targets(marker: &str) -> bool {
    let Some(tokens) = tokenize(marker) else {
        return false;
    };
    TARGET_VERSIONS.iter().all(|&version| {
        let mut parser = Parser {
            tokens: &tokens,
            pos: 0,
            version,
        };
        match parser.or() {
            Some(value) if parser.pos == tokens.len() => value == Some(false),
            _ => false,
        }
    })
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    Str(String),
    Op(String),
    Open,
    Close,
}

fn tokenize(text: &str) -> Option<Vec<Token>> {
    let chars: Vec<char> = text.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '(' {
            tokens.push(Token::Open);
            i += 1;
        } else if c == ')' {
            tokens.push(Token::Close);
            i += 1;
        } else if c == '"' || c == '\'' {
            let end = chars[i + 1..].iter().position(|&x| x == c)? + i + 1;
            tokens.push(Token::Str(chars[i + 1..end].iter().collect()));
            i = end + 1;
        } else if "<>=!~".contains(c) {
            let mut op = String::from(c);
            i += 1;
            while i < chars.len() && "<>=!~".contains(chars[i]) {
                op.push(chars[i]);
                i += 1;
            }
            tokens.push(Token::Op(op));
        } else if c.is_ascii_alphanumeric() || c == '_' || c == '.' {
            let start = i;
            while i < chars.len()
                && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == '.')
            {
                i += 1;
            }
            tokens.push(Token::Ident(chars[start..i].iter().collect()));
        } else {
            return None;
        }
    }
    Some(tokens)
}

/// Three-valued: `Some(true/false)` when known for the target, `None` when unknown. The
/// outer `Option` is a parse failure.
type Value = Option<bool>;

struct Parser<'a> {
    tokens: &'a [Token],
    pos: usize,
    version: (u32, u32),
}

impl Parser<'_> {
    fn peek_ident(&self, word: &str) -> bool {
        matches!(self.tokens.get(self.pos), Some(Token::Ident(w)) if w == word)
    }

    fn or(&mut self) -> Option<Value> {
        self.chain("or", true, Self::and)
    }

    fn and(&mut self) -> Option<Value> {
        self.chain("and", false, Self::atom)
    }

    /// Operands joined by `word`, in three-valued logic: one operand that is `decisive` (true
    /// for `or`, false for `and`) decides the whole; all known and none decisive give the
    /// opposite; otherwise it is unknown.
    fn chain(
        &mut self,
        word: &str,
        decisive: bool,
        operand: fn(&mut Self) -> Option<Value>,
    ) -> Option<Value> {
        let mut value = operand(self)?;
        while self.peek_ident(word) {
            self.pos += 1;
            let right = operand(self)?;
            value = if value == Some(decisive) || right == Some(decisive) {
                Some(decisive)
            } else if value.is_some() && right.is_some() {
                Some(!decisive)
            } else {
                None
            };
        }
        Some(value)
    }

    fn atom(&mut self) -> Option<Value> {
        if self.tokens.get(self.pos) == Some(&Token::Open) {
            self.pos += 1;
            let value = self.or()?;
            if self.tokens.get(self.pos) != Some(&Token::Close) {
                return None;
            }
            self.pos += 1;
            return Some(value);
        }
        let left = self.tokens.get(self.pos)?.clone();
        self.pos += 1;
        let op = match self.tokens.get(self.pos)? {
            Token::Op(op) => {
                self.pos += 1;
                op.clone()
            }
            Token::Ident(w) if w == "in" => {
                self.pos += 1;
                "in".to_string()
            }
            Token::Ident(w) if w == "not" => {
                self.pos += 1;
                if !self.peek_ident("in") {
                    return None;
                }
                self.pos += 1;
                "not in".to_string()
            }
            _ => return None,
        };
        let right = self.tokens.get(self.pos)?.clone();
        self.pos += 1;
        Some(self.compare(&left, &op, &right))
    }

    fn resolve(&self, token: &Token) -> Option<(String, bool)> {
        match token {
            Token::Str(s) => Some((s.clone(), false)),
            Token::Ident(name) => {
                let value = match name.as_str() {
                    "python_version" => format!("{}.{}", self.version.0, self.version.1),
                    "python_full_version" => format!("{}.{}.0", self.version.0, self.version.1),
                    "sys_platform" => "wasi".into(),
                    "os_name" => "posix".into(),
                    "platform_system" => String::new(),
                    "platform_python_implementation" => "CPython".into(),
                    "implementation_name" => "cpython".into(),
                    _ => return None,
                };
                Some((value, name.contains("version")))
            }
            _ => None,
        }
    }

    fn compare(&self, left: &Token, op: &str, right: &Token) -> Value {
        let (l, l_version) = self.resolve(left)?;
        let (r, r_version) = self.resolve(right)?;
        if op == "in" {
            return Some(r.contains(&l));
        }
        if op == "not in" {
            return Some(!r.contains(&l));
        }
        if l_version || r_version {
            let (a, b) = (version_key(&l)?, version_key(&r)?);
            if op == "==" && r.ends_with(".*") {
                return Some(a.starts_with(&b));
            }
            if op == "!=" && r.ends_with(".*") {
                return Some(!a.starts_with(&b));
            }
            let ordering = compare_versions(&a, &b);
            return match op {
                "<" => Some(ordering.is_lt()),
                "<=" => Some(ordering.is_le()),
                ">" => Some(ordering.is_gt()),
                ">=" => Some(ordering.is_ge()),
                "==" | "===" => Some(ordering.is_eq()),
                "!=" => Some(ordering.is_ne()),
                "~=" => None,
                _ => None,
            };
        }
        match op {
            "==" | "===" => Some(l == r),
            "!=" => Some(l != r),
            _ => None,
        }
    }
}

fn version_key(text: &str) -> Option<Vec<u32>> {
    text.trim_end_matches(".*")
        .split('.')
        .map(|part| part.parse().ok())
        .collect()
}

fn compare_versions(a: &[u32], b: &[u32]) -> std::cmp::Ordering {
    let len = a.len().max(b.len());
    let pad = |v: &[u32], i: usize| v.get(i).copied().unwrap_or(0);
    (0..len)
        .map(|i| pad(a, i).cmp(&pad(b, i)))
        .find(|o| o.is_ne())
        .unwrap_or(std::cmp::Ordering::Equal)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clear_exclusions_are_found() {
        for marker in [
            "python_version < \"3\"",
            "python_version<'3.0'",
            "python_version == \"2.7\"",
            "platform_python_implementation == 'PyPy'",
            "sys_platform == \"win32\"",
            "os_name == 'nt'",
            "platform_system == \"Windows\" and python_version >= '3.8'",
            "python_version < '3.8' or sys_platform == 'darwin'",
            "(python_version < \"3.6\")",
            "implementation_name != 'cpython'",
            "python_version == '3.3.*'",
        ] {
            assert!(excludes_all_targets(marker), "{marker}");
        }
        for marker in [
            "python_version >= '3.8'",
            "python_version != '3.3'",
            "python_version >= '3.13'",
            "platform_machine == 'x86_64'",
            "extra == 'test'",
            "sys_platform != 'win32'",
            "python_version < '3.8' or platform_machine == 'arm64'",
            "garbage ((",
            "",
        ] {
            assert!(!excludes_all_targets(marker), "{marker}");
        }
        assert_eq!(
            split_marker("mock ; python_version < '3.0'"),
            ("mock", Some("python_version < '3.0'"))
        );
        assert_eq!(split_marker("six"), ("six", None));
    }
}
