//! Lexical tool search: a BM25 index over tool names and descriptions.
//!
//! # Text to terms
//! - Words are runs of alphanumeric characters (`char::is_alphanumeric`); everything else
//!   separates. A run is also split at camelCase boundaries: before an uppercase letter that
//!   follows a lowercase letter or a digit (`getWeatherNow`, `oauth2Token`), and before the last
//!   capital of an acronym that starts a new word (`HTTPServer` -> http, server). Each word is
//!   lowercased (`str::to_lowercase`). Names need no extra rule: `_`, `-`, `.` and `/` are not
//!   alphanumeric, so they separate already.
//! - Words in [`STOP_WORDS`] (common English function words) are dropped from documents and
//!   queries alike.
//! - The term of a word is its Snowball English (Porter2) stem when the word is ASCII, the word
//!   itself otherwise (the English rules mean nothing for other scripts).
//! - A word longer than [`PREFIX_CHARS`] characters also yields a prefix term: its first
//!   [`PREFIX_CHARS`] characters. Prefix terms catch related forms the stemmer keeps apart
//!   (`summaries`, `summarize`) and count [`PREFIX_WEIGHT`] of a full term.
//!
//! # Scoring
//! BM25 with fielded term weights: a term's frequency in a tool is the sum of the weights of its
//! occurrences ([`NAME_WEIGHT`] in the name, [`DESCRIPTION_WEIGHT`] in the description, times
//! [`PREFIX_WEIGHT`] for prefix terms), and a tool's length is the sum of the weights of all its
//! terms. With `N` tools, `df` the number of tools holding the term and `avgdl` the mean length:
//!
//! ```text
//! idf    = ln(1 + (N - df + 0.5) / (df + 0.5))
//! impact = idf * (tf * (K1 + 1) / (tf + K1 * (1 - B + B * len / avgdl)))
//! score  = sum over distinct query terms of  query_weight * impact
//! query_weight = (K3 + 1) * qtf / (K3 + qtf)   (times PREFIX_WEIGHT for a prefix term)
//! ```
//!
//! `qtf` is how often the term occurs in the query; [`K3`] saturates repeats. Impacts are
//! computed once at build time, so a search only adds precomputed numbers along the postings of
//! the query's terms: its cost follows the postings it touches, not the catalog size. Ties keep
//! index order (the registry's order). A tool that matches no query term is never a hit.

use std::fmt;
use std::sync::{LazyLock, Mutex};

use ahash::{AHashMap, AHashSet};
use rust_stemmers::{Algorithm, Stemmer};

/// BM25 term-frequency saturation.
pub const K1: f64 = 1.2;
/// BM25 length normalisation (0: none, 1: full).
pub const B: f64 = 0.75;
/// Query term-frequency saturation: a word said twice weighs 4/3, three times 3/2.
pub const K3: f64 = 1.0;
/// Weight of one occurrence in the tool name.
pub const NAME_WEIGHT: f64 = 3.0;
/// Weight of one occurrence in the description.
pub const DESCRIPTION_WEIGHT: f64 = 1.0;
/// Characters kept by a prefix term; only longer words yield one.
pub const PREFIX_CHARS: usize = 4;
/// Weight of a prefix term relative to the full term of the same occurrence.
pub const PREFIX_WEIGHT: f64 = 0.5;

/// Hits returned when the caller does not say.
pub const DEFAULT_TOP_K: usize = 16;
/// Most hits one search may return.
pub const MAX_TOP_K: usize = 64;
/// Tools one index holds unless the host raises the cap.
pub const DEFAULT_MAX_INDEXED: usize = 1024;
/// Highest cap a host may set.
pub const MAX_INDEXED_CEILING: usize = 65_536;
/// Query bytes read unless the host says otherwise; the rest is cut at a character boundary.
pub const DEFAULT_MAX_QUERY_BYTES: usize = 4096;
/// Highest query byte limit a host may set.
pub const MAX_QUERY_BYTES_CEILING: usize = 65_536;

/// Common English function words, sorted for binary search. They carry no topic, and every tool
/// description is full of them.
pub const STOP_WORDS: &[&str] = &[
    "a",
    "about",
    "above",
    "after",
    "again",
    "against",
    "all",
    "am",
    "an",
    "and",
    "any",
    "are",
    "as",
    "at",
    "be",
    "because",
    "been",
    "before",
    "being",
    "below",
    "between",
    "both",
    "but",
    "by",
    "can",
    "could",
    "did",
    "do",
    "does",
    "doing",
    "down",
    "during",
    "each",
    "few",
    "for",
    "from",
    "further",
    "had",
    "has",
    "have",
    "having",
    "he",
    "her",
    "here",
    "hers",
    "herself",
    "him",
    "himself",
    "his",
    "how",
    "i",
    "if",
    "in",
    "into",
    "is",
    "it",
    "its",
    "itself",
    "just",
    "me",
    "more",
    "most",
    "my",
    "myself",
    "no",
    "nor",
    "not",
    "now",
    "of",
    "off",
    "on",
    "once",
    "only",
    "or",
    "other",
    "our",
    "ours",
    "ourselves",
    "out",
    "over",
    "own",
    "same",
    "she",
    "should",
    "so",
    "some",
    "such",
    "than",
    "that",
    "the",
    "their",
    "theirs",
    "them",
    "themselves",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "through",
    "to",
    "too",
    "under",
    "until",
    "up",
    "very",
    "was",
    "we",
    "were",
    "what",
    "when",
    "where",
    "which",
    "while",
    "who",
    "whom",
    "why",
    "will",
    "with",
    "would",
    "you",
    "your",
    "yours",
    "yourself",
    "yourselves",
];

