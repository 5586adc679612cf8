//! Tools defined in configuration: a name, a description, a JSON schema and a shell command
//! template with `{{.key}}` placeholders.
//!
//! Every argument value is shell-escaped (single quotes, `'` written as `'\''`) before it
//! is put into the template, so an argument can never add shell syntax: `'; rm -rf / #`
//! arrives as that literal string. The rendered command then goes through the same
//! [`ExecGuard`] as `exec` (so a template that turns into a denied command is refused) and
//! runs like a foreground `exec`: in the OS sandbox, with its time-out, output cap and
//! allowlisted environment.

use std::ffi::OsString;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use regex::Regex;
use serde_json::Value;

use crate::builtin::{run_foreground, Workspace, DEFAULT_MAX_OUTPUT};
use crate::exec_guard::ExecGuard;
use crate::sandbox::{default_sandbox, Sandbox};
use crate::{Tool, ToolContext, ToolResult};

pub const DEFAULT_CUSTOM_TOOL_TIMEOUT: Duration = Duration::from_secs(60);

/// A custom tool as configured.
#[derive(Debug, Clone, PartialEq)]
pub struct CustomToolSpec {
    pub name: String,
    pub description: String,
    /// JSON schema of the arguments (an object schema; `properties` and `required` are used).
    pub parameters: Value,
    /// Shell command with `{{.key}}` placeholders (whitespace inside the braces allowed).
    pub command: String,
    pub timeout_seconds: u64,
    /// Working directory relative to the workspace (default: the workspace root).
    pub workdir: Option<String>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CustomToolError {
    #[error("custom tool name {0:?} must be 1-64 characters of letters, digits, '_' or '-'")]
    BadName(String),
    #[error("custom tool {0:?}: the command template is empty")]
    EmptyCommand(String),
    #[error("custom tool {tool:?}: parameters must be a JSON object schema")]
    BadSchema { tool: String },
    #[error(
        "custom tool {tool:?}: placeholder {{{{.{key}}}}} is not declared in parameters.properties"
    )]
    UndeclaredPlaceholder { tool: String, key: String },
}

fn placeholder_re() -> &'static Regex {
    static RE: std::sync::LazyLock<Regex> = std::sync::LazyLock::new(|| {
        // Static pattern, checked by the unit tests.
        Regex::new(r"\{\{\s*\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}").unwrap_or_else(|e| panic!("{e}"))
    });
    &RE
}

pub struct CustomTool {
    spec: CustomToolSpec,
    required: Vec<String>,
    guard: Arc<ExecGuard>,
    env: Vec<(OsString, OsString)>,
    sandbox: Arc<Sandbox>,
    max_output: usize,
}

impl std::fmt::Debug for CustomTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CustomTool")
            .field("spec", &self.spec)
            .finish()
    }
}

impl CustomTool {
    /// Validates the spec: name, schema, and that every placeholder is a declared property.
    pub fn new(spec: CustomToolSpec, guard: Arc<ExecGuard>) -> Result<Self, CustomToolError> {
        let name_ok = !spec.name.is_empty()
            && spec.name.len() <= 64
            && spec
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !name_ok {
            return Err(CustomToolError::BadName(spec.name));
        }
        if spec.command.trim().is_empty() {
            return Err(CustomToolError::EmptyCommand(spec.name));
        }
        let schema = if spec.parameters.is_null() {
            serde_json::json!({"type": "object", "properties": {}})
        } else {
            spec.parameters.clone()
        };
        let Some(obj) = schema.as_object() else {
            return Err(CustomToolError::BadSchema { tool: spec.name });
        };
        let props = obj.get("properties").and_then(Value::as_object);
        for cap in placeholder_re().captures_iter(&spec.command) {
            let key = &cap[1];
            if !props.is_some_and(|p| p.contains_key(key)) {
                return Err(CustomToolError::UndeclaredPlaceholder {
                    tool: spec.name,
                    key: key.to_string(),
                });
            }
        }
        let required = obj
            .get("required")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        Ok(Self {
            spec: CustomToolSpec {
                parameters: schema,
                ..spec
            },
            required,
            guard,
            env: Vec::new(),
            sandbox: default_sandbox(),
            max_output: DEFAULT_MAX_OUTPUT,
        })
    }

    /// Adds variables to the allowlisted child environment (credential-looking names are
    /// still refused).
    pub fn with_env(mut self, vars: Vec<(OsString, OsString)>) -> Self {
        self.env = vars;
        self
    }

