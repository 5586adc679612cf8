//! Arguments named in prose: reasoning models spell out the values they are about to
//! pass, often sentences away from the tool's name — "The function requires the
//! location parameter, which in this case is Tokyo", "with x=5, y=3, operation=\"add\"",
//! "I'll input \"London, UK\" as the location", "experiment_name \"boiling_point\"".
//! [`bindings`] reads such statements for the properties of one tool.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Map, Value};

use crate::ToolSpec;

/// Bound values for `tool`'s properties found in `text` (the last usable statement per
/// property).
pub(crate) fn bindings(text: &str, tool: &ToolSpec) -> Map<String, Value> {
    let mut out = flat_bindings(text, tool);
    // "- name: 'John Doe'\n- age: 30" for `update_user(profile: {name, age, …})`: the
    // values of an object property's own keys, when the text gives two or more of them.
    // (Only when the text says it lists what the call takes — "I have all the required
    // parameters:" — or names the property; not another record's "name: Bob, age: 52".)
    let lower = text.to_ascii_lowercase();
    let lists_arguments = ["parameter", "argument", "field"]
        .iter()
        .any(|w| lower.contains(w));
    for (prop, schema) in tool.properties() {
        if out.contains_key(prop) || schema.get("properties").is_none() {
            continue;
        }
        if !lists_arguments && !lower.contains(&prop.to_ascii_lowercase()) {
            continue;
        }
        let inner = ToolSpec::new(prop, "", schema.clone());
        let nested = flat_bindings(text, &inner);
        if nested.len() >= 2 {
            out.insert(prop.to_string(), Value::Object(nested));
        }
    }
    out
}

