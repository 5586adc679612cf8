//! Tools, names and argument coercion.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use ferroclaw_types::ToolDefinition;
use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A tool as the parser sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    /// Extra names the model may use for this tool (in addition to the global aliases).
    #[serde(default)]
    pub aliases: Vec<String>,
    #[serde(default)]
    pub description: String,
    /// JSON schema of the arguments.
    #[serde(default)]
    pub parameters: Value,
}

impl From<&ToolDefinition> for ToolSpec {
    fn from(d: &ToolDefinition) -> Self {
        ToolSpec {
            name: d.name.clone(),
            aliases: Vec::new(),
            description: d.description.clone(),
            parameters: d.parameters.clone(),
        }
    }
}

impl ToolSpec {
    pub fn new(name: &str, description: &str, parameters: Value) -> Self {
        ToolSpec {
            name: name.to_string(),
            aliases: Vec::new(),
            description: description.to_string(),
            parameters,
        }
    }

    pub fn with_aliases(mut self, aliases: &[&str]) -> Self {
        self.aliases = aliases.iter().map(|s| s.to_string()).collect();
        self
    }

    pub(crate) fn properties(&self) -> Vec<(&str, &Value)> {
        self.parameters
            .get("properties")
            .and_then(|p| p.as_object())
            .map(|m| m.iter().map(|(k, v)| (k.as_str(), v)).collect())
            .unwrap_or_default()
    }

    pub(crate) fn required(&self) -> Vec<&str> {
        self.parameters
            .get("required")
            .and_then(|r| r.as_array())
            .map(|a| a.iter().filter_map(|v| v.as_str()).collect())
            .unwrap_or_default()
    }

    /// Every key of `obj` is one of the tool's properties.
    pub(crate) fn holds_keys(&self, obj: &serde_json::Map<String, Value>) -> bool {
        let props = self.properties();
        obj.keys().all(|k| props.iter().any(|(p, _)| p == k))
    }

    /// `obj` holds only the tool's properties, and every one it requires.
    pub(crate) fn fills(&self, obj: &serde_json::Map<String, Value>) -> bool {
        self.holds_keys(obj) && self.required().iter().all(|r| obj.contains_key(*r))
    }

    /// A property's own schema.
    pub(crate) fn prop(&self, key: &str) -> Option<&Value> {
        self.parameters.get("properties")?.get(key)
    }

