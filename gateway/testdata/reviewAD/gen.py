#!/usr/bin/env python3
"""Review AD: adversarial bodies for the canonical JSON / digest key.

Writes vectors.jsonl next to this file: one JSON object a line,
  {"name":..., "input": base64(body), "want": canonical or null, "why": reason if rejected,
   "id": expected evt key tail for json:/id or null}
"want" is Python's
  json.dumps(json.loads(body.decode("utf-8")), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
with the contract's extra 400s (NaN/Infinity, a number beyond float64, nesting deeper than 128),
and with sys.set_int_max_str_digits(0) because the contract says "integers exact at any size".

Deterministic (fixed seed). Run: python3 gen.py
"""
import base64
import decimal
import hashlib
import json
import math
import os
import random
import struct
import sys

sys.set_int_max_str_digits(0)
sys.setrecursionlimit(10000)
R = random.Random(0xAD)


class Reject(Exception):
    pass


def _const(name):
    raise Reject("constant " + name)


def _float(text):
    f = float(text)
    if math.isinf(f) or math.isnan(f):
        raise Reject("beyond float64")
    return f


def _depth(o):
    # containers nested: [] is 1
    if isinstance(o, dict):
        return 1 + max((_depth(v) for v in o.values()), default=0)
    if isinstance(o, list):
        return 1 + max((_depth(v) for v in o), default=0)
    return 0


def _text_depth(s):
    """Nesting of the body as written (before duplicate keys are merged)."""
    d = m = 0
    in_str = esc = False
    for c in s:
        if in_str:
            if esc:
                esc = False
            elif c == "\\":
                esc = True
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
        elif c in "[{":
            d += 1
            m = max(m, d)
        elif c in "]}":
            d -= 1
    return m


