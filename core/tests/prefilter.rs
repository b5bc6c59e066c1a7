//! Differential test of the regex prefilter: applying a rule with its derived required literal
//! must give exactly what the same rule gives when every text goes through the regex engine.
//!
//! Patterns come from a generator that covers the whole ECMAScript pattern grammar (annex B
//! included): literal characters (ASCII, non-ASCII, astral, the case-folding specials `ı`, `ſ`,
//! `K`), escaped syntax characters, every escape kind (`\d \D \w \W \s \S \b \B \n \t \0 \xHH
//! \uHHHH \u{…} \cX \k<name> \1 \p{…} \P{…}` and annex-B identity escapes), classes (negated,
//! empty, ranges, escapes, brackets and parentheses inside), every group kind (capturing, named,
//! non-capturing, lookahead, lookbehind, both negated), anchors, `.`, alternation, every
//! quantifier (`* + ? {n} {n,} {n,m}`, greedy and lazy) and annex-B braces that are not
//! quantifiers. Flags are any subset of `gimsu`. Each pattern also yields a sample text that it
//! roughly matches, and the texts the rule runs on are built around that sample (plus random
//! text, case changes and near misses), so matches are common.
//!
//! A normal `cargo test` runs a fixed number of patterns. For a long run give a time budget:
//!
//! ```sh
//! FORGE_FUZZ_SECONDS=300 cargo test --release -p forge-core --test prefilter -- --nocapture
//! ```

use forge_core::rewrite::{apply_history, apply_to_text, rules_from_config, Rule};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// splitmix64: small, deterministic, good enough for test generation.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn percent(&mut self, p: usize) -> bool {
        self.below(100) < p
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Characters used for literals and for random text.
const ALPHABET: &[char] = &[
    'a', 'b', 'c', 'a', 'b', 'A', 'B', 'x', 'k', 's', 'i', 'I', 'K', 'S', '0', '1', '2', '4', ' ',
    ' ', ':', '-', ',', '.', '(', ')', '{', '}', 'é', 'ı', 'ſ', '\u{212A}', '😀', '\n',
];

/// Generated pattern text plus a text it roughly matches.
struct Piece {
    pattern: String,
    sample: String,
    /// Contains a quantifier or an alternation: repeating it could make the backtracking engine
    /// exponential (or, in regress 0.12, never return), which is not what this test is about.
    risky: bool,
}

struct Gen<'r> {
    rng: &'r mut Rng,
    groups: usize,
    names: usize,
}

