"""CEL's syntax: the text of a selector to a tree (``Node``), with the errors cel-go's parser reports.

Belongs here: the lexer, the recursive-descent parser of CEL's grammar (operators, literals, member
calls, ``.?`` / ``[?`` optional selection) and the parse errors with their positions. Not here: what a
name or a function means (``koordpy.devices.cel`` checks and compiles the tree), the values
(``koordpy.devices.cellib``).

The grammar is CEL's (cel-spec's ``CEL.g4``): ``a ? b : c`` below ``||`` below ``&&`` below the
relations below ``+ -`` below ``* / %`` below the unary ``! -`` below member access. As cel-go does, an
even run of ``!`` or ``-`` cancels out, a lone ``-`` before a number makes a negative literal (so
``-9223372036854775808`` is an int), and ``&&`` / ``||`` chains become one node of many terms.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# cel-go's parser refuses deeper nesting (parser.MaxRecursionDepth's default), and so do we: the
# compiled closures recurse as deep as the tree.
MAX_DEPTH = 250
MAX_LENGTH = 100_000  # cel-go's expression size limit, in code points

RESERVED = frozenset({"as", "break", "const", "continue", "else", "for", "function", "if", "import", "let",
                      "loop", "package", "namespace", "return", "var", "void", "while"})


class ParseError(Exception):
    def __init__(self, message: str, pos: int) -> None:
        super().__init__(message)
        self.message = message
        self.pos = pos


class UInt(int):
    """A CEL ``uint`` (an ``int`` Python tells apart by its type)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"{int(self)}u"


# -- the tree --------------------------------------------------------------------------------------

class Node:
    __slots__ = ("pos",)
    pos: int


@dataclass(slots=True, eq=False)
class Lit(Node):
    pos: int
    value: object  # bool, int, UInt, float, str, bytes or None


@dataclass(slots=True, eq=False)
class Ident(Node):
    pos: int
    name: str


@dataclass(slots=True, eq=False)
class Select(Node):
    pos: int
    operand: Node
    field: str
    optional: bool = False  # a.?b


@dataclass(slots=True, eq=False)
class Index(Node):
    pos: int
    operand: Node
    index: Node
    optional: bool = False  # a[?b]


@dataclass(slots=True, eq=False)
class Call(Node):
    """A function or an operator (``_+_``, ``!_``, ``_[_]`` is Index, ``_&&_`` is And): ``target`` is the
    receiver of a member call (``x.f(a)``), None for a global one (``f(x, a)``)."""

    pos: int
    function: str
    target: Node | None
    args: list[Node]


@dataclass(slots=True, eq=False)
class And(Node):
    pos: int
    terms: list[Node]


@dataclass(slots=True, eq=False)
class Or(Node):
    pos: int
    terms: list[Node]


@dataclass(slots=True, eq=False)
class Cond(Node):
    pos: int
    cond: Node
    then: Node
    otherwise: Node


@dataclass(slots=True, eq=False)
class ListLit(Node):
    pos: int
    elements: list[Node]


@dataclass(slots=True, eq=False)
class MapLit(Node):
    pos: int
    entries: list[tuple[Node, Node]]


# -- the lexer -------------------------------------------------------------------------------------

_TOKEN = re.compile(r"""
    (?P<ws>[ \t\n\r\f]+|//[^\n]*)
  | (?P<float>(?:[0-9]+\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+|\.[0-9]+(?:[eE][+-]?[0-9]+)?))
  | (?P<hex>0[xX][0-9a-fA-F]+[uU]?)
  | (?P<int>[0-9]+[uU]?)
  | (?P<string>[rRbB]{0,2}(?:\"\"\"|'''|"|'))
  | (?P<ident>[_a-zA-Z][_a-zA-Z0-9]*)
  | (?P<op>==|!=|<=|>=|&&|\|\||\.\?|\[\?|[-+*/%!<>?:.,()\[\]{}])
""", re.VERBOSE)

_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "\\": "\\", "'": "'",
            '"': '"', "`": "`", "?": "?"}
