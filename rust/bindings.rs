//! The `prism_tools._core` extension module. Every class is frozen and holds Rust data only, so
//! nothing here needs GC traversal and every object is safe to share between threads.

// PyO3 extracts sequence arguments into owned `Vec`s; taking them by value is the binding's shape.
#![allow(clippy::needless_pass_by_value)]

use std::borrow::Cow;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use pyo3::exceptions::{PyOverflowError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyFrozenSet, PyList, PyString};

use crate::errors::CoreError;
use crate::filter::{FilterSpec, ToolFilter};
use crate::redact::{MatcherError, SecretMatcher};
use crate::registry::{CallCheck, DuplicatePolicy, Registry};

pyo3::create_exception!(
    _core,
    PrismError,
    pyo3::exceptions::PyException,
    "Base class of every error prism-tools raises on purpose."
);
pyo3::create_exception!(
    _core,
    DuplicateToolError,
    PrismError,
    "A tool name registered twice under the \"error\" policy."
);
pyo3::create_exception!(
    _core,
    SchemaGuardError,
    PrismError,
    "A JSON Schema exceeded a guard limit, used something refused, or could not be compiled."
);
pyo3::create_exception!(
    _core,
    ArgumentsError,
    PrismError,
    "Tool argument text that is not one JSON object within the limits."
);

impl From<CoreError> for PyErr {
    fn from(err: CoreError) -> Self {
        match err {
            CoreError::DuplicateTool { .. } => DuplicateToolError::new_err(err.to_string()),
            CoreError::InvalidName { .. } => PyValueError::new_err(err.to_string()),
            CoreError::RegistryFull => PyOverflowError::new_err(err.to_string()),
        }
    }
}

impl From<MatcherError> for PyErr {
    fn from(err: MatcherError) -> Self {
        PyValueError::new_err(err.to_string())
    }
}

/// `dispatch` verdict codes returned by `Registry.check` (a slot is returned as itself).
const CHECK_UNKNOWN: i64 = -1;
const CHECK_DENIED: i64 = -2;
const CHECK_NOT_OBJECT: i64 = -3;

fn poisoned() -> PyErr {
    PyRuntimeError::new_err("tool registry lock poisoned by an earlier panic")
}

/// Why a name holding a lone surrogate (half of a UTF-16 pair, which a JSON decoder lets through
/// from `"\ud800"`) is refused: it has no UTF-8 spelling, so no tool can carry it.
const LONE_SURROGATE_NAME: &str = "the name holds a lone surrogate, which is not Unicode text";

/// The text of a tool name, or `None` when it holds a lone surrogate: such a name is never
/// registered and never listed in a filter, so a lookup of it finds nothing.
fn name_text<'a>(name: &'a Bound<'_, PyString>) -> Option<&'a str> {
    name.to_str().ok()
}

/// Reads an iterable of tool names, refusing a bare string (it would iterate by character).
fn names_from(value: Option<&Bound<'_, PyAny>>, field: &str) -> PyResult<Vec<String>> {
    let Some(value) = value else {
        return Ok(Vec::new());
    };
    if value.is_none() {
        return Ok(Vec::new());
    }
    if value.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(format!(
            "ToolFilter {field} must be a collection of tool names, not a single string"
        )));
    }
    let iter = value.try_iter().map_err(|_| {
        PyTypeError::new_err(format!(
            "ToolFilter {field} must be a collection of tool names, got {}",
            type_name(value)
        ))
    })?;
    let mut names = Vec::new();
    for item in iter {
        let item = item?;
        let Ok(name) = item.cast::<PyString>() else {
            return Err(PyTypeError::new_err(format!(
                "ToolFilter {field} names must be strings, got {}",
                type_name(&item)
            )));
        };
        // Dropping a name it cannot hold would widen an allow list; refusing it is the safe side.
        let name = name_text(name).ok_or_else(|| {
            PyValueError::new_err(format!(
                "ToolFilter {field} names must be Unicode text; one holds a lone surrogate"
            ))
        })?;
        names.push(name.to_owned());
    }
    Ok(names)
}

