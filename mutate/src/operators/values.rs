//! Operators that change literal values: `op_change_const` (integer literals),
//! `wrong_default_arg` (parameter defaults) and `wrong_return_value` (returned values).

use tree_sitter::Node;

use crate::analyzer::{Analyzer, fields, replace};
use crate::mutation::edit;
use crate::registry::Operator;
use crate::syntax::NodeKind;
use crate::syntax::text::{int_value, snippet};

impl<'t> Analyzer<'t> {
    /// `op_change_const` on an integer literal (whose parent is of kind `parent`).
    pub(crate) fn visit_integer(&mut self, node: Node<'t>, parent: NodeKind) {
        if !self.is_enabled(Operator::OpChangeConst) {
            return;
        }
        let t = self.text(node);
        let Some(n) = int_value(t) else {
            return;
        };
        for m in [n + 1, n - 1] {
            if m < 0 && parent == NodeKind::UnaryOperator {
                continue;
            }
            self.push_change(Operator::OpChangeConst, node, t, m, node);
        }
    }

    /// `wrong_default_arg` on a parameter with a default value.
    pub(crate) fn visit_default(&mut self, node: Node<'t>) {
        if !self.is_enabled(Operator::WrongDefaultArg) {
            return;
        }
        let Some([name, value]) = fields(node, ["name", "value"]) else {
            return;
        };
        let name = self.text(name);
        let vt = self.text(value);
        let mut replacements: Vec<String> = Vec::new();
        match self.kind_of(value) {
            NodeKind::True => replacements.push("False".into()),
            NodeKind::False => replacements.push("True".into()),
            NodeKind::Integer => {
                if let Some(n) = int_value(vt) {
                    replacements.push((n + 1).to_string());
                    replacements.push((n - 1).to_string());
                }
            }
            NodeKind::UnaryOperator => {
                if let Some([op, arg]) = fields(value, ["operator", "argument"])
                    && self.text(op) == "-"
                    && self.kind_of(arg) == NodeKind::Integer
                    && let Some(n) = int_value(self.text(arg))
                {
                    replacements.push((1 - n).to_string());
                    replacements.push((-n - 1).to_string());
                }
            }
            NodeKind::Str => {
                let mut c = value.walk();
                let non_empty = value
                    .named_children(&mut c)
                    .any(|k| matches!(k.kind(), "string_content" | "interpolation"));
                let prefix: String = vt.chars().take_while(|c| c.is_ascii_alphabetic()).collect();
                if non_empty {
                    replacements.push(format!("{prefix}\"\""));
                }
            }
            _ => {}
        }
        for r in replacements {
            let description = format!("default of `{name}`: `{}` -> `{r}`", snippet(vt));
            self.push_replace(Operator::WrongDefaultArg, value, r, value, description);
        }
    }

    /// `wrong_return_value` on a `return` statement with a value.
    pub(crate) fn visit_return(&mut self, node: Node<'t>) {
        if !self.is_enabled(Operator::WrongReturnValue) {
            return;
        }
        let Some(value) = self.named_children(node).first().copied() else {
            return;
        };
        let vt = self.text(value);
        let e = match self.kind_of(value) {
            NodeKind::NoneLit => return,
            NodeKind::True => replace(value, "False"),
            NodeKind::False => replace(value, "True"),
            NodeKind::NotOperator => {
                let Some(arg) = value.child_by_field_name("argument") else {
                    return;
                };
                edit(value.start_byte(), arg.start_byte(), "")
            }
            _ => replace(value, "None"),
        };
        let new_value = format!(
            "{}{}",
            &e.replacement,
            self.src.get(e.end..value.end_byte()).unwrap_or("")
        );
        let description = format!(
            "`return {}` -> `return {}`",
            snippet(vt),
            snippet(&new_value)
        );
        self.push(Operator::WrongReturnValue, vec![e], node, description);
    }
}

#[cfg(test)]
mod tests {
    use crate::test_support::{assert_none, assert_produces, mutants, outputs};

    #[test]
    fn op_change_const_shifts_decimal_integers() {
        let src = "x = 10\ny: Tuple[int, 3] = (0x1F, 1_000, 2.5)\n";
        assert_eq!(
            outputs(src, "op_change_const"),
            vec![
                "x = 11\ny: Tuple[int, 3] = (0x1F, 1_000, 2.5)\n",
                "x = 9\ny: Tuple[int, 3] = (0x1F, 1_000, 2.5)\n"
            ]
        );
        assert_produces("a = x[0]\n", "op_change_const", "a = x[-1]\n");
        assert_none("@deco(3)\ndef f(): pass\ns = '5'\n", "op_change_const");
        assert_eq!(outputs("a = -0\n", "op_change_const"), vec!["a = -1\n"]);
    }

    #[test]
    fn wrong_default_arg_changes_defaults() {
        let src = "def f(a, b=True, c=3, d='x', e=None, f=[], g: int = -1, h=''):\n    pass\n";
        let outs = outputs(src, "wrong_default_arg");
        for e in [
            "b=False",
            "c=4",
            "c=2",
            "d=\"\"",
            "g: int = 0",
            "g: int = -2",
        ] {
            assert!(outs.iter().any(|o| o.contains(e)), "missing {e}");
        }
        assert_eq!(outs.len(), 6);
        let m = &mutants(src, "wrong_default_arg")[0].0;
        assert!(!m.in_function_body);
        assert_eq!(m.scope, "f");
        assert_produces(
            "g = lambda x=b'ab': x\n",
            "wrong_default_arg",
            "g = lambda x=b\"\": x\n",
        );
    }

    #[test]
    fn wrong_return_value_variants() {
        let src = "def f(x):\n    if x:\n        return True\n    if not x:\n        return not x.y\n    return x + 1\n\ndef g():\n    return None\n";
        assert_produces(
            src,
            "wrong_return_value",
            "def f(x):\n    if x:\n        return False\n    if not x:\n        return not x.y\n    return x + 1\n\ndef g():\n    return None\n",
        );
        assert_produces(
            src,
            "wrong_return_value",
            "def f(x):\n    if x:\n        return True\n    if not x:\n        return x.y\n    return x + 1\n\ndef g():\n    return None\n",
        );
        assert_produces(
            src,
            "wrong_return_value",
            "def f(x):\n    if x:\n        return True\n    if not x:\n        return not x.y\n    return None\n\ndef g():\n    return None\n",
        );
        assert_eq!(outputs(src, "wrong_return_value").len(), 3);
    }
}
