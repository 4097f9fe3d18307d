//! Who an OpAMP agent is: its `instance_uid` (16 bytes, or a 26-character ULID from older
//! clients) and what its agent description says about it (name, hostname, labels).

use crate::fleet::{parse_labels, Labels};
use crate::{ControlError, Result};

use super::proto::{any_value, AgentDescription, KeyValue};

/// An agent's instance id, always the 16 bytes, whichever form the agent sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct InstanceUid([u8; 16]);

/// Crockford's base32 alphabet, as ULIDs use it.
const CROCKFORD: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";

fn crockford_digit(c: u8) -> Option<u8> {
    match c.to_ascii_uppercase() {
        b'O' => Some(0),
        b'I' | b'L' => Some(1),
        c => CROCKFORD.iter().position(|&d| d == c).map(|p| p as u8),
    }
}

impl InstanceUid {
    /// Parses `instance_uid` as sent: 16 raw bytes, or the 26 ASCII characters of a ULID
    /// (OpAMP before 0.8 carried the uid as a ULID string), which maps to the same 16 bytes.
    pub fn parse(raw: &[u8]) -> Result<InstanceUid> {
        if let Ok(bytes) = <[u8; 16]>::try_from(raw) {
            return Ok(InstanceUid(bytes));
        }
        if raw.len() == 26 {
            let mut value: u128 = 0;
            for (i, &c) in raw.iter().enumerate() {
                let digit = crockford_digit(c).ok_or_else(|| {
                    ControlError::invalid("instance_uid", "a 26-byte uid must be a ULID string")
                })?;
                // 26 digits carry 130 bits: the first digit may only use the low 3.
                if i == 0 && digit > 7 {
                    return Err(ControlError::invalid(
                        "instance_uid",
                        "the ULID is out of range",
                    ));
                }
                value = (value << 5) | u128::from(digit);
            }
            return Ok(InstanceUid(value.to_be_bytes()));
        }
        Err(ControlError::invalid(
            "instance_uid",
            format!(
                "must be 16 bytes (or a 26-character ULID), got {} bytes",
                raw.len()
            ),
        ))
    }

    /// Lowercase hex, as stored in `nodes.instance_uid`.
    pub fn hex(&self) -> String {
        hex::encode(self.0)
    }

    pub fn bytes(&self) -> [u8; 16] {
        self.0
    }
}

/// What an agent description tells about the node.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentFacts {
    pub name: String,
    pub hostname: String,
    pub labels: Labels,
    pub agent_version: Option<String>,
    pub os: Option<String>,
}

const MAX_LABELS: usize = 64;

fn string_value(kv: &KeyValue) -> Option<&str> {
    match kv.value.as_ref()?.value.as_ref()? {
        any_value::Value::StringValue(s) => Some(s.as_str()),
        _ => None,
    }
}

/// A short printable fact, or nothing.
fn fact(value: Option<&str>, max: usize) -> Option<String> {
    let v = value?.trim();
    (!v.is_empty() && v.len() <= max && !v.chars().any(char::is_control)).then(|| v.to_string())
}

