//! Operators that change class definitions: `class_rm_base`, `class_rm_funcs` and
//! `class_shuffle_funcs`.

use tree_sitter::Node;

use crate::analyzer::{Analyzer, replace};
use crate::mutation::edit;
use crate::registry::Operator;
use crate::syntax::NodeKind;
use crate::syntax::text::snippet;

impl<'t> Analyzer<'t> {
    /// True iff `s` is a (possibly decorated) method definition.
    fn is_method(&self, s: Node) -> bool {
        self.method_def(s).is_some()
    }

    /// The function definition of a (possibly decorated) method statement.
    fn method_def(&self, s: Node<'t>) -> Option<Node<'t>> {
        match self.kind_of(s) {
            NodeKind::FunctionDefinition => Some(s),
            NodeKind::DecoratedDefinition => s
                .child_by_field_name("definition")
                .filter(|d| self.kind_of(*d) == NodeKind::FunctionDefinition),
            _ => None,
        }
    }

    /// The name of a def/class.
    fn def_name(&self, def: Node<'t>) -> &'t str {
        def.child_by_field_name("name").map_or("", |n| self.text(n))
    }

    /// `class_rm_base`, `class_rm_funcs` and `class_shuffle_funcs` on a class definition.
    pub(crate) fn visit_class(&mut self, class: Node<'t>) {
        let class_name = self.def_name(class);
        if self.is_enabled(Operator::ClassRmBase)
            && let Some(supers) = class.child_by_field_name("superclasses")
        {
            let args = self.named_children(supers);
            for (i, &a) in args.iter().enumerate() {
                if matches!(
                    self.kind_of(a),
                    NodeKind::KeywordArgument | NodeKind::ListSplat | NodeKind::DictionarySplat
                ) || self.text(a) == "object"
                {
                    continue;
                }
                let e = if args.len() == 1 {
                    replace(supers, "")
                } else if let Some(next) = args.get(i + 1) {
                    edit(a.start_byte(), next.start_byte(), "")
                } else {
                    edit(args[i - 1].end_byte(), a.end_byte(), "")
                };
                let description = format!(
                    "remove base `{}` of class `{class_name}`",
                    snippet(self.text(a))
                );
                self.push(Operator::ClassRmBase, vec![e], a, description);
            }
        }
        let Some(body) = class.child_by_field_name("body") else {
            return;
        };
        let statements = self.statements(body);
        if self.is_enabled(Operator::ClassRmFuncs) {
            for (i, &s) in statements.iter().enumerate() {
                if let Some(def) = self.method_def(s)
                    && let Some(edits) = self.delete_statement(&statements, i, false)
                {
                    let description =
                        format!("remove method `{class_name}.{}`", self.def_name(def));
                    let others = statements.len() > 1;
                    self.push_run(
                        Operator::ClassRmFuncs,
                        edits,
                        s,
                        s,
                        others,
                        Some(s),
                        description,
                    );
                }
            }
        }
        if self.is_enabled(Operator::ClassShuffleFuncs) {
            for i in 0..statements.len().saturating_sub(1) {
                let (a, b) = (statements[i], statements[i + 1]);
                if !self.is_method(a) || !self.is_method(b) {
                    continue;
                }
                if let Some(edits) = self.swap_statements(&statements, i) {
                    let name = |s: Node<'t>| self.method_def(s).map_or("", |d| self.def_name(d));
                    let description = format!("swap methods `{}` and `{}`", name(a), name(b));
                    self.push_run(
                        Operator::ClassShuffleFuncs,
                        edits,
                        a,
                        b,
                        true,
                        None,
                        description,
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::test_support::{assert_mutants, assert_none, assert_produces, mutants, outputs};

    #[test]
    fn class_rm_base_drops_a_base() {
        let src = "class A(B, C, metaclass=M):\n    pass\n\nclass D(E):\n    pass\n\nclass F(object):\n    pass\n";
        assert_none(
            "class A:\n    pass\n\nclass B(metaclass=M):\n    pass\n",
            "class_rm_base",
        );
        assert_mutants(
            src,
            "class_rm_base",
            3,
            &[
                "class A(C, metaclass=M):\n    pass\n\nclass D(E):\n    pass\n\nclass F(object):\n    pass\n",
                "class A(B, metaclass=M):\n    pass\n\nclass D(E):\n    pass\n\nclass F(object):\n    pass\n",
                "class A(B, C, metaclass=M):\n    pass\n\nclass D:\n    pass\n\nclass F(object):\n    pass\n",
            ],
        );
    }

    #[test]
    fn class_rm_funcs_deletes_methods_with_decorators() {
        let src = "class A:\n    @property\n    def x(self):\n        return 1\n\n    def y(self):\n        return 2\n\nclass B:\n    def only(self):\n        pass\n";
        let muts = mutants(src, "class_rm_funcs");
        assert_eq!(muts.len(), 3);
        assert_eq!(
            muts[0].1,
            "class A:\n\n    def y(self):\n        return 2\n\nclass B:\n    def only(self):\n        pass\n"
        );
        assert_eq!(muts[0].0.scope, "A");
        assert_eq!((muts[0].0.start_line, muts[0].0.end_line), (2, 4));
        assert!(!muts[0].0.in_function_body);
        assert_produces(
            src,
            "class_rm_funcs",
            "class A:\n    @property\n    def x(self):\n        return 1\n\n    def y(self):\n        return 2\n\nclass B:\n    pass\n",
        );
        assert_none("class A:\n    x = 1\n", "class_rm_funcs");
    }

    #[test]
    fn class_shuffle_funcs_swaps_adjacent_methods() {
        let src = "class A:\n    def f(self):\n        return 1\n\n    @staticmethod\n    def g():\n        return 2\n    x = 3\n    def h(self):\n        pass\n";
        let outs = outputs(src, "class_shuffle_funcs");
        assert_eq!(
            outs,
            vec![
                "class A:\n    @staticmethod\n    def g():\n        return 2\n\n    def f(self):\n        return 1\n    x = 3\n    def h(self):\n        pass\n"
            ]
        );
    }
}
