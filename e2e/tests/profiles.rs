//! Browser tests of the agent profiles surface (web-editor spec §5, scenarios 5, 7, 9, 14, 11).
//!
//! `pi-forge ui` runs without a live Pi session here, so profiles cannot be applied: the Apply
//! button is disabled and says why (`rows_and_detail_explain_themselves…`). The apply, drift and
//! rollback parts of scenarios 7, 8 and 10 need a real Pi and belong to the live-bridge tests
//! (`pi_*.rs`); the one test here that needs Pi's model registry (the model datalists and the
//! unknown-model warning) starts a real Pi through the same harness (`pi/`). Everything else is
//! covered here, with exact values.

mod pi;
mod support;

use std::time::Duration;

use serde_json::{json, Value};
use support::{Browser, Server, NO_LIVE_SESSION};

const STACKS: &str = "project/.pi/forge/prompt-stacks";
const PROFILES: &str = "project/.pi/forge/agent-profiles";
const GLOBAL_PROFILES: &str = "global/agent-profiles";
const GLOBAL_STACKS: &str = "global/prompt-stacks";

/// A file's text as pi-forge writes it (`JSON.stringify(v, null, 2)` plus a newline).
fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap() + "\n"
}

fn stack(id: &str, name: &str) -> String {
    pretty(&json!({
        "schemaVersion": 2,
        "type": "pi-forge.prompt-stack",
        "id": id,
        "name": name,
        "items": [
            { "kind": "block", "id": "1", "role": "system", "content": format!("You are the {name} assistant.") },
            { "kind": "slot", "id": "2", "slot": "chat-history" }
        ]
    }))
}

fn profile(id: &str, name: &str, thinking: &str, stack: Option<&str>) -> Value {
    json!({
        "schemaVersion": 1,
        "type": "pi-forge.agent-profile",
        "id": id,
        "name": name,
        "model": { "provider": "test", "id": "current" },
        "thinkingLevel": thinking,
        "promptStack": stack
    })
}

fn file(dir: &str, id: &str) -> String {
    format!("{dir}/{id}.json")
}

/// Switches surfaces with the top bar's button and waits for the surface to render. A surface
/// switch never asks anything when only the Preset draft is dirty: that draft lives in app state.
async fn show(browser: &Browser, surface: &str) {
    let container = match surface {
        "Profiles" => ".profiles",
        "Presets" => ".presets",
        other => panic!("unknown surface {other}"),
    };
    browser.click_text(".surface-tab", surface).await;
    browser.wait_css(container).await;
    assert_eq!(
        browser.count(".modal").await,
        0,
        "switching to {surface} must not ask (a dirty Preset draft survives the switch)"
    );
}

/// The messages of the diagnostics listed in `css`.
async fn messages(browser: &Browser, css: &str) -> Value {
    browser
        .js(
            "return [...document.querySelectorAll(arguments[0])].map(e => e.textContent);",
            vec![json!(format!("{css} .diagnostic-list .message"))],
        )
        .await
}

/// How many requests the page has made to `/api/profiles…` so far (Resource Timing).
async fn profile_fetches(browser: &Browser) -> u64 {
    browser
        .js(
            "return performance.getEntriesByType('resource').filter(e => new URL(e.name).pathname.startsWith('/api/profiles')).length;",
            vec![],
        )
        .await
        .as_u64()
        .unwrap()
}

/// Scenario 5: deleting a profile's Preset re-runs its preflight, live (no reload).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_the_stack_fails_the_profile_preflight_live() {
    let server = Server::start_with(
        &[
            (&file(STACKS, "default"), &stack("default", "Default")),
            (
                &file(PROFILES, "scout"),
                &pretty(&profile("scout", "Scout", "low", Some("default"))),
            ),
        ],
        &[],
    );
    let browser = Browser::start().await;
    browser.open(&server).await;
    browser.wait_text(".status", "Loaded default").await;
    show(&browser, "Profiles").await;

    browser
        .wait_text(".profile-detail .preflight strong", "Ready to apply")
        .await;
    assert_eq!(
        browser
            .text(".profile-detail .target-card")
            .await
            .as_deref(),
        Some("test/current · low · project:default")
    );
    assert_eq!(browser.count(".profile-detail .diagnostic-list").await, 0);
    // A page reload would drop this marker.
    browser
        .js("window.__sameDocument = true; return null;", vec![])
        .await;

    let (status, view) = server.api("GET", "/api/stacks/project:default", None, None);
    assert_eq!(status, 200);
    let revision = view["revision"].as_str().unwrap().to_string();
    let (status, answer) = server.api(
        "DELETE",
        "/api/stacks/project:default",
        None,
        Some(&revision),
    );
    assert_eq!(
        (status, answer),
        (
            200,
            json!({ "ok": true, "deleted": "project:default", "activeId": null })
        )
    );

    browser
        .wait_text(".profile-detail .preflight strong", "Preflight failed")
        .await;
    assert_eq!(
        messages(&browser, ".profile-detail").await,
        json!(["Unknown prompt stack: default."])
    );
    assert_eq!(
        browser
            .text(".profile-detail .diagnostic-list .level")
            .await
            .as_deref(),
        Some("error")
    );
    assert_eq!(
        browser
            .text(".profile-detail .target-card")
            .await
            .as_deref(),
        Some("test/current · low · default (not found)")
    );
    assert!(!browser.enabled(".profile-detail button.apply").await);
    assert_eq!(
        browser
            .text(".profile-row[data-selector='project:scout'] .badge.error")
            .await
            .as_deref(),
        Some("preflight failed")
    );
    assert_eq!(
        browser
            .js("return window.__sameDocument === true;", vec![])
            .await,
        json!(true),
        "the page was not reloaded"
    );

    browser.assert_no_errors().await;
    browser.close().await;
}

