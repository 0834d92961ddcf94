//! Python bindings for schema guards, the compiled-schema cache and raw argument parsing.
//!
//! Schemas cross as text or as plain Python containers, converted here once, bounded by the depth
//! limits, into `serde_json::Value`. Arguments become a `Document` (parsed from text, or read from
//! Python objects with their strings borrowed) that the validator reads without calling Python;
//! parsed argument text becomes Python objects in the same crossing that parsed and validated it.

#![allow(clippy::needless_pass_by_value)]

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use ahash::AHashMap;

use pyo3::exceptions::{PyException, PyOverflowError, PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple, PyType};
use serde_json::{Map, Number, Value};

use pyo3::sync::PyOnceLock;

use crate::bindings::{ArgumentsError, SchemaGuardError, message_text, type_name};
use crate::bindings_document::{
    KeyTable, SchemaStrings, StrMap, Unreadable, build, key_table, schema_strings,
    with_python_document,
};
use crate::document::{Document, ParseFailure, Repeats, Source, Tape, parse};
use crate::guards::{ALL_LIMITS, GuardViolation, Limits, scan_json};
use crate::schema::{
    CompiledSchema, Findings, Issue, KEYWORDS, Listing, MAX_ISSUE_MESSAGE_BYTES, SchemaCache,
    collect_issues, cut, known_keyword, report_message, weigh_document,
};
use jsonschema::json::Node as _;

/// Nesting allowed while reading a schema: one past the hard ceiling, so the guard walker sees
/// (and locates) every schema that breaks the configured depth limit.
const CONVERSION_DEPTH: usize = crate::guards::MAX_SCHEMA_DEPTH.ceiling + 1;
/// Raw schema text may be this many times the byte limit before it is refused unread.
const RAW_SCHEMA_SLACK: usize = 4;

/// Why a Python value could not become JSON.
enum Conversion {
    TooDeep {
        path: String,
    },
    NotJson {
        path: String,
        what: String,
    },
    /// A mapping other than a dict lists its items by running Python code, which may change a
    /// dict the walk is iterating (a change the `PyO3` dict iterator panics on): the walk starts
    /// again over copies of every dict's items (`Walk::Copies`).
    RunsPython,
    /// What a mapping raised that is not an `Exception` (`KeyboardInterrupt`, `SystemExit`):
    /// propagated, never read as a bad schema.
    Interrupted(PyErr),
    /// The schema written out is already larger than `SchemaBudget` allows (dicts shared between
    /// places, as YAML aliases make them, are written out once per place).
    TooLarge {
        at_least: usize,
    },
    /// A value the guards would refuse that the conversion is the last to see exactly.
    Refused(GuardViolation),
}

/// What `to_value` may still write: a lower bound on the canonical bytes of the schema built so
/// far (the compact JSON the byte guard measures: every string with its quotes, every member
/// with its key, quotes, colon and comma, every value at least one byte), so a schema of shared
/// dicts cannot expand far past `max_schema_bytes` before the guards run. A schema the byte
/// guard passes never runs out: the budget is `SCHEMA_BUDGET_SLACK` times the limit, and what a
/// schema spends is at most its canonical size. Up to that, the byte guard refuses a larger
/// schema with its exact size.
struct SchemaBudget {
    left: usize,
    limit: usize,
}

/// A schema may be this many times `max_schema_bytes` before `to_value` stops writing it out.
const SCHEMA_BUDGET_SLACK: usize = 2;

impl SchemaBudget {
    fn new(max_schema_bytes: usize) -> Self {
        let limit = max_schema_bytes.saturating_mul(SCHEMA_BUDGET_SLACK);
        Self { left: limit, limit }
    }

    #[inline]
    fn spend(&mut self, bytes: usize) -> Result<(), Conversion> {
        match self.left.checked_sub(bytes) {
            Some(left) => {
                self.left = left;
                Ok(())
            }
            None => Err(Conversion::TooLarge {
                at_least: self.limit.saturating_add(1),
            }),
        }
    }

    /// Gives back what a value replaced by a repeated key spent (`spent_on` of it, as charged).
    #[cold]
    fn refund(&mut self, bytes: usize) {
        self.left = self.left.saturating_add(bytes).min(self.limit);
    }
}

/// What `to_value` spent on `value` (a member's key, quotes, colon and comma not included).
fn spent_on(value: &Value) -> usize {
    match value {
        Value::Null | Value::Bool(_) => 4,
        Value::Number(_) => 1,
        Value::String(text) => text.len() + 2,
        Value::Array(items) => 1 + items.iter().map(|item| 1 + spent_on(item)).sum::<usize>(),
        Value::Object(map) => {
            1 + map
                .iter()
                .map(|(key, item)| key.len() + 4 + spent_on(item))
                .sum::<usize>()
        }
    }
}

/// An `int` (or a subclass's value) beyond 64 bits as the nearest float, infinity when it is too
/// large for one. Read through `int.__float__` itself, called on the `int` type: a subclass's own
/// `__float__` never runs. The call allocates, and an allocation may start a garbage collection
/// whose finalizers run Python code: never call this while a dict is iterated in place.
pub(crate) fn wide_int_to_f64(object: &Bound<'_, PyAny>) -> PyResult<f64> {
    let py = object.py();
    match py
        .get_type::<PyInt>()
        .call_method1(intern!(py, "__float__"), (object,))
    {
        Ok(float) => float.extract::<f64>(),
        Err(err) if err.is_instance_of::<PyOverflowError>(py) => Ok(f64::INFINITY),
        Err(err) => Err(err),
    }
}

/// How `to_value` walks dicts: in place (no Python code runs during the walk), or over copies
/// of their items when the schema holds another mapping, whose code could change them.
#[derive(Clone, Copy)]
enum Walk {
    InPlace,
    Copies,
}

fn guard_error(violation: &GuardViolation) -> PyErr {
    SchemaGuardError::new_err((violation.to_string(), violation.code()))
}

fn arguments_error(message: String, reason: &str) -> PyErr {
    ArgumentsError::new_err((message, reason.to_owned()))
}

