package consumer

import (
	"strings"
	"testing"

	"github.com/hookgate/hookgate/event"
)

func TestRenderSubject(t *testing.T) {
	ev := Event{Provider: "fluxx", Account: "demo.myshopify.com", Subject: "G-42", Type: "award.disbursed"}
	tests := []struct{ tmpl, want string }{
		{"grants.{provider}.{subject}.{type}", "grants.fluxx.G-42.award.disbursed"},
		{"grants.{provider}.{account}.{subject}", "grants.fluxx.demo=2Emyshopify=2Ecom.G-42"},
		{"fixed.subject", "fixed.subject"},
		{"{type}", "award.disbursed"},
		{"a.{unknown}.{subject}.{", "a.{unknown}.G-42.{"},
		{"{{subject}}", "{G-42}"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := RenderSubject(tt.tmpl, ev); got != tt.want {
			t.Errorf("RenderSubject(%q) = %q, want %q", tt.tmpl, got, tt.want)
		}
	}
}

// FuzzRenderSubject holds the scan to what a strings.Replacer of the four
// placeholders gives, for any template and values.
func FuzzRenderSubject(f *testing.F) {
	f.Add("grants.{provider}.{subject}.{type}", "p", "acct", "G-1", "a.b")
	f.Add("{{account}}{}{type", "p", "x.y", "", "")
	f.Fuzz(func(t *testing.T, tmpl, provider, account, subject, typ string) {
		ev := Event{Provider: provider, Account: account, Subject: subject, Type: typ}
		want := strings.NewReplacer(
			"{provider}", ev.Provider,
			"{account}", event.Token(ev.Account),
			"{subject}", event.Token(ev.Subject),
			"{type}", event.Tokens(ev.Type),
		).Replace(tmpl)
		if got := RenderSubject(tmpl, ev); got != want {
			t.Fatalf("RenderSubject(%q) = %q, Replacer gives %q", tmpl, got, want)
		}
	})
}

// A GRANTS subject too long to publish is bounded to a digest after the
// template's start up to its first outside value, {provider} kept (a
// config name): the event stays under grants.<provider>.>, the filter a
// service wanting one provider's events uses (audit 42: it went to
// grants.=H<sha256>).
func TestRenderSubjectTooLongKeepsTheProvider(t *testing.T) {
	ev := Event{Provider: "fluxx", Account: "default", Subject: strings.Repeat("é", 700), Type: strings.Repeat("a.", 600) + "b"}
	for _, tc := range []struct{ tmpl, prefix string }{
		{"grants.{provider}.{subject}.{type}", "grants.fluxx.=H"},
		{"grants.{provider}-{subject}", "grants.fluxx-=H"},
		{"out.{provider}.x.{provider}.{subject}", "out.fluxx.x.=H"},
		{"grants.{account}.{provider}.{subject}.{type}", "grants.=H"},
		{"{subject}.{provider}", "=H"},
	} {
		got := RenderSubject(tc.tmpl, ev)
		if len(got) != len(tc.prefix)+64 || !strings.HasPrefix(got, tc.prefix) {
			t.Errorf("RenderSubject(%q) of a long subject = %q, want %s<sha256 hex>", tc.tmpl, got, tc.prefix)
		}
		if short := RenderSubject(tc.tmpl, Event{Provider: "fluxx", Account: "default", Subject: "G-1", Type: "t"}); strings.Contains(short, "=H") {
			t.Errorf("RenderSubject(%q) of a short subject = %q, want it whole", tc.tmpl, short)
		}
	}
}
