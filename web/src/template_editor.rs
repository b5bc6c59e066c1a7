//! The template editor of a block's content: a native textarea (typing, selection, undo, IME
//! and screen readers stay the browser's) over a highlighted copy of its text, with line
//! numbers, the tags that belong to the caret's tag marked, template errors underlined where
//! they are and listed with their line and column, completion (`runtime.*`, `parameters.*`,
//! filters, statements) and the value of the path under the pointer or the caret.
//!
//! Everything about the text comes from forge-core's `template::assist` (lexer, analysis,
//! completion, hover, the HTML of each line). Per keystroke the editor re-lexes the whole text
//! and then touches only the lines that changed: the previous lines' HTML is kept, and the
//! common prefix and suffix are left in the DOM.
//!
//! The values come from the preview environment: the server's `templateEnv` of the draft
//! (fetched when the editor gets the focus and after typing pauses), with the draft's own
//! parameters.

use std::time::Duration;

use forge_core::template::assist::{self, Completion, Lexed};
use forge_core::template::Scope;
use leptos::html;
use leptos::prelude::*;
use leptos::task::spawn_local;
use serde_json::{json, Value};
use wasm_bindgen::JsCast;

use crate::api::{self, seg};
use crate::jp;
use crate::state::app;

/// What the editor remembers between keystrokes (not reactive).
#[derive(Default)]
struct Painted {
    /// The HTML of every line now in the highlight layer.
    lines: Vec<String>,
    lexed: Lexed,
    /// The text the layer shows.
    text: String,
    /// UTF-16 offset of each line's start.
    line_starts: Vec<usize>,
    /// The caret the matching tags were marked for.
    caret: Option<usize>,
}

/// The completion list's width range (px; app.css `.tpl-complete` has the same minimum).
const COMPLETE_MIN_WIDTH: f64 = 220.0;
const COMPLETE_MAX_WIDTH: f64 = 440.0;

/// The completion list on screen: the completion, the chosen entry, where it is drawn.
#[derive(Clone, PartialEq)]
struct Popup {
    completion: Completion,
    chosen: usize,
    left: f64,
    top: f64,
    /// The room right of `left` inside the editor: the list never runs past its edge.
    max_width: f64,
}

fn document() -> Option<web_sys::Document> {
    web_sys::window().and_then(|w| w.document())
}

