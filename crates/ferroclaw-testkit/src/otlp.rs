//! An OpenTelemetry collector stand-in for the exporter's tests: OTLP over HTTP
//! (`POST /v1/traces`, protobuf) or gRPC (`TraceService/Export`), recording every span
//! with its resource's service name and the headers (metadata) it came with.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use prost::Message;
use tokio::sync::Notify;

use crate::{lock, wait_until};

/// One span as the collector received it.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceivedSpan {
    pub name: String,
    /// Hex, as trace viewers show them; `parent_span_id` is empty for a root.
    pub trace_id: String,
    pub span_id: String,
    pub parent_span_id: String,
    pub attributes: BTreeMap<String, String>,
    pub service_name: String,
    /// The export request's headers (gRPC metadata), names lower-case.
    pub headers: BTreeMap<String, String>,
}

#[derive(Default)]
struct Shared {
    spans: Mutex<Vec<ReceivedSpan>>,
    changed: Notify,
}

pub struct OtlpReceiver {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for OtlpReceiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn text(v: &Option<opentelemetry_proto::tonic::common::v1::AnyValue>) -> String {
    match v.as_ref().and_then(|v| v.value.as_ref()) {
        Some(AnyValue::StringValue(s)) => s.clone(),
        Some(AnyValue::IntValue(i)) => i.to_string(),
        Some(AnyValue::DoubleValue(d)) => d.to_string(),
        Some(AnyValue::BoolValue(b)) => b.to_string(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

impl Shared {
    fn record(&self, req: ExportTraceServiceRequest, headers: BTreeMap<String, String>) {
        let mut spans = lock(&self.spans);
        for rs in req.resource_spans {
            let service_name = rs
                .resource
                .iter()
                .flat_map(|r| r.attributes.iter())
                .find(|kv| kv.key == "service.name")
                .map(|kv| text(&kv.value))
                .unwrap_or_default();
            for ss in rs.scope_spans {
                for s in ss.spans {
                    spans.push(ReceivedSpan {
                        name: s.name,
                        trace_id: hex(&s.trace_id),
                        span_id: hex(&s.span_id),
                        parent_span_id: hex(&s.parent_span_id),
                        attributes: s
                            .attributes
                            .iter()
                            .map(|kv| (kv.key.clone(), text(&kv.value)))
                            .collect(),
                        service_name: service_name.clone(),
                        headers: headers.clone(),
                    });
                }
            }
        }
        drop(spans);
        self.changed.notify_waiters();
    }
}

async fn http_export(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Bytes,
) -> axum::response::Response {
    match ExportTraceServiceRequest::decode(body) {
        Ok(req) => {
            let headers = headers
                .iter()
                .map(|(k, v)| {
                    (
                        k.as_str().to_string(),
                        String::from_utf8_lossy(v.as_bytes()).into_owned(),
                    )
                })
                .collect();
            shared.record(req, headers);
            (
                [("content-type", "application/x-protobuf")],
                ExportTraceServiceResponse::default().encode_to_vec(),
            )
                .into_response()
        }
        Err(e) => (StatusCode::BAD_REQUEST, format!("not an OTLP request: {e}")).into_response(),
    }
}

struct Grpc(Arc<Shared>);

#[tonic::async_trait]
impl TraceService for Grpc {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let headers = request
            .metadata()
            .iter()
            .filter_map(|kv| match kv {
                tonic::metadata::KeyAndValueRef::Ascii(k, v) => {
                    Some((k.as_str().to_string(), v.to_str().ok()?.to_string()))
                }
                tonic::metadata::KeyAndValueRef::Binary(..) => None,
            })
            .collect();
        self.0.record(request.into_inner(), headers);
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

impl OtlpReceiver {
    /// OTLP/HTTP with protobuf bodies, at `endpoint()` + `/v1/traces`.
    pub async fn http() -> std::io::Result<OtlpReceiver> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared::default());
        let app = axum::Router::new()
            .route("/v1/traces", post(http_export))
            .with_state(shared.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(OtlpReceiver { addr, shared, task })
    }

    /// OTLP over gRPC (HTTP/2 without TLS).
    pub async fn grpc() -> std::io::Result<OtlpReceiver> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared::default());
        let service = TraceServiceServer::new(Grpc(shared.clone()));
        let task = tokio::spawn(async move {
            let _ = tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener))
                .await;
        });
        Ok(OtlpReceiver { addr, shared, task })
    }

    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn spans(&self) -> Vec<ReceivedSpan> {
        lock(&self.shared.spans).clone()
    }

    /// Waits until the spans received so far satisfy `pred`, or `timeout` passes.
    pub async fn wait_for(
        &self,
        timeout: Duration,
        pred: impl Fn(&[ReceivedSpan]) -> bool,
    ) -> bool {
        wait_until(&self.shared.changed, timeout, || {
            pred(&lock(&self.shared.spans))
        })
        .await
    }
}
