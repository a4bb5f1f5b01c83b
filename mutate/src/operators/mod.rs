//! The mutation operators, one module per kind of bug. Each adds `visit_*` methods to
//! [`crate::analyzer::Analyzer`], which calls them for the node kinds they look at; every
//! operator is listed once in [`crate::registry`].

pub(crate) mod calls;
pub(crate) mod classes;
pub(crate) mod exceptions;
pub(crate) mod expressions;
pub(crate) mod off_by_one;
pub(crate) mod statements;
pub(crate) mod values;