    /// A property's description, "" when it has none.
    pub(crate) fn prop_description(&self, key: &str) -> &str {
        self.prop(key)
            .and_then(|p| p.get("description"))
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    pub(crate) fn prop_type(&self, key: &str) -> Option<&str> {
        let p = self.prop(key)?;
        match p.get("type")? {
            Value::String(s) => Some(s.as_str()),
            Value::Array(a) => a.iter().filter_map(|v| v.as_str()).find(|t| *t != "null"),
            _ => None,
        }
    }

    /// The property a single bare value goes to: the only/first required property,
    /// else the first property.
    pub(crate) fn primary_property(&self) -> Option<&str> {
        let req = self.required();
        if let Some(r) = req
            .iter()
            .find(|r| self.prop_type(r).is_none_or(|t| t == "string"))
        {
            return Some(r);
        }
        if let Some(r) = req.first() {
            return Some(r);
        }
        self.properties().first().map(|(k, _)| *k)
    }
}

/// Built-in tool-name aliases (alias → canonical). Applied only when the canonical tool
/// is offered.
pub fn default_aliases() -> BTreeMap<String, String> {
    const PAIRS: &[(&str, &str)] = &[
        ("search", "web_search"),
        ("websearch", "web_search"),
        ("web-search", "web_search"),
        ("search_web", "web_search"),
        ("google", "web_search"),
        ("browser.search", "web_search"),
        ("fetch", "web_fetch"),
        ("webfetch", "web_fetch"),
        ("web-fetch", "web_fetch"),
        ("fetch_url", "web_fetch"),
        ("open_url", "web_fetch"),
        ("browse", "web_fetch"),
        ("browser.open", "web_fetch"),
        ("read_file", "read"),
        ("readfile", "read"),
        ("file_read", "read"),
        ("open_file", "read"),
        ("cat", "read"),
        ("open", "read"),
        ("write_file", "write"),
        ("writefile", "write"),
        ("file_write", "write"),
        ("save", "write"),
        ("save_file", "write"),
        ("create_file", "write"),
        ("run", "exec"),
        ("shell", "exec"),
        ("execute", "exec"),
        ("bash", "exec"),
        ("sh", "exec"),
        ("terminal", "exec"),
        ("run_command", "exec"),
        ("exec_command", "exec"),
        ("container.exec", "exec"),
        ("terminal_command", "exec"),
        ("run_terminal_command", "exec"),
        ("run_terminal_cmd", "exec"),
        ("shell_command", "exec"),
        ("execute_command", "exec"),
        ("edit_file", "edit"),
        ("str_replace", "edit"),
        ("replace", "edit"),
        ("list", "ls"),
        ("list_dir", "ls"),
        ("list_files", "ls"),
        ("find_files", "glob"),
        ("search_files", "grep"),
        ("rg", "grep"),
        ("search_memory", "memory_search"),
        ("memory", "memory_search"),
        ("recall", "memory_search"),
    ];
    PAIRS
        .iter()
        .map(|(a, c)| (a.to_string(), c.to_string()))
        .collect()
}

static TOKEN_RE: LazyLock<Regex> =
    LazyLock::new(|| ferroclaw_types::literal_regex(r"<\|[^|<>]{0,40}\|>"));

/// Strip leaked Harmony tokens and wrappers from a tool name:
/// `functions.read<|channel|>commentary` → `read`, `` `exec` `` → `exec`.
pub fn clean_tool_name(raw: &str) -> String {
    let mut s = raw;
    // Everything from the first special token on is channel noise.
    if let Some(m) = TOKEN_RE.find(s) {
        if m.start() > 0 {
            s = &s[..m.start()];
        } else {
            s = &s[m.end()..];
            if let Some(m2) = TOKEN_RE.find(s) {
                s = &s[..m2.start()];
            }
        }
    }
    if let Some(i) = s.find("<|") {
        s = &s[..i];
    }
    let mut s = s
        .trim()
        .trim_matches(|c: char| c == '"' || c == '\'' || c == '`' || c == '*')
        .trim();
    if let Some(rest) = s.strip_prefix("to=") {
        s = rest;
    }
    for p in ["functions.", "function.", "tools.", "tool."] {
        if s.len() > p.len() && s.get(..p.len()).is_some_and(|h| h.eq_ignore_ascii_case(p)) {
            s = &s[p.len()..];
        }
    }
    // A name is one token; drop anything after whitespace or an opening bracket.
    let end = s
        .find(|c: char| c.is_whitespace() || c == '(' || c == '[' || c == '{')
        .unwrap_or(s.len());
    s[..end]
        .trim_end_matches(['.', ',', ':', ';', '!', '?'])
        .to_string()
}

/// Map a raw name to one of the offered tools.
pub(crate) fn resolve<'a>(
    raw: &str,
    tools: &'a [ToolSpec],
    aliases: &BTreeMap<String, String>,
) -> Option<&'a ToolSpec> {
    let cleaned = clean_tool_name(raw);
    if cleaned.is_empty() {
        return None;
    }
    if let Some(t) = resolve_exact(&cleaned, tools, aliases) {
        return Some(t);
    }
    // Spelling variants of an offered name: `Web Search`, `getWeather`, `get-weather`.
    if let Some(t) = resolve_compact(raw, tools) {
        return Some(t);
    }
    // Degraded Harmony: channel words glued to the name (`readcommentary`, `execjson`).
    let lower = cleaned.to_ascii_lowercase();
    for suffix in [
        "commentary",
        "analysis",
        "final",
        "json",
        "code",
        "constrain",
    ] {
        if let Some(stem) = lower.strip_suffix(suffix) {
            if let Some(t) = resolve_exact(stem, tools, aliases) {
                return Some(t);
            }
        }
    }
    // The namespace of a model's built-in tools before an offered name (`browser.fetch_page`
    // as gpt-oss writes it, Gemini's `default_api.x`); never another service's namespace
    // (`calendar.delete` is not the file tool `delete`).
    let (ns, name) = cleaned.split_once('.')?;
    if ["browser", "container", "repo_browser", "default_api"].contains(&ns) && !name.contains('.')
    {
        return resolve_exact(name, tools, aliases);
    }
    None
}

