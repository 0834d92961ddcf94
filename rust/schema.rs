//! Compiled JSON Schema validators in a bounded LRU cache.
//!
//! Every validator is built through `build_validator`: the guards of `guards.rs` first, then the
//! `jsonschema` crate with an explicit draft (2020-12 unless `$schema` names draft 7 or
//! 2019-09), a retriever that refuses every URI (no network, no files, ever), the linear-time
//! `regex` engine with size limits for `pattern` and `patternProperties`, and format assertions
//! off. Compiled validators are cached under a 64-bit key that the caller keeps (computed once
//! per schema from its canonical bytes); a lookup is one hash-map probe under a short lock, and
//! the validator is an `Arc` cloned out before validation so the lock is never held while
//! validating.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::hash::{BuildHasher, Hasher};
use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};

use jsonschema::error::{TypeKind, ValidationErrorKind};
use jsonschema::json::{Json, SerdeJson};
use jsonschema::paths::Location;
use jsonschema::{Draft, PatternCache, PatternOptions, Retrieve, Uri, ValidationError, Validator};
use lru::LruCache;
use serde_json::Value;

use crate::document::{Document, Entry};
use crate::guards::{
    GuardViolation, ISSUE_UNIT_BYTES, IssueWeights, Limits, VALUE_COPY_BYTES,
    check_schema_with_words,
};

/// Pattern keywords compiled through one shared `PatternCache` before it is replaced by an
/// empty one: the cache is what lets schemas that repeat a pattern compile it once, and the
/// replacement is what keeps it bounded under a stream of schemas with new patterns.
pub const MAX_SHARED_PATTERNS: usize = 4096;

/// Refuses every external reference. The guards already refuse non-local `$ref`; this is the
/// second lock on the same door.
struct DenyRetriever;

impl Retrieve for DenyRetriever {
    fn retrieve(
        &self,
        uri: &Uri<String>,
    ) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        Err(format!("external reference refused: {}", uri.as_str()).into())
    }
}

/// The draft named by `$schema`, 2020-12 when absent.
pub fn draft_of(schema: &Value) -> Result<Draft, GuardViolation> {
    let Some(declared) = schema.get("$schema") else {
        return Ok(Draft::Draft202012);
    };
    let Value::String(uri) = declared else {
        return Err(GuardViolation::InvalidSchema {
            reason: "$schema must be a string".into(),
        });
    };
    let trimmed = uri.trim_end_matches('#');
    match trimmed {
        "https://json-schema.org/draft/2020-12/schema" => Ok(Draft::Draft202012),
        "https://json-schema.org/draft/2019-09/schema" => Ok(Draft::Draft201909),
        "http://json-schema.org/draft-07/schema" => Ok(Draft::Draft7),
        _ => Err(GuardViolation::UnsupportedDraft {
            declared: uri.clone(),
        }),
    }
}

/// The largest program a `pattern` (or a `patternProperties` name) may compile to, in bytes
/// (the `regex` crate's `size_limit`). The linear-time engine can spend time in proportion to
/// the program's size on every byte it matches: when a pattern's lazy DFA gives up (an
/// unanchored `a(a|b){300}!` makes it), the engine that takes over steps every state of the
/// program for each byte, about 0.08 ns per program byte per subject byte. At this limit the
/// worst pattern measured (`a(a|b){961}!`) costs about 30 us per byte each time a string is
/// matched (30 s for a 1 MiB string), where the crate's default of 10 MiB allowed `[^\n]{8000}z`
/// over 300 us per byte; ordinary patterns cost a few nanoseconds per byte whatever their size.
/// The limit keeps two Unicode property classes in one pattern (`^\p{Lu}\p{Ll}+$`): `\p{Letter}`
/// alone compiles to about 43 KB (the official test suite uses `^\p{Letter}+$`). ASCII classes
/// cost about 70 bytes per repetition and ECMA-262 `.` about 1.3 KB, in the middle of a pattern
/// (`x.{97}y` fits, `x.{98}y` does not); the crate counts a class repeated over the whole
/// pattern (`^\p{L}{1,100}$`) and cuts a count at either end (`\p{L}{1,100}` is `\p{L}`) without
/// compiling the repetition.
pub const MAX_PATTERN_BYTES: usize = 128 * 1024;

/// The most the distinct patterns of one schema (`pattern` values and `patternProperties`
/// names) may compile to together, as the compiled programs hold them (about half what
/// `MAX_PATTERN_BYTES` counts while a program is built: `a(a|b){961}!`, at that limit, holds
/// 70 KB; `^\p{Letter}+$` 16 KB; `^[^@ ]+@[^@ ]+$` 1.3 KB). Every distinct pattern stays
/// compiled and may be matched on each call, and the worst cost a byte matched in proportion to
/// the program: this keeps a schema's patterns within about seven at the limit for one. Without
/// it, 3,000 patterns of 120 KB each in a 65 KB schema took 800 MiB to compile and 15 s to
/// match one 1 KB property name.
pub const MAX_SCHEMA_PATTERN_BYTES: usize = 4 * MAX_PATTERN_BYTES;

/// The most the lazy DFA caches of one schema's patterns may hold together: each distinct
/// pattern gets an equal share, at most the `regex` crate's default of 2 MiB. A cache fills as
/// strings are matched and stays allocated with the pattern, so 320 small patterns built to fill
/// theirs held 830 MiB after one call; a pattern whose share is too small for its states is
/// matched without the lazy DFA, more slowly, never wrongly.
pub const MAX_SCHEMA_DFA_BYTES: usize = 16 * 1024 * 1024;

/// The `regex` crate's own default capacity of one pattern's lazy DFA cache.
const REGEX_DEFAULT_DFA_BYTES: usize = 2 * 1024 * 1024;

/// The lazy DFA cache of each pattern of a schema with `distinct` patterns.
pub fn dfa_share(distinct: usize) -> usize {
    (MAX_SCHEMA_DFA_BYTES / distinct.max(1)).min(REGEX_DEFAULT_DFA_BYTES)
}

/// Refuses `patterns` whose distinct texts compile to more than `MAX_SCHEMA_PATTERN_BYTES`
/// (`compiled_pattern_bytes`), before the validator compiles any of them; else how many
/// distinct texts there are.
pub fn check_pattern_total(patterns: &[&str]) -> Result<usize, GuardViolation> {
    if patterns.is_empty() {
        return Ok(0);
    }
    let mut seen = ahash::AHashSet::with_capacity(patterns.len());
    let mut total = 0usize;
    for &pattern in patterns {
        if seen.insert(pattern) {
            total = total.saturating_add(compiled_pattern_bytes(pattern));
            if total > MAX_SCHEMA_PATTERN_BYTES {
                seen.extend(patterns);
                return Err(GuardViolation::PatternsTooLarge {
                    distinct: seen.len(),
                    limit: MAX_SCHEMA_PATTERN_BYTES,
                });
            }
        }
    }
    Ok(seen.len())
}

/// Pattern texts measured recently, with what each compiles to: schemas of one host share most
/// of their patterns, and a pattern is measured by compiling it.
static PATTERN_BYTES: std::sync::LazyLock<Mutex<LruCache<Box<str>, usize>>> =
    std::sync::LazyLock::new(|| {
        Mutex::new(LruCache::new(
            NonZeroUsize::new(4096).unwrap_or(NonZeroUsize::MIN),
        ))
    });

/// The bytes `pattern`'s program holds as the validator compiles it: translated from ECMA-262
/// and cut to the form it is matched in, as the `jsonschema` crate does, then compiled to the
/// Thompson NFA the `regex` crate builds under its `size_limit`. A pattern matched by counting
/// characters holds nothing; one that does not compile within `MAX_PATTERN_BYTES` (refused
/// when the schema is built, unless the crate matches it without an engine) counts as that.
pub fn compiled_pattern_bytes(pattern: &str) -> usize {
    if let Ok(mut known) = PATTERN_BYTES.lock()
        && let Some(&bytes) = known.get(pattern)
    {
        return bytes;
    }
    let bytes = measure_pattern(pattern);
    if let Ok(mut known) = PATTERN_BYTES.lock() {
        known.put(pattern.into(), bytes);
    }
    bytes
}

fn measure_pattern(pattern: &str) -> usize {
    use regex_automata::nfa::thompson::NFA;
    let Ok(translated) = jsonschema_regex::to_rust_regex(pattern) else {
        return MAX_PATTERN_BYTES;
    };
    let form = match jsonschema_regex::search_form(pattern, &translated) {
        Some(jsonschema_regex::Search::RepeatedClass(_)) => return 0,
        Some(jsonschema_regex::Search::Collapsed(collapsed)) => Cow::Owned(collapsed),
        None => translated,
    };
    NFA::compiler()
        .configure(NFA::config().nfa_size_limit(Some(MAX_PATTERN_BYTES)))
        .build(&form)
        .map_or(MAX_PATTERN_BYTES, |nfa| nfa.memory_usage())
}

/// The `regex` crate's own default `size_limit`, what patterns compiled under before
/// `MAX_PATTERN_BYTES`: a pattern refused at our limit that compiles at this one is refused for
/// its size (`schema_pattern_too_large`), one that does not stays `schema_invalid`.
const REGEX_DEFAULT_SIZE_LIMIT: usize = 10 * 1024 * 1024;

