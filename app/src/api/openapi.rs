//! The API description: an OpenAPI 3.1 document of every server function, served at
//! `GET /api/openapi.json`.
//!
//! Nothing in it is written by hand: each operation comes from a row of
//! [`super::catalog::ENDPOINTS`] (role, scope, error statuses), its request body from the
//! server function's argument struct and its answer from the function's result type, both
//! described by schemars from the Rust types (`#[derive(JsonSchema)]`, doc comments
//! included). Arguments are described as the server reads them and results as it writes them
//! (serde's two contracts); where one type reads and writes differently, its written form is
//! named `<Name>Output`.

use schemars::generate::SchemaSettings;
use schemars::SchemaGenerator;
use serde_json::{json, Map, Value};

use super::catalog::{Endpoint, ENDPOINTS};

/// Where the schemas go, as a JSON pointer into the document.
const SCHEMAS: &str = "/components/schemas";

/// The whole document.
pub fn document() -> Value {
    let mut arguments = generator(SchemaSettings::draft2020_12().for_deserialize());
    let mut results = generator(SchemaSettings::draft2020_12().for_serialize());
    let mut operations: Vec<(&Endpoint, Value, Value)> = ENDPOINTS
        .iter()
        .map(|e| {
            let request = (e.arguments)(&mut arguments).to_value();
            let answer = (e.result)(&mut results).to_value();
            (e, request, answer)
        })
        .collect();
    let mut schemas = arguments.take_definitions(true);
    let mut written = results.take_definitions(true);
    rename_conflicts(&schemas, &mut written, &mut operations);
    schemas.extend(written);

    let mut paths = Map::new();
    for (endpoint, request, answer) in operations {
        let description = described(&mut schemas, &request);
        paths.insert(
            endpoint.path.to_string(),
            json!({ "post": operation(endpoint, description, request, answer) }),
        );
    }
    json!({
        "openapi": "3.1.0",
        "jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
        "info": {
            "title": "VectorFlow",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Every page action is a server function: `POST /api/<endpoint>` \
                with the arguments as a JSON object and the result as JSON. Errors come back \
                with a status and a text body `ServerError|<field>: <message>`. Each operation \
                names the least role it needs (`x-vectorflow-role`) and where it must be held \
                (`x-vectorflow-scope`). See docs/api.md.",
        },
        "servers": [{ "url": "/" }],
        "security": [{ "apiToken": [] }, { "session": [] }],
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "apiToken": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "An API token (`vfa_...`), created on the Users page or \
                        with `api_token.create`; its role is held in its environment.",
                },
                "session": {
                    "type": "apiKey",
                    "in": "cookie",
                    "name": "vf_session",
                    "description": "A browser's session after signing in (`POST /signin`).",
                },
            },
            "responses": error_responses(),
        },
    })
}

fn generator(settings: SchemaSettings) -> SchemaGenerator {
    settings
        .with(|s| s.definitions_path = SCHEMAS.into())
        .into_generator()
}

/// One operation: its role and scope in words and as extensions, its body and its answers.
fn operation(endpoint: &Endpoint, description: String, request: Value, answer: Value) -> Value {
    let name = endpoint.name();
    let mut role = endpoint.scope.describe(endpoint.role);
    if let Some(author) = endpoint.author_role {
        role = format!(
            "{role}; {} is enough for a release the caller created",
            author.as_str()
        );
    }
    let mut responses = Map::new();
    for status in endpoint.statuses() {
        let answer = match status {
            200 => json!({
                "description": "The result.",
                "content": { "application/json": { "schema": answer } },
            }),
            code => json!({ "$ref": format!("#/components/responses/{}", error_name(code)) }),
        };
        responses.insert(status.to_string(), answer);
    }
    // The first sentence of the doc comment's first paragraph.
    let paragraph = description
        .split("\n\n")
        .next()
        .unwrap_or(name)
        .replace('\n', " ");
    let summary = match paragraph.split_once(". ") {
        Some((first, _)) => format!("{first}."),
        None => paragraph,
    };
    let mut op = json!({
        "operationId": name,
        "tags": [name.split('.').next().unwrap_or(name)],
        "summary": summary,
        "description": format!("{description}\n\nRole: {role}."),
        "x-vectorflow-role": endpoint.role.as_str(),
        "x-vectorflow-scope": endpoint.scope.as_str(),
        "requestBody": {
            "required": true,
            "content": { "application/json": { "schema": request } },
        },
        "responses": responses,
    });
    if let Some(author) = endpoint.author_role {
        op["x-vectorflow-author-role"] = author.as_str().into();
    }
    op
}

