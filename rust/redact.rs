//! Secret matching for the redactor: one Aho-Corasick automaton for all secrets.
//!
//! Two automata are built from the same secrets. `replace` uses the raw secrets and rewrites a
//! string, leftmost-longest, so a secret that contains another is replaced whole. `contains_json`
//! also knows each secret's JSON-escaped spelling; the Python redactor serializes a whole value
//! once and asks it whether any secret occurs anywhere, which lets the common case (no secret
//! present) skip the walk over the value entirely.
//!
//! Secrets and texts are bytes: UTF-8, or for a Python string holding a lone surrogate (which a
//! JSON decoder lets through from `"\ud800"`), its "surrogatepass" encoding, where each surrogate
//! is the three bytes `ED A0..BF 80..BF`. No valid UTF-8 secret can match inside those three bytes
//! (a UTF-8 sequence that starts with `ED` goes on with `80..9F`), so a match never splits a
//! character, and a secret holding a surrogate matches exactly where the same surrogate stands.

use std::fmt::Write as _;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, AhoCorasickKind, MatchKind};

/// Most secrets one matcher takes; beyond this a host should rotate, not list.
pub const MAX_SECRETS: usize = 65_536;
/// Longest secret accepted, in bytes.
pub const MAX_SECRET_BYTES: usize = 65_536;

/// Why a matcher could not be built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MatcherError {
    TooManySecrets,
    SecretTooLong,
    Automaton(String),
}

impl std::fmt::Display for MatcherError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::TooManySecrets => write!(f, "at most {MAX_SECRETS} secrets are accepted"),
            Self::SecretTooLong => write!(f, "a secret is longer than {MAX_SECRET_BYTES} bytes"),
            Self::Automaton(reason) => write!(f, "secret matcher could not be built: {reason}"),
        }
    }
}

impl std::error::Error for MatcherError {}

/// Matches and replaces a fixed set of secrets.
#[derive(Debug, Clone)]
pub struct SecretMatcher {
    raw: Option<AhoCorasick>,
    json: Option<AhoCorasick>,
    replacement: Box<str>,
    count: usize,
}

/// The body of a JSON string literal for `text`, as `serde_json` and `orjson` write it.
pub fn json_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    for ch in text.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out
}

/// Total secret bytes (spellings included) up to which the matcher may be a DFA. Past it the
/// contiguous NFA, built in linear time, is used instead: the DFA's build grows with the square
/// of a repetitive secret times the distinct bytes of all of them (a run of one byte and 93
/// others took 2 s at 4 KiB, 20 ms at 256 bytes, about 1 ms at 128), with the GIL held. Both scan
/// behind the same prefilters, at about the same speed on text that holds no secret.
const DFA_MAX_PATTERN_BYTES: usize = 128;

fn build(patterns: &[Vec<u8>]) -> Result<Option<AhoCorasick>, MatcherError> {
    if patterns.is_empty() {
        return Ok(None);
    }
    let total: usize = patterns.iter().map(Vec::len).sum();
    let kind = (total > DFA_MAX_PATTERN_BYTES).then_some(AhoCorasickKind::ContiguousNFA);
    AhoCorasickBuilder::new()
        .match_kind(MatchKind::LeftmostLongest)
        .kind(kind)
        .build(patterns)
        .map(Some)
        .map_err(|err| MatcherError::Automaton(err.to_string()))
}

impl SecretMatcher {
    /// Builds a matcher; empty secrets are ignored, repeats are merged.
    pub fn new<S: AsRef<[u8]>>(secrets: &[S], replacement: &str) -> Result<Self, MatcherError> {
        if secrets.len() > MAX_SECRETS {
            return Err(MatcherError::TooManySecrets);
        }
        let mut raw: Vec<Vec<u8>> = Vec::with_capacity(secrets.len());
        for secret in secrets {
            let secret = secret.as_ref();
            if secret.len() > MAX_SECRET_BYTES {
                return Err(MatcherError::SecretTooLong);
            }
            if !secret.is_empty() {
                raw.push(secret.to_owned());
            }
        }
        raw.sort_unstable();
        raw.dedup();
        let mut json = raw.clone();
        // A secret holding a surrogate has no JSON spelling here: the JSON writer refuses any
        // value holding one, and the redactor then walks the value instead of scanning it.
        json.extend(
            raw.iter()
                .filter_map(|secret| std::str::from_utf8(secret).ok())
                .map(|secret| json_escape(secret).into_bytes())
                // `raw` is sorted: a binary search keeps many secrets from costing n².
                .filter(|escaped| raw.binary_search(escaped).is_err()),
        );
        Ok(Self {
            raw: build(&raw)?,
            json: build(&json)?,
            replacement: replacement.into(),
            count: raw.len(),
        })
    }

    /// Number of distinct non-empty secrets.
    pub fn len(&self) -> usize {
        self.count
    }

    /// True when there is nothing to match.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The replacement text.
    pub fn replacement(&self) -> &str {
        &self.replacement
    }

    /// Whether `text` (UTF-8, or surrogatepass bytes) contains any secret.
    pub fn contains(&self, text: &[u8]) -> bool {
        self.raw.as_ref().is_some_and(|ac| ac.is_match(text))
    }