pub(crate) fn type_name(value: &Bound<'_, PyAny>) -> String {
    value
        .get_type()
        .name()
        .map_or_else(|_| "object".to_owned(), |name| name.to_string())
}

/// A duplicate policy as given: a known one, or any other string (one holding a lone surrogate
/// included, which is refused with the same `ValueError` rather than a `UnicodeEncodeError`).
enum PolicyName {
    Known(DuplicatePolicy),
    Unknown,
}

impl<'a, 'py> FromPyObject<'a, 'py> for PolicyName {
    type Error = PyErr;

    fn extract(value: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        let Ok(text) = value.cast::<PyString>() else {
            return Err(PyTypeError::new_err(format!(
                "duplicate must be \"replace\" or \"error\", got {}",
                type_name(&value)
            )));
        };
        Ok(match text.to_str() {
            Ok("replace") => Self::Known(DuplicatePolicy::Replace),
            Ok("error") => Self::Known(DuplicatePolicy::Error),
            _ => Self::Unknown,
        })
    }
}

/// Insertion-ordered tool name table; the Python `ToolRegistry` keeps the definitions by slot.
#[pyclass(frozen, module = "prism_tools._core", name = "Registry")]
struct PyRegistry {
    inner: RwLock<Registry>,
}

impl PyRegistry {
    fn read(&self) -> PyResult<RwLockReadGuard<'_, Registry>> {
        self.inner.read().map_err(|_| poisoned())
    }

    fn write(&self) -> PyResult<RwLockWriteGuard<'_, Registry>> {
        self.inner.write().map_err(|_| poisoned())
    }
}