/// Converts plain Python JSON data (dict with str keys, list, tuple, str, int, float, bool,
/// None) into a `Value`, refusing anything deeper than `max_depth` containers.
/// Spends from `budget` as it goes (see `SchemaBudget`).
fn to_value(
    object: &Bound<'_, PyAny>,
    depth: usize,
    max_depth: usize,
    path: &mut String,
    walk: Walk,
    budget: &mut SchemaBudget,
) -> Result<Value, Conversion> {
    if let Ok(text) = object.cast::<PyString>() {
        let text = text.to_str().map_err(|_| Conversion::NotJson {
            path: path.clone(),
            what: "a string with a lone surrogate".into(),
        })?;
        budget.spend(text.len() + 2)?;
        return Ok(Value::String(text.to_owned()));
    }
    if object.is_none() {
        budget.spend(4)?;
        return Ok(Value::Null);
    }
    if let Ok(flag) = object.cast::<PyBool>() {
        budget.spend(4)?;
        return Ok(Value::Bool(flag.is_true()));
    }
    if object.cast::<PyInt>().is_ok() {
        if let Ok(small) = object.extract::<i64>() {
            budget.spend(1)?;
            return Ok(Value::Number(small.into()));
        }
        budget.spend(1)?;
        return wide_int_value(object, path, walk);
    }
    if let Ok(float) = object.cast::<PyFloat>() {
        budget.spend(1)?;
        return Number::from_f64(float.value())
            .map(Value::Number)
            .ok_or_else(|| Conversion::NotJson {
                path: path.clone(),
                what: "a number that is not finite".into(),
            });
    }
    if depth >= max_depth {
        return Err(Conversion::TooDeep { path: path.clone() });
    }
    if let Ok(dict) = object.cast::<PyDict>() {
        return match walk {
            Walk::InPlace => object_value(dict.iter(), depth, max_depth, path, walk, budget),
            Walk::Copies => {
                let pairs: Vec<_> = dict.iter().collect();
                object_value(pairs.into_iter(), depth, max_depth, path, walk, budget)
            }
        };
    }
    let base = path.len();
    let items: Vec<Bound<'_, PyAny>> = if let Ok(list) = object.cast::<PyList>() {
        list.iter().collect()
    } else if let Ok(tuple) = object.cast::<PyTuple>() {
        tuple.iter().collect()
    } else if let Walk::InPlace = walk {
        // Even the mapping check may run Python code (an abstract base class's hooks).
        return Err(Conversion::RunsPython);
    } else if is_mapping(object)? {
        // Another mapping (a read-only view, a host's own Mapping) reads as a dict would.
        let pairs = object
            .call_method0("items")
            .and_then(|items| {
                // A view, not a list: read pair by pair.
                items
                    .try_iter()?
                    .map(|pair| pair?.extract::<(Bound<'_, PyAny>, Bound<'_, PyAny>)>())
                    .collect::<PyResult<Vec<_>>>()
            })
            .map_err(|err| {
                if err.is_instance_of::<PyException>(object.py()) {
                    Conversion::NotJson {
                        path: path.clone(),
                        what: format!("a {} whose items cannot be read", type_name(object)),
                    }
                } else {
                    Conversion::Interrupted(err)
                }
            })?;
        return object_value(pairs.into_iter(), depth, max_depth, path, walk, budget);
    } else {
        return Err(Conversion::NotJson {
            path: path.clone(),
            what: format!("a {}", type_name(object)),
        });
    };
    // The brackets and a comma per element (one more than there are: a lower bound, not a count).
    budget.spend(1 + items.len())?;
    let mut array = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        path.push('/');
        path.push_str(&index.to_string());
        array.push(to_value(item, depth + 1, max_depth, path, walk, budget)?);
        path.truncate(base);
    }
    Ok(Value::Array(array))
}

/// `to_value` of an `int` beyond `i64`. Rare, so kept out of line. A walk in place stops here
/// (`Conversion::RunsPython`): the failed conversion to `i64` made an exception object, and
/// reading the value makes more objects, and any allocation may start a garbage collection whose
/// finalizers change a dict the walk is iterating.
#[cold]
#[inline(never)]
fn wide_int_value(object: &Bound<'_, PyAny>, path: &str, walk: Walk) -> Result<Value, Conversion> {
    if let Walk::InPlace = walk {
        return Err(Conversion::RunsPython);
    }
    if let Ok(large) = object.extract::<u64>() {
        return Ok(Value::Number(large.into()));
    }
    // Beyond 64 bits: validate by magnitude (a float keeps integer-ness for `type: integer`).
    let too_large = || Conversion::NotJson {
        path: path.to_owned(),
        what: "an integer too large for JSON numbers".into(),
    };
    match wide_int_to_f64(object) {
        Ok(approximate) => Number::from_f64(approximate)
            .map(Value::Number)
            .ok_or_else(too_large),
        Err(err) if err.is_instance_of::<PyException>(object.py()) => Err(too_large()),
        Err(err) => Err(Conversion::Interrupted(err)),
    }
}

/// Refuses an `int` divisor beyond 64 bits that its nearest float does not hold exactly, as
/// `guards::inexact_divisor` refuses one within 64 bits.
#[cold]
fn refuse_wide_divisor(item: &Bound<'_, PyAny>, path: &str) -> Result<(), Conversion> {
    if !item.is_instance_of::<PyInt>() {
        return Ok(());
    }
    // Through `int`'s own methods, as `wide_int_to_f64` reads the value: a subclass's code
    // never runs. Reached only on a walk over copies (a wide integer stops a walk in place).
    // Exact when the float's own digits (`{:.0}` writes them all) are the integer's.
    let py = item.py();
    let digits = py
        .get_type::<PyInt>()
        .call_method1(intern!(py, "__repr__"), (item,))
        .and_then(|text| text.extract::<String>());
    let Ok(digits) = digits else {
        return Ok(()); // unreadable: the guards refuse what the conversion made of it
    };
    let nearest = wide_int_to_f64(item).map(|nearest| format!("{nearest:.0}"));
    match nearest {
        Ok(nearest) if nearest != digits => Err(Conversion::Refused(
            crate::guards::inexact_divisor_refusal(&digits, &nearest, path),
        )),
        // Exact; or beyond a float's range, which the conversion refuses as it is.
        _ => Ok(()),
    }
}

/// Whether `object` is a `collections.abc.Mapping`. Asked of Python directly, not through
/// the `PyO3` mapping check, which swallows what the check raises: an interrupt raised by an
/// object's `__class__` or its type's `__instancecheck__` must propagate.
fn is_mapping(object: &Bound<'_, PyAny>) -> Result<bool, Conversion> {
    static MAPPING: PyOnceLock<Py<PyType>> = PyOnceLock::new();
    let py = object.py();
    let checked = MAPPING
        .import(py, "collections.abc", "Mapping")
        .and_then(|mapping| object.is_instance(mapping));
    checked.map_err(|err| {
        if err.is_instance_of::<PyException>(py) {
            Conversion::NotJson {
                path: String::new(),
                what: format!("a {} whose kind cannot be read", type_name(object)),
            }
        } else {
            Conversion::Interrupted(err)
        }
    })
}

