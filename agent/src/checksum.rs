//! Config integrity: the server sends `checksum = sha256_hex(configYaml)`; a config whose body
//! does not hash to it was corrupted or tampered with on the way and must never run.

use sha2::{Digest, Sha256};

/// Lower-case hex sha256 of `body`.
pub fn sha256_hex(body: &str) -> String {
    hex::encode(Sha256::digest(body.as_bytes()))
}

/// Checks a served config against its checksum; the error is the message reported to the server.
pub fn verify(config_yaml: &str, checksum: &str) -> Result<(), String> {
    let actual = sha256_hex(config_yaml);
    if actual.eq_ignore_ascii_case(checksum.trim()) {
        Ok(())
    } else {
        Err(format!(
            "checksum mismatch: served {checksum}, config hashes to {actual}; config not applied"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_of_a_known_string_matches_the_reference_digest() {
        assert_eq!(
            sha256_hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn config_matching_its_checksum_is_accepted() {
        let yaml = "sources: {}\n";
        assert!(verify(yaml, &sha256_hex(yaml)).is_ok());
    }

    #[test]
    fn upper_case_checksum_is_accepted() {
        let yaml = "sources: {}\n";
        assert!(verify(yaml, &sha256_hex(yaml).to_uppercase()).is_ok());
    }

    #[test]
    fn config_not_matching_its_checksum_is_rejected_with_a_checksum_mismatch_message() {
        let err = verify("sources: {}\n", &sha256_hex("something else")).unwrap_err();
        assert!(err.starts_with("checksum mismatch"), "{err}");
    }
}
