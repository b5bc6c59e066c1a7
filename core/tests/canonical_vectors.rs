//! Spec §C5: canonical JSON and `sha256:v1:` fingerprints, byte-identical to the original.

use forge_core::canonical::{canonical, fingerprint, is_fingerprint, is_revision, revision};
use forge_core::json::{format_number, parse_str, to_canonical, to_pretty};
use proptest::prelude::*;
use serde_json::{json, Value};

fn check(value: Value, expected_canonical: &str, expected_fp: &str) {
    assert_eq!(canonical(&value), expected_canonical);
    assert_eq!(fingerprint(&value), expected_fp);
}

#[test]
fn c5_1_nested_keys_sorted_and_undefined_dropped() {
    // `omitted: undefined` has no serde equivalent: an absent key is how undefined is spelled.
    check(
        json!({"z": 1, "a": {"d": 2, "b": 1}}),
        r#"{"a":{"b":1,"d":2},"z":1}"#,
        "sha256:v1:7abf5da5469eb969a507f9772e693effee5ed11b4ad9dcdccbe160d292dfcd68",
    );
}

#[test]
fn c5_2_array_with_negative_zero() {
    check(
        parse_str(r#"[1,"two",null,true,{"k":[3.5,-0]}]"#).unwrap(),
        r#"[1,"two",null,true,{"k":[3.5,0]}]"#,
        "sha256:v1:4007e4aed33cd61f0e0536980bbeef8325130d3fda275b747ddd58f1bbd42139",
    );
    // -0 written as a float literal too.
    check(
        parse_str(r#"[1,"two",null,true,{"k":[3.5,-0.0]}]"#).unwrap(),
        r#"[1,"two",null,true,{"k":[3.5,0]}]"#,
        "sha256:v1:4007e4aed33cd61f0e0536980bbeef8325130d3fda275b747ddd58f1bbd42139",
    );
}

#[test]
fn c5_3_string() {
    check(
        json!("fixture"),
        r#""fixture""#,
        "sha256:v1:b086de7b32510701e873f3d4ae742917ca1cc1141ffe4a8387d604ef474ef9e4",
    );
}

#[test]
fn c5_7_empty_values() {
    check(
        json!({}),
        "{}",
        "sha256:v1:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a",
    );
    check(
        json!([]),
        "[]",
        "sha256:v1:4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945",
    );
    check(
        Value::Null,
        "null",
        "sha256:v1:74234e98afe7498fb5daf1f36ac2d78acc339464f950703b8c019892f982b90b",
    );
}

#[test]
fn c5_8_keys_sort_by_code_unit() {
    check(
        parse_str(r#"{"B":1,"a":2,"_":3,"10":4,"9":5}"#).unwrap(),
        r#"{"10":4,"9":5,"B":1,"_":3,"a":2}"#,
        "sha256:v1:6e7f5d702a971ccd132ec5a08c638231684cb549e1f021b0b1ada676f895eec7",
    );
}

#[test]
fn c5_9_astral_keys_sort_before_bmp_private_use() {
    // UTF-8 byte order would put U+FF01 first; UTF-16 order puts the surrogate pair first.
    check(
        parse_str("{\"\u{FF01}\":1,\"\u{1F600}\":2}").unwrap(),
        "{\"\u{1F600}\":2,\"\u{FF01}\":1}",
        "sha256:v1:c97d01429c864fb3c08b02523a167c69017bb6860885dfc219e23f8ebb28d9e9",
    );
}

#[test]
fn c5_10_numbers() {
    check(
        parse_str("[1e21,0.1,-0,1.5e-7,100,9007199254740992]").unwrap(),
        "[1e+21,0.1,0,1.5e-7,100,9007199254740992]",
        "sha256:v1:7a78c111fd7902264e16c7d4e604f1e0494a80e3ba6bd79516bcaeccdb20a902",
    );
    // 1.0 parsed as a float still canonicalizes like a JS number.
    assert_eq!(canonical(&parse_str("[1.0, 2.50]").unwrap()), "[1,2.5]");
}

#[test]
fn c5_15_conversation() {
    check(
        json!({"systemPrompt": "", "messages": [{"role": "user", "content": [{"type": "text", "text": "Review the API design."}]}]}),
        r#"{"messages":[{"content":[{"text":"Review the API design.","type":"text"}],"role":"user"}],"systemPrompt":""}"#,
        "sha256:v1:030249e03a0099c44770db0ff60597535771c00a2ca16aef57af0b2b2ca684ae",
    );
}

#[test]
fn c5_16_string_escaping() {
    check(
        json!({"s": "\u{7}\u{1f}\u{7f}\u{8}\u{c}\n\r\t/"}),
        "{\"s\":\"\\u0007\\u001f\u{7f}\\b\\f\\n\\r\\t/\"}",
        "sha256:v1:4145bfc2030ad541f37c1bceea6ddb9c57fce71daa2ddb53329db89d19d7422a",
    );
}

#[test]
fn non_finite_numbers_are_refused() {
    assert_eq!(
        format_number(f64::NAN).unwrap_err().to_string(),
        "Cannot canonicalize a non-finite number (NaN)."
    );
    assert_eq!(
        format_number(f64::NEG_INFINITY).unwrap_err().to_string(),
        "Cannot canonicalize a non-finite number (-inf)."
    );
    // JSON text cannot carry one either: an overflowing literal is a parse error, not Infinity.
    assert!(parse_str("[1e400]").is_err());
    // Lone surrogates cannot live in a Rust string: such input is refused at parse time.
    assert!(parse_str(r#""\ud800""#).is_err());
}

#[test]
fn fingerprint_and_revision_shapes() {
    let fp = fingerprint(&json!({}));
    assert!(is_fingerprint(&fp));
    assert!(!is_fingerprint("sha256:v1:ABC"));
    assert_eq!(
        revision(b""),
        "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    );
    assert!(is_revision(&revision(b"x")));
    assert!(!is_revision(&fp));
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        ".*".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((".{0,6}", inner), 0..6)
                .prop_map(|entries| Value::Object(entries.into_iter().collect())),
        ]
    })
}

proptest! {
    /// Canonical text is a fixed point: parsing it back and canonicalizing again changes nothing,
    /// and neither does any re-ordering that pretty printing and re-parsing might introduce.
    #[test]
    fn canonical_is_stable_under_reserialization(value in arb_json()) {
        let once = to_canonical(&value);
        let reparsed = parse_str(&once).unwrap();
        prop_assert_eq!(&to_canonical(&reparsed), &once);
        let via_pretty = parse_str(&to_pretty(&value)).unwrap();
        prop_assert_eq!(to_canonical(&via_pretty), once);
        prop_assert_eq!(fingerprint(&reparsed), fingerprint(&value));
    }
}
