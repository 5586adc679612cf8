//! Tool-schema cleaning: each provider family accepts a different subset of JSON Schema.
//!
//! The walk is keyword-aware: only positions that hold sub-schemas are recursed into,
//! so a property that happens to be *named* `definitions` or `default` is kept.

use serde_json::{Map, Value};

/// Which dialect of JSON Schema a provider accepts for tool parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SchemaFlavor {
    /// OpenAI-compatible servers: the schema is sent as written.
    #[default]
    OpenAi,
    /// Anthropic: no `$ref` / `$defs`; references are inlined.
    Anthropic,
    /// Gemini (also behind OpenAI-compatible endpoints): Anthropic's rules plus a much
    /// smaller keyword set.
    Gemini,
}

/// Keywords whose value is one sub-schema (or `true`/`false`, or an array for `items`).
const SCHEMA_KEYS: &[&str] = &[
    "items",
    "additionalProperties",
    "additionalItems",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedProperties",
    "unevaluatedItems",
];
/// Keywords whose value is an array of sub-schemas.
const SCHEMA_ARRAY_KEYS: &[&str] = &["anyOf", "oneOf", "allOf", "prefixItems"];
/// Keywords whose value maps names to sub-schemas.
const SCHEMA_MAP_KEYS: &[&str] = &["properties", "patternProperties", "dependentSchemas"];

/// Keywords Gemini rejects or ignores badly; dropped wherever a schema sits.
const GEMINI_DROP: &[&str] = &[
    "additionalProperties",
    "patternProperties",
    "unevaluatedProperties",
    "unevaluatedItems",
    "additionalItems",
    "dependentSchemas",
    "dependentRequired",
    "propertyNames",
    "examples",
    "default",
    "$id",
    "$comment",
    "$anchor",
    "if",
    "then",
    "else",
    "not",
    "contains",
    "minContains",
    "maxContains",
];

/// String formats Gemini accepts; any other `format` is removed.
const GEMINI_FORMATS: &[&str] = &["enum", "date-time"];

/// Returns `schema` rewritten for `flavor`. Never fails: anything it cannot resolve
/// (an external `$ref`, a reference cycle) degrades to a permissive schema.
pub fn clean_schema(schema: &Value, flavor: SchemaFlavor) -> Value {
    if flavor == SchemaFlavor::OpenAi {
        return schema.clone();
    }
    let mut stack = Vec::new();
    clean_node(schema, schema, flavor, &mut stack)
}

fn clean_node(node: &Value, root: &Value, flavor: SchemaFlavor, stack: &mut Vec<String>) -> Value {
    let Value::Object(obj) = node else {
        // `true` / `false` schemas and stray values pass unchanged.
        return node.clone();
    };

    if let Some(reference) = obj.get("$ref").and_then(Value::as_str) {
        return inline_ref(reference, obj, root, flavor, stack);
    }

    let mut out = Map::with_capacity(obj.len());
    for (key, value) in obj {
        let k = key.as_str();
        if matches!(k, "$defs" | "definitions" | "$schema") {
            continue;
        }
        if flavor == SchemaFlavor::Gemini && GEMINI_DROP.contains(&k) {
            continue;
        }
        let cleaned = if SCHEMA_MAP_KEYS.contains(&k) {
            match value {
                Value::Object(props) => Value::Object(
                    props
                        .iter()
                        .map(|(name, s)| (name.clone(), clean_node(s, root, flavor, stack)))
                        .collect(),
                ),
                other => other.clone(),
            }
        } else if SCHEMA_ARRAY_KEYS.contains(&k) || (k == "items" && value.is_array()) {
            match value {
                Value::Array(items) => Value::Array(
                    items
                        .iter()
                        .map(|s| clean_node(s, root, flavor, stack))
                        .collect(),
                ),
                other => other.clone(),
            }
        } else if SCHEMA_KEYS.contains(&k) {
            clean_node(value, root, flavor, stack)
        } else {
            value.clone()
        };
        out.insert(key.clone(), cleaned);
    }

    if flavor == SchemaFlavor::Gemini {
        gemini_fixups(&mut out);
    }
    Value::Object(out)
}

/// Replaces a `$ref` with the schema it points to; sibling keywords (often a
/// `description`) override the target's.
fn inline_ref(
    reference: &str,
    obj: &Map<String, Value>,
    root: &Value,
    flavor: SchemaFlavor,
    stack: &mut Vec<String>,
) -> Value {
    let target = reference
        .strip_prefix('#')
        .and_then(|pointer| root.pointer(pointer));

    let mut resolved = match target {
        // A reference back into a schema we are already expanding: inlining would never
        // end. Recursive structures are nearly always objects, so say that much.
        Some(_) if stack.iter().any(|r| r == reference) => {
            let mut m = Map::new();
            m.insert("type".into(), Value::String("object".into()));
            m
        }
        Some(target) => {
            stack.push(reference.to_owned());
            let v = clean_node(target, root, flavor, stack);
            stack.pop();
            match v {
                Value::Object(m) => m,
                // `$ref` to a boolean schema: nothing to merge into.
                _ => Map::new(),
            }
        }
        // External or dangling reference: the siblings are all we have.
        None => Map::new(),
    };

    let siblings: Map<String, Value> = obj
        .iter()
        .filter(|(k, _)| k.as_str() != "$ref")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if !siblings.is_empty() {
        if let Value::Object(cleaned) = clean_node(&Value::Object(siblings), root, flavor, stack) {
            resolved.extend(cleaned);
        }
    }
    Value::Object(resolved)
}