fn flat_bindings(text: &str, tool: &ToolSpec) -> Map<String, Value> {
    let mut out = Map::new();
    if text.len() > 64 * 1024 {
        return out;
    }
    let props: Vec<(&str, String)> = tool
        .properties()
        .into_iter()
        .map(|(p, _)| (p, key_form(p)))
        .collect();
    if props.is_empty() {
        return out;
    }
    // Every statement names its property: a text that names none has no bindings, and
    // most texts are such (this keeps the regexes off the hot path).
    let compact_text: String = text
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect();
    let named = |f: &str| {
        compact_text.contains(f)
            || ["id", "path", "name"].iter().any(|k| {
                f.strip_suffix(k)
                    .is_some_and(|t| t.len() > 2 && compact_text.contains(t))
            })
    };
    let has_name = props
        .iter()
        .any(|(p, _)| p.eq_ignore_ascii_case("name") || p.eq_ignore_ascii_case("title"));
    let called = has_name
        && ["called", "named", "titled"]
            .iter()
            .any(|w| compact_text.contains(w));
    // "for 2 people": the party's size, for the one property that counts people.
    if let Some((prop, n)) = people_count(text, tool, &props) {
        out.insert(prop.to_string(), Value::from(n));
    }

    // "a maximum number of results set to 10" for `max_results`: a bound spelled out.
    if let Some((prop, n)) = bound_spelled_out(text, &props) {
        out.insert(prop.to_string(), Value::from(n));
    }
    // Values whose shape says which property they fill (an ISO time, e-mail addresses)
    // over what a key's words bound.
    // (Over a key's words only where they bound a piece of it: "the attendees
    // alice@co.com and bob@co.com" read as "alice@co.com".)
    let shaped = |out: &mut Map<String, Value>| {
        for (prop, v) in shaped_values(text, tool) {
            let partial = match (out.get(prop), &v) {
                (None, _) => true,
                (Some(Value::String(old)), Value::Array(items)) => {
                    items.iter().any(|i| i.as_str() == Some(old.as_str()))
                }
                (Some(old), new) => old == new,
            };
            if partial {
                out.insert(prop.to_string(), v);
            }
        }
    };
    // "with 'date' as the argument": the one required property, named generically.
    let sole_required = match tool.required()[..] {
        [one] => Some(one),
        _ => None,
    };
    let generic = |k: &str| {
        sole_required.filter(|_| {
            matches!(
                k.to_ascii_lowercase().as_str(),
                "argument" | "parameter" | "input" | "arg" | "param"
            )
        })
    };
    let generically_named = sole_required.is_some()
        && ["argument", "parameter", "input"]
            .iter()
            .any(|w| compact_text.contains(w));
    if !called && !generically_named && !props.iter().any(|(_, f)| !f.is_empty() && named(f)) {
        shaped(&mut out);
        return out;
    }
    let mut found: Vec<(usize, &str, Value)> = Vec::new();
    for (re, key_group, value_group) in [
        (&*KEY_THEN_VALUE, 1, 2),
        (&*KEY_IS_CJK, 1, 2),
        (&*SET_KEY_TO, 1, 2),
        (&*SPECIFY_KEY_AS, 1, 2),
        (&*VALUE_AS_KEY, 2, 1),
        (&*KEY_QUOTED, 1, 2),
        (&*WITH_KEY_VALUE, 1, 2),
        (&*KEY_LATER_ID, 1, 2),
        (&*KEY_ID, 1, 2),
        (&*KEY_AS_QUOTED, 1, 2),
        (&*THE_KEY_OF, 1, 2),
        (&*KEY_PAREN, 1, 2),
    ] {
        // Restart after each key, not after each whole match: in `add: a=2, b=3` the
        // failed key `add` must not swallow `a`.
        let mut pos = 0;
        while let Some(c) = re.captures_at(text, pos) {
            let (Some(k), Some(v)) = (c.get(key_group), c.get(value_group)) else {
                break;
            };
            // Past the key's first word (not the whole match).
            let first_word = text[k.start()..k.end()]
                .find(char::is_whitespace)
                .unwrap_or(k.end() - k.start());
            pos = (k.start() + first_word.max(1)).max(pos + 1);
            while pos < text.len() && !text.is_char_boundary(pos) {
                pos += 1;
            }
            if pos > text.len() {
                break;
            }
            let assigned_here =
                k.end() <= v.start() && text[k.end()..v.start()].contains(['=', ':']);
            // The generic word only as "call it with 'date' as the argument": a quoted
            // value given to the call its own sentence names.
            let given_to_call = || {
                std::ptr::eq(re, &*VALUE_AS_KEY) && v.as_str().starts_with(['"', '\'']) && {
                    let head = &text[..v.start()];
                    let sentence = head.rsplit(['.', '!', '?', '\n']).next().unwrap_or(head);
                    let lower = sentence.to_ascii_lowercase();
                    lower.trim_end().ends_with(" with")
                        && ["call", "use", "invoke", "function", "tool"]
                            .iter()
                            .any(|w| lower.contains(w))
                }
            };
            let Some(prop) = match_prop(k.as_str(), &props)
                .or_else(|| generic(k.as_str()).filter(|_| given_to_call()))
                .or_else(|| {
                    assigned_here
                        .then(|| path_prop(k.as_str(), &props))
                        .flatten()
                })
            else {
                continue;
            };
            // A one-letter property (`a`, `x`) only in `x=5` / `x: 5` form.
            let short = prop.chars().count() <= 2;
            let between = if k.end() <= v.start() {
                &text[k.end()..v.start()]
            } else {
                ""
            };
            let assigned = between.contains(['=', ':']) || v.as_str().starts_with(['"', '\'']);
            if short && !assigned {
                continue;
            }
            // (`firstName (string)` in a list of parameters is its type.)
            // ("with the city name": what the value is, not the value.)
            let v_lower = v.as_str().trim().to_ascii_lowercase();
            if TYPE_WORDS.contains(&v_lower.as_str()) || GENERIC_VALUES.contains(&v_lower.as_str())
            {
                continue;
            }
            // ("the entire content of 'numbers.txt'": the file the content is in.)
            let of_file = std::ptr::eq(re, &*KEY_AS_QUOTED)
                && text[k.end()..v.start()].trim() == "of"
                && looks_like_file(v.as_str().trim_matches(['"', '\'']))
                && !["file", "path", "name", "url"]
                    .iter()
                    .any(|f| prop.to_ascii_lowercase().contains(f));
            if of_file {
                continue;
            }
            // ("a US location (CA is California)": a remark in brackets, not the value.)
            let bracketed = std::ptr::eq(re, &*KEY_PAREN);
            if bracketed
                && v_lower
                    .split_whitespace()
                    .any(|w| matches!(w, "is" | "are" | "was" | "means"))
            {
                continue;
            }
            // (`final_price 19.99`: an identifier's pattern stops at the decimal point.)
            let raw = match decimals_after(text, v.end()) {
                Some(end) if v.as_str().bytes().all(|b| b.is_ascii_digit()) => {
                    &text[v.start()..end]
                }
                // (`command: ls -la /tmp`: a command line after its label is the whole
                // line, not its program.)
                _ if assigned
                    && command_prop(prop)
                    && v.as_str().starts_with(char::is_alphabetic) =>
                {
                    let line = &text[v.start()..];
                    let line = &line[..line.find('\n').unwrap_or(line.len())];
                    // (Up to a sentence that follows it, "… ls -la /tmp. Then …", or the
                    // prose it goes on with: "… (to check …)", ", then …", " to look for …".)
                    let sentence_end = line
                        .match_indices(". ")
                        .find(|(i, _)| line[i + 2..].starts_with(char::is_uppercase))
                        .map_or(line.len(), |(i, _)| i);
                    let line = &line[..sentence_end];
                    let prose = COMMAND_PROSE.find(line).map_or(line.len(), |m| m.start());
                    line[..prose].trim_end().trim_end_matches(['.', ','])
                }
                _ => v.as_str(),
            };
            if let Some(value) = value_of(raw) {
                found.push((v.start(), prop, value));
            }
        }
    }
    // "for four guests": a count before a numeric property's name.
    for c in COUNT_OF_KEY.captures_iter(text) {
        let (Some(n), Some(k)) = (c.get(1), c.get(2)) else {
            continue;
        };
        let Some(prop) = match_prop(k.as_str(), &props) else {
            continue;
        };
        if !matches!(tool.prop_type(prop), Some("integer" | "number")) {
            continue;
        }
        let word = n.as_str().to_ascii_lowercase();
        let count = word.parse::<u64>().ok().or_else(|| {
            NUMBER_WORDS
                .iter()
                .position(|w| *w == word)
                .and_then(|i| u64::try_from(i + 1).ok())
        });
        if let Some(count) = count {
            found.push((n.start(), prop, Value::from(count)));
        }
    }
    // "the ruby channel", "the users table": a container named before its kind.
    let containers = props
        .iter()
        .any(|(p, _)| CONTAINERS.iter().any(|c| p.eq_ignore_ascii_case(c)));
    // (Only for a tool that takes a container: the search itself is not free.)
    if containers {
        for c in NAME_THEN_CONTAINER.captures_iter(text) {
            let (Some(v), Some(k)) = (c.get(1), c.get(2)) else {
                continue;
            };
            let kind = k.as_str().to_ascii_lowercase();
            let value = v.as_str();
            if !CONTAINERS.contains(&kind.as_str())
                || NOT_NAMES.contains(&value.to_ascii_lowercase().as_str())
            {
                continue;
            }
            if let Some((prop, _)) = props.iter().find(|(p, _)| p.eq_ignore_ascii_case(&kind)) {
                if matches!(tool.prop_type(prop), None | Some("string")) {
                    found.push((v.start(), prop, Value::String(value.to_string())));
                }
            }
        }
    }
    // `a project named "Dark Mode Feature"`, "a timer called barbecue": the thing's
    // name, for a `name` property.
    if has_name {
        for c in NAMED_QUOTED.captures_iter(text) {
            let (Some(w), Some(v)) = (c.get(1), c.get(2)) else {
                continue;
            };
            let raw = if v.as_str().starts_with(['"', '\'', '`']) {
                v.as_str()
            } else {
                let word = v.as_str().trim_end_matches(['.', ',', ';', '!', '?']);
                if NOT_NAMED.contains(&word.to_ascii_lowercase().as_str()) {
                    continue;
                }
                word
            };
            let key = if w.as_str().eq_ignore_ascii_case("titled") {
                "title"
            } else {
                "name"
            };
            if let Some((prop, _)) = props.iter().find(|(p, _)| p.eq_ignore_ascii_case(key)) {
                if let Some(value) = value_of(raw) {
                    found.push((v.start(), prop, value));
                }
            }
        }
    }
    // "update the three cogs with `replace_all`": a flag named as what to do it with.
    for c in WITH_FLAG.captures_iter(text) {
        let Some(k) = c.get(1) else { continue };
        if let Some(prop) = match_prop(k.as_str(), &props) {
            if tool.prop_type(prop) == Some("boolean") {
                found.push((k.start(), prop, Value::Bool(true)));
            }
        }
    }
    // The last statement wins: reasoning revises ("… "San Francisco". So we should call
    // get_weather with location "San Francisco, USA"").
    found.sort_by_key(|(at, _, _)| *at);
    for (_, prop, value) in found {
        out.insert(prop.to_string(), value);
    }
    shaped(&mut out);
    out
}

