//! The OpAMP messages, generated at build time from `proto/opamp.proto` (see `build.rs`).

#![allow(missing_docs, clippy::all, clippy::pedantic)]

include!(concat!(env!("OUT_DIR"), "/opamp.proto.rs"));

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::*;

    /// An AgentToServer as the Python reference client (opentelemetry-opamp-client's
    /// generated `opamp_pb2`) encodes it: uid 00..0f, sequence 7, capabilities 0x1003,
    /// a description, health, a FAILED remote config status, a disconnect and flags 1.
    const PYTHON_AGENT_TO_SERVER: &str = "0a10000102030405060708090a0b0c0d0e0f10071a2a0a150a0c\
        736572766963652e6e616d6512050a03636f6c12110a09686f73742e6e616d6512040a0268312083202a02\
        08013a0b0a02abcd10031a036261644a005001";

    /// A ServerToAgent with one `logs` entry, as the Python generated code encodes it.
    const PYTHON_SERVER_TO_AGENT: &str = "0a10000102030405060708090a0b0c0d0e0f1a220a1c0a1a0a04\
        6c6f677312120a05613a20310a1209746578742f79616d6c1202010230013803";

    fn uid() -> Vec<u8> {
        (0u8..16).collect()
    }

    #[test]
    fn an_agent_to_server_from_the_reference_client_decodes_field_by_field() {
        let bytes = hex::decode(PYTHON_AGENT_TO_SERVER).unwrap();
        let m = AgentToServer::decode(bytes.as_slice()).unwrap();
        assert_eq!(m.instance_uid, uid());
        assert_eq!(m.sequence_num, 7);
        assert_eq!(m.capabilities, 0x1003);
        let d = m.agent_description.unwrap();
        assert_eq!(d.identifying_attributes[0].key, "service.name");
        assert_eq!(
            d.non_identifying_attributes[0].value,
            Some(AnyValue {
                value: Some(any_value::Value::StringValue("h1".into()))
            })
        );
        assert!(m.health.unwrap().healthy);
        let rcs = m.remote_config_status.unwrap();
        assert_eq!(rcs.last_remote_config_hash, [0xab, 0xcd]);
        assert_eq!(rcs.status, RemoteConfigStatuses::Failed as i32);
        assert_eq!(rcs.error_message, "bad");
        assert!(m.agent_disconnect.is_some());
        assert_eq!(m.flags, AgentToServerFlags::RequestInstanceUid as u64);
    }

    #[test]
    fn a_server_to_agent_encodes_byte_for_byte_as_the_reference_client_expects() {
        let m = ServerToAgent {
            instance_uid: uid(),
            remote_config: Some(AgentRemoteConfig {
                config: Some(AgentConfigMap {
                    config_map: [(
                        "logs".to_string(),
                        AgentConfigFile {
                            body: b"a: 1\n".to_vec(),
                            content_type: "text/yaml".into(),
                        },
                    )]
                    .into(),
                }),
                config_hash: vec![1, 2],
            }),
            flags: ServerToAgentFlags::ReportFullState as u64,
            capabilities: 3,
            ..ServerToAgent::default()
        };
        assert_eq!(hex::encode(m.encode_to_vec()), PYTHON_SERVER_TO_AGENT);
    }

    #[test]
    fn an_error_response_uses_field_two_and_the_bad_request_type() {
        let m = ServerToAgent {
            instance_uid: vec![1],
            error_response: Some(ServerErrorResponse {
                r#type: ServerErrorResponseType::BadRequest as i32,
                error_message: "x".into(),
                details: None,
            }),
            ..ServerToAgent::default()
        };
        assert_eq!(hex::encode(m.encode_to_vec()), "0a010112050801120178");
    }

    #[test]
    fn garbage_does_not_decode_and_does_not_panic() {
        assert!(AgentToServer::decode(&b"\xff\xff\xff\xff"[..]).is_err());
        assert!(AgentToServer::decode(&b"\x0a\x10short"[..]).is_err());
    }
}