/// Scenario 7, without the parts that need a live Pi session (Apply, "Last applied", source
/// and drift cards, the model registry's "Unknown model" check, a forced apply).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn profile_lifecycle() {
    let default_stack = stack("default", "Default");
    let alpha = pretty(&profile("alpha", "Alpha", "low", Some("default")));
    let broken = pretty(&json!({
        "schemaVersion": 1,
        "type": "pi-forge.agent-profile",
        "id": "broken",
        "model": { "provider": "test", "id": "current" },
        "thinkingLevel": "extreme",
        "promptStack": "default",
        "colour": "red"
    }));
    let alternate = stack("alternate", "Alternate");
    let server = Server::start_with(
        &[
            (&file(STACKS, "default"), &default_stack),
            (&file(STACKS, "alternate"), &alternate),
            (&file(PROFILES, "alpha"), &alpha),
            (&file(PROFILES, "broken"), &broken),
        ],
        &[],
    );
    let browser = Browser::start().await;
    browser.open(&server).await;
    // Nothing is active without a live session, so the first project Preset opens.
    browser.wait_text(".status", "Loaded alternate").await;

    // A dirty Preset draft, then Ctrl+S on the Profiles surface: it saves nothing there.
    browser
        .fill(
            "textarea[name=item-content]",
            "Draft that must not be saved.",
        )
        .await;
    browser.wait_css(".editor .badge.dirty").await;
    show(&browser, "Profiles").await;
    browser.wait_text(".profile-detail h2", "Alpha").await;
    browser
        .type_keys(".profiles input.search", "\u{E009}s\u{E000}")
        .await;
    assert_eq!(browser.value(".profiles input.search").await, "");

    // An external edit shows up through the event stream; nothing polls in between.
    let before = profile_fetches(&browser).await;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(
        profile_fetches(&browser).await,
        before,
        "no /api/profiles requests while nothing changes (no polling)"
    );
    server.write_external(
        &file(PROFILES, "alpha"),
        &pretty(&profile(
            "alpha",
            "Alpha edited elsewhere",
            "high",
            Some("default"),
        )),
    );
    browser
        .wait_text(".profile-detail h2", "Alpha edited elsewhere")
        .await;
    assert_eq!(
        browser
            .text(".profile-detail .target-card")
            .await
            .as_deref(),
        Some("test/current · high · project:default")
    );
    assert_eq!(server.read(&file(STACKS, "alternate")), alternate);

    // New → validate → create.
    browser.click(".new-profile").await;
    browser.wait_text(".profile-editor h2", "New profile").await;
    assert_eq!(
        browser.value("select[name=profile-thinking]").await,
        "medium"
    );
    browser.fill("input[name=profile-id]", "scout").await;
    browser.fill("input[name=profile-provider]", "test").await;
    browser.fill("input[name=profile-model]", "target").await;
    browser
        .fill("select[name=profile-thinking]", "medium")
        .await;
    assert_eq!(
        browser
            .js(
                "return [...document.querySelectorAll('select[name=profile-stack] option')].map(o => [o.value, o.textContent]);",
                vec![]
            )
            .await,
        json!([
            ["", "(none: no Preset)"],
            ["alternate", "project:alternate"],
            ["default", "project:default"]
        ])
    );
    browser
        .fill("select[name=profile-stack]", "alternate")
        .await;
    browser
        .click(".profile-editor button.validate-profile")
        .await;
    browser
        .wait_text(".validation-result", "Valid and ready to apply")
        .await;
    assert_eq!(
        browser.text(".validation-result").await.as_deref(),
        Some("Valid and ready to apply")
    );
    browser.click(".profile-editor button.save-profile").await;
    browser.wait_text(".status", "Created scout").await;
    assert_eq!(
        browser.text(".status").await.as_deref(),
        Some("Created scout")
    );
    let created = json!({
        "schemaVersion": 1,
        "type": "pi-forge.agent-profile",
        "id": "scout",
        "model": { "provider": "test", "id": "target" },
        "thinkingLevel": "medium",
        "promptStack": "alternate"
    });
    assert_eq!(server.read(&file(PROFILES, "scout")), pretty(&created));
    browser
        .wait_text(".profile-detail code.selector", "project:scout")
        .await;
    assert_eq!(
        browser
            .text(".profile-detail .target-card")
            .await
            .as_deref(),
        Some("test/target · medium · project:alternate")
    );
    assert_eq!(
        browser
            .text(".profile-detail .preflight strong")
            .await
            .as_deref(),
        Some("Ready to apply")
    );

    // Edit: the id is read-only; a new name saves.
    browser.click(".profile-detail button.edit").await;
    browser
        .wait_text(".profile-editor h2", "Edit project:scout")
        .await;
    assert_eq!(
        browser
            .js(
                "return document.querySelector('input[name=profile-id]').readOnly;",
                vec![]
            )
            .await,
        json!(true)
    );
    assert_eq!(browser.value("input[name=profile-id]").await, "scout");
    assert_eq!(
        browser.value("select[name=profile-stack]").await,
        "alternate"
    );
    assert_eq!(browser.count("select[name=profile-scope]").await, 0);
    browser.fill("input[name=profile-name]", "Scout").await;
    browser.wait_css(".profile-editor .badge.dirty").await;
    browser.click(".profile-editor button.save-profile").await;
    browser.wait_text(".status", "Saved scout").await;
    assert_eq!(
        browser.text(".status").await.as_deref(),
        Some("Saved scout")
    );
    let mut saved = created.clone();
    saved["name"] = json!("Scout");
    let saved_text = pretty(&saved);
    assert_eq!(server.read(&file(PROFILES, "scout")), saved_text);
    browser.wait_text(".profile-detail h2", "Scout").await;

    // Cancel with changes asks in the app: Cancel keeps editing, Discard closes.
    browser.click(".profile-detail button.edit").await;
    browser
        .wait_text(".profile-editor h2", "Edit project:scout")
        .await;
    browser
        .fill("input[name=profile-name]", "Scout renamed")
        .await;
    browser.click(".profile-editor button.cancel").await;
    browser
        .wait_text(".modal h2", "Discard changes to this profile?")
        .await;
    browser.click(".modal button.cancel").await;
    browser.wait_count(".modal", 0).await;
    assert_eq!(
        browser.value("input[name=profile-name]").await,
        "Scout renamed"
    );
    browser.click(".profile-editor button.cancel").await;
    browser.click(".modal button.confirm").await;
    browser.wait_css(".profile-detail").await;
    assert_eq!(browser.count(".profile-editor").await, 0);
    assert_eq!(
        browser.text(".profile-detail h2").await.as_deref(),
        Some("Scout")
    );
    assert_eq!(server.read(&file(PROFILES, "scout")), saved_text);

    // Global scope: the Preset select offers no project stack, and only the global file appears.
    browser.click(".new-profile").await;
    browser.wait_text(".profile-editor h2", "New profile").await;
    browser.fill("input[name=profile-id]", "roamer").await;
    browser.fill("input[name=profile-provider]", "test").await;
    browser.fill("input[name=profile-model]", "target").await;
    browser.fill("select[name=profile-stack]", "default").await;
    browser.fill("select[name=profile-scope]", "global").await;
    assert_eq!(
        browser
            .js(
                "return [...document.querySelectorAll('select[name=profile-stack] option')].map(o => o.value);",
                vec![]
            )
            .await,
        json!([""])
    );
    assert_eq!(browser.value("select[name=profile-stack]").await, "");
    browser.click(".profile-editor button.save-profile").await;
    browser.wait_text(".status", "Created global:roamer").await;
    assert_eq!(
        server.read(&file(GLOBAL_PROFILES, "roamer")),
        pretty(&json!({
            "schemaVersion": 1,
            "type": "pi-forge.agent-profile",
            "id": "roamer",
            "model": { "provider": "test", "id": "target" },
            "thinkingLevel": "medium",
            "promptStack": null
        }))
    );
    assert!(!server.path(&file(PROFILES, "roamer")).exists());
    browser
        .wait_text(".profile-detail code.selector", "global:roamer")
        .await;

    // Delete, dismissed: the file stays.
    browser
        .click(".profile-row[data-selector='project:scout']")
        .await;
    browser
        .wait_text(".profile-detail code.selector", "project:scout")
        .await;
    browser.click(".profile-detail button.delete").await;
    browser
        .wait_text(".modal h2", "Delete project:scout?")
        .await;
    let scout_path = server.path(&file(PROFILES, "scout"));
    assert_eq!(
        browser.text(".modal p").await,
        Some(format!(
            "This deletes {} from disk. It cannot be undone.",
            scout_path.display()
        ))
    );
    browser.click(".modal button.cancel").await;
    browser.wait_count(".modal", 0).await;
    assert_eq!(server.read(&file(PROFILES, "scout")), saved_text);

    // Changed on disk while the form is dirty: a banner, and "Keep mine" then Save is refused
    // with a conflict; nothing is overwritten.
    browser.click(".profile-detail button.edit").await;
    browser
        .wait_text(".profile-editor h2", "Edit project:scout")
        .await;
    browser
        .fill("input[name=profile-name]", "Scout (mine)")
        .await;
    let mut theirs = saved.clone();
    theirs["name"] = json!("Scout (theirs)");
    let theirs_text = pretty(&theirs);
    server.write_external(&file(PROFILES, "scout"), &theirs_text);
    browser
        .wait_text(".disk-changed", "This profile changed on disk.")
        .await;
    browser.click(".disk-changed .keep-mine").await;
    browser.wait_count(".disk-changed", 0).await;
    assert_eq!(
        browser.value("input[name=profile-name]").await,
        "Scout (mine)"
    );
    browser.click(".profile-editor button.save-profile").await;
    browser.wait_text(".conflict", "changed on disk").await;
    assert_eq!(
        browser.text(".conflict span").await.as_deref(),
        Some("Not saved: the file changed on disk since you opened it.")
    );
    assert_eq!(
        browser.text(".status").await.as_deref(),
        Some("Not saved: scout changed on disk.")
    );
    browser
        .expect_failed_requests(&server, &["/api/profiles/project%3Ascout 409 (Conflict)"])
        .await;
    assert_eq!(server.read(&file(PROFILES, "scout")), theirs_text);

    // Take the disk version (a clean form closes without asking), then delete for real.
    browser.click(".conflict .reload-disk").await;
    browser
        .wait_js(
            "form reloaded from disk",
            "return document.querySelector('input[name=profile-name]').value;",
            json!("Scout (theirs)"),
        )
        .await;
    assert_eq!(browser.count(".profile-editor .badge.dirty").await, 0);
    browser.click(".profile-editor button.cancel").await;
    browser
        .wait_text(".profile-detail h2", "Scout (theirs)")
        .await;
    assert_eq!(browser.count(".modal").await, 0);
    browser.click(".profile-detail button.delete").await;
    browser.click(".modal button.confirm").await;
    browser.wait_text(".status", "Deleted scout").await;
    assert_eq!(
        browser.text(".status").await.as_deref(),
        Some("Deleted scout")
    );
    assert!(!scout_path.exists());
    browser
        .wait_count(".profile-row[data-selector='project:scout']", 0)
        .await;

    // The external change is handled once: nothing keeps refetching afterwards.
    let settled = profile_fetches(&browser).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(profile_fetches(&browser).await, settled, "no refetch loop");

    // A broken profile: preflight fails with both diagnostics, and Apply stays disabled.
    browser
        .click(".profile-row[data-selector='project:broken']")
        .await;
    browser
        .wait_text(".profile-detail code.selector", "project:broken")
        .await;
    assert_eq!(
        browser
            .text(".profile-detail .preflight strong")
            .await
            .as_deref(),
        Some("Preflight failed")
    );
    assert_eq!(
        messages(&browser, ".profile-detail").await,
        json!([
            "Unsupported profile field: colour",
            "Profile thinkingLevel must be one of: off, minimal, low, medium, high, xhigh, max."
        ])
    );
    assert!(!browser.enabled(".profile-detail button.apply").await);
    assert_eq!(
        browser
            .text(".profile-row[data-selector='project:broken'] .badge.error")
            .await
            .as_deref(),
        Some("preflight failed")
    );

    // Back on Presets: the draft is still there, dirty, and was never saved.
    show(&browser, "Presets").await;
    browser.wait_css(".editor .badge.dirty").await;
    assert_eq!(
        browser.value("textarea[name=item-content]").await,
        "Draft that must not be saved."
    );
    assert_eq!(
        browser.text(".editor code.selector").await.as_deref(),
        Some("project:alternate")
    );
    assert_eq!(server.read(&file(STACKS, "alternate")), alternate);
    assert_eq!(server.read(&file(STACKS, "default")), default_stack);
    assert_eq!(server.read(&file(PROFILES, "broken")), broken);

    browser.assert_no_errors().await;
    browser.close().await;
}

