//! Read-only layers of pure-Python packages: pytest and a repository's test requirements.

use std::fs;
use std::path::{Path, PathBuf};

use crate::assets::{self, PinnedWheel, Progress};
use crate::error::{Result, SandboxError};
use crate::image::ImageFiles;

/// pytest and its pure-Python dependencies, pinned.
pub const PYTEST_WHEELS: &[PinnedWheel] = &[
    PinnedWheel {
        name: "pytest",
        version: "9.2.0",
        file: "pytest-9.2.0-py3-none-any.whl",
        sha256: "07acdcf88ec174f907dc01af70bf52d49b014bbab03faeeade31c96b18c2e588",
    },
    PinnedWheel {
        name: "pluggy",
        version: "1.7.0",
        file: "pluggy-1.7.0-py3-none-any.whl",
        sha256: "7dd7b0d8832ba3cb632c306926ded123429211b83641b35dc5c41ad2d34f9bec",
    },
    PinnedWheel {
        name: "iniconfig",
        version: "2.3.1",
        file: "iniconfig-2.3.1-py3-none-any.whl",
        sha256: "9121e2c1fdb355232495be3194c8dfe87ccc2d5dee45947b78e68f499790d7a7",
    },
    PinnedWheel {
        name: "packaging",
        version: "26.4",
        file: "packaging-26.4-py3-none-any.whl",
        sha256: "81383611a09c1bc0b08b76e0fd5829d7c6824c65b27a6aee339da133f4233ea2",
    },
    PinnedWheel {
        name: "pygments",
        version: "2.21.0",
        file: "pygments-2.21.0-py3-none-any.whl",
        sha256: "2363c69b61c4a97c838da3b130dcd6468f4848992b21a82f2a63ec34377137d9",
    },
];

/// The pytest plugin that records per-test results incrementally.
pub const PLUGIN_SOURCE: &str = include_str!("guest/frognano_pytest_plugin.py");
/// Module name of the plugin inside the guest.
pub const PLUGIN_MODULE: &str = "_frognano_pytest_plugin";
/// A stand-in for CPython's `_ssl` extension, which WASI builds lack: the standard library's
/// `ssl` then imports and makes contexts, and only TLS itself fails (labelled "ssl").
const SSL_STAND_IN_SOURCE: &str = include_str!("guest/ssl_stand_in.py");
/// Stand-ins the plugin applies for what WASI lacks (an event loop without a socket pair, the
/// default executor inline, a single user), imported by the plugin from beside it.
const PLATFORM_SHIMS_SOURCE: &str = include_str!("guest/platform_shims.py");
/// Adaptations to a pytest and a Python newer than most suites (names they still import,
/// pytest's `runTest` placeholder, `required_plugins`), imported by the plugin from beside it,
/// natively too.
pub const PYTEST_COMPAT_SOURCE: &str = include_str!("guest/pytest_compat.py");
/// Module name of those adaptations inside the guest (and beside a native run's plugin).
pub const PYTEST_COMPAT_MODULE: &str = "_frognano_pytest_compat";

/// Distribution names the pytest layer already provides (normalised).
pub fn provided_by_pytest_layer(name: &str) -> bool {
    let name = normalise(name);
    PYTEST_WHEELS.iter().any(|w| normalise(w.name) == name)
}

/// PEP 503 normalisation of a distribution name.
pub fn normalise(name: &str) -> String {
    name.trim().to_ascii_lowercase().replace(['_', '.'], "-")
}

