//! The gateway's operator credential. A gateway never serves without one: the
//! environment (`FERROCLAW_GATEWAY_TOKEN`, also from `.env.local`) wins; otherwise the
//! first start generates a random token into `<home>/data/gateway.token` (mode 0600),
//! and every later start, and the CLI on the same machine, read it from there. A page
//! in a browser can neither read that file nor guess the token, which is what keeps
//! cross-site requests from driving a gateway on loopback.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use crate::Env;

pub const TOKEN_ENV: &str = "FERROCLAW_GATEWAY_TOKEN";
pub const VIEWER_TOKEN_ENV: &str = "FERROCLAW_GATEWAY_VIEWER_TOKEN";

/// Where the token came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenSource {
    Environment,
    /// Read from the token file written by an earlier start.
    File,
    /// Generated and written just now.
    Generated,
}

#[derive(Debug, Clone)]
pub struct GatewayToken {
    pub token: String,
    pub source: TokenSource,
    pub path: PathBuf,
}

/// `<home>/data/gateway.token`.
pub fn token_path(home: &Path) -> PathBuf {
    home.join("data").join("gateway.token")
}

/// The token if one exists (environment, then file); never creates one.
pub fn read_gateway_token(home: &Path, env: &Env) -> std::io::Result<Option<GatewayToken>> {
    read_gateway_token_from(home, env.get(TOKEN_ENV))
}

/// As [`read_gateway_token`], with the value of `FERROCLAW_GATEWAY_TOKEN` already read
/// (`GatewaySettings::token_from_env`).
pub fn read_gateway_token_from(
    home: &Path,
    from_env: Option<&str>,
) -> std::io::Result<Option<GatewayToken>> {
    let path = token_path(home);
    if let Some(t) = from_env.map(str::trim).filter(|t| !t.is_empty()) {
        return Ok(Some(GatewayToken {
            token: t.to_string(),
            source: TokenSource::Environment,
            path,
        }));
    }
    match std::fs::read_to_string(&path) {
        Ok(s) if !s.trim().is_empty() => Ok(Some(GatewayToken {
            token: s.trim().to_string(),
            source: TokenSource::File,
            path,
        })),
        Ok(_) => Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// The token, generating and storing one on first use.
pub fn load_or_create_gateway_token(home: &Path, env: &Env) -> std::io::Result<GatewayToken> {
    load_or_create_gateway_token_from(home, env.get(TOKEN_ENV))
}

/// As [`load_or_create_gateway_token`], with the value of `FERROCLAW_GATEWAY_TOKEN`
/// already read (`GatewaySettings::token_from_env`).
pub fn load_or_create_gateway_token_from(
    home: &Path,
    from_env: Option<&str>,
) -> std::io::Result<GatewayToken> {
    if let Some(t) = read_gateway_token_from(home, from_env)? {
        return Ok(t);
    }
    let path = token_path(home);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    // 244 random bits from the OS generator (v4 UUIDs use getrandom).
    let token = format!(
        "fc_{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    );
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    match opts.open(&path) {
        Ok(mut f) => {
            f.write_all(token.as_bytes())?;
            f.write_all(b"\n")?;
            f.sync_all()?;
            Ok(GatewayToken {
                token,
                source: TokenSource::Generated,
                path,
            })
        }
        // Another process (a second start, the CLI) wrote it first: use theirs.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            read_gateway_token_from(home, from_env)?
                .ok_or_else(|| std::io::Error::other("the gateway token file is empty"))
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_once_private_and_reused() {
        let home = tempfile::tempdir().expect("tempdir");
        let env = Env::default();
        let first = load_or_create_gateway_token(home.path(), &env).expect("create");
        assert_eq!(first.source, TokenSource::Generated);
        assert!(first.token.len() >= 64);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&first.path)
                .expect("meta")
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let again = load_or_create_gateway_token(home.path(), &env).expect("read");
        assert_eq!(
            (again.token.as_str(), again.source),
            (first.token.as_str(), TokenSource::File)
        );
        let other = load_or_create_gateway_token(tempfile::tempdir().expect("t").path(), &env)
            .expect("other home");
        assert_ne!(other.token, first.token);
    }

    #[test]
    fn the_environment_wins_and_nothing_is_written() {
        let home = tempfile::tempdir().expect("tempdir");
        let env = Env::from_pairs([(TOKEN_ENV, "from-env")]);
        let t = load_or_create_gateway_token(home.path(), &env).expect("token");
        assert_eq!(
            (t.token.as_str(), t.source),
            ("from-env", TokenSource::Environment)
        );
        assert!(!token_path(home.path()).exists());
    }
}