/// Why an index could not be built or a search could not run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SearchError {
    /// More tools than the index cap.
    TooManyTools { count: usize, cap: usize },
    /// A cap outside `1..=MAX_INDEXED_CEILING`.
    InvalidCap(usize),
    /// A query byte limit outside `1..=MAX_QUERY_BYTES_CEILING`.
    InvalidQueryLimit(usize),
    /// `k` outside `1..=MAX_TOP_K`.
    InvalidTopK(usize),
    /// The same tool name twice.
    DuplicateName(String),
}

impl fmt::Display for SearchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooManyTools { count, cap } => write!(
                f,
                "tool search index holds at most {cap} tools, got {count}; raise max_indexed (at most {MAX_INDEXED_CEILING}) or disclose every tool"
            ),
            Self::InvalidCap(cap) => write!(
                f,
                "max_indexed must be between 1 and {MAX_INDEXED_CEILING}, got {cap}"
            ),
            Self::InvalidQueryLimit(limit) => write!(
                f,
                "max_query_bytes must be between 1 and {MAX_QUERY_BYTES_CEILING}, got {limit}"
            ),
            Self::InvalidTopK(k) => write!(f, "k must be between 1 and {MAX_TOP_K}, got {k}"),
            Self::DuplicateName(name) => {
                write!(f, "tool search index got the tool name {name:?} twice")
            }
        }
    }
}

impl std::error::Error for SearchError {}

/// Calls `emit` with each lowercased word of `text`, in order, stop words included.
pub fn for_each_word(text: &str, mut emit: impl FnMut(&str)) {
    if text.is_ascii() {
        for_each_ascii_word(text, &mut emit);
    } else {
        for_each_unicode_word(text, &mut emit);
    }
}

/// [`for_each_word`] for ASCII text: the same rules on bytes, and lowercase words are handed out
/// as slices of `text` without a copy.
fn for_each_ascii_word(text: &str, emit: &mut impl FnMut(&str)) {
    let bytes = text.as_bytes();
    let mut lowered = String::new();
    let mut emit_word = |start: usize, end: usize, has_upper: bool| {
        // ASCII text: every byte index is a character boundary.
        let word = &text[start..end];
        if has_upper {
            lowered.clear();
            lowered.push_str(word);
            lowered.make_ascii_lowercase();
            emit(&lowered);
        } else {
            emit(word);
        }
    };
    let mut start: Option<usize> = None;
    let mut has_upper = false;
    let mut previous_upper = false;
    for (index, &byte) in bytes.iter().enumerate() {
        if !byte.is_ascii_alphanumeric() {
            if let Some(begin) = start.take() {
                emit_word(begin, index, has_upper);
            }
            continue;
        }
        let upper = byte.is_ascii_uppercase();
        if upper && let Some(begin) = start {
            let acronym_end =
                previous_upper && bytes.get(index + 1).is_some_and(u8::is_ascii_lowercase);
            if !previous_upper || acronym_end {
                emit_word(begin, index, has_upper);
                start = None;
            }
        }
        if start.is_none() {
            start = Some(index);
            has_upper = false;
        }
        has_upper |= upper;
        previous_upper = upper;
    }
    if let Some(begin) = start {
        emit_word(begin, bytes.len(), has_upper);
    }
}

/// [`for_each_word`] for text with non-ASCII characters, with Unicode's character classes.
fn for_each_unicode_word(text: &str, mut emit: impl FnMut(&str)) {
    let mut word = String::new();
    let mut chars = text.chars().peekable();
    // Case of the previous character inside the current run: 0 none, 1 lower or digit, 2 upper.
    let mut previous = 0u8;
    while let Some(ch) = chars.next() {
        if !ch.is_alphanumeric() {
            flush(&mut word, &mut emit);
            previous = 0;
            continue;
        }
        let upper = ch.is_uppercase();
        if upper && !word.is_empty() {
            let acronym_end = previous == 2
                && chars
                    .peek()
                    .is_some_and(|next| next.is_lowercase() && next.is_alphanumeric());
            if previous == 1 || acronym_end {
                flush(&mut word, &mut emit);
            }
        }
        word.push(ch);
        previous = if upper {
            2
        } else {
            u8::from(ch.is_lowercase() || ch.is_numeric())
        };
    }
    flush(&mut word, &mut emit);
}

fn flush(word: &mut String, emit: &mut impl FnMut(&str)) {
    if word.is_empty() {
        return;
    }
    if word.chars().any(char::is_uppercase) || !word.is_ascii() {
        let lower = word.to_lowercase();
        emit(&lower);
    } else {
        emit(word);
    }
    word.clear();
}

/// Longest word in [`STOP_WORDS`]; anything longer skips the lookup.
const LONGEST_STOP_WORD: usize = 10;

