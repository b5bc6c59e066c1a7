//! Line- and word-level text diff for the draft diff view (`forge_core::diff::text`).

use forge_core::diff::text::{
    diff_lines, hunks, line_counts, split_rows, DiffLine, Hunk, LineTag, Span, SplitRow,
};
use proptest::prelude::*;
use serde_json::json;

fn s(text: &str, changed: bool) -> Span {
    Span {
        text: text.into(),
        changed,
    }
}

fn same(old_no: usize, new_no: usize, text: &str) -> DiffLine {
    DiffLine {
        tag: LineTag::Same,
        old_no: Some(old_no),
        new_no: Some(new_no),
        spans: plain(text),
    }
}

fn removed(old_no: usize, spans: Vec<Span>) -> DiffLine {
    DiffLine {
        tag: LineTag::Removed,
        old_no: Some(old_no),
        new_no: None,
        spans,
    }
}

fn added(new_no: usize, spans: Vec<Span>) -> DiffLine {
    DiffLine {
        tag: LineTag::Added,
        old_no: None,
        new_no: Some(new_no),
        spans,
    }
}

fn plain(text: &str) -> Vec<Span> {
    if text.is_empty() {
        Vec::new()
    } else {
        vec![s(text, false)]
    }
}

fn text_of(line: &DiffLine) -> String {
    line.spans.iter().map(|span| span.text.as_str()).collect()
}

/// The documented line model: split on '\n', one trailing '\n' ends the last line.
fn model_lines(text: &str) -> Vec<&str> {
    if text.is_empty() {
        return Vec::new();
    }
    text.strip_suffix('\n')
        .unwrap_or(text)
        .split('\n')
        .collect()
}

fn numbered(range: std::ops::RangeInclusive<usize>) -> String {
    range.map(|i| format!("line {i}\n")).collect()
}

// ---- whole-diff shapes -----------------------------------------------------------------------

#[test]
fn equal_texts_are_all_same_and_have_no_hunks() {
    let text = "alpha\n\nbeta gamma\n";
    let lines = diff_lines(text, text);
    assert_eq!(
        lines,
        vec![
            same(1, 1, "alpha"),
            same(2, 2, ""),
            same(3, 3, "beta gamma")
        ]
    );
    assert_eq!(hunks(&lines, 3), Vec::<Hunk>::new());
    assert_eq!(hunks(&lines, 0), Vec::<Hunk>::new());
    assert_eq!(line_counts(&lines), (0, 0));
}

#[test]
fn empty_texts() {
    assert_eq!(diff_lines("", ""), Vec::<DiffLine>::new());
    assert_eq!(split_rows(&[]), Vec::<SplitRow>::new());
    assert_eq!(hunks(&[], 3), Vec::<Hunk>::new());
    assert_eq!(line_counts(&[]), (0, 0));
}

#[test]
fn one_modified_line_in_the_middle_of_ten() {
    let old_lines: Vec<String> = (1..=10)
        .map(|i| match i {
            5 => "You are a careful reviewer.".to_string(),
            _ => format!("line {i}"),
        })
        .collect();
    let mut new_lines = old_lines.clone();
    new_lines[4] = "You are a meticulous reviewer.".to_string();
    let old = old_lines.join("\n") + "\n";
    let new = new_lines.join("\n") + "\n";

    let lines = diff_lines(&old, &new);
    assert_eq!(lines.len(), 11);
    assert_eq!(line_counts(&lines), (1, 1));
    assert_eq!(lines[3], same(4, 4, "line 4"));
    assert_eq!(
        lines[4],
        removed(
            5,
            vec![
                s("You are a ", false),
                s("careful", true),
                s(" reviewer.", false)
            ]
        )
    );
    assert_eq!(
        lines[5],
        added(
            5,
            vec![
                s("You are a ", false),
                s("meticulous", true),
                s(" reviewer.", false)
            ]
        )
    );
    assert_eq!(lines[6], same(6, 6, "line 6"));
    assert_eq!(lines[10], same(10, 10, "line 10"));

    let h = hunks(&lines, 3);
    assert_eq!(h.len(), 1);
    assert_eq!(
        (h[0].old_start, h[0].old_len, h[0].new_start, h[0].new_len),
        (2, 7, 2, 7)
    );
    assert_eq!(h[0].lines, lines[1..9].to_vec());

    let h = hunks(&lines, 0);
    assert_eq!(h.len(), 1);
    assert_eq!(
        (h[0].old_start, h[0].old_len, h[0].new_start, h[0].new_len),
        (5, 1, 5, 1)
    );
    assert_eq!(h[0].lines, lines[4..6].to_vec());

    // Context larger than the text: the whole text, no overflow.
    let h = hunks(&lines, usize::MAX);
    assert_eq!(
        (h[0].old_start, h[0].old_len, h[0].new_start, h[0].new_len),
        (1, 10, 1, 10)
    );
    assert_eq!(h[0].lines, lines);
}