/// Runs the guards and compiles a validator for instances in the JSON representation `F`
/// (`serde_json` values in the tests, argument documents in the bindings), sharing compiled
/// patterns through `patterns` when given. Returns the validator and how many pattern keywords
/// the schema holds.
///
/// Patterns run on the `regex` crate's linear-time engine, each compiled program at most
/// `MAX_PATTERN_BYTES`, all of them at most `MAX_SCHEMA_PATTERN_BYTES`, and their lazy DFA
/// caches `MAX_SCHEMA_DFA_BYTES` together (`dfa_share`; a cache larger than the crate's default
/// of 2 MiB does not help the patterns that defeat it). With a size limit set the crate
/// compiles every pattern in full when the schema is built, so a pattern past the limit is
/// refused then, never while validating; simple anchored patterns (`^[0-9]{4}$`) are still
/// matched without the regex engine on ASCII text.
pub fn build_validator<F: Json>(
    schema: &Value,
    limits: &Limits,
    patterns: Option<&PatternCache>,
) -> Result<Built<F>, GuardViolation> {
    let (stats, names) = check_schema_with_words(schema, limits)?;
    let draft = draft_of(schema)?;
    let distinct = check_pattern_total(&names.patterns)?;
    let mut options = jsonschema::options_for::<F>()
        .with_draft(draft)
        .with_retriever(DenyRetriever)
        .with_pattern_options(
            PatternOptions::regex()
                .size_limit(MAX_PATTERN_BYTES)
                .dfa_size_limit(dfa_share(distinct)),
        )
        .should_validate_formats(false);
    if let Some(patterns) = patterns {
        options = options.with_pattern_cache(patterns.clone());
    }
    let validator = options.build(schema).map_err(|err| {
        pattern_too_large(&err).unwrap_or_else(|| GuardViolation::InvalidSchema {
            reason: crate::guards::excerpt(&err.masked().to_string(), 300),
        })
    })?;
    Ok(Built {
        validator,
        patterns: stats.patterns,
        issues: stats.issues,
        property_names: each_once(names.property_names),
        choices: each_once(names.choices),
    })
}

/// The refusal of a pattern the crate would not compile within `MAX_PATTERN_BYTES` but does
/// within the `regex` crate's own default limit; None for every other build error: a pattern
/// that is not a regex, not one the linear-time engine supports, or too large even for that
/// limit (as before there was ours) stays `schema_invalid`. Runs only for a schema that failed
/// to build: one compile of the pattern alone, at most 10 MiB of program (tens of ms).
fn pattern_too_large(err: &ValidationError<'_>) -> Option<GuardViolation> {
    let ValidationErrorKind::Format { format } = err.kind() else {
        return None;
    };
    let Value::String(pattern) = err.instance().as_ref() else {
        return None;
    };
    if format != "regex" {
        return None;
    }
    let alone = serde_json::json!({ "pattern": pattern });
    jsonschema::options()
        .with_retriever(DenyRetriever)
        .with_pattern_options(PatternOptions::regex().size_limit(REGEX_DEFAULT_SIZE_LIMIT))
        .should_validate_formats(false)
        .build(&alone)
        .ok()?;
    let path = err.schema_path().as_str();
    Some(GuardViolation::PatternTooLarge {
        path: crate::guards::excerpt(if path.is_empty() { "/" } else { path }, 200),
        limit: MAX_PATTERN_BYTES,
    })
}

/// `words` in their first order, each once.
fn each_once(words: Vec<&str>) -> Box<[Box<str>]> {
    let mut seen = ahash::AHashSet::with_capacity(words.len());
    words
        .into_iter()
        .filter(|word| seen.insert(*word))
        .map(Box::from)
        .collect()
}

/// A validator with what the guards learned of its schema.
pub struct Built<F: Json> {
    pub validator: Validator<F>,
    /// Pattern keywords the schema holds.
    pub patterns: usize,
    /// What listing the issues of an instance may cost, from the schema alone.
    pub issues: IssueWeights,
    /// Its property names, each once.
    pub property_names: Box<[Box<str>]>,
    /// The short strings of its `enum` and `const` keywords, each once.
    pub choices: Box<[Box<str>]>,
}

/// One problem with an instance: where (JSON Pointer), which keyword, and a masked message that
/// does not quote the instance value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issue {
    /// A shared JSON Pointer (cloning it copies no text).
    pub path: Location,
    pub keyword: Cow<'static, str>,
    pub message: String,
    /// The message depends on the failing keyword alone, never on the instance (type, enum,
    /// the bounds, the lengths, pattern, ...): every issue of that keyword reads the same, so a
    /// caller may keep one copy of the text.
    pub fixed: bool,
}

/// The keywords the crate names its errors by, the most frequent in tool arguments first: an
/// issue borrows its keyword from here, and the bindings keep one Python string of each.
pub const KEYWORDS: [&str; 31] = [
    "type",
    "required",
    "additionalProperties",
    "enum",
    "minimum",
    "maximum",
    "pattern",
    "minLength",
    "maxLength",
    "format",
    "const",
    "minItems",
    "maxItems",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "uniqueItems",
    "anyOf",
    "oneOf",
    "not",
    "falseSchema",
    "minProperties",
    "maxProperties",
    "propertyNames",
    "contains",
    "additionalItems",
    "unevaluatedItems",
    "unevaluatedProperties",
    "contentEncoding",
    "contentMediaType",
    "$ref",
];

/// The position of `keyword` in `KEYWORDS`.
pub fn known_keyword(keyword: &str) -> Option<usize> {
    KEYWORDS.iter().position(|known| *known == keyword)
}

/// The most issue units (`guards::ISSUE_UNIT_BYTES` each) listing every issue of one instance
/// may cost: the `jsonschema` crate materialises every error before it hands over the first
/// (an `anyOf` error holds its branches' errors too), so a report that lists every issue costs
/// memory and time in proportion to all of them. Past this estimate
/// (`DocumentWeight::listing_cost`: at each level of the arguments, its values times what one
/// value there may draw) only the first issue is found. The estimate is an upper bound, several
/// times what tool calls produce; at the budget the hostile schemas measured take at most about
/// 50 MiB, where without it a 39 KB schema and 2.4 KB of arguments took 1.4 GiB (see
/// `docs/validation.md`; `MAX_RECHECKS` bounds the time failing branches spend checking again);
/// the largest estimate of any test's arguments is about two thirds of it.
pub const MAX_LISTING_UNITS: u64 = 1 << 17;

/// The most checks finding the issues of one call may make again (`IssueWeights::rechecks`
/// times the values at each level, `DocumentWeight::recheck_cost`). Past it no issue is located:
/// finding the first would cost as much. About a tenth of a second of checks; arguments that
/// only pass through a few branches never come near it.
pub const MAX_RECHECKS: u64 = 1 << 25;

/// How many issues a report lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listing {
    /// Every issue was found; the total is exact.
    Every,
    /// Only the first issue was found: listing every one could take more than
    /// `MAX_LISTING_UNITS`.
    FirstOnly,
    /// No issue was located: even the first error could take more than `MAX_LISTING_UNITS`
    /// (its `anyOf` or `oneOf` keeps errors from the whole of a large value), so the one issue
    /// is `unlocated_issue()`, at the root.
    Unlocated,
}

/// Issues of one instance: the first `max` of them, how many there were, and whether that is
/// every issue (`listing`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Findings {
    pub issues: Vec<Issue>,
    pub total: usize,
    pub listing: Listing,
}

impl Findings {
    /// A valid instance.
    pub fn none() -> Self {
        Self {
            issues: Vec::new(),
            total: 0,
            listing: Listing::Every,
        }
    }

    /// Exactly these issues.
    pub fn every(issues: Vec<Issue>) -> Self {
        let total = issues.len();
        Self {
            issues,
            total,
            listing: Listing::Every,
        }
    }
}

/// What the arguments add to the cost of listing their issues, in issue units: multiplied by a
/// schema's `IssueWeights`, an upper bound on what the errors take. Level by level: `every`
/// weighs listing every issue (each value may draw the issues of its level,
/// `IssueWeights::per_level`), `one` weighs one error at one value there at most (what the
/// first error's `anyOf` or `oneOf` keeps, `IssueWeights::first_error`, is made of such).
/// An error copies its instance path; an error about an array copies the whole array as a
/// `serde_json::Value` (what an argument document lends the crate, see `DocNode::lazy_value`),
/// one about an object may copy its member names (`additionalProperties`), and one about a
/// string may copy the string (draft 7 `contentEncoding`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DocumentWeight {
    levels: Vec<LevelWeight>,
}

/// One level of a `DocumentWeight` as it is gathered: the values there, the bytes their errors
/// may copy, and the most one error there may copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct LevelWeight {
    values: u64,
    bytes: u64,
    most: u64,
}

