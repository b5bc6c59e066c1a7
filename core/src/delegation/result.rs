//! pi-subagent result package (spec §E2) and failure taxonomy (§E3).
//!
//! The child commits its answer as `result.json`: canonical JSON plus `\n`, the answer split in
//! text blocks, each with its UTF-8 byte length, bare-hex SHA-256 and strict base64 data, plus the
//! aggregate length and SHA-256 of the concatenation. Retrieval verifies, in the spec's order,
//! before anything is returned; the answer text comes from the verified bytes.
//!
//! Decisions where the spec is silent (documented in docs/file-formats.md):
//! - `result.json` also carries `result_sha256`: the bare-hex SHA-256 of the canonical JSON of the
//!   package without that field. With the rule that the file's bytes must be exactly
//!   `canonical(package) + "\n"`, any change to any byte of `result.json` is rejected
//!   (`child_result_invalid`), not only changes to the answer. The digest is compared last, so
//!   the spec's checks keep their order and codes (an altered block hash is still
//!   `answer_hash_mismatch`).
//! - `seed_sha256` is checked against the SHA-256 of the `seed.json` bytes handed to verification.
//! - Blocks are cut at UTF-8 boundaries, at most [`MAX_BLOCK_BYTES`] each.

use serde_json::{Map, Value};

use crate::canonical::{canonical, sha256_hex};
use crate::json;

/// Package schema version.
pub const RESULT_SCHEMA_VERSION: u64 = 1;
/// Largest answer delivered inline (48 KiB).
pub const MAX_INLINE_BYTES: usize = 49_152;
/// Largest block [`split_blocks`] produces.
pub const MAX_BLOCK_BYTES: usize = 16_384;
/// Bytes of the excerpt that accompanies an artifact reference.
pub const EXCERPT_BYTES: usize = 2_048;

/// The E3 failure codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FailureCode {
    // Admission (no child).
    DelegateHookContractUnsupported,
    DelegateIsolationUnsupported,
    RouteUnresolved,
    RouteCapacityUnknown,
    SeedProjectionFailed,
    SeedBudgetExceeded,
    SeedPersistFailed,
    InvalidArguments,
    // Launch / execution.
    ChildSpawnFailed,
    ChildStartupFailed,
    ChildTimeout,
    ChildCancelled,
    ChildTurnLimit,
    ChildToolCallLimit,
    ChildExitedWithoutCommit,
    // Budget.
    ProviderContextBudgetExhausted,
    AggregateToolOutputCap,
    ChildModelOutputLimit,
    ChildCaptureLimit,
    // Integrity.
    ChildResultInvalid,
    ChildResultEncodingInvalid,
    RouteAttestationMissing,
    RouteMismatch,
    SeedHashMismatch,
    AnswerHashMismatch,
    ArtifactSpillFailed,
    ArtifactReadFailed,
    ArtifactError,
    // Retrieval.
    ResultNotReady,
    ResultUnavailable,
    ResultTooLargeForInline,
    TaskUnknown,
}

/// The failure class a code belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureClass {
    Admission,
    Execution,
    Budget,
    Integrity,
    Retrieval,
}

impl FailureCode {
    pub const ALL: [FailureCode; 32] = {
        use FailureCode::*;
        [
            DelegateHookContractUnsupported,
            DelegateIsolationUnsupported,
            RouteUnresolved,
            RouteCapacityUnknown,
            SeedProjectionFailed,
            SeedBudgetExceeded,
            SeedPersistFailed,
            InvalidArguments,
            ChildSpawnFailed,
            ChildStartupFailed,
            ChildTimeout,
            ChildCancelled,
            ChildTurnLimit,
            ChildToolCallLimit,
            ChildExitedWithoutCommit,
            ProviderContextBudgetExhausted,
            AggregateToolOutputCap,
            ChildModelOutputLimit,
            ChildCaptureLimit,
            ChildResultInvalid,
            ChildResultEncodingInvalid,
            RouteAttestationMissing,
            RouteMismatch,
            SeedHashMismatch,
            AnswerHashMismatch,
            ArtifactSpillFailed,
            ArtifactReadFailed,
            ArtifactError,
            ResultNotReady,
            ResultUnavailable,
            ResultTooLargeForInline,
            TaskUnknown,
        ]
    };