    /// Whether JSON bytes contain any secret, raw or escaped.
    pub fn contains_json(&self, json: &[u8]) -> bool {
        self.json.as_ref().is_some_and(|ac| ac.is_match(json))
    }

    /// `text` with every secret replaced, or `None` when it holds none (no allocation).
    pub fn replace(&self, text: &str) -> Option<String> {
        let ac = self.raw.as_ref()?;
        if !ac.is_match(text) {
            return None;
        }
        let mut out = String::with_capacity(text.len());
        ac.replace_all_with(text, &mut out, |_, _, dst| {
            dst.push_str(&self.replacement);
            true
        });
        Some(out)
    }

    /// `replace` for surrogatepass bytes (a string holding a lone surrogate): the same bytes
    /// with every secret replaced, or `None` when they hold none.
    pub fn replace_bytes(&self, text: &[u8]) -> Option<Vec<u8>> {
        let ac = self.raw.as_ref()?;
        if !ac.is_match(text) {
            return None;
        }
        let mut out = Vec::with_capacity(text.len());
        ac.replace_all_with_bytes(text, &mut out, |_, _, dst| {
            dst.extend_from_slice(self.replacement.as_bytes());
            true
        });
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn replaces_every_occurrence() {
        let matcher = SecretMatcher::new(&["sk-1", "pw"], "[REDACTED]").unwrap();
        assert_eq!(
            matcher.replace("a sk-1 b pw sk-1").as_deref(),
            Some("a [REDACTED] b [REDACTED] [REDACTED]")
        );
        assert_eq!(matcher.replace("clean"), None);
    }

    #[test]
    fn longest_secret_wins() {
        let matcher = SecretMatcher::new(&["abc", "abcdef"], "*").unwrap();
        assert_eq!(matcher.replace("xabcdefx").as_deref(), Some("x*x"));
    }

    #[test]
    fn empty_secrets_are_ignored() {
        let matcher = SecretMatcher::new(&["", ""], "*").unwrap();
        assert!(matcher.is_empty());
        assert_eq!(matcher.replace("anything"), None);
        assert!(!matcher.contains_json(b"\"anything\""));
    }

    #[test]
    fn json_check_finds_escaped_secrets() {
        let matcher = SecretMatcher::new(&["a\"b\\c\n"], "*").unwrap();
        assert!(matcher.contains_json(br#"{"k":"xa\"b\\c\ny"}"#));
        assert!(!matcher.contains_json(br#"{"k":"ab"}"#));
    }

    #[test]
    fn escape_follows_the_json_string_rules() {
        assert_eq!(json_escape("plain é/"), "plain é/");
        assert_eq!(
            json_escape("q\"b\\n\n\r\t\u{8}\u{c}"),
            "q\\\"b\\\\n\\n\\r\\t\\b\\f"
        );
        assert_eq!(json_escape("\u{1}\u{1f}\u{7f}"), "\\u0001\\u001f\u{7f}");
    }

    #[test]
    fn limits_are_enforced() {
        let long = "x".repeat(MAX_SECRET_BYTES + 1);
        assert_eq!(
            SecretMatcher::new(&[long], "*").unwrap_err(),
            MatcherError::SecretTooLong
        );
    }

    #[test]
    fn past_the_dfa_budget_the_matcher_finds_the_same_secrets() {
        // A long, repetitive secret (the DFA's worst build) and a short one inside it: the NFA
        // chosen past DFA_MAX_PATTERN_BYTES keeps leftmost-longest matching and JSON spellings.
        let long = "ab".repeat(30_000);
        assert!(long.len() > DFA_MAX_PATTERN_BYTES);
        let matcher = SecretMatcher::new(&[long.as_str(), "abab", "q\"z"], "*").unwrap();
        assert_eq!(
            matcher.replace(&format!("x{long}y ababa q\"z")).as_deref(),
            Some("x*y *a *")
        );
        assert!(matcher.contains_json(br#"{"k":"q\"z"}"#));
    }

    #[test]
    fn many_secrets_keep_their_json_spellings() {
        let secrets: Vec<String> = (0..20_000).map(|n| format!("key-{n:05}\"x")).collect();
        let matcher = SecretMatcher::new(&secrets, "*").unwrap();
        assert_eq!(matcher.len(), 20_000);
        assert!(matcher.contains_json(br#"["key-19999\"x"]"#));
        assert_eq!(
            matcher.replace("a key-00042\"x b").as_deref(),
            Some("a * b")
        );
    }

    proptest! {
        #[test]
        fn no_secret_survives_replacement(
            secrets in proptest::collection::vec("[a-c]{2,4}", 1..4),
            text in "[a-d]{0,40}",
        ) {
            let matcher = SecretMatcher::new(&secrets, "#").unwrap();
            let out = matcher.replace(&text).unwrap_or_else(|| text.clone());
            for secret in &secrets {
                // The replacement itself cannot form a secret: '#' is outside the alphabet.
                prop_assert!(!out.contains(secret.as_str()));
            }
        }
    }
}
