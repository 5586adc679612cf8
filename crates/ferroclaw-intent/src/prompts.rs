//! Per-strategy instructions for the system prompt in `intent` mode.
//!
//! The templates ship in the binary (`prompts/*.md`); a file named
//! `<strategy>.md` in an override directory replaces one. `{{tools}}` is replaced by a
//! list of the offered tools, `{{tool_names}}` by their names.

use std::io;
use std::path::Path;

use crate::{Strategy, ToolSpec};

/// The built-in template for a strategy.
pub fn template(strategy: Strategy) -> &'static str {
    match strategy {
        Strategy::Harmony => include_str!("../prompts/harmony.md"),
        Strategy::NativeText => include_str!("../prompts/native_text.md"),
        Strategy::GuidedJson => include_str!("../prompts/guided_json.md"),
        Strategy::React => include_str!("../prompts/react.md"),
        Strategy::Markers => include_str!("../prompts/markers.md"),
        Strategy::Fuzzy => include_str!("../prompts/fuzzy.md"),
    }
}

/// Read `<dir>/<strategy>.md` if it exists.
pub fn load_override(dir: &Path, strategy: Strategy) -> io::Result<Option<String>> {
    let path = dir.join(format!("{}.md", strategy.as_str()));
    match std::fs::read_to_string(&path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// The override if present, else the built-in template.
pub fn resolve(dir: Option<&Path>, strategy: Strategy) -> io::Result<String> {
    if let Some(d) = dir {
        if let Some(s) = load_override(d, strategy)? {
            return Ok(s);
        }
    }
    Ok(template(strategy).to_string())
}

/// Fill in `{{tools}}` and `{{tool_names}}`.
pub fn render(tpl: &str, tools: &[ToolSpec]) -> String {
    let mut list = String::new();
    for t in tools {
        list.push_str("- `");
        list.push_str(&t.name);
        list.push('`');
        let params = param_summary(&t.parameters);
        if !params.is_empty() {
            list.push_str(" (");
            list.push_str(&params);
            list.push(')');
        }
        if !t.description.trim().is_empty() {
            list.push_str(": ");
            list.push_str(t.description.trim());
        }
        list.push('\n');
    }
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    tpl.replace("{{tools}}", list.trim_end())
        .replace("{{tool_names}}", &names.join(", "))
}

fn param_summary(schema: &serde_json::Value) -> String {
    let Some(props) = schema.get("properties").and_then(|p| p.as_object()) else {
        return String::new();
    };
    let required: Vec<&str> = schema
        .get("required")
        .and_then(|r| r.as_array())
        .map(|a| a.iter().filter_map(|v| v.as_str()).collect())
        .unwrap_or_default();
    props
        .iter()
        .map(|(k, v)| {
            let ty = v.get("type").and_then(|t| t.as_str()).unwrap_or("any");
            let opt = if required.contains(&k.as_str()) {
                ""
            } else {
                "?"
            };
            format!("{k}{opt}: {ty}")
        })
        .collect::<Vec<_>>()
        .join(", ")
}