/// The editor for the content of item `i` (a forge-v1 template).
#[component]
pub fn TemplateEditor(i: usize) -> impl IntoView {
    let ed = app().editor;
    let path = format!("/items/{i}/content");
    let area_id = format!("item-content-{i}");
    let list_id = format!("tpl-complete-{i}");
    let errors_id = format!("tpl-errors-{i}");
    let status_id = format!("tpl-status-{i}");

    let area: NodeRef<html::Textarea> = NodeRef::new();
    let layer: NodeRef<html::Pre> = NodeRef::new();
    let painted: StoredValue<Painted> = StoredValue::new(Painted::default());
    // The caret (UTF-16) while the textarea has the focus.
    let caret: RwSignal<Option<usize>> = RwSignal::new(None);
    let focused = RwSignal::new(false);
    // Ctrl+Space: paint again at the same caret, with completions.
    let nudge = RwSignal::new(0u64);
    let errors: RwSignal<Vec<assist::LocatedError>> = RwSignal::new(Vec::new());
    let popup: RwSignal<Option<Popup>> = RwSignal::new(None);
    // Set by typing inside a tag (or Ctrl+Space): the next paint offers completions.
    let wants_completion = StoredValue::new(false);
    // Set while an accepted completion is inserted: that input opens no list.
    let accepting = StoredValue::new(false);
    let hover_text: RwSignal<Option<Tip>> = RwSignal::new(None);
    // A resized window moves the text under the tooltip: it goes until the pointer moves again.
    let resize = window_event_listener(leptos::ev::resize, move |_| {
        if hover_text.try_with_untracked(Option::is_some) == Some(true) {
            hover_text.set(None);
        }
    });
    on_cleanup(move || resize.remove());
    let caret_place: RwSignal<String> = RwSignal::new(String::new());
    let caret_path: RwSignal<String> = RwSignal::new(String::new());
    let env: RwSignal<Option<Value>> = RwSignal::new(None);
    let env_seq = StoredValue::new(0u64);

    let read_path = path.clone();
    let text = move || ed.draft.with(|d| jp::get_str(d, &read_path));

    // The scope completion and hover use: the preview's runtime, the draft's parameters.
    let scope = move || {
        let runtime = env
            .with_untracked(|e| e.as_ref().and_then(|e| e.get("runtime").cloned()))
            .unwrap_or_else(|| json!({}));
        let parameters = ed
            .draft
            .with_untracked(|d| jp::get(d, "/parameters").cloned())
            .filter(Value::is_object)
            .unwrap_or_else(|| json!({}));
        Scope::new(runtime, parameters)
    };

    // Paint the layer for a text and caret, unless it shows them already. Typing paints from
    // the input handler itself, before any other work the keystroke causes; the effect below
    // paints whatever else changes the text (undo, a reload, another tab's save).
    let repaint = move |text: String, at: Option<usize>| {
        let Some(layer) = layer.get_untracked() else {
            return;
        };
        if painted.with_value(|p| p.caret == at && p.text == text && !p.lines.is_empty()) {
            return;
        }
        let byte_caret = at.map(|u| assist::byte_offset(&text, u));
        let highlighted = assist::highlight(&text, byte_caret);
        painted.update_value(|p| {
            patch_lines(&layer, &p.lines, &highlighted.lines);
            p.lines = highlighted.lines;
            p.lexed = highlighted.lexed;
            p.line_starts = line_starts(&text);
            p.text = text;
            p.caret = at;
        });
        // The layer follows the textarea's scroll at the next frame (reading the scroll now
        // would lay the new lines out at once, and the frame does it anyway).
        request_animation_frame(move || {
            if let Some(a) = area.try_get_untracked().flatten() {
                layer.set_scroll_top(a.scroll_top());
            }
        });
        if errors.with_untracked(|e| *e != highlighted.errors) {
            errors.set(highlighted.errors);
        }
    };
    let paint_text = text.clone();
    Effect::new(move |_| {
        let text = paint_text();
        let at = caret.get();
        nudge.track();
        let Some(layer) = layer.get() else {
            return;
        };
        repaint(text, at);
        let layer: web_sys::HtmlElement = layer.into();
        // The caret's place and the value of the path it is in.
        // The visible line shows both; the screen reader hears the path's value only when the
        // caret enters another path (the textarea's own description never changes per
        // keystroke: that would make the browser re-read the whole text for its accessibility
        // tree, tens of milliseconds on a long template).
        let (place, path) = at
            .map(|u| {
                painted.with_value(|p| {
                    let line = p.line_starts.partition_point(|&s| s <= u).max(1);
                    let column = u - p.line_starts[line - 1] + 1;
                    let b = assist::byte_offset(&p.text, u);
                    (
                        format!("Line {line}, column {column}"),
                        assist::hover(&p.text, &p.lexed, b, &scope())
                            .map(|h| h.describe())
                            .unwrap_or_default(),
                    )
                })
            })
            .unwrap_or_default();
        if caret_place.with_untracked(|c| *c != place) {
            caret_place.set(place);
        }
        if caret_path.with_untracked(|c| *c != path) {
            caret_path.set(path);
        }
        if wants_completion.get_value() {
            wants_completion.set_value(false);
            show_completion(&layer, area, painted, at, scope(), popup);
        } else if popup.with_untracked(Option::is_some) {
            // The caret moved: keep the list only while it still completes the same word.
            let still = at.is_some_and(|u| {
                painted.with_value(|p| {
                    let b = assist::byte_offset(&p.text, u);
                    popup.with_untracked(|pp| {
                        pp.as_ref()
                            .is_some_and(|pp| b >= pp.completion.from && b <= pp.completion.to)
                    })
                })
            });
            if !still {
                close_popup(popup);
            }
        }
    });

    // The preview environment: at once when the editor appears, then after each pause in
    // typing while it has the focus.
    // Any change of the draft can change them (its tool policy, slots and parameters too).
    Effect::new(move |_| {
        ed.draft.track();
        if !focused.get() && env.with_untracked(Option::is_some) {
            return;
        }
        let Some(sel) = ed
            .loaded
            .with_untracked(|l| l.as_ref().map(|l| l.selector.clone()))
        else {
            return;
        };
        let my = env_seq.get_value() + 1;
        env_seq.set_value(my);
        let delay = if env.with_untracked(Option::is_none) {
            0
        } else {
            400
        };
        set_timeout(
            move || {
                // The editor may be gone by now (another item, another Preset).
                if env_seq.try_get_value() != Some(my) {
                    return;
                }
                let Some(draft) = ed.draft.try_get_untracked() else {
                    return;
                };
                spawn_local(async move {
                    let path = format!("/api/stacks/{}/template-env", seg(&sel));
                    let result = api::post_as::<forge_core::api::TemplateEnv>(
                        &path,
                        &json!({ "stack": draft }),
                    )
                    .await;
                    if env_seq.try_get_value() == Some(my) {
                        if let Ok(found) = result {
                            env.try_set(Some(
                                json!({"runtime": found.runtime, "parameters": found.parameters}),
                            ));
                        }
                    }
                });
            },
            Duration::from_millis(delay),
        );
    });

    let set_path = path.clone();
    let sync_caret = move || {
        if let Some(area) = area.get_untracked() {
            let at = area.selection_start().ok().flatten().map(|u| u as usize);
            if caret.get_untracked() != at {
                caret.set(at);
            }
        }
    };
    let on_input = move |e: leptos::ev::Event| {
        let value = event_target_value(&e);
        // Typing (not deleting) inside a tag offers completions.
        let typed = e
            .dyn_ref::<web_sys::InputEvent>()
            .map(|ie| ie.input_type() == "insertText")
            .unwrap_or(false);
        wants_completion
            .set_value(!accepting.get_value() && (typed || popup.with_untracked(Option::is_some)));
        let at = area
            .get_untracked()
            .and_then(|a| a.selection_start().ok().flatten())
            .map(|u| u as usize);
        repaint(value.clone(), at);
        ed.set(&set_path, Some(Value::String(value)));
        // The caret read above (reading it again now would force a layout of the new lines).
        if caret.get_untracked() != at {
            caret.set(at);
        }
    };
    let accept = move |index: usize| {
        let Some(p) = popup.get_untracked() else {
            return;
        };
        let Some(item) = p.completion.items.get(index) else {
            return;
        };
        if item.kind == assist::ItemKind::Hint {
            close_popup(popup);
            return;
        }
        let Some(el) = area.get_untracked() else {
            return;
        };
        let (from, to) = painted.with_value(|pt| {
            (
                assist::utf16_offset(&pt.text, p.completion.from),
                assist::utf16_offset(&pt.text, p.completion.to),
            )
        });
        close_popup(popup);
        let _ = el.focus();
        let _ = el.set_selection_range(from as u32, to as u32);
        accepting.set_value(true);
        insert_text(&el, &item.insert);
        accepting.set_value(false);
    };
    let on_keydown = move |e: leptos::ev::KeyboardEvent| {
        let key = e.key();
        if (e.ctrl_key() || e.meta_key()) && key == " " {
            e.prevent_default();
            wants_completion.set_value(true);
            sync_caret();
            nudge.update(|n| *n += 1);
            return;
        }
        let Some(p) = popup.get_untracked() else {
            return;
        };
        let n = p.completion.items.len();
        match key.as_str() {
            "ArrowDown" | "ArrowUp" => {
                e.prevent_default();
                let chosen = if key == "ArrowDown" {
                    (p.chosen + 1) % n
                } else {
                    (p.chosen + n - 1) % n
                };
                popup.set(Some(Popup { chosen, ..p }));
            }
            "Enter" | "Tab" => {
                e.prevent_default();
                accept(p.chosen);
            }
            "Escape" => {
                e.prevent_default();
                e.stop_propagation();
                close_popup(popup);
            }
            _ => {}
        }
    };
    // Hover: the offset under the pointer, read from the highlight layer.
    let hover_frame = StoredValue::new(false);
    let on_mousemove = move |e: leptos::ev::MouseEvent| {
        if hover_frame.get_value() {
            return;
        }
        hover_frame.set_value(true);
        let (x, y) = (e.client_x() as f64, e.client_y() as f64);
        request_animation_frame(move || {
            if hover_frame.try_set_value(false).is_some() {
                return; // the editor is gone
            }
            let (Some(el), Some(layer)) = (
                area.try_get_untracked().flatten(),
                layer.try_get_untracked().flatten(),
            ) else {
                return;
            };
            let found = offset_at_point(&el, &layer, painted, x, y).and_then(|u| {
                painted.with_value(|p| {
                    let b = assist::byte_offset(&p.text, u);
                    assist::hover(&p.text, &p.lexed, b, &scope())
                })
            });
            let body = layer.parent_element();
            let shown = found.zip(body).map(|(h, body)| {
                let r = body.get_bounding_client_rect();
                Tip::new(h.describe(), x - r.left(), y - r.top() + 18.0, r.width())
            });
            if hover_text.with_untracked(|h| *h != shown) {
                hover_text.set(shown);
            }
        });
    };

    let goto = move |span: forge_core::template::Span| {
        if let Some(el) = area.get_untracked() {
            let _ = el.focus();
            let _ = el.set_selection_range(span.start as u32, span.end.max(span.start) as u32);
            sync_caret();
        }
    };

    let invalid = move || errors.with(|e| !e.is_empty());
    let active = {
        let list_id = list_id.clone();
        move || {
            popup.with(|p| {
                p.as_ref()
                    .map(|p| format!("{list_id}-{}", p.chosen))
                    .unwrap_or_default()
            })
        }
    };
    let described = errors_id.clone();
    let list_id_view = list_id.clone();
    let list_id_attr = list_id.clone();
    view! {
        <div class="field wide tpl">
            <label class="label" for=area_id.clone()>"Content (forge-v1 template)"</label>
            <div class="tpl-body" data-env=move || if env.with(Option::is_some) { "ready" } else { "loading" }
                on:mouseleave=move |_| hover_text.set(None)>
                <pre class="tpl-hl" aria-hidden="true" node_ref=layer></pre>
                <textarea id=area_id name="item-content" rows=14 spellcheck="false" node_ref=area
                    autocomplete="off" aria-autocomplete="list" aria-controls=list_id.clone()
                    aria-describedby=described
                    aria-invalid=move || if invalid() { "true" } else { "false" }
                    aria-activedescendant=active
                    prop:value=text
                    on:input=on_input
                    on:keydown=on_keydown
                    on:keyup=move |_| sync_caret()
                    on:click=move |_| sync_caret()
                    on:focus=move |_| { focused.set(true); sync_caret(); }
                    on:blur=move |_| { focused.set(false); caret.set(None); close_popup(popup); }
                    on:scroll=move |_| {
                        if let (Some(a), Some(l)) = (area.get_untracked(), layer.get_untracked()) {
                            l.set_scroll_top(a.scroll_top());
                        }
                        close_popup(popup);
                        hover_text.set(None);
                    }
                    on:mousemove=on_mousemove></textarea>
                <ul class="tpl-complete" role="listbox" id=list_id_attr aria-label="Completions"
                    hidden=move || popup.with(Option::is_none)
                    style:left=move || popup.with(|p| p.as_ref().map(|p| format!("{}px", p.left)).unwrap_or_default())
                    style:top=move || popup.with(|p| p.as_ref().map(|p| format!("{}px", p.top)).unwrap_or_default())
                    style:max-width=move || popup.with(|p| p.as_ref().map(|p| format!("{}px", p.max_width)).unwrap_or_default())>
                    {move || popup.get().map(|p| {
                        let list_id = list_id_view.clone();
                        p.completion.items.iter().enumerate().map(|(k, item)| {
                            let chosen = k == p.chosen;
                            view! {
                                <li role="option" id=format!("{list_id}-{k}") aria-selected=if chosen { "true" } else { "false" }
                                    class:chosen=chosen
                                    on:mousedown=move |e| { e.prevent_default(); accept(k); }>
                                    <span class="tpl-opt-label">{item.label.clone()}</span>
                                    <span class="tpl-opt-detail">{item.detail.clone()}</span>
                                </li>
                            }
                        }).collect_view()
                    })}
                </ul>
                {move || hover_text.get().map(|tip| view! {
                    <div class="tpl-hover" role="tooltip"
                        style:left=tip.left.map(|l| format!("{l}px")).unwrap_or_default()
                        style:right=tip.right.map(|r| format!("{r}px")).unwrap_or_default()
                        style:top=format!("{}px", tip.top)
                        style:max-width=format!("min(60ch, {}px)", tip.room)>{tip.text}</div>
                })}
            </div>
            <p class="tpl-status" id=status_id aria-hidden="true">{move || {
                let place = caret_place.get();
                caret_path.with(|p| if p.is_empty() { place.clone() } else { format!("{place} · {p}") })
            }}</p>
            <p class="sr-only" aria-live="polite">{move || caret_path.get()}</p>
            <ul class="tpl-errors" id=errors_id>
                {move || errors.get().into_iter().map(|e| {
                    let span = e.span;
                    view! {
                        <li class="field-error">
                            <button type="button" class="link tpl-goto" on:click=move |_| goto(span)>
                                {format!("Line {}, column {}", e.line, e.column)}
                            </button>
                            ": " {e.message}
                        </li>
                    }
                }).collect_view()}
            </ul>
        </div>
    }
}

