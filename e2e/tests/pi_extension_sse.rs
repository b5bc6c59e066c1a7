//! The extension's server-sent-event reader (`readSse` in assets/pi-extension/index.ts), run
//! as shipped under the pinned Node 22 (type annotations stripped by Node itself).
//!
//! The part between `// sse:begin` and `// sse:end` is pure; this test copies exactly that part
//! into a scratch module, feeds it streams cut into chunks at every byte, and compares what it
//! returns with the expected events. The old reader split blocks only at `\n\n` (a stream with
//! CRLF line ends never produced an event), joined data lines with nothing and trimmed values.

mod pi;
mod support;

use serde_json::{json, Value};
use std::process::Command;

const SOURCE: &str = include_str!("../../assets/pi-extension/index.ts");

fn parser_source() -> &'static str {
    let start = SOURCE
        .find("// sse:begin")
        .expect("index.ts marks the SSE reader with // sse:begin");
    let end = SOURCE
        .find("// sse:end")
        .expect("index.ts marks the end of the SSE reader with // sse:end");
    &SOURCE[start..end]
}

/// Runs `readSse` over `streams` (each fed whole and cut at every position into two chunks, the
/// rest carried over as the listener does); returns, per stream, the events of the whole feed.
/// Every cut must give the same events as the whole stream, or the script fails.
fn read_streams(streams: &[&str]) -> Vec<Value> {
    let dir = tempfile::tempdir().expect("scratch dir");
    let module = dir.path().join("sse.ts");
    std::fs::write(&module, parser_source()).expect("write sse.ts");
    let driver = dir.path().join("drive.ts");
    std::fs::write(
        &driver,
        r#"import { readSse } from "./sse.ts";
const streams: string[] = JSON.parse(process.argv[2]);
const feed = (chunks: string[]) => {
	let rest = "";
	const events: unknown[] = [];
	for (const chunk of chunks) {
		const read = readSse(rest + chunk);
		rest = read.rest;
		events.push(...read.events);
	}
	return { events, rest };
};
const out = streams.map((stream) => {
	const whole = JSON.stringify(feed([stream]));
	for (let cut = 0; cut <= stream.length; cut++) {
		const split = JSON.stringify(feed([stream.slice(0, cut), stream.slice(cut)]));
		if (split !== whole) throw new Error(`cut at ${cut} of ${JSON.stringify(stream)}: ${split} != ${whole}`);
	}
	return JSON.parse(whole);
});
console.log(JSON.stringify(out));
"#,
    )
    .expect("write drive.ts");
    let node = pi::pi_tools().join("node_modules/node/bin/node");
    let output = Command::new(&node)
        .arg("--experimental-strip-types")
        .arg("--no-warnings")
        .arg(&driver)
        .arg(serde_json::to_string(streams).expect("streams as JSON"))
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run {} ({e}): run `cargo xtask setup` (it installs Node 22)",
                node.display()
            )
        });
    assert!(
        output.status.success(),
        "the SSE reader failed under Node: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let answer: Value = serde_json::from_slice(&output.stdout).expect("the driver prints JSON");
    answer.as_array().expect("one answer per stream").clone()
}

#[test]
fn the_sse_reader_follows_the_event_stream_rules() {
    let got = read_streams(&[
        // What the server sends: LF line ends, one data line.
        "event: ready\ndata: {}\n\nevent: command\ndata: {\"id\":\"c1\"}\n\n",
        // The same with CRLF line ends (a proxy's rewrite); the old reader found no event.
        "event: ready\r\ndata: {}\r\n\r\nevent: command\r\ndata: {\"id\":\"c1\"}\r\n\r\n",
        // CR alone ends a line too; a CR at the very end waits (it may be half of a CRLF).
        "event: command\rdata: x\r\rdata: y\r\r",
        // Multi-line data keeps its newlines; only one space after the colon goes.
        "event: command\ndata: {\"text\":\ndata:   \"a b\"}\n\n",
        // Comments, unknown fields, a field without colon, an event without data, no name.
        ": keep-alive\nid: 7\nretry: 10\nevent: nothing\n\ndata\ndata: after\n\n",
        // An unfinished event stays in the rest.
        "event: ready\ndata: {}\n\nevent: command\ndata: {\"id\"",
    ]);
    assert_eq!(
        got,
        vec![
            json!({"events": [
                {"event": "ready", "data": "{}"},
                {"event": "command", "data": "{\"id\":\"c1\"}"}
            ], "rest": ""}),
            json!({"events": [
                {"event": "ready", "data": "{}"},
                {"event": "command", "data": "{\"id\":\"c1\"}"}
            ], "rest": ""}),
            json!({"events": [{"event": "command", "data": "x"}], "rest": "data: y\r\r"}),
            json!({"events": [{"event": "command", "data": "{\"text\":\n  \"a b\"}"}], "rest": ""}),
            json!({"events": [{"event": "message", "data": "\nafter"}], "rest": ""}),
            json!({"events": [{"event": "ready", "data": "{}"}],
                   "rest": "event: command\ndata: {\"id\""}),
        ]
    );
}