/// Reads an agent description. Labels are its string attributes, non-identifying ones
/// first and identifying ones over them; an attribute that is not a valid label (key
/// shape, value length) is left out rather than refusing the agent. The node is named by
/// `service.name` and its hostname is `host.name`, each standing in for the other when
/// missing, and the uid when both are.
pub fn agent_facts(description: &AgentDescription, uid: &InstanceUid) -> AgentFacts {
    let mut labels = Labels::new();
    let attributes = description
        .non_identifying_attributes
        .iter()
        .chain(description.identifying_attributes.iter());
    for kv in attributes {
        let Some(value) = string_value(kv) else {
            continue;
        };
        let one = Labels::from([(kv.key.clone(), value.to_string())]);
        if parse_labels("labels", one).is_ok() {
            labels.insert(kv.key.clone(), value.to_string());
        }
    }
    while labels.len() > MAX_LABELS {
        labels.pop_last();
    }
    let attr = |key: &str| labels.get(key).map(String::as_str);
    let service = fact(attr("service.name"), 253);
    let host = fact(attr("host.name"), 253);
    let fallback = format!("otel-{}", &uid.hex()[..12]);
    let name = service
        .clone()
        .or_else(|| host.clone())
        .unwrap_or_else(|| fallback.clone());
    let hostname = host.or(service).unwrap_or(fallback);
    AgentFacts {
        name,
        hostname,
        agent_version: fact(attr("service.version"), 100),
        os: fact(attr("os.description").or(attr("os.type")), 100),
        labels,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::opamp::proto::AnyValue;

    fn kv(key: &str, value: any_value::Value) -> KeyValue {
        KeyValue {
            key: key.into(),
            value: Some(AnyValue { value: Some(value) }),
        }
    }

    fn s(key: &str, value: &str) -> KeyValue {
        kv(key, any_value::Value::StringValue(value.into()))
    }

    const UID: [u8; 16] = [
        0x01, 0x8f, 0x3a, 0x4b, 0x5c, 0x6d, 0x7e, 0x8f, 0x90, 0xa1, 0xb2, 0xc3, 0xd4, 0xe5, 0xf6,
        0x07,
    ];

    #[test]
    fn a_sixteen_byte_uid_is_kept_as_is_and_stored_as_lowercase_hex() {
        let uid = InstanceUid::parse(&UID).unwrap();
        assert_eq!(uid.bytes(), UID);
        assert_eq!(uid.hex(), "018f3a4b5c6d7e8f90a1b2c3d4e5f607");
    }

    #[test]
    fn a_legacy_ulid_string_maps_to_the_same_sixteen_bytes() {
        // 01ARZ3NDEKTSV4RRFFQ69G5FAV is the ULID spec's example; its bytes are well known.
        let uid = InstanceUid::parse(b"01ARZ3NDEKTSV4RRFFQ69G5FAV").unwrap();
        assert_eq!(uid.hex(), "01563e3ab5d3d6764c61efb99302bd5b");
        let lower = InstanceUid::parse(b"01arz3ndektsv4rrffq69g5fav").unwrap();
        assert_eq!(lower, uid);
        // The ULID of the 16 bytes round-trips to the same id as the bytes themselves.
        let value = u128::from_be_bytes(UID);
        let ulid: Vec<u8> = (0..26)
            .rev()
            .map(|i| CROCKFORD[((value >> (5 * i)) & 31) as usize])
            .collect();
        assert_eq!(
            InstanceUid::parse(&ulid).unwrap(),
            InstanceUid::parse(&UID).unwrap()
        );
    }

    #[test]
    fn uids_of_other_lengths_or_bad_ulids_are_refused_naming_the_field() {
        for raw in [
            &b""[..],
            &[1u8; 15][..],
            &[1u8; 17][..],
            &b"8ZZZZZZZZZZZZZZZZZZZZZZZZZ"[..],
            &b"01ARZ3NDEKTSV4RRFFQ69G5FA!"[..],
        ] {
            let err = InstanceUid::parse(raw).unwrap_err().to_string();
            assert!(err.starts_with("instance_uid:"), "{err}");
        }
    }

    #[test]
    fn string_attributes_become_labels_and_name_the_node() {
        let uid = InstanceUid::parse(&UID).unwrap();
        let description = AgentDescription {
            identifying_attributes: vec![
                s("service.name", "otelcol-edge"),
                s("service.version", "0.110.0"),
                s("tier", "identifying-wins"),
            ],
            non_identifying_attributes: vec![
                s("host.name", "edge-7"),
                s("os.type", "linux"),
                s("tier", "edge"),
                kv("cpu.count", any_value::Value::IntValue(8)),
                s("bad key", "x"),
            ],
        };
        let facts = agent_facts(&description, &uid);
        assert_eq!(facts.name, "otelcol-edge");
        assert_eq!(facts.hostname, "edge-7");
        assert_eq!(facts.agent_version.as_deref(), Some("0.110.0"));
        assert_eq!(facts.os.as_deref(), Some("linux"));
        let keys: Vec<&str> = facts.labels.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "host.name",
                "os.type",
                "service.name",
                "service.version",
                "tier"
            ]
        );
        assert_eq!(facts.labels["tier"], "identifying-wins");
    }

    #[test]
    fn a_description_without_names_falls_back_to_the_uid() {
        let uid = InstanceUid::parse(&UID).unwrap();
        let facts = agent_facts(&AgentDescription::default(), &uid);
        assert_eq!(facts.name, "otel-018f3a4b5c6d");
        assert_eq!(facts.hostname, facts.name);
        assert!(facts.labels.is_empty());
    }
}
