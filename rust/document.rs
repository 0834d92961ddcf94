//! Tool arguments as one flat document that the validator reads without touching Python.
//!
//! Argument text is parsed (after `scan_json` has bounded its size and depth) into a `Document`:
//! one vector of nodes, one of object members and one of array elements, with every string that
//! has no escapes borrowed from the text. Python arguments are read into the same shape, strings
//! borrowed from the Python objects (the bindings hold them for the document's lifetime). The
//! `jsonschema` crate validates a document through its `Json` trait (`Tape`), with no allocation
//! per node and no call into Python; the text path then builds the Python objects from the same
//! document, so what the validator judged is exactly what the tool receives.
//!
//! Duplicate object keys resolve as a Python dict built from the text would: the first position,
//! the last value. Objects with more than `SMALL_OBJECT` members get a sorted index, so a lookup
//! is a binary search, never a scan a hostile object could make quadratic.

use std::borrow::Cow;

use jsonschema::json::{Array, Json, JsonNumber, Node, NodeIdentity, Object, cmp};
use jsonschema::types::JsonType;
use jsonschema_value::LazyInstance;
use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

use crate::guards::{GuardViolation, scan_json};

/// Objects up to this many members are searched by a scan; larger ones get a sorted index.
const INDEXED_OBJECT: usize = 32;
/// Objects up to this many members are checked for repeated keys pairwise; larger ones through
/// their sorted keys.
const SMALL_OBJECT: usize = 16;
/// `Entry::Object::sorted` of an object that has no sorted index.
const NOT_SORTED: u32 = u32::MAX;

/// A string of the document, by where its text lies: borrowed from the source text (strings
/// without escapes), a span of the document's own decoded text (strings with escapes), or one of
/// the strings held beside the document (`Document::held`, filled once every node is read). No
/// node owns anything, so dropping a document walks no nodes and its buffers are reused from
/// call to call.
#[derive(Debug, Clone, Copy)]
pub enum Text<'s> {
    Source(&'s str),
    Decoded { start: u32, len: u32 },
    Held(u32),
}

/// One node. Containers point at their members or elements; indices are `u32` because a
/// document never has more nodes than the argument byte limit (64 MiB at most) allows.
#[derive(Debug, Clone, Copy)]
pub enum Entry<'s> {
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    /// An integer literal beyond 64 bits, as written (sign and digits). Kept as text so the
    /// Python value is the exact integer, as Python's `json` reads it; validated by its nearest
    /// float, as JSON Schema number comparisons are.
    BigInt(&'s str),
    Str(Text<'s>),
    Array {
        start: u32,
        len: u32,
    },
    Object {
        start: u32,
        len: u32,
        sorted: u32,
    },
}

/// One object member: its key and the index of its value.
#[derive(Debug, Clone, Copy)]
pub struct Member<'s> {
    pub key: Text<'s>,
    pub value: u32,
}

/// A parsed JSON document; the root is the last node. Its buffers come from, and go back to
/// (`recycle`), a spare document kept per thread, so a call allocates nothing for them once
/// warm. The buffers every document uses sit in the document itself; the others in `Rare`,
/// boxed, which keeps a document small enough to move without a call to copy it.
#[derive(Debug, Default)]
pub struct Document<'s> {
    nodes: Vec<Entry<'s>>,
    members: Vec<Member<'s>>,
    /// Members of the objects still open while the document is built.
    open_members: Vec<Member<'s>>,
    /// Strings that `Text::Held` points at (Python strings, for documents read from Python).
    pub held: Vec<&'s str>,
    rare: Box<Rare>,
    /// Whether some object has more than `INDEXED_OBJECT` members (`finish` indexes those).
    has_large_object: bool,
}

/// The buffers of a document that only arrays, escapes and large objects use.
#[derive(Debug, Default)]
struct Rare {
    elements: Vec<u32>,
    /// Elements of the arrays still open while the document is built.
    open_elements: Vec<u32>,
    sorted: Vec<u32>,
    /// The text of strings that held escapes, one after another (`Text::Decoded`).
    decoded: String,
}

impl Rare {
    fn clear(&mut self) {
        self.elements.clear();
        self.open_elements.clear();
        self.sorted.clear();
        self.decoded.clear();
    }
}

/// `vector`, emptied, as a vector of another lifetime. Collecting a vector's own iterator
/// reuses its allocation when the item layout is unchanged, so this moves no memory and keeps
/// the capacity; were that ever not so, the spare would only be smaller.
fn relabel<T, U>(mut vector: Vec<T>, empty: impl Fn() -> U) -> Vec<U> {
    vector.clear();
    vector.into_iter().map(|_| empty()).collect()
}

/// Buffers larger than this (in entries, or sixteen bytes of decoded text) are freed, not kept:
/// one huge argument must not pin its memory to a thread for good.
const SPARE_LIMIT: usize = 4096;

thread_local! {
    /// The buffers of the last document recycled on this thread.
    static SPARE: std::cell::Cell<Option<Document<'static>>> = const { std::cell::Cell::new(None) };
}

#[allow(clippy::cast_possible_truncation)] // bounded by the argument limits, see `Entry`
pub(crate) fn index(n: usize) -> u32 {
    n as u32
}

/// The text of `text`, from the parts of a document it may lie in.
#[inline]
fn text_in<'a>(decoded: &'a str, held: &[&'a str], text: &Text<'a>) -> &'a str {
    match *text {
        Text::Source(string) => string,
        Text::Decoded { start, len } => &decoded[start as usize..(start + len) as usize],
        Text::Held(at) => held[at as usize],
    }
}

impl<'s> Document<'s> {
    /// An empty document with room for about `nodes` nodes, on this thread's spare buffers
    /// when there are some.
    pub fn with_capacity(nodes: usize) -> Self {
        let mut doc: Self = SPARE
            .try_with(std::cell::Cell::take)
            .ok()
            .flatten()
            .unwrap_or_default();
        // Most nodes of tool arguments are object members; room for elements is left to the
        // first array (many arguments have none).
        doc.nodes.reserve(nodes);
        doc.members.reserve(nodes);
        doc.open_members.reserve(nodes);
        doc
    }

    /// Gives the document's buffers back for the next document read on this thread (unless
    /// they grew large). A document dropped instead simply frees them.
    pub fn recycle(self) {
        let rare = &self.rare;
        let keep = [
            self.nodes.capacity(),
            self.members.capacity(),
            self.open_members.capacity(),
            self.held.capacity(),
            rare.elements.capacity(),
            rare.open_elements.capacity(),
            rare.sorted.capacity(),
            rare.decoded.capacity() / 16,
        ]
        .iter()
        .all(|&capacity| capacity <= SPARE_LIMIT);
        if !keep {
            return;
        }
        let blank = || Member {
            key: Text::Held(0),
            value: 0,
        };
        let mut rare = self.rare;
        rare.clear();
        let spare = Document {
            nodes: relabel(self.nodes, || Entry::Null),
            members: relabel(self.members, blank),
            open_members: relabel(self.open_members, blank),
            held: relabel(self.held, || ""),
            rare,
            has_large_object: false,
        };
        // During thread teardown the slot may be gone: the buffers are then freed.
        let _ = SPARE.try_with(|slot| slot.set(Some(spare)));
    }

    /// Empties the document, keeping its buffers.
    pub fn clear(&mut self) {
        self.nodes.clear();
        self.members.clear();
        self.open_members.clear();
        self.held.clear();
        self.rare.clear();
        self.has_large_object = false;
    }

    /// How many nodes the document holds.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The bytes of every string and member name, in one pass over the flat buffers.
    pub fn text_bytes(&self) -> u64 {
        let length = |text: &Text<'s>| self.text(text).len() as u64;
        let strings = self.nodes.iter().map(|node| match node {
            Entry::Str(text) => length(text),
            _ => 0,
        });
        let names = self.members.iter().map(|member| length(&member.key));
        strings.chain(names).fold(0, u64::saturating_add)
    }

