//! SSRF guard for every outbound request made on the model's behalf.
//!
//! The model chooses URLs; a URL can point at the gateway's own machine, the LAN or a cloud
//! metadata service. [`check_url`] decides whether a URL may be fetched and returns the
//! addresses it was checked against; [`guarded_get`] then connects to exactly those
//! addresses (a resolver that answers only for the checked host, so DNS is asked once and a
//! rebinding answer can never be used) and follows redirects by hand, checking every hop.
//!
//! Host parsing is the WHATWG URL parser of the `url` crate, the same one reqwest uses, so
//! every IPv4 spelling it accepts (`2130706433`, `0177.0.0.1`, `0x7f.1`, `127.1`, …) is
//! checked as the address reqwest would connect to, not as a string. Names are resolved and
//! every address they resolve to must pass; IPv6 addresses that embed an IPv4 address
//! (mapped, compatible, NAT64, 6to4) are judged by the embedded address too.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use url::{Host, Url};

/// Redirects followed before giving up (each one re-checked).
pub const MAX_REDIRECTS: usize = 5;

/// How long one name resolution may take.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(10);

/// What the operator allows beyond the default (public addresses only); filled from
/// `tools.web.ssrf`.
pub type SsrfPolicy = ferroclaw_config::settings::SsrfSettings;

/// Why an address is not a public unicast address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AddrClass {
    Unspecified,
    Loopback,
    /// RFC 1918 ranges and local-use NAT64.
    Private,
    /// 100.64.0.0/10, carrier-grade NAT.
    SharedCgnat,
    LinkLocal,
    /// 169.254.169.254 and friends: credentials live there.
    CloudMetadata,
    UniqueLocal,
    Multicast,
    Broadcast,
    Documentation,
    Benchmark,
    /// IETF reserved / deprecated / tunnel ranges and everything outside global unicast.
    Reserved,
}

impl AddrClass {
    pub fn label(self) -> &'static str {
        match self {
            Self::Unspecified => "an unspecified address",
            Self::Loopback => "a loopback address",
            Self::Private => "a private network address",
            Self::SharedCgnat => "a carrier-grade NAT (shared) address",
            Self::LinkLocal => "a link-local address",
            Self::CloudMetadata => "a cloud metadata service address",
            Self::UniqueLocal => "a unique-local IPv6 address",
            Self::Multicast => "a multicast address",
            Self::Broadcast => "the broadcast address",
            Self::Documentation => "a documentation-only address",
            Self::Benchmark => "a benchmarking address",
            Self::Reserved => "a reserved address",
        }
    }

    /// Classes an operator can open with `allow_private`.
    fn relaxed_by_allow_private(self) -> bool {
        matches!(
            self,
            Self::Loopback
                | Self::Private
                | Self::SharedCgnat
                | Self::LinkLocal
                | Self::UniqueLocal
        )
    }
}

/// Category of a refusal (tests and logs match on it; the text is in [`SsrfDenied::reason`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DenyKind {
    InvalidUrl,
    Scheme,
    BlockedHostname,
    BlockedAddress(AddrClass),
    Resolution,
    TooManyRedirects,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("URL refused: {reason}")]
pub struct SsrfDenied {
    pub kind: DenyKind,
    pub reason: String,
}

impl SsrfDenied {
    fn new(kind: DenyKind, reason: impl Into<String>) -> Self {
        Self {
            kind,
            reason: reason.into(),
        }
    }
}

/// A URL that passed the guard, with the only addresses it may be connected to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinnedTarget {
    pub url: Url,
    /// The host exactly as it appears in the URL (what the HTTP client will look up).
    pub host: String,
    pub addrs: Vec<SocketAddr>,
}

/// Name resolution, injectable so tests can map names to loopback without touching DNS.
#[async_trait]
pub trait Resolver: Send + Sync {
    async fn resolve(&self, host: &str, port: u16) -> std::io::Result<Vec<SocketAddr>>;
}

/// The operating system's resolver (`getaddrinfo` through tokio).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemResolver;

#[async_trait]
impl Resolver for SystemResolver {
    async fn resolve(&self, host: &str, port: u16) -> std::io::Result<Vec<SocketAddr>> {
        Ok(tokio::net::lookup_host((host, port)).await?.collect())
    }
}

/// A fixed table of names → addresses; unknown names fail to resolve.
#[derive(Debug, Clone, Default)]
pub struct StaticResolver {
    table: HashMap<String, Vec<IpAddr>>,
}

impl StaticResolver {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn with(mut self, host: &str, addrs: &[IpAddr]) -> Self {
        self.table.insert(normalize_host(host), addrs.to_vec());
        self
    }
}

