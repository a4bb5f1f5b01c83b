//! The walk over one file's syntax tree that collects the candidates of the enabled
//! operators. The operators themselves are `visit_*` methods of [`Analyzer`], one module per
//! kind of bug under [`crate::operators`]; this module holds the walk, its context stack and
//! the helpers they share.

use tree_sitter::Node;

use crate::mutation::{Edit, edit};
use crate::registry::{OPERATOR_COUNT, Operator};
use crate::syntax::checker::ExcerptPlan;
use crate::syntax::{Grammar, NodeKind};

/// An edit replacing all of `n` with `replacement`.
pub(crate) fn replace(n: Node, replacement: impl Into<String>) -> Edit {
    edit(n.start_byte(), n.end_byte(), replacement)
}

/// The two edits exchanging `a` (whose text is `ta`) and `b` (whose text is `tb`).
pub(crate) fn swap(a: Node, ta: &str, b: Node, tb: &str) -> Vec<Edit> {
    vec![replace(a, tb), replace(b, ta)]
}

/// The children of `n` in the fields `names`, if it has them all.
pub(crate) fn fields<'t, const N: usize>(n: Node<'t>, names: [&str; N]) -> Option<[Node<'t>; N]> {
    let mut out = [n; N];
    for (slot, name) in out.iter_mut().zip(names) {
        *slot = n.child_by_field_name(name)?;
    }
    Some(out)
}

/// One candidate before sorting and validation.
pub(crate) struct Candidate<'t> {
    /// The operator that found it.
    pub(crate) operator: Operator,
    /// Its edits of the original source.
    pub(crate) edits: Vec<Edit>,
    /// The [`crate::Mutation::description`] it will have.
    pub(crate) description: String,
    /// The statement whose lines are reported (`None`: the edits' own lines).
    pub(crate) line_statement: Option<Node<'t>>,
    /// Dotted name of the enclosing def/class.
    pub(crate) scope: String,
    /// The edits lie in a function body.
    pub(crate) in_function_body: bool,
    /// What to re-parse to validate it.
    pub(crate) plan: ExcerptPlan<'t>,
}

/// Context of one node on the walk's stack.
#[derive(Clone, Copy)]
struct Frame<'t> {
    kind: NodeKind,
    /// Nearest statement containing the node (or the node itself).
    statement: Option<Node<'t>>,
    /// Nearest `elif`/`except`/`case` clause containing the node, below `statement`.
    clause: Option<Node<'t>>,
    /// The node is (inside) the body block of a function definition.
    in_function_body: bool,
    /// Number of enclosing def/class names (including the node itself if it is one).
    depth: usize,
}

/// Walks one file's tree and collects candidates of the enabled operators.
pub(crate) struct Analyzer<'t> {
    /// The source being mutated.
    pub(crate) src: &'t str,
    pub(crate) grammar: &'static Grammar,
    /// Which operators run, indexed by [`Operator`].
    enabled: [bool; OPERATOR_COUNT],
    /// The candidates found so far, in walk order.
    pub(crate) candidates: Vec<Candidate<'t>>,
    /// Context of the nodes from the root to the node being visited.
    frames: Vec<Frame<'t>>,
    /// Names of the enclosing defs/classes, as counted by [`Frame::depth`].
    names: Vec<&'t str>,
    /// The source has a suite without statements (which Python rejects).
    pub(crate) empty_block: bool,
}

impl<'t> Analyzer<'t> {
    /// An analyzer of `src` that runs the `enabled` operators.
    pub(crate) fn new(
        src: &'t str,
        grammar: &'static Grammar,
        enabled: [bool; OPERATOR_COUNT],
    ) -> Self {
        Analyzer {
            src,
            grammar,
            enabled,
            candidates: Vec::new(),
            frames: Vec::new(),
            names: Vec::new(),
            empty_block: false,
        }
    }

