//! Python objects to and from `Document`s (see `document.rs`).
//!
//! Reading Python arguments walks them once, bounded by the argument depth limit and by a node
//! count, and borrows every string from its Python object (the reader holds a reference to each
//! until the document is dropped). Building Python objects from a parsed document takes object
//! keys from a table of the schema's property names, interned once, so the common keys are
//! neither created nor hashed again per call.

use std::borrow::Cow;
use std::sync::atomic::{AtomicU32, Ordering};

use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

use crate::bindings::type_name;
use crate::bindings_schema::wide_int_to_f64;
use crate::document::{Document, Entry, Member, Text, index, same_text};

/// A table keyed by short strings (names, paths, messages), hashed with foldhash.
pub(crate) type StrMap<V> = std::collections::HashMap<Box<str>, V, foldhash::fast::RandomState>;

/// Interned Python strings of a schema's property names (or of its string choices), found by
/// name, and also by position in the document: arguments for one tool mostly come in the same
/// shape, keys in the same order, so the entry the string at a position (a member's index among
/// the document's members, a value's among its nodes) matched last time is checked first, with
/// one comparison, before the hash lookup.
pub(crate) struct KeyTable {
    entries: Box<[(Box<str>, Py<PyString>)]>,
    by_name: StrMap<u32>,
    /// Per position, the entry it matched last (`u32::MAX`: none yet). A guess is only ever
    /// checked, never trusted, so threads racing on one cannot make a string wrong.
    guesses: Box<[AtomicU32]>,
}

/// Positions per name whose last match is remembered, and the most remembered per table.
const GUESSES_PER_NAME: usize = 8;
const MAX_GUESSES: usize = 256;

impl KeyTable {
    /// The string of `name`.
    pub(crate) fn get(&self, name: &str) -> Option<&Py<PyString>> {
        let at = *self.by_name.get(name)?;
        Some(&self.entries[at as usize].1)
    }

    /// The string of `name`, found at `position` of a document. The check of the guess is
    /// inlined into the builder; the lookup by hash, out of line, keeps it small.
    #[inline]
    fn get_at(&self, position: usize, name: &str) -> Option<&Py<PyString>> {
        if let Some(guess) = self.guesses.get(position)
            && let Some((known, string)) = self.entries.get(guess.load(Ordering::Relaxed) as usize)
            && same_text(known, name)
        {
            return Some(string);
        }
        self.find_at(position, name)
    }

    /// `get_at` when the guess for `position` is not `name`: the lookup by hash, remembered.
    #[inline(never)]
    fn find_at(&self, position: usize, name: &str) -> Option<&Py<PyString>> {
        let at = *self.by_name.get(name)?;
        if let Some(guess) = self.guesses.get(position) {
            guess.store(at, Ordering::Relaxed);
        }
        Some(&self.entries[at as usize].1)
    }
}

/// Interns `names` once for the objects built from documents validated against one schema.
pub(crate) fn key_table(py: Python<'_>, names: &[Box<str>]) -> KeyTable {
    let mut entries: Vec<(Box<str>, Py<PyString>)> = Vec::with_capacity(names.len());
    let mut by_name =
        StrMap::with_capacity_and_hasher(names.len(), foldhash::fast::RandomState::default());
    for name in names {
        if let std::collections::hash_map::Entry::Vacant(slot) = by_name.entry(name.clone()) {
            slot.insert(index(entries.len()));
            entries.push((name.clone(), PyString::intern(py, name).unbind()));
        }
    }
    let positions = (entries.len() * GUESSES_PER_NAME).min(MAX_GUESSES);
    KeyTable {
        entries: entries.into_boxed_slice(),
        by_name,
        guesses: (0..positions).map(|_| AtomicU32::new(u32::MAX)).collect(),
    }
}

/// The Python strings that objects built from documents validated against one schema share:
/// object keys from the schema's property names, and string values from the short strings of
/// its `enum` and `const` keywords (an enum value arrives on almost every call of a tool that
/// has one). A value is looked up only when some choice has its length and its first byte, so
/// free text seldom pays for a lookup.
pub(crate) struct SchemaStrings {
    keys: KeyTable,
    values: KeyTable,
    /// Bit `n` is set when a choice is `n` bytes long (choices are at most 63 bytes).
    value_lengths: u64,
    /// Bit `b` is set when a choice starts with byte `b`.
    value_first_bytes: [u64; 4],
}

