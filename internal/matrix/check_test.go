package matrix_test

// What a row's answer and audit record are checked against.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/aegis-gw/aegis/internal/matrix"
	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/pipeline"
	"github.com/aegis-gw/aegis/shared/refusal"
)

// frame is a JSON-RPC response as the checks read it.
type frame struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *wireError      `json:"error"`
}

type wireError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

// marker is data.aegis.
type marker struct {
	Aegis *struct {
		Layer string `json:"layer"`
		Code  string `json:"code"`
	} `json:"aegis"`
}

// jsonBody is the JSON-RPC message of an answer: the body, or the last
// data line of an event stream.
func jsonBody(b []byte) []byte {
	t := bytes.TrimSpace(b)
	if len(t) > 0 && t[0] == '{' {
		return t
	}
	var last []byte
	for _, l := range bytes.Split(b, []byte("\n")) {
		if d, ok := bytes.CutPrefix(bytes.TrimRight(l, "\r"), []byte("data:")); ok {
			last = bytes.TrimSpace(d)
		}
	}
	return last
}

// checkFrame checks one JSON-RPC answer body against e: shape, code,
// word, layer, id, data and message.
func checkFrame(e matrix.Expect, body []byte, n refusal.Numbering) []string {
	var errs []string
	fail := func(format string, a ...any) { errs = append(errs, fmt.Sprintf(format, a...)) }
	var f frame
	if err := json.Unmarshal(jsonBody(body), &f); err != nil || f.JSONRPC != "2.0" {
		return []string{fmt.Sprintf("not a JSON-RPC response: %.300s", body)}
	}
	if e.ID != "" && string(f.ID) != e.ID {
		fail("id %s, want %s", f.ID, e.ID)
	}
	layer := e.Layer
	if layer == "" {
		layer = string(refusal.LayerGateway)
	}
	var werr *wireError
	switch e.Shape {
	case "error":
		if f.Error == nil {
			return append(errs, fmt.Sprintf("want a JSON-RPC error, got %.300s", body))
		}
		werr = f.Error
	case "iserror":
		var res struct {
			IsError           bool       `json:"isError"`
			StructuredContent *wireError `json:"structuredContent"`
		}
		if f.Error != nil || json.Unmarshal(f.Result, &res) != nil || !res.IsError || res.StructuredContent == nil {
			return append(errs, fmt.Sprintf("want a result with isError and the refusal in structuredContent, got %.300s", body))
		}
		werr = res.StructuredContent
	case "result", "not-aegis":
		if f.Error != nil {
			var m marker
			_ = json.Unmarshal(f.Error.Data, &m)
			if e.Shape == "result" || m.Aegis != nil {
				return append(errs, fmt.Sprintf("want a result (not aegis's refusal), got %.300s", body))
			}
			return errs
		}
		var res struct {
			IsError bool `json:"isError"`
		}
		_ = json.Unmarshal(f.Result, &res)
		if e.Shape == "result" && res.IsError {
			fail("want a result without isError, got %.300s", body)
		}
		if e.Shape == "not-aegis" && bytes.Contains(f.Result, []byte(`"aegis"`)) {
			fail("want an answer aegis did not author, got %.300s", body)
		}
		return errs
	default:
		return append(errs, "shape "+e.Shape+" is not a JSON-RPC answer")
	}
	if want := int(n.Wire(refusal.Code(e.Code))); werr.Code != want {
		fail("code %d, want %d (%d in %s's numbering)", werr.Code, want, e.Code, n)
	}
	var m marker
	if err := json.Unmarshal(werr.Data, &m); err != nil || m.Aegis == nil {
		return append(errs, fmt.Sprintf("no data.aegis in %.300s", body))
	}
	if m.Aegis.Code != e.Word {
		fail("data.aegis.code %q, want %q", m.Aegis.Code, e.Word)
	}
	if m.Aegis.Layer != layer {
		fail("data.aegis.layer %q, want %q", m.Aegis.Layer, layer)
	}
	var data map[string]json.RawMessage
	_ = json.Unmarshal(werr.Data, &data)
	for k, want := range e.Data {
		w, _ := json.Marshal(want)
		if got, ok := data[k]; !ok || !jsonEqual(got, w) {
			fail("data.%s = %s, want %s", k, got, w)
		}
	}
	for _, k := range e.DataHas {
		if _, ok := data[k]; !ok {
			fail("data has no %s: %s", k, werr.Data)
		}
	}
	if e.MessageHas != "" && !strings.Contains(werr.Message, e.MessageHas) {
		fail("message %q does not contain %q", werr.Message, e.MessageHas)
	}
	return errs
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xs, _ := json.Marshal(x)
	ys, _ := json.Marshal(y)
	return bytes.Equal(xs, ys)
}

