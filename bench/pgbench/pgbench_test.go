package pgbench

import (
	"strings"
	"testing"
)

func TestScripts(t *testing.T) {
	for _, s := range []Script{ReceiverNew, MinimalNew, SnippetNew, SnippetNewTx} {
		text := s.Text()
		if !strings.Contains(text, `\set r random(`) {
			t.Errorf("%s: no random key", s.File)
		}
		if strings.Contains(text, ":body") != s.Body {
			t.Errorf("%s: uses :body %v, Body says %v", s.File, strings.Contains(text, ":body"), s.Body)
		}
		if strings.HasPrefix(s.SQL(), "--") || !strings.HasPrefix(s.SQL(), `\set`) {
			t.Errorf("%s: SQL() starts %q", s.File, s.SQL()[:20])
		}
		if strings.Contains(text, "webhook_events") {
			t.Errorf("%s: webhook_events no longer exists", s.File)
		}
	}
	if !strings.Contains(ReceiverNew.Text(), `\startpipeline`) || !strings.Contains(ReceiverNew.Text(), `\endpipeline`) {
		t.Error("(a) is not pipelined")
	}
}
