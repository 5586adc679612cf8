//! Error shapes. OpenAI routes answer `{"error":{"message","type","code"}}`; the tools
//! routes answer `{"ok":false,"error":{"type","message"}}`; WebSocket responses carry
//! `{"code","message","retryable","retryAfterMs"}`.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use ferroclaw_agent::RunError;
use ferroclaw_runtime::{RunFailure, SubmitError};

/// Which JSON shape an HTTP error takes, decided by the route family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorShape {
    OpenAi,
    Tools,
}

/// An HTTP error; rendered in the shape of the route that produced it.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    /// OpenAI `type` (e.g. `invalid_request_error`); also the tools `type`.
    pub kind: &'static str,
    /// OpenAI `code` (e.g. `model_not_found`).
    pub code: &'static str,
    pub message: String,
    pub retry_after_secs: Option<u64>,
    pub shape: ErrorShape,
}

impl ApiError {
    pub fn new(
        status: StatusCode,
        kind: &'static str,
        code: &'static str,
        msg: impl Into<String>,
    ) -> Self {
        ApiError {
            status,
            kind,
            code,
            message: msg.into(),
            retry_after_secs: None,
            shape: ErrorShape::OpenAi,
        }
    }

    pub fn bad_request(msg: impl Into<String>) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "invalid_request",
            msg,
        )
    }

    pub fn unauthorized() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "invalid_api_key",
            "missing or invalid gateway token (send Authorization: Bearer <token>)",
        )
    }

    pub fn not_found(code: &'static str, msg: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "invalid_request_error", code, msg)
    }

    pub fn internal(msg: impl Into<String>) -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            "internal_error",
            msg,
        )
    }

    pub fn rate_limited(retry_after_secs: u64) -> Self {
        let mut e = Self::new(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limit_error",
            "rate_limit_exceeded",
            format!("rate limit exceeded; retry after {retry_after_secs} s"),
        );
        e.retry_after_secs = Some(retry_after_secs);
        e
    }

    pub fn with_shape(mut self, shape: ErrorShape) -> Self {
        self.shape = shape;
        self
    }

    /// The JSON body alone (also used for the error chunk of a broken SSE stream).
    pub fn body(&self) -> Value {
        match self.shape {
            ErrorShape::OpenAi => json!({
                "error": {"message": self.message, "type": self.kind, "code": self.code}
            }),
            ErrorShape::Tools => json!({
                "ok": false,
                "error": {"type": self.code, "message": self.message}
            }),
        }
    }

    /// How a scheduler refusal looks over HTTP.
    /// A run that ended without an answer, or never ran.
    pub fn from_failure(f: &RunFailure) -> Self {
        match f {
            RunFailure::Submit(e) => Self::from_submit(e),
            RunFailure::Run(_) => match f.run_error() {
                Some(e) => Self::from_run(e),
                None => Self::internal("run ended without an outcome"),
            },
        }
    }

    pub fn from_submit(e: &SubmitError) -> Self {
        match e {
            SubmitError::QueueFull | SubmitError::Dropped => Self::new(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limit_error",
                "session_queue_full",
                e.to_string(),
            ),
            SubmitError::Cancelled => Self::new(
                StatusCode::CONFLICT,
                "invalid_request_error",
                "cancelled",
                e.to_string(),
            ),
            SubmitError::ShuttingDown => Self::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "server_error",
                "shutting_down",
                e.to_string(),
            ),
            SubmitError::Failed(_) => Self::internal(e.to_string()),
        }
    }

    /// How a failed run looks over HTTP.
    pub fn from_run(e: &RunError) -> Self {
        let msg = e.to_string();
        match e {
            RunError::ContextBudget { .. } => Self::new(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "context_length_exceeded",
                msg,
            ),
            RunError::Provider(_) if e.kind() == "context_overflow" => Self::new(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "context_length_exceeded",
                msg,
            ),
            RunError::ToolUnavailable { .. } => Self::new(
                StatusCode::BAD_GATEWAY,
                "server_error",
                "tool_unavailable",
                msg,
            ),
            // The model answered, but more than the gateway keeps: not worth retrying.
            RunError::Provider(_) if e.kind() == "reply_too_large" => Self::new(
                StatusCode::BAD_GATEWAY,
                "server_error",
                "reply_too_large",
                msg,
            ),
            RunError::Provider(_) => Self::new(
                StatusCode::BAD_GATEWAY,
                "server_error",
                "provider_error",
                msg,
            ),
            RunError::Aborted => Self::new(
                StatusCode::CONFLICT,
                "invalid_request_error",
                "run_aborted",
                msg,
            ),
            RunError::Timeout(_) => {
                Self::new(StatusCode::GATEWAY_TIMEOUT, "server_error", "timeout", msg)
            }
            RunError::Stalled(_) => Self::new(
                StatusCode::GATEWAY_TIMEOUT,
                "server_error",
                "run_stalled",
                msg,
            ),
            RunError::IterationLimit(_) => Self::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "server_error",
                "iteration_limit",
                msg,
            ),
            RunError::Store(_) => Self::internal(msg),
            RunError::InputBlocked(_) => Self::new(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "input_blocked",
                msg,
            ),
            RunError::Workspace(_) => Self::internal(msg),
            RunError::UserRequired => {
                Self::new(StatusCode::FORBIDDEN, "forbidden", "user_required", msg)
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut resp = (self.status, axum::Json(self.body())).into_response();
        if let Some(secs) = self.retry_after_secs {
            if let Ok(v) = HeaderValue::from_str(&secs.to_string()) {
                resp.headers_mut().insert(header::RETRY_AFTER, v);
            }
        }
        resp
    }
}