    pub fn as_str(self) -> &'static str {
        use FailureCode::*;
        match self {
            DelegateHookContractUnsupported => "delegate_hook_contract_unsupported",
            DelegateIsolationUnsupported => "delegate_isolation_unsupported",
            RouteUnresolved => "route_unresolved",
            RouteCapacityUnknown => "route_capacity_unknown",
            SeedProjectionFailed => "seed_projection_failed",
            SeedBudgetExceeded => "seed_budget_exceeded",
            SeedPersistFailed => "seed_persist_failed",
            InvalidArguments => "invalid_arguments",
            ChildSpawnFailed => "child_spawn_failed",
            ChildStartupFailed => "child_startup_failed",
            ChildTimeout => "child_timeout",
            ChildCancelled => "child_cancelled",
            ChildTurnLimit => "child_turn_limit",
            ChildToolCallLimit => "child_tool_call_limit",
            ChildExitedWithoutCommit => "child_exited_without_commit",
            ProviderContextBudgetExhausted => "provider_context_budget_exhausted",
            AggregateToolOutputCap => "aggregate_tool_output_cap",
            ChildModelOutputLimit => "child_model_output_limit",
            ChildCaptureLimit => "child_capture_limit",
            ChildResultInvalid => "child_result_invalid",
            ChildResultEncodingInvalid => "child_result_encoding_invalid",
            RouteAttestationMissing => "route_attestation_missing",
            RouteMismatch => "route_mismatch",
            SeedHashMismatch => "seed_hash_mismatch",
            AnswerHashMismatch => "answer_hash_mismatch",
            ArtifactSpillFailed => "artifact_spill_failed",
            ArtifactReadFailed => "artifact_read_failed",
            ArtifactError => "artifact_error",
            ResultNotReady => "result_not_ready",
            ResultUnavailable => "result_unavailable",
            ResultTooLargeForInline => "result_too_large_for_inline",
            TaskUnknown => "task_unknown",
        }
    }

    pub fn parse(text: &str) -> Option<FailureCode> {
        FailureCode::ALL.into_iter().find(|c| c.as_str() == text)
    }

    pub fn class(self) -> FailureClass {
        let index = FailureCode::ALL
            .iter()
            .position(|c| *c == self)
            .unwrap_or_default();
        match index {
            0..=7 => FailureClass::Admission,
            8..=14 => FailureClass::Execution,
            15..=18 => FailureClass::Budget,
            19..=27 => FailureClass::Integrity,
            _ => FailureClass::Retrieval,
        }
    }

    /// Admission failures never create a child.
    pub fn child_created(self) -> bool {
        self.class() != FailureClass::Admission
    }
}

impl std::fmt::Display for FailureCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A typed failure: code, message, whether a child was created, artifact dir when known,
/// preserved evidence and remediation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    pub code: FailureCode,
    pub message: String,
    pub child_created: bool,
    pub artifact_dir: Option<String>,
    pub evidence: Vec<String>,
    pub remediation: Vec<String>,
}

impl Failure {
    pub fn new(code: FailureCode, message: impl Into<String>) -> Self {
        Failure {
            code,
            message: message.into(),
            child_created: code.child_created(),
            artifact_dir: None,
            evidence: Vec::new(),
            remediation: Vec::new(),
        }
    }
}

// ---- base64 (standard alphabet, padded, strict) ----

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard padded base64.
pub fn base64_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        out.push(B64[(n >> 18) as usize & 63] as char);
        out.push(B64[(n >> 12) as usize & 63] as char);
        out.push(if chunk.len() > 1 {
            B64[(n >> 6) as usize & 63] as char
        } else {
            '='
        });
        out.push(if chunk.len() > 2 {
            B64[n as usize & 63] as char
        } else {
            '='
        });
    }
    out
}

/// Strict decode: the re-encoding of the result must equal the input (no missing padding, no
/// white space, no non-zero trailing bits).
pub fn base64_decode_strict(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(4) {
        return None;
    }
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    for chunk in text.as_bytes().chunks(4) {
        let mut n = 0u32;
        let mut pad = 0;
        for (i, &c) in chunk.iter().enumerate() {
            let v = if c == b'=' && i >= 2 {
                pad += 1;
                0
            } else if pad > 0 {
                return None;
            } else {
                B64.iter().position(|&a| a == c)? as u32
            };
            n = (n << 6) | v;
        }
        out.push((n >> 16) as u8);
        if pad < 2 {
            out.push((n >> 8) as u8);
        }
        if pad < 1 {
            out.push(n as u8);
        }
    }
    (base64_encode(&out) == text).then_some(out)
}