#[test]
fn pure_insertion() {
    let lines = diff_lines("a\nb\n", "a\nnew line\nb\n");
    assert_eq!(
        lines,
        vec![
            same(1, 1, "a"),
            added(2, plain("new line")),
            same(2, 3, "b")
        ]
    );
    assert_eq!(line_counts(&lines), (1, 0));
    let h = hunks(&lines, 0);
    assert_eq!(
        h,
        vec![Hunk {
            old_start: 1,
            old_len: 0,
            new_start: 2,
            new_len: 1,
            lines: vec![added(2, plain("new line"))],
        }]
    );
    let h = hunks(&lines, 1);
    assert_eq!(
        (h[0].old_start, h[0].old_len, h[0].new_start, h[0].new_len),
        (1, 2, 1, 3)
    );

    // At the very start, and into an empty text.
    let lines = diff_lines("a", "x\ny\na");
    assert_eq!(
        lines,
        vec![added(1, plain("x")), added(2, plain("y")), same(1, 3, "a")]
    );
    let h = hunks(&lines, 0);
    assert_eq!(
        (h[0].old_start, h[0].old_len, h[0].new_start, h[0].new_len),
        (0, 0, 1, 2)
    );
    assert_eq!(diff_lines("", "x\n"), vec![added(1, plain("x"))]);
}

#[test]
fn pure_deletion() {
    let lines = diff_lines("a\nb\nc\nd", "a\nd");
    assert_eq!(
        lines,
        vec![
            same(1, 1, "a"),
            removed(2, plain("b")),
            removed(3, plain("c")),
            same(4, 2, "d")
        ]
    );
    assert_eq!(line_counts(&lines), (0, 2));
    let h = hunks(&lines, 0);
    assert_eq!(
        (h[0].old_start, h[0].old_len, h[0].new_start, h[0].new_len),
        (2, 2, 1, 0)
    );

    let lines = diff_lines("a\nb\n", "");
    assert_eq!(lines, vec![removed(1, plain("a")), removed(2, plain("b"))]);
    let h = hunks(&lines, 3);
    assert_eq!(
        (h[0].old_start, h[0].old_len, h[0].new_start, h[0].new_len),
        (1, 2, 0, 0)
    );
}

#[test]
fn trailing_newline_does_not_add_a_line() {
    assert_eq!(diff_lines("a\n", "a"), vec![same(1, 1, "a")]);
    assert_eq!(diff_lines("a", "a\n"), vec![same(1, 1, "a")]);
    // A second newline is an empty line; empty lines have no spans.
    assert_eq!(
        diff_lines("a\n\n", "a\n"),
        vec![same(1, 1, "a"), removed(2, vec![])]
    );
    assert_eq!(diff_lines("", "\n"), vec![added(1, vec![])]);
    assert_eq!(
        diff_lines("\n\nx", "\nx"),
        vec![same(1, 1, ""), removed(2, vec![]), same(3, 2, "x")]
    );
}

