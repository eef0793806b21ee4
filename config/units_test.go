package config

import (
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Duration
		wantErr bool
	}{
		{in: "96h", want: 96 * time.Hour},
		{in: "2m", want: 2 * time.Minute},
		{in: "1s", want: time.Second},
		{in: "1h30m", want: 90 * time.Minute},
		{in: "500ms", want: 500 * time.Millisecond},
		{in: "0", want: 0},
		{in: "30d", want: 720 * time.Hour},
		{in: "1d12h", want: 36 * time.Hour},
		{in: "1d1m", want: 24*time.Hour + time.Minute},
		{in: "-1d", want: -24 * time.Hour},
		{in: "-5m", want: -5 * time.Minute},
		{in: " 2m ", want: 2 * time.Minute},
		{in: "30", wantErr: true},
		{in: "", wantErr: true},
		{in: "d", wantErr: true},
		{in: "1.5d", wantErr: true},
		{in: "1d-1h", wantErr: true},
		{in: "1dx", wantErr: true},
		{in: "two minutes", wantErr: true},
		{in: "99999999999999999d", wantErr: true},
		{in: "106751d23h47m16s", want: 106751*24*time.Hour + 23*time.Hour + 47*time.Minute + 16*time.Second},
		{in: "106751d24h", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseDuration(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ParseDuration(%q) error = %v, wantErr %v", tt.in, err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("ParseDuration(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseBytes(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{in: "1048576", want: 1 << 20},
		{in: "0", want: 0},
		{in: "-1", want: -1},
		{in: "512B", want: 512},
		{in: "10GB", want: 10_000_000_000},
		{in: "1GB", want: 1_000_000_000},
		{in: "512MB", want: 512_000_000},
		{in: "1KB", want: 1000},
		{in: "2TB", want: 2_000_000_000_000},
		{in: "1GiB", want: 1 << 30},
		{in: "64MiB", want: 64 << 20},
		{in: "4KiB", want: 4096},
		{in: "1TiB", want: 1 << 40},
		{in: "1.5GB", want: 1_500_000_000},
		{in: "1.5KiB", want: 1536},
		{in: "10gb", want: 10_000_000_000},
		{in: "10 GB", want: 10_000_000_000},
		{in: "1gib", want: 1 << 30},
		{in: "1.0001KB", wantErr: true}, // 1000.1 bytes
		{in: "1.5B", wantErr: true},
		{in: "10G", wantErr: true},
		{in: "GB", wantErr: true},
		{in: "", wantErr: true},
		{in: "1e3", wantErr: true},
		{in: "0x10", wantErr: true},
		{in: "1_000", wantErr: true},
		{in: "1.", wantErr: true},
		{in: ".5GB", wantErr: true},
		{in: "9223372036854775807", want: 9223372036854775807},
		{in: "9223372036854775808", wantErr: true},
		{in: "10000000TB", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseBytes(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ParseBytes(%q) error = %v, wantErr %v", tt.in, err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("ParseBytes(%q) = %d, want %d", tt.in, got, tt.want)
			}
		})
	}
}

func TestFormatHelpers(t *testing.T) {
	for in, want := range map[time.Duration]string{
		96 * time.Hour: "96h", 2 * time.Minute: "2m", 90 * time.Minute: "1h30m",
		time.Hour + 5*time.Second: "1h0m5s", 1500 * time.Millisecond: "1.5s",
	} {
		if got := formatDuration(in); got != want {
			t.Errorf("formatDuration(%v) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[int64]string{64 << 20: "64 MiB", 1 << 30: "1 GiB", 1000: "1000 bytes", 0: "0 bytes"} {
		if got := formatBytes(in); got != want {
			t.Errorf("formatBytes(%d) = %q, want %q", in, got, want)
		}
	}
}