/// Whether bit `bit` of a 256-bit set is set.
fn has_bit(set: &[u64; 4], bit: u8) -> bool {
    set[usize::from(bit >> 6)] >> (bit & 63) & 1 == 1
}

impl SchemaStrings {
    /// The shared string equal to `text`, node `at` of a document, when `text` is one of the
    /// schema's choices.
    fn value(&self, at: u32, text: &str) -> Option<&Py<PyString>> {
        let length = text.len();
        if length >= 64 || self.value_lengths >> length & 1 == 0 {
            return None;
        }
        // Some choices are empty: their length passed above, and they have no first byte.
        if let Some(&first) = text.as_bytes().first()
            && !has_bit(&self.value_first_bytes, first)
        {
            return None;
        }
        self.values.get_at(at as usize, text)
    }
}

/// The shared strings of a schema with these property names and choices.
pub(crate) fn schema_strings(
    py: Python<'_>,
    property_names: &[Box<str>],
    choices: &[Box<str>],
) -> SchemaStrings {
    let choices_kept = || choices.iter().filter(|choice| choice.len() < 64);
    let value_lengths = choices_kept().fold(0_u64, |lengths, choice| lengths | 1 << choice.len());
    let mut value_first_bytes = [0_u64; 4];
    for &first in choices_kept().filter_map(|choice| choice.as_bytes().first()) {
        value_first_bytes[usize::from(first >> 6)] |= 1 << (first & 63);
    }
    SchemaStrings {
        keys: key_table(py, property_names),
        values: key_table(py, choices),
        value_lengths,
        value_first_bytes,
    }
}

/// Why Python arguments could not be read as JSON.
pub(crate) enum Unreadable {
    TooDeep,
    TooMany,
    NotJson {
        path: String,
        what: String,
    },
    /// What reading a value raised that is not an `Exception` (`KeyboardInterrupt`,
    /// `SystemExit`): propagated, never read as bad arguments.
    Interrupted(PyErr),
    /// A read in place met a value whose reading makes Python objects (an `int` beyond `i64`):
    /// any allocation may start a garbage collection whose finalizers change a dict being
    /// iterated (which the `PyO3` dict iterator panics on), so the read starts again over copies
    /// of every dict's items. Never returned by a read over copies, nor to a caller.
    RunsPython,
}

fn not_json(what: impl Into<String>) -> Unreadable {
    Unreadable::NotJson {
        path: String::new(),
        what: what.into(),
    }
}

/// Puts `segment` in front of the path of a failure found below it (the path is built on the way
/// out of a failed read only, so a good read never formats one).
fn under(segment: &str, failure: Unreadable) -> Unreadable {
    match failure {
        Unreadable::NotJson { path, what } => {
            let escaped = if segment.contains(['~', '/']) {
                Cow::Owned(segment.replace('~', "~0").replace('/', "~1"))
            } else {
                Cow::Borrowed(segment)
            };
            Unreadable::NotJson {
                path: format!("/{escaped}{path}"),
                what,
            }
        }
        other => other,
    }
}

/// Reads Python JSON data (dict with str keys, list, tuple, str, int, float, bool, None) into a
/// document and hands it to `then`; at most `max_depth` containers deep and `max_nodes` values.
pub(crate) fn with_python_document<T>(
    object: &Bound<'_, PyAny>,
    max_depth: usize,
    max_nodes: usize,
    then: impl FnOnce(&Document<'_>) -> T,
) -> Result<T, Unreadable> {
    let mut reader = PyReader {
        doc: Document::with_capacity(16),
        holders: Vec::with_capacity(16),
        max_depth,
        max_nodes,
        copies: false,
    };
    match reader.read(object, 0) {
        Ok(_) => {}
        Err(Unreadable::RunsPython) => {
            reader.doc.clear();
            reader.holders.clear();
            reader.copies = true;
            reader.read(object, 0)?;
        }
        Err(failure) => return Err(failure),
    }
    let PyReader { doc, holders, .. } = reader;
    let mut doc: Document<'_> = doc;
    // Every string was checked as UTF-8 while reading, so `to_str` cannot fail here.
    doc.held.extend(
        holders
            .iter()
            .map(|string| string.to_str().unwrap_or_default()),
    );
    // No object repeats a key: a dict's exact `str` keys are unique texts, and a dict with a key
    // of a `str` subclass is checked as it is read (`repeats_a_key`).
    doc.finish(false);
    let result = then(&doc);
    doc.recycle();
    Ok(result)
}

struct PyReader<'py> {
    doc: Document<'static>,
    holders: Vec<Bound<'py, PyString>>,
    max_depth: usize,
    max_nodes: usize,
    /// Whether dicts are read over copies of their items (see `Unreadable::RunsPython`).
    copies: bool,
}

