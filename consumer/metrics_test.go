package consumer

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

func TestForwardClass(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{nil, "2xx"},
		{&ForwardError{Status: 503, Retryable: true}, "5xx"},
		{Permanent(&ForwardError{Status: 404}), "4xx"},
		{Permanent(&ForwardError{Status: 302}), "3xx"},
		{fmt.Errorf("forward: %w", context.DeadlineExceeded), "timeout"},
		{errors.New("connection refused"), "error"},
	}
	for _, tt := range tests {
		if got := forwardClass(tt.err); got != tt.want {
			t.Errorf("forwardClass(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}
