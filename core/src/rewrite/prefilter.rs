//! What a pattern proves before the regex engine runs: a literal every match contains and,
//! when known, the characters a match can start with, so texts that cannot match are skipped.

/// What the engine can skip for one rule: texts without [`Prefilter::literal`], and, when
/// [`Prefilter::lead`] is known, the part of a text before the run of lead characters that
/// precedes the literal's first occurrence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Prefilter {
    /// See [`prefilter`].
    pub literal: String,
    /// The characters every top-level atom before the literal's run can match, when each of
    /// them is a plain character or `\s`, `\d`, `\w` (any quantifier) and the rule has no `i`
    /// flag. Every match then starts inside the run of such characters that ends at some
    /// occurrence of the literal, so no match starts before the run that ends at the first
    /// occurrence.
    pub lead: Option<Vec<Lead>>,
}

/// A character set a lead atom matches, or a superset of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lead {
    Char(char),
    /// `\s` (Unicode white space, BOM and U+180E included).
    Space,
    /// `\d`.
    Digit,
    /// `\w` (plus `ſ` and the Kelvin sign, which `\w` matches with `iu`).
    Word,
}

impl Lead {
    fn contains(self, c: char) -> bool {
        match self {
            Lead::Char(l) => c == l,
            Lead::Space => c.is_whitespace() || matches!(c, '\u{FEFF}' | '\u{180E}'),
            Lead::Digit => c.is_ascii_digit(),
            Lead::Word => c.is_ascii_alphanumeric() || matches!(c, '_' | 'ſ' | '\u{212A}'),
        }
    }
}

/// The prefilter of `pattern` under `flags`: a literal every match must contain, when one is
/// easy to prove, used to skip the regex engine on texts that cannot match, and the lead
/// characters before it ([`Prefilter::lead`]) (see [`find_literal`] for how it is looked
/// for).
///
/// Sound for the whole ECMAScript pattern grammar (annex B included) by giving up whenever in
/// doubt:
///
/// - nothing is derived from a pattern with a top-level `|` (one inside a group or class is
///   fine: the group counts as "anything");
/// - the pattern is read as a sequence of top-level atoms, each with its quantifier (`*`, `+`,
///   `?`, `{n}`, `{n,}`, `{n,m}`, each possibly lazy). Only plain characters and escaped syntax
///   characters count as literal; groups, lookarounds, classes (nested ones too), `.`,
///   assertions and every other escape (`\d`, `\u0041`, `\u{…}`, `\x41`, `\cJ`, `\k<n>`,
///   `\p{…}`, backreferences, …) end a run. A character that may be absent (`*`, `?`, a minimum
///   of 0) ends the run before it; one that repeats (`+`, a minimum of 1 or more) ends it after
///   itself, since what follows it is not adjacent for sure;
/// - braces that are not a well-formed quantifier are annex-B literals and count as "anything";
///   an unbalanced `)`, a quantifier with nothing to repeat, or an unterminated class or escape
///   gives up;
/// - with the `i` flag the literal is compared ignoring ASCII case, so only ASCII characters
///   other than `i`, `s` and `k` may be part of it (the engine also matches those three with
///   `ı`, `ſ` and the Kelvin sign).
///
/// The longest run wins (the first of equal ones). A single character is worth it too: looking
/// for it is a fast byte scan.
pub(crate) fn prefilter(pattern: &str, flags: &str) -> Option<Prefilter> {
    let atoms = top_level_atoms(pattern, flags.contains('v'))?;
    let ignore_case = flags.contains('i');
    // With `i` the engine also matches `ı`, `ſ` and the Kelvin sign for `i`, `s` and `k`, so a
    // literal compared ignoring ASCII case may hold only the other ASCII characters.
    let usable =
        |c: char| !ignore_case || (c.is_ascii() && !matches!(c, 'i' | 'I' | 's' | 'S' | 'k' | 'K'));
    // (first atom index, characters)
    let mut best: (usize, Vec<char>) = (0, Vec::new());
    let mut run: (usize, Vec<char>) = (0, Vec::new());
    let flush = |run: &mut (usize, Vec<char>), best: &mut (usize, Vec<char>)| {
        if run.1.len() > best.1.len() {
            *best = run.clone();
        }
        run.1.clear();
    };
    for (index, &(atom, repeat)) in atoms.iter().enumerate() {
        match (atom, repeat) {
            (Atom::Char(c), Repeat::Once | Repeat::AtLeastOnce) if usable(c) => {
                if run.1.is_empty() {
                    run.0 = index;
                }
                run.1.push(c);
                if repeat == Repeat::AtLeastOnce {
                    flush(&mut run, &mut best);
                }
            }
            _ => flush(&mut run, &mut best),
        }
    }
    flush(&mut run, &mut best);
    let (first, literal) = best;
    if literal.is_empty() {
        return None;
    }
    let lead = if ignore_case {
        None
    } else {
        atoms[..first]
            .iter()
            .map(|(atom, _)| match atom {
                Atom::Char(c) => Some(Lead::Char(*c)),
                Atom::Class(lead) => Some(*lead),
                Atom::Other => None,
            })
            .collect::<Option<Vec<Lead>>>()
    };
    Some(Prefilter {
        literal: literal.into_iter().collect(),
        lead,
    })
}

