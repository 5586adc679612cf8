//! The executor's error codes, HTTP statuses and OpenAI-shaped body
//! `{"error": {"message", "type", "code"}}`.

use serde_json::{json, Value};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    InvalidRequest,
    ModelNotFound,
    GptOssUnreachable,
    MaxIterationsExceeded,
    TimeoutExceeded,
    ContextWindowExceeded,
    ToolExecutionFailed,
    /// Route or credentials problems of the executor's own HTTP surface.
    Unauthorized,
    NotFound,
    /// The executor itself could not run the request (its run queue was full, say).
    Internal,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidRequest => "invalid_request",
            ErrorCode::ModelNotFound => "model_not_found",
            ErrorCode::GptOssUnreachable => "gpt_oss_unreachable",
            ErrorCode::MaxIterationsExceeded => "max_iterations_exceeded",
            ErrorCode::TimeoutExceeded => "timeout_exceeded",
            ErrorCode::ContextWindowExceeded => "context_window_exceeded",
            ErrorCode::ToolExecutionFailed => "tool_execution_failed",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::NotFound => "not_found",
            ErrorCode::Internal => "internal_error",
        }
    }

    pub fn status(self) -> u16 {
        match self {
            ErrorCode::InvalidRequest
            | ErrorCode::MaxIterationsExceeded
            | ErrorCode::ContextWindowExceeded => 400,
            ErrorCode::ModelNotFound | ErrorCode::NotFound => 404,
            ErrorCode::GptOssUnreachable => 503,
            ErrorCode::TimeoutExceeded => 408,
            ErrorCode::ToolExecutionFailed | ErrorCode::Internal => 500,
            ErrorCode::Unauthorized => 401,
        }
    }

    /// OpenAI clients branch on `type`: the caller's mistakes are
    /// `invalid_request_error`, failures of the run itself `execution_error`.
    pub fn error_type(self) -> &'static str {
        match self {
            ErrorCode::InvalidRequest
            | ErrorCode::ModelNotFound
            | ErrorCode::NotFound
            | ErrorCode::ContextWindowExceeded => "invalid_request_error",
            ErrorCode::Unauthorized => "authentication_error",
            _ => "execution_error",
        }
    }
}

/// A failed request or run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}: {message}", code.as_str())]
pub struct ExecError {
    pub code: ErrorCode,
    pub message: String,
}

impl ExecError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    pub fn body(&self) -> Value {
        json!({"error": {
            "message": self.message,
            "type": self.code.error_type(),
            "code": self.code.as_str(),
        }})
    }
}
