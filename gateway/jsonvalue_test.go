package gateway

import (
	"errors"
	"strings"
	"testing"
)

func TestParseJSONTree(t *testing.T) {
	v, err := ParseJSON([]byte(`{"z":1.50,"a":[true,null,"x\u00e9"],"z2":-0,"a":{"k":"v"},"big":123456789012345678901234567890}`))
	if err != nil {
		t.Fatal(err)
	}
	if v.Kind() != KindObject || v.Len() != 4 {
		t.Fatalf("root kind %v len %d, want object of 4 members", v.Kind(), v.Len())
	}
	// Member order is the body's, with the duplicate "a" at its first
	// position holding its last value, as in a Python dict.
	wantKeys := []string{"z", "a", "z2", "big"}
	for i, want := range wantKeys {
		if k, _ := v.Member(i); k != want {
			t.Errorf("member %d is %q, want %q", i, k, want)
		}
	}
	if a, _ := v.Get("a"); a.Kind() != KindObject {
		t.Errorf(`"a" is %v, want the last value (object)`, a.Kind())
	}
	tests := []struct {
		key, text string
		kind      Kind
		float     bool
	}{
		{"z", "1.50", KindNumber, true},
		{"z2", "-0", KindNumber, false},
		{"big", "123456789012345678901234567890", KindNumber, false},
	}
	for _, tc := range tests {
		t.Run(tc.key, func(t *testing.T) {
			got, ok := v.Get(tc.key)
			if !ok || got.Kind() != tc.kind || got.Text() != tc.text || got.IsFloat() != tc.float {
				t.Errorf("Get(%q) = %v %q float=%v ok=%v, want %v %q float=%v",
					tc.key, got.Kind(), got.Text(), got.IsFloat(), ok, tc.kind, tc.text, tc.float)
			}
		})
	}
}

func TestParseJSONStrings(t *testing.T) {
	tests := []struct {
		name, body, want string
	}{
		{"plain", `"abc"`, "abc"},
		{"escapes", `"\"\\\/\b\f\n\r\t"`, "\"\\/\b\f\n\r\t"},
		{"bmp escape", `"\u00e9\u4E2D"`, "é中"},
		{"pair", `"\ud83d\ude00"`, "😀"},
		{"raw astral", `"😀"`, "😀"},
		// Lone surrogates are kept as WTF-8 so they can be re-emitted.
		{"lone high", `"\ud800"`, "\xed\xa0\x80"},
		{"lone low", `"\udfff"`, "\xed\xbf\xbf"},
		{"high then pair", `"\ud800\ud800\udc00"`, "\xed\xa0\x80\U00010000"},
		{"high then non-low escape", `"\udbff\u0041"`, "\xed\xaf\xbfA"},
		{"nul", `"a\u0000b"`, "a\x00b"},
		{"del raw", "\"\x7f\"", "\x7f"},
		{"escape after text", `"abc\ndef"`, "abc\ndef"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, err := ParseJSON([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if v.Kind() != KindString || v.Text() != tc.want {
				t.Errorf("got %v %q, want string %q", v.Kind(), v.Text(), tc.want)
			}
		})
	}
}

// TestParseJSONErrors pins the offsets and wording of the 400 messages;
// the Python vectors cover which bodies are rejected.
func TestParseJSONErrors(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		offset int
		reason string
	}{
		{"invalid utf-8", "{\"a\":\"ok\xff\"}", 8, "invalid UTF-8"},
		{"bom", "\xef\xbb\xbf[]", 0, "body starts with a UTF-8 byte order mark"},
		{"nan", `[NaN]`, 1, "NaN is not allowed"},
		{"infinity", `{"a":Infinity}`, 5, "Infinity is not allowed"},
		{"minus infinity", `-Infinity`, 0, "-Infinity is not allowed"},
		{"overflow", `[1, 1e999]`, 4, "number beyond the float64 range"},
		{"depth", strings.Repeat("[", 129), 128, "nesting deeper than 128"},
		{"truncated", `{"a":[1,`, 8, "truncated input: expected a value"},
		{"unterminated string", `{"a":"b`, 7, "truncated input: unterminated string"},
		{"trailing", `{} {}`, 3, "trailing data after the JSON value"},
		{"invalid escape", `"\q"`, 1, "invalid escape in string"},
		{"invalid u escape", `"\u00g0"`, 1, `invalid \u escape in string (want 4 hex digits)`},
		{"control char", "\"\x1f\"", 1, "unescaped control character 0x1f in string"},
		{"unexpected printable", `[1;2]`, 2, `expected ',' or ']' in array, found ';'`},
		{"unexpected non-ascii", `[é]`, 1, "expected a value, found byte 0xc3"},
		{"empty", ``, 0, "empty body, expected a JSON value"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseJSON([]byte(tc.body))
			var je *JSONError
			if !errors.As(err, &je) {
				t.Fatalf("err = %v, want a *JSONError", err)
			}
			if !errors.Is(err, ErrBadJSON) {
				t.Errorf("err does not wrap ErrBadJSON")
			}
			if je.Offset != tc.offset || je.Reason != tc.reason {
				t.Errorf("got %q at %d, want %q at %d", je.Reason, je.Offset, tc.reason, tc.offset)
			}
		})
	}
}

func TestJSONErrorMessage(t *testing.T) {
	_, err := ParseJSON([]byte("[NaN]"))
	want := "body is not valid JSON: NaN is not allowed at byte 1"
	if err == nil || err.Error() != want {
		t.Errorf("err = %v, want %q", err, want)
	}
}

func TestParseJSONDoesNotRetainBody(t *testing.T) {
	body := []byte(`{"id":"abc"}`)
	v, err := ParseJSON(body)
	if err != nil {
		t.Fatal(err)
	}
	copy(body, `{"id":"xyz"}`)
	if id, _ := v.Get("id"); id.Text() != "abc" {
		t.Errorf("value changed with the body: %q", id.Text())
	}
}
