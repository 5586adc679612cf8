//! What every platform client does with an HTTP answer: read the body, but no more than a
//! bound (a misbehaving or hostile endpoint must not fill the memory).

/// The body of `resp`, refused past `max` bytes. Errors never carry the URL (Telegram's
/// and Zalo's hold the bot token).
pub async fn read_bounded(resp: &mut reqwest::Response, max: usize) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| ferroclaw_types::error_chain(&e.without_url()))?
    {
        if body.len() + chunk.len() > max {
            return Err(format!("answer larger than {max} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}
