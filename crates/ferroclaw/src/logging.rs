//! Logs to stderr (text or JSON), and, once a command has read `tracing.otlp`, the
//! process's spans exported over OTLP: HTTP requests and WebSocket calls, the runs they
//! start, each model call and each tool call, as one trace per request.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use anyhow::Context;
use ferroclaw_config::settings::{OtlpProtocol, OtlpSettings};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig, WithTonicConfig};
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{filter, reload, EnvFilter, Layer, Registry};

type Exporting = Option<Box<dyn Layer<Registry> + Send + Sync>>;

/// Where the exporting layer goes once it is configured.
static EXPORT: OnceLock<reload::Handle<Exporting, Registry>> = OnceLock::new();
/// Off until an exporter is installed, so spans cost nothing before.
static EXPORTING: AtomicBool = AtomicBool::new(false);

/// Logs go to stderr so stdout stays clean for answers and command output.
pub fn init(level: &str, json: bool) {
    let filter = EnvFilter::try_from_env("FERROCLAW_LOG")
        .or_else(|_| EnvFilter::try_new(level))
        .unwrap_or_else(|_| EnvFilter::new("warn"));
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_target(true);
    let fmt = if json {
        fmt.json().flatten_event(true).with_filter(filter).boxed()
    } else {
        fmt.compact().with_filter(filter).boxed()
    };
    // Our own spans at info (whatever the log level), and warnings, once exporting.
    let exported = filter::filter_fn(|m| {
        EXPORTING.load(Ordering::Relaxed)
            && m.target().starts_with("ferroclaw")
            && if m.is_span() {
                *m.level() <= tracing::Level::INFO
            } else {
                *m.level() <= tracing::Level::WARN
            }
    });
    let (export, handle) = reload::Layer::new(None as Exporting);
    // A second init (tests calling dispatch twice) is harmless; ignore it.
    if tracing_subscriber::registry()
        .with(export.with_filter(exported))
        .with(fmt)
        .try_init()
        .is_ok()
    {
        let _ = EXPORT.set(handle);
    }
}

/// The exporter while it runs; [`Telemetry::shutdown`] sends what is still buffered.
pub struct Telemetry {
    provider: SdkTracerProvider,
}

impl Telemetry {
    pub async fn shutdown(self) {
        EXPORTING.store(false, Ordering::Relaxed);
        // Blocks until the last batch is sent (or times out): off the runtime's threads.
        let provider = self.provider;
        let _ = tokio::task::spawn_blocking(move || provider.shutdown()).await;
    }
}

/// Starts exporting spans as `settings` say. Must run inside the Tokio runtime: the
/// exporters send from it.
pub fn export(settings: &OtlpSettings) -> anyhow::Result<Telemetry> {
    let exporter = match settings.protocol {
        OtlpProtocol::Http => opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(ReqwestExport {
                client: reqwest::Client::builder()
                    .timeout(settings.timeout)
                    .build()
                    .context("OTLP: HTTP client")?,
                runtime: tokio::runtime::Handle::current(),
            })
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .with_endpoint(settings.endpoint.clone())
            .with_timeout(settings.timeout)
            .with_headers(settings.headers.iter().cloned().collect())
            .build(),
        OtlpProtocol::Grpc => {
            let mut metadata = tonic::metadata::MetadataMap::new();
            for (k, v) in &settings.headers {
                let key = tonic::metadata::MetadataKey::from_bytes(k.as_bytes())
                    .with_context(|| format!("OTLP header name {k:?}"))?;
                let value = v
                    .parse()
                    .with_context(|| format!("OTLP header {k:?}: not a valid value"))?;
                metadata.insert(key, value);
            }
            opentelemetry_otlp::SpanExporter::builder()
                .with_tonic()
                .with_endpoint(settings.endpoint.clone())
                .with_timeout(settings.timeout)
                .with_metadata(metadata)
                .build()
        }
    }
    .context("OTLP exporter")?;
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(
            opentelemetry_sdk::Resource::builder()
                .with_service_name(settings.service_name.clone())
                .build(),
        )
        .build();
    let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("ferroclaw"));
    let handle = EXPORT
        .get()
        .context("logging was not initialised before the exporter")?;
    handle
        .reload(Some(
            Box::new(layer) as Box<dyn Layer<Registry> + Send + Sync>
        ))
        .context("OTLP: installing the exporting layer")?;
    EXPORTING.store(true, Ordering::Relaxed);
    tracing::info!(
        endpoint = %settings.endpoint,
        protocol = ?settings.protocol,
        service = %settings.service_name,
        "exporting spans over OTLP"
    );
    Ok(Telemetry { provider })
}

/// OTLP over HTTP through the process's reqwest (one HTTP stack). The batch exporter
/// sends from a thread of its own, so each request runs on the Tokio runtime.
#[derive(Debug)]
struct ReqwestExport {
    client: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

#[async_trait::async_trait]
impl opentelemetry_http::HttpClient for ReqwestExport {
    async fn send_bytes(
        &self,
        request: opentelemetry_http::Request<opentelemetry_http::Bytes>,
    ) -> Result<
        opentelemetry_http::Response<opentelemetry_http::Bytes>,
        opentelemetry_http::HttpError,
    > {
        let client = self.client.clone();
        let (parts, body) = request.into_parts();
        let sent = self.runtime.spawn(async move {
            let resp = client
                .request(parts.method, parts.uri.to_string())
                .headers(parts.headers)
                .body(body)
                .send()
                .await?;
            let mut answer = opentelemetry_http::Response::builder().status(resp.status());
            if let Some(h) = answer.headers_mut() {
                *h = resp.headers().clone();
            }
            let bytes = resp.bytes().await?;
            Ok::<_, opentelemetry_http::HttpError>(answer.body(bytes)?)
        });
        sent.await?
    }
}
