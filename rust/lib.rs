//! Rust core of prism-tools.
//!
//! The pure modules (`registry`, `filter`, `redact`, `errors`) know nothing of Python and are
//! tested with `cargo test --no-default-features`. The `python` feature adds the `_core`
//! extension module below: thin, frozen wrappers that hold only Rust data, one crossing per
//! operation.

#[cfg(feature = "python")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

pub mod document;
pub mod errors;
pub mod filter;
pub mod guards;
pub mod redact;
pub mod registry;
pub mod schema;
pub mod search;

#[cfg(feature = "python")]
mod bindings;
#[cfg(feature = "python")]
mod bindings_document;
#[cfg(feature = "python")]
mod bindings_schema;
#[cfg(feature = "python")]
mod bindings_search;