/// "… for 2025-02-10T14:00:00 with alice@co.com and bob@co.com": one ISO 8601 time for
/// the one property that takes a time, and the addresses for the one property that
/// takes e-mail addresses (a list, or one address).
fn shaped_values<'a>(text: &str, tool: &'a ToolSpec) -> Vec<(&'a str, Value)> {
    let mut out = Vec::new();
    // (Most texts hold neither: the scans stay off the hot path.)
    let iso_shaped = text
        .as_bytes()
        .windows(3)
        .any(|w| w[0].is_ascii_digit() && w[1] == b'T' && w[2].is_ascii_digit());
    if !iso_shaped && !text.contains('@') {
        return out;
    }
    let described = |p: &str, words: &[&str]| {
        let name = p.to_ascii_lowercase();
        let desc = tool.prop_description(p).to_ascii_lowercase();
        words.iter().any(|w| name.contains(w) || desc.contains(w))
    };
    let props = tool.properties();
    let times: Vec<&str> = if iso_shaped {
        ISO_TIME.find_iter(text).map(|m| m.as_str()).collect()
    } else {
        Vec::new()
    };
    if let [t] = times.as_slice() {
        let slots: Vec<&str> = props
            .iter()
            .map(|(p, _)| *p)
            .filter(|p| {
                // (Not a zone or a time-out: `timezone`, `timeout_ms`.)
                let name = key_form(p);
                matches!(tool.prop_type(p), None | Some("string"))
                    && !name.contains("zone")
                    && !name.contains("out")
                    && (name.ends_with("time")
                        || name == "when"
                        || name == "start"
                        || described(p, &["iso 8601", "iso8601", "datetime"]))
            })
            .collect();
        if let [p] = slots.as_slice() {
            out.push((*p, Value::String((*t).to_string())));
        }
    }
    let mails: Vec<&str> = if text.contains('@') {
        EMAIL.find_iter(text).map(|m| m.as_str()).collect()
    } else {
        Vec::new()
    };
    if !mails.is_empty() {
        let slots: Vec<&str> = props
            .iter()
            .map(|(p, _)| *p)
            .filter(|p| {
                let name = key_form(p);
                ["email", "attendee", "participant", "recipient"]
                    .iter()
                    .any(|w| name.contains(w))
                    || described(p, &["email address", "e-mail address"])
            })
            .collect();
        if let [p] = slots.as_slice() {
            match tool.prop_type(p) {
                Some("array") => out.push((
                    *p,
                    Value::Array(
                        mails
                            .iter()
                            .map(|m| Value::String((*m).to_string()))
                            .collect(),
                    ),
                )),
                None | Some("string") if mails.len() == 1 => {
                    out.push((*p, Value::String(mails[0].to_string())))
                }
                _ => {}
            }
        }
    }
    out
}

