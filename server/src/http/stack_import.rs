//! `POST /api/stacks/import`: a pi-forge prompt stack file or a SillyTavern chat-completion
//! preset, detected, converted (SillyTavern), validated, and created through the write service —
//! never over an existing id. `dryRun` answers the stack and the migration report and writes
//! nothing, so the editor can show the report first.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::post;
use axum::Router;
use forge_core::api::{ImportPreview, Imported};
use forge_core::diag::{self, Level};
use forge_core::id::Selector;
use forge_core::id::{fallback_id, is_valid_id};
use forge_core::import::sillytavern::{self, ImportError, ImportOptions};
use forge_core::json;
use forge_core::runtime::Clock;
use forge_core::workspace::service::{self, Kind};
use serde_json::{json, Map, Value};

use super::error::{ApiError, ApiResult};
use super::extract::{ok_typed, JsonBody};
use super::stacks::{flag, written_view};
use super::write::ok_view_response;
use super::write::{mutate, Outcome};
use super::AppState;

const UNKNOWN_FORMAT: &str =
    "This file is neither a pi-forge prompt stack nor a SillyTavern chat-completion preset.";

/// The id a SillyTavern import gets without `id` or a usable file name.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Native,
    SillyTavern,
}

impl Format {
    fn name(self) -> &'static str {
        match self {
            Format::Native => "native",
            Format::SillyTavern => "sillytavern",
        }
    }
}

/// The format `auto` picks: a `type: "pi-forge.prompt-stack"` or an `items` array is native; a
/// `prompts` array or a `prompt_order` is SillyTavern.
fn detect(value: &Value) -> Option<Format> {
    let object = value.as_object()?;
    if object.get("type").and_then(Value::as_str) == Some("pi-forge.prompt-stack") {
        return Some(Format::Native);
    }
    if object.get("prompts").is_some_and(Value::is_array) || object.contains_key("prompt_order") {
        return Some(Format::SillyTavern);
    }
    if object.get("items").is_some_and(Value::is_array) {
        return Some(Format::Native);
    }
    None
}

fn unknown_format() -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, "unknown_format", UNKNOWN_FORMAT).with_field("content")
}

/// `content`: the uploaded JSON value, or a string holding the file's text.
fn content(body: &Map<String, Value>) -> ApiResult<Value> {
    match body.get("content") {
        None | Some(Value::Null) => Err(ApiError::bad_request(
            "content is required: the imported file's JSON (or its text).",
        )
        .with_field("content")),
        Some(Value::String(text)) => json::parse_bytes(text.as_bytes()).map_err(|e| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_json",
                format!("The imported file is not valid JSON: {e}"),
            )
            .with_field("content")
        }),
        Some(other) => Ok(other.clone()),
    }
}

fn format(body: &Map<String, Value>, content: &Value) -> ApiResult<Format> {
    match body.get("format") {
        None | Some(Value::Null) => detect(content).ok_or_else(unknown_format),
        Some(Value::String(name)) => match name.as_str() {
            "auto" => detect(content).ok_or_else(unknown_format),
            "native" => Ok(Format::Native),
            "sillytavern" => Ok(Format::SillyTavern),
            _ => Err(bad_format()),
        },
        Some(_) => Err(bad_format()),
    }
}

fn bad_format() -> ApiError {
    ApiError::bad_request("format must be \"auto\", \"native\" or \"sillytavern\".")
        .with_field("format")
}

fn optional_string(body: &Map<String, Value>, key: &str) -> ApiResult<Option<String>> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.trim().to_string())),
        Some(_) => Err(ApiError::bad_request(format!("{key} must be a string.")).with_field(key)),
    }
}

/// `characterId`: a number or a string, compared as text by the converter.
fn character_id(body: &Map<String, Value>) -> ApiResult<Option<String>> {
    match body.get("characterId") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) if text.trim().is_empty() => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.trim().to_string())),
        Some(Value::Number(n)) => Ok(Some(n.to_string())),
        Some(_) => Err(
            ApiError::bad_request("characterId must be a number or a string.")
                .with_field("characterId"),
        ),
    }
}

fn invalid_id(id: &str) -> ApiError {
    ApiError::bad_request(format!(
        "Invalid stack id: {id}. Ids must start with a letter or number and contain only \
         letters, numbers, dots, underscores, and hyphens."
    ))
    .with_field("id")
}

fn import_error(error: ImportError) -> ApiError {
    let message = error.to_string();
    match error {
        ImportError::MultipleCharacters(ids) => {
            ApiError::new(StatusCode::BAD_REQUEST, "character_id_required", message)
                .with_field("characterId")
                .with_details(json!({ "characterIds": ids }))
        }
        ImportError::UnknownCharacter { available, .. } => {
            ApiError::new(StatusCode::BAD_REQUEST, "unknown_character_id", message)
                .with_field("characterId")
                .with_details(json!({ "characterIds": available }))
        }
        ImportError::InvalidId(_) => ApiError::bad_request(message).with_field("id"),
        ImportError::NotObject | ImportError::NoPrompts => {
            ApiError::new(StatusCode::BAD_REQUEST, "invalid_preset", message).with_field("content")
        }
    }
}