/// Whether a written name is the tool's name whole, spelled any way (`Web Search`,
/// `web-search`, `functions.web_search`), not a name with words after it.
pub(crate) fn same_name(written: &str, name: &str) -> bool {
    compact(unprefixed(written)) == compact(name)
}

/// A written name without its quotes, `to=` and `functions.`-style namespace.
fn unprefixed(written: &str) -> &str {
    let s = written
        .trim()
        .trim_matches(|c: char| c == '"' || c == '\'' || c == '`' || c == '*');
    let s = s.strip_prefix("to=").unwrap_or(s);
    ["functions.", "function.", "tools.", "tool."]
        .iter()
        .find_map(|p| {
            s.get(..p.len())
                .filter(|h| h.eq_ignore_ascii_case(p))
                .map(|_| &s[p.len()..])
        })
        .unwrap_or(s)
}

/// Letters and digits only, lower case: `Web Search` = `web_search` = `webSearch`.
fn compact(s: &str) -> String {
    s.chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

fn resolve_compact<'a>(raw: &str, tools: &'a [ToolSpec]) -> Option<&'a ToolSpec> {
    let mut s = raw.trim();
    if let Some(m) = TOKEN_RE.find(s) {
        s = if m.start() > 0 {
            &s[..m.start()]
        } else {
            &s[m.end()..]
        };
    }
    let s = unprefixed(s);
    if s.len() > 128 || s.contains(['\n', '{', '(']) {
        return None;
    }
    let want = compact(s);
    if want.len() < 3 {
        return None;
    }
    // Two tools that differ only in punctuation: the text does not say which.
    let unique = |found: Vec<&'a ToolSpec>| match found.as_slice() {
        [one] => Some(*one),
        _ => None,
    };
    let exact: Vec<&'a ToolSpec> = tools.iter().filter(|t| compact(&t.name) == want).collect();
    if !exact.is_empty() {
        return unique(exact);
    }
    // `write_file` for `write_to_file`; `text_editor` for the MCP-namespaced
    // `developer__text_editor`.
    let words = content_words(s);
    if words.len() >= 6 {
        let content: Vec<&'a ToolSpec> = tools
            .iter()
            .filter(|t| content_words(&t.name) == words)
            .collect();
        if !content.is_empty() {
            return unique(content);
        }
    }
    let local: Vec<&'a ToolSpec> = tools
        .iter()
        .filter(|t| {
            t.name
                .rsplit_once("__")
                .is_some_and(|(_, l)| compact(l) == want)
        })
        .collect();
    unique(local)
}

/// A name's words without the little ones models drop or add (`write_to_file` and
/// `write_file` both give `writefile`).
fn content_words(s: &str) -> String {
    name_words(s)
        .into_iter()
        .filter(|w| !matches!(w.as_str(), "to" | "the" | "a" | "an" | "of" | "for"))
        .collect()
}