/// WebSocket error codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WsCode {
    Unauthorized,
    InvalidRequest,
    NotFound,
    AlreadyExists,
    Unavailable,
    ResourceExhausted,
    FailedPrecondition,
    AgentTimeout,
    Internal,
}

impl WsCode {
    pub fn as_str(self) -> &'static str {
        match self {
            WsCode::Unauthorized => "UNAUTHORIZED",
            WsCode::InvalidRequest => "INVALID_REQUEST",
            WsCode::NotFound => "NOT_FOUND",
            WsCode::AlreadyExists => "ALREADY_EXISTS",
            WsCode::Unavailable => "UNAVAILABLE",
            WsCode::ResourceExhausted => "RESOURCE_EXHAUSTED",
            WsCode::FailedPrecondition => "FAILED_PRECONDITION",
            WsCode::AgentTimeout => "AGENT_TIMEOUT",
            WsCode::Internal => "INTERNAL",
        }
    }
}

/// A failed WebSocket request.
#[derive(Debug, Clone)]
pub struct WsError {
    pub code: WsCode,
    pub message: String,
    pub retryable: bool,
    pub retry_after_ms: u64,
    /// Machine-readable particulars (`details.code` for OpenClaw's clients).
    pub details: Option<Value>,
}

impl WsError {
    pub fn new(code: WsCode, message: impl Into<String>) -> Self {
        WsError {
            code,
            message: message.into(),
            retryable: false,
            retry_after_ms: 0,
            details: None,
        }
    }

    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(WsCode::InvalidRequest, message)
    }

    pub fn retry_after(mut self, ms: u64) -> Self {
        self.retryable = true;
        self.retry_after_ms = ms;
        self
    }

    pub fn to_json(&self) -> Value {
        let mut v = json!({
            "code": self.code.as_str(),
            "message": self.message,
            "retryable": self.retryable,
            "retryAfterMs": self.retry_after_ms,
        });
        if let Some(d) = &self.details {
            v["details"] = d.clone();
        }
        v
    }

    pub fn from_submit(e: &SubmitError) -> Self {
        match e {
            SubmitError::QueueFull | SubmitError::Dropped => {
                Self::new(WsCode::ResourceExhausted, e.to_string()).retry_after(1000)
            }
            SubmitError::Cancelled => Self::new(WsCode::FailedPrecondition, e.to_string()),
            SubmitError::ShuttingDown => Self::new(WsCode::Unavailable, e.to_string()),
            SubmitError::Failed(_) => Self::new(WsCode::Internal, e.to_string()),
        }
    }

    pub fn from_run(e: &RunError) -> Self {
        let msg = e.to_string();
        match e {
            RunError::Timeout(_) | RunError::Stalled(_) => Self::new(WsCode::AgentTimeout, msg),
            RunError::ContextBudget { .. } => Self::new(WsCode::FailedPrecondition, msg),
            RunError::Provider(_) if e.kind() == "context_overflow" => {
                Self::new(WsCode::FailedPrecondition, msg)
            }
            RunError::ToolUnavailable { .. } => Self::new(WsCode::Unavailable, msg),
            RunError::Provider(_) if e.kind() == "reply_too_large" => {
                Self::new(WsCode::FailedPrecondition, msg)
            }
            RunError::Provider(_) => {
                let mut err = Self::new(WsCode::Unavailable, msg);
                err.retryable = true;
                err
            }
            RunError::Aborted => Self::new(WsCode::FailedPrecondition, msg),
            RunError::IterationLimit(_) | RunError::Store(_) => Self::new(WsCode::Internal, msg),
            RunError::InputBlocked(_) => Self::new(WsCode::InvalidRequest, msg),
            RunError::Workspace(_) => Self::new(WsCode::Internal, msg),
            RunError::UserRequired => Self::new(WsCode::Unauthorized, msg),
        }
    }
}
