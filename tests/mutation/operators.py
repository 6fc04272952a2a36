"""The mutants of one Python file: small AST-level changes, one per site, each with an id stable across line shifts.

A mutant is applied by splicing its replacement text over the source span of the node it changes, so the rest of
the file (comments, layout, line numbers) stays as it is. Its id hashes the file, the enclosing function, the
operator and the normalised (``ast.unparse``) text before and after, plus an occurrence index for identical ones,
never the line number: a blank line inserted above leaves every id as it was.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
from typing import List, Optional, Tuple

OPERATORS = ("compare", "negate", "boolop", "bool_operand", "constant", "statement", "argument", "return_none",
             "tuple_element")

FLIPPED = {ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Lt: ast.GtE, ast.GtE: ast.Lt, ast.LtE: ast.Gt, ast.Gt: ast.LtE,
           ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is}
LOG_METHODS = {"debug", "info", "warning", "warn", "error", "exception", "critical", "log"}
# Replacement text that needs no parentheses wherever an expression stood.
ATOMS = (ast.Name, ast.Constant, ast.Call, ast.Attribute, ast.Subscript, ast.List, ast.Tuple, ast.Dict, ast.Set)
SIMPLE_STATEMENTS = (ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Return, ast.Raise, ast.Delete, ast.Assert,
                     ast.Break, ast.Continue)
SNIPPET_LIMIT = 160


@dataclasses.dataclass
class Mutant:
    path: str               # relative to the repository root
    qualname: str           # the enclosing function or class ("<module>" at the top level)
    operator: str
    before: str             # ast.unparse of the changed construct, and of what it becomes
    after: str
    lineno: int             # where the change is now (shown, never part of the id)
    end_lineno: int
    in_function: bool       # False: runs at import time (module or class body)
    span: Tuple[int, int, int, int]   # (line, byte col, end line, end byte col) replaced by ``replacement``
    replacement: str
    top: int = 0            # the index of the top-level statement it is in, and a digest of that statement's
    expected: str = ""      # ast.dump once changed: what the spliced text must parse to
    occurrence: int = 0
    # For import-time code: the lines whose tests are chosen (where the assigned names are used, or the body of
    # the function whose default it is); empty: every test of the file.
    uses: Tuple[int, ...] = ()

    @property
    def id(self) -> str:
        key = "\0".join((self.path, self.qualname, self.operator, self.before, self.after, str(self.occurrence)))
        stem = self.path.rsplit("/", 1)[-1].rsplit(".", 1)[0]
        return "%s-%s" % (stem, hashlib.sha1(key.encode()).hexdigest()[:10])

    @property
    def lines(self) -> range:
        return range(self.lineno, self.end_lineno + 1)

    def apply(self, source: str) -> str:
        return splice(source, self.span, self.replacement)

    def check(self, mutated: str) -> bool:
        """Whether the spliced text parses to the intended tree (a splice that changed more is never run)."""
        try:
            tree = ast.parse(mutated)
        except SyntaxError:
            return False
        return _digest(ast.dump(tree.body[self.top])) == self.expected

    def describe(self) -> str:
        return "%s -> %s" % (short(self.before), short(self.after))


def short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= SNIPPET_LIMIT else text[:SNIPPET_LIMIT - 3] + "..."


def _digest(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


def splice(source: str, span: Tuple[int, int, int, int], replacement: str) -> str:
    # ast columns are UTF-8 byte offsets, so the splice works on bytes.
    lines = source.encode().splitlines(keepends=True)
    line, col, end_line, end_col = span
    start = sum(len(x) for x in lines[:line - 1]) + col
    end = sum(len(x) for x in lines[:end_line - 1]) + end_col
    data = source.encode()
    return (data[:start] + replacement.encode() + data[end:]).decode()


def _is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


def _is_logging_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if isinstance(func, ast.Name):
        return func.id == "print"
    if isinstance(func, ast.Attribute):
        receiver = ast.unparse(func.value).lower()
        if func.attr in LOG_METHODS and ("log" in receiver or "display" in receiver):
            return True
        return receiver == "warnings" and func.attr == "warn"
    return False


def _is_message(node: ast.AST) -> bool:
    """A string built for people to read: its changes are message-only."""
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return True
    return isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and _is_message(node.left)


def _swap(parent: ast.AST, old: ast.AST, new: Optional[ast.AST]):
    """Put ``new`` where ``old`` is among ``parent``'s fields (``None``: remove it from a list); returns an undo."""
    for name, value in ast.iter_fields(parent):
        if value is old:
            setattr(parent, name, new)
            return lambda: setattr(parent, name, old)
        if isinstance(value, list):
            for i, item in enumerate(value):
                if item is old:
                    if new is None:
                        del value[i]
                        return lambda: value.insert(i, old)
                    value[i] = new
                    return lambda: value.__setitem__(i, old)
    raise ValueError("not a child")


