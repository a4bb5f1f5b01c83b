//! Fetching, verifying and caching the runtime assets: [`frognano_assets`], re-exported here.
//!
//! The sandbox's own pins (the CPython images, the pytest layer) live beside the code that uses
//! them, in [`crate::image`] and [`crate::layers`]; an [`AssetError`] becomes a
//! [`crate::SandboxError`] with `?`.

pub use frognano_assets::*;