#[test]
fn crlf_is_not_special() {
    let lines = diff_lines("a\r\nb\r\n", "a\nb\n");
    assert_eq!(
        lines,
        vec![
            removed(1, vec![s("a", false), s("\r", true)]),
            removed(2, vec![s("b", false), s("\r", true)]),
            added(1, vec![s("a", false)]),
            added(2, vec![s("b", false)]),
        ]
    );
    assert_eq!(diff_lines("a\r\n", "a\r\n"), vec![same(1, 1, "a\r")]);
}

#[test]
fn unicode_words() {
    let lines = diff_lines("我爱 Rust 🦀\n", "我爱 Go 🦀\n");
    assert_eq!(
        lines,
        vec![
            removed(1, vec![s("我爱 ", false), s("Rust", true), s(" 🦀", false)]),
            added(1, vec![s("我爱 ", false), s("Go", true), s(" 🦀", false)]),
        ]
    );

    // Each emoji is its own token; accents stay inside their word.
    let lines = diff_lines("ok 😀😀 café", "ok 😀😃 cafés");
    assert_eq!(
        lines,
        vec![
            removed(
                1,
                vec![
                    s("ok 😀", false),
                    s("😀", true),
                    s(" ", false),
                    s("café", true)
                ]
            ),
            added(
                1,
                vec![
                    s("ok 😀", false),
                    s("😃", true),
                    s(" ", false),
                    s("cafés", true)
                ]
            ),
        ]
    );

    // CJK text without spaces is one word.
    let lines = diff_lines("日本語のテキスト", "日本語の文章");
    assert_eq!(
        lines,
        vec![
            removed(1, vec![s("日本語のテキスト", true)]),
            added(1, vec![s("日本語の文章", true)]),
        ]
    );
}

#[test]
fn word_spans_merge_and_punctuation() {
    let lines = diff_lines("fn run(a, b) {", "fn run(a, b, c) -> X {");
    assert_eq!(
        lines,
        vec![
            removed(1, vec![s("fn run(a, b) {", false)]),
            added(
                1,
                vec![
                    s("fn run(a, b", false),
                    s(", c", true),
                    s(")", false),
                    s(" -> X", true),
                    s(" {", false)
                ]
            ),
        ]
    );
    // Pairing an empty line: the empty side has no spans, the other side is all changed.
    let lines = diff_lines("x\n\ny", "x\nfilled\ny");
    assert_eq!(
        lines,
        vec![
            same(1, 1, "x"),
            removed(2, vec![]),
            added(2, vec![s("filled", true)]),
            same(3, 3, "y")
        ]
    );
}

#[test]
fn change_run_lists_removed_before_added() {
    let lines = diff_lines("a\nb\nc\nd\n", "a\nx\ny\nz\nd\n");
    let tags: Vec<LineTag> = lines.iter().map(|l| l.tag).collect();
    use LineTag::*;
    assert_eq!(tags, [Same, Removed, Removed, Added, Added, Added, Same]);
    assert_eq!(line_counts(&lines), (3, 2));
    // The third added line has no partner: one unchanged span.
    assert_eq!(lines[5], added(4, plain("z")));
    assert_eq!(lines[3], added(2, vec![s("x", true)]));
}

#[test]
fn split_rows_pairs_two_removed_with_one_added() {
    let lines = diff_lines("a\nb\nc\nd", "a\nx\nd");
    assert_eq!(
        lines,
        vec![
            same(1, 1, "a"),
            removed(2, vec![s("b", true)]),
            removed(3, plain("c")),
            added(2, vec![s("x", true)]),
            same(4, 3, "d"),
        ]
    );
    let rows = split_rows(&lines);
    assert_eq!(
        rows,
        vec![
            SplitRow {
                left: Some(same(1, 1, "a")),
                right: Some(same(1, 1, "a"))
            },
            SplitRow {
                left: Some(removed(2, vec![s("b", true)])),
                right: Some(added(2, vec![s("x", true)]))
            },
            SplitRow {
                left: Some(removed(3, plain("c"))),
                right: None
            },
            SplitRow {
                left: Some(same(4, 3, "d")),
                right: Some(same(4, 3, "d"))
            },
        ]
    );

    // More added than removed: the extra rows have no left side.
    let rows = split_rows(&diff_lines("a", "b\nc"));
    assert_eq!(
        rows,
        vec![
            SplitRow {
                left: Some(removed(1, vec![s("a", true)])),
                right: Some(added(1, vec![s("b", true)]))
            },
            SplitRow {
                left: None,
                right: Some(added(2, plain("c")))
            },
        ]
    );
}

