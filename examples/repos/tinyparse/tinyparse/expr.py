"""Recursive-descent parser and evaluator for arithmetic expressions.

Grammar (lowest to highest precedence)::

    additive   := term (("+" | "-") term)*
    term       := unary (("*" | "/" | "//" | "%") unary)*
    unary      := ("+" | "-") unary | power
    power      := primary ["^" unary]          # right associative
    primary    := NUMBER | NAME | NAME "(" [args] ")" | "(" additive ")"
"""

import math

from .errors import EvaluationError, ParseError
from .tokenizer import COMMA, EOF, LPAREN, NAME, NUMBER, OP, RPAREN, tokenize


class Node:
    """Base class for expression tree nodes."""

    def evaluate(self, env):
        raise NotImplementedError

    def variables(self):
        """Return the set of variable names referenced by this node."""
        return set()

    def __eq__(self, other):
        return type(self) is type(other) and self.__dict__ == other.__dict__

    __hash__ = None


class Num(Node):
    def __init__(self, value):
        self.value = value

    def evaluate(self, env):
        return self.value

    def __repr__(self):
        return "Num(%r)" % (self.value,)

    def __str__(self):
        return repr(self.value)


class Var(Node):
    def __init__(self, name):
        self.name = name

    def evaluate(self, env):
        if self.name in env:
            return env[self.name]
        if self.name in CONSTANTS:
            return CONSTANTS[self.name]
        raise EvaluationError("undefined variable %r" % self.name)

    def variables(self):
        if self.name in CONSTANTS:
            return set()
        return {self.name}

    def __repr__(self):
        return "Var(%r)" % (self.name,)

    def __str__(self):
        return self.name


class UnaryOp(Node):
    def __init__(self, op, operand):
        self.op = op
        self.operand = operand

    def evaluate(self, env):
        value = self.operand.evaluate(env)
        if self.op == "-":
            return -value
        return value

    def variables(self):
        return self.operand.variables()

    def __repr__(self):
        return "UnaryOp(%r, %r)" % (self.op, self.operand)

    def __str__(self):
        return "(%s%s)" % (self.op, self.operand)


def _divide(a, b):
    if b == 0:
        raise EvaluationError("division by zero")
    result = a / b
    # Keep integer results integral when the division is exact.
    if isinstance(a, int) and isinstance(b, int) and a % b == 0:
        return a // b
    return result


def _floordiv(a, b):
    if b == 0:
        raise EvaluationError("division by zero")
    return a // b


def _modulo(a, b):
    if b == 0:
        raise EvaluationError("modulo by zero")
    return a % b


def _power(a, b):
    if a == 0 and b < 0:
        raise EvaluationError("zero cannot be raised to a negative power")
    return a ** b


BINARY_OPS = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": _divide,
    "//": _floordiv,
    "%": _modulo,
    "^": _power,
}

CONSTANTS = {"pi": math.pi, "e": math.e}


class BinOp(Node):
    def __init__(self, op, left, right):
        self.op = op
        self.left = left
        self.right = right

    def evaluate(self, env):
        left = self.left.evaluate(env)
        right = self.right.evaluate(env)
        return BINARY_OPS[self.op](left, right)

    def variables(self):
        return self.left.variables() | self.right.variables()

    def __repr__(self):
        return "BinOp(%r, %r, %r)" % (self.op, self.left, self.right)

    def __str__(self):
        return "(%s %s %s)" % (self.left, self.op, self.right)


def _sqrt(x):
    if x < 0:
        raise EvaluationError("sqrt of negative number")
    return math.sqrt(x)


# name -> (callable, minimum arity, maximum arity or None for variadic)
FUNCTIONS = {
    "abs": (abs, 1, 1),
    "sqrt": (_sqrt, 1, 1),
    "floor": (math.floor, 1, 1),
    "ceil": (math.ceil, 1, 1),
    "round": (round, 1, 2),
    "min": (lambda *args: min(args), 1, None),
    "max": (lambda *args: max(args), 1, None),
}


class Call(Node):
    def __init__(self, name, args):
        self.name = name
        self.args = list(args)

    def evaluate(self, env):
        if self.name not in FUNCTIONS:
            raise EvaluationError("unknown function %r" % self.name)
        func, min_args, max_args = FUNCTIONS[self.name]
        count = len(self.args)
        if count < min_args or (max_args is not None and count > max_args):
            raise EvaluationError(
                "%s() takes %s argument(s), got %d"
                % (self.name, _arity_text(min_args, max_args), count)
            )
        values = [arg.evaluate(env) for arg in self.args]
        if self.name == "round" and count == 2:
            return func(values[0], int(values[1]))
        return func(*values)

    def variables(self):
        names = set()
        for arg in self.args:
            names |= arg.variables()
        return names

    def __repr__(self):
        return "Call(%r, %r)" % (self.name, self.args)

    def __str__(self):
        return "%s(%s)" % (self.name, ", ".join(str(a) for a in self.args))


def _arity_text(min_args, max_args):
    if max_args is None:
        return "at least %d" % min_args
    if min_args == max_args:
        return str(min_args)
    return "%d to %d" % (min_args, max_args)


class Parser:
    """Turns a token list into an expression tree."""

    def __init__(self, tokens):
        self.tokens = tokens
        self.index = 0

    @property
    def current(self):
        return self.tokens[self.index]

    def advance(self):
        token = self.tokens[self.index]
        if token.kind != EOF:
            self.index += 1
        return token

    def check_op(self, *ops):
        token = self.current
        return token.kind == OP and token.value in ops

    def expect(self, kind):
        token = self.current
        if token.kind != kind:
            raise ParseError("expected %s" % kind, token.pos)
        return self.advance()

    def parse(self):
        node = self.additive()
        if self.current.kind != EOF:
            raise ParseError("unexpected token %r" % (self.current.value,), self.current.pos)
        return node

    def additive(self):
        node = self.term()
        while self.check_op("+", "-"):
            op = self.advance().value
            node = BinOp(op, node, self.term())
        return node

    def term(self):
        node = self.unary()
        while self.check_op("*", "/", "//", "%"):
            op = self.advance().value
            node = BinOp(op, node, self.unary())
        return node

    def unary(self):
        if self.check_op("+", "-"):
            op = self.advance().value
            return UnaryOp(op, self.unary())
        return self.power()

    def power(self):
        node = self.primary()
        if self.check_op("^"):
            self.advance()
            node = BinOp("^", node, self.unary())
        return node

    def primary(self):
        token = self.current
        if token.kind == NUMBER:
            self.advance()
            return Num(token.value)
        if token.kind == NAME:
            self.advance()
            if self.current.kind == LPAREN:
                return Call(token.value, self.arguments())
            return Var(token.value)
        if token.kind == LPAREN:
            self.advance()
            node = self.additive()
            self.expect(RPAREN)
            return node
        if token.kind == EOF:
            raise ParseError("unexpected end of input", token.pos)
        raise ParseError("unexpected token %r" % (token.value,), token.pos)

    def arguments(self):
        self.expect(LPAREN)
        args = []
        if self.current.kind == RPAREN:
            self.advance()
            return args
        while True:
            args.append(self.additive())
            if self.current.kind == COMMA:
                self.advance()
                continue
            self.expect(RPAREN)
            return args


def parse(text):
    """Parse ``text`` into an expression tree."""
    return Parser(tokenize(text)).parse()


def evaluate(text, env=None):
    """Parse and evaluate ``text`` with the variable bindings in ``env``."""
    return parse(text).evaluate(env or {})