class _Collector:
    def __init__(self, path: str, source: str):
        self.path = path
        self.source = source
        self.tree = ast.parse(source)
        self.mutants: List[Mutant] = []
        self.scope: List[str] = []
        self.in_function = False
        self.top = 0
        self.import_stmt: Optional[ast.stmt] = None   # the module- or class-level statement being visited
        self.header_of: Optional[ast.AST] = None      # the function whose decorators or defaults are visited
        self.used: dict = {}
        for node in ast.walk(self.tree):
            name = node.id if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) else \
                node.attr if isinstance(node, ast.Attribute) else None
            if name:
                self.used.setdefault(name, set()).update(range(node.lineno, node.end_lineno + 1))

    # -- recording ---------------------------------------------------------------------------
    def _record(self, operator: str, node: ast.AST, parent: ast.AST, new: Optional[ast.AST],
                context: Optional[ast.AST] = None, replacement: Optional[str] = None):
        """One mutant: ``node`` (a child of ``parent``) becomes ``new``; ``context`` is what before/after show."""
        context = node if context is None else context
        before = ast.unparse(context)
        undo = _swap(parent, node, new)
        try:
            after = ast.unparse(new if context is node else context)
            expected = ast.dump(self.tree.body[self.top])
        finally:
            undo()
        if replacement is None:
            replacement = ast.unparse(new)
            if not isinstance(new, ATOMS) and not isinstance(node, ast.stmt):
                replacement = "(%s)" % replacement
        span = (node.lineno, node.col_offset, node.end_lineno, node.end_col_offset)
        self.mutants.append(Mutant(self.path, ".".join(self.scope) or "<module>", operator, before, after, node.lineno,
                                   node.end_lineno, self.in_function, span, replacement, top=self.top,
                                   expected=_digest(expected), uses=() if self.in_function else self._uses()))

    def _uses(self) -> Tuple[int, ...]:
        if self.header_of is not None:
            body = self.header_of.body
            return tuple(range(body[0].lineno, body[-1].end_lineno + 1))
        stmt = self.import_stmt
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] \
            if isinstance(stmt, (ast.AnnAssign, ast.AugAssign)) else []
        names = [t.id for t in targets if isinstance(t, ast.Name)]
        own = set(range(stmt.lineno, stmt.end_lineno + 1)) if stmt else set()
        return tuple(sorted(set().union(*[self.used.get(n, set()) for n in names]) - own)) if names else ()

    # -- traversal ---------------------------------------------------------------------------
    def visit(self, node: ast.AST, parent: Optional[ast.AST] = None):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self._visit_definition(node)
            return
        if isinstance(node, ast.Lambda):
            self._visit_children(node, skip=("args",))
            return
        if _is_logging_call(node) or isinstance(node, ast.JoinedStr):
            return
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            return
        if isinstance(node, ast.stmt):
            if not self.in_function:
                self.import_stmt = node
            self._statement(node, parent)
        elif isinstance(node, ast.expr) and parent is not None:
            self._expression(node, parent)
        skip = ("annotation", "returns") if isinstance(node, (ast.AnnAssign, ast.arg)) else ()
        self._visit_children(node, skip=skip)

    def _visit_children(self, node: ast.AST, skip=()):
        for name, value in ast.iter_fields(node):
            if name in skip:
                continue
            if isinstance(value, list):
                for item in list(value):
                    if isinstance(item, ast.AST):
                        self.visit(item, node)
            elif isinstance(value, ast.AST):
                self.visit(value, node)

    def _visit_definition(self, node):
        # Decorators, defaults and bases run in the enclosing scope; annotations are never mutated.
        if not self.in_function:
            self.import_stmt = node
        self.header_of = None if isinstance(node, ast.ClassDef) else node
        for item in node.decorator_list:
            self.visit(item, node)
        if isinstance(node, ast.ClassDef):
            for item in node.bases + node.keywords:
                self.visit(item, node)
        else:
            for item in node.args.defaults + [d for d in node.args.kw_defaults if d is not None]:
                self.visit(item, node.args)
        self.header_of = None
        outer = self.in_function
        self.scope.append(node.name)
        self.in_function = not isinstance(node, ast.ClassDef)
        try:
            for stmt in node.body:
                self.visit(stmt, node)
        finally:
            self.scope.pop()
            self.in_function = outer

    # -- sites -----------------------------------------------------------------------------
    def _statement(self, node: ast.stmt, parent: ast.AST):
        if isinstance(node, (ast.If, ast.While)):
            self._negate(node)
        if isinstance(node, ast.Assert):
            self._negate(node)
        if isinstance(node, ast.Return) and node.value is not None and not _is_none(node.value):
            self._record("return_none", node.value, node, ast.Constant(None), context=node)
        if isinstance(node, ast.Return) and _is_none(node.value) and node.value is not None:
            self._record("constant", node.value, node, ast.Constant(True), context=node)
        if self._deletable(node, parent):
            self._record("statement", node, parent, ast.Pass(), context=node, replacement="pass")

    def _deletable(self, node: ast.stmt, parent: ast.AST) -> bool:
        if not isinstance(node, SIMPLE_STATEMENTS) or isinstance(parent, ast.Module):
            return False
        if _is_docstring(node) or (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)):
            return False
        if isinstance(node, ast.Expr) and _is_logging_call(node.value):
            return False
        if isinstance(node, ast.AnnAssign) and node.value is None:
            return False
        if isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] == ["__slots__"]:
            return False   # only memory and attribute typos would notice
        if isinstance(node, ast.Return):
            # A value returned is return_none's; a bare return deleted as a function's last statement changes nothing.
            last = isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)) and parent.body[-1] is node
            return _is_none(node.value) and not last
        return True

    def _negate(self, node):
        test = node.test
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in FLIPPED:
            return   # the compare operator's flip is this negation
        new = test.operand if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) \
            else ast.UnaryOp(ast.Not(), test)
        self._record("negate", test, node, new)

    def _expression(self, node: ast.expr, parent: ast.AST):
        if isinstance(node, ast.IfExp):
            self._negate(node)
        if isinstance(node, ast.Compare):
            for i, op in enumerate(node.ops):
                flipped = FLIPPED.get(type(op))
                if flipped:
                    new = ast.Compare(node.left, node.ops[:i] + [flipped()] + node.ops[i + 1:], node.comparators)
                    self._record("compare", node, parent, new)
            for op, right in zip(node.ops, node.comparators, strict=True):
                if isinstance(op, (ast.In, ast.NotIn)) and isinstance(right, (ast.Tuple, ast.Set, ast.List)) \
                        and len(right.elts) > 1:
                    for element in list(right.elts):
                        remaining = [e for e in right.elts if e is not element]
                        new = type(right)(elts=remaining, **({"ctx": right.ctx} if hasattr(right, "ctx") else {}))
                        self._record("tuple_element", right, node, new, context=node)
        if isinstance(node, ast.BoolOp):
            swapped = ast.Or() if isinstance(node.op, ast.And) else ast.And()
            self._record("boolop", node, parent, ast.BoolOp(swapped, node.values))
            for value in node.values:
                rest = [v for v in node.values if v is not value]
                self._record("bool_operand", node, parent, rest[0] if len(rest) == 1 else ast.BoolOp(node.op, rest))
        if isinstance(node, ast.Constant):
            self._constant(node, parent)
        if isinstance(node, ast.Call) and not _is_logging_call(node):
            self._arguments(node, parent)

    def _constant(self, node: ast.Constant, parent: ast.AST):
        value = node.value
        if isinstance(value, bool):
            new = ast.Constant(not value)
        elif isinstance(value, (int, float)) and not isinstance(value, complex):
            new = ast.Constant(value + 1)
        else:
            return
        if isinstance(parent, (ast.expr, ast.keyword)) or (isinstance(parent, SIMPLE_STATEMENTS)):
            context = parent
        else:
            context = node
        if isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.USub):
            context = parent
        self._record("constant", node, parent, new, context=context)

    def _arguments(self, node: ast.Call, parent: ast.AST):
        # Each keyword, and the last of two or more positional arguments (an optional one, most often): dropping
        # another positional one is a TypeError on every call, which any test that runs the line notices.
        if len(node.args) > 1 and not _is_message(node.args[-1]):
            new = ast.Call(node.func, node.args[:-1], node.keywords)
            self._record("argument", node, parent, new)
        for keyword in node.keywords:
            if not _is_message(keyword.value):
                new = ast.Call(node.func, node.args, [k for k in node.keywords if k is not keyword])
                self._record("argument", node, parent, new)


def _is_none(node: Optional[ast.AST]) -> bool:
    return node is None or (isinstance(node, ast.Constant) and node.value is None)


def mutants_of(path: str, source: str) -> List[Mutant]:
    """Every mutant of ``source`` (the text of ``path``, relative to the repository root), in source order."""
    collector = _Collector(path, source)
    for top, stmt in enumerate(collector.tree.body):
        collector.top = top
        collector.visit(stmt, collector.tree)
    mutants = sorted(collector.mutants, key=lambda m: (m.span, m.operator, m.after))
    seen: dict = {}
    for mutant in mutants:
        key = (mutant.qualname, mutant.operator, mutant.before, mutant.after)
        mutant.occurrence = seen.get(key, 0)
        seen[key] = mutant.occurrence + 1
    return mutants
