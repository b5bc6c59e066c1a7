//! `RuntimeSnapshot`: the facts only a live Pi knows, as plain data.
//!
//! The compiler is a pure function of a stack and a runtime snapshot. A live Pi session sends its
//! snapshot through the bridge extension; without one, [`RuntimeSnapshot::default_snapshot`]
//! describes Pi's built-in tools with texts we wrote, and the editor says so.
//!
//! Time comes in as data too: [`Clock`] holds the epoch milliseconds and the local UTC offset,
//! from which the local date and time are computed without touching the system clock.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One tool in Pi's registry.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ToolInfo {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// One-line prompt snippet Pi shows in its tool list.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snippet: Option<String>,
    /// Prompt guidelines the tool contributes.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub guidelines: Vec<String>,
    /// Where the tool comes from (`builtin`, an extension path, …), for grouping in the editor.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Active in the session before any stack policy applies.
    pub active: bool,
}

/// One loaded skill.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SkillInfo {
    pub name: String,
    pub description: String,
    pub file_path: String,
    pub disable_model_invocation: bool,
}

/// A context file (AGENTS.md and friends) Pi would include.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ContextFile {
    pub path: String,
    pub content: String,
}

/// The active model.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ModelInfo {
    pub provider: String,
    pub id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api: Option<String>,
}

/// The moment a compilation runs: epoch milliseconds plus the local offset from UTC.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Clock {
    pub epoch_ms: i64,
    /// Minutes east of UTC of the user's local time zone.
    pub utc_offset_minutes: i32,
}

/// A calendar date and wall-clock time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DateTime {
    pub year: i64,
    pub month: u32,
    pub day: u32,
    pub hour: u32,
    pub minute: u32,
    pub second: u32,
    pub millisecond: u32,
}

impl DateTime {
    /// `YYYY-MM-DD`.
    pub fn date_text(&self) -> String {
        format!("{:04}-{:02}-{:02}", self.year, self.month, self.day)
    }
    /// `HH:MM:SS`.
    pub fn time_text(&self) -> String {
        format!("{:02}:{:02}:{:02}", self.hour, self.minute, self.second)
    }
}

fn civil_from_epoch_ms(ms: i64) -> DateTime {
    let days = ms.div_euclid(86_400_000);
    let in_day = ms.rem_euclid(86_400_000);
    // Howard Hinnant's days-to-civil algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    DateTime {
        year,
        month,
        day,
        hour: (in_day / 3_600_000) as u32,
        minute: (in_day / 60_000 % 60) as u32,
        second: (in_day / 1000 % 60) as u32,
        millisecond: (in_day % 1000) as u32,
    }
}

impl Clock {
    /// A clock at the given UTC instant with a zero offset.
    pub fn utc(epoch_ms: i64) -> Clock {
        Clock {
            epoch_ms,
            utc_offset_minutes: 0,
        }
    }

    /// The clock whose local time is `year-month-day hour:minute:second` at the given offset.
    pub fn from_local(
        (year, month, day): (i64, u32, u32),
        (hour, minute, second): (u32, u32, u32),
        utc_offset_minutes: i32,
    ) -> Clock {
        // Inverse of civil_from_epoch_ms (days-from-civil).
        let y = if month <= 2 { year - 1 } else { year };
        let era = y.div_euclid(400);
        let yoe = y.rem_euclid(400);
        let m = i64::from(month);
        let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        let days = era * 146_097 + doe - 719_468;
        let local_ms = days * 86_400_000
            + i64::from(hour) * 3_600_000
            + i64::from(minute) * 60_000
            + i64::from(second) * 1000;
        Clock {
            epoch_ms: local_ms - i64::from(utc_offset_minutes) * 60_000,
            utc_offset_minutes,
        }
    }

    /// Local calendar time.
    pub fn local(&self) -> DateTime {
        civil_from_epoch_ms(self.epoch_ms + i64::from(self.utc_offset_minutes) * 60_000)
    }

    /// UTC ISO-8601 with milliseconds (`2026-06-13T09:08:07.000Z`), like `Date.toISOString`.
    pub fn iso_utc(&self) -> String {
        let t = civil_from_epoch_ms(self.epoch_ms);
        format!("{}T{}.{:03}Z", t.date_text(), t.time_text(), t.millisecond)
    }
}

