//! Operators that change calls: `swap_call_args` here, and `off_by_one_range` through
//! [`Analyzer::visit_range_call`].

use tree_sitter::Node;

use crate::analyzer::{Analyzer, fields, swap};
use crate::registry::Operator;
use crate::syntax::NodeKind;
use crate::syntax::text::snippet;

impl<'t> Analyzer<'t> {
    /// `swap_call_args` and `off_by_one_range`.
    pub(crate) fn visit_call(&mut self, node: Node<'t>) {
        let Some([func, args]) = fields(node, ["function", "arguments"]) else {
            return;
        };
        if self.kind_of(args) != NodeKind::ArgumentList {
            return;
        }
        let args_list = self.named_children(args);
        self.visit_range_call(node, func, &args_list);
        if self.is_enabled(Operator::SwapCallArgs) {
            for pair in args_list.windows(2) {
                let (a, b) = (pair[0], pair[1]);
                if !self.is_positional(a) || !self.is_positional(b) {
                    continue;
                }
                let (ta, tb) = (self.text(a), self.text(b));
                if ta == tb {
                    continue;
                }
                self.push(
                    Operator::SwapCallArgs,
                    swap(a, ta, b, tb),
                    node,
                    format!(
                        "swap arguments `{}` and `{}` of `{}`",
                        snippet(ta),
                        snippet(tb),
                        snippet(self.text(func))
                    ),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::test_support::{assert_none, assert_produces};

    #[test]
    fn swap_call_args_swaps_positionals() {
        assert_produces("f(a, b, key=c)\n", "swap_call_args", "f(b, a, key=c)\n");
        assert_none("f(a, a)\ng(a, *rest)\nh(x=1, y=2)\n", "swap_call_args");
    }
}
