//! Password hashing: argon2id with the crate's defaults (19 MiB, 2 passes, the OWASP
//! baseline), run on the blocking pool so a sign-in never stalls the async runtime.

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use std::sync::LazyLock;

use argon2::Argon2;
use rand::RngCore;
use tokio::sync::Semaphore;

use crate::{ControlError, Result};

/// Passwords shorter than this are refused.
pub const MIN_PASSWORD_CHARS: usize = 10;
/// Longer ones too: hashing megabytes of "password" is a denial of service.
pub const MAX_PASSWORD_CHARS: usize = 1024;

/// Checks a new password's length, naming `field`.
pub fn validate(field: &str, password: &str) -> Result<()> {
    let n = password.chars().count();
    if n < MIN_PASSWORD_CHARS {
        return Err(ControlError::invalid(
            field,
            format!("must be at least {MIN_PASSWORD_CHARS} characters"),
        ));
    }
    if n > MAX_PASSWORD_CHARS {
        return Err(ControlError::invalid(
            field,
            format!("must be at most {MAX_PASSWORD_CHARS} characters"),
        ));
    }
    Ok(())
}

/// Hashes computed at once: one per core. Each takes 19 MiB and a blocking thread; a flood
/// of sign-ins queues here instead of exhausting memory.
static HASHING: LazyLock<Semaphore> =
    LazyLock::new(|| Semaphore::new(std::thread::available_parallelism().map_or(2, |n| n.get())));

/// Runs `work` on the blocking pool once a hashing permit is free.
async fn hashing<T: Send + 'static>(
    work: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    let _permit = HASHING
        .acquire()
        .await
        .map_err(|_| ControlError::Internal(anyhow::anyhow!("password hashing is shut down")))?;
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ControlError::Internal(anyhow::anyhow!("password hashing task: {e}")))?
}

/// The PHC string (`$argon2id$v=19$...`) stored for `password`.
pub async fn hash(password: &str) -> Result<String> {
    let password = password.to_string();
    hashing(move || {
        let mut salt = [0u8; 16];
        rand::rng().fill_bytes(&mut salt);
        let salt = SaltString::encode_b64(&salt).map_err(|e| anyhow::anyhow!("salt: {e}"))?;
        Argon2::default()
            .hash_password(password.as_bytes(), &salt)
            .map(|h| h.to_string())
            .map_err(|e| ControlError::Internal(anyhow::anyhow!("hashing a password: {e}")))
    })
    .await
}

/// Whether `password` matches the stored PHC string. `None` (an unknown account) still
/// spends the time of one verification, so response times do not tell which emails exist.
pub async fn verify(password: &str, stored: Option<&str>) -> Result<bool> {
    if password.chars().count() > MAX_PASSWORD_CHARS {
        // No stored password is this long; hashing megabytes would only serve an attacker.
        return Ok(false);
    }
    let password = password.to_string();
    let stored = stored.map(str::to_string);
    hashing(move || {
        let phc = stored.as_deref().unwrap_or(DUMMY_HASH);
        let parsed = PasswordHash::new(phc).map_err(|e| anyhow::anyhow!("stored hash: {e}"))?;
        let ok = Argon2::default()
            .verify_password(password.as_bytes(), &parsed)
            .is_ok();
        Ok(ok && stored.is_some())
    })
    .await
}

/// The argon2id hash of a random password nobody knows, verified against for unknown emails.
const DUMMY_HASH: &str =
    "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$3f6J0N7qnQzJc1yQm8I5hq5+Ck2m1cQd0r9V0d3j3xI";

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_hash_verifies_its_password_and_nothing_else() {
        let h = hash("correct horse battery").await.unwrap();
        assert!(h.starts_with("$argon2id$"), "{h}");
        assert!(!h.contains("correct horse"));
        assert!(verify("correct horse battery", Some(&h)).await.unwrap());
        assert!(!verify("correct horse battery!", Some(&h)).await.unwrap());
        assert!(!verify("anything", None).await.unwrap());
    }

    #[test]
    fn short_and_huge_passwords_are_refused_naming_the_field() {
        assert_eq!(
            validate("password", "short").unwrap_err().to_string(),
            "password: must be at least 10 characters"
        );
        assert!(validate("password", &"x".repeat(2000)).is_err());
        assert!(validate("password", "long enough!").is_ok());
    }
}