fn gemini_fixups(out: &mut Map<String, Value>) {
    // `const` is unsupported; a one-value enum says the same thing.
    if let Some(c) = out.remove("const") {
        out.entry("enum").or_insert_with(|| Value::Array(vec![c]));
    }
    if let Some(Value::String(f)) = out.get("format") {
        if !GEMINI_FORMATS.contains(&f.as_str()) {
            out.remove("format");
        }
    }
    // Gemini wants a single `type`; `["string", "null"]` becomes a nullable string.
    if let Some(Value::Array(types)) = out.get("type") {
        let nullable = types.iter().any(|t| t == "null");
        let first = types.iter().find(|t| *t != "null").cloned();
        match first {
            Some(t) => {
                out.insert("type".into(), t);
            }
            None => {
                out.remove("type");
            }
        }
        if nullable {
            out.insert("nullable".into(), Value::Bool(true));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sample() -> Value {
        json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "target": {"$ref": "#/$defs/Target", "description": "where"},
                "legacy": {"$ref": "#/definitions/Mode"},
                "definitions": {"type": "string", "description": "a property named like a keyword"},
                "when": {"type": "string", "format": "date-time", "default": "now"},
                "mail": {"type": ["string", "null"], "format": "email", "examples": ["a@b"]},
                "kind": {"const": "x"}
            },
            "required": ["target"],
            "additionalProperties": false,
            "$defs": {
                "Target": {"type": "object", "properties": {"host": {"type": "string"}}}
            },
            "definitions": {
                "Mode": {"type": "string", "enum": ["a", "b"]}
            }
        })
    }

    #[test]
    fn openai_passes_through() {
        let s = sample();
        assert_eq!(clean_schema(&s, SchemaFlavor::OpenAi), s);
    }

    #[test]
    fn anthropic_inlines_refs_and_drops_defs() {
        let out = clean_schema(&sample(), SchemaFlavor::Anthropic);
        assert!(out.get("$defs").is_none());
        assert!(out.get("definitions").is_none());
        assert!(out.get("$schema").is_none());
        assert_eq!(out["additionalProperties"], false);
        assert_eq!(
            out["properties"]["target"],
            json!({"type": "object", "properties": {"host": {"type": "string"}}, "description": "where"})
        );
        assert_eq!(
            out["properties"]["legacy"],
            json!({"type": "string", "enum": ["a", "b"]})
        );
        // A property called `definitions` is data, not a keyword.
        assert_eq!(out["properties"]["definitions"]["type"], "string");
        assert_eq!(out["properties"]["when"]["default"], "now");
    }

    #[test]
    fn cyclic_refs_terminate() {
        let s = json!({
            "type": "object",
            "properties": {"root": {"$ref": "#/$defs/Node"}},
            "$defs": {"Node": {
                "type": "object",
                "properties": {
                    "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}
                }
            }}
        });
        let out = clean_schema(&s, SchemaFlavor::Anthropic);
        let node = &out["properties"]["root"];
        assert_eq!(node["type"], "object");
        assert_eq!(
            node["properties"]["children"]["items"],
            json!({"type": "object"})
        );
        assert!(!out.to_string().contains("$ref"));
    }

    #[test]
    fn dangling_ref_keeps_siblings() {
        let s = json!({"properties": {"x": {"$ref": "https://example.com/s.json", "description": "d"}}});
        let out = clean_schema(&s, SchemaFlavor::Anthropic);
        assert_eq!(out["properties"]["x"], json!({"description": "d"}));
    }

    #[test]
    fn gemini_drops_unsupported_keywords() {
        let out = clean_schema(&sample(), SchemaFlavor::Gemini);
        assert!(out.get("additionalProperties").is_none());
        let p = &out["properties"];
        assert_eq!(p["when"], json!({"type": "string", "format": "date-time"}));
        assert_eq!(p["mail"], json!({"type": "string", "nullable": true}));
        assert_eq!(p["kind"], json!({"enum": ["x"]}));
        assert_eq!(p["target"]["description"], "where");
        assert_eq!(p["target"]["properties"]["host"]["type"], "string");
    }

    #[test]
    fn gemini_recurses_into_combinators_and_keeps_title() {
        let s = json!({"title": "T", "anyOf": [{"type": "string", "default": "a"}, {"type": "integer", "examples": [1]}]});
        let out = clean_schema(&s, SchemaFlavor::Gemini);
        assert_eq!(
            out,
            json!({"title": "T", "anyOf": [{"type": "string"}, {"type": "integer"}]})
        );
    }
}
