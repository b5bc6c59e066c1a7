//! The editor's HTTP API against the real `pi-forge ui` process: every route, the security
//! guard, revisions and conflicts, and live events.

mod support;

use base64::Engine as _;
use std::collections::HashSet;
use std::io::{BufRead as _, BufReader};
use std::sync::{mpsc, Arc, Barrier};
use std::time::{Duration, Instant};

use forge_core::canonical::revision;
use forge_core::json::to_pretty;
use reqwest::blocking::{Client, RequestBuilder, Response};
use reqwest::header::HeaderMap;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use support::{Dirs, Server};

const ALPHA: &str = r#"{
  "schemaVersion": 2,
  "type": "pi-forge.prompt-stack",
  "id": "alpha",
  "name": "Alpha",
  "futureField": { "kept": true },
  "tools": { "allow": ["read", "grep"] },
  "items": [
    { "kind": "block", "id": "intro", "role": "system", "content": "You are careful." },
    { "kind": "slot", "id": "history", "slot": "chat-history" }
  ]
}
"#;

const PROFILE: &str = r#"{
  "schemaVersion": 1,
  "type": "pi-forge.agent-profile",
  "id": "scout",
  "name": "Scout",
  "model": { "provider": "test", "id": "target" },
  "thinkingLevel": "medium",
  "promptStack": "alpha"
}
"#;

const CAPABILITY: &str = r#"{
  "schemaVersion": 1,
  "type": "pi-forge.capability",
  "id": "no-writes",
  "name": "No writes",
  "content": "Do not modify files.",
  "tools": { "add": [], "remove": ["write"] }
}
"#;

const STACK_DIR: &str = ".pi/forge/prompt-stacks";

