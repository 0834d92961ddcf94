//! `ToolSearchIndex` and `SearchHit`: the Python face of [`crate::search`].

use std::sync::Arc;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::pyclass::CompareOp;
use pyo3::types::{PyInt, PyList, PyString, PyTuple};

use crate::bindings::{PrismError, surrogatepass_bytes, type_name};
use crate::search::{
    DEFAULT_MAX_INDEXED, DEFAULT_MAX_QUERY_BYTES, DEFAULT_TOP_K, MAX_INDEXED_CEILING,
    MAX_QUERY_BYTES_CEILING, MAX_TOP_K, SearchError, SearchIndex,
};

pyo3::create_exception!(
    _core,
    ToolSearchCapacityError,
    PrismError,
    "More tools than a tool search index may hold."
);

impl From<SearchError> for PyErr {
    fn from(err: SearchError) -> Self {
        match err {
            SearchError::TooManyTools { .. } => ToolSearchCapacityError::new_err(err.to_string()),
            _ => PyValueError::new_err(err.to_string()),
        }
    }
}

/// One tool found by a search: its name, its BM25 score and the query words it matched.
#[pyclass(frozen, module = "prism_tools", name = "SearchHit")]
pub(crate) struct PySearchHit {
    name: Py<PyString>,
    score: f64,
    /// The search's distinct query words, shared by all its hits.
    words: Arc<[String]>,
    matched: Box<[u32]>,
}

impl PySearchHit {
    fn matched_words(&self) -> impl Iterator<Item = &str> {
        self.matched
            .iter()
            .map(|&index| self.words[index as usize].as_str())
    }
}

#[pymethods]
impl PySearchHit {
    /// Name of the tool.
    #[getter]
    fn name(&self, py: Python<'_>) -> Py<PyString> {
        self.name.clone_ref(py)
    }

    /// BM25 score; higher is better. Comparable only within one index.
    #[getter]
    fn score(&self) -> f64 {
        self.score
    }

    /// Lowercased query words that matched this tool, in query order.
    #[getter]
    fn matched<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.matched_words().collect::<Vec<_>>())
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let matched = self.matched(py)?.repr()?;
        let name = self.name.bind(py).repr()?;
        Ok(format!(
            "SearchHit(name={name}, score={}, matched={matched})",
            self.score
        ))
    }

    fn __richcmp__(&self, other: &Bound<'_, PyAny>, op: CompareOp) -> PyResult<Py<PyAny>> {
        let py = other.py();
        let Ok(other) = other.cast::<PySearchHit>() else {
            return Ok(py.NotImplemented());
        };
        let other = other.get();
        let equal = self.score.total_cmp(&other.score).is_eq()
            && self.name.bind(py).to_string_lossy() == other.name.bind(py).to_string_lossy()
            && self.matched_words().eq(other.matched_words());
        match op {
            CompareOp::Eq => Ok(equal.into_pyobject(py)?.to_owned().into_any().unbind()),
            CompareOp::Ne => Ok((!equal).into_pyobject(py)?.to_owned().into_any().unbind()),
            _ => Ok(py.NotImplemented()),
        }
    }
}

/// A BM25 index over tool names and descriptions, built once, searched many times.
#[pyclass(frozen, module = "prism_tools", name = "ToolSearchIndex")]
pub(crate) struct PyToolSearchIndex {
    index: SearchIndex,
    /// The tools' own name strings, handed back in hits without copying.
    names: Vec<Py<PyString>>,
    max_indexed: usize,
    max_query_bytes: usize,
}

/// Reads an integer option that must lie in `1..=ceiling`: a bool or non-int is a `TypeError`,
/// any int outside the range (however large or negative) a `ValueError` naming the value.
fn size_option(value: &Bound<'_, PyAny>, option: &str, ceiling: usize) -> PyResult<usize> {
    if value.is_instance_of::<pyo3::types::PyBool>() || !value.is_instance_of::<PyInt>() {
        return Err(PyTypeError::new_err(format!(
            "{option} must be an int, got {}",
            type_name(value)
        )));
    }
    match value.extract::<i64>().map(usize::try_from) {
        Ok(Ok(number)) if (1..=ceiling).contains(&number) => Ok(number),
        _ => Err(PyValueError::new_err(format!(
            "{option} must be between 1 and {ceiling}, got {}",
            value.repr()?
        ))),
    }
}

/// The `ToolDefinition`s of a registry (its `list()`) or of any iterable of definitions.
fn tool_items<'py>(tools: &Bound<'py, PyAny>) -> PyResult<Vec<Bound<'py, PyAny>>> {
    if tools.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(
            "ToolSearchIndex takes ToolDefinitions or a ToolRegistry, not a string",
        ));
    }
    let source = match tools.getattr_opt("list")? {
        Some(list) if list.is_callable() && !tools.is_instance_of::<PyList>() => list.call0()?,
        _ => tools.clone(),
    };
    let Ok(iter) = source.try_iter() else {
        return Err(PyTypeError::new_err(format!(
            "ToolSearchIndex takes ToolDefinitions or a ToolRegistry, got {}",
            type_name(tools)
        )));
    };
    iter.collect()
}

