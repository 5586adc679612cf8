//! Anthropic Messages wire rendering (JSON and SSE).

use serde_json::{json, Value};

use crate::{split_args, split_chars, Meta, Reply};

/// Fixed so tests can assert that clients echo the signature back.
pub(crate) const THINKING_SIGNATURE: &str = "scripted-thinking-signature";

pub(crate) fn error_body(code: u16, message: &str) -> Value {
    let kind = match code {
        400 | 422 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        _ => "api_error",
    };
    json!({"type": "error", "error": {"type": kind, "message": message}})
}

/// Maps the OpenAI-style finish reason to an Anthropic stop_reason; anything
/// else (e.g. "stop_sequence", "refusal") passes through verbatim.
fn stop_reason(reply: &Reply) -> String {
    match reply.openai_finish().as_str() {
        "stop" => "end_turn".to_string(),
        "tool_calls" => "tool_use".to_string(),
        "length" => "max_tokens".to_string(),
        other => other.to_string(),
    }
}

fn usage(reply: &Reply, include_output: bool) -> Value {
    let (input, output) = reply.usage_or_zero();
    let mut u =
        json!({"input_tokens": input, "output_tokens": if include_output { output } else { 0 }});
    if let Some(cached) = reply.cached {
        u["cache_read_input_tokens"] = json!(cached);
    }
    u
}

pub(crate) fn json_body(reply: &Reply, meta: &Meta) -> Value {
    let mut content = Vec::new();
    if let Some((text, _)) = &reply.reasoning {
        content
            .push(json!({"type": "thinking", "thinking": text, "signature": THINKING_SIGNATURE}));
    }
    if let Some(text) = &reply.text {
        content.push(json!({"type": "text", "text": text}));
    }
    for (id, name, args) in &reply.calls {
        content.push(json!({"type": "tool_use", "id": id, "name": name, "input": args}));
    }
    json!({
        "id": meta.id,
        "type": "message",
        "role": "assistant",
        "model": meta.model,
        "content": content,
        "stop_reason": stop_reason(reply),
        "stop_sequence": null,
        "usage": usage(reply, true),
    })
}

pub(crate) fn sse_events(reply: &Reply, meta: &Meta) -> Vec<String> {
    let mut out: Vec<Value> = vec![json!({
        "type": "message_start",
        "message": {
            "id": meta.id,
            "type": "message",
            "role": "assistant",
            "model": meta.model,
            "content": [],
            "stop_reason": null,
            "stop_sequence": null,
            "usage": usage(reply, false),
        },
    })];
    let mut index = 0usize;
    let mut block = |out: &mut Vec<Value>, start: Value, deltas: Vec<Value>| {
        out.push(json!({"type": "content_block_start", "index": index, "content_block": start}));
        for d in deltas {
            out.push(json!({"type": "content_block_delta", "index": index, "delta": d}));
        }
        out.push(json!({"type": "content_block_stop", "index": index}));
        index += 1;
    };
    if let Some((text, _)) = &reply.reasoning {
        let mut deltas: Vec<Value> = split_chars(text, reply.chunk)
            .into_iter()
            .map(|p| json!({"type": "thinking_delta", "thinking": p}))
            .collect();
        deltas.push(json!({"type": "signature_delta", "signature": THINKING_SIGNATURE}));
        block(
            &mut out,
            json!({"type": "thinking", "thinking": "", "signature": ""}),
            deltas,
        );
    }
    if let Some(text) = &reply.text {
        let deltas = split_chars(text, reply.chunk)
            .into_iter()
            .map(|p| json!({"type": "text_delta", "text": p}))
            .collect();
        block(&mut out, json!({"type": "text", "text": ""}), deltas);
    }
    for (id, name, args) in &reply.calls {
        let deltas = split_args(&args.to_string(), reply.chunk)
            .into_iter()
            .map(|p| json!({"type": "input_json_delta", "partial_json": p}))
            .collect();
        block(
            &mut out,
            json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
            deltas,
        );
    }
    let (_, output) = reply.usage_or_zero();
    out.push(json!({
        "type": "message_delta",
        "delta": {"stop_reason": stop_reason(reply), "stop_sequence": null},
        "usage": {"output_tokens": output},
    }));
    out.push(json!({"type": "message_stop"}));
    out.iter()
        .map(|v| {
            let kind = v.get("type").and_then(Value::as_str).unwrap_or("unknown");
            format!("event: {kind}\ndata: {v}\n\n")
        })
        .collect()
}
