//! `GET /api/agent/runs/:run`: a kept run's record with its answer, shown only when `answer.txt`
//! still has the SHA-256 the record holds (409 `answer_hash_mismatch` otherwise); and the
//! `agent-plans` event of `/api/events`. The runs here are written by the test as
//! `pi-forge agent run` keeps them; real runs are in e2e/tests/pi_agent.rs and
//! e2e/tests/delegation_views.rs.

mod support;

use std::io::Read;
use std::time::{Duration, Instant};

use forge_core::canonical::sha256_hex;
use reqwest::blocking::Client;
use reqwest::StatusCode;
use serde_json::{json, Value};
use support::{Dirs, Server};

const RUN: &str = "run:0b5c1f0e-8a51-4c6e-9d7e-1f2a3b4c5d6e";
const FOLDER: &str = ".pi/forge/runs/run-0b5c1f0e-8a51-4c6e-9d7e-1f2a3b4c5d6e";

fn record(status: &str, answer: &str) -> String {
    json!({
        "schemaVersion": 1, "runId": RUN, "profileId": "project:reviewer", "status": status,
        "error": if status == "completed" { Value::Null } else { json!("The child ended with stopReason error.") },
        "model": "fake/fake-1", "thinkingLevel": "off", "usedThinkingLevel": "off",
        "approval": {"required": true, "approved": true, "viewedFullPrompt": true, "source": "human", "from": "web"},
        "startedAt": "2026-12-02T01:00:00.000Z", "durationMs": 812,
        "usage": {"input": 10, "output": 3, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 13,
                  "cost": {"input": 0.001, "output": 0.002, "cacheRead": 0, "cacheWrite": 0, "total": 0.003}},
        "answerSha256": sha256_hex(answer.as_bytes()), "answerBytes": answer.len(),
    })
    .to_string()
}

fn get(server: &Server, path: &str) -> (StatusCode, Value) {
    let response = Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
        .get(server.url(path))
        .header("x-pi-forge-token", &server.token)
        .send()
        .unwrap();
    let status = response.status();
    (status, response.json().unwrap_or(Value::Null))
}

fn post(server: &Server, path: &str) -> (StatusCode, Value) {
    let response = Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
        .post(server.url(path))
        .header("x-pi-forge-token", &server.token)
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .unwrap();
    let status = response.status();
    (status, response.json().unwrap_or(Value::Null))
}

fn run_path() -> String {
    format!("/api/agent/runs/{}", RUN.replace(':', "%3A"))
}

#[test]
fn a_completed_run_answers_its_verified_answer() {
    let dirs = Dirs::new();
    dirs.write(
        &format!("{FOLDER}/result.json"),
        &record("completed", "ok from fake"),
    );
    dirs.write(&format!("{FOLDER}/answer.txt"), "ok from fake");
    let server = Server::start(&dirs, &[], &[]);
    let (status, body) = get(&server, &run_path());
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["ok"], true);
    assert_eq!(body["answer"], "ok from fake");
    assert_eq!(body["record"]["runId"], RUN);
    assert_eq!(body["record"]["usage"]["totalTokens"], 13);
    // The typed contract reads it.
    let detail: forge_core::api::RunDetail = serde_json::from_value(body).unwrap();
    assert_eq!(detail.answer.as_deref(), Some("ok from fake"));
    let (status, list) = get(&server, "/api/agent/runs");
    assert_eq!(status, StatusCode::OK);
    let list: forge_core::api::RunList = serde_json::from_value(list).unwrap();
    assert_eq!(list.runs.len(), 1);
    assert_eq!(list.runs[0].view.duration_ms, 812);
    let usage = list.runs[0].view.usage_counts().unwrap();
    assert_eq!((usage.input, usage.output), (10, 3));
    assert_eq!(usage.total_cost(), Some(0.003));
    let approval = list.runs[0].view.approval.clone();
    assert_eq!(approval.from, "web");
    assert!(approval.viewed_full_prompt);
}

#[test]
fn an_answer_changed_on_disk_is_refused_with_answer_hash_mismatch() {
    let dirs = Dirs::new();
    dirs.write(
        &format!("{FOLDER}/result.json"),
        &record("completed", "ok from fake"),
    );
    dirs.write(&format!("{FOLDER}/answer.txt"), "ok from fake!");
    let server = Server::start(&dirs, &[], &[]);
    let (status, body) = get(&server, &run_path());
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["code"], "answer_hash_mismatch");
    let message = body["error"].as_str().unwrap();
    assert!(
        message.starts_with(&format!(
            "answer_hash_mismatch: answer.txt of run {RUN} has SHA-256 "
        )),
        "{message}"
    );
    assert!(
        message.ends_with("it was changed after the run and is not shown"),
        "{message}"
    );
    assert!(!message.contains("ok from fake"));
}