impl Gen<'_> {
    fn disjunction(&mut self, depth: usize) -> Piece {
        let alternatives = if self.rng.percent(12) { 2 } else { 1 };
        let mut pieces: Vec<Piece> = (0..alternatives).map(|_| self.alternative(depth)).collect();
        if pieces.len() == 1 {
            return pieces.pop().expect("one alternative");
        }
        let chosen = self.rng.below(pieces.len());
        Piece {
            pattern: pieces
                .iter()
                .map(|p| p.pattern.as_str())
                .collect::<Vec<_>>()
                .join("|"),
            sample: pieces[chosen].sample.clone(),
            risky: true,
        }
    }

    fn alternative(&mut self, depth: usize) -> Piece {
        let terms = 1 + self.rng.below(if depth == 0 { 6 } else { 3 });
        let mut out = Piece {
            pattern: String::new(),
            sample: String::new(),
            risky: false,
        };
        for _ in 0..terms {
            let term = self.term(depth);
            out.pattern.push_str(&term.pattern);
            out.sample.push_str(&term.sample);
            out.risky |= term.risky;
        }
        out
    }

    fn term(&mut self, depth: usize) -> Piece {
        let atom = self.atom(depth);
        if !self.rng.percent(35) || atom.pattern.is_empty() {
            return atom;
        }
        self.quantify(atom)
    }

    fn quantify(&mut self, atom: Piece) -> Piece {
        let lazy = if self.rng.percent(30) { "?" } else { "" };
        let n = self.rng.below(4);
        // (suffix, repetitions in the sample)
        let (suffix, times) = match self.rng.below(6) {
            0 => ("*".to_string(), self.rng.below(3)),
            1 => ("+".to_string(), 1 + self.rng.below(2)),
            2 => ("?".to_string(), self.rng.below(2)),
            3 => (format!("{{{n}}}"), n),
            4 => (format!("{{{n},}}"), n + self.rng.below(2)),
            _ => {
                let m = n + self.rng.below(3);
                (format!("{{{n},{m}}}"), n + self.rng.below(m - n + 1))
            }
        };
        if atom.risky && self.rng.percent(70) {
            // Loops inside loops are generated less often: nested quantifiers can be exponential,
            // and a rule over its budget says nothing about the prefilter. (Unpatched regress
            // 0.12 never returned on some of them, `(?:(?:-?)?){2}x` on `--s`; the vendored
            // engine saves a nested loop's state, see vendor/regress/PATCHED.md.)
            return atom;
        }
        Piece {
            pattern: format!("{}{suffix}{lazy}", atom.pattern),
            sample: atom.sample.repeat(times),
            risky: true,
        }
    }

    fn atom(&mut self, depth: usize) -> Piece {
        let plain = |pattern: &str, sample: &str| Piece {
            pattern: pattern.to_string(),
            sample: sample.to_string(),
            risky: false,
        };
        match self.rng.below(if depth < 2 { 12 } else { 10 }) {
            0..=3 => {
                let c = *self.rng.pick(ALPHABET);
                let pattern = match c {
                    '.' | '(' | ')' | '{' | '}' => format!("\\{c}"),
                    '\n' => "\\n".to_string(),
                    _ => c.to_string(),
                };
                Piece {
                    pattern,
                    sample: c.to_string(),
                    risky: false,
                }
            }
            4 => {
                let c = *self.rng.pick(&[
                    '^', '$', '\\', '.', '*', '+', '?', '(', ')', '[', ']', '{', '}', '|', '/', '-',
                ]);
                plain(&format!("\\{c}"), &c.to_string())
            }
            5 => {
                let (p, s) = *self.rng.pick(&[
                    (".", "a"),
                    ("^", ""),
                    ("$", ""),
                    ("\\b", ""),
                    ("\\B", ""),
                    ("\\d", "4"),
                    ("\\D", "x"),
                    ("\\w", "w"),
                    ("\\W", " "),
                    ("\\s", " "),
                    ("\\S", "S"),
                ]);
                plain(p, s)
            }
            6 => {
                let (p, s) = *self.rng.pick(&[
                    ("\\n", "\n"),
                    ("\\t", "\t"),
                    ("\\0", "\0"),
                    ("\\x41", "A"),
                    ("\\x4", "x4"),
                    ("\\xZ1", "xZ1"),
                    ("\\u0061", "a"),
                    ("\\u00e9", "é"),
                    ("\\u006", "u006"),
                    ("\\u{61}", "a"),
                    ("\\u{2}", "uu"),
                    ("\\u{1F600}", "😀"),
                    ("\\u{1F600}", "u{1F600}"),
                    ("\\uD83D\\uDE00", "😀"),
                    ("\\cJ", "\n"),
                    ("\\cj", "\n"),
                    ("\\c1", "\\c1"),
                    ("\\a", "a"),
                    ("\\k", "k"),
                    ("\\k<n1>", ""),
                    ("\\1", ""),
                    ("\\2", ""),
                    ("\\12", "\n"),
                    ("\\8", "8"),
                    ("\\p{L}", "é"),
                    ("\\p{Lu}", "A"),
                    ("\\P{L}", "1"),
                    ("\\p{Script=Greek}", "λ"),
                    ("\\pL", "pL"),
                ]);
                plain(p, s)
            }
            7 => self.class(),
            8 => {
                let (p, s) = *self.rng.pick(&[
                    ("{", "{"),
                    ("}", "}"),
                    ("]", "]"),
                    ("{,3}", "{,3}"),
                    ("{a}", "{a}"),
                    ("{1,a}", "{1,a}"),
                    ("x{", "x{"),
                    ("{2", "{2"),
                ]);
                plain(p, s)
            }
            9 => {
                // Two literal characters: long literal runs are what the prefilter derives.
                let a = *self.rng.pick(ALPHABET);
                let b = *self.rng.pick(&['a', 'b', 'c', ':', 'x', '1']);
                let pattern = match a {
                    '.' | '(' | ')' | '{' | '}' => format!("\\{a}{b}"),
                    '\n' => format!("\\n{b}"),
                    _ => format!("{a}{b}"),
                };
                Piece {
                    pattern,
                    sample: format!("{a}{b}"),
                    risky: false,
                }
            }
            _ => self.group(depth),
        }
    }

    fn class(&mut self) -> Piece {
        let negated = self.rng.percent(25);
        let mut pattern = String::from(if negated { "[^" } else { "[" });
        let items = self.rng.below(4);
        let mut sample = String::new();
        for index in 0..items {
            let (p, s) = *self.rng.pick(&[
                ("a", "a"),
                ("b-d", "c"),
                ("0-9", "7"),
                ("\\d", "3"),
                ("\\w", "q"),
                ("\\s", " "),
                ("\\]", "]"),
                ("\\-", "-"),
                ("-", "-"),
                ("[", "["),
                ("(", "("),
                (")", ")"),
                ("|", "|"),
                ("{", "{"),
                ("\\u{41}", "A"),
                ("\\x41", "A"),
                ("\\b", "\u{8}"),
                ("é", "é"),
                ("😀", "😀"),
                ("\\p{L}", "é"),
                ("^", "^"),
                ("]", "]"),
            ]);
            // `]` first closes an empty class, which the generator wants to produce too.
            pattern.push_str(p);
            if index == 0 {
                sample = s.to_string();
            }
        }
        pattern.push(']');
        if negated || sample.is_empty() {
            sample = "#".to_string();
        }
        Piece {
            pattern,
            sample,
            risky: false,
        }
    }

    fn group(&mut self, depth: usize) -> Piece {
        let inner = self.disjunction(depth + 1);
        let (open, sample) = match self.rng.below(8) {
            0 | 1 => {
                self.groups += 1;
                ("(".to_string(), inner.sample.clone())
            }
            2 => {
                self.groups += 1;
                self.names += 1;
                (format!("(?<n{}>", self.names), inner.sample.clone())
            }
            3 => ("(?:".to_string(), inner.sample.clone()),
            4 => ("(?=".to_string(), String::new()),
            5 => ("(?!".to_string(), String::new()),
            6 => ("(?<=".to_string(), String::new()),
            _ => ("(?<!".to_string(), String::new()),
        };
        Piece {
            pattern: format!("{open}{})", inner.pattern),
            sample,
            risky: inner.risky,
        }
    }
}

