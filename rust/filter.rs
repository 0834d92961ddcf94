//! Exact-name allow/deny filters, compiled once.
//!
//! Semantics: a name passes a set of filters iff it is in no deny list (the union of all of
//! them) and in every allow list that is non-empty. An empty or missing allow list restricts
//! nothing. Matching is exact and case-sensitive: no prefixes, no globs. Applying a filter only
//! ever selects from its input, so it can never invent or enable a tool.

use std::hash::{DefaultHasher, Hash, Hasher};

use ahash::AHashSet;

/// One filter as a host writes it: the names to allow and the names to deny.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FilterSpec {
    /// Names allowed by this scope; empty restricts nothing.
    pub allow: Vec<String>,
    /// Names denied by this scope; deny wins over allow.
    pub deny: Vec<String>,
}

impl FilterSpec {
    /// Builds a spec from any string-like lists.
    pub fn new<A: Into<String>, D: Into<String>>(allow: Vec<A>, deny: Vec<D>) -> Self {
        Self {
            allow: allow.into_iter().map(Into::into).collect(),
            deny: deny.into_iter().map(Into::into).collect(),
        }
    }
}

/// A compiled conjunction of filters.
#[derive(Debug, Clone)]
pub struct ToolFilter {
    deny: AHashSet<Box<str>>,
    /// The non-empty allow lists; a name must be in each.
    allows: Vec<AHashSet<Box<str>>>,
    /// Sorted, de-duplicated form used for equality, hashing and display.
    canonical_deny: Vec<Box<str>>,
    canonical_allows: Vec<Vec<Box<str>>>,
    digest: u64,
}

fn sorted_unique(names: impl IntoIterator<Item = Box<str>>) -> Vec<Box<str>> {
    let mut names: Vec<Box<str>> = names.into_iter().collect();
    names.sort_unstable();
    names.dedup();
    names
}

impl ToolFilter {
    /// Compiles one or more specs into a single filter.
    pub fn compile(specs: impl IntoIterator<Item = FilterSpec>) -> Self {
        let mut deny: AHashSet<Box<str>> = AHashSet::new();
        let mut allows: Vec<AHashSet<Box<str>>> = Vec::new();
        for spec in specs {
            deny.extend(spec.deny.into_iter().map(String::into_boxed_str));
            if !spec.allow.is_empty() {
                allows.push(spec.allow.into_iter().map(String::into_boxed_str).collect());
            }
        }
        let canonical_deny = sorted_unique(deny.iter().cloned());
        let mut canonical_allows: Vec<Vec<Box<str>>> = allows
            .iter()
            .map(|allow| sorted_unique(allow.iter().cloned()))
            .collect();
        // Intersection is commutative and idempotent: order and repeats of allow lists do not
        // change the meaning, so they must not change equality either.
        canonical_allows.sort_unstable();
        canonical_allows.dedup();
        let mut hasher = DefaultHasher::new();
        canonical_deny.hash(&mut hasher);
        canonical_allows.hash(&mut hasher);
        let digest = hasher.finish();
        Self {
            deny,
            allows,
            canonical_deny,
            canonical_allows,
            digest,
        }
    }

    /// A filter that permits every name.
    pub fn permit_all() -> Self {
        Self::compile(std::iter::empty())
    }

    /// Whether `name` passes.
    pub fn permits(&self, name: &str) -> bool {
        !self.deny.contains(name) && self.allows.iter().all(|allow| allow.contains(name))
    }

    /// Whether a name that no list holds passes (one that is not text, say): only when no allow
    /// list restricts anything.
    pub fn permits_unlisted(&self) -> bool {
        self.allows.is_empty()
    }

    /// Indexes of the names that pass, in input order.
    pub fn apply<'a>(&self, names: impl IntoIterator<Item = &'a str>) -> Vec<u32> {
        names
            .into_iter()
            .zip(0u32..)
            .filter_map(|(name, index)| self.permits(name).then_some(index))
            .collect()
    }

    /// Denied names, sorted and unique.
    pub fn denied(&self) -> &[Box<str>] {
        &self.canonical_deny
    }

    /// The non-empty allow lists, each sorted and unique, in canonical order.
    pub fn allow_lists(&self) -> &[Vec<Box<str>>] {
        &self.canonical_allows
    }

    /// A stable digest of the canonical form, for hashing.
    pub fn digest(&self) -> u64 {
        self.digest
    }

    /// True when the filter restricts nothing.
    pub fn is_permissive(&self) -> bool {
        self.deny.is_empty() && self.allows.is_empty()
    }
}

impl PartialEq for ToolFilter {
    fn eq(&self, other: &Self) -> bool {
        self.digest == other.digest
            && self.canonical_deny == other.canonical_deny
            && self.canonical_allows == other.canonical_allows
    }
}

impl Eq for ToolFilter {}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn spec(allow: &[&str], deny: &[&str]) -> FilterSpec {
        FilterSpec::new(allow.to_vec(), deny.to_vec())
    }

    #[test]
    fn deny_wins_over_allow() {
        let filter = ToolFilter::compile([spec(&["a", "b"], &["b"])]);
        assert!(filter.permits("a"));
        assert!(!filter.permits("b"));
        assert!(!filter.permits("c"));
    }

    #[test]
    fn empty_allow_restricts_nothing() {
        let filter = ToolFilter::compile([spec(&[], &["x"])]);
        assert!(filter.permits("anything"));
        assert!(!filter.permits("x"));
        assert!(ToolFilter::permit_all().is_permissive());
    }

    #[test]
    fn matching_is_exact() {
        let filter = ToolFilter::compile([spec(&["read"], &[])]);
        assert!(!filter.permits("read_file"));
        assert!(!filter.permits("Read"));
        assert!(!filter.permits("rea"));
    }

    #[test]
    fn every_non_empty_allow_must_include_the_name() {
        let filter = ToolFilter::compile([
            spec(&["a", "b"], &[]),
            spec(&["b", "c"], &[]),
            spec(&[], &[]),
        ]);
        assert_eq!(filter.apply(["a", "b", "c"]), vec![1]);
    }

    #[test]
    fn apply_keeps_input_order_and_never_invents() {
        let filter = ToolFilter::compile([spec(&["z", "a", "ghost"], &[])]);
        assert_eq!(filter.apply(["a", "m", "z"]), vec![0, 2]);
    }

    #[test]
    fn equality_ignores_order_and_repeats() {
        let one = ToolFilter::compile([spec(&["b", "a", "a"], &["x"]), spec(&["c"], &[])]);
        let two = ToolFilter::compile([spec(&["c"], &["x", "x"]), spec(&["a", "b"], &[])]);
        assert_eq!(one, two);
        assert_eq!(one.digest(), two.digest());
        assert_ne!(one, ToolFilter::compile([spec(&["a", "b"], &[])]));
    }

    proptest! {
        #[test]
        fn agrees_with_the_definition(
            specs in proptest::collection::vec(
                (proptest::collection::vec("[a-e]", 0..4), proptest::collection::vec("[a-e]", 0..3)),
                0..4,
            ),
            names in proptest::collection::vec("[a-f]", 0..12),
        ) {
            let filter = ToolFilter::compile(specs.iter().map(|(a, d)| FilterSpec::new(a.clone(), d.clone())));
            for name in &names {
                let denied = specs.iter().any(|(_, d)| d.contains(name));
                let allowed = specs.iter().all(|(a, _)| a.is_empty() || a.contains(name));
                prop_assert_eq!(filter.permits(name), !denied && allowed);
            }
        }
    }
}