/// A JSON object from a mapping's `(key, value)` pairs; every key must be a string.
fn object_value<'py>(
    pairs: impl Iterator<Item = (Bound<'py, PyAny>, Bound<'py, PyAny>)>,
    depth: usize,
    max_depth: usize,
    path: &mut String,
    walk: Walk,
    budget: &mut SchemaBudget,
) -> Result<Value, Conversion> {
    let base = path.len();
    let mut map = Map::new();
    // The braces (one of them: a member's comma is counted with it, and the last has none).
    budget.spend(1)?;
    for (key, item) in pairs {
        let Ok(key) = key.cast::<PyString>() else {
            return Err(Conversion::NotJson {
                path: path.clone(),
                what: format!("a {} key", type_name(&key)),
            });
        };
        let key = key.to_str().map_err(|_| Conversion::NotJson {
            path: path.clone(),
            what: "a key with a lone surrogate".into(),
        })?;
        path.push('/');
        if key.contains(['~', '/']) {
            path.push_str(&key.replace('~', "~0").replace('/', "~1"));
        } else {
            path.push_str(key);
        }
        // The key, its quotes, the colon and a comma.
        budget.spend(key.len() + 4)?;
        let value = to_value(&item, depth + 1, max_depth, path, walk, budget)?;
        // An integer beyond 64 bits becomes its nearest float here, where the guard of integer
        // divisors can no longer tell it from a float (`guards::inexact_divisor`).
        if let Value::Number(number) = &value
            && number.is_f64()
            && key == "multipleOf"
        {
            refuse_wide_divisor(&item, path)?;
        }
        path.truncate(base);
        // Only keys of a `str` subclass with its own equality repeat a text: the value replaced
        // is not written out, so what it spent is given back.
        if let Some(replaced) = map.insert(key.to_owned(), value) {
            budget.refund(key.len() + 4 + spent_on(&replaced));
        }
    }
    Ok(Value::Object(map))
}

/// Issues as `(path, keyword, message)` tuples, and the total count (which may be larger). When
/// the arguments were too large to list every issue (`Listing`), the one issue found, counted
/// as one: only the reports (`invalid_arguments_error`) say that more may exist.
type Found = (Vec<(String, Cow<'static, str>, String)>, usize);

fn issues_to_python(findings: Findings) -> Found {
    let described = findings
        .issues
        .into_iter()
        .map(|issue| (issue.path.as_str().to_owned(), issue.keyword, issue.message));
    (described.collect(), findings.total)
}

/// The issues of an argument document against `entry`, bounded by what listing them costs
/// (see `schema::collect_issues`).
fn document_issues(entry: &CompiledSchema<Tape>, doc: &Document<'_>, max: usize) -> Findings {
    collect_issues(&entry.validator, doc.root(), max, &entry.issues, || {
        weigh_document(doc, &entry.issues)
    })
}

/// Schema guards, a compiled-schema LRU and argument parsing under one set of limits.
#[pyclass(frozen, module = "prism_tools._core", name = "SchemaValidator")]
pub(crate) struct PySchemaValidator {
    cache: SchemaCache<Tape>,
    memo: Mutex<Memo>,
    /// Tells this validator's entry in a thread's `LAST_FOUND` from any other validator's, one
    /// that may since have been freed and its address reused.
    id: u64,
    /// Lookups answered by `LAST_FOUND` or the memo, without a compile or an LRU lookup.
    remembered: AtomicU64,
    /// How many times the memo has forgotten schemas: an entry of `LAST_FOUND` counts only while
    /// this is what it was when the entry was found, so the slot never answers for a schema the
    /// memo no longer holds.
    forgettings: AtomicU64,
}

/// Where validator ids come from (never reused in a process).
static NEXT_VALIDATOR_ID: AtomicU64 = AtomicU64::new(0);

/// The compiled schema of each schema object seen last (at most `max_compiled_schemas`), by
/// identity: holding the schema keeps its address from being reused, and holding the compiled
/// schema means an eviction from the LRU never leaves a known schema without its validator.
#[derive(Default)]
struct Memo {
    by_address: AHashMap<usize, (Py<PyAny>, Py<PyCompiledSchema>)>,
    /// Addresses in the order they were remembered (the oldest is forgotten first).
    order: VecDeque<usize>,
}

/// The schema a thread found last, with the validator it was found in and its compiled schema.
struct LastFound {
    validator: u64,
    forgettings: u64,
    schema: Py<PyAny>,
    compiled: Py<PyCompiledSchema>,
}

thread_local! {
    /// A host validates the same tool's schema call after call: this answers a repeat with two
    /// comparisons and no lock, where the memo takes a lock (two atomic operations, which cost
    /// more than the rest of the lookup together). The slot holds its schema and compiled schema,
    /// so an address it compares against cannot be reused; that keeps at most one schema per
    /// thread alive past its eviction from the memo.
    static LAST_FOUND: RefCell<Option<LastFound>> = const { RefCell::new(None) };
}

impl PySchemaValidator {
    fn limits(&self) -> &Limits {
        self.cache.limits()
    }

    fn memo(&self) -> std::sync::MutexGuard<'_, Memo> {
        // Entries are whole (a panic cannot leave half of one), so a poisoned lock is taken over.
        self.memo
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Counts a lookup answered without a compile. A load and a store, not `fetch_add`: every
    /// caller holds the GIL (this module is built for the stable ABI, which has one), so no other
    /// thread counts meanwhile, and a locked add would cost as much as the rest of a lookup.
    fn count_remembered(&self) {
        let hits = self.remembered.load(Ordering::Relaxed);
        self.remembered.store(hits + 1, Ordering::Relaxed);
    }

    /// `use_compiled` applied to the compiled schema of `schema`: this thread's last one,
    /// remembered by identity, or guarded, compiled (or found in the LRU) and remembered. Inlined
    /// into each caller, since a repeat is a few comparisons, and the slot's compiled schema is
    /// lent, not referenced again; everything else is out of line in `find_and_remember`.
    #[inline]
    fn with_compiled<'py, R>(
        &self,
        schema: &Bound<'py, PyAny>,
        use_compiled: impl FnOnce(&Bound<'py, PyCompiledSchema>) -> R,
    ) -> PyResult<R> {
        let py = schema.py();
        let answered = LAST_FOUND.with(|slot| {
            // A slot being replaced (its old objects freed, which may run Python code that
            // validates again) is skipped, not waited for. While `use_compiled` runs, the slot
            // is only read: a validation it starts finds the slot as a repeat would, and cannot
            // replace it.
            let slot = slot.try_borrow().ok();
            match slot.as_ref().and_then(|slot| slot.as_ref()) {
                Some(last)
                    if last.validator == self.id
                        && last.schema.bind(py).is(schema)
                        && last.forgettings == self.forgettings.load(Ordering::Relaxed) =>
                {
                    Ok(use_compiled(last.compiled.bind(py)))
                }
                _ => Err(use_compiled),
            }
        });
        match answered {
            Ok(answer) => {
                self.count_remembered();
                Ok(answer)
            }
            Err(use_compiled) => Ok(use_compiled(&self.find_and_remember(schema)?)),
        }
    }

    /// The compiled schema of `schema` when it is not this thread's last one: from the memo or
    /// compiled, and remembered as the last one.
    #[inline(never)]
    fn find_and_remember<'py>(
        &self,
        schema: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyCompiledSchema>> {
        let (compiled, forgettings) = self.remembered_or_compiled(schema)?;
        let found = LastFound {
            validator: self.id,
            forgettings,
            schema: schema.clone().unbind(),
            compiled: compiled.clone().unbind(),
        };
        let replaced = LAST_FOUND.with(|slot| {
            slot.try_borrow_mut()
                .ok()
                .and_then(|mut slot| slot.replace(found))
        });
        // Dropped after the slot is released: freeing a schema may run arbitrary Python code.
        drop(replaced);
        Ok(compiled)
    }

    /// The compiled schema of `schema` from the memo, or guarded, compiled (or found in the LRU)
    /// and remembered there; with the memo's `forgettings` when it was found.
    fn remembered_or_compiled<'py>(
        &self,
        schema: &Bound<'py, PyAny>,
    ) -> PyResult<(Bound<'py, PyCompiledSchema>, u64)> {
        let py = schema.py();
        let address = schema.as_ptr() as usize;
        {
            let memo = self.memo();
            if let Some((held, compiled)) = memo.by_address.get(&address)
                && held.bind(py).is(schema)
            {
                let compiled = compiled.bind(py).clone();
                self.count_remembered();
                return Ok((compiled, self.forgettings.load(Ordering::Relaxed)));
            }
        }
        let compiled = Bound::new(py, self.compile(py, schema)?)?;
        let mut forgotten = Vec::new();
        let forgettings;
        {
            let mut memo = self.memo();
            while memo.order.len() >= self.limits().max_compiled_schemas {
                let Some(oldest) = memo.order.pop_front() else {
                    break;
                };
                forgotten.extend(memo.by_address.remove(&oldest));
            }
            let entry = (schema.clone().unbind(), compiled.clone().unbind());
            if let Some(replaced) = memo.by_address.insert(address, entry) {
                forgotten.push(replaced);
            } else {
                memo.order.push_back(address);
            }
            if !forgotten.is_empty() {
                self.forgettings.fetch_add(1, Ordering::Relaxed);
            }
            forgettings = self.forgettings.load(Ordering::Relaxed);
        }
        // Dropped after the lock is released: freeing a schema may run arbitrary Python code.
        drop(forgotten);
        Ok((compiled, forgettings))
    }
}

/// The single issue that stands for arguments the reader refused; an interrupt propagates.
fn unreadable_issue(failure: Unreadable, limits: &Limits) -> PyResult<Findings> {
    let (keyword, message) = match failure {
        Unreadable::Interrupted(err) => return Err(err),
        // Never returned to a caller (the reader starts again over copies); kept honest anyway.
        Unreadable::RunsPython => (
            "json",
            "arguments are not JSON: they changed while they were read".to_owned(),
        ),
        Unreadable::TooDeep => (
            "max_argument_depth",
            GuardViolation::ArgumentsTooDeep {
                limit: limits.max_argument_depth,
            }
            .to_string(),
        ),
        Unreadable::TooMany => (
            "max_argument_bytes",
            format!(
                "arguments hold more than {} values (max_argument_bytes={})",
                limits.max_argument_bytes, limits.max_argument_bytes
            ),
        ),
        Unreadable::NotJson { path, what } => (
            "json",
            format!(
                "arguments are not JSON: {} at {}",
                crate::guards::excerpt(&what, 120),
                if path.is_empty() { "/" } else { &path }
            ),
        ),
    };
    let issue = Issue {
        path: jsonschema::paths::Location::new(),
        keyword: Cow::Borrowed(keyword),
        message,
        fixed: false,
    };
    Ok(Findings::every(vec![issue]))
}

/// Validates Python arguments: read into a document (depth and size bounded), then checked.
fn validate_python(
    entry: &CompiledSchema<Tape>,
    instance: &Bound<'_, PyAny>,
    limits: &Limits,
    max_issues: usize,
) -> PyResult<Findings> {
    let checked = with_python_document(
        instance,
        limits.max_argument_depth,
        limits.max_argument_bytes,
        |doc| document_issues(entry, doc, max_issues),
    );
    checked.or_else(|failure| unreadable_issue(failure, limits))
}

/// Argument or schema text as a parser source: a `str` (known UTF-8) or `bytes`. A `str` that
/// holds a lone surrogate (a JSON decoder lets one through from `"\ud800"`) has no UTF-8 spelling,
/// so it is not JSON this reader takes: `refuse` makes the caller's error from where it stands.
fn text_source<'a>(
    text: &'a Bound<'_, PyAny>,
    refuse: fn(String) -> PyErr,
) -> PyResult<Source<'a>> {
    if let Ok(text) = text.cast::<PyString>() {
        return text
            .to_str()
            .map(Source::Text)
            .map_err(|err| refuse(lone_surrogate(text.py(), &err)));
    }
    if let Ok(bytes) = text.cast::<PyBytes>() {
        return Ok(Source::Bytes(bytes.as_bytes()));
    }
    Err(PyTypeError::new_err(format!(
        "JSON text must be str or bytes, got {}",
        type_name(text)
    )))
}

