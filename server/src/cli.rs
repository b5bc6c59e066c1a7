//! Command-line grammar (clap). Kept apart from the commands so `--help` reads as one document.

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

const AFTER_HELP: &str = "\
Examples:
  pi-forge check                      validate every resource of the project in this directory
  pi-forge check --project ~/code/app --json
  pi-forge list stacks                show prompt stacks (Presets) with their diagnostics counts
  pi-forge fingerprint .pi/forge/prompt-stacks/reviewer.json
  pi-forge preview reviewer           show the system prompt and messages a stack produces
  pi-forge preview reviewer --prompt \"Fix the bug\" --json
  pi-forge template check block.txt   parse and analyze a forge-v1 template
  pi-forge ui                         open the editor for this project in your browser
  pi-forge pi install                 make /forge work inside Pi (installs the bridge extension)
  pi-forge import sillytavern Preset.json --character-id 100001 --dry-run

Resources live in <project>/.pi/forge/ (prompt-stacks/, agent-profiles/, capabilities/,
config.json; the legacy <project>/.pi/prompt-stacks/ is read too) and in the global directory
$PI_FORGE_GLOBAL_DIR, or ~/.pi/forge when that variable is unset.

Exit status: 0 success; 1 the input was read but has an error diagnostic (check, preview, template,
fingerprint --value); 2 usage error, or an input that cannot be read or is not valid JSON.";

