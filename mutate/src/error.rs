//! The errors of this crate.

use frognano_core::ErrorKind;

use crate::registry::known_operator_names;

/// Errors of this crate.
#[derive(Debug, thiserror::Error)]
pub enum MutateError {
    /// An operator name that [`crate::operators`] does not list.
    #[error("unknown mutation operator `{0}` (known: {known})", known = known_operator_names())]
    UnknownOperator(String),
    /// The source does not parse cleanly with tree-sitter-python.
    #[error("the source does not parse as Python")]
    Parse,
    /// An edit is out of range, not on a character boundary, or overlaps another.
    #[error("invalid edit: {0}")]
    InvalidEdit(String),
}

impl MutateError {
    /// What sort of failure this is: an unknown operator name is an invalid argument; a source
    /// that does not parse and an invalid edit stop the synthesis of a task.
    pub fn kind(&self) -> ErrorKind {
        match self {
            MutateError::UnknownOperator(_) => ErrorKind::InvalidArgument,
            MutateError::Parse | MutateError::InvalidEdit(_) => ErrorKind::Synthesis,
        }
    }
}

frognano_core::impl_kinded_error!(MutateError);