/// A tool name's words, lower case, camelCase split too (`SearchWeb`, `getWeather`).
pub(crate) fn name_words(name: &str) -> Vec<String> {
    let mut spaced = String::with_capacity(name.len() + 4);
    let mut prev_lower = false;
    for c in name.chars() {
        if c.is_uppercase() && prev_lower {
            spaced.push(' ');
        }
        prev_lower = c.is_lowercase() || c.is_ascii_digit();
        spaced.push(c);
    }
    spaced
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

fn resolve_exact<'a>(
    name: &str,
    tools: &'a [ToolSpec],
    aliases: &BTreeMap<String, String>,
) -> Option<&'a ToolSpec> {
    let lower = name.to_lowercase();
    let norm = lower.replace('-', "_");
    // (`n` is lowercased; a name in Cyrillic or Greek, `Поиск`, has non-ASCII capitals.)
    let by_name = |n: &str| {
        tools.iter().find(|t| {
            t.name.eq_ignore_ascii_case(n) || (!t.name.is_ascii() && t.name.to_lowercase() == n)
        })
    };
    if let Some(t) = by_name(&lower).or_else(|| by_name(&norm)) {
        return Some(t);
    }
    if let Some(t) = tools
        .iter()
        .find(|t| t.aliases.iter().any(|a| a.eq_ignore_ascii_case(&lower)))
    {
        return Some(t);
    }
    for key in [&lower, &norm] {
        if let Some(target) = aliases.get(key.as_str()) {
            if let Some(t) = by_name(target) {
                return Some(t);
            }
        }
    }
    None
}

/// Argument-name synonyms models use (synonym → canonical). Applied only when the
/// canonical name is a property of the tool and the synonym is not.
/// `"banana."`: the sentence's full stop or comma written inside the quotes, after a
/// word (not an ellipsis).
pub(crate) fn without_closing_stop(quoted: &str) -> &str {
    if ends_in_initialism(quoted) {
        return quoted;
    }
    quoted
        .strip_suffix(['.', ','])
        .filter(|v| v.ends_with(char::is_alphanumeric))
        .unwrap_or(quoted)
}

/// "Washington D.C.", "the U.S.": the last dot belongs to the letters before it.
pub(crate) fn ends_in_initialism(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() >= 4
        && b[b.len() - 4..].iter().enumerate().all(|(i, c)| {
            if i % 2 == 0 {
                c.is_ascii_uppercase()
            } else {
                *c == b'.'
            }
        })
        && (b.len() == 4 || !b[b.len() - 5].is_ascii_alphanumeric())
}

/// Keys that say nothing of what they hold.
const GENERIC_KEYS: &[&str] = &[
    "input",
    "inputs",
    "arg",
    "args",
    "argument",
    "arguments",
    "param",
    "params",
    "parameter",
    "parameters",
    "value",
    "val",
    "x",
    "q",
    "query",
    "text",
    "string",
    "s",
    "data",
    "content",
    "request",
    "prompt",
    "keyword",
    "keywords",
    "term",
    "search",
    "question",
    "tool_input",
    "action_input",
    "__arg1",
    "arg1",
    "input_text",
    "message",
    "expression",
];

const KEY_SYNONYMS: &[(&str, &str)] = &[
    ("file_path", "path"),
    ("filepath", "path"),
    ("file", "path"),
    ("filename", "path"),
    ("file_name", "path"),
    ("dir", "path"),
    ("directory", "path"),
    ("cmd", "command"),
    ("shell_command", "command"),
    ("script", "command"),
    ("q", "query"),
    ("search_query", "query"),
    ("search", "query"),
    ("term", "query"),
    ("link", "url"),
    ("uri", "url"),
    ("href", "url"),
    ("text", "content"),
    ("body", "content"),
    ("data", "content"),
    ("contents", "content"),
    ("old_text", "oldText"),
    ("old_string", "oldText"),
    ("old", "oldText"),
    ("new_text", "newText"),
    ("new_string", "newText"),
    ("new", "newText"),
    ("regex", "pattern"),
    ("glob", "pattern"),
    ("num_results", "count"),
    ("limit", "count"),
];