fn now_iso() -> String {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0);
    Clock::utc(now_ms).iso_utc()
}

/// The stack to write and the report (`null` for a native import).
fn convert(
    format: Format,
    content: Value,
    id: Option<String>,
    character: Option<String>,
    file_name: Option<String>,
) -> ApiResult<(Value, Value)> {
    match format {
        Format::SillyTavern => {
            let id = id.unwrap_or_else(|| {
                sillytavern::default_stack_id(file_name.as_deref().unwrap_or(""))
            });
            let options = ImportOptions {
                id,
                character_id: character,
                source_file: file_name,
                converted_at: Some(now_iso()),
            };
            let imported = sillytavern::convert(&content, &options).map_err(import_error)?;
            Ok((imported.stack, imported.report.to_json()))
        }
        Format::Native => {
            let Value::Object(mut stack) = content else {
                return Err(ApiError::bad_request(format!(
                    "A pi-forge prompt stack must be a JSON object, not {}.",
                    json::type_name(&content)
                ))
                .with_field("content"));
            };
            match id {
                Some(id) => {
                    stack.insert("id".into(), Value::String(id));
                }
                None => {
                    let has_id = stack
                        .get("id")
                        .and_then(Value::as_str)
                        .is_some_and(|s| !s.trim().is_empty());
                    if !has_id {
                        if let Some(name) = file_name.as_deref() {
                            let derived = sillytavern::slugify(fallback_id(name), "");
                            if !derived.is_empty() {
                                stack.insert("id".into(), Value::String(derived));
                            }
                        }
                    }
                }
            }
            Ok((Value::Object(stack), Value::Null))
        }
    }
}

pub fn routes() -> Router<AppState> {
    Router::new().route("/api/stacks/import", post(import))
}

/// `POST /api/stacks/import` `{content, format?, characterId?, id?, scope?, dryRun?, fileName?}`.
async fn import(State(state): State<AppState>, body: JsonBody) -> ApiResult<Response> {
    let body = body.object()?;
    let content = content(&body)?;
    let format = format(&body, &content)?;
    let scope = service::parse_scope(body.get("scope"))?;
    let dry_run = flag(&body, "dryRun")?;
    let id = optional_string(&body, "id")?.filter(|s| !s.is_empty());
    if let Some(id) = &id {
        if !is_valid_id(id) {
            return Err(invalid_id(id));
        }
    }
    let file_name = optional_string(&body, "fileName")?.filter(|s| !s.is_empty());
    let character = character_id(&body)?;
    let (stack, report) = convert(format, content, id, character, file_name)?;

    if dry_run {
        let snapshot = state.ws.snapshot();
        let stack_id = stack.get("id").and_then(Value::as_str).unwrap_or_default();
        let existing = snapshot
            .stacks
            .iter()
            .find(|e| e.key.scope == scope && e.key.id == stack_id);
        // A clash with an existing id is answered as `exists` (the editor then asks for another
        // id), so the draft is validated as if it replaced that stack.
        let diagnostics = match existing {
            Some(entry) => service::validate_update(
                Kind::Stack,
                &Selector::Scoped(entry.key.clone()),
                &stack,
                &snapshot,
            )?,
            None => service::validate(Kind::Stack, scope, &stack, &snapshot),
        };
        if let Some(first) = diagnostics.iter().find(|d| d.level == Level::Error) {
            let mut error = ApiError::bad_request(first.message.clone())
                .with_details(json!({ "diagnostics": diagnostics }));
            if let Some(field) = &first.field {
                error = error.with_field(field.clone());
            }
            return Err(error);
        }
        let (errors, warnings, _) = diag::counts(&diagnostics);
        return Ok(ok_typed(&ImportPreview {
            ok: true,
            dry_run: true,
            format: format.name().to_string(),
            id: stack_id.to_string(),
            scope: scope.as_str().to_string(),
            exists: existing.is_some(),
            existing_path: existing.map(|e| e.path.to_string()),
            stack: stack.clone(),
            report,
            diagnostics,
            errors,
            warnings,
        }));
    }

    let (outcome, snapshot) = mutate(&state, move |store, snapshot| {
        service::create(store, snapshot, Kind::Stack, scope, &stack, false).map(Outcome::from)
    })
    .await?;
    let (view, revision) = written_view(&state, &outcome, &snapshot)?;
    let imported = Imported {
        view,
        format: format.name().to_string(),
        report,
    };
    Ok(ok_view_response(StatusCode::CREATED, imported, &revision))
}