#[test]
fn hunks_merge_when_contexts_touch() {
    // Changes at lines 3 and 8: four unchanged lines (4..=7) between them, context 2 → touch.
    let old = numbered(1..=12);
    let new = old
        .replace("line 3\n", "line three\n")
        .replace("line 8\n", "line eight\n");
    let lines = diff_lines(&old, &new);
    assert_eq!(line_counts(&lines), (2, 2));
    let h = hunks(&lines, 2);
    assert_eq!(h.len(), 1);
    assert_eq!(
        (h[0].old_start, h[0].old_len, h[0].new_start, h[0].new_len),
        (1, 10, 1, 10)
    );
    assert_eq!(h[0].lines.len(), 12);
    assert_eq!(h[0].lines.first(), Some(&same(1, 1, "line 1")));
    assert_eq!(h[0].lines.last(), Some(&same(10, 10, "line 10")));

    // Changes at lines 3 and 9: five unchanged lines between them → two hunks.
    let new = old
        .replace("line 3\n", "line three\n")
        .replace("line 9\n", "line nine\n");
    let lines = diff_lines(&old, &new);
    let h = hunks(&lines, 2);
    let headers: Vec<_> = h
        .iter()
        .map(|h| {
            (
                h.old_start,
                h.old_len,
                h.new_start,
                h.new_len,
                h.lines.len(),
            )
        })
        .collect();
    assert_eq!(headers, [(1, 5, 1, 5, 6), (7, 5, 7, 5, 6)]);
    assert_eq!(h[1].lines.first(), Some(&same(7, 7, "line 7")));
    assert_eq!(h[1].lines.last(), Some(&same(11, 11, "line 11")));

    // Context 0 keeps only the changed lines, one hunk per change run.
    let h = hunks(&lines, 0);
    let headers: Vec<_> = h
        .iter()
        .map(|h| (h.old_start, h.old_len, h.new_start, h.new_len))
        .collect();
    assert_eq!(headers, [(3, 1, 3, 1), (9, 1, 9, 1)]);
}

#[test]
fn hunk_numbers_follow_earlier_size_changes() {
    // Two lines inserted at the top shift the new numbers of the later hunk.
    let old = numbered(1..=20);
    let new = format!(
        "top 1\ntop 2\n{}",
        old.replace("line 15\n", "line fifteen\n")
    );
    let lines = diff_lines(&old, &new);
    let h = hunks(&lines, 1);
    let headers: Vec<_> = h
        .iter()
        .map(|h| (h.old_start, h.old_len, h.new_start, h.new_len))
        .collect();
    assert_eq!(headers, [(1, 1, 1, 3), (14, 3, 16, 3)]);
}

#[test]
fn serializes_camel_case() {
    let lines = diff_lines("a b", "a c");
    assert_eq!(
        serde_json::to_value(&lines).unwrap(),
        json!([
            {"tag": "removed", "oldNo": 1, "newNo": null,
             "spans": [{"text": "a ", "changed": false}, {"text": "b", "changed": true}]},
            {"tag": "added", "oldNo": null, "newNo": 1,
             "spans": [{"text": "a ", "changed": false}, {"text": "c", "changed": true}]},
        ])
    );
    let h = hunks(&lines, 0);
    let value = serde_json::to_value(&h).unwrap();
    assert_eq!(value[0]["oldStart"], 1);
    assert_eq!(value[0]["oldLen"], 1);
    assert_eq!(value[0]["newStart"], 1);
    assert_eq!(value[0]["newLen"], 1);
    let rows = serde_json::to_value(split_rows(&lines)).unwrap();
    assert_eq!(rows[0]["left"]["tag"], "removed");
    assert_eq!(rows[0]["right"]["tag"], "added");
    assert_eq!(serde_json::to_value(LineTag::Same).unwrap(), "same");
}

