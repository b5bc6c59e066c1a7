//! The `/api/payloads*` bodies: the capture list, a saved capture and the arm request
//! (re-exported as `forge_core::api::*`). The run diff is [`crate::payload::RunDiff`] and a
//! capture (`GET /api/payloads/:turn`) is the stored request itself, Pi's data.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::payload::PayloadList;
pub use crate::payload::RunDiff;

flattened_view! {
    /// `GET /api/payloads`, and the answer of `DELETE /api/payloads` and
    /// `POST /api/payloads/arm`: the live session's captures and whether Pi is connected and
    /// the project trusted (saving needs it).
    #[derive(Clone, Debug, PartialEq)]
    #[serde(rename_all = "camelCase")]
    pub struct CaptureList {
        pub list: PayloadList,
        pub connected: bool,
        pub trusted: bool,
    }
}

/// The body of `POST /api/payloads/arm`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ArmRequest {
    /// Save the capture under `.pi/forge/payloads/` too (trusted projects only).
    #[serde(default)]
    pub save: bool,
    /// Who arms: `web` (the default), `pi` or `cli`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
}

/// `POST /api/payloads/:turn/save` (201): the file written under `.pi/forge/payloads/`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SavedCapture {
    pub turn_id: String,
    /// The file's name.
    pub name: String,
    /// Its path as the store shows it.
    pub path: String,
}
