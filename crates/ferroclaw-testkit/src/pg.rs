//! A PostgreSQL server for tests: the one `FERROCLAW_TEST_DATABASE_URL` names, else a
//! throwaway cluster started from the installed binaries (`initdb` + `postgres`) in a
//! temporary directory on a free port, once per test process. Never a silent skip: with
//! neither, the tests that need it fail and say what to install.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, OnceLock};
use std::time::{Duration, Instant};

struct Cluster {
    url: String,
}

static CLUSTER: OnceLock<Result<Cluster, String>> = OnceLock::new();

/// The base URL of a server the tests may create databases on (as a superuser).
/// Panics with the reason when there is none and none can be started.
pub fn server_url() -> String {
    if let Ok(url) = std::env::var("FERROCLAW_TEST_DATABASE_URL") {
        if !url.trim().is_empty() {
            return url;
        }
    }
    match CLUSTER.get_or_init(start_on_keeper_thread) {
        Ok(c) => c.url.clone(),
        Err(e) => panic!(
            "PostgreSQL tests need a server: set FERROCLAW_TEST_DATABASE_URL, or install PostgreSQL's binaries (apt-get install -y postgresql) so a throwaway one can be started ({e})"
        ),
    }
}

/// A new, empty database on the test server (so tests never see each other's rows);
/// returns its URL.
pub async fn fresh_database() -> String {
    let base = server_url();
    let (client, conn) = tokio_postgres::connect(&base, tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to the test server {base}: {e}"));
    tokio::spawn(conn);
    let name = format!(
        "ferroclaw_t_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    // Two statements: several in one string would share a transaction, where CREATE
    // DATABASE may not run. A name left by an earlier process with the same pid goes.
    for sql in [
        format!("DROP DATABASE IF EXISTS {name}"),
        format!("CREATE DATABASE {name}"),
    ] {
        client
            .batch_execute(&sql)
            .await
            .unwrap_or_else(|e| panic!("cannot create a test database: {e}"));
    }
    let (prefix, _) = base
        .rsplit_once('/')
        .unwrap_or_else(|| panic!("the test server URL names no database: {base}"));
    format!("{prefix}/{name}")
}

static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn bin_dir() -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path().join("bin"))
        .filter(|p| p.join("initdb").is_file() && p.join("postgres").is_file())
        .collect();
    dirs.sort();
    dirs.pop()
}

/// PostgreSQL refuses to run as root: as root, the server runs as the `postgres` user.
fn run_as() -> Option<(u32, u32)> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return None;
    }
    let name = std::ffi::CString::new("postgres").ok()?;
    // SAFETY: getpwnam returns a pointer into static storage or null; read at once.
    let pw = unsafe { libc::getpwnam(name.as_ptr()) };
    if pw.is_null() {
        return None;
    }
    // SAFETY: checked non-null above.
    Some(unsafe { ((*pw).pw_uid, (*pw).pw_gid) })
}

