//! Operators that delete, unwrap, swap or invert statements: `remove_assign`, `remove_cond`,
//! `remove_loop`, `remove_wrapper`, `ctrl_shuffle` and `ctrl_invert_if`.

use tree_sitter::Node;

use crate::analyzer::{Analyzer, replace, swap};
use crate::mutation::{Edit, edit};
use crate::registry::Operator;
use crate::syntax::NodeKind;
use crate::syntax::text::{is_inline_ws, snippet};

impl<'t> Analyzer<'t> {
    /// Start of the line containing `byte`.
    fn line_start(&self, byte: usize) -> usize {
        self.src.as_bytes()[..byte]
            .iter()
            .rposition(|b| *b == b'\n')
            .map_or(0, |i| i + 1)
    }

    /// End of the line containing `byte`, including its newline.
    fn line_end_incl(&self, byte: usize) -> usize {
        self.src.as_bytes()[byte..]
            .iter()
            .position(|b| *b == b'\n')
            .map_or(self.src.len(), |i| byte + i + 1)
    }

    /// The indentation before `byte` if only whitespace precedes it on its line.
    fn indent_of(&self, byte: usize) -> Option<&'t str> {
        let start = self.line_start(byte);
        let prefix = self.src.get(start..byte)?;
        prefix.bytes().all(is_inline_ws).then_some(prefix)
    }

    /// True iff statement `i` of `statements` occupies whole lines of its own.
    fn standalone(&self, statements: &[Node], i: usize) -> bool {
        let s = statements[i];
        if self.indent_of(s.start_byte()).is_none() {
            return false;
        }
        if i > 0 && statements[i - 1].end_position().row >= s.start_position().row {
            return false;
        }
        if let Some(next) = statements.get(i + 1)
            && next.start_position().row <= s.end_position().row
        {
            return false;
        }
        let rest = &self.src.as_bytes()[s.end_byte()..self.line_end_incl(s.end_byte())];
        let rest: Vec<u8> = rest
            .iter()
            .copied()
            .skip_while(|b| is_inline_ws(*b) || *b == b';')
            .collect();
        rest.is_empty() || rest == b"\n" || rest == b"\r\n" || rest.first() == Some(&b'#')
    }

    /// Edits deleting statement `i` (its whole lines), or replacing it by `pass` when it is the
    /// only statement of its block.
    pub(crate) fn delete_statement(
        &self,
        statements: &[Node],
        i: usize,
        is_module: bool,
    ) -> Option<Vec<Edit>> {
        let s = statements[i];
        if statements.len() == 1 {
            if is_module {
                return None;
            }
            return Some(vec![replace(s, "pass")]);
        }
        if !self.standalone(statements, i) {
            return None;
        }
        Some(vec![edit(
            self.line_start(s.start_byte()),
            self.line_end_incl(s.end_byte()),
            "",
        )])
    }

    /// Edits swapping the texts of two statements that each occupy whole lines.
    pub(crate) fn swap_statements(&self, statements: &[Node], i: usize) -> Option<Vec<Edit>> {
        let (a, b) = (statements[i], statements[i + 1]);
        if !self.standalone(statements, i) || !self.standalone(statements, i + 1) {
            return None;
        }
        if self.indent_of(a.start_byte()) != self.indent_of(b.start_byte()) {
            return None;
        }
        let (ta, tb) = (self.text(a), self.text(b));
        if ta == tb {
            return None;
        }
        Some(swap(a, ta, b, tb))
    }

    /// Byte ranges of string literals spanning several lines inside `n`.
    fn multiline_strings(&self, n: Node<'t>) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        let mut cursor = n.walk();
        loop {
            let node = cursor.node();
            let is_str = self.kind_of(node) == NodeKind::Str;
            if is_str && node.start_position().row != node.end_position().row {
                out.push((node.start_byte(), node.end_byte()));
            }
            if !is_str && cursor.goto_first_child() {
                continue;
            }
            loop {
                if cursor.node() == n {
                    return out;
                }
                if cursor.goto_next_sibling() {
                    break;
                }
                if !cursor.goto_parent() {
                    return out;
                }
            }
        }
    }

    /// The text of `body` re-indented from its own indentation to `statement`'s, to replace `statement`.
    fn unwrap_body(&self, statement: Node<'t>, body: Node<'t>) -> Option<Edit> {
        let statement_indent = self.indent_of(statement.start_byte())?;
        if body.start_position().row == statement.start_position().row {
            // `with x: f()` -- the body is on the header line.
            let t = self.text(body).trim_end();
            return (!t.is_empty()).then(|| replace(statement, t));
        }
        let first = *self.statements(body).first()?;
        let body_indent = self.indent_of(first.start_byte())?;
        if self.indent_of(body.start_byte())? != body_indent
            || body_indent.len() <= statement_indent.len()
        {
            return None;
        }
        let strings = self.multiline_strings(body);
        let in_string = |at: usize| strings.iter().any(|(s, e)| *s < at && at < *e);
        let region_start = self.line_start(body.start_byte());
        let region = self.src.get(region_start..body.end_byte())?;
        let mut out = String::with_capacity(region.len());
        let mut at = region_start;
        for line in region.split_inclusive('\n') {
            let content = line.trim_end_matches(['\n', '\r']);
            let ending = &line[content.len()..];
            if content.bytes().all(is_inline_ws) {
                if in_string(at) {
                    return None;
                }
                out.push_str(ending);
            } else if let Some(rest) = line.strip_prefix(body_indent) {
                if in_string(at) {
                    return None;
                }
                out.push_str(statement_indent);
                out.push_str(rest);
            } else {
                // A continuation line inside brackets or a dedented comment: leave it alone.
                out.push_str(line);
            }
            at += line.len();
        }
        let replacement = out.strip_prefix(statement_indent)?.to_string();
        Some(edit(
            statement.start_byte(),
            statement.end_byte(),
            replacement,
        ))
    }

    /// True iff `s` is a bare string expression statement (a docstring or similar).
    fn is_string_statement(&self, s: Node<'t>) -> bool {
        if self.kind_of(s) != NodeKind::ExpressionStatement {
            return false;
        }
        let kids = self.named_children(s);
        kids.len() == 1 && self.is_string_literal(kids[0])
    }

    /// `remove_assign`, `remove_cond`, `remove_loop`, `remove_wrapper` and `ctrl_shuffle` on the
    /// statements of a block or module.
    pub(crate) fn visit_block(&mut self, block: Node<'t>) {
        let statements = self.statements(block);
        let is_module = self.kind_of(block) == NodeKind::Module;
        if !is_module && statements.is_empty() && self.named_children(block).is_empty() {
            self.empty_block = true;
        }
        for (i, &s) in statements.iter().enumerate() {
            let (op, description) = match self.kind_of(s) {
                NodeKind::ExpressionStatement if self.is_enabled(Operator::RemoveAssign) => {
                    let kids = self.named_children(s);
                    let is_assign = kids.len() == 1
                        && match self.kind_of(kids[0]) {
                            NodeKind::Assignment => kids[0].child_by_field_name("right").is_some(),
                            NodeKind::AugmentedAssignment => true,
                            _ => false,
                        };
                    if !is_assign {
                        continue;
                    }
                    (
                        Operator::RemoveAssign,
                        format!("remove `{}`", snippet(self.text(s))),
                    )
                }
                NodeKind::IfStatement if self.is_enabled(Operator::RemoveCond) => (
                    Operator::RemoveCond,
                    format!("remove `{}`", snippet(self.text(s))),
                ),
                NodeKind::ForStatement | NodeKind::WhileStatement
                    if self.is_enabled(Operator::RemoveLoop) =>
                {
                    (
                        Operator::RemoveLoop,
                        format!("remove `{}`", snippet(self.text(s))),
                    )
                }
                NodeKind::WithStatement | NodeKind::TryStatement
                    if self.is_enabled(Operator::RemoveWrapper) =>
                {
                    if let Some(body) = s.child_by_field_name("body")
                        && let Some(e) = self.unwrap_body(s, body)
                    {
                        let description = format!("unwrap `{}`", snippet(self.text(s)));
                        self.push_run(
                            Operator::RemoveWrapper,
                            vec![e],
                            s,
                            s,
                            true,
                            Some(s),
                            description,
                        );
                    }
                    continue;
                }
                _ => continue,
            };
            if let Some(edits) = self.delete_statement(&statements, i, is_module) {
                let others = statements.len() > 1 || is_module;
                self.push_run(op, edits, s, s, others, Some(s), description);
            }
        }
        if self.is_enabled(Operator::CtrlShuffle) && !is_module {
            for i in 0..statements.len().saturating_sub(1) {
                let (a, b) = (statements[i], statements[i + 1]);
                let excluded = |s: Node<'t>| {
                    self.is_string_statement(s)
                        || matches!(
                            self.kind_of(s),
                            NodeKind::Global
                                | NodeKind::Nonlocal
                                | NodeKind::FutureImport
                                | NodeKind::Pass
                        )
                };
                if excluded(a) || excluded(b) {
                    continue;
                }
                if let Some(edits) = self.swap_statements(&statements, i) {
                    let description = format!(
                        "swap `{}` and `{}`",
                        snippet(self.text(a)),
                        snippet(self.text(b))
                    );
                    self.push_run(Operator::CtrlShuffle, edits, a, b, true, None, description);
                }
            }
        }
    }

    /// `ctrl_invert_if` on an if/else statement.
    pub(crate) fn visit_if(&mut self, node: Node<'t>) {
        if !self.is_enabled(Operator::CtrlInvertIf) {
            return;
        }
        let mut c = node.walk();
        let alts: Vec<Node> = node.children_by_field_name("alternative", &mut c).collect();
        let ([alt], Some(cons)) = (alts.as_slice(), node.child_by_field_name("consequence")) else {
            return;
        };
        if self.kind_of(*alt) != NodeKind::ElseClause {
            return;
        }
        let Some(other) = alt.child_by_field_name("body") else {
            return;
        };
        let (tc, to) = (self.text(cons), self.text(other));
        if tc.trim().is_empty() || to.trim().is_empty() || tc == to {
            return;
        }
        let cons_inline = cons.start_position().row == node.start_position().row;
        let other_inline = other.start_position().row == alt.start_position().row;
        if cons_inline != other_inline {
            return;
        }
        if !cons_inline {
            let first = |b: Node<'t>| self.statements(b).first().map(|s| s.start_byte());
            let (Some(fc), Some(fo)) = (first(cons), first(other)) else {
                return;
            };
            let indents = [
                self.indent_of(cons.start_byte()),
                self.indent_of(other.start_byte()),
                self.indent_of(fc),
                self.indent_of(fo),
            ];
            if indents[0].is_none() || indents.iter().any(|i| *i != indents[0]) {
                return;
            }
        }
        let cond = node
            .child_by_field_name("condition")
            .map_or(String::new(), |c| snippet(self.text(c)));
        self.push_run(
            Operator::CtrlInvertIf,
            swap(cons, tc, other, to),
            node,
            node,
            true,
            None,
            format!("swap the if/else bodies of `if {cond}`"),
        );
    }
}

