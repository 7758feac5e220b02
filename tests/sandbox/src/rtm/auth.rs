//! Role-secret authentication, server side: nonces and the expected hash.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use md5::Md5;

/// `base64(HMAC-MD5(key = secret, message = nonce))`, standard alphabet with padding:
/// what a client must send as `credentials.hash`. The nonce is hashed as the string
/// received, not base64-decoded first.
pub(crate) fn role_secret_hash(secret: &str, nonce: &str) -> String {
    // HMAC accepts keys of any length (longer ones are hashed first), so this cannot
    // fail; the fallback only keeps the input path free of `expect`.
    let Ok(mut mac) = Hmac::<Md5>::new_from_slice(secret.as_bytes()) else {
        return String::new();
    };
    mac.update(nonce.as_bytes());
    STANDARD.encode(mac.finalize().into_bytes())
}

/// A fresh nonce: 16 random bytes in base64, like the real service's
/// (`yygAiH6XCXtg1g81d3rqwQ==`). Clients must use it as the string it is.
pub(crate) fn fresh_nonce() -> String {
    let mut bytes = [0u8; 16];
    if getrandom::fill(&mut bytes).is_err() {
        // No OS randomness: a counter and the clock still make every nonce different,
        // which is all a test server needs.
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let t = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        bytes[..8].copy_from_slice(&n.to_le_bytes());
        bytes[8..].copy_from_slice(&(t as u64).to_le_bytes());
    }
    STANDARD.encode(bytes)
}

/// Compares two hashes without an early exit on the first difference.
pub(crate) fn hashes_equal(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_vectors() {
        let k = "FF6FFFCfB2f7F3fe0E627d9fE2DB2EcD";
        let cases: [(&str, &str, &str); 7] = [
            (
                "B37Ab888CAB4343434bAE98AAAAAABC1",
                "nonce",
                "B510MG+AsMpvUDlm7oFsRg==",
            ),
            ("world", "hello", "GnXQHVYdUXdr82yZa4Jtaw=="),
            (
                k,
                "MTI0Njg4NTAyMjYxMzgxMzgzMg==",
                "P6COJ5aXJvIRoJO1PaYREw==",
            ),
            (k, "", "9K3wAsoK5WeBhqbOPf+JAQ=="),
            ("sécrèt", "nönce-привет", "5mcSwDGRqAh/+YlT79Ymrw=="),
            (&"K".repeat(64), "abc", "G8vE3Kp3T8NXAX/4NlH6Tg=="),
            (&"K".repeat(65), "abc", "kxVHVjo/zsPgoctQWkxt8Q=="),
        ];
        for (secret, nonce, hash) in cases {
            assert_eq!(role_secret_hash(secret, nonce), hash, "{secret} {nonce}");
        }
    }

    #[test]
    fn nonces_differ() {
        let (a, b) = (fresh_nonce(), fresh_nonce());
        assert_ne!(a, b);
        assert_eq!(a.len(), 24);
        assert!(hashes_equal(&a, &a) && !hashes_equal(&a, &b) && !hashes_equal(&a, "x"));
    }
}