fn string_attribute<'py>(
    item: &Bound<'py, PyAny>,
    attribute: &str,
    position: usize,
) -> PyResult<Bound<'py, PyString>> {
    let Some(value) = item.getattr_opt(attribute)? else {
        return Err(PyTypeError::new_err(format!(
            "ToolSearchIndex item {position} is a {}, not a ToolDefinition (no {attribute})",
            type_name(item)
        )));
    };
    value.cast_into::<PyString>().map_err(|err| {
        PyTypeError::new_err(format!(
            "ToolSearchIndex item {position}: {attribute} must be a string, got {}",
            type_name(&err.into_inner())
        ))
    })
}

impl PyToolSearchIndex {
    /// `__contains__` of a name holding a lone surrogate: it equals only a name that does too,
    /// compared by their "surrogatepass" bytes, which spell every code point apart.
    #[cold]
    fn contains_unpaired(&self, py: Python<'_>, name: &Bound<'_, PyString>) -> PyResult<bool> {
        let wanted = surrogatepass_bytes(name)?;
        for known in &self.names {
            let known = known.bind(py);
            if known.to_str().is_err()
                && surrogatepass_bytes(known)?.as_bytes() == wanted.as_bytes()
            {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

#[pymethods]
impl PyToolSearchIndex {
    #[new]
    #[pyo3(signature = (tools = None, *, max_indexed = None, max_query_bytes = None))]
    fn new(
        py: Python<'_>,
        tools: Option<&Bound<'_, PyAny>>,
        max_indexed: Option<&Bound<'_, PyAny>>,
        max_query_bytes: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let max_indexed = match max_indexed {
            Some(value) => size_option(value, "max_indexed", MAX_INDEXED_CEILING)?,
            None => DEFAULT_MAX_INDEXED,
        };
        let max_query_bytes = match max_query_bytes {
            Some(value) => size_option(value, "max_query_bytes", MAX_QUERY_BYTES_CEILING)?,
            None => DEFAULT_MAX_QUERY_BYTES,
        };
        let items = match tools {
            Some(tools) if !tools.is_none() => tool_items(tools)?,
            _ => Vec::new(),
        };
        if items.len() > max_indexed {
            // Refuse before reading every item: a huge catalog costs nothing here.
            return Err(SearchError::TooManyTools {
                count: items.len(),
                cap: max_indexed,
            }
            .into());
        }
        let mut names = Vec::with_capacity(items.len());
        let mut texts = Vec::with_capacity(items.len());
        for (position, item) in items.iter().enumerate() {
            let name = string_attribute(item, "name", position)?;
            let description = string_attribute(item, "description", position)?;
            texts.push((
                name.to_string_lossy().into_owned(),
                description.to_string_lossy().into_owned(),
            ));
            names.push(name.unbind());
        }
        let index = py.detach(|| SearchIndex::build(&texts, max_indexed))?;
        Ok(Self {
            index,
            names,
            max_indexed,
            max_query_bytes,
        })
    }

    /// The best `k` tools for `query`, best first; ties keep index order.
    #[pyo3(signature = (query, k = None))]
    fn search<'py>(
        &self,
        py: Python<'py>,
        query: &Bound<'py, PyAny>,
        k: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyList>> {
        let k = match k {
            Some(value) => size_option(value, "k", MAX_TOP_K)?,
            None => DEFAULT_TOP_K,
        };
        let Ok(query) = query.cast::<PyString>() else {
            return Err(PyTypeError::new_err(format!(
                "search query must be a string, got {}",
                type_name(query)
            )));
        };
        let text = query.to_string_lossy();
        let result = self.index.search(&text, k, self.max_query_bytes)?;
        let words: Arc<[String]> = result.words.into();
        let hits = result.hits.into_iter().map(|hit| {
            Py::new(
                py,
                PySearchHit {
                    name: self.names[hit.doc].clone_ref(py),
                    score: hit.score,
                    words: Arc::clone(&words),
                    matched: hit.matched.into_boxed_slice(),
                },
            )
        });
        let hits: Vec<Py<PySearchHit>> = hits.collect::<PyResult<_>>()?;
        PyList::new(py, hits)
    }

    /// Indexed tool names, in index order.
    #[getter]
    fn names<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.names.iter().map(|name| name.bind(py)))
    }

    /// The most tools this index was allowed to hold.
    #[getter]
    fn max_indexed(&self) -> usize {
        self.max_indexed
    }

    /// Query bytes read per search; longer queries are cut at a character boundary.
    #[getter]
    fn max_query_bytes(&self) -> usize {
        self.max_query_bytes
    }

    fn __len__(&self) -> usize {
        self.index.len()
    }

    fn __contains__(&self, py: Python<'_>, name: &Bound<'_, PyAny>) -> PyResult<bool> {
        let Ok(name) = name.cast::<PyString>() else {
            return Ok(false);
        };
        // Compared by text here, never by a `str` subclass's own `__eq__` (which could raise an
        // interrupt, or lie). Exact: a lossy conversion would take "get\ud800" for the
        // "get\ufffd" of another tool.
        let Ok(text) = name.to_str() else {
            return self.contains_unpaired(py, name);
        };
        Ok(self
            .names
            .iter()
            .any(|known| known.bind(py).to_str().is_ok_and(|known| known == text)))
    }

    fn __repr__(&self) -> String {
        format!(
            "ToolSearchIndex(tools={}, terms={}, max_indexed={})",
            self.index.len(),
            self.index.term_count(),
            self.max_indexed
        )
    }
}
