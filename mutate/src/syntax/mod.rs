//! Syntax helpers: the node kinds of tree-sitter-python that the operators look at, resolved
//! once into lookup tables; parsing; the excerpt [`checker::Checker`] that validates
//! candidates; and small text helpers.

pub(crate) mod checker;
pub(crate) mod text;

use std::sync::OnceLock;

use tree_sitter::{Language, Node, Parser, Tree};

/// Node kinds the operators care about, resolved once from the grammar's kind ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NodeKind {
    Other,
    Module,
    Block,
    Comment,
    Str,
    ConcatStr,
    Type,
    TypeParameter,
    TypeAlias,
    Decorator,
    DecoratedDefinition,
    FunctionDefinition,
    ClassDefinition,
    ExpressionStatement,
    Assignment,
    AugmentedAssignment,
    IfStatement,
    ElseClause,
    ForStatement,
    WhileStatement,
    WithStatement,
    TryStatement,
    BinaryOperator,
    BooleanOperator,
    ComparisonOperator,
    NotOperator,
    UnaryOperator,
    Integer,
    Call,
    ArgumentList,
    Identifier,
    Subscript,
    Slice,
    DefaultParameter,
    TypedDefaultParameter,
    ReturnStatement,
    RaiseStatement,
    ExceptClause,
    True,
    False,
    NoneLit,
    KeywordArgument,
    ListSplat,
    DictionarySplat,
    ParenthesizedExpression,
    Tuple,
    AsPattern,
    Global,
    Nonlocal,
    FutureImport,
    Pass,
    ConditionalExpression,
    Lambda,
    NamedExpression,
}

const NAMED_KINDS: &[(&str, NodeKind)] = &[
    ("module", NodeKind::Module),
    ("block", NodeKind::Block),
    ("comment", NodeKind::Comment),
    ("string", NodeKind::Str),
    ("concatenated_string", NodeKind::ConcatStr),
    ("type", NodeKind::Type),
    ("type_parameter", NodeKind::TypeParameter),
    ("type_alias_statement", NodeKind::TypeAlias),
    ("decorator", NodeKind::Decorator),
    ("decorated_definition", NodeKind::DecoratedDefinition),
    ("function_definition", NodeKind::FunctionDefinition),
    ("class_definition", NodeKind::ClassDefinition),
    ("expression_statement", NodeKind::ExpressionStatement),
    ("assignment", NodeKind::Assignment),
    ("augmented_assignment", NodeKind::AugmentedAssignment),
    ("if_statement", NodeKind::IfStatement),
    ("else_clause", NodeKind::ElseClause),
    ("for_statement", NodeKind::ForStatement),
    ("while_statement", NodeKind::WhileStatement),
    ("with_statement", NodeKind::WithStatement),
    ("try_statement", NodeKind::TryStatement),
    ("binary_operator", NodeKind::BinaryOperator),
    ("boolean_operator", NodeKind::BooleanOperator),
    ("comparison_operator", NodeKind::ComparisonOperator),
    ("not_operator", NodeKind::NotOperator),
    ("unary_operator", NodeKind::UnaryOperator),
    ("integer", NodeKind::Integer),
    ("call", NodeKind::Call),
    ("argument_list", NodeKind::ArgumentList),
    ("identifier", NodeKind::Identifier),
    ("subscript", NodeKind::Subscript),
    ("slice", NodeKind::Slice),
    ("default_parameter", NodeKind::DefaultParameter),
    ("typed_default_parameter", NodeKind::TypedDefaultParameter),
    ("return_statement", NodeKind::ReturnStatement),
    ("raise_statement", NodeKind::RaiseStatement),
    ("except_clause", NodeKind::ExceptClause),
    ("true", NodeKind::True),
    ("false", NodeKind::False),
    ("none", NodeKind::NoneLit),
    ("keyword_argument", NodeKind::KeywordArgument),
    ("list_splat", NodeKind::ListSplat),
    ("dictionary_splat", NodeKind::DictionarySplat),
    (
        "parenthesized_expression",
        NodeKind::ParenthesizedExpression,
    ),
    ("tuple", NodeKind::Tuple),
    ("as_pattern", NodeKind::AsPattern),
    ("global_statement", NodeKind::Global),
    ("nonlocal_statement", NodeKind::Nonlocal),
    ("future_import_statement", NodeKind::FutureImport),
    ("pass_statement", NodeKind::Pass),
    ("conditional_expression", NodeKind::ConditionalExpression),
    ("lambda", NodeKind::Lambda),
    ("named_expression", NodeKind::NamedExpression),
];

