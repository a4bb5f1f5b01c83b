//! Package specs: what a corpus entry is built from.
//!
//! One spec per line of a list, in the syntax of a pip requirements file where it applies:
//!
//! ```text
//! # comments and blank lines are skipped
//! isodate==0.7.2 --hash=sha256:4cd1aa0f43ca76f4a6c6c0292a85f40b35ec2e43e315b59f06e6d32171a953e6
//! semver==3.1.2                 # unpinned hash: recorded at the first download
//! ./vendor/mylib                # a local source tree
//! dist/mylib-1.0.tar.gz         # a local sdist (.tar.gz, .tgz, .tar or .zip)
//! ```

use std::fmt;
use std::path::{Path, PathBuf};

use crate::{CorpusError, Result};

/// What one corpus entry is built from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Spec {
    /// A package from the registry, pinned to an exact version (and, ideally, its sdist's sha256).
    Registry {
        /// The distribution name as written.
        name: String,
        /// The exact version.
        version: String,
        /// The sdist's sha256, verified after download when given.
        sha256: Option<String>,
    },
    /// A source tree on this machine.
    Directory(PathBuf),
    /// A source distribution file on this machine.
    Sdist(PathBuf),
}

const ARCHIVE_SUFFIXES: &[&str] = &[".tar.gz", ".tgz", ".tar", ".zip"];

impl Spec {
    /// Parses one spec; relative paths resolve against `base`. `origin` names the spec in
    /// errors (e.g. `list.txt:12`).
    pub fn parse(text: &str, base: &Path, origin: &str) -> Result<Spec> {
        let error = |message: String| CorpusError::Spec {
            origin: origin.to_string(),
            message,
        };
        let text = text.trim();
        if text.is_empty() {
            return Err(error("empty spec".into()));
        }
        let path = base.join(text);
        let looks_like_path = text.starts_with('.')
            || text.starts_with('/')
            || text.starts_with('~')
            || text.contains('/');
        if path.is_dir() {
            return Ok(Spec::Directory(absolute(&path)));
        }
        let lower = text.to_ascii_lowercase();
        if ARCHIVE_SUFFIXES.iter().any(|s| lower.ends_with(s)) {
            if path.is_file() {
                return Ok(Spec::Sdist(absolute(&path)));
            }
            return Err(error(format!("{} does not exist", path.display())));
        }
        if looks_like_path {
            return Err(error(format!(
                "{} is not a directory or an sdist file (.tar.gz, .tgz, .tar, .zip)",
                path.display()
            )));
        }
        let mut words = text.split_whitespace();
        let requirement = words.next().unwrap_or_default();
        let mut sha256 = None;
        for word in words {
            let Some(hash) = word.strip_prefix("--hash=") else {
                return Err(error(format!(
                    "unexpected `{word}` (only `--hash=sha256:HEX` may follow NAME==VERSION)"
                )));
            };
            let Some(hex) = hash.strip_prefix("sha256:") else {
                return Err(error(format!("`{word}`: only sha256 hashes are accepted")));
            };
            if hex.len() != 64 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
                return Err(error(format!("`{word}`: a sha256 is 64 hex digits")));
            }
            sha256 = Some(hex.to_ascii_lowercase());
        }
        let Some((name, version)) = requirement.split_once("==") else {
            return Err(error(format!(
                "`{requirement}`: expected NAME==VERSION (an exact pin), a directory or an sdist file"
            )));
        };
        let valid_name = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if !valid_name {
            return Err(error(format!("`{name}` is not a distribution name")));
        }
        let valid_version = !version.is_empty()
            && version
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '+' | '!' | '-' | '_'));
        if !valid_version {
            return Err(error(format!(
                "`{version}` is not an exact version (ranges such as >= are not pins)"
            )));
        }
        Ok(Spec::Registry {
            name: name.to_string(),
            version: version.to_string(),
            sha256,
        })
    }

    /// The entry's directory name in a corpus: `name-version` for registry packages (the name
    /// normalised as the registry does), the directory or file stem for local sources.
    pub fn id(&self) -> String {
        match self {
            Spec::Registry { name, version, .. } => format!("{}-{version}", normalise(name)),
            Spec::Directory(path) => sanitise(
                path.file_name()
                    .and_then(|n| n.to_str())
                    .unwrap_or("repository"),
            ),
            Spec::Sdist(path) => {
                let file = path
                    .file_name()
                    .and_then(|n| n.to_str())
                    .unwrap_or("sdist")
                    .to_string();
                let lower = file.to_ascii_lowercase();
                let stem = ARCHIVE_SUFFIXES
                    .iter()
                    .find(|s| lower.ends_with(*s))
                    .map(|s| &file[..file.len() - s.len()])
                    .unwrap_or(&file);
                sanitise(stem)
            }
        }
    }

    /// The package name, for registry specs.
    pub fn package(&self) -> Option<&str> {
        match self {
            Spec::Registry { name, .. } => Some(name),
            _ => None,
        }
    }
}