impl DocumentWeight {
    /// Per level, what listing every issue there costs per issue one value draws.
    pub fn every(&self) -> impl Iterator<Item = u64> + '_ {
        self.levels.iter().map(|level| {
            let bytes = level.bytes.div_ceil(ISSUE_UNIT_BYTES);
            level.values.saturating_add(bytes)
        })
    }

    /// Per level, what one error about one value there costs at most.
    pub fn one(&self) -> impl Iterator<Item = u64> + '_ {
        self.levels
            .iter()
            .map(|level| 1 + level.most.div_ceil(ISSUE_UNIT_BYTES))
    }

    /// What listing every issue may cost against a schema of `weights`: each level's values
    /// times what one value there may draw.
    pub fn listing_cost(&self, weights: &IssueWeights) -> u64 {
        self.every()
            .zip(weights.per_level.iter())
            .map(|(values, &issues)| values.saturating_mul(issues))
            .fold(0, u64::saturating_add)
    }

    /// The checks finding the issues may make again against a schema of `weights`: each
    /// level's values times what one value there may be checked again.
    pub fn recheck_cost(&self, weights: &IssueWeights) -> u64 {
        self.levels
            .iter()
            .zip(weights.rechecks.iter())
            .map(|(level, &again)| level.values.saturating_mul(again))
            .fold(0, u64::saturating_add)
    }

    /// What the first error may cost against a schema of `weights`: the heaviest `anyOf` or
    /// `oneOf` context at any level, each of its issues as heavy as one error there can be.
    pub fn first_error_cost(&self, weights: &IssueWeights) -> u64 {
        self.one()
            .zip(weights.first_error.iter())
            .map(|(one, &kept)| one.saturating_mul(kept))
            .max()
            .unwrap_or(0)
    }

    /// A value at `level`: each of its errors copies its instance path, its name (into the
    /// errors of `propertyNames`), and `copied` (its member names, or its text).
    fn value(&mut self, level: usize, path: u64, name: u64, copied: u64) {
        if self.levels.len() <= level {
            self.levels.resize(level + 1, LevelWeight::default());
        }
        let own = path.saturating_add(name).saturating_add(copied);
        let at = &mut self.levels[level];
        at.values += 1;
        at.bytes = at.bytes.saturating_add(own);
        at.most = at.most.max(own);
    }

    /// An array at `level`, whose errors each copy the whole of it.
    fn array(&mut self, level: usize, path: u64, copy: u64) {
        let at = &mut self.levels[level];
        at.bytes = at.bytes.saturating_add(copy);
        at.most = at.most.max(path.saturating_add(copy));
    }
}

/// `DocumentWeight` of `doc`, in one walk from the root on an explicit stack of the containers
/// open (as deep as the arguments, whatever their size): each value is weighed on the way down,
/// and each array again on the way up, when the size of its copy is known. Asked only for
/// arguments that failed validation. Where `weights` says so (`IssueWeights::serialises_at`),
/// every error about an array also holds its items serialised: at most
/// `SERIALISED_VALUE_BYTES` a value and six bytes a byte of text, in a buffer that may be twice
/// that.
pub fn document_weight(doc: &Document<'_>, weights: &IssueWeights) -> DocumentWeight {
    let mut weight = DocumentWeight {
        levels: Vec::with_capacity(8),
    };
    if doc.is_empty() {
        weight.value(0, 0, 0, 0);
        return weight;
    }
    let mut open: Vec<Open> = Vec::with_capacity(8);
    let mut value = Some((doc.root_index(), 0usize, 0u64, 0u64));
    let serial = |text: u64| SERIALISED_VALUE_BYTES.saturating_add(text.saturating_mul(6));
    loop {
        // Weigh the next value, opening it if it is a container; else close what is done.
        if let Some((at, level, path, name)) = value.take() {
            let copy = VALUE_COPY_BYTES.saturating_add(name);
            match *doc.entry(at) {
                entry @ (Entry::Array { .. } | Entry::Object { .. }) => {
                    // An `additionalProperties` error copies an object's member names.
                    let names = match entry {
                        Entry::Object { start, len, .. } => doc
                            .object_members(start, len)
                            .iter()
                            .map(|member| VALUE_COPY_BYTES + doc.text(&member.key).len() as u64)
                            .fold(0, u64::saturating_add),
                        _ => 0,
                    };
                    weight.value(level, path, name, names);
                    open.push(Open {
                        entry: erase(entry),
                        level,
                        path,
                        name,
                        done: 0,
                        copy,
                        serial: serial(name),
                    });
                }
                // A string may be copied by its own errors (draft 7 `contentEncoding`).
                Entry::Str(ref text) => {
                    let text = doc.text(text).len() as u64;
                    weight.value(level, path, name, text);
                    let serial = serial(name.saturating_add(text));
                    add_copy(&mut open, copy.saturating_add(text), serial);
                }
                _ => {
                    weight.value(level, path, name, 0);
                    add_copy(&mut open, copy, serial(name));
                }
            }
            continue;
        }
        let Some(top) = open.last_mut() else { break };
        let (level, path) = (top.level + 1, top.path);
        match top.entry {
            Entry::Array { start, len } if top.done < len => {
                let index = top.done;
                top.done += 1;
                let element = doc.array_elements(start, len)[index as usize];
                let digits = u64::from(index.checked_ilog10().unwrap_or(0) + 1);
                value = Some((element, level, path + 1 + digits, 0));
            }
            Entry::Object { start, len, .. } if top.done < len => {
                let member = doc.object_members(start, len)[top.done as usize];
                top.done += 1;
                let key = doc.text(&member.key).len() as u64;
                // Escaped, a name's path segment is at most twice its length.
                value = Some((member.value, level, path + 1 + 2 * key, key));
            }
            _ => {
                let Some(done) = open.pop() else { break };
                // Every error about an array copies the whole array (and may serialise it).
                if matches!(done.entry, Entry::Array { .. }) {
                    let serialised = weights.serialises_at(done.level);
                    let text = if serialised { 2 * done.serial } else { 0 };
                    let copy = done.copy.saturating_add(text);
                    weight.array(done.level, done.path.saturating_add(done.name), copy);
                }
                add_copy(&mut open, done.copy, done.serial);
            }
        }
    }
    weight
}

/// An upper bound on `document_weight(doc).listing_cost(weights)` from the document's size
/// alone: its values (`doc.len()`, which also bounds its depth) and the bytes of its strings and
/// names, with none of the walk. A value's instance path is at most 11 bytes a level plus twice
/// every name above it; the names and texts its errors copy, and an array's copy of its whole
/// subtree (80 bytes a value, `VALUE_COPY_BYTES`, besides the text, and twice its JSON text when
/// the schema serialises items), are bounded the same way. Ordinary invalid calls are far within
/// the budget by this bound, so their issues are listed without weighing the document level by
/// level.
pub fn listing_cost_bound(doc: &Document<'_>, weights: &IssueWeights) -> u64 {
    let values = doc.len() as u64;
    let text = doc.text_bytes();
    // Paths (11 a level, at most `values` levels, and twice the names) and array copies
    // (`values` arrays at most, each at most 80 a value and every text, and twice 28 a value
    // and 6 a byte of text when serialised), per value; names and the copies of object member
    // names and strings, once.
    let (value_bytes, text_bytes) = if weights.serialised_levels != 0 {
        (91 + 2 * SERIALISED_VALUE_BYTES, 3 + 2 * 6)
    } else {
        (91, 3)
    };
    let per_value = values
        .saturating_mul(value_bytes)
        .saturating_add(text.saturating_mul(text_bytes));
    let bytes = values
        .saturating_mul(per_value)
        .saturating_add(values.saturating_mul(VALUE_COPY_BYTES))
        .saturating_add(text.saturating_mul(2));
    // Each level's values and its bytes in issue units (rounded up, so one more a level).
    let units = values
        .saturating_mul(2)
        .saturating_add(2)
        .saturating_add(bytes.div_ceil(ISSUE_UNIT_BYTES));
    units.saturating_mul(weights.most)
}

/// What `collect_issues` needs of an invalid document: its weight, or none at all (nothing to
/// weigh, every issue is listed) when `listing_cost_bound` already fits `MAX_LISTING_UNITS`.
pub fn weigh_document(doc: &Document<'_>, weights: &IssueWeights) -> DocumentWeight {
    let rechecks = (doc.len() as u64).saturating_mul(weights.most_rechecks);
    if listing_cost_bound(doc, weights) <= MAX_LISTING_UNITS && rechecks <= MAX_RECHECKS {
        return DocumentWeight::default();
    }
    document_weight(doc, weights)
}

/// A container entry without the lifetime of its document's text (it holds none).
fn erase(entry: Entry<'_>) -> Entry<'static> {
    match entry {
        Entry::Array { start, len } => Entry::Array { start, len },
        Entry::Object { start, len, sorted } => Entry::Object { start, len, sorted },
        _ => Entry::Null,
    }
}

/// A container `document_weight` is walking: its entry, level, instance path bytes, name bytes
/// (a member's), how many of its values are done, and what a copy of it takes so far.
struct Open {
    entry: Entry<'static>,
    level: usize,
    path: u64,
    name: u64,
    done: u32,
    copy: u64,
    serial: u64,
}

/// Bytes of JSON text one value serialises to at most, besides six for each byte of its text
/// and name (`\u0001`): a number's 24 characters, a separator, and a name's quotes and colon.
const SERIALISED_VALUE_BYTES: u64 = 28;

/// Adds what a copy of a value takes, and its JSON text, to those of the container holding it.
fn add_copy(open: &mut [Open], copy: u64, serial: u64) {
    if let Some(holder) = open.last_mut() {
        holder.copy = holder.copy.saturating_add(copy);
        holder.serial = holder.serial.saturating_add(serial);
    }
}

/// The one issue of arguments too large to locate a problem in (`Listing::Unlocated`).
pub fn unlocated_issue() -> Issue {
    Issue {
        path: Location::new(),
        keyword: Cow::Borrowed("schema"),
        message: "the arguments do not match the schema".to_owned(),
        fixed: true,
    }
}

/// The issues of `instance` against `validator`: up to `max` of them and how many there were
/// (every error is counted; only the first `max` are described); none when it is valid.
///
/// The answer is the `is_valid` verdict; only how many issues are found depends on cost.
/// `weights` (the schema's) and `document` (the arguments', asked for only when they are
/// invalid) bound what listing costs: every issue when `DocumentWeight::listing_cost` is
/// within `MAX_LISTING_UNITS`; else only the first issue (`Validator::validate`, which stops
/// there), when that error's `anyOf` and `oneOf` branches cannot take more
/// (`DocumentWeight::first_error_cost`); else one issue that locates nothing. Nothing is
/// located either when failing branches could check the arguments again more than
/// `MAX_RECHECKS` times over (`DocumentWeight::recheck_cost`): the first error costs that too.
pub fn collect_issues<'i, F: Json>(
    validator: &'i Validator<F>,
    instance: F::Node<'i>,
    max: usize,
    weights: &IssueWeights,
    document: impl FnOnce() -> DocumentWeight,
) -> Findings
where
    F::Node<'i>: Copy,
{
    if validator.is_valid(instance) {
        return Findings::none();
    }
    let weight = document();
    let rechecks_fit = weight.recheck_cost(weights) <= MAX_RECHECKS;
    if weight.listing_cost(weights) > MAX_LISTING_UNITS || !rechecks_fit {
        let first = (rechecks_fit && weight.first_error_cost(weights) <= MAX_LISTING_UNITS)
            .then(|| validator.validate(instance).err())
            .flatten();
        return match first {
            Some(error) => Findings {
                issues: if max > 0 {
                    vec![issue_of(&error)]
                } else {
                    Vec::new()
                },
                total: 1,
                listing: Listing::FirstOnly,
            },
            None => Findings {
                issues: if max > 0 {
                    vec![unlocated_issue()]
                } else {
                    Vec::new()
                },
                total: 1,
                listing: Listing::Unlocated,
            },
        };
    }
    let mut issues = Vec::new();
    let mut total = 0;
    for error in validator.iter_errors(instance) {
        total += 1;
        if issues.len() < max {
            issues.push(issue_of(&error));
        }
    }
    Findings {
        issues,
        total,
        listing: Listing::Every,
    }
}

