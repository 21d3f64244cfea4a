package route

import (
	"encoding/json"
	"testing"

	"github.com/aegis-gw/aegis/shared/pipeline"
)

func TestMatchTemplate(t *testing.T) {
	for _, tc := range []struct {
		tmpl, uri string
		want      bool
	}{
		{"test://template/{id}/data", "test://template/42/data", true},
		{"test://template/{id}/data", "test://template/4/2/data", false},
		{"test://template/{id}/data", "test://template//data", false},
		{"test://template/{id}/data", "test://template/42/datum", false},
		{"file:///{+path}", "file:///a/b/c.txt", true},
		{"search://q{?query,lang}", "search://q?query=x&lang=en", true},
		{"search://q{?query,lang}", "search://q", true},
		{"users{/id}", "users/7", true},
		{"plain://uri", "plain://uri", true},
		{"plain://uri", "plain://other", false},
		{"a.b{x}", "aXb1", false}, // literal dots are literal
		{"broken{id", "broken1", false},
	} {
		if got := matchTemplate(tc.tmpl, tc.uri); got != tc.want {
			t.Errorf("matchTemplate(%q, %q) = %v, want %v", tc.tmpl, tc.uri, got, tc.want)
		}
	}
}

func TestUpstreamParams(t *testing.T) {
	for _, tc := range []struct {
		name                     string
		method, tool, up, target string
		params, want             string
	}{
		{"tool renamed, server removed", "tools/call", "a.echo", "echo", "", `{"name":"a.echo","server":"a","arguments":{}}`, `{"name":"echo","arguments":{}}`},
		{"tool unchanged", "tools/call", "echo", "echo", "", `{"name":"echo"}`, `{"name":"echo"}`},
		{"prompt renamed", "prompts/get", "prompt:a.greet", "prompt:greet", "greet", `{"name":"a.greet","arguments":{"x":"1"}}`, `{"name":"greet","arguments":{"x":"1"}}`},
		{"resource renamed", "resources/read", "resource:a.file:///x", "resource:file:///x", "file:///x", `{"uri":"a.file:///x"}`, `{"uri":"file:///x"}`},
		{"subscription renamed", "resources/subscribe", "", "", "test://r", `{"uri":"b.test://r"}`, `{"uri":"test://r"}`},
		{"completion of a prompt", "completion/complete", "", "", "greet", `{"ref":{"type":"ref/prompt","name":"a.greet"},"argument":{"name":"x","value":""}}`, `{"ref":{"type":"ref/prompt","name":"greet"},"argument":{"name":"x","value":""}}`},
		{"completion of a template", "completion/complete", "", "", "t://{id}", `{"ref":{"type":"ref/resource","uri":"a.t://{id}"}}`, `{"ref":{"type":"ref/resource","uri":"t://{id}"}}`},
		{"no target: unchanged", "prompts/get", "", "", "", `{"name":"x"}`, `{"name":"x"}`},
		{"the gateway's input response removed", "tools/call", "echo", "echo", "", `{"name":"echo","inputResponses":{"aegis.connection":{"action":"accept"}},"arguments":{}}`, `{"name":"echo","arguments":{}}`},
		{"the server's input responses kept", "prompts/get", "", "", "", `{"name":"x","inputResponses":{"aegis.connection":{"action":"accept"},"q":{"action":"decline"}},"requestState":"s"}`, `{"name":"x","inputResponses":{"q":{"action":"decline"}},"requestState":"s"}`},
		{"only the server's: unchanged", "resources/read", "", "", "", `{"uri":"u","inputResponses":{"q":{}}}`, `{"uri":"u","inputResponses":{"q":{}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &pipeline.Call{Method: tc.method, Tool: tc.tool, UpstreamTool: tc.up, Target: tc.target, Params: json.RawMessage(tc.params)}
			if got := string(UpstreamParams(c)); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
			if string(c.Params) != tc.params {
				t.Errorf("the call's params were modified: %s", c.Params)
			}
		})
	}
}