// ---- large inputs --------------------------------------------------------------------------

#[test]
fn large_totally_different_inputs_finish() {
    let old: String = (0..10_000).map(|i| format!("old {i} alpha\n")).collect();
    let new: String = (0..10_000).map(|i| format!("new {i} beta\n")).collect();
    let lines = diff_lines(&old, &new);
    assert_eq!(lines.len(), 20_000);
    assert_eq!(line_counts(&lines), (10_000, 10_000));
    assert_eq!(
        lines[0],
        removed(1, vec![s("old", true), s(" 0 ", false), s("alpha", true)])
    );
    assert_eq!(
        lines[10_000],
        added(1, vec![s("new", true), s(" 0 ", false), s("beta", true)])
    );
    assert_eq!(hunks(&lines, 3).len(), 1);
}

#[test]
fn large_similar_inputs_stay_minimal() {
    // 10k lines, every 100th line changed: exactly 100 removed and 100 added lines.
    let old: String = (0..10_000).map(|i| format!("line {i}\n")).collect();
    let new: String = (0..10_000)
        .map(|i| {
            if i % 100 == 50 {
                format!("changed {i}\n")
            } else {
                format!("line {i}\n")
            }
        })
        .collect();
    let lines = diff_lines(&old, &new);
    assert_eq!(line_counts(&lines), (100, 100));
    assert_eq!(hunks(&lines, 3).len(), 100);
    assert_eq!(
        lines[50],
        removed(51, vec![s("line", true), s(" 50", false)])
    );
}

#[test]
fn large_inputs_with_common_prefix_and_suffix() {
    // Different middles too large for an exact diff still keep the shared head and tail.
    let head = numbered(1..=100);
    let tail = numbered(9_001..=9_100);
    let old_mid: String = (0..5_000).map(|i| format!("a{i}\n")).collect();
    let new_mid: String = (0..5_000).map(|i| format!("b{i}\n")).collect();
    let lines = diff_lines(
        &format!("{head}{old_mid}{tail}"),
        &format!("{head}{new_mid}{tail}"),
    );
    assert_eq!(line_counts(&lines), (5_000, 5_000));
    assert_eq!(lines[99], same(100, 100, "line 100"));
    assert_eq!(lines[100].tag, LineTag::Removed);
    assert_eq!(lines[5_100].tag, LineTag::Added);
    assert_eq!(lines[10_100], same(5_101, 5_101, "line 9001"));
}

// ---- properties ------------------------------------------------------------------------------

/// Length of a longest common subsequence of lines (reference DP).
fn lcs(a: &[&str], b: &[&str]) -> usize {
    let mut row = vec![0usize; b.len() + 1];
    for x in a {
        let mut diag = 0;
        for (j, y) in b.iter().enumerate() {
            let up = row[j + 1];
            row[j + 1] = if x == y { diag + 1 } else { up.max(row[j]) };
            diag = up;
        }
    }
    row[b.len()]
}