    /// The root node (the last one read). Callers only ask for it of a non-empty document.
    pub fn root(&self) -> DocNode<'_> {
        DocNode {
            doc: self,
            index: index(self.nodes.len().saturating_sub(1)),
        }
    }

    /// The index of the root node.
    pub fn root_index(&self) -> u32 {
        index(self.nodes.len().saturating_sub(1))
    }

    /// Node `at`, for the bindings that build Python objects from a document.
    pub fn entry(&self, at: u32) -> &Entry<'s> {
        &self.nodes[at as usize]
    }

    /// The members of an object entry, in order.
    pub fn object_members(&self, start: u32, len: u32) -> &[Member<'s>] {
        &self.members[start as usize..(start + len) as usize]
    }

    /// The elements of an array entry, in order.
    pub fn array_elements(&self, start: u32, len: u32) -> &[u32] {
        &self.rare.elements[start as usize..(start + len) as usize]
    }

    #[inline]
    pub fn text<'a>(&'a self, text: &'a Text<'s>) -> &'a str {
        text_in(&self.rare.decoded, &self.held, text)
    }

    // ---- building: leaves, then containers from the stacks of open members and elements ----

    pub fn push(&mut self, entry: Entry<'s>) -> u32 {
        self.nodes.push(entry);
        index(self.nodes.len() - 1)
    }

    /// A string of decoded text, appended to the document's own.
    pub fn push_decoded(&mut self, text: &str) -> Text<'s> {
        let start = index(self.rare.decoded.len());
        self.rare.decoded.push_str(text);
        Text::Decoded {
            start,
            len: index(text.len()),
        }
    }

    /// Where the members of an object opened now start on the stack of open members.
    pub fn open_object(&self) -> usize {
        self.open_members.len()
    }

    /// Where the elements of an array opened now start on the stack of open elements.
    pub fn open_array(&self) -> usize {
        self.rare.open_elements.len()
    }

    /// The members added to the object open at `mark` so far.
    pub fn open_members(&self, mark: usize) -> &[Member<'s>] {
        &self.open_members[mark..]
    }

    pub fn add_member(&mut self, member: Member<'s>) {
        self.open_members.push(member);
    }

    pub fn add_element(&mut self, element: u32) {
        self.rare.open_elements.push(element);
    }

    /// Closes the object whose members are the open members from `mark` on; they move into
    /// the document.
    pub fn close_object(&mut self, mark: usize) -> u32 {
        let start = index(self.members.len());
        let len = index(self.open_members.len() - mark);
        if start == 0 && mark == 0 {
            // The first object closed with every open member its own (a flat root object, the
            // common shape of tool arguments): the stacks trade places instead of copying.
            std::mem::swap(&mut self.members, &mut self.open_members);
        } else {
            // Copied, then cut: `extend(drain(..))` costs several times as much per object.
            self.members.extend_from_slice(&self.open_members[mark..]);
            self.open_members.truncate(mark);
        }
        self.has_large_object |= len as usize > INDEXED_OBJECT;
        self.push(Entry::Object {
            start,
            len,
            sorted: NOT_SORTED,
        })
    }

    /// Closes the array whose elements are the open elements from `mark` on.
    pub fn close_array(&mut self, mark: usize) -> u32 {
        let start = index(self.rare.elements.len());
        let len = index(self.rare.open_elements.len() - mark);
        let rare = &mut *self.rare;
        rare.elements.extend_from_slice(&rare.open_elements[mark..]);
        rare.open_elements.truncate(mark);
        self.push(Entry::Array { start, len })
    }

    /// Resolves repeated object keys of a document parsed with `Repeats::Leave`.
    pub fn resolve_repeats(&mut self) {
        self.rare.sorted.clear();
        self.finish(true);
    }

    /// Indexes large objects and, when `keys_may_repeat`, resolves repeated keys (first
    /// position, last value). Runs after every string can be read (`held` filled).
    pub fn finish(&mut self, keys_may_repeat: bool) {
        if !keys_may_repeat && !self.has_large_object {
            return; // no object is large enough to index
        }
        for at in 0..self.nodes.len() {
            let Entry::Object { start, len, .. } = self.nodes[at] else {
                continue;
            };
            let (start, mut len) = (start as usize, len as usize);
            if !keys_may_repeat && len <= INDEXED_OBJECT {
                continue;
            }
            if keys_may_repeat && len > 1 && len <= SMALL_OBJECT {
                len = self.deduplicate(start, len);
            }
            let mut sorted = NOT_SORTED;
            if len > SMALL_OBJECT {
                let mut from = self.sort_keys(start, len);
                if keys_may_repeat && self.has_repeats(from, len) {
                    self.rare.sorted.truncate(from as usize);
                    len = self.deduplicate(start, len);
                    from = self.sort_keys(start, len);
                }
                if len > INDEXED_OBJECT {
                    sorted = from;
                } else {
                    self.rare.sorted.truncate(from as usize);
                }
            }
            self.nodes[at] = Entry::Object {
                start: index(start),
                len: index(len),
                sorted,
            };
        }
    }

    /// Appends the member positions of an object sorted by key; returns where they start.
    fn sort_keys(&mut self, start: usize, len: usize) -> u32 {
        let from = self.rare.sorted.len();
        self.rare.sorted.extend(index(start)..index(start + len));
        let (members, held, rare) = (&self.members, &self.held, &mut *self.rare);
        let decoded = &rare.decoded;
        let key = |at: &u32| text_in(decoded, held, &members[*at as usize].key);
        let sorted = &mut rare.sorted;
        sorted[from..].sort_unstable_by(|a, b| key(a).cmp(key(b)));
        index(from)
    }

    fn has_repeats(&self, from: u32, len: usize) -> bool {
        let order = &self.rare.sorted[from as usize..from as usize + len];
        order.windows(2).any(|pair| {
            self.text(&self.members[pair[0] as usize].key)
                == self.text(&self.members[pair[1] as usize].key)
        })
    }

    /// Folds repeated keys of the object at `members[start..start + len]` into their first
    /// occurrence; returns the new length.
    fn deduplicate(&mut self, start: usize, len: usize) -> usize {
        if len <= SMALL_OBJECT {
            let mut kept = 1;
            for next in 1..len {
                let found = (0..kept).find(|&earlier| {
                    self.text(&self.members[start + earlier].key)
                        == self.text(&self.members[start + next].key)
                });
                if let Some(earlier) = found {
                    self.members[start + earlier].value = self.members[start + next].value;
                } else {
                    self.members.swap(start + kept, start + next);
                    kept += 1;
                }
            }
            return kept;
        }
        // Large: sort positions by key (then position), so repeats sit side by side.
        let mut order: Vec<usize> = (start..start + len).collect();
        order.sort_by(|&a, &b| {
            self.text(&self.members[a].key)
                .cmp(self.text(&self.members[b].key))
                .then(a.cmp(&b))
        });
        let mut dropped = vec![false; len];
        let mut run = 0;
        while run < order.len() {
            let mut end = run + 1;
            while end < order.len()
                && self.text(&self.members[order[end]].key)
                    == self.text(&self.members[order[run]].key)
            {
                end += 1;
            }
            if end - run > 1 {
                self.members[order[run]].value = self.members[order[end - 1]].value;
                for &later in &order[run + 1..end] {
                    dropped[later - start] = true;
                }
            }
            run = end;
        }
        let mut kept = 0;
        for (offset, gone) in dropped.into_iter().enumerate() {
            if !gone {
                self.members.swap(start + kept, start + offset);
                kept += 1;
            }
        }
        kept
    }

    // ---- reading ----

    fn lookup(&self, start: u32, len: u32, sorted: u32, key: &str) -> Option<u32> {
        if sorted == NOT_SORTED {
            return self
                .object_members(start, len)
                .iter()
                .find(|member| same_text(self.text(&member.key), key))
                .map(|member| member.value);
        }
        let order = &self.rare.sorted[sorted as usize..(sorted + len) as usize];
        order
            .binary_search_by(|&at| self.text(&self.members[at as usize].key).cmp(key))
            .ok()
            .map(|found| self.members[order[found] as usize].value)
    }

    fn number(&self, at: u32) -> Option<Num> {
        match self.nodes[at as usize] {
            Entry::Int(value) => Some(Num::Int(value)),
            Entry::UInt(value) => Some(Num::UInt(value)),
            Entry::Float(value) => Some(Num::Float(value)),
            Entry::BigInt(digits) => Some(Num::Big(big_magnitude(digits))),
            _ => None,
        }
    }

    /// Node `at` as a `serde_json::Value` (error reports and other cold paths).
    pub fn to_value(&self, at: u32) -> Value {
        match &self.nodes[at as usize] {
            Entry::Null => Value::Null,
            Entry::Bool(flag) => Value::Bool(*flag),
            Entry::Int(_) | Entry::UInt(_) | Entry::Float(_) | Entry::BigInt(_) => self
                .number(at)
                .map_or(Value::Null, |number| Value::Number(number.to_serde())),
            Entry::Str(text) => Value::String(self.text(text).to_owned()),
            Entry::Array { start, len } => Value::Array(
                self.array_elements(*start, *len)
                    .iter()
                    .map(|&element| self.to_value(element))
                    .collect(),
            ),
            Entry::Object { start, len, .. } => Value::Object(
                self.object_members(*start, *len)
                    .iter()
                    .map(|member| {
                        (
                            self.text(&member.key).to_owned(),
                            self.to_value(member.value),
                        )
                    })
                    .collect::<Map<String, Value>>(),
            ),
        }
    }

    /// JSON equality of node `at` and `expected` (numbers mathematically).
    fn equals(&self, at: u32, expected: &Value) -> bool {
        match (&self.nodes[at as usize], expected) {
            (Entry::Null, Value::Null) => true,
            (Entry::Bool(flag), Value::Bool(other)) => flag == other,
            (
                Entry::Int(_) | Entry::UInt(_) | Entry::Float(_) | Entry::BigInt(_),
                Value::Number(other),
            ) => self
                .number(at)
                .is_some_and(|number| cmp::equal_numbers(&number, other)),
            (Entry::Str(text), Value::String(other)) => self.text(text) == other,
            (Entry::Array { start, len }, Value::Array(others)) => {
                *len as usize == others.len()
                    && self
                        .array_elements(*start, *len)
                        .iter()
                        .zip(others)
                        .all(|(&element, other)| self.equals(element, other))
            }
            (Entry::Object { start, len, .. }, Value::Object(others)) => {
                *len as usize == others.len()
                    && self.object_members(*start, *len).iter().all(|member| {
                        others
                            .get(self.text(&member.key))
                            .is_some_and(|other| self.equals(member.value, other))
                    })
            }
            _ => false,
        }
    }

    /// JSON equality of two nodes of this document.
    fn same(&self, left: u32, right: u32) -> bool {
        match (&self.nodes[left as usize], &self.nodes[right as usize]) {
            (Entry::Null, Entry::Null) => true,
            (Entry::Bool(a), Entry::Bool(b)) => a == b,
            (Entry::Str(a), Entry::Str(b)) => self.text(a) == self.text(b),
            (Entry::Array { start: a, len: n }, Entry::Array { start: b, len: m }) => {
                n == m
                    && self
                        .array_elements(*a, *n)
                        .iter()
                        .zip(self.array_elements(*b, *m))
                        .all(|(&x, &y)| self.same(x, y))
            }
            (
                Entry::Object {
                    start: a,
                    len: n,
                    sorted: _,
                },
                Entry::Object {
                    start: b,
                    len: m,
                    sorted: sorted_b,
                },
            ) => {
                n == m
                    && self.object_members(*a, *n).iter().all(|member| {
                        self.lookup(*b, *m, *sorted_b, self.text(&member.key))
                            .is_some_and(|other| self.same(member.value, other))
                    })
            }
            _ => match (self.number(left), self.number(right)) {
                (Some(a), Some(b)) => cmp::equal_numbers(&a, &b.to_serde()),
                _ => false,
            },
        }
    }
}

