//! Guards that run before any JSON parse, schema compile or validation.
//!
//! Arguments: `scan_json` checks byte size and container depth in one pass over the raw bytes,
//! tracking strings and escapes, with no recursion, so a 100,000-deep `[[[[...` is refused in
//! linear time without touching the parser.
//!
//! Schemas: `check_schema` walks a parsed schema with an explicit stack and enforces, in one
//! pass: depth, the number of object keys (keywords and property names), the number of `$ref`
//! and `$dynamicRef`, that every reference is fragment-local (`#...`), that no key is
//! `__proto__`, `constructor` or `prototype`, and that no reference chain made only of aliases
//! (schemas that are nothing but a `$ref`) loops back on itself. Recursion through
//! `properties`, `items` and the like is legitimate and allowed: argument depth bounds it.

use std::borrow::Borrow;
use std::fmt;

use ahash::{AHashMap, AHashSet};
use serde_json::Value;

/// Keys refused anywhere in a schema: they poison prototype chains in JavaScript consumers.
pub const FORBIDDEN_KEYS: [&str; 3] = ["__proto__", "constructor", "prototype"];

/// One limit: its default and the hard ceiling a caller may raise it to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    pub name: &'static str,
    pub default: usize,
    pub ceiling: usize,
}

pub const MAX_SCHEMA_BYTES: Limit = Limit {
    name: "max_schema_bytes",
    default: 262_144,
    ceiling: 4 * 1024 * 1024,
};
pub const MAX_SCHEMA_DEPTH: Limit = Limit {
    name: "max_schema_depth",
    default: 64,
    ceiling: 256,
};
pub const MAX_SCHEMA_KEYWORDS: Limit = Limit {
    name: "max_schema_keywords",
    default: 10_000,
    ceiling: 100_000,
};
pub const MAX_REFS: Limit = Limit {
    name: "max_refs",
    default: 128,
    ceiling: 1024,
};
pub const MAX_COMPILED_SCHEMAS: Limit = Limit {
    name: "max_compiled_schemas",
    default: 256,
    ceiling: 65_536,
};
pub const MAX_ARGUMENT_BYTES: Limit = Limit {
    name: "max_argument_bytes",
    default: 1024 * 1024,
    ceiling: 64 * 1024 * 1024,
};
pub const MAX_ARGUMENT_DEPTH: Limit = Limit {
    name: "max_argument_depth",
    default: 64,
    ceiling: 256,
};

/// Every limit, in a fixed order (the order of `Limits` fields).
pub const ALL_LIMITS: [Limit; 7] = [
    MAX_SCHEMA_BYTES,
    MAX_SCHEMA_DEPTH,
    MAX_SCHEMA_KEYWORDS,
    MAX_REFS,
    MAX_COMPILED_SCHEMAS,
    MAX_ARGUMENT_BYTES,
    MAX_ARGUMENT_DEPTH,
];

/// The limits in force for one validator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Limits {
    pub max_schema_bytes: usize,
    pub max_schema_depth: usize,
    pub max_schema_keywords: usize,
    pub max_refs: usize,
    pub max_compiled_schemas: usize,
    pub max_argument_bytes: usize,
    pub max_argument_depth: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_schema_bytes: MAX_SCHEMA_BYTES.default,
            max_schema_depth: MAX_SCHEMA_DEPTH.default,
            max_schema_keywords: MAX_SCHEMA_KEYWORDS.default,
            max_refs: MAX_REFS.default,
            max_compiled_schemas: MAX_COMPILED_SCHEMAS.default,
            max_argument_bytes: MAX_ARGUMENT_BYTES.default,
            max_argument_depth: MAX_ARGUMENT_DEPTH.default,
        }
    }
}

impl Limits {
    /// Sets one limit by name; a value of zero or above its ceiling is refused, never clamped.
    pub fn set(&mut self, name: &str, value: usize) -> Result<(), String> {
        let limit = ALL_LIMITS
            .iter()
            .find(|limit| limit.name == name)
            .ok_or_else(|| format!("unknown limit {name:?}"))?;
        if value == 0 || value > limit.ceiling {
            return Err(format!(
                "{name} must be from 1 to {}, got {value}",
                limit.ceiling
            ));
        }
        let slot = match name {
            "max_schema_bytes" => &mut self.max_schema_bytes,
            "max_schema_depth" => &mut self.max_schema_depth,
            "max_schema_keywords" => &mut self.max_schema_keywords,
            "max_refs" => &mut self.max_refs,
            "max_compiled_schemas" => &mut self.max_compiled_schemas,
            "max_argument_bytes" => &mut self.max_argument_bytes,
            _ => &mut self.max_argument_depth,
        };
        *slot = value;
        Ok(())
    }
}

/// Why a guard refused its input. `code` is stable; `Display` is model- and human-readable and
/// never quotes argument values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GuardViolation {
    ArgumentsTooLarge {
        bytes: usize,
        limit: usize,
    },
    ArgumentsTooDeep {
        limit: usize,
    },
    SchemaTooLarge {
        bytes: usize,
        limit: usize,
    },
    SchemaTooLargeAtLeast {
        bytes: usize,
        limit: usize,
    },
    SchemaTooDeep {
        limit: usize,
        path: String,
    },
    TooManyKeywords {
        limit: usize,
    },
    TooManyRefs {
        limit: usize,
    },
    Expansion {
        keywords: usize,
        depth: usize,
    },
    RefNotAllowed {
        reference: String,
        path: String,
    },
    RefCycle {
        path: String,
    },
    ForbiddenKey {
        key: String,
        path: String,
    },
    NonFiniteNumber {
        path: String,
    },
    UnsupportedDraft {
        declared: String,
    },
    InvalidSchema {
        reason: String,
    },
    PatternTooLarge {
        path: String,
        limit: usize,
    },
    /// The schema's distinct patterns compile to more than `limit` bytes together.
    PatternsTooLarge {
        distinct: usize,
        limit: usize,
    },
    TextChecks {
        limit: u64,
    },
    UnevaluatedNesting {
        nesting: u64,
        limit: u64,
    },
}

impl GuardViolation {
    /// A stable, machine-readable code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::ArgumentsTooLarge { .. } => "arguments_too_large",
            Self::ArgumentsTooDeep { .. } => "arguments_too_deep",
            Self::SchemaTooLarge { .. } | Self::SchemaTooLargeAtLeast { .. } => "schema_too_large",
            Self::SchemaTooDeep { .. } => "schema_too_deep",
            Self::TooManyKeywords { .. } => "schema_too_many_keywords",
            Self::TooManyRefs { .. } => "schema_too_many_refs",
            Self::Expansion { .. } | Self::TextChecks { .. } | Self::UnevaluatedNesting { .. } => {
                "schema_expansion_too_large"
            }
            Self::RefNotAllowed { .. } => "schema_ref_not_allowed",
            Self::RefCycle { .. } => "schema_ref_cycle",
            Self::ForbiddenKey { .. } => "schema_forbidden_key",
            Self::NonFiniteNumber { .. } => "schema_non_finite_number",
            Self::UnsupportedDraft { .. } => "schema_unsupported_draft",
            Self::InvalidSchema { .. } => "schema_invalid",
            Self::PatternTooLarge { .. } | Self::PatternsTooLarge { .. } => {
                "schema_pattern_too_large"
            }
        }
    }
}

/// Cuts text for an error message to at most `max` bytes on a character boundary.
pub fn excerpt(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &text[..end])
}

impl fmt::Display for GuardViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ArgumentsTooLarge { bytes, limit } => write!(
                f,
                "tool arguments are {bytes} bytes, more than max_argument_bytes={limit}"
            ),
            Self::ArgumentsTooDeep { limit } => {
                write!(
                    f,
                    "tool arguments nest deeper than max_argument_depth={limit}"
                )
            }
            Self::SchemaTooLarge { bytes, limit } => {
                write!(
                    f,
                    "schema is {bytes} bytes, more than max_schema_bytes={limit}"
                )
            }
            // A schema given as Python objects, written out until it passed `bytes` (its exact
            // size is not known): dicts shared between places, as YAML aliases make them, are
            // written out once per place.
            Self::SchemaTooLargeAtLeast { bytes, limit } => {
                write!(
                    f,
                    "schema is at least {bytes} bytes, more than max_schema_bytes={limit}"
                )
            }
            Self::SchemaTooDeep { limit, path } => {
                write!(
                    f,
                    "schema nests deeper than max_schema_depth={limit} at {path}"
                )
            }
            Self::TooManyKeywords { limit } => {
                write!(
                    f,
                    "schema has more than max_schema_keywords={limit} keywords and properties"
                )
            }
            Self::TooManyRefs { limit } => {
                write!(f, "schema has more than max_refs={limit} references")
            }
            Self::Expansion { keywords, depth } => write!(
                f,
                "schema references apply more keywords along one path of the arguments than \
                 max_schema_keywords={keywords} at each of max_argument_depth={depth} levels"
            ),
            Self::RefNotAllowed { reference, path } => write!(
                f,
                "schema reference {:?} at {path} is not local; only \"#...\" references are allowed",
                excerpt(reference, 120)
            ),
            Self::RefCycle { path } => {
                write!(
                    f,
                    "schema references at {path} only alias each other in a cycle"
                )
            }
            Self::ForbiddenKey { key, path } => {
                write!(f, "schema key {key:?} at {path} is not allowed")
            }
            Self::NonFiniteNumber { path } => {
                write!(f, "schema holds a number that is not finite at {path}")
            }
            Self::UnsupportedDraft { declared } => write!(
                f,
                "schema declares $schema {:?}; only drafts 2020-12, 2019-09 and 7 are supported",
                excerpt(declared, 120)
            ),
            Self::InvalidSchema { reason } => write!(f, "schema is not valid: {reason}"),
            Self::PatternTooLarge { path, limit } => write!(
                f,
                "schema pattern at {path} compiles to more than {limit} bytes (the pattern size \
                 limit); large counted repetitions such as {{1000}}, or Unicode classes repeated \
                 many times, make a pattern that large"
            ),
            Self::PatternsTooLarge { distinct, limit } => write!(
                f,
                "the {distinct} distinct patterns of the schema compile to more than {limit} bytes \
                 together (the limit for one schema's patterns); every pattern is kept compiled \
                 and may run on each call"
            ),
            Self::TextChecks { limit } => write!(
                f,
                "schema may apply more than {limit} pattern, length and content keywords to the \
                 values along one path of the arguments (through references, allOf, anyOf and \
                 the like); each one reads a whole string"
            ),
            Self::UnevaluatedNesting { nesting, limit } => write!(
                f,
                "schema applies {nesting} schemas with unevaluatedProperties or unevaluatedItems \
                 one inside another at one value, more than {limit}; each one checks what the \
                 others evaluate again, so the work doubles with each"
            ),
        }
    }
}

impl std::error::Error for GuardViolation {}