/// The tooltip of the path under the pointer: anchored at the pointer's left in the left half of
/// the editor and at its right in the right half, so it grows into the room there is.
#[derive(Clone, PartialEq)]
struct Tip {
    text: String,
    left: Option<f64>,
    right: Option<f64>,
    top: f64,
    /// The widest it may be without leaving the editor.
    room: f64,
}

impl Tip {
    fn new(text: String, x: f64, top: f64, width: f64) -> Tip {
        let x = x.clamp(0.0, width);
        let (left, right, room) = if x <= width / 2.0 {
            (Some(x), None, width - x)
        } else {
            (None, Some(width - x), x)
        };
        Tip {
            text,
            left,
            right,
            top,
            room: (room - 4.0).max(120.0),
        }
    }
}

/// Hides the completion list. Only a real change notifies: the textarea's attributes follow the
/// list (`aria-activedescendant`), and touching them on every keystroke makes the browser
/// restyle the whole text of the textarea.
fn close_popup(popup: RwSignal<Option<Popup>>) {
    if popup.with_untracked(Option::is_some) {
        popup.set(None);
    }
}

/// UTF-16 offset of every line's start.
fn line_starts(text: &str) -> Vec<usize> {
    let mut starts = vec![0];
    let mut units = 0;
    for c in text.chars() {
        units += c.len_utf16();
        if c == '\n' {
            starts.push(units);
        }
    }
    starts
}

