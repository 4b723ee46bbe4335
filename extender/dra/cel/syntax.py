"""CEL syntax: the tokens and the parser, into plain tuples the compiler reads."""

from __future__ import annotations

import re
from typing import Any

from extender.dra.cel.values import _INT_MAX, _UINT_MAX, UInt

# --------------------------------------------------------------------------- lexing

_TOKEN = re.compile(r"""
    (?P<ws>\s+|//[^\n]*)
  | (?P<str>[rR]?[bB]?[rR]?(?:'''(?:\\.|[^\\])*?'''|\"\"\"(?:\\.|[^\\])*?\"\"\"|'(?:\\.|[^\\'\n])*'|"(?:\\.|[^\\"\n])*"))
  | (?P<num>0[xX][0-9a-fA-F]+[uU]?|(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?[uU]?)
  | (?P<id>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>\|\||&&|==|!=|<=|>=|[-+*/%!<>?:.,()\[\]{}])
""", re.VERBOSE | re.DOTALL)
_RESERVED = {"as", "break", "const", "continue", "else", "for", "function", "if", "import", "let",
             "loop", "package", "namespace", "return", "var", "void", "while"}
_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
            "\\": "\\", "'": "'", '"': '"', "`": "`", "?": "?"}


def _unescape(body: str, raw: bool) -> str:
    if raw:
        return body

    def one(m: re.Match[str]) -> str:
        s = m[0][1:]
        if s[0] in _ESCAPES:
            return _ESCAPES[s[0]]
        if s[0] in "xX":
            return chr(int(s[1:], 16))
        if s[0] in "uU":
            return chr(int(s[1:], 16))
        return chr(int(s, 8))
    return re.sub(r"\\(?:[xX][0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[0-3][0-7]{2}|.)", one, body,
                  flags=re.DOTALL)


class _Syntax(Exception):
    def __init__(self, pos: int, message: str) -> None:
        super().__init__(message)
        self.pos = pos


def _tokens(text: str) -> list[tuple[str, Any, int]]:
    out: list[tuple[str, Any, int]] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise _Syntax(pos, f"token recognition error at: '{text[pos]}'")
        kind, tok = m.lastgroup, m[0]
        if kind == "str":
            prefix = re.match(r"[rRbB]*", tok)[0]  # type: ignore[index]  # "[rRbB]*" always matches: never None
            body = tok[len(prefix):]
            quote = 3 if body[:3] in ("'''", '"""') else 1
            value: Any = _unescape(body[quote:-quote], "r" in prefix.lower())
            if "b" in prefix.lower():
                value = value.encode("latin-1" if "\\x" in body else "utf-8")
            out.append(("lit", value, pos))
        elif kind == "num":
            out.append(("lit", _number(tok, pos), pos))
        elif kind == "id":
            if tok in ("true", "false"):
                out.append(("lit", tok == "true", pos))
            elif tok == "null":
                out.append(("lit", None, pos))
            elif tok in _RESERVED:
                raise _Syntax(pos, f"reserved identifier: {tok}")
            else:
                out.append(("id", tok, pos))
        elif kind == "op":
            out.append(("op", tok, pos))
        pos = m.end()
    out.append(("op", "<EOF>", pos))
    return out


def _number(tok: str, pos: int) -> Any:
    unsigned = tok[-1] in "uU"
    body = tok[:-1] if unsigned else tok
    if body[:2] in ("0x", "0X"):
        value: Any = int(body, 16)
    elif any(c in body for c in ".eE"):
        if unsigned:
            raise _Syntax(pos, f"invalid number: {tok}")
        return float(body)
    else:
        value = int(body)
    if unsigned:
        if value > _UINT_MAX:
            raise _Syntax(pos, "invalid uint literal")
        return UInt(value)
    if value > _INT_MAX + 1:
        raise _Syntax(pos, "invalid int literal")
    return value


# --------------------------------------------------------------------------- parsing
# The tree is tuples: ("lit", v) ("id", name) ("sel", x, field) ("has", x, field)
# ("idx", x, key) ("call", name, target|None, args) ("list", items) ("map", pairs)
# ("cond", c, a, b) ("and", a, b) ("or", a, b) ("op", symbol, a, b) ("not", a) ("neg", a)
# ("comp", macro, range, var, arg1, arg2|None) ("bind", var, init, body)
_Node = tuple[Any, ...]  # one of the shapes above: the kind first, then its parts

