//! Pairing codes: what an unknown sender gets under `dm_policy: pairing`, for an operator
//! to approve (`ferroclaw pairing approve <code>`, WebSocket `device.pair.approve`).

use std::time::Duration;

/// No look-alikes (0/O, 1/I/L): a code is read off one screen and typed on another.
pub const ALPHABET: &[u8; 32] = b"ABCDEFGHJKLMNPQRSTUVWXYZ23456789";
pub const CODE_LEN: usize = 8;
pub const CODE_TTL: Duration = Duration::from_secs(60 * 60);
/// Pending codes per channel account: a stranger cannot fill the operator's list.
pub const MAX_PENDING: usize = 3;
/// One pairing reply per sender this often, however many messages they send.
pub const REPLY_EVERY: Duration = Duration::from_secs(60);

/// A fresh code from the operating system's randomness (uuid v4 draws on it).
pub fn new_code() -> String {
    let bytes = uuid::Uuid::new_v4().into_bytes();
    // 32 symbols: the low 5 bits of bytes that are wholly random in a v4 uuid (byte 6
    // carries the version in its high nibble, so bit 4 of it is fixed).
    [0, 1, 2, 3, 4, 5, 9, 10]
        .iter()
        .map(|&i| ALPHABET[usize::from(bytes[i] & 31)] as char)
        .collect()
}

/// Whether `code` has the shape of a code (before asking the store).
pub fn is_code(code: &str) -> bool {
    code.len() == CODE_LEN && code.bytes().all(|b| ALPHABET.contains(&b))
}

/// Normalises what an operator typed: case and surrounding spaces do not matter.
pub fn normalise(code: &str) -> String {
    code.trim().to_ascii_uppercase()
}

pub fn code_message(code: &str) -> String {
    format!(
        "This assistant only talks to people its operator approved.\n\n\
         Your pairing code: {code}\n\n\
         Send it to the operator, who approves it with:\nferroclaw pairing approve {code}\n\n\
         The code is valid for {} minutes.",
        CODE_TTL.as_secs() / 60
    )
}

pub const FULL_MESSAGE: &str = "This assistant has too many pairing requests waiting. \
     Please try again later.";

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn codes_use_the_alphabet_and_differ() {
        let codes: std::collections::HashSet<String> = (0..1000).map(|_| new_code()).collect();
        assert_eq!(codes.len(), 1000);
        for c in &codes {
            assert!(is_code(c), "{c}");
            assert!(!c.contains(['0', 'O', '1', 'I']), "{c}");
        }
        assert!(!is_code("ABCD0123"));
        assert!(!is_code("ABCD234"));
        assert_eq!(normalise("  abcd2345 "), "ABCD2345");
    }
}
