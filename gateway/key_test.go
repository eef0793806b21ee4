package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

func sha256Hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func mustPointer(t testing.TB, s string) *Pointer {
	t.Helper()
	p, err := ParsePointer(s)
	if err != nil {
		t.Fatal(err)
	}
	return &p
}

func TestDeriveKey(t *testing.T) {
	std := func(t *testing.T) KeyRule { // the config example's grantsgov provider
		return KeyRule{
			Provider:     "grantsgov",
			AccountValue: "default",
			EventID:      []Source{mustSource(t, "header:webhook-id"), mustSource(t, "json:/id")},
			Fallback:     FallbackDigest,
			NeedsJSON:    true,
		}
	}
	formRule := func(t *testing.T) KeyRule { // no json: source anywhere
		return KeyRule{
			Provider:     "forms",
			AccountValue: "default",
			EventID:      []Source{mustSource(t, "header:X-Event-Id")},
			Fallback:     FallbackDigest,
		}
	}
	fieldsRule := func(t *testing.T) KeyRule {
		r := std(t)
		r.Fallback = FallbackFields
		r.EventID = nil
		r.KeyFields = []Pointer{*mustPointer(t, "/grant_id"), *mustPointer(t, "/status"), *mustPointer(t, "/missing")}
		return r
	}
	long := func(n int) string { return strings.Repeat("a", n) }

	tests := []struct {
		name    string
		rule    func(t *testing.T) KeyRule
		header  http.Header
		body    string
		ct      string // "" means application/json
		want    string // the key
		kind    KeyKind
		account string // raw account; "" means "default"
		wantErr error
		errText string // substring of the error message
	}{
		// Event ids.
		{name: "id from header", rule: std, header: http.Header{"Webhook-Id": {"msg_1"}}, body: `{"id":"evt_1"}`,
			want: "grantsgov:default:evt:msg_1", kind: KeyEvent},
		{name: "id from json when header missing", rule: std, body: `{"id":"evt_1"}`,
			want: "grantsgov:default:evt:evt_1", kind: KeyEvent},
		{name: "empty header counts as absent", rule: std, header: http.Header{"Webhook-Id": {""}}, body: `{"id":"evt_1"}`,
			want: "grantsgov:default:evt:evt_1", kind: KeyEvent},
		{name: "empty json id counts as absent", rule: std, body: `{"id":"","x":1}`,
			want: "grantsgov:default:dig:" + sha256Hex(`{"id":"","x":1}`), kind: KeyDigest},
		{name: "numeric id is its literal text", rule: std, body: `{"id":12.50}`,
			want: "grantsgov:default:evt:12.50", kind: KeyEvent},
		{name: "bool id", rule: std, body: `{"id":true}`, want: "grantsgov:default:evt:true", kind: KeyEvent},
		{name: "object id is canonical JSON", rule: std, body: `{"id":{"b":1,"a":2}}`,
			want: "grantsgov:default:evt:" + `{"a":2,"b":1}`, kind: KeyEvent},
		{name: "id with colon stays", rule: std, body: `{"id":"a:b"}`, want: "grantsgov:default:evt:a:b", kind: KeyEvent},
		{name: "id of 200 bytes stays", rule: std, body: `{"id":"` + long(200) + `"}`,
			want: "grantsgov:default:evt:" + long(200), kind: KeyEvent},
		{name: "id of 201 bytes is hashed", rule: std, body: `{"id":"` + long(201) + `"}`,
			want: "grantsgov:default:evt#" + sha256Hex(long(201)), kind: KeyEventHashed},
		{name: "id with space is hashed", rule: std, header: http.Header{"Webhook-Id": {"a b"}}, body: `{}`,
			want: "grantsgov:default:evt#" + sha256Hex("a b"), kind: KeyEventHashed},
		{name: "non-ascii id is hashed as UTF-8", rule: std, body: `{"id":"caf\u00e9"}`,
			want: "grantsgov:default:evt#" + sha256Hex("café"), kind: KeyEventHashed},
		{name: "id with DEL is hashed", rule: std, body: `{"id":"a\u007f"}`,
			want: "grantsgov:default:evt#" + sha256Hex("a\x7f"), kind: KeyEventHashed},
		{name: "lone surrogate id is hashed as WTF-8", rule: std, body: `{"id":"\ud800"}`,
			want: "grantsgov:default:evt#" + sha256Hex("\xed\xa0\x80"), kind: KeyEventHashed},

		// Digest.
		{name: "digest of canonical JSON", rule: std, body: "{ \"b\": 1.0,\n \"a\": [\"\u00e9\"] }",
			want: "grantsgov:default:dig:" + sha256Hex(`{"a":["\u00e9"],"b":1.0}`), kind: KeyDigest},
		{name: "digest ignores formatting and order", rule: std, body: `{"a":["\u00E9"],"b":1.0}`,
			want: "grantsgov:default:dig:" + sha256Hex(`{"a":["\u00e9"],"b":1.0}`), kind: KeyDigest},
		{name: "digest of a json body sent as a form", rule: formRule, body: `{"x":1}`,
			ct: "application/x-www-form-urlencoded", want: "forms:default:dig:" + sha256Hex(`{"x":1}`), kind: KeyDigest},

		// Raw.
		{name: "raw form body", rule: formRule, body: "a=1&b=2", ct: "application/x-www-form-urlencoded",
			want: "forms:default:raw:" + sha256Hex("a=1&b=2"), kind: KeyRaw},
		{name: "raw empty body", rule: formRule, body: "", ct: "text/plain",
			want: "forms:default:raw:" + sha256Hex(""), kind: KeyRaw},
		{name: "raw form body with a header id", rule: formRule, header: http.Header{"X-Event-Id": {"e1"}},
			body: "a=1", ct: "application/x-www-form-urlencoded", want: "forms:default:evt:e1", kind: KeyEvent},
		{name: "json content type with bad body", rule: formRule, body: "a=1", ct: "application/json; charset=utf-8",
			wantErr: ErrBadJSON, errText: "expected a value"},
		{name: "+json content type with bad body", rule: formRule, body: "[1,", ct: "application/cloudevents+json",
			wantErr: ErrBadJSON, errText: "truncated"},
		{name: "json content type, bad body, id from header", rule: formRule, header: http.Header{"X-Event-Id": {"e1"}},
			body: "a=1", want: "forms:default:evt:e1", kind: KeyEvent},
		{name: "needs json, form body", rule: std, body: "a=1", ct: "application/x-www-form-urlencoded",
			wantErr: ErrBadJSON, errText: "expected a value"},
		{name: "needs json, id in header, bad body", rule: std, header: http.Header{"Webhook-Id": {"msg_1"}},
			body: "\xef\xbb\xbf{}", wantErr: ErrBadJSON, errText: "byte order mark"},
		{name: "json event id implies needs json", ct: "text/plain",
			rule: func(t *testing.T) KeyRule { r := std(t); r.NeedsJSON = false; return r },
			body: "a=1", wantErr: ErrBadJSON, errText: "expected a value"},
		{name: "json account implies needs json", ct: "text/plain",
			rule:   func(t *testing.T) KeyRule { r := formRule(t); r.AccountJSON = mustPointer(t, "/acct"); return r },
			header: http.Header{"X-Event-Id": {"e1"}}, body: "a=1", wantErr: ErrBadJSON},
		{name: "nesting too deep", rule: std, body: strings.Repeat("[", 129) + strings.Repeat("]", 129),
			wantErr: ErrBadJSON, errText: "nesting deeper than 128"},

		// Fields.
		{name: "fields", rule: fieldsRule, body: `{"grant_id":"G-42","status":"paid","at":"2024-01-01"}`,
			want: "grantsgov:default:fld:" + sha256Hex(`["G-42","paid",null]`), kind: KeyFields},
		{name: "fields ignore other members", rule: fieldsRule, body: `{"at":"2024-01-02","status":"paid","grant_id":"G-42"}`,
			want: "grantsgov:default:fld:" + sha256Hex(`["G-42","paid",null]`), kind: KeyFields},
		{name: "fields keep number and string apart", rule: fieldsRule, body: `{"grant_id":42,"status":{"b":1,"a":2}}`,
			want: "grantsgov:default:fld:" + sha256Hex(`[42,{"a":2,"b":1},null]`), kind: KeyFields},
		{name: "fields all absent falls back to digest", rule: fieldsRule, body: `{"grant_id":null,"x":1}`,
			want: "grantsgov:default:dig:" + sha256Hex(`{"grant_id":null,"x":1}`), kind: KeyDigest},
		{name: "fields need json", ct: "text/plain",
			rule: func(t *testing.T) KeyRule { r := fieldsRule(t); r.NeedsJSON = false; return r },
			body: "a=1", wantErr: ErrBadJSON},
		{name: "fields with an id", header: http.Header{"Webhook-Id": {"msg_1"}}, body: `{}`,
			rule: func(t *testing.T) KeyRule {
				r := fieldsRule(t)
				r.EventID = []Source{mustSource(t, "header:webhook-id")}
				return r
			},
			want: "grantsgov:default:evt:msg_1", kind: KeyEvent},

		// Reject.
		{name: "reject without id", body: `{"x":1}`,
			rule:    func(t *testing.T) KeyRule { r := std(t); r.Fallback = FallbackReject; return r },
			wantErr: ErrNoEventID, errText: "no event id: none of header:webhook-id, json:/id is present"},
		{name: "reject without sources", body: `{"x":1}`,
			rule:    func(t *testing.T) KeyRule { r := std(t); r.Fallback = FallbackReject; r.EventID = nil; return r },
			wantErr: ErrNoEventID, errText: "no event_id sources are configured"},
		{name: "reject with id", body: `{"id":"e"}`,
			rule: func(t *testing.T) KeyRule { r := std(t); r.Fallback = FallbackReject; return r },
			want: "grantsgov:default:evt:e", kind: KeyEvent},

		// Accounts.
		{name: "account from header first", rule: accountRule, body: `{"id":"e","acct":"J"}`,
			header: http.Header{"X-Shopify-Shop-Domain": {"demo.myshopify.com"}},
			want:   "shop:demo.myshopify.com:evt:e", kind: KeyEvent, account: "demo.myshopify.com"},
		{name: "account from json when header empty", rule: accountRule, body: `{"id":"e","acct":"J"}`,
			header: http.Header{"X-Shopify-Shop-Domain": {""}}, want: "shop:J:evt:e", kind: KeyEvent, account: "J"},
		{name: "account json number literal", rule: accountRule, body: `{"id":"e","acct":7.0}`,
			want: "shop:7.0:evt:e", kind: KeyEvent, account: "7.0"},
		{name: "account value last", rule: accountRule, body: `{"id":"e","acct":null}`,
			want: "shop:fallback:evt:e", kind: KeyEvent, account: "fallback"},
		{name: "all accounts empty", body: `{"id":"e"}`, account: "-",
			rule: func(t *testing.T) KeyRule { r := accountRule(t); r.AccountValue = ""; return r },
			want: "shop::evt:e", kind: KeyEvent},
		{name: "account with colon is hashed", rule: accountRule, body: `{"id":"e","acct":"a:b"}`,
			want: "shop:acct#" + sha256Hex("a:b") + ":evt:e", kind: KeyEvent, account: "a:b"},
		{name: "account with space is hashed", rule: accountRule, body: `{"id":"e","acct":"a b"}`,
			want: "shop:acct#" + sha256Hex("a b") + ":evt:e", kind: KeyEvent, account: "a b"},
		{name: "non-ascii account is hashed", rule: accountRule, body: `{"id":"e","acct":"\u00e9"}`,
			want: "shop:acct#" + sha256Hex("é") + ":evt:e", kind: KeyEvent, account: "é"},
		{name: "account of 100 bytes stays", rule: accountRule, body: `{"id":"e","acct":"` + long(100) + `"}`,
			want: "shop:" + long(100) + ":evt:e", kind: KeyEvent, account: long(100)},
		{name: "account of 101 bytes is hashed", rule: accountRule, body: `{"id":"e","acct":"` + long(101) + `"}`,
			want: "shop:acct#" + sha256Hex(long(101)) + ":evt:e", kind: KeyEvent, account: long(101)},
		// An account spelling another's hash is hashed too: kept as it
		// is, it shared the keys of "a:b" (a dedup audit, stop 40).
		{name: "account that spells a hash is hashed", rule: accountRule, body: `{"id":"e","acct":"acct#` + sha256Hex("a:b") + `"}`,
			want: "shop:acct#" + sha256Hex("acct#"+sha256Hex("a:b")) + ":evt:e", kind: KeyEvent, account: "acct#" + sha256Hex("a:b")},
		{name: "account starting acct# is hashed", rule: accountRule, body: `{"id":"e","acct":"acct#1"}`,
			want: "shop:acct#" + sha256Hex("acct#1") + ":evt:e", kind: KeyEvent, account: "acct#1"},
		{name: "account in digest key", rule: accountRule, body: `{"acct":"J"}`,
			want: "shop:J:dig:" + sha256Hex(`{"acct":"J"}`), kind: KeyDigest, account: "J"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ct := tc.ct
			if ct == "" {
				ct = "application/json"
			}
			got, err := DeriveKey(tc.rule(t), NewPayload(tc.header, []byte(tc.body), ct))
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				if !strings.Contains(err.Error(), tc.errText) {
					t.Errorf("err %q does not say %q", err, tc.errText)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			account := tc.account
			switch account {
			case "":
				account = "default"
			case "-":
				account = ""
			}
			if got.Key != tc.want || got.Kind != tc.kind || got.Account != account {
				t.Errorf("got key %q kind %q account %q\nwant key %q kind %q account %q",
					got.Key, got.Kind, got.Account, tc.want, tc.kind, account)
			}
			if !strings.HasPrefix(got.Key, tc.rule(t).Provider+":"+got.AccountInKey+":"+string(got.Kind)) {
				t.Errorf("key %q does not start with provider, AccountInKey %q and kind", got.Key, got.AccountInKey)
			}
		})
	}
}

