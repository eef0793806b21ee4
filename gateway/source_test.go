package gateway

import (
	"errors"
	"net/http"
	"strings"
	"testing"
)

func TestParseSource(t *testing.T) {
	tests := []struct {
		in      string
		json    bool
		header  string // canonical name, for header sources
		wantErr string // substring; "" means valid
	}{
		{in: "header:webhook-id", header: "Webhook-Id"},
		{in: "header:X-GitHub-Delivery", header: "X-Github-Delivery"},
		{in: "json:/id", json: true},
		{in: "json:", json: true},
		{in: "json:/a~1b/~0c/0", json: true},
		{in: "header:", wantErr: "header name is empty"},
		{in: "header:bad name", wantErr: "invalid character at offset 3"},
		{in: "json:id", wantErr: "must be empty or start with '/'"},
		{in: "json:/a~2", wantErr: "'~' must be followed by 0 or 1"},
		{in: "json:/a~", wantErr: "'~' must be followed by 0 or 1"},
		{in: "body:/id", wantErr: `want "header:<Name>" or "json:<JSON Pointer>"`},
		{in: "/id", wantErr: `want "header:<Name>"`},
		{in: "", wantErr: `source "": want`},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			s, err := ParseSource(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one saying %q", err, tc.wantErr)
				}
				if !strings.Contains(err.Error(), `"`+tc.in+`"`) {
					t.Errorf("err %q does not quote the source", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.IsJSON() != tc.json || s.String() != tc.in || s.header != tc.header {
				t.Errorf("got json=%v string=%q header=%q", s.IsJSON(), s.String(), s.header)
			}
		})
	}
}

// TestPointerResolve follows RFC 6901 section 5's examples, plus the
// array index rules.
func TestPointerResolve(t *testing.T) {
	doc := mustParse(t, `{"foo":["bar","baz"],"":0,"a/b":1,"c%d":2,"e^f":3,"g|h":4,"i\\j":5,"k\"l":6," ":7,"m~n":8,
		"arr":[[10,11],{"x":null}],"01":"key01"}`)
	tests := []struct {
		ptr   string
		want  string // canonical JSON of the result
		found bool
	}{
		{"", "", true}, // whole document, checked by kind below
		{"/foo", `["bar","baz"]`, true},
		{"/foo/0", `"bar"`, true},
		{"/", `0`, true},
		{"/a~1b", `1`, true},
		{"/c%d", `2`, true},
		{"/e^f", `3`, true},
		{"/g|h", `4`, true},
		{"/i\\j", `5`, true},
		{"/k\"l", `6`, true},
		{"/ ", `7`, true},
		{"/m~0n", `8`, true},
		{"/arr/0/1", `11`, true},
		{"/arr/1/x", `null`, true},
		{"/01", `"key01"`, true}, // an object key, not an index
		{"/foo/2", "", false},
		{"/foo/-", "", false},
		{"/foo/01", "", false},
		{"/foo/+1", "", false},
		{"/foo/99999999999999999999", "", false},
		{"/foo/0/x", "", false}, // into a string
		{"/missing", "", false},
		{"/foo/", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.ptr, func(t *testing.T) {
			p, err := ParsePointer(tc.ptr)
			if err != nil {
				t.Fatal(err)
			}
			v, ok := p.Resolve(doc)
			if ok != tc.found {
				t.Fatalf("found = %v, want %v", ok, tc.found)
			}
			if !ok {
				return
			}
			if tc.ptr == "" {
				if v.Kind() != KindObject || v.Len() != doc.Len() {
					t.Errorf("empty pointer gave %v, want the document", v.Kind())
				}
				return
			}
			if got := string(Canonical(v)); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func mustParse(t testing.TB, body string) Value {
	t.Helper()
	v, err := ParseJSON([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func mustSource(t testing.TB, s string) Source {
	t.Helper()
	src, err := ParseSource(s)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

func TestSourcePayloadLookup(t *testing.T) {
	h := http.Header{}
	h.Set("Webhook-Id", "msg_1")
	h.Add("Webhook-Id", "msg_2")
	h.Set("X-Empty", "")
	body := `{"id":"evt_1","n":12.50,"i":-0,"t":true,"f":false,"z":null,"e":"","o":{"b":1,"a":[2]},` +
		`"arr":[1,"x"],"u":"caf\u00e9","id":"evt_2"}`
	p := NewPayload(h, []byte(body), "application/json")
	tests := []struct {
		src  string
		want string
		ok   bool
	}{
		{"header:webhook-id", "msg_1", true}, // first value
		{"header:X-Empty", "", false},        // empty counts as absent
		{"header:X-Missing", "", false},
		{"json:/id", "evt_2", true}, // duplicate key: last wins
		{"json:/n", "12.50", true},  // literal text
		{"json:/i", "-0", true},
		{"json:/t", "true", true},
		{"json:/f", "false", true},
		{"json:/z", "", false}, // null is absent
		{"json:/e", "", false}, // empty string is absent
		{"json:/missing", "", false},
		{"json:/o", `{"a":[2],"b":1}`, true}, // canonical JSON
		{"json:/arr", `[1,"x"]`, true},
		{"json:/arr/1", "x", true},
		{"json:/u", "café", true},
	}
	for _, tc := range tests {
		t.Run(tc.src, func(t *testing.T) {
			got, ok, err := p.Lookup(mustSource(t, tc.src))
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want || ok != tc.ok {
				t.Errorf("Lookup = %q, %v; want %q, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
	t.Run("zero source", func(t *testing.T) {
		if got, ok, err := p.Lookup(Source{}); got != "" || ok || err != nil {
			t.Errorf("Lookup(Source{}) = %q, %v, %v; want absent", got, ok, err)
		}
	})
}

func TestSourcePayloadLookupBadJSON(t *testing.T) {
	h := http.Header{"Webhook-Id": {"msg_1"}}
	p := NewPayload(h, []byte(`{"id":NaN}`), "application/json")
	if got, ok, err := p.Lookup(mustSource(t, "header:Webhook-Id")); !ok || got != "msg_1" || err != nil {
		t.Errorf("header lookup on a bad body = %q, %v, %v; want msg_1", got, ok, err)
	}
	for range 2 { // the second call is served from the cached parse
		_, ok, err := p.Lookup(mustSource(t, "json:/id"))
		if ok || !errors.Is(err, ErrBadJSON) || !strings.Contains(err.Error(), "NaN is not allowed") {
			t.Errorf("json lookup on a bad body: ok=%v err=%v, want ErrBadJSON saying NaN", ok, err)
		}
	}
}

func TestSourceDeclaresJSON(t *testing.T) {
	tests := []struct {
		ct   string
		want bool
	}{
		{"application/json", true},
		{"Application/JSON; charset=utf-8", true},
		{" application/json ;charset=utf-8", true},
		{"application/cloudevents+json", true},
		{"application/vnd.api+JSON", true},
		{"application/x-www-form-urlencoded", false},
		{"text/plain", false},
		{"application/jsonp", false},
		{"+json", false},
		{"/+json", false},
		{"application/+json", false},
		{"", false},
	}
	for _, tc := range tests {
		t.Run(tc.ct, func(t *testing.T) {
			if got := NewPayload(nil, nil, tc.ct).DeclaresJSON(); got != tc.want {
				t.Errorf("DeclaresJSON(%q) = %v, want %v", tc.ct, got, tc.want)
			}
		})
	}
}
