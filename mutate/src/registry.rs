//! The operator registry: one declarative table lists every mutation operator once (enum
//! variant, stable name, origin, description, symptom) and generates the [`Operator`] enum, the
//! operator count, the [`OperatorInfo`] array behind [`operators`] and the mapping between
//! names and operators. Adding an operator means adding one row to the table (and its
//! `visit_*` code under [`crate::operators`]).

use serde::Serialize;

/// Static info about an operator.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct OperatorInfo {
    /// Stable operator name, as used in [`crate::Mutation::operator`] and
    /// [`crate::find_mutations`].
    pub name: &'static str,
    /// One-line description of what the operator does.
    pub description: &'static str,
    /// What is wrong with code this operator broke, as a bug report would say it without
    /// giving the fix ("an operator on this line is wrong"): the easiest problem statements
    /// name it beside the buggy line.
    pub symptom: &'static str,
    /// Where the operator comes from: `"swe-smith"` for the SWE-smith procedural operators,
    /// `"extra"` for the others. Serialised under its published key, `family`.
    #[serde(rename = "family")]
    pub origin: &'static str,
}

/// Where an operator comes from (the [`OperatorInfo::origin`] it is listed with).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Origin {
    /// One of SWE-smith's procedural operators.
    SweSmith,
    /// A realistic developer-bug operator that SWE-smith does not have.
    Extra,
}

impl Origin {
    /// The name [`OperatorInfo::origin`] shows.
    const fn label(self) -> &'static str {
        match self {
            Origin::SweSmith => "swe-smith",
            Origin::Extra => "extra",
        }
    }
}

/// Generates the registry from one row per operator:
/// `Variant => "stable_name", Origin, "description", "symptom";`.
macro_rules! operator_registry {
    ($($variant:ident => $name:literal, $origin:ident, $description:literal, $symptom:literal;)+) => {
        /// A mutation operator; the discriminant indexes the table behind [`operators`].
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub(crate) enum Operator {
            $(
                #[doc = $description]
                $variant,
            )+
        }

        /// The number of operators.
        pub(crate) const OPERATOR_COUNT: usize = [$(Operator::$variant),+].len();

        impl Operator {
            /// Every operator, in the stable order of [`operators`].
            pub(crate) const ALL: [Operator; OPERATOR_COUNT] = [$(Operator::$variant),+];

            /// The stable name of the operator.
            pub(crate) fn name(self) -> &'static str {
                match self {
                    $(Operator::$variant => $name,)+
                }
            }

            /// The operator of a stable name, if there is one.
            pub(crate) fn from_name(name: &str) -> Option<Operator> {
                match name {
                    $($name => Some(Operator::$variant),)+
                    _ => None,
                }
            }
        }

        /// Every operator, in the stable order of [`Operator`].
        static OPERATORS: [OperatorInfo; OPERATOR_COUNT] = [
            $(
                OperatorInfo {
                    name: $name,
                    description: $description,
                    symptom: $symptom,
                    origin: Origin::$origin.label(),
                },
            )+
        ];
    };
}