static ISO_TIME: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r"\b\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?",
    )
});
static EMAIL: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}\b")
});

/// "a table for 2 people", "four guests": a count of people, for the one numeric
/// property of the tool that holds such a count (`party_size`, `guests`, `num_people`).
fn people_count<'a>(
    text: &str,
    tool: &ToolSpec,
    props: &[(&'a str, String)],
) -> Option<(&'a str, u64)> {
    if !["people", "person", "guest", "adult", "diner", "party"]
        .iter()
        .any(|w| text.contains(w))
    {
        return None;
    }
    let counts: Vec<&str> = props
        .iter()
        .filter(|(p, f)| {
            matches!(tool.prop_type(p), Some("integer" | "number"))
                && [
                    "party", "guest", "people", "person", "diner", "adult", "covers",
                ]
                .iter()
                .any(|w| f.contains(w))
        })
        .map(|(p, _)| *p)
        .collect();
    let [prop] = counts.as_slice() else {
        return None;
    };
    let c = PEOPLE.captures(text)?;
    let word = c.get(1).or_else(|| c.get(2))?.as_str().to_ascii_lowercase();
    let n = word.parse::<u64>().ok().or_else(|| {
        NUMBER_WORDS
            .iter()
            .position(|w| *w == word)
            .and_then(|i| u64::try_from(i + 1).ok())
    })?;
    Some((prop, n))
}

/// "for 2 people", "for one person", "a party of four": the party's size (not "seats
/// 120 people").
static PEOPLE: LazyLock<Regex> = LazyLock::new(|| {
    let n = format!(r"(\d{{1,3}}|{})", NUMBER_WORDS.join("|"));
    ferroclaw_types::literal_regex(&format!(
        r"(?i)\bfor\s+{n}\s+(?:people|persons?|guests?|adults?|diners?)\b|\bparty\s+of\s+{n}\b"
    ))
});

/// "the maximum number of results set to 10", "min length of 3": a bound written in words
/// for the property abbreviated so (`max_results`, `maxResults`, `min_length`).
fn bound_spelled_out<'a>(text: &str, props: &[(&'a str, String)]) -> Option<(&'a str, u64)> {
    static BOUND: LazyLock<Regex> = LazyLock::new(|| {
        ferroclaw_types::literal_regex(
            r"(?i)\b(maximum|max|minimum|min)\s+(?:number\s+of\s+)?([a-z]+)\s+(?:set\s+to|of|to|=|:|equal\s+to|is)\s+(\d{1,9})\b",
        )
    });
    let c = BOUND.captures(text)?;
    let bound = if c.get(1)?.as_str().to_ascii_lowercase().starts_with("max") {
        "max"
    } else {
        "min"
    };
    let thing = key_form(c.get(2)?.as_str());
    let n: u64 = c.get(3)?.as_str().parse().ok()?;
    let want = format!("{bound}{thing}");
    crate::sole(props.iter().filter(|(_, f)| *f == want)).map(|(p, _)| (*p, n))
}