/// Where the lone surrogate stands that made a string's UTF-8 encoding fail.
fn lone_surrogate(py: Python<'_>, failure: &PyErr) -> String {
    let start = failure.value(py).getattr(pyo3::intern!(py, "start"));
    match start.and_then(|start| start.extract::<usize>()) {
        Ok(start) => format!("a lone surrogate (half of a UTF-16 pair) at character {start}"),
        Err(_) => "a lone surrogate (half of a UTF-16 pair)".to_owned(),
    }
}

/// The error for argument text that is not JSON, with the reader's reason.
fn invalid_json_arguments(reason: String) -> PyErr {
    arguments_error(
        format!("Tool arguments are not valid JSON: {reason}. Send one complete JSON object."),
        "invalid_json",
    )
}

/// The error for schema text that is not JSON, with the reader's reason.
fn invalid_json_schema(reason: String) -> PyErr {
    guard_error(&GuardViolation::InvalidSchema {
        reason: format!("not JSON: {reason}"),
    })
}

/// Guards and parses argument text into a document whose root is an object.
fn parse_document<'t>(limits: &Limits, source: Source<'t>) -> PyResult<Document<'t>> {
    // Repeated keys are left as written: building the dict finds them (`build_arguments`).
    let repeats = Repeats::Leave;
    let doc = parse(
        source,
        limits.max_argument_bytes,
        limits.max_argument_depth,
        repeats,
    )
    .map_err(|failure| match failure {
        ParseFailure::Guard(violation) => arguments_error(
            format!("Tool arguments were refused: {violation}"),
            violation.code(),
        ),
        ParseFailure::Invalid(reason) => invalid_json_arguments(reason),
    })?;
    if doc.root().as_object().is_none() {
        return Err(arguments_error(
            "Tool arguments must be a JSON object".into(),
            "not_an_object",
        ));
    }
    Ok(doc)
}

