"""CEL compiled into Python closures: the partial type check, the cost estimate, and the public `Selector`."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, cast

from extender.dra.cel.library import (
    _COST,
    _IMPLS,
    _OP_NAMES,
    _OVERLOADS,
    _arith,
    _charge,
    _compare,
    _equal,
    _field,
    _has,
    _in,
    _lookup,
    _map_key,
)
from extender.dra.cel.syntax import _Node, _Parser, _Syntax
from extender.dra.cel.values import (
    _INT_MIN,
    COST_LIMIT,
    MAX_EXPRESSION_LENGTH,
    CelDevice,
    CelError,
    CelRuntimeError,
    UInt,
    _Env,
    _Fail,
    _no_overload,
    _type_name,
)

# --------------------------------------------------------------------------- checking and closures
# A kind is the static type: "bool", "int", "uint", "double", "string", "bytes", "null",
# "list", "map", "quantity", "semver", "dyn", or a device part below.

_DEVICE_FIELDS = {"driver": "string", "attributes": "attributes", "capacity": "capacity",
                  "allowMultipleAllocations": "bool"}
_PARTS = {"attributes": "attribute-map", "attribute-map": "dyn", "capacity": "capacity-map",
          "capacity-map": "quantity"}
_LITERAL_KINDS = {bool: "bool", int: "int", UInt: "uint", float: "double", str: "string",
                  bytes: "bytes", type(None): "null"}
_Code = Callable[[_Env], Any]
_Compiled = Callable[..., tuple[_Code, str, int]]  # a c_* method: a node's parts -> (code, kind, cost)


def _base(kind: str) -> str:
    return "map" if kind in _PARTS or kind == "device" else kind


def _fits(kind: str, param: str) -> bool:
    return kind == "dyn" or param == "dyn" or _base(kind) == param


class _Compiler:
    """Type-checks the tree as far as its types are known and turns it into closures."""

    def __init__(self) -> None:
        self.scope: dict[str, str] = {}

    def problem(self, message: str) -> CelError:
        return CelError(message)

    def compile(self, node: _Node) -> tuple[_Code, str, int]:
        """(code, kind, cost of one evaluation without loops)."""
        return cast(_Compiled, getattr(self, "c_" + node[0]))(*node[1:])

    def c_lit(self, value: Any) -> tuple[_Code, str, int]:
        return (lambda env: value), _LITERAL_KINDS[type(value)], 0

    def c_id(self, name: str) -> tuple[_Code, str, int]:
        if name in self.scope:
            return (lambda env: env[name]), self.scope[name], 1
        if name == "device":
            return (lambda env: env["device"]), "device", 1
        if name in ("int", "uint", "double", "string", "bool", "bytes", "list", "map", "null_type"):
            return (lambda env: name), "type", 1
        raise self.problem(f"undeclared reference to '{name}' (in container '')")

    def c_sel(self, operand: _Node, name: str) -> tuple[_Code, str, int]:
        code, kind, cost = self.compile(operand)
        if kind == "device":
            if name not in _DEVICE_FIELDS:
                raise self.problem(f"undefined field '{name}'")
            if operand == ("id", "device") and "device" not in self.scope:
                return (lambda env: env["device"][name]), _DEVICE_FIELDS[name], 2
            return (lambda env: code(env)[name]), _DEVICE_FIELDS[name], cost + 1
        if kind in _PARTS:
            return (lambda env: _field(code(env), name)), _PARTS[kind], cost + 1
        if kind not in ("dyn", "map"):
            raise self.problem(f"type '{kind}' does not support field selection")
        return (lambda env: _field(code(env), name)), "dyn", cost + 1

    def c_has(self, operand: _Node, name: str) -> tuple[_Code, str, int]:
        code, kind, cost = self.compile(operand)
        if kind == "device":
            if name not in _DEVICE_FIELDS:
                raise self.problem(f"undefined field '{name}'")
            return (lambda env: True), "bool", cost + 1
        if kind not in ("dyn", "map") and kind not in _PARTS:
            raise self.problem(f"invalid type for field selection: {kind}")
        return (lambda env: _has(code(env), name)), "bool", cost + 1

    def c_idx(self, operand: _Node, key: _Node) -> tuple[_Code, str, int]:
        code, kind, cost = self.compile(operand)
        kcode, kkind, kcost = self.compile(key)
        if kind == "device":
            raise self.problem("found no matching overload for '_[_]' applied to "
                               f"'(kubernetes.DRADevice, {kkind})'")
        if _base(kind) not in ("dyn", "map", "list") or (kind in _PARTS and kkind not in ("dyn", "string")):
            raise self.problem(f"found no matching overload for '_[_]' applied to '({_base(kind)}, {kkind})'")
        result = _PARTS.get(kind, "dyn")
        if key[0] == "lit":
            k = key[1]
            return (lambda env: _lookup(code(env), k)), result, cost + 1
        return (lambda env: _lookup(code(env), kcode(env))), result, cost + kcost + 1

    def c_list(self, items: list[_Node]) -> tuple[_Code, str, int]:
        codes = [self.compile(item) for item in items]
        kinds = {k for _, k, _ in codes} - {"dyn"}
        if len(kinds) > 1:
            raise self.problem(f"type mismatch: {' vs '.join(sorted(kinds))} in list literal")
        fns = [c for c, _, _ in codes]
        return (lambda env: [f(env) for f in fns]), "list", 1 + sum(c for _, _, c in codes)

    def c_map(self, pairs: list[tuple[_Node, _Node]]) -> tuple[_Code, str, int]:
        codes = [(self.compile(k), self.compile(v)) for k, v in pairs]

        def build(env: _Env) -> dict[Any, Any]:
            out: dict[Any, Any] = {}
            for (kf, _, _), (vf, _, _) in codes:
                key = _map_key(kf(env))
                if key in out:
                    raise _Fail(f"Failed with repeated key: {key}")
                out[key] = vf(env)
            return out
        return build, "map", 1 + sum(k[2] + v[2] for k, v in codes)

    def _boolean(self, kind: str, name: str) -> None:
        if kind not in ("bool", "dyn"):
            raise self.problem(f"found no matching overload for '{name}' applied to '({kind})'")

    def c_not(self, operand: _Node) -> tuple[_Code, str, int]:
        code, kind, cost = self.compile(operand)
        self._boolean(kind, "!_")

        def negate(env: _Env) -> bool:
            value = code(env)
            if type(value) is not bool:
                raise _no_overload("!_", value)
            return not value
        return negate, "bool", cost + 1

    def c_neg(self, operand: _Node) -> tuple[_Code, str, int]:
        code, kind, cost = self.compile(operand)
        if kind not in ("int", "double", "dyn"):
            raise self.problem(f"found no matching overload for '-_' applied to '({kind})'")

        def negate(env: _Env) -> Any:
            value = code(env)
            if type(value) is float:
                return -value
            if type(value) is not int:
                raise _no_overload("-_", value)
            if value == _INT_MIN:
                raise _Fail("integer overflow")
            return -value
        return negate, kind, cost + 1

    def _logic(self, a: _Node, b: _Node, is_and: bool) -> tuple[_Code, str, int]:
        name = "_&&_" if is_and else "_||_"
        left, lkind, lcost = self.compile(a)
        right, rkind, rcost = self.compile(b)
        if lkind not in ("bool", "dyn") or rkind not in ("bool", "dyn"):
            raise self.problem(f"found no matching overload for '{name}' applied to '({lkind}, {rkind})'")
        decided = not is_and  # the value that decides the result on its own

        def logic(env: _Env) -> bool:
            # CEL is commutative here: an error on one side is absorbed when the other
            # side alone decides the result.
            try:
                x: object = left(env)  # object, not Any: `x is decided` must not make `decided` Any
                if x is decided:
                    return decided
                failure = None if type(x) is bool else _no_overload(name, x)
            except _Fail as exc:
                failure = exc
            y: object = right(env)
            if y is decided:
                return decided
            if type(y) is not bool:
                raise failure or _no_overload(name, x, y)
            if failure is not None:
                raise failure
            return y
        return logic, "bool", lcost + rcost + 1

    def c_and(self, a: _Node, b: _Node) -> tuple[_Code, str, int]:
        return self._logic(a, b, True)

    def c_or(self, a: _Node, b: _Node) -> tuple[_Code, str, int]:
        return self._logic(a, b, False)

    def c_cond(self, cond: _Node, yes: _Node, no: _Node) -> tuple[_Code, str, int]:
        c, ckind, ccost = self.compile(cond)
        self._boolean(ckind, "_?_:_")
        y, ykind, ycost = self.compile(yes)
        n, nkind, ncost = self.compile(no)

        def choose(env: _Env) -> Any:
            test = c(env)
            if type(test) is not bool:
                raise _no_overload("_?_:_", test)
            return y(env) if test else n(env)
        kind = ykind if ykind == nkind else "dyn"
        return choose, kind, ccost + max(ycost, ncost) + 1

    def c_op(self, op: str, a: _Node, b: _Node) -> tuple[_Code, str, int]:
        left, lkind, lcost = self.compile(a)
        right, rkind, rcost = self.compile(b)
        cost = lcost + rcost + 1
        lb, rb = _base(lkind), _base(rkind)
        known = "dyn" not in (lb, rb)
        numbers = {"int", "uint", "double"}
        mismatch = f"found no matching overload for '{_OP_NAMES[op]}' applied to '({lb}, {rb})'"
        if op in ("==", "!="):
            if known and lb != rb and not (lb in numbers and rb in numbers) and "null" not in (lb, rb):
                raise self.problem(mismatch)
            want = op == "=="
            if b[0] == "lit" and type(b[1]) is str:
                s = b[1]

                def equal_str(env: _Env) -> bool:
                    x = left(env)
                    return (x == s) is want if type(x) is str else want is False
                return equal_str, "bool", cost
            return (lambda env: _equal(left(env), right(env)) is want), "bool", cost
        if op in ("<", "<=", ">", ">="):
            if known and not (lb == rb and lb in ("int", "uint", "double", "string", "bytes", "bool")
                              or lb in numbers and rb in numbers):
                raise self.problem(mismatch)
            return (lambda env: _compare(left(env), right(env), op)), "bool", cost
        if op == "in":
            if known and rb not in ("list", "map"):
                raise self.problem(mismatch)
            return (lambda env: _in(left(env), right(env))), "bool", cost
        if known and not (lb == rb and (lb in numbers or op == "+" and lb in ("string", "bytes", "list"))):
            raise self.problem(mismatch)
        if op == "+" and lb in ("string", "list", "dyn"):
            def concat(env: _Env) -> Any:
                out = _arith("+", left(env), right(env))
                if isinstance(out, str | list):
                    _charge(env, 0.1 * len(out))
                return out
            return concat, lb, cost
        return (lambda env: _arith(op, left(env), right(env))), lb if known else "dyn", cost

    def c_call(self, name: str, target: _Node | None, args: list[_Node]) -> tuple[_Code, str, int]:
        if name not in _OVERLOADS:
            raise self.problem(f"undeclared reference to '{name}' (in container '')")
        compiled = ([self.compile(target)] if target is not None else []) + [self.compile(a) for a in args]
        kinds = [k for _, k, _ in compiled]
        member = target is not None
        results = {result for is_member, params, result in _OVERLOADS[name]
                   if (is_member == member or name == "sign") and len(params) == len(kinds)
                   and all(_fits(k, p) for k, p in zip(kinds, params, strict=True))}
        if not results:
            shown = ", ".join(_base(k).replace("quantity", "kubernetes.Quantity")
                              .replace("semver", "kubernetes.Semver") for k in kinds)
            where = f"'{name}' applied to '{_base(kinds[0])}.({', '.join(_base(k) for k in kinds[1:])})'" \
                if member else f"'{name}' applied to '({shown})'"
            raise self.problem(f"found no matching overload for {where}")
        impl = _IMPLS[name]
        if name in ("quantity", "semver") and all(a[0] == "lit" for a in args):
            try:  # parsed once here instead of on every evaluation
                constant = impl({}, *(a[1] for a in args))
                return (lambda env: constant), name, 1
            except _Fail:
                pass  # a bad literal fails at run time, as in Kubernetes
        fns = [c for c, _, _ in compiled]
        cost = 1 + sum(c for _, _, c in compiled)
        kind = results.pop() if len(results) == 1 else "dyn"
        if len(fns) == 1:
            (f,) = fns
            return (lambda env: impl(env, f(env))), kind, cost
        if len(fns) == 2:
            f, g = fns
            return (lambda env: impl(env, f(env), g(env))), kind, cost
        return (lambda env: impl(env, *[h(env) for h in fns])), kind, cost

    def c_bind(self, var: str, init: _Node, body: _Node) -> tuple[_Code, str, int]:
        icode, ikind, icost = self.compile(init)
        saved = self.scope.get(var)
        self.scope[var] = ikind
        try:
            bcode, bkind, bcost = self.compile(body)
        finally:
            self._restore(var, saved)

        def bind(env: _Env) -> Any:
            outer = env.get(var, _UNSET)
            env[var] = icode(env)
            try:
                return bcode(env)
            finally:
                _put_back(env, var, outer)
        return bind, bkind, icost + bcost + 1

    def _restore(self, var: str, saved: str | None) -> None:
        if saved is None:
            self.scope.pop(var, None)
        else:
            self.scope[var] = saved

    def c_comp(self, macro: str, range_: _Node, var: str, arg: _Node, extra: _Node | None
               ) -> tuple[_Code, str, int]:
        rcode, rkind, rcost = self.compile(range_)
        if _base(rkind) not in ("list", "map", "dyn"):
            raise self.problem(f"expression of type '{_base(rkind)}' cannot be range of a comprehension "
                               "(must be list, map, or dynamic)")
        element = {"attributes": "string", "attribute-map": "string", "capacity": "string",
                   "capacity-map": "string"}.get(rkind, "dyn")
        saved = self.scope.get(var)
        self.scope[var] = element
        try:
            first, fkind, fcost = self.compile(arg)
            second, skind, scost = self.compile(extra) if extra is not None else (None, "dyn", 0)
        finally:
            self._restore(var, saved)
        if macro in ("all", "exists", "exists_one", "filter") or extra is not None:
            self._boolean(fkind, macro)
        step = fcost + scost + 3  # cel-go charges the loop condition and the step as well

        def loop(env: _Env) -> Any:
            items = rcode(env)
            if not isinstance(items, list | tuple | dict):
                raise _Fail(f"got '{_type_name(items)}', expected iterable type")
            outer = env.get(var, _UNSET)
            try:
                return _iterate(env, macro, list(items), var, first, second, step)
            finally:
                _put_back(env, var, outer)
        kind = "bool" if macro in ("all", "exists", "exists_one") else "list"
        return loop, kind, rcost + _range_size(range_, rkind) * step


def _range_size(node: _Node, kind: str) -> int:
    """The most elements a comprehension's range can have, for the worst-case cost: a
    literal's length, 32 domains or names in a device (ResourceSliceMaxAttributesAndCapacities
    PerDevice), otherwise 64 (an attribute string's maximum length, DeviceAttributeMaxValueLength,
    bounds what split and friends can make of it)."""
    if node[0] in ("list", "map"):
        return len(node[1])
    return 32 if kind in _PARTS else 64


_UNSET = object()


def _put_back(env: _Env, var: str, outer: Any) -> None:
    if outer is _UNSET:
        env.pop(var, None)
    else:
        env[var] = outer


def _iterate(env: _Env, macro: str, items: list[Any], var: str, first: _Code, second: _Code | None,
             step: int) -> Any:
    budget = env[_COST]
    if macro == "map" or macro == "filter":
        out = []
        for item in items:
            budget[0] -= step
            if budget[0] < 0:
                raise _Fail("operation cancelled: actual cost limit exceeded")
            env[var] = item
            if macro == "filter":
                keep = first(env)
                if type(keep) is not bool:
                    raise _no_overload("filter", keep)
                if keep:
                    out.append(item)
            elif second is None:
                out.append(first(env))
            else:
                keep = first(env)
                if type(keep) is not bool:
                    raise _no_overload("map", keep)
                if keep:
                    out.append(second(env))
        return out
    decided = macro == "exists"  # all: False decides, exists: True decides
    failure: _Fail | None = None
    count = 0
    for item in items:
        budget[0] -= step
        if budget[0] < 0:
            raise _Fail("operation cancelled: actual cost limit exceeded")
        env[var] = item
        try:
            value = first(env)
        except _Fail as exc:
            if macro == "exists_one":
                raise
            failure = failure or exc
            continue
        if type(value) is not bool:
            raise _no_overload(macro, value)
        if macro == "exists_one":
            count += value
        elif value is decided:
            return decided
    if macro == "exists_one":
        return count == 1
    if failure is not None:
        raise failure
    return not decided


# --------------------------------------------------------------------------- the API


class Selector:
    """One compiled selector expression; `matches` evaluates it on a device."""

    __slots__ = ("expression", "_code")

    def __init__(self, expression: str, code: _Code) -> None:
        self.expression = expression
        self._code = code

    def matches(self, device: CelDevice) -> bool:
        """True if the device is selected; CelRuntimeError if evaluation fails (compile.go
        DeviceMatches), including a result that is not a bool."""
        if device.error is not None:
            raise CelRuntimeError(device.error)
        try:
            result = self._code({"device": device.value, _COST: [COST_LIMIT]})
        except _Fail as exc:
            raise CelRuntimeError(str(exc)) from None
        except RecursionError:
            raise CelRuntimeError("expression recursion limit exceeded") from None
        if type(result) is not bool:
            raise CelRuntimeError(f"CEL result of type {_type_name(result)} could not be converted to bool")
        return result

    def __repr__(self) -> str:
        return f"Selector({self.expression!r})"


@functools.lru_cache(maxsize=4096)
def compile_selector(expression: str) -> Selector:
    """Compiled once per distinct expression (cached, bounded); raises CelError.

    The message reads like Kubernetes' ("compilation failed: ERROR: <input>:1:1: Syntax
    error: ...", "must evaluate to bool or the unknown type, not int"), prefixed with the
    expression.
    """
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise CelError(f"{expression[:40]!r}...: may not be longer than {MAX_EXPRESSION_LENGTH} bytes")
    try:
        tree = _Parser(expression).parse()
        code, kind, cost = _Compiler().compile(tree)
    except _Syntax as exc:
        line = expression.count("\n", 0, exc.pos) + 1
        column = exc.pos - (expression.rfind("\n", 0, exc.pos) + 1) + 1
        raise CelError(f"{expression!r}: compilation failed: ERROR: <input>:{line}:{column}: "
                       f"Syntax error: {exc}") from None
    except CelError as exc:
        raise CelError(f"{expression!r}: compilation failed: ERROR: <input>: {exc}") from None
    except RecursionError:
        raise CelError(f"{expression!r}: compilation failed: expression nesting too deep") from None
    if kind not in ("bool", "dyn"):
        shown = {"quantity": "kubernetes.Quantity", "semver": "kubernetes.Semver", "null": "null_type"}
        raise CelError(f"{expression!r}: must evaluate to bool or the unknown type, "
                       f"not {shown.get(_base(kind), _base(kind))}")
    if cost > COST_LIMIT:
        # The API server refuses such an expression (validation.go validateCELSelector), so
        # it never reaches kube-scheduler; refusing it here keeps a cycle from spending the
        # whole run-time budget on every device.
        raise CelError(f"{expression!r}: too complex, exceeds cost limit")
    return Selector(expression, code)