fn client() -> Client {
    Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

/// A seeded project with one stack, one profile and one capability, and its server.
struct Fixture {
    dirs: Dirs,
    server: Server,
    client: Client,
}

impl Fixture {
    fn new() -> Fixture {
        Fixture::with_env(&[])
    }

    fn with_env(env: &[(&str, &str)]) -> Fixture {
        let dirs = Dirs::new();
        dirs.write(&format!("{STACK_DIR}/alpha.json"), ALPHA);
        dirs.write(".pi/forge/agent-profiles/scout.json", PROFILE);
        dirs.write(".pi/forge/capabilities/no-writes.json", CAPABILITY);
        let server = Server::start(&dirs, &[], env);
        Fixture {
            dirs,
            server,
            client: client(),
        }
    }

    /// A request with the token header.
    fn req(&self, method: Method, path: &str) -> RequestBuilder {
        self.client
            .request(method, self.server.url(path))
            .header("x-pi-forge-token", &self.server.token)
    }

    fn get(&self, path: &str) -> Response {
        self.req(Method::GET, path).send().unwrap()
    }

    fn get_json(&self, path: &str) -> Value {
        let response = self.get(path);
        assert_eq!(response.status(), StatusCode::OK, "GET {path}");
        response.json().unwrap()
    }

    fn send(&self, method: Method, path: &str, body: &Value) -> (StatusCode, HeaderMap, Value) {
        let response = self.req(method, path).json(body).send().unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let body: Value = response.json().unwrap_or(Value::Null);
        (status, headers, body)
    }

    fn stack_path(&self, id: &str) -> std::path::PathBuf {
        self.dirs
            .project()
            .join(STACK_DIR)
            .join(format!("{id}.json"))
    }
}

fn assert_error(body: &Value, code: &str) {
    assert_eq!(body["code"], code, "{body}");
    assert!(
        body["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{body}"
    );
}

// ---------------------------------------------------------------------------------------------
// Security

#[test]
fn the_api_needs_the_token_header_or_cookie_and_never_a_query_token() {
    let f = Fixture::new();
    let anonymous = f.client.get(f.server.url("/api/meta")).send().unwrap();
    assert_eq!(anonymous.status(), StatusCode::FORBIDDEN);
    let body: Value = anonymous.json().unwrap();
    assert_eq!(
        body,
        json!({"error": "Invalid pi-forge editor token.", "code": "forbidden"})
    );

    let query = f
        .client
        .get(f.server.url(&format!("/api/meta?token={}", f.server.token)))
        .send()
        .unwrap();
    assert_eq!(query.status(), StatusCode::FORBIDDEN);

    let wrong = f
        .client
        .get(f.server.url("/api/meta"))
        .header("x-pi-forge-token", "not-the-token")
        .send()
        .unwrap();
    assert_eq!(wrong.status(), StatusCode::FORBIDDEN);

    assert_eq!(f.get("/api/meta").status(), StatusCode::OK);
    let by_cookie = f
        .client
        .get(f.server.url("/api/meta"))
        .header("cookie", f.server.cookie())
        .send()
        .unwrap();
    assert_eq!(by_cookie.status(), StatusCode::OK);

    // Unknown API routes are authenticated too.
    let unknown = f.client.get(f.server.url("/api/state")).send().unwrap();
    assert_eq!(unknown.status(), StatusCode::FORBIDDEN);
}

#[test]
fn the_url_token_is_exchanged_for_a_strict_http_only_cookie() {
    let f = Fixture::new();
    let page = f.client.get(f.server.url("/")).send().unwrap();
    assert_eq!(page.status(), StatusCode::FORBIDDEN);
    assert!(page.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/html"));
    assert!(page.text().unwrap().contains("pi-forge ui"));

    let wrong = f.client.get(f.server.url("/?token=nope")).send().unwrap();
    assert_eq!(wrong.status(), StatusCode::FORBIDDEN);
    assert_eq!(wrong.text().unwrap(), "Invalid pi-forge editor token.");

    let exchange = f.client.get(&f.server.url).send().unwrap();
    assert_eq!(exchange.status(), StatusCode::SEE_OTHER);
    assert_eq!(exchange.headers()["location"], "/");
    let cookie = exchange.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .to_string();
    // The cookie holds this server's own 24-byte secret, never the API token.
    let prefix = format!("pi_forge_token_{}=", f.server.port);
    let suffix = "; HttpOnly; SameSite=Strict; Path=/";
    assert!(
        cookie.starts_with(&prefix) && cookie.ends_with(suffix),
        "{cookie}"
    );
    let secret = &cookie[prefix.len()..cookie.len() - suffix.len()];
    assert_eq!(secret.len(), 32, "{cookie}");
    assert_ne!(secret, f.server.token);
    assert_eq!(
        f.server.cookie(),
        format!("{prefix}{secret}"),
        "one secret per server"
    );
    assert_eq!(exchange.headers()["cache-control"], "no-store");

    let page = get_page(&f);
    // 503 when this binary was built without the web bundle (it then says how to build it).
    assert!(
        page.status() == StatusCode::OK || page.status() == StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        page.status()
    );
    assert_eq!(page.headers()["cache-control"], "no-store");
}

#[test]
fn every_response_carries_the_security_headers() {
    let f = Fixture::new();
    // With the web bundle, the policy allows the page's one inline stylesheet by its hash.
    let style = if get_page(&f).status() == StatusCode::OK {
        let digest = hex_bytes(&sha256(&dist_file("app.css")));
        let hash = base64::engine::general_purpose::STANDARD.encode(digest);
        format!("style-src 'self' 'sha256-{hash}'; ")
    } else {
        String::new()
    };
    let csp = format!(
        "default-src 'self'; {style}script-src 'self' 'wasm-unsafe-eval'; frame-ancestors 'none'"
    );
    for response in [
        f.get("/api/meta"),
        f.client.get(f.server.url("/api/meta")).send().unwrap(),
        f.client.get(f.server.url("/nope")).send().unwrap(),
    ] {
        let h = response.headers();
        assert_eq!(h["content-security-policy"], csp);
        assert_eq!(h["x-content-type-options"], "nosniff");
        assert_eq!(h["referrer-policy"], "no-referrer");
        assert_eq!(h["cache-control"], "no-store");
    }
}

#[test]
fn a_foreign_host_header_is_refused() {
    let f = Fixture::new();
    for host in [
        "evil.example".to_string(),
        format!("evil.example:{}", f.server.port),
        format!("127.0.0.1:{}", f.server.port + 1),
        "127.0.0.1".to_string(),
    ] {
        let response = f
            .req(Method::GET, "/api/meta")
            .header("host", &host)
            .send()
            .unwrap();
        assert_eq!(response.status(), StatusCode::MISDIRECTED_REQUEST, "{host}");
        assert_error(&response.json().unwrap(), "bad_host");
    }
    let localhost = f
        .req(Method::GET, "/api/meta")
        .header("host", format!("localhost:{}", f.server.port))
        .send()
        .unwrap();
    assert_eq!(localhost.status(), StatusCode::OK);
}

#[test]
fn the_cookie_only_works_from_the_editors_own_page() {
    let f = Fixture::new();
    let cookie = f.server.cookie();
    let secret = cookie.split_once('=').unwrap().1.to_string();
    let other_port = format!("http://127.0.0.1:{}", f.server.port + 1);
    let get = |headers: &[(&str, &str)]| {
        let mut request = f.client.get(f.server.url("/api/meta"));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.send().unwrap()
    };
    // What a browser sends from a page on another port of 127.0.0.1 (same site, other origin),
    // on a GET as well as on a state change.
    for headers in [
        vec![("cookie", cookie.as_str()), ("origin", other_port.as_str())],
        vec![("cookie", cookie.as_str()), ("sec-fetch-site", "same-site")],
        vec![
            ("cookie", cookie.as_str()),
            ("sec-fetch-site", "cross-site"),
        ],
    ] {
        let response = get(&headers);
        assert_eq!(response.status(), StatusCode::FORBIDDEN, "{headers:?}");
        assert_error(&response.json().unwrap(), "bad_origin");
    }
    let post = f
        .client
        .post(f.server.url("/api/disable"))
        .header("cookie", &cookie)
        .header("origin", &other_port)
        .json(&json!({}))
        .send()
        .unwrap();
    assert_eq!(post.status(), StatusCode::FORBIDDEN);
    assert_error(&post.json().unwrap(), "bad_origin");

    // The page on another port learns the cookie's value, which is not the API token: as the
    // token header it is refused, and the token is no cookie either.
    assert_eq!(
        get(&[("x-pi-forge-token", &secret)]).status(),
        StatusCode::FORBIDDEN
    );
    let token_cookie = format!("pi_forge_token_{}={}", f.server.port, f.server.token);
    assert_eq!(
        get(&[("cookie", &token_cookie)]).status(),
        StatusCode::FORBIDDEN
    );

    // The editor's own page: same origin, or no fetch metadata (a typed address).
    let own = f.server.origin();
    for headers in [
        vec![("cookie", cookie.as_str())],
        vec![
            ("cookie", cookie.as_str()),
            ("sec-fetch-site", "same-origin"),
        ],
        vec![("cookie", cookie.as_str()), ("origin", own.as_str())],
    ] {
        assert_eq!(get(&headers).status(), StatusCode::OK, "{headers:?}");
    }
    // The page itself is refused when a page on another port links to it.
    let linked = f
        .client
        .get(f.server.url("/"))
        .header("cookie", &cookie)
        .header("sec-fetch-site", "same-site")
        .send()
        .unwrap();
    assert_eq!(linked.status(), StatusCode::FORBIDDEN);
}

#[test]
fn state_changes_need_the_same_origin_or_the_token_header() {
    let f = Fixture::new();
    let body = json!({"stack": {"id": "beta", "items": []}});
    let with_cookie = |origin: Option<&str>| {
        let mut request = f
            .client
            .post(f.server.url("/api/stacks"))
            .header("cookie", f.server.cookie())
            .json(&body);
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        request.send().unwrap()
    };
    for origin in [Some("http://evil.example"), Some("null"), None] {
        let response = with_cookie(origin);
        assert_eq!(response.status(), StatusCode::FORBIDDEN, "{origin:?}");
        assert_error(&response.json().unwrap(), "bad_origin");
    }
    assert!(!f.stack_path("beta").exists());
    let same = with_cookie(Some(&f.server.origin()));
    assert_eq!(same.status(), StatusCode::CREATED);
    assert!(f.stack_path("beta").exists());
}

#[test]
fn bodies_over_two_million_bytes_are_refused_with_413() {
    let f = Fixture::new();
    let big = format!(
        "{{\"stack\":{{\"id\":\"big\",\"items\":[],\"pad\":\"{}\"}}}}",
        "x".repeat(2_000_000)
    );
    let response = f
        .req(Method::POST, "/api/stacks")
        .header("content-type", "application/json")
        .body(big)
        .send()
        .unwrap();
    assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(
        response.json::<Value>().unwrap(),
        json!({"error": "Request body is too large.", "code": "body_too_large"})
    );
    assert!(!f.stack_path("big").exists());
    // Just under the limit is read (and then judged on its content).
    let fits = format!(
        "{{\"stack\":{{\"id\":\"fits\",\"items\":[],\"pad\":\"{}\"}}}}",
        "x".repeat(1_000_000)
    );
    let response = f
        .req(Method::POST, "/api/stacks")
        .body(fits)
        .send()
        .unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
}

#[test]
fn malformed_json_is_400_and_changes_nothing() {
    let f = Fixture::new();
    let before = std::fs::read(f.stack_path("alpha")).unwrap();
    for (method, path) in [
        (Method::PUT, "/api/stacks/alpha"),
        (Method::POST, "/api/stacks"),
        (Method::POST, "/api/stacks/alpha/preview"),
        (Method::DELETE, "/api/stacks/alpha"),
    ] {
        let response = f
            .req(method.clone(), path)
            .header("content-type", "application/json")
            .header("if-match", format!("\"{}\"", revision(&before)))
            .body("{\"stack\": {\"id\": \"alpha\",")
            .send()
            .unwrap();
        assert_eq!(
            response.status(),
            StatusCode::BAD_REQUEST,
            "{method} {path}"
        );
        assert_eq!(
            response.json::<Value>().unwrap(),
            json!({"error": "Request body must contain valid JSON.", "code": "invalid_json"})
        );
    }
    assert_eq!(std::fs::read(f.stack_path("alpha")).unwrap(), before);
}

// ---------------------------------------------------------------------------------------------
// Revisions

#[test]
fn a_stale_save_is_409_with_the_current_revision_and_content() {
    let f = Fixture::new();
    let response = f.get("/api/stacks/alpha");
    let etag = response.headers()["etag"].to_str().unwrap().to_string();
    let read: Value = response.json().unwrap();
    let base = read["revision"].as_str().unwrap().to_string();
    assert_eq!(etag, format!("\"{base}\""));

    // Someone else edits the file.
    let external = ALPHA.replace("\"Alpha\"", "\"Alpha (edited elsewhere)\"");
    std::fs::write(f.stack_path("alpha"), &external).unwrap();

    let mut draft = read["stack"].clone();
    draft["name"] = json!("Mine");
    let (status, _, body) = f.send(
        Method::PUT,
        "/api/stacks/alpha",
        &json!({"stack": draft, "sourceRevision": base}),
    );
    assert_eq!(status, StatusCode::CONFLICT);
    assert_error(&body, "stale_revision");
    assert_eq!(body["currentRevision"], revision(external.as_bytes()));
    assert_eq!(body["current"]["name"], "Alpha (edited elsewhere)");
    assert_eq!(
        std::fs::read_to_string(f.stack_path("alpha")).unwrap(),
        external
    );

    // The same with If-Match, and with the bare 64-hex sourceRevision of 0.5.5.
    let response = f
        .req(Method::PUT, "/api/stacks/alpha")
        .header("if-match", format!("\"{base}\""))
        .json(&json!({"stack": draft}))
        .send()
        .unwrap();
    assert_eq!(response.status(), StatusCode::CONFLICT);
    let (status, _, _) = f.send(
        Method::PUT,
        "/api/stacks/alpha",
        &json!({"stack": draft, "expectedSourceRevision": base.trim_start_matches("sha256:")}),
    );
    assert_eq!(status, StatusCode::CONFLICT);

    // No revision at all: 428.
    let (status, _, body) = f.send(Method::PUT, "/api/stacks/alpha", &json!({"stack": draft}));
    assert_eq!(status, StatusCode::PRECONDITION_REQUIRED);
    assert_error(&body, "revision_required");

    // Based on the current revision, the save goes through.
    let current = revision(external.as_bytes());
    let (status, headers, body) = f.send(
        Method::PUT,
        "/api/stacks/alpha",
        &json!({"stack": draft, "sourceRevision": current}),
    );
    assert_eq!(status, StatusCode::OK, "{body}");
    let on_disk = std::fs::read(f.stack_path("alpha")).unwrap();
    assert_eq!(body["revision"], revision(&on_disk));
    assert_eq!(
        headers["etag"],
        format!("\"{}\"", revision(&on_disk)).as_str()
    );
    assert_eq!(String::from_utf8(on_disk).unwrap(), to_pretty(&draft));
}

#[test]
fn a_hundred_concurrent_saves_from_one_revision_have_exactly_one_winner() {
    let f = Fixture::new();
    let read = f.get_json("/api/stacks/alpha");
    let base = read["revision"].as_str().unwrap().to_string();
    let drafts: Vec<Value> = (0..100)
        .map(|i| {
            let mut draft = read["stack"].clone();
            draft["name"] = json!(format!("Version {i}"));
            draft["items"][0]["content"] = json!(format!("Text {i} ").repeat(50));
            draft
        })
        .collect();
    let barrier = Arc::new(Barrier::new(drafts.len()));
    let url = f.server.url("/api/stacks/alpha");
    let token = f.server.token.clone();
    let handles: Vec<_> = drafts
        .iter()
        .cloned()
        .enumerate()
        .map(|(i, draft)| {
            let (barrier, url, token, base) = (
                Arc::clone(&barrier),
                url.clone(),
                token.clone(),
                base.clone(),
            );
            std::thread::spawn(move || {
                let client = client();
                let request = client
                    .put(&url)
                    .header("x-pi-forge-token", token)
                    .header("if-match", format!("\"{base}\""))
                    .json(&json!({ "stack": draft }));
                barrier.wait();
                let response = request.send().unwrap();
                let status = response.status();
                let body: Value = response.json().unwrap();
                (i, status, body)
            })
        })
        .collect();
    let results: Vec<(usize, StatusCode, Value)> =
        handles.into_iter().map(|h| h.join().unwrap()).collect();
    let winners: Vec<&(usize, StatusCode, Value)> =
        results.iter().filter(|r| r.1 == StatusCode::OK).collect();
    let conflicts = results
        .iter()
        .filter(|r| r.1 == StatusCode::CONFLICT && r.2["code"] == "stale_revision")
        .count();
    assert_eq!(
        winners.len(),
        1,
        "{:?}",
        results.iter().map(|r| r.1).collect::<Vec<_>>()
    );
    assert_eq!(conflicts, 99);
    let (winner, _, body) = winners[0];
    let on_disk = std::fs::read_to_string(f.stack_path("alpha")).unwrap();
    assert_eq!(
        on_disk,
        to_pretty(&drafts[*winner]),
        "the file is exactly the winner's body"
    );
    assert_eq!(body["revision"], revision(on_disk.as_bytes()));
    for (_, status, body) in &results {
        if *status == StatusCode::CONFLICT {
            assert_eq!(body["currentRevision"], revision(on_disk.as_bytes()));
        }
    }
    // No temp file was left behind.
    let leftovers: Vec<_> = std::fs::read_dir(f.dirs.project().join(STACK_DIR))
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

// ---------------------------------------------------------------------------------------------
// Routes

#[test]
fn meta_resources_and_unknown_routes() {
    let f = Fixture::new();
    let meta = f.get_json("/api/meta");
    assert_eq!(meta["name"], "pi-forge");
    assert_eq!(meta["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(meta["trusted"], true);
    assert_eq!(meta["liveHost"], false);
    assert_eq!(meta["demo"], false);
    assert_eq!(meta["project"], f.dirs.project().display().to_string());
    assert_eq!(meta["globalDir"], f.dirs.global().display().to_string());
    assert!(meta["features"]
        .as_array()
        .unwrap()
        .contains(&json!("events")));

    let resources = f.get_json("/api/resources");
    let tools: Vec<&str> = resources["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        tools,
        [
            "bash",
            "codemode",
            "edit",
            "find",
            "grep",
            "ls",
            "powershell",
            "read",
            "tool_search",
            "write"
        ]
    );
    assert_eq!(resources["groups"][0]["source"], "builtin");
    assert_eq!(resources["skills"], json!([]));

    for path in ["/api/state", "/api/nope", "/api/stacks/alpha/nope"] {
        let response = f.get(path);
        assert_eq!(response.status(), StatusCode::NOT_FOUND, "{path}");
        assert_error(&response.json().unwrap(), "not_found");
    }
    let response = f.req(Method::DELETE, "/api/meta").send().unwrap();
    assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_error(&response.json().unwrap(), "method_not_allowed");
    let page = f.client.get(f.server.url("/nope")).send().unwrap();
    assert_eq!(page.status(), StatusCode::NOT_FOUND);
    assert_eq!(page.text().unwrap(), "Not found.");

    let reload = f.send(Method::POST, "/api/reload", &json!({}));
    assert_eq!(reload.0, StatusCode::OK);
    assert_eq!(reload.2["changed"], 0);
}

#[test]
fn stacks_list_read_export_validate_preview_activate() {
    let f = Fixture::new();
    let list = f.get_json("/api/stacks");
    assert_eq!(list["cwd"], f.dirs.project().display().to_string());
    assert_eq!(list["activeId"], Value::Null);
    let row = &list["stacks"][0];
    assert_eq!(row["selector"], "project:alpha");
    assert_eq!(row["itemCount"], 2);
    assert_eq!(row["mode"], "replace");
    assert_eq!(row["errors"], 0);

    let response = f.get("/api/stacks/alpha");
    let etag = response.headers()["etag"].clone();
    let one: Value = response.json().unwrap();
    let bytes = std::fs::read(f.stack_path("alpha")).unwrap();
    assert_eq!(one["revision"], revision(&bytes));
    assert_eq!(etag, format!("\"{}\"", revision(&bytes)).as_str());
    assert_eq!(
        one["sourceRevision"],
        revision(&bytes).trim_start_matches("sha256:")
    );
    assert_eq!(one["scope"], "project");
    assert_eq!(one["selector"], "project:alpha");
    assert_eq!(one["path"], f.stack_path("alpha").display().to_string());
    assert_eq!(one["diagnostics"], json!([]));
    assert_eq!(one["stack"]["futureField"], json!({"kept": true}));
    assert_eq!(f.get_json("/api/stacks/project:alpha")["id"], "alpha");
    let missing = f.get("/api/stacks/ghost");
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    assert_eq!(
        missing.json::<Value>().unwrap()["error"],
        "Unknown prompt stack: ghost"
    );
    let bad = f.get("/api/stacks/team:alpha");
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
    assert_error(&bad.json().unwrap(), "invalid_selector");

    let export = f.get("/api/stacks/alpha/export");
    assert_eq!(export.status(), StatusCode::OK);
    assert_eq!(
        export.headers()["content-disposition"],
        "attachment; filename=\"alpha.json\""
    );
    assert_eq!(export.text().unwrap(), ALPHA);

    let (status, _, body) = f.send(
        Method::POST,
        "/api/stacks/validate",
        &json!({"stack": {"id": "alpha", "items": [{"kind": "slot", "id": "x", "slot": "nope"}]}}),
    );
    assert_eq!(status, StatusCode::OK);
    let messages: Vec<&str> = body["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["message"].as_str().unwrap())
        .collect();
    assert!(
        messages
            .iter()
            .any(|m| m.contains("Unsupported slot: nope")),
        "{messages:?}"
    );
    assert!(
        messages.iter().any(|m| m.contains("already exists")),
        "{messages:?}"
    );
    assert_eq!(body["valid"], false);
    let (status, _, body) = f.send(
        Method::POST,
        "/api/stacks/alpha/validate",
        &json!({"stack": {"id": "renamed", "items": []}}),
    );
    assert_eq!(status, StatusCode::OK);
    assert!(body["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .any(|d| d["message"].as_str().unwrap().contains("immutable")));

    // Preview of the saved stack, then of a draft with another tool policy and a conversation.
    let (status, _, saved) = f.send(Method::POST, "/api/stacks/alpha/preview", &json!({}));
    assert_eq!(status, StatusCode::OK, "{saved}");
    assert_eq!(saved["ok"], true);
    assert_eq!(saved["stackId"], "project:alpha");
    assert_eq!(saved["liveHost"], false);
    assert_eq!(saved["compiled"]["selectedTools"], json!(["read", "grep"]));
    assert!(saved["preview"]["system"]["content"]
        .as_str()
        .unwrap()
        .contains("You are careful."));
    assert!(saved["text"].as_str().unwrap().contains("You are careful."));
    let draft = json!({"id": "alpha", "tools": {"allow": ["bash"]}, "items": [
        {"kind": "block", "id": "intro", "role": "system", "content": "Draft text."},
        {"kind": "slot", "id": "history", "slot": "chat-history"}
    ]});
    let messages = json!([{"role": "user", "content": "hello", "timestamp": 1}]);
    let (status, _, body) = f.send(
        Method::POST,
        "/api/stacks/alpha/preview",
        &json!({"stack": draft, "messages": messages}),
    );
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["compiled"]["selectedTools"], json!(["bash"]));
    assert!(body["text"].as_str().unwrap().contains("Draft text."));
    // What the draft's templates see: its tools, slots and parameters, the stand-in runtime's
    // facts.
    let mut with_parameters = draft.clone();
    with_parameters["schemaVersion"] = json!(2);
    with_parameters["parameters"] = json!({"tone": "dry"});
    let (status, _, env) = f.send(
        Method::POST,
        "/api/stacks/alpha/template-env",
        &json!({"stack": with_parameters}),
    );
    assert_eq!(status, StatusCode::OK, "{env}");
    assert_eq!(env["ok"], true);
    assert_eq!(env["parameters"], json!({"tone": "dry"}));
    assert_eq!(env["runtime"]["selectedTools"], json!(["bash"]));
    assert_eq!(env["runtime"]["selectedToolsText"], "bash");
    assert_eq!(env["runtime"]["tool"], json!({"bash": true}));
    assert_eq!(env["runtime"]["slot"], json!({"chat-history": true}));
    assert_eq!(env["runtime"]["lastUserMessage"], "");
    assert_eq!(
        env["runtime"]["cwd"],
        f.dirs.project().display().to_string()
    );
    // The saved stack without a draft; a draft that is not an object is 400.
    let (status, _, env) = f.send(Method::POST, "/api/stacks/alpha/template-env", &json!({}));
    assert_eq!(status, StatusCode::OK, "{env}");
    assert_eq!(env["runtime"]["selectedTools"], json!(["read", "grep"]));
    let (status, _, bad) = f.send(
        Method::POST,
        "/api/stacks/alpha/template-env",
        &json!({"stack": [1]}),
    );
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(bad["error"], "stack must be a JSON object, not array.");
    let (status, _, unknown) = f.send(Method::POST, "/api/stacks/nope/template-env", &json!({}));
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(unknown["error"], "Unknown prompt stack: nope");
    assert_eq!(body["preview"]["messages"].as_array().unwrap().len(), 1);
    // An unsaved stack can be previewed as a draft; without a draft it is 404.
    let (status, _, body) = f.send(
        Method::POST,
        "/api/stacks/brand-new/preview",
        &json!({"stack": {"id": "brand-new", "items": []}}),
    );
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, _, _) = f.send(Method::POST, "/api/stacks/brand-new/preview", &json!({}));
    assert_eq!(status, StatusCode::NOT_FOUND);

    // Activation belongs to the live Pi session: without one it is refused and nothing changes.
    let no_live = "No live Pi session is connected to this editor. Start Pi in this project with the pi-forge extension loaded (see `pi-forge pi install`), then try again.";
    let (status, _, body) = f.send(Method::POST, "/api/stacks/alpha/activate", &json!({}));
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(body, json!({"error": no_live, "code": "no_live_session"}));
    assert_eq!(f.get_json("/api/stacks")["activeId"], Value::Null);
    assert_eq!(f.get_json("/api/stacks/alpha")["active"], false);
    let (status, _, body) = f.send(Method::POST, "/api/disable", &json!({}));
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(body["code"], "no_live_session");
    let (status, _, _) = f.send(Method::POST, "/api/stacks/ghost/activate", &json!({}));
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[test]
fn stacks_create_save_fork_delete() {
    let f = Fixture::new();
    let beta =
        json!({"schemaVersion": 2, "id": "beta", "name": "Beta", "extra": [1, 2], "items": []});
    let (status, headers, body) = f.send(
        Method::POST,
        "/api/stacks",
        &json!({"stack": beta, "activate": true}),
    );
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["ok"], true);
    assert_eq!(body["selector"], "project:beta");
    // Written, but not activated: no live Pi session is connected.
    assert_eq!(body["active"], false);
    let on_disk = std::fs::read(f.stack_path("beta")).unwrap();
    assert_eq!(String::from_utf8_lossy(&on_disk), to_pretty(&beta));
    assert_eq!(
        headers["etag"],
        format!("\"{}\"", revision(&on_disk)).as_str()
    );

    let (status, _, body) = f.send(Method::POST, "/api/stacks", &json!({"stack": beta}));
    assert_eq!(status, StatusCode::CONFLICT);
    assert_error(&body, "exists");
    let (status, _, body) = f.send(
        Method::POST,
        "/api/stacks",
        &json!({"stack": beta, "scope": "team"}),
    );
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"], "scope must be \"project\" or \"global\".");
    let (status, _, body) = f.send(
        Method::POST,
        "/api/stacks",
        &json!({"stack": {"id": "bad id", "items": []}}),
    );
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["field"], "id");

    // A global create.
    let (status, _, body) = f.send(
        Method::POST,
        "/api/stacks",
        &json!({"stack": {"id": "shared", "items": []}, "scope": "global"}),
    );
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["selector"], "global:shared");
    assert!(f.dirs.global().join("prompt-stacks/shared.json").exists());

    // Save: the id is immutable.
    let base = body["revision"].as_str().unwrap().to_string();
    let (status, _, body) = f.send(
        Method::PUT,
        "/api/stacks/global:shared",
        &json!({"stack": {"id": "other", "items": []}, "sourceRevision": base}),
    );
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_error(&body, "id_immutable");

    // A bare stack body is accepted too.
    let (status, _, body) = f.send(
        Method::PUT,
        "/api/stacks/global:shared",
        &json!({"id": "shared", "name": "Shared", "items": [], "sourceRevision": base}),
    );
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body["stack"],
        json!({"id": "shared", "name": "Shared", "items": []})
    );

    // Fork.
    let (status, _, body) = f.send(
        Method::POST,
        "/api/stacks/alpha/fork",
        &json!({"id": "alpha-copy", "scope": "global"}),
    );
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["selector"], "global:alpha-copy");
    assert_eq!(body["stack"]["futureField"], json!({"kept": true}));
    let (status, _, _) = f.send(
        Method::POST,
        "/api/stacks/alpha/fork",
        &json!({"id": "alpha-copy", "scope": "global"}),
    );
    assert_eq!(status, StatusCode::CONFLICT);

    // Delete: needs the revision; deleting the active stack clears the choice.
    let beta_revision = revision(&std::fs::read(f.stack_path("beta")).unwrap());
    let response = f.req(Method::DELETE, "/api/stacks/beta").send().unwrap();
    assert_eq!(response.status(), StatusCode::PRECONDITION_REQUIRED);
    let response = f
        .req(Method::DELETE, "/api/stacks/beta")
        .header("if-match", format!("\"sha256:{}\"", "0".repeat(64)))
        .send()
        .unwrap();
    assert_eq!(response.status(), StatusCode::CONFLICT);
    assert!(f.stack_path("beta").exists());
    let response = f
        .req(Method::DELETE, "/api/stacks/beta")
        .header("if-match", format!("\"{beta_revision}\""))
        .send()
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.json::<Value>().unwrap(),
        json!({"ok": true, "deleted": "project:beta", "activeId": null})
    );
    assert!(!f.stack_path("beta").exists());
    assert_eq!(f.get("/api/stacks/beta").status(), StatusCode::NOT_FOUND);
}

#[test]
fn profiles_collection_crud_validate_preview_status() {
    let f = Fixture::new();
    let collection = f.get_json("/api/profiles");
    assert_eq!(collection["trusted"], true);
    assert_eq!(collection["liveHost"], false);
    let scout = &collection["profiles"][0];
    assert_eq!(scout["selector"], "project:scout");
    assert_eq!(scout["profile"]["model"]["id"], "target");
    assert_eq!(scout["preview"]["target"]["promptStack"], "project:alpha");
    assert_eq!(
        scout["preview"]["target"]["effectiveTools"],
        json!(["read", "grep"])
    );
    assert_eq!(scout["preview"]["applicable"], true);
    assert!(collection["promptStacks"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s["selector"] == "project:alpha"));
    assert_eq!(collection["autoApplies"], Value::Null);
    assert_eq!(collection["autoClaimants"], json!([]));

    let response = f.get("/api/profiles/scout");
    assert!(response.headers().contains_key("etag"));
    let one: Value = response.json().unwrap();
    assert_eq!(one["scope"], "project");
    let base = one["revision"].as_str().unwrap().to_string();

    let status = f.get_json("/api/profiles/status");
    assert_eq!(status["liveHost"], false);
    assert_eq!(status["current"]["promptStack"], Value::Null);

    // Validate a new draft: an unknown stack is reported.
    let draft = json!({"schemaVersion": 1, "type": "pi-forge.agent-profile", "id": "scout2",
        "model": {"provider": "test", "id": "x"}, "thinkingLevel": "low", "promptStack": "ghost"});
    let (code, _, body) = f.send(
        Method::POST,
        "/api/profiles/validate",
        &json!({"profile": draft}),
    );
    assert_eq!(code, StatusCode::OK);
    assert_eq!(body["valid"], false);
    assert!(
        body["diagnostics"]
            .to_string()
            .contains("Unknown prompt stack: ghost"),
        "{body}"
    );
    assert_eq!(body["preview"]["applicable"], false);
    let (code, _, body) = f.send(
        Method::POST,
        "/api/profiles/validate",
        &json!({"profile": serde_json::from_str::<Value>(PROFILE).unwrap()}),
    );
    assert_eq!(code, StatusCode::OK);
    assert!(
        body["diagnostics"].to_string().contains("already exists"),
        "{body}"
    );
    let (code, _, body) = f.send(
        Method::POST,
        "/api/profiles/validate",
        &json!({"profile": serde_json::from_str::<Value>(PROFILE).unwrap(), "existingId": "scout"}),
    );
    assert_eq!(code, StatusCode::OK);
    assert_eq!(body["valid"], true, "{body}");

    // Create, preview a draft of it, save, fork, delete.
    let mut created = draft.clone();
    created["promptStack"] = json!(null);
    let (code, _, body) = f.send(Method::POST, "/api/profiles", &json!({"profile": created}));
    assert_eq!(code, StatusCode::CREATED, "{body}");
    let scout2_revision = body["revision"].as_str().unwrap().to_string();
    // An auto-activating profile is the one a fresh session applies (A8).
    let mut lead = created.clone();
    lead["id"] = json!("lead");
    lead["autoActivate"] = json!(true);
    let (code, _, body) = f.send(Method::POST, "/api/profiles", &json!({"profile": lead}));
    assert_eq!(code, StatusCode::CREATED, "{body}");
    let collection = f.get_json("/api/profiles");
    assert_eq!(collection["autoApplies"], "project:lead");
    assert_eq!(collection["autoClaimants"], json!(["project:lead"]));
    let mut edited = created.clone();
    edited["promptStack"] = json!("alpha");
    let (code, _, body) = f.send(
        Method::POST,
        "/api/profiles/scout2/preview",
        &json!({"profile": edited}),
    );
    assert_eq!(code, StatusCode::OK, "{body}");
    assert_eq!(body["target"]["promptStack"], "project:alpha");
    let (code, _, body) = f.send(Method::POST, "/api/profiles/scout/preview", &json!({}));
    assert_eq!(code, StatusCode::OK);
    assert_eq!(body["profileId"], "scout");

    let (code, _, body) = f.send(
        Method::PUT,
        "/api/profiles/scout2",
        &json!({"profile": edited, "sourceRevision": scout2_revision}),
    );
    assert_eq!(code, StatusCode::OK, "{body}");
    assert_eq!(body["profile"]["promptStack"], "alpha");
    let (code, _, body) = f.send(
        Method::PUT,
        "/api/profiles/scout2",
        &json!({"profile": edited, "sourceRevision": scout2_revision}),
    );
    assert_eq!(code, StatusCode::CONFLICT);
    assert_error(&body, "stale_revision");

    let (code, _, body) = f.send(
        Method::POST,
        "/api/profiles/scout/fork",
        &json!({"id": "scout-copy"}),
    );
    assert_eq!(code, StatusCode::CREATED, "{body}");
    assert_eq!(body["selector"], "project:scout-copy");

    let (code, _, body) = f.send(
        Method::DELETE,
        "/api/profiles/scout",
        &json!({"sourceRevision": base}),
    );
    assert_eq!(code, StatusCode::OK, "{body}");
    assert_eq!(body["deleted"], "project:scout");
    assert_eq!(f.get("/api/profiles/scout").status(), StatusCode::NOT_FOUND);
}

#[test]
fn capabilities_crud_and_effective_bindings() {
    let f = Fixture::new();
    let list = f.get_json("/api/capabilities");
    assert_eq!(list["ok"], true);
    assert_eq!(list["capabilities"][0]["selector"], "project:no-writes");
    assert_eq!(
        list["capabilities"][0]["capability"]["content"],
        "Do not modify files."
    );

    let bare = f.get("/api/capabilities/no-writes");
    assert_eq!(
        bare.status(),
        StatusCode::BAD_REQUEST,
        "B10: reads need a qualified selector"
    );
    let response = f.get("/api/capabilities/project:no-writes");
    assert_eq!(response.status(), StatusCode::OK);
    assert!(response.headers().contains_key("etag"));
    let one: Value = response.json().unwrap();
    let base = one["sourceRevision"].as_str().unwrap().to_string();
    assert_eq!(base.len(), 64);
    assert_eq!(
        f.get("/api/capabilities/global:no-writes").status(),
        StatusCode::NOT_FOUND
    );

    let new = json!({"schemaVersion": 1, "type": "pi-forge.capability", "id": "explain",
        "content": "Explain each step.", "tools": {"add": [], "remove": []}});
    let (code, _, body) = f.send(
        Method::POST,
        "/api/capabilities",
        &json!({"scope": "global", "capability": new}),
    );
    assert_eq!(code, StatusCode::CREATED, "{body}");
    assert_eq!(body["selector"], "global:explain");
    let (code, _, body) = f.send(
        Method::POST,
        "/api/capabilities",
        &json!({"scope": "global", "capability": {"id": "broken", "content": "", "tools": {"add": [], "remove": []}, "extra": 1}}),
    );
    assert_eq!(code, StatusCode::BAD_REQUEST);
    assert_error(&body, "invalid_input");

    let (code, _, body) = f.send(
        Method::POST,
        "/api/capabilities/validate",
        &json!({"capability": new, "scope": "global"}),
    );
    assert_eq!(code, StatusCode::OK);
    assert!(
        body["diagnostics"].to_string().contains("already exists"),
        "{body}"
    );

    let mut edited: Value = serde_json::from_str(CAPABILITY).unwrap();
    edited["content"] = json!("Never modify files.");
    let (code, _, body) = f.send(
        Method::PUT,
        "/api/capabilities/project:no-writes",
        &json!({"capability": edited, "expectedSourceRevision": base}),
    );
    assert_eq!(code, StatusCode::OK, "{body}");
    let (code, _, body) = f.send(
        Method::PUT,
        "/api/capabilities/project:no-writes",
        &json!({"capability": edited, "expectedSourceRevision": base}),
    );
    assert_eq!(code, StatusCode::CONFLICT);
    assert_error(&body, "stale_revision");

    let (code, _, body) = f.send(
        Method::POST,
        "/api/capabilities/effective",
        &json!({"presetSelector": "project:alpha", "bindings": [
            {"ref": "no-writes", "modelCallable": true},
            {"ref": "global:explain", "id": "explain-more", "overrides": {"appendContent": "Briefly."}}
        ]}),
    );
    assert_eq!(code, StatusCode::OK, "{body}");
    let bindings = body["bindings"].as_array().unwrap();
    assert_eq!(bindings[0]["id"], "no-writes");
    assert_eq!(bindings[0]["ref"], "project:no-writes");
    assert_eq!(bindings[0]["modelCallable"], true);
    assert_eq!(bindings[0]["effective"]["content"], "Never modify files.");
    assert_eq!(bindings[1]["id"], "explain-more");
    assert_eq!(
        bindings[1]["effective"]["content"],
        "Explain each step.\n\nBriefly."
    );
    let (code, _, _) = f.send(
        Method::POST,
        "/api/capabilities/effective",
        &json!({"presetSelector": "project:ghost", "bindings": []}),
    );
    assert_eq!(code, StatusCode::NOT_FOUND);
    let (code, _, body) = f.send(
        Method::POST,
        "/api/capabilities/effective",
        &json!({"presetSelector": "project:alpha", "bindings": [{"ref": "missing"}]}),
    );
    assert_eq!(code, StatusCode::BAD_REQUEST);
    assert_error(&body, "binding_unresolved");

    let current = revision(
        &std::fs::read(
            f.dirs
                .project()
                .join(".pi/forge/capabilities/no-writes.json"),
        )
        .unwrap(),
    );
    let (code, _, body) = f.send(
        Method::DELETE,
        "/api/capabilities/project:no-writes",
        &json!({"expectedSourceRevision": current}),
    );
    assert_eq!(code, StatusCode::OK, "{body}");
    assert_eq!(body["deleted"], "project:no-writes");
}

#[test]
fn capabilities_fork_export_and_bound_by() {
    let f = Fixture::new();
    let list = f.get_json("/api/capabilities");
    assert_eq!(list["capabilities"][0]["boundBy"], json!([]));

    // A Preset that binds it (bare ref: the Preset's own scope) shows up in `boundBy`.
    let mut alpha: Value = serde_json::from_str(ALPHA).unwrap();
    alpha["capabilities"] =
        json!([{"ref": "no-writes"}, {"ref": "project:no-writes", "id": "again"}]);
    std::fs::write(
        f.dirs.project().join(STACK_DIR).join("alpha.json"),
        serde_json::to_vec_pretty(&alpha).unwrap(),
    )
    .unwrap();
    let (status, _, _) = f.send(Method::POST, "/api/reload", &json!({}));
    assert_eq!(status, StatusCode::OK);
    let one = f.get_json("/api/capabilities/project:no-writes");
    assert_eq!(one["boundBy"], json!(["project:alpha"]));

    // Export: the bytes on disk, as a download named after the id.
    let response = f.get("/api/capabilities/project:no-writes/export");
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()["content-disposition"],
        "attachment; filename=\"no-writes.json\""
    );
    assert_eq!(response.text().unwrap(), CAPABILITY);
    assert_eq!(
        f.get("/api/capabilities/project:ghost/export").status(),
        StatusCode::NOT_FOUND
    );

    // Fork to the other scope under a new id; the copy is unbound.
    let (code, _, body) = f.send(
        Method::POST,
        "/api/capabilities/project:no-writes/fork",
        &json!({"id": "no-writes-everywhere", "scope": "global", "name": "No writes anywhere"}),
    );
    assert_eq!(code, StatusCode::CREATED, "{body}");
    assert_eq!(body["selector"], "global:no-writes-everywhere");
    assert_eq!(body["capability"]["content"], "Do not modify files.");
    assert_eq!(body["capability"]["name"], "No writes anywhere");
    assert_eq!(body["boundBy"], json!([]));
    let (code, _, body) = f.send(
        Method::POST,
        "/api/capabilities/project:no-writes/fork",
        &json!({"id": "no-writes-everywhere", "scope": "global"}),
    );
    assert_eq!(code, StatusCode::CONFLICT, "{body}");
    let (code, _, body) = f.send(
        Method::POST,
        "/api/capabilities/project:no-writes/fork",
        &json!({"id": "other", "name": 7}),
    );
    assert_eq!(code, StatusCode::BAD_REQUEST);
    assert_eq!(
        body["error"],
        "name must be a string: the display name of the copy."
    );
    let (code, _, body) = f.send(
        Method::POST,
        "/api/capabilities/project:no-writes/fork",
        &json!({"scope": "global"}),
    );
    assert_eq!(code, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"], "id must be a string: the id of the copy.");
    assert_eq!(
        f.send(
            Method::POST,
            "/api/capabilities/no-writes/fork",
            &json!({"id": "x"})
        )
        .0,
        StatusCode::BAD_REQUEST,
        "fork needs a qualified selector, as every capability route"
    );
}

#[test]
fn config_reads_and_writes_with_revisions() {
    let f = Fixture::new();
    let config = f.get_json("/api/config");
    assert_eq!(config["exists"], false);
    assert_eq!(config["revision"], Value::Null);
    assert_eq!(config["config"], json!({}));

    let (code, headers, body) = f.send(
        Method::PUT,
        "/api/config",
        &json!({"config": {"webEditor": {"port": 4321, "locale": "en"}, "other": true}}),
    );
    assert_eq!(code, StatusCode::OK, "{body}");
    assert_eq!(body["exists"], true);
    assert_eq!(body["webEditor"], json!({"port": 4321, "locale": "en"}));
    let path = f.dirs.project().join(".pi/forge/config.json");
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(
        headers["etag"],
        format!("\"{}\"", revision(&bytes)).as_str()
    );

    // Replacing it needs the revision.
    let (code, _, body) = f.send(Method::PUT, "/api/config", &json!({"config": {}}));
    assert_eq!(code, StatusCode::PRECONDITION_REQUIRED, "{body}");
    let (code, _, body) = f.send(
        Method::PUT,
        "/api/config",
        &json!({"config": {"webEditor": {"port": 70000}}, "sourceRevision": revision(&bytes)}),
    );
    assert_eq!(code, StatusCode::OK, "{body}");
    assert_eq!(body["diagnostics"][0]["level"], "warning");
    let (code, _, body) = f.send(
        Method::PUT,
        "/api/config",
        &json!({"config": {}, "sourceRevision": revision(&bytes)}),
    );
    assert_eq!(code, StatusCode::CONFLICT);
    assert_error(&body, "stale_revision");
    assert_eq!(
        f.get_json("/api/config")["config"]["webEditor"]["port"],
        70000
    );
}

#[test]
fn an_untrusted_project_is_read_only() {
    let f = Fixture::with_env(&[("PI_FORGE_UNTRUSTED", "1")]);
    assert_eq!(f.get_json("/api/meta")["trusted"], false);
    assert_eq!(f.get_json("/api/stacks")["stacks"], json!([]));
    let (code, _, body) = f.send(
        Method::POST,
        "/api/stacks",
        &json!({"stack": {"id": "x", "items": []}}),
    );
    assert_eq!(code, StatusCode::FORBIDDEN);
    assert_error(&body, "untrusted_project");
    let (code, _, body) = f.send(
        Method::POST,
        "/api/profiles",
        &json!({"profile": serde_json::from_str::<Value>(PROFILE).unwrap()}),
    );
    assert_eq!(code, StatusCode::FORBIDDEN);
    assert_error(&body, "untrusted_project");
    let (code, _, body) = f.send(Method::PUT, "/api/config", &json!({"config": {}}));
    assert_eq!(code, StatusCode::FORBIDDEN);
    assert_error(&body, "untrusted_project");
    assert!(!f
        .dirs
        .project()
        .join(".pi/forge/prompt-stacks/x.json")
        .exists());
}

// ---------------------------------------------------------------------------------------------
// Events

/// An open `/api/events` stream (authenticated by the cookie), read on a thread.
struct Events {
    rx: mpsc::Receiver<(String, Value)>,
}

impl Events {
    fn open(f: &Fixture) -> Events {
        let response = f
            .client
            .get(f.server.url("/api/events"))
            .header("cookie", f.server.cookie())
            .header("accept", "text/event-stream")
            .timeout(Duration::from_secs(600))
            .send()
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert!(response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream"));
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut name = String::new();
            for line in BufReader::new(response).lines() {
                let Ok(line) = line else { break };
                if let Some(event) = line.strip_prefix("event: ") {
                    name = event.to_string();
                } else if let Some(data) = line.strip_prefix("data: ") {
                    let value = serde_json::from_str(data).unwrap_or(Value::Null);
                    if tx.send((std::mem::take(&mut name), value)).is_err() {
                        break;
                    }
                }
            }
        });
        let events = Events { rx };
        let (name, ready) = events.next(Duration::from_secs(5)).expect("a ready event");
        assert_eq!(name, "ready");
        assert_eq!(ready["type"], "ready");
        events
    }

    fn next(&self, limit: Duration) -> Option<(String, Value)> {
        self.rx.recv_timeout(limit).ok()
    }

    /// Every event until `limit` has passed.
    fn collect(&self, limit: Duration) -> Vec<(String, Value)> {
        let deadline = Instant::now() + limit;
        let mut out = Vec::new();
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.rx.recv_timeout(left) {
                Ok(event) => out.push(event),
                Err(_) => break,
            }
        }
        out
    }
}