#[pymethods]
impl PySchemaValidator {
    #[new]
    #[pyo3(signature = (**limits))]
    fn new(limits: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        let mut parsed = Limits::default();
        if let Some(limits) = limits {
            for (name, value) in limits.iter() {
                let name: String = name.extract()?;
                if value.cast::<PyBool>().is_ok() || value.cast::<PyInt>().is_err() {
                    return Err(PyTypeError::new_err(format!("{name} must be an integer")));
                }
                let value: i64 = value.extract()?;
                let value = usize::try_from(value).unwrap_or(0);
                parsed.set(&name, value).map_err(|message| {
                    if message.starts_with("unknown") {
                        PyTypeError::new_err(message)
                    } else {
                        PyValueError::new_err(message)
                    }
                })?;
            }
        }
        Ok(Self {
            cache: SchemaCache::new(parsed),
            memo: Mutex::new(Memo::default()),
            id: NEXT_VALIDATOR_ID.fetch_add(1, Ordering::Relaxed),
            remembered: AtomicU64::new(0),
            forgettings: AtomicU64::new(0),
        })
    }

    /// The limits in force, by name.
    #[getter]
    fn limits_dict(&self) -> Vec<(&'static str, usize)> {
        let limits = self.limits();
        vec![
            ("max_schema_bytes", limits.max_schema_bytes),
            ("max_schema_depth", limits.max_schema_depth),
            ("max_schema_keywords", limits.max_schema_keywords),
            ("max_refs", limits.max_refs),
            ("max_compiled_schemas", limits.max_compiled_schemas),
            ("max_argument_bytes", limits.max_argument_bytes),
            ("max_argument_depth", limits.max_argument_depth),
        ]
    }

    /// Runs the guards and compiles (or finds in the cache) the schema's validator.
    fn compile(&self, py: Python<'_>, schema: &Bound<'_, PyAny>) -> PyResult<PyCompiledSchema> {
        let limits = *self.limits();
        let value = if schema.is_instance_of::<PyString>() || schema.is_instance_of::<PyBytes>() {
            let data = text_source(schema, invalid_json_schema)?.bytes();
            // The limit applies to the canonical bytes (checked after parsing); raw text may be
            // pretty-printed, so only text far beyond the limit is refused unread.
            if data.len() > limits.max_schema_bytes.saturating_mul(RAW_SCHEMA_SLACK) {
                return Err(guard_error(&GuardViolation::SchemaTooLarge {
                    bytes: data.len(),
                    limit: limits.max_schema_bytes,
                }));
            }
            // Bound parser recursion by the hard ceiling; the walker reports the exact place of
            // anything deeper than the configured limit.
            if scan_json(data, usize::MAX, CONVERSION_DEPTH).is_err() {
                return Err(guard_error(&GuardViolation::SchemaTooDeep {
                    limit: limits.max_schema_depth,
                    path: "(text nests deeper than the hard ceiling)".into(),
                }));
            }
            let mut deserializer = serde_json::Deserializer::from_slice(data);
            deserializer.disable_recursion_limit();
            serde::Deserialize::deserialize(&mut deserializer)
                .map_err(|err| invalid_json_schema(err.to_string()))?
        } else {
            let mut path = String::new();
            let mut convert = |walk| {
                let mut budget = SchemaBudget::new(limits.max_schema_bytes);
                path.clear();
                to_value(schema, 0, CONVERSION_DEPTH, &mut path, walk, &mut budget)
            };
            let converted = match convert(Walk::InPlace) {
                Err(Conversion::RunsPython) => convert(Walk::Copies),
                other => other,
            };
            match converted {
                Ok(value) => value,
                Err(Conversion::Interrupted(err)) => return Err(err),
                Err(Conversion::Refused(violation)) => return Err(guard_error(&violation)),
                Err(Conversion::TooLarge { at_least }) => {
                    return Err(guard_error(&GuardViolation::SchemaTooLargeAtLeast {
                        bytes: at_least,
                        limit: limits.max_schema_bytes,
                    }));
                }
                // Not returned by a walk over copies; read as a schema that changed meanwhile.
                Err(Conversion::RunsPython) => {
                    return Err(guard_error(&GuardViolation::InvalidSchema {
                        reason: "the schema changed while it was read".into(),
                    }));
                }
                Err(Conversion::TooDeep { path }) => {
                    return Err(guard_error(&GuardViolation::SchemaTooDeep {
                        limit: limits.max_schema_depth,
                        path,
                    }));
                }
                Err(Conversion::NotJson { path, what }) => {
                    let at = if path.is_empty() {
                        "/".to_owned()
                    } else {
                        path
                    };
                    return Err(guard_error(&if what.contains("finite") {
                        GuardViolation::NonFiniteNumber { path: at }
                    } else {
                        GuardViolation::InvalidSchema {
                            reason: format!("{what} at {at} is not JSON"),
                        }
                    }));
                }
            }
        };
        if !value.is_object() && !value.is_boolean() {
            return Err(guard_error(&GuardViolation::InvalidSchema {
                reason: "a schema must be a JSON object or a boolean".into(),
            }));
        }
        let canonical = serde_json::to_vec(&value).map_err(|err| {
            guard_error(&GuardViolation::InvalidSchema {
                reason: err.to_string(),
            })
        })?;
        // Compiling can take milliseconds for large schemas: let other threads run meanwhile.
        let entry = py
            .detach(|| self.cache.compile(&value, &canonical))
            .map_err(|violation| guard_error(&violation))?;
        Ok(PyCompiledSchema {
            entry,
            limits,
            strings: PyOnceLock::new(),
            paths: PyOnceLock::new(),
            messages: MessageTable::default(),
        })
    }

