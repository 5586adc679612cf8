//! OpenAI chat-completions wire rendering (JSON and SSE).

use serde_json::{json, Map, Value};

use crate::{split_args, split_chars, Meta, ReasoningField, Reply};

pub(crate) fn error_body(code: u16, message: &str) -> Value {
    let kind = match code {
        400 | 404 | 413 | 422 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        429 => "rate_limit_error",
        _ => "server_error",
    };
    json!({"error": {"message": message, "type": kind, "code": code}})
}

fn reasoning_key(field: ReasoningField) -> &'static str {
    match field {
        ReasoningField::Reasoning => "reasoning",
        ReasoningField::ReasoningContent => "reasoning_content",
    }
}

fn usage(reply: &Reply) -> Value {
    let (input, output) = reply.usage_or_zero();
    let mut u = json!({
        "prompt_tokens": input,
        "completion_tokens": output,
        "total_tokens": input + output,
    });
    if let Some(cached) = reply.cached {
        u["prompt_tokens_details"] = json!({"cached_tokens": cached});
    }
    u
}

pub(crate) fn json_body(reply: &Reply, meta: &Meta) -> Value {
    let mut message = Map::new();
    message.insert("role".into(), json!("assistant"));
    // Real servers send `content: null` for a pure tool-call turn.
    let content = match &reply.text {
        Some(t) => json!(t),
        None if !reply.calls.is_empty() => Value::Null,
        None => json!(""),
    };
    message.insert("content".into(), content);
    if let Some((text, field)) = &reply.reasoning {
        message.insert(reasoning_key(*field).into(), json!(text));
    }
    if !reply.calls.is_empty() {
        let calls: Vec<Value> = reply
            .calls
            .iter()
            .map(|(id, name, args)| {
                json!({
                    "id": id,
                    "type": "function",
                    "function": {"name": name, "arguments": args.to_string()},
                })
            })
            .collect();
        message.insert("tool_calls".into(), Value::Array(calls));
    }
    json!({
        "id": meta.id,
        "object": "chat.completion",
        "created": meta.created,
        "model": meta.model,
        "choices": [{
            "index": 0,
            "message": Value::Object(message),
            "finish_reason": reply.openai_finish(),
        }],
        "usage": usage(reply),
    })
}

pub(crate) fn sse_events(reply: &Reply, meta: &Meta) -> Vec<String> {
    let chunk = |choices: Value| {
        json!({
            "id": meta.id,
            "object": "chat.completion.chunk",
            "created": meta.created,
            "model": meta.model,
            "choices": choices,
        })
    };
    let delta = |d: Value| chunk(json!([{"index": 0, "delta": d, "finish_reason": null}]));

    let mut out = vec![delta(json!({"role": "assistant"}))];
    if let Some((text, field)) = &reply.reasoning {
        let key = reasoning_key(*field);
        for piece in split_chars(text, reply.chunk) {
            out.push(delta(json!({ key: piece })));
        }
    }
    if let Some(text) = &reply.text {
        for piece in split_chars(text, reply.chunk) {
            out.push(delta(json!({ "content": piece })));
        }
    }
    for (index, (id, name, args)) in reply.calls.iter().enumerate() {
        for (i, fragment) in split_args(&args.to_string(), reply.chunk)
            .into_iter()
            .enumerate()
        {
            let call = if i == 0 {
                json!({
                    "index": index,
                    "id": id,
                    "type": "function",
                    "function": {"name": name, "arguments": fragment},
                })
            } else {
                json!({"index": index, "function": {"arguments": fragment}})
            };
            out.push(delta(json!({ "tool_calls": [call] })));
        }
    }
    out.push(chunk(json!([{
        "index": 0,
        "delta": {},
        "finish_reason": reply.openai_finish(),
    }])));
    if reply.usage.is_some() || reply.cached.is_some() {
        let mut last = chunk(json!([]));
        last["usage"] = usage(reply);
        out.push(last);
    }
    let mut events: Vec<String> = out.iter().map(|v| format!("data: {v}\n\n")).collect();
    events.push("data: [DONE]\n\n".to_string());
    events
}
