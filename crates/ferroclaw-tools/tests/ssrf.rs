//! SSRF guard: a table of internal targets that must be refused (each with its reason
//! category), look-alikes that must pass, the operator allowlist, and redirects served by a
//! local test server.
//!
//! Name resolution uses a `StaticResolver`: test names such as `rebind.test` are mapped to
//! chosen addresses (e.g. 127.0.0.1), which is what a hostile DNS record would do, without
//! touching real DNS. Network traffic only goes to the test server on 127.0.0.1.

use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use axum::extract::Path;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use ferroclaw_tools::ssrf::{
    check_url, guarded_get, AddrClass, DenyKind, FetchError, FetchOptions, Resolver, SsrfPolicy,
    StaticResolver,
};

use AddrClass::*;
use DenyKind::*;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// Hostile (and harmless) DNS answers used by the tables.
fn resolver() -> StaticResolver {
    StaticResolver::new()
        .with("rebind.test", &[ip("127.0.0.1")])
        .with("v6rebind.test", &[ip("::1")])
        .with("dual.test", &[ip("93.184.216.34"), ip("10.0.0.1")])
        .with("meta.test", &[ip("169.254.169.254")])
        .with("169.254.169.254.nip.io", &[ip("169.254.169.254")])
        .with("mapped.test", &[ip("::ffff:192.168.0.10")])
        .with("zero.test", &[ip("0.0.0.0")])
        .with("cgnat.test", &[ip("100.100.1.1")])
        .with("ula.test", &[ip("fd12:3456::1")])
        // Look-alikes resolving to public addresses.
        .with("example.com", &[ip("93.184.216.34")])
        .with("localhost.example.com", &[ip("93.184.216.34")])
        .with("internal.example.org", &[ip("93.184.216.34")])
        .with("local.example.net", &[ip("93.184.216.34")])
        .with("127.0.0.1.example.com", &[ip("93.184.216.34")])
        .with("metadata.example.com", &[ip("93.184.216.34")])
        .with("v6.example.com", &[ip("2606:4700:4700::1111")])
        .with("wiki.corp.example", &[ip("10.1.2.3")])
        .with("db.example.com", &[ip("10.1.2.3")])
        .with("db2.example.com", &[ip("10.2.0.1")])
}

