//! Python bindings for schema guards, the compiled-schema cache and raw argument parsing.
//!
//! JSON crosses as text or as plain Python containers, converted here once, iteratively bounded
//! by the depth limits, into `serde_json::Value`; parsed argument text becomes Python objects in
//! the same crossing that parsed and (optionally) validated it.

#![allow(clippy::needless_pass_by_value)]

use std::sync::Arc;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde_json::{Map, Number, Value};

use crate::bindings::{ArgumentsError, SchemaGuardError, type_name};
use crate::guards::{ALL_LIMITS, GuardViolation, Limits, scan_json};
use crate::schema::{CompiledSchema, Issue, SchemaCache, collect_issues};
use jsonschema::json::{PendingErrorScope, Pyo3, probe_root, take_pending_error};

/// Nesting allowed while reading a schema: one past the hard ceiling, so the guard walker sees
/// (and locates) every schema that breaks the configured depth limit.
const CONVERSION_DEPTH: usize = crate::guards::MAX_SCHEMA_DEPTH.ceiling + 1;
/// Raw schema text may be this many times the byte limit before it is refused unread.
const RAW_SCHEMA_SLACK: usize = 4;

/// Why a Python value could not become JSON.
enum Conversion {
    TooDeep { path: String },
    NotJson { path: String, what: String },
}

fn guard_error(violation: &GuardViolation) -> PyErr {
    SchemaGuardError::new_err((violation.to_string(), violation.code()))
}

fn arguments_error(message: String, reason: &str) -> PyErr {
    ArgumentsError::new_err((message, reason.to_owned()))
}

/// Converts plain Python JSON data (dict with str keys, list, tuple, str, int, float, bool,
/// None) into a `Value`, refusing anything deeper than `max_depth` containers.
fn to_value(
    object: &Bound<'_, PyAny>,
    depth: usize,
    max_depth: usize,
    path: &mut String,
) -> Result<Value, Conversion> {
    if let Ok(text) = object.cast::<PyString>() {
        return text
            .to_str()
            .map(|text| Value::String(text.to_owned()))
            .map_err(|_| Conversion::NotJson {
                path: path.clone(),
                what: "a string that is not valid UTF-8".into(),
            });
    }
    if object.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(flag) = object.cast::<PyBool>() {
        return Ok(Value::Bool(flag.is_true()));
    }
    if object.cast::<PyInt>().is_ok() {
        if let Ok(small) = object.extract::<i64>() {
            return Ok(Value::Number(small.into()));
        }
        if let Ok(large) = object.extract::<u64>() {
            return Ok(Value::Number(large.into()));
        }
        // Beyond 64 bits: validate by magnitude (a float keeps integer-ness for `type: integer`).
        let approximate = object.extract::<f64>().unwrap_or(f64::INFINITY);
        return Number::from_f64(approximate)
            .map(Value::Number)
            .ok_or_else(|| Conversion::NotJson {
                path: path.clone(),
                what: "an integer too large for JSON numbers".into(),
            });
    }
    if let Ok(float) = object.cast::<PyFloat>() {
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
    let base = path.len();
    if let Ok(dict) = object.cast::<PyDict>() {
        let mut map = Map::new();
        for (key, item) in dict.iter() {
            let Ok(key) = key.cast::<PyString>() else {
                return Err(Conversion::NotJson {
                    path: path.clone(),
                    what: format!("a {} key", type_name(&key)),
                });
            };
            let key = key.to_str().map_err(|_| Conversion::NotJson {
                path: path.clone(),
                what: "a key that is not valid UTF-8".into(),
            })?;
            path.push('/');
            path.push_str(&key.replace('~', "~0").replace('/', "~1"));
            let value = to_value(&item, depth + 1, max_depth, path)?;
            path.truncate(base);
            map.insert(key.to_owned(), value);
        }
        return Ok(Value::Object(map));
    }
    let items: Vec<Bound<'_, PyAny>> = if let Ok(list) = object.cast::<PyList>() {
        list.iter().collect()
    } else if let Ok(tuple) = object.cast::<PyTuple>() {
        tuple.iter().collect()
    } else {
        return Err(Conversion::NotJson {
            path: path.clone(),
            what: format!("a {}", type_name(object)),
        });
    };
    let mut array = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        path.push('/');
        path.push_str(&index.to_string());
        array.push(to_value(item, depth + 1, max_depth, path)?);
        path.truncate(base);
    }
    Ok(Value::Array(array))
}

fn text_bytes<'a>(text: &'a Bound<'_, PyAny>) -> PyResult<&'a [u8]> {
    if let Ok(text) = text.cast::<PyString>() {
        return text.to_str().map(str::as_bytes);
    }
    if let Ok(bytes) = text.cast::<PyBytes>() {
        return Ok(bytes.as_bytes());
    }
    Err(PyTypeError::new_err(format!(
        "JSON text must be str or bytes, got {}",
        type_name(text)
    )))
}

