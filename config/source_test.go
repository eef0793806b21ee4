package config

import (
	"strings"
	"testing"
)

func TestParseSource(t *testing.T) {
	tests := []struct {
		in      string
		want    Source
		wantErr string
	}{
		{in: "header:webhook-id", want: Source{Kind: SourceHeader, Name: "webhook-id"}},
		{in: "header:X-GitHub-Delivery", want: Source{Kind: SourceHeader, Name: "X-GitHub-Delivery"}},
		{in: "json:/id", want: Source{Kind: SourceJSON, Name: "/id"}},
		{in: "json:/data/object/id", want: Source{Kind: SourceJSON, Name: "/data/object/id"}},
		{in: "json:/a~1b/~0", want: Source{Kind: SourceJSON, Name: "/a~1b/~0"}},
		{in: "json:/", want: Source{Kind: SourceJSON, Name: "/"}},
		{in: "json:/items/0", want: Source{Kind: SourceJSON, Name: "/items/0"}},
		{in: "json:", wantErr: "empty JSON Pointer"},
		{in: "json:id", wantErr: "must start with /"},
		{in: "json:/a~", wantErr: "~ must be followed by 0 or 1"},
		{in: "json:/a~2", wantErr: "~ must be followed by 0 or 1"},
		{in: "header:", wantErr: "empty header name"},
		{in: "header:X Id", wantErr: "not allowed in header names"},
		{in: "header:X-Id:", wantErr: "not allowed in header names"},
		{in: "Header:X-Id", wantErr: "want header:Name or json:/pointer"},
		{in: "/id", wantErr: "want header:Name or json:/pointer"},
		{in: "", wantErr: "want header:Name or json:/pointer"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseSource(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseSource(%q) = %v, %v; want error containing %q", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseSource(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
			if got.String() != tt.in {
				t.Errorf("String() = %q, want %q", got.String(), tt.in)
			}
		})
	}
}