static STOP_WORD_SET: LazyLock<AHashSet<&'static str>> =
    LazyLock::new(|| STOP_WORDS.iter().copied().collect());

/// True for a word [`STOP_WORDS`] drops.
pub fn is_stop_word(word: &str) -> bool {
    word.len() <= LONGEST_STOP_WORD && STOP_WORD_SET.contains(word)
}

/// The prefix term of a word, when it is long enough to have one.
fn prefix_term(word: &str) -> Option<String> {
    let mut indices = word.char_indices();
    let (cut, _) = indices.nth(PREFIX_CHARS)?;
    let mut term = String::with_capacity(cut + 1);
    // `#` is never part of a word, so prefix terms cannot collide with full terms.
    term.push('#');
    term.push_str(&word[..cut]);
    Some(term)
}

/// Terms of one word: its full term and, for long words, its prefix term.
struct WordTerms {
    full: String,
    prefix: Option<String>,
}

/// Stems remembered across builds before the memo starts again empty (words of at most
/// `MAX_STEMMED_BYTES`, so under 10 MiB).
pub const MAX_REMEMBERED_STEMS: usize = 1 << 16;

/// Longest word the stemmer sees; a longer one is its own term, in the index and in queries
/// alike. English suffixes sit in a word's last letters, and the stemmer's time grows with the
/// square of the length on words such as a long run of "y" (each rewrite copies the word), so
/// one hostile description would otherwise stall every build.
pub const MAX_STEMMED_BYTES: usize = 64;

/// Whether `word` goes through the stemmer (English stems apply to ASCII words only).
fn stemmed(word: &str) -> bool {
    word.is_ascii() && word.len() <= MAX_STEMMED_BYTES
}

/// Stems of ASCII words, remembered from build to build: a host that builds indexes over the
/// same or overlapping tools (a per-run or per-tenant subset, a reloaded catalog) stems each
/// word once per process, not once per build. Stemming is a third of a build otherwise.
pub struct StemMemo {
    stems: AHashMap<Box<str>, Box<str>>,
    limit: usize,
}

impl StemMemo {
    pub fn with_limit(limit: usize) -> Self {
        Self {
            stems: AHashMap::new(),
            limit,
        }
    }

    /// The stem of `word` (ASCII), remembered; the memo empties itself when it is full.
    pub fn stem(&mut self, stemmer: &Stemmer, word: &str) -> String {
        if let Some(stem) = self.stems.get(word) {
            return stem.to_string();
        }
        let stem = stemmer.stem(word).into_owned();
        if self.stems.len() >= self.limit {
            self.stems.clear();
        }
        self.stems.insert(word.into(), stem.as_str().into());
        stem
    }

    pub fn len(&self) -> usize {
        self.stems.len()
    }

    pub fn is_empty(&self) -> bool {
        self.stems.is_empty()
    }
}

/// The process's stem memo, shared by every build (English stems, as every index uses).
static REMEMBERED_STEMS: LazyLock<Mutex<StemMemo>> =
    LazyLock::new(|| Mutex::new(StemMemo::with_limit(MAX_REMEMBERED_STEMS)));

fn word_terms(stemmer: &Stemmer, word: &str) -> WordTerms {
    let full = if stemmed(word) {
        // A panic while the memo was locked cannot leave it wrong (an insert either happened or
        // did not), so a poisoned lock is taken over.
        REMEMBERED_STEMS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .stem(stemmer, word)
    } else {
        word.to_owned()
    };
    WordTerms {
        full,
        prefix: prefix_term(word),
    }
}

/// Cuts `text` to at most `max_bytes`, at a character boundary.
pub fn cut_query(text: &str, max_bytes: usize) -> &str {
    if text.len() <= max_bytes {
        return text;
    }
    let mut end = max_bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[derive(Debug, Clone, Copy)]
struct Posting {
    doc: u32,
    impact: f64,
}

/// One scored tool of a search.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    /// Position of the tool in the index (its registry position).
    pub doc: usize,
    pub score: f64,
    /// Indices into [`SearchResult::words`] of the query words that matched, in query order.
    pub matched: Vec<u32>,
}

/// The outcome of one search.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SearchResult {
    pub hits: Vec<Hit>,
    /// The distinct non-stop words of the query, lowercased, in query order.
    pub words: Vec<String>,
}

/// Reusable accumulator: one score slot per tool, reset along the touched list after each use.
#[derive(Default)]
struct Scratch {
    scores: Vec<f64>,
    /// Per tool, bit `i` set when query word `i` (of the first 64) matched it.
    masks: Vec<u64>,
    touched: Vec<u32>,
}

/// A built, immutable BM25 index. Safe to share between threads.
pub struct SearchIndex {
    names: Vec<String>,
    terms: AHashMap<String, u32>,
    /// Every word seen while building, with its term ids (None for a stop word): a query word
    /// found here skips the stop-word test and the stemmer.
    surface: AHashMap<String, Option<SurfaceTerms>>,
    /// Postings of every term, term after term; term `t` owns `postings[offsets[t]..offsets[t + 1]]`.
    postings: Vec<Posting>,
    offsets: Vec<u32>,
    stemmer: Stemmer,
    scratch: Mutex<Scratch>,
}