/// Replaces the lines that differ from what the layer shows (the common prefix and suffix stay
/// in the DOM).
fn patch_lines(layer: &web_sys::HtmlElement, old: &[String], new: &[String]) {
    let children = layer.children();
    if children.length() as usize != old.len() {
        // Never painted (or changed behind our back): paint everything.
        layer.set_inner_html(&join_lines(new));
        return;
    }
    let prefix = old.iter().zip(new).take_while(|(a, b)| a == b).count();
    let max_suffix = old.len().min(new.len()) - prefix;
    let suffix = old
        .iter()
        .rev()
        .zip(new.iter().rev())
        .take(max_suffix)
        .take_while(|(a, b)| a == b)
        .count();
    // Lines that changed in place get new contents (their `div` stays: a replaced element
    // costs the browser a layout of every line); lines added or removed come and go after them.
    let old_end = old.len() - suffix;
    let new_end = new.len() - suffix;
    let in_place = (old_end - prefix).min(new_end - prefix);
    for k in 0..in_place {
        if let Some(line) = children.item((prefix + k) as u32) {
            line.set_inner_html(&new[prefix + k]);
        }
    }
    let at = prefix + in_place;
    for _ in at..old_end {
        if let Some(line) = children.item(at as u32) {
            line.remove();
        }
    }
    let html = join_lines(&new[at..new_end]);
    if html.is_empty() {
        return;
    }
    match children.item(at as u32) {
        Some(next) => {
            let _ = next.insert_adjacent_html("beforebegin", &html);
        }
        None => {
            let _ = layer.insert_adjacent_html("beforeend", &html);
        }
    }
}

