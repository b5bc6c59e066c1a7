//! The stack list and the page, serialized once per workspace snapshot.
//!
//! `GET /api/stacks` and `GET /` (which embeds the same list, so the app renders it without a
//! request) depend only on the snapshot and the live session's active Preset. [`ViewCache`]
//! keeps the bytes built for the newest pair (and their compressed variants, made on first
//! demand) and hands them out until either changes; a request then costs a pointer comparison.

use std::path::Path;
use std::sync::{Arc, OnceLock, Weak};

use arc_swap::ArcSwapOption;
use axum::body::Bytes;
use forge_core::api::StackList;
use forge_core::diag::Diagnostic;
use forge_core::json;
use forge_core::workspace::WorkspaceSnapshot;
use serde_json::Value;

use super::encoding::Encoded;
use super::first_screen;
use super::views::stack_summary;
use crate::state::WorkspaceHandle;

/// The views of one snapshot with one active Preset.
pub struct Views {
    snapshot: Weak<WorkspaceSnapshot>,
    active: Option<String>,
    /// The workspace problems the list reports (a few entries; they can change without a new
    /// snapshot, e.g. when a folder cannot be watched).
    problems: Vec<Diagnostic>,
    /// The workspace generation read before the snapshot: never newer than it.
    generation: u64,
    /// `GET /api/stacks`.
    pub list: Encoded,
    /// The same list, for the page's first screen.
    list_value: StackList,
    /// `GET /`: the page with the list embedded, light and dark; `None` without a web bundle.
    page: [OnceLock<Option<Encoded>>; 2],
}

impl Views {
    /// The page: `index.html` in the light or dark theme, with the first screen in place of its
    /// loading line and the initial data as a JSON script element before `</body>`.
    pub fn page(&self, dark: bool) -> Option<&Encoded> {
        self.page[usize::from(dark)]
            .get_or_init(|| {
                let html = super::assets::index_html()?;
                let html = with_first_screen(html, &first_screen::render(&self.list_value, dark));
                let html = if dark {
                    html.replacen(
                        "<html lang=\"en\">",
                        "<html lang=\"en\" data-theme=\"dark\">",
                        1,
                    )
                } else {
                    html
                };
                Some(Encoded::on_demand(Bytes::from(embed_initial(
                    &html,
                    self.generation,
                    self.list.identity(),
                ))))
            })
            .as_ref()
    }

    fn is_for(
        &self,
        snapshot: &Arc<WorkspaceSnapshot>,
        active: &Option<String>,
        problems: &[Diagnostic],
    ) -> bool {
        // A `Weak` keeps the allocation, so a new snapshot can never reuse a dead one's address.
        std::ptr::eq(self.snapshot.as_ptr(), Arc::as_ptr(snapshot))
            && self.active == *active
            && self.problems == problems
    }
}

/// The one owner of the cached views.
#[derive(Default)]
pub struct ViewCache {
    current: ArcSwapOption<Views>,
}

impl ViewCache {
    /// The views of the current snapshot and active Preset, built when either changed.
    pub fn current(
        &self,
        ws: &WorkspaceHandle,
        active: Option<String>,
        project: &Path,
    ) -> Arc<Views> {
        let generation = ws.generation();
        let snapshot = ws.snapshot();
        let problems = ws.problems();
        if let Some(views) = self.current.load_full() {
            if views.is_for(&snapshot, &active, &problems) {
                return views;
            }
        }
        let list_value = stack_list(project, &snapshot, active.as_deref(), &problems);
        // Plain data: serializing it cannot fail.
        let list = json::to_compact(&serde_json::to_value(&list_value).unwrap_or(Value::Null));
        let views = Arc::new(Views {
            snapshot: Arc::downgrade(&snapshot),
            active,
            problems,
            generation,
            list: Encoded::on_demand(Bytes::from(list)),
            list_value,
            page: Default::default(),
        });
        self.current.store(Some(Arc::clone(&views)));
        views
    }
}

