package main

import (
	"strings"
	"testing"
)

// A row whose last cells are empty ends without the column's padding.
func TestTableTrimsTrailingSpaces(t *testing.T) {
	var b strings.Builder
	tw := newTable(&b)
	for _, row := range []string{"SEQ\tKEY\tDECISION\tREASON", "1\tp:a:evt:x\tapplied\t", "2\tp:a:evt:long-key\tstale\tolder"} {
		_, _ = tw.Write([]byte(row + "\n"))
	}
	if err := tw.Flush(); err != nil {
		t.Fatal(err)
	}
	want := "SEQ  KEY               DECISION  REASON\n" +
		"1    p:a:evt:x         applied\n" +
		"2    p:a:evt:long-key  stale     older\n"
	if b.String() != want {
		t.Errorf("table:\n%q\nwant\n%q", b.String(), want)
	}
}