/// Arguments that are a JSON schema (`{"type": "object", "properties": {…}}`): the
/// model repeated a tool's definition, it did not call the tool.
pub(crate) fn is_schema_echo(args: &Value, tool: &ToolSpec) -> bool {
    let Some(o) = args.as_object() else {
        return false;
    };
    let own = |k: &str| tool.properties().iter().any(|(p, _)| *p == k);
    o.get("properties").is_some_and(Value::is_object)
        && o.get("type").and_then(Value::as_str) == Some("object")
        && !own("properties")
        && !own("type")
}

/// Coerce arguments to the tool's schema. Always returns a JSON object.
pub(crate) fn coerce_args(args: Value, tool: &ToolSpec) -> Value {
    let mut obj = match args {
        Value::Object(m) => m,
        // `"parameters": [{"city": "Tokyo"}]`
        Value::Array(mut a) if a.len() == 1 && a[0].is_object() => match a.pop() {
            Some(Value::Object(m)) => m,
            _ => Map::new(),
        },
        Value::Null => Map::new(),
        Value::String(s) => {
            let t = s.trim();
            match crate::jsonscan::parse_lenient(t) {
                Some(Value::Object(m)) if t.starts_with('{') => m,
                _ => single_value(Value::String(strip_quotes(t).to_string()), tool),
            }
        }
        other => single_value(other, tool),
    };
    let props = tool.properties();
    if !props.is_empty() {
        // Rename synonyms.
        let keys: Vec<String> = obj.keys().cloned().collect();
        for k in keys {
            if props.iter().any(|(p, _)| *p == k) {
                continue;
            }
            let canon = KEY_SYNONYMS
                .iter()
                .find(|(syn, _)| syn.eq_ignore_ascii_case(&k))
                .map(|(_, c)| *c)
                .or_else(|| {
                    props
                        .iter()
                        .find(|(p, _)| p.eq_ignore_ascii_case(&k) || p.replace('_', "") == k)
                        .map(|(p, _)| *p)
                });
            if let Some(c) = canon {
                if props.iter().any(|(p, _)| *p == c) && !obj.contains_key(c) {
                    if let Some(v) = obj.remove(&k) {
                        obj.insert(c.to_string(), v);
                    }
                }
            }
        }
        // A lone unknown key (`input`, `arg`) goes to the primary property — not a
        // name of its own meaning (`busStopName` is no `geometry`), unless the tool has
        // no other property it could be.
        if obj.len() == 1 {
            let k = obj.keys().next().cloned().unwrap_or_default();
            let generic = GENERIC_KEYS.contains(&k.to_ascii_lowercase().as_str());
            if !props.iter().any(|(p, _)| *p == k) && (generic || props.len() == 1) {
                if let Some(p) = tool.primary_property() {
                    if let Some(v) = obj.remove(&k) {
                        obj.insert(p.to_string(), v);
                    }
                }
            }
        }
        // Types.
        let keys: Vec<String> = obj.keys().cloned().collect();
        for k in keys {
            let Some(ty) = tool.prop_type(&k) else {
                continue;
            };
            if let Some(v) = obj.get_mut(&k) {
                coerce_value(v, ty);
            }
        }
    }
    Value::Object(obj)
}

fn single_value(v: Value, tool: &ToolSpec) -> Map<String, Value> {
    let mut m = Map::new();
    let empty = matches!(&v, Value::String(s) if s.trim().is_empty());
    if empty {
        return m;
    }
    let key = tool.primary_property().unwrap_or("input").to_string();
    m.insert(key, v);
    m
}