/// `GET /api/stacks`: `{stacks, activeId, trusted, cwd, problems}`.
fn stack_list(
    project: &Path,
    snapshot: &WorkspaceSnapshot,
    active: Option<&str>,
    problems: &[Diagnostic],
) -> StackList {
    StackList {
        stacks: snapshot
            .stacks
            .iter()
            .map(|e| stack_summary(e, snapshot, active))
            .collect(),
        active_id: active.map(str::to_string),
        trusted: snapshot.trusted,
        cwd: project.display().to_string(),
        problems: problems.to_vec(),
    }
}

/// The element `index.html` paints while the app loads; the first screen takes its place.
const SPLASH_START: &str = "<p id=\"boot-splash\"";

/// `html` with its loading line (`<p id="boot-splash" …>…</p>`) replaced by `first_screen`;
/// unchanged when the page has no loading line.
pub fn with_first_screen(html: &str, first_screen: &str) -> String {
    let Some(start) = html.find(SPLASH_START) else {
        return html.to_string();
    };
    let Some(len) = html[start..].find("</p>") else {
        return html.to_string();
    };
    let end = start + len + "</p>".len();
    format!("{}{first_screen}{}", &html[..start], &html[end..])
}

/// The id of the script element that carries the initial data.
pub const INITIAL_ID: &str = "forge-initial";

/// `html` with `<script type="application/json" id="forge-initial">{"generation":…,"list":…}
/// </script>` inserted before `</body>` (appended when there is none). Every `<` of the JSON is
/// written as `\u003c`, so no text in it can end the element.
pub fn embed_initial(html: &str, generation: u64, list: &[u8]) -> String {
    let list = String::from_utf8_lossy(list).replace('<', "\\u003c");
    let element = format!(
        "<script type=\"application/json\" id=\"{INITIAL_ID}\">{{\"generation\":{generation},\"list\":{list}}}</script>\n"
    );
    match html.rfind("</body>") {
        Some(at) => format!("{}{element}{}", &html[..at], &html[at..]),
        None => format!("{html}{element}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_screen_takes_the_place_of_the_loading_line() {
        let page = "<body>\n<p id=\"boot-splash\" class=\"boot-splash\"><b>x</b> y</p>\n<noscript>n</noscript></body>";
        assert_eq!(
            with_first_screen(page, "<div id=\"f\"></div>"),
            "<body>\n<div id=\"f\"></div>\n<noscript>n</noscript></body>"
        );
        assert_eq!(with_first_screen("<body></body>", "<div>"), "<body></body>");
        assert_eq!(
            with_first_screen("<p id=\"boot-splash\">", "<div>"),
            "<p id=\"boot-splash\">"
        );
    }

    #[test]
    fn the_initial_data_goes_before_the_body_end_and_cannot_close_its_element() {
        let list = br#"{"stacks":[{"name":"</script><script>alert(1)</script> <!--"}]}"#;
        let page = embed_initial("<html><body><p>x</p></body></html>", 7, list);
        assert_eq!(
            page,
            "<html><body><p>x</p><script type=\"application/json\" id=\"forge-initial\">\
             {\"generation\":7,\"list\":{\"stacks\":[{\"name\":\"\\u003c/script>\\u003cscript>alert(1)\\u003c/script> \\u003c!--\"}]}}\
             </script>\n</body></html>"
        );
        let start = page.find("\">").unwrap() + 2;
        let end = page.rfind("</script>").unwrap();
        let data: Value = serde_json::from_str(&page[start..end]).unwrap();
        assert_eq!(data["generation"], 7);
        assert_eq!(
            data["list"]["stacks"][0]["name"],
            "</script><script>alert(1)</script> <!--"
        );
        assert_eq!(
            embed_initial("<p>no body end</p>", 0, b"{}"),
            "<p>no body end</p><script type=\"application/json\" id=\"forge-initial\">{\"generation\":0,\"list\":{}}</script>\n"
        );
    }
}
