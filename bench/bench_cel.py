"""Compile and evaluation time of CEL selectors per candidate library (extender/dra/cel/
explains the choice). A plain script: `python bench/bench_cel.py`."""

from __future__ import annotations

import time
from collections.abc import Callable

TYPICAL = ('device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].model == "a100" '
           '&& device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0')
EXPRESSIONS = {
    "driver": 'device.driver == "gpu.example.com"',
    "typical": TYPICAL,
    "exists": 'device.attributes["gpu.example.com"].exists(k, k == "model")',
}
GIB = 1024**3
PLAIN = {"driver": "gpu.example.com", "attributes": {"gpu.example.com": {"model": "a100", "cores": 108}},
         "capacity": {"gpu.example.com": {"memory": 80 * GIB}}}


def timed(fn: Callable[[], object], rounds: int) -> float:
    start = time.perf_counter()
    for _ in range(rounds):
        fn()
    return (time.perf_counter() - start) / rounds * 1e6


def ours() -> tuple[Callable[[str], object], Callable[[object], object]]:
    from extender.dra.cel import cel_device, compile_selector
    device = cel_device("gpu.example.com", {"model": {"string": "a100"}, "cores": {"int": 108}},
                        {"memory": {"value": "80Gi"}})
    return compile_selector.__wrapped__, lambda selector: selector.matches(device)


def rust() -> tuple[Callable[[str], object], Callable[[object], object]]:
    import cel  # common-expression-language: quantities can only be ints here
    context = cel.Context(variables={"device": PLAIN},
                          functions={"quantity": lambda s: 40 * GIB, "compareTo": lambda a, b: (a > b) - (a < b)})
    return cel.compile, lambda program: program.execute(context)


def cpp() -> tuple[Callable[[str], object], Callable[[object], object]]:
    from cel_expr_python import cel  # cel-cpp: no Python-backed types, quantities as ints
    from cel_expr_python.ext import ext_strings
    T = cel.Type
    env = cel.NewEnv(variables={"device": T.Map(T.STRING, T.DYN)}, extensions=[ext_strings.ExtStrings()],
                     functions=[cel.FunctionDecl("quantity", [cel.Overload("q", T.INT, [T.STRING], impl=lambda s: 40 * GIB)]),
                                cel.FunctionDecl("compareTo", [cel.Overload("c", T.INT, [T.DYN, T.INT], is_member=True,
                                                                            impl=lambda a, b: (a > b) - (a < b))])])
    return env.compile, lambda expression: expression.eval(data={"device": PLAIN})


def celpy() -> tuple[Callable[[str], object], Callable[[object], object]]:
    import celpy as lib
    from celpy import celtypes
    env = lib.Environment()
    functions = {"quantity": lambda s: celtypes.IntType(40 * GIB),
                 "compareTo": lambda a, b: celtypes.IntType((a > b) - (a < b))}
    device = lib.json_to_cel(PLAIN)
    return (lambda text: env.program(env.compile(text), functions=functions),
            lambda program: program.evaluate({"device": device}))


def main() -> None:
    print(f"{'library':<30} {'expression':<10} {'compile µs':>12} {'eval µs':>10}")
    for name, factory, rounds in (("extender.dra.cel", ours, 2000), ("common-expression-language", rust, 2000),
                                  ("cel-expr-python", cpp, 2000), ("cel-python (celpy)", celpy, 20)):
        try:
            compile_, evaluate = factory()
        except ImportError as exc:
            print(f"{name:<30} not installed ({exc.name})")
            continue
        for label, text in EXPRESSIONS.items():
            try:
                program = compile_(text)
                evaluate(program)
            except Exception as exc:  # noqa: BLE001 - report what a library cannot do
                print(f"{name:<30} {label:<10} {'fails: ' + str(exc)[:60]}")
                continue
            print(f"{name:<30} {label:<10} {timed(lambda c=compile_, t=text: c(t), rounds):>12.1f} "
                  f"{timed(lambda e=evaluate, p=program: e(p), rounds * 5):>10.2f}")


if __name__ == "__main__":
    main()
