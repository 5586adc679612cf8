//! The set of tools an agent can call, and the one place every call goes through.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use ferroclaw_types::ToolDefinition;
use serde_json::Value;
use tracing::Instrument;

use crate::{Tool, ToolContext, ToolResult};

/// Tools by name, in registration order (the order the model sees them).
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: Vec<Arc<dyn Tool>>,
    /// Name or alias → index into `tools`.
    index: HashMap<String, usize>,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolRegistry")
            .field("tools", &self.names())
            .finish()
    }
}

impl ToolRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    /// A registry holding [`crate::core_tools`].
    pub fn with_core_tools() -> Self {
        let mut r = Self::new();
        for tool in crate::core_tools() {
            r.register(tool);
        }
        r
    }

    /// Adds a tool. A tool with the same name is replaced in place (keeping its position).
    /// A primary name always wins over another tool's alias.
    pub fn register(&mut self, tool: Arc<dyn Tool>) {
        match self.tools.iter().position(|t| t.name() == tool.name()) {
            Some(i) => self.tools[i] = tool,
            None => self.tools.push(tool),
        }
        self.reindex();
    }

    fn reindex(&mut self) {
        self.index.clear();
        for (i, t) in self.tools.iter().enumerate() {
            for alias in t.aliases() {
                self.index.entry((*alias).to_string()).or_insert(i);
            }
        }
        for (i, t) in self.tools.iter().enumerate() {
            self.index.insert(t.name().to_string(), i);
        }
    }

    /// Looks a tool up by name or alias; surrounding whitespace (which some models emit) is ignored.
    pub fn get(&self, name: &str) -> Option<Arc<dyn Tool>> {
        self.index
            .get(name.trim())
            .map(|i| Arc::clone(&self.tools[*i]))
    }

    /// Primary names, in registration order.
    pub fn names(&self) -> Vec<String> {
        self.tools.iter().map(|t| t.name().to_string()).collect()
    }

    pub fn len(&self) -> usize {
        self.tools.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// What the model is told about each tool, in registration order.
    pub fn definitions(&self) -> Vec<ToolDefinition> {
        self.tools
            .iter()
            .map(|t| ToolDefinition {
                name: t.name().to_string(),
                description: t.description().to_string(),
                parameters: t.parameters(),
            })
            .collect()
    }

    /// Keeps only the tools whose primary name satisfies `keep`.
    pub fn retain(&mut self, mut keep: impl FnMut(&str) -> bool) {
        self.tools.retain(|t| keep(t.name()));
        self.reindex();
    }

    /// A copy holding only the tools allowed by `allow`: each entry is a tool name, an alias,
    /// or a glob over names (`web_*`, `*`). An entry that is not a valid glob is compared literally.
    pub fn filtered(&self, allow: &[String]) -> Self {
        let matchers: Vec<NameMatcher> = allow.iter().map(|e| NameMatcher::new(e)).collect();
        let mut out = Self {
            tools: self
                .tools
                .iter()
                .filter(|t| {
                    std::iter::once(t.name())
                        .chain(t.aliases().iter().copied())
                        .any(|n| matchers.iter().any(|m| m.is_match(n)))
                })
                .cloned()
                .collect(),
            index: HashMap::new(),
        };
        out.reindex();
        out
    }

    /// Runs one tool call: resolves the name, checks the arguments are an object, and races
    /// the tool against `ctx.cancel`. Never panics on bad input; every failure is a result
    /// the model can read.
    pub async fn execute(&self, name: &str, ctx: &ToolContext, args: Value) -> ToolResult {
        let Some(tool) = self.get(name) else {
            return ToolResult::error(format!(
                "unknown tool \"{}\"; available tools: {}",
                name.trim(),
                self.names().join(", ")
            ));
        };
        let args = match normalize_args(args) {
            Ok(a) => a,
            Err(kind) => {
                return ToolResult::error(format!(
                    "arguments for tool \"{}\" must be a JSON object, got {kind}",
                    tool.name()
                ))
            }
        };
        let span = tracing::info_span!(
            "tool",
            tool = tool.name(),
            agent = %ctx.agent_id,
            session = %ctx.session_key,
            duration_ms = tracing::field::Empty,
            is_error = tracing::field::Empty,
        );
        let started = Instant::now();
        let result = async {
            if ctx.cancel.is_cancelled() {
                return aborted(tool.name());
            }
            tokio::select! {
                // Checked first so an already-fired abort never starts side effects.
                biased;
                _ = ctx.cancel.cancelled() => aborted(tool.name()),
                r = tool.execute(ctx, args) => r,
            }
        }
        .instrument(span.clone())
        .await;
        let elapsed = started.elapsed();
        span.record("duration_ms", elapsed.as_millis() as u64);
        span.record("is_error", result.is_error);
        span.in_scope(|| {
            tracing::debug!(
                duration_ms = elapsed.as_millis() as u64,
                is_error = result.is_error,
                "tool call finished"
            )
        });
        result
    }
}

/// One entry of an allow list.
enum NameMatcher {
    Glob(globset::GlobMatcher),
    /// Entries that are not valid globs are compared literally.
    Literal(String),
}

impl NameMatcher {
    fn new(entry: &str) -> Self {
        let entry = entry.trim();
        match globset::Glob::new(entry) {
            Ok(g) => Self::Glob(g.compile_matcher()),
            Err(_) => Self::Literal(entry.to_string()),
        }
    }

    fn is_match(&self, name: &str) -> bool {
        match self {
            Self::Glob(m) => m.is_match(name),
            Self::Literal(l) => l == name,
        }
    }
}

fn aborted(name: &str) -> ToolResult {
    ToolResult::error(format!("tool \"{name}\" aborted: the run was cancelled"))
}

/// `null` (no arguments) becomes `{}`, and an object encoded a second time as a JSON string
/// (a common model slip) is decoded; anything else that is not an object is refused.
fn normalize_args(args: Value) -> Result<Value, &'static str> {
    match args {
        Value::Object(_) => Ok(args),
        Value::Null => Ok(Value::Object(Default::default())),
        Value::String(s) => match serde_json::from_str::<Value>(&s) {
            Ok(v @ Value::Object(_)) => Ok(v),
            _ => Err("a string"),
        },
        Value::Array(_) => Err("an array"),
        Value::Bool(_) => Err("a boolean"),
        Value::Number(_) => Err("a number"),
    }
}