/// Shape how the Pi coding agent thinks: prompt stacks, agent profiles and capabilities.
#[derive(Debug, Parser)]
#[command(name = "pi-forge", version, about, after_help = AFTER_HELP)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Args)]
pub struct WorkspaceArgs {
    /// Project directory (the folder that holds `.pi/`). Defaults to the current directory.
    #[arg(long, value_name = "DIR")]
    pub project: Option<PathBuf>,
    /// Global forge directory. Defaults to $PI_FORGE_GLOBAL_DIR, else ~/.pi/forge.
    #[arg(long, value_name = "DIR")]
    pub global_dir: Option<PathBuf>,
    /// Treat the project as untrusted: only global resources are read, and project files are
    /// never written.
    /// Also set by PI_FORGE_UNTRUSTED=1.
    #[arg(long)]
    pub untrusted: bool,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Validate every resource and print diagnostics grouped by file.
    #[command(
        after_help = "Exit status: 0 when there is no error (warnings allowed), 1 when any \
file has an error, 2 on a usage error.\n\nExample:\n  pi-forge check --project . --json"
    )]
    Check {
        #[command(flatten)]
        workspace: WorkspaceArgs,
        /// Print a JSON report instead of text.
        #[arg(long)]
        json: bool,
    },
    /// List resources (all kinds, or one) with scope, id, path and diagnostic counts.
    #[command(after_help = "Examples:\n  pi-forge list\n  pi-forge list profiles --json")]
    List {
        /// Which kind of resource to list.
        #[arg(value_enum)]
        kind: Option<ListKind>,
        #[command(flatten)]
        workspace: WorkspaceArgs,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Print the revision and `sha256:v1:` fingerprint of a resource file.
    #[command(
        after_help = "The kind is taken from the file's \"type\" field or its directory \
(prompt-stacks/, agent-profiles/, capabilities/); other JSON files get the fingerprint of their \
canonical JSON. With --value, any JSON value is fingerprinted as it is (no kind detection, no \
normalization) and its canonical JSON is printed too; a number too large for a double cannot be \
canonicalized.\n\nExit status: 0 success; 1 the value holds a non-finite number (--value); 2 \
usage error, unreadable file or invalid JSON.\n\nExamples:\n  pi-forge fingerprint \
.pi/forge/agent-profiles/reviewer.json\n  pi-forge fingerprint --value params.json --json\n  \
echo '{\"b\":1,\"a\":[1.0,-0]}' | pi-forge fingerprint --value -"
    )]
    Fingerprint {
        /// The JSON file (`-` reads standard input with --value).
        file: PathBuf,
        /// Fingerprint the file's JSON value as it is: print its canonical JSON and
        /// `sha256:v1:` fingerprint, without kind detection.
        #[arg(long)]
        value: bool,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Compile a prompt stack and show the system prompt and message layout it produces.
    #[command(
        after_help = "Without --runtime, when the project's editor (`pi-forge ui`, /forge ui) has a \
live Pi session, preview compiles against that session's runtime (its tools, skills, context \
files, model, clock and conversation: what the editor's preview uses) and says so; --no-live \
skips it. Otherwise pi-forge uses its documented stand-in for a live Pi session: Pi's built-in \
tools (read, bash, edit, write active; grep, find, ls inactive), no skills, no context files, no \
model, the current local time and no conversation.\n\n--prompt gives the \
turn's prompt apart from the conversation, as Pi does: the system prompt sees it as \
runtime.lastUserMessage; the messages use the conversation's last user text, else the prompt. \
--json adds templateEnv (the runtime.* and parameters.* the system prompt's templates see) and \
activeTools (the tools after the stack's policy). --finalize runs the stack's finalize regex rules \
on an assistant message instead of previewing.\n\nExit status: 0 success; 1 the stack, its \
compilation or its finalize rules report an error; 2 usage error, unknown stack, or an input \
file that cannot be read or is not valid JSON.\n\nExamples:\n  pi-forge preview reviewer\n  \
pi-forge preview global:reviewer --json\n  pi-forge preview ./draft.json --runtime \
docs/examples/runtime.json --messages chat.json\n  pi-forge preview reviewer --prompt \"Review \
the diff\" --json | jq .templateEnv > env.json\n  pi-forge preview reviewer --finalize reply.json"
    )]
    Preview {
        /// A stack selector (`reviewer`, `project:reviewer`, `global:reviewer`) or a path to a
        /// stack JSON file.
        target: String,
        #[command(flatten)]
        workspace: WorkspaceArgs,
        /// A RuntimeSnapshot JSON file (tools, skills, context files, model, clock, messages).
        #[arg(long, value_name = "FILE")]
        runtime: Option<PathBuf>,
        /// Never use the live Pi session's runtime: the stand-in (or --runtime) only.
        #[arg(long)]
        no_live: bool,
        /// A conversation JSON file: an array of Pi messages, or an object with `messages`.
        /// Replaces the runtime's conversation.
        #[arg(long, value_name = "FILE")]
        messages: Option<PathBuf>,
        /// The turn's prompt, apart from the conversation (Pi's `before_agent_start` prompt).
        #[arg(long, value_name = "TEXT")]
        prompt: Option<String>,
        /// Run the finalize regex rules on this assistant message (a JSON message object, or a
        /// JSON string as its text; `-` reads standard input) and print the result.
        #[arg(long, value_name = "FILE", conflicts_with_all = ["messages", "prompt"])]
        finalize: Option<PathBuf>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Run the golden cases of Presets (`.pi/forge/tests/<preset-id>/<case>.json`).
    #[command(
        after_help = "A case compiles its Preset against its own input (prompt, messages, runtime, \
parameters; without runtime, the stand-in at cwd /project and 2026-01-01T00:00:00Z, so results do \
not depend on the machine or the day) and compares the result with its `expect` parts \
(systemPrompt, messages, tools; an absent part is not checked) and its `budgets` \
(maxSystemTokens, maxTotalTokens, counted as ceil(UTF-16 code units / 4); mustContain, \
mustNotContain). A failure prints a unified diff, expected (-) against compiled (+). --update \
rewrites the expected parts of every case run (all three when `expect` is empty), never the \
budgets. A case whose Preset does not exist, or whose file is malformed, is an error naming the \
field.\n\nExit status: 0 every case passed (or was updated); 1 a case failed or is an error; 2 \
usage error.\n\nExamples:\n  pi-forge test\n  pi-forge test reviewer --update\n  pi-forge test \
--json\n  pi-forge test --junit target/pi-forge-tests.xml"
    )]
    Test {
        /// Only the cases of these Presets (their folder names under .pi/forge/tests/).
        #[arg(value_name = "PRESET")]
        presets: Vec<String>,
        #[command(flatten)]
        workspace: WorkspaceArgs,
        /// Rewrite each case's expected parts with what its Preset compiles to now.
        #[arg(long)]
        update: bool,
        /// Print a JSON report instead of text.
        #[arg(long)]
        json: bool,
        /// Also write a JUnit XML report to FILE (for CI).
        #[arg(long, value_name = "FILE")]
        junit: Option<PathBuf>,
    },
    /// Check or render a forge-v1 template (the text of a Preset block).
    Template {
        #[command(subcommand)]
        action: TemplateAction,
    },
    /// Start (or reuse) the web editor on 127.0.0.1 and open it in the browser.
    #[command(
        after_help = "The first line on stdout is the editor's address, http://127.0.0.1:<port>/?token=<token>. Running `pi-forge ui` again for the same project reuses the running editor and prints the same address; `--restart` starts a fresh one (new token), `pi-forge ui open` opens the running one in the browser, `pi-forge ui stop` stops it.\n\nExamples:\n  pi-forge ui\n  pi-forge ui --project ~/code/app \
--port 4321 --no-open\n  pi-forge ui stop"
    )]
    Ui {
        #[command(subcommand)]
        action: Option<UiAction>,
        #[command(flatten)]
        workspace: WorkspaceArgs,
        /// Port to bind on 127.0.0.1 (default: config.json webEditor.port, else the port this
        /// project's editor had last time when it is free, else any free port).
        #[arg(long)]
        port: Option<u16>,
        /// Do not open a browser; just print the URL.
        #[arg(long)]
        no_open: bool,
        /// Stop the project's running editor first and start a fresh one (new token).
        #[arg(long)]
        restart: bool,
        /// Serve a temporary demo workspace with example resources instead of a project.
        #[arg(long)]
        demo: bool,
    },
    /// Connect pi-forge to Pi: install the bridge extension that makes `/forge` work in Pi.
    Pi {
        #[command(subcommand)]
        action: PiAction,
    },
    /// Inspect the provider requests the live Pi session sent (captured by the running editor).
    #[command(
        after_help = "Captures come from the project's running editor (`pi-forge ui`, or /forge ui \
in Pi) while a Pi session is connected: every request Pi sends to the model, redacted, the last 20 \
per session. Capture cannot see changes made by extensions loaded after pi-forge, compaction and \
summary calls, or providers with their own transport.\n\nExamples:\n  pi-forge payload list\n  \
pi-forge payload show turn-3 > turn-3.json\n  pi-forge payload show turn-3 --text\n  pi-forge \
payload diff                 the newest request against the one before\n  pi-forge payload diff \
turn-1 turn-4 --json\n  pi-forge payload arm --save       pin (and save) the next request\n\n\
Exit status: 0 success, 2 no running editor, an unknown turn or a usage error."
    )]
    Payload {
        #[command(subcommand)]
        action: PayloadAction,
    },
    /// Delegate a read-only task to an agent profile in a clean child Pi, after you approved
    /// the exact prompt.
    #[command(
        after_help = "A profile takes delegated tasks only when .pi/forge/subagents.json (trusted \
project) or ~/.pi/forge/subagents.json enables it:\n  {\"profiles\": {\"project:reviewer\": \
{\"enabled\": true, \"timeoutMs\": 120000}}}\n\nThe child is `pi --mode json` with no session, \
extensions, skills, prompt templates, themes or context files, offline, with the profile's model \
and thinking level and only the read-only tools its Preset allows (read, grep, find, ls). It runs \
as your user: read-only describes its tools, not an OS sandbox. The child Pi is $PI_FORGE_PI, else \
`pi` on PATH.\n\nExamples:\n  pi-forge agent plan reviewer \"Summarize src/\"          print the \
plan; nothing is sent\n  pi-forge agent plan reviewer \"Summarize src/\" --json\n  pi-forge agent \
run reviewer \"Summarize src/\" --approve-in-terminal\n  pi-forge agent runs\n  pi-forge agent \
result run:3f0c…\n\nExit status: 0 success; 1 the plan could not be prepared, was rejected, or the \
run did not complete (or its answer no longer matches its record); 2 usage error."
    )]
    Agent {
        #[command(subcommand)]
        action: AgentAction,
    },
    /// Convert another tool's prompt preset into a prompt stack.
    Import {
        #[command(subcommand)]
        source: ImportSource,
    },
    /// Measure performance and print a JSON report (used by `cargo xtask bench`).
    #[command(hide = true)]
    Bench {
        /// Number of generated stacks for the load benchmark.
        #[arg(long, default_value_t = 10_000)]
        stacks: usize,
        /// Run only these benchmarks (comma-separated: workspace, compile, fingerprint, delegation,
        /// template, server, bridge).
        #[arg(long, value_delimiter = ',')]
        only: Vec<String>,
        /// Print JSON (the default; kept for symmetry).
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum AgentAction {
    /// Prepare and seal the exact plan and print its review (or the plan as JSON). Nothing is
    /// sent to any model.
    Plan {
        /// The agent profile (`reviewer`, `project:reviewer`, `global:reviewer`).
        profile: String,
        /// The task for the subagent.
        task: String,
        /// Print the sealed plan as JSON (system prompt, messages, tools, fingerprints).
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        workspace: WorkspaceArgs,
    },
    /// Prepare the plan, ask for approval, run it in a child Pi and print the verified answer.
    ///
    /// Ctrl+C while it runs kills the child's whole process group and records the run as
    /// `cancelled`.
    Run {
        profile: String,
        task: String,
        /// Review the plan here and answer a (approve), v (view the full prompt) or r (reject).
        /// Without it nothing runs.
        #[arg(long)]
        approve_in_terminal: bool,
        /// Timeout in seconds (1–3600) over the configured one (default 60).
        #[arg(long, value_name = "S", value_parser = clap::value_parser!(u64).range(1..=3600))]
        timeout: Option<u64>,
        #[command(flatten)]
        workspace: WorkspaceArgs,
    },
    /// List the delegated runs kept in .pi/forge/runs/.
    Runs {
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        workspace: WorkspaceArgs,
    },
    /// Print a run's answer after checking it against the run's record.
    Result {
        /// The run id (`run:<uuid>`).
        run_id: String,
        #[command(flatten)]
        workspace: WorkspaceArgs,
    },
}

#[derive(Debug, Subcommand)]
pub enum TemplateAction {
    /// Parse and analyze a template: errors and dependencies, with spans.
    #[command(
        after_help = "Spans are UTF-16 code units from the start of the text, end exclusive (what \
the web editor and JavaScript count); the text output also gives the line and column. With \
--env, the template is rendered too, so an undefined path is an error.\n\nExit status: 0 no \
error; 1 the template has an error; 2 usage error, unreadable file, or an --env that is not a \
JSON object.\n\nExamples:\n  pi-forge template check block.txt\n  pi-forge template check - \
--json < block.txt\n  pi-forge template check block.txt --env env.json"
    )]
    Check {
        #[command(flatten)]
        args: TemplateArgs,
    },
    /// Render a template against an environment and print the output.
    #[command(
        after_help = "The environment is {\"runtime\": {...}, \"parameters\": {...}} (both \
optional, default {}): the shape of `pi-forge preview --json`'s templateEnv. Extension macros \
(extensions.*) are not available here.\n\nExit status: 0 rendered; 1 the template has an error \
(parse, analysis or render); 2 usage error, unreadable file, or an --env that is not a JSON \
object.\n\nExamples:\n  pi-forge template render block.txt --env env.json\n  echo \
'Hello {{ parameters.name | upper }}' | pi-forge template render - --env env.json --json\n  \
pi-forge preview reviewer --json | jq .templateEnv > env.json"
    )]
    Render {
        #[command(flatten)]
        args: TemplateArgs,
    },
}