#[async_trait]
impl Resolver for StaticResolver {
    async fn resolve(&self, host: &str, port: u16) -> std::io::Result<Vec<SocketAddr>> {
        self.table
            .get(&normalize_host(host))
            .map(|ips| ips.iter().map(|ip| SocketAddr::new(*ip, port)).collect())
            .ok_or_else(|| {
                std::io::Error::new(std::io::ErrorKind::NotFound, format!("unknown host {host}"))
            })
    }
}

/// Lower-case, without the trailing dot(s) of a fully qualified name.
fn normalize_host(host: &str) -> String {
    host.trim_end_matches('.').to_ascii_lowercase()
}

/// Names that lead to the local machine, the local network or a metadata service.
const BLOCKED_NAMES: &[&str] = &[
    "localhost",
    "localhost.localdomain",
    "ip6-localhost",
    "ip6-loopback",
    "broadcasthost",
    "metadata",
    "metadata.google.internal",
    "metadata.goog",
    "metadata.azure.com",
    "instance-data",
    "instance-data.ec2.internal",
    "kubernetes.default.svc",
];

/// Suffixes reserved for local or internal use (RFC 6761, RFC 6762, RFC 8375, ICANN's
/// `.internal`) plus the customary private ones.
const BLOCKED_SUFFIXES: &[&str] = &[
    ".localhost",
    ".local",
    ".localdomain",
    ".internal",
    ".intranet",
    ".lan",
    ".home",
    ".corp",
    ".home.arpa",
    ".arpa",
    ".svc",
];

fn hostname_denial(host: &str) -> Option<SsrfDenied> {
    let deny = |why: String| Some(SsrfDenied::new(DenyKind::BlockedHostname, why));
    if BLOCKED_NAMES.contains(&host) {
        return deny(format!(
            "host name {host:?} refers to the local machine or a metadata service"
        ));
    }
    if let Some(suffix) = BLOCKED_SUFFIXES.iter().find(|s| host.ends_with(*s)) {
        return deny(format!(
            "host name {host:?} is under {suffix}, which is reserved for local/internal networks"
        ));
    }
    if !host.contains('.') {
        return deny(format!(
            "single-label host name {host:?} would resolve through the local search domain"
        ));
    }
    None
}

/// Classifies an IPv4 address; `None` = public unicast.
pub fn classify_v4(ip: Ipv4Addr) -> Option<AddrClass> {
    let [a, b, c, _] = ip.octets();
    Some(match (a, b, c) {
        _ if ip == Ipv4Addr::new(169, 254, 169, 254) => AddrClass::CloudMetadata,
        // Alibaba Cloud's metadata service (inside CGNAT space, named for the reason).
        _ if ip == Ipv4Addr::new(100, 100, 100, 200) => AddrClass::CloudMetadata,
        _ if ip.is_broadcast() => AddrClass::Broadcast,
        (0, _, _) => AddrClass::Unspecified,
        (10, _, _) => AddrClass::Private,
        (127, _, _) => AddrClass::Loopback,
        (100, b, _) if b & 0xC0 == 64 => AddrClass::SharedCgnat,
        (169, 254, _) => AddrClass::LinkLocal,
        (172, b, _) if b & 0xF0 == 16 => AddrClass::Private,
        (192, 168, _) => AddrClass::Private,
        (192, 0, 0) | (192, 88, 99) => AddrClass::Reserved,
        (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => AddrClass::Documentation,
        (198, b, _) if b & 0xFE == 18 => AddrClass::Benchmark,
        (224..=239, _, _) => AddrClass::Multicast,
        (240..=255, _, _) => AddrClass::Reserved,
        _ => return None,
    })
}

/// Classifies an IPv6 address; the IPv4 address it embeds (if any) is returned with the
/// class so the reason can name it. `None` = public unicast.
pub fn classify_v6(ip: Ipv6Addr) -> Option<(AddrClass, Option<Ipv4Addr>)> {
    let s = ip.segments();
    let v4_at = |hi: u16, lo: u16| Ipv4Addr::from(((hi as u32) << 16) | lo as u32);
    let embedded = |v4: Ipv4Addr| classify_v4(v4).map(|c| (c, Some(v4)));
    if ip.is_unspecified() {
        return Some((AddrClass::Unspecified, None));
    }
    if ip.is_loopback() {
        return Some((AddrClass::Loopback, None));
    }
    // ::ffff:a.b.c.d: the kernel connects to the IPv4 address itself.
    if let Some(v4) = ip.to_ipv4_mapped() {
        return embedded(v4);
    }
    // ::a.b.c.d (deprecated IPv4-compatible): judged by its IPv4 part, reserved otherwise.
    if s[..6] == [0; 6] {
        let v4 = v4_at(s[6], s[7]);
        return embedded(v4).or(Some((AddrClass::Reserved, Some(v4))));
    }
    // NAT64 well-known prefix 64:ff9b::/96 reaches the embedded IPv4 address.
    if s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0; 4] {
        return embedded(v4_at(s[6], s[7]));
    }
    // Local-use NAT64 64:ff9b:1::/48 translates into private networks.
    if s[0] == 0x64 && s[1] == 0xff9b && s[2] == 1 {
        return Some((AddrClass::Private, None));
    }
    // AWS's IPv6 metadata endpoint (inside unique-local space, named for the reason).
    if ip == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254) {
        return Some((AddrClass::CloudMetadata, None));
    }
    match s[0] {
        0xff00..=0xffff => return Some((AddrClass::Multicast, None)),
        0xfe80..=0xfebf => return Some((AddrClass::LinkLocal, None)),
        // Deprecated site-local: still routed inside some networks.
        0xfec0..=0xfeff => return Some((AddrClass::Reserved, None)),
        0xfc00..=0xfdff => return Some((AddrClass::UniqueLocal, None)),
        // 6to4: 2002:AABB:CCDD::/48 tunnels to a.b.c.d.
        0x2002 => return embedded(v4_at(s[1], s[2])),
        0x2001 if s[1] == 0x0db8 => return Some((AddrClass::Documentation, None)),
        // 2001::/23: Teredo (2001::/32, whose client address is obfuscated), benchmarking,
        // ORCHID and other IETF assignments; none is a web server.
        0x2001 if s[1] < 0x0200 => return Some((AddrClass::Reserved, None)),
        0x3fff if s[1] < 0x1000 => return Some((AddrClass::Documentation, None)),
        _ => {}
    }
    // Only 2000::/3 is global unicast; the rest (100::/64 discard, …) is reserved.
    if s[0] & 0xE000 != 0x2000 {
        return Some((AddrClass::Reserved, None));
    }
    None
}