#[pymethods]
impl PyRegistry {
    #[new]
    #[pyo3(
        signature = (duplicate = PolicyName::Known(DuplicatePolicy::Replace)),
        text_signature = "(duplicate='replace')"
    )]
    fn new(duplicate: PolicyName) -> PyResult<Self> {
        let PolicyName::Known(policy) = duplicate else {
            return Err(PyValueError::new_err(
                "duplicate must be \"replace\" or \"error\"",
            ));
        };
        Ok(Self {
            inner: RwLock::new(Registry::new(policy)),
        })
    }

    /// The duplicate policy: "replace" or "error".
    #[getter]
    fn duplicate(&self) -> PyResult<&'static str> {
        Ok(match self.read()?.policy() {
            DuplicatePolicy::Replace => "replace",
            DuplicatePolicy::Error => "error",
        })
    }

    /// Adds or replaces `name`, and puts `tool` in its slot of `tools` (the facade's
    /// definitions, one per slot); returns `(slot, replaced)`. Both change in this one call:
    /// Python runs no other code in between (not even a signal handler), so an interrupted
    /// registration can never leave a name without its tool or a tool in another's slot.
    fn insert(
        &self,
        name: &Bound<'_, PyString>,
        tool: &Bound<'_, PyAny>,
        tools: &Bound<'_, PyList>,
    ) -> PyResult<(u32, bool)> {
        let text = name_text(name).ok_or(CoreError::InvalidName {
            reason: LONE_SURROGATE_NAME,
        })?;
        // An exact list: a subclass's own methods would run while the table is locked.
        if !tools.is_exact_instance_of::<PyList>() {
            return Err(PyTypeError::new_err(
                "tools must be a list, not a subclass of one",
            ));
        }
        let mut registry = self.write()?;
        if tools.len() != registry.len() {
            return Err(PyRuntimeError::new_err(
                "the tool list does not match the name table",
            ));
        }
        // Made room for first: appending is the one step here that can fail (memory), and it
        // fails before the name table changes.
        tools.append(tool)?;
        let insertion = match registry.insert(text) {
            Ok(insertion) => insertion,
            Err(err) => {
                tools.del_item(tools.len() - 1)?;
                return Err(err.into());
            }
        };
        let slot = insertion.slot();
        let replaced = matches!(insertion, crate::registry::Insertion::Replaced(_));
        // The replaced tool is held here until the lock is released: freeing it may run its
        // code, which may look a tool up.
        let mut previous = None;
        if replaced {
            tools.del_item(tools.len() - 1)?;
            previous = Some(tools.get_item(slot as usize)?);
            tools.set_item(slot as usize, tool)?;
        }
        drop(registry);
        drop(previous);
        Ok((slot, replaced))
    }

    /// The slot of `name`, or None.
    fn slot(&self, name: &Bound<'_, PyString>) -> PyResult<Option<u32>> {
        let Some(name) = name_text(name) else {
            return Ok(None);
        };
        Ok(self.read()?.slot(name))
    }

    /// The dispatcher's step 4 in one crossing: lookup, filter, and whether `arguments` is a
    /// JSON object (a dict whose keys are all strings). Returns the slot when all pass, -1 when
    /// unknown, -2 when denied, and `-3 - slot` when the tool is permitted but the arguments are
    /// not a JSON object (text to parse, or anything else).
    #[pyo3(signature = (name, filter, arguments))]
    fn check_call(
        &self,
        name: &Bound<'_, PyString>,
        filter: Option<&PyToolFilter>,
        arguments: &Bound<'_, PyAny>,
    ) -> PyResult<i64> {
        let Some(name) = name_text(name) else {
            return Ok(CHECK_UNKNOWN);
        };
        let slot = match self.read()?.check(name, filter.map(|f| &f.inner)) {
            CallCheck::Permitted(slot) => i64::from(slot),
            CallCheck::Unknown => return Ok(CHECK_UNKNOWN),
            CallCheck::Denied(_) => return Ok(CHECK_DENIED),
        };
        // Iterating the dict itself: `keys()` would build a list on every call.
        let is_object = arguments.cast_exact::<PyDict>().is_ok_and(|dict| {
            dict.iter()
                .all(|(key, _)| key.is_exact_instance_of::<PyString>())
        });
        Ok(if is_object {
            slot
        } else {
            CHECK_NOT_OBJECT - slot
        })
    }

    /// Names in registration order.
    fn names(&self) -> PyResult<Vec<String>> {
        Ok(self
            .read()?
            .names()
            .iter()
            .map(ToString::to_string)
            .collect())
    }

    /// Slots of the registered tools the filter permits, in registration order.
    fn permitted_slots(&self, filter: &PyToolFilter) -> PyResult<Vec<u32>> {
        Ok(self.read()?.permitted_slots(&filter.inner))
    }

    fn __len__(&self) -> PyResult<usize> {
        Ok(self.read()?.len())
    }

    fn __contains__(&self, name: &Bound<'_, PyAny>) -> PyResult<bool> {
        let Ok(name) = name.cast::<PyString>() else {
            return Ok(false);
        };
        let Some(name) = name_text(name) else {
            return Ok(false);
        };
        Ok(self.read()?.slot(name).is_some())
    }
}

/// A compiled allow/deny filter (or the conjunction of several).
#[pyclass(frozen, module = "prism_tools", name = "ToolFilter")]
struct PyToolFilter {
    inner: ToolFilter,
}