/// Checks size and container depth of raw JSON bytes in one non-recursive pass.
///
/// Brackets inside strings do not count. The scan does not validate JSON: the parser does that
/// afterwards, on input the scan has already bounded.
pub fn scan_json(data: &[u8], max_bytes: usize, max_depth: usize) -> Result<(), GuardViolation> {
    if data.len() > max_bytes {
        return Err(GuardViolation::ArgumentsTooLarge {
            bytes: data.len(),
            limit: max_bytes,
        });
    }
    let mut depth = 0usize;
    let mut index = 0usize;
    while index < data.len() {
        match data[index] {
            b'"' => {
                // Skip the string body: jump from quote/backslash to quote/backslash.
                index += 1;
                loop {
                    let Some(offset) = memchr::memchr2(b'"', b'\\', &data[index..]) else {
                        return Ok(()); // unterminated: the parser reports it
                    };
                    index += offset;
                    if data[index] == b'"' {
                        break;
                    }
                    index += 2; // a backslash and the byte it escapes
                    if index >= data.len() {
                        return Ok(());
                    }
                }
            }
            b'[' | b'{' => {
                depth += 1;
                if depth > max_depth {
                    return Err(GuardViolation::ArgumentsTooDeep { limit: max_depth });
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        index += 1;
    }
    Ok(())
}

/// What `check_schema` learned while checking.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SchemaStats {
    pub depth: usize,
    pub keywords: usize,
    pub refs: usize,
    /// `pattern` keywords and `patternProperties` entries of schema objects.
    pub patterns: usize,
    /// What listing every issue may cost, per value of the arguments (see `IssueWeights`).
    pub issues: IssueWeights,
}

/// Keywords whose value is one subschema.
const SCHEMA_KEYWORDS: [&str; 12] = [
    "additionalItems",
    "additionalProperties",
    "contains",
    "contentSchema",
    "else",
    "if",
    "items",
    "not",
    "propertyNames",
    "then",
    "unevaluatedItems",
    "unevaluatedProperties",
];
/// Keywords whose value is an array of subschemas.
const SCHEMA_ARRAY_KEYWORDS: [&str; 5] = ["allOf", "anyOf", "oneOf", "prefixItems", "items"];
/// Keywords whose value maps names to subschemas.
const SCHEMA_MAP_KEYWORDS: [&str; 6] = [
    "$defs",
    "definitions",
    "dependentSchemas",
    "patternProperties",
    "properties",
    "dependencies",
];
/// Keywords that constrain an instance. A schema holding `$ref` and none of these (only
/// identifiers, annotations or unknown keywords beside it) is an alias: it accepts exactly what
/// its target accepts, so a loop of aliases constrains nothing and is refused.
const VALIDATING_KEYWORDS: [&str; 45] = [
    "$dynamicRef",
    "$recursiveRef",
    "additionalItems",
    "additionalProperties",
    "allOf",
    "anyOf",
    "const",
    "contains",
    "contentEncoding",
    "contentMediaType",
    "contentSchema",
    "dependencies",
    "dependentRequired",
    "dependentSchemas",
    "else",
    "enum",
    "exclusiveMaximum",
    "exclusiveMinimum",
    "format",
    "if",
    "items",
    "maxContains",
    "maxItems",
    "maxLength",
    "maxProperties",
    "maximum",
    "minContains",
    "minItems",
    "minLength",
    "minProperties",
    "minimum",
    "multipleOf",
    "not",
    "oneOf",
    "pattern",
    "patternProperties",
    "prefixItems",
    "properties",
    "propertyNames",
    "required",
    "then",
    "type",
    "unevaluatedItems",
    "unevaluatedProperties",
    "uniqueItems",
];

fn pointer_token(token: &str) -> std::borrow::Cow<'_, str> {
    if token.contains(['~', '/']) {
        std::borrow::Cow::Owned(token.replace('~', "~0").replace('/', "~1"))
    } else {
        std::borrow::Cow::Borrowed(token)
    }
}

/// One step from a node to its child, for the JSON Pointer of a refused node.
#[derive(Clone, Copy)]
enum Step<'a> {
    Root,
    Key(&'a str),
    Index(usize),
    /// Into the target of the reference at the parent step.
    Via(&'a str),
}

/// Where every visited node sits, as steps from the root: pushing a step costs no allocation,
/// and a path is written out only for a node that is refused.
struct Trail<'a> {
    steps: Vec<(u32, Step<'a>)>,
}

impl<'a> Trail<'a> {
    fn new() -> Self {
        Self {
            steps: vec![(0, Step::Root)],
        }
    }

    #[allow(clippy::cast_possible_truncation)] // a schema within the byte limit has < 2^32 nodes
    fn push(&mut self, parent: u32, step: Step<'a>) -> u32 {
        self.steps.push((parent, step));
        (self.steps.len() - 1) as u32
    }

    /// The path of step `at`: a JSON Pointer, with ` -> #...` where it went through a reference.
    fn render(&self, mut at: u32) -> String {
        let mut steps = Vec::new();
        while at != 0 {
            let (parent, step) = self.steps[at as usize];
            steps.push(step);
            at = parent;
        }
        let mut path = String::new();
        for step in steps.iter().rev() {
            match step {
                Step::Root => {}
                Step::Key(key) => {
                    path.push('/');
                    path.push_str(&pointer_token(key));
                }
                Step::Index(index) => {
                    path.push('/');
                    path.push_str(&index.to_string());
                }
                Step::Via(target) => {
                    path.push_str(" -> ");
                    path.push_str(target);
                }
            }
        }
        path
    }

    /// `render`, with `/` for the root.
    fn render_or_root(&self, at: u32) -> String {
        let path = self.render(at);
        if path.is_empty() {
            "/".to_owned()
        } else {
            path
        }
    }
}

fn is_reference_key(key: &str) -> bool {
    key == "$ref" || key == "$dynamicRef" || key == "$recursiveRef"
}

/// Decodes the percent escapes of a URI fragment (`%25` -> `%`); malformed escapes stay as is.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] == b'%' && index + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[index + 1..index + 3]).ok();
            if let Some(value) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(value);
                index += 3;
                continue;
            }
        }
        out.push(bytes[index]);
        index += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Checks a parsed schema against every schema guard (see the module doc).
pub fn check_schema(schema: &Value, limits: &Limits) -> Result<SchemaStats, GuardViolation> {
    check_schema_with_words(schema, limits).map(|(stats, _)| stats)
}

/// Checks that read a whole string (`text_checks`) a schema may apply to the values along one
/// path of the arguments, at most (`check_text_checks`). The validator keeps no verdict about
/// a string, so each application is another pass over it: `allOf` of two references, sixteen
/// deep, applied one pattern 65,536 times, and a valid call with a 1 MB string took 24 s. An
/// `anyOf` of a hundred string shapes, each with a pattern and two lengths, fits.
pub const MAX_TEXT_CHECKS: u64 = 512;

/// Schemas holding `unevaluatedProperties` or `unevaluatedItems` one applied in place inside
/// the other, at most. Each works out what the schemas inside it evaluate by checking them
/// again, so the work grows about 2.6 times with each: twenty of them (879 bytes of schema)
/// took 3.6 s to validate `{"a": 1}`, thirty would take hours. A schema that closes each layer
/// of an `allOf` inheritance fits.
pub const MAX_UNEVALUATED_NESTING: u64 = 8;

/// Property names collected per schema, at most.
pub const MAX_PROPERTY_NAMES: usize = 1024;

/// Strings of `enum` and `const` collected per schema, at most, and the longest collected.
pub const MAX_CHOICE_STRINGS: usize = 256;
pub const MAX_CHOICE_STRING_BYTES: usize = 63;

/// The strings a schema names that arguments built for it will most likely hold, gathered on the
/// guard walk (repeats included): the names under every `properties` of a schema object (at most
/// `MAX_PROPERTY_NAMES`), and the string values of every `enum` and `const` of one (at most
/// `MAX_CHOICE_STRINGS`, each at most `MAX_CHOICE_STRING_BYTES` long).
#[derive(Debug, Default)]
pub struct SchemaWords<'a> {
    pub property_names: Vec<&'a str>,
    pub choices: Vec<&'a str>,
    /// Every `pattern` and `patternProperties` name of the schema's objects (repeats included).
    pub patterns: Vec<&'a str>,
}

/// `check_schema`, also returning the schema's words (see `SchemaWords`).
pub fn check_schema_with_words<'a>(
    schema: &'a Value,
    limits: &Limits,
) -> Result<(SchemaStats, SchemaWords<'a>), GuardViolation> {
    let mut walker = Walker {
        limits,
        stats: SchemaStats::default(),
        anchors: AHashMap::new(),
        aliases: Vec::new(),
        references: Vec::new(),
        seen_as_schema: AHashSet::new(),
        stack: vec![Frame::root(schema)],
        trail: Trail::new(),
        words: SchemaWords::default(),
    };
    walker.run()?;
    check_alias_cycles(&walker.anchors, &walker.aliases, &walker.trail)?;
    // Without references the schema is its own expansion, already bounded by the keyword count.
    if walker.stats.refs > 0 {
        check_expansion(schema, &walker.anchors, limits)?;
    }
    let (issues, text_checks, nesting) = issue_weights(schema, &walker.anchors, limits);
    if nesting > MAX_UNEVALUATED_NESTING {
        return Err(GuardViolation::UnevaluatedNesting {
            nesting,
            limit: MAX_UNEVALUATED_NESTING,
        });
    }
    // Without references each schema object applies once along a path: the schema's own count
    // of string checks bounds what one path meets.
    if walker.stats.refs == 0 && text_checks > MAX_TEXT_CHECKS {
        check_expansion(schema, &walker.anchors, limits)?;
    }
    walker.stats.issues = issues;
    Ok((walker.stats, walker.words))
}

/// One node waiting to be checked.
#[derive(Clone, Copy)]
struct Frame<'a> {
    node: &'a Value,
    depth: usize,
    /// The node's step in the trail (its path, for messages).
    at: u32,
    /// Whether the node sits where a schema is expected (so `$ref` there is a reference).
    is_schema: bool,
    /// The schema resource (nearest `$id`, or the root) that `#...` references resolve in.
    resource: &'a Value,
    /// False when the node was already counted and checked as data and is now revisited as a
    /// schema because a reference points at it.
    count: bool,
}

impl<'a> Frame<'a> {
    fn root(schema: &'a Value) -> Self {
        Self {
            node: schema,
            depth: 1,
            at: 0,
            is_schema: true,
            resource: schema,
            count: true,
        }
    }
}

/// An alias: a schema that is nothing but a `$ref` (plus annotations).
struct Alias<'a> {
    node: &'a Value,
    reference: &'a str,
    resource: &'a Value,
    at: u32,
}

/// A local reference and the resource it resolves in.
struct Reference<'a> {
    target: &'a str,
    resource: &'a Value,
    at: u32,
}

type AnchorKey = (*const Value, String);

struct Walker<'a, 'l> {
    limits: &'l Limits,
    stats: SchemaStats,
    anchors: AHashMap<AnchorKey, &'a Value>,
    aliases: Vec<Alias<'a>>,
    references: Vec<Reference<'a>>,
    seen_as_schema: AHashSet<*const Value>,
    stack: Vec<Frame<'a>>,
    trail: Trail<'a>,
    words: SchemaWords<'a>,
}

impl<'a> Walker<'a, '_> {
    /// Walks the schema, then every place a local reference points at that the walk did not
    /// already check as a schema (a reference into `enum` or an unknown keyword makes that data
    /// a schema to the validator, so it must pass the same guards), until nothing new is found.
    fn run(&mut self) -> Result<(), GuardViolation> {
        let mut resolved = 0;
        loop {
            while let Some(frame) = self.stack.pop() {
                self.visit(frame)?;
            }
            if resolved == self.references.len() {
                return Ok(());
            }
            while resolved < self.references.len() {
                let (reference_target, reference_resource, reference_at) = {
                    let reference = &self.references[resolved];
                    (reference.target, reference.resource, reference.at)
                };
                resolved += 1;
                let Some(target) =
                    resolve_fragment(reference_resource, &self.anchors, reference_target)
                else {
                    continue;
                };
                if self.seen_as_schema.contains(&std::ptr::from_ref(target)) {
                    continue;
                }
                let at = self.trail.push(reference_at, Step::Via(reference_target));
                self.stack.push(Frame {
                    node: target,
                    depth: 1,
                    at,
                    is_schema: true,
                    resource: reference_resource,
                    count: false,
                });
            }
        }
    }

    fn enter(&mut self, depth: usize, at: u32) -> Result<(), GuardViolation> {
        self.stats.depth = self.stats.depth.max(depth);
        if depth > self.limits.max_schema_depth {
            return Err(GuardViolation::SchemaTooDeep {
                limit: self.limits.max_schema_depth,
                path: self.trail.render_or_root(at),
            });
        }
        Ok(())
    }

    fn count_keys(
        &mut self,
        map: &serde_json::Map<String, Value>,
        at: u32,
        count: bool,
    ) -> Result<(), GuardViolation> {
        if count {
            self.stats.keywords += map.len();
        }
        if self.stats.keywords > self.limits.max_schema_keywords {
            return Err(GuardViolation::TooManyKeywords {
                limit: self.limits.max_schema_keywords,
            });
        }
        if let Some(key) = map
            .keys()
            .find(|key| FORBIDDEN_KEYS.contains(&key.as_str()))
        {
            return Err(GuardViolation::ForbiddenKey {
                key: key.clone(),
                path: format!("{}/{}", self.trail.render(at), pointer_token(key)),
            });
        }
        Ok(())
    }

    fn visit(&mut self, frame: Frame<'a>) -> Result<(), GuardViolation> {
        let Frame {
            node,
            depth,
            at,
            is_schema,
            mut resource,
            count,
        } = frame;
        match node {
            Value::Number(number) if number.as_f64().is_some_and(|value| !value.is_finite()) => {
                Err(GuardViolation::NonFiniteNumber {
                    path: self.trail.render(at),
                })
            }
            Value::Array(items) => {
                self.enter(depth, at)?;
                for (index, item) in items.iter().enumerate() {
                    let at = self.trail.push(at, Step::Index(index));
                    let depth = depth + 1;
                    self.stack.push(Frame {
                        node: item,
                        depth,
                        at,
                        is_schema: false,
                        resource,
                        count,
                    });
                }
                Ok(())
            }
            Value::Object(map) => {
                self.enter(depth, at)?;
                self.count_keys(map, at, count)?;
                if is_schema {
                    self.seen_as_schema.insert(std::ptr::from_ref(node));
                    if matches!(map.get("$id"), Some(Value::String(_))) {
                        resource = node;
                    }
                    self.visit_schema_object(map, at, node, resource)?;
                }
                let parent = Parent {
                    depth,
                    at,
                    is_schema,
                    resource,
                    count,
                };
                for (key, item) in map {
                    self.push_member(key, item, &parent)?;
                }
                Ok(())
            }
            _ => {
                if is_schema {
                    self.seen_as_schema.insert(std::ptr::from_ref(node));
                }
                Ok(())
            }
        }
    }

    /// The short strings of an `enum` (an array) or a `const` (one value), while there is room.
    fn collect_choices(&mut self, item: &'a Value) {
        let values = match item {
            Value::Array(values) => values.as_slice(),
            one => std::slice::from_ref(one),
        };
        let choices = &mut self.words.choices;
        let room = MAX_CHOICE_STRINGS.saturating_sub(choices.len());
        choices.extend(
            values
                .iter()
                .filter_map(Value::as_str)
                .filter(|text| text.len() <= MAX_CHOICE_STRING_BYTES)
                .take(room),
        );
    }

    /// Queues one member of an object, knowing which keywords hold subschemas.
    fn push_member(
        &mut self,
        key: &'a str,
        item: &'a Value,
        parent: &Parent<'a>,
    ) -> Result<(), GuardViolation> {
        let Parent {
            depth,
            at,
            is_schema,
            resource,
            count,
        } = *parent;
        let child_at = self.trail.push(at, Step::Key(key));
        if is_schema && count && (key == "enum" || key == "const") {
            self.collect_choices(item);
        }
        if is_schema && SCHEMA_MAP_KEYWORDS.contains(&key) {
            if let Value::Object(entries) = item {
                self.enter(depth + 1, child_at)?;
                self.count_keys(entries, child_at, count)?;
                if key == "properties" && count {
                    let names = &mut self.words.property_names;
                    let room = MAX_PROPERTY_NAMES.saturating_sub(names.len());
                    names.extend(entries.keys().take(room).map(String::as_str));
                }
                for (name, sub) in entries {
                    let at = self.trail.push(child_at, Step::Key(name));
                    // `dependencies` may map a name to an array of names (draft 7): not a schema.
                    let is_schema = sub.is_object() || sub.is_boolean();
                    let depth = depth + 2;
                    self.stack.push(Frame {
                        node: sub,
                        depth,
                        at,
                        is_schema,
                        resource,
                        count,
                    });
                }
                return Ok(());
            }
        }
        if is_schema && SCHEMA_ARRAY_KEYWORDS.contains(&key) {
            if let Value::Array(entries) = item {
                self.enter(depth + 1, child_at)?;
                for (index, sub) in entries.iter().enumerate() {
                    let at = self.trail.push(child_at, Step::Index(index));
                    let depth = depth + 2;
                    self.stack.push(Frame {
                        node: sub,
                        depth,
                        at,
                        is_schema: true,
                        resource,
                        count,
                    });
                }
                return Ok(());
            }
        }
        let is_schema = is_schema && SCHEMA_KEYWORDS.contains(&key);
        let depth = depth + 1;
        self.stack.push(Frame {
            node: item,
            depth,
            at: child_at,
            is_schema,
            resource,
            count,
        });
        Ok(())
    }

    fn visit_schema_object(
        &mut self,
        map: &'a serde_json::Map<String, Value>,
        at: u32,
        node: &'a Value,
        resource: &'a Value,
    ) -> Result<(), GuardViolation> {
        for anchor_key in ["$anchor", "$dynamicAnchor"] {
            if let Some(Value::String(name)) = map.get(anchor_key) {
                self.anchors
                    .entry((std::ptr::from_ref(resource), name.clone()))
                    .or_insert(node);
            }
        }
        let mut alias_of = None;
        for (key, value) in map {
            let Value::String(reference) = value else {
                continue;
            };
            if !is_reference_key(key) {
                continue;
            }
            self.stats.refs += 1;
            if self.stats.refs > self.limits.max_refs {
                return Err(GuardViolation::TooManyRefs {
                    limit: self.limits.max_refs,
                });
            }
            let ref_at = self.trail.push(at, Step::Key(key));
            if !reference.starts_with('#') {
                return Err(GuardViolation::RefNotAllowed {
                    reference: reference.clone(),
                    path: self.trail.render(ref_at),
                });
            }
            self.references.push(Reference {
                target: reference,
                resource,
                at: ref_at,
            });
            if key == "$ref" {
                alias_of = Some(reference.as_str());
            }
        }
        if let Some(Value::Number(divisor)) = map.get("multipleOf")
            && let Some(nearest) = inexact_divisor(divisor)
        {
            let key_at = self.trail.push(at, Step::Key("multipleOf"));
            let path = self.trail.render(key_at);
            return Err(inexact_divisor_refusal(
                &divisor.to_string(),
                &nearest.to_string(),
                &path,
            ));
        }
        if let Some(Value::String(pattern)) = map.get("pattern") {
            self.stats.patterns += 1;
            self.words.patterns.push(pattern);
        }
        if let Some(Value::Object(patterns)) = map.get("patternProperties") {
            self.stats.patterns += patterns.len();
            self.words
                .patterns
                .extend(patterns.keys().map(String::as_str));
        }
        let only_alias = || {
            !map.keys()
                .any(|key| VALIDATING_KEYWORDS.contains(&key.as_str()))
        };
        if let Some(reference) = alias_of.filter(|_| only_alias()) {
            self.aliases.push(Alias {
                node,
                reference,
                resource,
                at,
            });
        }
        Ok(())
    }
}

