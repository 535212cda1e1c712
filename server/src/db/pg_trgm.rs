//! pg_trgm for the embedded PostgreSQL. The wheel ships only `plpgsql` and `vector`, so the
//! extension's C sources (vendored from PostgreSQL 18.6 in `vendor/pg_trgm`, embedded in this
//! binary) are compiled once against the wheel's headers with PGXS and installed into the cached
//! PostgreSQL. Needs gcc and make; takes about two seconds.

use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context, Result, bail};

use crate::files::write_atomic;

macro_rules! vendored {
    ($($file:literal),* $(,)?) => {
        [$(($file, include_str!(concat!("../../../vendor/pg_trgm/", $file)))),*]
    };
}

const SOURCES: [(&str, &str); 13] = vendored!(
    "Makefile",
    "trgm.h",
    "trgm_gin.c",
    "trgm_gist.c",
    "trgm_op.c",
    "trgm_regexp.c",
    "pg_trgm.control",
    "pg_trgm--1.3.sql",
    "pg_trgm--1.0--1.1.sql",
    "pg_trgm--1.1--1.2.sql",
    "pg_trgm--1.2--1.3.sql",
    "pg_trgm--1.3--1.4.sql",
    "pg_trgm--1.4--1.5.sql",
);
const LAST_UPGRADE: (&str, &str) = (
    "pg_trgm--1.5--1.6.sql",
    include_str!("../../../vendor/pg_trgm/pg_trgm--1.5--1.6.sql"),
);

/// Builds and installs pg_trgm into the installation `pg_config` belongs to, unless it is there.
pub fn ensure_installed(pg_config: &Path) -> Result<()> {
    let pkglib = PathBuf::from(query(pg_config, "--pkglibdir")?);
    let library = pkglib.join("pg_trgm.so");
    if library.exists() {
        return Ok(());
    }
    for tool in ["gcc", "make"] {
        if Command::new(tool).arg("--version").output().is_err() {
            bail!(
                "building pg_trgm for the embedded PostgreSQL needs {tool} (apt-get install gcc make)"
            );
        }
    }
    tracing::info!("building pg_trgm for the embedded PostgreSQL (once)");
    let build = pkglib.join(format!("pg_trgm-build-{}", crate::files::unique_suffix()));
    let result = build_and_install(pg_config, &build, &pkglib);
    let _ = fs::remove_dir_all(&build);
    result
}

fn build_and_install(pg_config: &Path, build: &Path, pkglib: &Path) -> Result<()> {
    fs::create_dir_all(build)?;
    for (name, text) in SOURCES.iter().chain([&LAST_UPGRADE]) {
        fs::write(build.join(name), text)?;
    }
    // The wheel was built by gcc 14, whose flags include one older gcc rejects.
    let cflags = query(pg_config, "--cflags")?.replace("-Wmissing-variable-declarations", "");
    let output = Command::new("make")
        .current_dir(build)
        .arg("-s")
        .arg("USE_PGXS=1")
        .arg(format!("PG_CONFIG={}", pg_config.display()))
        .arg(format!("CFLAGS={cflags}"))
        .arg("rpath=")
        .output()
        .context("running make for pg_trgm")?;
    if !output.status.success() {
        bail!(
            "building pg_trgm failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    // Scripts first, the library last: its presence is what says "installed".
    let extensions = PathBuf::from(query(pg_config, "--sharedir")?).join("extension");
    for (name, text) in SOURCES.iter().chain([&LAST_UPGRADE]) {
        if name.ends_with(".sql") || name.ends_with(".control") {
            install_file(&extensions, name, text.as_bytes())?;
        }
    }
    install_file(pkglib, "pg_trgm.so", &fs::read(build.join("pg_trgm.so"))?)
}

fn install_file(dir: &Path, name: &str, bytes: &[u8]) -> Result<()> {
    Ok(write_atomic(&dir.join(name), bytes, 0o644)?)
}

fn query(pg_config: &Path, flag: &str) -> Result<String> {
    let output = Command::new(pg_config)
        .arg(flag)
        .output()
        .context("running pg_config")?;
    if !output.status.success() {
        bail!("pg_config {flag} failed");
    }
    Ok(String::from_utf8(output.stdout)?.trim().to_string())
}
