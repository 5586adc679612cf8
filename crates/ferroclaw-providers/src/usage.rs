//! Token usage normalised from every spelling providers use.
//!
//! Rule for cached tokens, which matters for cost accounting:
//! - OpenAI-style counters (`prompt_tokens` with `prompt_tokens_details.cached_tokens`,
//!   `input_tokens_details.cached_tokens`, DeepSeek's `prompt_cache_hit_tokens`) report
//!   cached tokens as a *subset* of the prompt; we subtract them so that `input` counts
//!   only uncached prompt tokens and `cache_read` the cached ones.
//! - Anthropic-style counters (`cache_read_input_tokens`, `cache_creation_input_tokens`)
//!   are already *separate* from `input_tokens`; they are taken as they are.
//!
//! Either way `input + cache_read + cache_write` is the whole prompt, and `total_tokens`
//! is the reported total or, when absent, the sum of all four counters.

use ferroclaw_types::Usage;
use serde_json::Value;

fn num(v: &Value, key: &str) -> Option<u64> {
    v.get(key).and_then(Value::as_u64)
}

/// Normalises one usage object (`{"prompt_tokens": .., ...}`) into [`Usage`].
/// Unknown or missing fields count as zero.
pub fn normalize_usage(v: &Value) -> Usage {
    let prompt = num(v, "prompt_tokens").or_else(|| num(v, "input_tokens"));
    let output = num(v, "completion_tokens")
        .or_else(|| num(v, "output_tokens"))
        .unwrap_or(0);

    // Subset-style cached counters (see module docs).
    let cached_subset = v
        .get("prompt_tokens_details")
        .and_then(|d| num(d, "cached_tokens"))
        .or_else(|| {
            v.get("input_tokens_details")
                .and_then(|d| num(d, "cached_tokens"))
        })
        .or_else(|| num(v, "prompt_cache_hit_tokens"))
        .unwrap_or(0);
    // Separate-style counters (Anthropic).
    let cache_read_sep = num(v, "cache_read_input_tokens").unwrap_or(0);
    let cache_write = num(v, "cache_creation_input_tokens").unwrap_or(0);

    let prompt = prompt.unwrap_or(0);
    let usage = Usage {
        input: prompt.saturating_sub(cached_subset),
        output,
        cache_read: cached_subset + cache_read_sep,
        cache_write,
        total_tokens: num(v, "total_tokens").unwrap_or(0),
    };
    usage.with_total()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn openai_cached_tokens_are_a_subset() {
        let u = normalize_usage(&json!({
            "prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120,
            "prompt_tokens_details": {"cached_tokens": 60}
        }));
        assert_eq!(
            u,
            Usage {
                input: 40,
                output: 20,
                cache_read: 60,
                cache_write: 0,
                total_tokens: 120
            }
        );
    }

    #[test]
    fn anthropic_cache_counters_are_separate() {
        let u = normalize_usage(&json!({
            "input_tokens": 10, "output_tokens": 5,
            "cache_read_input_tokens": 200, "cache_creation_input_tokens": 30
        }));
        assert_eq!(
            u,
            Usage {
                input: 10,
                output: 5,
                cache_read: 200,
                cache_write: 30,
                total_tokens: 245
            }
        );
    }

    #[test]
    fn deepseek_and_missing_fields() {
        let u = normalize_usage(
            &json!({"prompt_tokens": 50, "prompt_cache_hit_tokens": 20, "completion_tokens": 1}),
        );
        assert_eq!((u.input, u.cache_read, u.total_tokens), (30, 20, 51));
        assert_eq!(normalize_usage(&json!({})), Usage::default());
    }
}
