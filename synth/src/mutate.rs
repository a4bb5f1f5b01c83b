//! Procedural bug injection for Python source.
//!
//! This module finds candidate bugs ("mutations") in one Python file and describes each as a
//! small set of byte-span replacements ([`Edit`]s) of the original text. The file is parsed once
//! with tree-sitter-python; every operator (the SWE-smith set plus a few realistic
//! developer-bug operators, see [`operators`]) walks the syntax tree and edits only the bytes it
//! has to (an operator token, a literal, a statement's lines), so formatting and comments
//! elsewhere survive and the resulting diff is minimal. Code inside strings, comments,
//! decorators and type annotations is never mutated. Every candidate is validated by
//! re-parsing the smallest self-contained excerpt around its edits (the private `Checker`) and
//! dropped unless the mutated file still parses cleanly (no ERROR/MISSING node, no empty
//! block) and differs from the original. Each mutation also carries where it lives: the lines
//! of the smallest enclosing statement, the dotted name of the enclosing class/function, and
//! whether it sits in a function body (code that runs at call time rather than import time).
//! Mutations of the same file that do not touch each other can be merged with [`combine`]. The
//! module is fully deterministic: it contains no randomness.

use std::collections::HashSet;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};
use tree_sitter::{Language, Node, Parser, Tree};

/// One replacement of a byte span of the original source.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Edit {
    /// First byte of the replaced span (UTF-8 offset into the original source).
    pub start: usize,
    /// One past the last byte of the replaced span; equal to `start` for an insertion.
    pub end: usize,
    /// The text that replaces the span.
    pub replacement: String,
}

/// Static info about an operator.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct OperatorInfo {
    /// Stable operator name, as used in [`Mutation::operator`] and [`find_mutations`].
    pub name: &'static str,
    /// One-line description of what the operator does.
    pub description: &'static str,
    /// `"swe-smith"` for the SWE-smith procedural operators, `"extra"` for the others.
    pub family: &'static str,
}

/// One candidate bug in one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mutation {
    /// Stable operator name (several joined with `+` for a [`combine`]d mutation).
    pub operator: String,
    /// Sorted, non-overlapping edits, relative to the ORIGINAL source.
    pub edits: Vec<Edit>,
    /// 1-based first line of the smallest enclosing statement (simple or compound) containing
    /// all edits.
    pub start_line: u32,
    /// 1-based last line of that statement.
    pub end_line: u32,
    /// Dotted qualified name of the enclosing def/class (e.g. `Parser.parse.inner`); `""` at
    /// module level.
    pub scope: String,
    /// True iff every edit lies inside the body block of some `def` (code that runs at call
    /// time, not import time). Decorators, default values, parameters and the `def` line of a
    /// top-level or class-level function are not in a function body.
    pub in_function_body: bool,
    /// Short human description for debugging/metadata, e.g. "`<` -> `<=`" (never shown to
    /// agents).
    pub description: String,
}

/// Errors of this module.
#[derive(Debug, thiserror::Error)]
pub enum MutateError {
    /// An operator name that [`operators`] does not list.
    #[error("unknown mutation operator `{0}` (known: {known})", known = known_operator_names())]
    UnknownOperator(String),
    /// The source does not parse cleanly with tree-sitter-python.
    #[error("the source does not parse as Python")]
    Parse,
    /// An edit is out of range, not on a character boundary, or overlaps another.
    #[error("invalid edit: {0}")]
    InvalidEdit(String),
}

const N_OPS: usize = 22;

/// Every operator, in the stable order of [`Op`].
static OPERATORS: [OperatorInfo; N_OPS] = [
    OperatorInfo {
        name: "class_rm_base",
        description: "Remove one base class from a class's superclass list",
        family: "swe-smith",
    },
    OperatorInfo {
        name: "class_rm_funcs",
        description: "Delete one method (with its decorators) from a class",
        family: "swe-smith",
    },
    OperatorInfo {
        name: "class_shuffle_funcs",
        description: "Swap two adjacent methods of a class",
        family: "swe-smith",
    },
    OperatorInfo {
        name: "ctrl_invert_if",
        description: "Swap the bodies of an if/else",
        family: "swe-smith",
    },
    OperatorInfo {
        name: "ctrl_shuffle",
        description: "Swap two adjacent statements of a block inside a function body",
        family: "swe-smith",
    },
    OperatorInfo {
        name: "remove_assign",
        description: "Delete an assignment or augmented assignment statement",
        family: "swe-smith",
    },
    OperatorInfo {
        name: "remove_cond",
        description: "Delete an if statement",
        family: "swe-smith",
    },
    OperatorInfo {
        name: "remove_loop",
        description: "Delete a for or while loop",
        family: "swe-smith",
    },
    OperatorInfo {
        name: "remove_wrapper",
        description: "Replace a with or try statement by its (dedented) body",
        family: "swe-smith",
    },
    OperatorInfo {
        name: "op_break_chains",
        description: "Drop a middle operand of an operator chain (`a + b + c` -> `a + c`)",
        family: "swe-smith",
    },
    OperatorInfo {
        name: "op_change_const",
        description: "Change an integer literal by +1 or -1",
        family: "swe-smith",
    },
    OperatorInfo {
        name: "op_change",
        description: "Replace a binary or augmented-assignment operator within its family",
        family: "swe-smith",
    },
    OperatorInfo {
        name: "op_swap",
        description: "Swap the operands of a binary operator or comparison",
        family: "swe-smith",
    },
    OperatorInfo {
        name: "flip_operators",
        description: "Flip a comparison or boolean operator (`==`/`!=`, `<`/`>`, `in`/`not in`, `and`/`or`, ...)",
        family: "swe-smith",
    },
    OperatorInfo {
        name: "off_by_one_range",
        description: "Move the stop argument of a `range(...)` call by one",
        family: "extra",
    },
    OperatorInfo {
        name: "off_by_one_slice",
        description: "Move a slice bound or an integer index by one",
        family: "extra",
    },
    OperatorInfo {
        name: "wrong_default_arg",
        description: "Change a parameter's default value",
        family: "extra",
    },
    OperatorInfo {
        name: "swap_call_args",
        description: "Swap two adjacent positional arguments of a call",
        family: "extra",
    },
    OperatorInfo {
        name: "wrong_return_value",
        description: "Return a wrong value (`None`, the flipped boolean, or without `not`)",
        family: "extra",
    },
    OperatorInfo {
        name: "drop_not",
        description: "Drop a `not` (`not x` -> `x`)",
        family: "extra",
    },
    OperatorInfo {
        name: "wrong_exception_type",
        description: "Raise or catch a different builtin exception class",
        family: "extra",
    },
    OperatorInfo {
        name: "boundary_condition",
        description: "Move a comparison boundary (`<` <-> `<=`, `>` <-> `>=`)",
        family: "extra",
    },
];

/// Every operator, in a stable order.
pub fn operators() -> &'static [OperatorInfo] {
    &OPERATORS
}