/// Bytes of an issue's message kept: the crate's message of some keywords quotes the keyword's
/// whole value (a `not` its subschema, a `const` its value), and up to `max` issues are kept at
/// once. Reports show at most `MAX_ISSUE_MESSAGE_BYTES` of a message.
pub const MAX_KEPT_MESSAGE_BYTES: usize = 1024;

/// The issue `error` describes.
fn issue_of(error: &ValidationError<'_>) -> Issue {
    // Room for most messages up front: `to_string` would grow the string from empty,
    // reallocating three or four times per message.
    let mut message = String::with_capacity(MESSAGE_ROOM);
    write_masked_message(&mut message, error);
    if message.len() > MAX_KEPT_MESSAGE_BYTES {
        message = cut(&message, MAX_KEPT_MESSAGE_BYTES).into_owned();
    }
    Issue {
        path: error.instance_path().clone(),
        keyword: {
            let keyword = error.kind().keyword();
            known_keyword(keyword).map_or_else(
                || Cow::Owned(keyword.to_owned()),
                |at| Cow::Borrowed(KEYWORDS[at]),
            )
        },
        message,
        fixed: message_is_fixed(error.kind()),
    }
}

/// Whether the masked message of `kind` is written from the schema keyword's own value only:
/// the kinds whose text names neither the instance's properties nor its items.
fn message_is_fixed(kind: &ValidationErrorKind) -> bool {
    use ValidationErrorKind as Kind;
    matches!(
        kind,
        Kind::Type { .. }
            | Kind::Enum { .. }
            | Kind::Constant { .. }
            | Kind::Maximum { .. }
            | Kind::Minimum { .. }
            | Kind::ExclusiveMaximum { .. }
            | Kind::ExclusiveMinimum { .. }
            | Kind::MultipleOf { .. }
            | Kind::MaxLength { .. }
            | Kind::MinLength { .. }
            | Kind::MaxItems { .. }
            | Kind::MinItems { .. }
            | Kind::MaxProperties { .. }
            | Kind::MinProperties { .. }
            | Kind::Pattern { .. }
            | Kind::Format { .. }
            | Kind::FalseSchema
    )
}

/// Appends `error`'s masked message, the text `error.masked()` displays: written here for the
/// kinds tool arguments meet most (the formatting machinery was a tenth of a report), through the
/// crate's formatter for every other kind. Tests hold the two to the same text.
pub fn write_masked_message(out: &mut String, error: &ValidationError<'_>) {
    let start = out.len();
    if !write_common_message(out, error.kind()) {
        out.truncate(start);
        let _ = write!(out, "{}", error.masked());
    }
}

/// The common kinds of `write_masked_message`; false (with anything written left to discard)
/// for the others.
fn write_common_message(out: &mut String, kind: &ValidationErrorKind) -> bool {
    use ValidationErrorKind as Kind;
    match kind {
        Kind::Type {
            kind: TypeKind::Single(expected),
        } => {
            out.push_str("value is not of type \"");
            out.push_str(expected.as_str());
            out.push('"');
            true
        }
        Kind::Required { property } => {
            push_plain_json(out, property) && {
                out.push_str(" is a required property");
                true
            }
        }
        Kind::AdditionalProperties { unexpected } => {
            out.push_str("Additional properties are not allowed (");
            for (at, name) in unexpected.iter().enumerate() {
                if at > 0 {
                    out.push_str(", ");
                }
                out.push('\'');
                out.push_str(name);
                out.push('\'');
            }
            out.push_str(if unexpected.len() == 1 {
                " was unexpected)"
            } else {
                " were unexpected)"
            });
            true
        }
        Kind::Enum { options } => write_enum_message(out, options),
        Kind::Maximum { limit } => push_limit(out, "value is greater than the maximum of ", limit),
        Kind::Minimum { limit } => push_limit(out, "value is less than the minimum of ", limit),
        Kind::ExclusiveMaximum { limit } => push_limit(
            out,
            "value is greater than or equal to the maximum of ",
            limit,
        ),
        Kind::ExclusiveMinimum { limit } => {
            push_limit(out, "value is less than or equal to the minimum of ", limit)
        }
        Kind::MaxLength { limit } => push_count(out, "value is longer than ", *limit, "character"),
        Kind::MinLength { limit } => push_count(out, "value is shorter than ", *limit, "character"),
        Kind::Pattern { pattern } => {
            out.push_str("value does not match \"");
            out.push_str(pattern);
            out.push('"');
            true
        }
        _ => false,
    }
}

/// "value is not one of a, b or c", or the first two and "or N other candidates" past three.
fn write_enum_message(out: &mut String, options: &Value) -> bool {
    const SHOWN_IN_FULL: usize = 3;
    let Some(options) = options.as_array() else {
        return false;
    };
    out.push_str("value is not one of ");
    let count = options.len();
    let shown = if count <= SHOWN_IN_FULL {
        count
    } else {
        SHOWN_IN_FULL - 1
    };
    for (at, option) in options.iter().take(shown).enumerate() {
        if at > 0 {
            out.push_str(if count <= SHOWN_IN_FULL && at == count - 1 {
                " or "
            } else {
                ", "
            });
        }
        if !push_plain_json(out, option) {
            return false;
        }
    }
    if count > SHOWN_IN_FULL {
        let _ = write!(out, " or {} other candidates", count - shown);
    }
    true
}

fn push_limit(out: &mut String, text: &str, limit: &Value) -> bool {
    out.push_str(text);
    push_plain_json(out, limit)
}

fn push_count(out: &mut String, text: &str, limit: u64, unit: &str) -> bool {
    out.push_str(text);
    let _ = write!(out, "{limit} {unit}");
    if limit != 1 {
        out.push('s');
    }
    true
}

/// Appends `value` as compact JSON (as `Value`'s `Display` writes it) when it is a number, a
/// boolean, null or a string with nothing to escape; false for anything else.
fn push_plain_json(out: &mut String, value: &Value) -> bool {
    match value {
        Value::Number(number) => {
            let _ = write!(out, "{number}");
            true
        }
        Value::String(text) if !text.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') => {
            out.push('"');
            out.push_str(text);
            out.push('"');
            true
        }
        Value::Bool(flag) => {
            out.push_str(if *flag { "true" } else { "false" });
            true
        }
        Value::Null => {
            out.push_str("null");
            true
        }
        _ => false,
    }
}

/// Bytes reserved for one issue's message before it is written (most fit).
const MESSAGE_ROOM: usize = 96;

/// Issues a report's message names; the rest are counted.
pub const MAX_ISSUES_IN_MESSAGE: usize = 8;
/// Bytes of one issue's message in a report (its message and its `details` entry).
pub const MAX_ISSUE_MESSAGE_BYTES: usize = 160;
/// Bytes of the tool name in a report's message.
const MAX_TOOL_NAME_BYTES: usize = 128;
/// Room kept at the end of a message for the worst-case " (and 99999 more)".
const SUFFIX_ROOM: usize = 24;

/// `text` cut to at most `limit` bytes on a character boundary, with "..." marking the cut. The
/// cut never ends inside a word: a property name or path segment a model sent is shown whole or
/// not at all, because a secret shown in part is one no redactor downstream can find.
pub fn cut(text: &str, limit: usize) -> Cow<'_, str> {
    if text.len() <= limit {
        return Cow::Borrowed(text);
    }
    let mut end = limit.saturating_sub(3);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    if text[end..].chars().next().is_some_and(in_word) {
        while let Some(before) = text[..end].chars().next_back().filter(|&c| in_word(c)) {
            end -= before.len_utf8();
        }
    }
    Cow::Owned(format!("{}...", &text[..end]))
}

/// Whether `c` continues a word of a message: everything but the spaces, quotes, brackets and
/// punctuation that separate names, paths and values there.
fn in_word(c: char) -> bool {
    !(c.is_whitespace() || matches!(c, '\'' | '"' | '(' | ')' | '[' | ']' | ',' | ';'))
}