/// Everything the compiler needs to know about the live session.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RuntimeSnapshot {
    /// The session's working directory, as Pi reports it (not normalized).
    pub cwd: String,
    /// Pi's own system prompt before pi-forge changes it.
    pub base_system_prompt: String,
    /// Text from `--append-system-prompt` and friends.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub append_system_prompt: Option<String>,
    /// Every registered tool, in registry order.
    pub tools: Vec<ToolInfo>,
    /// Runtime prompt guidelines (beyond the tools' own).
    pub prompt_guidelines: Vec<String>,
    pub skills: Vec<SkillInfo>,
    pub context_files: Vec<ContextFile>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelInfo>,
    pub clock: Clock,
    /// Where `@earendil-works/pi-coding-agent` is installed (for the `pi-docs` slot).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pi_docs_root: Option<String>,
    /// The conversation on the current branch, as Pi's message objects (unknown fields kept).
    pub messages: Vec<Value>,
    /// True when these facts came from a live Pi session, false for the built-in default.
    pub live: bool,
}

impl RuntimeSnapshot {
    /// Names of the tools active before any stack policy, in registry order.
    pub fn active_tool_names(&self) -> Vec<&str> {
        self.tools
            .iter()
            .filter(|t| t.active)
            .map(|t| t.name.as_str())
            .collect()
    }

    /// All registered tool names, in registry order.
    pub fn registered_tool_names(&self) -> Vec<&str> {
        self.tools.iter().map(|t| t.name.as_str()).collect()
    }

    pub fn tool(&self, name: &str) -> Option<&ToolInfo> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// The documented stand-in used when no live Pi session is connected: the ten tools Pi 1.6
    /// registers, in its registry order (read, bash, edit and write active; powershell, grep,
    /// find, ls, codemode and tool_search registered but inactive), with short descriptions
    /// written for pi-forge, no skills, no context files, no model.
    pub fn default_snapshot(cwd: &str, clock: Clock) -> RuntimeSnapshot {
        let tool = |name: &str, snippet: &str, active: bool| ToolInfo {
            name: name.to_string(),
            description: Some(snippet.to_string()),
            snippet: Some(snippet.to_string()),
            guidelines: Vec::new(),
            source: Some("builtin".to_string()),
            active,
        };
        RuntimeSnapshot {
            cwd: cwd.to_string(),
            base_system_prompt: DEFAULT_BASE_PROMPT.to_string(),
            append_system_prompt: None,
            tools: vec![
                tool("read", "Read the contents of a file", true),
                tool("bash", "Run a shell command in the working directory", true),
                tool("powershell", "Run a PowerShell command", false),
                tool("edit", "Replace exact text in a file", true),
                tool("write", "Create or overwrite a file", true),
                tool("grep", "Search file contents for a pattern", false),
                tool("find", "Find files by name pattern", false),
                tool("ls", "List the entries of a directory", false),
                tool("codemode", "Run a script that calls other tools", false),
                tool(
                    "tool_search",
                    "Search the registered tools by description",
                    false,
                ),
            ],
            prompt_guidelines: Vec::new(),
            skills: Vec::new(),
            context_files: Vec::new(),
            model: None,
            clock,
            pi_docs_root: None,
            messages: Vec::new(),
            live: false,
        }
    }
}

/// The stand-in for Pi's base system prompt when no live session is connected.
pub const DEFAULT_BASE_PROMPT: &str =
    "(Pi's base system prompt: connect a live Pi session to see the real text.)";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_round_trips_local_time() {
        let clock = Clock::from_local((2026, 6, 13), (9, 8, 7), 120);
        let local = clock.local();
        assert_eq!(local.date_text(), "2026-06-13");
        assert_eq!(local.time_text(), "09:08:07");
        assert_eq!(clock.iso_utc(), "2026-06-13T07:08:07.000Z");
        assert_eq!(Clock::utc(0).iso_utc(), "1970-01-01T00:00:00.000Z");
        assert_eq!(Clock::utc(-1).iso_utc(), "1969-12-31T23:59:59.999Z");
        let leap = Clock::from_local((2024, 2, 29), (23, 59, 59), -300).local();
        assert_eq!(
            (leap.date_text(), leap.time_text()),
            ("2024-02-29".to_string(), "23:59:59".to_string())
        );
    }

    #[test]
    fn default_snapshot_has_pi_builtins() {
        let snap = RuntimeSnapshot::default_snapshot("/w", Clock::utc(0));
        assert_eq!(
            snap.active_tool_names(),
            vec!["read", "bash", "edit", "write"]
        );
        assert_eq!(
            snap.registered_tool_names(),
            vec![
                "read",
                "bash",
                "powershell",
                "edit",
                "write",
                "grep",
                "find",
                "ls",
                "codemode",
                "tool_search"
            ]
        );
        let json = serde_json::to_value(&snap).unwrap();
        let back: RuntimeSnapshot = serde_json::from_value(json).unwrap();
        assert_eq!(back, snap);
    }
}