/// Where the first match can start at the earliest: the start of the run of `lead` characters
/// that ends at `at` (the literal's first occurrence).
pub(crate) fn lead_start(text: &str, at: usize, lead: &[Lead]) -> usize {
    let mut start = at;
    for (index, c) in text[..at].char_indices().rev() {
        if !lead.iter().any(|l| l.contains(c)) {
            break;
        }
        start = index;
    }
    start
}

/// The byte offset of the first occurrence of `literal` in `text` (ignoring ASCII case for a
/// rule with the `i` flag; such a literal is all ASCII, see [`prefilter`]).
///
/// A scan for the first byte followed by a comparison: the texts are short, so this beats
/// setting up a substring searcher per text. Comparing bytes is exact for UTF-8 (a match of a
/// whole valid needle starts on a character boundary).
pub(crate) fn find_literal(text: &str, literal: &str, ignore_case: bool) -> Option<usize> {
    let needle = literal.as_bytes();
    let hay = text.as_bytes();
    let first = *needle.first()?;
    if needle.len() > hay.len() {
        return None;
    }
    let last_start = hay.len() - needle.len();
    let mut from = 0;
    if !ignore_case {
        while from <= last_start {
            let at = from + hay[from..=last_start].iter().position(|&b| b == first)?;
            if &hay[at..at + needle.len()] == needle {
                return Some(at);
            }
            from = at + 1;
        }
        return None;
    }
    let (lower, upper) = (first.to_ascii_lowercase(), first.to_ascii_uppercase());
    while from <= last_start {
        let at = from
            + hay[from..=last_start]
                .iter()
                .position(|&b| b == lower || b == upper)?;
        if hay[at..at + needle.len()].eq_ignore_ascii_case(needle) {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

/// One top-level piece of a pattern, as far as the prefilter cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Atom {
    /// A character that matches itself (before case folding).
    Char(char),
    /// `\s`, `\d` or `\w`.
    Class(Lead),
    /// Anything else: a group, class, escape, assertion, `.`, or an annex-B literal brace.
    Other,
}

/// How often a top-level atom occurs in every match.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Repeat {
    Once,
    /// One or more times (`+`, `{n,…}` with n ≥ 1, lazy or not).
    AtLeastOnce,
    /// Possibly not at all (`*`, `?`, `{0…}`).
    MaybeNone,
}

/// Characters that an escape turns into themselves in every mode.
const SYNTAX: &str = "^$\\.*+?()[]{}|/-";

/// The pattern's top-level atoms with their quantifiers, or `None` when the pattern is not
/// understood well enough (the caller then derives nothing). Atoms inside groups are not
/// listed; a group as a whole is one [`Atom::Other`].
fn top_level_atoms(pattern: &str, unicode_sets: bool) -> Option<Vec<(Atom, Repeat)>> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut atoms = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let (atom, next) = match c {
            '\\' => {
                let e = *chars.get(i + 1)?;
                if SYNTAX.contains(e) {
                    (Atom::Char(e), i + 2)
                } else if let Some(lead) = match e {
                    's' => Some(Lead::Space),
                    'd' => Some(Lead::Digit),
                    'w' => Some(Lead::Word),
                    _ => None,
                } {
                    (Atom::Class(lead), i + 2)
                } else {
                    (Atom::Other, escape_end(&chars, i + 2, e))
                }
            }
            '[' => (Atom::Other, class_end(&chars, i + 1, unicode_sets)?),
            '(' => {
                depth += 1;
                i += 1;
                // `(?:`, `(?=`, `(?<name>` …: the `?` belongs to the group, not a quantifier.
                if chars.get(i) == Some(&'?') {
                    i += 1;
                }
                continue;
            }
            ')' => {
                depth = depth.checked_sub(1)?;
                (Atom::Other, i + 1)
            }
            // A quantifier without an atom (`*a`): not a valid pattern outside groups; inside a
            // group nothing is collected anyway. A top-level alternative breaks every run.
            '*' | '+' | '?' | '|' if depth == 0 => return None,
            _ if depth > 0 => (Atom::Other, i + 1),
            // `{` that is not a quantifier, `}` and `]` are annex-B literals; a well-formed
            // quantifier here has nothing to repeat, so the engine rejects the pattern.
            '{' | '}' | ']' | '.' | '^' | '$' => (Atom::Other, i + 1),
            _ => (Atom::Char(c), i + 1),
        };
        let (repeat, after) = quantifier(&chars, next);
        if depth == 0 {
            atoms.push((atom, repeat));
        }
        i = after;
    }
    (depth == 0).then_some(atoms)
}

