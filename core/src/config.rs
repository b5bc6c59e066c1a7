//! `.pi/forge/config.json`: project settings of the editor (and legacy subagent settings).
//!
//! Recognised keys: `webEditor.port` (integer 1–65535), `webEditor.locale` (`auto`, `en`,
//! `zh-CN`), the legacy top-level `webEditorPort`, and `subagents` (kept for the delegation
//! feature). Every other key is preserved untouched in `raw`: pi-forge never rewrites what it
//! does not understand. Problems are warnings: a bad config never stops the editor, it only falls
//! back to defaults.

use crate::diag::Diagnostic;
use crate::json;
use serde_json::Value;

/// Largest config file pi-forge reads.
pub const MAX_CONFIG_BYTES: u64 = 1_048_576;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Locale {
    Auto,
    En,
    ZhCn,
}

impl Locale {
    pub fn parse(text: &str) -> Option<Locale> {
        match text {
            "auto" => Some(Locale::Auto),
            "en" => Some(Locale::En),
            "zh-CN" => Some(Locale::ZhCn),
            _ => None,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Locale::Auto => "auto",
            Locale::En => "en",
            Locale::ZhCn => "zh-CN",
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ForgeConfig {
    /// Preferred editor port (`webEditor.port`, else legacy `webEditorPort`).
    pub web_editor_port: Option<u16>,
    pub locale: Option<Locale>,
    /// The parsed file, unknown keys included; `None` when the file is absent or unreadable.
    pub raw: Option<Value>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ParsedConfig {
    pub config: ForgeConfig,
    pub diagnostics: Vec<Diagnostic>,
}

fn port_value(value: &Value, field: &str, diagnostics: &mut Vec<Diagnostic>) -> Option<u16> {
    let port = value
        .as_f64()
        .filter(|n| n.fract() == 0.0 && (1.0..=65535.0).contains(n))
        .map(|n| n as u16);
    if port.is_none() {
        diagnostics.push(
            Diagnostic::warning(format!(
                "{field} must be an integer from 1 to 65535; using an ephemeral port instead."
            ))
            .with_field(field),
        );
    }
    port
}

/// Parses config bytes. Never fails: problems become warnings and defaults apply.
pub fn parse_config_bytes(bytes: &[u8]) -> ParsedConfig {
    let mut diagnostics = Vec::new();
    let value = match json::parse_bytes(bytes) {
        Ok(v) => v,
        Err(e) => {
            diagnostics.push(Diagnostic::warning(format!(
                "Failed to parse config.json: {e}; using defaults."
            )));
            return ParsedConfig {
                config: ForgeConfig::default(),
                diagnostics,
            };
        }
    };
    let Some(map) = value.as_object() else {
        diagnostics.push(Diagnostic::warning(format!(
            "config.json must contain a JSON object, not {}; using defaults.",
            json::type_name(&value)
        )));
        return ParsedConfig {
            config: ForgeConfig::default(),
            diagnostics,
        };
    };
    let mut config = ForgeConfig::default();
    match map.get("webEditor") {
        None => {}
        Some(Value::Object(editor)) => {
            if let Some(port) = editor.get("port") {
                config.web_editor_port = port_value(port, "webEditor.port", &mut diagnostics);
            }
            if let Some(locale) = editor.get("locale") {
                config.locale = locale.as_str().and_then(Locale::parse);
                if config.locale.is_none() {
                    diagnostics.push(
                        Diagnostic::warning(
                            "webEditor.locale must be \"auto\", \"en\" or \"zh-CN\"; using \"auto\".",
                        )
                        .with_field("webEditor.locale"),
                    );
                }
            }
        }
        Some(_) => diagnostics.push(
            Diagnostic::warning("webEditor must be an object; its settings are ignored.")
                .with_field("webEditor"),
        ),
    }
    if config.web_editor_port.is_none() {
        if let Some(port) = map.get("webEditorPort") {
            config.web_editor_port = port_value(port, "webEditorPort", &mut diagnostics);
        }
    }
    config.raw = Some(value);
    ParsedConfig {
        config,
        diagnostics,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_port_and_locale_and_keeps_unknown_keys() {
        let parsed =
            parse_config_bytes(br#"{"webEditor":{"port":4321,"locale":"zh-CN"},"other":[1]}"#);
        assert_eq!(parsed.diagnostics, vec![]);
        assert_eq!(parsed.config.web_editor_port, Some(4321));
        assert_eq!(parsed.config.locale, Some(Locale::ZhCn));
        assert_eq!(
            json::to_compact(parsed.config.raw.as_ref().unwrap()),
            r#"{"webEditor":{"port":4321,"locale":"zh-CN"},"other":[1]}"#
        );
    }

    #[test]
    fn legacy_port_and_bad_values_warn() {
        assert_eq!(
            parse_config_bytes(br#"{"webEditorPort":8080}"#)
                .config
                .web_editor_port,
            Some(8080)
        );
        let parsed = parse_config_bytes(br#"{"webEditor":{"port":70000,"locale":"fr"}}"#);
        assert_eq!(parsed.config.web_editor_port, None);
        assert_eq!(
            parsed
                .diagnostics
                .iter()
                .map(|d| d.message.as_str())
                .collect::<Vec<_>>(),
            vec![
                "webEditor.port must be an integer from 1 to 65535; using an ephemeral port instead.",
                "webEditor.locale must be \"auto\", \"en\" or \"zh-CN\"; using \"auto\".",
            ]
        );
        let parsed = parse_config_bytes(b"[1]");
        assert_eq!(
            parsed.diagnostics[0].message,
            "config.json must contain a JSON object, not array; using defaults."
        );
        let parsed = parse_config_bytes(b"{oops");
        assert!(parsed.diagnostics[0]
            .message
            .starts_with("Failed to parse config.json: key must be a string"));
    }
}