/// `experiment_name` / `experiment name` / `experimentName` → `experimentname`.
pub(crate) fn key_form(s: &str) -> String {
    s.chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// The property a captured key (one or two words) names: both words, else the last.
/// `file="a.json"` for `filePath`, `path: …` for `file_path`: an assigned key that is the
/// thing or its path, when one property is that thing's path or name.
fn path_prop<'a>(key: &str, props: &[(&'a str, String)]) -> Option<&'a str> {
    let whole = key_form(key);
    let kinds = ["path", "name"];
    crate::sole(props.iter().filter(|(_, f)| {
        !whole.is_empty()
            && (kinds.iter().any(|k| *f == format!("{whole}{k}"))
                || (whole == "path" && f.len() > whole.len() + 2 && f.ends_with(&whole)))
    }))
    .map(|(p, _)| *p)
}

fn match_prop<'a>(key: &str, props: &[(&'a str, String)]) -> Option<&'a str> {
    let whole = key_form(key);
    let last = key
        .rsplit(|c: char| c.is_whitespace())
        .next()
        .map(key_form)
        .unwrap_or_default();
    // ("the reference number 'YZA890'" for `reference`: the first word, when the second
    // only says what kind of value it is.)
    let mut ws = key.split(|c: char| c.is_whitespace());
    let first = match (ws.next(), ws.next()) {
        (Some(f), Some("number" | "id" | "ID" | "name" | "code" | "value" | "string")) => {
            key_form(f)
        }
        _ => String::new(),
    };
    props
        .iter()
        .find(|(_, f)| *f == whole)
        .or_else(|| props.iter().find(|(_, f)| *f == last))
        .or_else(|| props.iter().find(|(_, f)| !first.is_empty() && *f == first))
        // ("Invoice #382" for `invoice_id`: the thing named, its id the value.)
        .or_else(|| {
            props.iter().find(|(_, f)| {
                f.strip_suffix("id")
                    .is_some_and(|t| t == whole || t == last)
            })
        })
        // ("the booking with the ID 203" for `booking_id`: a bare "ID" is the id of the
        // one thing the tool takes an id of.)
        .or_else(|| {
            let bare_id =
                ["id", "theid", "withid", "itsid", "thisid", "anid"].contains(&whole.as_str());
            let mut ids = props
                .iter()
                .filter(|(_, f)| f.len() > 2 && f.ends_with("id"));
            match (bare_id, ids.next(), ids.next()) {
                (true, Some(one), None) => Some(one),
                _ => None,
            }
        })
        .map(|(p, _)| *p)
}

// (A word of capitals with dots keeps its last one: "Washington D.C.".)
const VALUE: &str = r#"(\[[^\[\]\n]{1,200}\]|\{[^{}\n]{1,200}\}|"(?:[^"\\\n]|\\.){1,200}"|'[^'\n]{1,200}'|`[^`\n]{1,200}`|-?\d+(?:\.\d+)?\b|[A-Za-z](?:[\w/:@+-]|\.\w)*(?:,? (?:(?:[A-Z]\.){2,}|[A-Z](?:[\w-]|\.\w)*)){0,3})"#;
const KEY: &str = r"([A-Za-z_][\w-]{0,40}(?: [A-Za-z_][\w-]{0,40})?)";

/// `first name (Alex)`: the value in brackets after the key.
static KEY_PAREN: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(&format!(r"\b{KEY}\s+\(([^()\n,;]{{1,60}})\)"))
});
/// What a bracket after a parameter's name says when it gives its type, not its value.
const TYPE_WORDS: &[&str] = &[
    "string", "str", "number", "integer", "int", "float", "boolean", "bool", "array", "list",
    "object", "dict", "optional", "required", "default", "enum", "null", "none",
];