#[pymethods]
impl PyToolFilter {
    #[new]
    #[pyo3(signature = (allow = None, deny = None))]
    fn new(allow: Option<&Bound<'_, PyAny>>, deny: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let spec = FilterSpec {
            allow: names_from(allow, "allow")?,
            deny: names_from(deny, "deny")?,
        };
        Ok(Self {
            inner: ToolFilter::compile([spec]),
        })
    }

    /// One filter equivalent to applying all of `filters`: any deny wins, every allow must hold.
    #[staticmethod]
    fn all_of(filters: Vec<PyRef<'_, PyToolFilter>>) -> Self {
        let specs = filters.iter().flat_map(|filter| {
            let deny: Vec<String> = filter
                .inner
                .denied()
                .iter()
                .map(ToString::to_string)
                .collect();
            let mut specs = vec![FilterSpec {
                allow: Vec::new(),
                deny,
            }];
            specs.extend(filter.inner.allow_lists().iter().map(|allow| FilterSpec {
                allow: allow.iter().map(ToString::to_string).collect(),
                deny: Vec::new(),
            }));
            specs
        });
        Self {
            inner: ToolFilter::compile(specs),
        }
    }

    /// Denied names.
    #[getter]
    fn deny<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyFrozenSet>> {
        PyFrozenSet::new(py, self.inner.denied().iter().map(AsRef::<str>::as_ref))
    }

    /// The names every allow list admits, or None when no allow list restricts anything.
    #[getter]
    fn allow<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyFrozenSet>>> {
        let lists = self.inner.allow_lists();
        let Some((first, rest)) = lists.split_first() else {
            return Ok(None);
        };
        let names = first
            .iter()
            .filter(|name| rest.iter().all(|list| list.binary_search(name).is_ok()));
        PyFrozenSet::new(py, names.map(AsRef::<str>::as_ref)).map(Some)
    }

    /// Whether `name` passes.
    fn permits(&self, name: &Bound<'_, PyString>) -> bool {
        name_text(name).map_or_else(
            || self.inner.permits_unlisted(),
            |name| self.inner.permits(name),
        )
    }

    /// Indexes of the names that pass, in input order (names are read in place, not copied).
    fn apply(&self, names: &Bound<'_, PyAny>) -> PyResult<Vec<u32>> {
        let mut permitted = Vec::new();
        for (index, item) in names.try_iter()?.enumerate() {
            let item = item?;
            let Ok(name) = item.cast::<PyString>() else {
                return Err(PyTypeError::new_err(format!(
                    "tool names must be strings, got {}",
                    type_name(&item)
                )));
            };
            let passes = name_text(name).map_or_else(
                || self.inner.permits_unlisted(),
                |name| self.inner.permits(name),
            );
            if passes {
                permitted.push(u32::try_from(index).map_err(|_| {
                    PyValueError::new_err("at most 4,294,967,295 names can be filtered at once")
                })?);
            }
        }
        Ok(permitted)
    }

    /// True when the filter restricts nothing.
    fn is_permissive(&self) -> bool {
        self.inner.is_permissive()
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other
            .cast::<PyToolFilter>()
            .is_ok_and(|other| other.get().inner == self.inner)
    }

    fn __hash__(&self) -> u64 {
        self.inner.digest()
    }

    fn __repr__(&self) -> String {
        let quote = |names: &[Box<str>]| {
            names
                .iter()
                .map(|name| format!("{name:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let allows: Vec<String> = self
            .inner
            .allow_lists()
            .iter()
            .map(|list| format!("[{}]", quote(list)))
            .collect();
        format!(
            "ToolFilter(allow={}, deny=[{}])",
            allows.join(" & "),
            quote(self.inner.denied())
        )
    }
}

/// One automaton over a fixed set of secrets.
#[pyclass(frozen, module = "prism_tools._core", name = "SecretMatcher")]
struct PySecretMatcher {
    inner: SecretMatcher,
}

#[pymethods]
impl PySecretMatcher {
    #[new]
    #[pyo3(signature = (secrets, *, replacement = None))]
    fn new(
        secrets: Vec<PyBackedSecret>,
        replacement: Option<&Bound<'_, PyString>>,
    ) -> PyResult<Self> {
        let secrets: Vec<&[u8]> = secrets.iter().map(|secret| secret.0.as_slice()).collect();
        let replacement = replacement.map_or(Ok("[REDACTED]"), |replacement| {
            replacement.to_str().map_err(|_| {
                PyValueError::new_err(
                    "the replacement must be Unicode text: it holds a lone surrogate",
                )
            })
        })?;
        Ok(Self {
            inner: SecretMatcher::new(&secrets, replacement)?,
        })
    }

    /// The text with every secret replaced, or None when it holds none.
    fn replace<'py>(&self, text: &Bound<'py, PyString>) -> PyResult<Option<Bound<'py, PyString>>> {
        let py = text.py();
        if let Ok(text) = text.to_str() {
            return Ok(self
                .inner
                .replace(text)
                .map(|replaced| PyString::new(py, &replaced)));
        }
        let bytes = surrogatepass_bytes(text)?;
        self.inner
            .replace_bytes(bytes.as_bytes())
            .map(|replaced| surrogatepass_text(&PyBytes::new(py, &replaced)))
            .transpose()
    }

    /// Whether the text holds any secret.
    fn contains(&self, text: &Bound<'_, PyString>) -> PyResult<bool> {
        if let Ok(text) = text.to_str() {
            return Ok(self.inner.contains(text.as_bytes()));
        }
        Ok(self.inner.contains(surrogatepass_bytes(text)?.as_bytes()))
    }

    /// Whether JSON bytes hold any secret, raw or JSON-escaped.
    fn contains_json(&self, data: &Bound<'_, PyBytes>) -> bool {
        self.inner.contains_json(data.as_bytes())
    }

    /// The replacement text.
    #[getter]
    fn replacement(&self) -> &str {
        self.inner.replacement()
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }
}

