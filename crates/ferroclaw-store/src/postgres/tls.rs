//! TLS to PostgreSQL with libpq's `sslmode` meanings, over rustls. The DSN's `sslmode`
//! and `sslrootcert` are taken out before tokio-postgres reads the rest (it knows only
//! `disable | prefer | require` and verifies nothing itself):
//!
//! - `disable`: plain TCP.
//! - `allow`, `prefer` (the default): TLS when the server offers it, else plain TCP.
//! - `require`: TLS or no connection.
//! - `verify-ca`: TLS, and the server's certificate must chain to a trusted root.
//! - `verify-full`: as `verify-ca`, and the certificate must name the host connected to.
//!
//! Roots are the PEM file `sslrootcert` names, or the public web roots when it is absent
//! or `system`. As in libpq, an explicit `sslrootcert` makes `prefer` and `require` check
//! the chain too. Client certificates (`sslcert`, `sslkey`) are refused by name rather
//! than ignored. SCRAM channel binding is not offered (plain SCRAM is used).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::config::SslMode;
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect};

/// What the DSN asks of the connection's encryption.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

/// Parses a DSN (URL or `key=value` form) into tokio-postgres's config and the TLS
/// connector its `sslmode` calls for. Errors are meant for the operator's eyes.
pub(crate) fn parse(dsn: &str) -> Result<(tokio_postgres::Config, MakeTls), String> {
    let (rest, ssl) = split_ssl_params(dsn)?;
    let mut config: tokio_postgres::Config = rest.parse().map_err(|e| format!("{e}"))?;
    let mode = match ssl.mode.as_deref() {
        None | Some("prefer") | Some("allow") => Mode::Prefer,
        Some("disable") => Mode::Disable,
        Some("require") => Mode::Require,
        Some("verify-ca") => Mode::VerifyCa,
        Some("verify-full") => Mode::VerifyFull,
        Some(other) => {
            return Err(format!(
                "sslmode `{other}` is not one of disable, allow, prefer, require, verify-ca, verify-full"
            ))
        }
    };
    config.ssl_mode(match mode {
        Mode::Disable => SslMode::Disable,
        Mode::Prefer => SslMode::Prefer,
        Mode::Require | Mode::VerifyCa | Mode::VerifyFull => SslMode::Require,
    });
    let check = match (mode, ssl.root_cert.is_some()) {
        (Mode::VerifyFull, _) => Check::Full,
        (Mode::VerifyCa, _) | (Mode::Prefer | Mode::Require, true) => Check::Chain,
        _ => Check::Nothing,
    };
    let tls = MakeTls::new(check, ssl.root_cert.as_deref())?;
    Ok((config, tls))
}

#[derive(Default)]
struct SslParams {
    mode: Option<String>,
    root_cert: Option<String>,
}

/// Parameters tokio-postgres would not understand, or would misread, are refused here
/// with their name.
fn take(params: &mut SslParams, key: &str, value: String) -> Result<bool, String> {
    match key {
        "sslmode" => params.mode = Some(value),
        "sslrootcert" => params.root_cert = Some(value),
        "sslcert" | "sslkey" | "sslpassword" | "sslcrl" | "sslcrldir" | "sslsni" => {
            return Err(format!(
                "`{key}` is not supported (client certificates and CRLs are not implemented); remove it from FERROCLAW_DATABASE_URL"
            ))
        }
        _ => return Ok(false),
    }
    Ok(true)
}

fn split_ssl_params(dsn: &str) -> Result<(String, SslParams), String> {
    let mut params = SslParams::default();
    let trimmed = dsn.trim();
    if trimmed.starts_with("postgres://") || trimmed.starts_with("postgresql://") {
        let Some((base, query)) = trimmed.split_once('?') else {
            return Ok((trimmed.to_string(), params));
        };
        let mut kept = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let value = percent_encoding::percent_decode_str(v)
                .decode_utf8()
                .map_err(|_| format!("the value of `{k}` is not UTF-8"))?
                .into_owned();
            if !take(&mut params, k, value)? {
                kept.push(pair);
            }
        }
        let rest = if kept.is_empty() {
            base.to_string()
        } else {
            format!("{base}?{}", kept.join("&"))
        };
        return Ok((rest, params));
    }
    let mut kept = Vec::new();
    for (k, v) in key_values(trimmed)? {
        if !take(&mut params, &k, v.clone())? {
            kept.push(format!(
                "{k}='{}'",
                v.replace('\\', "\\\\").replace('\'', "\\'")
            ));
        }
    }
    Ok((kept.join(" "), params))
}

/// The pairs of a libpq `key=value` string (values optionally single-quoted, `\` escapes).
fn key_values(s: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    let mut chars = s.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.peek().is_none() {
            return Ok(out);
        }
        let mut key = String::new();
        while let Some(c) = chars.next_if(|c| *c != '=' && !c.is_whitespace()) {
            key.push(c);
        }
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.next() != Some('=') {
            return Err(format!("missing `=` after `{key}` in the database URL"));
        }
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let mut value = String::new();
        if chars.next_if_eq(&'\'').is_some() {
            loop {
                match chars.next() {
                    Some('\'') => break,
                    Some('\\') => value.extend(chars.next()),
                    Some(c) => value.push(c),
                    None => return Err(format!("unterminated quote in the value of `{key}`")),
                }
            }
        } else {
            while let Some(c) = chars.next_if(|c| !c.is_whitespace()) {
                if c == '\\' {
                    value.extend(chars.next());
                } else {
                    value.push(c);
                }
            }
        }
        out.push((key, value));
    }
}