fn text_strategy() -> impl Strategy<Value = String> {
    let line = prop_oneof![
        Just(String::new()),
        "[ab ]{1,4}",
        "[a-c😀é\r]{1,3}",
        Just("x y z".to_string()),
    ];
    (proptest::collection::vec(line, 0..12), any::<bool>()).prop_map(|(lines, trailing)| {
        let mut text = lines.join("\n");
        if trailing {
            text.push('\n');
        }
        text
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn script_reconstructs_both_texts(old in text_strategy(), new in text_strategy()) {
        let lines = diff_lines(&old, &new);
        let old_lines = model_lines(&old);
        let new_lines = model_lines(&new);

        let mut rebuilt_old = Vec::new();
        let mut rebuilt_new = Vec::new();
        for line in &lines {
            let text = text_of(line);
            prop_assert!(line.spans.iter().all(|span| !span.text.is_empty()));
            prop_assert!(line.spans.windows(2).all(|w| w[0].changed != w[1].changed));
            match line.tag {
                LineTag::Same => {
                    prop_assert!(line.spans.iter().all(|span| !span.changed));
                    prop_assert_eq!(line.old_no, Some(rebuilt_old.len() + 1));
                    prop_assert_eq!(line.new_no, Some(rebuilt_new.len() + 1));
                    rebuilt_old.push(text.clone());
                    rebuilt_new.push(text);
                }
                LineTag::Removed => {
                    prop_assert_eq!(line.old_no, Some(rebuilt_old.len() + 1));
                    prop_assert_eq!(line.new_no, None);
                    rebuilt_old.push(text);
                }
                LineTag::Added => {
                    prop_assert_eq!(line.old_no, None);
                    prop_assert_eq!(line.new_no, Some(rebuilt_new.len() + 1));
                    rebuilt_new.push(text);
                }
            }
        }
        prop_assert_eq!(&rebuilt_old, &old_lines);
        prop_assert_eq!(&rebuilt_new, &new_lines);

        // Minimal: the Same lines are a longest common subsequence.
        let same_count = lines.iter().filter(|l| l.tag == LineTag::Same).count();
        prop_assert_eq!(same_count, lcs(&old_lines, &new_lines));

        // Removed before Added inside every change run; no Added directly before a Removed.
        prop_assert!(lines
            .windows(2)
            .all(|w| !(w[0].tag == LineTag::Added && w[1].tag == LineTag::Removed)));

        let (added_count, removed_count) = line_counts(&lines);
        prop_assert_eq!(added_count, new_lines.len() - same_count);
        prop_assert_eq!(removed_count, old_lines.len() - same_count);

        // Paired lines share their unchanged text, in order.
        for row in split_rows(&lines) {
            match (&row.left, &row.right) {
                (Some(left), Some(right)) if left.tag == LineTag::Removed => {
                    let kept = |l: &DiffLine| -> String {
                        l.spans.iter().filter(|s| !s.changed).map(|s| s.text.as_str()).collect()
                    };
                    prop_assert_eq!(kept(left), kept(right));
                }
                (Some(left), Some(right)) => prop_assert_eq!(left, right),
                (Some(left), None) => {
                    prop_assert_eq!(left.tag, LineTag::Removed);
                    prop_assert!(left.spans.iter().all(|s| !s.changed));
                }
                (None, Some(right)) => {
                    prop_assert_eq!(right.tag, LineTag::Added);
                    prop_assert!(right.spans.iter().all(|s| !s.changed));
                }
                (None, None) => prop_assert!(false, "empty row"),
            }
        }

        // Hunks: empty iff equal; with unlimited context and a change, one hunk = everything.
        prop_assert_eq!(hunks(&lines, 2).is_empty(), same_count == lines.len());
        for context in [0usize, 1, 2] {
            let hs = hunks(&lines, context);
            let changed: usize = hs
                .iter()
                .map(|h| h.lines.iter().filter(|l| l.tag != LineTag::Same).count())
                .sum();
            prop_assert_eq!(changed, added_count + removed_count);
            for h in &hs {
                prop_assert_eq!(h.old_len, h.lines.iter().filter(|l| l.old_no.is_some()).count());
                prop_assert_eq!(h.new_len, h.lines.iter().filter(|l| l.new_no.is_some()).count());
                if let Some(first) = h.lines.iter().find_map(|l| l.old_no) {
                    prop_assert_eq!(h.old_start, first);
                }
                if let Some(first) = h.lines.iter().find_map(|l| l.new_no) {
                    prop_assert_eq!(h.new_start, first);
                }
            }
        }
        if same_count != lines.len() {
            let all = hunks(&lines, usize::MAX);
            prop_assert_eq!(all.len(), 1);
            prop_assert_eq!(&all[0].lines, &lines);
        }
    }
}