/// Words after a key that say what kind of value it is, not the value.
const GENERIC_VALUES: &[&str] = &[
    "name",
    "names",
    "value",
    "values",
    "parameter",
    "param",
    "argument",
    "field",
    "id",
    "info",
    "information",
    "data",
    "details",
    "input",
    "format",
    // What the value is like, not the value: "The path is outside the workspace."
    "outside",
    "inside",
    "within",
    "missing",
    "empty",
    "invalid",
    "wrong",
    "correct",
    "relative",
    "absolute",
    "required",
    "optional",
    "unknown",
    "incorrect",
    "valid",
];

/// `named "x"`, `called 'x'`, `titled "x"`, or one bare word ending the clause
/// (`called barbecue.`).
static NAMED_QUOTED: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r#"\b(?i:(named|called|titled))\s+("[^"\n]{1,200}"|'[^'\n]{1,200}'|`[^`\n]{1,200}`|[A-Za-z][\w-]{1,40}(?:[.,;!?]|$))"#,
    )
});

/// Words after "called" that name nothing ("a function called when …").
const NOT_NAMED: &[&str] = &[
    "when", "by", "with", "from", "for", "to", "on", "in", "at", "if", "it", "that", "this", "the",
    "a", "an", "again", "once", "twice", "before", "after", "later", "now", "so",
];

/// Kinds of named containers a tool takes the name of ("the main branch").
const CONTAINERS: &[&str] = &[
    "channel",
    "table",
    "branch",
    "repo",
    "repository",
    "database",
    "collection",
    "index",
    "bucket",
    "namespace",
    "environment",
    "project",
    "folder",
    "room",
    "team",
    "workspace",
    "cluster",
    "queue",
    "topic",
    "board",
    "region",
    "schema",
];
/// Words before a container's kind that are not its name.
const NOT_NAMES: &[&str] = &[
    "same",
    "new",
    "current",
    "first",
    "second",
    "last",
    "next",
    "previous",
    "following",
    "given",
    "specified",
    "correct",
    "right",
    "wrong",
    "default",
    "appropriate",
    "relevant",
    "required",
    "specific",
    "provided",
    "desired",
    "actual",
    "exact",
    "full",
    "entire",
    "whole",
    "other",
    "original",
    "updated",
    "latest",
    "target",
    "source",
    "selected",
    "existing",
    "proper",
    "that",
    "this",
    "said",
    "above",
    "below",
    "one",
];
static NAME_THEN_CONTAINER: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(r"\b(?i:the)\s+([#@]?[A-Za-z0-9][\w.#-]{0,40})\s+([A-Za-z]+)\b")
});

const NUMBER_WORDS: &[&str] = &[
    "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
    "twelve",
];

/// `four guests`, `2 adults`: a count, then the property's name.
static COUNT_OF_KEY: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r"(?i)\b(\d{1,6}|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)\s+([A-Za-z_][\w-]{0,40})\b",
    )
});