/// Builds (once) the pytest layer and returns its directory. The layer's bytecode is compiled
/// later by the guest itself, because `.pyc` files must match the guest's CPython.
pub fn prepare_pytest_layer(progress: Progress<'_>) -> Result<PathBuf> {
    let mut key = String::new();
    for wheel in PYTEST_WHEELS {
        key.push_str(wheel.sha256);
    }
    key.push_str(PLUGIN_SOURCE);
    key.push_str(SSL_STAND_IN_SOURCE);
    key.push_str(PLATFORM_SHIMS_SOURCE);
    key.push_str(PYTEST_COMPAT_SOURCE);
    let dir = layer_dir("pytest", &key);
    if dir.join(".complete").is_file() {
        return Ok(dir);
    }
    let wheels = assets::fetch_wheels(PYTEST_WHEELS, progress)?;
    progress("building the pytest layer");
    build_layer(
        &dir,
        &wheels,
        &[
            (format!("{PLUGIN_MODULE}.py"), PLUGIN_SOURCE),
            ("_ssl.py".to_string(), SSL_STAND_IN_SOURCE),
            (
                "_frognano_platform_shims.py".to_string(),
                PLATFORM_SHIMS_SOURCE,
            ),
            (format!("{PYTEST_COMPAT_MODULE}.py"), PYTEST_COMPAT_SOURCE),
        ],
    )?;
    Ok(dir)
}

/// What a requirements layer is built for: the guest's Python version, and the folder of
/// metadata-only wheels that stand for the distributions its image carries
/// ([`prepare_carried_stubs`]), if any.
#[derive(Debug, Clone, Copy)]
pub struct LayerTarget<'a> {
    /// The guest's Python version (`3.15`).
    pub python_version: &'a str,
    /// The image's carried distributions as pip can resolve them (`--find-links`).
    pub carried_stubs: Option<&'a Path>,
}

/// Builds (once) a layer with the given requirements as pure-Python wheels for the target's
/// Python version and returns its directory. Packages the pytest layer provides, and those the
/// image carries (which pip resolves to their stubs), are left out.
pub fn prepare_requirements_layer(
    requirements: &[String],
    target: LayerTarget<'_>,
    progress: Progress<'_>,
) -> Result<PathBuf> {
    let python_version = target.python_version;
    let mut sorted: Vec<String> = requirements.iter().map(|r| r.trim().to_string()).collect();
    sorted.sort();
    sorted.dedup();
    let stubs = target
        .carried_stubs
        .map(|dir| dir.display().to_string())
        .unwrap_or_default();
    let key = format!("{python_version}\n{stubs}\n{}", sorted.join("\n"));
    let dir = layer_dir("deps", &key);
    if dir.join(".complete").is_file() {
        return Ok(dir);
    }
    if sorted.is_empty() {
        // Every detected requirement was left out: an empty layer, no pip call (pip refuses
        // a download of nothing).
        build_layer(&dir, &[], &[])?;
        return Ok(dir);
    }
    progress(&format!(
        "fetching test requirements: {}",
        sorted.join(", ")
    ));
    let staging_root = assets::cache_dir().join("layers");
    assets::ensure_dir(&staging_root)?;
    let download = tempfile::Builder::new()
        .prefix(".deps-download-")
        .tempdir_in(&staging_root)
        .map_err(SandboxError::io("create download directory"))?;
    let mut args = pure_wheel_args(python_version)?;
    if let Some(stubs) = target.carried_stubs {
        args.push("--find-links".into());
        args.push(stubs.display().to_string());
    }
    args.extend(sorted.iter().cloned());
    assets::pip_download(download.path(), &args).map_err(|err| SandboxError::Requirements {
        requirements: sorted.clone(),
        message: format!(
            "{err}\nOnly pure-Python wheels run in the sandbox; list only those in frognano.toml \
             ([test] requirements) or exclude the others with [test] skip-requirements."
        ),
    })?;
    let mut wheels = Vec::new();
    for entry in fs::read_dir(download.path()).map_err(SandboxError::io("list downloads"))? {
        let path = entry.map_err(SandboxError::io("list downloads"))?.path();
        let Some(file) = path.file_name().and_then(|f| f.to_str()) else {
            continue;
        };
        let dist = file.split('-').next().unwrap_or_default();
        let runs_here = crate::requirements::resolve::cannot_run_in_wasi(dist).is_none();
        if file.ends_with(".whl")
            && !provided_by_pytest_layer(dist)
            && !is_carried_stub(file)
            && runs_here
        {
            wheels.push(path);
        }
    }
    build_layer(&dir, &wheels, &[])?;
    Ok(dir)
}