#[test]
fn a_failed_run_has_no_answer_and_an_unknown_run_is_404() {
    let dirs = Dirs::new();
    dirs.write(&format!("{FOLDER}/result.json"), &record("failed", ""));
    dirs.write(&format!("{FOLDER}/answer.txt"), "");
    let server = Server::start(&dirs, &[], &[]);
    let (status, body) = get(&server, &run_path());
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["answer"], Value::Null);
    assert_eq!(body["record"]["status"], "failed");
    let (status, body) = get(&server, "/api/agent/runs/run%3Anope");
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(body["error"], "No run run:nope is kept in .pi/forge/runs.");
    let (status, _) = get(&server, "/api/agent/runs/..%2Fetc");
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[test]
fn the_event_stream_says_how_many_plans_wait() {
    let dirs = Dirs::new();
    let server = Server::start(&dirs, &[], &[]);
    let mut stream = Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
        .get(server.url("/api/events"))
        .header("cookie", server.cookie())
        .send()
        .unwrap();
    assert_eq!(stream.status(), StatusCode::OK);
    let started = Instant::now();
    let mut text = String::new();
    let mut buf = [0u8; 4096];
    let want =
        "event: agent-plans\ndata: {\"pending\":0,\"running\":0,\"started\":0,\"finished\":0}\n";
    while !text.contains(want) && started.elapsed() < Duration::from_secs(10) {
        let n = stream.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        text.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    assert!(text.contains(want), "{text}");
}

#[test]
fn a_run_shows_its_approved_prompt_and_transcript() {
    let dirs = Dirs::new();
    dirs.write(
        &format!("{FOLDER}/result.json"),
        &record("completed", "It says hello."),
    );
    dirs.write(&format!("{FOLDER}/answer.txt"), "It says hello.");
    dirs.write(
        &format!("{FOLDER}/plan.json"),
        &json!({"runId": RUN, "systemPrompt": "You review.",
                "messages": [{"role": "user", "content": "Read a.txt"}]})
        .to_string(),
    );
    let lines = [
        json!({"type": "message_end", "message": {"role": "user", "content": "pi-forge delegated task"}}),
        json!({"type": "message_end", "message": {"role": "assistant", "stopReason": "toolUse",
            "content": [{"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "a.txt"}}]}}),
        json!({"type": "message_end", "message": {"role": "toolResult", "toolName": "read", "isError": true,
            "content": [{"type": "text", "text": "ENOENT"}]}}),
        json!({"type": "message_end", "message": {"role": "assistant", "stopReason": "stop",
            "content": [{"type": "text", "text": "It says hello."}]}}),
    ];
    let transcript: String = lines.iter().map(|l| format!("{l}\n")).collect();
    dirs.write(&format!("{FOLDER}/transcript.jsonl"), &transcript);
    let server = Server::start(&dirs, &[], &[]);
    let (status, body) = get(&server, &run_path());
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body["prompt"],
        json!({"systemPrompt": "You review.", "messages": [{"role": "user", "content": "Read a.txt"}]})
    );
    assert_eq!(
        body["transcript"],
        json!([
            {"role": "assistant", "text": "", "toolCalls": [{"name": "read", "arguments": "{\"path\":\"a.txt\"}"}], "stopReason": "toolUse"},
            {"role": "toolResult", "text": "ENOENT", "toolName": "read", "isError": true},
            {"role": "assistant", "text": "It says hello.", "stopReason": "stop"},
        ])
    );
}

#[test]
fn cancelling_an_ended_run_is_409_and_an_unknown_run_404() {
    let dirs = Dirs::new();
    dirs.write(&format!("{FOLDER}/result.json"), &record("completed", "ok"));
    dirs.write(&format!("{FOLDER}/answer.txt"), "ok");
    let server = Server::start(&dirs, &[], &[]);
    let (status, body) = post(&server, &format!("{}/cancel", run_path()));
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["code"], "run_ended");
    assert_eq!(
        body["error"],
        format!("Run {RUN} already ended (completed); there is nothing to cancel.")
    );
    let (status, body) = post(&server, "/api/agent/runs/run%3Anope/cancel");
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(
        body["error"],
        "No run run:nope is in progress or kept in .pi/forge/runs."
    );
}
