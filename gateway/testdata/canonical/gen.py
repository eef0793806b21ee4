#!/usr/bin/env python3
"""Generate the canonical JSON test vectors for gateway/canonical_test.go.

The reference is the Python gate's canonical form,

    json.dumps(json.loads(body.decode("utf-8")), sort_keys=True,
               separators=(",", ":"), ensure_ascii=True)

with the stricter acceptance rules of hookgate's contract applied on top:
NaN/Infinity/-Infinity and floats beyond float64 (which Python reads as
inf) are rejected, nesting deeper than 128 is rejected, and integers of any
size are accepted (Python 3.11+ caps int() at 4300 digits by default).

Each line of vectors.jsonl is {"name", "input" (base64 of the body),
"want" (canonical output)} or {"name", "input", "error" (a substring the
Go error message must contain)}. The error substrings are ours; this
script only checks that the reference rejects those bodies too.

Run from anywhere:  python3 gateway/testdata/canonical/gen.py
The output is deterministic (fixed random seed).
"""

import base64
import json
import os
import random
import struct
import sys

MAX_DEPTH = 128

if hasattr(sys, "set_int_max_str_digits"):
    sys.set_int_max_str_digits(0)


class Rejected(ValueError):
    pass


def _reject_constant(name):
    raise Rejected(name + " is not allowed")


def _finite_float(text):
    f = float(text)
    if f in (float("inf"), float("-inf")):
        raise Rejected("number beyond the float64 range")
    return f


def _depth(obj):
    if isinstance(obj, dict):
        return 1 + max((_depth(v) for v in obj.values()), default=0)
    if isinstance(obj, list):
        return 1 + max((_depth(v) for v in obj), default=0)
    return 0


def reference(body):
    text = body.decode("utf-8")
    obj = json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
    if _depth(obj) > MAX_DEPTH:
        raise Rejected("nesting deeper than %d" % MAX_DEPTH)
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def b(s):
    return s.encode("utf-8") if isinstance(s, str) else s


FLOATS = [
    "0.1", "0.5", "1.0", "-1.0", "1e21", "1e-7", "1.5e-7", "5e-324", "4.9406564584124654e-324",
    "2.2250738585072014e-308", "1.7976931348623157e308", "123456789012345680.0", "-0.0", "0.0",
    "1E5", "1.0e+2", "1e16", "1e15", "9999999999999998.0", "1e17", "0.0001", "0.00001",
    "0.00009999", "123.456", "3.141592653589793", "2.718281828459045", "1.1", "100.0", "1e+300",
    "1e-300", "0.30000000000000004", "1e22", "1e23", "9007199254740993.0", "12345678.9",
    "1.0000000000000002", "0.1e1", "10E-1", "1e0", "-1.5e-10", "6.02214076e23", "1e-400",
    "-1e-400", "0e10", "-0e0", "1.00000000000000000000000000001", "1e-5", "1e-4", "1.5e16",
    "1.5e15", "2.5", "1e308", "1.7976931348623158e308",
]

INTS = [
    "0", "-0", "1", "-1", "42", "9007199254740993", "18446744073709551616",
    "-9223372036854775809", "1" * 100, "-" + "9" * 100,
]