/// A JSON number as it was read.
#[derive(Debug, Clone, Copy)]
pub enum Num {
    Int(i64),
    UInt(u64),
    Float(f64),
    /// An integer written beyond 64 bits, by its nearest float.
    Big(f64),
}

/// The nearest float of a `BigInt` literal (the reader only keeps literals a float can hold).
fn big_magnitude(digits: &str) -> f64 {
    digits.parse().unwrap_or(f64::NAN)
}

impl Num {
    fn to_serde(self) -> Number {
        match self {
            Num::Int(value) => value.into(),
            Num::UInt(value) => value.into(),
            // Documents hold finite floats only (the parser and the Python reader refuse others).
            Num::Float(value) | Num::Big(value) => {
                Number::from_f64(value).unwrap_or_else(|| 0.into())
            }
        }
    }
}

impl JsonNumber for Num {
    fn as_u64(&self) -> Option<u64> {
        match *self {
            Num::Int(value) => u64::try_from(value).ok(),
            Num::UInt(value) => Some(value),
            Num::Float(_) | Num::Big(_) => None,
        }
    }

    fn as_i64(&self) -> Option<i64> {
        match *self {
            Num::Int(value) => Some(value),
            Num::UInt(value) => i64::try_from(value).ok(),
            Num::Float(_) | Num::Big(_) => None,
        }
    }

    #[allow(clippy::cast_precision_loss)] // what JSON Schema number comparisons do
    fn as_f64(&self) -> Option<f64> {
        Some(match *self {
            Num::Int(value) => value as f64,
            Num::UInt(value) => value as f64,
            Num::Float(value) | Num::Big(value) => value,
        })
    }

    fn as_str(&self) -> Cow<'_, str> {
        Cow::Owned(self.to_serde().to_string())
    }

    fn to_number(&self) -> Cow<'_, Number> {
        Cow::Owned(self.to_serde())
    }

    fn is_integer(&self) -> bool {
        match *self {
            Num::Int(_) | Num::UInt(_) | Num::Big(_) => true,
            Num::Float(value) => value.fract() == 0.0,
        }
    }

    fn is_written_as_integer(&self) -> bool {
        !matches!(self, Num::Float(_))
    }
}

/// The `jsonschema` representation of a `Document`.
pub struct Tape;

impl Json for Tape {
    type Node<'a> = DocNode<'a>;
    type PreparedKey = Box<str>;
    type StringBuffer = Document<'static>;

    // A lookup scans a small object or binary-searches a large one; a members pass is cheaper
    // than several of either.
    const KEYS_PER_LOOKUP: usize = 4;
    // A document is a tree: no node is its own descendant.
    const ACYCLIC: bool = true;

    fn prepare_key(key: &str) -> Box<str> {
        key.into()
    }

    fn with_string_node<T>(
        buffer: &mut Document<'static>,
        string: &str,
        f: impl FnOnce(DocNode<'_>) -> T,
    ) -> T {
        buffer.clear();
        let text = buffer.push_decoded(string);
        buffer.push(Entry::Str(text));
        f(buffer.root())
    }
}

/// What a validation error about an object of a document holds as its instance: `null`. Errors
/// are reported through their masked messages only (`schema::collect_issues`), so the object is
/// never copied for them.
fn object_not_kept(_bytes: &[u8], _tag: u32) -> Value {
    Value::Null
}

/// The string value of a validation error about a string node, from the node's bytes.
fn string_of_bytes(bytes: &[u8], _tag: u32) -> Value {
    Value::String(String::from_utf8_lossy(bytes).into_owned())
}

/// One node of a document.
#[derive(Debug, Clone, Copy)]
pub struct DocNode<'a> {
    doc: &'a Document<'a>,
    index: u32,
}

impl<'a> DocNode<'a> {
    fn entry(&self) -> &'a Entry<'a> {
        &self.doc.nodes[self.index as usize]
    }
}

impl<'a> Node<'a, Tape> for DocNode<'a> {
    type Object = DocObject<'a>;
    type Array = DocArray<'a>;
    type Number = Num;

    fn as_object(&self) -> Option<DocObject<'a>> {
        match *self.entry() {
            Entry::Object { start, len, sorted } => Some(DocObject {
                doc: self.doc,
                start,
                len,
                sorted,
            }),
            _ => None,
        }
    }

    fn as_array(&self) -> Option<DocArray<'a>> {
        match *self.entry() {
            Entry::Array { start, len } => Some(DocArray {
                doc: self.doc,
                start,
                len,
            }),
            _ => None,
        }
    }

    #[inline]
    fn as_string(&self) -> Option<Cow<'a, str>> {
        match self.entry() {
            Entry::Str(text) => Some(Cow::Borrowed(self.doc.text(text))),
            _ => None,
        }
    }

    fn as_number(&self) -> Option<Num> {
        self.doc.number(self.index)
    }

    fn as_boolean(&self) -> Option<bool> {
        match self.entry() {
            Entry::Bool(flag) => Some(*flag),
            _ => None,
        }
    }

    fn is_null(&self) -> bool {
        matches!(self.entry(), Entry::Null)
    }

    fn json_type(&self) -> JsonType {
        match self.entry() {
            Entry::Null => JsonType::Null,
            Entry::Bool(_) => JsonType::Boolean,
            Entry::Int(_) | Entry::UInt(_) | Entry::Float(_) | Entry::BigInt(_) => JsonType::Number,
            Entry::Str(_) => JsonType::String,
            Entry::Array { .. } => JsonType::Array,
            Entry::Object { .. } => JsonType::Object,
        }
    }

    fn string_length(&self) -> Option<u64> {
        self.as_string().map(|string| {
            // Code points are the bytes that do not continue a UTF-8 sequence.
            let continuation = string.bytes().filter(|byte| byte & 0xC0 == 0x80).count();
            (string.len() - continuation) as u64
        })
    }

    fn equals_value(&self, expected: &Value) -> bool {
        self.doc.equals(self.index, expected)
    }

    fn to_value(&self) -> Cow<'a, Value> {
        Cow::Owned(self.doc.to_value(self.index))
    }

    /// The instance an error carries. The harness reads errors through their masked messages,
    /// which never look at an object's instance, and copying the object into a serde value for
    /// each error was a sixth of a report: an object's error carries `null` instead (see
    /// `object_not_kept`). A string carries its own bytes, built only if read. Arrays stay eager:
    /// the masked `additionalItems` message counts their items. Other scalars cost no allocation.
    fn lazy_value(&self) -> LazyInstance<'a> {
        match self.entry() {
            Entry::Object { .. } => LazyInstance::Deferred {
                bytes: &[],
                tag: 0,
                make: object_not_kept,
                cell: std::sync::OnceLock::new(),
            },
            Entry::Str(text) => LazyInstance::Deferred {
                bytes: self.doc.text(text).as_bytes(),
                tag: 0,
                make: string_of_bytes,
                cell: std::sync::OnceLock::new(),
            },
            _ => LazyInstance::Ready(self.to_value()),
        }
    }

    fn identity(&self) -> Option<NodeIdentity> {
        Some(NodeIdentity::tagged(
            std::ptr::from_ref(self.doc) as usize,
            self.index,
        ))
    }
}

/// An object node.
#[derive(Debug, Clone, Copy)]
pub struct DocObject<'a> {
    doc: &'a Document<'a>,
    start: u32,
    len: u32,
    sorted: u32,
}

/// Members of an object node, in order.
pub struct DocMembers<'a> {
    doc: &'a Document<'a>,
    members: std::slice::Iter<'a, Member<'a>>,
}

impl<'a> Iterator for DocMembers<'a> {
    type Item = (&'a str, DocNode<'a>);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let doc = self.doc;
        self.members.next().map(|member| {
            (
                doc.text(&member.key),
                DocNode {
                    doc,
                    index: member.value,
                },
            )
        })
    }
}

impl<'a> Object<'a, Tape> for DocObject<'a> {
    type Node = DocNode<'a>;
    type MemberName = &'a str;
    type MembersIter = DocMembers<'a>;

    fn len(&self) -> usize {
        self.len as usize
    }

    fn get(&self, key: &Box<str>) -> Option<DocNode<'a>> {
        self.doc
            .lookup(self.start, self.len, self.sorted, key)
            .map(|index| DocNode {
                doc: self.doc,
                index,
            })
    }

    fn members(&self) -> DocMembers<'a> {
        DocMembers {
            doc: self.doc,
            members: self.doc.object_members(self.start, self.len).iter(),
        }
    }
}

/// An array node.
#[derive(Debug, Clone, Copy)]
pub struct DocArray<'a> {
    doc: &'a Document<'a>,
    start: u32,
    len: u32,
}

