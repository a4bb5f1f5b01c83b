//! Procedural bug injection for Python source: the mutation operators of FrogNano.
//!
//! This crate finds candidate bugs ("mutations") in one Python file and describes each as a
//! small set of byte-span replacements ([`Edit`]s) of the original text. Task synthesis uses
//! it to inject the bugs of bug-fix tasks, and the repair policy uses the same operators to
//! enumerate candidate fixes. The file is parsed once with tree-sitter-python; every operator
//! (the SWE-smith set plus a few realistic developer-bug operators, see [`operators`]) walks
//! the syntax tree and edits only the bytes it has to (an operator token, a literal, a
//! statement's lines), so formatting and comments elsewhere survive and the resulting diff is
//! minimal. Code inside strings, comments, decorators and type annotations is never mutated.
//! Every candidate is validated by re-parsing the smallest self-contained excerpt around its
//! edits and dropped unless the mutated file still parses cleanly (no ERROR/MISSING node, no
//! empty block) and differs from the original. Each mutation also carries where it lives: the
//! lines of the smallest enclosing statement, the dotted name of the enclosing class/function,
//! and whether it sits in a function body (code that runs at call time rather than import
//! time). Mutations of the same file that do not touch each other can be merged with
//! [`combine`]. The crate is fully deterministic: it contains no randomness.
//!
//! Layout: `registry` lists every operator once (name, origin, description); `operators`
//! holds one module per kind of bug (statements, classes, expressions, values, off-by-one,
//! calls, exceptions); `analyzer` is the tree walk they plug into; `find` runs it and
//! validates the candidates with the excerpt checker of `syntax`.
//!
//! ```
//! use frognano_mutate::{apply, find_mutations};
//!
//! let source = "def area(w, h):\n    return w * h\n";
//! let mutations = find_mutations(source, &["op_change"])?;
//! // `*` can become `/`, `//` or `%`.
//! assert_eq!(mutations.len(), 3);
//! let buggy = apply(source, &mutations[0].edits)?;
//! assert_eq!(buggy, "def area(w, h):\n    return w % h\n");
//! # Ok::<(), frognano_mutate::MutateError>(())
//! ```

mod analyzer;
mod error;
mod find;
mod mutation;
mod operators;
mod registry;
mod syntax;
#[cfg(test)]
mod test_support;

pub use error::MutateError;
pub use find::{find_mutations, find_mutations_with_rejects};
pub use mutation::{Edit, Mutation, apply, combine, overlaps};
pub use registry::{OperatorInfo, operators};
pub use syntax::parses;