fn command(bin: &Path, ids: Option<(u32, u32)>) -> Command {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(bin);
    // SAFETY: only async-signal-safe calls between fork and exec. The death signal is
    // set after the credentials change (a change clears it), so the server ends with
    // the test process even when it is killed.
    unsafe {
        cmd.pre_exec(move || {
            if let Some((uid, gid)) = ids {
                if libc::setgroups(0, std::ptr::null()) != 0
                    || libc::setgid(gid) != 0
                    || libc::setuid(uid) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
            }
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd
}

/// The server's death signal is tied to the thread that started it, so it is started
/// by a thread that lives as long as the process (test threads come and go).
fn start_on_keeper_thread() -> Result<Cluster, String> {
    remove_stale_clusters();
    let (tx, rx) = mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("test-postgres".into())
        .spawn(move || match start() {
            Ok((cluster, server)) => {
                let _ = tx.send(Ok(cluster));
                let _keep = server;
                loop {
                    std::thread::park();
                }
            }
            Err(e) => {
                let _ = tx.send(Err(e));
            }
        });
    if let Err(e) = spawned {
        return Err(e.to_string());
    }
    rx.recv().map_err(|e| e.to_string())?
}

/// Throwaway clusters of test processes that have ended (a process's exit runs no
/// destructor, so their directories stay behind until the next run). Each directory
/// names the test process that made it; one whose process still runs is in use (maybe
/// by a test of this very process, still running initdb).
fn remove_stale_clusters() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for e in entries.filter_map(Result::ok) {
        let path = e.path();
        if !e.file_name().to_string_lossy().starts_with("ferroclaw-pg-") {
            continue;
        }
        let Some(owner) = std::fs::read_to_string(path.join(OWNER_FILE))
            .ok()
            .and_then(|s| s.trim().parse::<i32>().ok())
        else {
            // Being created right now (the owner file comes first), or not ours.
            continue;
        };
        // SAFETY: signal 0 only checks that the process exists.
        if unsafe { libc::kill(owner, 0) } != 0 {
            let _ = std::fs::remove_dir_all(&path);
        }
    }
}

/// In each cluster directory: the pid of the test process that made it.
const OWNER_FILE: &str = "owner.pid";

fn start() -> Result<(Cluster, OwnServer), String> {
    let server = OwnServer::start()?;
    Ok((
        Cluster {
            url: server.url.clone(),
        },
        server,
    ))
}

/// A PostgreSQL server of one test's own, which the test may stop and start again (a
/// database that goes away and comes back). Stopped when dropped.
pub struct OwnServer {
    url: String,
    port: u16,
    bin: PathBuf,
    ids: Option<(u32, u32)>,
    dir: tempfile::TempDir,
    server: Option<Child>,
    /// Settings given to the server on the command line at every start.
    settings: Vec<String>,
}

/// The files of a server that speaks TLS: the root its certificate chains to.
pub struct TlsFiles {
    /// PEM of the test CA that signed the server's certificate.
    pub ca: PathBuf,
}

impl OwnServer {
    /// A fresh cluster in a temporary directory on a free port, running.
    pub fn start() -> Result<OwnServer, String> {
        remove_stale_clusters();
        let bin = bin_dir().ok_or("no initdb under /usr/lib/postgresql/*/bin")?;
        let ids = run_as();
        let dir = tempfile::Builder::new()
            .prefix("ferroclaw-pg-")
            .tempdir()
            .map_err(|e| e.to_string())?;
        std::fs::write(dir.path().join(OWNER_FILE), std::process::id().to_string())
            .map_err(|e| e.to_string())?;
        if let Some((uid, gid)) = ids {
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid))
                .map_err(|e| e.to_string())?;
        }
        let out = command(&bin.join("initdb"), ids)
            .args([
                "-A",
                "trust",
                "-U",
                "postgres",
                "--no-sync",
                "-E",
                "UTF8",
                "-D",
            ])
            .arg(dir.path().join("data"))
            .stdout(Stdio::null())
            .output()
            .map_err(|e| format!("initdb: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "initdb failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| e.to_string())?
            .port();
        let mut server = OwnServer {
            url: format!("postgres://postgres@127.0.0.1:{port}/postgres"),
            port,
            bin,
            ids,
            dir,
            server: None,
            settings: Vec::new(),
        };
        server.resume()?;
        Ok(server)
    }

    /// A fresh cluster that accepts TCP connections only over TLS (plain TCP is
    /// rejected by `pg_hba.conf`; the Unix socket stays open for checks). Its
    /// certificate is signed by a CA of its own and names `subject_alt_names` (openssl
    /// syntax, e.g. `IP:127.0.0.1,DNS:localhost`). Needs the `openssl` command.
    pub fn start_tls(subject_alt_names: &str) -> Result<(OwnServer, TlsFiles), String> {
        let mut server = OwnServer::start()?;
        server.stop();
        let dir = server.dir.path().to_path_buf();
        let openssl = |args: &[&str]| -> Result<(), String> {
            let out = Command::new("openssl")
                .args(args)
                .current_dir(&dir)
                .output()
                .map_err(|e| format!("openssl (apt-get install -y openssl): {e}"))?;
            if out.status.success() {
                Ok(())
            } else {
                Err(format!(
                    "openssl {args:?}: {}",
                    String::from_utf8_lossy(&out.stderr)
                ))
            }
        };
        let ec = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ];
        openssl(
            &[
                &["req", "-x509"][..],
                &ec,
                &[
                    "-keyout",
                    "ca.key",
                    "-out",
                    "ca.crt",
                    "-days",
                    "2",
                    "-subj",
                    "/CN=ferroclaw test CA",
                    "-addext",
                    "basicConstraints=critical,CA:TRUE",
                    "-addext",
                    "keyUsage=critical,keyCertSign,cRLSign",
                ],
            ]
            .concat(),
        )?;
        openssl(
            &[
                &["req"][..],
                &ec,
                &[
                    "-keyout",
                    "server.key",
                    "-out",
                    "server.csr",
                    "-subj",
                    "/CN=ferroclaw test server",
                ],
            ]
            .concat(),
        )?;
        std::fs::write(
            dir.join("server.ext"),
            format!(
                "basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\nsubjectAltName={subject_alt_names}\n"
            ),
        )
        .map_err(|e| e.to_string())?;
        openssl(&[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.crt",
            "-days",
            "2",
            "-extfile",
            "server.ext",
        ])?;
        // The server refuses a key others can read, and must own it.
        let key = dir.join("server.key");
        std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .map_err(|e| e.to_string())?;
        if let Some((uid, gid)) = server.ids {
            for f in ["server.key", "server.crt"] {
                std::os::unix::fs::chown(dir.join(f), Some(uid), Some(gid))
                    .map_err(|e| e.to_string())?;
            }
        }
        std::fs::write(
            dir.join("data").join("pg_hba.conf"),
            "local all all trust\nhostssl all all 127.0.0.1/32 trust\nhostnossl all all 127.0.0.1/32 reject\n",
        )
        .map_err(|e| e.to_string())?;
        server.settings = vec![
            "ssl=on".into(),
            format!("ssl_cert_file={}", dir.join("server.crt").display()),
            format!("ssl_key_file={}", key.display()),
        ];
        server.resume()?;
        Ok((
            server,
            TlsFiles {
                ca: dir.join("ca.crt"),
            },
        ))
    }

    /// A `key=value` DSN over the server's Unix socket (no TLS there), as superuser.
    pub fn socket_dsn(&self) -> String {
        format!(
            "host={} port={} user=postgres dbname=postgres",
            self.dir.path().display(),
            self.port
        )
    }

    /// The TCP port it listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A superuser URL of its `postgres` database.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Stops the server at once (fast shutdown: connections are cut), and waits for it.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.server.take() {
            // SAFETY: signalling our own child.
            unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port and data; returns once it accepts connections.
    pub fn resume(&mut self) -> Result<(), String> {
        // The server's own words, for when it does not come up.
        let log_path = self.dir.path().join("server.log");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(|e| e.to_string())?;
        let child = command(&self.bin.join("postgres"), self.ids)
            .arg("-D")
            .arg(self.dir.path().join("data"))
            .args(["-p", &self.port.to_string(), "-k"])
            .arg(self.dir.path())
            .args([
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                "fsync=off",
                "-c",
                "max_connections=300",
            ])
            .args(self.settings.iter().flat_map(|s| ["-c", s.as_str()]))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("postgres: {e}"))?;
        self.server = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let ready = command(&self.bin.join("pg_isready"), None)
                .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-q"])
                .status()
                .is_ok_and(|s| s.success());
            if ready {
                return Ok(());
            }
            if Instant::now() > deadline {
                let log = std::fs::read_to_string(&log_path).unwrap_or_default();
                return Err(format!(
                    "the server did not accept connections within 30 s; its log:\n{log}"
                ));
            }
            // Polling the server's readiness, bounded by the deadline above.
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for OwnServer {
    fn drop(&mut self) {
        self.stop();
    }
}
