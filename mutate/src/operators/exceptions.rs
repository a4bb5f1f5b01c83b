//! The `wrong_exception_type` operator: raise or catch a plausible wrong builtin exception.

use tree_sitter::Node;

use crate::analyzer::Analyzer;
use crate::registry::Operator;
use crate::syntax::NodeKind;

/// Builtin exception classes and the plausible wrong class each is replaced by.
const EXCEPTION_MAP: &[(&str, &str)] = &[
    ("ValueError", "TypeError"),
    ("TypeError", "ValueError"),
    ("KeyError", "IndexError"),
    ("IndexError", "KeyError"),
    ("AttributeError", "TypeError"),
    ("RuntimeError", "ValueError"),
    ("LookupError", "KeyError"),
    ("ZeroDivisionError", "ValueError"),
    ("StopIteration", "IndexError"),
    ("NotImplementedError", "TypeError"),
    ("OverflowError", "ValueError"),
    ("AssertionError", "ValueError"),
    ("ImportError", "AttributeError"),
    ("OSError", "ValueError"),
];

/// The wrong class `wrong_exception_type` puts in place of the builtin `name`.
fn wrong_exception(name: &str) -> Option<&'static str> {
    EXCEPTION_MAP
        .iter()
        .find(|(from, _)| *from == name)
        .map(|(_, to)| *to)
}

impl<'t> Analyzer<'t> {
    /// A `wrong_exception_type` candidate for the exception class named by `ident`.
    fn push_exception(&mut self, ident: Node<'t>) {
        if self.kind_of(ident) != NodeKind::Identifier {
            return;
        }
        let name = self.text(ident);
        if let Some(to) = wrong_exception(name) {
            self.push_change(Operator::WrongExceptionType, ident, name, to, ident);
        }
    }

    /// `wrong_exception_type` on the class a `raise` raises.
    pub(crate) fn visit_raise(&mut self, node: Node<'t>) {
        if !self.is_enabled(Operator::WrongExceptionType) {
            return;
        }
        let mut c = node.walk();
        if !c.goto_first_child() {
            return;
        }
        let mut exc = None;
        loop {
            let ch = c.node();
            if ch.is_named() && c.field_name() != Some("cause") && !ch.is_extra() {
                exc = Some(ch);
                break;
            }
            if !c.goto_next_sibling() {
                break;
            }
        }
        let Some(exc) = exc else {
            return;
        };
        match self.kind_of(exc) {
            NodeKind::Identifier => self.push_exception(exc),
            NodeKind::Call => {
                if let Some(f) = exc.child_by_field_name("function") {
                    self.push_exception(f);
                }
            }
            _ => {}
        }
    }

    /// `wrong_exception_type` on the classes an `except` clause catches.
    pub(crate) fn visit_except(&mut self, node: Node<'t>) {
        if !self.is_enabled(Operator::WrongExceptionType) {
            return;
        }
        let Some(mut value) = node.child_by_field_name("value") else {
            return;
        };
        if self.kind_of(value) == NodeKind::AsPattern {
            let Some(first) = self.named_children(value).first().copied() else {
                return;
            };
            value = first;
        }
        match self.kind_of(value) {
            NodeKind::Identifier => self.push_exception(value),
            NodeKind::Tuple | NodeKind::ParenthesizedExpression => {
                for item in self.named_children(value) {
                    self.push_exception(item);
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::test_support::{assert_mutants, assert_none};

    #[test]
    fn wrong_exception_type_replaces_builtins() {
        let src = "try:\n    raise ValueError('x') from e\nexcept (KeyError, MyError) as err:\n    raise\nexcept LookupError:\n    raise MyError\n";
        assert_mutants(
            src,
            "wrong_exception_type",
            3,
            &[
                "try:\n    raise TypeError('x') from e\nexcept (KeyError, MyError) as err:\n    raise\nexcept LookupError:\n    raise MyError\n",
                "try:\n    raise ValueError('x') from e\nexcept (IndexError, MyError) as err:\n    raise\nexcept LookupError:\n    raise MyError\n",
            ],
        );
        assert_none("raise Custom()\n", "wrong_exception_type");
    }
}