/// One generated rule: the pattern's JSON config and its sample.
struct Case {
    config: Value,
    sample: String,
}

fn generate(rng: &mut Rng) -> Case {
    let mut generator = Gen {
        rng,
        groups: 0,
        names: 0,
    };
    let piece = generator.disjunction(0);
    let rng = generator.rng;
    let mut flags = String::new();
    for flag in ['g', 'i', 'm', 's', 'u'] {
        if rng.percent(if flag == 'g' { 70 } else { 30 }) {
            flags.push(flag);
        }
    }
    let replace = *rng.pick(&["[X]", "", "$&", "<$1>", "$$", "$<n1>", "$'", "$`", "$0!"]);
    let mut config = json!({
        "id": "r", "stage": "history", "pattern": piece.pattern, "flags": flags, "replace": replace,
    });
    if rng.percent(15) {
        config["trimStrings"] = json!(["a", " "]);
    }
    if rng.percent(20) {
        config["maxChars"] = json!(1 + rng.below(20));
    }
    Case {
        config,
        sample: piece.sample,
    }
}

fn random_text(rng: &mut Rng, max: usize) -> String {
    (0..rng.below(max + 1))
        .map(|_| *rng.pick(ALPHABET))
        .collect()
}

fn swap_case(rng: &mut Rng, text: &str) -> String {
    text.chars()
        .map(|c| {
            if rng.percent(50) {
                c.to_ascii_uppercase()
            } else {
                c.to_ascii_lowercase()
            }
        })
        .collect()
}