/// `x=5`, `location: "Paris"`, `the location parameter, which in this case is Tokyo`,
/// `unit should be celsius`, `My search query:\n\n**"x"**` (the value set in bold).
static KEY_THEN_VALUE: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(&format!(
        r"(?:^|[^\w.]){KEY}[\x22'`]?\s*(?i:parameter|argument|field|param|value|needed|required|given)?\s*(?:[=:]|,?\s*(?i:which\s+(?:in\s+this\s+case\s+)?|that\s+)?(?i:is|should\s+be|will\s+be|would\s+be|must\s+be|set\s+to|to\s+be|equals?)\b)\s*(?:\*\*|__)?{VALUE}"
    ))
});
/// `key是user:006，value是yukisyo`: a property named in Latin letters and its value in a
/// Chinese sentence, up to a stop or a space (not "path是workspace下的相对路径": a value
/// the Chinese goes on to qualify is a remark on it).
static KEY_IS_CJK: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r#"(?:^|[^A-Za-z0-9_.])([A-Za-z_][A-Za-z0-9_-]{0,40})\s*(?:是|为|為|设为|設為|设置为|設置為|等于)\s*("[^"\n]{1,200}"|“[^”\n]{1,200}”|`[^`\n]{1,200}`|[A-Za-z0-9_][A-Za-z0-9_./:@+-]*[A-Za-z0-9_/])(?:$|[^\p{Han}A-Za-z0-9_./:@+-])"#,
    )
});
/// `set the operation to "add"`
static SET_KEY_TO: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(&format!(
        r"\b(?i:set)\s+(?i:the\s+)?{KEY}\s+(?i:parameter\s+)?(?i:to)\s+{VALUE}"
    ))
});
/// `specify the city as Hangzhou`, `pass the id as "42"`: a value quoted, a number or a
/// name (not "as precisely as possible", "as is", "as well").
static SPECIFY_KEY_AS: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(&format!(
        r#"\b(?i:set|specify|pass|give)\s+(?i:the\s+)?{KEY}\s+(?i:parameter\s+)?(?i:as)\s+("[^"\n]{{1,200}}"|'[^'\n]{{1,200}}'|`[^`\n]{{1,200}}`|-?\d+(?:\.\d+)?\b|[A-Z][a-z][\w-]*(?:,? [A-Z][a-z][\w-]*){{0,3}})"#
    ))
});
/// `"London, UK" as the location`
static VALUE_AS_KEY: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r#"("[^"\n]{1,200}"|'[^'\n]{1,200}'|\b[A-Z][\w.-]*(?:,? [A-Z][\w.-]*){0,3})\s+as\s+(?:the\s+|a\s+|its\s+)?([A-Za-z_][\w-]{0,40})\b"#,
    )
});
/// `with symbol AAPL`, `with the timezone UTC`
static WITH_KEY_VALUE: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(&format!(
        r"\b(?i:with)\s+(?i:the\s+)?([A-Za-z_][\w-]{{0,40}})\s+{VALUE}"
    ))
});
/// `x as "example"`, `the location of "San Francisco, CA"` (not `the location parameter
/// as "City, country"`, a format).
static KEY_AS_QUOTED: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r#"\b([A-Za-z_][\w-]{0,40})\s+(?:as|of)\s+("[^"\n]{1,200}"|'[^'\n]{1,200}')"#,
    )
});
/// `the concept of distributed tracing`: a few plain words after "the <key> of", up to
/// the clause's end.
static THE_KEY_OF: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r"\b(?i:the)\s+([A-Za-z_][\w-]{0,40})\s+of\s+([A-Za-z][\w-]*(?: [A-Za-z][\w-]*){0,4})\s*(?:[.,;:!?]|$)",
    )
});
/// `user ID user_11111`, `Invoice #382`: an identifier-looking value right after the key.
static KEY_ID: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(&format!(
        r"\b{KEY}\s+#?([A-Za-z_-]*\d[\w-]*|[A-Za-z][\w-]*_[\w-]+)\b"
    ))
});
/// `the experiment ID for the experiment named "x" is exp_003`: an identifier stated
/// later in the key's own sentence.
static KEY_LATER_ID: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(&format!(
        r"\b{KEY}\b[^.\n]{{0,80}}?\bis\s+([A-Za-z][A-Za-z_-]*\d[\w-]*|[A-Za-z][\w-]*_[\w-]+)\b"
    ))
});
/// `experiment_name "boiling_point"`
static WITH_FLAG: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r"(?i)\bwith\s+(?:the\s+)?`([A-Za-z_][\w-]{0,40})`(?:\s+(?:flag|option|set|enabled|on))?",
    )
});
static KEY_QUOTED: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(&format!(
        r#"\b{KEY}\s+("[^"\n]{{1,200}}"|'[^'\n]{{1,200}}')"#
    ))
});

/// `numbers.txt`, `src/app.py`: one token with a file extension.
/// Where words about a command line begin after it.
static COMMAND_PROSE: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r"\s+\((?:to|for|which|this|so)\b|,\s+(?:then|and then|which|so that|to)\b|;\s+(?:this|that|then|it)\b|\s+(?:to|in order to)\s+(?:look|check|see|find|verify|inspect|get|make|confirm|ensure|show|test|list|view|read)\b|\s+and\s+(?:then|check|see|look|verify)\b",
    )
});

/// A property that holds a command line.
fn command_prop(prop: &str) -> bool {
    matches!(
        key_form(prop).as_str(),
        "command" | "cmd" | "commandline" | "shellcommand" | "script"
    )
}

fn looks_like_file(s: &str) -> bool {
    !s.contains(char::is_whitespace)
        && s.rsplit_once('.').is_some_and(|(stem, ext)| {
            !stem.is_empty()
                && (1..=5).contains(&ext.len())
                && ext.bytes().all(|b| b.is_ascii_alphanumeric())
                && ext.bytes().any(|b| b.is_ascii_alphabetic())
        })
}

/// Where a number's decimals end, when `.` and digits follow `at`.
fn decimals_after(text: &str, at: usize) -> Option<usize> {
    let rest = text.get(at..)?.strip_prefix('.')?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    (digits > 0).then_some(at + 1 + digits)
}

