//! "convert 1500 Serbian Dinars (RSD) to Japanese Yen (JPY)": an amount and the two ends
//! of a conversion, for a tool that takes an amount, a source and a target
//! (`amount`, `from_currency`, `to_currency`; `value`, `from_unit`, `to_unit`).

use serde_json::Value;

use super::call_sentence;
use crate::{ParsedCall, ToolSpec};

/// Words that end the target of a conversion ("to JPY using the tool").
const TAIL: &[&str] = &[
    "using", "with", "for", "via", "by", "and", "then", "so", "because", "as", "at", "in",
];

/// Fill what each conversion call's sentence states and the call lacks.
pub(super) fn fill_conversion(text: &str, tools: &[ToolSpec], calls: &mut [ParsedCall]) {
    for c in calls.iter_mut() {
        let Some(tool) = tools.iter().find(|t| t.name == c.name) else {
            continue;
        };
        let Some((amount, from, to)) = slots(tool) else {
            continue;
        };
        let Some(args) = c.arguments.as_object_mut() else {
            continue;
        };
        if args.contains_key(from) && args.contains_key(to) {
            continue;
        }
        let sentence = call_sentence(text, &c.span);
        let lower = sentence.to_ascii_lowercase();
        if !["convert", "conversion", "exchange"]
            .iter()
            .any(|w| lower.contains(w))
        {
            continue;
        }
        let Some((n, a, b)) = conversion(sentence) else {
            continue;
        };
        // A currency is its code ("RSD", "JPY"), not any word ("3 invoices to send").
        let code =
            |v: &str| (3..=4).contains(&v.len()) && v.chars().all(|c| c.is_ascii_uppercase());
        let currency = [from, to]
            .iter()
            .any(|p| p.to_ascii_lowercase().contains("currency"));
        if currency && !(code(&a) && code(&b)) {
            continue;
        }
        let number = n.replace(',', "");
        // (Whole numbers stay whole: "1500" is 1500, not 1500.0.)
        let num = if tool.prop_type(amount) == Some("integer") || !number.contains('.') {
            number.parse::<i64>().ok().map(Value::from)
        } else {
            number
                .parse::<f64>()
                .ok()
                .and_then(serde_json::Number::from_f64)
                .map(Value::Number)
        };
        if let Some(v) = num {
            args.entry(amount.to_string()).or_insert(v);
        }
        args.entry(from.to_string()).or_insert(Value::String(a));
        args.entry(to.to_string()).or_insert(Value::String(b));
    }
}

/// The tool's amount, source and target properties, when it has exactly those kinds.
fn slots(tool: &ToolSpec) -> Option<(&str, &str, &str)> {
    let props = tool.properties();
    let key = crate::bind::key_form;
    let pick = |heads: &[&str]| {
        let found: Vec<&str> = props
            .iter()
            .map(|(p, _)| *p)
            .filter(|p| {
                let k = key(p);
                matches!(tool.prop_type(p), None | Some("string"))
                    && heads.iter().any(|h| k.starts_with(h))
            })
            .collect();
        match found[..] {
            [one] => Some(one),
            _ => None,
        }
    };
    let from = pick(&["from", "source", "base"])?;
    let to = pick(&["to", "target", "dest"]).filter(|t| *t != from)?;
    let amount = props
        .iter()
        .map(|(p, _)| *p)
        .filter(|p| matches!(tool.prop_type(p), Some("number" | "integer")))
        .collect::<Vec<_>>();
    match amount[..] {
        [one] => Some((one, from, to)),
        _ => None,
    }
}

/// The number and the two ends of "NUMBER SOURCE to TARGET" in `s`: a code in brackets
/// when one is given ("Serbian Dinars (RSD)"), else the words themselves (at most three).
fn conversion(s: &str) -> Option<(String, String, String)> {
    let words: Vec<(usize, &str)> = s
        .split_whitespace()
        .map(|w| (w.as_ptr() as usize - s.as_ptr() as usize, w))
        .collect();
    for (i, (_, w)) in words.iter().enumerate() {
        let n = w.trim_start_matches(['$', '€', '£', '¥']);
        if !n.starts_with(|c: char| c.is_ascii_digit())
            || !n
                .chars()
                .all(|c| c.is_ascii_digit() || c == ',' || c == '.')
        {
            continue;
        }
        let n = n.trim_end_matches(['.', ',']);
        let to_at = words[i + 1..]
            .iter()
            .take(5)
            .position(|(_, w)| matches!(*w, "to" | "into" | "in"))
            .map(|p| i + 1 + p)?;
        let source = &words[i + 1..to_at];
        let mut target = Vec::new();
        for (_, w) in words[to_at + 1..].iter().take(5) {
            let bare = w.trim_end_matches(['.', ',', ';', ':', '!', '?']);
            if TAIL.contains(&bare.to_ascii_lowercase().as_str()) {
                break;
            }
            target.push(*w);
            if bare.len() != w.len() {
                break;
            }
        }
        let a = end_value(source)?;
        let b = end_value(&target.iter().map(|w| (0, *w)).collect::<Vec<_>>())?;
        return Some((n.to_string(), a, b));
    }
    None
}

/// A code in brackets among the words, else the words when they are one to three.
fn end_value(words: &[(usize, &str)]) -> Option<String> {
    for (_, w) in words {
        let t = w.trim_end_matches(['.', ',', ';', ':', '!', '?']);
        if let Some(code) = t.strip_prefix('(').and_then(|r| r.strip_suffix(')')) {
            if (2..=5).contains(&code.len()) && code.chars().all(|c| c.is_ascii_alphabetic()) {
                return Some(code.to_string());
            }
        }
    }
    if words.is_empty() || words.len() > 3 {
        return None;
    }
    let joined: Vec<&str> = words
        .iter()
        .map(|(_, w)| w.trim_end_matches(['.', ',', ';', ':', '!', '?']))
        .collect();
    let v = joined.join(" ");
    (!v.is_empty() && v.chars().all(|c| c.is_alphabetic() || c == ' ')).then_some(v)
}