#[test]
fn an_external_edit_reaches_the_event_stream() {
    let f = Fixture::new();
    let events = Events::open(&f);
    // Saved the way editors do: a temp file renamed over the original.
    let text = ALPHA.replace("You are careful.", "You are very careful.");
    let temp = f.dirs.project().join(STACK_DIR).join(".alpha.json.swp");
    std::fs::write(&temp, &text).unwrap();
    std::fs::rename(&temp, f.stack_path("alpha")).unwrap();
    let expected = revision(text.as_bytes());

    let deadline = Instant::now() + Duration::from_secs(5);
    let change = loop {
        let left = deadline
            .checked_duration_since(Instant::now())
            .expect("the edit reached /api/events within 5 s");
        let (name, event) = events
            .next(left)
            .expect("the edit reached /api/events within 5 s");
        if name != "changed" {
            continue;
        }
        if let Some(change) = event["changes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["key"] == "project:alpha")
        {
            break change.clone();
        }
    };
    assert_eq!(change["kind"], "stack");
    assert_eq!(change["change"], "updated");
    assert_eq!(change["origin"], "external");
    assert_eq!(change["revision"], expected);
    assert_eq!(change["path"], f.stack_path("alpha").display().to_string());
    assert_eq!(f.get_json("/api/stacks/alpha")["revision"], expected);

    // A delete and a create are reported too.
    std::fs::remove_file(f.stack_path("alpha")).unwrap();
    std::fs::write(f.stack_path("gamma"), r#"{"id":"gamma","items":[]}"#).unwrap();
    let mut seen: HashSet<(String, String)> = HashSet::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while seen.len() < 2 {
        let left = deadline
            .checked_duration_since(Instant::now())
            .expect("both changes");
        let (name, event) = events.next(left).expect("both changes");
        if name == "changed" {
            for c in event["changes"].as_array().unwrap() {
                seen.insert((
                    c["key"].as_str().unwrap().to_string(),
                    c["change"].as_str().unwrap().to_string(),
                ));
            }
        }
    }
    assert!(
        seen.contains(&("project:alpha".into(), "deleted".into())),
        "{seen:?}"
    );
    assert!(
        seen.contains(&("project:gamma".into(), "created".into())),
        "{seen:?}"
    );
}

#[test]
fn an_own_save_is_reported_once_with_origin_self() {
    let f = Fixture::new();
    let events = Events::open(&f);
    let read = f.get_json("/api/stacks/alpha");
    let mut draft = read["stack"].clone();
    draft["name"] = json!("Saved here");
    let (code, _, body) = f.send(
        Method::PUT,
        "/api/stacks/alpha",
        &json!({"stack": draft, "sourceRevision": read["revision"]}),
    );
    assert_eq!(code, StatusCode::OK, "{body}");
    // Long enough for the watcher's batch (and its reload) to have come and gone.
    let all = events.collect(Duration::from_millis(1500));
    let changed: Vec<&Value> = all
        .iter()
        .filter(|(name, _)| name == "changed")
        .map(|(_, e)| e)
        .collect();
    assert_eq!(changed.len(), 1, "{all:?}");
    assert_eq!(
        changed[0]["changes"],
        json!([{
            "kind": "stack",
            "key": "project:alpha",
            "path": f.stack_path("alpha").display().to_string(),
            "revision": body["revision"],
            "change": "updated",
            "origin": "self",
        }])
    );
    assert!(changed[0]["generation"].as_u64().unwrap() >= 1);
}

#[test]
fn events_need_the_cookie() {
    let f = Fixture::new();
    let response = f.client.get(f.server.url("/api/events")).send().unwrap();
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
}

#[test]
fn assets_are_public_content_hashed_immutable_and_compressed() {
    let f = Fixture::new();
    let page = get_page(&f);
    if page.status() == StatusCode::SERVICE_UNAVAILABLE {
        // Built without the web bundle: the page says how to build it.
        assert!(page.text().unwrap().contains("cargo xtask dist"));
        return;
    }
    // The page carries the stylesheet inline; the file is still served under its hashed name.
    let hashed = &format!("/assets/app.{}.css", &sha256(&dist_file("app.css"))[..10]);
    // No token needed for assets.
    let response = f
        .client
        .get(f.server.url(hashed))
        .header("accept-encoding", "gzip")
        .send()
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()["cache-control"],
        "public, max-age=31536000, immutable"
    );
    assert_eq!(response.headers()["content-encoding"], "gzip");
    assert_eq!(response.headers()["content-type"], "text/css");
    let plain = f
        .client
        .get(f.server.url("/assets/app.css"))
        .send()
        .unwrap();
    assert_eq!(plain.status(), StatusCode::OK);
    assert_eq!(plain.headers()["cache-control"], "no-cache");
    assert_eq!(
        f.client
            .get(f.server.url("/assets/nope.js"))
            .send()
            .unwrap()
            .status(),
        StatusCode::NOT_FOUND
    );
}

/// Issue 16, points 4 and 5 over HTTP: a file too large to read is shown with the reason and
/// refused with 409 `unreadable` (not a confusing 400 for `If-Match: ""`); a read-only file is
/// refused with 409 `read_only` and left as it is.
#[test]
fn unreadable_and_read_only_files_are_refused_with_a_reason() {
    let f = Fixture::new();
    let big = f.stack_path("big");
    std::fs::write(&big, vec![b' '; 8 * 1024 * 1024 + 1]).unwrap();
    let (status, _, _) = f.send(Method::POST, "/api/reload", &json!({}));
    assert_eq!(status, StatusCode::OK);
    let view = f.get_json("/api/stacks/project:big");
    let reason = format!(
        "Failed to read prompt stack: {} is larger than 8388608 bytes",
        big.display()
    );
    assert_eq!(view["unreadable"], json!(reason));
    assert_eq!(view["revision"], "");
    let response = f
        .req(Method::PUT, "/api/stacks/project:big")
        .header("if-match", "\"\"")
        .json(&json!({"stack": {"id": "big", "items": []}}))
        .send()
        .unwrap();
    assert_eq!(response.status(), StatusCode::CONFLICT);
    let body: Value = response.json().unwrap();
    assert_eq!(body["code"], "unreadable");
    assert_eq!(
        body["error"],
        json!(format!(
            "{} cannot be changed from pi-forge: {reason}",
            big.display()
        ))
    );
    assert_eq!(std::fs::metadata(&big).unwrap().len(), 8 * 1024 * 1024 + 1);
    // A readable stack has no `unreadable` member.
    assert_eq!(f.get_json("/api/stacks/alpha").get("unreadable"), None);

    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let alpha = f.stack_path("alpha");
        std::fs::set_permissions(&alpha, std::fs::Permissions::from_mode(0o444)).unwrap();
        let view = f.get_json("/api/stacks/alpha");
        let response = f
            .req(Method::PUT, "/api/stacks/alpha")
            .header(
                "if-match",
                format!("\"{}\"", view["revision"].as_str().unwrap()),
            )
            .json(&json!({"stack": {"id": "alpha", "items": []}}))
            .send()
            .unwrap();
        assert_eq!(response.status(), StatusCode::CONFLICT);
        let body: Value = response.json().unwrap();
        assert_eq!(body["code"], "read_only");
        assert_eq!(
            body["error"],
            json!(format!("{} is read-only; pi-forge does not replace a file you made read-only (make it writable, then save again)", alpha.display()))
        );
        assert_eq!(std::fs::read_to_string(&alpha).unwrap(), ALPHA);
    }
}