_RELATIONS = {"<", "<=", ">", ">=", "==", "!=", "in"}


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks = _tokens(text)
        self.i = 0

    def peek(self) -> tuple[str, Any, int]:
        return self.toks[self.i]

    def take(self) -> tuple[str, Any, int]:
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def at(self, symbol: str) -> bool:
        kind, value, _ = self.toks[self.i]
        return (kind == "op" or (kind == "id" and symbol == "in")) and value == symbol

    def expect(self, symbol: str) -> None:
        kind, value, pos = self.take()
        if kind != "op" or value != symbol:
            shown = "<EOF>" if value == "<EOF>" else repr(value) if kind == "lit" else value
            raise _Syntax(pos, f"mismatched input '{shown}' expecting '{symbol}'")

    def parse(self) -> _Node:
        node = self.expr()
        kind, value, pos = self.peek()
        if value != "<EOF>":
            raise _Syntax(pos, f"extraneous input '{value}' expecting <EOF>")
        return node

    def expr(self) -> _Node:
        cond = self.binary(0)
        if self.at("?"):
            self.take()
            yes = self.binary(0)
            self.expect(":")
            return ("cond", cond, yes, self.expr())
        return cond

    _LEVELS = (("||",), ("&&",), tuple(_RELATIONS), ("+", "-"), ("*", "/", "%"))

    def binary(self, level: int) -> _Node:
        if level == len(self._LEVELS):
            return self.unary()
        node = self.binary(level + 1)
        while True:
            kind, value, _ = self.peek()
            if value not in self._LEVELS[level] or kind not in ("op", "id"):
                return node
            self.take()
            right = self.binary(level + 1)
            if value == "||":
                node = ("or", node, right)
            elif value == "&&":
                node = ("and", node, right)
            else:
                node = ("op", value, node, right)

    def unary(self) -> _Node:
        if self.at("!"):
            self.take()
            return ("not", self.unary())
        if self.at("-"):
            _, _, pos = self.take()
            kind, value, _ = self.peek()
            if kind == "lit" and type(value) in (int, float) and not isinstance(value, bool):
                self.take()
                return self.postfix(("lit", -value))
            return ("neg", self.unary())
        return self.postfix(self.primary())

    def postfix(self, node: _Node) -> _Node:
        if node[0] == "lit" and isinstance(node[1], int) and not isinstance(node[1], bool | UInt) \
                and node[1] > _INT_MAX:
            raise _Syntax(0, "invalid int literal")
        while True:
            if self.at("."):
                self.take()
                kind, name, pos = self.take()
                if kind != "id":
                    raise _Syntax(pos, f"mismatched input '{name}' expecting IDENTIFIER")
                if self.at("("):
                    node = self.macro_or_call(name, node, self.args(")"))
                else:
                    node = ("sel", node, name)
            elif self.at("["):
                self.take()
                key = self.expr()
                self.expect("]")
                node = ("idx", node, key)
            else:
                return node

    def args(self, close: str) -> list[_Node]:
        self.take()
        items: list[_Node] = []
        while not self.at(close):
            items.append(self.expr())
            if not self.at(","):
                break
            self.take()
        self.expect(close)
        return items

    def primary(self) -> _Node:
        kind, value, pos = self.peek()
        if kind == "lit":
            self.take()
            return ("lit", value)
        if kind == "id":
            self.take()
            if self.at("("):
                return self.macro_or_call(value, None, self.args(")"))
            return ("id", value)
        if value == "(":
            self.take()
            node = self.expr()
            self.expect(")")
            return node
        if value == "[":
            return ("list", self.args("]"))
        if value == "{":
            self.take()
            pairs: list[tuple[_Node, _Node]] = []
            while not self.at("}"):
                key = self.expr()
                self.expect(":")
                pairs.append((key, self.expr()))
                if not self.at(","):
                    break
                self.take()
            self.expect("}")
            return ("map", pairs)
        if value == ".":
            self.take()
            return self.primary()
        shown = "<EOF>" if value == "<EOF>" else value
        raise _Syntax(pos, f"mismatched input '{shown}' expecting an expression")

    def macro_or_call(self, name: str, target: _Node | None, args: list[_Node]) -> _Node:
        if target is None and name == "has" and len(args) == 1:
            if args[0][0] != "sel":
                raise _Syntax(0, "invalid argument to has() macro")
            return ("has", args[0][1], args[0][2])
        if target == ("id", "cel") and name == "bind" and len(args) == 3:
            if args[0][0] != "id":
                raise _Syntax(0, "cel.bind() variable name must be a simple identifier")
            return ("bind", args[0][1], args[1], args[2])
        if target is not None and (name, len(args)) in _MACROS:
            if args[0][0] != "id":
                raise _Syntax(0, "argument is not an identifier")
            return ("comp", name, target, args[0][1], args[1], args[2] if len(args) == 3 else None)
        if target is not None and target[0] == "id" and target[1] == "sets":
            return ("call", f"sets.{name}", None, args)
        return ("call", name, target, args)


_MACROS = {("all", 2), ("exists", 2), ("exists_one", 2), ("map", 2), ("map", 3), ("filter", 2)}