/// Why an integer `multipleOf` cannot be checked as written: the validator holds the divisor as
/// a float, and an integer above 2^53 that a float does not hold exactly would be checked
/// against its neighbour (`9007199254740993` as `9007199254740992`, which is not a divisor of
/// `9007199254740993`). Floats, and integers a float holds, are taken as they are. Returns the
/// integer the float holds instead.
fn inexact_divisor(divisor: &serde_json::Number) -> Option<u64> {
    const EXACT: u64 = 1 << 53;
    let magnitude = divisor
        .as_u64()
        .or_else(|| divisor.as_i64().map(i64::unsigned_abs))?;
    #[allow(
        clippy::cast_precision_loss,
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss
    )]
    let nearest = (magnitude as f64) as u64;
    (magnitude > EXACT && nearest != magnitude).then_some(nearest)
}

/// The refusal of an integer `multipleOf` written `digits` that a float holds only as
/// `nearest`, at `path`: from the guards within 64 bits, and from the conversion of a Python
/// `int` beyond them (which becomes its nearest float before any guard sees it).
pub fn inexact_divisor_refusal(digits: &str, nearest: &str, path: &str) -> GuardViolation {
    GuardViolation::InvalidSchema {
        reason: format!(
            "multipleOf {} is an integer above 2^53 that a float does not hold exactly \
             (a float holds {nearest}) at {path}",
            excerpt(digits, 80)
        ),
    }
}

/// What a member needs to know about the object holding it.
#[derive(Clone, Copy)]
struct Parent<'a> {
    depth: usize,
    at: u32,
    is_schema: bool,
    resource: &'a Value,
    count: bool,
}

fn resolve_fragment<'a>(
    resource: &'a Value,
    anchors: &AHashMap<AnchorKey, &'a Value>,
    reference: &str,
) -> Option<&'a Value> {
    let fragment = percent_decode(reference.strip_prefix('#')?);
    if fragment.is_empty() {
        return Some(resource);
    }
    if fragment.starts_with('/') {
        return resource.pointer(&fragment);
    }
    anchors
        .get(&(std::ptr::from_ref(resource), fragment))
        .copied()
}

fn check_alias_cycles<'a>(
    anchors: &AHashMap<AnchorKey, &'a Value>,
    aliases: &[Alias<'a>],
    trail: &Trail<'a>,
) -> Result<(), GuardViolation> {
    let by_node: AHashMap<*const Value, &Alias<'a>> = aliases
        .iter()
        .map(|alias| (std::ptr::from_ref(alias.node), alias))
        .collect();
    for alias in aliases {
        let mut seen: AHashSet<*const Value> = AHashSet::new();
        let mut current: *const Value = std::ptr::from_ref(alias.node);
        while let Some(step) = by_node.get(&current) {
            if !seen.insert(current) {
                return Err(GuardViolation::RefCycle {
                    path: trail.render_or_root(alias.at),
                });
            }
            match resolve_fragment(step.resource, anchors, step.reference) {
                Some(target) => current = std::ptr::from_ref(target),
                None => break,
            }
        }
    }
    Ok(())
}

/// How many keywords validation may apply at one place in the arguments and below it, along
/// one path, by what the value there is: for an array, for a primitive, and for an object (its
/// own keywords, plus the most any one member can cost: the subschemas for that member's name,
/// and those that may apply to any member).
#[derive(Clone, Default)]
struct Work<'a> {
    array: Cost,
    other: Cost,
    object: Cost,
    /// Per property name (sorted), what `properties` applies to that member.
    named: Vec<(&'a str, Cost)>,
    /// What `patternProperties`, `additionalProperties` and `unevaluatedProperties` may apply
    /// to any member.
    any_member: Cost,
    /// When weighing issues (`IssueWeights`): what applies at the value itself.
    here: u64,
    /// When weighing issues: the most applied at any one value each level down, one level down
    /// first, through an element of this value and through a member (or a name, or decoded
    /// content). Not along a path: a value draws only what applies to it. A value is an array
    /// or an object, never both, so only one of the two reaches below it: schemas applied in
    /// place add each to each, and the level weighs the larger (`Work::levels`). Summed into
    /// one, a union of an array schema and an object schema that refer back to it (a JSON
    /// value) would double at every level. Empty when not weighed.
    below: Vec<[u64; 2]>,
    /// When weighing issues: each level down, the most an `anyOf` or `oneOf` error at one value
    /// there can hold (`IssueWeights::first_error`).
    contexts: Vec<u64>,
    /// When weighing issues: each level down, the most `anyOf` and `oneOf` branches, from this
    /// schema, that enclose a keyword applied there. Before it lists their errors, a failing
    /// `anyOf` or `oneOf` checks its whole value again, so a value is checked once more for
    /// each failing one above it or in place (`IssueWeights::rechecks`). Empty without branches.
    enclosing: Vec<u64>,
    /// When weighing issues: each level down, the most options of an `enum` applied at one value
    /// there (`IssueWeights::rechecks`). Empty without `enum`.
    enums: Vec<u64>,
    /// When weighing issues: the levels down (a bit each, the last for every level from there
    /// on) where `unevaluatedItems` applies (`IssueWeights::serialised_levels`).
    serialised: u128,
    /// When weighing issues: the longest chain of schemas holding `unevaluatedProperties` or
    /// `unevaluatedItems`, each applied in place in the one before, from this one
    /// (`MAX_UNEVALUATED_NESTING`).
    unevaluated_nesting: u64,
    /// When weighing issues: each level down, the longest evaluation path, in bytes, from this
    /// schema to a keyword counted there. Every error carries its evaluation path
    /// from the root (`properties/a/$ref/...`), which grows with each level a recursive schema
    /// goes down and with each long property name or pattern on the way. Shorter than the levels
    /// when the paths below are empty (a schema without subschemas allocates none).
    paths: Vec<u64>,
}

impl<'a> Work<'a> {
    /// The work of a schema object's own keywords, before its subschemas are added.
    fn of_own(own: Own) -> Self {
        let cost = Cost {
            keywords: own.units,
            text: own.text_checks,
        };
        Work {
            array: cost,
            other: cost,
            object: cost,
            here: own.units,
            enums: if own.enum_options > 0 {
                vec![own.enum_options]
            } else {
                Vec::new()
            },
            serialised: u128::from(own.serialises_items),
            ..Work::default()
        }
    }

    fn one(levels: bool) -> Self {
        Work {
            array: Cost::ONE,
            other: Cost::ONE,
            object: Cost::ONE,
            here: u64::from(levels),
            ..Work::default()
        }
    }

    /// The most applied at any one value each level down, the value itself first.
    fn levels(&self) -> impl Iterator<Item = u64> + '_ {
        let below = self
            .below
            .iter()
            .map(|&[element, member]| element.max(member));
        std::iter::once(self.here).chain(below)
    }

    fn object_total(&self) -> Cost {
        let named = self
            .named
            .iter()
            .fold(Cost::default(), |most, &(_, work)| most.max(work));
        self.object.plus(named).plus(self.any_member)
    }

    fn most(&self) -> Cost {
        self.array.max(self.other).max(self.object_total())
    }

    /// Adds a subschema applied to the same value: members of one name add up, since both
    /// schemas apply to that member. What each applies to one value of a level through an
    /// element (or a member) adds up too, though the two may reach different values there: an
    /// upper bound.
    fn add_in_place(&mut self, other: &Work<'a>) {
        self.here = self.here.saturating_add(other.here);
        self.add_below(&other.below);
        // One error is the first: the heaviest of the contexts, not their sum.
        max_levels(&mut self.contexts, &other.contexts);
        self.array = self.array.plus(other.array);
        self.other = self.other.plus(other.other);
        self.object = self.object.plus(other.object);
        self.any_member = self.any_member.plus(other.any_member);
        for &(name, work) in &other.named {
            self.add_named(name, work);
        }
    }

    /// Adds what applies one level down and further, through an element and through a member.
    fn add_below(&mut self, other: &[[u64; 2]]) {
        if self.below.len() < other.len() {
            self.below.resize(other.len(), [0, 0]);
        }
        for (into, from) in self.below.iter_mut().zip(other) {
            into[0] = into[0].saturating_add(from[0]);
            into[1] = into[1].saturating_add(from[1]);
        }
    }

    /// What weighing issues keeps of the root schema's work, with the text checks of every
    /// schema object and the longest nesting found anywhere.
    fn into_root(self, text_checks: u64, unevaluated_nesting: u64) -> Root {
        Root {
            levels: self.levels().collect(),
            contexts: self.contexts,
            paths: self.paths,
            enclosing: self.enclosing,
            enums: self.enums,
            serialised: self.serialised,
            text_checks,
            unevaluated_nesting,
        }
    }

    /// Adds what `found`, a subschema in `slot` whose step adds `step` bytes, keeps level by
    /// level besides its issue units: its evaluation paths, the branches enclosing its keywords,
    /// its `enum`s and where `unevaluatedItems` applies; one level down unless it applies
    /// `in_place`.
    fn add_levels_of(&mut self, found: &Work<'_>, slot: Slot<'_>, step: u64, in_place: bool) {
        let (shift, levels) = (usize::from(!in_place), 1 + found.below.len());
        longest(&mut self.paths, &found.paths, levels, step, shift);
        // Everything in a branch, at every level, is enclosed by one more.
        let branch = matches!(slot, Slot::Sub(Applied::Branch));
        if branch || !found.enclosing.is_empty() {
            let enclosing = u64::from(branch);
            longest(
                &mut self.enclosing,
                &found.enclosing,
                levels,
                enclosing,
                shift,
            );
        }
        if !found.enums.is_empty() {
            longest(&mut self.enums, &found.enums, found.enums.len(), 0, shift);
        }
        let last = 1u128 << 127;
        self.serialised |= if in_place {
            found.serialised
        } else {
            (found.serialised << 1) | (found.serialised & last)
        };
    }

    /// Adds what applies one level down and further through an element, `element`, and
    /// through a member, `member`.
    fn add_element_and_member(&mut self, element: &[u64], member: &[u64]) {
        let below = element.len().max(member.len());
        if self.below.len() < below {
            self.below.resize(below, [0, 0]);
        }
        let at = |levels: &[u64], level: usize| levels.get(level).copied().unwrap_or(0);
        for (level, into) in self.below.iter_mut().enumerate().take(below) {
            into[0] = into[0].saturating_add(at(element, level));
            into[1] = into[1].saturating_add(at(member, level));
        }
    }

    fn add_named(&mut self, name: &'a str, work: Cost) {
        match self.named.binary_search_by(|(known, _)| (*known).cmp(name)) {
            Ok(at) => self.named[at].1 = self.named[at].1.plus(work),
            Err(at) => self.named.insert(at, (name, work)),
        }
    }
}