/// Elements of an array node, in order.
pub struct DocElements<'a> {
    doc: &'a Document<'a>,
    elements: std::slice::Iter<'a, u32>,
}

impl<'a> Iterator for DocElements<'a> {
    type Item = DocNode<'a>;

    fn next(&mut self) -> Option<DocNode<'a>> {
        let doc = self.doc;
        self.elements.next().map(|&index| DocNode { doc, index })
    }
}

/// Arrays up to this length are checked for `uniqueItems` pairwise, in place.
const PAIRWISE_UNIQUE: usize = 32;

impl<'a> Array<'a, Tape> for DocArray<'a> {
    type Node = DocNode<'a>;
    type ElementsIter = DocElements<'a>;

    fn len(&self) -> usize {
        self.len as usize
    }

    fn elements(&self) -> DocElements<'a> {
        DocElements {
            doc: self.doc,
            elements: self.doc.array_elements(self.start, self.len).iter(),
        }
    }

    fn is_unique(&self) -> bool {
        let elements = self.doc.array_elements(self.start, self.len);
        if elements.len() > PAIRWISE_UNIQUE {
            let values: Vec<Value> = elements.iter().map(|&at| self.doc.to_value(at)).collect();
            return jsonschema::json::unique::is_unique(&values);
        }
        elements.iter().enumerate().all(|(position, &element)| {
            elements[..position]
                .iter()
                .all(|&earlier| !self.doc.same(earlier, element))
        })
    }
}

// ------------------------------------------------------------------------------ text parsing

/// Why argument text could not become a document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParseFailure {
    /// A size or depth guard refused the text before parsing.
    Guard(GuardViolation),
    /// Not one JSON value (the parser's message, which quotes no argument values).
    Invalid(String),
}

/// JSON text to parse: a `str` is known to be UTF-8; bytes are checked as they are read.
#[derive(Debug, Clone, Copy)]
pub enum Source<'s> {
    Text(&'s str),
    Bytes(&'s [u8]),
}

impl<'s> Source<'s> {
    pub fn bytes(self) -> &'s [u8] {
        match self {
            Source::Text(text) => text.as_bytes(),
            Source::Bytes(bytes) => bytes,
        }
    }
}

/// Whether `parse` resolves repeated object keys itself, or leaves them to a caller that learns
/// of them on its own way (as building Python dicts does) and then calls
/// `Document::resolve_repeats`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repeats {
    Resolve,
    Leave,
}

/// Parses JSON text into a document, at most `max_bytes` long and `max_depth` containers deep
/// (the parser stops at the first container too deep, so hostile nesting never reaches the
/// stack). Empty (all-whitespace) text is an empty object.
pub fn parse(
    source: Source<'_>,
    max_bytes: usize,
    max_depth: usize,
    repeats: Repeats,
) -> Result<Document<'_>, ParseFailure> {
    let data = source.bytes();
    if data.len() > max_bytes {
        return Err(ParseFailure::Guard(GuardViolation::ArgumentsTooLarge {
            bytes: data.len(),
            limit: max_bytes,
        }));
    }
    // Well-formed text is read directly; anything the direct reader does not take (malformed
    // text, and a few rare forms it leaves to serde_json, see `Reader`) goes through serde_json,
    // which then either reads it the same way or says exactly what is wrong.
    let text = match source {
        Source::Text(text) => Some(text),
        Source::Bytes(bytes) => std::str::from_utf8(bytes).ok(),
    };
    // Argument text spends several bytes a node; the guess saves the first regrowths.
    let nodes = (data.len() / 8).clamp(8, 4096);
    let mut builder = Builder::new(Document::with_capacity(nodes), max_depth);
    if data.iter().all(u8::is_ascii_whitespace) {
        let mark = builder.doc.open_object();
        builder.doc.close_object(mark);
        return Ok(builder.doc);
    }
    if let Some(text) = text {
        if Reader::read(text, &mut builder).is_some() {
            builder.doc.finish(repeats == Repeats::Resolve);
            return Ok(builder.doc);
        }
        builder.reset();
    }
    let read = match source {
        Source::Text(text) => read_into(&mut builder, serde_json::Deserializer::from_str(text)),
        Source::Bytes(bytes) => {
            read_into(&mut builder, serde_json::Deserializer::from_slice(bytes))
        }
    };
    // Text that nests too deep is refused for its depth even where it is malformed before the
    // parser reaches the limit (`{{{{...`): the byte scan decides, on this error path only.
    if builder.too_deep || (read.is_err() && scan_json(data, max_bytes, max_depth).is_err()) {
        return Err(ParseFailure::Guard(GuardViolation::ArgumentsTooDeep {
            limit: max_depth,
        }));
    }
    read?;
    builder.doc.finish(repeats == Repeats::Resolve);
    Ok(builder.doc)
}

fn read_into<'s, R: serde_json::de::Read<'s>>(
    builder: &mut Builder<'s>,
    mut deserializer: serde_json::Deserializer<R>,
) -> Result<(), ParseFailure> {
    // The visitor refuses a container past `max_depth` (256 at most) before descending into it,
    // which bounds the parser's recursion.
    deserializer.disable_recursion_limit();
    Seed(builder)
        .deserialize(&mut deserializer)
        .and_then(|_| deserializer.end())
        .map_err(|err| ParseFailure::Invalid(err.to_string()))
}

/// A document under construction, with the depth of its open containers.
struct Builder<'s> {
    doc: Document<'s>,
    depth: usize,
    max_depth: usize,
    too_deep: bool,
}

impl<'s> Builder<'s> {
    fn new(doc: Document<'s>, max_depth: usize) -> Self {
        Self {
            doc,
            depth: 0,
            max_depth,
            too_deep: false,
        }
    }

    /// Empties the builder for a second reading of the same text.
    fn reset(&mut self) {
        self.doc.clear();
        self.depth = 0;
        self.too_deep = false;
    }

    /// Enters a container; false (and the parse stops) when it would be too deep.
    fn descend(&mut self) -> bool {
        if self.depth >= self.max_depth {
            self.too_deep = true;
            return false;
        }
        self.depth += 1;
        true
    }
}

struct Seed<'b, 's>(&'b mut Builder<'s>);

