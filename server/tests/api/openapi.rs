//! The API description at `GET /api/openapi.json`: it lists every registered server
//! function with its role, scope, statuses and schemas, and what docs/api.md shows (each
//! endpoint, its role, its arguments, the curl examples and the example answer) agrees with
//! it. The access test (`access.rs`) holds real answers to the same schemas.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};

use crate::helpers::TestApp;

/// The document, with a validator per operation's request and result.
pub struct Described {
    pub document: Value,
    validators: BTreeMap<(String, &'static str), jsonschema::Validator>,
}

impl Described {
    pub fn new(document: Value) -> Described {
        Described {
            document,
            validators: BTreeMap::new(),
        }
    }

    fn operation(&self, endpoint: &str) -> Option<&Value> {
        self.document["paths"]
            .get(format!("/api/{endpoint}"))?
            .get("post")
    }

    /// Why `body` is not a valid request of `endpoint`, one line each; empty when it is.
    pub fn request_refusals(&mut self, endpoint: &str, body: &Value) -> Vec<String> {
        let pointer = "/requestBody/content/application~1json/schema";
        self.refusals(endpoint, "request", pointer, body)
    }

    /// Why `answer` is not a valid result of `endpoint`; empty when it is.
    pub fn result_refusals(&mut self, endpoint: &str, answer: &Value) -> Vec<String> {
        let pointer = "/responses/200/content/application~1json/schema";
        self.refusals(endpoint, "result", pointer, answer)
    }

    fn refusals(
        &mut self,
        endpoint: &str,
        part: &'static str,
        pointer: &str,
        instance: &Value,
    ) -> Vec<String> {
        let key = (endpoint.to_string(), part);
        if !self.validators.contains_key(&key) {
            let Some(schema) = self.operation(endpoint).and_then(|op| op.pointer(pointer)) else {
                return vec![format!("{endpoint} has no {part} schema")];
            };
            // The operation's schema with the document's components beside it, so its
            // `#/components/schemas/...` references resolve.
            let mut root = schema.clone();
            root["components"] = self.document["components"].clone();
            match jsonschema::validator_for(&root) {
                Ok(v) => self.validators.insert(key.clone(), v),
                Err(e) => return vec![format!("{endpoint}'s {part} schema does not compile: {e}")],
            };
        }
        let validator = &self.validators[&key];
        validator
            .iter_errors(instance)
            .map(|e| format!("{endpoint} {part} at {}: {e}", e.instance_path()))
            .collect()
    }
}

/// The document as the running server serves it, to anyone.
async fn served(app: &TestApp) -> Value {
    let resp = app
        .client
        .get(format!("{}/api/openapi.json", app.url))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "served without signing in");
    let kind = resp.headers()[reqwest::header::CONTENT_TYPE].clone();
    assert_eq!(kind, "application/json");
    resp.json().await.unwrap()
}

#[tokio::test]
async fn the_document_describes_every_registered_server_function_and_nothing_else() {
    let app = TestApp::spawn().await;
    let doc = served(&app).await;
    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(doc, app::api::openapi::document(), "served as built");

    let registered: BTreeSet<String> = leptos::server_fn::axum::server_fn_paths()
        .map(|(path, _)| path.to_string())
        .collect();
    let described: BTreeSet<String> = doc["paths"]
        .as_object()
        .expect("paths")
        .keys()
        .cloned()
        .collect();
    assert!(
        registered.len() > 60,
        "the registry was read: {registered:?}"
    );
    let missing: Vec<_> = registered.difference(&described).collect();
    assert!(
        missing.is_empty(),
        "registered but not described: {missing:?}"
    );
    let unknown: Vec<_> = described.difference(&registered).collect();
    assert!(
        unknown.is_empty(),
        "described but not registered: {unknown:?}"
    );

    for path in &registered {
        let op = &doc["paths"][path]["post"];
        let name = path.trim_start_matches("/api/");
        assert_eq!(op["operationId"], name);
        let role = op["x-vectorflow-role"].as_str().unwrap_or_default();
        assert!(
            ["viewer", "editor", "admin"].contains(&role),
            "{name}: {op}"
        );
        assert!(op["x-vectorflow-scope"].is_string(), "{name}: {op}");
        assert!(
            op["description"]
                .as_str()
                .unwrap_or_default()
                .contains("Role: "),
            "{name}: {op}"
        );
        // The summary is the server function's own doc comment: a new one must say what it
        // does.
        let summary = op["summary"].as_str().unwrap_or_default();
        assert!(
            !summary.is_empty() && !summary.contains("Serialized arguments"),
            "{name} has no doc comment to summarise it: {summary:?}"
        );
        let request = &op["requestBody"]["content"]["application/json"]["schema"];
        assert!(request.is_object(), "{name} has a request schema: {op}");
        let result = &op["responses"]["200"]["content"]["application/json"]["schema"];
        assert!(
            result.is_object() || result.is_boolean(),
            "{name} has a result schema: {op}"
        );
        for status in ["400", "401"] {
            assert!(op["responses"][status]["$ref"].is_string(), "{name}: {op}");
        }
        for (status, answer) in op["responses"].as_object().expect("responses") {
            if let Some(target) = answer["$ref"].as_str() {
                let pointer = target.trim_start_matches('#');
                assert!(doc.pointer(pointer).is_some(), "{name} {status}: {target}");
            }
        }
    }

    // Every reference points at a schema the document holds.
    let mut refs = Vec::new();
    collect_refs(&doc, &mut refs);
    for target in refs {
        let pointer = target.trim_start_matches('#');
        assert!(doc.pointer(pointer).is_some(), "dangling $ref {target}");
    }
}