/// What validation may apply along one path of the arguments: keywords (or issue units), and
/// checks that read a whole string (`text_checks`).
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
struct Cost {
    keywords: u64,
    text: u64,
}

impl Cost {
    /// One keyword.
    const ONE: Cost = Cost {
        keywords: 1,
        text: 0,
    };

    fn plus(self, other: Cost) -> Cost {
        Cost {
            keywords: self.keywords.saturating_add(other.keywords),
            text: self.text.saturating_add(other.text),
        }
    }

    /// Whether this passes `budget`: `Some(true)` when its text checks do, `Some(false)` when
    /// only its keywords do.
    fn over(self, budget: Cost) -> Option<bool> {
        let text = self.text > budget.text;
        (text || self.keywords > budget.keywords).then_some(text)
    }

    fn max(self, other: Cost) -> Cost {
        Cost {
            keywords: self.keywords.max(other.keywords),
            text: self.text.max(other.text),
        }
    }
}

/// How a subschema is applied: to the same value, or to an element or a member of it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Applied<'a> {
    InPlace,
    /// An `anyOf` or `oneOf` branch: applied in place, and its errors kept in that keyword's own.
    Branch,
    /// `items`, `prefixItems`, `additionalItems`: one of them applies to a given element.
    ElementOneOf,
    /// `contains`, `unevaluatedItems`: applied to every element besides.
    ElementAlso,
    /// `properties`: to the member of that name.
    Named(&'a str),
    /// `patternProperties` (any pattern may match any name), `additionalProperties` and
    /// `unevaluatedProperties`.
    AnyMember,
    /// `propertyNames` and `contentSchema`: applied to strings (a name, a decoded content).
    Text,
}

/// The subschemas `map` applies, with how it applies each and the bytes the step to it adds to
/// an evaluation path (`anyOf/2/`, `properties/<name>/`), in the same order on every call.
fn applied_subschemas<'a>(
    map: &'a serde_json::Map<String, Value>,
    mut each: impl FnMut(Applied<'a>, &'a Value, u64),
) {
    for (key, value) in map {
        let keyword = key.len() as u64 + 1;
        // The step through an array of subschemas names the index; through an object, the name,
        // escaped as a JSON pointer (`~` and `/` take two bytes).
        let indexed = |index: usize| keyword + u64::from(index.checked_ilog10().unwrap_or(0)) + 2;
        let named = |name: &str| {
            let escaped = name
                .bytes()
                .filter(|&byte| byte == b'~' || byte == b'/')
                .count();
            keyword + (name.len() + escaped) as u64 + 1
        };
        match (key.as_str(), value) {
            ("allOf", Value::Array(items)) => {
                for (index, item) in items.iter().enumerate() {
                    each(Applied::InPlace, item, indexed(index));
                }
            }
            ("anyOf" | "oneOf", Value::Array(items)) => {
                for (index, item) in items.iter().enumerate() {
                    each(Applied::Branch, item, indexed(index));
                }
            }
            ("not" | "if" | "then" | "else", item) => each(Applied::InPlace, item, keyword),
            ("dependentSchemas" | "dependencies", Value::Object(entries)) => entries
                .iter()
                .filter(|(_, item)| item.is_object() || item.is_boolean())
                .for_each(|(name, item)| each(Applied::InPlace, item, named(name))),
            ("items" | "prefixItems", Value::Array(items)) => {
                for (index, item) in items.iter().enumerate() {
                    each(Applied::ElementOneOf, item, indexed(index));
                }
            }
            ("items" | "additionalItems", item) => each(Applied::ElementOneOf, item, keyword),
            ("contains" | "unevaluatedItems", item) => each(Applied::ElementAlso, item, keyword),
            ("properties", Value::Object(entries)) => entries
                .iter()
                .for_each(|(name, item)| each(Applied::Named(name), item, named(name))),
            ("patternProperties", Value::Object(entries)) => {
                entries
                    .iter()
                    .for_each(|(pattern, item)| each(Applied::AnyMember, item, named(pattern)));
            }
            ("additionalProperties" | "unevaluatedProperties", item) => {
                each(Applied::AnyMember, item, keyword);
            }
            ("propertyNames" | "contentSchema", item) => each(Applied::Text, item, keyword),
            _ => {}
        }
    }
}

/// A schema at a place in the arguments: the schema, its resource (where `#...` resolves) and
/// how many levels of arguments may lie below the place.
type Place = (*const Value, *const Value, usize);

fn place(node: &Value, resource: &Value, below: usize) -> Place {
    (
        std::ptr::from_ref(node),
        std::ptr::from_ref(resource),
        below,
    )
}

/// What the references of one schema object may apply, with the resource of each: `$ref` its
/// target; a dynamic reference its static target or any schema of the document it may resolve
/// to at run time (the second list: one of them applies).
type Targets<'a> = Vec<(&'a Value, &'a Value)>;

fn referenced<'a>(
    node: &'a Value,
    map: &'a serde_json::Map<String, Value>,
    reached_in: &'a Value,
    anchors: &AHashMap<AnchorKey, &'a Value>,
    schema: &'a Value,
    found: &mut Resolved<'a>,
) -> (&'a Value, Targets<'a>, Targets<'a>) {
    let mut references = Vec::new();
    let mut dynamic = Vec::new();
    // The few `$` keywords, found in one pass over the keys: `$id` decides the resource the
    // references resolve in.
    let mut keywords: [Option<(&'a str, &'a str)>; 3] = [None; 3];
    let mut resource = reached_in;
    for (key, value) in map {
        let (true, Value::String(text)) = (key.starts_with('$'), value) else {
            continue;
        };
        match key.as_str() {
            "$id" => resource = node,
            "$ref" => keywords[0] = Some(("$ref", text)),
            "$dynamicRef" => keywords[1] = Some(("$dynamicRef", text)),
            "$recursiveRef" => keywords[2] = Some(("$recursiveRef", text)),
            _ => {}
        }
    }
    for (key, reference) in keywords.into_iter().flatten() {
        // Each reference is resolved once per resource (a pointer walk and a decoding).
        let target = *found
            .targets
            .entry((std::ptr::from_ref(resource), reference))
            .or_insert_with(|| resolve_fragment(resource, anchors, reference));
        if key == "$ref" {
            references.extend(target.map(|target| (target, resource)));
            continue;
        }
        dynamic.extend(target.map(|target| (target, resource)));
        let by_name = found
            .dynamic_anchors
            .get_or_insert_with(|| dynamic_anchor_map(schema));
        let name = match key {
            "$recursiveRef" => "",
            _ => reference.strip_prefix('#').unwrap_or_default(),
        };
        dynamic.extend(by_name.get(name).into_iter().flatten().copied());
    }
    (resource, references, dynamic)
}

/// References resolved so far while weighing one schema.
#[derive(Default)]
struct Resolved<'a> {
    targets: AHashMap<(*const Value, &'a str), Option<&'a Value>>,
    dynamic_anchors: Option<AHashMap<&'a str, Targets<'a>>>,
}

/// Every schema a dynamic reference may resolve to, by anchor name, with its resource: those
/// holding `$dynamicAnchor` (under its name) and those holding `"$recursiveAnchor": true`, and
/// every resource root (under the empty name, as `$recursiveRef: "#"` may resolve to either).
fn dynamic_anchor_map(schema: &Value) -> AHashMap<&str, Targets<'_>> {
    let mut found: AHashMap<&str, Targets<'_>> = AHashMap::new();
    let mut stack = vec![(schema, schema)];
    while let Some((node, resource)) = stack.pop() {
        match node {
            Value::Object(map) => {
                let resource = match map.get("$id") {
                    Some(Value::String(_)) => node,
                    _ => resource,
                };
                if std::ptr::eq(resource, node)
                    || map.get("$recursiveAnchor") == Some(&Value::Bool(true))
                {
                    found.entry("").or_default().push((node, resource));
                }
                if let Some(Value::String(name)) = map.get("$dynamicAnchor") {
                    found
                        .entry(name.as_str())
                        .or_default()
                        .push((node, resource));
                }
                stack.extend(map.values().map(|item| (item, resource)));
            }
            Value::Array(items) => stack.extend(items.iter().map(|item| (item, resource))),
            _ => {}
        }
    }
    found
}

/// Where a subschema applies, as levels of arguments below it: the same value, a string, or one
/// level down (`None` below the deepest level the arguments may reach).
fn levels_below(applied: Applied<'_>, below: Option<usize>) -> Option<usize> {
    let Some(below) = below else {
        return Some(0); // weighing without depth: every place is the same
    };
    match applied {
        Applied::InPlace | Applied::Branch => Some(below),
        Applied::Text => Some(0),
        _ => below.checked_sub(1),
    }
}

/// How one subschema of a schema object adds to its work.
#[derive(Clone, Copy)]
enum Slot<'a> {
    Reference,
    /// One of the schemas a dynamic reference may resolve to (the heaviest counts).
    Dynamic,
    Sub(Applied<'a>),
}

impl Slot<'_> {
    /// The bytes a reference adds to an evaluation path: `$ref/`, or at most `$recursiveRef/`
    /// for a dynamic one. A subschema's step is its own (`applied_subschemas`).
    fn reference_step(self) -> u64 {
        match self {
            Slot::Reference => 5,
            Slot::Dynamic => 14,
            Slot::Sub(_) => 0,
        }
    }
}

/// The work of one schema object from its own keyword count and the work of each subschema it
/// applies, in the order of `slots`.
fn weigh<'a>(
    own: Own,
    slots: &[(Slot<'a>, u64)],
    subschemas: impl Iterator<Item = Work<'a>>,
    levels: bool,
) -> Work<'a> {
    let mut work = Work::of_own(own);
    // The longest chain of `unevaluated*` holders applied in place, below this one.
    let mut unevaluated_below = 0u64;
    let (mut element_one_of, mut element_also, mut text) =
        (Cost::default(), Cost::default(), Cost::default());
    let mut heaviest_dynamic: Option<Work<'a>> = None;
    // Per level below: what applies to one element, and to one member (its name included);
    // and the most of any dynamic target. What the branches of this object's `anyOf` and
    // `oneOf` raise at this value, kept in their errors; and the contexts below.
    let (mut element, mut element_too) = (Vec::new(), Vec::new());
    let (mut dynamic, mut dynamic_below) = (0u64, Vec::new());
    let (mut member, mut member_too) = (Vec::new(), Vec::new());
    let (mut branches, mut contexts, mut dynamic_contexts) = (0u64, Vec::new(), Vec::new());
    for (&(slot, step), found) in slots.iter().zip(subschemas) {
        let in_place = matches!(
            slot,
            Slot::Reference | Slot::Dynamic | Slot::Sub(Applied::InPlace | Applied::Branch)
        );
        if levels {
            if in_place {
                unevaluated_below = unevaluated_below.max(found.unevaluated_nesting);
            } else {
                max_levels(&mut contexts, &found.contexts);
            }
            work.add_levels_of(&found, slot, step, in_place);
        }
        match slot {
            Slot::Reference | Slot::Sub(Applied::InPlace) => work.add_in_place(&found),
            Slot::Sub(Applied::Branch) => {
                work.add_in_place(&found);
                // A branch that raises errors below this value keeps them all in one error.
                let below = found.below.iter().flatten().any(|&units| units > 0);
                branches = branches.saturating_add(if below { u64::MAX } else { found.here });
            }
            Slot::Dynamic => {
                dynamic = dynamic.max(found.here);
                if dynamic_below.len() < found.below.len() {
                    dynamic_below.resize(found.below.len(), [0, 0]);
                }
                for (into, from) in dynamic_below.iter_mut().zip(&found.below) {
                    *into = [into[0].max(from[0]), into[1].max(from[1])];
                }
                max_levels(&mut dynamic_contexts, &found.contexts);
                if heaviest_dynamic
                    .as_ref()
                    .is_none_or(|known| found.most().keywords > known.most().keywords)
                {
                    heaviest_dynamic = Some(found);
                }
            }
            Slot::Sub(Applied::ElementOneOf) => {
                element_one_of = element_one_of.max(found.most());
                max_levels(&mut element, found.levels());
            }
            Slot::Sub(Applied::ElementAlso) => {
                element_also = element_also.plus(found.most());
                add_levels(&mut element_too, found.levels(), 0);
            }
            // The names of one object's `properties` differ: one member takes one of them.
            Slot::Sub(Applied::Named(name)) => {
                work.add_named(name, found.most());
                max_levels(&mut member, found.levels());
            }
            Slot::Sub(Applied::AnyMember) => {
                work.any_member = work.any_member.plus(found.most());
                add_levels(&mut member_too, found.levels(), 0);
            }
            Slot::Sub(Applied::Text) => {
                text = text.plus(found.most());
                add_levels(&mut member_too, found.levels(), 0);
            }
        }
    }
    if let Some(found) = heaviest_dynamic {
        let (here, below) = (work.here, std::mem::take(&mut work.below));
        let contexts = std::mem::take(&mut work.contexts);
        work.add_in_place(&found);
        // Any of the dynamic targets may apply: the most of each, not the heaviest's.
        (work.here, work.below, work.contexts) = (here.saturating_add(dynamic), below, contexts);
        work.add_below(&dynamic_below);
        max_levels(&mut work.contexts, &dynamic_contexts);
    }
    work.array = work.array.plus(element_one_of.plus(element_also));
    work.object = work.object.plus(text);
    work.other = work.other.plus(text);
    if levels {
        // One of the element schemas, and all of those for every element; one of the names,
        // and all of those for any member.
        add_levels(&mut element, &element_too, 0);
        add_levels(&mut member, &member_too, 0);
        work.add_element_and_member(&element, &member);
        work.unevaluated_nesting = unevaluated_below.saturating_add(u64::from(own.unevaluated));
        if !contexts.is_empty() {
            contexts.insert(0, 0);
            max_levels(&mut work.contexts, &contexts);
        }
        if branches > 0 {
            max_levels(&mut work.contexts, [branches]);
        }
    }
    work
}

