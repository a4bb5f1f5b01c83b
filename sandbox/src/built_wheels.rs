//! Pure-Python wheels built here from sdists, for distributions that publish none: releases
//! that ship only an sdist (PyMeeus, httpretty) and packages whose compiled extension is
//! optional, with a pure-Python fallback (zope.interface, multidict, yarl, msgpack, tornado).
//! pip builds each once with the host's Python, its compiler switched off; only a wheel tagged
//! for any platform and no ABI is kept. The folder of kept wheels is handed to every later pip
//! resolution (`--find-links`); a build that failed is remembered, so it is not tried again.

use std::fs;
use std::path::{Path, PathBuf};

use crate::assets::{self, Progress};
use crate::error::{Result, SandboxError};

/// The build environment: a compiler that always fails (an optional extension is then left
/// out and the package keeps its pure-Python code; a required one fails the build at once),
/// and the switches packages read to skip their optional extensions.
const BUILD_ENV: &[(&str, &str)] = &[
    ("CC", "false"),
    ("CXX", "false"),
    // zope.interface and the other zope packages.
    ("PURE_PYTHON", "1"),
    // aio-libs.
    ("AIOHTTP_NO_EXTENSIONS", "1"),
    ("MULTIDICT_NO_EXTENSIONS", "1"),
    ("YARL_NO_EXTENSIONS", "1"),
    ("FROZENLIST_NO_EXTENSIONS", "1"),
    ("PROPCACHE_NO_EXTENSIONS", "1"),
    ("MSGPACK_PUREPYTHON", "1"),
    ("TORNADO_EXTENSION", "0"),
    ("SKIP_CYTHON", "1"),
];

/// Longest one build may take (seconds): a pure build takes a few; a package that compiles
/// Rust or C++ without asking the compiler above would take minutes, and is given up.
const BUILD_TIMEOUT_S: u64 = 60;

/// The folder of the pure-Python wheels built so far (created when missing).
pub fn built_wheels_dir() -> Result<PathBuf> {
    let dir = assets::cache_dir().join("layers").join("built-wheels");
    assets::ensure_dir(&dir)?;
    Ok(dir)
}

/// Where a failed build of distribution `name` is remembered: by name, whatever version a
/// requirement asked for (each try of a package that compiles Rust or C++ costs up to the build
/// timeout, and cryptography alone is asked for with a dozen specifiers).
fn failure_marker(name: &str) -> Result<PathBuf> {
    let dir = assets::cache_dir()
        .join("layers")
        .join("built-wheels-failed");
    assets::ensure_dir(&dir)?;
    Ok(dir.join(crate::layers::normalise(name)))
}

/// Builds the pure-Python wheel of `requirement` (a PEP 508 requirement: the newest release
/// it allows) from its sdist into [`built_wheels_dir`]. True when such a wheel is there now;
/// false when the release has no sdist, its build failed or took too long, or what it built
/// is not pure (each remembered for the distribution: the next call answers at once).
pub fn build_pure_wheel(requirement: &str, progress: Progress<'_>) -> Result<bool> {
    let name = crate::requirements::requirement_name(requirement);
    let marker = failure_marker(&name)?;
    if marker.is_file() {
        return Ok(false);
    }
    progress(&format!(
        "building a pure-Python wheel of {requirement} from its sdist (none is published)"
    ));
    let staging = tempfile::Builder::new()
        .prefix(".build-")
        .tempdir_in(built_wheels_dir()?)
        .map_err(SandboxError::io("create a wheel build directory"))?;
    let args = [
        "--no-deps".to_string(),
        // Only the package itself from source; its build backend may come as a wheel.
        "--no-binary".to_string(),
        name.clone(),
        requirement.trim().to_string(),
    ];
    let outcome = match assets::pip_wheel(staging.path(), &args, BUILD_ENV, BUILD_TIMEOUT_S) {
        Ok(()) => pure_wheel_in(staging.path(), &name)?.ok_or_else(|| {
            "the build made a wheel with compiled code (its extension is not optional)".to_string()
        }),
        Err(err) => Err(err.to_string()),
    };
    match outcome {
        Ok(wheel) => {
            let file = wheel.file_name().map(|f| f.to_owned()).unwrap_or_default();
            // Same filesystem: a rename, so a concurrent resolution sees the whole file.
            fs::rename(&wheel, built_wheels_dir()?.join(file))
                .map_err(SandboxError::io("keep the built wheel"))?;
            Ok(true)
        }
        Err(reason) => {
            progress(&format!("no pure-Python wheel of {requirement}: {reason}"));
            fs::write(&marker, format!("{requirement}\n{reason}\n"))
                .map_err(SandboxError::io("remember a failed wheel build"))?;
            Ok(false)
        }
    }
}