/// Scenario 9: only one project profile may auto-activate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_auto_activating_profile_is_refused() {
    let mut lead = profile("lead", "Lead", "low", Some("default"));
    lead["autoActivate"] = json!(true);
    let server = Server::start_with(
        &[
            (&file(STACKS, "default"), &stack("default", "Default")),
            (&file(PROFILES, "lead"), &pretty(&lead)),
        ],
        &[],
    );
    let browser = Browser::start().await;
    browser.open(&server).await;
    browser.wait_text(".status", "Loaded default").await;
    show(&browser, "Profiles").await;
    browser.wait_text(".profile-detail h2", "Lead").await;

    browser.click(".new-profile").await;
    browser.fill("input[name=profile-id]", "second").await;
    browser.fill("input[name=profile-provider]", "test").await;
    browser.fill("input[name=profile-model]", "target").await;
    browser.click("input[name=profile-auto]").await;
    browser
        .click(".profile-editor button.validate-profile")
        .await;
    browser
        .wait_text(".validation-result", "1 validation error")
        .await;
    let conflict =
        "Only one project agent profile may set autoActivate: true; it is already requested by lead.";
    assert_eq!(messages(&browser, ".validation").await, json!([conflict]));

    browser.click(".profile-editor button.save-profile").await;
    browser.wait_text(".status", conflict).await;
    assert_eq!(browser.text(".status").await.as_deref(), Some(conflict));
    browser
        .expect_failed_requests(&server, &["/api/profiles 409 (Conflict)"])
        .await;
    assert!(!server.path(&file(PROFILES, "second")).exists());
    assert_eq!(
        browser.count(".profile-editor").await,
        1,
        "the form stays open"
    );

    // Unchecked, it is created without the member. Ctrl+S saves the form on this surface.
    browser.click("input[name=profile-auto]").await;
    browser
        .type_keys("input[name=profile-model]", "\u{E009}s\u{E000}")
        .await;
    browser.wait_text(".status", "Created second").await;
    assert_eq!(
        server.read(&file(PROFILES, "second")),
        pretty(&json!({
            "schemaVersion": 1,
            "type": "pi-forge.agent-profile",
            "id": "second",
            "model": { "provider": "test", "id": "target" },
            "thinkingLevel": "medium",
            "promptStack": null
        }))
    );

    browser.assert_no_errors().await;
    browser.close().await;
}