/// (URL, expected refusal category).
const REFUSED: &[(&str, DenyKind)] = &[
    // Loopback in every notation the URL parser accepts.
    ("http://127.0.0.1/", BlockedAddress(Loopback)),
    ("http://127.0.0.1:22/", BlockedAddress(Loopback)),
    (
        "http://user:pass@127.0.0.1:8080/admin",
        BlockedAddress(Loopback),
    ),
    ("http://2130706433/", BlockedAddress(Loopback)),
    ("http://0177.0.0.1/", BlockedAddress(Loopback)),
    ("http://0x7f000001/", BlockedAddress(Loopback)),
    ("http://0x7f.1/", BlockedAddress(Loopback)),
    ("http://127.1/", BlockedAddress(Loopback)),
    ("http://017700000001/", BlockedAddress(Loopback)),
    ("https://0x7f.0.0.1:443/", BlockedAddress(Loopback)),
    ("http://127.0.0.1./", BlockedAddress(Loopback)),
    ("http://127。0。0。1/", BlockedAddress(Loopback)),
    ("http://[::1]/", BlockedAddress(Loopback)),
    ("http://[0:0:0:0:0:0:0:1]/", BlockedAddress(Loopback)),
    ("http://[::ffff:127.0.0.1]/", BlockedAddress(Loopback)),
    ("http://[::ffff:7f00:1]/", BlockedAddress(Loopback)),
    ("http://[::127.0.0.1]/", BlockedAddress(Loopback)),
    ("http://[2002:7f00:1::]/", BlockedAddress(Loopback)),
    // Blocked names, any case, trailing dots, percent-encoded.
    ("http://localhost/", BlockedHostname),
    ("http://LOCALHOST./", BlockedHostname),
    ("http://%6c%6f%63%61%6c%68%6f%73%74/", BlockedHostname),
    ("http://foo.localhost/", BlockedHostname),
    ("http://printer.local/", BlockedHostname),
    ("http://db.internal/", BlockedHostname),
    (
        "http://metadata.google.internal/computeMetadata/v1/",
        BlockedHostname,
    ),
    ("http://metadata/", BlockedHostname),
    ("http://instance-data/latest/meta-data/", BlockedHostname),
    ("http://kubernetes.default.svc/", BlockedHostname),
    ("http://router.home.arpa/", BlockedHostname),
    ("http://intranet/", BlockedHostname),
    // Cloud metadata.
    (
        "http://169.254.169.254/latest/meta-data/",
        BlockedAddress(CloudMetadata),
    ),
    ("http://0xa9.0xfe.0xa9.0xfe/", BlockedAddress(CloudMetadata)),
    ("http://[::ffff:a9fe:a9fe]/", BlockedAddress(CloudMetadata)),
    (
        "http://[64:ff9b::a9fe:a9fe]/",
        BlockedAddress(CloudMetadata),
    ),
    ("http://[fd00:ec2::254]/", BlockedAddress(CloudMetadata)),
    ("http://100.100.100.200/", BlockedAddress(CloudMetadata)),
    ("http://meta.test/", BlockedAddress(CloudMetadata)),
    (
        "http://169.254.169.254.nip.io/",
        BlockedAddress(CloudMetadata),
    ),
    // Private, CGNAT, link-local, unique-local.
    ("http://10.0.0.1/", BlockedAddress(Private)),
    ("http://172.16.0.1/", BlockedAddress(Private)),
    ("http://172.31.255.255/", BlockedAddress(Private)),
    ("http://192.168.1.1/", BlockedAddress(Private)),
    ("http://0300.0250.0.1/", BlockedAddress(Private)),
    ("http://3232235521/", BlockedAddress(Private)),
    ("http://100.64.0.1/", BlockedAddress(SharedCgnat)),
    ("http://169.254.1.1/", BlockedAddress(LinkLocal)),
    ("http://[fe80::1]/", BlockedAddress(LinkLocal)),
    ("http://[fd00::1]/", BlockedAddress(UniqueLocal)),
    ("http://[fc00::1]/", BlockedAddress(UniqueLocal)),
    // Unspecified, multicast, broadcast, reserved, documentation, benchmark.
    ("http://0.0.0.0/", BlockedAddress(Unspecified)),
    ("http://0/", BlockedAddress(Unspecified)),
    ("http://[::]/", BlockedAddress(Unspecified)),
    ("http://224.0.0.1/", BlockedAddress(Multicast)),
    ("http://[ff02::1]/", BlockedAddress(Multicast)),
    ("http://255.255.255.255/", BlockedAddress(Broadcast)),
    ("http://240.0.0.1/", BlockedAddress(Reserved)),
    ("http://[fec0::1]/", BlockedAddress(Reserved)),
    (
        "http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/",
        BlockedAddress(Reserved),
    ),
    ("http://[100::1]/", BlockedAddress(Reserved)),
    ("http://192.0.2.1/", BlockedAddress(Documentation)),
    ("http://[2001:db8::1]/", BlockedAddress(Documentation)),
    ("http://198.18.0.1/", BlockedAddress(Benchmark)),
    // Names that resolve to internal addresses (DNS rebinding style), every address checked.
    ("http://rebind.test/", BlockedAddress(Loopback)),
    ("http://rebind.test:8080/secret", BlockedAddress(Loopback)),
    ("http://v6rebind.test/", BlockedAddress(Loopback)),
    ("http://dual.test/", BlockedAddress(Private)),
    ("http://mapped.test/", BlockedAddress(Private)),
    ("http://zero.test/", BlockedAddress(Unspecified)),
    ("http://cgnat.test/", BlockedAddress(SharedCgnat)),
    ("http://ula.test/", BlockedAddress(UniqueLocal)),
    // Other schemes, broken URLs, unknown names.
    ("file:///etc/passwd", Scheme),
    ("gopher://127.0.0.1:70/", Scheme),
    ("ftp://example.com/", Scheme),
    ("dict://127.0.0.1:11211/", Scheme),
    ("javascript:alert(1)", Scheme),
    ("not a url", InvalidUrl),
    ("http://", InvalidUrl),
    ("http://unknown-name.test/", Resolution),
];

