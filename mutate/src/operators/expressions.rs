//! Operators that change binary, boolean, comparison and `not` operators: `op_change`,
//! `op_swap`, `op_break_chains`, `flip_operators`, `boundary_condition` and `drop_not`.

use tree_sitter::Node;

use crate::analyzer::{Analyzer, fields, swap};
use crate::mutation::edit;
use crate::registry::Operator;
use crate::syntax::NodeKind;
use crate::syntax::text::snippet;

/// Binding strength of a binary operator token in tree-sitter-python's grammar.
pub(crate) fn binary_precedence(op: &str) -> u8 {
    match op {
        "|" => 14,
        "&" => 15,
        "^" => 16,
        "<<" | ">>" => 17,
        "+" | "-" => 18,
        "*" | "@" | "/" | "%" | "//" => 19,
        "**" => 21,
        _ => 0,
    }
}

/// The operators `op_change` may put in place of the binary operator `op`: the others of its
/// group of interchangeable operators (additive, multiplicative, bitwise, shifts, power).
fn interchangeable_operators(op: &str) -> &'static [&'static str] {
    match op {
        "+" => &["-"],
        "-" => &["+"],
        "*" => &["/", "//", "%"],
        "/" => &["*", "//", "%"],
        "//" => &["*", "/", "%"],
        "%" => &["*", "/", "//"],
        "&" => &["|", "^"],
        "|" => &["&", "^"],
        "^" => &["&", "|"],
        "<<" => &[">>"],
        ">>" => &["<<"],
        "**" => &["*"],
        _ => &[],
    }
}

impl<'t> Analyzer<'t> {
    /// `op_change`, `op_swap` and `op_break_chains` on a binary operator.
    pub(crate) fn visit_binary(&mut self, node: Node<'t>) {
        let Some([op, left, right]) = fields(node, ["operator", "left", "right"]) else {
            return;
        };
        let ot = self.text(op);
        let strings = self.is_string_literal(left) || self.is_string_literal(right);
        if self.is_enabled(Operator::OpChange) && !strings {
            for alt in interchangeable_operators(ot) {
                self.push_change(Operator::OpChange, op, ot, alt, node);
            }
        }
        if self.is_enabled(Operator::OpSwap)
            && matches!(ot, "+" | "-" | "/" | "//" | "%" | "**" | "<<" | ">>" | "@")
            && !(ot == "%" && self.is_string_literal(left))
        {
            let prec = binary_precedence(ot);
            let same_prec = |n: Node| {
                self.kind_of(n) == NodeKind::BinaryOperator
                    && n.child_by_field_name("operator")
                        .is_some_and(|o| binary_precedence(self.text(o)) == prec)
            };
            let unary = self.kind_of(left) == NodeKind::UnaryOperator
                || self.kind_of(right) == NodeKind::UnaryOperator;
            let (tl, tr) = (self.text(left), self.text(right));
            let regroups = same_prec(left) || same_prec(right) || (ot == "**" && unary);
            if !regroups && tl != tr {
                self.push(
                    Operator::OpSwap,
                    swap(left, tl, right, tr),
                    node,
                    format!("swap the operands of `{ot}`"),
                );
            }
        }
        self.break_chain(node, left, NodeKind::BinaryOperator);
    }

    /// `a OP b OP c` -> `a OP c`: drops the middle operand when `left` is itself a chain of
    /// the same kind.
    fn break_chain(&mut self, node: Node<'t>, left: Node<'t>, chain: NodeKind) {
        if !self.is_enabled(Operator::OpBreakChains) || self.kind_of(left) != chain {
            return;
        }
        let Some(inner_left) = left.child_by_field_name("left") else {
            return;
        };
        let dropped = snippet(
            self.src
                .get(inner_left.end_byte()..left.end_byte())
                .unwrap_or(""),
        );
        self.push(
            Operator::OpBreakChains,
            vec![edit(inner_left.end_byte(), left.end_byte(), "")],
            node,
            format!("drop `{dropped}` from a chain"),
        );
    }

    /// `flip_operators` (`and` <-> `or`) and `op_break_chains` on a boolean operator.
    pub(crate) fn visit_boolean(&mut self, node: Node<'t>) {
        let Some([op, left]) = fields(node, ["operator", "left"]) else {
            return;
        };
        let ot = self.text(op);
        if self.is_enabled(Operator::FlipOperators) {
            let alt = if ot == "and" { "or" } else { "and" };
            self.push_change(Operator::FlipOperators, op, ot, alt, node);
        }
        self.break_chain(node, left, NodeKind::BooleanOperator);
    }