// ---- answer ----

/// One answer block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AnswerBlock {
    pub byte_length: usize,
    pub sha256: String,
    pub data_base64: String,
}

impl AnswerBlock {
    pub fn from_text(text: &str) -> Self {
        AnswerBlock {
            byte_length: text.len(),
            sha256: sha256_hex(text.as_bytes()),
            data_base64: base64_encode(text.as_bytes()),
        }
    }
    pub fn to_value(&self) -> Value {
        json::object([
            ("kind", Some(Value::from("text"))),
            ("byte_length", Some(Value::from(self.byte_length))),
            ("sha256", Some(Value::from(self.sha256.clone()))),
            ("data_base64", Some(Value::from(self.data_base64.clone()))),
        ])
    }
}

/// `answer{encoding:"utf-8", byte_length, sha256, blocks}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    pub byte_length: usize,
    pub sha256: String,
    pub blocks: Vec<AnswerBlock>,
}

impl Answer {
    /// The answer made of `blocks` in order; the aggregate covers their concatenation.
    pub fn from_blocks(blocks: &[&str]) -> Self {
        let whole: String = blocks.concat();
        Answer {
            byte_length: whole.len(),
            sha256: sha256_hex(whole.as_bytes()),
            blocks: blocks.iter().map(|b| AnswerBlock::from_text(b)).collect(),
        }
    }
    /// The answer of `text`, cut by [`split_blocks`].
    pub fn from_text(text: &str) -> Self {
        Self::from_blocks(&split_blocks(text, MAX_BLOCK_BYTES))
    }
    pub fn to_value(&self) -> Value {
        json::object([
            ("encoding", Some(Value::from("utf-8"))),
            ("byte_length", Some(Value::from(self.byte_length))),
            ("sha256", Some(Value::from(self.sha256.clone()))),
            (
                "blocks",
                Some(Value::Array(
                    self.blocks.iter().map(AnswerBlock::to_value).collect(),
                )),
            ),
        ])
    }
}

/// Cuts `text` into blocks of at most `max_bytes` bytes (at least one character each), at UTF-8
/// character boundaries. An empty text gives no blocks.
pub fn split_blocks(text: &str, max_bytes: usize) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let mut cut = max_bytes.min(rest.len());
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        if cut == 0 {
            cut = rest.chars().next().map_or(rest.len(), char::len_utf8);
        }
        out.push(&rest[..cut]);
        rest = &rest[cut..];
    }
    out
}

// ---- package ----

/// `route {provider, model}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    pub provider: String,
    pub model: String,
}

impl Route {
    pub fn new(provider: impl Into<String>, model: impl Into<String>) -> Self {
        Route {
            provider: provider.into(),
            model: model.into(),
        }
    }
    fn to_value(&self) -> Value {
        json::object([
            ("provider", Some(Value::from(self.provider.clone()))),
            ("model", Some(Value::from(self.model.clone()))),
        ])
    }
}

/// One route attestation `{provider, model, stop_reason}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attestation {
    pub route: Route,
    pub stop_reason: String,
}

/// The child-committed `result.json`.
#[derive(Clone, Debug, PartialEq)]
pub struct ResultPackage {
    pub task_id: String,
    pub launch_nonce: String,
    pub seed_sha256: String,
    pub directive_sha256: String,
    pub route: Route,
    pub route_attestations: Vec<Attestation>,
    pub stop_reason: String,
    pub turns: u64,
    pub tool_calls: u64,
    /// `{status:"observed", usage{…}}` or `{status:"unavailable", reason}`; never zeros for missing.
    pub usage: Value,
    pub answer: Answer,
    pub spilled_artifacts: Vec<String>,
}