/// How much of the server's certificate is checked.
#[derive(Debug, Clone, Copy)]
enum Check {
    Nothing,
    Chain,
    Full,
}

/// The TLS connector tokio-postgres and the pool use.
#[derive(Clone)]
pub(crate) struct MakeTls {
    config: Arc<rustls::ClientConfig>,
}

impl MakeTls {
    fn new(check: Check, root_cert: Option<&str>) -> Result<MakeTls, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let roots = || -> Result<Arc<RootCertStore>, String> {
            let mut store = RootCertStore::empty();
            match root_cert {
                None | Some("system") => {
                    store.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
                }
                Some(path) => {
                    let certs = CertificateDer::pem_file_iter(path)
                        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
                        .map_err(|e| format!("sslrootcert {path}: {e}"))?;
                    let (added, _) = store.add_parsable_certificates(certs);
                    if added == 0 {
                        return Err(format!("sslrootcert {path}: no certificate in it"));
                    }
                }
            }
            Ok(Arc::new(store))
        };
        let verifier: Arc<dyn ServerCertVerifier> = match check {
            Check::Nothing => Arc::new(AnyCertificate(provider.clone())),
            Check::Chain | Check::Full => {
                let webpki =
                    WebPkiServerVerifier::builder_with_provider(roots()?, provider.clone())
                        .build()
                        .map_err(|e| format!("TLS roots: {e}"))?;
                if matches!(check, Check::Full) {
                    webpki
                } else {
                    Arc::new(ChainOnly(webpki))
                }
            }
        };
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_no_client_auth();
        // What PostgreSQL 17 expects of a client that negotiates TLS directly.
        config.alpn_protocols = vec![b"postgresql".to_vec()];
        Ok(MakeTls {
            config: Arc::new(config),
        })
    }
}

/// `prefer` / `require` without roots: encrypted, the peer unauthenticated (as libpq).
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// `verify-ca`: the chain must reach a trusted root; the names in it are not checked.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        // The name is checked after the chain, so a name error means the chain is good.
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

impl<S> MakeTlsConnect<S> for MakeTls
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = TlsStream<S>;
    type TlsConnect = Connect;
    type Error = io::Error;

    fn make_tls_connect(&mut self, domain: &str) -> io::Result<Connect> {
        let name = ServerName::try_from(domain.to_string())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        Ok(Connect {
            connector: tokio_rustls::TlsConnector::from(self.config.clone()),
            name,
        })
    }
}

pub(crate) struct Connect {
    connector: tokio_rustls::TlsConnector,
    name: ServerName<'static>,
}

type Handshake<S> = Pin<Box<dyn Future<Output = io::Result<TlsStream<S>>> + Send>>;

impl<S> TlsConnect<S> for Connect
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = TlsStream<S>;
    type Error = io::Error;
    type Future = Handshake<S>;

    fn connect(self, stream: S) -> Handshake<S> {
        Box::pin(async move {
            let tls = self.connector.connect(self.name, stream).await?;
            Ok(TlsStream(tls))
        })
    }
}

/// An encrypted connection to the server.
pub(crate) struct TlsStream<S>(tokio_rustls::client::TlsStream<S>);

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for TlsStream<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for TlsStream<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_shutdown(cx)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> tokio_postgres::tls::TlsStream for TlsStream<S> {
    fn channel_binding(&self) -> ChannelBinding {
        ChannelBinding::none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ssl_parameters_are_taken_out_of_both_dsn_forms() {
        let (rest, p) =
            split_ssl_params("postgres://u@h:5/db?sslmode=verify-full&sslrootcert=%2Ftmp%2Fca%20x.pem&application_name=a")
                .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(rest, "postgres://u@h:5/db?application_name=a");
        assert_eq!(p.mode.as_deref(), Some("verify-full"));
        assert_eq!(p.root_cert.as_deref(), Some("/tmp/ca x.pem"));

        let (rest, p) = split_ssl_params(
            "host=h user = u sslmode=require sslrootcert='/tmp/it\\'s ca.pem' password='a b'",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(rest, "host='h' user='u' password='a b'");
        assert_eq!(p.mode.as_deref(), Some("require"));
        assert_eq!(p.root_cert.as_deref(), Some("/tmp/it's ca.pem"));
        let parsed: Result<tokio_postgres::Config, _> = rest.parse();
        assert!(parsed.is_ok(), "{parsed:?}");
    }

    #[test]
    fn unsupported_or_malformed_ssl_settings_are_refused_by_name() {
        let err = |dsn: &str| match parse(dsn) {
            Ok(_) => panic!("accepted {dsn}"),
            Err(e) => e,
        };
        assert!(err("postgres://h/db?sslmode=verify").contains("sslmode `verify`"));
        assert!(err("postgres://h/db?sslcert=/c.pem").contains("`sslcert` is not supported"));
        assert!(err("host=h sslkey=/k.pem").contains("`sslkey` is not supported"));
        assert!(err("host=h sslrootcert='/nope").contains("unterminated quote"));
        assert!(
            err("postgres://h/db?sslmode=verify-ca&sslrootcert=/does/not/exist")
                .contains("sslrootcert /does/not/exist")
        );
        // Plain look-alikes still parse.
        assert!(parse("postgres://h/db").is_ok());
        assert!(parse("postgres://h/db?sslmode=disable").is_ok());
        assert!(parse("host=h dbname=d sslmode=verify-full").is_ok());
    }
}