impl fmt::Display for Spec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Spec::Registry {
                name,
                version,
                sha256: Some(sha),
            } => write!(f, "{name}=={version} --hash=sha256:{sha}"),
            Spec::Registry { name, version, .. } => write!(f, "{name}=={version}"),
            Spec::Directory(path) | Spec::Sdist(path) => write!(f, "{}", path.display()),
        }
    }
}

/// Parses a list of specs (one per line; `#` starts a comment); relative paths resolve against
/// `base`. Errors name `origin:LINE`. A spec listed twice (same entry id) is an error.
pub fn parse_list(text: &str, base: &Path, origin: &str) -> Result<Vec<Spec>> {
    let mut specs: Vec<Spec> = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line = strip_comment(line);
        if line.is_empty() {
            continue;
        }
        let at = format!("{origin}:{}", number + 1);
        let spec = Spec::parse(line, base, &at)?;
        if let Some(other) = specs.iter().find(|s| s.id() == spec.id()) {
            return Err(CorpusError::Spec {
                origin: at,
                message: format!("`{spec}` is listed twice (as `{other}` before)"),
            });
        }
        specs.push(spec);
    }
    Ok(specs)
}

fn strip_comment(line: &str) -> &str {
    let line = line.trim();
    if line.starts_with('#') {
        return "";
    }
    match line.find(" #") {
        Some(at) => line[..at].trim(),
        None => line,
    }
}

/// PEP 503 normalisation: lowercase, runs of `-`, `_` and `.` become one `-`.
pub fn normalise(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut dash = false;
    for c in name.trim().chars() {
        if matches!(c, '-' | '_' | '.') {
            dash = true;
        } else {
            if dash && !out.is_empty() {
                out.push('-');
            }
            dash = false;
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

fn sanitise(name: &str) -> String {
    let clean: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '+') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let clean = clean.trim_start_matches('.').to_string();
    if clean.is_empty() {
        "repository".into()
    } else {
        clean
    }
}

fn absolute(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA: &str = "4cd1aa0f43ca76f4a6c6c0292a85f40b35ec2e43e315b59f06e6d32171a953e6";

    #[test]
    fn registry_specs_with_and_without_hashes() {
        let base = Path::new("/nonexistent");
        let spec = Spec::parse(&format!("Iso_Date==0.7.2 --hash=sha256:{SHA}"), base, "a")
            .expect("parses");
        assert_eq!(
            spec,
            Spec::Registry {
                name: "Iso_Date".into(),
                version: "0.7.2".into(),
                sha256: Some(SHA.into())
            }
        );
        assert_eq!(spec.id(), "iso-date-0.7.2");
        assert_eq!(
            spec.to_string(),
            format!("Iso_Date==0.7.2 --hash=sha256:{SHA}")
        );
        let plain = Spec::parse("semver==3.1.2", base, "a").expect("parses");
        assert_eq!(plain.to_string(), "semver==3.1.2");
    }

    #[test]
    fn malformed_specs_say_what_is_expected() {
        let base = Path::new("/nonexistent");
        for (text, needle) in [
            ("semver>=3", "exact pin"),
            ("semver==", "exact version"),
            ("semver==3 --hash=md5:abc", "sha256"),
            ("semver==3 --hash=sha256:abc", "64 hex"),
            ("semver==3 extra", "unexpected"),
            ("./missing", "not a directory"),
            ("missing-1.0.tar.gz", "does not exist"),
            ("bad name==1", "unexpected"),
        ] {
            let err = Spec::parse(text, base, "list.txt:3")
                .expect_err(text)
                .to_string();
            assert!(err.starts_with("list.txt:3: "), "{err}");
            assert!(err.contains(needle), "{text}: {err}");
        }
    }

    #[test]
    fn local_sources_and_lists() {
        let dir = tempfile::tempdir().expect("tmp");
        std::fs::create_dir(dir.path().join("my lib")).expect("mkdir");
        std::fs::write(dir.path().join("pkg-1.0.tar.gz"), b"x").expect("write");
        let list = "# header\n\nmy lib\npkg-1.0.tar.gz  # a local sdist\nsix==1.17.0\n";
        let specs = parse_list(list, dir.path(), "list").expect("parses");
        assert_eq!(specs.len(), 3);
        assert!(matches!(&specs[0], Spec::Directory(p) if p.ends_with("my lib")));
        assert_eq!(specs[0].id(), "my_lib");
        assert!(matches!(&specs[1], Spec::Sdist(_)));
        assert_eq!(specs[1].id(), "pkg-1.0");
        let err = parse_list("six==1.17.0\nSix==1.17.0\n", dir.path(), "list")
            .expect_err("duplicate")
            .to_string();
        assert!(err.contains("list:2") && err.contains("twice"), "{err}");
    }

    #[test]
    fn normalisation_follows_pep_503() {
        assert_eq!(normalise("Foo__Bar.baz"), "foo-bar-baz");
        assert_eq!(normalise("python-dateutil"), "python-dateutil");
    }
}