impl ResultPackage {
    /// The package object without `result_sha256`.
    fn body(&self) -> Map<String, Value> {
        let attestations = self
            .route_attestations
            .iter()
            .map(|a| {
                json::object([
                    ("provider", Some(Value::from(a.route.provider.clone()))),
                    ("model", Some(Value::from(a.route.model.clone()))),
                    ("stop_reason", Some(Value::from(a.stop_reason.clone()))),
                ])
            })
            .collect();
        let value = json::object([
            ("schema_version", Some(Value::from(RESULT_SCHEMA_VERSION))),
            ("task_id", Some(Value::from(self.task_id.clone()))),
            ("launch_nonce", Some(Value::from(self.launch_nonce.clone()))),
            ("seed_sha256", Some(Value::from(self.seed_sha256.clone()))),
            (
                "directive_sha256",
                Some(Value::from(self.directive_sha256.clone())),
            ),
            ("route", Some(self.route.to_value())),
            ("route_attestations", Some(Value::Array(attestations))),
            ("stop_reason", Some(Value::from(self.stop_reason.clone()))),
            ("turns", Some(Value::from(self.turns))),
            ("tool_calls", Some(Value::from(self.tool_calls))),
            ("usage", Some(self.usage.clone())),
            ("answer", Some(self.answer.to_value())),
            (
                "spilled_artifacts",
                Some(Value::Array(
                    self.spilled_artifacts
                        .iter()
                        .cloned()
                        .map(Value::String)
                        .collect(),
                )),
            ),
        ]);
        match value {
            Value::Object(map) => map,
            _ => Map::new(),
        }
    }

    /// The full package object, `result_sha256` included.
    pub fn to_value(&self) -> Value {
        let mut body = self.body();
        let digest = sha256_hex(canonical(&Value::Object(body.clone())).as_bytes());
        body.insert("result_sha256".into(), Value::String(digest));
        Value::Object(body)
    }

    /// The exact bytes of `result.json`: canonical JSON + `\n`.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut text = canonical(&self.to_value());
        text.push('\n');
        text.into_bytes()
    }
}

/// What the child knows when it tries to commit.
#[derive(Clone, Debug, PartialEq)]
pub struct CommitInput<'a> {
    /// Final stop reason of the last turn (`stop`, `length`, …).
    pub stop_reason: &'a str,
    /// The final answer text; `None` when the child produced none.
    pub text: Option<&'a str>,
    /// An earlier degraded condition (latched); it forbids a success commit.
    pub degraded: Option<FailureCode>,
}

/// The child's commit rule: `Ok(answer)` only for a clean `stop` with non-blank text.
pub fn commit_answer(input: &CommitInput) -> Result<Answer, FailureCode> {
    if let Some(code) = input.degraded {
        return Err(code);
    }
    if input.stop_reason == "length" {
        return Err(FailureCode::ChildModelOutputLimit);
    }
    let text = match input.text {
        None | Some("") => return Err(FailureCode::ChildExitedWithoutCommit),
        Some(text) => text,
    };
    if input.stop_reason != "stop" {
        return Err(FailureCode::ChildExitedWithoutCommit);
    }
    if crate::js::js_trim(text).is_empty() {
        return Err(FailureCode::ChildResultInvalid);
    }
    Ok(Answer::from_text(text))
}

// ---- verification ----

/// What the parent pinned at launch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expected<'a> {
    pub task_id: &'a str,
    pub launch_nonce: &'a str,
    pub route: &'a Route,
}

/// The package files verification reads: `seed.json` as persisted and `result.json` if the child
/// committed one.
#[derive(Clone, Copy, Debug)]
pub struct PackageFiles<'a> {
    pub seed_json: &'a [u8],
    pub result_json: Option<&'a [u8]>,
}

/// A verified answer: the text decoded from the verified buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifiedAnswer {
    pub text: String,
    pub byte_length: usize,
    pub sha256: String,
}

fn fail(code: FailureCode, message: impl Into<String>) -> Failure {
    Failure::new(code, message)
}

fn invalid(message: impl Into<String>) -> Failure {
    fail(FailureCode::ChildResultInvalid, message)
}

fn str_field<'a>(map: &'a Map<String, Value>, key: &str) -> Result<&'a str, Failure> {
    map.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| invalid(format!("result.json: {key} must be a string.")))
}

fn len_field(map: &Map<String, Value>, key: &str, at: &str) -> Result<usize, Failure> {
    map.get(key)
        .and_then(super::non_neg_int)
        .map(|n| n as usize)
        .ok_or_else(|| {
            invalid(format!(
                "result.json: {at}{key} must be a non-negative integer."
            ))
        })
}