/// Issue 16, point 2: a resource folder that cannot be listed is a workspace problem in
/// `GET /api/meta` and the stack list (path and reason), and what could be read is still served.
#[test]
fn workspace_problems_are_reported_and_the_rest_still_loads() {
    let dirs = Dirs::new();
    dirs.write(&format!("{STACK_DIR}/alpha.json"), ALPHA);
    // A file where the profiles folder should be.
    let profiles = dirs.write(".pi/forge/agent-profiles", "not a folder");
    let server = Server::start(&dirs, &[], &[]);
    let f = Fixture {
        dirs,
        server,
        client: client(),
    };
    let expected = json!([{
        "level": "error",
        "message": format!(
            "Cannot list project profile directory: Cannot access {}: Not a directory (os error 20)",
            profiles.display()
        ),
    }]);
    let meta = f.get_json("/api/meta");
    assert_eq!(meta["problems"], expected);
    let list = f.get_json("/api/stacks");
    assert_eq!(list["problems"], expected);
    assert_eq!(list["stacks"][0]["selector"], "project:alpha");
    // Fixed on disk and reloaded: the problem is gone.
    std::fs::remove_file(&profiles).unwrap();
    let (status, _, _) = f.send(Method::POST, "/api/reload", &json!({}));
    assert_eq!(status, StatusCode::OK);
    assert_eq!(f.get_json("/api/meta")["problems"], json!([]));
}