FIXED = [
    # Unicode above U+FFFF, raw and escaped.
    ("astral raw", '"\U0001F600"'),
    ("astral raw key and value", '{"\U0001F600":"\U0001D11E"}'),
    ("astral escaped pair", '"\\ud83d\\ude00"'),
    ("astral escaped pair uppercase hex", '"\\uD83D\\uDE00"'),
    ("bmp non-ascii", '"caf\u00e9 \u4e2d\u6587 \u00ff \u0100 \uffff"'),
    ("escaped non-ascii uppercase", '"\\u00E9\\u4E2D"'),
    # Control characters, DEL, quotes, backslashes, slashes.
    ("control escapes", '"\\u0000\\u0001\\u001f\\b\\f\\n\\r\\t\\u000B"'),
    ("named control escapes as \\u", '"\\u0008\\u000c\\u000a\\u000d\\u0009"'),
    ("del raw", '"a\x7fb"'),
    ("del escaped", '"\\u007F"'),
    ("quote and backslash", '"say \\"hi\\" \\\\ back"'),
    ("escaped slash", '"a\\/b"'),
    ("raw slash", '"http://x/y"'),
    ("all printable ascii", json.dumps("".join(chr(c) for c in range(0x20, 0x7F)))),
    ("c1 controls raw", '"\u0080\u009f\u00a0"'),
    ("line separators raw", '"\u2028\u2029"'),
    # Lone surrogates, which Python keeps and re-emits.
    ("lone high surrogate", '"\\ud800"'),
    ("lone low surrogate", '"\\udc00"'),
    ("lone high then pair", '"\\ud800\\ud800\\udc00"'),
    ("low then high", '"\\udc00\\ud800"'),
    ("lone high then ascii escape", '"\\ud800\\u0041"'),
    ("lone high then text", '"\\udbffx"'),
    ("lone surrogate at end", '"a\\udfff"'),
    ("lone surrogate key order", '{"\\ud800":1,"\U0001F600":2,"\\uffff":3,"\\ue000":4,"\\ud7ff":5,"\\udc00":6}'),
    # Key order and duplicates.
    ("key order ascii", '{"b":1,"a":2,"B":3,"":4,"aa":5,"a ":6,"_":7}'),
    ("key order non-ascii", '{"z":1,"\u00e9":2,"e":3,"\\u00e9x":4,"\u4e2d":5,"\U0001F600":6,"\uffff":7,"A":8}'),
    ("duplicate keys last wins", '{"a":1,"b":2,"a":3}'),
    ("duplicate keys nested", '{"x":{"k":1,"k":{"k":2}},"x":{"k":3,"j":[1,{"a":1,"a":null}]}}'),
    ("duplicate escaped and raw key", '{"\u00e9":1,"\\u00e9":2}'),
    ("many duplicate keys", "{" + ",".join('"k%d":%d' % (i % 20, i) for i in range(100)) + "}"),
    ("large object", "{" + ",".join('"key%03d":%d' % ((i * 37) % 200, i) for i in range(200)) + "}"),
    # Structures and whitespace.
    ("nested", '{"a":[1,{"c":[],"b":{}}],"d":null,"e":true,"f":false,"g":"s"}'),
    ("whitespace", ' \t\n\r{ "a" : [ 1 , 2.50 , { } , [ ] ] ,\n"b":"x" } \r\n'),
    ("empty object", "{}"),
    ("empty array", "[]"),
    ("null", "null"),
    ("true", "true"),
    ("false", "false"),
    ("string", '"x"'),
    ("empty string", '""'),
    ("nested arrays 128", "[" * 128 + "]" * 128),
    ("nested objects 128", '{"a":' * 127 + "{}" + "}" * 127),
    ("huge integer 5000 digits", "7" * 5000),
    ("numbers in object", '{"int":-0,"f":-0.0,"e":1E5,"big":' + "1" * 100 + "}"),
    ("webhook-like", json.dumps({
        "id": "evt_1NG8Du2eZvKYlo2CUI79vXWy", "type": "award.disbursed", "created": 1686089970,
        "data": {"object": {"amount": 1999.5, "currency": "usd", "tags": ["a", "b"],
                            "note": "caf\u00e9 \U0001F680", "meta": None, "ok": True}},
    }, ensure_ascii=False)),
]

ERRORS = [
    ("invalid utf-8 byte", b'"\xff"', "invalid UTF-8 at byte 1"),
    ("invalid utf-8 truncated sequence", b'{"a":"\xc3"}', "invalid UTF-8 at byte 6"),
    ("invalid utf-8 overlong", b'"\xc0\xaf"', "invalid UTF-8"),
    ("invalid utf-8 encoded surrogate", b'"\xed\xa0\x80"', "invalid UTF-8"),
    ("invalid utf-8 outside string", b'[1,\xfe]', "invalid UTF-8 at byte 3"),
    ("bom", b"\xef\xbb\xbf{}", "byte order mark"),
    ("NaN", "NaN", "NaN is not allowed"),
    ("Infinity", "Infinity", "Infinity is not allowed"),
    ("-Infinity", "-Infinity", "-Infinity is not allowed"),
    ("NaN in array", "[1,NaN]", "NaN is not allowed"),
    ("Infinity in object", '{"a":Infinity}', "Infinity is not allowed"),
    ("1e999", "1e999", "beyond the float64 range"),
    ("-1e999", "-1e999", "beyond the float64 range"),
    ("1e400 in array", "[1,1e400]", "beyond the float64 range at byte 3"),
    ("just above max float", "1.7976931348623159e308", "beyond the float64 range"),
    ("huge exponent", "1e99999999999999999999", "beyond the float64 range"),
    ("long float overflow", "1" * 400 + ".0", "beyond the float64 range"),
    ("nested arrays 129", "[" * 129 + "]" * 129, "nesting deeper than 128"),
    ("nested objects 129", '{"a":' * 128 + "{}" + "}" * 128, "nesting deeper than 128"),
    ("empty", "", "empty body"),
    ("only whitespace", " \n\t", "empty body"),
    ("truncated object", '{"a":', "truncated"),
    ("truncated key", '{"a', "truncated"),
    ("truncated array", "[1,2", "truncated"),
    ("truncated string", '"abc', "truncated"),
    ("truncated escape", '"abc\\', "truncated"),
    ("truncated u escape", '"\\u12', "truncated"),
    ("truncated literal", "tru", "truncated"),
    ("truncated number", "-", "truncated"),
    ("truncated fraction", "1.", "truncated"),
    ("truncated exponent", "1e", "truncated"),
    ("trailing value", "1 2", "trailing data"),
    ("trailing object", "{} x", "trailing data"),
    ("trailing comma array", "[1,]", "expected a value"),
    ("trailing comma object", '{"a":1,}', "expected a string key"),
    ("single quotes", "{'a':1}", "expected a string key"),
    ("unquoted key", "{a:1}", "expected a string key"),
    ("missing colon", '{"a" 1}', "expected ':'"),
    ("missing comma", "[1 2]", "expected ',' or ']'"),
    ("leading zero", "01", "trailing data"),
    ("leading zero in array", "[01]", "expected ',' or ']'"),
    ("leading dot", ".5", "expected a value"),
    ("leading plus", "+1", "expected a value"),
    ("dot without digits", "[1.]", "digit after the decimal point"),
    ("exponent without digits", "[1e+]", "digit in the exponent"),
    ("minus without digits", "[-a]", "expected a digit"),
    ("invalid escape", '"\\x"', "invalid escape"),
    ("invalid escape apostrophe", '"\\\'"', "invalid escape"),
    ("invalid u escape", '"\\u12G4"', "invalid \\u escape"),
    ("invalid second u escape", '"\\ud800\\uzzzz"', "invalid \\u escape"),
    ("raw control char", '"a\x01b"', "control character 0x01"),
    ("raw newline", '"a\nb"', "control character 0x0a"),
    ("raw tab", '"a\tb"', "control character 0x09"),
    ("bare word", "nul", "truncated"),
    ("wrong literal", "nulx", "expected a value"),
    ("capital True", "True", "expected a value"),
    ("comment", "// c\n1", "expected a value"),
    ("nbsp whitespace", "\u00a01", "expected a value"),
    ("bom after whitespace", " \ufeff1", "expected a value"),
]


