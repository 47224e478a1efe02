#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Protocol fuzzer: structured random requests against a running shutterd over its socket.

Starts the given shutterd on a socket in a temporary directory (or uses --socket of one
already running) and sends generated requests: valid ones of every type, every field of
setInteraction with every wrong type, bad JSON, deep nesting, huge numbers, odd ids,
duplicate and many keys, lines at and over the 65536-byte limit, CRLF, NUL bytes, blank
lines, unknown types, requests split across writes and pipelined in one; some connections
are abandoned: closed before the hello, or with requests in flight and their answers unread
(the daemon once died of the latter: a send on a descriptor it had closed).

The oracle, written with Python's own JSON reader (independent of the daemon's):
  - the daemon never dies;
  - every line received is UTF-8 JSON, one object with a string `type`;
  - every well-formed request gets its `reply` (a setInteraction's reply carries exactly
    the interaction asked for), every bad one an `error` whose code is one of
    docs/PROTOCOL.md's and is the right one where the request decides it; the `id` sent
    comes back;
  - lineTooLong and invalidJSON close the connection, the other errors do not;
  - a blank line gets nothing;
  - after every batch a fresh client still gets `hello` and a `ping` reply.

Everything random comes from --seed (printed first), so a run is repeated exactly by
giving the same seed and count. Exit status 0 when every check held, 1 on the first
failure (printed with the request that caused it), 2 on a usage error.
"""

import argparse
import errno
import json
import math
import os
import random
import selectors
import shutil
import socket
import sys
import tempfile
import time

# shutterd.testing starts the daemon; clients/python is beside Tests/ in the repository.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python"))
from shutterd import testing  # noqa: E402

LIMIT = 65536
# An object has at most this many members (docs/PROTOCOL.md).
MAX_MEMBERS = 1024
CODES = {"lineTooLong", "invalidJSON", "unknownRequest", "invalidRequest", "notPermitted", "tooManyClients",
         "invalidState"}
CLOSING = {"lineTooLong", "invalidJSON", "tooManyClients"}
KINDS = ["remote", "headset", "dial", "keyboard", "camera", "media", "mouse"]
BOOLS = ["enabled", "primary", "secondary", "defaultCaptureSoundDisabled", "grab"]
# interaction.format's values (protocol 1.7).
FORMATS = ["full", "compact"]
# (name, setting, default, lowest, highest): docs/PROTOCOL.md, setInteraction's gestures.
GESTURES = [("longPress", "after", 500, 50, 60000), ("doublePress", "within", 300, 50, 5000)]
LISTS = ["devices", "names", "buses", "kinds", "keys"]
# A reply or an error must come within this long; silence means the daemon hangs.
PATIENCE = 30.0


class Failure(Exception):
    pass


class Obj:
    """A JSON object as written: members in order, duplicates allowed."""

    def __init__(self, pairs):
        self.pairs = list(pairs)


class Raw:
    """JSON text written as is (numbers spelt a particular way, broken text)."""

    def __init__(self, text):
        self.text = text


def strict_loads(text):
    def no_constant(name):
        raise ValueError("not JSON: " + name)

    return json.loads(text, parse_constant=no_constant)


# ---------------------------------------------------------------- writing JSON text


class Writer:
    def __init__(self, rng):
        self.rng = rng

    def space(self):
        r = self.rng.random()
        if r < 0.85:
            return ""
        return "".join(self.rng.choice(" \t\r") for _ in range(self.rng.randint(1, 3)))

    def string(self, s):
        return json.dumps(s, ensure_ascii=self.rng.random() < 0.3)

    def value(self, v):
        sp = self.space
        if isinstance(v, Raw):
            return v.text
        if v is None:
            return "null"
        if v is True:
            return "true"
        if v is False:
            return "false"
        if isinstance(v, int):
            return str(v)
        if isinstance(v, float):
            return repr(v)
        if isinstance(v, str):
            return self.string(v)
        if isinstance(v, list):
            return "[" + sp() + ("," + sp()).join(self.value(x) + sp() for x in v) + "]"
        if isinstance(v, Obj):
            return (
                "{" + sp()
                + ("," + sp()).join(self.string(k) + sp() + ":" + sp() + self.value(x) + sp() for k, x in v.pairs)
                + "}"
            )
        raise TypeError(type(v))


def plain(v):
    """The Python value a JSON reader makes of v (the last of duplicate names wins)."""
    if isinstance(v, Raw):
        return strict_loads(v.text)
    if isinstance(v, list):
        return [plain(x) for x in v]
    if isinstance(v, Obj):
        out = {}
        for k, x in v.pairs:
            out[k] = plain(x)
        return out
    return v


def same(a, b):
    """JSON equality, numbers compared as numbers (a reader may turn 1e15 into an integer)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b or float(a) == float(b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


# ---------------------------------------------------------------- generating requests


def too_long(line):
    """Whether a line (with its LF) is over the limit once its LF and a CR before it are off."""
    body = line[:-1]
    if body.endswith(b"\r"):
        body = body[:-1]
    return len(body) > LIMIT


class Case:
    """One line to send and what must come back.

    expect: "reply" (name, and the interaction for setInteraction), "error" (codes), "any"
    (a reply or any documented error), "silent" (nothing)."""

    def __init__(self, kind, line, expect, name=None, codes=None, id_=None, has_id=False, interaction=None):
        self.kind = kind
        self.line = line
        self.expect = expect
        self.name = name
        self.codes = codes or set()
        self.id = id_
        self.has_id = has_id
        self.interaction = interaction

    @property
    def may_close(self):
        return self.expect == "any" or bool(self.codes & CLOSING)


class Generator:
    def __init__(self, rng, may_grab):
        self.rng = rng
        self.w = Writer(rng)
        self.may_grab = may_grab
        self.serial = 0
        self.kinds = [
            (12, self.valid_simple),
            (12, self.valid_interaction),
            (18, self.wrong_field),
            (6, self.unknown_type),
            (10, self.bad_json),
            (4, self.deep),
            (5, self.huge_number),
            (6, self.odd_id),
            (3, self.duplicate_keys),
            (0.5, self.many_keys),
            (2, self.at_limit),
            (2, self.over_limit),
            (3, self.nul),
            (3, self.blank),
            (8, self.mutated),
        ]
        self.total = sum(w for w, _ in self.kinds)

    def next(self):
        r = self.rng.uniform(0, self.total)
        for w, f in self.kinds:
            r -= w
            if r <= 0:
                return f()
        return self.kinds[-1][1]()

    def end(self):
        return "\r\n" if self.rng.random() < 0.2 else "\n"

    def line(self, text):
        return text.encode("utf-8", "surrogatepass") + self.end().encode()

    # --- values

    def text(self, n=12):
        pools = [
            "abcxyz AB*?[]-_.:/",
            "\"\\/\b\f\n\r\t\x00\x01\x1b\x7f",
            "é€ö中\u2028\u2029\ufeff",
            "\U0001f600\U0010ffff",
        ]
        pool = "".join(self.rng.sample(pools, self.rng.randint(1, len(pools))))
        return "".join(self.rng.choice(pool) for _ in range(self.rng.randint(0, n)))

    def small_id(self):
        """An id whose text stays short and shallow: echoed as is."""
        r = self.rng.randrange(9)
        if r == 0:
            return self.rng.randint(-(2**63), 2**63 - 1)
        if r == 1:
            return self.rng.randint(0, 1000)
        if r == 2:
            return self.text(8)
        if r == 3:
            return None
        if r == 4:
            return self.rng.choice([True, False])
        if r == 5:
            return self.rng.choice([0.5, -1.25e-7, 1e15, 2.5e300, -0.0])
        if r == 6:
            return [self.rng.randint(0, 9), self.text(3)]
        if r == 7:
            return Obj([("n", self.rng.randint(0, 9)), ("s", [None])])
        self.serial += 1
        return self.serial

    def with_id(self, pairs, id_=None, force=False):
        """Adds an `id` (most of the time) at a random place among the members."""
        if not force and self.rng.random() < 0.15:
            return pairs, None, False
        id_ = self.small_id() if id_ is None else id_
        pairs = list(pairs)
        pairs.insert(self.rng.randint(0, len(pairs)), ("id", id_))
        return pairs, id_, True

    def request(self, kind, pairs, expect, id_=None, force_id=False, **kw):
        members, id_, has = self.with_id(pairs, id_, force_id)
        line = self.line(self.w.value(Obj(members)))
        return Case(kind, line, expect, id_=plain(id_) if has else None, has_id=has, **kw)

    def number(self, n):
        """n (an integer) spelt one of the ways JSON allows."""
        if abs(n) < 9e15 and self.rng.random() < 0.3:
            return Raw(self.rng.choice(["%d.0" % n, "%de0" % n, "%.17gE+0" % n if n else "0e5"]))
        return n

    # --- the requests

    def valid_simple(self):
        name = self.rng.choice(["ping", "listDevices"])
        pairs = [("type", name)]
        if self.rng.random() < 0.2:
            pairs.append(("extra" + self.text(3), self.small_id()))  # other members are ignored
        if self.rng.random() < 0.1:
            pairs.append(("interaction", self.small_id()))  # read only by setInteraction
        self.rng.shuffle(pairs)
        return self.request("valid " + name, pairs, "reply", name=name)

    def interaction_value(self):
        """A valid interaction object and what it means."""
        want = {
            "enabled": True, "primary": True, "secondary": True, "defaultCaptureSoundDisabled": False,
            "grab": False, "filter": {k: [] for k in LISTS}, "slider": {"min": 0, "max": 100, "value": 50},
            "gestures": {}, "format": "full",
        }
        pairs = []
        for key in BOOLS:
            if self.rng.random() < 0.4:
                v = self.rng.choice([True, False])
                if key == "grab" and self.rng.random() < 0.7:
                    v = False
                pairs.append((key, v))
                want[key] = v
        if self.rng.random() < 0.5:
            fpairs = []
            for key in LISTS:
                if self.rng.random() < 0.5:
                    if key == "kinds":
                        items = [self.rng.choice(KINDS) for _ in range(self.rng.randint(0, 3))]
                    elif key == "keys":
                        items = [self.rng.choice(["KEY_", "BTN_", "REL_"]) + self.text(6) for _ in range(self.rng.randint(0, 3))]
                    else:
                        items = [self.text() for _ in range(self.rng.randint(0, 3))]
                    fpairs.append((key, items))
                    want["filter"][key] = items
            pairs.append(("filter", Obj(fpairs)))
        if self.rng.random() < 0.5:
            big = self.rng.random() < 0.3
            lo, hi = (-(2**63), 2**63 - 1) if big else (-1000, 1000)
            a, b = sorted([self.rng.randint(lo, hi), self.rng.randint(lo, hi)])
            spairs = []
            s = {"min": 0, "max": 100}
            if self.rng.random() < 0.8 or b < 0:
                s["min"] = a
                spairs.append(("min", self.number(a)))
            if self.rng.random() < 0.8 or a > 100:
                s["max"] = b
                spairs.append(("max", self.number(b)))
            if s["min"] > s["max"]:
                s["min"], s["max"] = a, b
                spairs = [("min", a), ("max", b)]
            if self.rng.random() < 0.5:
                s["value"] = self.rng.randint(s["min"], s["max"])
                spairs.append(("value", self.number(s["value"])))
            else:
                s["value"] = s["min"] + (s["max"] - s["min"]) // 2
            self.rng.shuffle(spairs)
            pairs.append(("slider", Obj(spairs)))
            want["slider"] = s
        if self.rng.random() < 0.4:
            gpairs = []
            for name, setting, default, lo, hi in GESTURES:
                if self.rng.random() < 0.6:
                    if self.rng.random() < 0.3:
                        gpairs.append((name, Obj([])))
                        want["gestures"][name] = {setting: default}
                    else:
                        ms = self.rng.randint(lo, hi)
                        gpairs.append((name, Obj([(setting, self.number(ms))])))
                        want["gestures"][name] = {setting: ms}
            self.rng.shuffle(gpairs)
            pairs.append(("gestures", Obj(gpairs)))
        if self.rng.random() < 0.3:
            # Protocol 1.7: the event lines' format.
            want["format"] = self.rng.choice(FORMATS)
            pairs.append(("format", want["format"]))
        self.rng.shuffle(pairs)
        return Obj(pairs), want

    def valid_interaction(self):
        value, want = self.interaction_value()
        pairs = [("type", "setInteraction")]
        if value.pairs or self.rng.random() < 0.7:
            pairs.append(("interaction", value))
        if want["grab"] and not self.may_grab:
            return self.request("grab without the right", pairs, "error", codes={"notPermitted"})
        return self.request("valid setInteraction", pairs, "reply", name="setInteraction", interaction=want)

    def wrong_of(self, good):
        """A value of some other JSON type than `good` names."""
        choices = {
            "bool": [None, 0, 1, "true", [], Obj([]), 1.5],
            "object": [None, True, 0, "x", [], [Obj([])]],
            "array": [None, False, 3, "KEY_A", Obj([])],
            "string": [None, True, 7, [], Obj([]), ["x"]],
            "int": [None, True, "5", [], Obj([]), 1.5, Raw("1e16"), Raw("9223372036854775808"),
                    Raw("-1e300"), Raw("0.1"), Raw("123456789012345678901234567890")],
        }[good]
        return self.rng.choice(choices)

    def wrong_field(self):
        """setInteraction (or the request itself) with exactly one thing wrong."""
        value, _ = self.interaction_value()
        pairs = [p for p in value.pairs]
        top = [("type", "setInteraction")]
        r = self.rng.randrange(15)
        if r == 0:
            return self.request("type not a string", [("type", self.wrong_of("string"))], "error", codes={"invalidRequest"})
        if r == 1:
            return self.request("no type", [("interaction", value)], "error", codes={"invalidRequest"})
        if r == 2:
            return self.request("interaction not an object", top + [("interaction", self.wrong_of("object"))],
                                "error", codes={"invalidRequest"})
        if r == 3:
            key = self.rng.choice(BOOLS)
            pairs = [p for p in pairs if p[0] != key] + [(key, self.wrong_of("bool"))]
            what = "interaction.%s not a boolean" % key
        elif r == 4:
            pairs = [p for p in pairs if p[0] != "filter"] + [("filter", self.wrong_of("object"))]
            what = "filter not an object"
        elif r == 5:
            key = self.rng.choice(LISTS)
            pairs = [p for p in pairs if p[0] != "filter"] + [("filter", Obj([(key, self.wrong_of("array"))]))]
            what = "filter.%s not an array" % key
        elif r == 6:
            key = self.rng.choice(LISTS)
            good = {"kinds": "remote", "keys": "KEY_A"}.get(key, "x")
            items = [good, self.wrong_of("string")]
            self.rng.shuffle(items)
            pairs = [p for p in pairs if p[0] != "filter"] + [("filter", Obj([(key, items)]))]
            what = "filter.%s holding a non-string" % key
        elif r == 7:
            key = self.rng.choice(["kinds", "keys"])
            bad = self.rng.choice(["Remote", "", "keyboard ", "KEY", "key_a", "VOLUMEUP", self.text(5) + "x"])
            pairs = [p for p in pairs if p[0] != "filter"] + [("filter", Obj([(key, [bad])]))]
            what = "filter.%s with an unknown name" % key
        elif r == 8:
            pairs = [p for p in pairs if p[0] != "slider"] + [("slider", self.wrong_of("object"))]
            what = "slider not an object"
        elif r == 9:
            key = self.rng.choice(["min", "max", "value"])
            pairs = [p for p in pairs if p[0] != "slider"] + [("slider", Obj([(key, self.wrong_of("int"))]))]
            what = "slider.%s not an integer" % key
        elif r == 10:
            a = self.rng.randint(-50, 150)
            s = self.rng.choice([[("min", a + 1), ("max", a)], [("min", 0), ("max", 10), ("value", 11)],
                                 [("min", 200)], [("max", -1)], [("value", 101)], [("min", 5), ("value", 4)]])
            pairs = [p for p in pairs if p[0] != "slider"] + [("slider", Obj(s))]
            what = "slider range or value out of order"
        elif r == 12:
            name, setting, _, lo, hi = self.rng.choice(GESTURES)
            bad = self.rng.choice([lo - 1, hi + 1, 0, -lo, 2**63 - 1, -(2**63)])
            pairs = [p for p in pairs if p[0] != "gestures"] + [("gestures", Obj([(name, Obj([(setting, bad)]))]))]
            what = "gestures.%s.%s out of bounds" % (name, setting)
        elif r == 13:
            name, setting, _, _, _ = self.rng.choice(GESTURES)
            other = {"after": "within", "within": "after"}[setting]  # the other gesture's setting
            inner = self.rng.choice([Obj([(setting, self.wrong_of("int"))]), self.wrong_of("object"),
                                     Obj([(self.rng.choice([other, "ms", ""]), 300)])])
            gestures = self.rng.choice([Obj([(name, inner)]), self.wrong_of("object"),
                                        Obj([(self.rng.choice(["triplePress", "longpress", ""]), Obj([]))])])
            pairs = [p for p in pairs if p[0] != "gestures"] + [("gestures", gestures)]
            what = "gestures malformed"
        elif r == 14:
            bad = self.rng.choice([self.wrong_of("string"), "Compact", "", "full ", "tiny", self.text(5) + "x"])
            pairs = [p for p in pairs if p[0] != "format"] + [("format", bad)]
            what = "format not a known format"
        else:
            level = self.rng.choice(["interaction", "filter", "slider"])
            name = self.rng.choice(["enable", "Enabled", "grabs", "", "min ", "device", "value\u0000", self.text(4) + "z"])
            if level == "interaction":
                pairs = pairs + [(name, True)]
            else:
                pairs = [p for p in pairs if p[0] != level] + [(level, Obj([(name, [])]))]
            what = "unknown field in %s" % level
        self.rng.shuffle(pairs)
        return self.request(what, top + [("interaction", Obj(pairs))], "error", codes={"invalidRequest"})

    def unknown_type(self):
        name = self.rng.choice(["Ping", "pin", "", "listdevices", "setinteraction", "x\nFORGED line", "x\r\nFORGED line",
                                self.text(20), "a" * self.rng.randint(100, 3000)])
        return self.request("unknown type", [("type", name)], "error", codes={"unknownRequest"})

    def bad_json(self):
        good = '{"type":"ping","id":1}'
        bad = self.rng.choice([
            good[: self.rng.randint(1, len(good) - 1)],  # cut short
            '{"type":"ping",}', "{'type':'ping'}", '{"type":ping}', '{type:"ping"}', '{"type":"ping"}}',
            '{"type":"ping"}{"type":"ping"}', '{"type":"ping"} x', '{"type":"ping","id":NaN}',
            '{"type":"ping","id":Infinity}', '{"type":"ping","id":-Infinity}', '{"type":"ping","id":01}',
            '{"type":"ping","id":1.}', '{"type":"ping","id":.5}', '{"type":"ping","id":+1}', '{"type":"ping","id":0x10}',
            '{"type":"ping","id":1e}', '{"type":"ping","id":"\\x41"}', '{"type":"ping","id":"\\u12"}',
            '{"type":"ping","id":"\\ud800"}', '{"type":"ping","id":"\\udc00\\ud800"}', '{"type":"ping","id":"a\tb"}',
            '{"type":"ping","id":tru}', '{"type":"ping","id":nul}', '{"type":"ping" "id":1}', '{"type":"ping":1}',
            '[{"type":"ping"}]', '"ping"', "1", "null", "true", "[]", '{"type":"ping"}\r{"type":"ping"}',
            "\u00a0{}", "{}\u00a0", '{"type":"ping","id":1e400}', '{"type":"ping","id":-1e400}',
        ])
        b = bad.encode()
        if self.rng.random() < 0.15:  # bytes that are not UTF-8, inside a string
            b = b'{"type":"ping","id":"' + self.rng.choice([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xc0\xaf", b"\xf8\x88\x80\x80\x80"]) + b'"}'
        return Case("bad JSON", b + self.end().encode(), "error", codes={"invalidJSON"})

    def deep(self):
        depth = self.rng.choice([self.rng.randint(1, 63), 63, 64, 65, self.rng.randint(66, 30000)])
        # The request object is one level; `depth` more inside it.
        opener, closer = self.rng.choice([("[", "]"), ('{"a":', "}")])
        where = self.rng.choice(["id", "interaction"])
        inner = opener * depth + "1" + closer * depth
        text = '{"type":"%s","%s":%s}' % ("ping" if where == "id" else "setInteraction", where, inner)
        line = self.line(text)
        if too_long(line):
            return Case("nesting over the limit", line, "error", codes={"lineTooLong"})
        if 1 + depth > 64:
            return Case("nesting %d deep" % (depth + 1), line, "error", codes={"invalidJSON"})
        if where == "interaction":
            # An array or an object with an unknown member: refused as a field, not as JSON.
            return Case("nested interaction", line, "error", codes={"invalidRequest"})
        # A deep id: echoed, or refused as too deep for an id (the connection stays).
        return Case("nested id", line, "reply-or-refused", name="ping", id_=strict_loads(inner), has_id=True)

    def huge_number(self):
        digits = "".join(self.rng.choice("0123456789") for _ in range(self.rng.randint(1, 400)))
        text = self.rng.choice([
            "1" + digits, "-1" + digits, "0." + digits, "1" + digits + "e" + str(self.rng.randint(-400, 400)),
            "-0", "1e308", "1.7976931348623157e308", "4.9e-324", "1e-400", str(2**63), str(-(2**63) - 1),
            str(2**64), "9007199254740993",
        ])
        finite = math.isfinite(float(text))
        where = self.rng.choice(["id", "slider"])
        if not finite:
            return Case("number out of range", self.line('{"type":"ping","id":%s}' % text), "error", codes={"invalidJSON"})
        if where == "id":
            return Case("huge number id", self.line('{"type":"ping","id":%s}' % text), "reply-or-refused",
                        name="ping", id_=strict_loads(text), has_id=True)
        value = strict_loads(text)
        as_int = value if isinstance(value, int) else (int(value) if value == int(value) and abs(value) < 9e15 else None)
        if isinstance(value, int) and not -(2**63) <= value < 2**63:
            as_int = int(float(text)) if abs(float(text)) < 9e15 else None
        body = '{"type":"setInteraction","id":5,"interaction":{"slider":{"min":%s,"max":%s}}}' % (text, text)
        if as_int is None:
            return Case("slider out of range", self.line(body), "error", codes={"invalidRequest"}, id_=5, has_id=True)
        want = self.default_interaction()
        want["slider"] = {"min": as_int, "max": as_int, "value": as_int}
        return Case("slider at a huge number", self.line(body), "reply", name="setInteraction", id_=5, has_id=True,
                    interaction=want)

    @staticmethod
    def default_interaction():
        return {"enabled": True, "primary": True, "secondary": True, "defaultCaptureSoundDisabled": False,
                "grab": False, "filter": {k: [] for k in LISTS}, "slider": {"min": 0, "max": 100, "value": 50},
                "gestures": {}, "format": "full"}

    def odd_id(self):
        r = self.rng.randrange(6)
        if r == 0:
            id_ = "x" * self.rng.randint(100, 60000)
        elif r == 1:
            id_ = [self.small_id() for _ in range(self.rng.randint(10, 2000))]
        elif r == 2:
            id_ = Obj([("k%d" % i, self.small_id()) for i in range(self.rng.randint(10, 500))])
        elif r == 3:
            id_ = self.text(self.rng.randint(50, 2000))
        elif r == 4:
            id_ = Raw("1" + "0" * self.rng.randint(20, 300))
        else:
            id_ = Raw("1e15")
        name = self.rng.choice(["ping", "listDevices"])
        line = self.line(self.w.value(Obj([("type", name), ("id", id_)])))
        if too_long(line):
            return Case("odd id over the limit", line, "error", codes={"lineTooLong"})
        return Case("odd id", line, "reply-or-refused", name=name, id_=plain(id_), has_id=True)

    def duplicate_keys(self):
        a, b = self.rng.sample(["ping", "listDevices", "nope"], 2)
        line = self.line('{"type":"%s","id":1,"type":"%s","id":2}' % (a, b))
        return Case("duplicate keys", line, "any")

    def many_keys(self):
        n = self.rng.randint(10, 1000) if self.rng.random() < 0.9 else self.rng.randint(1000, 6000)
        members = ",".join('"k%d":%d' % (i, i) for i in range(n))
        line = self.line('{"type":"ping","id":"many",%s}' % members)
        if too_long(line):
            return Case("many keys over the limit", line, "error", codes={"lineTooLong"})
        if n + 2 > MAX_MEMBERS:
            return Case("many keys past the member bound", line, "error", codes={"invalidJSON"})
        return Case("many keys", line, "reply", name="ping", id_="many", has_id=True)

    def at_limit(self):
        body = '{"type":"ping","id":%d' % self.rng.randint(0, 99)
        text = body + " " * (LIMIT - len(body) - 1) + "}"
        assert len(text) == LIMIT
        line = text.encode() + self.rng.choice([b"\n", b"\r\n"])
        if self.rng.random() < 0.2:
            return Case("blank line at the limit", b" " * LIMIT + b"\n", "silent")
        return Case("line at the limit", line, "reply", name="ping", id_=strict_loads(text)["id"], has_id=True)

    def over_limit(self):
        n = self.rng.choice([LIMIT + 1, LIMIT + 2, LIMIT * 2, self.rng.randint(LIMIT + 1, 4 * LIMIT)])
        body = '{"type":"ping"'
        line = (body + " " * (n - len(body) - 1) + "}").encode() + self.rng.choice([b"\n", b"\r\n"])
        return Case("line over the limit", line, "error", codes={"lineTooLong"})

    def nul(self):
        good = b'{"type":"ping","id":1}'
        i = self.rng.randint(0, len(good))
        return Case("NUL byte", good[:i] + b"\x00" + good[i:] + b"\n", "error", codes={"invalidJSON"})

    def blank(self):
        return Case("blank line", self.rng.choice([b"\n", b" \n", b"\t \t\n", b"\r\n", b"  \r\n"]), "silent")

    def mutated(self):
        value, _ = self.interaction_value()
        b = bytearray(self.w.value(Obj([("type", "setInteraction"), ("id", 9), ("interaction", value)])).encode())
        for _ in range(self.rng.randint(1, 4)):
            op = self.rng.randrange(3)
            i = self.rng.randrange(len(b) + 1)
            if op == 0 and i < len(b):
                b[i] = self.rng.randrange(256)
            elif op == 1:
                b[i:i] = bytes([self.rng.choice(b'{}[]",:\\0123456789-.eE tfn\x00\x7f\xff')])
            elif i < len(b):
                del b[i]
        b = b.replace(b"\n", b" ")
        return Case("mutated", bytes(b) + b"\n", "any")


# ---------------------------------------------------------------- the client side


class Conn:
    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(PATIENCE)
        self.sock.connect(path)
        self.sock.setblocking(False)
        self.buf = b""
        self.eof = False
        self.lines = []

    def close(self):
        self.sock.close()

    def _read(self, timeout):
        sel = selectors.DefaultSelector()
        sel.register(self.sock, selectors.EVENT_READ)
        ready = sel.select(timeout)
        sel.close()
        if not ready:
            return False
        try:
            data = self.sock.recv(1 << 20)
        except BlockingIOError:
            return True
        except ConnectionResetError:
            data = b""
        if not data:
            self.eof = True
        self.buf += data
        *full, self.buf = self.buf.split(b"\n")
        self.lines.extend(full)
        return True

    def send(self, data, chunks):
        """Writes data in the given pieces, reading what arrives meanwhile; False when the
        daemon closed the connection first (it may, after a closing error)."""
        sel = selectors.DefaultSelector()
        sel.register(self.sock, selectors.EVENT_READ | selectors.EVENT_WRITE)
        pos = 0
        pieces = list(chunks)
        try:
            while pos < len(data):
                end = min(len(data), pos + (pieces.pop(0) if pieces else len(data)))
                while pos < end:
                    events = sel.select(PATIENCE)
                    if not events:
                        raise Failure("the daemon takes no bytes and sends none for %d s" % PATIENCE)
                    for _, mask in events:
                        if mask & selectors.EVENT_READ:
                            self._read(0)
                            if self.eof:
                                return False
                        if mask & selectors.EVENT_WRITE:
                            try:
                                pos += self.sock.send(data[pos:end])
                            except BlockingIOError:
                                pass
                            except (BrokenPipeError, ConnectionResetError):
                                return False
            return True
        finally:
            sel.close()

    def message(self):
        """The next received line as JSON; None at end of stream."""
        deadline = time.monotonic() + PATIENCE
        while not self.lines:
            if self.eof:
                return None
            left = deadline - time.monotonic()
            if left <= 0 or not self._read(left):
                raise Failure("no message and no close within %d s" % PATIENCE)
        raw = self.lines.pop(0)
        try:
            text = raw.decode("utf-8")
            msg = strict_loads(text)
        except ValueError as e:
            raise Failure("received a line that is not UTF-8 JSON (%s): %r" % (e, raw[:300]))
        if not isinstance(msg, dict) or not isinstance(msg.get("type"), str):
            raise Failure("received a line that is not an object with a string type: %r" % raw[:300])
        return msg

    def answer(self):
        """The next reply or error, skipping what is not an answer (hello, device news)."""
        while True:
            msg = self.message()
            if msg is None or msg["type"] in ("reply", "error", "overflow"):
                return msg

    def wait_close(self):
        msg = self.message()
        if msg is not None:
            raise Failure("after a closing error the daemon sent %s instead of closing" % json.dumps(msg)[:300])


def describe(case):
    shown = case.line if len(case.line) <= 300 else case.line[:200] + b"...(%d bytes)..." % len(case.line) + case.line[-60:]
    return "%s: %r" % (case.kind, shown)


def check_answer(case, msg, may_grab):
    """Raises Failure when msg is not what case must get; returns whether it closes."""
    if msg is None:
        raise Failure("the daemon closed the connection without answering")
    if msg["type"] == "overflow":
        raise Failure("a client that reads was sent overflow: %s" % json.dumps(msg)[:300])
    if msg["type"] == "error":
        code = msg.get("code")
        if code not in CODES:
            raise Failure("error code %r is not one of docs/PROTOCOL.md's" % code)
        if not isinstance(msg.get("message"), str) or not msg["message"]:
            raise Failure("an error without a message: %s" % json.dumps(msg)[:300])
    if case.expect == "reply":
        if msg["type"] != "reply":
            raise Failure("expected a reply to %s, got %s" % (case.name, json.dumps(msg)[:400]))
    elif case.expect == "error":
        if msg["type"] != "error" or msg["code"] not in case.codes:
            raise Failure("expected an error %s, got %s" % ("/".join(sorted(case.codes)), json.dumps(msg)[:400]))
    elif case.expect == "reply-or-refused":
        if msg["type"] == "error" and msg["code"] != "invalidRequest":
            raise Failure("expected a reply (or invalidRequest for an id too large), got %s" % json.dumps(msg)[:400])
    if msg["type"] == "reply":
        if case.name is not None and msg.get("request") != case.name:
            raise Failure("reply names request %r, not %r" % (msg.get("request"), case.name))
        if msg.get("request") not in ("ping", "listDevices", "setInteraction"):
            raise Failure("reply to an unknown request: %s" % json.dumps(msg)[:300])
        if msg.get("request") == "listDevices" and not isinstance(msg.get("devices"), list):
            raise Failure("listDevices reply without a devices array")
        if case.interaction is not None and not same(msg.get("interaction"), case.interaction):
            raise Failure("interaction in force %s, asked for %s"
                          % (json.dumps(msg.get("interaction")), json.dumps(case.interaction)))
    # The id: echoed when the request had one and was readable, never invented.
    if case.expect != "any":
        if case.has_id and msg["type"] == "reply" and ("id" not in msg or not same(msg["id"], case.id)):
            raise Failure("id %s sent, %s echoed" % (json.dumps(case.id)[:200], json.dumps(msg.get("id"))[:200]))
        if case.has_id and msg["type"] == "error" and "id" in msg and not same(msg["id"], case.id):
            raise Failure("id %s sent, %s echoed" % (json.dumps(case.id)[:200], json.dumps(msg.get("id"))[:200]))
        if (case.has_id and msg["type"] == "error" and msg["code"] in ("invalidRequest", "unknownRequest")
                and "id" not in msg and case.expect == "error"):
            raise Failure("error for a request with an id does not echo it: %s" % json.dumps(msg)[:300])
        if not case.has_id and "id" in msg:
            raise Failure("an id was echoed for a request without one: %s" % json.dumps(msg)[:300])
    return msg["type"] == "error" and msg["code"] in CLOSING


def fresh_client(path):
    """A new, well-behaved client gets hello and a ping reply."""
    c = Conn(path)
    try:
        hello = c.message()
        if hello is None or hello["type"] != "hello" or hello.get("protocol", {}).get("major") != 1:
            raise Failure("a fresh client got %s instead of hello" % json.dumps(hello)[:300])
        if not c.send(b'{"type":"ping","id":"fresh"}\n', []):
            raise Failure("a fresh client's ping could not be sent")
        reply = c.answer()
        if reply is None or reply["type"] != "reply" or reply.get("id") != "fresh":
            raise Failure("a fresh client's ping got %s" % json.dumps(reply)[:300])
    finally:
        c.close()


# ---------------------------------------------------------------- the run


def start_daemon(binary, workdir, verbose):
    """shutterd with an empty config on a socket in workdir, listening (shutterd.testing)."""
    conf = os.path.join(workdir, "shutterd.conf")
    with open(conf, "w") as f:
        f.write("# empty: the defaults\n")
    d = testing.Daemon(binary, os.path.join(workdir, "shutterd.sock"), ["--config", conf] + (["--verbose"] if verbose else []),
                       log_path=os.path.join(workdir, "shutterd.log"))
    try:
        return d.start()
    except testing.DaemonError as e:
        d.stop()
        raise Failure(str(e))


def run(args):
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    print("protocol-fuzz: seed %d, %d requests (repeat: --seed %d --requests %d)"
          % (seed, args.requests, seed, args.requests), flush=True)
    rng = random.Random(seed)
    may_grab = os.getuid() == 0
    gen = Generator(rng, may_grab)
    workdir = tempfile.mkdtemp(prefix="shutterd-fuzz.")
    daemon = proc = None
    if args.socket:
        path = args.socket
    else:
        try:
            daemon = start_daemon(args.daemon, workdir, args.verbose)
        except Failure as e:
            print("FAIL protocol-fuzz: %s" % e)
            shutil.rmtree(workdir, ignore_errors=True)
            return 1
        proc, path = daemon.proc, daemon.path
    stats = {"requests": 0, "bytes": 0, "connections": 0, "closed": 0, "errors": 0, "replies": 0, "abandoned": 0}
    start = time.monotonic()
    case = None
    conn = None

    def alive():
        if proc is not None and proc.poll() is not None:
            raise Failure("shutterd died (status %s)" % proc.returncode)

    try:
        pending = None
        while stats["requests"] < args.requests:
            if conn is None:
                conn = Conn(path)
                stats["connections"] += 1
                if rng.random() < 0.02:  # gone before the hello
                    conn.close()
                    conn = None
                    stats["abandoned"] += 1
                    continue
                hello = conn.message()
                if hello is None or hello["type"] != "hello":
                    raise Failure("a new connection got %s instead of hello" % json.dumps(hello)[:300])
            # A batch: pipelined requests, of which only the last may close the connection.
            batch = []
            size = 0
            want = rng.randint(1, 40)
            while len(batch) < want and stats["requests"] + len(batch) < args.requests:
                case, pending = pending or gen.next(), None
                if batch and (case.may_close or size + len(case.line) > 256 * 1024):
                    pending = case
                    break
                batch.append(case)
                size += len(case.line)
                if case.may_close:
                    break
            data = b"".join(c.line for c in batch)
            chunks = []
            if rng.random() < 0.2:  # the same bytes split at random places
                left = len(data)
                while left > 0:
                    n = rng.randint(1, max(1, min(left, 64 if rng.random() < 0.5 else 8192)))
                    chunks.append(n)
                    left -= n
            before = stats["requests"]
            stats["bytes"] += len(data)
            conn.send(data, chunks)
            if len(batch) > 1 and rng.random() < 0.05:
                # Gone with requests in flight: some answers read, the rest left unread. The
                # daemon must live, and the next connection (maybe given the same descriptor
                # number) get only its own answers.
                for case in batch[:rng.randrange(len(batch))]:
                    if case.expect != "silent" and conn.answer() is None:
                        break
                stats["requests"] += len(batch)
                stats["abandoned"] += 1
                conn.close()
                conn = None
                case = None
                alive()
                continue
            for case in batch:
                stats["requests"] += 1
                if case.expect == "silent":
                    continue
                msg = conn.answer()
                closes = check_answer(case, msg, may_grab)
                stats["errors" if msg["type"] == "error" else "replies"] += 1
                if closes:
                    conn.wait_close()
                    stats["closed"] += 1
                    conn.close()
                    conn = None
                    break
            if conn is not None and batch[-1].expect == "silent":
                # Nothing came for the blank line; the connection still answers.
                case = Case("ping after a blank line", b'{"type":"ping","id":"after blank"}\n', "reply",
                            name="ping", id_="after blank", has_id=True)
                conn.send(case.line, [])
                check_answer(case, conn.answer(), may_grab)
            case = None
            alive()
            if stats["requests"] // args.check_every != before // args.check_every:
                fresh_client(path)
        case = None
        alive()
        fresh_client(path)
        if args.check_log and proc is not None:
            check_log(workdir)
    except (Failure, OSError) as e:
        print("FAIL protocol-fuzz: %s" % e)
        if case is not None:
            print("     request: %s" % describe(case))
        print("     after %d requests; repeat: --seed %d --requests %d" % (stats["requests"], seed, args.requests))
        if proc is not None:
            tail_log(workdir)
        return 1
    finally:
        if conn is not None:
            conn.close()
        if daemon is not None:
            daemon.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    took = time.monotonic() - start
    print("PASS protocol-fuzz: %d requests (%d replies, %d errors, %d blank or unread), %d connections (%d closed by "
          "the daemon, %d abandoned by the client), %.1f MiB, %.1f s, seed %d"
          % (stats["requests"], stats["replies"], stats["errors"], stats["requests"] - stats["replies"] - stats["errors"],
             stats["connections"], stats["closed"], stats["abandoned"], stats["bytes"] / 1048576, took, seed))
    return 0


def check_log(workdir):
    """What clients sent reaches the log escaped: no raw control character, and no line
    that a request's embedded newline started (the unknown types carry "\\nFORGED")."""
    with open(os.path.join(workdir, "shutterd.log"), "rb") as f:
        for n, line in enumerate(f.read().split(b"\n"), 1):
            if line.startswith(b"FORGED"):
                raise Failure("log line %d was forged by a request: %r" % (n, line[:200]))
            bad = [b for b in line if (b < 0x20 and b != 0x09) or b == 0x7F]
            if bad:
                raise Failure("log line %d holds raw control bytes %r: %r" % (n, bytes(bad[:8]), line[:200]))


def tail_log(workdir):
    lines = testing.log_tail(os.path.join(workdir, "shutterd.log")).splitlines()
    if lines:
        print("     shutterd's log, last lines:")
        for line in lines[-15:]:
            print("       " + line[:300])


def main():
    p = argparse.ArgumentParser(description="Fuzz shutterd's protocol over its Unix socket.")
    p.add_argument("--seed", type=int, help="seed of the run (random and printed when absent)")
    p.add_argument("--requests", type=int, default=20000, help="requests to send (default 20000)")
    p.add_argument("--daemon", default=".build/debug/shutterd", help="shutterd to start (default .build/debug/shutterd)")
    p.add_argument("--socket", help="fuzz the shutterd already listening here instead of starting one")
    p.add_argument("--check-every", type=int, default=500, help="a fresh client checks in after every N requests")
    p.add_argument("--verbose", action="store_true", help="start shutterd with --verbose")
    p.add_argument("--check-log", action="store_true",
                   help="also check that the log of the started shutterd holds no raw control character and no forged line")
    args = p.parse_args()
    if args.requests < 1 or args.check_every < 1:
        p.error("--requests and --check-every must be positive")
    if not args.socket and not os.access(args.daemon, os.X_OK):
        print("protocol-fuzz: %s is not an executable (build it first: swift build)" % args.daemon)
        return 2
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