#[cfg(test)]
mod tests {
    use crate::test_support::{assert_none, assert_produces, mutants, outputs};

    #[test]
    fn ctrl_invert_if_swaps_bodies() {
        let src =
            "def f(x):\n    if x:\n        a = 1\n        return a\n    else:\n        return 2\n";
        assert_produces(
            src,
            "ctrl_invert_if",
            "def f(x):\n    if x:\n        return 2\n    else:\n        a = 1\n        return a\n",
        );
        assert_none(
            "def f(x):\n    if x:\n        return 1\n    elif y:\n        return 2\n    else:\n        return 3\n",
            "ctrl_invert_if",
        );
        assert_none("def f(x):\n    if x:\n        return 1\n", "ctrl_invert_if");
        assert_produces(
            "if x: a()\nelse: b()\n",
            "ctrl_invert_if",
            "if x: b()\nelse: a()\n",
        );
    }

    #[test]
    fn ctrl_shuffle_swaps_statements_in_function_bodies_only() {
        let src = "x = 1\ny = 2\n\ndef f():\n    \"\"\"Doc.\"\"\"\n    a = g()\n    b = h(a)\n    return b\n";
        assert_eq!(
            outputs(src, "ctrl_shuffle"),
            vec![
                "x = 1\ny = 2\n\ndef f():\n    \"\"\"Doc.\"\"\"\n    b = h(a)\n    a = g()\n    return b\n",
                "x = 1\ny = 2\n\ndef f():\n    \"\"\"Doc.\"\"\"\n    a = g()\n    return b\n    b = h(a)\n",
            ]
        );
        let m = &mutants(src, "ctrl_shuffle")[0].0;
        assert!(m.in_function_body);
        assert_eq!(m.scope, "f");
        assert_eq!((m.start_line, m.end_line), (4, 8));
        assert_none("def f():\n    a()\n    a()\n", "ctrl_shuffle");
    }