fn coerce_value(v: &mut Value, ty: &str) {
    match (ty, &*v) {
        ("integer", Value::String(s)) => {
            if let Ok(n) = s.trim().parse::<i64>() {
                *v = Value::from(n);
            } else if let Ok(f) = s.trim().parse::<f64>() {
                if f.fract() == 0.0 && f.abs() < 9e15 {
                    *v = Value::from(f as i64);
                }
            }
        }
        ("integer", Value::Number(n)) => {
            if let Some(f) = n.as_f64() {
                if n.as_i64().is_none() && f.fract() == 0.0 && f.abs() < 9e15 {
                    *v = Value::from(f as i64);
                }
            }
        }
        ("number", Value::String(s)) => {
            // `1024` stays an integer: JSON numbers keep the form the model wrote.
            if let Ok(n) = s.trim().parse::<i64>() {
                *v = Value::from(n);
            } else if let Ok(f) = s.trim().parse::<f64>() {
                if let Some(n) = serde_json::Number::from_f64(f) {
                    *v = Value::Number(n);
                }
            }
        }
        ("boolean", Value::String(s)) => match s.trim().to_ascii_lowercase().as_str() {
            "true" | "yes" | "1" | "on" => *v = Value::Bool(true),
            "false" | "no" | "0" | "off" => *v = Value::Bool(false),
            _ => {}
        },
        ("string", Value::Number(_) | Value::Bool(_)) => *v = Value::String(v.to_string()),
        ("object" | "array", Value::String(s)) => {
            if let Some(p) = crate::jsonscan::parse_lenient(s.trim()) {
                if (ty == "object" && p.is_object()) || (ty == "array" && p.is_array()) {
                    *v = p;
                }
            } else if ty == "object" {
                // Roo and Cline nest an object's fields as tags:
                // `<args><file><path>a.md</path></file></args>`.
                if let Some(m) = xml_fields(s.trim(), 0) {
                    *v = Value::Object(m);
                }
            }
        }
        _ => {}
    }
}

/// `<a>x</a><b><c>y</c></b>` as `{"a": "x", "b": {"c": "y"}}`; a repeated tag makes a
/// list. `None` unless the whole text is such tags (attributes, stray text and
/// unclosed tags are not read).
fn xml_fields(s: &str, depth: usize) -> Option<Map<String, Value>> {
    if depth > 8 || !s.starts_with('<') {
        return None;
    }
    let mut m = Map::new();
    let mut rest = s;
    while !rest.is_empty() {
        let open_end = rest.find('>')?;
        let name = rest.strip_prefix('<')?.get(..open_end - 1)?;
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return None;
        }
        let body_start = open_end + 1;
        let close = format!("</{name}>");
        let body_len = rest[body_start..].find(&close)?;
        let body = rest[body_start..body_start + body_len].trim();
        // A body that opens a tag must be fields too: a broken one fails the whole.
        let value = if body.starts_with('<') {
            Value::Object(xml_fields(body, depth + 1)?)
        } else {
            Value::String(body.to_string())
        };
        match m.get_mut(name) {
            Some(Value::Array(list)) => list.push(value),
            Some(prev) => *prev = Value::Array(vec![prev.take(), value]),
            None => {
                m.insert(name.to_string(), value);
            }
        }
        rest = rest[body_start + body_len + close.len()..].trim_start();
    }
    (!m.is_empty()).then_some(m)
}

/// Strip one pair of matching surrounding quotes or backticks.
pub(crate) fn strip_quotes(s: &str) -> &str {
    let s = s.trim();
    for (o, c) in [
        ('"', '"'),
        ('\'', '\''),
        ('`', '`'),
        ('\u{201c}', '\u{201d}'),
        ('\u{2018}', '\u{2019}'),
        ('«', '»'),
        ('„', '“'),
    ] {
        if s.len() >= o.len_utf8() + c.len_utf8() && s.starts_with(o) && s.ends_with(c) {
            let inner = &s[o.len_utf8()..s.len() - c.len_utf8()];
            if !inner.contains(o) || o == '`' && !inner.contains('`') {
                return inner;
            }
        }
    }
    s
}