    /// The OS confinement the command runs under (default: `tools.exec` defaults).
    pub fn with_sandbox(mut self, sandbox: Arc<Sandbox>) -> Self {
        self.sandbox = sandbox;
        self
    }

    pub fn with_max_output(mut self, chars: usize) -> Self {
        self.max_output = chars.max(2);
        self
    }

    pub fn spec(&self) -> &CustomToolSpec {
        &self.spec
    }

    /// The command with every placeholder replaced by its shell-escaped argument.
    pub fn render(&self, args: &Value) -> Result<String, String> {
        for key in &self.required {
            if matches!(args.get(key), None | Some(Value::Null)) {
                return Err(format!("missing required argument \"{key}\""));
            }
        }
        let mut out = String::new();
        let mut last = 0;
        for cap in placeholder_re().captures_iter(&self.spec.command) {
            let Some(m) = cap.get(0) else { continue };
            out.push_str(&self.spec.command[last..m.start()]);
            let value = match args.get(&cap[1]) {
                None | Some(Value::Null) => String::new(),
                Some(Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
            };
            if value.contains('\0') {
                return Err(format!("argument \"{}\" contains a NUL byte", &cap[1]));
            }
            out.push_str(&shell_quote(&value));
            last = m.end();
        }
        out.push_str(&self.spec.command[last..]);
        Ok(out)
    }
}

/// POSIX single-quote escaping: the result is always exactly one shell word.
pub fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

#[async_trait]
impl Tool for CustomTool {
    fn name(&self) -> &str {
        &self.spec.name
    }

    fn description(&self) -> &str {
        &self.spec.description
    }

    fn parameters(&self) -> Value {
        self.spec.parameters.clone()
    }

    async fn execute(&self, ctx: &ToolContext, args: Value) -> ToolResult {
        let ws = match Workspace::of(ctx) {
            Ok(ws) => ws,
            Err(e) => return e,
        };
        let command = match self.render(&args) {
            Ok(c) => c,
            Err(e) => return ToolResult::error(format!("{}: {e}", self.spec.name)),
        };
        let dir = match &self.spec.workdir {
            None => ws.root().to_path_buf(),
            Some(w) => match ws.resolve(w) {
                Ok(p) if p.is_dir() => p,
                Ok(p) => {
                    return ToolResult::error(format!(
                        "{}: workdir {} is not an existing directory in the workspace",
                        self.spec.name,
                        ws.display(&p)
                    ))
                }
                Err(e) => return e,
            },
        };
        if let Err(denied) = self
            .guard
            .authorize(ctx.session_display(), &ctx.agent_id, &command)
            .await
        {
            return ToolResult::error(format!(
                "{}: {denied}. The command was not run.",
                self.spec.name
            ));
        }
        let timeout = Duration::from_secs(self.spec.timeout_seconds.max(1));
        run_foreground(
            &self.sandbox,
            &self.env,
            ws.root(),
            &command,
            &dir,
            timeout,
            self.max_output,
            ctx,
            Vec::new(),
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(command: &str) -> Result<CustomTool, CustomToolError> {
        CustomTool::new(
            CustomToolSpec {
                name: "t".into(),
                description: "d".into(),
                parameters: serde_json::json!({"type":"object","properties":{"a":{"type":"string"},"n":{"type":"integer"}},"required":["a"]}),
                command: command.into(),
                timeout_seconds: 5,
                workdir: None,
            },
            Arc::new(ExecGuard::default()),
        )
    }

    #[test]
    fn renders_with_escaping() {
        let t = tool("echo {{.a}} {{ .n }}").unwrap();
        assert_eq!(
            t.render(&serde_json::json!({"a": "it's", "n": 3})).unwrap(),
            r"echo 'it'\''s' '3'"
        );
        assert_eq!(
            t.render(&serde_json::json!({"a": "x"})).unwrap(),
            "echo 'x' ''"
        );
        assert!(t
            .render(&serde_json::json!({"n": 1}))
            .unwrap_err()
            .contains("\"a\""));
    }

    #[test]
    fn validation() {
        assert!(matches!(
            tool("echo {{.zzz}}"),
            Err(CustomToolError::UndeclaredPlaceholder { .. })
        ));
        assert!(matches!(tool("  "), Err(CustomToolError::EmptyCommand(_))));
    }
}