/// The larger of `into` and `from` (over `levels` levels, zero where `from` is shorter), each
/// `step` more, level by level, `shift` levels down, into `into`: the longest paths, or the
/// most enclosing branches.
fn longest(into: &mut Vec<u64>, from: &[u64], levels: usize, step: u64, shift: usize) {
    if into.len() < levels + shift {
        into.resize(levels + shift, 0);
    }
    for (level, at) in into[shift..shift + levels].iter_mut().enumerate() {
        let from = from.get(level).copied().unwrap_or(0);
        *at = (*at).max(from.saturating_add(step));
    }
}

/// Adds `other` into `levels`, level by level, `shift` levels down.
fn add_levels<T: Borrow<u64>>(
    levels: &mut Vec<u64>,
    other: impl IntoIterator<Item = T>,
    shift: usize,
) {
    for (level, from) in other.into_iter().enumerate() {
        let at = level + shift;
        if levels.len() <= at {
            levels.resize(at + 1, 0);
        }
        levels[at] = levels[at].saturating_add(*from.borrow());
    }
}

/// The most of `levels` and `other`, level by level, into `levels`.
fn max_levels<T: Borrow<u64>>(levels: &mut Vec<u64>, other: impl IntoIterator<Item = T>) {
    for (level, from) in other.into_iter().enumerate() {
        if levels.len() <= level {
            levels.resize(level + 1, 0);
        }
        levels[level] = levels[level].max(*from.borrow());
    }
}

/// Refuses a schema whose references make validation apply more keywords along one path of the
/// arguments than `max_schema_keywords` at each of `max_argument_depth` levels. References can
/// make a small schema exponential (an `anyOf` of two references to a schema that does the same,
/// thirty deep; or a member checked by both `properties` and `patternProperties` that refer back
/// to the root): validating one call would take hours. A schema that recurses once per level
/// of the arguments, as trees and JSON-like values do, stays linear and passes.
///
/// Each schema is weighed once per depth, bottom up, on an explicit stack (a hostile schema
/// cannot overflow the thread's), and the check stops as soon as the bound is passed. A loop of
/// schemas applied in place (`{"anyOf": [{"$ref": "#"}]}`) counts once, as the validator stops
/// it.
fn check_expansion<'a>(
    schema: &'a Value,
    anchors: &AHashMap<AnchorKey, &'a Value>,
    limits: &Limits,
) -> Result<(), GuardViolation> {
    let budget = Cost {
        keywords: (limits.max_schema_keywords as u64)
            .saturating_mul(limits.max_argument_depth as u64),
        text: MAX_TEXT_CHECKS,
    };
    // Most schemas with references do not loop: weighed once per schema, without depth, they
    // get a bound at least as large (every level counted), and most fit it. Only a schema that
    // loops back on itself, or does not fit, is weighed again, per level of the arguments.
    let mut keywords = |map: &serde_json::Map<String, Value>| Own {
        units: map.len().max(1) as u64,
        text_checks: map
            .iter()
            .map(|(key, value)| text_checks(key, value))
            .fold(0, u64::saturating_add),
        ..Own::ONE
    };
    if let Expansion::Fits { .. } =
        weigh_expansion(schema, anchors, budget, None, &mut keywords, false)
    {
        return Ok(());
    }
    let depth = Some(limits.max_argument_depth);
    let expansion = GuardViolation::Expansion {
        keywords: limits.max_schema_keywords,
        depth: limits.max_argument_depth,
    };
    match weigh_expansion(schema, anchors, budget, depth, &mut keywords, false) {
        Expansion::Fits { .. } | Expansion::Loops => Ok(()),
        Expansion::Over { text: false } => Err(expansion),
        // Named for the keywords when they pass their bound too: the wider fault.
        Expansion::Over { text: true } => {
            let keywords_only = Cost {
                text: u64::MAX,
                ..budget
            };
            match weigh_expansion(schema, anchors, keywords_only, depth, &mut keywords, false) {
                Expansion::Over { .. } => Err(expansion),
                _ => Err(GuardViolation::TextChecks {
                    limit: MAX_TEXT_CHECKS,
                }),
            }
        }
    }
}

/// What weighing issues found at the root: `Work::levels`, `Work::contexts`, `Work::paths`,
/// `Work::enclosing`, `Work::enums` and `Work::serialised`; and the most of two strains
/// anywhere in the schema.
struct Root {
    levels: Vec<u64>,
    contexts: Vec<u64>,
    paths: Vec<u64>,
    enclosing: Vec<u64>,
    enums: Vec<u64>,
    serialised: u128,
    /// The text checks of every schema object weighed, added up (`Own::text_checks`).
    text_checks: u64,
    /// The longest in-place chain of `unevaluated*` holders anywhere (`Work::unevaluated_nesting`).
    unevaluated_nesting: u64,
}

/// What weighing a schema found: the weight when it fits the bound, that it does not, or
/// (weighing without depth) that it loops back on itself.
enum Expansion {
    /// It fits; what applies at one value of each level, the contexts there and the longest
    /// evaluation paths (`Work::levels`, `Work::contexts` and `Work::paths`, when weighed), and
    /// the most text checks at any one value (`Work::text_checks`, when weighed).
    Fits {
        root: Root,
    },
    /// It passes the budget: its text checks (`text`), or its keywords.
    Over {
        text: bool,
    },
    Loops,
}

/// One step of weighing a schema.
enum Task<'a> {
    /// Weigh `node`, reached in `resource` with `below` levels of arguments under it; `shared`
    /// when reached through a reference (then its work is kept, by place, for every other
    /// reference to it).
    Weigh {
        node: &'a Value,
        resource: &'a Value,
        below: Option<usize>,
        shared: bool,
    },
    /// Combine the work of `node`'s subschemas, whose slots start at `slots` on the stack of
    /// slots, and whose results are the last as many entries of the stack of results (in
    /// reverse order).
    Combine {
        node: &'a Value,
        resource: &'a Value,
        below: Option<usize>,
        shared: bool,
        slots: usize,
    },
}

/// Weighs `schema` against `budget`, per level of the arguments when `depth` is given (loops
/// then end at the last level, and a loop of schemas applied in place counts once), otherwise
/// once per schema (and a loop of any kind answers `Loops`). Subschemas reached through the
/// schema's own nesting are weighed as they come; only those reached through a reference are
/// looked up and kept by place, so a schema costs little more than one walk. `own` weighs a
/// schema object's own keywords (a schema that is not an object weighs one), and its text
/// checks (`text_checks`, when weighing issues); `levels` asks for `Work::levels` too.
fn weigh_expansion<'a>(
    schema: &'a Value,
    anchors: &AHashMap<AnchorKey, &'a Value>,
    budget: Cost,
    depth: Option<usize>,
    own: &mut impl FnMut(&'a serde_json::Map<String, Value>) -> Own,
    levels: bool,
) -> Expansion {
    let mut done: AHashMap<Place, Work<'a>> = AHashMap::new();
    let mut open: AHashSet<Place> = AHashSet::new();
    let mut resolved = Resolved::default();
    let mut results: Vec<Work<'a>> = Vec::new();
    // Every subschema waiting to be weighed or combined has its slot here: a schema's
    // subschemas are done before it is combined, so the stack never needs more than its top.
    let mut slot_stack: Vec<(Slot<'a>, u64)> = Vec::new();
    let (mut total_text_checks, mut most_nesting) = (0u64, 0u64);
    let mut tasks = vec![Task::Weigh {
        node: schema,
        resource: schema,
        below: depth,
        shared: false,
    }];
    while let Some(task) = tasks.pop() {
        match task {
            Task::Weigh {
                node,
                resource,
                below,
                shared,
            } => {
                let Value::Object(map) = node else {
                    results.push(Work::one(levels));
                    continue;
                };
                if shared {
                    let here = place(node, resource, below.unwrap_or(0));
                    if let Some(known) = done.get(&here) {
                        results.push(known.clone());
                        continue;
                    }
                    if !open.insert(here) {
                        if depth.is_none() {
                            return Expansion::Loops;
                        }
                        results.push(Work::one(levels)); // a loop of in-place schemas
                        continue;
                    }
                }
                let (inner, references, dynamic) =
                    referenced(node, map, resource, anchors, schema, &mut resolved);
                tasks.push(Task::Combine {
                    node,
                    resource,
                    below,
                    shared,
                    slots: slot_stack.len(),
                });
                for (list, slot) in [(&references, Slot::Reference), (&dynamic, Slot::Dynamic)] {
                    for &(target, target_resource) in list {
                        slot_stack.push((slot, slot.reference_step()));
                        tasks.push(Task::Weigh {
                            node: target,
                            resource: target_resource,
                            below,
                            shared: true,
                        });
                    }
                }
                applied_subschemas(map, |applied, item, step| {
                    if let Some(item_below) = levels_below(applied, below) {
                        slot_stack.push((Slot::Sub(applied), step));
                        tasks.push(Task::Weigh {
                            node: item,
                            resource: inner,
                            below: below.map(|_| item_below),
                            shared: false,
                        });
                    }
                });
            }
            Task::Combine {
                node,
                resource,
                below,
                shared,
                slots,
            } => {
                let own = node.as_object().map_or(Own::ONE, &mut *own);
                let from = results.len() - (slot_stack.len() - slots);
                let found = results.drain(from..).rev();
                let work = weigh(own, &slot_stack[slots..], found, levels);
                slot_stack.truncate(slots);
                if let Some(text) = work.most().over(budget) {
                    return Expansion::Over { text };
                }
                total_text_checks = total_text_checks.saturating_add(own.text_checks);
                most_nesting = most_nesting.max(work.unevaluated_nesting);
                if shared {
                    let here = place(node, resource, below.unwrap_or(0));
                    open.remove(&here);
                    done.insert(here, work.clone());
                }
                results.push(work);
            }
        }
    }
    let root = results.pop().unwrap_or_default();
    Expansion::Fits {
        root: root.into_root(total_text_checks, most_nesting),
    }
}

/// What a schema object's own keywords add to its work (`weigh`).
#[derive(Clone, Copy)]
struct Own {
    /// Keywords (weighing the expansion) or issue units (weighing issues).
    units: u64,
    /// When weighing issues: checks that read a whole string (`text_checks`).
    text_checks: u64,
    /// When weighing issues: the options of its `enum`, each compared with the value.
    enum_options: u64,
    /// When weighing issues: it has `unevaluatedItems`, whose error serialises the items it
    /// refuses (`IssueWeights::serialised_levels`).
    serialises_items: bool,
    /// When weighing issues: it has `unevaluatedProperties` or `unevaluatedItems`.
    unevaluated: bool,
}

impl Own {
    /// A schema that is not an object (`true`, `false`) weighs one.
    const ONE: Own = Own {
        units: 1,
        text_checks: 0,
        enum_options: 0,
        serialises_items: false,
        unevaluated: false,
    };
}

/// Checks a keyword makes that read the whole of a string each time it applies: one for
/// `pattern`, the lengths (counted in characters) and the content keywords; one for each
/// pattern of `patternProperties`, matched against every name of an object. (`format` is an
/// annotation here: the validator does not read the string for it.)
fn text_checks(key: &str, value: &Value) -> u64 {
    match key {
        "pattern" | "minLength" | "maxLength" | "contentEncoding" | "contentMediaType" => 1,
        "patternProperties" => value
            .as_object()
            .map_or(0, |patterns| patterns.len() as u64),
        _ => 0,
    }
}

/// Bytes that one issue unit stands for: about what one validation error of the `jsonschema`
/// crate takes (its boxed record, its kind and its instance path take 300 to 400 bytes), so
/// that text an error copies can be weighed in the same units as the errors themselves.
pub const ISSUE_UNIT_BYTES: u64 = 256;

/// Bytes a copy of one JSON value takes as a `serde_json::Value`, besides its text: the value
/// itself, and the slot that holds it in its array or object.
pub const VALUE_COPY_BYTES: u64 = 80;

/// What listing the issues of an instance can cost, from the schema alone, in issue units
/// (`ISSUE_UNIT_BYTES`). Listing every issue materialises all of them at once (the `jsonschema`
/// crate collects every error before it hands over the first), so the bindings multiply these
/// by a weight of the arguments (`schema::DocumentWeight`) before they ask for the issues.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct IssueWeights {
    /// For each level of the arguments (the root value first), an upper bound on the issues
    /// validation can raise at any one value there, and the schema text they copy: the keywords
    /// that can fail and apply to that value (a reference counts its target each time it
    /// applies, as the expansion guard counts it), each `required` (or `dependentRequired`) name
    /// one issue, and the text a failing keyword copies into its error (a `not` copies its whole
    /// subschema) in units of `ISSUE_UNIT_BYTES`, each issue weighed once more for every
    /// `ISSUE_UNIT_BYTES` of the longest evaluation path to that level (an error copies its path
    /// from the root: ten levels of a recursive schema through a 10 KB property name make every
    /// error there 100 KB). Nothing applies below the last level listed.
    pub per_level: Box<[u64]>,
    /// For each level of the arguments, the issues the first error at one value there can hold
    /// besides itself: an `anyOf` or `oneOf` error keeps the errors of every branch, so the
    /// first error is more than one issue when the first keyword to fail is one of them. Zero
    /// without such keywords; what the branches of one of them raise at that value; `u64::MAX`
    /// when a branch may raise errors below that value, where what it keeps grows with the
    /// arguments. Each issue weighed as `per_level` weighs it, by the longest evaluation path
    /// anywhere in the schema (the branches' errors may come from any level below).
    pub first_error: Box<[u64]>,
    /// The largest of `per_level`: what one value at any level may draw.
    pub most: u64,
    /// For each level of the arguments, an upper bound on the checks made again at one value
    /// there while its issues are found: before it lists its errors, a failing `anyOf` or
    /// `oneOf` checks its whole value again, so a value is checked once more for each failing
    /// one that encloses it. What one value there may draw (in issue units, which count every
    /// keyword) and the schema's largest `enum`, times the most branches enclosing that level.
    /// Zero without branches. Five in-place `anyOf`s at each of 62 levels checked 453 values
    /// against a 9,002-option `enum` about 310 times each: 3 s for 5.7 KB of arguments.
    pub rechecks: Box<[u64]>,
    /// The largest of `rechecks`.
    pub most_rechecks: u64,
    /// The levels of the arguments where `unevaluatedItems` applies, a bit each (the root
    /// value's first; the last bit for every level from there on): its error holds every item
    /// it refuses serialised as JSON text (a control character takes six bytes there), on top
    /// of the copy of the array any error about it holds (`schema::DocumentWeight`).
    pub serialised_levels: u128,
}