#[derive(Debug, Clone, Args)]
pub struct TemplateArgs {
    /// The template text file (`-` reads standard input).
    pub file: PathBuf,
    /// A JSON file with `runtime` and `parameters` objects.
    #[arg(long, value_name = "FILE")]
    pub env: Option<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum PiAction {
    /// Write the bridge extension to Pi's global extensions folder (upgrades in place).
    #[command(
        after_help = "The folder is $PI_CODING_AGENT_DIR/extensions/pi-forge, else \
~/.pi/agent/extensions/pi-forge; Pi loads it in every new session without project trust. The \
folder is also a Pi package, so `pi install <folder>` works too. The extension finds this binary \
through PI_FORGE_BIN, else the path recorded now, else PATH.\n\nExamples:\n  pi-forge pi install\n  \
pi -e \"$(pi-forge pi install --print-path)\"   load it for one run"
    )]
    Install {
        /// Install into this folder instead of Pi's global extensions folder.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
        /// Print only the path of the installed extension (usable with `pi -e`).
        #[arg(long)]
        print_path: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum PayloadAction {
    /// List the captured requests: time, model, size, estimated tokens, provider usage, cache hit.
    List {
        #[command(flatten)]
        workspace: WorkspaceArgs,
        /// Print the API's JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print one captured request as pretty JSON (redacted, otherwise as sent).
    Show {
        /// The turn id (see `pi-forge payload list`), e.g. turn-3.
        turn: String,
        /// Print the system prompt and messages as text blocks instead of JSON.
        #[arg(long)]
        text: bool,
        #[command(flatten)]
        workspace: WorkspaceArgs,
    },
    /// Compare two captures: added, removed and modified blocks, the reusable cache prefix and
    /// token deltas. Without turns: the newest against the one before it.
    Diff {
        /// The earlier turn (default: the one before TO).
        from: Option<String>,
        /// The later turn (default: the newest).
        to: Option<String>,
        #[command(flatten)]
        workspace: WorkspaceArgs,
        /// Print the API's JSON.
        #[arg(long)]
        json: bool,
    },
    /// Pin the next captured request (it stays after it leaves the history of 20).
    Arm {
        /// Also save it to .pi/forge/payloads/ (trusted projects only).
        #[arg(long)]
        save: bool,
        #[command(flatten)]
        workspace: WorkspaceArgs,
    },
    /// Forget every capture, the armed state and pending usage.
    Clear {
        #[command(flatten)]
        workspace: WorkspaceArgs,
    },
}

#[derive(Debug, Subcommand)]
pub enum UiAction {
    /// Stop the project's running editor and remove its state file.
    Stop {
        #[command(flatten)]
        workspace: WorkspaceArgs,
    },
    /// Open the project's running editor in the browser (never starts one). The browser is
    /// given a user-only launch page, so the token is on no command line; stdout stays empty.
    #[command(
        after_help = "This is what /forge ui runs inside Pi. PI_FORGE_BROWSER names another opener \
program (default: xdg-open, open on macOS).\n\nExit status: 0 opened, 2 no editor is running for \
the project (start it with `pi-forge ui`), 1 the opener could not be started."
    )]
    Open {
        #[command(flatten)]
        workspace: WorkspaceArgs,
    },
}