/// Texts built to contain matches of the case's pattern, and some near misses.
fn texts(rng: &mut Rng, sample: &str) -> Vec<String> {
    let mut out = vec![
        sample.to_string(),
        random_text(rng, 24),
        format!(
            "{}{sample}{}{sample}{}",
            random_text(rng, 8),
            random_text(rng, 8),
            random_text(rng, 8)
        ),
        swap_case(rng, sample),
    ];
    let chars: Vec<char> = sample.chars().collect();
    if !chars.is_empty() {
        let drop = rng.below(chars.len());
        let near: String = chars
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != drop)
            .map(|(_, c)| c)
            .collect();
        out.push(format!("{}{near}", random_text(rng, 4)));
    }
    out
}

#[derive(Default, Debug)]
struct Counts {
    patterns: usize,
    compiled: usize,
    with_literal: usize,
    texts: usize,
    skipped_by_prefilter: usize,
    started_later: usize,
    matched: usize,
    /// Texts the engine alone could not finish within [`TEXT_STEPS`] (not compared).
    over_budget: usize,
}

/// Engine steps each text (and each message list) gets. The test is about the prefilter, not
/// the engine: a generated pattern that backtracks catastrophically (nested loops can) on a
/// text proves nothing, so that text is counted and left out of the comparison.
const TEXT_STEPS: u64 = 2_000_000;

/// Runs `run` with [`TEXT_STEPS`] engine steps; the result and whether the budget ran out.
fn budgeted<R>(run: impl FnOnce() -> R) -> (R, bool) {
    regress::budget::set(TEXT_STEPS);
    let out = run();
    let spent = regress::budget::exhausted();
    regress::budget::set(u64::MAX);
    (out, spent)
}

fn contains_literal(text: &str, literal: &str, ignore_case: bool) -> bool {
    if ignore_case {
        text.to_ascii_lowercase()
            .contains(&literal.to_ascii_lowercase())
    } else {
        text.contains(literal)
    }
}