    /// True iff `operator` runs.
    pub(crate) fn is_enabled(&self, operator: Operator) -> bool {
        self.enabled[operator as usize]
    }

    /// The kind of `n`, as far as the operators care.
    pub(crate) fn kind_of(&self, n: Node) -> NodeKind {
        self.grammar.kind(n)
    }

    /// The source text of `n`.
    pub(crate) fn text(&self, n: Node) -> &'t str {
        self.src.get(n.byte_range()).unwrap_or("")
    }

    fn frame(&self) -> Frame<'t> {
        self.frames.last().copied().unwrap_or(Frame {
            kind: NodeKind::Other,
            statement: None,
            clause: None,
            in_function_body: false,
            depth: 0,
        })
    }

    fn candidate(
        &self,
        operator: Operator,
        edits: Vec<Edit>,
        description: String,
        plan: ExcerptPlan<'t>,
    ) -> Candidate<'t> {
        let f = self.frame();
        Candidate {
            operator,
            edits,
            description,
            line_statement: f.statement,
            scope: self.names[..f.depth.min(self.names.len())].join("."),
            in_function_body: f.in_function_body,
            plan,
        }
    }

    /// A candidate whose edits all lie inside `focus`, a descendant of the visited node.
    pub(crate) fn push(
        &mut self,
        operator: Operator,
        edits: Vec<Edit>,
        focus: Node<'t>,
        description: String,
    ) {
        let f = self.frame();
        let plan = ExcerptPlan::Within {
            node: focus,
            statement: f.statement,
            clause: f.clause,
        };
        let c = self.candidate(operator, edits, description, plan);
        self.candidates.push(c);
    }

    /// A candidate replacing all of `target`, inside `focus`, with `replacement`.
    pub(crate) fn push_replace(
        &mut self,
        operator: Operator,
        target: Node<'t>,
        replacement: impl Into<String>,
        focus: Node<'t>,
        description: String,
    ) {
        self.push(
            operator,
            vec![replace(target, replacement)],
            focus,
            description,
        );
    }

    /// A candidate replacing `target` (whose text is `from`), inside `focus`, with `to`,
    /// described as `` `from` -> `to` ``.
    pub(crate) fn push_change(
        &mut self,
        operator: Operator,
        target: Node<'t>,
        from: &str,
        to: impl ToString,
        focus: Node<'t>,
    ) {
        let to = to.to_string();
        let description = format!("`{from}` -> `{to}`");
        self.push_replace(operator, target, to, focus, description);
    }

    /// A candidate rewriting the sibling statements `first..=last` of a block of (or below)
    /// the visited node; `others` says whether that block keeps further statements (or is the
    /// module). Its lines are those of `line_statement`, or else of the visited node's statement.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn push_run(
        &mut self,
        operator: Operator,
        edits: Vec<Edit>,
        first: Node<'t>,
        last: Node<'t>,
        others: bool,
        line_statement: Option<Node<'t>>,
        description: String,
    ) {
        let plan = ExcerptPlan::Run {
            first,
            last,
            others,
        };
        let mut c = self.candidate(operator, edits, description, plan);
        if line_statement.is_some() {
            c.line_statement = line_statement;
        }
        self.candidates.push(c);
    }

    /// Pushes the frame of `node`, reached from the current top frame through `field`.
    fn enter(&mut self, node: Node<'t>, field: Option<&str>) {
        let parent = self.frame();
        let kind = self.kind_of(node);
        let is_statement = self.grammar.is_statement(node);
        let mut depth = parent.depth;
        if matches!(
            kind,
            NodeKind::FunctionDefinition | NodeKind::ClassDefinition
        ) {
            self.names.truncate(depth);
            self.names.push(
                node.child_by_field_name("name")
                    .map_or("", |n| self.text(n)),
            );
            depth += 1;
        }
        let clause = if is_statement {
            None
        } else if matches!(
            node.kind(),
            "elif_clause" | "except_clause" | "except_group_clause" | "case_clause"
        ) {
            Some(node)
        } else {
            parent.clause
        };
        self.frames.push(Frame {
            kind,
            statement: if is_statement {
                Some(node)
            } else {
                parent.statement
            },
            clause,
            in_function_body: parent.in_function_body
                || (parent.kind == NodeKind::FunctionDefinition && field == Some("body")),
            depth,
        });
    }

    /// Pre-order walk that does not descend into strings, comments, decorators or annotations.
    pub(crate) fn walk(&mut self, root: Node<'t>) {
        let mut cursor = root.walk();
        self.enter(root, None);
        loop {
            let node = cursor.node();
            let kind = self.frame().kind;
            let parent = self
                .frames
                .len()
                .checked_sub(2)
                .and_then(|i| self.frames.get(i))
                .map_or(NodeKind::Other, |f| f.kind);
            self.visit(node, kind, parent);
            let skip = matches!(
                kind,
                NodeKind::Str
                    | NodeKind::ConcatStr
                    | NodeKind::Comment
                    | NodeKind::Type
                    | NodeKind::TypeParameter
                    | NodeKind::TypeAlias
                    | NodeKind::Decorator
            );
            if !skip && cursor.goto_first_child() {
                self.enter(cursor.node(), cursor.field_name());
                continue;
            }
            loop {
                self.frames.pop();
                if cursor.goto_next_sibling() {
                    self.enter(cursor.node(), cursor.field_name());
                    break;
                }
                if !cursor.goto_parent() {
                    return;
                }
            }
        }
    }

    /// Runs the operators that look at `node` (of `kind`, under a node of kind `parent`).
    fn visit(&mut self, node: Node<'t>, kind: NodeKind, parent: NodeKind) {
        match kind {
            NodeKind::Module | NodeKind::Block => self.visit_block(node),
            NodeKind::ClassDefinition => self.visit_class(node),
            NodeKind::IfStatement => self.visit_if(node),
            NodeKind::BinaryOperator => self.visit_binary(node),
            NodeKind::BooleanOperator => self.visit_boolean(node),
            NodeKind::ComparisonOperator => self.visit_comparison(node),
            NodeKind::AugmentedAssignment => self.visit_augmented(node),
            NodeKind::Integer => self.visit_integer(node, parent),
            NodeKind::Call => self.visit_call(node),
            NodeKind::Subscript => self.visit_subscript(node),
            NodeKind::DefaultParameter | NodeKind::TypedDefaultParameter => {
                self.visit_default(node)
            }
            NodeKind::ReturnStatement => self.visit_return(node),
            NodeKind::NotOperator => self.visit_not(node),
            NodeKind::RaiseStatement => self.visit_raise(node),
            NodeKind::ExceptClause => self.visit_except(node),
            _ => {}
        }
    }

    /// Named children that are not extras (comments, line continuations).
    pub(crate) fn named_children(&self, n: Node<'t>) -> Vec<Node<'t>> {
        let mut c = n.walk();
        n.named_children(&mut c)
            .filter(|ch| !ch.is_extra())
            .collect()
    }

    /// Statements of a block or module.
    pub(crate) fn statements(&self, block: Node<'t>) -> Vec<Node<'t>> {
        let mut c = block.walk();
        block
            .named_children(&mut c)
            .filter(|ch| self.grammar.is_statement(*ch))
            .collect()
    }

    /// A string literal (possibly implicitly concatenated).
    pub(crate) fn is_string_literal(&self, n: Node) -> bool {
        matches!(self.kind_of(n), NodeKind::Str | NodeKind::ConcatStr)
    }

    /// A plain positional argument (no keyword, no `*`/`**` splat).
    pub(crate) fn is_positional(&self, n: Node) -> bool {
        !matches!(
            self.kind_of(n),
            NodeKind::KeywordArgument | NodeKind::ListSplat | NodeKind::DictionarySplat
        ) && !self.text(n).starts_with('*')
    }
}