const PACKAGE_KEYS: [&str; 14] = [
    "schema_version",
    "task_id",
    "launch_nonce",
    "seed_sha256",
    "directive_sha256",
    "route",
    "route_attestations",
    "stop_reason",
    "turns",
    "tool_calls",
    "usage",
    "answer",
    "spilled_artifacts",
    "result_sha256",
];

/// Verifies a committed package in the spec's order and returns the answer decoded from the
/// verified bytes. Nothing is returned unless every check passes.
pub fn verify_package(files: PackageFiles, expected: &Expected) -> Result<VerifiedAnswer, Failure> {
    use FailureCode::*;
    let Some(bytes) = files.result_json else {
        return Err(fail(
            ChildExitedWithoutCommit,
            "The child exited without committing result.json.",
        ));
    };
    // 1. JSON / object / schema.
    let value = json::parse_bytes(bytes)
        .map_err(|e| invalid(format!("result.json is not valid JSON: {e}.")))?;
    let Some(map) = value.as_object() else {
        return Err(invalid("result.json must contain a JSON object."));
    };
    let mut expected_bytes = canonical(&value).into_bytes();
    expected_bytes.push(b'\n');
    if expected_bytes != bytes {
        return Err(invalid(
            "result.json is not canonical JSON followed by a newline.",
        ));
    }
    if let Some(key) = super::unknown_keys(map, &PACKAGE_KEYS).first() {
        return Err(invalid(format!("result.json has an unknown key: {key}.")));
    }
    if map.get("schema_version").and_then(Value::as_u64) != Some(RESULT_SCHEMA_VERSION) {
        return Err(invalid("result.json: schema_version must be 1."));
    }
    let digest = str_field(map, "result_sha256")?;
    for key in ["directive_sha256", "stop_reason"] {
        str_field(map, key)?;
    }
    for key in ["turns", "tool_calls"] {
        len_field(map, key, "")?;
    }
    let usage = map.get("usage").unwrap_or(&Value::Null);
    let usage_ok = match usage.get("status").and_then(Value::as_str) {
        Some("observed") => usage.get("usage").is_some_and(Value::is_object),
        Some("unavailable") => usage.get("reason").is_some_and(Value::is_string),
        _ => false,
    };
    if !usage_ok {
        return Err(invalid(
            "result.json: usage must be {status:\"observed\", usage} or {status:\"unavailable\", reason}.",
        ));
    }
    if !map.get("spilled_artifacts").is_some_and(Value::is_array) {
        return Err(invalid("result.json: spilled_artifacts must be an array."));
    }
    let route = map
        .get("route")
        .and_then(Value::as_object)
        .ok_or_else(|| invalid("result.json: route must be an object."))?;
    let attestations = map
        .get("route_attestations")
        .and_then(Value::as_array)
        .ok_or_else(|| invalid("result.json: route_attestations must be an array."))?;
    let answer = map
        .get("answer")
        .and_then(Value::as_object)
        .ok_or_else(|| invalid("result.json: answer must be an object."))?;
    if answer.get("encoding").and_then(Value::as_str) != Some("utf-8") {
        return Err(invalid("result.json: answer.encoding must be \"utf-8\"."));
    }
    let blocks = answer
        .get("blocks")
        .and_then(Value::as_array)
        .ok_or_else(|| invalid("result.json: answer.blocks must be an array."))?;
    // 2. Task id + launch nonce.
    if str_field(map, "task_id")? != expected.task_id
        || str_field(map, "launch_nonce")? != expected.launch_nonce
    {
        return Err(invalid(
            "result.json belongs to another task or launch (task id or launch nonce differs).",
        ));
    }
    // 3. Seed hash.
    if str_field(map, "seed_sha256")? != sha256_hex(files.seed_json) {
        return Err(fail(
            SeedHashMismatch,
            "seed_sha256 does not match the persisted seed.json.",
        ));
    }
    // 4. Route and every attestation equal the pinned route.
    let same_route = |m: &Map<String, Value>| {
        m.get("provider").and_then(Value::as_str) == Some(expected.route.provider.as_str())
            && m.get("model").and_then(Value::as_str) == Some(expected.route.model.as_str())
    };
    if !same_route(route) {
        return Err(fail(
            RouteMismatch,
            "The package route differs from the pinned route.",
        ));
    }
    if attestations.is_empty() {
        return Err(fail(
            RouteAttestationMissing,
            "The package carries no route attestation.",
        ));
    }
    for attestation in attestations {
        if !attestation.as_object().is_some_and(same_route) {
            return Err(fail(
                RouteMismatch,
                "A route attestation differs from the pinned route.",
            ));
        }
    }
    // 5. Per block.
    let mut whole = Vec::new();
    for (i, block) in blocks.iter().enumerate() {
        let block = block.as_object().ok_or_else(|| {
            invalid(format!(
                "result.json: answer.blocks[{i}] must be an object."
            ))
        })?;
        if block.get("kind").and_then(Value::as_str) != Some("text") {
            return Err(invalid(format!(
                "result.json: answer.blocks[{i}].kind must be \"text\"."
            )));
        }
        let data = block
            .get("data_base64")
            .and_then(Value::as_str)
            .and_then(base64_decode_strict)
            .ok_or_else(|| {
                invalid(format!(
                    "result.json: answer.blocks[{i}].data_base64 is not strict base64."
                ))
            })?;
        let length = len_field(block, "byte_length", &format!("answer.blocks[{i}]."))?;
        let sha = block.get("sha256").and_then(Value::as_str);
        if data.len() != length || sha != Some(sha256_hex(&data).as_str()) {
            return Err(fail(
                AnswerHashMismatch,
                format!("Answer block {i} does not match its byte length or SHA-256."),
            ));
        }
        whole.extend_from_slice(&data);
    }
    // 6. Aggregate.
    let length = len_field(answer, "byte_length", "answer.")?;
    let sha256 = sha256_hex(&whole);
    if whole.len() != length || answer.get("sha256").and_then(Value::as_str) != Some(&sha256) {
        return Err(fail(
            AnswerHashMismatch,
            "The answer does not match its aggregate byte length or SHA-256.",
        ));
    }
    // 7. Strict UTF-8.
    let text = String::from_utf8(whole).map_err(|_| {
        fail(
            ChildResultEncodingInvalid,
            "The answer bytes are not valid UTF-8.",
        )
    })?;
    // 8. The package digest (ours): every other byte of result.json is covered too.
    let mut body = map.clone();
    body.remove("result_sha256");
    if sha256_hex(canonical(&Value::Object(body)).as_bytes()) != digest {
        return Err(invalid(
            "result.json: result_sha256 does not match the package.",
        ));
    }
    Ok(VerifiedAnswer {
        byte_length: length,
        sha256,
        text,
    })
}