/// Issues as `(path, keyword, message)` tuples, and the total count (which may be larger).
type Found = (Vec<(String, String, String)>, usize);

fn issues_to_python((issues, total): (Vec<Issue>, usize)) -> Found {
    let described = issues
        .into_iter()
        .map(|issue| (issue.path, issue.keyword, issue.message));
    (described.collect(), total)
}

/// Schema guards, a compiled-schema LRU and argument parsing under one set of limits.
#[pyclass(frozen, module = "prism_tools._core", name = "SchemaValidator")]
pub(crate) struct PySchemaValidator {
    cache: SchemaCache<Pyo3>,
}

/// Whether Python containers nest deeper than `max_depth` (iterative, stops at the first hit).
fn nests_deeper_than<'py>(object: &Bound<'py, PyAny>, max_depth: usize) -> bool {
    // Only containers go on the stack; scalars (most values) are skipped where they are found.
    fn is_container(value: &Bound<'_, PyAny>) -> bool {
        value.is_instance_of::<PyDict>()
            || value.is_instance_of::<PyList>()
            || value.is_instance_of::<PyTuple>()
    }
    if !is_container(object) {
        return false;
    }
    let mut stack: Vec<(Bound<'py, PyAny>, usize)> = vec![(object.clone(), 1)];
    while let Some((node, depth)) = stack.pop() {
        if depth > max_depth {
            return true;
        }
        let mut push = |child: Bound<'py, PyAny>| {
            if is_container(&child) {
                stack.push((child, depth + 1));
            }
        };
        if let Ok(dict) = node.cast::<PyDict>() {
            dict.iter().for_each(|(_, child)| push(child));
        } else if let Ok(list) = node.cast::<PyList>() {
            list.iter().for_each(&mut push);
        } else if let Ok(tuple) = node.cast::<PyTuple>() {
            tuple.iter().for_each(&mut push);
        }
    }
    false
}

/// Validates a Python object in place against a compiled schema.
///
/// `max_depth` is `None` when the instance's depth is already known to be bounded (it was
/// parsed from text that `scan_json` checked).
fn validate_in_place(
    entry: &CompiledSchema<Pyo3>,
    instance: &Bound<'_, PyAny>,
    max_depth: Option<usize>,
    max_issues: usize,
) -> Found {
    // Without references the schema's own guarded depth bounds validation; with them, a deep
    // instance could drive deep recursion, so its depth is checked first.
    if let Some(max_depth) = max_depth.filter(|_| entry.recursive)
        && nests_deeper_than(instance, max_depth)
    {
        let violation = GuardViolation::ArgumentsTooDeep { limit: max_depth };
        return (
            vec![(
                String::new(),
                "max_argument_depth".into(),
                violation.to_string(),
            )],
            1,
        );
    }
    let _scope = PendingErrorScope::enter();
    probe_root(instance.as_borrowed());
    let issues = collect_issues(&entry.validator, instance.as_borrowed(), max_issues);
    if let Some(error) = take_pending_error() {
        // A value that is not JSON (a set, a custom object, a non-string key) somewhere inside.
        let message = Python::attach(|py| error.value(py).to_string());
        let message = format!(
            "arguments are not JSON: {}",
            crate::guards::excerpt(&message, 160)
        );
        return (vec![(String::new(), "json".into(), message)], 1);
    }
    issues_to_python(issues)
}

impl PySchemaValidator {
    fn limits(&self) -> &Limits {
        self.cache.limits()
    }
}

/// Guards and parses argument text straight into Python objects; the result is a dict.
fn parse_arguments<'py>(
    py: Python<'py>,
    limits: &Limits,
    data: &[u8],
) -> PyResult<Bound<'py, PyAny>> {
    if let Err(violation) = scan_json(data, limits.max_argument_bytes, limits.max_argument_depth) {
        return Err(arguments_error(
            format!("Tool arguments were refused: {violation}"),
            violation.code(),
        ));
    }
    if data.iter().all(u8::is_ascii_whitespace) {
        return Ok(PyDict::new(py).into_any());
    }
    let mut deserializer = serde_json::Deserializer::from_slice(data);
    // Depth is already bounded by `scan_json`, far below what would strain the stack.
    deserializer.disable_recursion_limit();
    let parsed = serde::de::DeserializeSeed::deserialize(PythonSeed(py), &mut deserializer)
        .and_then(|value| deserializer.end().map(|()| value))
        .map_err(|err| {
            arguments_error(
                format!("Tool arguments are not valid JSON: {err}. Send one complete JSON object."),
                "invalid_json",
            )
        })?;
    if !parsed.is_instance_of::<PyDict>() {
        return Err(arguments_error(
            "Tool arguments must be a JSON object".into(),
            "not_an_object",
        ));
    }
    Ok(parsed)
}

/// Builds Python objects directly while `serde_json` parses: no intermediate `Value`.
#[derive(Clone, Copy)]
struct PythonSeed<'py>(Python<'py>);

fn python_error<E: serde::de::Error>(err: &PyErr) -> E {
    E::custom(err.to_string())
}