impl<'de> DeserializeSeed<'de> for Seed<'_, 'de> {
    type Value = u32;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<u32, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Seed<'_, 'de> {
    type Value = u32;

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("a JSON value")
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<u32, E> {
        Ok(self.0.doc.push(Entry::Null))
    }

    fn visit_bool<E: serde::de::Error>(self, value: bool) -> Result<u32, E> {
        Ok(self.0.doc.push(Entry::Bool(value)))
    }

    fn visit_i64<E: serde::de::Error>(self, value: i64) -> Result<u32, E> {
        Ok(self.0.doc.push(Entry::Int(value)))
    }

    fn visit_u64<E: serde::de::Error>(self, value: u64) -> Result<u32, E> {
        Ok(self.0.doc.push(Entry::UInt(value)))
    }

    fn visit_f64<E: serde::de::Error>(self, value: f64) -> Result<u32, E> {
        if !value.is_finite() {
            return Err(E::custom("number out of range"));
        }
        Ok(self.0.doc.push(Entry::Float(value)))
    }

    fn visit_borrowed_str<E: serde::de::Error>(self, value: &'de str) -> Result<u32, E> {
        Ok(self.0.doc.push(Entry::Str(Text::Source(value))))
    }

    fn visit_str<E: serde::de::Error>(self, value: &str) -> Result<u32, E> {
        let doc = &mut self.0.doc;
        let text = doc.push_decoded(value);
        Ok(doc.push(Entry::Str(text)))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<u32, A::Error> {
        if !self.0.descend() {
            return Err(serde::de::Error::custom("nested too deep"));
        }
        let mark = self.0.doc.open_array();
        while let Some(element) = seq.next_element_seed(Seed(&mut *self.0))? {
            self.0.doc.add_element(element);
        }
        self.0.depth -= 1;
        Ok(self.0.doc.close_array(mark))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<u32, A::Error> {
        if !self.0.descend() {
            return Err(serde::de::Error::custom("nested too deep"));
        }
        let mark = self.0.doc.open_object();
        while let Some(key) = map.next_key_seed(KeySeed(&mut self.0.doc))? {
            let value = map.next_value_seed(Seed(&mut *self.0))?;
            self.0.doc.add_member(Member { key, value });
        }
        self.0.depth -= 1;
        Ok(self.0.doc.close_object(mark))
    }
}

// ------------------------------------------------------------------------ the direct reader

/// Bytes that end a plain run inside a string: the quote, the backslash, control characters.
const STRING_STOP: [bool; 256] = {
    let mut stop = [false; 256];
    let mut byte = 0;
    while byte < 0x20 {
        stop[byte] = true;
        byte += 1;
    }
    stop[b'"' as usize] = true;
    stop[b'\\' as usize] = true;
    stop
};

/// Integers of at most this many digits fit 64 bits.
const MAX_PLAIN_DIGITS: usize = 19;

/// Reads JSON text straight into a document: one pass over the bytes, no visitor calls, strings
/// without escapes borrowed. It answers `None` for malformed text and for the forms `serde_json`
/// refuses (numbers beyond the range of a float, lone surrogate escapes), so that `serde_json`
/// says what is wrong. What it accepts, it reads exactly as `serde_json` would (the property
/// tests below compare the two on generated text), except integers, which it reads as Python's
/// `json` does where `serde_json` makes floats: `-0` is the integer 0, and an integer beyond 64
/// bits keeps every digit (`Entry::BigInt`).
struct Reader<'b, 's> {
    text: &'s str,
    at: usize,
    builder: &'b mut Builder<'s>,
}

impl<'b, 's> Reader<'b, 's> {
    fn read(text: &'s str, builder: &'b mut Builder<'s>) -> Option<()> {
        let mut reader = Reader {
            text,
            at: 0,
            builder,
        };
        reader.value()?;
        reader.skip_whitespace();
        (reader.at == text.len()).then_some(())
    }

    fn bytes(&self) -> &'s [u8] {
        self.text.as_bytes()
    }

    fn peek(&self) -> Option<u8> {
        self.bytes().get(self.at).copied()
    }

    /// Passes over whitespace. Compact text (what models mostly send) has none between tokens:
    /// one load and one comparison find that out, and the loop stays out of line.
    #[inline]
    fn skip_whitespace(&mut self) {
        if self.peek().is_some_and(|byte| byte <= b' ') {
            self.skip_whitespace_run();
        }
    }

    #[inline(never)]
    fn skip_whitespace_run(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.at += 1;
        }
    }

    /// The next token after whitespace, which is then passed over.
    #[inline]
    fn next_token(&mut self) -> Option<u8> {
        self.skip_whitespace();
        let token = self.peek()?;
        self.at += 1;
        Some(token)
    }

    fn value(&mut self) -> Option<u32> {
        self.skip_whitespace();
        let entry = match self.peek()? {
            b'{' => return self.object(),
            b'[' => return self.array(),
            b'"' => Entry::Str(self.string()?),
            b't' => self.literal("true", Entry::Bool(true))?,
            b'f' => self.literal("false", Entry::Bool(false))?,
            b'n' => self.literal("null", Entry::Null)?,
            b'-' | b'0'..=b'9' => self.number()?,
            _ => return None,
        };
        Some(self.builder.doc.push(entry))
    }

    fn literal(&mut self, word: &str, entry: Entry<'s>) -> Option<Entry<'s>> {
        if !self.text[self.at..].starts_with(word) {
            return None;
        }
        self.at += word.len();
        Some(entry)
    }

    /// Enters the container whose opening bracket is at the cursor: `Some(true)` when it closes
    /// at once with `close`, `None` when it would be too deep.
    fn open(&mut self, close: u8) -> Option<bool> {
        if !self.builder.descend() {
            return None;
        }
        self.at += 1;
        self.skip_whitespace();
        let empty = self.peek()? == close;
        self.at += usize::from(empty);
        Some(empty)
    }

    /// After a member or an element: `Some(false)` past a comma, `Some(true)` past `close`.
    fn closes(&mut self, close: u8) -> Option<bool> {
        match self.next_token()? {
            b',' => Some(false),
            token if token == close => Some(true),
            _ => None,
        }
    }

    fn object(&mut self) -> Option<u32> {
        let mark = self.builder.doc.open_object();
        let mut closed = self.open(b'}')?;
        while !closed {
            if self.next_token()? != b'"' {
                return None;
            }
            self.at -= 1;
            let key = self.string()?;
            if self.next_token()? != b':' {
                return None;
            }
            let value = self.value()?;
            self.builder.doc.add_member(Member { key, value });
            closed = self.closes(b'}')?;
        }
        self.builder.depth -= 1;
        Some(self.builder.doc.close_object(mark))
    }

    fn array(&mut self) -> Option<u32> {
        let mark = self.builder.doc.open_array();
        let mut closed = self.open(b']')?;
        while !closed {
            let element = self.value()?;
            self.builder.doc.add_element(element);
            closed = self.closes(b']')?;
        }
        self.builder.depth -= 1;
        Some(self.builder.doc.close_array(mark))
    }

    /// The string whose opening quote is at the cursor: a span of the text unless it holds
    /// escapes. Forced inline into its callers, which the compiler does not do on its own: a
    /// call per string cost about 2% of a large argument's whole parse, validate and build.
    /// Escapes stay out of line.
    #[allow(clippy::inline_always)]
    #[inline(always)]
    fn string(&mut self) -> Option<Text<'s>> {
        let start = self.at + 1;
        let end = plain_run(self.bytes(), start);
        match self.bytes().get(end)? {
            b'"' => {
                self.at = end + 1;
                // Both ends sit on ASCII bytes, so the slice is on character boundaries.
                Some(Text::Source(&self.text[start..end]))
            }
            b'\\' => self.escaped_string(start, end),
            _ => None,
        }
    }

    /// The rest of a string from its first escape at `end`, its plain start at `start`, decoded
    /// onto the document's decoded text.
    #[inline(never)]
    fn escaped_string(&mut self, start: usize, mut end: usize) -> Option<Text<'s>> {
        let bytes = self.bytes();
        let decoded = &mut self.builder.doc.rare.decoded;
        let first = decoded.len();
        decoded.push_str(&self.text[start..end]);
        loop {
            match bytes.get(end)? {
                b'"' => {
                    self.at = end + 1;
                    return Some(Text::Decoded {
                        start: index(first),
                        len: index(decoded.len() - first),
                    });
                }
                b'\\' => {
                    let escape = *bytes.get(end + 1)?;
                    end += 2;
                    decoded.push(match escape {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => {
                            let (character, next) = unicode_escape(bytes, end)?;
                            end = next;
                            character
                        }
                        _ => return None,
                    });
                }
                _ => return None,
            }
            let run = end;
            end = plain_run(bytes, run);
            decoded.push_str(&self.text[run..end]);
        }
    }

    fn number(&mut self) -> Option<Entry<'s>> {
        let bytes = self.bytes();
        let start = self.at;
        let negative = bytes[start] == b'-';
        let digits = start + usize::from(negative);
        let mut end = digits;
        match bytes.get(end)? {
            b'0' => end += 1,
            b'1'..=b'9' => end = skip_digits(bytes, end),
            _ => return None,
        }
        let integer_end = end;
        if bytes.get(end) == Some(&b'.') {
            end = skip_digits(bytes, end + 1);
            if end == integer_end + 1 {
                return None;
            }
        }
        let fraction_end = end;
        if let Some(b'e' | b'E') = bytes.get(end) {
            end += 1;
            if let Some(b'+' | b'-') = bytes.get(end) {
                end += 1;
            }
            let exponent = end;
            end = skip_digits(bytes, end);
            if end == exponent {
                return None;
            }
        }
        self.at = end;
        if end != integer_end {
            let parts = DecimalParts {
                integer: &bytes[digits..integer_end],
                fraction: bytes.get(integer_end + 1..fraction_end).unwrap_or_default(),
                exponent: bytes.get(fraction_end + 1..end).unwrap_or_default(),
            };
            let value = match parts.exact_value() {
                Some(magnitude) if negative => -magnitude,
                Some(magnitude) => magnitude,
                None => self.text[start..end].parse().ok()?,
            };
            return value.is_finite().then_some(Entry::Float(value));
        }
        let digits = &bytes[digits..integer_end];
        let magnitude = if digits.len() <= MAX_PLAIN_DIGITS {
            digits_value(0, digits)
        } else {
            match wide_digits_value(digits) {
                Some(magnitude) => magnitude,
                None => return self.big_integer(start, end),
            }
        };
        if !negative {
            return Some(Entry::UInt(magnitude));
        }
        // `-0` is the integer 0 (as Python reads it; serde_json makes it a float), and `-2^63`
        // is the least 64-bit integer.
        if magnitude > 1 << 63 {
            return self.big_integer(start, end);
        }
        Some(Entry::Int(0i64.wrapping_sub_unsigned(magnitude)))
    }

    /// An integer literal beyond 64 bits, kept as written while a float can hold its magnitude
    /// (beyond that, `serde_json` refuses it as out of range, as any other such number).
    #[inline(never)]
    fn big_integer(&self, start: usize, end: usize) -> Option<Entry<'s>> {
        let literal = &self.text[start..end];
        big_magnitude(literal)
            .is_finite()
            .then_some(Entry::BigInt(literal))
    }
}

const EVERY_BYTE: u64 = 0x0101_0101_0101_0101;
const HIGH_BITS: u64 = 0x8080_8080_8080_8080;

/// The high bit of each byte of `word` below `limit` (at most 0x80). Bytes after the first such
/// byte may be marked wrongly (a borrow runs on), so only the lowest mark is ever read.
fn bytes_below(word: u64, limit: u8) -> u64 {
    word.wrapping_sub(EVERY_BYTE * u64::from(limit)) & !word & HIGH_BITS
}

/// The end of the plain run of string bytes of `bytes` from `from`: eight bytes at a time while
/// none of them stops it, then byte by byte.
fn plain_run(bytes: &[u8], from: usize) -> usize {
    let mut end = from;
    while let Some(word) = word_at(bytes, end) {
        let stops = bytes_below(word, 0x20)
            | bytes_below(word ^ (EVERY_BYTE * u64::from(b'"')), 1)
            | bytes_below(word ^ (EVERY_BYTE * u64::from(b'\\')), 1);
        if stops != 0 {
            return end + (stops.trailing_zeros() / 8) as usize;
        }
        end += 8;
    }
    while end < bytes.len() && !STRING_STOP[bytes[end] as usize] {
        end += 1;
    }
    end
}

/// The eight bytes of `bytes` from `at` as one little-endian word, if there are eight.
#[inline]
fn word_at(bytes: &[u8], at: usize) -> Option<u64> {
    let chunk = <[u8; 8]>::try_from(bytes.get(at..at + 8)?).ok()?;
    Some(u64::from_le_bytes(chunk))
}