#[tokio::test]
async fn an_operation_says_its_role_place_statuses_and_fields() {
    let app = TestApp::spawn().await;
    let doc = served(&app).await;
    let op = |name: &str| doc["paths"][format!("/api/{name}")]["post"].clone();

    let rollback = op("release.canary.rollback");
    assert_eq!(rollback["x-vectorflow-role"], "admin");
    assert_eq!(rollback["x-vectorflow-author-role"], "editor");
    assert_eq!(rollback["x-vectorflow-scope"], "environment");
    let statuses: BTreeSet<&str> = rollback["responses"]
        .as_object()
        .expect("responses")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        statuses,
        BTreeSet::from(["200", "400", "401", "403", "404", "409"])
    );

    let users = op("user.list");
    assert_eq!(users["x-vectorflow-scope"], "every-environment");
    assert!(users["description"]
        .as_str()
        .unwrap_or_default()
        .contains("admin of every environment"));
    let rollout = op("admin.rollout.set");
    assert!(rollout["responses"]["412"].is_object());
    assert!(rollout["responses"]["428"].is_object());

    // The arguments' schema comes from the function's arguments: required ones, defaulted
    // ones, and the plan described field by field rather than as any JSON.
    let mut described = Described::new(doc.clone());
    let create = |extra: Value| {
        let mut body = json!({
            "pipeline_id": "p", "config_yaml": "sources: {}",
            "rollout_plan": {"stages": [{"selector": {"percentage": 10}, "bakeSeconds": 60}]},
        });
        for (k, v) in extra.as_object().expect("object") {
            body[k] = v.clone();
        }
        body
    };
    assert_eq!(
        described.request_refusals("release.canary.create", &create(json!({}))),
        Vec::<String>::new()
    );
    let no_pipeline = json!({"config_yaml": "x"});
    assert!(!described
        .request_refusals("release.canary.create", &no_pipeline)
        .is_empty());
    let bad_plan = create(
        json!({"rollout_plan": {"stages": [{"selector": {"hostname": "a"},
                                                               "bakeSeconds": 60}]}}),
    );
    let refusals = described.request_refusals("release.canary.create", &bad_plan);
    assert!(
        refusals.iter().any(|r| r.contains("at /rollout_plan")),
        "{refusals:?}"
    );
}

/// docs/api.md, from the repository root.
fn api_md() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/api.md");
    std::fs::read_to_string(path).expect("docs/api.md")
}

/// The rows of docs/api.md's endpoint tables: endpoint, role, arguments.
fn documented_rows(md: &str) -> Vec<(String, String, String)> {
    md.lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line.split(" | ").collect();
            let endpoint = cells.first()?.strip_prefix("| `")?.strip_suffix('`')?;
            let role = cells.get(1)?.trim();
            let arguments = cells.get(2)?.trim();
            Some((
                endpoint.to_string(),
                role.to_string(),
                arguments.to_string(),
            ))
        })
        .collect()
}

/// The argument names of the first `{...}` of a table cell, with whether each is marked
/// optional (`name?`): `{pipeline_id, from?, to?}`. Nested objects are skipped over.
fn argument_names(cell: &str) -> Vec<(String, bool)> {
    let Some(start) = cell.find("`{") else {
        return Vec::new();
    };
    let mut names = Vec::new();
    let (mut depth, mut current) = (0, String::new());
    for c in cell[start + 1..].chars() {
        match c {
            '{' | '[' => depth += 1,
            '}' | ']' => {
                depth -= 1;
                if depth == 0 {
                    names.push(std::mem::take(&mut current));
                    break;
                }
            }
            ',' if depth == 1 => names.push(std::mem::take(&mut current)),
            _ if depth == 1 => current.push(c),
            _ => {}
        }
    }
    names
        .iter()
        .map(|n| n.split(':').next().unwrap_or_default().trim())
        .filter(|n| !n.is_empty())
        .map(|n| (n.trim_end_matches('?').to_string(), n.ends_with('?')))
        .collect()
}

/// What docs/api.md's Role column says for a catalog row.
fn role_in_words(e: &app::api::catalog::Endpoint) -> String {
    use app::api::catalog::Scope;
    let role = e.role.as_str();
    match (e.scope, e.author_role) {
        (_, Some(author)) => format!("{} (own release), {role} (anyone's)", author.as_str()),
        (Scope::SignedIn, _) => "signed in".into(),
        (Scope::Users, _) => "signed-in user".into(),
        (Scope::Anywhere, _) if role == "viewer" => "any role".into(),
        (Scope::Everywhere, _) => format!("{role} `*`"),
        (Scope::Anywhere | Scope::Environment, _) => role.into(),
    }
}

