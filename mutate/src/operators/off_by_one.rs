//! Off-by-one operators: `off_by_one_range` (the stop of a `range(...)` call) and
//! `off_by_one_slice` (slice bounds and integer indices).

use tree_sitter::Node;

use crate::analyzer::{Analyzer, replace};
use crate::mutation::{Edit, edit};
use crate::operators::expressions::binary_precedence;
use crate::registry::Operator;
use crate::syntax::NodeKind;
use crate::syntax::text::{int_value, snippet};

impl<'t> Analyzer<'t> {
    /// `off_by_one_range` on the call `node` of `func` with the arguments `args_list`.
    pub(crate) fn visit_range_call(
        &mut self,
        node: Node<'t>,
        func: Node<'t>,
        args_list: &[Node<'t>],
    ) {
        if self.is_enabled(Operator::OffByOneRange)
            && self.text(func) == "range"
            && (1..=3).contains(&args_list.len())
            && args_list.iter().all(|a| self.is_positional(*a))
        {
            let stop = if args_list.len() == 1 {
                args_list[0]
            } else {
                args_list[1]
            };
            let shown = snippet(self.text(stop));
            self.push_shifts(Operator::OffByOneRange, stop, node, "range stop", &shown);
        }
    }

    /// Candidates of `operator` moving `target` (inside `node`) by +1 and by -1, described as
    /// ``{what} `{shown}` + 1`` and ``{what} `{shown}` - 1``.
    fn push_shifts(
        &mut self,
        operator: Operator,
        target: Node<'t>,
        node: Node<'t>,
        what: &str,
        shown: &str,
    ) {
        for (delta, sign) in [(1, "+"), (-1, "-")] {
            if let Some(e) = self.shift_by_one(target, delta, false) {
                let description = format!("{what} `{shown}` {sign} 1");
                self.push(operator, vec![e], node, description);
            }
        }
    }

    /// Edits moving `expr` by `delta` (+1 or -1), simplifying `x + 1`/`x - 1` and literals.
    fn shift_by_one(&self, expr: Node<'t>, delta: i64, allow_negative: bool) -> Option<Edit> {
        let kind = self.kind_of(expr);
        if kind == NodeKind::Integer {
            let n = int_value(self.text(expr))?;
            let m = n + delta;
            if m < 0 && !allow_negative {
                return None;
            }
            return Some(replace(expr, m.to_string()));
        }
        if kind == NodeKind::UnaryOperator {
            let op = expr.child_by_field_name("operator")?;
            let arg = expr.child_by_field_name("argument")?;
            if self.text(op) == "-" && self.kind_of(arg) == NodeKind::Integer {
                // `-n` moved by delta is `-(n - delta)`.
                let n = int_value(self.text(arg))?;
                let m = n - delta;
                if m < 1 {
                    return None;
                }
                return Some(replace(arg, m.to_string()));
            }
        }
        if kind == NodeKind::BinaryOperator {
            let op = expr.child_by_field_name("operator")?;
            let left = expr.child_by_field_name("left")?;
            let right = expr.child_by_field_name("right")?;
            let sign = match self.text(op) {
                "+" => 1,
                "-" => -1,
                _ => 0,
            };
            if sign != 0
                && self.kind_of(right) == NodeKind::Integer
                && let Some(n) = int_value(self.text(right))
            {
                let m = sign * n + delta;
                return Some(if m == 0 {
                    edit(left.end_byte(), expr.end_byte(), "")
                } else if m.signum() == sign {
                    replace(right, m.abs().to_string())
                } else {
                    let new_op = if m > 0 { "+" } else { "-" };
                    edit(
                        op.start_byte(),
                        right.end_byte(),
                        format!("{new_op} {}", m.abs()),
                    )
                });
            }
        }
        let suffix = if delta > 0 { " + 1" } else { " - 1" };
        if self.needs_parens(expr) {
            // Single edit to keep the mutation one span.
            return Some(edit(
                expr.start_byte(),
                expr.end_byte(),
                format!("({}){suffix}", self.text(expr)),
            ));
        }
        Some(edit(expr.end_byte(), expr.end_byte(), suffix))
    }

    /// True iff `expr` binds looser than `+` and needs parentheses before `+ 1`.
    fn needs_parens(&self, expr: Node) -> bool {
        match self.kind_of(expr) {
            NodeKind::BinaryOperator => expr
                .child_by_field_name("operator")
                .is_none_or(|op| binary_precedence(self.text(op)) < binary_precedence("+")),
            NodeKind::BooleanOperator
            | NodeKind::NotOperator
            | NodeKind::ComparisonOperator
            | NodeKind::ConditionalExpression
            | NodeKind::Lambda
            | NodeKind::NamedExpression
            | NodeKind::AsPattern => true,
            _ => false,
        }
    }

    /// `off_by_one_slice` on the slice bounds and integer indices of a subscript.
    pub(crate) fn visit_subscript(&mut self, node: Node<'t>) {
        if !self.is_enabled(Operator::OffByOneSlice) {
            return;
        }
        if let Some(value) = node.child_by_field_name("value") {
            let v = self.text(value);
            if v == "Literal" || v.ends_with(".Literal") {
                return;
            }
        }
        let mut c = node.walk();
        let subs: Vec<Node> = node.children_by_field_name("subscript", &mut c).collect();
        for sub in subs {
            match self.kind_of(sub) {
                NodeKind::Slice => {
                    let mut colons = 0;
                    let mut cc = sub.walk();
                    let kids: Vec<Node> = sub.children(&mut cc).collect();
                    for kid in kids {
                        if !kid.is_named() {
                            if self.text(kid) == ":" {
                                colons += 1;
                            }
                            continue;
                        }
                        if colons > 1 || kid.is_extra() {
                            continue;
                        }
                        let what = if colons == 0 {
                            "slice start"
                        } else {
                            "slice stop"
                        };
                        let shown = snippet(self.text(kid));
                        self.push_shifts(Operator::OffByOneSlice, kid, node, what, &shown);
                    }
                }
                NodeKind::Integer | NodeKind::UnaryOperator => {
                    let literal = self.kind_of(sub) == NodeKind::Integer
                        || (sub
                            .child_by_field_name("operator")
                            .is_some_and(|o| self.text(o) == "-")
                            && sub
                                .child_by_field_name("argument")
                                .is_some_and(|a| self.kind_of(a) == NodeKind::Integer));
                    if !literal {
                        continue;
                    }
                    let shown = self.text(sub);
                    self.push_shifts(Operator::OffByOneSlice, sub, node, "index", shown);
                }
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::test_support::{assert_none, assert_produces, outputs};

    #[test]
    fn off_by_one_range_moves_the_stop() {
        let src = "for i in range(n):\n    pass\nfor j in range(1, len(x) - 1):\n    pass\nr = range(3)\nq = range(a, b if c else d, 2)\n";
        let outs = outputs(src, "off_by_one_range");
        let expect = [
            "for i in range(n + 1):",
            "for i in range(n - 1):",
            "for j in range(1, len(x)):",
            "for j in range(1, len(x) - 2):",
            "r = range(4)",
            "r = range(2)",
            "q = range(a, (b if c else d) + 1, 2)",
        ];
        for e in expect {
            assert!(outs.iter().any(|o| o.contains(e)), "missing {e}");
        }
        assert_eq!(outs.len(), 8);
        assert_none("r = range(*args)\nq = xrange(3)\n", "off_by_one_range");
    }

    #[test]
    fn off_by_one_slice_moves_bounds_and_indices() {
        assert_produces("y = x[1:]\n", "off_by_one_slice", "y = x[2:]\n");
        assert_produces("y = x[:n]\n", "off_by_one_slice", "y = x[:n - 1]\n");
        assert_produces("y = x[:-1]\n", "off_by_one_slice", "y = x[:-2]\n");
        assert_produces("y = x[0]\n", "off_by_one_slice", "y = x[1]\n");
        assert_produces("y = x[-1]\n", "off_by_one_slice", "y = x[-2]\n");
        assert_produces("y = x[i + 1:]\n", "off_by_one_slice", "y = x[i:]\n");
        assert_eq!(
            outputs("y = x[:-1]\n", "off_by_one_slice"),
            vec!["y = x[:-2]\n"]
        );
        assert_none("y = x[i]\nz = x[::2]\nw = x[:]\n", "off_by_one_slice");
    }
}