operator_registry! {
    ClassRmBase => "class_rm_base", SweSmith, "Remove one base class from a class's superclass list",
        "a base class is missing from this class statement";
    ClassRmFuncs => "class_rm_funcs", SweSmith, "Delete one method (with its decorators) from a class",
        "a method is missing from this class";
    ClassShuffleFuncs => "class_shuffle_funcs", SweSmith, "Swap two adjacent methods of a class",
        "two methods of this class are out of order";
    CtrlInvertIf => "ctrl_invert_if", SweSmith, "Swap the bodies of an if/else",
        "the two branches of this if/else are swapped";
    CtrlShuffle => "ctrl_shuffle", SweSmith, "Swap two adjacent statements of a block inside a function body",
        "two statements here are in the wrong order";
    RemoveAssign => "remove_assign", SweSmith, "Delete an assignment or augmented assignment statement",
        "an assignment is missing here";
    RemoveCond => "remove_cond", SweSmith, "Delete an if statement",
        "an if statement is missing here";
    RemoveLoop => "remove_loop", SweSmith, "Delete a for or while loop",
        "a loop is missing here";
    RemoveWrapper => "remove_wrapper", SweSmith, "Replace a with or try statement by its (dedented) body",
        "a with or try block around this code is missing";
    OpBreakChains => "op_break_chains", SweSmith, "Drop a middle operand of an operator chain (`a + b + c` -> `a + c`)",
        "an operand is missing from an expression on this line";
    OpChangeConst => "op_change_const", SweSmith, "Change an integer literal by +1 or -1",
        "a number on this line is off by one";
    OpChange => "op_change", SweSmith, "Replace a binary or augmented-assignment operator within its family",
        "an operator on this line is wrong";
    OpSwap => "op_swap", SweSmith, "Swap the operands of a binary operator or comparison",
        "two operands on this line are in the wrong order";
    FlipOperators => "flip_operators", SweSmith, "Flip a comparison or boolean operator (`==`/`!=`, `<`/`>`, `in`/`not in`, `and`/`or`, ...)",
        "a comparison or boolean operator on this line is inverted";
    OffByOneRange => "off_by_one_range", Extra, "Move the stop argument of a `range(...)` call by one",
        "the range on this line is off by one";
    OffByOneSlice => "off_by_one_slice", Extra, "Move a slice bound or an integer index by one",
        "an index or slice bound on this line is off by one";
    WrongDefaultArg => "wrong_default_arg", Extra, "Change a parameter's default value",
        "a default value on this line is wrong";
    SwapCallArgs => "swap_call_args", Extra, "Swap two adjacent positional arguments of a call",
        "two arguments of a call on this line are in the wrong order";
    WrongReturnValue => "wrong_return_value", Extra, "Return a wrong value (`None`, the flipped boolean, or without `not`)",
        "the value returned on this line is wrong";
    DropNot => "drop_not", Extra, "Drop a `not` (`not x` -> `x`)",
        "a `not` is missing on this line";
    WrongExceptionType => "wrong_exception_type", Extra, "Raise or catch a different builtin exception class",
        "the exception class on this line is wrong";
    BoundaryCondition => "boundary_condition", Extra, "Move a comparison boundary (`<` <-> `<=`, `>` <-> `>=`)",
        "a comparison on this line is off at its boundary";
}

/// Every operator, in a stable order.
pub fn operators() -> &'static [OperatorInfo] {
    &OPERATORS
}

/// The names of every operator, comma-separated (for error messages).
pub(crate) fn known_operator_names() -> String {
    Operator::ALL
        .iter()
        .map(|o| o.name())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn operator_table_is_consistent() {
        assert_eq!(operators().len(), OPERATOR_COUNT);
        for (i, op) in Operator::ALL.iter().enumerate() {
            assert_eq!(*op as usize, i);
            assert_eq!(op.name(), operators()[i].name);
            assert_eq!(Operator::from_name(op.name()), Some(*op));
        }
        assert_eq!(Operator::from_name("no_such_op"), None);
        let names: HashSet<_> = operators().iter().map(|o| o.name).collect();
        assert_eq!(names.len(), OPERATOR_COUNT);
        for o in operators() {
            assert!(matches!(o.origin, "swe-smith" | "extra"), "{}", o.name);
            assert!(!o.description.is_empty());
            assert!(!o.symptom.is_empty());
        }
    }

    #[test]
    fn operator_info_serialises_with_the_published_keys() {
        let json = serde_json::to_value(operators()[0]).expect("serialise");
        assert_eq!(
            json,
            serde_json::json!({
                "name": "class_rm_base",
                "description": "Remove one base class from a class's superclass list",
                "family": "swe-smith",
                "symptom": "a base class is missing from this class statement",
            })
        );
        let last = serde_json::to_value(operators()[OPERATOR_COUNT - 1]).expect("serialise");
        assert_eq!(last["family"], "extra");
    }
}