func accountRule(t *testing.T) KeyRule {
	return KeyRule{
		Provider:      "shop",
		AccountHeader: "X-Shopify-Shop-Domain",
		AccountJSON:   mustPointer(t, "/acct"),
		AccountValue:  "fallback",
		EventID:       []Source{mustSource(t, "json:/id")},
		NeedsJSON:     true,
	}
}

func TestDeriveKeyNonCanonicalAccountHeader(t *testing.T) {
	rule := KeyRule{Provider: "p", AccountHeader: "x-tenant", AccountValue: "d", Fallback: FallbackDigest}
	h := http.Header{}
	h.Set("X-Tenant", "t1")
	got, err := DeriveKey(rule, NewPayload(h, []byte(`{}`), "application/json"))
	if err != nil {
		t.Fatal(err)
	}
	if got.Account != "t1" {
		t.Errorf("account = %q, want t1 from the canonicalized header", got.Account)
	}
}

// FuzzDeriveKey checks that any request gives a well-formed key or one of
// the two 400 errors, and the same answer every time.
func FuzzDeriveKey(f *testing.F) {
	f.Add([]byte(`{"id":"evt_1","acct":"A"}`), "msg_1", "", "application/json", uint8(0))
	f.Add([]byte(`{"grant_id":"G-1","status":"x"}`), "", "tenant:1", "application/json", uint8(1))
	f.Add([]byte("a=1&b=2"), "", "", "application/x-www-form-urlencoded", uint8(0))
	f.Add([]byte(`{"id":"\ud800 x"}`), "", "\xff", "text/plain", uint8(2|8|16))
	f.Add([]byte(`[NaN]`), "id with space", "", "application/json", uint8(4))
	f.Fuzz(func(t *testing.T, body []byte, headerID, headerAcct, ct string, mode uint8) {
		rule := KeyRule{
			Provider:      "prov",
			AccountHeader: "X-Account",
			AccountValue:  "default",
			EventID:       []Source{{raw: "header:Webhook-Id", header: "Webhook-Id"}},
			Fallback:      []Fallback{FallbackDigest, FallbackFields, FallbackReject, ""}[mode%4],
			KeyFields:     []Pointer{{raw: "/grant_id", tokens: []string{"grant_id"}}, {raw: "/status", tokens: []string{"status"}}},
			NeedsJSON:     mode&4 != 0,
		}
		if mode&8 != 0 {
			rule.EventID = append(rule.EventID, Source{raw: "json:/id", isJSON: true, ptr: Pointer{raw: "/id", tokens: []string{"id"}}})
		}
		if mode&16 != 0 {
			rule.AccountJSON = &Pointer{raw: "/acct", tokens: []string{"acct"}}
		}
		h := http.Header{"Webhook-Id": {headerID}, "X-Account": {headerAcct}}
		derive := func() (DerivedKey, error) { return DeriveKey(rule, NewPayload(h, body, ct)) }

		got, err := derive()
		again, err2 := derive()
		if got != again || fmt.Sprint(err) != fmt.Sprint(err2) {
			t.Fatalf("not deterministic: %+v %v, then %+v %v", got, err, again, err2)
		}
		// The handler skims the body for the rule's pointers (and one it
		// reads afterwards) instead of parsing the tree: same key, same
		// error, same value read.
		ptrs := []Pointer{{raw: "/id", tokens: []string{"id"}}, {raw: "/grant_id", tokens: []string{"grant_id"}}}
		if rule.AccountJSON != nil {
			ptrs = append(ptrs, *rule.AccountJSON)
		}
		sp := NewPayload(h, body, ct)
		sp.skimFor(ptrs)
		skimmedKey, err3 := DeriveKey(rule, sp)
		if skimmedKey != got || fmt.Sprint(err3) != fmt.Sprint(err) {
			t.Fatalf("skimmed: %+v %v, parsed: %+v %v", skimmedKey, err3, got, err)
		}
		if err == nil {
			src := Source{raw: "json:/grant_id", isJSON: true, ptr: ptrs[1]}
			v1, ok1, e1 := sp.Lookup(src)
			v2, ok2, e2 := NewPayload(h, body, ct).Lookup(src)
			if v1 != v2 || ok1 != ok2 || fmt.Sprint(e1) != fmt.Sprint(e2) {
				t.Fatalf("grant_id skimmed %q %v %v, parsed %q %v %v", v1, ok1, e1, v2, ok2, e2)
			}
		}
		if err != nil {
			if !errors.Is(err, ErrBadJSON) && !errors.Is(err, ErrNoEventID) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		if !strings.HasPrefix(got.Key, rule.Provider+":"+got.AccountInKey+":"+string(got.Kind)) {
			t.Fatalf("key %q does not start with the provider, account and kind", got.Key)
		}
		if !isKeySafe(got.Key) {
			t.Fatalf("key %q has a byte outside printable ASCII", got.Key)
		}
		if len(got.Key) > len(rule.Provider)+1+MaxKeyAccountLen+1+len("evt:")+MaxKeyEventIDLen {
			t.Fatalf("key of %d bytes is longer than the limits allow", len(got.Key))
		}
	})
}

// BenchmarkDeriveKey measures a 1 KB webhook body on the common paths; run
// with -benchmem.
func BenchmarkDeriveKey(b *testing.B) {
	body := benchmarkBody(1024)
	rules := map[string]KeyRule{
		"evt-header": {Provider: "grantsgov", AccountValue: "default", Fallback: FallbackDigest, NeedsJSON: true,
			EventID: []Source{mustSource(b, "header:webhook-id"), mustSource(b, "json:/id")}},
		"evt-json": {Provider: "grantsgov", AccountJSON: mustPointer(b, "/account"), Fallback: FallbackDigest, NeedsJSON: true,
			EventID: []Source{mustSource(b, "json:/id")}},
		"digest": {Provider: "grantsgov", AccountValue: "default", Fallback: FallbackDigest, NeedsJSON: true,
			EventID: []Source{mustSource(b, "json:/missing")}},
		"fields": {Provider: "grantsgov", AccountValue: "default", Fallback: FallbackFields, NeedsJSON: true,
			KeyFields: []Pointer{*mustPointer(b, "/grant_id"), *mustPointer(b, "/type")}},
	}
	// evt-json-skim is evt-json as the handler runs it: the body skimmed
	// for the provider's pointers (account, id, and subject, occurred_at
	// and type, read afterwards) instead of parsed into a tree.
	rules["evt-json-skim"] = rules["evt-json"]
	var ptrs []Pointer
	for _, raw := range []string{"/account", "/id", "/grant_id", "/occurred_at", "/type"} {
		ptrs = append(ptrs, *mustPointer(b, raw))
	}
	for _, name := range []string{"evt-header", "evt-json", "evt-json-skim", "digest", "fields"} {
		rule := rules[name]
		h := http.Header{"Webhook-Id": {"msg_2KWPBgLlAfxdpx2AI54pPJ85f1W"}}
		if name != "evt-header" {
			h = http.Header{}
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				p := NewPayload(h, body, "application/json")
				if name == "evt-json-skim" {
					p.skimFor(ptrs)
				}
				if _, err := DeriveKey(rule, p); err != nil {
					b.Fatal(err)
				}
				if name == "evt-json-skim" {
					if _, ok, err := p.Lookup(Source{isJSON: true, ptr: ptrs[2]}); !ok || err != nil {
						b.Fatalf("grant_id: %v %v", ok, err)
					}
				}
			}
		})
	}
}

// benchmarkBody returns a realistic webhook body of about n bytes: nested
// objects, an array, numbers, and a few escapes and non-ASCII texts.
func benchmarkBody(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"type":"award.disbursed","id":"evt_1NG8Du2eZvKYlo2CUI79vXWy","account":"acct_42",` +
		`"grant_id":"G-42","occurred_at":"2024-05-01T12:00:00Z","data":{"amount":1999.5,"currency":"usd",` +
		`"recipient":{"name":"Caf\u00e9 R\u00e9seau","city":"Montr\u00e9al","zip":"H2X 1Y4"},"tags":["a","b","c"],` +
		`"approved":true,"note":null,"lines":[`)
	for i := 0; b.Len() < n-40; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"n":%d,"desc":"line %d","amt":%d.25}`, i, i, i*10)
	}
	b.WriteString(`]}}`)
	return []byte(b.String())
}