_INT64_MAX = 2**63 - 1
_UINT64_MAX = 2**64 - 1


@dataclass(slots=True)
class Token:
    kind: str  # "int", "uint", "float", "string", "bytes", "ident", "op", "eof"
    value: object
    pos: int
    text: str


def _string(text: str, start: int, prefix: str) -> tuple[str | bytes, int]:
    """The literal whose opening quote is at ``start``: (its value, where it ends)."""
    raw = "r" in prefix.lower()
    is_bytes = "b" in prefix.lower()
    quote = text[start:start + 3] if text[start:start + 3] in ('"""', "'''") else text[start]
    i = start + len(quote)
    out: list[bytes] = []  # UTF-8; an \x or octal escape in a bytes literal is one byte
    while True:
        if i >= len(text):
            raise ParseError("Syntax error: unterminated string literal", start)
        if text.startswith(quote, i):
            i += len(quote)
            break
        c = text[i]
        if c == "\n" and len(quote) == 1:
            raise ParseError("Syntax error: newline in string literal", i)
        if c == "\\" and not raw:
            i += 1
            e = text[i:i + 1]
            code: int | None = None
            if e in _ESCAPES:
                out.append(_ESCAPES[e].encode())
                i += 1
                continue
            if e in ("x", "X") and re.fullmatch(r"[0-9a-fA-F]{2}", text[i + 1:i + 3]):
                code, i = int(text[i + 1:i + 3], 16), i + 3
            elif re.fullmatch(r"[0-3][0-7]{2}", text[i:i + 3]):
                code, i = int(text[i:i + 3], 8), i + 3
            elif e == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[i + 1:i + 5]) and not is_bytes:
                out.append(_code_point(int(text[i + 1:i + 5], 16), i))
                i += 5
                continue
            elif e == "U" and re.fullmatch(r"[0-9a-fA-F]{8}", text[i + 1:i + 9]) and not is_bytes:
                out.append(_code_point(int(text[i + 1:i + 9], 16), i))
                i += 9
                continue
            else:
                raise ParseError("Syntax error: invalid escape sequence", i - 1)
            out.append(bytes([code]) if is_bytes else chr(code).encode())
            continue
        out.append(c.encode("utf-8", "surrogatepass"))
        i += 1
    value = b"".join(out)
    if is_bytes:
        return value, i
    try:
        return value.decode(), i
    except UnicodeDecodeError:
        raise ParseError("Syntax error: invalid UTF-8 in string literal", start) from None


def _code_point(code: int, pos: int) -> bytes:
    if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
        raise ParseError("Syntax error: invalid unicode code point", pos)
    return chr(code).encode()


def tokenize(text: str) -> list[Token]:
    tokens: list[Token] = []
    i, n = 0, len(text)
    while i < n:
        m = _TOKEN.match(text, i)
        if m is None:
            raise ParseError(f"Syntax error: token recognition error at: '{text[i]}'", i)
        kind = m.lastgroup
        lexeme = m.group()
        if kind == "ws":
            i = m.end()
            continue
        if kind == "string":
            prefix = lexeme.rstrip("\"'")
            value, end = _string(text, i + len(prefix), prefix)
            tokens.append(Token("bytes" if isinstance(value, bytes) else "string", value, i, text[i:end]))
            i = end
            continue
        if kind in ("int", "hex"):
            unsigned = lexeme[-1] in "uU"
            digits = lexeme[:-1] if unsigned else lexeme
            number = int(digits, 16) if kind == "hex" else int(digits)
            if unsigned:
                if number > _UINT64_MAX:
                    raise ParseError("invalid uint literal", i)
                tokens.append(Token("uint", UInt(number), i, lexeme))
            else:
                # Range-checked where the parser knows the sign (-9223372036854775808 is an int).
                tokens.append(Token("int", number, i, lexeme))
        elif kind == "float":
            tokens.append(Token("float", float(lexeme), i, lexeme))
        elif kind == "ident":
            tokens.append(Token("ident", lexeme, i, lexeme))
        else:
            tokens.append(Token("op", lexeme, i, lexeme))
        i = m.end()
    tokens.append(Token("eof", None, n, "<EOF>"))
    return tokens


