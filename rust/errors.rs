//! The one error type of the pure core. The Python bindings map each variant to one exception
//! class in a single `From` impl (see `lib.rs`), so no error text is invented twice.

use std::fmt;

/// Everything the core can refuse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CoreError {
    /// A second registration of `name` under the `error` duplicate policy.
    DuplicateTool { name: String },
    /// A tool name that cannot be registered (empty, or longer than the core accepts).
    InvalidName { reason: &'static str },
    /// The registry holds `u32::MAX` slots already.
    RegistryFull,
}

impl fmt::Display for CoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::DuplicateTool { name } => write!(f, "Duplicate tool: {name}"),
            Self::InvalidName { reason } => write!(f, "Invalid tool name: {reason}"),
            Self::RegistryFull => f.write_str("Tool registry is full"),
        }
    }
}

impl std::error::Error for CoreError {}