/// What a report says after the issues it could not list in full (`Listing`).
const FIRST_ONLY_NOTE: &str = " (only the first problem is listed: the arguments are too large \
                               to list every problem against this schema)";
const UNLOCATED_NOTE: &str =
    " (the arguments are too large to locate their problems against this schema)";

/// The message a model sees for invalid arguments of `tool_name`: the first issues (at most
/// `MAX_ISSUES_IN_MESSAGE`) as `"<path>: <message>"`, within `max_bytes`, and how many more
/// there were. `issues` yields `(path, message)`; `total` counts every issue found. When
/// `listing` says they are not every issue, the message says so in place of the count, and the
/// note is kept whole within `max_bytes` (the issue is cut for it).
pub fn report_message<'i>(
    tool_name: &str,
    issues: impl IntoIterator<Item = (&'i str, &'i str)>,
    total: usize,
    max_bytes: usize,
    listing: Listing,
) -> String {
    let note = match listing {
        Listing::Every => return listed_message(tool_name, issues, total, max_bytes),
        Listing::FirstOnly => FIRST_ONLY_NOTE,
        Listing::Unlocated => UNLOCATED_NOTE,
    };
    let body = listed_message(
        tool_name,
        issues.into_iter().take(1),
        0,
        max_bytes.saturating_sub(note.len()).max(1),
    );
    let mut message = String::with_capacity(body.len() + note.len());
    message.push_str(&body);
    message.push_str(note);
    if message.len() <= max_bytes {
        return message;
    }
    cut(&message, max_bytes).into_owned()
}

/// `report_message` for issues it lists in full.
fn listed_message<'i>(
    tool_name: &str,
    issues: impl IntoIterator<Item = (&'i str, &'i str)>,
    total: usize,
    max_bytes: usize,
) -> String {
    const PREFIX: &str = "Invalid arguments for tool ";
    let tool_name = cut(tool_name, MAX_TOOL_NAME_BYTES);
    // Written with `push_str` into room reserved once: the formatting machinery and regrowth
    // were a tenth of a report.
    let mut message = String::with_capacity(max_bytes.clamp(PREFIX.len() + 64, 4096));
    message.push_str(PREFIX);
    message.push_str(&tool_name);
    message.push_str(": ");
    let mut used = message.len();
    let mut shown = 0;
    for (path, text) in issues.into_iter().take(MAX_ISSUES_IN_MESSAGE) {
        let path = if path.is_empty() { "/" } else { path };
        let text = cut(text, MAX_ISSUE_MESSAGE_BYTES);
        // Each part costs its text and the separator before the next one.
        let cost = path.len() + 2 + text.len() + 2;
        if shown > 0 && used + cost + SUFFIX_ROOM > max_bytes {
            break;
        }
        if shown > 0 {
            message.push_str("; ");
        }
        message.push_str(path);
        message.push_str(": ");
        message.push_str(&text);
        used += cost;
        shown += 1;
    }
    let hidden = total.saturating_sub(shown);
    if hidden > 0 {
        let _ = write!(message, " (and {hidden} more)");
    }
    if message.len() <= max_bytes {
        return message;
    }
    cut(&message, max_bytes).into_owned()
}

/// A compiled schema with the canonical bytes it was built from (to tell digests apart).
pub struct CompiledSchema<F: Json = SerdeJson> {
    pub validator: Validator<F>,
    /// What listing the issues of an instance may cost, from the schema alone.
    pub issues: IssueWeights,
    /// The property names the schema declares, each once (from the first
    /// `guards::MAX_PROPERTY_NAMES` met): the keys that arguments built for it will most likely
    /// hold.
    pub property_names: Box<[Box<str>]>,
    /// The short strings its `enum` and `const` keywords allow, each once (see
    /// `guards::SchemaWords`): the string values arguments built for it will most likely hold.
    pub choices: Box<[Box<str>]>,
    canonical: Box<[u8]>,
}

/// Counters in `functools.lru_cache` style.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CacheInfo {
    pub hits: u64,
    pub misses: u64,
    pub maxsize: usize,
    pub currsize: usize,
}

struct CacheState<F: Json> {
    entries: LruCache<u64, Arc<CompiledSchema<F>>>,
    hits: u64,
    misses: u64,
}

/// Bounded, thread-safe cache of compiled validators keyed by a digest of canonical bytes.
pub struct SchemaCache<F: Json = SerdeJson> {
    state: Mutex<CacheState<F>>,
    /// Compiled patterns shared by every build, and how many pattern keywords went through it.
    patterns: Mutex<(PatternCache, usize)>,
    hasher: ahash::RandomState,
    limits: Limits,
}

impl<F: Json> SchemaCache<F> {
    /// An empty cache holding at most `limits.max_compiled_schemas` validators.
    pub fn new(limits: Limits) -> Self {
        let capacity = NonZeroUsize::new(limits.max_compiled_schemas).unwrap_or(NonZeroUsize::MIN);
        Self {
            state: Mutex::new(CacheState {
                entries: LruCache::new(capacity),
                hits: 0,
                misses: 0,
            }),
            patterns: Mutex::new((PatternCache::new(), 0)),
            // Keys are seeded per process: nobody can aim a schema at another schema's key.
            hasher: ahash::RandomState::new(),
            limits,
        }
    }

    /// The limits this cache enforces.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, CacheState<F>> {
        // A panic while holding the lock cannot leave the LRU half-updated in a way that matters
        // (entries are immutable `Arc`s), so a poisoned lock is simply taken over.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The digest of canonical schema bytes.
    pub fn key_of(&self, canonical: &[u8]) -> u64 {
        let mut hasher = self.hasher.build_hasher();
        hasher.write(canonical);
        hasher.finish()
    }

    /// The compiled validator for `schema`, from the cache or compiled (guards first).
    ///
    /// `canonical` must be the schema's canonical JSON (sorted keys, compact), which the caller
    /// has produced once; its size is the guarded schema size. The caller holds the returned
    /// `Arc`, so a later eviction never takes a validator away from someone using it, and a
    /// digest collision can never hand one schema another schema's validator (the stored bytes
    /// are compared; a colliding newcomer is compiled and simply not cached).
    pub fn compile(
        &self,
        schema: &Value,
        canonical: &[u8],
    ) -> Result<Arc<CompiledSchema<F>>, GuardViolation> {
        if canonical.len() > self.limits.max_schema_bytes {
            return Err(GuardViolation::SchemaTooLarge {
                bytes: canonical.len(),
                limit: self.limits.max_schema_bytes,
            });
        }
        let key = self.key_of(canonical);
        let collides = {
            let mut state = self.lock();
            match state.entries.get(&key).cloned() {
                Some(entry) if *entry.canonical == *canonical => {
                    state.hits += 1;
                    return Ok(entry);
                }
                // Counted as a miss once compiled: a schema the guards refuse is neither.
                found => found.is_some(),
            }
        };
        let patterns = self
            .patterns
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .0
            .clone();
        let built = build_validator::<F>(schema, &self.limits, Some(&patterns))?;
        if built.patterns > 0 {
            let mut shared = self
                .patterns
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            shared.1 += built.patterns;
            if shared.1 > MAX_SHARED_PATTERNS {
                *shared = (PatternCache::new(), 0);
            }
        }
        let entry = Arc::new(CompiledSchema {
            validator: built.validator,
            issues: built.issues,
            property_names: built.property_names,
            choices: built.choices,
            canonical: canonical.into(),
        });
        // `push` hands back what it evicted; dropping a compiled validator takes a while, so it
        // is dropped here, after the lock is released, not while other threads wait.
        let evicted = {
            let mut state = self.lock();
            state.misses += 1;
            (!collides).then(|| state.entries.push(key, Arc::clone(&entry)))
        };
        drop(evicted);
        Ok(entry)
    }

    /// Pattern keywords compiled through the current shared pattern cache.
    pub fn shared_patterns(&self) -> usize {
        self.patterns
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .1
    }