/// One (term, tool, weighted frequency) triple, in the order the build meets them.
#[derive(Debug, Clone, Copy)]
struct Occurrence {
    term: u32,
    doc: u32,
    frequency: f64,
}

/// Groups occurrences by term (a stable counting sort keeps tool order inside a term) and turns
/// weighted frequencies into BM25 impacts, once the tool lengths are known.
fn impacts(
    occurrences: &[Occurrence],
    term_count: usize,
    lengths: &[f64],
) -> (Vec<Posting>, Vec<u32>) {
    let mut offsets = vec![0u32; term_count + 1];
    for occurrence in occurrences {
        offsets[occurrence.term as usize + 1] += 1;
    }
    for term in 0..term_count {
        offsets[term + 1] += offsets[term];
    }
    let total: f64 = lengths.iter().sum();
    #[allow(clippy::cast_precision_loss)] // at most 65,536 tools
    let count = lengths.len() as f64;
    let average = if lengths.is_empty() {
        1.0
    } else {
        total / count
    };
    let idf: Vec<f64> = offsets
        .windows(2)
        .map(|pair| {
            let df = f64::from(pair[1] - pair[0]);
            (1.0 + (count - df + 0.5) / (df + 0.5)).ln()
        })
        .collect();
    let mut next = offsets.clone();
    let mut postings = vec![
        Posting {
            doc: 0,
            impact: 0.0
        };
        occurrences.len()
    ];
    for occurrence in occurrences {
        let term = occurrence.term as usize;
        let tf = occurrence.frequency;
        let length = lengths[occurrence.doc as usize];
        postings[next[term] as usize] = Posting {
            doc: occurrence.doc,
            impact: idf[term] * (tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * length / average))),
        };
        next[term] += 1;
    }
    (postings, offsets)
}

/// Term ids of a word the index has seen.
#[derive(Debug, Clone, Copy)]
struct SurfaceTerms {
    full: u32,
    prefix: Option<u32>,
}

impl fmt::Debug for SearchIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SearchIndex")
            .field("tools", &self.names.len())
            .field("terms", &self.terms.len())
            .finish_non_exhaustive()
    }
}

/// Checks a `k` before a search.
pub fn check_top_k(k: usize) -> Result<(), SearchError> {
    if (1..=MAX_TOP_K).contains(&k) {
        Ok(())
    } else {
        Err(SearchError::InvalidTopK(k))
    }
}

/// Checks a query byte limit.
pub fn check_query_limit(limit: usize) -> Result<(), SearchError> {
    if (1..=MAX_QUERY_BYTES_CEILING).contains(&limit) {
        Ok(())
    } else {
        Err(SearchError::InvalidQueryLimit(limit))
    }
}

impl SearchIndex {
    /// Builds an index over `(name, description)` pairs, in order.
    pub fn build<N, D>(tools: &[(N, D)], max_indexed: usize) -> Result<Self, SearchError>
    where
        N: AsRef<str>,
        D: AsRef<str>,
    {
        if !(1..=MAX_INDEXED_CEILING).contains(&max_indexed) {
            return Err(SearchError::InvalidCap(max_indexed));
        }
        if tools.len() > max_indexed {
            return Err(SearchError::TooManyTools {
                count: tools.len(),
                cap: max_indexed,
            });
        }
        let stemmer = Stemmer::create(Algorithm::English);
        let mut seen: AHashMap<&str, ()> = AHashMap::with_capacity(tools.len());
        let mut terms: AHashMap<String, u32> = AHashMap::new();
        // Per (term, tool) one occurrence with the summed weight; `last` finds a term's latest one.
        let mut occurrences: Vec<Occurrence> = Vec::new();
        let mut last: Vec<u32> = Vec::new();
        let mut lengths: Vec<f64> = Vec::with_capacity(tools.len());
        // Every distinct word seen, with its term ids (None: a stop word); becomes `surface`.
        let mut cache: AHashMap<String, Option<SurfaceTerms>> = AHashMap::new();
        let mut intern = |term: String, last: &mut Vec<u32>| -> u32 {
            if let Some(&id) = terms.get(&term) {
                return id;
            }
            let id = u32::try_from(last.len()).unwrap_or(u32::MAX);
            terms.insert(term, id);
            last.push(u32::MAX);
            id
        };
        for (doc, (name, description)) in tools.iter().enumerate() {
            let name = name.as_ref();
            if seen.insert(name, ()).is_some() {
                return Err(SearchError::DuplicateName(name.to_owned()));
            }
            // `tools.len() <= MAX_INDEXED_CEILING`, so the position fits.
            let doc = u32::try_from(doc).unwrap_or(u32::MAX);
            let mut length = 0.0;
            for (text, weight) in [
                (name, NAME_WEIGHT),
                (description.as_ref(), DESCRIPTION_WEIGHT),
            ] {
                for_each_word(text, |word| {
                    let known = if let Some(known) = cache.get(word) {
                        *known
                    } else {
                        let known = (!is_stop_word(word)).then(|| {
                            let WordTerms { full, prefix } = word_terms(&stemmer, word);
                            SurfaceTerms {
                                full: intern(full, &mut last),
                                prefix: prefix.map(|prefix| intern(prefix, &mut last)),
                            }
                        });
                        cache.insert(word.to_owned(), known);
                        known
                    };
                    let Some(known) = known else {
                        return;
                    };
                    let mut add = |term: u32, amount: f64| {
                        let latest = &mut last[term as usize];
                        match occurrences.get_mut(*latest as usize) {
                            Some(occurrence) if occurrence.doc == doc => {
                                occurrence.frequency += amount;
                            }
                            _ => {
                                *latest = u32::try_from(occurrences.len()).unwrap_or(u32::MAX);
                                occurrences.push(Occurrence {
                                    term,
                                    doc,
                                    frequency: amount,
                                });
                            }
                        }
                        length += amount;
                    };
                    add(known.full, weight);
                    if let Some(prefix) = known.prefix {
                        add(prefix, weight * PREFIX_WEIGHT);
                    }
                });
            }
            lengths.push(length);
        }
        let (postings, offsets) = impacts(&occurrences, last.len(), &lengths);
        let surface = cache;
        Ok(Self {
            names: tools
                .iter()
                .map(|(name, _)| name.as_ref().to_owned())
                .collect(),
            terms,
            surface,
            postings,
            offsets,
            stemmer,
            scratch: Mutex::new(Scratch::default()),
        })
    }