fn join_lines(lines: &[String]) -> String {
    let mut html = String::with_capacity(lines.iter().map(|l| l.len() + 24).sum());
    for line in lines {
        html.push_str("<div class=\"tl\">");
        html.push_str(line);
        html.push_str("</div>");
    }
    html
}

/// Inserts text at the textarea's selection the way typing does (an `input` event follows,
/// and the browser's own undo knows the change).
fn insert_text(area: &web_sys::HtmlTextAreaElement, text: &str) {
    let inserted = document()
        .and_then(|d| d.dyn_into::<web_sys::HtmlDocument>().ok())
        .and_then(|d| {
            d.exec_command_with_show_ui_and_value("insertText", false, text)
                .ok()
        })
        .unwrap_or(false);
    if !inserted {
        let _ = area.set_range_text(text);
        if let Ok(event) = web_sys::Event::new("input") {
            let _ = area.dispatch_event(&event);
        }
    }
}

/// Where the caret is drawn: (left, bottom) of UTF-16 offset `at` in the layer, relative to the
/// layer's parent.
fn caret_point(layer: &web_sys::HtmlElement, line: usize, column: usize) -> Option<(f64, f64)> {
    let div = layer.children().item(line as u32)?;
    let (node, offset) = text_position(&div, column)?;
    let range = document()?.create_range().ok()?;
    range.set_start(&node, offset as u32).ok()?;
    range.collapse_with_to_start(true);
    let rect = range.get_bounding_client_rect();
    let body = layer.parent_element()?.get_bounding_client_rect();
    let (left, bottom) = if rect.height() > 0.0 {
        (rect.left(), rect.bottom())
    } else {
        let r = div.get_bounding_client_rect();
        (r.left(), r.bottom())
    };
    Some((left - body.left(), bottom - body.top()))
}