#[test]
fn docs_api_md_lists_every_endpoint_with_the_role_and_arguments_the_document_gives() {
    let doc = app::api::openapi::document();
    let md = api_md();
    let rows = documented_rows(&md);
    let mut wrong = Vec::new();
    let documented: BTreeSet<&str> = rows.iter().map(|(e, _, _)| e.as_str()).collect();
    for e in app::api::catalog::ENDPOINTS {
        if !documented.contains(e.name()) {
            wrong.push(format!("{} is not in docs/api.md", e.name()));
        }
    }
    for (endpoint, role, arguments) in &rows {
        let Some(e) = app::api::catalog::endpoint(endpoint) else {
            wrong.push(format!(
                "docs/api.md lists {endpoint}, which is no server function"
            ));
            continue;
        };
        // The Role column starts with what the catalog says (it may add where, as in
        // "admin of `environment_id`").
        let expected = role_in_words(e);
        let everywhere = e.scope == app::api::catalog::Scope::Everywhere;
        if !role.starts_with(&expected) || (role.contains("`*`") && !everywhere) {
            wrong.push(format!(
                "{endpoint}: docs say role {role:?}, the catalog {expected:?}"
            ));
        }
        let request =
            &doc["paths"][e.path]["post"]["requestBody"]["content"]["application/json"]["schema"];
        let schema = resolve(&doc, request);
        let properties = schema["properties"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        let required: BTreeSet<&str> = schema["required"]
            .as_array()
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let names = argument_names(arguments);
        for (name, optional) in &names {
            if !properties.contains_key(name) {
                wrong.push(format!(
                    "{endpoint}: docs name argument {name:?}, which it has not"
                ));
            } else if *optional && required.contains(name.as_str()) {
                wrong.push(format!(
                    "{endpoint}: docs mark {name:?} optional; it is required"
                ));
            }
        }
        for name in &required {
            if !names.iter().any(|(n, optional)| n == name && !optional) {
                wrong.push(format!(
                    "{endpoint}: required argument {name:?} is not in the docs"
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_curl_examples_and_the_example_answer_of_docs_api_md_validate() {
    let mut described = Described::new(app::api::openapi::document());
    let md = api_md();
    let examples = curl_examples(&md);
    assert!(examples.len() >= 8, "the examples were read: {examples:?}");
    for (endpoint, body) in &examples {
        assert_eq!(
            described.request_refusals(endpoint, body),
            Vec::<String>::new(),
            "docs/api.md's example of {endpoint}: {body}"
        );
    }
    // The one example answer: a release as `release.canary.get` returns it.
    let answer = md
        .split("```json\n")
        .nth(1)
        .and_then(|rest| rest.split("\n```").next())
        .expect("the example answer");
    let answer: Value = serde_json::from_str(answer).expect("the example answer is JSON");
    assert_eq!(
        described.result_refusals("release.canary.get", &answer),
        Vec::<String>::new()
    );
}

/// The `curl ... $base/api/<endpoint> ... -d '<json>'` examples, their shell quoting undone
/// (`$env` stands for an id).
fn curl_examples(md: &str) -> Vec<(String, Value)> {
    let mut examples = Vec::new();
    for (i, _) in md.match_indices("$base/api/") {
        let rest = &md[i + "$base/api/".len()..];
        let endpoint: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '.' || *c == '_')
            .collect();
        // The body flag of this command: before its last line ends (no `\` continuing it).
        let Some(flag) = rest.find("-d ").filter(|&at| {
            let before = &rest[..at];
            before
                .match_indices('\n')
                .all(|(n, _)| before[..n].ends_with('\\'))
        }) else {
            continue;
        };
        let quoted = &rest[flag + 3..];
        let body = match quoted.chars().next() {
            Some('\'') => quoted[1..].split('\'').next().map(str::to_string),
            Some('"') => quoted[1..]
                .split("\"\n")
                .next()
                .map(|b| b.trim_end_matches('"').replace("\\\"", "\"")),
            _ => None,
        };
        let Some(body) = body else { continue };
        let body = body.replace("$env", "01a236ae-5006-7518-a8a4-ba7eac19a920");
        let value = serde_json::from_str(&body).unwrap_or_else(|e| {
            panic!("docs/api.md's {endpoint} example is not JSON: {e}\n{body}")
        });
        examples.push((endpoint, value));
    }
    examples
}

/// A schema, or the one its `$ref` names.
fn resolve<'d>(doc: &'d Value, schema: &'d Value) -> &'d Value {
    match schema["$ref"].as_str() {
        Some(target) => doc
            .pointer(target.trim_start_matches('#'))
            .unwrap_or(&Value::Null),
        None => schema,
    }
}

fn collect_refs(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                match v {
                    Value::String(s) if key == "$ref" => out.push(s.clone()),
                    _ => collect_refs(v, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect_refs(v, out)),
        _ => {}
    }
}