/// A secret taken from Python; only strings are secrets. Its bytes are UTF-8, or the
/// surrogatepass bytes of a string holding a lone surrogate (as `os.environ` gives for a value
/// that is not UTF-8), so it is matched wherever the same string stands.
struct PyBackedSecret(Vec<u8>);

impl<'a, 'py> FromPyObject<'a, 'py> for PyBackedSecret {
    type Error = PyErr;

    fn extract(value: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        let Ok(text) = value.cast::<PyString>() else {
            return Err(PyTypeError::new_err(format!(
                "secrets must be strings, got {}",
                type_name(&value)
            )));
        };
        if let Ok(text) = text.to_str() {
            return Ok(Self(text.as_bytes().to_vec()));
        }
        Ok(Self(surrogatepass_bytes(&text)?.as_bytes().to_vec()))
    }
}

/// The UTF-8 bytes of a string, what it cannot spell handled by the codec error handler
/// `errors`. Encoded by `str.encode` itself, called on the `str` type: a subclass's own `encode`
/// never runs (one could hide a secret from the redactor).
fn utf8_bytes<'py>(
    text: &Bound<'py, PyString>,
    errors: &Bound<'py, PyString>,
) -> PyResult<Bound<'py, PyBytes>> {
    let py = text.py();
    Ok(py
        .get_type::<PyString>()
        .call_method1(
            pyo3::intern!(py, "encode"),
            (text, pyo3::intern!(py, "utf-8"), errors),
        )?
        .cast_into::<PyBytes>()?)
}

/// The UTF-8 bytes of a string that holds lone surrogates, each surrogate written as its three
/// bytes ("surrogatepass"), so the string can be matched byte for byte and rebuilt exactly.
pub(crate) fn surrogatepass_bytes<'py>(
    text: &Bound<'py, PyString>,
) -> PyResult<Bound<'py, PyBytes>> {
    utf8_bytes(text, pyo3::intern!(text.py(), "surrogatepass"))
}

/// The text of a string for a message: itself when it is Unicode text, else with each lone
/// surrogate (which has no UTF-8 spelling) written as its escape, `\ud800`.
pub(crate) fn message_text<'a>(text: &'a Bound<'_, PyString>) -> PyResult<Cow<'a, str>> {
    if let Ok(text) = text.to_str() {
        return Ok(Cow::Borrowed(text));
    }
    let escaped = utf8_bytes(text, pyo3::intern!(text.py(), "backslashreplace"))?;
    Ok(Cow::Owned(
        String::from_utf8_lossy(escaped.as_bytes()).into_owned(),
    ))
}