fn value_of(raw: &str) -> Option<Value> {
    let t = raw.trim().trim_end_matches(',');
    // (A sentence's full stop goes; an initialism's last dot stays: "Washington D.C.".)
    let t = if crate::schema::ends_in_initialism(t) {
        t
    } else {
        t.trim_end_matches(['.', ','])
    };
    // `["red", "blue"]`, `{start: "2025-01-01"}`: a list or an object written out.
    if t.starts_with(['[', '{']) {
        return crate::jsonscan::parse_lenient(t).or_else(|| crate::jsonscan::repair(t));
    }
    // `"{\"name\": \"test\"}"`: a JSON string, escapes and all.
    if t.starts_with('"') && t.contains('\\') {
        if let Ok(s) = serde_json::from_str::<String>(t) {
            return (!s.trim().is_empty()).then(|| Value::String(s.trim().to_string()));
        }
    }
    for (o, c) in [('"', '"'), ('\'', '\''), ('`', '`')] {
        if t.len() >= 2 && t.starts_with(o) && t.ends_with(c) {
            let inner = t[1..t.len() - 1].trim();
            let inner = if o == '`' {
                inner
            } else {
                crate::schema::without_closing_stop(inner)
            };
            return (!inner.is_empty()).then(|| Value::String(inner.to_string()));
        }
    }
    if let Ok(n) = t.parse::<i64>() {
        return Some(Value::from(n));
    }
    if let Ok(f) = t.parse::<f64>() {
        return serde_json::Number::from_f64(f).map(Value::Number);
    }
    let lower = t.to_ascii_lowercase();
    if matches!(lower.as_str(), "true" | "false") {
        return Some(Value::Bool(lower == "true"));
    }
    // A bare word that only says something is coming is no value.
    const VAGUE: &[&str] = &[
        "a",
        "an",
        "the",
        "this",
        "that",
        "it",
        "required",
        "needed",
        "optional",
        "provided",
        "given",
        "specified",
        "correct",
        "sufficient",
        "enough",
        "fine",
        "valid",
        "available",
        "unknown",
        "unclear",
        "known",
        "set",
        "not",
        "missing",
        "empty",
        "also",
        "in",
        "called",
        "named",
        "one",
        "any",
        "some",
        "what",
        "which",
        "used",
        "passed",
        "parameter",
        "parameters",
        "argument",
        "arguments",
        "field",
        "key",
        "keys",
        "value",
        "param",
        "clearly",
        "exactly",
        "fully",
        "already",
        "properly",
        "correctly",
        "explicitly",
        "still",
        "only",
        "just",
        "string",
        "as",
        "to",
        "of",
        "for",
        "from",
        "and",
        "or",
        "is",
        "be",
        "null",
        "none",
        "default",
        "same",
        "there",
        "here",
        "true.",
        "we",
        "i",
        "you",
        "user",
        "users",
        "now",
        "then",
        "so",
        "but",
    ];
    if VAGUE.contains(&lower.as_str()) {
        return None;
    }
    Some(Value::String(t.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(props: &[&str]) -> ToolSpec {
        let mut p = Map::new();
        for k in props {
            p.insert((*k).to_string(), json!({"type": "string"}));
        }
        ToolSpec::new("t", "", json!({"type": "object", "properties": p}))
    }

    #[test]
    fn statements_of_values() {
        let t = tool(&["location"]);
        for (text, want) in [
            (
                "The function requires the location parameter, which in this case is Tokyo.",
                "Tokyo",
            ),
            ("I'll input \"London, UK\" as the location.", "London, UK"),
            ("Call it with location=\"Paris\".", "Paris"),
            ("The location should be Berlin, Germany.", "Berlin, Germany"),
        ] {
            assert_eq!(
                bindings(text, &t).get("location"),
                Some(&json!(want)),
                "{text}"
            );
        }
        let calc = tool(&["x", "y", "operation"]);
        let b = bindings(
            "So, I'll call the calculate function with x=5, y=3, operation=\"add\".",
            &calc,
        );
        assert_eq!(
            Value::Object(b),
            json!({"x": 5, "y": 3, "operation": "add"})
        );
        let e = tool(&["experiment_name"]);
        assert_eq!(
            bindings(
                "get_experiment_id with experiment_name \"boiling_point\"",
                &e
            )
            .get("experiment_name"),
            Some(&json!("boiling_point"))
        );
        let lq = tool(&["liquid_name"]);
        assert_eq!(
            bindings("We need to call get_boiling_point. The liquid name \"myawesomeliquid\". We can assume.", &lq)
                .get("liquid_name"),
            Some(&json!("myawesomeliquid"))
        );
        // "a" inside words is not the property `a`; vague words are no values.
        let ab = tool(&["a", "b"]);
        assert!(bindings("I need to add and multiply them as requested.", &ab).is_empty());
        assert!(bindings("The location is required.", &t).is_empty());
    }
}