    fn postings_of(&self, term: u32) -> &[Posting] {
        let term = term as usize;
        &self.postings[self.offsets[term] as usize..self.offsets[term + 1] as usize]
    }

    /// Number of indexed tools.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// True when no tool is indexed.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Indexed tool names, in index order.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Number of distinct terms (full and prefix).
    pub fn term_count(&self) -> usize {
        self.terms.len()
    }

    /// Term ids of one query word, through the surface cache or the stemmer.
    fn query_word_terms(&self, word: &str, buffer: &mut String) -> (Option<u32>, Option<u32>) {
        match self.surface.get(word) {
            Some(Some(known)) => return (Some(known.full), known.prefix),
            Some(None) => return (None, None),
            None if is_stop_word(word) => return (None, None),
            None => {}
        }
        let full = if stemmed(word) {
            self.terms.get(self.stemmer.stem(word).as_ref()).copied()
        } else {
            self.terms.get(word).copied()
        };
        let prefix = word.char_indices().nth(PREFIX_CHARS).and_then(|(cut, _)| {
            buffer.clear();
            buffer.push('#');
            buffer.push_str(&word[..cut]);
            self.terms.get(buffer.as_str()).copied()
        });
        (full, prefix)
    }

    /// The best `k` tools for `query` (cut to `max_query_bytes` first), best first.
    pub fn search(
        &self,
        query: &str,
        k: usize,
        max_query_bytes: usize,
    ) -> Result<SearchResult, SearchError> {
        check_top_k(k)?;
        check_query_limit(max_query_bytes)?;
        let query = cut_query(query, max_query_bytes);

        let mut plan = QueryPlan::default();
        let mut buffer = String::new();
        for_each_word(query, |word| {
            let (full, prefix) = self.query_word_terms(word, &mut buffer);
            if full.is_none() && prefix.is_none() {
                // A word the index cannot match is never reported as matched.
                return;
            }
            let index = plan.word(word);
            if let Some(term) = full {
                plan.full.note(term, index);
            }
            if let Some(term) = prefix {
                plan.prefix.note(term, index);
            }
        });
        if plan.words.is_empty() {
            return Ok(SearchResult::default());
        }

        let mut guard = self.scratch.try_lock().ok();
        let mut local = Scratch::default();
        let scratch: &mut Scratch = match guard.as_deref_mut() {
            Some(shared) => shared,
            None => &mut local,
        };
        if scratch.scores.len() < self.names.len() {
            scratch.scores.resize(self.names.len(), 0.0);
            scratch.masks.resize(self.names.len(), 0);
        }
        let weighted = plan.full.entries.iter().map(|entry| (entry, 1.0)).chain(
            plan.prefix
                .entries
                .iter()
                .map(|entry| (entry, PREFIX_WEIGHT)),
        );
        for (entry, field_weight) in weighted {
            let qtf = f64::from(entry.occurrences);
            let weight = field_weight * ((K3 + 1.0) * qtf / (K3 + qtf));
            for posting in self.postings_of(entry.term) {
                let doc = posting.doc as usize;
                if scratch.masks[doc] == 0 {
                    scratch.touched.push(posting.doc);
                }
                scratch.scores[doc] += weight * posting.impact;
                scratch.masks[doc] |= entry.mask | 1 << 63;
            }
        }
        let mut ranked: Vec<(f64, u32, u64)> = scratch
            .touched
            .iter()
            .map(|&doc| {
                let doc_index = doc as usize;
                (scratch.scores[doc_index], doc, scratch.masks[doc_index])
            })
            .collect();
        for &doc in &scratch.touched {
            scratch.scores[doc as usize] = 0.0;
            scratch.masks[doc as usize] = 0;
        }
        scratch.touched.clear();
        drop(guard);

        let order =
            |a: &(f64, u32, u64), b: &(f64, u32, u64)| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1));
        if ranked.len() > k {
            ranked.select_nth_unstable_by(k - 1, order);
            ranked.truncate(k);
        }
        ranked.sort_unstable_by(order);

        let hits = ranked
            .into_iter()
            .map(|(score, doc, mask)| Hit {
                doc: doc as usize,
                score,
                matched: self.matched_words(doc, mask, &plan),
            })
            .collect();
        Ok(SearchResult {
            hits,
            words: plan.words,
        })
    }

    /// Query words that matched `doc`: the first 64 from the accumulated bit mask, any further
    /// ones by looking `doc` up in the postings of their terms.
    fn matched_words(&self, doc: u32, mask: u64, plan: &QueryPlan) -> Vec<u32> {
        let words = plan.words.len();
        let mut matched: Vec<u32> = (0..words.min(MASK_WORDS))
            .filter(|&word| mask & (1 << word) != 0)
            .map(|word| u32::try_from(word).unwrap_or(u32::MAX))
            .collect();
        if words > MASK_WORDS {
            let mut late = vec![false; words - MASK_WORDS];
            for entry in plan.full.entries.iter().chain(&plan.prefix.entries) {
                let holds_late = entry.words.iter().any(|&word| word as usize >= MASK_WORDS);
                if !holds_late {
                    continue;
                }
                let list = self.postings_of(entry.term);
                if list.binary_search_by(|p| p.doc.cmp(&doc)).is_ok() {
                    for &word in &entry.words {
                        if let Some(slot) = (word as usize).checked_sub(MASK_WORDS) {
                            late[slot] = true;
                        }
                    }
                }
            }
            matched.extend(
                late.iter()
                    .enumerate()
                    .filter(|(_, hit)| **hit)
                    .map(|(slot, _)| u32::try_from(slot + MASK_WORDS).unwrap_or(u32::MAX)),
            );
        }
        matched
    }
}