/// Classifies an address; `None` = public unicast.
pub fn classify_ip(ip: IpAddr) -> Option<(AddrClass, Option<Ipv4Addr>)> {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4).map(|c| (c, None)),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

/// One parsed `allow_hosts` entry.
enum AllowEntry {
    Name(globset::GlobMatcher),
    Net(IpAddr, u8),
}

fn parse_allow_entry(raw: &str) -> Option<AllowEntry> {
    let entry = normalize_host(raw.trim());
    let entry = entry.trim_start_matches('[').replace(']', "");
    if entry.is_empty() {
        return None;
    }
    let (addr, prefix) = match entry.split_once('/') {
        Some((a, p)) => (a, p.parse::<u8>().ok()),
        None => (entry.as_str(), None),
    };
    if let Ok(ip) = addr.parse::<IpAddr>() {
        let max = if ip.is_ipv4() { 32 } else { 128 };
        let prefix = prefix.unwrap_or(max).min(max);
        return Some(AllowEntry::Net(ip, prefix));
    }
    globset::GlobBuilder::new(&entry)
        .case_insensitive(true)
        .build()
        .ok()
        .map(|g| AllowEntry::Name(g.compile_matcher()))
}

fn in_net(ip: IpAddr, net: IpAddr, prefix: u8) -> bool {
    match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            let mask = u32::MAX.checked_shl(32 - prefix as u32).unwrap_or(0);
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => {
            let mask = u128::MAX.checked_shl(128 - prefix as u32).unwrap_or(0);
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

struct Allowlist(Vec<AllowEntry>);

impl Allowlist {
    fn of(policy: &SsrfPolicy) -> Self {
        Self(
            policy
                .allow_hosts
                .iter()
                .filter_map(|e| parse_allow_entry(e))
                .collect(),
        )
    }

    fn host(&self, host: &str) -> bool {
        self.0.iter().any(|e| match e {
            AllowEntry::Name(g) => g.is_match(host),
            AllowEntry::Net(..) => false,
        })
    }

    fn addr(&self, ip: IpAddr) -> bool {
        self.0.iter().any(|e| match e {
            AllowEntry::Net(net, prefix) => in_net(ip, *net, *prefix),
            AllowEntry::Name(_) => false,
        })
    }
}

fn address_denial(
    ip: IpAddr,
    host: &str,
    policy: &SsrfPolicy,
    allow: &Allowlist,
) -> Option<SsrfDenied> {
    let (class, embedded) = classify_ip(ip)?;
    if allow.addr(ip) || (policy.allow_private && class.relaxed_by_allow_private()) {
        return None;
    }
    let via = match embedded {
        Some(v4) if IpAddr::V4(v4) != ip => format!(" (it embeds the IPv4 address {v4})"),
        _ => String::new(),
    };
    let target = if host == ip.to_string() {
        format!("address {ip}")
    } else {
        format!("host {host:?} resolves to {ip}, which")
    };
    Some(SsrfDenied::new(
        DenyKind::BlockedAddress(class),
        format!(
            "{target} is {}{via}; only public internet addresses may be fetched",
            class.label()
        ),
    ))
}

fn log_denial(url: &str, d: &SsrfDenied) {
    tracing::warn!(target: "security.ssrf", url = %url, kind = ?d.kind, reason = %d.reason, "outbound request refused");
}

/// Checks a URL against the policy and resolves it once.
pub async fn check_url(
    url: &str,
    policy: &SsrfPolicy,
    resolver: &dyn Resolver,
) -> Result<PinnedTarget, SsrfDenied> {
    let result = check_url_inner(url, policy, resolver).await;
    if let Err(d) = &result {
        log_denial(url, d);
    }
    result
}

async fn check_url_inner(
    raw: &str,
    policy: &SsrfPolicy,
    resolver: &dyn Resolver,
) -> Result<PinnedTarget, SsrfDenied> {
    let url = Url::parse(raw.trim()).map_err(|e| {
        SsrfDenied::new(
            DenyKind::InvalidUrl,
            format!("{raw:?} is not a valid URL: {e}"),
        )
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(SsrfDenied::new(
            DenyKind::Scheme,
            format!(
                "scheme {:?} is not allowed; only http and https URLs can be fetched",
                url.scheme()
            ),
        ));
    }
    let port = url.port_or_known_default().unwrap_or(80);
    let allow = Allowlist::of(policy);
    let (host, addrs) = match url.host() {
        None => {
            return Err(SsrfDenied::new(
                DenyKind::InvalidUrl,
                format!("{raw:?} has no host"),
            ))
        }
        Some(Host::Ipv4(v4)) => (v4.to_string(), vec![SocketAddr::new(v4.into(), port)]),
        Some(Host::Ipv6(v6)) => (v6.to_string(), vec![SocketAddr::new(v6.into(), port)]),
        Some(Host::Domain(d)) => {
            let name = normalize_host(d);
            if name.is_empty() {
                return Err(SsrfDenied::new(
                    DenyKind::InvalidUrl,
                    format!("{raw:?} has an empty host"),
                ));
            }
            if !allow.host(&name) {
                if let Some(d) = hostname_denial(&name) {
                    return Err(d);
                }
            }
            let resolved = tokio::time::timeout(RESOLVE_TIMEOUT, resolver.resolve(&name, port))
                .await
                .map_err(|_| {
                    SsrfDenied::new(
                        DenyKind::Resolution,
                        format!("resolving {name:?} timed out"),
                    )
                })?
                .map_err(|e| {
                    SsrfDenied::new(
                        DenyKind::Resolution,
                        format!("cannot resolve {name:?}: {e}"),
                    )
                })?;
            if resolved.is_empty() {
                return Err(SsrfDenied::new(
                    DenyKind::Resolution,
                    format!("{name:?} resolved to no address"),
                ));
            }
            (name, resolved)
        }
    };
    let host_allowed = allow.host(&host);
    if !host_allowed {
        // Every address must pass: the client may pick any of them.
        for a in &addrs {
            if let Some(d) = address_denial(a.ip(), &host, policy, &allow) {
                return Err(d);
            }
        }
    }
    let exact_host = url.host_str().unwrap_or_default().to_string();
    Ok(PinnedTarget {
        host: exact_host,
        addrs: addrs
            .into_iter()
            .map(|a| SocketAddr::new(a.ip(), port))
            .collect(),
        url,
    })
}

/// reqwest resolver that answers only for the pinned host, with the checked addresses.
/// Anything else fails rather than falling back to DNS, so a mismatch can never leak
/// into an unchecked lookup.
struct PinnedResolve {
    host: String,
    addrs: Vec<SocketAddr>,
}

impl reqwest::dns::Resolve for PinnedResolve {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let ok = normalize_host(name.as_str()) == normalize_host(&self.host);
        let addrs = self.addrs.clone();
        let asked = name.as_str().to_string();
        Box::pin(async move {
            if ok {
                let it: reqwest::dns::Addrs = Box::new(addrs.into_iter());
                Ok(it)
            } else {
                Err(format!("host {asked:?} was not checked by the SSRF guard").into())
            }
        })
    }
}

/// Options of one guarded request.
#[derive(Debug, Clone)]
pub struct FetchOptions {
    /// Total time for all hops, headers included (the body is read by the caller).
    pub timeout: Duration,
    pub user_agent: String,
    pub accept: String,
}

impl Default for FetchOptions {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(30),
            user_agent: concat!("ferroclaw/", env!("CARGO_PKG_VERSION")).to_string(),
            accept: "*/*".to_string(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("{0}")]
    Denied(#[from] SsrfDenied),
    #[error("request to {url} failed: {message}")]
    Http { url: String, message: String },
    #[error("request timed out after {0:?}")]
    Timeout(Duration),
}

/// A response reached through the guard.
#[derive(Debug)]
pub struct GuardedResponse {
    pub response: reqwest::Response,
    /// The URL that produced this response (after redirects).
    pub final_url: Url,
    pub redirects: usize,
}

/// Error text of a reqwest error including its sources (the top level alone is vague).
pub(crate) use ferroclaw_types::error_chain;

/// GET through the guard: each hop is checked, pinned, and its redirect followed by hand.
pub async fn guarded_get(
    url: &str,
    policy: &SsrfPolicy,
    resolver: Arc<dyn Resolver>,
    opts: &FetchOptions,
) -> Result<GuardedResponse, FetchError> {
    let deadline = tokio::time::Instant::now() + opts.timeout;
    let mut current = url.to_string();
    for hop in 0..=MAX_REDIRECTS {
        let target = check_url(&current, policy, resolver.as_ref()).await?;
        let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
        if remaining.is_zero() {
            return Err(FetchError::Timeout(opts.timeout));
        }
        let http_err = |message: String| FetchError::Http {
            url: target.url.to_string(),
            message,
        };
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            // A proxy from the environment would do its own DNS and defeat the pinning.
            .no_proxy()
            .dns_resolver(Arc::new(PinnedResolve {
                host: target.host.clone(),
                addrs: target.addrs.clone(),
            }))
            .timeout(remaining)
            .connect_timeout(remaining.min(Duration::from_secs(10)))
            .user_agent(opts.user_agent.clone())
            .build()
            .map_err(|e| http_err(error_chain(&e)))?;
        let response = client
            .get(target.url.clone())
            .header(reqwest::header::ACCEPT, opts.accept.clone())
            .send()
            .await
            .map_err(|e| {
                if e.is_timeout() {
                    FetchError::Timeout(opts.timeout)
                } else {
                    http_err(error_chain(&e))
                }
            })?;
        let location = response
            .headers()
            .get(reqwest::header::LOCATION)
            .and_then(|l| l.to_str().ok())
            .map(str::to_string);
        match location {
            Some(loc) if response.status().is_redirection() => {
                let next = target.url.join(&loc).map_err(|e| {
                    http_err(format!("redirect to an invalid location {loc:?}: {e}"))
                })?;
                tracing::debug!(from = %target.url, to = %next, "following redirect");
                current = next.to_string();
                if hop == MAX_REDIRECTS {
                    break;
                }
            }
            _ => {
                return Ok(GuardedResponse {
                    response,
                    final_url: target.url,
                    redirects: hop,
                })
            }
        }
    }
    let d = SsrfDenied::new(
        DenyKind::TooManyRedirects,
        format!("more than {MAX_REDIRECTS} redirects (last location {current})"),
    );
    log_denial(url, &d);
    Err(d.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidr_matching() {
        assert!(in_net(
            "10.1.2.3".parse().unwrap(),
            "10.0.0.0".parse().unwrap(),
            8
        ));
        assert!(!in_net(
            "11.1.2.3".parse().unwrap(),
            "10.0.0.0".parse().unwrap(),
            8
        ));
        assert!(in_net(
            "1.2.3.4".parse().unwrap(),
            "9.9.9.9".parse().unwrap(),
            0
        ));
        assert!(in_net("::1".parse().unwrap(), "::1".parse().unwrap(), 128));
        assert!(!in_net(
            "::1".parse().unwrap(),
            "127.0.0.1".parse().unwrap(),
            8
        ));
    }

    #[test]
    fn public_addresses_are_not_classified() {
        for ip in [
            "8.8.8.8",
            "1.1.1.1",
            "93.184.216.34",
            "2606:4700::1111",
            "2a00:1450::1",
        ] {
            assert_eq!(classify_ip(ip.parse().unwrap()), None, "{ip}");
        }
    }
}