/// The wheel of distribution `name` in `dir` when it is pure Python: tagged for no ABI and any
/// platform, or tagged for this host's platform but holding no compiled file (a package whose
/// build always tags a platform, even when its optional extension was left out), which is
/// then written again with the pure tag.
fn pure_wheel_in(dir: &Path, name: &str) -> Result<Option<PathBuf>> {
    let wanted = crate::layers::normalise(name);
    for entry in fs::read_dir(dir).map_err(SandboxError::io("list the built wheels"))? {
        let path = entry
            .map_err(SandboxError::io("list the built wheels"))?
            .path();
        let Some(file) = path.file_name().and_then(|f| f.to_str()) else {
            continue;
        };
        if is_pure_wheel_of(file, &wanted) {
            return Ok(Some(path));
        }
        let parts: Vec<&str> = file.trim_end_matches(".whl").split('-').collect();
        if file.ends_with(".whl")
            && parts.len() >= 5
            && crate::layers::normalise(parts[0]) == wanted
        {
            return retagged_as_pure(&path, parts[0], parts[1])
                .map_err(SandboxError::io(format!("read the built wheel {file}")));
        }
    }
    Ok(None)
}

/// `wheel` written again as `<name>-<version>-py3-none-any.whl` beside it, its `WHEEL` file
/// saying so, when it holds no compiled file; `None` when it does.
fn retagged_as_pure(wheel: &Path, name: &str, version: &str) -> std::io::Result<Option<PathBuf>> {
    use std::io::{Read, Write};
    let compiled = |member: &str| {
        [".so", ".pyd", ".dylib", ".dll"]
            .iter()
            .any(|ext| member.ends_with(ext))
    };
    let mut source = zip::ZipArchive::new(fs::File::open(wheel)?)?;
    if source.file_names().any(compiled) {
        return Ok(None);
    }
    let dest = wheel.with_file_name(format!("{name}-{version}-py3-none-any.whl"));
    let mut out = zip::ZipWriter::new(fs::File::create(&dest)?);
    let options = zip::write::SimpleFileOptions::default();
    for index in 0..source.len() {
        let mut member = source.by_index(index)?;
        let member_name = member.name().to_string();
        let rewritten = if member_name.ends_with(".dist-info/WHEEL") {
            let mut text = String::new();
            member.read_to_string(&mut text)?;
            let mut kept: String = text
                .lines()
                .filter(|line| !line.starts_with("Tag:") && !line.starts_with("Root-Is-Purelib:"))
                .map(|line| format!("{line}\n"))
                .collect();
            kept.push_str("Root-Is-Purelib: true\nTag: py3-none-any\n");
            Some(kept)
        } else if member_name.ends_with(".dist-info/RECORD") {
            // The WHEEL file changed: its line loses its hash (as RECORD's own line has none).
            let mut text = String::new();
            member.read_to_string(&mut text)?;
            Some(
                text.lines()
                    .map(|line| match line.split(',').next() {
                        Some(path) if path.ends_with(".dist-info/WHEEL") => format!("{path},,\n"),
                        _ => format!("{line}\n"),
                    })
                    .collect(),
            )
        } else {
            None
        };
        drop(member);
        match rewritten {
            Some(text) => {
                out.start_file(member_name.as_str(), options)?;
                out.write_all(text.as_bytes())?;
            }
            None => out.raw_copy_file(source.by_index_raw(index)?)?,
        }
    }
    out.finish()?;
    Ok(Some(dest))
}