/// `assets/dist` of this checkout: what `cargo xtask dist` built and the binary embeds.
fn dist_file(name: &str) -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../assets/dist")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "cannot read {}: {e}; run `cargo xtask dist` first",
            path.display()
        )
    })
}

fn sha256(bytes: &[u8]) -> String {
    forge_core::canonical::sha256_hex(bytes)
}

fn hex_bytes(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

/// `GET /` with the session cookie, as the browser asks after the token exchange.
fn get_page(f: &Fixture) -> Response {
    f.client
        .get(f.server.url("/"))
        .header("cookie", f.server.cookie())
        .send()
        .unwrap()
}

/// The page as the browser gets it (cookie, no `Accept-Encoding`).
fn page(f: &Fixture) -> String {
    let page = get_page(f);
    assert_eq!(
        page.status(),
        StatusCode::OK,
        "pi-forge was built without its web bundle: run `cargo xtask dist` first"
    );
    assert_eq!(page.headers().get("content-encoding"), None);
    page.text().unwrap()
}

/// `/assets/<stem>.<hash>.<ext>` as the page links it.
fn linked(html: &str, stem: &str, ext: &str) -> String {
    let start = html
        .find(&format!("/assets/{stem}."))
        .unwrap_or_else(|| panic!("the page links no /assets/{stem}.*: {html}"));
    let end = start + html[start..].find('"').unwrap();
    let path = html[start..end].to_string();
    assert!(path.ends_with(&format!(".{ext}")), "{path}");
    path
}

#[test]
fn assets_are_sent_exactly_as_the_build_compressed_them() {
    let f = Fixture::new();
    let html = page(&f);
    for (stem, ext) in [
        ("forge_web_bg", "wasm"),
        ("forge_web", "js"),
        ("app", "css"),
        ("boot", "js"),
    ] {
        let plain = format!("{stem}.{ext}");
        let raw = dist_file(&plain);
        let path = format!("/assets/{stem}.{}.{ext}", &sha256(&raw)[..10]);
        if stem == "app" {
            // The stylesheet is in the page itself, exactly as the build wrote it.
            let css = String::from_utf8(raw.clone()).unwrap();
            assert!(html.contains(&format!("<style>{css}</style>")));
            assert!(
                !html.contains("/assets/app."),
                "the page still links app.css"
            );
        } else {
            assert_eq!(
                linked(&html, stem, ext),
                path,
                "the hashed name is the raw file's hash"
            );
        }
        for (accept, coding, file) in [
            (Some("br"), Some("br"), format!("{plain}.br")),
            (
                Some("gzip, deflate, br, zstd"),
                Some("br"),
                format!("{plain}.br"),
            ),
            (Some("gzip"), Some("gzip"), format!("{plain}.gz")),
            (Some("br;q=0, gzip"), Some("gzip"), format!("{plain}.gz")),
            (None, None, plain.clone()),
            (Some("identity"), None, plain.clone()),
        ] {
            let mut request = f.client.get(f.server.url(&path));
            if let Some(accept) = accept {
                request = request.header("accept-encoding", accept);
            }
            let response = request.send().unwrap();
            assert_eq!(response.status(), StatusCode::OK, "{path} {accept:?}");
            let headers = response.headers().clone();
            assert_eq!(
                headers.get("content-encoding").map(|v| v.to_str().unwrap()),
                coding,
                "{path} {accept:?}"
            );
            assert_eq!(headers["vary"], "accept-encoding");
            let body = response.bytes().unwrap();
            assert_eq!(
                sha256(&body),
                sha256(&dist_file(&file)),
                "{path} with {accept:?} is {file} byte for byte"
            );
        }
    }
    // The build's variants are never served under their own names.
    let response = f
        .client
        .get(f.server.url("/assets/app.css.br"))
        .send()
        .unwrap();
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    // The favicon is a tiny PNG, sent as it is.
    let icon = linked(&html, "favicon", "png");
    let response = f
        .client
        .get(f.server.url(&icon))
        .header("accept-encoding", "br, gzip")
        .send()
        .unwrap();
    assert_eq!(response.headers()["content-type"], "image/png");
    assert_eq!(response.headers().get("content-encoding"), None);
    assert_eq!(response.bytes().unwrap().to_vec(), dist_file("favicon.png"));
}

/// The parts of the wasm module that load on demand (`cargo xtask dist` cuts them off at the
/// web crate's `#[lazy]` functions), the shared code they use (packed into `chunks.bin`) and
/// their loader: served like the rest of the bundle, as built, under the plain names the loader
/// asks for (revalidated, like every plain name).
#[test]
fn split_chunks_and_their_loader_are_sent_as_built() {
    let f = Fixture::new();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../assets/dist");
    let all: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let loose: Vec<&String> = all.iter().filter(|n| n.starts_with("chunk_")).collect();
    assert!(
        loose.is_empty(),
        "shared chunks left outside chunks.bin: {loose:?}"
    );
    let mut names: Vec<String> = all
        .iter()
        .filter(|n| {
            *n == "__wasm_split.js"
                || *n == "chunks.bin"
                || (n.ends_with(".wasm") && *n != "forge_web_bg.wasm")
        })
        .cloned()
        .collect();
    names.sort();
    assert!(
        names.iter().any(|n| n.ends_with(".wasm"))
            && names.iter().any(|n| n.ends_with(".js"))
            && names.iter().any(|n| n == "chunks.bin"),
        "the bundle has no split chunks: {names:?}"
    );
    for name in names {
        let mime = if name.ends_with(".wasm") {
            "application/wasm"
        } else if name.ends_with(".bin") {
            "application/octet-stream"
        } else {
            "text/javascript"
        };
        for (accept, coding, file) in [
            (Some("br, gzip"), Some("br"), format!("{name}.br")),
            (Some("gzip"), Some("gzip"), format!("{name}.gz")),
            (None, None, name.clone()),
        ] {
            let mut request = f.client.get(f.server.url(&format!("/assets/{name}")));
            if let Some(accept) = accept {
                request = request.header("accept-encoding", accept);
            }
            let response = request.send().unwrap();
            assert_eq!(response.status(), StatusCode::OK, "{name} {accept:?}");
            let headers = response.headers().clone();
            assert_eq!(
                headers.get("content-encoding").map(|v| v.to_str().unwrap()),
                coding,
                "{name} {accept:?}"
            );
            assert!(
                headers["content-type"].to_str().unwrap().starts_with(mime),
                "{name}: {:?}",
                headers["content-type"]
            );
            assert_eq!(headers["cache-control"], "no-cache", "{name}");
            assert!(headers.contains_key("etag"), "{name}");
            assert_eq!(
                sha256(&response.bytes().unwrap()),
                sha256(&dist_file(&file)),
                "{name} with {accept:?} is {file} byte for byte"
            );
        }
    }
}

/// The JSON data block the page carries: `{generation, list}`.
fn embedded(html: &str) -> Value {
    let open = "<script type=\"application/json\" id=\"forge-initial\">";
    let start = html.find(open).expect("the page embeds the initial data") + open.len();
    let end = start + html[start..].find("</script>").unwrap();
    serde_json::from_str(&html[start..end]).unwrap()
}

#[test]
fn the_stack_list_is_serialized_once_per_snapshot_and_embedded_in_the_page() {
    let f = Fixture::new();
    let first = f.get("/api/stacks");
    assert_eq!(first.headers()["content-type"], "application/json");
    let etag = first.headers()["etag"].to_str().unwrap().to_string();
    let body = first.bytes().unwrap();
    // The same bytes and tag until something changes.
    let again = f.get("/api/stacks");
    assert_eq!(again.headers()["etag"], etag.as_str());
    assert_eq!(again.bytes().unwrap(), body);
    let not_modified = f
        .req(Method::GET, "/api/stacks")
        .header("if-none-match", &etag)
        .send()
        .unwrap();
    assert_eq!(not_modified.status(), StatusCode::NOT_MODIFIED);
    assert_eq!(not_modified.bytes().unwrap().len(), 0);
    // Compressed when asked for, to the same bytes.
    let br = f
        .req(Method::GET, "/api/stacks")
        .header("accept-encoding", "br")
        .send()
        .unwrap();
    assert_eq!(br.headers()["content-encoding"], "br");
    assert_eq!(
        br.headers()["etag"].to_str().unwrap(),
        format!("{}-br\"", etag.trim_end_matches('"'))
    );
    let mut decoded = Vec::new();
    std::io::Read::read_to_end(
        &mut brotli::Decompressor::new(br.bytes().unwrap().as_ref(), 4096),
        &mut decoded,
    )
    .unwrap();
    assert_eq!(decoded, body);
    let list: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(list["stacks"][0]["name"], "Alpha");

    // The page carries the same list and the generation it belongs to.
    let generation = |f: &Fixture| f.get_json("/api/meta")["generation"].clone();
    let data = embedded(&page(&f));
    assert_eq!(data["list"], list);
    assert_eq!(data["generation"], generation(&f));

    // A save is a new snapshot: new bytes, new tag, and the page follows.
    let mut stack: Value = serde_json::from_str(ALPHA).unwrap();
    stack["name"] = json!("Alpha </script> renamed");
    let rev = revision(&std::fs::read(f.stack_path("alpha")).unwrap());
    let (status, _, _) = f.send(
        Method::PUT,
        "/api/stacks/alpha",
        &json!({"stack": stack, "sourceRevision": rev}),
    );
    assert_eq!(status, StatusCode::OK);
    let after = f.get("/api/stacks");
    assert_ne!(after.headers()["etag"], etag.as_str());
    let list: Value = after.json().unwrap();
    assert_eq!(list["stacks"][0]["name"], "Alpha </script> renamed");
    let html = page(&f);
    assert!(!html.contains("Alpha </script>"), "no raw `<` in the data");
    let data = embedded(&html);
    assert_eq!(data["list"], list);
    assert_eq!(data["generation"], generation(&f));
}

#[test]
fn search_finds_presets_by_their_content() {
    let f = Fixture::new();
    assert_eq!(
        f.get_json("/api/search?q=CAREFUL"),
        json!({"ok": true, "query": "CAREFUL", "results": [{
            "selector": "project:alpha",
            "matches": [{"place": "item intro", "excerpt": "You are careful."}],
            "more": 0
        }]})
    );
    assert_eq!(
        f.get_json("/api/search?q=chat-history")["results"][0]["matches"],
        json!([{"place": "slot history (slot)", "excerpt": "chat-history"}])
    );
    assert_eq!(f.get_json("/api/search?q=nowhere")["results"], json!([]));
    let long = "x".repeat(201);
    let response = f.get(&format!("/api/search?q={long}"));
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let body: Value = response.json().unwrap();
    assert_eq!(
        body["error"],
        "The search text is too long: 201 characters (at most 200)."
    );
}

#[test]
fn regex_try_runs_a_rule_as_the_compiler_does() {
    let f = Fixture::new();
    let (status, _, body) = f.send(
        Method::POST,
        "/api/regex/try",
        &json!({"rule": {"pattern": "\\[([^\\]]+)\\]", "flags": "g", "replace": "**$&**",
                         "trimStrings": ["[", "]"]}, "sample": "Status: [OK]"}),
    );
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body,
        json!({"ok": true, "matches": 1, "text": "Status: **OK**", "changed": true, "outOfBudget": false})
    );
    let (status, _, body) = f.send(
        Method::POST,
        "/api/regex/try",
        &json!({"rule": {"pattern": "(", "replace": ""}, "sample": "x"}),
    );
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["code"], "invalid_rule");
    assert_eq!(
        body["error"],
        "Invalid regular expression: /(/: Unbalanced parenthesis"
    );
    let (status, _, body) = f.send(
        Method::POST,
        "/api/regex/try",
        &json!({"rule": "x", "sample": "x"}),
    );
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        body["error"],
        "rule must be a JSON object (one regex rule)."
    );
}