/// The string `surrogatepass_bytes` was made from.
fn surrogatepass_text<'py>(bytes: &Bound<'py, PyBytes>) -> PyResult<Bound<'py, PyString>> {
    PyString::from_encoded_object(bytes.as_any(), Some(c"utf-8"), Some(c"surrogatepass"))
}

/// Most ledger row ids made in one call of `row_ids`.
const MAX_ROW_IDS: usize = 65_536;

/// Ledger row ids `<prefix><n in lowercase hex>` for `n` in `first..first + count`, a block per
/// crossing: the dispatcher hands them out one at a time, and formatting each in Python cost
/// about as much as the rest of building its row.
#[pyfunction]
fn row_ids(prefix: &str, first: u64, count: usize) -> PyResult<Vec<String>> {
    use std::fmt::Write as _;
    if count > MAX_ROW_IDS {
        return Err(PyValueError::new_err(format!(
            "at most {MAX_ROW_IDS} row ids can be made at once, not {count}"
        )));
    }
    let end = u64::try_from(count)
        .ok()
        .and_then(|count| first.checked_add(count))
        .ok_or_else(|| PyOverflowError::new_err("row id counter overflow"))?;
    Ok((first..end)
        .map(|n| {
            let mut id = String::with_capacity(prefix.len() + 16);
            id.push_str(prefix);
            let _ = write!(id, "{n:x}");
            id
        })
        .collect())
}

#[pymodule(gil_used = false)]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("PrismError", py.get_type::<PrismError>())?;
    m.add("DuplicateToolError", py.get_type::<DuplicateToolError>())?;
    m.add("CHECK_UNKNOWN", CHECK_UNKNOWN)?;
    m.add("CHECK_DENIED", CHECK_DENIED)?;
    m.add("CHECK_NOT_OBJECT", CHECK_NOT_OBJECT)?;
    m.add_class::<PyRegistry>()?;
    m.add_class::<PyToolFilter>()?;
    m.add_class::<PySecretMatcher>()?;
    m.add_function(pyo3::wrap_pyfunction!(row_ids, m)?)?;
    m.add("SchemaGuardError", py.get_type::<SchemaGuardError>())?;
    m.add("ArgumentsError", py.get_type::<ArgumentsError>())?;
    m.add_class::<crate::bindings_schema::PySchemaValidator>()?;
    m.add_class::<crate::bindings_schema::PyCompiledSchema>()?;
    m.add_class::<crate::bindings_schema::PyToolSchemaCheck>()?;
    m.add_function(pyo3::wrap_pyfunction!(
        crate::bindings_schema::limit_table,
        m
    )?)?;
    m.add_function(pyo3::wrap_pyfunction!(
        crate::bindings_schema::format_issue_report,
        m
    )?)?;
    m.add(
        "ToolSearchCapacityError",
        py.get_type::<crate::bindings_search::ToolSearchCapacityError>(),
    )?;
    m.add_class::<crate::bindings_search::PyToolSearchIndex>()?;
    m.add_class::<crate::bindings_search::PySearchHit>()?;
    m.add("SEARCH_DEFAULT_TOP_K", crate::search::DEFAULT_TOP_K)?;
    m.add("SEARCH_MAX_TOP_K", crate::search::MAX_TOP_K)?;
    m.add(
        "SEARCH_DEFAULT_MAX_INDEXED",
        crate::search::DEFAULT_MAX_INDEXED,
    )?;
    m.add(
        "SEARCH_MAX_INDEXED_CEILING",
        crate::search::MAX_INDEXED_CEILING,
    )?;
    m.add(
        "SEARCH_DEFAULT_MAX_QUERY_BYTES",
        crate::search::DEFAULT_MAX_QUERY_BYTES,
    )?;
    m.add(
        "SEARCH_MAX_QUERY_BYTES_CEILING",
        crate::search::MAX_QUERY_BYTES_CEILING,
    )?;
    Ok(())
}