impl<'py> PyReader<'py> {
    fn hold(&mut self, string: &Bound<'py, PyString>) -> Result<Text<'static>, Unreadable> {
        if string.to_str().is_err() {
            return Err(not_json("a string with a lone surrogate"));
        }
        self.holders.push(string.clone());
        Ok(Text::Held(
            u32::try_from(self.holders.len() - 1).unwrap_or(u32::MAX),
        ))
    }

    fn push(&mut self, entry: Entry<'static>) -> Result<u32, Unreadable> {
        if self.doc.len() >= self.max_nodes {
            return Err(Unreadable::TooMany);
        }
        Ok(self.doc.push(entry))
    }

    fn read(&mut self, object: &Bound<'py, PyAny>, depth: usize) -> Result<u32, Unreadable> {
        if let Ok(string) = object.cast::<PyString>() {
            let text = self.hold(string)?;
            return self.push(Entry::Str(text));
        }
        if let Ok(dict) = object.cast::<PyDict>() {
            if depth >= self.max_depth {
                return Err(Unreadable::TooDeep);
            }
            return if self.copies {
                let pairs: Vec<_> = dict.iter().collect();
                self.read_members(pairs.into_iter(), depth)
            } else {
                self.read_members(dict.iter(), depth)
            };
        }
        if let Ok(flag) = object.cast::<PyBool>() {
            return self.push(Entry::Bool(flag.is_true()));
        }
        if object.cast::<PyInt>().is_ok() {
            if let Ok(small) = object.extract::<i64>() {
                return self.push(Entry::Int(small));
            }
            return self.read_wide_int(object);
        }
        if let Ok(float) = object.cast::<PyFloat>() {
            let value = float.value();
            if !value.is_finite() {
                return Err(not_json("a number that is not finite"));
            }
            return self.push(Entry::Float(value));
        }
        if object.is_none() {
            return self.push(Entry::Null);
        }
        if let Ok(list) = object.cast::<PyList>() {
            return self.read_sequence(list.iter(), depth);
        }
        if let Ok(tuple) = object.cast::<PyTuple>() {
            return self.read_sequence(tuple.iter(), depth);
        }
        Err(not_json(format!("a {}", type_name(object))))
    }

    /// The members of a dict, from its `(key, value)` pairs (read in place or copied).
    fn read_members(
        &mut self,
        pairs: impl Iterator<Item = (Bound<'py, PyAny>, Bound<'py, PyAny>)>,
        depth: usize,
    ) -> Result<u32, Unreadable> {
        let mark = self.doc.open_object();
        let mut unusual_keys = false;
        for (key, value) in pairs {
            let Ok(key) = key.cast::<PyString>() else {
                return Err(not_json(format!("a {} key", type_name(&key))));
            };
            unusual_keys |= !key.is_exact_instance_of::<PyString>();
            let text = self.hold(key)?;
            let value = self
                .read(&value, depth + 1)
                .map_err(|failure| under(key.to_str().unwrap_or_default(), failure))?;
            self.doc.add_member(Member { key: text, value });
        }
        // Keys of a `str` subclass may repeat a text (their own `__hash__` and `__eq__`): the
        // tool would read one value and the validator check another, so such a dict is not JSON.
        if unusual_keys && self.repeats_a_key(mark) {
            return Err(not_json(
                "two keys with the same text (one of a str subclass)",
            ));
        }
        if self.doc.len() >= self.max_nodes {
            return Err(Unreadable::TooMany);
        }
        Ok(self.doc.close_object(mark))
    }

    /// Whether two members of the object open at `mark` have the same key text.
    #[cold]
    fn repeats_a_key(&self, mark: usize) -> bool {
        let mut keys: Vec<&str> = self
            .doc
            .open_members(mark)
            .iter()
            .map(|member| match member.key {
                Text::Held(at) => self.holders[at as usize].to_str().unwrap_or_default(),
                // The reader holds every key it reads.
                Text::Source(text) => text,
                Text::Decoded { .. } => "",
            })
            .collect();
        keys.sort_unstable();
        keys.windows(2).any(|pair| pair[0] == pair[1])
    }

    /// An `int` beyond `i64` (see `Unreadable::RunsPython`): kept out of line, as it is rare.
    /// Beyond 64 bits it is validated by magnitude, as a float keeps integer-ness, read through
    /// `int`'s own conversion: a subclass's `__float__` never runs.
    #[cold]
    #[inline(never)]
    fn read_wide_int(&mut self, object: &Bound<'py, PyAny>) -> Result<u32, Unreadable> {
        if !self.copies {
            return Err(Unreadable::RunsPython);
        }
        if let Ok(large) = object.extract::<u64>() {
            return self.push(Entry::UInt(large));
        }
        match wide_int_to_f64(object) {
            Ok(approximate) if approximate.is_finite() => self.push(Entry::Float(approximate)),
            Ok(_) => Err(not_json("an integer too large for JSON numbers")),
            Err(err) if err.is_instance_of::<PyException>(object.py()) => {
                Err(not_json("an integer too large for JSON numbers"))
            }
            Err(err) => Err(Unreadable::Interrupted(err)),
        }
    }

    fn read_sequence(
        &mut self,
        items: impl Iterator<Item = Bound<'py, PyAny>>,
        depth: usize,
    ) -> Result<u32, Unreadable> {
        if depth >= self.max_depth {
            return Err(Unreadable::TooDeep);
        }
        let mark = self.doc.open_array();
        for (position, item) in items.enumerate() {
            let element = self
                .read(&item, depth + 1)
                .map_err(|failure| under(&position.to_string(), failure))?;
            self.doc.add_element(element);
        }
        if self.doc.len() >= self.max_nodes {
            return Err(Unreadable::TooMany);
        }
        Ok(self.doc.close_array(mark))
    }
}

/// Builds the Python value of node `at` (object keys and string values from `shared` where they
/// are found there). Sets `repeated` when an object of the document repeats a key (its dict came
/// out smaller).
pub(crate) fn build<'py>(
    py: Python<'py>,
    doc: &Document<'_>,
    at: u32,
    shared: Option<&SchemaStrings>,
    repeated: &mut bool,
) -> PyResult<Bound<'py, PyAny>> {
    Ok(match doc.entry(at) {
        Entry::Null => py.None().into_bound(py),
        Entry::Bool(flag) => PyBool::new(py, *flag).to_owned().into_any(),
        Entry::Int(value) => value.into_pyobject(py)?.into_any(),
        Entry::UInt(value) => value.into_pyobject(py)?.into_any(),
        Entry::Float(value) => PyFloat::new(py, *value).into_any(),
        // Rare, and at most 309 digits (the reader keeps only what a float can hold), well
        // inside the 640 digits Python's conversion limit never goes below.
        Entry::BigInt(digits) => py.get_type::<PyInt>().call1((*digits,))?,
        Entry::Str(text) => {
            let text = doc.text(text);
            match shared.and_then(|strings| strings.value(at, text)) {
                Some(choice) => choice.bind(py).clone().into_any(),
                None => PyString::new(py, text).into_any(),
            }
        }
        Entry::Array { start, len } => {
            let elements = doc.array_elements(*start, *len);
            let mut built = Vec::with_capacity(elements.len());
            for &element in elements {
                built.push(build(py, doc, element, shared, repeated)?);
            }
            PyList::new(py, built)?.into_any()
        }
        Entry::Object { start, len, .. } => {
            let dict = PyDict::new(py);
            for (offset, member) in doc.object_members(*start, *len).iter().enumerate() {
                let name = doc.text(&member.key);
                let value = build(py, doc, member.value, shared, repeated)?;
                let position = *start as usize + offset;
                let key = shared.and_then(|strings| strings.keys.get_at(position, name));
                match key {
                    Some(key) => dict.set_item(key.bind(py), value)?,
                    None => dict.set_item(PyString::new(py, name), value)?,
                }
            }
            *repeated |= dict.len() < *len as usize;
            dict.into_any()
        }
    })
}