/// The text node and offset within it of UTF-16 column `column` of a line `div`.
fn text_position(div: &web_sys::Element, column: usize) -> Option<(web_sys::Node, usize)> {
    let mut left = column;
    let children = div.child_nodes();
    let mut last = None;
    for k in 0..children.length() {
        let child = children.item(k)?;
        let node = if child.node_type() == web_sys::Node::TEXT_NODE {
            child
        } else {
            child.first_child()?
        };
        let len = node
            .text_content()
            .map_or(0, |t: String| forge_core::json::utf16_len(&t));
        if left <= len {
            return Some((node, left));
        }
        left -= len;
        last = Some((node, len));
    }
    last.or_else(|| Some((div.clone().into(), 0)))
}

/// The UTF-16 offset of the text under a point, read from the highlight layer under the
/// textarea (the textarea lets the point through for the moment of the lookup).
fn offset_at_point(
    area: &web_sys::HtmlTextAreaElement,
    layer: &web_sys::HtmlElement,
    painted: StoredValue<Painted>,
    x: f64,
    y: f64,
) -> Option<usize> {
    // Hit testing skips `pointer-events: none`: for this one lookup the layer takes the
    // pointer and the textarea lets it through.
    let area_style = web_sys::HtmlElement::style(area);
    let layer_style = layer.style();
    let _ = area_style.set_property("pointer-events", "none");
    let _ = layer_style.set_property("pointer-events", "auto");
    let position = document()?.caret_position_from_point(x as f32, y as f32);
    let _ = area_style.remove_property("pointer-events");
    let _ = layer_style.remove_property("pointer-events");
    let position = position?;
    let node = position.offset_node()?;
    let offset = position.offset() as usize;
    // Up to the line `div`, counting the text before the node.
    let mut column = offset;
    let mut current = node;
    loop {
        let parent = current.parent_node()?;
        if parent.is_same_node(Some(layer.as_ref())) {
            let line = index_of(&current)?;
            return painted.with_value(|p| p.line_starts.get(line).map(|s| s + column));
        }
        let mut sibling = current.previous_sibling();
        while let Some(s) = sibling {
            column += s
                .text_content()
                .map_or(0, |t: String| forge_core::json::utf16_len(&t));
            sibling = s.previous_sibling();
        }
        current = parent;
    }
}

