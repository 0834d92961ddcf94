//! Python bindings for schema guards, the compiled-schema cache and raw argument parsing.
//!
//! JSON crosses as text or as plain Python containers, converted here once, iteratively bounded
//! by the depth limits, into `serde_json::Value`; parsed argument text becomes Python objects in
//! the same crossing that parsed and (optionally) validated it.

#![allow(clippy::needless_pass_by_value)]

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde_json::{Map, Number, Value};

use crate::bindings::{ArgumentsError, SchemaGuardError, type_name};
use crate::guards::{ALL_LIMITS, GuardViolation, Limits, scan_json};
use crate::schema::{Issue, SchemaCache, collect_issues};

/// Why a Python value could not become JSON.
enum Conversion {
    TooDeep,
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
        return Err(Conversion::TooDeep);
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

/// Builds Python objects from a parsed value (depth already bounded by the guards).
fn to_python<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(flag) => PyBool::new(py, *flag).to_owned().into_any(),
        Value::Number(number) => {
            if let Some(small) = number.as_i64() {
                small.into_pyobject(py)?.into_any()
            } else if let Some(large) = number.as_u64() {
                large.into_pyobject(py)?.into_any()
            } else {
                number
                    .as_f64()
                    .unwrap_or(f64::NAN)
                    .into_pyobject(py)?
                    .into_any()
            }
        }
        Value::String(text) => PyString::new(py, text).into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(to_python(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(map) => {
            let dict = PyDict::new(py);
            for (key, item) in map {
                dict.set_item(PyString::new(py, key), to_python(py, item)?)?;
            }
            dict.into_any()
        }
    })
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

fn issues_to_python(issues: Vec<Issue>) -> Vec<(String, String, String)> {
    issues
        .into_iter()
        .map(|issue| (issue.path, issue.keyword, issue.message))
        .collect()
}

/// Schema guards, a compiled-schema LRU and argument parsing under one set of limits.
#[pyclass(frozen, module = "prism_tools._core", name = "SchemaValidator")]
pub(crate) struct PySchemaValidator {
    cache: SchemaCache,
}

impl PySchemaValidator {
    fn limits(&self) -> &Limits {
        self.cache.limits()
    }

    /// Guards and parses argument text into a value that must be a JSON object.
    fn parse_value(&self, data: &[u8]) -> PyResult<Value> {
        let limits = self.limits();
        if let Err(violation) =
            scan_json(data, limits.max_argument_bytes, limits.max_argument_depth)
        {
            return Err(arguments_error(
                format!("Tool arguments were refused: {violation}"),
                violation.code(),
            ));
        }
        if data.iter().all(u8::is_ascii_whitespace) {
            return Ok(Value::Object(Map::new()));
        }
        let mut deserializer = serde_json::Deserializer::from_slice(data);
        // Depth is already bounded by `scan_json`, far below what would strain the stack.
        deserializer.disable_recursion_limit();
        let value = serde::Deserialize::deserialize(&mut deserializer)
            .and_then(|value: Value| deserializer.end().map(|()| value))
            .map_err(|err| {
                arguments_error(
                    format!(
                        "Tool arguments are not valid JSON: {err}. Send one complete JSON object."
                    ),
                    "invalid_json",
                )
            })?;
        if !value.is_object() {
            return Err(arguments_error(
                "Tool arguments must be a JSON object".into(),
                "not_an_object",
            ));
        }
        Ok(value)
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

    /// Runs the guards, compiles (or finds) the validator and returns its cache key.
    fn compile(&self, py: Python<'_>, schema: &Bound<'_, PyAny>) -> PyResult<u64> {
        let limits = *self.limits();
        let value = if schema.is_instance_of::<PyString>() || schema.is_instance_of::<PyBytes>() {
            let data = text_bytes(schema)?;
            if data.len() > limits.max_schema_bytes {
                return Err(guard_error(&GuardViolation::SchemaTooLarge {
                    bytes: data.len(),
                    limit: limits.max_schema_bytes,
                }));
            }
            if scan_json(data, usize::MAX, limits.max_schema_depth).is_err() {
                return Err(guard_error(&GuardViolation::SchemaTooDeep {
                    limit: limits.max_schema_depth,
                    path: "(text)".into(),
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
            match to_value(schema, 0, limits.max_schema_depth, &mut path) {
                Ok(value) => value,
                Err(Conversion::TooDeep) => {
                    return Err(guard_error(&GuardViolation::SchemaTooDeep {
                        limit: limits.max_schema_depth,
                        path: "(value)".into(),
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
        py.detach(|| self.cache.compile(&value, &canonical))
            .map_err(|violation| guard_error(&violation))
    }

    /// Issues of `instance` against the validator under `key` (empty when valid), or None when
    /// that validator has been evicted and must be compiled again.
    #[pyo3(signature = (key, instance, max_issues = 64))]
    fn validate(
        &self,
        key: u64,
        instance: &Bound<'_, PyAny>,
        max_issues: usize,
    ) -> Option<Vec<(String, String, String)>> {
        let entry = self.cache.get(key)?;
        let mut path = String::new();
        let value = match to_value(instance, 0, self.limits().max_argument_depth, &mut path) {
            Ok(value) => value,
            Err(Conversion::TooDeep) => {
                let violation = GuardViolation::ArgumentsTooDeep {
                    limit: self.limits().max_argument_depth,
                };
                return Some(vec![(
                    String::new(),
                    "max_argument_depth".into(),
                    violation.to_string(),
                )]);
            }
            Err(Conversion::NotJson { path, what }) => {
                return Some(vec![(path, "json".into(), format!("{what} is not JSON"))]);
            }
        };
        Some(issues_to_python(collect_issues(
            &entry.validator,
            &value,
            max_issues,
        )))
    }

    /// Parses argument text (guards first) into a dict; raises `ArgumentsError`.
    fn parse<'py>(&self, py: Python<'py>, text: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let value = self.parse_value(text_bytes(text)?)?;
        to_python(py, &value)
    }

    /// Parses argument text and validates it in one crossing: `(dict, issues)`, with issues None
    /// when the validator under `key` has been evicted.
    #[pyo3(signature = (key, text, max_issues = 64))]
    #[allow(clippy::type_complexity)]
    fn parse_and_validate<'py>(
        &self,
        py: Python<'py>,
        key: u64,
        text: &Bound<'py, PyAny>,
        max_issues: usize,
    ) -> PyResult<(Bound<'py, PyAny>, Option<Vec<(String, String, String)>>)> {
        let value = self.parse_value(text_bytes(text)?)?;
        let issues = self
            .cache
            .get(key)
            .map(|entry| issues_to_python(collect_issues(&entry.validator, &value, max_issues)));
        Ok((to_python(py, &value)?, issues))
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