    /// Parses argument text (guards first) into a dict; raises `ArgumentsError`.
    fn parse<'py>(&self, py: Python<'py>, text: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let doc = parse_document(self.limits(), text_source(text, invalid_json_arguments)?)?;
        // A dict resolves repeated keys by itself, and nothing validates this document.
        let arguments = build(py, &doc, doc.root_index(), None, &mut false);
        doc.recycle();
        arguments
    }

    /// `(hits, misses, maxsize, currsize)` of the compiled-schema cache.
    fn cache_info(&self) -> (u64, u64, usize, usize) {
        let info = self.cache.info();
        let remembered = self.remembered.load(Ordering::Relaxed);
        (
            info.hits + remembered,
            info.misses,
            info.maxsize,
            info.currsize,
        )
    }

    /// The compiled schema of a schema object, remembered by identity (see `Memo`).
    fn compiled<'py>(&self, schema: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyCompiledSchema>> {
        self.with_compiled(schema, Bound::clone)
    }

    /// `CompiledSchema.validate` of the compiled schema of `schema`, in one call.
    #[pyo3(signature = (schema, instance, max_issues = 64))]
    fn validate_with(
        &self,
        schema: &Bound<'_, PyAny>,
        instance: &Bound<'_, PyAny>,
        max_issues: usize,
    ) -> PyResult<Option<Found>> {
        self.with_compiled(schema, |compiled| {
            compiled.get().validate(instance, max_issues)
        })?
    }

    /// `CompiledSchema.parse_and_validate` of the compiled schema of `schema`, in one call.
    #[pyo3(signature = (schema, text, max_issues = 64))]
    #[allow(clippy::type_complexity)]
    fn parse_and_validate_with<'py>(
        &self,
        schema: &Bound<'py, PyAny>,
        text: &Bound<'py, PyAny>,
        max_issues: usize,
    ) -> PyResult<(Bound<'py, PyAny>, Option<Found>)> {
        self.with_compiled(schema, |compiled| {
            compiled
                .get()
                .parse_and_validate(schema.py(), text, max_issues)
        })?
    }

    /// `JsonSchemaAdapter.parse_and_validate`, answered here so the adapter adds no Python frame:
    /// `(dict, issues)`, the issues (at most `max_issues`) as `prism_tools.validation`
    /// `ArgumentIssue` objects, an empty list when valid.
    #[pyo3(signature = (schema, text, max_issues = 256))]
    fn parse_and_list_issues<'py>(
        &self,
        schema: &Bound<'py, PyAny>,
        text: &Bound<'py, PyAny>,
        max_issues: usize,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyList>)> {
        static ARGUMENT_ISSUE: PyOnceLock<Py<PyType>> = PyOnceLock::new();
        let py = schema.py();
        let (arguments, found) = self.with_compiled(schema, |compiled| {
            compiled.get().parse_and_validate(py, text, max_issues)
        })??;
        let issues = PyList::empty(py);
        if let Some((found, _)) = found {
            let issue = ARGUMENT_ISSUE.import(py, "prism_tools.validation", "ArgumentIssue")?;
            for described in found {
                issues.append(issue.call1(described)?)?;
            }
        }
        Ok((arguments, issues))
    }

    /// `CompiledSchema.parse_and_report` of the compiled schema of `schema`, in one call, with the
    /// report as the `ErrorInfo` a model sees: what dispatch runs for argument text.
    #[pyo3(signature = (schema, text, tool_name, max_message_bytes = 1024, max_issues = 256))]
    fn parse_and_report_with<'py>(
        &self,
        schema: &Bound<'py, PyAny>,
        text: &Bound<'py, PyAny>,
        tool_name: &str,
        max_message_bytes: usize,
        max_issues: usize,
    ) -> PyResult<(Bound<'py, PyAny>, Option<Bound<'py, PyAny>>)> {
        let py = schema.py();
        let (arguments, report) = self.with_compiled(schema, |compiled| {
            compiled.get().parse_and_report_in_full(
                py,
                text,
                tool_name,
                max_message_bytes,
                max_issues,
            )
        })??;
        let problem = report
            .map(|report| invalid_arguments_error(py, report))
            .transpose()?;
        Ok((arguments, problem))
    }

    /// `CompiledSchema.report` of the compiled schema of `schema`, in one call, as the
    /// `ErrorInfo` a model sees; None when the instance is valid.
    #[pyo3(signature = (schema, instance, tool_name, max_message_bytes = 1024, max_issues = 256))]
    fn report_with<'py>(
        &self,
        schema: &Bound<'py, PyAny>,
        instance: &Bound<'py, PyAny>,
        tool_name: &str,
        max_message_bytes: usize,
        max_issues: usize,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let py = schema.py();
        self.with_compiled(schema, |compiled| {
            compiled
                .get()
                .report_in_full(py, instance, tool_name, max_message_bytes, max_issues)
        })??
        .map(|report| invalid_arguments_error(py, report))
        .transpose()
    }
}

/// `(name, default, ceiling)` of every limit.
#[pyfunction]
pub(crate) fn limit_table() -> Vec<(&'static str, usize, usize)> {
    ALL_LIMITS
        .iter()
        .map(|limit| (limit.name, limit.default, limit.ceiling))
        .collect()
}

/// One compiled schema, held by whoever compiled it: eviction from the cache never takes it away.
#[pyclass(frozen, module = "prism_tools._core", name = "CompiledSchema")]
pub(crate) struct PyCompiledSchema {
    entry: Arc<CompiledSchema<Tape>>,
    limits: Limits,
    /// The schema's property names and choices as Python strings, made on the first parse.
    strings: PyOnceLock<SchemaStrings>,
    /// `/<name>` for each property name, as Python strings made on the first report: the paths
    /// of most issues, shared rather than made for each.
    paths: PyOnceLock<KeyTable>,
    /// The messages this schema's keywords alone decide, made on the report that first needs each.
    messages: MessageTable,
}

/// Python strings of the issue messages that depend on a schema keyword alone (`Issue::fixed`),
/// shared between the reports of one schema instead of made for each. Keyed by the text, so
/// sharing never depends on how the crate locates its keywords; a schema has a bounded number of
/// such texts, and at most `MAX_ENTRIES` are kept in any case.
#[derive(Default)]
struct MessageTable(Mutex<StrMap<Py<PyString>>>);

impl MessageTable {
    const MAX_ENTRIES: usize = 1024;

    fn string<'py>(&self, py: Python<'py>, text: &str) -> Bound<'py, PyString> {
        // A poisoned table only ever missed an insert: its entries stay whole.
        let lock = || {
            self.0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        };
        if let Some(shared) = lock().get(text) {
            return shared.bind(py).clone();
        }
        // Made outside the lock: creating a Python object never runs under one of ours.
        let made = PyString::new(py, text);
        let mut table = lock();
        if table.len() < Self::MAX_ENTRIES {
            table
                .entry(text.into())
                .or_insert_with(|| made.clone().unbind());
        }
        made
    }
}

impl PyCompiledSchema {
    fn path_table(&self, py: Python<'_>) -> &KeyTable {
        self.paths.get_or_init(py, || {
            let paths: Vec<Box<str>> = self
                .entry
                .property_names
                .iter()
                .map(|name| format!("/{name}").into_boxed_str())
                .collect();
            key_table(py, &paths)
        })
    }