/// Scenario 14: a global profile is shown qualified, and saving it writes the global file only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_global_profile_saves_to_the_global_file_only() {
    let reviewer = profile("reviewer", "Reviewer", "high", Some("terse"));
    let server = Server::start_with(
        &[
            (&file(STACKS, "default"), &stack("default", "Default")),
            (&file(GLOBAL_STACKS, "terse"), &stack("terse", "Terse")),
            (&file(GLOBAL_PROFILES, "reviewer"), &pretty(&reviewer)),
        ],
        &[],
    );
    let browser = Browser::start().await;
    browser.open(&server).await;
    browser.wait_text(".status", "Loaded default").await;
    show(&browser, "Profiles").await;

    let row = ".profile-row[data-selector='global:reviewer']";
    browser.wait_css(row).await;
    assert_eq!(browser.count(".profile-row").await, 1);
    assert_eq!(
        browser.text(&format!("{row} .row-id")).await.as_deref(),
        Some("global:reviewer")
    );
    assert_eq!(
        browser.text(&format!("{row} .row-badges")).await.as_deref(),
        Some("global")
    );
    browser.wait_text(".profile-detail h2", "Reviewer").await;
    assert_eq!(
        browser
            .text(".profile-detail code.selector")
            .await
            .as_deref(),
        Some("global:reviewer")
    );
    assert_eq!(
        browser
            .text(".profile-detail .target-card")
            .await
            .as_deref(),
        Some("test/current · high · global:terse")
    );

    browser.click(".profile-detail button.edit").await;
    browser
        .wait_text(".profile-editor h2", "Edit global:reviewer")
        .await;
    assert_eq!(browser.value("select[name=profile-stack]").await, "terse");
    assert_eq!(
        browser
            .js(
                "return [...document.querySelectorAll('select[name=profile-stack] option')].map(o => [o.value, o.textContent]);",
                vec![]
            )
            .await,
        json!([["", "(none: no Preset)"], ["terse", "global:terse"]]),
        "a global profile can only use global Presets"
    );
    browser
        .fill("input[name=profile-name]", "Global reviewer")
        .await;
    browser.click(".profile-editor button.save-profile").await;
    browser.wait_text(".status", "Saved global:reviewer").await;
    assert_eq!(
        browser.text(".status").await.as_deref(),
        Some("Saved global:reviewer")
    );
    let mut saved = reviewer.clone();
    saved["name"] = json!("Global reviewer");
    assert_eq!(
        server.read(&file(GLOBAL_PROFILES, "reviewer")),
        pretty(&saved)
    );
    assert!(
        !server.path(PROFILES).exists(),
        "no project profile directory appears"
    );
    browser
        .wait_text(".profile-detail h2", "Global reviewer")
        .await;
    assert_eq!(
        browser
            .text(".profile-detail code.selector")
            .await
            .as_deref(),
        Some("global:reviewer")
    );

    browser.assert_no_errors().await;
    browser.close().await;
}