// checkAnswer checks a gateway boundary's HTTP answer against e.
func checkAnswer(e matrix.Expect, a answer, n refusal.Numbering) []string {
	var errs []string
	fail := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	status := e.Status
	if status == 0 {
		status = 200
	}
	if a.status != status {
		fail("HTTP %d, want %d (body %.300s)", a.status, status, a.body)
	}
	switch e.Shape {
	case "empty":
		if len(a.body) != 0 {
			fail("want an empty body, got %.300s", a.body)
		}
	case "unauthorized", "forbidden":
		var m map[string]any
		if err := json.Unmarshal(a.body, &m); err != nil || len(m) != 1 || !strings.HasPrefix(fmt.Sprint(m["error"]), e.Shape+": ") {
			fail(`want {"error":"%s: ..."} and nothing else, got %.300s`, e.Shape, a.body)
		}
	default:
		errs = append(errs, checkFrame(e, a.body, n)...)
	}
	for _, s := range e.BodyHas {
		if !bytes.Contains(a.body, []byte(s)) {
			fail("body does not contain %q: %.300s", s, a.body)
		}
	}
	for _, s := range e.BodyLacks {
		if bytes.Contains(a.body, []byte(s)) {
			fail("body contains %q: %.300s", s, a.body)
		}
	}
	for _, h := range e.HeaderHas {
		if a.header.Get(h) == "" {
			fail("no %s header", h)
		}
	}
	for h, subs := range e.HeaderContains {
		got := strings.Join(a.header.Values(h), ", ")
		for _, sub := range subs {
			if !strings.Contains(got, sub) {
				fail("%s %q does not contain %q", h, got, sub)
			}
		}
	}
	return errs
}

// slots are the names a record's slot may take.
var slots = func() []string {
	var out []string
	for _, s := range pipeline.Order {
		out = append(out, s.String())
	}
	for _, s := range pipeline.ResultOrder {
		out = append(out, s.String())
	}
	return append(out, audit.SlotMethod, audit.SlotIdempotency, audit.SlotSend, audit.SlotUpstream)
}()

// checkRecord checks the audit record of a row's call against e, at
// layer (gateway or wrap).
func checkRecord(e matrix.Expect, rec audit.Record, layer refusal.Layer) []string {
	var errs []string
	fail := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	a := e.Audit
	if err := rec.Validate(); err != nil {
		fail("record does not validate: %v", err)
	}
	if rec.Layer != string(layer) {
		fail("record layer %q, want %q", rec.Layer, layer)
	}
	switch {
	case a.Unworded:
		if rec.Word != "" || rec.Slot != "" {
			fail("record has word %q slot %q, want none (the upstream's own answer)", rec.Word, rec.Slot)
		}
		if a.Findings && len(rec.Findings) == 0 {
			fail("record has no findings")
		}
		return errs
	case e.Word != "" || a.Word != "":
		code, word := e.Code, e.Word
		if a.Word != "" {
			code, word = a.Code, a.Word
		}
		if rec.Word != word || rec.Code != code {
			fail("record code %d word %q, want %d %q", rec.Code, rec.Word, code, word)
		}
		if rec.Slot != a.Slot {
			fail("record slot %q, want %q", rec.Slot, a.Slot)
		}
		if layer == refusal.LayerGateway && !slices.Contains(slots, rec.Slot) {
			fail("record slot %q is not a stage or one of the audit package's slots", rec.Slot)
		}
	default:
		if rec.Code != 0 || rec.Word != "" || rec.Slot != "" {
			fail("record code %d word %q slot %q, want none", rec.Code, rec.Word, rec.Slot)
		}
	}
	if string(rec.Outcome) != a.Outcome {
		fail("record outcome %q, want %q", rec.Outcome, a.Outcome)
	}
	if a.Findings && len(rec.Findings) == 0 {
		fail("record has no findings")
	}
	if a.Degraded != "" && !slices.Contains(rec.Degraded, a.Degraded) {
		fail("record degraded %v, want it to name %s", rec.Degraded, a.Degraded)
	}
	return errs
}