impl IssueWeights {
    /// Whether errors about an array at `level` may hold its items serialised.
    pub fn serialises_at(&self, level: usize) -> bool {
        self.serialised_levels & (1u128 << level.min(127)) != 0
    }
}

/// `bytes` in issue units, rounded up.
fn units_of_bytes(bytes: u64) -> u64 {
    bytes.div_ceil(ISSUE_UNIT_BYTES)
}

/// Bytes a `serde_json::Value` copy of `value` takes, about: `VALUE_COPY_BYTES` for each value
/// and member, and the text of its strings and keys. One pass on an explicit stack.
fn value_copy_bytes(value: &Value) -> u64 {
    let mut bytes = 0u64;
    let mut stack = vec![value];
    while let Some(node) = stack.pop() {
        bytes = bytes.saturating_add(VALUE_COPY_BYTES);
        match node {
            Value::String(text) => bytes = bytes.saturating_add(text.len() as u64),
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => {
                for (key, item) in map {
                    bytes = bytes.saturating_add(key.len() as u64);
                    stack.push(item);
                }
            }
            _ => {}
        }
    }
    bytes
}

/// The text a list of names copies into its errors (`required` and `dependentRequired` copy
/// each name into the error of that name): one issue per name, and the names' bytes.
fn name_list_units(names: &[Value]) -> u64 {
    let bytes: u64 = names
        .iter()
        .map(|name| {
            name.as_str()
                .map_or(VALUE_COPY_BYTES, |text| text.len() as u64)
        })
        .sum();
    (names.len() as u64).saturating_add(units_of_bytes(bytes))
}

/// The issues a schema object's own keywords can raise at one value, in issue units: one for each
/// keyword that can fail, one for each name `required` and `dependentRequired` (or draft 7
/// `dependencies`) list, and the text a failing keyword copies into its error. Annotations and
/// unknown keywords raise nothing. `copies` keeps what `not` subschemas weigh, by place, so a
/// subschema weighed at many places of the arguments is read once. With what else the weighing
/// notes of them (`Own`).
fn own_issue_units(
    map: &serde_json::Map<String, Value>,
    copies: &mut AHashMap<*const Value, u64>,
) -> Own {
    let mut own = Own {
        units: 0,
        ..Own::ONE
    };
    for (key, value) in map {
        own.text_checks = own.text_checks.saturating_add(text_checks(key, value));
        let extra = match (key.as_str(), value) {
            ("unevaluatedItems", _) => {
                (own.serialises_items, own.unevaluated) = (true, true);
                0
            }
            ("unevaluatedProperties", _) => {
                own.unevaluated = true;
                0
            }
            ("enum", Value::Array(options)) => {
                own.enum_options = options.len() as u64;
                0
            }
            ("required", Value::Array(names)) => name_list_units(names),
            ("dependentRequired" | "dependencies", Value::Object(entries)) => entries
                .values()
                .filter_map(Value::as_array)
                .map(|names| name_list_units(names))
                .fold(0, u64::saturating_add),
            // The error of `not` holds a copy of the whole subschema.
            ("not", subschema) => *copies
                .entry(std::ptr::from_ref(subschema))
                .or_insert_with(|| units_of_bytes(value_copy_bytes(subschema))),
            (
                "pattern" | "format" | "contentEncoding" | "contentMediaType",
                Value::String(text),
            ) => units_of_bytes(text.len() as u64),
            _ => 0,
        };
        let counted = u64::from(VALIDATING_KEYWORDS.contains(&key.as_str()));
        own.units = own.units.saturating_add(counted).saturating_add(extra);
    }
    own
}