    #[test]
    fn remove_assign_deletes_assignments() {
        let src = "def f(x):\n    y = x + 1\n    y += 2\n    return y\n\ndef g():\n    z = 1\n";
        assert_produces(
            src,
            "remove_assign",
            "def f(x):\n    y += 2\n    return y\n\ndef g():\n    z = 1\n",
        );
        assert_produces(
            src,
            "remove_assign",
            "def f(x):\n    y = x + 1\n    y += 2\n    return y\n\ndef g():\n    pass\n",
        );
        assert_eq!(outputs(src, "remove_assign").len(), 3);
        assert_none(
            "def f(x: int):\n    y: int\n    return x\n",
            "remove_assign",
        );
    }

    #[test]
    fn remove_cond_loop_delete_statements() {
        let src = "def f(xs):\n    t = 0\n    if not xs:  # empty\n        return 0\n    for x in xs:\n        t += x\n    while t > 10:\n        t -= 1\n    return t\n";
        assert_produces(
            src,
            "remove_cond",
            "def f(xs):\n    t = 0\n    for x in xs:\n        t += x\n    while t > 10:\n        t -= 1\n    return t\n",
        );
        assert_produces(
            src,
            "remove_loop",
            "def f(xs):\n    t = 0\n    if not xs:  # empty\n        return 0\n    while t > 10:\n        t -= 1\n    return t\n",
        );
        assert_produces(
            src,
            "remove_loop",
            "def f(xs):\n    t = 0\n    if not xs:  # empty\n        return 0\n    for x in xs:\n        t += x\n    return t\n",
        );
        assert_produces(
            "def f(x):\n    if x:\n        return 1\n    else:\n        return 2\n",
            "remove_cond",
            "def f(x):\n    pass\n",
        );
        assert_none("def f(x):\n    return [y for y in x if y]\n", "remove_cond");
        assert_none("def f(x):\n    return [y for y in x if y]\n", "remove_loop");
    }

    #[test]
    fn remove_wrapper_dedents_bodies() {
        let src = "def f(p):\n    with open(p) as fh:\n        data = fh.read()\n\n        if data:\n            return data\n    try:\n        x = int(data)\n    except ValueError:\n        x = 0\n    finally:\n        pass\n    return x\n";
        assert_produces(
            src,
            "remove_wrapper",
            "def f(p):\n    data = fh.read()\n\n    if data:\n        return data\n    try:\n        x = int(data)\n    except ValueError:\n        x = 0\n    finally:\n        pass\n    return x\n",
        );
        assert_produces(
            src,
            "remove_wrapper",
            "def f(p):\n    with open(p) as fh:\n        data = fh.read()\n\n        if data:\n            return data\n    x = int(data)\n    return x\n",
        );
        // Re-indenting would change the multi-line string's content.
        assert_none(
            "def f():\n    with a:\n        x = \"\"\"one\n        two\"\"\"\n    return x\n",
            "remove_wrapper",
        );
        assert_produces(
            "def f():\n    with a: g()\n",
            "remove_wrapper",
            "def f():\n    g()\n",
        );
    }
}