/// Query words tracked in a tool's match mask; bit 63 only marks the tool as touched.
const MASK_WORDS: usize = 63;

/// One distinct known term of a query.
#[derive(Debug)]
struct QueryTerm {
    term: u32,
    occurrences: u32,
    /// Bits of the first [`MASK_WORDS`] words holding this term.
    mask: u64,
    /// Every word holding this term, by index into [`QueryPlan::words`].
    words: Vec<u32>,
}

/// Distinct terms of one kind (full or prefix) in query order.
#[derive(Debug, Default)]
struct QueryTerms {
    entries: Vec<QueryTerm>,
    positions: AHashMap<u32, usize>,
}

impl QueryTerms {
    fn note(&mut self, term: u32, word: u32) {
        let bit = if (word as usize) < MASK_WORDS {
            1u64 << word
        } else {
            0
        };
        if let Some(&position) = self.positions.get(&term) {
            let entry = &mut self.entries[position];
            entry.occurrences += 1;
            entry.mask |= bit;
            if !entry.words.contains(&word) {
                entry.words.push(word);
            }
        } else {
            self.positions.insert(term, self.entries.len());
            self.entries.push(QueryTerm {
                term,
                occurrences: 1,
                mask: bit,
                words: vec![word],
            });
        }
    }
}

/// The parsed query: its distinct matchable words and terms.
#[derive(Debug, Default)]
struct QueryPlan {
    words: Vec<String>,
    word_positions: AHashMap<String, u32>,
    full: QueryTerms,
    prefix: QueryTerms,
}

impl QueryPlan {
    /// Index of `word` among the distinct words, adding it when new.
    fn word(&mut self, word: &str) -> u32 {
        if let Some(&index) = self.word_positions.get(word) {
            return index;
        }
        let index = u32::try_from(self.words.len()).unwrap_or(u32::MAX);
        self.word_positions.insert(word.to_owned(), index);
        self.words.push(word.to_owned());
        index
    }
}