/// Whether the wheel file name `file` is distribution `wanted`'s (normalised) and tagged for no
/// ABI and any platform (`name-1.0-py3-none-any.whl`).
fn is_pure_wheel_of(file: &str, wanted: &str) -> bool {
    let Some(stem) = file.strip_suffix(".whl") else {
        return false;
    };
    let parts: Vec<&str> = stem.split('-').collect();
    parts.len() >= 5
        && crate::layers::normalise(parts[0]) == wanted
        && parts[parts.len() - 2] == "none"
        && parts[parts.len() - 1] == "any"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_wheels_for_any_platform_and_no_abi_count_as_pure() {
        assert!(is_pure_wheel_of(
            "PyMeeus-0.5.12-py3-none-any.whl",
            "pymeeus"
        ));
        assert!(is_pure_wheel_of(
            "zope.interface-7.2-py2.py3-none-any.whl",
            "zope-interface"
        ));
        assert!(!is_pure_wheel_of(
            "multidict-6.7.0-cp311-cp311-linux_x86_64.whl",
            "multidict"
        ));
        assert!(!is_pure_wheel_of("other-1.0-py3-none-any.whl", "pymeeus"));
        assert!(!is_pure_wheel_of("pymeeus-0.5.12.tar.gz", "pymeeus"));
    }

    /// A wheel of `members` (name, text) tagged for this platform, in `dir`.
    fn platform_wheel(dir: &Path, members: &[(&str, &str)]) -> PathBuf {
        let path = dir.join("zope.interface-8.0-cp311-cp311-linux_x86_64.whl");
        let members: Vec<(&str, &[u8])> = members
            .iter()
            .map(|(name, text)| (*name, text.as_bytes()))
            .collect();
        crate::test_zip::write_zip(&path, &members);
        path
    }

    #[test]
    fn a_platform_wheel_without_compiled_files_is_retagged_pure() {
        let dir = tempfile::tempdir().expect("tempdir");
        let info = "zope.interface-8.0.dist-info";
        let wheel = "Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: cp311-cp311-linux_x86_64\n";
        let record = format!("zope/interface/__init__.py,sha256=x,1\n{info}/WHEEL,sha256=y,2\n");
        platform_wheel(
            dir.path(),
            &[
                ("zope/interface/__init__.py", "X = 1\n"),
                (&format!("{info}/WHEEL"), wheel),
                (&format!("{info}/RECORD"), &record),
            ],
        );
        let pure = pure_wheel_in(dir.path(), "zope.interface")
            .expect("read")
            .expect("retagged");
        assert!(
            pure.ends_with("zope.interface-8.0-py3-none-any.whl"),
            "{pure:?}"
        );
        let mut zip = zip::ZipArchive::new(fs::File::open(&pure).expect("open")).expect("zip");
        let mut read = |name: &str| {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut zip.by_name(name).expect(name), &mut text)
                .expect("read");
            text
        };
        assert_eq!(read("zope/interface/__init__.py"), "X = 1\n");
        assert!(
            read(&format!("{info}/WHEEL")).ends_with("Root-Is-Purelib: true\nTag: py3-none-any\n")
        );
        assert!(read(&format!("{info}/RECORD")).contains(&format!("{info}/WHEEL,,\n")));

        let compiled = tempfile::tempdir().expect("tempdir");
        platform_wheel(compiled.path(), &[("zope/interface/_speedups.so", "ELF")]);
        assert_eq!(
            pure_wheel_in(compiled.path(), "zope.interface").expect("read"),
            None
        );
    }
}