    /// The report of `found` for `tool_name`, top-level paths from this schema's path table.
    fn report_of<'py>(
        &self,
        py: Python<'py>,
        tool_name: &str,
        found: &Findings,
        max_message_bytes: usize,
    ) -> PyResult<Option<Report<'py>>> {
        report_of(
            py,
            tool_name,
            found,
            max_message_bytes,
            Some(self.path_table(py)),
            Some(&self.messages),
        )
    }

    /// `report`, with whether the issues are every issue (for the `ErrorInfo`).
    fn report_in_full<'py>(
        &self,
        py: Python<'py>,
        instance: &Bound<'py, PyAny>,
        tool_name: &str,
        max_message_bytes: usize,
        max_issues: usize,
    ) -> PyResult<Option<Report<'py>>> {
        let found = validate_python(&self.entry, instance, &self.limits, max_issues)?;
        self.report_of(py, tool_name, &found, max_message_bytes)
    }

    /// `parse_and_report`, with whether the issues are every issue (for the `ErrorInfo`).
    fn parse_and_report_in_full<'py>(
        &self,
        py: Python<'py>,
        text: &Bound<'py, PyAny>,
        tool_name: &str,
        max_message_bytes: usize,
        max_issues: usize,
    ) -> PyResult<(Bound<'py, PyAny>, Option<Report<'py>>)> {
        let mut doc = parse_document(&self.limits, text_source(text, invalid_json_arguments)?)?;
        let arguments = self.build_arguments(py, &mut doc)?;
        let found = document_issues(&self.entry, &doc, max_issues);
        let report = self.report_of(py, tool_name, &found, max_message_bytes)?;
        drop(found);
        doc.recycle();
        Ok((arguments, report))
    }

    /// The Python arguments of a parsed document, keys from the schema's property names. The
    /// dicts are built before validation: when one comes out smaller than its object (a key was
    /// repeated), the document resolves its repeats as the dicts did, so the validator checks
    /// exactly what the tool receives.
    fn build_arguments<'py>(
        &self,
        py: Python<'py>,
        doc: &mut Document<'_>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let strings = self.strings.get_or_init(py, || {
            schema_strings(py, &self.entry.property_names, &self.entry.choices)
        });
        let mut repeated = false;
        let arguments = build(py, doc, doc.root_index(), Some(strings), &mut repeated)?;
        if repeated {
            doc.resolve_repeats();
        }
        Ok(arguments)
    }
}

#[pymethods]
impl PyCompiledSchema {
    /// Issues of `instance` and their count, validated in place; None when it is valid.
    #[pyo3(signature = (instance, max_issues = 64))]
    fn validate(&self, instance: &Bound<'_, PyAny>, max_issues: usize) -> PyResult<Option<Found>> {
        let found = issues_to_python(validate_python(
            &self.entry,
            instance,
            &self.limits,
            max_issues,
        )?);
        // None for valid: the common answer costs no list and no tuple.
        Ok((found.1 > 0).then_some(found))
    }

    /// Parses argument text (guards first) into a document, validates it and builds the dict from
    /// it, in one crossing:
    /// `(dict, None)` when valid, `(dict, (issues, count))` otherwise.
    #[pyo3(signature = (text, max_issues = 64))]
    #[allow(clippy::type_complexity)]
    fn parse_and_validate<'py>(
        &self,
        py: Python<'py>,
        text: &Bound<'py, PyAny>,
        max_issues: usize,
    ) -> PyResult<(Bound<'py, PyAny>, Option<Found>)> {
        let mut doc = parse_document(&self.limits, text_source(text, invalid_json_arguments)?)?;
        let arguments = self.build_arguments(py, &mut doc)?;
        let found = issues_to_python(document_issues(&self.entry, &doc, max_issues));
        doc.recycle();
        Ok((arguments, (found.1 > 0).then_some(found)))
    }

    /// Validates `instance` and, when it is invalid, writes the report a model sees:
    /// `(message, details issues, count)`; None when valid.
    #[pyo3(signature = (instance, tool_name, max_message_bytes = 1024, max_issues = 256))]
    fn report<'py>(
        &self,
        py: Python<'py>,
        instance: &Bound<'py, PyAny>,
        tool_name: &str,
        max_message_bytes: usize,
        max_issues: usize,
    ) -> PyResult<Option<ReportTuple<'py>>> {
        let report = self.report_in_full(py, instance, tool_name, max_message_bytes, max_issues)?;
        Ok(report.map(Report::into_tuple))
    }

    /// `parse_and_validate` with the report of `report`: `(dict, None)` when valid,
    /// `(dict, (message, details issues, count))` otherwise.
    #[pyo3(signature = (text, tool_name, max_message_bytes = 1024, max_issues = 256))]
    fn parse_and_report<'py>(
        &self,
        py: Python<'py>,
        text: &Bound<'py, PyAny>,
        tool_name: &str,
        max_message_bytes: usize,
        max_issues: usize,
    ) -> PyResult<(Bound<'py, PyAny>, Option<ReportTuple<'py>>)> {
        let (arguments, report) =
            self.parse_and_report_in_full(py, text, tool_name, max_message_bytes, max_issues)?;
        Ok((arguments, report.map(Report::into_tuple)))
    }
}

/// A report of invalid arguments: the model's message, the issues as `details` dicts, the count,
/// and whether they are every issue.
struct Report<'py> {
    message: String,
    issues: Bound<'py, PyList>,
    total: usize,
    listing: Listing,
}

/// A report as `CompiledSchema.report` returns it: `(message, details issues, count)` (the
/// message says when the issues are not every issue).
type ReportTuple<'py> = (String, Bound<'py, PyList>, usize);

impl<'py> Report<'py> {
    fn into_tuple(self) -> ReportTuple<'py> {
        (self.message, self.issues, self.total)
    }
}

/// The `ErrorInfo` a model sees for invalid arguments: the report's message, code
/// `invalid_tool_arguments`, and `details` with the issues and their count. Built in place as
/// the package builds its hot objects (`prism_tools._frozen.twin`): made as the mutable twin,
/// filled, then given its class; no Python frame runs.
fn invalid_arguments_error<'py>(
    py: Python<'py>,
    Report {
        message,
        issues,
        total,
        listing,
    }: Report<'py>,
) -> PyResult<Bound<'py, PyAny>> {
    static TWIN: PyOnceLock<Py<PyType>> = PyOnceLock::new();
    static ERROR_INFO: PyOnceLock<Py<PyType>> = PyOnceLock::new();
    let twin = TWIN.import(py, "prism_tools.validation", "_ErrorInfoTwin")?;
    let class = ERROR_INFO.import(py, "prism_tools.types", "ErrorInfo")?;
    let details = PyDict::new(py);
    details.set_item(intern!(py, "issues"), issues)?;
    details.set_item(intern!(py, "count"), total)?;
    // Present only when false: a report that lists every issue keeps its usual two keys.
    if listing != Listing::Every {
        details.set_item(intern!(py, "complete"), false)?;
    }
    let info = twin.call0()?;
    info.setattr(intern!(py, "message"), message)?;
    info.setattr(intern!(py, "code"), intern!(py, "invalid_tool_arguments"))?;
    info.setattr(intern!(py, "name"), intern!(py, "ArgumentValidationError"))?;
    info.setattr(intern!(py, "details"), details)?;
    info.setattr(intern!(py, "__class__"), class)?;
    Ok(info)
}

/// `keyword` as a Python string: one shared string for each keyword the crate reports.
fn keyword_string<'py>(py: Python<'py>, keyword: &str) -> Bound<'py, PyString> {
    static STRINGS: PyOnceLock<Vec<Py<PyString>>> = PyOnceLock::new();
    match known_keyword(keyword) {
        Some(at) => STRINGS.get_or_init(py, || {
            KEYWORDS
                .iter()
                .map(|known| PyString::intern(py, known).unbind())
                .collect()
        })[at]
            .bind(py)
            .clone(),
        None => PyString::new(py, keyword),
    }
}