def reference(body):
    try:
        s = body.decode("utf-8")
        o = json.loads(s, parse_constant=_const, parse_float=_float)
    except Reject as e:
        return None, str(e), None
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        return None, type(e).__name__ + ": " + str(e)[:60], None
    if _text_depth(s) > 128:
        return None, "depth", None
    out = json.dumps(o, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return out, None, o


class Lit(str):
    pass


def id_tail(body):
    """Expected key tail for event_id json:/id (contract: literal text for numbers)."""
    s = body.decode("utf-8")
    o = json.loads(s, parse_int=Lit, parse_float=Lit, parse_constant=_const)
    if not isinstance(o, dict) or "id" not in o:
        return None
    v = o["id"]
    if v is None:
        return None
    if v is True:
        v = "true"
    elif v is False:
        v = "false"
    elif isinstance(v, (dict, list)):
        v = json.dumps(json.loads(s)["id"], sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    if v == "":
        return None
    raw = str(v).encode("utf-8", "surrogatepass")
    if len(raw) <= 200 and all(0x21 <= c <= 0x7E for c in raw):
        return "evt:" + raw.decode()
    return "evt#" + hashlib.sha256(raw).hexdigest()


VECTORS = []
SEEN = set()


def add(name, body):
    if isinstance(body, str):
        body = body.encode("utf-8", "surrogatepass")
    if body in SEEN:
        return
    SEEN.add(body)
    want, why, obj = reference(body)
    tail = None
    if want is not None:
        try:
            tail = id_tail(body)
        except Exception:
            tail = None
    VECTORS.append({
        "name": name,
        "input": base64.b64encode(body).decode(),
        "want": want,
        "why": why,
        "id": tail,
    })


def sweep():
    # ---------------------------------------------------------------- numbers
    FLOATS = [
        "1e16", "1e15", "9999999999999998.0", "1e-5", "1e-4", "0.0001", "0.00001", "0.1", "0.2",
        "0.30000000000000004", "5e-324", "4e-324", "2e-324", "3e-324", "2.4703282292062327e-324",
        "2.4703282292062328e-324", "1.7976931348623157e308", "1.7976931348623158e308",
        "1.7976931348623159e308", "1.797693134862315807e308", "1.7976931348623157E+308",
        "-0.0", "-0e0", "0e0", "-0E-0", "0.0e+999", "-0.0e999999999999999999",
        "1E400", "-1E400", "1e-400", "-1e-400", "1.0e+2", "1e2", "1E2", "1e+2", "1e02", "1e0002",
        "-1e2", "123e-2", "1.5e-7", "1.5e-07", "15e-8", "1e21", "1e22", "1e23", "1e+21",
        "123456789012345678", "123456789012345678.0", "1234567890123456789e0",
        "2.2250738585072011e-308", "2.2250738585072012e-308", "2.2250738585072014e-308",
        "4.9406564584124654e-324", "9007199254740993.0", "9007199254740992.0", "9007199254740993e0",
        "0.1e1", "0.01e2", "100e-2", "0.000001", "0.0000001", "1e-7", "12345.678e-9",
        "1e308", "1e309", "10e308", "0.1e310", "0.01e310", "1e-323", "1e-324", "1e-325",
        "8.98846567431158e307", "1.5", "-1.5", "2.5", "1e-0", "1E-00", "1.000000000000000000000000001",
        "0.99999999999999999999", "9.999999999999999e22", "1e15.5"[:4],
        "3.141592653589793238462643383279502884197", "0." + "0" * 400 + "1",
        "1" + "0" * 308 + ".0", "1" + "0" * 309 + ".0", "17976931348623157" + "0" * 292 + ".0",
        "17976931348623159" + "0" * 292 + ".0", "0." + "0" * 330 + "5e330",
        "1" + "0" * 400 + "e-400", "1" + "0" * 400 + "e-100", "0e-99999999999999999999999",
        "123.456e-999999999999999999999", "-0.000e5",
    ]
    for t in FLOATS:
        add("float " + t[:40], t)
        add("float in array " + t[:40], "[" + t + "]")
        add("float in obj " + t[:40], '{"n":' + t + '}')

    INTS = ["0", "-0", "1", "-1", "9007199254740993", "-9223372036854775809", "18446744073709551616",
            "1" + "0" * 300, "-" + "9" * 400, "1" + "0" * 309, "7" * 4300, "7" * 4301, "8" * 6000,
            "[-0,0,-0]", "00", "01", "-01", "+1", "1.", ".5", "-.5", "1.e5", "1e", "1e+", "1E-",
            "-", "--1", "0x10", "1_000", "１"]
    for t in INTS:
        add("int " + t[:40], t)

    # random doubles, many textual forms
    def forms(f):
        r = repr(f)
        out = [r, "%.17g" % f, "%.20e" % f, "%.25g" % f, r.upper()]
        if "e" not in r and "." in r:
            out.append(r + "e0")
        d = decimal.Decimal(f)
        s = format(d, "f")
        if len(s) < 1200:
            if "." not in s:
                s += ".0"
            out.append(s)
        out.append(format(d, "e"))
        return [x for x in out if x not in ("inf", "-inf", "nan", "INF", "-INF", "NAN")]

    for i in range(3000):
        kind = R.random()
        if kind < 0.4:
            bits = R.getrandbits(64)
            f = struct.unpack("<d", struct.pack("<Q", bits))[0]
        elif kind < 0.7:
            f = R.uniform(-1, 1) * 10 ** R.randint(-30, 30)
        else:
            f = float(R.randint(-10**6, 10**6)) / 10 ** R.randint(0, 8)
        if math.isinf(f) or math.isnan(f):
            continue
        for t in forms(f):
            try:
                float(t)
            except ValueError:
                continue
            if t.startswith("-"):
                pass
            # make it valid JSON grammar
            if t.lstrip("-").startswith("."):
                continue
            if t.lstrip("-")[:1] == "0" and len(t.lstrip("-")) > 1 and t.lstrip("-")[1] not in ".eE":
                continue
            add("rnd float %d" % i, "[" + t + "]")

    # halfway points between adjacent doubles, exact and nudged far past 800 digits
    def exact(x):
        return decimal.Decimal(x)

    decimal.getcontext().prec = 3000
    for i in range(400):
        if i < 200:
            bits = R.getrandbits(63)
        else:
            bits = R.choice([0, 1, 2, 0x000FFFFFFFFFFFFF, 0x0010000000000000, 0x7FEFFFFFFFFFFFFE,
                             0x3FF0000000000000, 0x4340000000000000, R.getrandbits(52)])
        a = struct.unpack("<d", struct.pack("<Q", bits))[0]
        b = struct.unpack("<d", struct.pack("<Q", bits + 1))[0]
        if math.isinf(a) or math.isinf(b) or math.isnan(b):
            continue
        mid = (exact(a) + exact(b)) / 2
        s = format(mid, "f")
        if "." not in s:
            s += ".0"
        if len(s) > 2000:
            continue
        add("halfway %d" % i, "[" + s + "]")
        pad = "0" * R.choice([10, 790, 800, 801, 900])
        add("halfway+ %d" % i, "[" + s + pad + "1]")
        # just below: subtract a tiny amount
        lo = mid - decimal.Decimal(10) ** (-(len(s) + 50))
        t = format(lo, "f")
        if len(t) < 3000:
            add("halfway- %d" % i, "[" + t + "]")
        # in e-notation with a long mantissa
        digits, exp = mid.as_tuple().digits, mid.as_tuple().exponent
        m = "".join(map(str, digits)).lstrip("0") or "0"
        if m != "0":
            add("halfway e %d" % i, "[%s.%se%d]" % (m[0], m[1:] or "0", exp + len(m) - 1))

    # ---------------------------------------------------------------- strings
    ESC = {
        "lone high": r'"\ud800"', "lone low": r'"\udc00"', "lone high end": r'"a\udbff"',
        "high high low": r'"\ud83d\ud83d\ude00"', "low high": r'"\ude00\ud83d"',
        "high then A": r'"\ud83d\u0041"', "high then raw": '"\\ud83dA"', "high then escape n": r'"\ud83d\n"',
        "high then bad esc": r'"\ud83d\u00zz"', "high then short": r'"\ud83d\u00"',
        "high then bslash end": '"\\ud83d\\', "pair upper": r'"\uD83D\uDE00"',
        "pair mixed": r'"\uD83d\uDe00"', "max astral": r'"\udbff\udfff"', "raw max astral": '"\U0010ffff"',
        "u2028": '"\u2028\u2029"', "u2028 esc": r'"\u2028"', "del raw": '"\x7f"', "del esc": r'"\u007F"',
        "nul": r'"\u0000"', "slash": r'"\/\/"', "bom in string": '"\ufeff"', "nonchar": '"\uffff\ufffe"',
        "high then raw astral": '"\\ud800\U0001f600"', "lone low then raw": '"\\udc00\u00e9"',
        "ctl raw tab": '"\t"', "ctl raw nl": '"\n"', "ctl raw 1f": '"\x1f"', "ctl raw nul": '"\x00"',
        "bad esc x": r'"\x41"', "bad esc quote": r"'\''", "bad esc U": r'"\U0041"', "bad esc a": r'"\a"',
        "esc plus": r'"\u+041"', "esc short": r'"\u041"', "uni 0x80": '"\x80"', "uni c1": '"\u0085"',
        "all named": r'"\"\\\/\b\f\n\r\t"', "surrogate raw utf8": b'"\xed\xa0\x80"',
        "overlong slash": b'"\xc0\xaf"', "f5": b'"\xf5\x80\x80\x80"', "f4 90": b'"\xf4\x90\x80\x80"',
        "truncated utf8": b'"\xe2\x82"', "lone cont": b'"\x80"', "e0 80": b'"\xe0\x80\x80"',
        "f0 80": b'"\xf0\x80\x80\x80"',
    }
    for k, v in ESC.items():
        add("str " + k, v)
        if isinstance(v, str):
            add("str key " + k, "{" + v + ":1}")
            add("str id " + k, '{"id":' + v + "}")

    POOL = ["a", "b", "A", "Z", "_", "~", "\x7f", "\x00", "\x1f", "é", "ÿ", "Ā", "\u07ff", "\u0800",
            "\ud7ff", "\ue000", "\uffef", "\uffff", "\U00010000", "\U0001f600", "\U0010ffff",
            "\ud800", "\udbff", "\udc00", "\udfff", "aa", "a\x00", "", " ", "\u2028", "\ufeff"]


    def enc_char(c, style):
        o = ord(c)
        if style == 0 and not (0xD800 <= o <= 0xDFFF) and c not in '"\\' and o >= 0x20:
            return c
        if c == '"':
            return '\\"'
        if c == "\\":
            return "\\\\"
        if o >= 0x10000:
            o -= 0x10000
            h, l = 0xD800 + (o >> 10), 0xDC00 + (o & 0x3FF)
            fmt = "\\u%04x" if style == 1 else "\\u%04X"
            return fmt % h + fmt % l
        return ("\\u%04x" if style == 1 else "\\u%04X") % o


    def enc_str(s):
        return '"' + "".join(enc_char(c, R.choice([0, 0, 1, 2])) for c in s) + '"'


    def rand_str(n=None):
        if n is None:
            n = R.randint(0, 6)
        out = []
        for _ in range(n):
            r = R.random()
            if r < 0.4:
                out.append(R.choice(POOL))
            elif r < 0.7:
                out.append(chr(R.randint(0x20, 0x7e)))
            elif r < 0.85:
                out.append(chr(R.randint(0, 0xFFFF)))
            else:
                out.append(chr(R.randint(0x10000, 0x10FFFF)))
        s = "".join(out)
        return s


    def rand_num():
        r = R.random()
        if r < 0.3:
            return str(R.randint(-10**R.randint(1, 40), 10**R.randint(1, 40)))
        if r < 0.6:
            return repr(R.uniform(-1e6, 1e6))
        if r < 0.8:
            return "%de%d" % (R.randint(-99, 99), R.randint(-330, 310))
        return R.choice(["-0", "0", "-0.0", "1.0", "1e16", "1E+16", "1e-5", "0.1", "5e-324", "1e22"])


    WS = [" ", "\t", "\n", "\r", ""]


    def ws():
        return "".join(R.choice(WS) for _ in range(R.choice([0, 0, 0, 1, 2])))


    def rand_json(depth=0, maxd=5):
        r = R.random()
        if depth >= maxd or r < 0.35:
            r2 = R.random()
            if r2 < 0.4:
                return enc_str(rand_str())
            if r2 < 0.8:
                return rand_num()
            return R.choice(["true", "false", "null"])
        if r < 0.65:
            n = R.randint(0, 20 if R.random() < 0.2 else 5)
            keys = [rand_str(R.randint(0, 3)) for _ in range(n)]
            if keys and R.random() < 0.5:  # duplicates
                for _ in range(R.randint(1, 4)):
                    keys.append(R.choice(keys))
                R.shuffle(keys)
            mem = [ws() + enc_str(k) + ws() + ":" + ws() + rand_json(depth + 1, maxd) + ws() for k in keys]
            return "{" + ",".join(mem) + ws() + "}"
        n = R.randint(0, 5)
        return "[" + ",".join(ws() + rand_json(depth + 1, maxd) + ws() for _ in range(n)) + ws() + "]"


    for i in range(3000):
        add("rnd doc %d" % i, ws() + rand_json() + ws())

    # key order across planes: objects with many keys from the pool
    for i in range(500):
        keys = R.sample(POOL, R.randint(2, len(POOL)))
        keys += [rand_str(R.randint(1, 3)) for _ in range(R.randint(0, 20))]
        R.shuffle(keys)
        add("keys %d" % i, "{" + ",".join(enc_str(k) + ":%d" % j for j, k in enumerate(keys)) + "}")

    # duplicate keys at several depths, spelled differently
    add("dup escaped same key", r'{"a":1,"\u0061":2}')
    add("dup nested", '{"x":{"a":1,"b":{"c":1,"c":2},"a":3},"x":{"a":4,"a":5,"b":[{"d":1,"d":{"e":1}}]}}')
    add("dup pair vs raw", '{"\\ud83d\\ude00":1,"\U0001f600":2}')
    add("dup lone", r'{"\ud800":1,"\ud800":2,"\udc00":3}')
    add("dup 17+ members", "{" + ",".join('"k%d":%d' % (j % 9, j) for j in range(40)) + "}")
    add("dup id", '{"id":"first","id":"second"}')
    add("dup id null last", '{"id":"first","id":null}')
    add("dup id obj then str", '{"id":{"a":1},"id":"s"}')
    add("dup id str then obj", '{"id":"s","id":{"b":[1,2]}}')

    # ids for key derivation
    for t in ["1.0", "1e2", "-0", "0", "1E400", "100000000000000000000000000001", "1.50", "true", "false",
              '""', "null", '"x"', '" x"', '"x y"', '"\\u007f"', '"\\u0020"', '"a:b"', '"' + "a" * 200 + '"',
              '"' + "a" * 201 + '"', '"' + "é" * 100 + '"', '"\\ud800"', '"\\u00e9"', "[1,2]", '{"b":1,"a":2}',
              "[]", "{}", '"\\t"', '"' + "9" * 199 + '"', "9" * 200, "9" * 201, "-" + "9" * 200, "1.0e-00"]:
        add("id " + t[:30], '{"id":' + t + "}")

    # ---------------------------------------------------------------- structure
    for d in [127, 128, 129, 130, 200]:
        add("deep arr %d" % d, "[" * d + "]" * d)
        add("deep obj %d" % d, '{"a":' * d + "1" + "}" * d)
        opens = [R.choice(['[', '{"k":']) for _ in range(d)]
        add("deep mixed %d" % d, "".join(opens) + "0" + "".join("]" if o == "[" else "}" for o in reversed(opens)))
    add("deep arr 128 with val", "[" * 128 + "1" + "]" * 128)
    add("deep obj 128 empty", '{"a":' * 127 + "{}" + "}" * 127)
    add("deep obj 129 empty", '{"a":' * 128 + "{}" + "}" * 128)
    add("deep 129 behind dup", '{"a":' + "[" * 128 + "]" * 128 + ',"a":1}')
    add("deep 128 with id", '{"id":"x","a":' + "[" * 127 + "]" * 127 + "}")
    add("deep 129 with id", '{"id":"x","a":' + "[" * 128 + "]" * 128 + "}")
    add("deep 129 after id", '{"a":' + "[" * 128 + "]" * 128 + ',"id":"x"}')

    for name, body in [
        ("ws all", ' \t\n\r{ \t\n\r"a" \t\n\r: \t\n\r1 \t\n\r} \t\n\r'),
        ("ws ff", '\f{}'), ("ws vt", '{}\v'), ("ws nbsp", '\u00a0{}'), ("ws nbsp after", '{}\u00a0'),
        ("ws u2028", '{}\u2028'), ("bom", '\ufeff{}'), ("bom after ws", ' \ufeff{}'), ("bom end", '{}\ufeff'),
        ("trail garbage", '{}x'), ("trail second value", '{} {}'), ("trail comma", '[1,]'),
        ("trail comma obj", '{"a":1,}'), ("trail nul", '{}\x00'), ("empty", ''), ("only ws", ' \n'),
        ("NaN", 'NaN'), ("Inf", 'Infinity'), ("-Inf", '-Infinity'), ("NaN in arr", '[NaN]'),
        ("nan lower", 'nan'), ("Infinity prefix", '[Infinit]'), ("-Infinityx", '[-Infinityx]'),
        ("true prefix", 'tru'), ("truex", 'truex'), ("nulll", 'nulll'), ("TRUE", 'TRUE'),
        ("single quote", "{'a':1}"), ("unquoted key", '{a:1}'), ("num key", '{1:1}'),
        ("comment", '{} // c'), ("missing colon", '{"a" 1}'), ("double comma", '[1,,2]'),
        ("leading comma", '[,1]'), ("unterminated", '{"a":1'), ("unterminated str", '"abc'),
        ("escaped quote end", '"abc\\"'), ("key not string", '{null:1}'),
    ]:
        add(name, body)

    # long strings: the 8-byte fast path at every offset, raw multibyte, escapes, controls
    SPECIAL = ['"', "\\", "\\n", "\\u00e9", "\\ud83d\\ude00", "\\ud800", "\x7f", "\x1f", "\x00", "\t",
               "\u00e9", "\u20ac", "\U0001f600", "\uffff", "/", "\\/"]
    for i in range(3000):
        n = R.randint(0, 40)
        chars = [chr(R.randint(0x20, 0x7e)).replace('"', "a").replace("\\", "b") for _ in range(n)]
        for _ in range(R.randint(0, 3)):
            chars.insert(R.randint(0, len(chars)), R.choice(SPECIAL))
        pre = " " * R.randint(0, 9)
        st = '"' + "".join(chars) + '"'
        add("long str %d" % i, pre + R.choice(["%s", "[%s]", '{"id":%s}', '{%s:1}', '[%s,1]']) % st)

    # big documents: arena chunks (8192 Values), map dedup (>16 members), deep unsorted objects
    def big_obj(n, dup_every):
        keys = ["k%05d" % R.randint(0, n) for _ in range(n)]
        return "{" + ",".join('"%s":%d' % (k, j) for j, k in enumerate(keys)) + "}"

    add("big obj 20000", big_obj(20000, 3))
    add("big arr of unsorted objs", "[" + ",".join('{"b":%d,"a":{"d":1,"c":[%d,{"z":1,"y":2}]},"b":0}' % (j, j) for j in range(6000)) + "]")
    add("big commas in strings", "[" + ",".join('{"%s":"%s","a":%d}' % (",:[{" * 5 + str(j), ",,::[[{{" * 3, j) for j in range(5000)) + "]")
    add("nested unsorted wide", '{"z":' * 60 + "{" + ",".join('"%c%d":%d' % (chr(0x7a - j % 26), j, j) for j in range(100)) + "}" + ',"a":1}' * 60)
    add("wide then deep", "{" + ",".join('"k%d":%s' % (40 - j, '{"y":1,"x":' * 20 + "0" + "}" * 20) for j in range(40)) + "}")

    # random mutations of valid documents (rejection agreement)
    valid = [base64.b64decode(v["input"]) for v in VECTORS if v["want"] is not None and len(v["input"]) < 400]
    for i in range(3000):
        b = bytearray(R.choice(valid))
        op = R.random()
        pos = R.randint(0, len(b))
        if op < 0.33 and b:
            del b[min(pos, len(b) - 1)]
        elif op < 0.66:
            b[pos:pos] = bytes([R.choice(b'{}[]",:\\ -.eE0123456789tfnu\x7f\x00\xc3\xa9\xed\xa0\x80\xef\xbb\xbf')])
        elif b:
            b[min(pos, len(b) - 1)] = R.randint(0, 255)
        add("mut %d" % i, bytes(b))



def long_numbers():
    """Numbers with more than 800 digits before the decimal point, or an
    exponent of 6+ digits: Go's strconv.ParseFloat (which ParseJSON and
    appendPythonNumber use) gets them wrong (golang/go#42436 and its decimal
    fallback, which stops counting integer digits after 800)."""
    mid = "100000000000000011102230246251565404236316680908203125"  # halfway 1.0 .. 1.0000000000000002
    for n in [799, 800, 801, 1000, 1500, 5000]:
        add("long int mantissa 1e%d e-%d" % (n, n), "[1" + "0" * n + "e-%d]" % n)
        add("long int mantissa 2e%d e-%d" % (n, n), "[2" + "0" * n + "e-%d]" % n)
        add("long int mantissa with dot %d" % n, "[1" + "0" * n + ".0e-%d]" % n)
    add("above halfway, 955 integer digits", "[" + mid + "0" * 900 + "1e-954]")
    add("above halfway, 755 integer digits", "[" + mid + "0" * 700 + "1e-754]")
    add("1e310 written with 1001 digits", "[1" + "0" * 1000 + "e-690]")
    add("-1e310 written with 1001 digits", "[-1" + "0" * 1000 + "e-690]")
    add("1e400 written with 1001 digits", '{"n":1' + "0" * 1000 + "e-600}")
    add("0.1 spelled short", '{"amount":0.1}')
    add("1.0 spelled with 801 digits", '{"amount":1' + "0" * 800 + "e-800}")
    add("6-digit exponent (go#42436)", "[0." + "0" * 99999 + "1e100000]")
    add("6-digit exponent 2 (go#42436)", "[0." + "0" * 99999 + "2e100000]")
    add("6-digit negative exponent", "[1" + "0" * 100000 + "e-100000]")
    for nd in range(10300, 10360, 7):
        add("5-digit capped exponent %d" % nd, "[1" + "0" * nd + "e-100000]")
    R2 = random.Random(42)
    for i in range(40):
        nd = R2.randint(801, 3000)
        digits = str(R2.randint(1, 9)) + "".join(R2.choice("0123456789") for _ in range(nd - 1))
        e = -(nd - R2.randint(-20, 25))
        add("random %d-digit mantissa e%d" % (nd, e), "[%se%d]" % (digits, e))


VECTORS.clear()
SEEN.clear()
if "--sweep" in sys.argv:
    sweep()
long_numbers()

here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "vectors.jsonl"), "w") as f:
    for v in VECTORS:
        f.write(json.dumps(v, sort_keys=True) + "\n")
print(len(VECTORS), "vectors;", sum(v["want"] is None for v in VECTORS), "rejected")