/// Surfaces keep the Preset editor's state: a dirty draft survives Profiles and back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dirty_stack_draft_survives_a_surface_switch() {
    let default_stack = stack("default", "Default");
    let server = Server::start_with(&[(&file(STACKS, "default"), &default_stack)], &[]);
    let browser = Browser::start().await;
    browser.open(&server).await;
    browser.wait_text(".status", "Loaded default").await;

    browser
        .fill("textarea[name=item-content]", "An unsaved draft.")
        .await;
    browser.wait_css(".editor .badge.dirty").await;
    assert!(browser.enabled(".editor button.save").await);

    // `show` asserts that no confirm appears: the draft is not discarded by switching.
    show(&browser, "Profiles").await;
    browser
        .wait_text(".profiles .empty-state h2", "No agent profiles found.")
        .await;
    show(&browser, "Presets").await;

    browser.wait_css(".editor .badge.dirty").await;
    assert_eq!(
        browser.value("textarea[name=item-content]").await,
        "An unsaved draft."
    );
    assert!(browser.enabled(".editor button.save").await);
    assert_eq!(server.read(&file(STACKS, "default")), default_stack);

    browser.assert_no_errors().await;
    browser.close().await;
}

/// Scenario 11 for the Profiles surface: it fits at desktop and phone widths.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_profiles_surface_fits_desktop_and_phone_widths() {
    let server = Server::start_with(
        &[
            (&file(STACKS, "default"), &stack("default", "Default")),
            (
                &file(PROFILES, "reviewer"),
                &pretty(&profile("reviewer", "Reviewer", "medium", Some("default"))),
            ),
        ],
        &[],
    );
    let browser = Browser::start().await;
    for (width, height) in [(1280, 900), (390, 844)] {
        browser.viewport(width, height).await;
        browser.open(&server).await;
        browser.wait_text(".status", "Loaded default").await;
        show(&browser, "Profiles").await;
        browser
            .wait_text(".profile-detail code.selector", "project:reviewer")
            .await;
        browser.screenshot(&format!("profiles-{width}")).await;

        assert_eq!(
            browser.horizontal_overflow().await,
            Vec::<String>::new(),
            "at {width}px"
        );
        for css in [
            ".profile-row[data-selector='project:reviewer'] .row-id",
            ".profile-detail code.selector",
        ] {
            let [_, _, w, h] = browser.rect(css).await;
            assert!(
                w > 100.0,
                "{css} at {width}px is {w}×{h} px: the selector wraps one character per line"
            );
        }
        assert!(
            browser.in_viewport(".new-profile").await,
            "New is visible at {width}px"
        );
        assert!(browser.enabled(".new-profile").await);
    }

    browser.assert_no_errors().await;
    browser.close().await;
}

/// The focused element's `name` attribute (empty when it has none).
async fn focused_name(browser: &Browser) -> Value {
    browser
        .js(
            "const e = document.activeElement; return e && e.name ? e.name : '';",
            vec![],
        )
        .await
}

