"""The CEL device selectors, against the cases of dynamic-resource-allocation/cel/compile_test.go."""

from __future__ import annotations

import pytest

from extender.dra.cel import CelError, CelRuntimeError, Selector, cel_device, compile_selector

DRIVER = "dra.example.com"


def device(attributes=None, capacity=None, driver=DRIVER, **kw):
    return cel_device(driver, attributes or {}, capacity or {}, **kw)


ALL = device(
    {"bool": {"bool": True}, "int": {"int": 1}, "string": {"string": "fish"},
     "version": {"version": "1.0.0"}, "services": {"string": "some_example_value"},
     "other.example.com/name": {"bool": True}},
    {"quantity": {"value": "1Mi"}, "memory": {"value": "1Gi"}},
)

MATCHING = [
    ("true", True),
    ("false", False),
    ('"no-such-domain" in device.attributes', False),
    ('"dra.example.com" in device.attributes', True),
    ('device.driver == "dra.example.com"', True),
    ('device.driver != "gpu.example.com"', True),
    ('device.attributes["dra.example.com"].bool', True),
    ('device.attributes["dra.example.com"]["bool"]', True),
    ('cel.bind(dra, device.attributes["dra.example.com"], dra.bool)', True),
    ('device.attributes["other.example.com"].name', True),
    ('device.attributes["dra.example.com"].int > 0', True),
    ('device.attributes["dra.example.com"].string == "fish"', True),
    ('device.attributes["dra.example.com"].version.isGreaterThan(semver("0.0.1"))', True),
    ('device.attributes["dra.example.com"].version.isGreaterThan(semver("v0.0.1", true)) && isSemver("v1.0.0", true)', True),
    ('device.attributes["dra.example.com"].version.compareTo(semver("1.0.0")) == 0', True),
    ('device.attributes["dra.example.com"].version.isLessThan(semver("1.0.0-alpha"))', False),
    ('semver("1.0.0-alpha").isLessThan(semver("1.0.0-alpha.1"))', True),
    ('semver("1.2.3").major() == 1 && semver("1.2.3").patch() == 3', True),
    ('device.capacity["dra.example.com"].quantity.isGreaterThan(quantity("1Ki"))', True),
    ('device.capacity["dra.example.com"].memory.compareTo(quantity("1024Mi")) == 0', True),
    ('device.capacity["dra.example.com"].memory == quantity("1024Mi")', True),
    ('device.capacity["dra.example.com"].memory.isLessThan(quantity("1G"))', False),
    ('device.capacity["dra.example.com"].memory.asInteger() == 1073741824', True),
    ('device.capacity["dra.example.com"].memory.add(quantity("1Gi")).asApproximateFloat() == 2147483648.0', True),
    ('device.capacity["dra.example.com"].memory.sub(1).isInteger() && sign(quantity("-1")) == -1', True),
    ('"name" in device.capacity["dra.example.com"] && device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))', False),
    ('!("name" in device.capacity["dra.example.com"]) || device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))', True),
    ('device.attributes.exists_one(x, x == "dra.example.com")', True),
    ('device.attributes["dra.example.com"].exists_one(x, x == "services")', True),
    ('device.capacity["dra.example.com"].exists_one(x, x == "memory")', True),
    ('device.attributes["dra.example.com"].services.split("example").size() >= 2', True),
    ('device.attributes["dra.example.com"].string.matches("^f.sh$")', True),
    ('device.attributes["dra.example.com"].string.startsWith("fi") && "FISH".lowerAscii() == device.attributes["dra.example.com"].string', True),
    ('device.attributes["dra.example.com"].string.upperAscii().endsWith("SH") && "a-b".replace("-", "") == "ab"', True),
    ('has(device.attributes["dra.example.com"].bool) && !has(device.attributes["dra.example.com"].nope)', True),
    ("device.allowMultipleAllocations == false", True),
    ("[1, 2, 3].map(x, x * 2).filter(x, x > 2) == [4, 6] && [1, 2].all(x, x > 0)", True),
    ("sets.contains([1, 2, 3], [2]) && [3, 1, 2].max() == 3 && [1, 2].isSorted()", True),
    ("7 / -2 == -3 && 7 % -2 == 1 && 1 == 1.0 && 2u > 1u", True),
    # An error on one side of || or && is absorbed when the other side decides (CEL semantics).
    ('device.attributes["dra.example.com"].nope || true', True),
    ('false && device.attributes["dra.example.com"].nope', False),
]


@pytest.mark.parametrize(("expression", "expected"), MATCHING)
def test_matches(expression, expected):
    assert compile_selector(expression).matches(ALL) is expected


def test_driver_domain_applies_only_to_unqualified_names():
    gpu = cel_device("gpu.example.com", {"model": {"string": "a100"}, "x.example.com/model": {"string": "h100"}}, {})
    assert compile_selector('device.attributes["gpu.example.com"].model == "a100"').matches(gpu)
    assert compile_selector('device.attributes["x.example.com"].model == "h100"').matches(gpu)
    assert not compile_selector('"model" in device.attributes["dra.example.com"]').matches(gpu)