/// One issue as a report reads it: path, keyword, message, and whether the message is `fixed`
/// (the same for every instance, so it may come from a schema's `MessageTable`).
type IssueText<'a> = (&'a str, &'a str, &'a str, bool);

/// The report of `issues` (`total` in all, every issue or not as `listing` says) for
/// `tool_name`, every part cut to its limit.
#[allow(clippy::too_many_arguments)]
fn report<'py>(
    py: Python<'py>,
    tool_name: &str,
    issues: &[IssueText<'_>],
    total: usize,
    listing: Listing,
    max_message_bytes: usize,
    paths: Option<&KeyTable>,
    messages: Option<&MessageTable>,
) -> PyResult<Report<'py>> {
    let message = report_message(
        tool_name,
        issues.iter().map(|&(path, _, message, _)| (path, message)),
        total,
        max_message_bytes,
        listing,
    );
    let details = PyList::empty(py);
    for &(path, keyword, text, fixed) in issues {
        let issue = PyDict::new(py);
        match paths.and_then(|table| table.get(path)) {
            Some(shared) => issue.set_item(intern!(py, "path"), shared.bind(py))?,
            None => issue.set_item(intern!(py, "path"), path)?,
        }
        issue.set_item(intern!(py, "keyword"), keyword_string(py, keyword))?;
        let text = cut(text, MAX_ISSUE_MESSAGE_BYTES);
        match messages.filter(|_| fixed) {
            Some(table) => issue.set_item(intern!(py, "message"), table.string(py, &text))?,
            None => issue.set_item(intern!(py, "message"), text.as_ref())?,
        }
        details.append(issue)?;
    }
    Ok(Report {
        message,
        issues: details,
        total,
        listing,
    })
}

fn report_of<'py>(
    py: Python<'py>,
    tool_name: &str,
    found: &Findings,
    max_message_bytes: usize,
    paths: Option<&KeyTable>,
    messages: Option<&MessageTable>,
) -> PyResult<Option<Report<'py>>> {
    if found.total == 0 {
        return Ok(None);
    }
    let borrowed: Vec<IssueText<'_>> = found
        .issues
        .iter()
        .map(|issue| {
            (
                issue.path.as_str(),
                &*issue.keyword,
                issue.message.as_str(),
                issue.fixed,
            )
        })
        .collect();
    report(
        py,
        tool_name,
        &borrowed,
        found.total,
        found.listing,
        max_message_bytes,
        paths,
        messages,
    )
    .map(Some)
}

/// The `ErrorInfo` a model sees for `issues` (`total` in all) of tool `tool_name`.
/// The texts come from any adapter (a message may quote the model's value): a lone surrogate,
/// which has no UTF-8 spelling, is written as its escape (`message_text`).
#[pyfunction]
#[pyo3(signature = (tool_name, issues, total, max_message_bytes = 1024))]
pub(crate) fn format_issue_report<'py>(
    py: Python<'py>,
    tool_name: &Bound<'py, PyString>,
    issues: Vec<(
        Bound<'py, PyString>,
        Bound<'py, PyString>,
        Bound<'py, PyString>,
    )>,
    total: usize,
    max_message_bytes: usize,
) -> PyResult<Bound<'py, PyAny>> {
    let texts = issues
        .iter()
        .map(|(path, keyword, message)| {
            Ok([
                message_text(path)?,
                message_text(keyword)?,
                message_text(message)?,
            ])
        })
        .collect::<PyResult<Vec<[Cow<'_, str>; 3]>>>()?;
    let borrowed: Vec<IssueText<'_>> = texts
        .iter()
        .map(|[path, keyword, message]| (&**path, &**keyword, &**message, false))
        .collect();
    let report = report(
        py,
        &message_text(tool_name)?,
        &borrowed,
        total,
        Listing::Every,
        max_message_bytes,
        None,
        None,
    )?;
    invalid_arguments_error(py, report)
}

/// The base of `prism_tools.validation.ToolParameterValidator`: once the validator is bound to
/// a core schema validator, a call for a tool with a schema is answered here, the compiled
/// schema found and the report written in the same crossing, with no Python frame; a schema the
/// guards refuse is answered by `prism_tools.validation._guard_refusal`. Every other call (no
/// schema, another adapter) goes to the subclass's `_check`.
#[pyclass(
    subclass,
    frozen,
    module = "prism_tools._core",
    name = "ToolSchemaCheck"
)]
pub(crate) struct PyToolSchemaCheck {
    /// The core, the message limit and the issue limit, set once by `_use_core`.
    core: std::sync::OnceLock<(Py<PySchemaValidator>, usize, usize)>,
}

#[pymethods]
impl PyToolSchemaCheck {
    /// Takes (and leaves to the subclass's `__init__`) whatever the subclass is called with.
    #[new]
    #[pyo3(signature = (*_args, **_kwargs))]
    fn new(_args: &Bound<'_, PyTuple>, _kwargs: Option<&Bound<'_, PyDict>>) -> Self {
        Self {
            core: std::sync::OnceLock::new(),
        }
    }

    /// Answers calls for tools with a schema from `core` from now on; allowed once.
    fn _use_core(
        &self,
        core: Py<PySchemaValidator>,
        max_message_bytes: usize,
        max_issues: usize,
    ) -> PyResult<()> {
        self.core
            .set((core, max_message_bytes, max_issues))
            .map_err(|_| PyValueError::new_err("this validator is bound to a core already"))
    }

    /// `None` when `args` fit `tool.parameters`, else the `ErrorInfo` a model sees.
    #[pyo3(signature = (tool, args, context = None))]
    fn __call__<'py>(
        slf: &Bound<'py, Self>,
        tool: &Bound<'py, PyAny>,
        args: &Bound<'py, PyAny>,
        context: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let py = slf.py();
        if let Some((core, max_message_bytes, max_issues)) = slf.get().core.get() {
            let schema = tool.getattr(intern!(py, "parameters"))?;
            if !schema.is_none() {
                let name = tool.getattr(intern!(py, "name"))?;
                // The name only goes into the message, so one that is not text is shown lossily.
                let name = name.cast::<PyString>()?.to_string_lossy();
                match core
                    .get()
                    .report_with(&schema, args, &name, *max_message_bytes, *max_issues)
                {
                    // A refused schema is answered as `_check` answers it, without checking
                    // the schema a second time.
                    Err(err) if err.is_instance_of::<SchemaGuardError>(py) => {
                        static GUARD_REFUSAL: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
                        let refusal =
                            GUARD_REFUSAL.import(py, "prism_tools.validation", "_guard_refusal")?;
                        return refusal.call1((tool, err.into_value(py))).map(Some);
                    }
                    answer => return answer,
                }
            }
        }
        let answer = slf.call_method1(intern!(py, "_check"), (tool, args, context))?;
        Ok((!answer.is_none()).then_some(answer))
    }
}