/// Statement kinds (tree-sitter-python's `_simple_statement` and `_compound_statement`).
const STATEMENT_KINDS: &[&str] = &[
    "assert_statement",
    "break_statement",
    "continue_statement",
    "delete_statement",
    "exec_statement",
    "expression_statement",
    "future_import_statement",
    "global_statement",
    "import_from_statement",
    "import_statement",
    "nonlocal_statement",
    "pass_statement",
    "print_statement",
    "raise_statement",
    "return_statement",
    "type_alias_statement",
    "class_definition",
    "decorated_definition",
    "for_statement",
    "function_definition",
    "if_statement",
    "match_statement",
    "try_statement",
    "while_statement",
    "with_statement",
];

/// Expression kinds (tree-sitter-python's `expression` and `primary_expression` subtypes,
/// without `as_pattern` and `list_splat`, which are not expressions on their own).
const EXPRESSION_KINDS: &[&str] = &[
    "boolean_operator",
    "comparison_operator",
    "conditional_expression",
    "lambda",
    "named_expression",
    "not_operator",
    "attribute",
    "await",
    "binary_operator",
    "call",
    "concatenated_string",
    "dictionary",
    "dictionary_comprehension",
    "ellipsis",
    "false",
    "float",
    "generator_expression",
    "identifier",
    "integer",
    "list",
    "list_comprehension",
    "none",
    "parenthesized_expression",
    "set",
    "set_comprehension",
    "string",
    "subscript",
    "true",
    "tuple",
    "unary_operator",
];

/// Kind-id lookup tables for the Python grammar.
#[derive(Debug)]
pub(crate) struct Grammar {
    language: Language,
    kinds: Vec<NodeKind>,
    statement: Vec<bool>,
    expression: Vec<bool>,
}

impl Grammar {
    /// The tables, built on first use.
    pub(crate) fn get() -> &'static Grammar {
        static KINDS: OnceLock<Grammar> = OnceLock::new();
        KINDS.get_or_init(|| {
            let language: Language = tree_sitter_python::LANGUAGE.into();
            let count = language.node_kind_count();
            let mut kinds = vec![NodeKind::Other; count];
            let mut statement = vec![false; count];
            let mut expression = vec![false; count];
            for id in 0..count {
                let Ok(id16) = u16::try_from(id) else { break };
                if !language.node_kind_is_named(id16) {
                    continue;
                }
                let Some(name) = language.node_kind_for_id(id16) else {
                    continue;
                };
                if let Some((_, kind)) = NAMED_KINDS.iter().find(|(n, _)| *n == name) {
                    kinds[id] = *kind;
                }
                statement[id] = STATEMENT_KINDS.contains(&name);
                expression[id] = EXPRESSION_KINDS.contains(&name);
            }
            Grammar {
                language,
                kinds,
                statement,
                expression,
            }
        })
    }

    /// The kind of `n`, as far as the operators care.
    pub(crate) fn kind(&self, n: Node) -> NodeKind {
        self.kinds
            .get(usize::from(n.kind_id()))
            .copied()
            .unwrap_or(NodeKind::Other)
    }

    /// A statement kind.
    pub(crate) fn is_statement(&self, n: Node) -> bool {
        self.statement
            .get(usize::from(n.kind_id()))
            .copied()
            .unwrap_or(false)
    }

    /// An expression kind that parses on its own inside parentheses.
    pub(crate) fn is_expression(&self, n: Node) -> bool {
        self.expression
            .get(usize::from(n.kind_id()))
            .copied()
            .unwrap_or(false)
    }

    /// A parser for Python.
    pub(crate) fn parser(&self) -> Option<Parser> {
        let mut parser = Parser::new();
        parser.set_language(&self.language).ok()?;
        Some(parser)
    }
}

/// Parses `source` (`None` only if tree-sitter gives up).
pub(crate) fn parse_tree(parser: &mut Parser, source: &str) -> Option<Tree> {
    parser.parse(source, None)
}

/// True iff `source` parses with tree-sitter-python without ERROR or MISSING nodes and without
/// empty blocks.
///
/// tree-sitter-python accepts a compound statement with an empty body (`if x:` followed by a
/// dedented line), which Python rejects with an IndentationError, so those count as errors too.
pub fn parses(source: &str) -> bool {
    let grammar = Grammar::get();
    let Some(mut parser) = grammar.parser() else {
        return false;
    };
    parse_tree(&mut parser, source).is_some_and(|t| {
        let root = t.root_node();
        !root.has_error() && !has_empty_block(grammar, root)
    })
}

/// True iff some `block` node (a suite) in the tree has no statement.
pub(crate) fn has_empty_block(grammar: &Grammar, root: Node) -> bool {
    let mut cursor = root.walk();
    loop {
        let node = cursor.node();
        if grammar.kind(node) == NodeKind::Block {
            let mut c = node.walk();
            let empty = !node.named_children(&mut c).any(|ch| !ch.is_extra());
            if empty {
                return true;
            }
        }
        if cursor.goto_first_child() {
            continue;
        }
        loop {
            if cursor.goto_next_sibling() {
                break;
            }
            if !cursor.goto_parent() {
                return false;
            }
        }
    }
}
