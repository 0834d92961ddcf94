//! Name table of a tool registry.
//!
//! Invariants: a name maps to exactly one slot; slots are dense, start at 0 and follow first
//! registration order; replacing a name keeps its slot (and so its position in listings). The
//! Python facade keeps the `ToolDefinition` objects in a list indexed by slot, so no Python object
//! ever lives in Rust state.

use ahash::AHashMap;

use crate::errors::CoreError;
use crate::filter::ToolFilter;

/// Longest tool name accepted, in bytes. Providers cap names far lower (`OpenAI`: 64 characters);
/// the ceiling only stops a hostile registration from pinning megabytes per entry.
pub const MAX_NAME_BYTES: usize = 4096;

/// What `register` does with a name that is already present.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DuplicatePolicy {
    /// Overwrite in place; the slot (list position) is kept.
    Replace,
    /// Refuse with `CoreError::DuplicateTool`.
    Error,
}

/// Outcome of a successful insert.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Insertion {
    /// A new name, appended at this slot.
    Added(u32),
    /// An existing name, replaced at its original slot.
    Replaced(u32),
}

impl Insertion {
    /// The slot the name occupies after the insert.
    pub fn slot(self) -> u32 {
        match self {
            Self::Added(slot) | Self::Replaced(slot) => slot,
        }
    }
}

/// Verdict of `Registry::check`, the single lookup the dispatcher makes per call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallCheck {
    /// Registered and permitted by every filter: the tool's slot.
    Permitted(u32),
    /// Not registered.
    Unknown,
    /// Registered, but a filter excludes it.
    Denied(u32),
}

/// Insertion-ordered map from tool name to slot.
#[derive(Debug, Clone)]
pub struct Registry {
    slots: AHashMap<Box<str>, u32>,
    names: Vec<Box<str>>,
    policy: DuplicatePolicy,
}

/// Checks a name before it enters the table.
pub fn validate_name(name: &str) -> Result<(), CoreError> {
    if name.is_empty() {
        return Err(CoreError::InvalidName {
            reason: "the name is empty",
        });
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(CoreError::InvalidName {
            reason: "the name is longer than 4096 bytes",
        });
    }
    Ok(())
}

impl Registry {
    /// An empty registry with the given duplicate policy.
    pub fn new(policy: DuplicatePolicy) -> Self {
        Self {
            slots: AHashMap::new(),
            names: Vec::new(),
            policy,
        }
    }

    /// The duplicate policy fixed at construction.
    pub fn policy(&self) -> DuplicatePolicy {
        self.policy
    }

    /// Adds `name`, or replaces it in place under `Replace`.
    pub fn insert(&mut self, name: &str) -> Result<Insertion, CoreError> {
        validate_name(name)?;
        if let Some(&slot) = self.slots.get(name) {
            return match self.policy {
                DuplicatePolicy::Replace => Ok(Insertion::Replaced(slot)),
                DuplicatePolicy::Error => Err(CoreError::DuplicateTool {
                    name: name.to_owned(),
                }),
            };
        }
        let slot = u32::try_from(self.names.len()).map_err(|_| CoreError::RegistryFull)?;
        let owned: Box<str> = name.into();
        self.names.push(owned.clone());
        self.slots.insert(owned, slot);
        Ok(Insertion::Added(slot))
    }

    /// The slot of `name`, if registered.
    pub fn slot(&self, name: &str) -> Option<u32> {
        self.slots.get(name).copied()
    }

    /// Lookup and filter in one step, in the dispatcher's order: unknown first, then denied.
    pub fn check(&self, name: &str, filter: Option<&ToolFilter>) -> CallCheck {
        match self.slot(name) {
            None => CallCheck::Unknown,
            Some(slot) => match filter {
                Some(filter) if !filter.permits(name) => CallCheck::Denied(slot),
                _ => CallCheck::Permitted(slot),
            },
        }
    }

    /// Names in slot order.
    pub fn names(&self) -> &[Box<str>] {
        &self.names
    }

    /// Number of registered names.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// True when nothing is registered.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Slots of the registered tools the filter permits, in slot order.
    pub fn permitted_slots(&self, filter: &ToolFilter) -> Vec<u32> {
        filter.apply(self.names.iter().map(AsRef::as_ref))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::FilterSpec;
    use proptest::prelude::*;

    #[test]
    fn replace_keeps_the_original_slot() {
        let mut registry = Registry::new(DuplicatePolicy::Replace);
        assert_eq!(registry.insert("a"), Ok(Insertion::Added(0)));
        assert_eq!(registry.insert("b"), Ok(Insertion::Added(1)));
        assert_eq!(registry.insert("a"), Ok(Insertion::Replaced(0)));
        let names: Vec<&str> = registry.names().iter().map(AsRef::as_ref).collect();
        assert_eq!(names, ["a", "b"]);
    }

    #[test]
    fn error_policy_refuses_a_second_registration() {
        let mut registry = Registry::new(DuplicatePolicy::Error);
        registry.insert("echo").unwrap();
        let err = registry.insert("echo").unwrap_err();
        assert_eq!(err.to_string(), "Duplicate tool: echo");
        assert_eq!(registry.len(), 1);
    }

    #[test]
    fn empty_and_oversized_names_are_refused() {
        let mut registry = Registry::new(DuplicatePolicy::Replace);
        assert!(matches!(
            registry.insert(""),
            Err(CoreError::InvalidName { .. })
        ));
        let long = "x".repeat(MAX_NAME_BYTES + 1);
        assert!(matches!(
            registry.insert(&long),
            Err(CoreError::InvalidName { .. })
        ));
        assert!(registry.is_empty());
    }

    #[test]
    fn check_reports_unknown_before_denied() {
        let mut registry = Registry::new(DuplicatePolicy::Replace);
        registry.insert("read").unwrap();
        registry.insert("write").unwrap();
        let filter = ToolFilter::compile([FilterSpec::new(Vec::<String>::new(), vec!["write"])]);
        assert_eq!(
            registry.check("read", Some(&filter)),
            CallCheck::Permitted(0)
        );
        assert_eq!(registry.check("write", Some(&filter)), CallCheck::Denied(1));
        assert_eq!(registry.check("delete", Some(&filter)), CallCheck::Unknown);
        assert_eq!(registry.check("write", None), CallCheck::Permitted(1));
    }

    proptest! {
        #[test]
        fn slots_match_a_first_seen_model(names in proptest::collection::vec("[a-d]{1,2}", 0..40)) {
            let mut registry = Registry::new(DuplicatePolicy::Replace);
            let mut model: Vec<String> = Vec::new();
            for name in &names {
                let slot = registry.insert(name).unwrap().slot() as usize;
                let expected = model.iter().position(|n| n == name).unwrap_or_else(|| {
                    model.push(name.clone());
                    model.len() - 1
                });
                prop_assert_eq!(slot, expected);
            }
            let listed: Vec<&str> = registry.names().iter().map(AsRef::as_ref).collect();
            prop_assert_eq!(listed, model.iter().map(String::as_str).collect::<Vec<_>>());
        }
    }
}