/// A row says what the profile sets and spells out its counts; the detail says in words why
/// Apply is off (a disabled button's tooltip is out of reach for keyboard and touch users);
/// the form takes focus when it opens and says why the id cannot be edited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_and_detail_explain_themselves_and_the_form_takes_focus() {
    let server = Server::start_with(
        &[
            (&file(STACKS, "default"), &stack("default", "Default")),
            (
                &file(PROFILES, "scout"),
                &pretty(&profile("scout", "Scout", "low", Some("default"))),
            ),
            (
                &file(PROFILES, "broken"),
                &pretty(&profile("broken", "Broken", "medium", Some("gone"))),
            ),
        ],
        &[],
    );
    let browser = Browser::start().await;
    browser.open(&server).await;
    browser.wait_text(".status", "Loaded default").await;
    show(&browser, "Profiles").await;

    let scout = ".profile-row[data-selector='project:scout']";
    let broken = ".profile-row[data-selector='project:broken']";
    browser.wait_css(scout).await;
    assert_eq!(
        browser
            .text(&format!("{scout} .row-detail"))
            .await
            .as_deref(),
        Some("test/current · low")
    );
    assert_eq!(
        browser
            .js(
                "return [...document.querySelectorAll(arguments[0])].map(b => [b.textContent, b.getAttribute('aria-label')]);",
                vec![json!(format!("{broken} .row-detail .badge"))],
            )
            .await,
        json!([["preflight failed", null], ["1 ✕", "1 error"]])
    );
    // The scope badge stays beside the name; the id is not squeezed by the state badges.
    assert_eq!(
        browser
            .text(&format!("{broken} .row-badges"))
            .await
            .as_deref(),
        Some("project")
    );

    browser.click(scout).await;
    browser
        .wait_text(".profile-detail .preflight strong", "Ready to apply")
        .await;
    assert!(!browser.enabled(".profile-detail button.apply").await);
    assert_eq!(
        browser.text(".profile-detail .apply-note").await.as_deref(),
        Some("Apply needs a live Pi session: start Pi in this project with the pi-forge extension (pi-forge pi install). The preflight below shows what it would do.")
    );
    assert_eq!(
        browser
            .js(
                "return document.querySelector('.profile-detail button.apply').title;",
                vec![],
            )
            .await,
        json!(NO_LIVE_SESSION)
    );
    // The status line says there is no session, and nothing was applied.
    assert_eq!(
        browser.text(".profile-status .no-live").await.as_deref(),
        Some("no live Pi session")
    );
    assert_eq!(
        browser.text(".profile-status .last").await.as_deref(),
        Some("No profile has been applied")
    );
    assert_eq!(browser.count(".profile-status .drift").await, 0);
    assert_eq!(browser.count(".apply-result").await, 0);
    assert_eq!(
        browser
            .js(
                "return document.querySelector('.profile-detail button.apply').getAttribute('aria-describedby');",
                vec![],
            )
            .await,
        json!("apply-note")
    );
    browser.click(broken).await;
    browser
        .wait_text(".profile-detail .preflight strong", "Preflight failed")
        .await;
    assert_eq!(
        browser.text(".profile-detail .apply-note").await.as_deref(),
        Some("Apply is off until the preflight passes: see the problems below.")
    );

    // Edit: focus lands on the name (the id is fixed, and says so).
    browser.click(".profile-detail button.edit").await;
    browser.wait_css("input[name=profile-name]").await;
    browser
        .wait_js(
            "focus on the name",
            "return document.activeElement && document.activeElement.name;",
            json!("profile-name"),
        )
        .await;
    assert_eq!(
        browser.text(".profile-editor .field-note").await.as_deref(),
        Some("The file name: fixed once created.")
    );
    assert_eq!(
        browser
            .js(
                "return document.querySelector('input[name=profile-id]').readOnly;",
                vec![]
            )
            .await,
        json!(true)
    );
    browser.click(".profile-editor button.cancel").await;

    // New: focus lands on the id, which is editable and has no "fixed" note.
    browser.click("button.new-profile").await;
    browser.wait_css("input[name=profile-id]").await;
    browser
        .wait_js(
            "focus on the id",
            "return document.activeElement && document.activeElement.name;",
            json!("profile-id"),
        )
        .await;
    assert_eq!(focused_name(&browser).await, json!("profile-id"));
    assert_eq!(browser.count(".profile-editor .field-note").await, 0);
    browser.click(".profile-editor button.cancel").await;

    browser.assert_no_errors().await;
    browser.close().await;
}

// ---------------------------------------------------------------------------------------------
// Issue 17, point 9: profiles

/// A schema-2 Preset with one system block of `content` and the chat history.
fn stack_with(id: &str, content: &str) -> String {
    pretty(&json!({
        "schemaVersion": 2,
        "type": "pi-forge.prompt-stack",
        "id": id,
        "items": [
            { "kind": "block", "id": "1", "role": "system", "content": content },
            { "kind": "slot", "id": "2", "slot": "chat-history" }
        ]
    }))
}

/// The `[text, aria-label]` of every badge in a row's state line.
async fn row_badges(browser: &Browser, row: &str) -> Value {
    browser
        .js(
            "return [...document.querySelectorAll(arguments[0])].map(b => [b.textContent, b.getAttribute('aria-label')]);",
            vec![json!(format!("{row} .row-detail .badge"))],
        )
        .await
}

/// The `[level, message]` of every diagnostic the profile detail lists.
async fn detail_diagnostics(browser: &Browser) -> Value {
    browser
        .js(
            "return [...document.querySelectorAll('.profile-detail .diagnostic-list .diagnostic')].map(d => [d.querySelector('.level').textContent, d.querySelector('.message').textContent]);",
            vec![],
        )
        .await
}

const TONE_WARNING: &str = "Preset project:loose: Template in item 1, line 1, column 1 reads parameters.tone, which this Preset does not define: it renders as nothing.";

/// 9.1: only errors fail a preflight. The problem that blocks a profile whose Preset is broken
/// is an error (the row counts it as one); a Preset's warnings are shown on the profile as
/// warnings, and it stays ready to apply.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_errors_fail_the_preflight_and_warnings_stay_warnings() {
    let server = Server::start_with(
        &[
            (
                &file(STACKS, "strict"),
                &stack_with("strict", "Review.\n{% if parameters.strict %}Be strict."),
            ),
            (
                &file(STACKS, "loose"),
                &stack_with("loose", "{{ parameters.tone }}"),
            ),
            (
                &file(PROFILES, "scout"),
                &pretty(&profile("scout", "Scout", "low", Some("strict"))),
            ),
            (
                &file(PROFILES, "ranger"),
                &pretty(&profile("ranger", "Ranger", "low", Some("loose"))),
            ),
        ],
        &[],
    );
    let browser = Browser::start().await;
    browser.open(&server).await;
    show(&browser, "Profiles").await;

    let scout = ".profile-row[data-selector='project:scout']";
    let ranger = ".profile-row[data-selector='project:ranger']";
    browser.wait_css(scout).await;
    assert_eq!(
        row_badges(&browser, scout).await,
        json!([["preflight failed", null], ["1 ✕", "1 error"]]),
        "the problem that fails the preflight is counted as an error"
    );
    assert_eq!(row_badges(&browser, ranger).await, json!([]));

    browser.click(scout).await;
    browser
        .wait_text(".profile-detail .preflight strong", "Preflight failed")
        .await;
    let levels: Vec<String> = serde_json::from_value(detail_diagnostics(&browser).await)
        .map(|d: Vec<(String, String)>| d.into_iter().map(|(level, _)| level).collect())
        .unwrap();
    assert_eq!(levels, ["error", "error"]);

    browser.click(ranger).await;
    browser
        .wait_text(".profile-detail .preflight strong", "Ready to apply")
        .await;
    assert_eq!(
        detail_diagnostics(&browser).await,
        json!([["warning", TONE_WARNING]])
    );
    // Without a live session the note is about the session, not the preflight.
    assert_eq!(
        browser.text(".profile-detail .apply-note").await.as_deref(),
        Some("Apply needs a live Pi session: start Pi in this project with the pi-forge extension (pi-forge pi install). The preflight below shows what it would do.")
    );

    browser.assert_no_errors().await;
    browser.close().await;
}