def main():
    rng = random.Random(20240601)
    cases = []

    def add(name, body, error=None):
        body = b(body)
        try:
            want = reference(body)
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            if error is None:
                raise SystemExit("reference rejected %r: %s" % (name, exc))
            cases.append({"name": name, "input": base64.b64encode(body).decode(), "error": error})
            return
        if error is not None:
            raise SystemExit("reference accepted %r, expected an error" % name)
        cases.append({"name": name, "input": base64.b64encode(body).decode(), "want": want})

    for name, body in FIXED:
        add(name, body)
    for text in FLOATS:
        add("float " + text, text)
    add("floats in array", "[" + ",".join(FLOATS) + "]")
    for text in INTS:
        add("int " + text[:30], text)
    for name, body, error in ERRORS:
        add(name, body, error)

    # Random doubles written several ways: checks Go's shortest formatting
    # against Python's repr, and correct rounding of long literals.
    for batch in range(40):
        items = []
        while len(items) < 50:
            (f,) = struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))
            if f != f or f in (float("inf"), float("-inf")):
                continue
            style = rng.randrange(5)
            if style == 0:
                items.append(repr(f))
            elif style == 1:
                items.append("%.17g" % f)
            elif style == 2:
                items.append("%.25e" % f)
            elif style == 3:
                # A value near a power of ten boundary where repr switches.
                items.append("%.*e" % (rng.randrange(1, 17), rng.uniform(1, 10) * 10.0 ** rng.randrange(-8, 20)))
            else:
                digits = "".join(rng.choice("0123456789") for _ in range(rng.randrange(1, 40)))
                items.append("%s.%se%d" % (rng.randrange(10), digits, rng.randrange(-330, 308)))
        body = "[" + ",".join(t if "e" in t or "." in t else t + ".0" for t in items) + "]"
        add("random floats %d" % batch, body)

    # Random strings over interesting code points.
    pool = [chr(c) for c in range(0, 0x80)] + ["\u00e9", "\u07ff", "\u0800", "\uffff", "\U00010000",
                                                "\U0010ffff", "\U0001F600", "\u2028"]
    for batch in range(20):
        obj = {}
        for _ in range(10):
            key = "".join(rng.choice(pool) for _ in range(rng.randrange(0, 6)))
            obj[key] = "".join(rng.choice(pool) for _ in range(rng.randrange(0, 20)))
        add("random strings %d" % batch, json.dumps(obj, ensure_ascii=bool(batch % 2)))

    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "vectors.jsonl")
    with open(out, "w", encoding="ascii") as fh:
        for case in cases:
            fh.write(json.dumps(case, sort_keys=True) + "\n")
    print("wrote %d vectors to %s" % (len(cases), out))


if __name__ == "__main__":
    main()