/// The quantifier at `at` (if any) and where it ends, lazy `?` included.
fn quantifier(chars: &[char], at: usize) -> (Repeat, usize) {
    let (repeat, end) = match chars.get(at) {
        Some('*') | Some('?') => (Repeat::MaybeNone, at + 1),
        Some('+') => (Repeat::AtLeastOnce, at + 1),
        Some('{') => match braced_quantifier(chars, at) {
            Some((min, end)) if min_is_zero(&min) => (Repeat::MaybeNone, end),
            Some((_, end)) => (Repeat::AtLeastOnce, end),
            None => return (Repeat::Once, at),
        },
        _ => return (Repeat::Once, at),
    };
    if chars.get(end) == Some(&'?') {
        (repeat, end + 1)
    } else {
        (repeat, end)
    }
}

fn min_is_zero(digits: &[char]) -> bool {
    digits.iter().all(|&d| d == '0')
}

/// `{digits}`, `{digits,}` or `{digits,digits}` at `at`: the minimum's digits and the index after
/// `}`.
fn braced_quantifier(chars: &[char], at: usize) -> Option<(Vec<char>, usize)> {
    let digits_from = |from: usize| {
        chars[from.min(chars.len())..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count()
    };
    let min_len = digits_from(at + 1);
    if min_len == 0 {
        return None;
    }
    let min = chars[at + 1..at + 1 + min_len].to_vec();
    let mut end = at + 1 + min_len;
    if chars.get(end) == Some(&',') {
        end += 1;
        end += digits_from(end);
    }
    (chars.get(end) == Some(&'}')).then_some((min, end + 1))
}

/// Where the escape `\e` ends (`after` is the index after `e`). Only characters that belong to
/// the escape in some reading are consumed (hex digits, letters, digits, a name), never a
/// character that opens or closes a group or class, so the scan stays in step with the engine
/// either way.
fn escape_end(chars: &[char], after: usize, e: char) -> usize {
    let hex_run = |from: usize, max: usize| {
        chars[from.min(chars.len())..]
            .iter()
            .take(max)
            .take_while(|c| c.is_ascii_hexdigit())
            .count()
    };
    let braced = |from: usize, ok: fn(&char) -> bool| -> Option<usize> {
        if chars.get(from) != Some(&'{') {
            return None;
        }
        let len = chars[from + 1..].iter().take_while(|c| ok(c)).count();
        (chars.get(from + 1 + len) == Some(&'}')).then_some(from + len + 2)
    };
    match e {
        'u' => {
            if let Some(end) = braced(after, char::is_ascii_hexdigit) {
                end
            } else if hex_run(after, 4) == 4 {
                after + 4
            } else {
                after
            }
        }
        'x' if hex_run(after, 2) == 2 => after + 2,
        'c' if chars.get(after).is_some_and(char::is_ascii_alphabetic) => after + 1,
        'k' if chars.get(after) == Some(&'<') => {
            let len = chars[after + 1..]
                .iter()
                .take_while(|c| c.is_alphanumeric() || matches!(c, '_' | '$' | '\\'))
                .count();
            if chars.get(after + 1 + len) == Some(&'>') {
                after + len + 2
            } else {
                after
            }
        }
        'p' | 'P' => braced(after, |c| {
            c.is_ascii_alphanumeric() || matches!(c, '_' | '=')
        })
        .unwrap_or(after),
        '0'..='9' => {
            after
                + chars[after..]
                    .iter()
                    .take_while(|c| c.is_ascii_digit())
                    .count()
        }
        _ => after,
    }
}

/// The index after the class that starts before `from` (just after its `[`), or `None` when it
/// is not terminated. `]` right after `[` or `[^` closes an empty class, as in JavaScript; with
/// the `v` flag classes nest.
fn class_end(chars: &[char], from: usize, unicode_sets: bool) -> Option<usize> {
    let mut depth = 1usize;
    let mut i = from;
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 2,
            '[' if unicode_sets => {
                depth += 1;
                i += 1;
            }
            ']' => {
                depth -= 1;
                i += 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => i += 1,
        }
    }
    None
}