/// 9.2: the Preset a profile uses opens in the Presets surface, from the detail and from the
/// form (which asks first when it has unsaved changes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_profiles_preset_opens_in_the_presets_surface() {
    let server = Server::start_with(
        &[
            (&file(STACKS, "default"), &stack("default", "Default")),
            (&file(STACKS, "alternate"), &stack("alternate", "Alternate")),
            (
                &file(PROFILES, "scout"),
                &pretty(&profile("scout", "Scout", "low", Some("default"))),
            ),
        ],
        &[],
    );
    let browser = Browser::start().await;
    browser.open(&server).await;
    browser.wait_text(".status", "Loaded alternate").await;
    show(&browser, "Profiles").await;

    let link = ".profile-detail .transition button.open-preset";
    browser.wait_css(link).await;
    assert_eq!(browser.text(link).await.as_deref(), Some("project:default"));
    browser.click(link).await;
    browser.wait_css(".presets .editor").await;
    browser
        .wait_eq(".editor code.selector", "project:default")
        .await;

    // From the form: a dirty form asks first; Cancel stays, Discard opens the Preset.
    browser.click_text(".surface-tab", "Profiles").await;
    browser.wait_css(".profile-detail button.edit").await;
    browser.click(".profile-detail button.edit").await;
    browser.wait_css("input[name=profile-name]").await;
    let form_link = ".profile-editor button.open-preset";
    assert_eq!(
        browser.text(form_link).await.as_deref(),
        Some("Open this Preset")
    );
    browser
        .fill("input[name=profile-name]", "Scout draft")
        .await;
    browser.wait_css(".profile-editor .badge.dirty").await;
    browser.click(form_link).await;
    browser
        .wait_eq(".modal #dialog-title", "Discard unsaved changes?")
        .await;
    assert_eq!(
        browser.text(".modal p").await.as_deref(),
        Some("You have unsaved changes. Opening the Preset discards them.")
    );
    browser.click(".modal button.cancel").await;
    browser.wait_count(".modal", 0).await;
    assert_eq!(
        browser.value("input[name=profile-name]").await,
        "Scout draft"
    );
    browser.click(form_link).await;
    browser.wait_css(".modal button.confirm").await;
    browser.click(".modal button.confirm").await;
    browser.wait_css(".presets .editor").await;
    browser
        .wait_eq(".editor code.selector", "project:default")
        .await;
    assert_eq!(
        server.read(&file(PROFILES, "scout")),
        pretty(&profile("scout", "Scout", "low", Some("default")))
    );

    browser.assert_no_errors().await;
    browser.close().await;
}

/// 9.4: the profile a fresh session applies carries an "Auto-applies" badge (A8: a project
/// claimant beats a global one; two project claimants mean none applies), and several
/// claimants are a warning that says which one wins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_auto_applying_profile_is_marked_and_rival_claims_are_a_warning() {
    let mut lead = profile("lead", "Lead", "low", Some("default"));
    lead["autoActivate"] = json!(true);
    let mut helper = profile("helper", "Helper", "low", None);
    helper["autoActivate"] = json!(true);
    let server = Server::start_with(
        &[
            (&file(STACKS, "default"), &stack("default", "Default")),
            (&file(PROFILES, "lead"), &pretty(&lead)),
            (
                &file(PROFILES, "scout"),
                &pretty(&profile("scout", "Scout", "low", Some("default"))),
            ),
        ],
        &[],
    );
    let browser = Browser::start().await;
    browser.open(&server).await;
    browser.wait_text(".status", "Loaded default").await;
    show(&browser, "Profiles").await;

    let lead_row = ".profile-row[data-selector='project:lead']";
    browser.wait_css(lead_row).await;
    assert_eq!(
        browser
            .text(&format!("{lead_row} .row-badges"))
            .await
            .as_deref(),
        Some("projectAuto-applies")
    );
    assert_eq!(browser.count(".profile-row .auto-applies").await, 1);
    browser.wait_text(".profile-detail h2", "Lead").await;
    assert_eq!(
        browser
            .text(".profile-detail .title-line .auto-applies")
            .await
            .as_deref(),
        Some("Auto-applies")
    );
    assert_eq!(browser.count(".auto-conflict").await, 0, "one claimant");

    // A global claimant: the project one still wins, and the rivalry is a warning.
    server.write_external(&file(GLOBAL_PROFILES, "helper"), &pretty(&helper));
    browser
        .wait_css(".profile-row[data-selector='global:helper']")
        .await;
    browser
        .wait_eq(
            ".profiles .auto-conflict",
            "Several profiles set autoActivate: global:helper, project:lead. Only project:lead applies when a session starts.",
        )
        .await;
    assert_eq!(
        browser
            .js(
                "return [...document.querySelectorAll('.profile-row .auto-applies')].map(b => b.closest('.profile-row').dataset.selector);",
                vec![]
            )
            .await,
        json!(["project:lead"])
    );

    // A second project claimant: the project's claim is ambiguous, so none applies.
    let mut scout = profile("scout", "Scout", "low", Some("default"));
    scout["autoActivate"] = json!(true);
    server.write_external(&file(PROFILES, "scout"), &pretty(&scout));
    browser
        .wait_eq(
            ".profiles .auto-conflict",
            "Several profiles set autoActivate: global:helper, project:lead, project:scout. None applies when a session starts.",
        )
        .await;
    browser.wait_count(".auto-applies", 0).await;

    browser.assert_no_errors().await;
    browser.close().await;
}

