//! `pi-forge payload list|show|diff|arm|clear`: the running editor's captures of the live Pi
//! session, from the terminal. Everything is read through the editor's own API
//! (`/api/payloads…`), so the terminal shows exactly what the browser shows.

use std::process::ExitCode;

use anyhow::{bail, Context as _, Result};
use forge_core::api::{ArmRequest, CaptureList};
use forge_core::diff::text::{diff_lines, hunks, LineTag};
use forge_core::diff::{extract_blocks, BlockStatus, TurnSummary};
use forge_core::json;
use forge_core::payload::{PayloadList, RunDiff};
use serde_json::Value;

use crate::cli::PayloadAction;
use crate::paths::WorkspacePaths;
use crate::ui::{self, ServerRecord};

pub fn run(action: PayloadAction) -> Result<ExitCode> {
    match action {
        PayloadAction::List { workspace, json } => {
            let editor = ui::running(&WorkspacePaths::from_args(&workspace)?)?;
            let body = call(&editor, "GET", "/api/payloads")?;
            if json {
                println!("{body}");
            } else {
                print_list(&parse::<CaptureList>(&body)?.list);
            }
        }
        PayloadAction::Show {
            turn,
            text,
            workspace,
        } => {
            let path = format!("/api/payloads/{}", segment(&turn)?);
            let editor = ui::running(&WorkspacePaths::from_args(&workspace)?)?;
            let body = call(&editor, "GET", &path)?;
            let payload: Value = json::parse_str(&body)
                .map_err(|e| anyhow::anyhow!("the editor sent invalid JSON: {e}"))?;
            if text {
                for block in extract_blocks(&payload) {
                    println!("── {} · {} · {} chars", block.role, block.key, block.chars);
                    println!("{}", block.text);
                }
            } else {
                print!("{}", json::to_pretty(&payload));
            }
        }
        PayloadAction::Diff {
            from,
            to,
            workspace,
            json,
        } => {
            let mut query = Vec::new();
            if let Some(from) = &from {
                query.push(format!("from={}", segment(from)?));
            }
            if let Some(to) = &to {
                query.push(format!("to={}", segment(to)?));
            }
            let path = if query.is_empty() {
                "/api/payloads/diff".to_string()
            } else {
                format!("/api/payloads/diff?{}", query.join("&"))
            };
            let editor = ui::running(&WorkspacePaths::from_args(&workspace)?)?;
            let body = call(&editor, "GET", &path)?;
            if json {
                println!("{body}");
            } else {
                print_diff(&parse(&body)?);
            }
        }
        PayloadAction::Arm { save, workspace } => {
            let editor = ui::running(&WorkspacePaths::from_args(&workspace)?)?;
            let body = serde_json::to_string(&ArmRequest {
                save,
                by: Some("cli".into()),
            })?;
            call_with(&editor, "POST", "/api/payloads/arm", &body)?;
            println!(
                "The next provider request will be captured{}.",
                if save {
                    " and saved to .pi/forge/payloads/"
                } else {
                    ""
                }
            );
        }
        PayloadAction::Clear { workspace } => {
            let editor = ui::running(&WorkspacePaths::from_args(&workspace)?)?;
            call(&editor, "DELETE", "/api/payloads")?;
            println!("Captures cleared.");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Only turn ids travel in paths: letters, digits and dashes.
fn segment(turn: &str) -> Result<&str> {
    if turn.is_empty() || !turn.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
        bail!("`{turn}` is not a turn id (turn ids look like turn-3; see `pi-forge payload list`)");
    }
    Ok(turn)
}

fn call(editor: &ServerRecord, method: &str, path: &str) -> Result<String> {
    call_with(editor, method, path, "")
}

fn call_with(editor: &ServerRecord, method: &str, path: &str, body: &str) -> Result<String> {
    let (status, body) = ui::request(editor.port, &editor.token, method, path, body)?;
    if (200..300).contains(&status) {
        return Ok(body);
    }
    let message = serde_json::from_str::<Value>(&body)
        .ok()
        .and_then(|v| v["error"].as_str().map(str::to_string))
        .unwrap_or_else(|| format!("HTTP {status}"));
    bail!("{message}")
}

fn parse<T: serde::de::DeserializeOwned>(body: &str) -> Result<T> {
    serde_json::from_str(body).context("the editor sent an answer this pi-forge cannot read")
}

fn hit(summary: &TurnSummary) -> String {
    summary
        .usage
        .as_ref()
        .map_or_else(|| "usage pending".to_string(), |u| u.hit_text())
}

fn print_list(list: &PayloadList) {
    if list.turns.is_empty() {
        println!(
            "No captured provider requests yet. Send a prompt in Pi; each request appears here."
        );
    }
    if !list.turns.is_empty() {
        println!(
            "{:<9} {:<24} {:<22} {:>10} {:>9} {:>8} {:>8}  cache hit",
            "turn", "captured", "model", "bytes", "~tokens", "input", "cached"
        );
    }
    for t in &list.turns {
        let model = format!(
            "{}/{}",
            t.provider.as_deref().unwrap_or("?"),
            t.model.as_deref().unwrap_or("?")
        );
        let (input, cached) = t
            .usage
            .as_ref()
            .map_or(("-".to_string(), "-".to_string()), |u| {
                (u.input.to_string(), u.cache_read.to_string())
            });
        println!(
            "{:<9} {:<24} {:<22} {:>10} {:>9} {:>8} {:>8}  {}",
            t.turn_id,
            t.captured_at,
            model,
            t.bytes,
            t.approx_tokens,
            input,
            cached,
            hit(t)
        );
    }
    if let Some(armed) = &list.armed {
        println!(
            "Armed at {} (by {}{}).",
            armed.armed_at,
            armed.by,
            if armed.save { ", save" } else { "" }
        );
    }
    if list.dropped > 0 {
        println!(
            "{} request(s) were not captured (the bridge's queue was full, or a request was too large).",
            list.dropped
        );
    }
}

fn print_diff(d: &RunDiff) {
    let from = d.from.as_ref().map_or("(nothing)", |f| f.turn_id.as_str());
    let s = &d.diff.summary;
    println!(
        "{from} → {}: {} added · {} removed · {} modified · {} same · estimated Δ ~{:+} tokens",
        d.to.turn_id, s.added, s.removed, s.modified, s.same, d.diff.delta_tokens
    );
    println!(
        "Unchanged prefix: {} block(s), ~{} tokens ({:.1}%){}",
        d.prefix_blocks,
        d.diff.prefix_tokens,
        d.diff.prefix_ratio * 100.0,
        d.prefix_boundary
            .as_ref()
            .map(|k| format!("; the cache can reuse everything before {k}"))
            .unwrap_or_default()
    );
    if let Some(u) = &d.to.usage {
        println!(
            "Provider: {} cached of {} prompt tokens (cache hit {})",
            u.cache_read,
            u.prompt_tokens,
            hit(&d.to)
        );
    }
    for b in &d.diff.blocks {
        let side = b.after.as_ref().or(b.before.as_ref());
        let key = side.map_or("", |x| x.key.as_str());
        println!(
            "{:<9} {key}  ~{:+} tokens",
            b.status.as_str(),
            b.token_delta
        );
        if b.status == BlockStatus::Modified {
            let old = b.before.as_ref().map_or("", |x| x.text.as_str());
            let new = b.after.as_ref().map_or("", |x| x.text.as_str());
            for hunk in hunks(&diff_lines(old, new), 2) {
                for line in hunk.lines {
                    let sign = match line.tag {
                        LineTag::Same => ' ',
                        LineTag::Removed => '-',
                        LineTag::Added => '+',
                    };
                    let text: String = line.spans.iter().map(|s| s.text.as_str()).collect();
                    println!("    {sign} {text}");
                }
            }
        }
    }
}