# -- the parser ------------------------------------------------------------------------------------

_RELATIONS = {"==": "_==_", "!=": "_!=_", "<": "_<_", "<=": "_<=_", ">": "_>_", ">=": "_>=_", "in": "@in"}


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = tokenize(text)
        self.i = 0
        self.depth = 0

    def peek(self) -> Token:
        return self.tokens[self.i]

    def next(self) -> Token:
        tok = self.tokens[self.i]
        self.i += 1
        return tok

    def at(self, op: str) -> bool:
        tok = self.tokens[self.i]
        return tok.kind == "op" and tok.value == op

    def expect(self, op: str) -> Token:
        tok = self.next()
        if tok.kind != "op" or tok.value != op:
            raise ParseError(f"Syntax error: mismatched input '{tok.text}' expecting '{op}'", tok.pos)
        return tok

    def parse(self) -> Node:
        node = self.expr()
        tok = self.peek()
        if tok.kind != "eof":
            raise ParseError(f"Syntax error: extraneous input '{tok.text}' expecting <EOF>", tok.pos)
        return node

    def expr(self) -> Node:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ParseError(f"expression recursion limit exceeded: {MAX_DEPTH}", self.peek().pos)
        node = self.or_()
        if self.at("?"):
            pos = self.next().pos
            then = self.or_()
            self.expect(":")
            otherwise = self.expr()
            node = Cond(pos, node, then, otherwise)
        self.depth -= 1
        return node

    def or_(self) -> Node:
        first = self.and_()
        if not self.at("||"):
            return first
        pos = self.peek().pos
        terms = [first]
        while self.at("||"):
            self.next()
            terms.append(self.and_())
        return Or(pos, terms)

    def and_(self) -> Node:
        first = self.relation()
        if not self.at("&&"):
            return first
        pos = self.peek().pos
        terms = [first]
        while self.at("&&"):
            self.next()
            terms.append(self.relation())
        return And(pos, terms)

    def relation(self) -> Node:
        node = self.addition()
        while True:
            tok = self.peek()
            name = _RELATIONS.get(tok.text) if tok.kind in ("op", "ident") else None
            if name is None or (tok.kind == "ident" and tok.value != "in"):
                return node
            self.next()
            node = Call(tok.pos, name, None, [node, self.addition()])

    def addition(self) -> Node:
        node = self.multiplication()
        while self.at("+") or self.at("-"):
            tok = self.next()
            node = Call(tok.pos, f"_{tok.value}_", None, [node, self.multiplication()])
        return node

    def multiplication(self) -> Node:
        node = self.unary()
        while self.at("*") or self.at("/") or self.at("%"):
            tok = self.next()
            node = Call(tok.pos, f"_{tok.value}_", None, [node, self.unary()])
        return node

    def unary(self) -> Node:
        tok = self.peek()
        if tok.kind == "op" and tok.value in ("!", "-"):
            op = tok.value
            count = 0
            while self.at(tok.text):
                self.next()
                count += 1
            nxt = self.peek()
            if op == "-" and nxt.kind in ("int", "float") and count == 1:
                # A negative literal (only a lone minus makes one, as CEL's grammar reads it; in --4 or
                # ---4 every minus is an operator); member access after it applies to the literal.
                self.next()
                value = -nxt.value  # type: ignore[operator]
                if nxt.kind == "int" and not -_INT64_MAX - 1 <= value <= _INT64_MAX:
                    raise ParseError("invalid int literal", nxt.pos)
                return self.member_tail(Lit(tok.pos, value))
            operand = self.member()
            if count % 2 == 0:
                return operand
            return Call(tok.pos, "!_" if op == "!" else "-_", None, [operand])
        return self.member()

    def member(self) -> Node:
        return self.member_tail(self.primary())

    def member_tail(self, node: Node) -> Node:
        while True:
            tok = self.peek()
            if tok.kind != "op":
                return node
            if tok.value in (".", ".?"):
                self.next()
                name = self.next()
                if name.kind != "ident":
                    raise ParseError(f"Syntax error: mismatched input '{name.text}' expecting IDENTIFIER", name.pos)
                if self.at("("):
                    if tok.value == ".?":
                        raise ParseError("Syntax error: unsupported syntax '.?'", tok.pos)
                    self.next()
                    node = Call(name.pos, str(name.value), node, self.args(")"))
                else:
                    node = Select(tok.pos, node, str(name.value), optional=tok.value == ".?")
            elif tok.value in ("[", "[?"):
                self.next()
                index = self.expr()
                self.expect("]")
                node = Index(tok.pos, node, index, optional=tok.value == "[?")
            else:
                return node

    def args(self, close: str) -> list[Node]:
        out: list[Node] = []
        if self.at(close):
            self.next()
            return out
        while True:
            out.append(self.expr())
            if self.at(","):
                self.next()
                if self.at(close) and close != ")":  # a trailing comma in a list or map literal
                    self.next()
                    return out
                continue
            self.expect(close)
            return out

    def primary(self) -> Node:
        tok = self.next()
        kind = tok.kind
        if kind in ("int",):
            if tok.value > _INT64_MAX:  # type: ignore[operator]
                raise ParseError("invalid int literal", tok.pos)
            return Lit(tok.pos, tok.value)
        if kind in ("uint", "float", "string", "bytes"):
            return Lit(tok.pos, tok.value)
        if kind == "ident":
            name = str(tok.value)
            if name == "true":
                return Lit(tok.pos, True)
            if name == "false":
                return Lit(tok.pos, False)
            if name == "null":
                return Lit(tok.pos, None)
            if name in RESERVED or name == "in":
                raise ParseError(f"Syntax error: reserved identifier: {name}", tok.pos)
            if self.at("("):
                self.next()
                return Call(tok.pos, name, None, self.args(")"))
            if self.at("{"):
                raise ParseError("Syntax error: message construction is not supported here", tok.pos)
            return Ident(tok.pos, name)
        if kind == "op":
            if tok.value == "(":
                node = self.expr()
                self.expect(")")
                return node
            if tok.value == "[":
                return ListLit(tok.pos, self.args("]"))
            if tok.value == "{":
                return self.map_literal(tok.pos)
            if tok.value == ".":
                ident = self.next()
                if ident.kind == "ident":  # a leading dot: the root scope
                    return Ident(ident.pos, str(ident.value))
        raise ParseError(f"Syntax error: mismatched input '{tok.text}' expecting {{'[', '{{', '(', '.', '-', '!', "
                         "'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}",
                         tok.pos)

    def map_literal(self, pos: int) -> Node:
        entries: list[tuple[Node, Node]] = []
        if self.at("}"):
            self.next()
            return MapLit(pos, entries)
        while True:
            key = self.expr()
            self.expect(":")
            entries.append((key, self.expr()))
            if self.at(","):
                self.next()
                if self.at("}"):
                    self.next()
                    return MapLit(pos, entries)
                continue
            self.expect("}")
            return MapLit(pos, entries)


def parse(text: str) -> Node:
    """The tree of ``text``; raises ParseError (with the offset of the offending token)."""
    if len(text) > MAX_LENGTH:
        raise ParseError(f"expression code point size exceeds limit: size: {len(text)}, limit {MAX_LENGTH}", 0)
    return _Parser(text).parse()


def location(text: str, pos: int) -> tuple[str, str]:
    """cel-go's way of pointing at ``pos``: ``<input>:LINE:COLUMN`` and the line with a caret."""
    line_no = text.count("\n", 0, pos) + 1
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    line = text[start:end if end >= 0 else len(text)]
    column = pos - start
    return f"<input>:{line_no}:{column + 1}", f" | {line}\n | {'.' * column}^"