/// The index of a line among the layer's elements (what `children()` counts).
fn index_of(node: &web_sys::Node) -> Option<usize> {
    let mut index = 0;
    let mut sibling = node
        .dyn_ref::<web_sys::Element>()?
        .previous_element_sibling();
    while let Some(s) = sibling {
        index += 1;
        sibling = s.previous_element_sibling();
    }
    Some(index)
}

/// Computes the completion at the caret and shows it under the caret (or hides the list).
fn show_completion(
    layer: &web_sys::HtmlElement,
    area: NodeRef<html::Textarea>,
    painted: StoredValue<Painted>,
    at: Option<usize>,
    scope: Scope,
    popup: RwSignal<Option<Popup>>,
) {
    let Some(at) = at else {
        close_popup(popup);
        return;
    };
    let found = painted.with_value(|p| {
        let b = assist::byte_offset(&p.text, at);
        let completion = assist::complete(&p.text, &p.lexed, b, &scope)?;
        let line = p.line_starts.partition_point(|&s| s <= at).max(1) - 1;
        Some((completion, line, at - p.line_starts[line]))
    });
    let Some((completion, line, column)) = found else {
        close_popup(popup);
        return;
    };
    // A word typed out in full needs no list.
    let typed = painted.with_value(|p| p.text[completion.from..completion.to].to_string());
    if completion
        .items
        .iter()
        .all(|item| item.kind != assist::ItemKind::Hint && item.insert == typed)
    {
        close_popup(popup);
        return;
    }
    // The layer follows the textarea's scroll at the next frame; the list is placed now.
    if let Some(a) = area.get_untracked() {
        layer.set_scroll_top(a.scroll_top());
    }
    let (left, top) = caret_point(layer, line, column).unwrap_or((0.0, 0.0));
    // At the caret, but moved left as far as needed for the list's minimum width to fit in the
    // editor (a caret near the right edge of a 390 px screen), and no wider than what is left.
    let width = layer
        .parent_element()
        .map_or(0.0, |p| f64::from(p.client_width()));
    let left = if width > 0.0 {
        left.min((width - COMPLETE_MIN_WIDTH).max(0.0))
    } else {
        left
    };
    let max_width = if width > 0.0 {
        (width - left).min(COMPLETE_MAX_WIDTH)
    } else {
        COMPLETE_MAX_WIDTH
    };
    popup.set(Some(Popup {
        completion,
        chosen: 0,
        left,
        top,
        max_width,
    }));
}