// ---- delivery ----

/// `delivery` of `subagent_result`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivery {
    Inline,
    Artifact,
}

impl Delivery {
    pub fn as_str(self) -> &'static str {
        match self {
            Delivery::Inline => "inline",
            Delivery::Artifact => "artifact",
        }
    }
}

/// How a verified answer is handed back: never silently truncated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Delivered {
    Inline {
        text: String,
    },
    Artifact {
        /// Package-relative path of the committed answer (`result.json`).
        path: String,
        byte_length: usize,
        sha256: String,
        /// The first bytes of the answer (≤ [`EXCERPT_BYTES`], cut at a character boundary),
        /// labelled as an excerpt by the caller.
        excerpt: String,
    },
}

/// Chooses the delivery: ≤ 48 KiB inline by default, larger → artifact reference plus excerpt; an
/// explicit `inline` request on an oversized answer → `result_too_large_for_inline`.
pub fn deliver(answer: &VerifiedAnswer, requested: Option<Delivery>) -> Result<Delivered, Failure> {
    let fits = answer.byte_length <= MAX_INLINE_BYTES;
    match (requested, fits) {
        (Some(Delivery::Inline), false) => Err(fail(
            FailureCode::ResultTooLargeForInline,
            format!(
                "The answer is {} bytes; inline delivery is limited to {MAX_INLINE_BYTES} bytes. Ask for delivery \"artifact\".",
                answer.byte_length
            ),
        )),
        (None, true) | (Some(Delivery::Inline), true) => Ok(Delivered::Inline {
            text: answer.text.clone(),
        }),
        _ => {
            let excerpt = split_blocks(&answer.text, EXCERPT_BYTES)
                .first()
                .copied()
                .unwrap_or("")
                .to_string();
            Ok(Delivered::Artifact {
                path: "result.json".into(),
                byte_length: answer.byte_length,
                sha256: answer.sha256.clone(),
                excerpt,
            })
        }
    }
}