#[cfg(test)]
mod literal_tests {
    use super::{find_literal, lead_start, prefilter, Lead};

    fn required_literal(pattern: &str, flags: &str) -> Option<String> {
        prefilter(pattern, flags).map(|p| p.literal)
    }

    #[test]
    fn derives_only_provable_literals() {
        let cases = [
            (r"\s*\(OOC:[^)]+\)", "", Some("(OOC:")),
            (r"secret-[0-9]+", "g", Some("secret-")),
            (r"Name: (\w+)", "g", Some("Name: ")),
            (r"colou?r", "", Some("colo")),
            (r"ab+c", "", Some("ab")),
            (r"a|bcd", "", None),
            (r"Hello", "gi", Some("Hello")),
            (r"Kiss", "gi", None),
            (r"(please|kindly) look at", "gi", Some(" loo")),
            (r"(a|b)cd|e", "", None),
            (r"[|]cd(a|b)", "", Some("cd")),
            (r"ab\.cd", "i", Some("ab.cd")),
            (r"ıx", "i", Some("x")),
            (r"(?<=abc)def", "", Some("def")),
            (r"x*", "g", None),
            (r"x+", "g", Some("x")),
            (r"[\w.]+@[\w.]+\.[a-z]{2,}", "g", Some("@")),
            (r"\bword\b", "", Some("word")),
            (r"a{2}bc", "", Some("bc")),
            (r"[abc]def", "", Some("def")),
            (r"(abc)", "", None),
            (r"\u0041BC", "u", Some("BC")),
            // Counted quantifiers: their digits are never literal text.
            (r"a{2,}", "g", Some("a")),
            (r"(ab){2,}", "g", None),
            (r"a{1,3}", "g", Some("a")),
            (r"a{10}", "g", Some("a")),
            (r"\d{4}", "g", None),
            (r"xy{0,2}z", "g", Some("x")),
            (r"xy{2}z", "g", Some("xy")),
            (r"xyz{3}?w", "g", Some("xyz")),
            (r"ab{0}cd", "g", Some("cd")),
            (r"ab{00,1}cd", "g", Some("cd")),
            (r"abc{1,}?de", "g", Some("abc")),
            (r"(ab)+cd", "", Some("cd")),
            (r"(?:ab){3}cd", "", Some("cd")),
            (r"(?=ab)?cd", "", Some("cd")),
            // Braces that are not a quantifier are annex-B literals, counted as "anything".
            (r"a{,5}", "", Some(",5")),
            (r"u{1F600}", "", Some("1F600")),
            (r"x{y}z", "", Some("x")),
            // Escapes.
            (r"\x41BC", "", Some("BC")),
            (r"\xZZ", "", Some("ZZ")),
            (r"\u{1F600}ab", "u", Some("ab")),
            (r"\cJab", "", Some("ab")),
            (r"\c1ab", "", Some("1ab")),
            (r"(?<n>x)\k<n>ab", "", Some("ab")),
            (r"\p{L}ab", "u", Some("ab")),
            (r"(a)\12ab", "", Some("ab")),
            (r"\.\*ab", "", Some(".*ab")),
            (r"a\-b", "", Some("a-b")),
            // Classes: brackets and parentheses inside never change the depth.
            (r"[)]abc", "", Some("abc")),
            (r"[\]]abc", "", Some("abc")),
            (r"[]abc", "", Some("abc")),
            (r"[^]abc", "", Some("abc")),
            (r"([)]ab)?cd", "", Some("cd")),
            // Unbalanced or unterminated: nothing.
            (r"ab)cd", "", None),
            (r"[abcd", "", None),
            (r"*abcd", "", None),
        ];
        for (pattern, flags, expected) in cases {
            assert_eq!(
                required_literal(pattern, flags).as_deref(),
                expected,
                "/{pattern}/{flags}"
            );
        }
    }

