//! Identifiers and secrets: ids are UUIDv7 strings; tokens are random, shown once, and
//! stored only as their sha256.

use rand::RngCore;
use sha2::{Digest, Sha256};

/// A new time-ordered id.
pub fn new_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// A new secret token with a readable prefix (`vfe_` enrollment, `vfn_` node, `vfa_` API).
pub fn new_token(prefix: &str) -> String {
    let mut bytes = [0u8; 24];
    rand::rng().fill_bytes(&mut bytes);
    format!("{prefix}{}", hex::encode(bytes))
}

/// The token to register: `given` (a bootstrap variable's value, at least 16 characters) or
/// a freshly minted one with `prefix`. The flag says whether it was minted (and so is shown
/// once to whoever asked).
pub fn given_or_new_token(given: Option<&str>, prefix: &str) -> crate::Result<(String, bool)> {
    match given {
        Some(t) if t.len() < 16 => Err(crate::ControlError::invalid(
            "token",
            "tokens must be at least 16 characters",
        )),
        Some(t) => Ok((t.to_string(), false)),
        None => Ok((new_token(prefix), true)),
    }
}

/// What the database stores instead of a token.
pub fn token_hash(token: &str) -> String {
    sha256_hex(token.as_bytes())
}

/// Whether `stored_hash` is the hash of `token`, compared in constant time. Rows are found
/// by their hash's index first; this keeps the final comparison free of early exits.
pub fn hash_matches(stored_hash: &str, token: &str) -> bool {
    use subtle::ConstantTimeEq;
    stored_hash
        .as_bytes()
        .ct_eq(token_hash(token).as_bytes())
        .into()
}

/// Lowercase hex sha256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// What lists show of a token: the first characters of a minted one (6 of its 48 random
/// hex digits), nothing of a value an operator chose (it may be short, or a password).
pub fn shown_prefix(token: &str, minted: bool) -> String {
    if minted {
        token.chars().take(10).collect()
    } else {
        "(from a variable)".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_unique_and_hash_to_sha256_hex() {
        let a = new_token("vfn_");
        let b = new_token("vfn_");
        assert_ne!(a, b);
        assert!(a.starts_with("vfn_"));
        assert_eq!(token_hash(&a).len(), 64);
        assert_ne!(token_hash(&a), a);
        assert!(hash_matches(&token_hash(&a), &a));
        assert!(!hash_matches(&token_hash(&a), &b));
    }
}