/// The four bytes of `bytes` from `at` as one little-endian half word, if there are four.
#[inline]
fn half_at(bytes: &[u8], at: usize) -> Option<u32> {
    let chunk = <[u8; 4]>::try_from(bytes.get(at..at + 4)?).ok()?;
    Some(u32::from_le_bytes(chunk))
}

/// Whether two strings are equal, for the short ones of object keys and choices: up to sixteen
/// bytes are compared as at most two overlapping words each way, with no call to `memcmp`.
#[inline]
pub fn same_text(left: &str, right: &str) -> bool {
    let (left, right) = (left.as_bytes(), right.as_bytes());
    let len = left.len();
    if len != right.len() {
        return false;
    }
    match len {
        0 => true,
        1..=3 => left.iter().zip(right).all(|(a, b)| a == b),
        4..=8 => {
            half_at(left, 0) == half_at(right, 0)
                && half_at(left, len - 4) == half_at(right, len - 4)
        }
        9..=16 => {
            word_at(left, 0) == word_at(right, 0)
                && word_at(left, len - 8) == word_at(right, len - 8)
        }
        _ => left == right,
    }
}

/// The digits of a number written with a fraction or an exponent, without its sign: the
/// integer digits, the fraction digits (after the point) and the exponent (after the `e`, with
/// its sign), each possibly empty.
struct DecimalParts<'a> {
    integer: &'a [u8],
    fraction: &'a [u8],
    exponent: &'a [u8],
}

/// The powers of ten that a double holds exactly.
const EXACT_POWERS_OF_TEN: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

impl DecimalParts<'_> {
    /// The value, when it is one exact operation away (Clinger's fast path): digits that fit
    /// 53 bits and a power of ten a double holds exactly. Both operands are then exact and one
    /// IEEE multiplication or division rounds correctly, so the result is the correctly rounded
    /// reading that `str::parse` gives, without reading the text a second time. None otherwise.
    fn exact_value(&self) -> Option<f64> {
        let count = self.integer.len() + self.fraction.len();
        if count > MAX_PLAIN_DIGITS {
            return None;
        }
        let mantissa = digits_value(digits_value(0, self.integer), self.fraction);
        if mantissa > 1 << 53 {
            return None;
        }
        let (negative, digits) = match self.exponent {
            [b'-', rest @ ..] => (true, rest),
            [b'+', rest @ ..] | rest => (false, rest),
        };
        if digits.len() > 3 {
            return None;
        }
        let written = i64::try_from(digits_value(0, digits)).ok()?;
        let power =
            if negative { -written } else { written } - i64::try_from(self.fraction.len()).ok()?;
        #[allow(clippy::cast_precision_loss)] // at most 2^53: exact
        let mantissa = mantissa as f64;
        let scale = *EXACT_POWERS_OF_TEN.get(usize::try_from(power.unsigned_abs()).ok()?)?;
        Some(if power < 0 {
            mantissa / scale
        } else {
            mantissa * scale
        })
    }
}

/// `total` with the decimal `digits` (ASCII, at most as many as fit 64 bits) written after it.
fn digits_value(total: u64, digits: &[u8]) -> u64 {
    digits
        .iter()
        .fold(total, |total, digit| total * 10 + u64::from(digit - b'0'))
}

/// The value of more than 19 decimal `digits` (ASCII, no leading zero) when it fits 64 bits.
fn wide_digits_value(digits: &[u8]) -> Option<u64> {
    digits.iter().try_fold(0u64, |total, digit| {
        total.checked_mul(10)?.checked_add(u64::from(digit - b'0'))
    })
}

fn skip_digits(bytes: &[u8], mut at: usize) -> usize {
    while let Some(b'0'..=b'9') = bytes.get(at) {
        at += 1;
    }
    at
}

fn hex4(bytes: &[u8], at: usize) -> Option<u32> {
    bytes
        .get(at..at + 4)?
        .iter()
        .try_fold(0u32, |value, &digit| {
            Some(value * 16 + char::from(digit).to_digit(16)?)
        })
}

/// The character of a `\u` escape whose hex digits start at `at` (with the low half of a
/// surrogate pair), and where the text goes on. A lone surrogate is left to `serde_json`.
fn unicode_escape(bytes: &[u8], at: usize) -> Option<(char, usize)> {
    let first = hex4(bytes, at)?;
    match first {
        0xD800..=0xDBFF => {
            if bytes.get(at + 4..at + 6)? != b"\\u" {
                return None;
            }
            let second = hex4(bytes, at + 6)?;
            if !(0xDC00..=0xDFFF).contains(&second) {
                return None;
            }
            let code = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00);
            Some((char::from_u32(code)?, at + 10))
        }
        0xDC00..=0xDFFF => None,
        _ => Some((char::from_u32(first)?, at + 4)),
    }
}

/// Object keys read by `serde_json`: borrowed from the text unless they hold escapes, which are
/// decoded onto the document's decoded text.
struct KeySeed<'b, 's>(&'b mut Document<'s>);