#[cfg(test)]
#[allow(clippy::float_cmp)] // rankings compare exact scores on purpose
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        for_each_word(text, |w| out.push(w.to_owned()));
        out
    }

    fn index(tools: &[(&str, &str)]) -> SearchIndex {
        SearchIndex::build(tools, DEFAULT_MAX_INDEXED).expect("builds")
    }

    #[test]
    fn remembered_stems_are_the_stemmers_and_stay_bounded() {
        let stemmer = Stemmer::create(Algorithm::English);
        let mut memo = StemMemo::with_limit(3);
        for word in [
            "summaries",
            "running",
            "searches",
            "summaries",
            "tools",
            "running",
        ] {
            assert_eq!(memo.stem(&stemmer, word), stemmer.stem(word));
            assert!(memo.len() <= 3);
        }
        assert!(!memo.is_empty());
    }

    #[test]
    fn a_rebuilt_index_ranks_exactly_as_the_first() {
        let tools = [
            (
                "search_files",
                "Searches the files of a project for matching lines",
            ),
            ("summarize_text", "Writes summaries of long documents"),
            ("run_tests", "Runs the test suite and reports failures"),
        ];
        let first = index(&tools);
        let second = index(&tools);
        // Stem matches only (searching/searches, summaries, running/runs): the memo's stems
        // must be the stemmer's, on the first build and on the rebuild.
        assert_eq!(names(&second, "searching", 1), ["search_files"]);
        assert_eq!(names(&second, "summaries", 1), ["summarize_text"]);
        assert_eq!(names(&second, "running", 1), ["run_tests"]);
        for query in ["searching summaries", "running tests", "files"] {
            let scores = |built: &SearchIndex| {
                built
                    .search(query, 3, DEFAULT_MAX_QUERY_BYTES)
                    .expect("searches")
                    .hits
                    .iter()
                    .map(|hit| (hit.doc, hit.score))
                    .collect::<Vec<_>>()
            };
            assert!(!scores(&first).is_empty());
            assert_eq!(scores(&first), scores(&second));
        }
    }

    fn names(index: &SearchIndex, query: &str, k: usize) -> Vec<String> {
        index
            .search(query, k, DEFAULT_MAX_QUERY_BYTES)
            .expect("searches")
            .hits
            .iter()
            .map(|hit| index.names()[hit.doc].clone())
            .collect()
    }

    #[test]
    fn stop_words_are_sorted_and_unique() {
        assert!(STOP_WORDS.windows(2).all(|pair| pair[0] < pair[1]));
        assert!(
            STOP_WORDS
                .iter()
                .all(|word| word.len() <= LONGEST_STOP_WORD)
        );
        assert!(STOP_WORDS.iter().all(|word| is_stop_word(word)));
        assert!(!is_stop_word("weather"));
    }

    #[test]
    fn words_split_on_separators_and_camel_case() {
        assert_eq!(words("getWeatherNow"), ["get", "weather", "now"]);
        assert_eq!(words("HTTPServer"), ["http", "server"]);
        assert_eq!(words("oauth2Token"), ["oauth2", "token"]);
        assert_eq!(
            words("fs.read_file-v2/all"),
            ["fs", "read", "file", "v2", "all"]
        );
        assert_eq!(words("  Café  ÜBER "), ["café", "über"]);
        assert_eq!(words("ABC"), ["abc"]);
        assert!(words("--- ... !!").is_empty());
    }

    #[test]
    fn prefix_terms_only_for_long_words() {
        assert_eq!(prefix_term("weather").as_deref(), Some("#weat"));
        assert_eq!(prefix_term("book"), None);
        assert_eq!(prefix_term("ünïcödé").as_deref(), Some("#ünïc"));
    }

    #[test]
    fn cut_query_respects_character_boundaries() {
        assert_eq!(cut_query("héllo", 2), "h");
        assert_eq!(cut_query("héllo", 3), "hé");
        assert_eq!(cut_query("abc", 10), "abc");
    }

    #[test]
    fn name_matches_outrank_description_matches() {
        let idx = index(&[
            ("send_email", "Deliver a message to a mailbox."),
            ("get_weather", "Forecast for a city; not an email tool."),
        ]);
        assert_eq!(names(&idx, "email", 16), ["send_email", "get_weather"]);
        assert_eq!(names(&idx, "weather forecast", 16), ["get_weather"]);
    }

    #[test]
    fn stemming_and_prefixes_join_word_forms() {
        let idx = index(&[
            ("summarize_text", "Summarization of long documents."),
            ("translate", "Translation between languages."),
        ]);
        let result = idx.search("summaries of documents", 16, 4096).expect("ok");
        assert_eq!(result.hits.len(), 1);
        assert_eq!(result.words, ["summaries", "documents"]);
        assert_eq!(result.hits[0].matched, [0, 1]);
    }

    #[test]
    fn words_past_the_stemmed_length_are_their_own_terms() {
        let short = format!("{}ies", "y".repeat(MAX_STEMMED_BYTES - 3));
        let long = "y".repeat(200_000); // stemming it took about a second, and four per doubling
        let idx = index(&[("short_one", short.as_str()), ("long_one", long.as_str())]);
        assert!(
            idx.terms
                .contains_key(format!("{}i", "y".repeat(MAX_STEMMED_BYTES - 3)).as_str())
        );
        assert!(idx.terms.contains_key(long.as_str()));
        assert_eq!(names(&idx, &long, 1), ["long_one"]);
        assert_eq!(names(&idx, &short, 1), ["short_one"]);
    }

    #[test]
    fn ties_keep_index_order() {
        let idx = index(&[("zeta_tool", "same words"), ("alpha_tool", "same words")]);
        assert_eq!(names(&idx, "same words", 16), ["zeta_tool", "alpha_tool"]);
    }

    #[test]
    fn empty_and_stop_word_queries_find_nothing() {
        let idx = index(&[("t", "the weather")]);
        assert!(idx.search("", 16, 4096).expect("ok").hits.is_empty());
        assert!(
            idx.search("the of and", 16, 4096)
                .expect("ok")
                .hits
                .is_empty()
        );
    }

    #[test]
    fn limits_are_checked() {
        let tools = [("a", ""), ("b", "")];
        assert_eq!(
            SearchIndex::build(&tools, 1).unwrap_err(),
            SearchError::TooManyTools { count: 2, cap: 1 }
        );
        assert_eq!(
            SearchIndex::build(&tools, 0).unwrap_err(),
            SearchError::InvalidCap(0)
        );
        assert_eq!(
            SearchIndex::build(&[("a", ""), ("a", "")], 4).unwrap_err(),
            SearchError::DuplicateName("a".into())
        );
        let idx = index(&tools);
        assert_eq!(
            idx.search("x", 0, 4096).unwrap_err(),
            SearchError::InvalidTopK(0)
        );
        assert_eq!(
            idx.search("x", 65, 4096).unwrap_err(),
            SearchError::InvalidTopK(65)
        );
        assert_eq!(
            idx.search("x", 1, 65_537).unwrap_err(),
            SearchError::InvalidQueryLimit(65_537)
        );
    }

    #[test]
    fn top_k_cuts_the_ranking() {
        let tools: Vec<(String, String)> = (0..40)
            .map(|i| (format!("tool_{i}"), "shared word".to_owned()))
            .collect();
        let idx = SearchIndex::build(&tools, 64).expect("builds");
        let result = idx.search("shared", 5, 4096).expect("ok");
        let docs: Vec<usize> = result.hits.iter().map(|hit| hit.doc).collect();
        assert_eq!(docs, [0, 1, 2, 3, 4]);
    }

    #[test]
    fn empty_index_searches_cleanly() {
        let tools: [(&str, &str); 0] = [];
        let idx = index(&tools);
        assert!(
            idx.search("anything", 16, 4096)
                .expect("ok")
                .hits
                .is_empty()
        );
    }

    #[test]
    fn words_past_the_mask_are_still_reported() {
        let vocabulary: Vec<String> = (0..100).map(|i| format!("word{i}")).collect();
        let description = vocabulary.join(" ");
        let idx = index(&[("everything", description.as_str()), ("nothing", "other")]);
        let query = vocabulary
            .iter()
            .rev()
            .cloned()
            .collect::<Vec<_>>()
            .join(" ");
        let result = idx.search(&query, 4, 65_536).expect("ok");
        assert_eq!(result.hits.len(), 1);
        let matched: Vec<&str> = result.hits[0]
            .matched
            .iter()
            .map(|&i| result.words[i as usize].as_str())
            .collect();
        let expected: Vec<&str> = vocabulary.iter().rev().map(String::as_str).collect();
        assert_eq!(matched, expected);
    }

    #[test]
    fn repeated_query_words_weigh_more_but_saturate() {
        let idx = index(&[("left", "apples"), ("rite", "pears")]);
        let once = idx.search("apples pears", 2, 4096).expect("ok");
        let twice = idx.search("apples apples pears", 2, 4096).expect("ok");
        assert_eq!(once.hits[0].score, once.hits[1].score);
        assert_eq!(twice.hits[0].doc, 0);
        let ratio = twice.hits[0].score / once.hits[0].score;
        assert!((ratio - 4.0 / 3.0).abs() < 1e-12, "{ratio}");
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        fn catalog() -> impl Strategy<Value = Vec<(String, String)>> {
            let word = prop::sample::select(vec![
                "get",
                "Weather",
                "email",
                "file",
                "the",
                "of",
                "HTTPServer",
                "données",
                "日本",
                "summaries",
                "summarize",
                "x",
                "a1B2",
                "--",
                "_",
                ".",
            ]);
            let text = prop::collection::vec(word, 0..12).prop_map(|w| w.join(" "));
            prop::collection::vec(text.clone(), 0..24).prop_map(|descriptions| {
                descriptions
                    .into_iter()
                    .enumerate()
                    .map(|(i, d)| (format!("tool_{i}_{}", d.len()), d))
                    .collect()
            })
        }

        proptest! {
            #[test]
            fn ascii_fast_path_splits_like_the_unicode_path(text in "[ -~]{0,40}") {
                let mut fast = Vec::new();
                for_each_ascii_word(&text, &mut |word: &str| fast.push(word.to_owned()));
                let mut slow = Vec::new();
                for_each_unicode_word(&text, |word| slow.push(word.to_owned()));
                prop_assert_eq!(fast, slow);
            }

            #[test]
            fn search_is_total_and_well_ordered(
                tools in catalog(),
                query in any::<String>(),
                k in 1usize..=64,
                limit in 1usize..=256,
            ) {
                let idx = SearchIndex::build(&tools, 1024).expect("builds");
                let result = idx.search(&query, k, limit).expect("searches");
                prop_assert!(result.hits.len() <= k);
                for pair in result.hits.windows(2) {
                    let (a, b) = (&pair[0], &pair[1]);
                    prop_assert!(a.score > b.score || (a.score == b.score && a.doc < b.doc));
                }
                for hit in &result.hits {
                    prop_assert!(hit.doc < tools.len());
                    prop_assert!(hit.score > 0.0 && hit.score.is_finite());
                    prop_assert!(!hit.matched.is_empty());
                    prop_assert!(hit.matched.windows(2).all(|w| w[0] < w[1]));
                    prop_assert!(hit.matched.iter().all(|&w| (w as usize) < result.words.len()));
                }
                let cut = cut_query(&query, limit);
                prop_assert_eq!(idx.search(cut, k, 65_536).expect("searches"), result);
            }

            #[test]
            fn arbitrary_catalogs_build(
                tools in prop::collection::vec((any::<String>(), any::<String>()), 0..16),
                query in any::<String>(),
            ) {
                let mut unique = tools;
                unique.sort();
                unique.dedup_by(|a, b| a.0 == b.0);
                let idx = SearchIndex::build(&unique, 1024).expect("builds");
                let result = idx.search(&query, 16, 4096).expect("searches");
                prop_assert!(result.hits.len() <= 16);
            }
        }
    }
}