impl<'de, 'py> serde::de::DeserializeSeed<'de> for PythonSeed<'py> {
    type Value = Bound<'py, PyAny>;

    fn deserialize<D: serde::Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de, 'py> serde::de::Visitor<'de> for PythonSeed<'py> {
    type Value = Bound<'py, PyAny>;

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("a JSON value")
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        Ok(self.0.None().into_bound(self.0))
    }

    fn visit_bool<E: serde::de::Error>(self, value: bool) -> Result<Self::Value, E> {
        Ok(PyBool::new(self.0, value).to_owned().into_any())
    }

    fn visit_i64<E: serde::de::Error>(self, value: i64) -> Result<Self::Value, E> {
        let Ok(object) = value.into_pyobject(self.0);
        Ok(object.into_any())
    }

    fn visit_u64<E: serde::de::Error>(self, value: u64) -> Result<Self::Value, E> {
        let Ok(object) = value.into_pyobject(self.0);
        Ok(object.into_any())
    }

    fn visit_f64<E: serde::de::Error>(self, value: f64) -> Result<Self::Value, E> {
        let Ok(object) = value.into_pyobject(self.0);
        Ok(object.into_any())
    }

    fn visit_str<E: serde::de::Error>(self, value: &str) -> Result<Self::Value, E> {
        Ok(PyString::new(self.0, value).into_any())
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let list = PyList::empty(self.0);
        while let Some(item) = seq.next_element_seed(self)? {
            list.append(item).map_err(|err| python_error(&err))?;
        }
        Ok(list.into_any())
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let dict = PyDict::new(self.0);
        while let Some(key) = map.next_key_seed(KeySeed(self.0))? {
            let value = map.next_value_seed(self)?;
            dict.set_item(key, value)
                .map_err(|err| python_error(&err))?;
        }
        Ok(dict.into_any())
    }
}

/// Object keys become Python strings (JSON keys are always strings).
#[derive(Clone, Copy)]
struct KeySeed<'py>(Python<'py>);

impl<'de, 'py> serde::de::DeserializeSeed<'de> for KeySeed<'py> {
    type Value = Bound<'py, PyString>;

    fn deserialize<D: serde::Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'py> serde::de::Visitor<'_> for KeySeed<'py> {
    type Value = Bound<'py, PyString>;

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("an object key")
    }

    fn visit_str<E: serde::de::Error>(self, value: &str) -> Result<Self::Value, E> {
        Ok(PyString::new(self.0, value))
    }
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
            let data = text_bytes(schema)?;
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
            serde::Deserialize::deserialize(&mut deserializer).map_err(|err| {
                guard_error(&GuardViolation::InvalidSchema {
                    reason: format!("not JSON: {err}"),
                })
            })?
        } else {
            let mut path = String::new();
            match to_value(schema, 0, CONVERSION_DEPTH, &mut path) {
                Ok(value) => value,
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
        Ok(PyCompiledSchema { entry, limits })
    }

    /// Parses argument text (guards first) into a dict; raises `ArgumentsError`.
    fn parse<'py>(&self, py: Python<'py>, text: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        parse_arguments(py, self.limits(), text_bytes(text)?)
    }

    /// `(hits, misses, maxsize, currsize)` of the compiled-schema cache.
    fn cache_info(&self) -> (u64, u64, usize, usize) {
        let info = self.cache.info();
        (info.hits, info.misses, info.maxsize, info.currsize)
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
    entry: Arc<CompiledSchema<Pyo3>>,
    limits: Limits,
}

#[pymethods]
impl PyCompiledSchema {
    /// Issues of `instance` and their count, validated in place; None when it is valid.
    #[pyo3(signature = (instance, max_issues = 64))]
    fn validate(&self, instance: &Bound<'_, PyAny>, max_issues: usize) -> Option<Found> {
        let depth = Some(self.limits.max_argument_depth);
        let found = validate_in_place(&self.entry, instance, depth, max_issues);
        // None for valid: the common answer costs no list and no tuple.
        (found.1 > 0).then_some(found)
    }

    /// Parses argument text (guards first) and validates it, in one crossing:
    /// `(dict, None)` when valid, `(dict, (issues, count))` otherwise.
    #[pyo3(signature = (text, max_issues = 64))]
    #[allow(clippy::type_complexity)]
    fn parse_and_validate<'py>(
        &self,
        py: Python<'py>,
        text: &Bound<'py, PyAny>,
        max_issues: usize,
    ) -> PyResult<(Bound<'py, PyAny>, Option<Found>)> {
        let arguments = parse_arguments(py, &self.limits, text_bytes(text)?)?;
        // Depth is bounded already: parse_arguments ran scan_json under the same limit.
        let found = validate_in_place(&self.entry, &arguments, None, max_issues);
        Ok((arguments, (found.1 > 0).then_some(found)))
    }

    /// Whether the schema holds references (instance depth is then checked before validating).
    #[getter]
    fn recursive(&self) -> bool {
        self.entry.recursive
    }
}