    /// Hit and miss counters, capacity and size.
    pub fn info(&self) -> CacheInfo {
        let state = self.lock();
        CacheInfo {
            hits: state.hits,
            misses: state.misses,
            maxsize: self.limits.max_compiled_schemas,
            currsize: state.entries.len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::document::{Repeats, Source, Tape, parse};
    use proptest::prelude::*;
    use serde_json::json;

    /// `collect_issues` with nothing to bound: the first `max` issues and how many in all.
    fn listed(validator: &Validator, instance: &Value, max: usize) -> (Vec<Issue>, usize) {
        let found = collect_issues(
            validator,
            instance,
            max,
            &IssueWeights::default(),
            DocumentWeight::default,
        );
        assert_eq!(found.listing, Listing::Every);
        (found.issues, found.total)
    }

    /// Every error of `instance` against `schema`: our message and the crate's masked text.
    fn both_messages(schema: &Value, instance: &Value) -> Vec<(String, String)> {
        let validator = jsonschema::options()
            .with_draft(draft_of(schema).unwrap())
            .build(schema)
            .unwrap();
        validator
            .iter_errors(instance)
            .map(|error| {
                let mut ours = String::new();
                write_masked_message(&mut ours, &error);
                (ours, error.masked().to_string())
            })
            .collect()
    }

    #[test]
    fn common_messages_match_the_crates_masked_text() {
        let cases = [
            (json!({"type": "string"}), json!(1)),
            (json!({"type": ["string", "null"]}), json!(1)),
            (json!({"required": ["a", "b\"q", "c\\d"]}), json!({})),
            (
                json!({"properties": {"a": {}}, "additionalProperties": false}),
                json!({"a": 1, "b": 2, "c'": 3}),
            ),
            (
                json!({"properties": {}, "additionalProperties": false}),
                json!({"only": 1}),
            ),
            (json!({"enum": ["x"]}), json!("y")),
            (json!({"enum": ["x", 2]}), json!("y")),
            (json!({"enum": ["x", 2.5, null]}), json!("y")),
            (json!({"enum": [true, false, "a", "b"]}), json!("y")),
            (json!({"enum": [{"a": 1}, [1]]}), json!("y")),
            (json!({"enum": ["tab\there", "é"]}), json!("y")),
            (json!({"maximum": 3}), json!(4)),
            (json!({"maximum": 3.5}), json!(4)),
            (json!({"minimum": -2}), json!(-3)),
            (json!({"minimum": 1e-7}), json!(0)),
            (json!({"exclusiveMaximum": 3}), json!(3)),
            (json!({"exclusiveMinimum": 0.5}), json!(0.5)),
            (json!({"maxLength": 1}), json!("ab")),
            (json!({"maxLength": 2}), json!("abc")),
            (json!({"minLength": 1}), json!("")),
            (json!({"minLength": 3}), json!("ab")),
            (json!({"pattern": "^[a-z]{2}\"$"}), json!("abc")),
            (json!({"const": 1}), json!(2)),
            (json!({"minItems": 2}), json!([1])),
            (json!({"multipleOf": 3}), json!(4)),
            (
                json!({"$schema": "http://json-schema.org/draft-07/schema#", "items": [{}], "additionalItems": false}),
                json!([1, 2, 3]),
            ),
        ];
        for (schema, instance) in cases {
            let messages = both_messages(&schema, &instance);
            assert!(!messages.is_empty(), "{schema} accepted {instance}");
            for (ours, crates) in messages {
                assert_eq!(ours, crates, "{schema} against {instance}");
            }
        }
    }

    #[test]
    fn issues_borrow_the_keywords_the_crate_reports() {
        let mut seen = std::collections::HashSet::new();
        assert!(KEYWORDS.iter().all(|keyword| seen.insert(*keyword)));
        let schema = json!({
            "type": "object",
            "properties": {"a": {"type": "string"}, "b": {"enum": [1]}, "c": {"maximum": 1}},
            "required": ["d"],
            "additionalProperties": false,
        });
        let validator = jsonschema::validator_for(&schema).unwrap();
        let instance = json!({"a": 1, "b": 2, "c": 3, "e": 4});
        let mut keywords = Vec::new();
        for error in validator.iter_errors(&instance) {
            let keyword = error.kind().keyword();
            assert_eq!(known_keyword(keyword).map(|at| KEYWORDS[at]), Some(keyword));
            keywords.push(keyword.to_owned());
        }
        keywords.sort();
        assert_eq!(
            keywords,
            [
                "additionalProperties",
                "enum",
                "maximum",
                "required",
                "type"
            ]
        );
        assert_eq!(known_keyword("x-custom"), None);
    }

    fn plain_value() -> impl Strategy<Value = Value> {
        prop_oneof![
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            any::<bool>().prop_map(Value::from),
            Just(Value::Null),
            any::<String>().prop_map(Value::from),
            "[a-z\"\\\\\\n']{0,6}".prop_map(Value::from),
        ]
    }

    proptest! {
        #[test]
        fn generated_messages_match_the_crates_masked_text(
            options in proptest::collection::vec(plain_value(), 1..6),
            limit in plain_value(),
            length in 0u64..4,
            names in proptest::collection::vec("[a-z'\"\\\\ é]{1,5}", 1..4),
        ) {
            let instance = json!({"x": "?"});
            let mut properties = serde_json::Map::new();
            properties.insert("x".into(), json!({"enum": options}));
            let schemas = [
                json!({"properties": properties, "required": names}),
                json!({"properties": {"x": {"maximum": limit, "minimum": limit}}}),
                json!({"properties": {"x": {"maxLength": length, "minLength": length + 2}}}),
            ];
            for schema in &schemas {
                // A limit that is not a number makes a schema the crate refuses: nothing to do.
                let Ok(validator) = jsonschema::validator_for(schema) else { continue };
                for error in validator.iter_errors(&instance) {
                    let mut ours = String::new();
                    write_masked_message(&mut ours, &error);
                    prop_assert_eq!(ours, error.masked().to_string());
                }
            }
            let extra: serde_json::Map<String, Value> =
                names.iter().map(|name| (name.clone(), json!(1))).collect();
            let closed = json!({"properties": {}, "additionalProperties": false});
            let validator = jsonschema::validator_for(&closed).unwrap();
            for error in validator.iter_errors(&Value::Object(extra)) {
                let mut ours = String::new();
                write_masked_message(&mut ours, &error);
                prop_assert_eq!(ours, error.masked().to_string());
            }
        }
    }

    fn any_instance() -> impl Strategy<Value = Value> {
        plain_value().prop_recursive(2, 12, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..5).prop_map(Value::from),
                proptest::collection::btree_map("[a-c]{1,2}", inner, 0..5)
                    .prop_map(|members| Value::Object(members.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// Issues marked `fixed` read the same whatever the instance that failed them, so one
        /// copy of their text can serve every report.
        #[test]
        fn fixed_messages_never_depend_on_the_instance(
            first in any_instance(),
            second in any_instance(),
        ) {
            let schema = json!({
                "properties": {
                    "x": {
                        "type": "string", "enum": ["a", "bb"], "const": "a", "pattern": "^z",
                        "maximum": 3, "minimum": 1, "exclusiveMaximum": 3,
                        "exclusiveMinimum": 1, "multipleOf": 2, "maxLength": 1, "minLength": 3,
                        "maxItems": 1, "minItems": 3, "maxProperties": 1, "minProperties": 3,
                    },
                    "y": false,
                },
                "required": ["x", "y"],
            });
            let validator = jsonschema::validator_for(&schema).unwrap();
            let mut seen = std::collections::HashMap::<String, String>::new();
            for value in [&first, &second] {
                let instance = json!({"x": value, "y": value});
                for issue in listed(&validator, &instance, 64).0 {
                    if issue.fixed {
                        let earlier = seen.entry(issue.keyword.to_string()).or_insert_with(|| issue.message.clone());
                        prop_assert_eq!(&*earlier, &issue.message);
                    }
                }
            }
        }
    }

    #[test]
    fn messages_naming_properties_are_not_fixed() {
        let schema = json!({"properties": {}, "required": ["a"], "additionalProperties": false});
        let validator = jsonschema::validator_for(&schema).unwrap();
        let (issues, _) = listed(&validator, &json!({"b": 1}), 8);
        assert_eq!(issues.len(), 2);
        assert!(issues.iter().all(|issue| !issue.fixed));
        let (issues, _) = listed(&validator, &json!({"a": "x", "b": 1}), 8);
        assert!(issues.iter().all(|issue| !issue.fixed));
        let typed = jsonschema::validator_for(&json!({"type": "string"})).unwrap();
        assert!(listed(&typed, &json!(1), 8).0[0].fixed);
    }

    fn canonical(value: &Value) -> Vec<u8> {
        serde_json::to_vec(value).unwrap()
    }

    #[test]
    fn a_cut_never_shows_part_of_a_word() {
        let text = "Additional properties are not allowed ('ffff', 'ghp_R4nd0mT0k3nV4lu3ABCDEFGH' were unexpected)";
        for limit in 10..text.len() {
            let shown = cut(text, limit);
            assert!(shown.len() <= limit, "{limit}: {shown}");
            let kept = shown.strip_suffix("...").unwrap();
            assert!(!kept.contains("ghp_") || kept.contains("ghp_R4nd0mT0k3nV4lu3ABCDEFGH"));
            let last = kept.split(|c| !in_word(c)).next_back().unwrap();
            assert!(
                last.is_empty() || text.split(|c| !in_word(c)).any(|word| word == last),
                "{limit}: {kept}"
            );
        }
        assert_eq!(cut("short", 10), "short");
        assert_eq!(cut(&"x".repeat(50), 20), "...");
        assert_eq!(cut("é".repeat(10).as_str(), 8), "...");
    }

    #[test]
    fn validates_and_reports_masked_issues() {
        let schema = json!({
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
            "required": ["city"],
            "additionalProperties": false
        });
        let validator = build_validator::<SerdeJson>(&schema, &Limits::default(), None)
            .unwrap()
            .validator;
        let valid = json!({"city": "Paris"});
        assert!(listed(&validator, &valid, 8).0.is_empty());
        let invalid = json!({"days": "sk-secret-value"});
        let (issues, total) = listed(&validator, &invalid, 1);
        assert_eq!((issues.len(), total), (1, 2));
        let (issues, _) = listed(&validator, &invalid, 8);
        let keywords: Vec<&str> = issues.iter().map(|issue| &*issue.keyword).collect();
        assert!(keywords.contains(&"required"));
        assert!(keywords.contains(&"type"));
        assert!(
            issues
                .iter()
                .all(|issue| !issue.message.contains("sk-secret-value"))
        );
        assert!(issues.iter().any(|issue| issue.path.as_str() == "/days"));
    }

    fn tape(schema: &Value) -> Built<Tape> {
        build_validator::<Tape>(schema, &Limits::default(), None).unwrap()
    }

    fn doc(text: &str) -> Document<'_> {
        parse(Source::Text(text), 1 << 20, 64, Repeats::Resolve).unwrap()
    }

    /// The findings of `text` against `built`, as the bindings ask for them.
    fn findings(built: &Built<Tape>, text: &str) -> Findings {
        let doc = doc(text);
        collect_issues(&built.validator, doc.root(), 256, &built.issues, || {
            weigh_document(&doc, &built.issues)
        })
    }

    fn required_items(names: usize) -> Value {
        let names: Vec<String> = (0..names).map(|at| format!("r{at}")).collect();
        json!({
            "type": "object",
            "properties": {"a": {"type": "array", "items": {"type": "object", "required": names}}},
        })
    }

    fn empty_objects(count: usize) -> String {
        format!("{{\"a\":[{}]}}", vec!["{}"; count].join(","))
    }

    #[test]
    fn every_issue_is_listed_while_the_estimate_fits() {
        let built = tape(&required_items(5000));
        let found = findings(&built, &empty_objects(2));
        assert_eq!((found.total, found.listing), (10_000, Listing::Every));
        assert_eq!(found.issues.len(), 256);
        assert!(findings(&built, r#"{"a": []}"#).issues.is_empty());
    }

    #[test]
    fn past_the_budget_only_the_first_issue_is_found_and_the_verdict_stands() {
        let built = tape(&required_items(5000));
        let found = findings(&built, &empty_objects(800));
        assert_eq!((found.total, found.listing), (1, Listing::FirstOnly));
        let issue = &found.issues[0];
        assert_eq!((issue.path.as_str(), &*issue.keyword), ("/a/0", "required"));
        assert_eq!(issue.message, "\"r0\" is a required property");
        // Invalid however many issues are listed; valid arguments stay valid.
        let doc = doc(r#"{"a": []}"#);
        assert!(built.validator.is_valid(doc.root()));
    }

    #[test]
    fn a_first_error_that_would_hold_the_whole_value_is_not_located() {
        let names: Vec<String> = (0..5000).map(|at| format!("r{at}")).collect();
        let schema = json!({"properties": {"a": {"anyOf": [
            {"type": "array", "items": {"required": names}},
            {"type": "null"},
        ]}}});
        let built = tape(&schema);
        let found = findings(&built, &empty_objects(800));
        assert_eq!((found.total, found.listing), (1, Listing::Unlocated));
        assert_eq!(found.issues, [unlocated_issue()]);
        // Small arguments still list every issue, the branches' included.
        let found = findings(&built, &empty_objects(1));
        assert_eq!((found.total, found.listing), (1, Listing::Every));
        assert_eq!(&*found.issues[0].keyword, "anyOf");
    }

    #[test]
    fn a_first_error_with_a_bounded_context_is_located() {
        let choices: Vec<Value> = (0..50).map(|at| json!({"const": at})).collect();
        let schema = json!({"properties": {"a": {"items": {"anyOf": choices}}}});
        let built = tape(&schema);
        let text = format!("{{\"a\":[{}]}}", vec!["-1"; 20_000].join(","));
        let found = findings(&built, &text);
        assert_eq!((found.total, found.listing), (1, Listing::FirstOnly));
        assert_eq!(
            (found.issues[0].path.as_str(), &*found.issues[0].keyword),
            ("/a/0", "anyOf")
        );
    }

    #[test]
    fn document_weight_counts_values_paths_and_copies_per_level() {
        let weigh = |text: &str| {
            let weight = document_weight(&doc(text), &IssueWeights::default());
            (
                weight.every().collect::<Vec<_>>(),
                weight.one().collect::<Vec<_>>(),
            )
        };
        let (every, _) = weigh(r#"{"a": [1, 2, 3], "b": "x"}"#);
        assert_eq!(every.len(), 3);
        // The root; `a` and `b` (the array's copy is charged where its errors are); 3 numbers.
        assert_eq!(every[0], 1 + 1);
        assert!(every[1] > 2);
        assert_eq!(every[2], 3 + 1);
        // A long name lengthens the path of every value below it, and what its errors copy.
        let (every, one) = weigh(&format!(r#"{{"{}": [1, 2, 3]}}"#, "k".repeat(10_000)));
        assert!(every[2] > 3 * 2 * 10_000 / ISSUE_UNIT_BYTES);
        assert!(one[1] > 10_000 / ISSUE_UNIT_BYTES);
        // An array's errors copy the whole of it, and may hold it serialised: six bytes a
        // control character, in a buffer up to twice that.
        let controls = format!(r#"{{"a": ["{}"]}}"#, r"\u0001".repeat(5_000));
        let one = |levels| {
            let weights = IssueWeights {
                serialised_levels: levels,
                ..IssueWeights::default()
            };
            document_weight(&doc(&controls), &weights).one().nth(1)
        };
        // Only where `unevaluatedItems` applies: the array is at level 1.
        let (copied, serialised) = (one(0b1).unwrap(), one(0b10).unwrap());
        assert_eq!(one(0b101).unwrap(), copied);
        assert!(serialised - copied >= 2 * 6 * 5_000 / ISSUE_UNIT_BYTES);
        let (every, one) = weigh(&format!(r#"{{"a": ["{}"]}}"#, "x".repeat(100_000)));
        assert!(every[1] > 100_000 / ISSUE_UNIT_BYTES);
        assert!(one[1] > 100_000 / ISSUE_UNIT_BYTES);
    }

    #[test]
    fn an_incomplete_report_says_so_within_its_limit() {
        let issues = [("/a/0", "\"r0\" is a required property")];
        let first = report_message("t", issues, 1, 1024, Listing::FirstOnly);
        assert_eq!(
            first,
            format!(
                "Invalid arguments for tool t: /a/0: \"r0\" is a required property{FIRST_ONLY_NOTE}"
            )
        );
        let unlocated = [("", "the arguments do not match the schema")];
        let message = report_message("t", unlocated, 1, 1024, Listing::Unlocated);
        assert!(message.ends_with(UNLOCATED_NOTE), "{message}");
        assert!(message.contains("/: the arguments do not match the schema"));
        // A tight limit cuts the issue, never the note.
        let long = "x ".repeat(200);
        let tight = report_message("t", [("/a", long.as_str())], 1, 200, Listing::FirstOnly);
        assert!(
            tight.len() <= 200 && tight.ends_with(FIRST_ONLY_NOTE),
            "{tight}"
        );
        // A complete report reads as before.
        let every = report_message("t", issues, 3, 1024, Listing::Every);
        assert!(every.ends_with("(and 2 more)"), "{every}");
    }

    #[test]
    fn long_messages_are_cut_when_kept() {
        let schema = json!({"not": {"description": "x ".repeat(5000)}});
        let built = tape(&schema);
        let found = findings(&built, "{}");
        assert_eq!(found.total, 1);
        assert!(found.issues[0].message.len() <= MAX_KEPT_MESSAGE_BYTES);
    }

    #[test]
    fn patterns_past_the_size_limit_are_refused_for_their_size() {
        let refused = |pattern: &str| {
            build_validator::<SerdeJson>(
                &json!({"properties": {"a": {"pattern": pattern}}}),
                &Limits::default(),
                None,
            )
            .err()
        };
        for pattern in [
            r"[^\n]{2000}z",
            "(a|b){8000}!",
            "a{100000}",
            r"\p{L}{8}x\p{L}{8}",
        ] {
            let violation = refused(pattern).expect(pattern);
            assert_eq!(violation.code(), "schema_pattern_too_large", "{pattern}");
            assert!(
                violation.to_string().contains("/properties/a/pattern"),
                "{violation}"
            );
        }
        for pattern in ["(", "(?<=a)b", r"\p{NotAClass}"] {
            assert_eq!(refused(pattern).map(|v| v.code()), Some("schema_invalid"));
        }
        for pattern in [
            r"^\p{Letter}+$",
            r"^\w{1,64}$",
            r"\p{L}{1,100}",
            "x.{36}y",
            r"^\p{Lu}\p{Ll}+$",
        ] {
            assert!(refused(pattern).is_none(), "{pattern}");
        }
        let names = json!({"patternProperties": {"(a|b){4000}!": {}}});
        let violation = build_validator::<SerdeJson>(&names, &Limits::default(), None)
            .err()
            .unwrap();
        assert_eq!(violation.code(), "schema_pattern_too_large");
    }

    #[test]
    fn the_patterns_of_one_schema_have_a_total_size_limit() {
        let build = |schema: &Value| build_validator::<SerdeJson>(schema, &Limits::default(), None);
        // Each near the limit for one pattern; together over the limit for one schema.
        let names: serde_json::Map<String, Value> = (0..20)
            .map(|at| (format!("a(a|b){{900}}!{at}"), json!({})))
            .collect();
        let violation = build(&json!({"patternProperties": names})).err().unwrap();
        assert_eq!(violation.code(), "schema_pattern_too_large");
        assert!(
            violation.to_string().contains("20 distinct patterns"),
            "{violation}"
        );
        // A repeated pattern is compiled once, so it counts once.
        let same: Vec<Value> = (0..20)
            .map(|_| json!({"pattern": "a(a|b){900}!"}))
            .collect();
        assert!(build(&json!({"anyOf": same})).is_ok());
        // Hundreds of ordinary patterns fit, Unicode classes included.
        let ordinary: serde_json::Map<String, Value> = (0..300)
            .map(|at| {
                let pattern = format!(r"^[A-Z]{{2}}-[0-9]{{4}}-\w+-{at}$");
                (format!("p{at}"), json!({"pattern": pattern}))
            })
            .collect();
        assert!(build(&json!({"properties": ordinary})).is_ok());
        assert!(
            build(&json!({"properties": {
                "a": {"pattern": r"^\p{Lu}\p{Ll}+$"},
                "b": {"pattern": r"^\p{Letter}+$"},
                "c": {"pattern": r"^[\p{L} '-]+$"},
            }}))
            .is_ok()
        );
    }

    #[test]
    fn the_lazy_dfa_caches_of_a_schema_share_one_budget() {
        assert_eq!(dfa_share(0), REGEX_DEFAULT_DFA_BYTES);
        assert_eq!(dfa_share(8), REGEX_DEFAULT_DFA_BYTES);
        assert_eq!(
            dfa_share(320) * 320,
            MAX_SCHEMA_DFA_BYTES - MAX_SCHEMA_DFA_BYTES % 320
        );
        // Shares of 200 patterns, 80 KiB each: every pattern still matches as it should.
        let names: serde_json::Map<String, Value> = (0..200)
            .map(|at| (format!("^a[ab]{{16}}c{at}$"), json!(true)))
            .collect();
        let schema = json!({"patternProperties": names, "additionalProperties": false});
        let built = build_validator::<SerdeJson>(&schema, &Limits::default(), None).unwrap();
        assert!(
            built
                .validator
                .is_valid(&json!({"aababababababababc42": 1}))
        );
        assert!(
            !built
                .validator
                .is_valid(&json!({"aababababababababc200": 1}))
        );
    }

    #[test]
    fn patterns_are_measured_as_they_are_compiled() {
        // Matched by counting characters: no program at all.
        assert_eq!(compiled_pattern_bytes(r"^\p{L}{1,100}$"), 0);
        // A count at an edge is cut to its minimum, as the validator matches it.
        assert!(compiled_pattern_bytes(r"\p{L}{1,100}") < MAX_PATTERN_BYTES);
        assert!(compiled_pattern_bytes("a(a|b){900}!") > 60_000);
        assert!(compiled_pattern_bytes("^[a-z]{2}$") < 4096);
        // Past the limit for one pattern, or not a pattern: counted at that limit.
        assert_eq!(compiled_pattern_bytes("(a|b){8000}!"), MAX_PATTERN_BYTES);
        assert_eq!(compiled_pattern_bytes("("), MAX_PATTERN_BYTES);
    }

    #[test]
    fn remote_refs_never_reach_the_retriever() {
        let schema = json!({"$ref": "http://127.0.0.1:1/schema.json"});
        assert_eq!(
            build_validator::<SerdeJson>(&schema, &Limits::default(), None)
                .err()
                .map(|violation| violation.code()),
            Some("schema_ref_not_allowed")
        );
    }

    #[test]
    fn drafts_follow_schema_keyword() {
        assert_eq!(draft_of(&json!({})).unwrap(), Draft::Draft202012);
        assert_eq!(
            draft_of(&json!({"$schema": "http://json-schema.org/draft-07/schema#"})).unwrap(),
            Draft::Draft7
        );
        assert_eq!(
            draft_of(&json!({"$schema": "https://json-schema.org/draft/2019-09/schema"})).unwrap(),
            Draft::Draft201909
        );
        assert!(draft_of(&json!({"$schema": "http://json-schema.org/draft-04/schema#"})).is_err());
        // Draft 7 semantics: `items` as an array is tuple validation.
        let tuple = json!({"$schema": "http://json-schema.org/draft-07/schema#", "items": [{"type": "string"}]});
        let validator = build_validator::<SerdeJson>(&tuple, &Limits::default(), None)
            .unwrap()
            .validator;
        assert!(!validator.is_valid(&json!([1])));
    }

    #[test]
    fn catastrophic_patterns_finish_fast() {
        let schema = json!({"type": "string", "pattern": "^(a+)+$"});
        let validator = build_validator::<SerdeJson>(&schema, &Limits::default(), None)
            .unwrap()
            .validator;
        let input = Value::String(format!("{}!", "a".repeat(50_000)));
        let started = std::time::Instant::now();
        assert!(!validator.is_valid(&input));
        // Generous bound: the backtracking engine would take longer than the age of the universe.
        assert!(started.elapsed().as_secs() < 5);
    }

    #[test]
    fn cache_hits_evicts_and_holders_keep_their_validator() {
        let mut limits = Limits::default();
        limits.set("max_compiled_schemas", 2).unwrap();
        let cache: SchemaCache = SchemaCache::new(limits);
        let schemas: Vec<Value> = (0..3).map(|i| json!({"maxLength": i})).collect();
        let held: Vec<_> = schemas
            .iter()
            .map(|s| cache.compile(s, &canonical(s)).unwrap())
            .collect();
        let again = cache.compile(&schemas[2], &canonical(&schemas[2])).unwrap();
        assert!(
            Arc::ptr_eq(&again, &held[2]),
            "a hit returns the cached validator"
        );
        let info = cache.info();
        assert_eq!(
            (info.hits, info.misses, info.maxsize, info.currsize),
            (1, 3, 2, 2)
        );
        // The oldest entry left the cache, but its holder still validates with it.
        let first = cache.compile(&schemas[0], &canonical(&schemas[0])).unwrap();
        assert!(!Arc::ptr_eq(&first, &held[0]));
        assert!(held[0].validator.is_valid(&json!("")));
        assert!(!held[0].validator.is_valid(&json!("x")));
    }

    #[test]
    fn evicted_schemas_are_freed_and_held_ones_kept() {
        let mut limits = Limits::default();
        limits.set("max_compiled_schemas", 1).unwrap();
        let cache: SchemaCache = SchemaCache::new(limits);
        let compile = |schema: &Value| cache.compile(schema, &canonical(schema)).unwrap();
        let schema = |bound: usize| json!({"type": "string", "maxLength": bound});
        let held = compile(&schema(1));
        let unheld = Arc::downgrade(&compile(&schema(2)));
        // Each compile evicts the one before: the held one stays with its holder, the other is
        // freed with the eviction, not kept anywhere.
        compile(&schema(3));
        assert!(unheld.upgrade().is_none(), "an evicted schema was kept");
        assert_eq!(cache.info().currsize, 1);
        assert!(held.validator.is_valid(&json!("a")));
        assert!(!held.validator.is_valid(&json!("ab")));
    }

    #[test]
    fn the_shared_pattern_cache_is_replaced_before_it_grows_past_its_bound() {
        let cache: SchemaCache = SchemaCache::new(Limits::default());
        let mut most = 0;
        for n in 0..MAX_SHARED_PATTERNS + 100 {
            // Distinct patterns, each well within `MAX_PATTERN_BYTES`.
            let (low, high) = (n % 64, n / 64);
            let schema = json!({"type": "string", "pattern": format!("^a{{{low}}}b{{{high}}}$")});
            cache.compile(&schema, &canonical(&schema)).unwrap();
            most = most.max(cache.shared_patterns());
        }
        assert!(most <= MAX_SHARED_PATTERNS);
        assert!(cache.shared_patterns() < 200);
        // A pattern compiled through a replaced cache still validates.
        let schema = json!({"pattern": "^[0-9]{4}$"});
        let entry = cache.compile(&schema, &canonical(&schema)).unwrap();
        assert!(entry.validator.is_valid(&json!("2024")));
        assert!(!entry.validator.is_valid(&json!("24")));
    }

    #[test]
    fn oversized_canonical_schema_is_refused() {
        let mut limits = Limits::default();
        limits.set("max_schema_bytes", 10).unwrap();
        let cache: SchemaCache = SchemaCache::new(limits);
        let schema = json!({"description": "a long description"});
        let refused = cache.compile(&schema, &canonical(&schema)).err();
        assert_eq!(
            refused.map(|violation| violation.code()),
            Some("schema_too_large")
        );
    }

    /// JSON values of every shape, with names and strings of any length.
    fn weighed_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<i64>().prop_map(Value::from),
            ".{0,40}".prop_map(Value::String),
        ];
        leaf.prop_recursive(6, 64, 8, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
                prop::collection::vec((".{0,20}", inner), 0..8)
                    .prop_map(|members| Value::Object(members.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn the_quick_bound_is_never_below_the_weighed_cost(
            value in weighed_value(),
            per_level in prop::collection::vec(0u64..50, 1..10),
            rechecks in prop::collection::vec(0u64..5_000, 0..10),
            serialised_levels in any::<u128>(),
        ) {
            let text = serde_json::to_string(&value).unwrap();
            let doc = parse(Source::Text(&text), 1 << 22, 256, Repeats::Resolve).unwrap();
            let weights = IssueWeights {
                most: per_level.iter().copied().max().unwrap_or(0),
                first_error: vec![0; per_level.len()].into(),
                per_level: per_level.into(),
                serialised_levels,
                most_rechecks: rechecks.iter().copied().max().unwrap_or(0),
                rechecks: rechecks.into(),
            };
            let weight = document_weight(&doc, &weights);
            prop_assert!(listing_cost_bound(&doc, &weights) >= weight.listing_cost(&weights));
            // The quick bound on checks made again, as `weigh_document` takes it.
            let quick = (doc.len() as u64) * weights.most_rechecks;
            prop_assert!(quick >= weight.recheck_cost(&weights));
        }

        #[test]
        fn a_value_serialises_within_its_bound(
            value in weighed_value(),
            float in any::<f64>().prop_filter("finite", |float| float.is_finite()),
        ) {
            // As the `jsonschema` crate serialises an item it refuses (`unevaluatedItems`).
            let value = json!([value, float]);
            let text = serde_json::to_string(&value).unwrap();
            let doc = parse(Source::Text(&text), 1 << 22, 256, Repeats::Resolve).unwrap();
            let bound = SERIALISED_VALUE_BYTES * doc.len() as u64 + 6 * doc.text_bytes();
            prop_assert!(text.len() as u64 <= bound, "{} > {bound}", text.len());
        }
    }
}