/// pip options that select only pure-Python wheels (platform `any`) for `python_version`:
/// nothing else runs in the WASI interpreter. The wheels built here from sdists count too.
fn pure_wheel_args(python_version: &str) -> Result<Vec<String>> {
    let built = crate::built_wheels::built_wheels_dir()?;
    Ok([
        "--only-binary=:all:",
        "--platform",
        "any",
        "--implementation",
        "py",
        "--abi",
        "none",
        "--python-version",
        python_version,
        "--find-links",
        &built.display().to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect())
}

/// Like [`prepare_requirements_layer`], but requirements that cannot be provided as pure-Python
/// wheels are left out (returned with pip's reason) instead of failing the layer. pip names
/// the requirement it could not satisfy, so each impure one costs one more pip run; only when
/// it names none of them is each requirement tried on its own.
pub fn prepare_requirements_layer_lenient(
    requirements: &[String],
    target: LayerTarget<'_>,
    progress: Progress<'_>,
) -> Result<(PathBuf, Vec<(String, String)>)> {
    let python_version = target.python_version;
    let mut usable: Vec<String> = requirements.to_vec();
    let mut left_out: Vec<(String, String)> = Vec::new();
    let mut built: Vec<String> = Vec::new();
    // Each round leaves a requirement out or builds a wheel, at most one per requirement.
    for _ in 0..=2 * requirements.len() {
        let err = match prepare_requirements_layer(&usable, target, progress) {
            Ok(dir) => return Ok((dir, left_out)),
            Err(err) => err,
        };
        let message = match &err {
            SandboxError::Requirements { message, .. } => message.clone(),
            _ => return Err(err),
        };
        // What pip found no pure-Python wheel for (the requirement or one of its
        // dependencies) may build one from its sdist.
        if let Some(unavailable) = unavailable_requirement(&message)
            && built.len() < requirements.len()
            && !built.contains(&unavailable)
        {
            built.push(unavailable.clone());
            if crate::built_wheels::build_pure_wheel(&unavailable, progress)? {
                continue;
            }
        }
        match blamed_requirement(&message, &usable) {
            Some(index) => {
                let requirement = usable.remove(index);
                left_out.push((requirement, pip_reason(&message, python_version)));
            }
            None => {
                // Conflicts or an unnamed failure: keep what resolves on its own.
                let mut kept = Vec::new();
                for requirement in usable {
                    match prepare_requirements_layer(
                        std::slice::from_ref(&requirement),
                        target,
                        &|_| {},
                    ) {
                        Ok(_) => kept.push(requirement),
                        Err(SandboxError::Requirements { message, .. }) => {
                            left_out.push((requirement, pip_reason(&message, python_version)))
                        }
                        Err(other) => return Err(other),
                    }
                }
                usable = kept;
                let dir = prepare_requirements_layer(&usable, target, progress)?;
                return Ok((dir, left_out));
            }
        }
    }
    let dir = prepare_requirements_layer(&usable, target, progress)?;
    Ok((dir, left_out))
}

/// Whether the layer at `layer` holds the distribution `name` (its `.dist-info` folder).
pub fn layer_provides(layer: &Path, name: &str) -> bool {
    let wanted = normalise(name);
    let Ok(entries) = fs::read_dir(layer) else {
        return false;
    };
    entries.flatten().any(|entry| {
        let file = entry.file_name();
        let file = file.to_string_lossy();
        file.strip_suffix(".dist-info")
            .and_then(|info| info.split('-').next())
            .is_some_and(|dist| normalise(dist) == wanted)
    })
}

/// The build tag of the stubs [`prepare_carried_stubs`] writes. A build tag also makes pip take
/// a stub before the index's wheel of the same version.
const CARRIED_STUB_BUILD_TAG: &str = "0frognanoimage";

/// Whether a wheel's file name is one of the image's stubs (never unpacked into a layer).
fn is_carried_stub(file: &str) -> bool {
    file.contains(&format!("-{CARRIED_STUB_BUILD_TAG}-"))
}

/// Writes (once) a metadata-only wheel for each distribution `image` carries in its
/// standard-library zip, and returns their folder (`None` when it carries none). pip resolves
/// test requirements against it (`--find-links`): a requirement that depends on a compiled
/// distribution the image carries (Flask on MarkupSafe) then resolves to the image's copy,
/// where without it pip finds no pure-Python wheel and the requirement is left out. Each stub
/// holds the image's own `METADATA`, so the carried distribution's requirements resolve too,
/// and no code: the layer leaves stubs out, and the tests import the image's copy.
pub fn prepare_carried_stubs(image: &ImageFiles) -> Result<Option<PathBuf>> {
    let carried = image.carried_metadata();
    if carried.is_empty() {
        return Ok(None);
    }
    let mut key = format!("{CARRIED_STUB_BUILD_TAG}\n");
    for distribution in &carried {
        key.push_str(&distribution.metadata);
    }
    let dir = layer_dir("image-carried", &key);
    if dir.join(".complete").is_file() {
        return Ok(Some(dir));
    }
    fill_cache_dir(&dir, |staging| {
        for distribution in &carried {
            write_stub_wheel(staging, distribution)?;
        }
        Ok(())
    })?;
    Ok(Some(dir))
}

/// One metadata-only wheel (`METADATA`, `WHEEL`, `RECORD`) named for `distribution`.
fn write_stub_wheel(dir: &Path, distribution: &crate::image::CarriedDistribution) -> Result<()> {
    // Wheel file names spell the name with underscores (PEP 427), and so does the .dist-info
    // folder inside, which pip checks against the name.
    let name = normalise(&distribution.name).replace('-', "_");
    let version = &distribution.version;
    let file = format!("{name}-{version}-{CARRIED_STUB_BUILD_TAG}-py3-none-any.whl");
    let info = format!("{name}-{version}.dist-info");
    let wheel = format!(
        "Wheel-Version: 1.0\nGenerator: frognano (a stand-in for the interpreter image's \
         copy)\nRoot-Is-Purelib: true\nBuild: {CARRIED_STUB_BUILD_TAG}\nTag: py3-none-any\n"
    );
    let entries = [
        (format!("{info}/METADATA"), distribution.metadata.clone()),
        (format!("{info}/WHEEL"), wheel),
    ];
    write_zip(&dir.join(&file), &entries, &format!("{info}/RECORD"))
        .map_err(SandboxError::io(format!("write {file}")))
}

/// A zip of `entries` (member, text), then a RECORD member listing them all.
fn write_zip(
    path: &Path,
    entries: &[(String, String)],
    record_member: &str,
) -> std::io::Result<()> {
    use std::io::Write;
    let mut zip = zip::ZipWriter::new(fs::File::create(path)?);
    let options = zip::write::SimpleFileOptions::default();
    let mut record = String::new();
    for (member, text) in entries {
        zip.start_file(member.as_str(), options)?;
        zip.write_all(text.as_bytes())?;
        record.push_str(&format!("{member},,\n"));
    }
    record.push_str(&format!("{record_member},,\n"));
    zip.start_file(record_member, options)?;
    zip.write_all(record.as_bytes())?;
    zip.finish()?;
    Ok(())
}

/// The index of the requirement pip's error blames: the one it could not satisfy, or the one
/// that required it (`(from x)`).
fn blamed_requirement(message: &str, requirements: &[String]) -> Option<usize> {
    let index_of = |name: &str| {
        let name = normalise(name);
        requirements
            .iter()
            .position(|r| normalise(&crate::requirements::requirement_name(r)) == name)
    };
    for marker in [
        "No matching distribution found for ",
        "satisfies the requirement ",
    ] {
        for piece in message.split(marker).skip(1) {
            let failing = crate::requirements::requirement_name(piece);
            if let Some(index) = index_of(&failing) {
                return Some(index);
            }
            if let Some(parent) = piece.split("(from ").nth(1) {
                let parent = parent.split("->").last().unwrap_or(parent);
                if let Some(index) = index_of(&crate::requirements::requirement_name(parent)) {
                    return Some(index);
                }
            }
        }
    }
    None
}

/// The requirement pip's error says it found no distribution for, as pip wrote it
/// (`zope.interface>=5`).
fn unavailable_requirement(message: &str) -> Option<String> {
    let rest = message
        .split("No matching distribution found for ")
        .nth(1)?;
    let requirement = rest.lines().next()?.trim();
    (!requirement.is_empty()).then(|| requirement.to_string())
}

/// A one-line reason from pip's error.
fn pip_reason(message: &str, python_version: &str) -> String {
    let line = message
        .lines()
        .find(|l| l.contains("No matching distribution") || l.contains("Could not find"))
        .map(|l| l.trim().trim_start_matches("pip download failed:").trim())
        .map(|l| l.trim_start_matches("ERROR: ").to_string());
    match line {
        Some(line) => format!("no pure-Python wheel for Python {python_version} ({line})"),
        None => {
            format!("pip could not provide it as pure-Python wheels for Python {python_version}")
        }
    }
}

/// Downloads the pure-Python wheel of `distribution` alone (no dependencies) into `dest`;
/// `None` when there is none.
pub fn download_pure_wheel(
    distribution: &str,
    python_version: &str,
    dest: &Path,
) -> Result<Option<PathBuf>> {
    let mut args = pure_wheel_args(python_version)?;
    args.push("--no-deps".into());
    args.push(distribution.to_string());
    if assets::pip_download(dest, &args).is_err()
        && !(crate::built_wheels::build_pure_wheel(distribution, &|_| {})?
            && assets::pip_download(dest, &args).is_ok())
    {
        return Ok(None);
    }
    // The distribution's name, without the version specifier a plan may carry
    // (`setuptools<81`).
    let wanted = normalise(&crate::requirements::requirement_name(distribution));
    for entry in fs::read_dir(dest).map_err(SandboxError::io("list downloads"))? {
        let path = entry.map_err(SandboxError::io("list downloads"))?.path();
        let Some(file) = path.file_name().and_then(|f| f.to_str()) else {
            continue;
        };
        if file.ends_with(".whl") && normalise(file.split('-').next().unwrap_or_default()) == wanted
        {
            return Ok(Some(path));
        }
    }
    Ok(None)
}

/// The empty layer: mounted read-only where a run has no requirements layer. One directory in
/// the cache, shared by every sandbox and process (a temporary directory per sandbox was never
/// removed for sandboxes kept in statics, which do not drop). Anything found inside it is
/// removed, so it is empty again.
pub fn prepare_empty_layer() -> Result<PathBuf> {
    let dir = assets::cache_dir().join("layers").join("empty");
    assets::ensure_dir(&dir)?;
    let entries = fs::read_dir(&dir).map_err(SandboxError::io("read the empty layer"))?;
    for entry in entries.flatten() {
        let path = entry.path();
        let removed = if path.is_dir() && !path.is_symlink() {
            fs::remove_dir_all(&path)
        } else {
            fs::remove_file(&path)
        };
        removed.map_err(SandboxError::io(format!("empty {}", dir.display())))?;
    }
    Ok(dir)
}

/// The cache directory of the layer of this kind whose inputs hash to `key`'s digest.
fn layer_dir(kind: &str, key: &str) -> PathBuf {
    let digest = assets::sha256_bytes(key.as_bytes());
    assets::cache_dir()
        .join("layers")
        .join(format!("{kind}-{}", &digest[..16]))
}

/// Unpacks wheels (and extra files) into a fresh directory, then moves it into place.
fn build_layer(dir: &Path, wheels: &[PathBuf], extra: &[(String, &str)]) -> Result<()> {
    fill_cache_dir(dir, |staging| {
        for wheel in wheels {
            assets::unpack_wheel(wheel, staging)?;
        }
        for (name, contents) in extra {
            fs::write(staging.join(name), contents)
                .map_err(SandboxError::io(format!("write {name}")))?;
        }
        Ok(())
    })
}

/// Makes the cache directory `dir`: `fill` writes its files into a fresh staging directory
/// beside it, which is marked complete and then moved into place, so that a directory found
/// complete is whole even when several processes make it at once.
pub(crate) fn fill_cache_dir(dir: &Path, fill: impl FnOnce(&Path) -> Result<()>) -> Result<()> {
    let parent = dir.parent().unwrap_or(Path::new("."));
    assets::ensure_dir(parent)?;
    let staging = tempfile::Builder::new()
        .prefix(".layer-")
        .tempdir_in(parent)
        .map_err(SandboxError::io("create layer directory"))?;
    fill(staging.path())?;
    fs::write(staging.path().join(".complete"), b"")
        .map_err(SandboxError::io("mark layer complete"))?;
    Ok(assets::land_cache_dir(staging, dir)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalised_names_match_the_layer() {
        assert!(provided_by_pytest_layer("PyTest"));
        assert!(provided_by_pytest_layer("Pluggy"));
        assert!(!provided_by_pytest_layer("mock"));
        assert_eq!(normalise("Foo_Bar.baz"), "foo-bar-baz");
    }

    #[test]
    fn a_stub_wheel_is_named_and_laid_out_as_pip_reads_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let distribution = crate::image::CarriedDistribution {
            name: "MarkupSafe".into(),
            version: "3.0.4".into(),
            metadata: "Metadata-Version: 2.1\nName: MarkupSafe\nVersion: 3.0.4\n".into(),
        };
        write_stub_wheel(dir.path(), &distribution).expect("write");
        let file = "markupsafe-3.0.4-0frognanoimage-py3-none-any.whl";
        assert!(is_carried_stub(file));
        assert!(!is_carried_stub("markupsafe-3.0.4-py3-none-any.whl"));
        let archive = zip::ZipArchive::new(fs::File::open(dir.path().join(file)).expect("open"))
            .expect("a zip");
        let mut members: Vec<&str> = archive.file_names().collect();
        members.sort();
        assert_eq!(
            members,
            [
                "markupsafe-3.0.4.dist-info/METADATA",
                "markupsafe-3.0.4.dist-info/RECORD",
                "markupsafe-3.0.4.dist-info/WHEEL"
            ]
        );
    }

    #[test]
    fn pip_errors_blame_a_requirement() {
        let requirements = vec!["cleo".to_string(), "Rapidfuzz>=3".to_string()];
        let direct = "pip download failed: ERROR: Could not find a version that satisfies the \
                      requirement rapidfuzz>=3 (from versions: none)\nERROR: No matching \
                      distribution found for rapidfuzz>=3";
        assert_eq!(blamed_requirement(direct, &requirements), Some(1));
        let transitive = "ERROR: Could not find a version that satisfies the requirement \
                          ujson (from cleo) (from versions: none)";
        assert_eq!(blamed_requirement(transitive, &requirements), Some(0));
        assert_eq!(
            blamed_requirement("ResolutionImpossible", &requirements),
            None
        );
        assert!(pip_reason(direct, "3.15").starts_with("no pure-Python wheel for Python 3.15"));
        // What a wheel might be built for from its sdist.
        assert_eq!(
            unavailable_requirement(direct).as_deref(),
            Some("rapidfuzz>=3")
        );
        assert_eq!(unavailable_requirement(transitive), None);
    }
}