def test_allow_multiple_allocations():
    selector = compile_selector("device.allowMultipleAllocations")
    assert selector.matches(device(allow_multiple_allocations=True))
    assert not selector.matches(device())


@pytest.mark.parametrize(("expression", "message"), [
    ('device.attributes["no-such-domain"].noSuchAttr.isGreaterThan(quantity("0"))', "no such key: noSuchAttr"),
    ('device.attributes["no-such-domain"]["noSuchAttr"].isGreaterThan(quantity("0"))', "no such key: noSuchAttr"),
    ('device.capacity["dra.example.com"].nope.isGreaterThan(quantity("0"))', "no such key: nope"),
    ('device.attributes["dra.example.com"].int.startsWith("a")', "no such overload"),
    ('device.attributes["dra.example.com"].string > 1', "no such overload"),
    ('device.attributes["dra.example.com"].version.isGreaterThan(quantity("1"))', "no such overload"),
    ('device.attributes["dra.example.com"].string', "could not be converted to bool"),
    ('quantity("1.5").asInteger() == 1', "cannot convert value to integer"),
    ('quantity("three").isInteger()', "quantities must match"),
    ('semver("01.0.0").major() == 1', "invalid semantic version"),
    ("1 / 0 == 0", "division by zero"),
    ("9223372036854775807 + 1 > 0", "integer overflow"),
    ('[1][1] == 1', "index out of bounds: 1"),
])
def test_runtime_errors(expression, message):
    with pytest.raises(CelRuntimeError, match=message):
        compile_selector(expression).matches(ALL)


@pytest.mark.parametrize(("expression", "message"), [
    ("?!", "Syntax error"),
    ("device.driver ==", "Syntax error"),
    ("1", "must evaluate to bool or the unknown type, not int"),
    ('device.driver', "not string"),
    ('quantity("1")', "not kubernetes.Quantity"),
    ("device.noSuchField", "undefined field 'noSuchField'"),
    ("noSuchVariable == 1", "undeclared reference to 'noSuchVariable'"),
    ("noSuchFunction(1)", "undeclared reference to 'noSuchFunction'"),
    ('1 == "a"', "found no matching overload for '_==_'"),
    ('device.driver.isGreaterThan(quantity("1"))', "found no matching overload for 'isGreaterThan'"),
    ("1 && true", "found no matching overload for '_&&_'"),
])
def test_compile_errors(expression, message):
    with pytest.raises(CelError, match=message) as caught:
        compile_selector(expression)
    assert repr(expression) in str(caught.value)


def test_syntax_error_names_position():
    with pytest.raises(CelError, match=r"<input>:1:1: Syntax error"):
        compile_selector("?!")


def test_expensive_expression_is_refused_by_the_cost_limit():
    # compile_test.go "expensive": a worst-case cost of 85555551, far over 1000000.
    lists = "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]"
    expression = (f"{lists}.all(x, {lists}.all(y, {lists}.all(z, {lists}.all(z2, {lists}.all(z3, "
                  f"{lists}.all(z4, {lists}.all(z5, int('1'.find('[0-9]*')) < 100)))))))")
    with pytest.raises(CelError, match="exceeds cost limit"):
        compile_selector(expression)


def test_runtime_cost_limit_stops_growing_strings():
    # Cheap to estimate, but each bind doubles the string: the run-time budget stops it.
    expression = '"0123456789"'
    for i in range(40):
        expression = f"cel.bind(s{i}, {expression}, s{i} + s{i})"
    with pytest.raises(CelRuntimeError, match="actual cost limit exceeded"):
        compile_selector(f"{expression}.size() > 0").matches(ALL)


def test_device_with_unsupported_attribute_fails_every_selector():
    # compile_test.go "attribute-access-causes-match-error" (list-type attributes gated off).
    listed = device({"names": {"strings": ["fish", "bird"]}})
    with pytest.raises(CelRuntimeError, match="attribute names: unsupported attribute value"):
        compile_selector("true").matches(listed)
    bad_version = device({"v": {"version": "one"}})
    with pytest.raises(CelRuntimeError, match="parse semantic version"):
        compile_selector("true").matches(bad_version)


def test_compile_cache_returns_the_same_object():
    first = compile_selector('device.driver == "x"')
    assert isinstance(first, Selector)
    assert compile_selector('device.driver == "x"') is first
    assert first.expression == 'device.driver == "x"'


def test_device_is_reused_across_selectors():
    gpu = device({"model": {"string": "a100"}}, {"memory": {"value": "40Gi"}})
    typical = compile_selector(
        'device.driver == "dra.example.com" && device.attributes["dra.example.com"].model == "a100" '
        '&& device.capacity["dra.example.com"].memory.compareTo(quantity("40Gi")) >= 0')
    assert typical.matches(gpu)
    assert not compile_selector('device.attributes["dra.example.com"].model == "h100"').matches(gpu)
    assert typical.matches(gpu)