    #[test]
    fn case_insensitive_prefilter_ignores_ascii_case_only() {
        assert_eq!(find_literal("say HeLLo there", "hello", true), Some(4));
        assert_eq!(find_literal("hello", "HELLO", true), Some(0));
        assert_eq!(find_literal("say hell o", "hello", true), None);
        assert_eq!(find_literal("hel", "hello", true), None);
        assert_eq!(find_literal("ééhellO", "Hello", true), Some(4));
        assert_eq!(find_literal("say HeLLo there", "hello", false), None);
        assert_eq!(find_literal("say hello there", "hello", false), Some(4));
        assert_eq!(find_literal("ééhéllo", "hé", false), Some(4));
        assert_eq!(find_literal("aab", "ab", false), Some(1));
        assert_eq!(find_literal("a", "ab", false), None);
    }

    #[test]
    fn lead_characters_before_the_literal() {
        let lead = |pattern: &str, flags: &str| prefilter(pattern, flags).and_then(|p| p.lead);
        assert_eq!(lead(r"\s*\(OOC:[^)]+\)", "g"), Some(vec![Lead::Space]));
        assert_eq!(lead(r"secret-[0-9]+", "g"), Some(vec![]));
        assert_eq!(
            lead(r"\d{2}x?\w+-abc", ""),
            Some(vec![Lead::Digit, Lead::Char('x'), Lead::Word])
        );
        // Anything else before the literal, or the `i` flag: no lead.
        assert_eq!(lead(r"[\w.]+@", "g"), None);
        assert_eq!(lead(r"\bword", ""), None);
        assert_eq!(lead(r"(a)bc", ""), None);
        assert_eq!(lead(r"\S*bc", ""), None);
        assert_eq!(lead(r"\s*bc", "i"), None);
        // The run of lead characters that ends at the literal.
        assert_eq!(lead_start("ab  \t(OOC:", 5, &[Lead::Space]), 2);
        assert_eq!(lead_start("ab(OOC:", 2, &[Lead::Space]), 2);
        assert_eq!(lead_start("  é1(", 5, &[Lead::Space, Lead::Digit]), 4);
        assert_eq!(lead_start("é 1(", 4, &[Lead::Space, Lead::Digit]), 2);
    }
}
