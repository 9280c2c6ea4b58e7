"""Random DRA CEL selectors for the differential test against kube-scheduler's own CEL
(tests/devices/test_cel_upstream.py): attributes and capacities of a device in the driver's domain and
another, their functions and operators, the macros, optional access and cel.bind, nested a few levels,
right or wrong (missing keys, mismatched types, overflows), as selectors are written."""

from __future__ import annotations

import random
from collections.abc import Callable

from koordpy.api.dra import AttrValue, SemVer

DRIVER = "dra.example.com"
ATTRIBUTES: dict[str, AttrValue] = {
    "i": 3, "j": -2, "s": "h100", "t": "GPU-0a", "b": True, "f": False, "v": SemVer("1.2.3"),
    "w": SemVer("2.0.0-rc.1"), "li": (1, 2, 3), "ls": ("a", "b"), "lb": (True,), "lv": (SemVer("1.0.0"),),
    "le": (), "other.example.com/o": 7,
}
CAPACITY = {"mem": "80Gi", "cores": "132", "frac": "1.5", "milli": "1500m", "other.example.com/bw": "10G"}
_SCALARS = ["1", '"a"', "true"]
_COMPARED = ["1", '"h100"', "true", 'semver("1.2.3")', "3", "[1, 2, 3]"]


class Generator:
    def __init__(self, seed: int) -> None:
        self.r = random.Random(seed)

    def pick(self, options: list[str]) -> str:
        return self.r.choice(options)

    def one(self, options: list[Callable[[], str]]) -> str:
        return self.r.choice(options)()

    def attr(self, name: str, domain: str = DRIVER) -> str:
        return self.pick([f'device.attributes["{domain}"].{name}', f'device.attributes["{domain}"]["{name}"]'])

    def integer(self, d: int) -> str:
        if d <= 0:
            return self.pick([str(self.r.randint(-5, 5)), self.attr(self.pick(["i", "j"])),
                              'device.attributes["other.example.com"].o'])
        return self.one([
            lambda: f"({self.integer(d - 1)} {self.pick(['+', '-', '*', '/', '%'])} {self.integer(d - 1)})",
            lambda: f"size({self.string(d - 1)})", lambda: f"{self.list(d - 1)}.size()",
            lambda: f"{self.quantity(d - 1)}.compareTo({self.quantity(d - 1)})",
            lambda: f"{self.version()}.{self.pick(['major', 'minor', 'patch'])}()",
            lambda: f"int({self.pick([self.string(d - 1), self.integer(d - 1), '1.5'])})",
            lambda: f"{self.string(d - 1)}.indexOf({self.string(d - 1)})",
            lambda: f"{self.quantity(d - 1)}.asInteger()", lambda: f"sign({self.quantity(d - 1)})",
            lambda: f"-{self.integer(d - 1)}", lambda: self.attr(self.pick(["i", "s", "nope"])),
        ])

    def string(self, d: int) -> str:
        if d <= 0:
            return self.pick(['"h100"', '"a"', '""', self.attr(self.pick(["s", "t"])), "device.driver"])
        return self.one([
            lambda: f"({self.string(d - 1)} + {self.string(d - 1)})", lambda: f"{self.string(d - 1)}.lowerAscii()",
            lambda: f"{self.string(d - 1)}.substring({self.r.randint(0, 3)})", lambda: f"string({self.integer(d - 1)})",
            lambda: f'{self.string(d - 1)}.replace("a", "b")', lambda: f'{self.string(d - 1)}.split("-")[0]',
            lambda: f"{self.string(d - 1)}.trim()", lambda: f'{self.string(d - 1)}.find("[0-9]+")',
            lambda: f"{self.string(d - 1)}.charAt({self.r.randint(0, 5)})",
            lambda: f'{self.attr("ls")}.join(",")',
        ])

    def quantity(self, d: int) -> str:
        name = self.pick([*CAPACITY, "nope"])
        domain = DRIVER
        if "/" in name:
            domain, name = name.split("/")
        text = self.pick(["1", "1Gi", "100m", "1.5", "2k", "80Gi", "0", "Mi", "1e3"])
        base = self.pick([f'device.capacity["{domain}"].{name}', f'quantity("{text}")'])
        if d > 0 and self.r.random() < 0.3:
            return f"{base}.{self.pick(['add', 'sub'])}({self.pick([self.quantity(d - 1), self.integer(d - 1)])})"
        return base

    def version(self) -> str:
        return self.pick([self.attr(self.pick(["v", "w"])), 'semver("1.2.3")', 'semver("1.2.3-alpha")',
                          'semver("v1.2", true)'])

    def list(self, d: int) -> str:
        if d <= 0:
            return self.pick([self.attr(self.pick(["li", "ls", "lb", "lv", "le"])), "[1, 2]", '["a", "b"]'])
        return self.one([
            lambda: f"{self.list(d - 1)}.map(x, x)",
            lambda: f"{self.list(d - 1)}.filter(x, {self.boolean(d - 1, 'x')})",
            lambda: f"({self.list(d - 1)} + {self.list(d - 1)})", lambda: f"lists.range({self.r.randint(0, 4)})",
            lambda: f"{self.list(d - 1)}.reverse()", lambda: f'{self.string(d - 1)}.split("")',
            lambda: f'device.attributes["{DRIVER}"].map(k, k)',
        ])

    def boolean(self, d: int, var: str = "") -> str:
        if d <= 0:
            present = self.pick(["s", "nope"])
            options = ["true", "false", self.attr(self.pick(["b", "f"])), "device.allowMultipleAllocations",
                       f'"{DRIVER}" in device.attributes', f'has(device.attributes["{DRIVER}"].{present})']
            if var:
                options += [f"{var} == 1", f'{var} == "a"', f"{var} > 0", f"dyn({var}) == true"]
            return self.pick(options)
        return self.one([
            lambda: f"({self.boolean(d - 1, var)} && {self.boolean(d - 1, var)})",
            lambda: f"({self.boolean(d - 1, var)} || {self.boolean(d - 1, var)})",
            lambda: f"!{self.boolean(d - 1, var)}",
            lambda: f"({self.integer(d - 1)} {self.pick(['<', '<=', '>', '>=', '==', '!='])} {self.integer(d - 1)})",
            lambda: f"({self.string(d - 1)} {self.pick(['==', '!=', '<'])} {self.string(d - 1)})",
            lambda: f"{self.string(d - 1)}.startsWith({self.string(d - 1)})",
            lambda: f"{self.string(d - 1)}.contains({self.string(d - 1)})",
            lambda: f'{self.string(d - 1)}.matches("^[a-z]+[0-9]*$")',
            lambda: f"{self.quantity(d - 1)}.{self.pick(['isGreaterThan', 'isLessThan'])}({self.quantity(d - 1)})",
            lambda: f"{self.quantity(d - 1)}.isInteger()",
            lambda: f"({self.quantity(d - 1)} == {self.quantity(d - 1)})",
            lambda: f"{self.version()}.{self.pick(['isGreaterThan', 'isLessThan'])}({self.version()})",
            lambda: f"({self.version()} == {self.version()})",
            lambda: f"{self.list(d - 1)}.{self.pick(['all', 'exists', 'exists_one'])}(x, {self.boolean(d - 1, 'x')})",
            lambda: f"{self.pick(_SCALARS)} in {self.list(d - 1)}",
            lambda: f"{self.list(d - 1)}.includes({self.pick(_SCALARS)})",
            lambda: f"({self.boolean(d - 1, var)} ? {self.boolean(d - 1, var)} : {self.boolean(d - 1, var)})",
            lambda: f'device.attributes["{DRIVER}"].?{self.pick(["s", "nope"])}.orValue("z") == "h100"',
            lambda: f'cel.bind(a, device.attributes["{DRIVER}"], a.{self.pick(["i", "nope"])} > 1)',
            lambda: f"isQuantity({self.string(d - 1)})", lambda: f"isSemver({self.string(d - 1)})",
            lambda: 'device.attributes.exists(dom, dom == "other.example.com")',
            lambda: f"{self.attr(self.pick(list(ATTRIBUTES)[:-1]))} == {self.pick(_COMPARED)}",
        ])

    def selector(self) -> str:
        return self.boolean(self.r.randint(1, 4))