impl<'de> DeserializeSeed<'de> for KeySeed<'_, 'de> {
    type Value = Text<'de>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed<'_, 'de> {
    type Value = Text<'de>;

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("an object key")
    }

    fn visit_borrowed_str<E: serde::de::Error>(self, value: &'de str) -> Result<Self::Value, E> {
        Ok(Text::Source(value))
    }

    fn visit_str<E: serde::de::Error>(self, value: &str) -> Result<Self::Value, E> {
        Ok(self.0.push_decoded(value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;
    use std::fmt::Write as _;

    fn doc(text: &str) -> Document<'_> {
        parse(Source::Text(text), 1 << 20, 64, Repeats::Resolve).unwrap()
    }

    #[test]
    fn reads_back_what_was_parsed() {
        let text = r#"{"a": [1, -2, 3.5, "x\"y", true, null], "b": {"c": {}}, "é": "ü"}"#;
        let parsed = doc(text);
        let expected: Value = serde_json::from_str(text).unwrap();
        assert_eq!(parsed.to_value(parsed.root().index), expected);
        assert!(parsed.root().equals_value(&expected));
        assert!(!parsed.root().equals_value(&json!({"a": []})));
    }

    #[test]
    fn duplicate_keys_keep_the_first_position_and_the_last_value() {
        let parsed = doc(r#"{"a": 1, "b": 2, "a": 3}"#);
        let object = parsed.root().as_object().unwrap();
        let names: Vec<&str> = object.members().map(|(name, _)| name).collect();
        assert_eq!(names, ["a", "b"]);
        let a = object.get(&Tape::prepare_key("a")).unwrap();
        assert_eq!(a.as_number().and_then(|n| n.as_u64()), Some(3));
        // Large objects too, through the sorted path.
        let mut text = String::from("{");
        for n in 0..100 {
            write!(text, "\"k{}\": {n},", n % 40).unwrap();
        }
        text.push_str("\"last\": 0}");
        let parsed = doc(&text);
        let object = parsed.root().as_object().unwrap();
        assert_eq!(object.len(), 41);
        let names: Vec<&str> = object.members().map(|(name, _)| name).take(2).collect();
        assert_eq!(names, ["k0", "k1"]);
        let k0 = object.get(&Tape::prepare_key("k0")).unwrap();
        assert_eq!(k0.as_number().and_then(|n| n.as_u64()), Some(80));
        assert!(object.get(&Tape::prepare_key("k40")).is_none());
    }

    #[test]
    fn lookups_in_large_objects_find_every_key() {
        let mut text = String::from("{");
        for n in 0..50 {
            write!(text, "\"key{n}\": {n},").unwrap();
        }
        text.push_str("\"z\": null}");
        let parsed = doc(&text);
        let object = parsed.root().as_object().unwrap();
        for n in 0..50 {
            let found = object.get(&Tape::prepare_key(&format!("key{n}"))).unwrap();
            assert_eq!(found.as_number().and_then(|n| n.as_u64()), Some(n));
        }
        assert!(object.get(&Tape::prepare_key("z")).unwrap().is_null());
        assert!(object.get(&Tape::prepare_key("key50")).is_none());
    }

    #[test]
    fn large_objects_and_only_those_get_a_sorted_index() {
        let object = |members: usize| {
            let body: Vec<String> = (0..members).map(|n| format!("\"k{n}\": {n}")).collect();
            format!("{{{}}}", body.join(","))
        };
        let indexed = |text: &str| -> Vec<bool> {
            let parsed = parse(Source::Text(text), 1 << 20, 64, Repeats::Leave).unwrap();
            parsed
                .nodes
                .iter()
                .filter_map(|entry| match entry {
                    Entry::Object { sorted, .. } => Some(*sorted != NOT_SORTED),
                    _ => None,
                })
                .collect()
        };
        // A large object nested in a small one is indexed; its small neighbour is not.
        let nested = format!(
            "{{\"big\": {}, \"small\": {}}}",
            object(INDEXED_OBJECT + 1),
            object(3)
        );
        assert_eq!(indexed(&nested), [true, false, false]);
        // Many small objects, more members than INDEXED_OBJECT in all: none is indexed.
        let many = format!("[{}]", vec![object(10); 5].join(","));
        assert_eq!(indexed(&many), [false; 5]);
    }

    #[test]
    fn recycled_buffers_carry_nothing_into_the_next_document() {
        let first = r#"{"a": "x\ny", "b": [1, {"c": "\u00e9"}], "d": {"e": []}}"#;
        let second = r#"{"f": "\t", "g": [true, null]}"#;
        let parsed = doc(first);
        assert_eq!(
            parsed.to_value(parsed.root_index()),
            serde_json::from_str::<Value>(first).unwrap()
        );
        parsed.recycle();
        let parsed = doc(second);
        // Only the second document's nodes, members, elements and decoded text.
        assert_eq!(parsed.len(), 5);
        assert_eq!(parsed.members.len(), 2);
        assert_eq!(parsed.rare.elements.len(), 2);
        assert_eq!(parsed.rare.decoded, "\t");
        assert_eq!(
            parsed.to_value(parsed.root_index()),
            serde_json::from_str::<Value>(second).unwrap()
        );
    }

    #[test]
    fn a_recycled_document_lends_its_buffers_to_the_next() {
        let parsed = doc(r#"{"a": [1, 2, 3], "b": "\n"}"#);
        let nodes = parsed.nodes.as_ptr();
        parsed.recycle();
        let next = Document::with_capacity(4);
        assert_eq!(next.nodes.as_ptr(), nodes);
        assert!(next.is_empty() && next.rare.decoded.is_empty());
    }

    #[test]
    fn buffers_of_a_huge_document_are_freed_not_kept() {
        let text = format!("[{}0]", "0,".repeat(SPARE_LIMIT * 2));
        let parsed = doc(&text);
        assert!(parsed.nodes.capacity() > SPARE_LIMIT);
        parsed.recycle();
        let next = Document::with_capacity(4);
        assert!(next.nodes.capacity() <= SPARE_LIMIT);
        assert!(next.rare.elements.capacity() <= SPARE_LIMIT);
    }

    #[test]
    fn numbers_keep_their_kind() {
        let parsed = doc("[1, -1, 18446744073709551615, 1.0, 2.5]");
        assert_eq!(
            parsed.to_value(parsed.root().index),
            json!([1, -1, 18_446_744_073_709_551_615_u64, 1.0, 2.5])
        );
        let numbers: Vec<Num> = parsed
            .root()
            .as_array()
            .unwrap()
            .elements()
            .map(|node| node.as_number().unwrap())
            .collect();
        assert_eq!(numbers[1].as_u64(), None);
        assert_eq!(numbers[2].as_i64(), None);
        assert!(numbers[3].is_integer() && !numbers[3].is_written_as_integer());
        assert!(!numbers[4].is_integer());
        let one = parsed.root().as_array().unwrap().elements().nth(3).unwrap();
        assert!(one.equals_value(&json!(1)));
    }

    #[test]
    fn unique_items_compare_as_json() {
        let unique = |text: &str| doc(text).root().as_array().unwrap().is_unique();
        assert!(unique("[1, 2, \"1\", [1], {\"a\": 1}]"));
        assert!(!unique("[1, 1.0]"));
        assert!(!unique(
            "[{\"a\": [1], \"b\": 2}, {\"b\": 2, \"a\": [1.0]}]"
        ));
        let long: Vec<u32> = (0..100).collect();
        assert!(unique(&serde_json::to_string(&long).unwrap()));
        let mut repeated = long.clone();
        repeated.push(7);
        assert!(!unique(&serde_json::to_string(&repeated).unwrap()));
    }

    #[test]
    fn guards_and_bad_text_are_refused() {
        assert!(matches!(
            parse(Source::Bytes(b"[[[["), 100, 3, Repeats::Resolve),
            Err(ParseFailure::Guard(GuardViolation::ArgumentsTooDeep { .. }))
        ));
        assert!(matches!(
            parse(Source::Bytes(b"{}"), 1, 3, Repeats::Resolve),
            Err(ParseFailure::Guard(
                GuardViolation::ArgumentsTooLarge { .. }
            ))
        ));
        for bad in [
            "{",
            "{\"a\" 1}",
            "[1,]",
            "NaN",
            "1e400",
            "{} x",
            "\"\\ud800\"",
        ] {
            assert!(
                matches!(
                    parse(Source::Text(bad), 100, 8, Repeats::Resolve),
                    Err(ParseFailure::Invalid(_))
                ),
                "{bad}"
            );
        }
        assert_eq!(
            parse(Source::Bytes(b"  "), 100, 8, Repeats::Resolve)
                .unwrap()
                .to_value(0),
            json!({})
        );
        assert!(parse(Source::Bytes(&[b'"', 0xff, b'"']), 100, 8, Repeats::Resolve).is_err());
    }

    #[test]
    fn deep_nesting_is_refused_at_the_limit() {
        let deep = "[".repeat(100_000);
        assert_eq!(
            parse(Source::Text(&deep), 1 << 20, 64, Repeats::Resolve).err(),
            Some(ParseFailure::Guard(GuardViolation::ArgumentsTooDeep {
                limit: 64
            }))
        );
        let at_limit = format!("{}{}", "[".repeat(64), "]".repeat(64));
        assert!(parse(Source::Text(&at_limit), 1 << 20, 64, Repeats::Resolve).is_ok());
        let past = format!("{}{}", "{\"a\":".repeat(65), "}".repeat(65));
        assert!(matches!(
            parse(Source::Text(&past), 1 << 20, 64, Repeats::Resolve),
            Err(ParseFailure::Guard(GuardViolation::ArgumentsTooDeep { .. }))
        ));
        let malformed = "{".repeat(100_000);
        assert!(matches!(
            parse(Source::Text(&malformed), 1 << 20, 64, Repeats::Resolve),
            Err(ParseFailure::Guard(GuardViolation::ArgumentsTooDeep { .. }))
        ));
        // Brackets inside strings are not nesting.
        let quoted = format!("{{\"a\": \"{}\"}}", "[".repeat(500));
        assert!(parse(Source::Text(&quoted), 1 << 20, 2, Repeats::Resolve).is_ok());
    }

    #[test]
    fn repeats_left_for_the_caller_resolve_the_same_way() {
        let text = r#"{"a": 1, "b": 2, "a": 3}"#;
        let mut left = parse(Source::Text(text), 1 << 20, 64, Repeats::Leave).unwrap();
        assert_eq!(left.root().as_object().unwrap().len(), 3);
        left.resolve_repeats();
        let resolved = doc(text);
        assert_eq!(
            left.to_value(left.root_index()),
            resolved.to_value(resolved.root_index())
        );
        assert_eq!(left.root().as_object().unwrap().len(), 2);
    }

    #[test]
    fn validates_through_the_crate() {
        let schema = json!({
            "type": "object",
            "properties": {"city": {"type": "string", "minLength": 2}, "tags": {"type": "array", "uniqueItems": true}},
            "required": ["city"],
            "additionalProperties": false
        });
        let validator = jsonschema::options_for::<Tape>().build(&schema).unwrap();
        assert!(validator.is_valid(doc(r#"{"city": "Rome", "tags": [1, 2]}"#).root()));
        assert!(!validator.is_valid(doc(r#"{"city": "R"}"#).root()));
        assert!(!validator.is_valid(doc(r#"{"city": "Rome", "x": 1}"#).root()));
        assert!(!validator.is_valid(doc(r#"{"city": "Rome", "tags": [1, 1]}"#).root()));
        // The last of repeated keys is the one validated, as Python keeps it.
        assert!(!validator.is_valid(doc(r#"{"city": "Rome", "city": "R"}"#).root()));
        assert!(validator.is_valid(doc(r#"{"city": 5, "city": "Rome"}"#).root()));
    }

    // ---- the direct reader against serde_json ----

    /// Every node, member, element and index of a document, with each string as its text
    /// (wherever the text lies), so two readings compare exactly.
    fn layout(doc: &Document<'_>) -> String {
        let text = |text: &Text<'_>| format!("{:?}", doc.text(text));
        let nodes: Vec<String> = doc
            .nodes
            .iter()
            .map(|entry| match entry {
                Entry::Str(string) => format!("Str({})", text(string)),
                // The two integer forms the direct reader reads as Python does, shown as
                // serde_json reads them: only `-0` gives `Int(0)`, and serde_json makes floats
                // of both.
                Entry::Int(0) => format!("{:?}", Entry::Float(-0.0)),
                Entry::BigInt(digits) => format!("{:?}", Entry::Float(big_magnitude(digits))),
                other => format!("{other:?}"),
            })
            .collect();
        let members: Vec<String> = doc
            .members
            .iter()
            .map(|member| format!("{}: {}", text(&member.key), member.value))
            .collect();
        format!(
            "nodes {nodes:?} members {members:?} elements {:?} sorted {:?}",
            doc.rare.elements, doc.rare.sorted
        )
    }

    /// The document `serde_json`'s reading gives, or its message.
    fn read_by_serde(text: &str) -> Result<String, String> {
        let mut builder = Builder::new(Document::with_capacity(8), 64);
        read_into(&mut builder, serde_json::Deserializer::from_str(text))
            .map_err(|failure| format!("{failure:?}"))?;
        builder.doc.finish(true);
        Ok(layout(&builder.doc))
    }

    /// The document the direct reader gives, if it takes the text.
    fn read_directly(text: &str) -> Option<String> {
        let mut builder = Builder::new(Document::with_capacity(8), 64);
        Reader::read(text, &mut builder)?;
        builder.doc.finish(true);
        Some(layout(&builder.doc))
    }

    /// Whatever the direct reader takes, `serde_json` reads to the same document.
    fn agrees(text: &str) -> Result<(), String> {
        match (read_directly(text), read_by_serde(text)) {
            (None, _) => Ok(()),
            (Some(direct), Ok(serde)) if direct == serde => Ok(()),
            (Some(direct), other) => Err(format!("{text:?}: direct {direct} serde {other:?}")),
        }
    }

    #[test]
    fn the_direct_reader_takes_every_common_form() {
        for text in [
            r#"{"a": [1, -2, 3.5, -0.0, 1e3, 2E-2, "x\"y", true, false, null], "b": {"c": {}}}"#,
            r#"{"é": "ü", "e\u0301": "\ud83d\ude00 \u00e9 \/ \\ \b\f\n\r\t"}"#,
            "\t{ \"a\" :\r\n[ ] , \"b\":[ {} ] }\n",
            r#"{"max": 9999999999999999999, "min": -9223372036854775808}"#,
            r#"{"a": 1, "a": 2}"#,
        ] {
            assert!(read_directly(text).is_some(), "{text}");
            agrees(text).unwrap();
        }
    }

    #[test]
    fn the_direct_reader_leaves_rare_and_malformed_text_to_serde() {
        for text in [
            // Forms serde_json refuses, with its message.
            "{\"a\": 1e400}",
            &format!("{{\"a\": 1{}}}", "0".repeat(400)),
            r#"{"a": "\ud800"}"#,
            r#"{"a": "\udc00x"}"#,
            // Malformed.
            "{\"a\": 01}",
            "{\"a\": 1.}",
            "{\"a\": .5}",
            "{\"a\": 1e}",
            "{\"a\": -}",
            "{\"a\": [1,]}",
            "{\"a\": 1,}",
            "{\"a\" 1}",
            "{a: 1}",
            "{\"a\": tru}",
            "{\"a\": \"\u{1}\"}",
            "{\"a\": \"\\x\"}",
            "{\"a\": \"\\u12g4\"}",
            "{\"a\": 1} x",
            "{\"a\": \"unclosed",
            "[1 2]",
        ] {
            assert!(read_directly(text).is_none(), "{text}");
        }
    }

    #[test]
    fn integers_are_read_as_python_reads_them() {
        let text = "[-0, 18446744073709551615, 18446744073709551616, -9223372036854775808, \
                    -9223372036854775809, -123456789012345678901234567890]";
        let mut builder = Builder::new(Document::with_capacity(8), 64);
        Reader::read(text, &mut builder).unwrap();
        let doc = &builder.doc;
        assert!(matches!(doc.entry(0), Entry::Int(0)));
        assert!(matches!(doc.entry(1), Entry::UInt(u64::MAX)));
        assert!(matches!(
            doc.entry(2),
            Entry::BigInt("18446744073709551616")
        ));
        assert!(matches!(doc.entry(3), Entry::Int(i64::MIN)));
        assert!(matches!(
            doc.entry(4),
            Entry::BigInt("-9223372036854775809")
        ));
        assert!(matches!(
            doc.entry(5),
            Entry::BigInt("-123456789012345678901234567890")
        ));
        // Validated by magnitude, as integers.
        let number = doc.number(5).unwrap();
        assert!(number.is_integer() && number.is_written_as_integer());
        assert_eq!(
            number.as_f64(),
            "-123456789012345678901234567890".parse().ok()
        );
        assert_eq!((number.as_i64(), number.as_u64()), (None, None));
        // A float cannot hold 400 digits: serde_json refuses it, as it refuses 1e400.
        let huge = format!("[1{}]", "0".repeat(400));
        assert!(read_directly(&huge).is_none());
        assert!(read_by_serde(&huge).is_err());
    }

    #[test]
    fn a_schema_checks_a_wide_integer_by_its_magnitude() {
        let schema = serde_json::json!({"type": "integer", "maximum": 1e20});
        let validator = jsonschema::options_for::<Tape>().build(&schema).unwrap();
        assert!(validator.is_valid(doc("99999999999999999999").root()));
        assert!(!validator.is_valid(doc("100000000000000000001000").root()));
        let floats = serde_json::json!({"type": "string"});
        let validator = jsonschema::options_for::<Tape>().build(&floats).unwrap();
        assert!(!validator.is_valid(doc("100000000000000000001000").root()));
    }

    #[test]
    fn a_plain_run_ends_at_the_first_stop_byte() {
        for length in 0..26 {
            for position in 0..=length {
                for stop in [b'"', b'\\', 0, 0x1f] {
                    // Bytes around the stops that a word-wide check could mistake for them.
                    let mut bytes: Vec<u8> = (0..length)
                        .map(|n| [b'a', 0x20, 0x7f, 0xc3, 0xa9, b'!', b'#', b']'][n % 8])
                        .collect();
                    if position < length {
                        bytes[position] = stop;
                    }
                    assert_eq!(plain_run(&bytes, 0), position, "{bytes:?}");
                }
            }
        }
    }

    #[test]
    fn the_direct_reader_stops_at_the_depth_limit() {
        let mut builder = Builder::new(Document::with_capacity(8), 3);
        assert!(Reader::read("[[[1]]]", &mut builder).is_some());
        let mut builder = Builder::new(Document::with_capacity(8), 3);
        assert!(Reader::read("[[[[1]]]]", &mut builder).is_none());
        assert!(builder.too_deep);
    }

    /// JSON values with every kind of number the direct reader takes and strings of any text.
    fn value_strategy() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (-1_000_000_000_000_000_000i64..1_000_000_000_000_000_000).prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |value| value.is_finite())
                .prop_map(Value::from),
            any::<String>().prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::vec((any::<String>(), inner), 0..6)
                    .prop_map(|members| Value::Object(members.into_iter().collect())),
            ]
        })
    }

    /// A JSON string literal of `text` with each character written plainly or as `\u` escapes
    /// (surrogate pairs beyond the basic plane), as `escape` says for it.
    fn string_literal(text: &str, escape: &[bool]) -> String {
        let mut literal = String::from("\"");
        for (character, &escaped) in text.chars().zip(escape.iter().cycle()) {
            if escaped || character < ' ' || character == '"' || character == '\\' {
                let mut units = [0u16; 2];
                for unit in character.encode_utf16(&mut units) {
                    write!(literal, "\\u{unit:04x}").unwrap();
                }
            } else {
                literal.push(character);
            }
        }
        literal.push('"');
        literal
    }

    proptest! {
        #[test]
        fn same_text_is_string_equality(
            left in "[a-c\u{e9}]{0,20}",
            right in "[a-c\u{e9}]{0,20}",
            changed in any::<prop::sample::Index>(),
        ) {
            prop_assert_eq!(same_text(&left, &right), left == right);
            prop_assert!(same_text(&left, &left.clone()));
            // One character changed anywhere, first, middle or last, makes them differ.
            if !left.is_empty() {
                let at = changed.index(left.chars().count());
                let near: String = left
                    .chars()
                    .enumerate()
                    .map(|(position, c)| if position == at { 'z' } else { c })
                    .collect();
                prop_assert!(!same_text(&left, &near));
            }
        }

        #[test]
        fn the_direct_reader_reads_generated_json_as_serde_does(
            value in value_strategy(),
            pretty in any::<bool>(),
        ) {
            let text = if pretty {
                serde_json::to_string_pretty(&value).unwrap()
            } else {
                serde_json::to_string(&value).unwrap()
            };
            prop_assert!(read_directly(&text).is_some(), "refused {}", text);
            prop_assert_eq!(agrees(&text), Ok(()));
        }

        #[test]
        fn decimals_read_to_the_bits_the_standard_parser_gives(
            negative in any::<bool>(),
            integer in "0|[1-9][0-9]{0,21}",
            fraction in proptest::option::of("[0-9]{1,21}"),
            exponent in proptest::option::of("[eE][+-]?[0-9]{1,4}"),
        ) {
            // Without a fraction or an exponent it would be an integer: those are read elsewhere.
            let exponent = match (&fraction, exponent) {
                (None, None) => "e0".to_owned(),
                (_, exponent) => exponent.unwrap_or_default(),
            };
            let fraction = fraction.map(|digits| format!(".{digits}")).unwrap_or_default();
            let text = format!("{}{integer}{fraction}{exponent}", if negative { "-" } else { "" });
            let expected: f64 = text.parse().unwrap();
            let mut builder = Builder::new(Document::with_capacity(8), 64);
            let read = Reader::read(&text, &mut builder);
            if expected.is_finite() {
                prop_assert!(read.is_some(), "refused {}", text);
                let Entry::Float(value) = *builder.doc.entry(builder.doc.root_index()) else {
                    return Err(TestCaseError::fail(format!("{text} is not a float")));
                };
                prop_assert_eq!(value.to_bits(), expected.to_bits(), "{}", text);
            } else {
                prop_assert!(read.is_none(), "took {}", text);
            }
            prop_assert_eq!(agrees(&text), Ok(()));
        }

        #[test]
        fn the_direct_reader_decodes_escapes_as_serde_does(
            text in any::<String>(),
            escape in prop::collection::vec(any::<bool>(), 1..8),
        ) {
            let json = format!("{{{}: {}}}", string_literal(&text, &escape), string_literal(&text, &[false]));
            prop_assert!(read_directly(&json).is_some(), "refused {}", json);
            prop_assert_eq!(agrees(&json), Ok(()));
        }

        #[test]
        fn the_direct_reader_never_disagrees_with_serde_on_fragments(
            pieces in prop::collection::vec(prop::sample::select(vec![
                "{", "}", "[", "]", ":", ",", "\"", "\\", "u", "0", "1", "9", "-", "+", ".",
                "e", "E", " ", "\n", "true", "false", "null", "\"a\"", "\\u00e9", "\\ud83d",
                "\\ude00", "\\n", "é", "\u{1}", "\u{7f}",
            ]), 0..40),
        ) {
            let text: String = pieces.concat();
            prop_assert_eq!(agrees(&text), Ok(()));
        }
    }
}
