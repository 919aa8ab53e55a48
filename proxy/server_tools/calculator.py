"""The `calculator` builtin: arithmetic and common math through a safe evaluator.

Owns: parsing an expression with Python's own parser and evaluating only
numbers, the arithmetic operators and a fixed table of math functions and
constants. Must not: call `eval`/`exec`, look up attributes, names or
subscripts outside the table, or do work unbounded in the input: the text,
the tree's depth, exponents, factorials and the size of every intermediate
result are capped, so a model (or a hostile prompt steering it) cannot stall
the proxy or exhaust its memory.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import Any

MAX_LENGTH = 2_000
"""characters of an expression."""
MAX_DEPTH = 60
"""nesting of the parsed tree (parentheses, calls, operators)."""
MAX_DIGITS = 400
"""decimal digits an integer result may reach (a googol has 101)."""
MAX_FACTORIAL = 500
MAX_NDIGITS = MAX_DIGITS
"""`round(x, n)` with |n| past this is refused: for an integer x and a negative n,
Python builds 10**-n first, so `round(1, -10**8)` alone would take minutes."""

Number = int | float


class CalculatorError(ValueError):
    """The expression is not one the calculator evaluates; the message says why."""


_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}
_CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e, "tau": math.tau, "inf": math.inf}


def _factorial(n: Number) -> int:
    if not float(n).is_integer() or not 0 <= n <= MAX_FACTORIAL:
        raise CalculatorError(f"factorial takes a whole number from 0 to {MAX_FACTORIAL}")
    return math.factorial(int(n))


def _round(x: Number, ndigits: Number | None = None) -> Number:
    if ndigits is None:
        return round(x)
    if not isinstance(ndigits, int) or abs(ndigits) > MAX_NDIGITS:
        raise CalculatorError(f"round takes a whole number of digits from -{MAX_NDIGITS} "
                              f"to {MAX_NDIGITS}")
    return round(x, ndigits)


def _log(x: Number, base: Number | None = None) -> float:
    return math.log(x) if base is None else math.log(x, base)


_FUNCTIONS: dict[str, Callable[..., Number]] = {
    "abs": abs, "round": _round, "min": min, "max": max,
    "sqrt": math.sqrt, "cbrt": math.cbrt, "exp": math.exp, "log": _log,
    "ln": math.log, "log10": math.log10, "log2": math.log2,
    "sin": math.sin, "cos": math.cos, "tan": math.tan, "asin": math.asin,
    "acos": math.acos, "atan": math.atan, "atan2": math.atan2,
    "sinh": math.sinh, "cosh": math.cosh, "tanh": math.tanh,
    "degrees": math.degrees, "radians": math.radians, "hypot": math.hypot,
    "floor": math.floor, "ceil": math.ceil, "trunc": math.trunc,
    "factorial": _factorial, "gcd": math.gcd, "lcm": math.lcm,
}


def evaluate(expression: str) -> Number:
    """The value of expression, or CalculatorError saying what is not allowed."""
    if not isinstance(expression, str) or not expression.strip():
        raise CalculatorError("expression must be a non-empty string")
    if len(expression) > MAX_LENGTH:
        raise CalculatorError(f"expression is longer than {MAX_LENGTH} characters")
    text = expression.strip().replace("^", "**").replace("×", "*").replace("÷", "/")
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise CalculatorError(f"not an arithmetic expression: {exc.__class__.__name__}") from None
    return _checked(_eval(tree.body, 0))


def _eval(node: ast.expr, depth: int) -> Number:
    if depth > MAX_DEPTH:
        raise CalculatorError(f"expression is nested deeper than {MAX_DEPTH} levels")
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) \
            and not isinstance(node.value, bool):
        return _checked(node.value)
    if isinstance(node, ast.Name):
        if node.id in _CONSTANTS:
            return _CONSTANTS[node.id]
        raise CalculatorError(f"unknown name {node.id!r}")
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _checked(_UNARY[type(node.op)](_eval(node.operand, depth + 1)))
    if isinstance(node, ast.BinOp):
        left, right = _eval(node.left, depth + 1), _eval(node.right, depth + 1)
        if isinstance(node.op, ast.Pow):
            return _power(left, right)
        if type(node.op) in _BINARY:
            return _apply(_BINARY[type(node.op)], left, right)
    if isinstance(node, ast.Call):
        return _call(node, depth)
    raise CalculatorError(f"{node.__class__.__name__} is not allowed in an expression")


def _call(node: ast.Call, depth: int) -> Number:
    if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS:
        raise CalculatorError("only the listed math functions can be called")
    if node.keywords or len(node.args) > 8:
        raise CalculatorError(f"{node.func.id} takes up to 8 plain arguments")
    args = [_eval(arg, depth + 1) for arg in node.args]
    return _apply(_FUNCTIONS[node.func.id], *args)


def _power(base: Number, exponent: Number) -> Number:
    # Bound the result before computing it: 9**9**9 would take minutes and GBs.
    if isinstance(base, int) and isinstance(exponent, int) and exponent > 0 and abs(base) > 1:
        # |base| >= 2: an exponent past MAX_DIGITS / log10(2) is too big already, and
        # is refused before it is turned into a float (which overflows past 1e308).
        digits = math.inf if exponent > MAX_DIGITS * 4 else exponent * math.log10(abs(base))
        if digits > MAX_DIGITS:
            raise CalculatorError(f"result would have about {digits:.3g} digits")
    return _apply(operator.pow, base, exponent)


def _apply(func: Callable[..., Any], *args: Number) -> Number:
    try:
        value = func(*args)
    except CalculatorError:
        raise
    except ZeroDivisionError:
        raise CalculatorError("division by zero") from None
    except (ValueError, TypeError, OverflowError) as exc:
        raise CalculatorError(f"math error: {exc}") from None
    if isinstance(value, complex) or not isinstance(value, (int, float)):
        raise CalculatorError("the result is not a real number")
    return _checked(value)


def _checked(value: Number) -> Number:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int) and value.bit_length() > MAX_DIGITS * 3.33:
        raise CalculatorError(f"result has more than {MAX_DIGITS} digits")
    return value


def format_number(value: Number) -> str:
    """A result as the model should read it: integers exact, floats without noise."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(value) if isinstance(value, float) else str(value)