/// Public targets that look like the attacks above and must still pass.
const ALLOWED: &[&str] = &[
    "http://example.com/",
    "https://example.com:8443/path?q=1",
    "http://localhost.example.com/",
    "http://internal.example.org/",
    "http://local.example.net/",
    "http://127.0.0.1.example.com/",
    "http://metadata.example.com/",
    "http://v6.example.com/",
    "http://8.8.8.8/",
    "http://1.1.1.1/",
    "http://100.63.255.255/",
    "http://100.128.0.1/",
    "http://172.15.255.255/",
    "http://172.32.0.1/",
    "http://192.169.0.1/",
    "http://169.255.0.1/",
    "http://[2606:4700:4700::1111]/",
    "http://[::ffff:8.8.8.8]/",
    "http://[2002:808:808::]/",
];

#[tokio::test]
async fn internal_targets_are_refused_with_a_reason() {
    let policy = SsrfPolicy::default();
    let resolver = resolver();
    let mut failures = Vec::new();
    for (url, expected) in REFUSED {
        match check_url(url, &policy, &resolver).await {
            Ok(t) => failures.push(format!("{url}: allowed ({:?})", t.addrs)),
            Err(d) if d.kind != *expected => failures.push(format!(
                "{url}: {:?} ({}) instead of {expected:?}",
                d.kind, d.reason
            )),
            Err(d) => assert!(!d.reason.is_empty() && d.to_string().starts_with("URL refused: ")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(REFUSED.len() >= 40, "{} cases", REFUSED.len());
}

#[tokio::test]
async fn reasons_name_the_problem() {
    let policy = SsrfPolicy::default();
    let r = resolver();
    let reason = |url: &'static str| {
        let r = &r;
        let policy = &policy;
        async move { check_url(url, policy, r).await.unwrap_err().reason }
    };
    assert!(reason("http://0x7f.1/")
        .await
        .contains("127.0.0.1 is a loopback address"));
    let mapped = reason("http://[::ffff:7f00:1]/").await;
    assert!(
        mapped.contains("embeds the IPv4 address 127.0.0.1"),
        "{mapped}"
    );
    let rebind = reason("http://rebind.test/").await;
    assert!(
        rebind.contains("\"rebind.test\" resolves to 127.0.0.1"),
        "{rebind}"
    );
    assert!(reason("http://169.254.169.254/").await.contains("metadata"));
    assert!(reason("file:///etc/passwd")
        .await
        .contains("only http and https"));
    assert!(reason("http://db.internal/").await.contains(".internal"));
}

#[tokio::test]
async fn look_alikes_pass() {
    let policy = SsrfPolicy::default();
    let resolver = resolver();
    for url in ALLOWED {
        let t = check_url(url, &policy, &resolver)
            .await
            .unwrap_or_else(|e| panic!("{url} refused: {}", e.reason));
        assert!(!t.addrs.is_empty(), "{url}");
    }
}

#[tokio::test]
async fn pinned_target_keeps_the_checked_addresses_and_port() {
    let t = check_url(
        "https://dual-ok.example:444/x",
        &SsrfPolicy::default(),
        &StaticResolver::new().with("dual-ok.example", &[ip("8.8.8.8"), ip("2606:4700::1")]),
    )
    .await
    .unwrap();
    assert_eq!(t.host, "dual-ok.example");
    assert_eq!(
        t.addrs,
        vec![
            "8.8.8.8:444".parse().unwrap(),
            "[2606:4700::1]:444".parse().unwrap()
        ]
    );
}

#[tokio::test]
async fn allowlist_opens_only_what_it_names() {
    let r = resolver();
    // Name glob: the host skips the checks.
    let by_name = SsrfPolicy {
        allow_hosts: vec!["*.corp.example".into()],
        allow_private: false,
    };
    assert!(check_url("http://wiki.corp.example/", &by_name, &r)
        .await
        .is_ok());
    assert_eq!(
        check_url("http://db.example.com/", &by_name, &r)
            .await
            .unwrap_err()
            .kind,
        BlockedAddress(Private)
    );
    // CIDR: addresses inside pass, others do not.
    let by_net = SsrfPolicy {
        allow_hosts: vec!["10.1.0.0/16".into()],
        allow_private: false,
    };
    assert!(check_url("http://db.example.com/", &by_net, &r)
        .await
        .is_ok());
    assert!(check_url("http://10.1.9.9/", &by_net, &r).await.is_ok());
    assert_eq!(
        check_url("http://db2.example.com/", &by_net, &r)
            .await
            .unwrap_err()
            .kind,
        BlockedAddress(Private)
    );
    // allow_private: private and loopback pass, metadata and blocked names still do not.
    let private = SsrfPolicy {
        allow_hosts: vec![],
        allow_private: true,
    };
    assert!(check_url("http://127.0.0.1/", &private, &r).await.is_ok());
    assert!(check_url("http://192.168.1.1/", &private, &r).await.is_ok());
    assert_eq!(
        check_url("http://169.254.169.254/", &private, &r)
            .await
            .unwrap_err()
            .kind,
        BlockedAddress(CloudMetadata)
    );
    assert_eq!(
        check_url("http://localhost/", &private, &r)
            .await
            .unwrap_err()
            .kind,
        BlockedHostname
    );
    assert_eq!(
        check_url("http://0.0.0.0/", &private, &r)
            .await
            .unwrap_err()
            .kind,
        BlockedAddress(Unspecified)
    );
}

/// Counts lookups: the guard must ask once per hop, and the HTTP client never.
struct CountingResolver {
    inner: StaticResolver,
    calls: AtomicUsize,
}

#[async_trait]
impl Resolver for CountingResolver {
    async fn resolve(&self, host: &str, port: u16) -> std::io::Result<Vec<std::net::SocketAddr>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.inner.resolve(host, port).await
    }
}

async fn redirect_server() -> std::net::SocketAddr {
    let router = axum::Router::new()
        .route("/secret", get(|| async { "TOP SECRET" }))
        .route("/ok", get(|| async { "public page" }))
        .route(
            "/to",
            get(
                |axum::extract::RawQuery(q): axum::extract::RawQuery| async move {
                    let target = q.unwrap_or_default();
                    let target = target.strip_prefix("u=").unwrap_or(&target).to_string();
                    (StatusCode::FOUND, [(header::LOCATION, target)]).into_response()
                },
            ),
        )
        .route(
            "/chain/{n}",
            get(|Path(n): Path<u32>| async move {
                if n == 0 {
                    "end of chain".into_response()
                } else {
                    (
                        StatusCode::FOUND,
                        [(header::LOCATION, format!("/chain/{}", n - 1))],
                    )
                        .into_response()
                }
            }),
        );
    crate::web_support::serve(router).await
}

/// The test server is on 127.0.0.1, which the guard refuses. It is reached under the name
/// `site.test`, mapped to 127.0.0.1 by the test resolver and allowlisted by name, the way an
/// operator would allow one internal host. The redirect targets are raw addresses the
/// allowlist does not cover, so they must be refused on the second hop.
fn site_policy() -> SsrfPolicy {
    SsrfPolicy {
        allow_hosts: vec!["site.test".into()],
        allow_private: false,
    }
}

fn site_resolver() -> Arc<CountingResolver> {
    Arc::new(CountingResolver {
        inner: StaticResolver::new()
            .with("site.test", &[ip("127.0.0.1")])
            .with("rebind.test", &[ip("127.0.0.1")]),
        calls: AtomicUsize::new(0),
    })
}

#[tokio::test]
async fn open_redirects_to_internal_addresses_are_refused() {
    let addr = redirect_server().await;
    let port = addr.port();
    let cases = [
        (
            format!("http://127.0.0.1:{port}/secret"),
            BlockedAddress(Loopback),
        ),
        (
            "http://169.254.169.254/latest/meta-data/".to_string(),
            BlockedAddress(CloudMetadata),
        ),
        (format!("http://localhost:{port}/secret"), BlockedHostname),
        (
            format!("http://rebind.test:{port}/secret"),
            BlockedAddress(Loopback),
        ),
        (
            format!("http://0x7f.1:{port}/secret"),
            BlockedAddress(Loopback),
        ),
        (
            format!("http://[::ffff:127.0.0.1]:{port}/secret"),
            BlockedAddress(Loopback),
        ),
        ("file:///etc/passwd".to_string(), Scheme),
    ];
    for (target, expected) in cases {
        let r = site_resolver();
        let url = format!("http://site.test:{port}/to?u={target}");
        match guarded_get(&url, &site_policy(), r.clone(), &FetchOptions::default()).await {
            Err(FetchError::Denied(d)) => {
                assert_eq!(d.kind, expected, "{target}: {}", d.reason)
            }
            Ok(resp) => panic!(
                "{target}: redirect followed to {} ({})",
                resp.final_url,
                resp.response.text().await.unwrap_or_default()
            ),
            Err(e) => panic!("{target}: unexpected error {e}"),
        }
    }
}

#[tokio::test]
async fn pinned_connection_and_redirect_limits() {
    let addr = redirect_server().await;
    let port = addr.port();
    let r = site_resolver();
    // `site.test` exists only in the test resolver: the request succeeding proves the client
    // connected to the checked address and asked no other DNS; one lookup for one hop.
    let ok = guarded_get(
        &format!("http://site.test:{port}/ok"),
        &site_policy(),
        r.clone(),
        &FetchOptions::default(),
    )
    .await
    .expect("allowlisted host");
    assert_eq!(ok.response.text().await.unwrap(), "public page");
    assert_eq!(r.calls.load(Ordering::SeqCst), 1);

    // Five redirects are followed (each hop re-checked, so re-resolved), six are not.
    let r = site_resolver();
    let five = guarded_get(
        &format!("http://site.test:{port}/chain/5"),
        &site_policy(),
        r.clone(),
        &FetchOptions::default(),
    )
    .await
    .expect("5 redirects");
    assert_eq!(five.redirects, 5);
    assert_eq!(five.response.text().await.unwrap(), "end of chain");
    assert_eq!(r.calls.load(Ordering::SeqCst), 6);
    match guarded_get(
        &format!("http://site.test:{port}/chain/6"),
        &site_policy(),
        site_resolver(),
        &FetchOptions::default(),
    )
    .await
    {
        Err(FetchError::Denied(d)) => assert_eq!(d.kind, TooManyRedirects, "{}", d.reason),
        other => panic!("expected too many redirects, got {other:?}"),
    }
}

#[tokio::test]
async fn unallowlisted_loopback_server_is_not_reached() {
    let addr = redirect_server().await;
    match guarded_get(
        &format!("http://{addr}/secret"),
        &SsrfPolicy::default(),
        site_resolver(),
        &FetchOptions::default(),
    )
    .await
    {
        Err(FetchError::Denied(d)) => assert_eq!(d.kind, BlockedAddress(Loopback)),
        other => panic!("expected refusal, got {other:?}"),
    }
}
