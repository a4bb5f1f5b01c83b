//! A forgiving INI reader for `setup.cfg` and `tox.ini`: sections, `key = value` or
//! `key: value`, indented continuation lines, full-line `#`/`;` comments.

/// One parsed file: sections in order, each with its keys in order.
#[derive(Debug, Clone, Default)]
pub struct Ini {
    sections: Vec<(String, Vec<(String, String)>)>,
}

/// Why a file is not INI.
#[derive(Debug, Clone, PartialEq)]
pub struct IniError {
    /// 1-based line of the problem.
    pub line: usize,
    /// What is wrong there.
    pub message: String,
}

impl std::fmt::Display for IniError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

impl Ini {
    /// Parses INI text. A key outside any section, an unclosed section header or a line that
    /// is neither a key nor a continuation is an error.
    pub fn parse(text: &str) -> Result<Self, IniError> {
        let mut ini = Ini::default();
        let mut current_key: Option<usize> = None;
        for (index, raw) in text.lines().enumerate() {
            let line_no = index + 1;
            let trimmed = raw.trim();
            if trimmed.is_empty() {
                // configparser keeps blank lines inside multi-line values; they end nothing.
                continue;
            }
            if trimmed.starts_with('#') || trimmed.starts_with(';') {
                continue;
            }
            let indented = raw.starts_with([' ', '\t']);
            if indented && current_key.is_some() {
                if let (Some(section), Some(key)) = (ini.sections.last_mut(), current_key)
                    && let Some(entry) = section.1.get_mut(key)
                {
                    entry.1.push('\n');
                    entry.1.push_str(trimmed);
                }
                continue;
            }
            if trimmed.starts_with('[') {
                let Some(name) = trimmed.strip_prefix('[').and_then(|t| t.strip_suffix(']')) else {
                    return Err(IniError {
                        line: line_no,
                        message: format!("unclosed section header {trimmed:?}"),
                    });
                };
                ini.sections.push((name.trim().to_string(), Vec::new()));
                current_key = None;
                continue;
            }
            let split = match (trimmed.find('='), trimmed.find(':')) {
                (Some(e), Some(c)) => Some(e.min(c)),
                (e, c) => e.or(c),
            };
            let Some(at) = split else {
                return Err(IniError {
                    line: line_no,
                    message: format!("expected `key = value`, found {trimmed:?}"),
                });
            };
            let Some(section) = ini.sections.last_mut() else {
                return Err(IniError {
                    line: line_no,
                    message: "a key before any [section]".into(),
                });
            };
            let key = trimmed[..at].trim().to_string();
            let value = trimmed[at + 1..].trim().to_string();
            section.1.retain(|(k, _)| *k != key);
            section.1.push((key, value));
            current_key = Some(section.1.len() - 1);
        }
        Ok(ini)
    }

    /// Section names in file order.
    pub fn sections(&self) -> impl Iterator<Item = &str> {
        self.sections.iter().map(|(name, _)| name.as_str())
    }

    /// The (last) value of `key` in `section`.
    pub fn get(&self, section: &str, key: &str) -> Option<&str> {
        self.sections
            .iter()
            .rev()
            .filter(|(name, _)| name == section)
            .find_map(|(_, keys)| keys.iter().find(|(k, _)| k == key))
            .map(|(_, v)| v.as_str())
    }

    /// Every key of `section`, in order.
    pub fn keys(&self, section: &str) -> Vec<(&str, &str)> {
        self.sections
            .iter()
            .filter(|(name, _)| name == section)
            .flat_map(|(_, keys)| keys.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .collect()
    }
}

/// The items of a multi-line (or `,`/`;`-free single-line) list value: one per line, comments
/// stripped.
pub fn list_items(value: &str) -> Vec<String> {
    value
        .lines()
        .map(|line| strip_comment(line).trim())
        .filter(|line| !line.is_empty())
        .map(str::to_string)
        .collect()
}

/// A line without its ` #` comment.
pub fn strip_comment(line: &str) -> &str {
    if line.trim_start().starts_with('#') {
        return "";
    }
    match line.find(" #").or_else(|| line.find("\t#")) {
        Some(at) => &line[..at],
        None => line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_keys_and_continuations() {
        let ini = Ini::parse(
            "# top\n[options]\ninstall_requires =\n    six\n    attrs>=1 # why\n\n    mock\n\
             python_requires = >=3.8\n[options.extras_require]\ntests:\n\tpytest\n",
        )
        .expect("parse");
        assert_eq!(
            list_items(ini.get("options", "install_requires").expect("key")),
            vec!["six", "attrs>=1", "mock"]
        );
        assert_eq!(ini.get("options", "python_requires"), Some(">=3.8"));
        assert_eq!(
            ini.keys("options.extras_require"),
            vec![("tests", "\npytest")]
        );
        assert_eq!(
            ini.sections().collect::<Vec<_>>(),
            vec!["options", "options.extras_require"]
        );
    }

    #[test]
    fn malformed_files_are_errors() {
        assert!(Ini::parse("key = value\n").is_err());
        assert!(Ini::parse("[open\nx = 1\n").is_err());
        assert_eq!(
            Ini::parse("[s]\njust words\n").map(|_| ()),
            Err(IniError {
                line: 2,
                message: "expected `key = value`, found \"just words\"".into()
            })
        );
    }
}