/// Runs one case: the filtered and the unfiltered rule must agree on every text, and on a message
/// list made of those texts (string content and text parts).
fn check(rng: &mut Rng, counts: &mut Counts) -> Result<(), String> {
    let case = generate(rng);
    if std::env::var("PREFILTER_TRACE").is_ok() {
        eprintln!("{}", case.config);
    }
    counts.patterns += 1;
    let config = json!({"rules": [case.config.clone()]});
    let (rules, _) = rules_from_config(config.as_object());
    let Some(rule) = rules.into_iter().next() else {
        return Ok(());
    };
    counts.compiled += 1;
    let plain: Rule = rule.clone().without_prefilter();
    let literal = rule.required_literal().map(str::to_string);
    if literal.is_some() {
        counts.with_literal += 1;
    }
    let texts = texts(rng, &case.sample);
    for text in &texts {
        counts.texts += 1;
        if std::env::var("PREFILTER_TRACE").is_ok() {
            eprintln!("  text {text:?}");
        }
        let (engine, spent) = budgeted(|| apply_to_text(&plain, text));
        if spent {
            if std::env::var("PREFILTER_OVER_BUDGET").is_ok() {
                eprintln!("over budget: {} on {text:?}", case.config);
            }
            counts.over_budget += 1;
            continue;
        }
        let (filtered, _) = budgeted(|| apply_to_text(&rule, text));
        match rule.prefilter_start(text) {
            None => counts.skipped_by_prefilter += 1,
            Some(start) if start > 0 => counts.started_later += 1,
            Some(_) => {}
        }
        if let Some(literal) = &literal {
            // The prefilter skips exactly the texts without the literal.
            let contains = contains_literal(text, literal, rule.flags.contains('i'));
            if contains == rule.prefilter_start(text).is_none() {
                return Err(format!(
                    "rule {} literal {literal:?} on text {text:?}: contains {contains}",
                    case.config
                ));
            }
        }
        if engine.matches > 0 {
            counts.matched += 1;
        }
        if filtered != engine {
            return Err(format!(
                "rule {} literal {literal:?} on text {text:?}: with prefilter {filtered:?}, without {engine:?}",
                case.config
            ));
        }
    }
    let messages: Vec<Value> = texts
        .iter()
        .enumerate()
        .map(|(i, text)| {
            if i % 2 == 0 {
                json!({"role": "user", "content": text})
            } else {
                json!({"role": "assistant", "content": [{"type": "text", "text": text}, {"type": "thinking", "thinking": text}]})
            }
        })
        .collect();
    // The history stage runs every rule within the compiler's own budget; a rule over it is
    // left out of the comparison (the prefilter changes how much of the budget is spent).
    let engine = apply_history(std::slice::from_ref(&plain), messages.clone());
    if engine
        .1
        .iter()
        .any(|d| d.message.contains("exceeded its time budget"))
    {
        counts.over_budget += 1;
        return Ok(());
    }
    let filtered = apply_history(std::slice::from_ref(&rule), messages);
    if filtered != engine {
        return Err(format!(
            "rule {} literal {literal:?} on messages: with prefilter {filtered:?}, without {engine:?}",
            case.config
        ));
    }
    Ok(())
}

/// Patterns per normal test run (the CI subset).
const CI_PATTERNS: usize = 3_000;

#[test]
fn prefilter_never_changes_rule_application() {
    let budget = std::env::var("FORGE_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .map(Duration::from_secs);
    let start = Instant::now();
    let mut rng = Rng(0x5eed_0019);
    let mut counts = Counts::default();
    let mut failures = Vec::new();
    loop {
        match budget {
            Some(b) if start.elapsed() >= b => break,
            None if counts.patterns >= CI_PATTERNS => break,
            _ => {}
        }
        if let Err(failure) = check(&mut rng, &mut counts) {
            eprintln!("{failure}");
            failures.push(failure);
            if failures.len() >= 10 {
                break;
            }
        }
    }
    println!(
        "prefilter: {} patterns ({} compiled, {} with a required literal), {} texts ({} skipped by the prefilter, {} searched from a later start, {} with a match, {} over the engine budget) in {:.0}s, {} difference(s)",
        counts.patterns,
        counts.compiled,
        counts.with_literal,
        counts.texts,
        counts.skipped_by_prefilter,
        counts.started_later,
        counts.matched,
        counts.over_budget,
        start.elapsed().as_secs_f64(),
        failures.len()
    );
    assert!(failures.is_empty(), "{} difference(s)", failures.len());
    // The generator must exercise the prefilter, not just the engine.
    assert!(counts.compiled * 2 > counts.patterns, "{counts:?}");
    assert!(counts.with_literal * 5 > counts.compiled, "{counts:?}");
    assert!(counts.skipped_by_prefilter > 0, "{counts:?}");
    assert!(counts.started_later > 0, "{counts:?}");
    assert!(counts.matched * 3 > counts.texts, "{counts:?}");
    // Budget exhaustion stays rare, so nearly every text is compared.
    assert!(counts.over_budget * 100 < counts.texts, "{counts:?}");
}