fn known_operator_names() -> String {
    OPERATORS
        .iter()
        .map(|o| o.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Operators as an enum; the discriminant indexes [`OPERATORS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum OpKind {
    ClassRmBase,
    ClassRmFuncs,
    ClassShuffleFuncs,
    CtrlInvertIf,
    CtrlShuffle,
    RemoveAssign,
    RemoveCond,
    RemoveLoop,
    RemoveWrapper,
    OpBreakChains,
    OpChangeConst,
    OpChange,
    OpSwap,
    FlipOperators,
    OffByOneRange,
    OffByOneSlice,
    WrongDefaultArg,
    SwapCallArgs,
    WrongReturnValue,
    DropNot,
    WrongExceptionType,
    BoundaryCondition,
}

const ALL_OPS: [OpKind; N_OPS] = [
    OpKind::ClassRmBase,
    OpKind::ClassRmFuncs,
    OpKind::ClassShuffleFuncs,
    OpKind::CtrlInvertIf,
    OpKind::CtrlShuffle,
    OpKind::RemoveAssign,
    OpKind::RemoveCond,
    OpKind::RemoveLoop,
    OpKind::RemoveWrapper,
    OpKind::OpBreakChains,
    OpKind::OpChangeConst,
    OpKind::OpChange,
    OpKind::OpSwap,
    OpKind::FlipOperators,
    OpKind::OffByOneRange,
    OpKind::OffByOneSlice,
    OpKind::WrongDefaultArg,
    OpKind::SwapCallArgs,
    OpKind::WrongReturnValue,
    OpKind::DropNot,
    OpKind::WrongExceptionType,
    OpKind::BoundaryCondition,
];

impl OpKind {
    fn name(self) -> &'static str {
        OPERATORS[self as usize].name
    }
}

/// Node kinds this module cares about, resolved once from the grammar's kind ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum K {
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

const NAMED_KINDS: &[(&str, K)] = &[
    ("module", K::Module),
    ("block", K::Block),
    ("comment", K::Comment),
    ("string", K::Str),
    ("concatenated_string", K::ConcatStr),
    ("type", K::Type),
    ("type_parameter", K::TypeParameter),
    ("type_alias_statement", K::TypeAlias),
    ("decorator", K::Decorator),
    ("decorated_definition", K::DecoratedDefinition),
    ("function_definition", K::FunctionDefinition),
    ("class_definition", K::ClassDefinition),
    ("expression_statement", K::ExpressionStatement),
    ("assignment", K::Assignment),
    ("augmented_assignment", K::AugmentedAssignment),
    ("if_statement", K::IfStatement),
    ("else_clause", K::ElseClause),
    ("for_statement", K::ForStatement),
    ("while_statement", K::WhileStatement),
    ("with_statement", K::WithStatement),
    ("try_statement", K::TryStatement),
    ("binary_operator", K::BinaryOperator),
    ("boolean_operator", K::BooleanOperator),
    ("comparison_operator", K::ComparisonOperator),
    ("not_operator", K::NotOperator),
    ("unary_operator", K::UnaryOperator),
    ("integer", K::Integer),
    ("call", K::Call),
    ("argument_list", K::ArgumentList),
    ("identifier", K::Identifier),
    ("subscript", K::Subscript),
    ("slice", K::Slice),
    ("default_parameter", K::DefaultParameter),
    ("typed_default_parameter", K::TypedDefaultParameter),
    ("return_statement", K::ReturnStatement),
    ("raise_statement", K::RaiseStatement),
    ("except_clause", K::ExceptClause),
    ("true", K::True),
    ("false", K::False),
    ("none", K::NoneLit),
    ("keyword_argument", K::KeywordArgument),
    ("list_splat", K::ListSplat),
    ("dictionary_splat", K::DictionarySplat),
    ("parenthesized_expression", K::ParenthesizedExpression),
    ("tuple", K::Tuple),
    ("as_pattern", K::AsPattern),
    ("global_statement", K::Global),
    ("nonlocal_statement", K::Nonlocal),
    ("future_import_statement", K::FutureImport),
    ("pass_statement", K::Pass),
    ("conditional_expression", K::ConditionalExpression),
    ("lambda", K::Lambda),
    ("named_expression", K::NamedExpression),
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
struct Kinds {
    language: Language,
    kinds: Vec<K>,
    statement: Vec<bool>,
    expression: Vec<bool>,
}

impl Kinds {
    fn get() -> &'static Kinds {
        static KINDS: OnceLock<Kinds> = OnceLock::new();
        KINDS.get_or_init(|| {
            let language: Language = tree_sitter_python::LANGUAGE.into();
            let count = language.node_kind_count();
            let mut kinds = vec![K::Other; count];
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
                if let Some((_, k)) = NAMED_KINDS.iter().find(|(n, _)| *n == name) {
                    kinds[id] = *k;
                }
                statement[id] = STATEMENT_KINDS.contains(&name);
                expression[id] = EXPRESSION_KINDS.contains(&name);
            }
            Kinds {
                language,
                kinds,
                statement,
                expression,
            }
        })
    }

    fn kind(&self, n: Node) -> K {
        self.kinds
            .get(usize::from(n.kind_id()))
            .copied()
            .unwrap_or(K::Other)
    }

    fn is_statement(&self, n: Node) -> bool {
        self.statement
            .get(usize::from(n.kind_id()))
            .copied()
            .unwrap_or(false)
    }

    /// An expression kind that parses on its own inside parentheses.
    fn is_expression(&self, n: Node) -> bool {
        self.expression
            .get(usize::from(n.kind_id()))
            .copied()
            .unwrap_or(false)
    }

    fn parser(&self) -> Option<Parser> {
        let mut parser = Parser::new();
        parser.set_language(&self.language).ok()?;
        Some(parser)
    }
}

fn parse_tree(parser: &mut Parser, source: &str) -> Option<Tree> {
    parser.parse(source, None)
}

/// True iff `source` parses with tree-sitter-python without ERROR or MISSING nodes and without
/// empty blocks.
///
/// tree-sitter-python accepts a compound statement with an empty body (`if x:` followed by a
/// dedented line), which Python rejects with an IndentationError, so those count as errors too.
pub fn parses(source: &str) -> bool {
    let kinds = Kinds::get();
    let Some(mut parser) = kinds.parser() else {
        return false;
    };
    parse_tree(&mut parser, source).is_some_and(|t| {
        let root = t.root_node();
        !root.has_error() && !has_empty_block(kinds, root)
    })
}

/// True iff some `block` node (a suite) in the tree has no statement.
fn has_empty_block(kinds: &Kinds, root: Node) -> bool {
    let mut cursor = root.walk();
    loop {
        let node = cursor.node();
        if kinds.kind(node) == K::Block {
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

/// True iff [`apply`] would accept `edits` for `source`.
fn edits_are_valid(source: &str, edits: &[Edit]) -> bool {
    let mut pos = 0;
    edits.iter().all(|e| {
        let ok = pos <= e.start
            && e.start <= e.end
            && e.end <= source.len()
            && source.is_char_boundary(e.start)
            && source.is_char_boundary(e.end);
        pos = e.end;
        ok
    })
}

/// Applies sorted, non-overlapping `edits` (relative to `source`) and returns the new text.
///
/// Errors on an edit that is out of range, reversed, not on a UTF-8 character boundary, or
/// that starts before the previous edit ends.
pub fn apply(source: &str, edits: &[Edit]) -> Result<String, MutateError> {
    let mut out = String::with_capacity(source.len() + 64);
    let mut pos = 0usize;
    for (i, e) in edits.iter().enumerate() {
        if e.start > e.end || e.end > source.len() {
            return Err(MutateError::InvalidEdit(format!(
                "edit {i} spans {}..{} of a {}-byte source",
                e.start,
                e.end,
                source.len()
            )));
        }
        if !source.is_char_boundary(e.start) || !source.is_char_boundary(e.end) {
            return Err(MutateError::InvalidEdit(format!(
                "edit {i} ({}..{}) is not on a character boundary",
                e.start, e.end
            )));
        }
        if e.start < pos {
            return Err(MutateError::InvalidEdit(format!(
                "edit {i} ({}..{}) overlaps the previous edit or is out of order",
                e.start, e.end
            )));
        }
        out.push_str(&source[pos..e.start]);
        out.push_str(&e.replacement);
        pos = e.end;
    }
    out.push_str(&source[pos..]);
    Ok(out)
}

/// True iff some edit of `a` and some edit of `b` intersect; touching spans count as overlap.
pub fn overlaps(a: &Mutation, b: &Mutation) -> bool {
    a.edits
        .iter()
        .any(|x| b.edits.iter().any(|y| x.start <= y.end && y.start <= x.end))
}

/// Merges non-overlapping mutations of the same `source` into one mutation.
///
/// Operator names and descriptions are joined (`+` and `; `), the line range is the union,
/// `in_function_body` holds only if it holds for all, and the scope is the first mutation's.
/// Returns `None` for an empty list, if any two mutations [`overlaps`], or if the combined
/// source does not parse or equals the original.
pub fn combine(source: &str, mutations: &[&Mutation]) -> Option<Mutation> {
    let first = mutations.first()?;
    for (i, a) in mutations.iter().enumerate() {
        if mutations[i + 1..].iter().any(|b| overlaps(a, b)) {
            return None;
        }
    }
    let mut edits: Vec<Edit> = mutations.iter().flat_map(|m| m.edits.clone()).collect();
    edits.sort_by_key(|e| (e.start, e.end));
    let new = apply(source, &edits).ok()?;
    if new == source || !parses(&new) {
        return None;
    }
    Some(Mutation {
        operator: mutations
            .iter()
            .map(|m| m.operator.as_str())
            .collect::<Vec<_>>()
            .join("+"),
        edits,
        start_line: mutations.iter().map(|m| m.start_line).min()?,
        end_line: mutations.iter().map(|m| m.end_line).max()?,
        scope: first.scope.clone(),
        in_function_body: mutations.iter().all(|m| m.in_function_body),
        description: mutations
            .iter()
            .map(|m| m.description.as_str())
            .collect::<Vec<_>>()
            .join("; "),
    })
}

/// Every site of every named operator in one file (an empty `operators` means all of them).
///
/// The result is deterministic, ordered by first edit start, then operator name, then
/// description. Every mutation changes the source and leaves it parseable. Errors with
/// [`MutateError::UnknownOperator`] for a name [`operators`] does not list and with
/// [`MutateError::Parse`] when the source itself does not satisfy [`parses`].
pub fn find_mutations(source: &str, operators: &[&str]) -> Result<Vec<Mutation>, MutateError> {
    find_mutations_with_rejects(source, operators).map(|(kept, _)| kept)
}

/// [`find_mutations`], also returning the located candidates that were dropped because the
/// mutated source does not parse (or does not change).
pub(crate) fn find_mutations_with_rejects(
    source: &str,
    operators: &[&str],
) -> Result<(Vec<Mutation>, Vec<Mutation>), MutateError> {
    let mut enabled = [operators.is_empty(); N_OPS];
    for name in operators {
        let op = ALL_OPS
            .iter()
            .find(|op| op.name() == *name)
            .ok_or_else(|| MutateError::UnknownOperator((*name).to_string()))?;
        enabled[*op as usize] = true;
    }
    let kinds = Kinds::get();
    let mut parser = kinds.parser().ok_or(MutateError::Parse)?;
    let tree = parse_tree(&mut parser, source).ok_or(MutateError::Parse)?;
    let root = tree.root_node();
    if root.has_error() {
        return Err(MutateError::Parse);
    }

    let mut analyzer = Analyzer {
        src: source,
        kinds,
        enabled,
        cands: Vec::new(),
        frames: Vec::new(),
        names: Vec::new(),
        empty_block: false,
    };
    analyzer.walk(root);
    if analyzer.empty_block {
        return Err(MutateError::Parse);
    }
    let cands = analyzer.cands;

    let mut seen: HashSet<(OpKind, Vec<Edit>)> = HashSet::new();
    let mut located: Vec<(Mutation, Plan)> = Vec::with_capacity(cands.len());
    for c in cands {
        if c.edits.is_empty()
            || (c.op == OpKind::CtrlShuffle && !c.in_body)
            || !seen.insert((c.op, c.edits.clone()))
        {
            continue;
        }
        let (start_line, end_line) = match c.line_stmt {
            Some(s) => (
                line_of(s.start_position().row),
                line_of(s.end_position().row),
            ),
            None => {
                let row = |b: usize| source.get(..b).map_or(0, |p| p.matches('\n').count());
                let lo = c.edits.first().map_or(0, |e| e.start);
                let hi = c.edits.last().map_or(0, |e| e.end.max(e.start + 1) - 1);
                (line_of(row(lo)), line_of(row(hi)))
            }
        };
        let mutation = Mutation {
            operator: c.op.name().to_string(),
            edits: c.edits,
            start_line,
            end_line,
            scope: c.scope,
            in_function_body: c.in_body,
            description: c.desc,
        };
        located.push((mutation, c.plan));
    }
    located.sort_by(|(a, _), (b, _)| {
        let ka = (a.edits[0].start, &a.operator, &a.description);
        let kb = (b.edits[0].start, &b.operator, &b.description);
        ka.cmp(&kb).then_with(|| {
            let ea: Vec<_> = a
                .edits
                .iter()
                .map(|e| (e.start, e.end, &e.replacement))
                .collect();
            let eb: Vec<_> = b
                .edits
                .iter()
                .map(|e| (e.start, e.end, &e.replacement))
                .collect();
            ea.cmp(&eb)
        })
    });

    let mut checker = Checker {
        kinds,
        parser,
        src: source,
    };
    let mut kept = Vec::with_capacity(located.len());
    let mut rejected = Vec::new();
    for (m, plan) in located {
        if checker.ok(&m.edits, &plan) {
            kept.push(m);
        } else {
            rejected.push(m);
        }
    }
    Ok((kept, rejected))
}

fn line_of(row: usize) -> u32 {
    u32::try_from(row + 1).unwrap_or(u32::MAX)
}

/// Statements longer than this are checked on the smallest expression around the edits.
const EXCERPT_LIMIT: usize = 1000;

/// What to re-parse to validate a candidate.
#[derive(Debug, Clone, Copy)]
enum Plan<'t> {
    /// All edits lie inside `node`, whose nearest enclosing statement (or itself) is `stmt`
    /// and nearest enclosing `elif`/`except`/`case` clause below `stmt` is `clause`.
    Within {
        node: Node<'t>,
        stmt: Option<Node<'t>>,
        clause: Option<Node<'t>>,
    },
    /// The edits rewrite the run of sibling statements `first..=last` of one block; `others`
    /// says whether the block has further statements (or is the module).
    Run {
        first: Node<'t>,
        last: Node<'t>,
        others: bool,
    },
}

/// Validates mutated sources by parsing a small self-contained excerpt around the edits.
///
/// Re-parsing a whole file per candidate is too slow (and tree-sitter-python's incremental
/// re-parse often degrades to a full parse), so each mutation is checked on an excerpt that
/// parses the same way in isolation: the mutated simple statement; the header of a compound
/// statement or of an `elif`/`except`/`case` clause (with `pass` as body); the smallest
/// expression around the edits when the statement is huge; or the run of sibling statements
/// touched by the edits, placed under an `if 1:` header when it is indented (with a `pass`
/// standing for the block's other statements when something is deleted, so that only a block
/// emptied for real is an error). Anything else falls back to a full parse of the mutated file.
struct Checker<'a> {
    kinds: &'static Kinds,
    parser: Parser,
    src: &'a str,
}

/// A stand-alone excerpt to re-parse instead of the whole mutated file.
enum Excerpt {
    /// `prefix`, then `source[start..end]` with the edits applied, then `suffix`.
    Region {
        start: usize,
        end: usize,
        prefix: &'static str,
        suffix: String,
    },
    /// A ready-made text (the skeleton of a statement swap).
    Text(String),
}

impl<'a> Checker<'a> {
    /// True iff the edits apply, change the source and leave it parseable.
    fn ok(&mut self, edits: &[Edit], plan: &Plan<'_>) -> bool {
        if edits.is_empty() || !edits_are_valid(self.src, edits) {
            return false;
        }
        if edits
            .iter()
            .all(|e| self.src.get(e.start..e.end) == Some(e.replacement.as_str()))
        {
            return false;
        }
        let raw_lo = edits.iter().map(|e| e.start).min().unwrap_or(0);
        let raw_hi = edits.iter().map(|e| e.end).max().unwrap_or(0);
        let excerpt = match *plan {
            Plan::Within { node, stmt, clause } => self.within_excerpt(node, stmt, clause),
            Plan::Run {
                first,
                last,
                others,
            } => self.run_excerpt(first, last, others, edits),
        };
        let text = match excerpt {
            Some(Excerpt::Region {
                start,
                end,
                prefix,
                suffix,
            }) if start <= raw_lo && raw_hi <= end => {
                let local: Vec<Edit> = edits
                    .iter()
                    .map(|e| edit(e.start - start, e.end - start, e.replacement.as_str()))
                    .collect();
                let Some(region) = self.src.get(start..end) else {
                    return false;
                };
                let Ok(body) = apply(region, &local) else {
                    return false;
                };
                format!("{prefix}{body}{suffix}")
            }
            Some(Excerpt::Text(text)) => text,
            _ => match apply(self.src, edits) {
                Ok(all) => all,
                Err(_) => return false,
            },
        };
        let Some(tree) = parse_tree(&mut self.parser, &text) else {
            return false;
        };
        let root = tree.root_node();
        !root.has_error() && !has_empty_block(self.kinds, root)
    }

    fn indent_of(&self, byte: usize) -> Option<&'a str> {
        let start = self.src.as_bytes()[..byte]
            .iter()
            .rposition(|b| *b == b'\n')
            .map_or(0, |i| i + 1);
        let prefix = self.src.get(start..byte)?;
        prefix.bytes().all(is_inline_ws).then_some(prefix)
    }

    fn first_block<'t>(&self, n: Node<'t>) -> Option<Node<'t>> {
        let mut c = n.walk();
        n.children(&mut c)
            .find(|ch| self.kinds.kind(*ch) == K::Block)
    }

    /// The excerpt for edits inside `node`.
    fn within_excerpt(
        &self,
        node: Node,
        stmt: Option<Node>,
        clause: Option<Node>,
    ) -> Option<Excerpt> {
        let region = |start: usize, end: usize, prefix: &'static str, suffix: &str| {
            if end - start > EXCERPT_LIMIT && self.kinds.is_expression(node) {
                Excerpt::Region {
                    start: node.start_byte(),
                    end: node.end_byte(),
                    prefix: "(",
                    suffix: ")".into(),
                }
            } else {
                Excerpt::Region {
                    start,
                    end,
                    prefix,
                    suffix: suffix.into(),
                }
            }
        };
        let stmt = stmt?;
        let Some(block) = self.first_block(stmt) else {
            // A simple statement parses on its own, from its first byte.
            return Some(region(stmt.start_byte(), stmt.end_byte(), "", ""));
        };
        if node.end_byte() <= block.start_byte() {
            let body = if stmt.kind() == "match_statement" {
                "\n case _: pass"
            } else {
                "pass"
            };
            return Some(region(stmt.start_byte(), block.start_byte(), "", body));
        }
        let clause = clause?;
        let opener = match clause.kind() {
            "elif_clause" => "if 1: pass\n",
            "case_clause" => "match _:\n ",
            _ => "try: pass\n",
        };
        let b = self.first_block(clause)?;
        (node.end_byte() <= b.start_byte())
            .then(|| region(clause.start_byte(), b.start_byte(), opener, "pass"))
    }

    /// The excerpt for edits rewriting the statements `first..=last` of one block. A swap of
    /// two statements is checked on their headers only (their bodies move verbatim).
    fn run_excerpt(
        &self,
        first: Node,
        last: Node,
        others: bool,
        edits: &[Edit],
    ) -> Option<Excerpt> {
        let indent = self.indent_of(first.start_byte());
        let prefix = match indent {
            Some(i) if !i.is_empty() => "if 1:\n",
            _ => "",
        };
        let text = |n: Node| self.src.get(n.byte_range()).unwrap_or("");
        if let [ea, eb] = edits
            && first != last
            && (ea.start, ea.end, eb.start, eb.end)
                == (
                    first.start_byte(),
                    first.end_byte(),
                    last.start_byte(),
                    last.end_byte(),
                )
            && ea.replacement == text(last)
            && eb.replacement == text(first)
            && let Some(indent) = indent
            && self.indent_of(last.start_byte()) == Some(indent)
        {
            return Some(Excerpt::Text(format!(
                "{prefix}{indent}{}\n{indent}{}\n",
                self.abbreviate(last),
                self.abbreviate(first)
            )));
        }
        let deletes = edits.iter().any(|e| e.replacement.trim().is_empty());
        let suffix = if deletes && others {
            format!("\n{}pass\n", indent.unwrap_or(""))
        } else {
            String::new()
        };
        let raw_lo = edits.iter().map(|e| e.start).min()?;
        let raw_hi = edits.iter().map(|e| e.end).max()?;
        let start = first.start_byte() - indent.map_or(0, str::len);
        Some(Excerpt::Region {
            start: start.min(raw_lo),
            end: last.end_byte().max(raw_hi),
            prefix,
            suffix,
        })
    }

    /// A statement with every suite of a compound statement (its own and its clauses')
    /// replaced by `pass`.
    fn abbreviate(&self, s: Node) -> String {
        let def = if self.kinds.kind(s) == K::DecoratedDefinition {
            s.child_by_field_name("definition")
        } else {
            Some(s)
        };
        let mut suites = Vec::new();
        if let Some(def) = def {
            let is_match = def.kind() == "match_statement";
            let mut c = def.walk();
            for child in def.children(&mut c) {
                if self.kinds.kind(child) == K::Block {
                    if is_match {
                        let mut cc = child.walk();
                        suites.extend(
                            child
                                .named_children(&mut cc)
                                .filter_map(|case| self.first_block(case)),
                        );
                    } else {
                        suites.push(child);
                    }
                } else if matches!(
                    child.kind(),
                    "elif_clause"
                        | "else_clause"
                        | "except_clause"
                        | "except_group_clause"
                        | "finally_clause"
                ) {
                    suites.extend(self.first_block(child));
                }
            }
        }
        let edits: Vec<Edit> = suites
            .iter()
            .map(|b| {
                edit(
                    b.start_byte() - s.start_byte(),
                    b.end_byte() - s.start_byte(),
                    "pass",
                )
            })
            .collect();
        let text = self.src.get(s.byte_range()).unwrap_or("");
        apply(text, &edits).unwrap_or_else(|_| text.to_string())
    }
}

/// One candidate before sorting and validation.
struct Cand<'t> {
    op: OpKind,
    edits: Vec<Edit>,
    desc: String,
    /// The statement whose lines are reported (`None`: the edits' own lines).
    line_stmt: Option<Node<'t>>,
    scope: String,
    in_body: bool,
    plan: Plan<'t>,
}

/// Context of one node on the walk's stack.
#[derive(Clone, Copy)]
struct Frame<'t> {
    kind: K,
    /// Nearest statement containing the node (or the node itself).
    stmt: Option<Node<'t>>,
    /// Nearest `elif`/`except`/`case` clause containing the node, below `stmt`.
    clause: Option<Node<'t>>,
    /// The node is (inside) the body block of a function definition.
    in_body: bool,
    /// Number of enclosing def/class names (including the node itself if it is one).
    depth: usize,
}

fn edit(start: usize, end: usize, replacement: impl Into<String>) -> Edit {
    Edit {
        start,
        end,
        replacement: replacement.into(),
    }
}

/// A short one-line excerpt of `s` for descriptions.
fn snippet(s: &str) -> String {
    let trimmed = s.trim();
    let line = trimmed.lines().next().unwrap_or("").trim();
    let mut out: String = line.chars().take(40).collect();
    if out.len() < line.len() || line.len() < trimmed.len() {
        out.push('…');
    }
    out
}

/// A decimal integer literal that is safe to shift by one.
fn int_value(text: &str) -> Option<i64> {
    if text.is_empty()
        || text.len() > 15
        || !text.bytes().all(|b| b.is_ascii_digit())
        || (text.len() > 1 && text.starts_with('0'))
    {
        return None;
    }
    text.parse().ok()
}

/// Binding strength of a binary operator token in tree-sitter-python's grammar.
fn binary_prec(op: &str) -> u8 {
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

/// The operators `op_change` may put in place of the binary operator `op`: the others of its
/// family.
fn operator_family(op: &str) -> &'static [&'static str] {
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

fn wrong_exception(name: &str) -> Option<&'static str> {
    EXCEPTION_MAP
        .iter()
        .find(|(from, _)| *from == name)
        .map(|(_, to)| *to)
}

fn is_inline_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\x0c')
}

/// Walks one file's tree and collects candidates of the enabled operators.
struct Analyzer<'t> {
    src: &'t str,
    kinds: &'static Kinds,
    enabled: [bool; N_OPS],
    cands: Vec<Cand<'t>>,
    /// Context of the nodes from the root to the node being visited.
    frames: Vec<Frame<'t>>,
    /// Names of the enclosing defs/classes, as counted by [`Frame::depth`].
    names: Vec<&'t str>,
    /// The source has a suite without statements (which Python rejects).
    empty_block: bool,
}

impl<'t> Analyzer<'t> {
    fn on(&self, op: OpKind) -> bool {
        self.enabled[op as usize]
    }

    fn k(&self, n: Node) -> K {
        self.kinds.kind(n)
    }

    fn text(&self, n: Node) -> &'t str {
        self.src.get(n.byte_range()).unwrap_or("")
    }

    fn frame(&self) -> Frame<'t> {
        self.frames.last().copied().unwrap_or(Frame {
            kind: K::Other,
            stmt: None,
            clause: None,
            in_body: false,
            depth: 0,
        })
    }

    fn cand(&self, op: OpKind, edits: Vec<Edit>, desc: String, plan: Plan<'t>) -> Cand<'t> {
        let f = self.frame();
        Cand {
            op,
            edits,
            desc,
            line_stmt: f.stmt,
            scope: self.names[..f.depth.min(self.names.len())].join("."),
            in_body: f.in_body,
            plan,
        }
    }

    /// A candidate whose edits all lie inside `focus`, a descendant of the visited node.
    fn push(&mut self, op: OpKind, edits: Vec<Edit>, focus: Node<'t>, desc: String) {
        let f = self.frame();
        let plan = Plan::Within {
            node: focus,
            stmt: f.stmt,
            clause: f.clause,
        };
        let c = self.cand(op, edits, desc, plan);
        self.cands.push(c);
    }

    /// A candidate rewriting the sibling statements `first..=last` of a block of (or below)
    /// the visited node; `others` says whether that block keeps further statements (or is the
    /// module). Its lines are those of `line_stmt`, or else of the visited node's statement.
    #[allow(clippy::too_many_arguments)]
    fn push_run(
        &mut self,
        op: OpKind,
        edits: Vec<Edit>,
        first: Node<'t>,
        last: Node<'t>,
        others: bool,
        line_stmt: Option<Node<'t>>,
        desc: String,
    ) {
        let plan = Plan::Run {
            first,
            last,
            others,
        };
        let mut c = self.cand(op, edits, desc, plan);
        if line_stmt.is_some() {
            c.line_stmt = line_stmt;
        }
        self.cands.push(c);
    }

    /// Pushes the frame of `node`, reached from the current top frame through `field`.
    fn enter(&mut self, node: Node<'t>, field: Option<&str>) {
        let parent = self.frame();
        let kind = self.k(node);
        let is_stmt = self.kinds.is_statement(node);
        let mut depth = parent.depth;
        if matches!(kind, K::FunctionDefinition | K::ClassDefinition) {
            self.names.truncate(depth);
            self.names.push(
                node.child_by_field_name("name")
                    .map_or("", |n| self.text(n)),
            );
            depth += 1;
        }
        let clause = if is_stmt {
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
            stmt: if is_stmt { Some(node) } else { parent.stmt },
            clause,
            in_body: parent.in_body
                || (parent.kind == K::FunctionDefinition && field == Some("body")),
            depth,
        });
    }

    /// Pre-order walk that does not descend into strings, comments, decorators or annotations.
    fn walk(&mut self, root: Node<'t>) {
        let mut cursor = root.walk();
        self.enter(root, None);
        loop {
            let node = cursor.node();
            let k = self.frame().kind;
            let parent = self
                .frames
                .len()
                .checked_sub(2)
                .and_then(|i| self.frames.get(i))
                .map_or(K::Other, |f| f.kind);
            self.visit(node, k, parent);
            let skip = matches!(
                k,
                K::Str
                    | K::ConcatStr
                    | K::Comment
                    | K::Type
                    | K::TypeParameter
                    | K::TypeAlias
                    | K::Decorator
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

    fn visit(&mut self, node: Node<'t>, k: K, parent: K) {
        match k {
            K::Module | K::Block => self.visit_block(node),
            K::ClassDefinition => self.visit_class(node),
            K::IfStatement => self.visit_if(node),
            K::BinaryOperator => self.visit_binary(node),
            K::BooleanOperator => self.visit_boolean(node),
            K::ComparisonOperator => self.visit_comparison(node),
            K::AugmentedAssignment => self.visit_augmented(node),
            K::Integer => self.visit_integer(node, parent),
            K::Call => self.visit_call(node),
            K::Subscript => self.visit_subscript(node),
            K::DefaultParameter | K::TypedDefaultParameter => self.visit_default(node),
            K::ReturnStatement => self.visit_return(node),
            K::NotOperator => self.visit_not(node),
            K::RaiseStatement => self.visit_raise(node),
            K::ExceptClause => self.visit_except(node),
            _ => {}
        }
    }

    // ----- helpers -------------------------------------------------------------------------

    /// Named children that are not extras (comments, line continuations).
    fn named(&self, n: Node<'t>) -> Vec<Node<'t>> {
        let mut c = n.walk();
        n.named_children(&mut c)
            .filter(|ch| !ch.is_extra())
            .collect()
    }

    /// Statements of a block or module.
    fn stmts(&self, block: Node<'t>) -> Vec<Node<'t>> {
        let mut c = block.walk();
        block
            .named_children(&mut c)
            .filter(|ch| self.kinds.is_statement(*ch))
            .collect()
    }

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

    /// True iff statement `i` of `stmts` occupies whole lines of its own.
    fn standalone(&self, stmts: &[Node], i: usize) -> bool {
        let s = stmts[i];
        if self.indent_of(s.start_byte()).is_none() {
            return false;
        }
        if i > 0 && stmts[i - 1].end_position().row >= s.start_position().row {
            return false;
        }
        if let Some(next) = stmts.get(i + 1)
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
    fn delete_stmt(&self, stmts: &[Node], i: usize, is_module: bool) -> Option<Vec<Edit>> {
        let s = stmts[i];
        if stmts.len() == 1 {
            if is_module {
                return None;
            }
            return Some(vec![edit(s.start_byte(), s.end_byte(), "pass")]);
        }
        if !self.standalone(stmts, i) {
            return None;
        }
        Some(vec![edit(
            self.line_start(s.start_byte()),
            self.line_end_incl(s.end_byte()),
            "",
        )])
    }

    /// Edits swapping the texts of two statements that each occupy whole lines.
    fn swap_stmts(&self, stmts: &[Node], i: usize) -> Option<Vec<Edit>> {
        let (a, b) = (stmts[i], stmts[i + 1]);
        if !self.standalone(stmts, i) || !self.standalone(stmts, i + 1) {
            return None;
        }
        if self.indent_of(a.start_byte()) != self.indent_of(b.start_byte()) {
            return None;
        }
        let (ta, tb) = (self.text(a), self.text(b));
        if ta == tb {
            return None;
        }
        Some(vec![
            edit(a.start_byte(), a.end_byte(), tb),
            edit(b.start_byte(), b.end_byte(), ta),
        ])
    }

    /// Byte ranges of string literals spanning several lines inside `n`.
    fn multiline_strings(&self, n: Node<'t>) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        let mut cursor = n.walk();
        loop {
            let node = cursor.node();
            let k = self.k(node);
            let is_str = matches!(k, K::Str);
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

    /// The text of `body` re-indented from its own indentation to `stmt`'s, to replace `stmt`.
    fn unwrap_body(&self, stmt: Node<'t>, body: Node<'t>) -> Option<Edit> {
        let stmt_indent = self.indent_of(stmt.start_byte())?;
        if body.start_position().row == stmt.start_position().row {
            // `with x: f()` -- the body is on the header line.
            let t = self.text(body).trim_end();
            return (!t.is_empty()).then(|| edit(stmt.start_byte(), stmt.end_byte(), t));
        }
        let first = *self.stmts(body).first()?;
        let body_indent = self.indent_of(first.start_byte())?;
        if self.indent_of(body.start_byte())? != body_indent
            || body_indent.len() <= stmt_indent.len()
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
                out.push_str(stmt_indent);
                out.push_str(rest);
            } else {
                // A continuation line inside brackets or a dedented comment: leave it alone.
                out.push_str(line);
            }
            at += line.len();
        }
        let replacement = out.strip_prefix(stmt_indent)?.to_string();
        Some(edit(stmt.start_byte(), stmt.end_byte(), replacement))
    }

    /// Edits moving `expr` by `delta` (+1 or -1), simplifying `x + 1`/`x - 1` and literals.
    fn shift_by_one(&self, expr: Node<'t>, delta: i64, allow_negative: bool) -> Option<Edit> {
        let k = self.k(expr);
        if k == K::Integer {
            let n = int_value(self.text(expr))?;
            let m = n + delta;
            if m < 0 && !allow_negative {
                return None;
            }
            return Some(edit(expr.start_byte(), expr.end_byte(), m.to_string()));
        }
        if k == K::UnaryOperator {
            let op = expr.child_by_field_name("operator")?;
            let arg = expr.child_by_field_name("argument")?;
            if self.text(op) == "-" && self.k(arg) == K::Integer {
                // `-n` moved by delta is `-(n - delta)`.
                let n = int_value(self.text(arg))?;
                let m = n - delta;
                if m < 1 {
                    return None;
                }
                return Some(edit(arg.start_byte(), arg.end_byte(), m.to_string()));
            }
        }
        if k == K::BinaryOperator {
            let op = expr.child_by_field_name("operator")?;
            let left = expr.child_by_field_name("left")?;
            let right = expr.child_by_field_name("right")?;
            let sign = match self.text(op) {
                "+" => 1,
                "-" => -1,
                _ => 0,
            };
            if sign != 0
                && self.k(right) == K::Integer
                && let Some(n) = int_value(self.text(right))
            {
                let m = sign * n + delta;
                return Some(if m == 0 {
                    edit(left.end_byte(), expr.end_byte(), "")
                } else if m.signum() == sign {
                    edit(right.start_byte(), right.end_byte(), m.abs().to_string())
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
        match self.k(expr) {
            K::BinaryOperator => expr
                .child_by_field_name("operator")
                .is_none_or(|op| binary_prec(self.text(op)) < binary_prec("+")),
            K::BooleanOperator
            | K::NotOperator
            | K::ComparisonOperator
            | K::ConditionalExpression
            | K::Lambda
            | K::NamedExpression
            | K::AsPattern => true,
            _ => false,
        }
    }

    fn is_string_literal(&self, n: Node) -> bool {
        matches!(self.k(n), K::Str | K::ConcatStr)
    }

    /// True iff `s` is a bare string expression statement (a docstring or similar).
    fn is_string_stmt(&self, s: Node<'t>) -> bool {
        if self.k(s) != K::ExpressionStatement {
            return false;
        }
        let kids = self.named(s);
        kids.len() == 1 && self.is_string_literal(kids[0])
    }

    /// A plain positional argument (no keyword, no `*`/`**` splat).
    fn is_positional(&self, n: Node) -> bool {
        !matches!(
            self.k(n),
            K::KeywordArgument | K::ListSplat | K::DictionarySplat
        ) && !self.text(n).starts_with('*')
    }

    fn is_method(&self, s: Node) -> bool {
        self.method_def(s).is_some()
    }

    /// The function definition of a (possibly decorated) method statement.
    fn method_def(&self, s: Node<'t>) -> Option<Node<'t>> {
        match self.k(s) {
            K::FunctionDefinition => Some(s),
            K::DecoratedDefinition => s
                .child_by_field_name("definition")
                .filter(|d| self.k(*d) == K::FunctionDefinition),
            _ => None,
        }
    }

    fn def_name(&self, def: Node<'t>) -> &'t str {
        def.child_by_field_name("name").map_or("", |n| self.text(n))
    }

    // ----- statement-level operators -----------------------------------------------------

    fn visit_block(&mut self, block: Node<'t>) {
        let stmts = self.stmts(block);
        let is_module = self.k(block) == K::Module;
        if !is_module && stmts.is_empty() && self.named(block).is_empty() {
            self.empty_block = true;
        }
        for (i, &s) in stmts.iter().enumerate() {
            let (op, desc) = match self.k(s) {
                K::ExpressionStatement if self.on(OpKind::RemoveAssign) => {
                    let kids = self.named(s);
                    let is_assign = kids.len() == 1
                        && match self.k(kids[0]) {
                            K::Assignment => kids[0].child_by_field_name("right").is_some(),
                            K::AugmentedAssignment => true,
                            _ => false,
                        };
                    if !is_assign {
                        continue;
                    }
                    (
                        OpKind::RemoveAssign,
                        format!("remove `{}`", snippet(self.text(s))),
                    )
                }
                K::IfStatement if self.on(OpKind::RemoveCond) => (
                    OpKind::RemoveCond,
                    format!("remove `{}`", snippet(self.text(s))),
                ),
                K::ForStatement | K::WhileStatement if self.on(OpKind::RemoveLoop) => (
                    OpKind::RemoveLoop,
                    format!("remove `{}`", snippet(self.text(s))),
                ),
                K::WithStatement | K::TryStatement if self.on(OpKind::RemoveWrapper) => {
                    if let Some(body) = s.child_by_field_name("body")
                        && let Some(e) = self.unwrap_body(s, body)
                    {
                        let desc = format!("unwrap `{}`", snippet(self.text(s)));
                        self.push_run(OpKind::RemoveWrapper, vec![e], s, s, true, Some(s), desc);
                    }
                    continue;
                }
                _ => continue,
            };
            if let Some(edits) = self.delete_stmt(&stmts, i, is_module) {
                let others = stmts.len() > 1 || is_module;
                self.push_run(op, edits, s, s, others, Some(s), desc);
            }
        }
        if self.on(OpKind::CtrlShuffle) && !is_module {
            for i in 0..stmts.len().saturating_sub(1) {
                let (a, b) = (stmts[i], stmts[i + 1]);
                let excluded = |s: Node<'t>| {
                    self.is_string_stmt(s)
                        || matches!(
                            self.k(s),
                            K::Global | K::Nonlocal | K::FutureImport | K::Pass
                        )
                };
                if excluded(a) || excluded(b) {
                    continue;
                }
                if let Some(edits) = self.swap_stmts(&stmts, i) {
                    let desc = format!(
                        "swap `{}` and `{}`",
                        snippet(self.text(a)),
                        snippet(self.text(b))
                    );
                    self.push_run(OpKind::CtrlShuffle, edits, a, b, true, None, desc);
                }
            }
        }
    }

    fn visit_class(&mut self, class: Node<'t>) {
        let class_name = self.def_name(class);
        if self.on(OpKind::ClassRmBase)
            && let Some(supers) = class.child_by_field_name("superclasses")
        {
            let args = self.named(supers);
            for (i, &a) in args.iter().enumerate() {
                if matches!(
                    self.k(a),
                    K::KeywordArgument | K::ListSplat | K::DictionarySplat
                ) || self.text(a) == "object"
                {
                    continue;
                }
                let e = if args.len() == 1 {
                    edit(supers.start_byte(), supers.end_byte(), "")
                } else if let Some(next) = args.get(i + 1) {
                    edit(a.start_byte(), next.start_byte(), "")
                } else {
                    edit(args[i - 1].end_byte(), a.end_byte(), "")
                };
                let desc = format!(
                    "remove base `{}` of class `{class_name}`",
                    snippet(self.text(a))
                );
                self.push(OpKind::ClassRmBase, vec![e], a, desc);
            }
        }
        let Some(body) = class.child_by_field_name("body") else {
            return;
        };
        let stmts = self.stmts(body);
        if self.on(OpKind::ClassRmFuncs) {
            for (i, &s) in stmts.iter().enumerate() {
                if let Some(def) = self.method_def(s)
                    && let Some(edits) = self.delete_stmt(&stmts, i, false)
                {
                    let desc = format!("remove method `{class_name}.{}`", self.def_name(def));
                    let others = stmts.len() > 1;
                    self.push_run(OpKind::ClassRmFuncs, edits, s, s, others, Some(s), desc);
                }
            }
        }
        if self.on(OpKind::ClassShuffleFuncs) {
            for i in 0..stmts.len().saturating_sub(1) {
                let (a, b) = (stmts[i], stmts[i + 1]);
                if !self.is_method(a) || !self.is_method(b) {
                    continue;
                }
                if let Some(edits) = self.swap_stmts(&stmts, i) {
                    let name = |s: Node<'t>| self.method_def(s).map_or("", |d| self.def_name(d));
                    let desc = format!("swap methods `{}` and `{}`", name(a), name(b));
                    self.push_run(OpKind::ClassShuffleFuncs, edits, a, b, true, None, desc);
                }
            }
        }
    }

    fn visit_if(&mut self, node: Node<'t>) {
        if !self.on(OpKind::CtrlInvertIf) {
            return;
        }
        let mut c = node.walk();
        let alts: Vec<Node> = node.children_by_field_name("alternative", &mut c).collect();
        let ([alt], Some(cons)) = (alts.as_slice(), node.child_by_field_name("consequence")) else {
            return;
        };
        if self.k(*alt) != K::ElseClause {
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
            let first = |b: Node<'t>| self.stmts(b).first().map(|s| s.start_byte());
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
            OpKind::CtrlInvertIf,
            vec![
                edit(cons.start_byte(), cons.end_byte(), to),
                edit(other.start_byte(), other.end_byte(), tc),
            ],
            node,
            node,
            true,
            None,
            format!("swap the if/else bodies of `if {cond}`"),
        );
    }

    // ----- expression-level operators ----------------------------------------------------

    fn visit_binary(&mut self, node: Node<'t>) {
        let (Some(op), Some(left), Some(right)) = (
            node.child_by_field_name("operator"),
            node.child_by_field_name("left"),
            node.child_by_field_name("right"),
        ) else {
            return;
        };
        let ot = self.text(op);
        let strings = self.is_string_literal(left) || self.is_string_literal(right);
        if self.on(OpKind::OpChange) && !strings {
            for alt in operator_family(ot) {
                self.push(
                    OpKind::OpChange,
                    vec![edit(op.start_byte(), op.end_byte(), *alt)],
                    node,
                    format!("`{ot}` -> `{alt}`"),
                );
            }
        }
        if self.on(OpKind::OpSwap)
            && matches!(ot, "+" | "-" | "/" | "//" | "%" | "**" | "<<" | ">>" | "@")
            && !(ot == "%" && self.is_string_literal(left))
        {
            let prec = binary_prec(ot);
            let same_prec = |n: Node| {
                self.k(n) == K::BinaryOperator
                    && n.child_by_field_name("operator")
                        .is_some_and(|o| binary_prec(self.text(o)) == prec)
            };
            let unary = self.k(left) == K::UnaryOperator || self.k(right) == K::UnaryOperator;
            let (tl, tr) = (self.text(left), self.text(right));
            let regroups = same_prec(left) || same_prec(right) || (ot == "**" && unary);
            if !regroups && tl != tr {
                self.push(
                    OpKind::OpSwap,
                    vec![
                        edit(left.start_byte(), left.end_byte(), tr),
                        edit(right.start_byte(), right.end_byte(), tl),
                    ],
                    node,
                    format!("swap the operands of `{ot}`"),
                );
            }
        }
        self.break_chain(node, left, K::BinaryOperator);
    }

    /// `a OP b OP c` -> `a OP c`: drops the middle operand when `left` is itself a chain of
    /// the same kind.
    fn break_chain(&mut self, node: Node<'t>, left: Node<'t>, chain: K) {
        if !self.on(OpKind::OpBreakChains) || self.k(left) != chain {
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
            OpKind::OpBreakChains,
            vec![edit(inner_left.end_byte(), left.end_byte(), "")],
            node,
            format!("drop `{dropped}` from a chain"),
        );
    }

    fn visit_boolean(&mut self, node: Node<'t>) {
        let (Some(op), Some(left)) = (
            node.child_by_field_name("operator"),
            node.child_by_field_name("left"),
        ) else {
            return;
        };
        let ot = self.text(op);
        if self.on(OpKind::FlipOperators) {
            let alt = if ot == "and" { "or" } else { "and" };
            self.push(
                OpKind::FlipOperators,
                vec![edit(op.start_byte(), op.end_byte(), alt)],
                node,
                format!("`{ot}` -> `{alt}`"),
            );
        }
        self.break_chain(node, left, K::BooleanOperator);
    }

    fn visit_comparison(&mut self, node: Node<'t>) {
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
                (OpKind::FlipOperators, flip),
                (OpKind::BoundaryCondition, boundary),
            ] {
                if let Some(to) = to
                    && self.on(op_kind)
                {
                    self.push(
                        op_kind,
                        vec![edit(op.start_byte(), op.end_byte(), to)],
                        node,
                        format!("`{from}` -> `{to}`"),
                    );
                }
            }
        }
        if self.on(OpKind::OpSwap)
            && let [op] = ops.as_slice()
            && !matches!(op.kind(), "==" | "!=" | "is" | "is not" | "<>")
        {
            let operands = self.named(node);
            if let [a, b] = operands.as_slice() {
                let (ta, tb) = (self.text(*a), self.text(*b));
                if ta != tb {
                    self.push(
                        OpKind::OpSwap,
                        vec![
                            edit(a.start_byte(), a.end_byte(), tb),
                            edit(b.start_byte(), b.end_byte(), ta),
                        ],
                        node,
                        format!("swap the operands of `{}`", op.kind()),
                    );
                }
            }
        }
    }

    fn visit_augmented(&mut self, node: Node<'t>) {
        if !self.on(OpKind::OpChange) {
            return;
        }
        let (Some(op), Some(right)) = (
            node.child_by_field_name("operator"),
            node.child_by_field_name("right"),
        ) else {
            return;
        };
        if self.is_string_literal(right) {
            return;
        }
        let ot = self.text(op);
        // `+=` changes like `+`, keeping the assignment.
        let base = ot.strip_suffix('=').unwrap_or("");
        for alt in operator_family(base) {
            let alt = format!("{alt}=");
            self.push(
                OpKind::OpChange,
                vec![edit(op.start_byte(), op.end_byte(), alt.as_str())],
                node,
                format!("`{ot}` -> `{alt}`"),
            );
        }
    }

    fn visit_integer(&mut self, node: Node<'t>, parent: K) {
        if !self.on(OpKind::OpChangeConst) {
            return;
        }
        let t = self.text(node);
        let Some(n) = int_value(t) else {
            return;
        };
        for m in [n + 1, n - 1] {
            if m < 0 && parent == K::UnaryOperator {
                continue;
            }
            self.push(
                OpKind::OpChangeConst,
                vec![edit(node.start_byte(), node.end_byte(), m.to_string())],
                node,
                format!("`{t}` -> `{m}`"),
            );
        }
    }

    fn visit_call(&mut self, node: Node<'t>) {
        let (Some(func), Some(args)) = (
            node.child_by_field_name("function"),
            node.child_by_field_name("arguments"),
        ) else {
            return;
        };
        if self.k(args) != K::ArgumentList {
            return;
        }
        let args_list = self.named(args);
        if self.on(OpKind::OffByOneRange)
            && self.text(func) == "range"
            && (1..=3).contains(&args_list.len())
            && args_list.iter().all(|a| self.is_positional(*a))
        {
            let stop = if args_list.len() == 1 {
                args_list[0]
            } else {
                args_list[1]
            };
            for delta in [1, -1] {
                if let Some(e) = self.shift_by_one(stop, delta, false) {
                    let desc = format!(
                        "range stop `{}` {} 1",
                        snippet(self.text(stop)),
                        if delta > 0 { "+" } else { "-" }
                    );
                    self.push(OpKind::OffByOneRange, vec![e], node, desc);
                }
            }
        }
        if self.on(OpKind::SwapCallArgs) {
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
                    OpKind::SwapCallArgs,
                    vec![
                        edit(a.start_byte(), a.end_byte(), tb),
                        edit(b.start_byte(), b.end_byte(), ta),
                    ],
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

    fn visit_subscript(&mut self, node: Node<'t>) {
        if !self.on(OpKind::OffByOneSlice) {
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
            match self.k(sub) {
                K::Slice => {
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
                        let which = if colons == 0 { "start" } else { "stop" };
                        for delta in [1, -1] {
                            if let Some(e) = self.shift_by_one(kid, delta, false) {
                                let desc = format!(
                                    "slice {which} `{}` {} 1",
                                    snippet(self.text(kid)),
                                    if delta > 0 { "+" } else { "-" }
                                );
                                self.push(OpKind::OffByOneSlice, vec![e], node, desc);
                            }
                        }
                    }
                }
                K::Integer | K::UnaryOperator => {
                    let literal = self.k(sub) == K::Integer
                        || (sub
                            .child_by_field_name("operator")
                            .is_some_and(|o| self.text(o) == "-")
                            && sub
                                .child_by_field_name("argument")
                                .is_some_and(|a| self.k(a) == K::Integer));
                    if !literal {
                        continue;
                    }
                    for delta in [1, -1] {
                        if let Some(e) = self.shift_by_one(sub, delta, false) {
                            let desc = format!(
                                "index `{}` {} 1",
                                self.text(sub),
                                if delta > 0 { "+" } else { "-" }
                            );
                            self.push(OpKind::OffByOneSlice, vec![e], node, desc);
                        }
                    }
                }
                _ => {}
            }
        }
    }

    fn visit_default(&mut self, node: Node<'t>) {
        if !self.on(OpKind::WrongDefaultArg) {
            return;
        }
        let (Some(name), Some(value)) = (
            node.child_by_field_name("name"),
            node.child_by_field_name("value"),
        ) else {
            return;
        };
        let name = self.text(name);
        let vt = self.text(value);
        let mut replacements: Vec<String> = Vec::new();
        match self.k(value) {
            K::True => replacements.push("False".into()),
            K::False => replacements.push("True".into()),
            K::Integer => {
                if let Some(n) = int_value(vt) {
                    replacements.push((n + 1).to_string());
                    replacements.push((n - 1).to_string());
                }
            }
            K::UnaryOperator => {
                if let (Some(op), Some(arg)) = (
                    value.child_by_field_name("operator"),
                    value.child_by_field_name("argument"),
                ) && self.text(op) == "-"
                    && self.k(arg) == K::Integer
                    && let Some(n) = int_value(self.text(arg))
                {
                    replacements.push((1 - n).to_string());
                    replacements.push((-n - 1).to_string());
                }
            }
            K::Str => {
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
            let desc = format!("default of `{name}`: `{}` -> `{r}`", snippet(vt));
            self.push(
                OpKind::WrongDefaultArg,
                vec![edit(value.start_byte(), value.end_byte(), r)],
                value,
                desc,
            );
        }
    }

    fn visit_return(&mut self, node: Node<'t>) {
        if !self.on(OpKind::WrongReturnValue) {
            return;
        }
        let Some(value) = self.named(node).first().copied() else {
            return;
        };
        let vt = self.text(value);
        let e = match self.k(value) {
            K::NoneLit => return,
            K::True => edit(value.start_byte(), value.end_byte(), "False"),
            K::False => edit(value.start_byte(), value.end_byte(), "True"),
            K::NotOperator => {
                let Some(arg) = value.child_by_field_name("argument") else {
                    return;
                };
                edit(value.start_byte(), arg.start_byte(), "")
            }
            _ => edit(value.start_byte(), value.end_byte(), "None"),
        };
        let new_value = format!(
            "{}{}",
            &e.replacement,
            self.src.get(e.end..value.end_byte()).unwrap_or("")
        );
        let desc = format!(
            "`return {}` -> `return {}`",
            snippet(vt),
            snippet(&new_value)
        );
        self.push(OpKind::WrongReturnValue, vec![e], node, desc);
    }

    fn visit_not(&mut self, node: Node<'t>) {
        if !self.on(OpKind::DropNot) {
            return;
        }
        let Some(arg) = node.child_by_field_name("argument") else {
            return;
        };
        let desc = format!(
            "`{}` -> `{}`",
            snippet(self.text(node)),
            snippet(self.text(arg))
        );
        self.push(
            OpKind::DropNot,
            vec![edit(node.start_byte(), arg.start_byte(), "")],
            node,
            desc,
        );
    }

    fn push_exception(&mut self, ident: Node<'t>) {
        if self.k(ident) != K::Identifier {
            return;
        }
        let name = self.text(ident);
        if let Some(to) = wrong_exception(name) {
            self.push(
                OpKind::WrongExceptionType,
                vec![edit(ident.start_byte(), ident.end_byte(), to)],
                ident,
                format!("`{name}` -> `{to}`"),
            );
        }
    }

    fn visit_raise(&mut self, node: Node<'t>) {
        if !self.on(OpKind::WrongExceptionType) {
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
        match self.k(exc) {
            K::Identifier => self.push_exception(exc),
            K::Call => {
                if let Some(f) = exc.child_by_field_name("function") {
                    self.push_exception(f);
                }
            }
            _ => {}
        }
    }

    fn visit_except(&mut self, node: Node<'t>) {
        if !self.on(OpKind::WrongExceptionType) {
            return;
        }
        let Some(mut value) = node.child_by_field_name("value") else {
            return;
        };
        if self.k(value) == K::AsPattern {
            let Some(first) = self.named(value).first().copied() else {
                return;
            };
            value = first;
        }
        match self.k(value) {
            K::Identifier => self.push_exception(value),
            K::Tuple | K::ParenthesizedExpression => {
                for item in self.named(value) {
                    self.push_exception(item);
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mutants(src: &str, op: &str) -> Vec<(Mutation, String)> {
        find_mutations(src, &[op])
            .expect("find_mutations")
            .into_iter()
            .map(|m| {
                let out = apply(src, &m.edits).expect("apply");
                (m, out)
            })
            .collect()
    }

    fn outputs(src: &str, op: &str) -> Vec<String> {
        mutants(src, op).into_iter().map(|(_, s)| s).collect()
    }

    #[track_caller]
    fn assert_produces(src: &str, op: &str, expected: &str) {
        let outs = outputs(src, op);
        assert!(
            outs.iter().any(|o| o == expected),
            "{op} did not produce\n{expected}\n--- got {} mutants:\n{}",
            outs.len(),
            outs.join("\n-----\n")
        );
    }

    #[track_caller]
    fn assert_none(src: &str, op: &str) {
        let outs = outputs(src, op);
        assert!(
            outs.is_empty(),
            "{op} should find no site, got:\n{}",
            outs.join("\n-----\n")
        );
    }

    #[test]
    fn operator_table_is_consistent() {
        assert_eq!(operators().len(), N_OPS);
        for (i, op) in ALL_OPS.iter().enumerate() {
            assert_eq!(*op as usize, i);
        }
        let names: HashSet<_> = operators().iter().map(|o| o.name).collect();
        assert_eq!(names.len(), N_OPS);
        for o in operators() {
            assert!(matches!(o.family, "swe-smith" | "extra"), "{}", o.name);
            assert!(!o.description.is_empty());
        }
    }

    #[test]
    fn errors_for_unknown_operators_and_unparseable_sources() {
        let err = find_mutations("x = 1\n", &["no_such_op"]).expect_err("unknown op");
        assert!(matches!(err, MutateError::UnknownOperator(ref n) if n == "no_such_op"));
        assert!(err.to_string().contains("op_change_const"));
        assert!(matches!(
            find_mutations("def f(:\n", &[]),
            Err(MutateError::Parse)
        ));
        // tree-sitter accepts an empty suite; Python does not.
        assert!(matches!(
            find_mutations("if x:\npass\n", &[]),
            Err(MutateError::Parse)
        ));
        assert!(parses("x = 1\n"));
        assert!(!parses("x = (1\n"));
        assert!(!parses("if x:\npass\n"));
    }

    #[test]
    fn apply_validates_edits() {
        let src = "héllo";
        assert_eq!(
            apply(src, &[edit(0, 1, "j"), edit(3, 5, "LO")]).expect("apply"),
            "jéLOo"
        );
        assert_eq!(apply(src, &[edit(6, 6, "!")]).expect("insert"), "héllo!");
        assert!(apply(src, &[edit(0, 7, "")]).is_err());
        assert!(apply(src, &[edit(2, 3, "")]).is_err()); // inside `é`
        assert!(apply(src, &[edit(0, 3, ""), edit(2, 4, "")]).is_err());
        assert!(apply(src, &[edit(3, 4, ""), edit(0, 1, "")]).is_err());
        assert!(apply(src, &[edit(3, 2, "")]).is_err());
    }

    #[test]
    fn class_rm_base_drops_a_base() {
        let src = "class A(B, C, metaclass=M):\n    pass\n\nclass D(E):\n    pass\n\nclass F(object):\n    pass\n";
        assert_produces(
            src,
            "class_rm_base",
            "class A(C, metaclass=M):\n    pass\n\nclass D(E):\n    pass\n\nclass F(object):\n    pass\n",
        );
        assert_produces(
            src,
            "class_rm_base",
            "class A(B, metaclass=M):\n    pass\n\nclass D(E):\n    pass\n\nclass F(object):\n    pass\n",
        );
        assert_produces(
            src,
            "class_rm_base",
            "class A(B, C, metaclass=M):\n    pass\n\nclass D:\n    pass\n\nclass F(object):\n    pass\n",
        );
        assert_eq!(outputs(src, "class_rm_base").len(), 3);
        assert_none(
            "class A:\n    pass\n\nclass B(metaclass=M):\n    pass\n",
            "class_rm_base",
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
        let outs = outputs(src, "ctrl_shuffle");
        assert_eq!(
            outs,
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
    fn op_change_replaces_within_families() {
        let src = "def f(a, b):\n    a += b\n    return a * b - 1\n";
        assert_produces(
            src,
            "op_change",
            "def f(a, b):\n    a -= b\n    return a * b - 1\n",
        );
        assert_produces(
            src,
            "op_change",
            "def f(a, b):\n    a += b\n    return a // b - 1\n",
        );
        assert_produces(
            src,
            "op_change",
            "def f(a, b):\n    a += b\n    return a * b + 1\n",
        );
        assert_eq!(outputs(src, "op_change").len(), 5);
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
        assert_produces(
            src,
            "flip_operators",
            "ok = a != b and c not in d\nz = x is not None\n",
        );
        assert_produces(
            src,
            "flip_operators",
            "ok = a == b or c not in d\nz = x is not None\n",
        );
        assert_produces(
            src,
            "flip_operators",
            "ok = a == b and c in d\nz = x is not None\n",
        );
        assert_produces(
            src,
            "flip_operators",
            "ok = a == b and c not in d\nz = x is None\n",
        );
        assert_produces("t = a <= b\n", "flip_operators", "t = a >= b\n");
        assert_none("s = 'a == b'  # x < y\n", "flip_operators");
    }

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
    fn swap_call_args_swaps_positionals() {
        assert_produces("f(a, b, key=c)\n", "swap_call_args", "f(b, a, key=c)\n");
        assert_none("f(a, a)\ng(a, *rest)\nh(x=1, y=2)\n", "swap_call_args");
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

    #[test]
    fn drop_not_drops_not() {
        assert_produces("if not x:\n    pass\n", "drop_not", "if x:\n    pass\n");
        assert_produces("y = a and not(b)\n", "drop_not", "y = a and (b)\n");
        assert_none("y = a not in b\nz = a is not b\n", "drop_not");
    }

    #[test]
    fn wrong_exception_type_replaces_builtins() {
        let src = "try:\n    raise ValueError('x') from e\nexcept (KeyError, MyError) as err:\n    raise\nexcept LookupError:\n    raise MyError\n";
        let outs = outputs(src, "wrong_exception_type");
        assert_eq!(outs.len(), 3);
        assert_produces(
            src,
            "wrong_exception_type",
            "try:\n    raise TypeError('x') from e\nexcept (KeyError, MyError) as err:\n    raise\nexcept LookupError:\n    raise MyError\n",
        );
        assert_produces(
            src,
            "wrong_exception_type",
            "try:\n    raise ValueError('x') from e\nexcept (IndexError, MyError) as err:\n    raise\nexcept LookupError:\n    raise MyError\n",
        );
        assert_none("raise Custom()\n", "wrong_exception_type");
    }

    #[test]
    fn boundary_condition_moves_boundaries() {
        assert_produces("ok = i < n\n", "boundary_condition", "ok = i <= n\n");
        assert_produces("ok = i >= n\n", "boundary_condition", "ok = i > n\n");
        assert_none("ok = i == n\n", "boundary_condition");
    }

    #[track_caller]
    fn check_mutation(src: &str, m: &Mutation) {
        assert!(!m.edits.is_empty());
        for w in m.edits.windows(2) {
            assert!(w[0].end <= w[1].start, "edits unsorted/overlapping: {m:?}");
        }
        assert!(m.start_line >= 1 && m.start_line <= m.end_line, "{m:?}");
        let out = apply(src, &m.edits).expect("apply");
        assert_ne!(out, src, "{m:?}");
        assert!(parses(&out), "mutant does not parse: {m:?}\n{out}");
    }

    fn python_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .expect("read_dir")
            .map(|e| e.expect("dir entry").path())
            .collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                python_files(&p, out);
            } else if p.extension().is_some_and(|e| e == "py") {
                out.push(p);
            }
        }
    }

    #[test]
    fn every_operator_finds_sites_in_the_sample_repos() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/repos");
        let mut files = Vec::new();
        python_files(&root, &mut files);
        assert!(files.len() > 10, "sample repos not found under {root:?}");
        let mut counts: std::collections::BTreeMap<String, usize> = Default::default();
        for f in &files {
            let src = std::fs::read_to_string(f).expect("read");
            let muts = find_mutations(&src, &[]).expect("find_mutations");
            for w in muts.windows(2) {
                let ka = (w[0].edits[0].start, &w[0].operator, &w[0].description);
                let kb = (w[1].edits[0].start, &w[1].operator, &w[1].description);
                assert!(ka <= kb, "unsorted output in {f:?}");
            }
            for m in &muts {
                check_mutation(&src, m);
                *counts.entry(m.operator.clone()).or_default() += 1;
            }
            // Deterministic.
            assert_eq!(muts, find_mutations(&src, &[]).expect("again"));
        }
        for op in operators() {
            assert!(
                counts.get(op.name).copied().unwrap_or(0) >= 1,
                "operator {} found no site in the sample repos: {counts:?}",
                op.name
            );
        }
    }

    const TRICKY: &str = r#"# -*- coding: utf-8 -*-
import functools

GRÜßE = "héllo wörld ✓"  # multi-byte


def décorer(n=2, *, flag=False):
    def wrap(fn):
        @functools.wraps(fn)
        async def inner(*args, **kwargs):
            async with lock:
                résultat = await fn(*args, **kwargs)
            if (m := len(résultat)) > n and not flag:
                return résultat[:m - 1]
            return [x * 2 for x in résultat if x % 2 == 0]
        return inner
    return wrap


class Forme(Base, metaclass=Meta):
    """Docstring with code: a + b < c."""

    côtés: int = 4

    @décorer(n=3 + 1)
    def aire(self, échelle: float = 1.0, précision: int = 2) -> float:
        total = self.côtés * échelle \
            + 1
        f = f"{total + 1:>{self.côtés}} ✓ {'a' if total < 2 else 'b'}"
        key = lambda v, w=0: (v[0], -v[1] + w)
        match self.côtés:
            case 3:
                total -= 1
            case [a, b, *rest] if a < b:
                total += a
            case _:
                pass
        for i in range(len(f) - 1):
            total = total + i + 1  # trailing comment
            # comment at block end
        return total

	# (tab-indented code below)
def tabbed(x):
	if x < 0:
		return -x
	else:
		return x
	# comment at the end of a tab block


def semis(a, b): a += 1; return a - b
"#;

    #[test]
    fn tricky_code_is_handled() {
        let src = TRICKY.replace("\t# (tab-indented code below)\n", "");
        assert!(parses(&src), "fixture must parse");
        let muts = find_mutations(&src, &[]).expect("find_mutations");
        let mut ops: HashSet<&str> = HashSet::new();
        for m in &muts {
            check_mutation(&src, m);
            ops.insert(m.operator.as_str());
            // Nothing inside strings, f-strings, decorators or annotations.
            for e in &m.edits {
                let line_no = src[..e.start].matches('\n').count();
                let line = src.lines().nth(line_no).unwrap_or("");
                if !matches!(
                    m.operator.as_str(),
                    "remove_wrapper"
                        | "ctrl_invert_if"
                        | "ctrl_shuffle"
                        | "class_rm_funcs"
                        | "class_shuffle_funcs"
                        | "remove_cond"
                        | "remove_loop"
                        | "remove_assign"
                ) {
                    assert!(!line.trim_start().starts_with('@'), "{m:?} in decorator");
                    assert!(
                        !line.trim_start().starts_with("f = f\""),
                        "{m:?} in f-string"
                    );
                    assert!(!line.contains("Docstring"), "{m:?} in docstring");
                    assert!(!line.contains("GRÜßE"), "{m:?} in string");
                }
            }
        }
        for op in [
            "class_rm_base",
            "class_rm_funcs",
            "ctrl_invert_if",
            "ctrl_shuffle",
            "remove_assign",
            "remove_cond",
            "remove_loop",
            "remove_wrapper",
            "op_break_chains",
            "op_change_const",
            "op_change",
            "flip_operators",
            "off_by_one_range",
            "off_by_one_slice",
            "wrong_default_arg",
            "wrong_return_value",
            "drop_not",
            "boundary_condition",
        ] {
            assert!(ops.contains(op), "no {op} site in tricky code");
        }
        // Tab-indented if/else can be inverted.
        assert!(muts.iter().any(|m| {
            m.operator == "ctrl_invert_if"
                && apply(&src, &m.edits)
                    .expect("apply")
                    .contains("\tif x < 0:\n\t\treturn x\n\telse:\n\t\treturn -x\n")
        }));
        // The async with is unwrapped with the right indentation.
        assert!(muts.iter().any(|m| m.operator == "remove_wrapper"
            && apply(&src, &m.edits)
                .expect("apply")
                .contains("        async def inner(*args, **kwargs):\n            résultat = await fn(*args, **kwargs)\n")));
        // Scope names of nested functions and methods; decorator/default/body flags.
        let inner = muts
            .iter()
            .find(|m| m.operator == "remove_wrapper")
            .expect("remove_wrapper");
        assert_eq!(inner.scope, "décorer.wrap.inner");
        assert!(inner.in_function_body);
        let default = muts
            .iter()
            .find(|m| m.operator == "wrong_default_arg" && m.description.contains("précision"))
            .expect("default of précision");
        assert_eq!(default.scope, "Forme.aire");
        assert!(!default.in_function_body);
        let top_default = muts
            .iter()
            .find(|m| m.operator == "wrong_default_arg" && m.description.contains("`n`"))
            .expect("default of n");
        assert_eq!(top_default.scope, "décorer");
        assert!(!top_default.in_function_body);
        let nested_default = muts
            .iter()
            .find(|m| m.operator == "wrong_default_arg" && m.description.contains("`w`"))
            .expect("lambda default");
        assert!(nested_default.in_function_body);
        // Semicolon-separated statements are never deleted line-wise.
        assert!(
            !muts
                .iter()
                .any(|m| m.operator == "remove_assign" && m.description.contains("a += 1"))
        );
    }

    #[test]
    fn validation_handles_match_headers_patterns_and_continuations() {
        let src = "def f(x):\n    match 0:\n        case -0:\n            return g(1,\\\n                     2)\n\ndef h():\n    try:\n        a()\n    except KeyError:\n        pass\n    b()\n";
        let muts = find_mutations(src, &[]).expect("find_mutations");
        for m in &muts {
            check_mutation(src, m);
        }
        let outs: Vec<String> = muts
            .iter()
            .map(|m| apply(src, &m.edits).expect("apply"))
            .collect();
        // The match subject is mutated (its excerpt needs a `case`), `case -0` never becomes
        // `case --1`, and arguments split by a backslash continuation are swapped.
        assert!(outs.iter().any(|o| o.contains("    match 1:\n")));
        assert!(!outs.iter().any(|o| o.contains("--1")));
        assert!(
            outs.iter()
                .any(|o| o.contains("g(2,\\\n                     1)"))
        );
        // A `try` statement is swapped with its neighbour (checked on its skeleton).
        assert!(
            outs.iter()
                .any(|o| o.contains("    b()\n    try:\n        a()\n"))
        );
    }

    #[test]
    fn combine_merges_non_overlapping_mutations() {
        let src = "def f(a, b):\n    if a < b:\n        return a + b\n    return a - b\n";
        let muts = find_mutations(src, &[]).expect("find_mutations");
        let lt = muts
            .iter()
            .find(|m| m.operator == "boundary_condition")
            .expect("boundary");
        let minus = muts
            .iter()
            .find(|m| m.operator == "op_change" && m.description == "`-` -> `+`")
            .expect("op_change");
        let c = combine(src, &[lt, minus]).expect("combinable");
        assert_eq!(c.operator, "boundary_condition+op_change");
        assert_eq!(
            apply(src, &c.edits).expect("apply"),
            "def f(a, b):\n    if a <= b:\n        return a + b\n    return a + b\n"
        );
        assert_eq!((c.start_line, c.end_line), (2, 4));
        assert!(c.in_function_body);
        assert_eq!(c.scope, "f");
        // Overlapping (same token) and containing mutations don't combine.
        let flip = muts
            .iter()
            .find(|m| m.operator == "flip_operators" && m.description == "`<` -> `>`")
            .expect("flip");
        assert!(overlaps(lt, flip));
        assert!(combine(src, &[lt, flip]).is_none());
        let rm_if = muts
            .iter()
            .find(|m| m.operator == "remove_cond")
            .expect("remove_cond");
        assert!(combine(src, &[rm_if, lt]).is_none());
        assert!(combine(src, &[]).is_none());
        // Each alone is fine, together the block would be empty.
        let src2 = "def f():\n    x = 1\n    # note\n    y = 2\n";
        let muts2 = find_mutations(src2, &["remove_assign"]).expect("find");
        assert_eq!(muts2.len(), 2);
        assert!(!overlaps(&muts2[0], &muts2[1]));
        assert!(combine(src2, &[&muts2[0], &muts2[1]]).is_none());
    }
}