    /// `flip_operators`, `boundary_condition` and `op_swap` on a comparison.
    pub(crate) fn visit_comparison(&mut self, node: Node<'t>) {
        let mut c = node.walk();
        let ops: Vec<Node> = node.children_by_field_name("operators", &mut c).collect();
        for op in &ops {
            let from = op.kind();
            let flip = match from {
                "==" => Some("!="),
                "!=" => Some("=="),
                "<" => Some(">"),
                ">" => Some("<"),
                "<=" => Some(">="),
                ">=" => Some("<="),
                "in" => Some("not in"),
                "not in" => Some("in"),
                "is" => Some("is not"),
                "is not" => Some("is"),
                _ => None,
            };
            let boundary = match from {
                "<" => Some("<="),
                "<=" => Some("<"),
                ">" => Some(">="),
                ">=" => Some(">"),
                _ => None,
            };
            for (op_kind, to) in [
                (Operator::FlipOperators, flip),
                (Operator::BoundaryCondition, boundary),
            ] {
                if let Some(to) = to
                    && self.is_enabled(op_kind)
                {
                    self.push_change(op_kind, *op, from, to, node);
                }
            }
        }
        if self.is_enabled(Operator::OpSwap)
            && let [op] = ops.as_slice()
            && !matches!(op.kind(), "==" | "!=" | "is" | "is not" | "<>")
        {
            let operands = self.named_children(node);
            if let [a, b] = operands.as_slice() {
                let (ta, tb) = (self.text(*a), self.text(*b));
                if ta != tb {
                    self.push(
                        Operator::OpSwap,
                        swap(*a, ta, *b, tb),
                        node,
                        format!("swap the operands of `{}`", op.kind()),
                    );
                }
            }
        }
    }

    /// `op_change` on an augmented assignment (`+=` -> `-=`, ...).
    pub(crate) fn visit_augmented(&mut self, node: Node<'t>) {
        if !self.is_enabled(Operator::OpChange) {
            return;
        }
        let Some([op, right]) = fields(node, ["operator", "right"]) else {
            return;
        };
        if self.is_string_literal(right) {
            return;
        }
        let ot = self.text(op);
        // `+=` changes like `+`, keeping the assignment.
        let base = ot.strip_suffix('=').unwrap_or("");
        for alt in interchangeable_operators(base) {
            let alt = format!("{alt}=");
            self.push_change(Operator::OpChange, op, ot, alt, node);
        }
    }

    /// `drop_not` on a `not` expression.
    pub(crate) fn visit_not(&mut self, node: Node<'t>) {
        if !self.is_enabled(Operator::DropNot) {
            return;
        }
        let Some(arg) = node.child_by_field_name("argument") else {
            return;
        };
        let description = format!(
            "`{}` -> `{}`",
            snippet(self.text(node)),
            snippet(self.text(arg))
        );
        self.push(
            Operator::DropNot,
            vec![edit(node.start_byte(), arg.start_byte(), "")],
            node,
            description,
        );
    }
}

#[cfg(test)]
mod tests {
    use crate::test_support::{assert_mutants, assert_none, assert_produces, outputs};

    #[test]
    fn op_break_chains_drops_middle_operands() {
        assert_produces("y = a + b + c\n", "op_break_chains", "y = a + c\n");
        assert_produces("y = a and b and c\n", "op_break_chains", "y = a and c\n");
        assert_produces(
            "y = a * b + c * d + e\n",
            "op_break_chains",
            "y = a * b + e\n",
        );
        assert_none("y = a + b\nz = (a + b) * c\n", "op_break_chains");
    }

    #[test]
    fn op_change_replaces_within_families() {
        let src = "def f(a, b):\n    a += b\n    return a * b - 1\n";
        assert_mutants(
            src,
            "op_change",
            5,
            &[
                "def f(a, b):\n    a -= b\n    return a * b - 1\n",
                "def f(a, b):\n    a += b\n    return a // b - 1\n",
                "def f(a, b):\n    a += b\n    return a * b + 1\n",
            ],
        );
        assert_none("s = 'a' + b\nt = '%s' % x\nm = a @ b\n", "op_change");
    }

    #[test]
    fn op_swap_swaps_operands() {
        assert_produces("y = a - b\n", "op_swap", "y = b - a\n");
        assert_produces("if a < len(b): pass\n", "op_swap", "if len(b) < a: pass\n");
        assert_none("y = a * b\nz = a == b\nw = a - a\n", "op_swap");
        // Swapping the outer `-` of `a - b - c` would regroup it; the inner one is fine.
        assert_eq!(
            outputs("v = a - b - c\n", "op_swap"),
            vec!["v = b - a - c\n"]
        );
        assert_eq!(outputs("v = (a - b) - c\n", "op_swap").len(), 2);
    }

    #[test]
    fn flip_operators_flips() {
        let src = "ok = a == b and c not in d\nz = x is not None\n";
        assert_mutants(
            src,
            "flip_operators",
            4,
            &[
                "ok = a != b and c not in d\nz = x is not None\n",
                "ok = a == b or c not in d\nz = x is not None\n",
                "ok = a == b and c in d\nz = x is not None\n",
                "ok = a == b and c not in d\nz = x is None\n",
            ],
        );
        assert_produces("t = a <= b\n", "flip_operators", "t = a >= b\n");
        assert_none("s = 'a == b'  # x < y\n", "flip_operators");
    }

    #[test]
    fn boundary_condition_moves_boundaries() {
        assert_none("ok = i == n\n", "boundary_condition");
        assert_produces("ok = i < n\n", "boundary_condition", "ok = i <= n\n");
        assert_produces("ok = i >= n\n", "boundary_condition", "ok = i > n\n");
    }

    #[test]
    fn drop_not_drops_not() {
        assert_produces("if not x:\n    pass\n", "drop_not", "if x:\n    pass\n");
        assert_produces("y = a and not(b)\n", "drop_not", "y = a and (b)\n");
        assert_none("y = a not in b\nz = a is not b\n", "drop_not");
    }
}