/// The issue weights of `schema` (see `IssueWeights`). Weighed as the expansion guard weighs
/// references, with no budget: once per schema, or, when the schema loops back on itself, per
/// level of the arguments (one more than `max_argument_depth`: the values inside the deepest
/// container).
fn issue_weights(
    schema: &Value,
    anchors: &AHashMap<AnchorKey, &Value>,
    limits: &Limits,
) -> (IssueWeights, u64, u64) {
    let mut copies: AHashMap<*const Value, u64> = AHashMap::new();
    let mut own = |map: &serde_json::Map<String, Value>| own_issue_units(map, &mut copies);
    let unbounded = Cost {
        keywords: u64::MAX,
        text: u64::MAX,
    };
    let root = match weigh_expansion(schema, anchors, unbounded, None, &mut own, true) {
        Expansion::Fits { root } => root,
        Expansion::Loops | Expansion::Over { .. } => {
            let depth = Some(limits.max_argument_depth + 1);
            match weigh_expansion(schema, anchors, unbounded, depth, &mut own, true) {
                Expansion::Fits { root } => root,
                // Not reached: weighed per level, with no budget, a schema neither loops nor
                // passes it.
                Expansion::Loops | Expansion::Over { .. } => {
                    let unknown = vec![u64::MAX; limits.max_argument_depth + 2];
                    Root {
                        levels: unknown.clone(),
                        contexts: unknown.clone(),
                        paths: Vec::new(),
                        enclosing: unknown.clone(),
                        enums: unknown,
                        serialised: u128::MAX,
                        text_checks: u64::MAX,
                        unevaluated_nesting: u64::MAX,
                    }
                }
            }
        }
    };
    let Root {
        levels,
        contexts,
        paths,
        enclosing,
        enums,
        serialised,
        text_checks,
        unevaluated_nesting,
    } = root;
    // Each level's checks (the issue units bound the keywords, and any value may meet the
    // largest `enum`) made once more for every branch that encloses them.
    let rechecks: Box<[u64]> = levels
        .iter()
        .zip(&enclosing)
        .enumerate()
        .map(|(level, (&units, &branches))| {
            let options = enums.get(level).copied().unwrap_or(0);
            units.saturating_add(options).saturating_mul(branches)
        })
        .collect();
    let most_rechecks = rechecks.iter().copied().max().unwrap_or(0);
    // Each issue also carries its evaluation path: past one issue unit of it, a unit more for
    // every `ISSUE_UNIT_BYTES` (an issue unit already holds a short path). An `anyOf` or
    // `oneOf` error holds errors from anywhere below it: they are weighed by the longest path.
    let path_units = |path: u64| 1 + path / ISSUE_UNIT_BYTES;
    let per_level: Box<[u64]> = levels
        .iter()
        .enumerate()
        .map(|(level, &units)| {
            units.saturating_mul(path_units(paths.get(level).copied().unwrap_or(0)))
        })
        .collect();
    let longest = path_units(paths.iter().copied().max().unwrap_or(0));
    let first_error = contexts
        .iter()
        .map(|&kept| kept.saturating_mul(longest))
        .collect();
    let most = per_level.iter().copied().max().unwrap_or(0);
    let weights = IssueWeights {
        per_level,
        first_error,
        most,
        serialised_levels: serialised,
        rechecks,
        most_rechecks,
    };
    (weights, text_checks, unevaluated_nesting)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn check(schema: &Value) -> Result<SchemaStats, GuardViolation> {
        check_schema(schema, &Limits::default())
    }

    fn issues(schema: &Value) -> IssueWeights {
        check(schema).unwrap().issues
    }

    #[test]
    fn issue_weights_count_what_applies_at_each_level() {
        // Level 0: `type` and `properties`; level 1: `type` and `items`; level 2: `required`,
        // one issue per name and one for the names' text.
        let schema = json!({
            "type": "object",
            "properties": {"a": {"type": "array", "items": {"required": ["x", "y"]}}},
            "description": "annotations raise nothing",
        });
        let weights = issues(&schema);
        assert_eq!(&*weights.per_level, &[2, 2, 4]);
        assert!(weights.first_error.iter().all(|&kept| kept == 0));
        // Members of different names never add up; what applies to one member does.
        let members = json!({
            "properties": {"a": {"minimum": 1, "maximum": 2}, "b": {"type": "string"}},
            "additionalProperties": {"type": "integer"},
        });
        assert_eq!(&*issues(&members).per_level, &[2, 3]);
        let names: Vec<String> = (0..5000).map(|at| format!("r{at}")).collect();
        let many = json!({"items": {"required": names}});
        assert!(issues(&many).per_level[1] > 5000);
    }

    #[test]
    fn issue_weights_count_a_reference_each_time_it_applies() {
        let names: Vec<String> = (0..500).map(|at| format!("r{at}")).collect();
        let schema = branching_chain(6, 2, json!({"required": names}));
        let weights = issues(&schema);
        assert!(weights.per_level[0] >= 64 * 500, "{weights:?}");
        // Every branch keeps its errors in its `anyOf` error, all at the same value.
        assert!(weights.first_error[0] >= 32 * 500, "{weights:?}");
        assert!(weights.first_error[0] < u64::MAX);
    }

    #[test]
    fn a_branch_that_reaches_below_its_value_keeps_an_unbounded_context() {
        let below = json!({"properties": {"a": {"anyOf": [
            {"type": "array", "items": {"required": ["x"]}},
            {"type": "null"},
        ]}}});
        assert_eq!(&*issues(&below).first_error, &[0, u64::MAX]);
        let here = json!({"properties": {"a": {"anyOf": [
            {"type": "string", "maxLength": 3},
            {"type": "null"},
            false,
        ]}}});
        assert_eq!(&*issues(&here).first_error, &[0, 4]);
    }

    #[test]
    fn issue_weights_count_the_text_errors_copy() {
        let long = "x".repeat(100_000);
        let copied = issues(&json!({"not": {"description": long}}));
        assert!(copied.per_level[0] > 100_000 / ISSUE_UNIT_BYTES);
        let pattern = issues(&json!({"pattern": "^a"}));
        assert_eq!(&*pattern.per_level, &[2]);
    }

    #[test]
    fn recursive_schemas_weigh_each_level_not_the_sum_of_levels() {
        let tree = json!({
            "type": "object",
            "properties": {"children": {"type": "array", "items": {"$ref": "#"}}},
            "required": ["name"],
        });
        let weights = issues(&tree);
        let limits = Limits::default();
        assert!(weights.per_level.len() <= limits.max_argument_depth + 2);
        assert!(weights.per_level.len() > 10);
        // At most the five issues of one level (`type`, `properties`, `required` and its name),
        // each heavier by the evaluation path down to it: `properties/children/items/$ref/`,
        // 32 bytes every two levels.
        for (level, &units) in weights.per_level.iter().enumerate() {
            let path = 16 * level as u64;
            assert!(units <= 5 * (1 + path / ISSUE_UNIT_BYTES), "{weights:?}");
        }
    }

    #[test]
    fn issue_weights_count_the_evaluation_path_of_each_issue() {
        // Every error carries its evaluation path: a long property name on a recursive path
        // makes each level's errors heavier, the deeper the more.
        let short = json!({"properties": {"a": {"$ref": "#"}}, "required": ["x"]});
        let long_name = "a".repeat(10_000);
        let long = json!({"properties": {long_name.clone(): {"$ref": "#"}}, "required": ["x"]});
        let (short, long) = (issues(&short), issues(&long));
        assert_eq!(short.per_level.len(), long.per_level.len());
        // Level 0 is the root: no path yet.
        assert_eq!(short.per_level[0], long.per_level[0]);
        // Level 1 is below an 18-byte path (`properties/a/$ref/`): what one level's keywords
        // raise, `properties`, `required` and its name, weighed as without a path.
        let own = short.per_level[1];
        for level in 1..long.per_level.len() {
            let path = level as u64 * (10_000 + "properties//$ref/".len() as u64);
            assert_eq!(
                long.per_level[level],
                own * (1 + path / ISSUE_UNIT_BYTES),
                "level {level}"
            );
        }
        // A name is weighed as the path spells it: `/` escaped as `~1`.
        let slashes = json!({"properties": {"/".repeat(10_000): {"$ref": "#"}}, "required": ["x"]});
        assert!(issues(&slashes).per_level[1] > long.per_level[1]);
        // A branch keeps errors from below it: weighed by the longest path.
        let branch = json!({
            "$defs": {"r": {"properties": {long_name: {"$ref": "#/$defs/r"}}, "required": ["x"]}},
            "properties": {"v": {"anyOf": [{"const": 1}, {"maxLength": 1}]}},
            "$ref": "#/$defs/r",
        });
        let weights = issues(&branch);
        assert!(
            weights.first_error[1] > 2 * 60 * 10_000 / ISSUE_UNIT_BYTES,
            "{weights:?}"
        );
    }

    #[test]
    fn a_union_of_array_and_object_schemas_weighs_each_level_once() {
        // A JSON value as pydantic writes it: a value below is an element or a member, never
        // both, so the two branches that refer back do not add up level after level.
        let json_value = json!({
            "$defs": {"J": {"anyOf": [
                {"type": "array", "items": {"$ref": "#/$defs/J"}},
                {"type": "object", "additionalProperties": {"$ref": "#/$defs/J"}},
                {"type": ["string", "number", "boolean", "null"]},
            ]}},
            "$ref": "#/$defs/J",
        });
        let weights = issues(&json_value);
        assert!(weights.per_level.len() > 60);
        // `anyOf`, three `type`s, `items` and `additionalProperties` at each level, each
        // heavier by its evaluation path (at most `anyOf/1/additionalProperties/$ref/`, 38
        // bytes a level).
        for (level, &units) in weights.per_level.iter().enumerate() {
            let path = 5 + 38 * level as u64;
            assert!(units <= 6 * (1 + path / ISSUE_UNIT_BYTES), "{weights:?}");
        }
        // What applies through both, as `contains` beside `properties`, still adds up there.
        let both = json!({
            "items": {"required": ["a"]},
            "additionalProperties": {"required": ["a", "b", "c"]},
            "contains": {"required": ["d", "e"]},
        });
        let both = issues(&both);
        // Below: the larger of an element's and a member's. Each `required` is one issue, one
        // per name, and one for the names' text: 3 and 4 for an element, 5 for a member (all
        // three added up would be 12).
        assert_eq!(both.per_level[1], 3 + 4);
    }

    #[test]
    fn rechecks_count_the_branches_enclosing_each_level() {
        // Without `anyOf` or `oneOf` nothing is checked again.
        let plain = issues(&json!({"properties": {"a": {"$ref": "#"}}, "required": ["x"]}));
        assert_eq!(plain.most_rechecks, 0);
        // An optional member that recurses: one more branch encloses each level, and any
        // value may meet the 40-option `enum`.
        let options: Vec<Value> = (0..40).map(Value::from).collect();
        let optional = json!({
            "properties": {
                "next": {"anyOf": [{"$ref": "#"}, {"type": "null"}]},
                "kind": {"enum": options},
            },
        });
        let weights = issues(&optional);
        assert_eq!(weights.rechecks[0], 0);
        for level in 1..40 {
            // What one value there may draw (`per_level` weighs it by its path too, so no
            // less), and the `enum`, once for each enclosing branch.
            let (again, units) = (weights.rechecks[level], weights.per_level[level]);
            assert!(
                again >= (40 + 1) * level as u64,
                "level {level}: {weights:?}"
            );
            assert!(
                again <= (40 + units) * level as u64,
                "level {level}: {weights:?}"
            );
        }
        // Five in-place branches at each level: five more each level down.
        let mut node = json!({"$ref": "#/$defs/d"});
        for _ in 0..5 {
            node = json!({"anyOf": [node]});
        }
        let layered = json!({"$defs": {"d": {"additionalProperties": node}}, "$ref": "#/$defs/d"});
        let weights = issues(&layered);
        assert_eq!(weights.rechecks[0], 0);
        assert!(weights.rechecks[10] >= 5 * 10, "{weights:?}");
    }

    #[test]
    fn unevaluated_keywords_nest_in_place_at_most_eight_deep() {
        let nested = |depth: usize, keyword: &str, applicator: &str| {
            let mut node = json!({"type": "object"});
            for _ in 0..depth {
                node = json!({applicator: [node], keyword: false});
            }
            node
        };
        for (keyword, applicator) in [
            ("unevaluatedProperties", "allOf"),
            ("unevaluatedItems", "anyOf"),
        ] {
            assert!(check(&nested(8, keyword, applicator)).is_ok());
            let refused = check(&nested(9, keyword, applicator)).unwrap_err();
            assert_eq!(refused.code(), "schema_expansion_too_large");
            assert!(
                refused.to_string().contains("applies 9 schemas"),
                "{refused}"
            );
        }
        // One per level of the arguments is not nested at one value.
        let mut tree = json!({"type": "object"});
        for _ in 0..30 {
            tree = json!({"properties": {"a": tree}, "unevaluatedProperties": false});
        }
        assert!(check(&tree).is_ok());
    }

    #[test]
    fn rechecks_and_serialised_levels_stay_at_their_own_levels() {
        // The large `enum` is on a member; the elements of the list beside it meet none.
        let options: Vec<Value> = (0..5_000).map(Value::from).collect();
        let schema = json!({
            "properties": {
                "kind": {"anyOf": [{"enum": options}, {"type": "null"}]},
                "values": {"anyOf": [{"items": {"type": "integer"}}, {"type": "null"}]},
            },
        });
        let weights = issues(&schema);
        assert!(weights.rechecks[1] >= 5_000, "{weights:?}");
        assert!(weights.rechecks[2] < 100, "{weights:?}");
        // `unevaluatedItems` on one member's arrays: only that level serialises.
        let schema = json!({
            "properties": {
                "pair": {"prefixItems": [{}, {}], "unevaluatedItems": false},
                "rows": {"items": {"items": {}}},
            },
        });
        let weights = issues(&schema);
        assert!(weights.serialises_at(1));
        assert!(!weights.serialises_at(0) && !weights.serialises_at(2));
    }

    /// `levels` of `allOf` with `width` references each to the next level, ending in `leaf`,
    /// applied to the member `s`.
    fn all_of_chain(levels: usize, width: usize, leaf: Value) -> Value {
        let defs = chain_definitions("d", "allOf", levels, width, leaf);
        json!({"$defs": defs, "properties": {"s": {"$ref": "#/$defs/d0"}}})
    }

    #[test]
    fn a_string_read_too_many_times_is_refused() {
        // 2^9 = 512 patterns at one string fit; 2^10 do not, though the expansion guard
        // allows their keywords.
        let pattern = json!({"pattern": "^[a-z]+$"});
        assert!(check(&all_of_chain(9, 2, pattern.clone())).is_ok());
        let refused = check(&all_of_chain(10, 2, pattern)).unwrap_err();
        assert_eq!(refused.code(), "schema_expansion_too_large");
        assert!(
            refused.to_string().contains("more than 512 pattern"),
            "{refused}"
        );
        // Every kind of check counts, and so does each pattern of `patternProperties` (every
        // name is matched), or a check on the names of `propertyNames`.
        let lengths = json!({"minLength": 1, "maxLength": 9, "pattern": "^a", "format": "email"});
        assert!(check(&all_of_chain(8, 2, lengths.clone())).is_err());
        assert!(check(&all_of_chain(7, 2, lengths)).is_ok());
        let patterns: serde_json::Map<String, Value> =
            (0..9).map(|at| (format!("^{at}"), json!(true))).collect();
        let pattern_properties = json!({"patternProperties": patterns});
        assert!(check(&all_of_chain(6, 2, pattern_properties)).is_err());
        let name_checks = json!({"propertyNames": {"pattern": "^a", "maxLength": 8}});
        assert!(check(&all_of_chain(9, 2, name_checks)).is_err());
        // One check per value of a recursive schema, however deep, is one at each value.
        let tree = json!({"properties": {"a": {"$ref": "#"}, "b": {"pattern": "^x"}}});
        assert!(check(&tree).is_ok());
        // A member reached from many schemas applied in place meets all their checks, with
        // references or without.
        let member = json!({"properties": {"s": {"pattern": "^a"}}});
        assert!(check(&all_of_chain(10, 2, member.clone())).is_err());
        assert!(check(&json!({"allOf": vec![member.clone(); 600]})).is_err());
        assert!(check(&json!({"allOf": vec![member; 500]})).is_ok());
        // Checks at different values do not add up: 512 at each of two members fit.
        let mut defs = chain_definitions("s", "allOf", 9, 2, json!({"pattern": "^a"}));
        defs.extend(chain_definitions(
            "t",
            "allOf",
            8,
            2,
            json!({"pattern": "^b"}),
        ));
        let members = json!({"s": {"$ref": "#/$defs/s0"}, "t": {"$ref": "#/$defs/t0"}});
        assert!(check(&json!({"$defs": defs, "properties": members})).is_ok());
        // In one place they do.
        let both =
            json!({"$defs": defs, "allOf": [{"$ref": "#/$defs/s0"}, {"$ref": "#/$defs/t0"}]});
        assert!(check(&both).is_err());
    }

    #[test]
    fn the_expansion_guard_is_unchanged_by_the_issue_weights() {
        // Still refused, and still accepted, as before the weighing kept levels.
        let doubling = branching_chain(30, 2, json!({"type": "string"}));
        assert_eq!(
            check(&doubling).map(|_| ()).unwrap_err().code(),
            "schema_expansion_too_large"
        );
        assert!(check(&json!({"anyOf": [{"$ref": "#"}, {"type": "string"}]})).is_ok());
    }

    fn words(schema: &Value) -> (Vec<&str>, Vec<&str>) {
        let (_, words) = check_schema_with_words(schema, &Limits::default()).unwrap();
        (words.property_names, words.choices)
    }

    #[test]
    fn choices_are_the_short_strings_of_enum_and_const_in_schemas() {
        let long = "x".repeat(MAX_CHOICE_STRING_BYTES + 1);
        let schema = json!({
            "properties": {
                "enum": {"enum": ["a", 1, null, "b", long]},
                "const": {"const": "c"},
                "list": {"items": {"const": 5}, "default": {"enum": ["not a schema"]}},
            },
            "examples": [{"const": "not a schema either"}],
            "$defs": {"d": {"anyOf": [{"enum": ["d"]}]}},
        });
        let (names, choices) = words(&schema);
        assert_eq!(names, ["const", "enum", "list"]);
        let mut choices = choices;
        choices.sort_unstable();
        assert_eq!(choices, ["a", "b", "c", "d"]);
    }

    #[test]
    fn choices_stop_at_their_cap() {
        let many: Vec<String> = (0..MAX_CHOICE_STRINGS + 50)
            .map(|n| n.to_string())
            .collect();
        let schema = json!({"enum": many, "properties": {"p": {"const": "late"}}});
        let (_, choices) = words(&schema);
        assert_eq!(choices.len(), MAX_CHOICE_STRINGS);
        // Whatever the walk met first is kept, and nothing the schema does not hold.
        assert!(
            choices
                .iter()
                .all(|choice| *choice == "late" || many.iter().any(|text| text == choice))
        );
    }

    /// `levels` schemas, each an `anyOf` of `width` references to the next, then `leaf`.
    fn branching_chain(levels: usize, width: usize, leaf: Value) -> Value {
        let defs = chain_definitions("d", "anyOf", levels, width, leaf);
        json!({"$defs": defs, "$ref": "#/$defs/d0"})
    }

    /// Definitions `<name>0` to `<name><levels>`: each a `keyword` of `width` references to the
    /// next, then `leaf`.
    fn chain_definitions(
        name: &str,
        keyword: &str,
        levels: usize,
        width: usize,
        leaf: Value,
    ) -> serde_json::Map<String, Value> {
        let mut defs = serde_json::Map::new();
        for level in 0..levels {
            let next = json!({"$ref": format!("#/$defs/{name}{}", level + 1)});
            defs.insert(
                format!("{name}{level}"),
                json!({keyword: vec![next; width]}),
            );
        }
        defs.insert(format!("{name}{levels}"), leaf);
        defs
    }

    fn expansion_refused(schema: &Value) -> bool {
        matches!(check(schema), Err(GuardViolation::Expansion { .. }))
    }

    #[test]
    fn references_that_multiply_validation_are_refused() {
        // 2^30 schemas applied to one value: hours of validation for one call.
        assert!(expansion_refused(&branching_chain(
            30,
            2,
            json!({"type": "string"})
        )));
        assert!(expansion_refused(&branching_chain(
            14,
            3,
            json!({"type": "string"})
        )));
        assert!(!expansion_refused(&branching_chain(
            8,
            2,
            json!({"type": "string"})
        )));
        assert!(!expansion_refused(&branching_chain(
            60,
            1,
            json!({"type": "string"})
        )));
        // A member checked twice per level, each time by the root again: 2^64 along a path.
        let twice = json!({
            "type": "object",
            "properties": {"a": {"$ref": "#"}},
            "patternProperties": {"^a": {"$ref": "#"}},
        });
        assert!(expansion_refused(&twice));
        let elements_twice = json!({"items": {"$ref": "#"}, "contains": {"$ref": "#"}});
        assert!(expansion_refused(&elements_twice));
        let message = check(&twice).unwrap_err().to_string();
        assert!(message.contains("max_schema_keywords=10000"), "{message}");
        assert!(message.contains("max_argument_depth=64"), "{message}");
    }

    #[test]
    fn dynamic_references_are_weighed_by_every_schema_they_may_resolve_to() {
        // Statically `#n` in `b` is its plain leaf; at run time, with the root in the dynamic
        // scope, it is the root again, reached twice per level.
        let b = json!({
            "$id": "https://example.com/b",
            "$defs": {"leaf": {"$dynamicAnchor": "n", "type": "object"}},
            "properties": {"x": {"$dynamicRef": "#n"}},
            "patternProperties": {"^x": {"$dynamicRef": "#n"}},
        });
        let root = json!({
            "$id": "https://example.com/root",
            "$dynamicAnchor": "n",
            "properties": {"a": {"$ref": "#/$defs/b"}},
            "$defs": {"b": b},
        });
        assert!(expansion_refused(&root));
        // With one place to resolve to, the same shape without the second application passes.
        let once = json!({
            "$dynamicAnchor": "n",
            "properties": {"x": {"$dynamicRef": "#n"}},
        });
        assert!(check(&once).is_ok());
    }

    #[test]
    fn schemas_that_recurse_once_per_level_pass() {
        for schema in [
            // Any JSON value.
            json!({"anyOf": [
                {"type": ["null", "boolean", "number", "string"]},
                {"type": "array", "items": {"$ref": "#"}},
                {"type": "object", "additionalProperties": {"$ref": "#"}},
            ]}),
            // An expression tree: several branches name different members, each the root again.
            json!({"$defs": {"expr": {"anyOf": [
                {"properties": {"and": {"type": "array", "items": {"$ref": "#/$defs/expr"}}}},
                {"properties": {"or": {"type": "array", "items": {"$ref": "#/$defs/expr"}}}},
                {"properties": {"not": {"$ref": "#/$defs/expr"}}},
                {"properties": {"field": {"type": "string"}, "equals": {}}},
            ]}}, "$ref": "#/$defs/expr"}),
            // A tree of nodes, and a loop of schemas applied in place.
            json!({"properties": {"children": {"items": {"$ref": "#"}}, "name": {"type": "string"}}}),
            json!({"anyOf": [{"$ref": "#"}, {"type": "string"}]}),
            // One definition used by many properties.
            json!({"$defs": {"p": {"type": "object", "properties": {"x": {}, "y": {}}}},
                   "properties": (0..100).map(|n| (format!("p{n}"), json!({"$ref": "#/$defs/p"})))
                        .collect::<serde_json::Map<String, Value>>()}),
        ] {
            assert!(check(&schema).is_ok(), "{schema}: {:?}", check(&schema));
        }
    }

    #[test]
    fn deep_brackets_are_refused_without_recursion() {
        let deep = "[".repeat(100_000);
        assert_eq!(
            scan_json(deep.as_bytes(), usize::MAX, 64),
            Err(GuardViolation::ArgumentsTooDeep { limit: 64 })
        );
    }

    #[test]
    fn brackets_inside_strings_do_not_count() {
        let text = format!("{{\"a\": \"{}\\\"[[[\"}}", "[".repeat(500));
        assert_eq!(scan_json(text.as_bytes(), usize::MAX, 2), Ok(()));
        assert!(scan_json(b"[[[1]]]", 100, 2).is_err());
        assert!(scan_json(b"[[1]]", 100, 2).is_ok());
    }

    #[test]
    fn size_is_checked_first() {
        assert_eq!(
            scan_json(b"{\"a\":1}", 3, 64),
            Err(GuardViolation::ArgumentsTooLarge { bytes: 7, limit: 3 })
        );
    }

    #[test]
    fn remote_and_relative_refs_are_refused() {
        for reference in [
            "http://127.0.0.1:1/x",
            "https://example.com/s",
            "file:///etc/passwd",
            "urn:x",
            "other.json",
            "other.json#/a",
        ] {
            let schema = json!({"properties": {"a": {"$ref": reference}}});
            let err = check(&schema).unwrap_err();
            assert_eq!(err.code(), "schema_ref_not_allowed", "{reference}");
            assert!(err.to_string().contains("/properties/a/$ref"));
        }
        let dynamic = json!({"$dynamicRef": "https://example.com/s"});
        assert_eq!(
            check(&dynamic).unwrap_err().code(),
            "schema_ref_not_allowed"
        );
    }

    #[test]
    fn local_refs_and_recursion_through_properties_pass() {
        let tree = json!({
            "type": "object",
            "properties": {"value": {"type": "number"}, "children": {"type": "array", "items": {"$ref": "#"}}},
            "$defs": {"leaf": {"$ref": "#/$defs/node"}, "node": {"type": "string"}}
        });
        let stats = check(&tree).unwrap();
        assert_eq!(stats.refs, 2);
    }

    #[test]
    fn alias_cycles_are_refused() {
        let cycle = json!({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"});
        assert_eq!(check(&cycle).unwrap_err().code(), "schema_ref_cycle");
        let self_alias = json!({"$ref": "#"});
        assert_eq!(check(&self_alias).unwrap_err().code(), "schema_ref_cycle");
        let anchored = json!({"$defs": {"a": {"$anchor": "x", "$ref": "#x"}}});
        assert_eq!(check(&anchored).unwrap_err().code(), "schema_ref_cycle");
        let with_id = json!({"$id": "https://example.com/root.json", "$ref": "#"});
        assert_eq!(check(&with_id).unwrap_err().code(), "schema_ref_cycle");
        let annotated = json!({"$defs": {"a": {"$ref": "#/$defs/b", "readOnly": true}, "b": {"$ref": "#/$defs/a", "x-note": 1}}});
        assert_eq!(check(&annotated).unwrap_err().code(), "schema_ref_cycle");
        let constrained = json!({"$defs": {"a": {"$ref": "#/$defs/b", "type": "string"}, "b": {"$ref": "#/$defs/a"}}});
        assert_eq!(check(&constrained).map(|stats| stats.refs), Ok(2));
        assert_eq!(check(&anchored).unwrap_err().code(), "schema_ref_cycle");
    }

    #[test]
    fn references_resolve_inside_their_id_resource() {
        // `#/$defs/y` inside the `$id` resource means that resource's `y`, not the root's.
        let scoped = json!({
            "$defs": {
                "r": {"$id": "http://e.example/r", "$defs": {"x": {"$ref": "#/$defs/y"}, "y": {"type": "string"}}},
                "y": {"$ref": "#/$defs/r/$defs/x"}
            },
            "$ref": "#/$defs/y"
        });
        assert!(check(&scoped).is_ok());
        let inner_cycle = json!({
            "$defs": {"r": {"$id": "http://e.example/r", "$defs": {"x": {"$ref": "#/$defs/y"}, "y": {"$ref": "#/$defs/x"}}}}
        });
        assert_eq!(check(&inner_cycle).unwrap_err().code(), "schema_ref_cycle");
    }

    #[test]
    fn data_a_reference_points_at_is_guarded_as_a_schema() {
        let via_enum = json!({"enum": [{"$ref": "http://127.0.0.1:1/x"}], "$ref": "#/enum/0"});
        assert_eq!(
            check(&via_enum).unwrap_err().code(),
            "schema_ref_not_allowed"
        );
        let via_unknown = json!({"x-extra": {"$ref": "file:///etc/passwd"}, "$ref": "#/x-extra"});
        assert_eq!(
            check(&via_unknown).unwrap_err().code(),
            "schema_ref_not_allowed"
        );
        let cycle_in_data =
            json!({"x-a": {"$ref": "#/x-b"}, "x-b": {"$ref": "#/x-a"}, "$ref": "#/x-a"});
        assert_eq!(
            check(&cycle_in_data).unwrap_err().code(),
            "schema_ref_cycle"
        );
    }

    #[test]
    fn a_property_named_ref_is_not_a_reference() {
        let schema = json!({"properties": {"$ref": {"type": "string"}}});
        assert_eq!(check(&schema).unwrap().refs, 0);
        let in_enum = json!({"enum": [{"$ref": "https://example.com"}]});
        assert_eq!(check(&in_enum).unwrap().refs, 0);
    }

    #[test]
    fn integer_divisors_a_float_does_not_hold_are_refused() {
        for divisor in [
            json!(9_007_199_254_740_993_u64),
            json!(-9_007_199_254_740_993_i64),
        ] {
            let schema = json!({"properties": {"n": {"multipleOf": divisor}}});
            let violation = check(&schema).unwrap_err();
            assert_eq!(violation.code(), "schema_invalid");
            let text = violation.to_string();
            assert!(text.contains("/properties/n/multipleOf"), "{text}");
            assert!(text.contains("9007199254740992"), "{text}");
        }
        // Held exactly: 2^53, 2^60, small integers, floats.
        for divisor in [
            json!(1_u64 << 53),
            json!(1_u64 << 60),
            json!(3),
            json!(1.5),
            json!(1e300),
        ] {
            assert!(check(&json!({"multipleOf": divisor})).is_ok());
        }
        // Data that only looks like the keyword is not a schema.
        assert!(check(&json!({"const": {"multipleOf": 9_007_199_254_740_993_u64}})).is_ok());
    }

    #[test]
    fn forbidden_keys_are_refused_anywhere() {
        for schema in [
            json!({"__proto__": {}}),
            json!({"properties": {"constructor": {"type": "string"}}}),
            json!({"enum": [{"prototype": 1}]}),
        ] {
            assert_eq!(check(&schema).unwrap_err().code(), "schema_forbidden_key");
        }
    }

    #[test]
    fn depth_keywords_and_refs_have_limits() {
        let mut deep = json!({"type": "string"});
        for _ in 0..70 {
            deep = json!({"items": deep});
        }
        assert_eq!(check(&deep).unwrap_err().code(), "schema_too_deep");
        let many: serde_json::Map<String, Value> =
            (0..10_001).map(|i| (format!("p{i}"), json!({}))).collect();
        assert_eq!(
            check(&json!({"properties": many})).unwrap_err().code(),
            "schema_too_many_keywords"
        );
        let refs: serde_json::Map<String, Value> = (0..129)
            .map(|i| (format!("p{i}"), json!({"$ref": "#/$defs/x"})))
            .collect();
        let schema = json!({"properties": refs, "$defs": {"x": {"type": "string"}}});
        assert_eq!(check(&schema).unwrap_err().code(), "schema_too_many_refs");
    }

    #[test]
    fn limits_refuse_zero_and_values_above_the_ceiling() {
        let mut limits = Limits::default();
        assert!(limits.set("max_refs", 0).is_err());
        assert!(limits.set("max_refs", 1025).is_err());
        assert!(limits.set("max_refs", 1024).is_ok());
        assert_eq!(limits.max_refs, 1024);
        assert!(limits.set("max_nothing", 1).is_err());
    }

    proptest! {
        #[test]
        fn scan_depth_matches_a_model(text in "[\\[\\]{}\"\\\\a]{0,60}") {
            // Model: depth of brackets outside strings, computed the slow obvious way.
            let mut depth = 0usize;
            let mut deepest = 0usize;
            let mut in_string = false;
            let mut chars = text.chars();
            while let Some(c) = chars.next() {
                if in_string {
                    if c == '\\' { chars.next(); } else if c == '"' { in_string = false; }
                    continue;
                }
                match c {
                    '"' => in_string = true,
                    '[' | '{' => { depth += 1; deepest = deepest.max(depth); }
                    ']' | '}' => depth = depth.saturating_sub(1),
                    _ => {}
                }
            }
            for limit in 1..8 {
                prop_assert_eq!(scan_json(text.as_bytes(), usize::MAX, limit).is_ok(), deepest <= limit);
            }
        }
    }
}