#[derive(Debug, Subcommand)]
pub enum ImportSource {
    /// Convert a SillyTavern chat-completion preset and print the migration report.
    #[command(
        after_help = "The stack is written to <scope>/prompt-stacks/<id>.json through the same \
checks as the editor; an existing id is never overwritten. The default id is the file name in \
lower case with every run of other characters as one `-` (`Space Opera.json` → space-opera). \
--json prints {id, dryRun, report, stack, written}: the migration report as JSON.\n\nExit \
status: 0 converted (and written); 2 usage error, unreadable or malformed JSON, a file that is \
not a usable preset (no prompts), an unknown or missing --character-id, or an id that exists \
already; nothing is written then.\n\nExamples:\n  pi-forge import sillytavern Default.json \
--dry-run\n  pi-forge import sillytavern Default.json --dry-run --json | jq .report.dropped\n  \
pi-forge import sillytavern Default.json --character-id 100001 --id roleplay"
    )]
    Sillytavern {
        /// The preset JSON file exported from SillyTavern.
        file: PathBuf,
        /// Which `prompt_order` entry to use when the preset has several.
        #[arg(long, value_name = "N")]
        character_id: Option<String>,
        /// The new stack's id (default: the file name, made id-safe).
        #[arg(long)]
        id: Option<String>,
        /// Where to write the stack.
        #[arg(long, value_enum, default_value_t = ImportScope::Project)]
        scope: ImportScope,
        /// Print the report and the stack JSON; write nothing.
        #[arg(long)]
        dry_run: bool,
        /// Print the result (report, stack, where it was written) as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        workspace: WorkspaceArgs,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ImportScope {
    Project,
    Global,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ListKind {
    Stacks,
    Profiles,
    Capabilities,
}
