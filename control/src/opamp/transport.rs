//! The plain-HTTP transport's framing: which request media type is OpAMP, gzip request
//! bodies (bounded after decompression), and whether the response may be gzipped.

use std::io::{Read, Write};

use flate2::read::MultiGzDecoder;
use flate2::write::GzEncoder;
use flate2::Compression;

/// The one media type of OpAMP over HTTP, and the exact value the server answers with.
pub const PROTOBUF: &str = "application/x-protobuf";

/// Why a request body cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BodyError {
    #[error("unsupported content encoding {0:?}: send identity or gzip")]
    UnsupportedEncoding(String),
    #[error("the body is larger than {0} bytes after decompression")]
    TooLarge(usize),
    #[error("the gzip body does not decompress: {0}")]
    Corrupt(String),
}

/// True when `Content-Type` names `application/x-protobuf`, in any case and with any
/// parameters (`Application/X-Protobuf; charset=binary`).
pub fn is_protobuf(content_type: Option<&str>) -> bool {
    content_type
        .and_then(|v| v.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case(PROTOBUF))
}

/// The request body as protobuf bytes: decompressed when `Content-Encoding` says gzip,
/// refused once it grows past `limit` bytes (a small gzip body can inflate enormously).
pub fn decode_body(
    content_encoding: Option<&str>,
    body: &[u8],
    limit: usize,
) -> Result<Vec<u8>, BodyError> {
    let encoding = content_encoding.map(str::trim).unwrap_or("");
    if encoding.is_empty() || encoding.eq_ignore_ascii_case("identity") {
        if body.len() > limit {
            return Err(BodyError::TooLarge(limit));
        }
        return Ok(body.to_vec());
    }
    if !(encoding.eq_ignore_ascii_case("gzip") || encoding.eq_ignore_ascii_case("x-gzip")) {
        return Err(BodyError::UnsupportedEncoding(encoding.to_string()));
    }
    let mut out = Vec::new();
    MultiGzDecoder::new(body)
        .take(limit as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| BodyError::Corrupt(e.to_string()))?;
    if out.len() > limit {
        return Err(BodyError::TooLarge(limit));
    }
    Ok(out)
}

/// True when `Accept-Encoding` accepts gzip: `gzip` (or `x-gzip`, or `*`) listed with a
/// q-value above zero and gzip not refused explicitly (`gzip;q=0`).
pub fn accepts_gzip(accept_encoding: Option<&str>) -> bool {
    let Some(header) = accept_encoding else {
        return false;
    };
    let mut gzip: Option<bool> = None;
    let mut star: Option<bool> = None;
    for item in header.split(',') {
        let mut parts = item.split(';');
        let coding = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        let mut q_ok = true;
        for param in parts {
            if let Some((k, v)) = param.split_once('=') {
                if k.trim().eq_ignore_ascii_case("q") {
                    q_ok = v.trim().parse::<f32>().map(|q| q > 0.0).unwrap_or(false);
                }
            }
        }
        match coding.as_str() {
            "gzip" | "x-gzip" => gzip = Some(gzip.unwrap_or(false) || q_ok),
            "*" => star = Some(q_ok),
            _ => {}
        }
    }
    gzip.or(star).unwrap_or(false)
}

/// Gzips a response body.
pub fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = GzEncoder::new(
        Vec::with_capacity(bytes.len() / 2 + 32),
        Compression::default(),
    );
    // Writing into a Vec cannot fail.
    let _ = enc.write_all(bytes);
    enc.finish().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_protobuf_media_type_is_recognised_with_parameters_and_in_any_case() {
        assert!(is_protobuf(Some("application/x-protobuf")));
        assert!(is_protobuf(Some("Application/X-Protobuf ; charset=binary")));
        assert!(!is_protobuf(Some("application/json")));
        assert!(!is_protobuf(Some("application/x-protobuffer")));
        assert!(!is_protobuf(None));
    }

    #[test]
    fn gzip_bodies_are_decompressed_and_plain_ones_pass_through() {
        let body = b"hello opamp".repeat(10);
        assert_eq!(decode_body(Some("gzip"), &gzip(&body), 1024).unwrap(), body);
        assert_eq!(decode_body(Some("GZIP"), &gzip(&body), 1024).unwrap(), body);
        assert_eq!(decode_body(None, &body, 1024).unwrap(), body);
        assert_eq!(decode_body(Some("identity"), &body, 1024).unwrap(), body);
    }

    #[test]
    fn the_size_limit_applies_after_decompression() {
        let bomb = gzip(&vec![0u8; 1 << 20]);
        assert!(bomb.len() < 4096);
        assert_eq!(
            decode_body(Some("gzip"), &bomb, 64 * 1024),
            Err(BodyError::TooLarge(64 * 1024))
        );
        assert_eq!(
            decode_body(None, &[0u8; 11], 10),
            Err(BodyError::TooLarge(10))
        );
        // Exactly at the limit is fine.
        assert_eq!(
            decode_body(Some("gzip"), &gzip(&[7u8; 10]), 10).unwrap(),
            [7u8; 10]
        );
    }

    #[test]
    fn a_corrupt_gzip_body_or_an_unknown_encoding_is_refused() {
        assert!(matches!(
            decode_body(Some("gzip"), b"not gzip at all", 1024),
            Err(BodyError::Corrupt(_))
        ));
        assert_eq!(
            decode_body(Some("br"), b"x", 1024),
            Err(BodyError::UnsupportedEncoding("br".into()))
        );
    }

    #[test]
    fn responses_are_gzipped_only_when_accept_encoding_allows_it() {
        assert!(accepts_gzip(Some("gzip")));
        assert!(accepts_gzip(Some("deflate, gzip;q=0.5")));
        assert!(accepts_gzip(Some("*")));
        assert!(!accepts_gzip(None));
        assert!(!accepts_gzip(Some("identity")));
        assert!(!accepts_gzip(Some("gzip;q=0")));
        assert!(!accepts_gzip(Some("*, gzip;q=0")));
        assert!(!accepts_gzip(Some("br, deflate")));
    }
}