/// The server function's doc comment, from its argument struct's schema, without the line
/// the `#[server]` macro puts before it ("Serialized arguments for the ... server function."),
/// which the schema keeps.
fn described(schemas: &mut Map<String, Value>, request: &Value) -> String {
    let Some(name) = request["$ref"].as_str().and_then(|r| r.rsplit('/').next()) else {
        return String::new();
    };
    let Some(description) = schemas.get_mut(name).and_then(|s| s.get_mut("description")) else {
        return String::new();
    };
    let text = description.as_str().unwrap_or_default();
    let own = match text.split_once(" server function.") {
        Some((macro_line, rest)) if macro_line.starts_with("Serialized arguments") => rest,
        _ => text,
    };
    let own = own.trim().to_string();
    *description = own.clone().into();
    own
}

fn error_name(status: u16) -> &'static str {
    match status {
        400 => "BadRequest",
        401 => "SignInRequired",
        403 => "Forbidden",
        404 => "NotFound",
        409 => "Conflict",
        412 => "PreconditionFailed",
        428 => "PreconditionRequired",
        _ => "Error",
    }
}

/// The shared error answers: a text body naming the field or the reason.
fn error_responses() -> Value {
    let answer = |description: &str, example: &str| {
        json!({
            "description": description,
            "content": { "text/plain": {
                "schema": { "type": "string", "pattern": "^ServerError\\|" },
                "example": example,
            } },
        })
    };
    json!({
        "BadRequest": answer(
            "Bad input: arguments that do not parse, or a field the action refuses (named).",
            "ServerError|configYaml: must not be empty",
        ),
        "SignInRequired": answer(
            "No session and no API token.",
            "ServerError|sign in, or send an API token as Authorization: Bearer <token>",
        ),
        "Forbidden": answer(
            "The role held is not enough where the call acts; the message names role and place.",
            "ServerError|your role in this pipeline's environment is viewer; this needs editor",
        ),
        "NotFound": answer(
            "An object the call names does not exist.",
            "ServerError|release 01a2... not found",
        ),
        "Conflict": answer(
            "The object's state refuses the action now (the reason is given).",
            "ServerError|refused: errorRate gate failed: error rate 4.00% exceeds max 1.00%",
        ),
        "PreconditionFailed": answer(
            "`row_version` is not the current one: read the object again.",
            "ServerError|rollout v2-cache changed meanwhile (now version 4, you saw 3); reload and try again",
        ),
        "PreconditionRequired": answer(
            "A change to an existing object came without its `row_version`.",
            "ServerError|rollout v2-cache exists: send the version you saw (If-Match), so no change is overwritten unseen",
        ),
    })
}

/// Where a type reads (arguments) and writes (results) the same, one schema serves both.
/// Where the two differ, the written one is renamed `<Name>Output` and the results' `$ref`s
/// follow it; a written schema that refers to a renamed one then differs too, and is renamed
/// in the next round, until none differs.
fn rename_conflicts(
    read: &Map<String, Value>,
    written: &mut Map<String, Value>,
    operations: &mut [(&Endpoint, Value, Value)],
) {
    loop {
        let renames: Vec<(String, String)> = written
            .iter()
            .filter(|(name, schema)| read.get(*name).is_some_and(|r| r != *schema))
            .map(|(name, _)| {
                let taken = |n: &str| read.contains_key(n) || written.contains_key(n);
                let to = (1..)
                    .map(|i| match i {
                        1 => format!("{name}Output"),
                        i => format!("{name}Output{i}"),
                    })
                    .find(|n| !taken(n))
                    .unwrap_or_default();
                (name.clone(), to)
            })
            .collect();
        if renames.is_empty() {
            return;
        }
        for (from, to) in &renames {
            if let Some(schema) = written.remove(from) {
                written.insert(to.clone(), schema);
            }
            let (from, to) = (format!("#{SCHEMAS}/{from}"), format!("#{SCHEMAS}/{to}"));
            for schema in written.values_mut() {
                retarget(schema, &from, &to);
            }
            for (_, _, answer) in operations.iter_mut() {
                retarget(answer, &from, &to);
            }
        }
    }
}

fn retarget(value: &mut Value, from: &str, to: &str) {
    match value {
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                match v {
                    Value::String(s) if key == "$ref" && s == from => *s = to.to_string(),
                    _ => retarget(v, from, to),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| retarget(v, from, to)),
        _ => {}
    }
}
