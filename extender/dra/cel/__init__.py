"""CEL device selectors: `selectors[].cel.expression` of DeviceClasses and requests.

Kubernetes compiles each expression once (dynamic-resource-allocation/cel/compile.go,
cache.go) in an environment with one variable, `device` (driver, attributes, capacity,
allowMultipleAllocations), the Kubernetes base libraries (apiserver/pkg/cel/environment/
base.go) and a runtime cost limit of resourceapi.CELSelectorExpressionMaxCost = 1,000,000
(api/resource/v1/types.go). The scheduler's cache skips the cost *estimate* (cache.go:
DisableCostEstimation); the API server refuses expressions whose worst-case estimate is
over the limit (validation.go), so they never reach it. Here both happen: compile_selector
refuses an expression whose worst-case estimate is over the limit ("too complex, exceeds
cost limit"), and evaluation still stops with "actual cost limit exceeded" once it has
spent its budget (string and list growth is charged by size): nothing can stall a cycle.

Why an evaluator of our own. Measured with bench/bench_cel.py on this machine (2 cores,
Python 3.11; typical selector = driver, a string attribute and a quantity compareTo):

    library (typical selector)           compile µs   eval µs   fits Kubernetes?
    cel-python 0.5 (celpy)                  3700      3000   custom types; no cost limit, no string ext
    common-expression-language 0.10      150-250       6     no custom types (quantity only as an int),
                                                             no cost limit, no lowerAscii, no type check
    cel-expr-python 0.1.3 (cel-cpp)      300-500     29-34   type-checked, string ext; no Python-backed
                                                             opaque types (quantity/semver), no cost limit
    this module                          220-430      7-8    quantity, semver, cost limit, Kubernetes errors

(The machine is shared, so figures vary up to 2x between runs; `python bench/bench_cel.py`
prints the current ones.) The native libraries cannot carry Quantity and Semver values,
and none bounds evaluation, which Kubernetes requires; celpy is ~400x too slow for per-node
work. The expressions are short (at most 10 KiB, validation.go), so a small
recursive-descent parser that compiles the tree into Python closures gives Kubernetes'
semantics at an evaluation speed close to the Rust bindings' (which convert the whole
device on every call) and 4x faster than cel-cpp's; the device is built once.

What is supported: the CEL language (literals, lists, maps, operators with CEL's error
absorbing && and ||, ?:, `in`, field and index selection, has(), all/exists/exists_one/
map/filter, cel.bind), the standard functions (size, contains, startsWith, endsWith,
matches, int/uint/double/string/bool/bytes/dyn conversions), Kubernetes' string extension
(charAt, indexOf, lastIndexOf, lowerAscii, upperAscii, replace, split, substring, trim,
join, reverse), regular expressions (find, findAll), Kubernetes lists (isSorted, sum, min, max, indexOf,
lastIndexOf), ext.Sets (sets.contains/equivalent/intersects), quantity and semver.

Known differences from cel-go: the type checker is partial (undeclared identifiers and
functions, unknown `device` fields, overloads on statically known types and a non-bool
result are compile errors; anything reaching through an attribute is dynamic and checked
at run time, as in Kubernetes where attributes are of the unknown type); cost is charged
per comprehension iteration and per character or element handled by the string and list
functions rather than cel-go's exact per-node accounting, so the limit trips at a similar
but not identical point; `matches` uses Python's `re` (RE2 syntax mostly agrees);
not supported (they are compile errors): optional types (`?.`, `optional.of`), URLs, IP,
CIDR, format, two-variable comprehensions, ext.Lists v3 (lists.range, sort, ...), message
construction, timestamps and durations, and list-type attributes (DRAListTypeAttributes,
alpha: such an attribute fails the device with "unsupported attribute value", as
Kubernetes does with the gate off).
The package, by stage: values.py (errors, uint, Quantity, Semver, the `device` variable),
syntax.py (tokens and parser), library.py (functions and operators, each charging its cost),
compiler.py (the type check, the cost estimate, the closures and `Selector`).
"""

from __future__ import annotations

from extender.dra.cel.compiler import Selector, compile_selector
from extender.dra.cel.values import CelDevice, CelError, CelRuntimeError, cel_device

# What the allocator and the device model use; the limits and value types stay in values.py.
__all__ = ["CelDevice", "CelError", "CelRuntimeError", "Selector", "cel_device", "compile_selector"]