/// 9.5: in dark mode a disabled Apply does not look like an enabled primary button. And 9.3
/// without a live session: no model list, so no model warning.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disabled_apply_looks_disabled_in_dark_mode() {
    let server = Server::start_with(
        &[
            (&file(STACKS, "default"), &stack("default", "Default")),
            (
                &file(PROFILES, "scout"),
                &pretty(&profile("scout", "Scout", "low", Some("default"))),
            ),
        ],
        &[],
    );
    let browser = Browser::start().await;
    browser.open(&server).await;
    browser.wait_text(".status", "Loaded default").await;
    browser.click("button.theme-toggle").await;
    assert_eq!(
        browser
            .js(
                "return document.documentElement.getAttribute('data-theme');",
                vec![]
            )
            .await,
        json!("dark")
    );
    show(&browser, "Profiles").await;
    browser
        .wait_text(".profile-detail .preflight strong", "Ready to apply")
        .await;
    let look = "const s = getComputedStyle(document.querySelector(arguments[0])); return [s.backgroundColor, s.color, s.opacity];";
    assert!(!browser.enabled(".profile-detail button.apply").await);
    let disabled = browser
        .js(look, vec![json!(".profile-detail button.apply")])
        .await;
    assert_eq!(
        disabled,
        json!(["rgb(35, 38, 45)", "rgb(154, 160, 173)", "0.8"])
    );

    // An enabled primary button (Create in a new profile's form) keeps the accent.
    browser.click(".new-profile").await;
    browser.fill("input[name=profile-id]", "second").await;
    browser.fill("input[name=profile-provider]", "test").await;
    browser.fill("input[name=profile-model]", "whatever").await;
    assert!(browser.enabled(".profile-editor button.save-profile").await);
    let enabled = browser
        .js(look, vec![json!(".profile-editor button.save-profile")])
        .await;
    assert_eq!(
        enabled,
        json!(["rgb(142, 162, 255)", "rgb(16, 18, 26)", "1"])
    );
    // No live session, no model list: nothing to check a model against.
    assert_eq!(browser.count(".model-warning").await, 0);
    assert_eq!(browser.count("#model-ids option").await, 0);

    browser.assert_no_errors().await;
    browser.close().await;
}

const LIVE_LOOSE: &str = r#"{
  "schemaVersion": 2,
  "type": "pi-forge.prompt-stack",
  "id": "loose",
  "items": [
    { "id": "1", "kind": "block", "role": "system", "content": "{{ parameters.tone }}" },
    { "id": "2", "kind": "slot", "slot": "chat-history" }
  ]
}
"#;

/// A profile of the fake provider's `model` on the `loose` Preset.
fn live_profile(id: &str, model: &str) -> String {
    pretty(&json!({
        "schemaVersion": 1,
        "type": "pi-forge.agent-profile",
        "id": id,
        "model": { "provider": "fake", "id": model },
        "thinkingLevel": "low",
        "promptStack": "loose"
    }))
}

/// 9.1 and 9.3 with a real Pi: a warning (the Preset's, or a model Pi does not report) leaves
/// Apply enabled; the form suggests Pi's models and warns about one it does not report.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_pi_warnings_keep_apply_enabled_and_unknown_models_are_flagged() {
    let ws = pi::Workspace::new(&[
        (".pi/forge/prompt-stacks/loose.json", LIVE_LOOSE),
        (
            ".pi/forge/agent-profiles/typo.json",
            &live_profile("typo", "fake-9"),
        ),
    ]);
    let mut pi = ws.pi(&["--no-session"]);
    pi.connected();
    let browser = ws.browser().await;
    browser.click_text(".surface-tab", "Profiles").await;
    browser
        .wait_text(".profile-detail .preflight strong", "Ready to apply")
        .await;
    browser
        .wait_css(".profile-detail button.apply:not([disabled])")
        .await;
    assert_eq!(
        detail_diagnostics(&browser).await,
        json!([
            ["warning", TONE_WARNING],
            [
                "warning",
                "Model fake/fake-9 is not among the models Pi reports."
            ]
        ])
    );

    browser.click(".profile-detail button.edit").await;
    browser.wait_css("input[name=profile-model]").await;
    let warning = ".profile-editor .model-warning";
    browser
        .wait_eq(
            warning,
            "Model fake/fake-9 is not among the models Pi reports.",
        )
        .await;
    assert_eq!(
        browser
            .js(
                "return [...document.querySelectorAll('#model-ids option')].map(o => o.value);",
                vec![]
            )
            .await,
        json!(["fake-1", "fake-2"])
    );
    assert_eq!(
        browser
            .js(
                "return [...document.querySelectorAll('#model-providers option')].map(o => o.value);",
                vec![]
            )
            .await,
        json!(["fake"])
    );
    browser.fill("input[name=profile-model]", "fake-2").await;
    browser.wait_count(warning, 0).await;
    browser.fill("input[name=profile-provider]", "fak").await;
    browser
        .wait_eq(
            warning,
            "Model fak/fake-2 is not among the models Pi reports.",
        )
        .await;
    // A warning, not an error: Save stays enabled.
    assert!(browser.enabled(".profile-editor button.save-profile").await);

    browser.assert_no_errors().await;
    browser.close().await;
}
