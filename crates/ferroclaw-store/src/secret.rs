//! Secrets at rest: provider API keys are stored sealed with AES-256-GCM under the key
//! in `FERROCLAW_ENCRYPTION_KEY`, as `aes-gcm:` + base64(nonce ‖ ciphertext ‖ tag), a
//! fresh random nonce each time. `ring` does the cryptography (already linked for TLS).

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};
use ring::rand::{SecureRandom, SystemRandom};

pub const SEALED_PREFIX: &str = "aes-gcm:";
const TAG_LEN: usize = 16;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    #[error("FERROCLAW_ENCRYPTION_KEY must be 64 hex characters, 44 base64 characters or 32 bytes (it has {0} characters)")]
    BadKey(usize),
    #[error("the stored secret is not sealed (no `aes-gcm:` prefix)")]
    NotSealed,
    /// Wrong key, or the value was altered: GCM tells the two apart from nothing else.
    #[error("the stored secret cannot be opened: FERROCLAW_ENCRYPTION_KEY is not the key it was sealed with, or the value was altered")]
    Open,
    #[error("no random numbers from the operating system")]
    Random,
}

/// The 32-byte key. Never printed.
#[derive(Clone)]
pub struct SecretKey([u8; 32]);

impl std::fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretKey(<redacted>)")
    }
}

impl SecretKey {
    /// 64 hex characters, 44 base64 characters (32 bytes), or 32 raw bytes.
    pub fn parse(text: &str) -> Result<SecretKey, SecretError> {
        let t = text.trim();
        let bytes: Option<Vec<u8>> = if t.len() == 64 && t.bytes().all(|b| b.is_ascii_hexdigit()) {
            (0..32)
                .map(|i| u8::from_str_radix(&t[2 * i..2 * i + 2], 16).ok())
                .collect()
        } else if t.len() == 44 {
            B64.decode(t).ok()
        } else if t.len() == 32 {
            Some(t.as_bytes().to_vec())
        } else {
            None
        };
        bytes
            .and_then(|b| <[u8; 32]>::try_from(b.as_slice()).ok())
            .map(SecretKey)
            .ok_or(SecretError::BadKey(t.chars().count()))
    }

    fn aead(&self) -> LessSafeKey {
        // A 32-byte key always makes an AES-256 key; the error arm is unreachable.
        LessSafeKey::new(
            UnboundKey::new(&AES_256_GCM, &self.0)
                .unwrap_or_else(|_| unreachable!("AES-256 takes 32-byte keys")),
        )
    }

    pub fn seal(&self, plaintext: &str) -> Result<String, SecretError> {
        let mut nonce = [0u8; NONCE_LEN];
        SystemRandom::new()
            .fill(&mut nonce)
            .map_err(|_| SecretError::Random)?;
        let mut buf = plaintext.as_bytes().to_vec();
        self.aead()
            .seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::empty(), &mut buf)
            .map_err(|_| SecretError::Open)?;
        let mut out = Vec::with_capacity(NONCE_LEN + buf.len());
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&buf);
        Ok(format!("{SEALED_PREFIX}{}", B64.encode(out)))
    }

    pub fn open(&self, sealed: &str) -> Result<String, SecretError> {
        let body = sealed
            .strip_prefix(SEALED_PREFIX)
            .ok_or(SecretError::NotSealed)?;
        let raw = B64.decode(body).map_err(|_| SecretError::Open)?;
        if raw.len() < NONCE_LEN + TAG_LEN {
            return Err(SecretError::Open);
        }
        let (nonce, rest) = raw.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| SecretError::Open)?;
        let mut buf = rest.to_vec();
        let plain = self
            .aead()
            .open_in_place(nonce, Aad::empty(), &mut buf)
            .map_err(|_| SecretError::Open)?;
        String::from_utf8(plain.to_vec()).map_err(|_| SecretError::Open)
    }
}

/// How a secret is shown in any answer: its last four characters at most, and only
/// when it is long enough that they say little.
pub fn mask(secret: &str) -> String {
    let n = secret.chars().count();
    if n >= 16 {
        let tail: String = secret.chars().skip(n - 4).collect();
        format!("****{tail}")
    } else {
        "****".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_key_forms_parse_and_others_are_refused() {
        let hex = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
        let k = SecretKey::parse(hex).expect("hex");
        let b64 = B64.encode(k.0);
        assert_eq!(b64.len(), 44);
        assert_eq!(SecretKey::parse(&b64).expect("b64").0, k.0);
        assert!(SecretKey::parse("0123456789abcdef0123456789abcdef").is_ok());
        assert_eq!(
            SecretKey::parse("short").err(),
            Some(SecretError::BadKey(5))
        );
        // 64 characters that are not hex are not a key.
        assert!(SecretKey::parse(&"z".repeat(64)).is_err());
        assert!(!format!("{k:?}").contains("0011"));
    }

    #[test]
    fn sealed_values_open_only_with_their_key_and_unaltered() {
        let k = SecretKey::parse(&"ab".repeat(32)).expect("key");
        let sealed = k.seal("sk-live-secret-value").expect("seal");
        assert!(sealed.starts_with(SEALED_PREFIX));
        assert!(!sealed.contains("sk-live"));
        // A fresh nonce each time.
        assert_ne!(sealed, k.seal("sk-live-secret-value").expect("seal"));
        assert_eq!(k.open(&sealed).expect("open"), "sk-live-secret-value");
        let other = SecretKey::parse(&"cd".repeat(32)).expect("key");
        assert_eq!(other.open(&sealed), Err(SecretError::Open));
        let mut raw = B64
            .decode(sealed.strip_prefix(SEALED_PREFIX).expect("prefix"))
            .expect("b64");
        raw[NONCE_LEN] ^= 1;
        let altered = format!("{SEALED_PREFIX}{}", B64.encode(raw));
        assert_eq!(k.open(&altered), Err(SecretError::Open));
        assert_eq!(k.open("sk-plain"), Err(SecretError::NotSealed));
        assert_eq!(k.open("aes-gcm:AAAA"), Err(SecretError::Open));
    }

    #[test]
    fn masks_show_little() {
        assert_eq!(mask("sk-1234567890abcdef"), "****cdef");
        assert_eq!(mask("short"), "****");
    }
}
