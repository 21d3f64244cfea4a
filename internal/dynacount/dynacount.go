// Package dynacount is a test kit that counts what a client asks of the
// DynamoDB API: an HTTP proxy in front of an endpoint (moto_server through
// shared/dynamo/dynamotest) that records every request's operation
// (X-Amz-Target), its start and end, and the sizes of the items it read or
// wrote, from which it computes DynamoDB's capacity units. moto answers
// ReturnConsumedCapacity with constants, so units are computed here with
// DynamoDB's rules (see Units).
//
// The kit knows aegis's key schema (every table keys items by "pk" and
// "sk"): to size a write it reads the item before and after it straight
// from the endpoint (those reads are not recorded). Point a client at URL
// (its BaseEndpoint) and take the requests of one call with Take.
package dynacount

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// Request is one request the proxy forwarded.
type Request struct {
	Op         string // GetItem, UpdateItem, TransactWriteItems, ...
	Table      string // the first table it names
	Key        string // pk/sk of a single-item request, for reading counts per item
	Start, End time.Time
	Status     int // the endpoint's HTTP status
	// ItemBytes is the largest item the request read or wrote (a write:
	// the item before or after it, whichever is larger).
	ItemBytes int
	// WriteUnits and ReadUnits are the capacity units DynamoDB would
	// charge (Units).
	WriteUnits int
	ReadUnits  float64
}

// Write reports whether r is a write request.
func (r Request) Write() bool { return writeOps[r.Op] }

var writeOps = map[string]bool{
	"PutItem": true, "UpdateItem": true, "DeleteItem": true,
	"TransactWriteItems": true, "BatchWriteItem": true,
}

// Proxy is a running counting proxy.
type Proxy struct {
	URL     string
	target  string
	client  *http.Client
	latency time.Duration

	mu       sync.Mutex
	reqs     []Request
	inflight int
	changed  chan struct{} // closed and replaced on every change of inflight
}

// Latency is how long the proxy takes at least to answer a request, as a
// network would: requests a client sends together (one wave) then overlap
// however the machine schedules them, so that the trips Tally counts do
// not depend on the load of the machine.
const Latency = 40 * time.Millisecond

// Start starts a proxy to target (an endpoint URL); it stops when the test
// ends.
func Start(t testing.TB, target string) *Proxy {
	t.Helper()
	p := &Proxy{target: strings.TrimRight(target, "/"), client: &http.Client{Timeout: time.Minute}, changed: make(chan struct{}), latency: Latency}
	srv := httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	p.begin()
	defer p.end()
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	op := r.Header.Get("X-Amz-Target")
	if i := strings.LastIndexByte(op, '.'); i >= 0 {
		op = op[i+1:]
	}
	var in request
	_ = json.Unmarshal(body, &in)
	targets := in.writeTargets(op)
	before := make([]int, len(targets))
	for i, tg := range targets {
		before[i] = p.size(tg)
	}
	req, err := http.NewRequestWithContext(r.Context(), r.Method, p.target+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	req.Header = r.Header.Clone()
	resp, err := p.client.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	rec := Request{Op: op, Table: in.table(), Start: start, Status: resp.StatusCode}
	if len(targets) == 1 {
		rec.Key = targets[0].label()
	}
	for i, tg := range targets {
		n := max(before[i], p.size(tg))
		rec.ItemBytes = max(rec.ItemBytes, n)
		u := writeUnits(n)
		if op == "TransactWriteItems" {
			u *= 2
		}
		rec.WriteUnits += u
	}
	if !writeOps[op] {
		rec.ItemBytes, rec.ReadUnits = readUnits(op, &in, out)
		if len(in.Key) > 0 {
			rec.Key = target{in.TableName, in.Key}.label()
		}
	}
	if wait := p.latency - time.Since(start); wait > 0 {
		time.Sleep(wait)
	}
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(out)
	rec.End = time.Now()
	p.mu.Lock()
	p.reqs = append(p.reqs, rec)
	p.mu.Unlock()
}

func (p *Proxy) begin() {
	p.mu.Lock()
	p.inflight++
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
}

func (p *Proxy) end() {
	p.mu.Lock()
	p.inflight--
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
}

// Quiet is how long Take waits with no request in flight before it
// returns: writes a call makes after its answer (none today) land first.
const Quiet = 100 * time.Millisecond

// Take returns the requests recorded since the last Take, once none is in
// flight and none has started for Quiet.
func (p *Proxy) Take() []Request {
	for {
		p.mu.Lock()
		n, ch := p.inflight, p.changed
		p.mu.Unlock()
		if n > 0 {
			<-ch
			continue
		}
		select {
		case <-ch:
			continue
		case <-time.After(Quiet):
		}
		p.mu.Lock()
		if p.inflight > 0 || p.changed != ch {
			p.mu.Unlock()
			continue
		}
		r := p.reqs
		p.reqs = nil
		p.mu.Unlock()
		sort.Slice(r, func(i, j int) bool { return r[i].Start.Before(r[j].Start) })
		return r
	}
}

// Counts sums a call's requests.
type Counts struct {
	Requests, Writes, Reads int
	WriteUnits              int
	ReadUnits               float64
	// Trips is the number of sequential round trips before the answer:
	// the longest chain of requests, among those that started before it,
	// in which each starts after the one before it ended (a request
	// that waited for another is one trip more; requests in flight
	// together are one).
	Trips int
	// After counts the requests that started after the answer.
	After int
	// MaxItemBytes is the largest item one write wrote.
	MaxItemBytes int
}

// Tally counts reqs (sorted by start, as Take returns them); requests that
// start at or after answer count in After, not in Trips (a zero answer:
// all count).
func Tally(reqs []Request, answer time.Time) Counts {
	var c Counts
	chain := make([]int, len(reqs))
	for i, r := range reqs {
		c.Requests++
		if r.Write() {
			c.Writes++
			c.WriteUnits += r.WriteUnits
			c.MaxItemBytes = max(c.MaxItemBytes, r.ItemBytes)
		} else {
			c.Reads++
			c.ReadUnits += r.ReadUnits
		}
		if !answer.IsZero() && !r.Start.Before(answer) {
			c.After++
			continue
		}
		chain[i] = 1
		for j := range i {
			if chain[j] > 0 && !reqs[j].End.After(r.Start) {
				chain[i] = max(chain[i], chain[j]+1)
			}
		}
		c.Trips = max(c.Trips, chain[i])
	}
	return c
}

// Ops lists the requests' operations with their keys, for failure
// messages.
func Ops(reqs []Request) string {
	var b strings.Builder
	for i, r := range reqs {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s(%s)", r.Op, r.Key)
	}
	return b.String()
}

// request is what the kit reads of a request body.
type request struct {
	TableName      string
	Key            map[string]json.RawMessage
	Item           map[string]json.RawMessage
	ConsistentRead bool
	TransactItems  []struct {
		Put *struct {
			TableName string
			Item      map[string]json.RawMessage
		}
		Update, Delete *struct {
			TableName string
			Key       map[string]json.RawMessage
		}
		ConditionCheck *struct {
			TableName string
			Key       map[string]json.RawMessage
		}
		Get *struct {
			TableName string
			Key       map[string]json.RawMessage
		}
	}
	RequestItems map[string]json.RawMessage
}

func (in *request) table() string {
	if in.TableName != "" {
		return in.TableName
	}
	for _, it := range in.TransactItems {
		switch {
		case it.Put != nil:
			return it.Put.TableName
		case it.Update != nil:
			return it.Update.TableName
		case it.Delete != nil:
			return it.Delete.TableName
		}
	}
	return ""
}

// target is one item: its table and key.
type target struct {
	table string
	key   map[string]json.RawMessage
}

func (t target) label() string {
	var s []string
	for _, k := range []string{"pk", "sk"} {
		var v struct{ S string }
		_ = json.Unmarshal(t.key[k], &v)
		s = append(s, v.S)
	}
	return strings.Join(s, "/")
}

func keyOf(item map[string]json.RawMessage) map[string]json.RawMessage {
	return map[string]json.RawMessage{"pk": item["pk"], "sk": item["sk"]}
}

// writeTargets are the items a write request writes (a ConditionCheck of
// a transaction is charged like a write of its item too).
func (in *request) writeTargets(op string) []target {
	switch op {
	case "PutItem":
		return []target{{in.TableName, keyOf(in.Item)}}
	case "UpdateItem", "DeleteItem":
		return []target{{in.TableName, in.Key}}
	case "TransactWriteItems":
		var out []target
		for _, it := range in.TransactItems {
			switch {
			case it.Put != nil:
				out = append(out, target{it.Put.TableName, keyOf(it.Put.Item)})
			case it.Update != nil:
				out = append(out, target{it.Update.TableName, it.Update.Key})
			case it.Delete != nil:
				out = append(out, target{it.Delete.TableName, it.Delete.Key})
			case it.ConditionCheck != nil:
				out = append(out, target{it.ConditionCheck.TableName, it.ConditionCheck.Key})
			}
		}
		return out
	case "BatchWriteItem":
		var out []target
		for table, raw := range in.RequestItems {
			var reqs []struct {
				PutRequest    *struct{ Item map[string]json.RawMessage }
				DeleteRequest *struct{ Key map[string]json.RawMessage }
			}
			_ = json.Unmarshal(raw, &reqs)
			for _, r := range reqs {
				if r.PutRequest != nil {
					out = append(out, target{table, keyOf(r.PutRequest.Item)})
				} else if r.DeleteRequest != nil {
					out = append(out, target{table, r.DeleteRequest.Key})
				}
			}
		}
		return out
	}
	return nil
}

// size reads t's item straight from the endpoint (not recorded) and
// returns its size; 0 when absent.
func (p *Proxy) size(t target) int {
	body, _ := json.Marshal(map[string]any{"TableName": t.table, "Key": t.key, "ConsistentRead": true})
	req, err := http.NewRequest(http.MethodPost, p.target+"/", bytes.NewReader(body))
	if err != nil {
		return 0
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810.GetItem")
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0")
	resp, err := p.client.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	var out struct{ Item map[string]json.RawMessage }
	if json.NewDecoder(resp.Body).Decode(&out) != nil {
		return 0
	}
	return ItemSize(out.Item)
}

// readUnits sizes what a read returned and charges it: strongly
// consistent reads 1 unit per 4 KB (rounded up, at least 1), eventually
// consistent half that, transactional reads twice.
func readUnits(op string, in *request, out []byte) (largest int, units float64) {
	var resp struct {
		Item      map[string]json.RawMessage
		Items     []map[string]json.RawMessage
		Responses json.RawMessage
	}
	_ = json.Unmarshal(out, &resp)
	per := 1.0
	if !in.ConsistentRead {
		per = 0.5
	}
	switch op {
	case "GetItem":
		n := ItemSize(resp.Item)
		return n, per * float64(max(1, ceilDiv(n, 4096)))
	case "Query", "Scan":
		total := 0
		for _, it := range resp.Items {
			n := ItemSize(it)
			total += n
			largest = max(largest, n)
		}
		return largest, per * float64(max(1, ceilDiv(total, 4096)))
	case "TransactGetItems":
		var rs []struct{ Item map[string]json.RawMessage }
		_ = json.Unmarshal(resp.Responses, &rs)
		for _, r := range rs {
			n := ItemSize(r.Item)
			largest = max(largest, n)
			units += 2 * float64(max(1, ceilDiv(n, 4096)))
		}
		return largest, units
	case "BatchGetItem":
		var rs map[string][]map[string]json.RawMessage
		_ = json.Unmarshal(resp.Responses, &rs)
		for _, items := range rs {
			for _, it := range items {
				n := ItemSize(it)
				largest = max(largest, n)
				units += 0.5 * float64(max(1, ceilDiv(n, 4096)))
			}
		}
		return largest, units
	}
	return 0, 0
}

// writeUnits is DynamoDB's charge for writing an item of n bytes: 1 unit
// per KB, rounded up, at least 1.
func writeUnits(n int) int { return max(1, ceilDiv(n, 1024)) }

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// ItemSize is an item's size by DynamoDB's rules: each attribute's name
// plus its value (strings and binaries their bytes, numbers one byte per
// two significant digits plus one, booleans and nulls one, sets their
// members, maps and lists 3 bytes plus one per element plus the elements,
// a map's names included).
func ItemSize(item map[string]json.RawMessage) int {
	n := 0
	for name, v := range item {
		n += len(name) + valueSize(v)
	}
	return n
}

func valueSize(raw json.RawMessage) int {
	var v map[string]json.RawMessage
	if json.Unmarshal(raw, &v) != nil {
		return 0
	}
	for typ, x := range v {
		switch typ {
		case "S":
			var s string
			_ = json.Unmarshal(x, &s)
			return len(s)
		case "N":
			var s string
			_ = json.Unmarshal(x, &s)
			return numberSize(s)
		case "B":
			var s string
			_ = json.Unmarshal(x, &s)
			b, _ := base64.StdEncoding.DecodeString(s)
			return len(b)
		case "BOOL", "NULL":
			return 1
		case "SS", "NS", "BS":
			var ss []string
			_ = json.Unmarshal(x, &ss)
			n := 0
			for _, s := range ss {
				switch typ {
				case "NS":
					n += numberSize(s)
				case "BS":
					b, _ := base64.StdEncoding.DecodeString(s)
					n += len(b)
				default:
					n += len(s)
				}
			}
			return n
		case "M":
			var m map[string]json.RawMessage
			_ = json.Unmarshal(x, &m)
			n := 3
			for k, e := range m {
				n += 1 + len(k) + valueSize(e)
			}
			return n
		case "L":
			var l []json.RawMessage
			_ = json.Unmarshal(x, &l)
			n := 3
			for _, e := range l {
				n += 1 + valueSize(e)
			}
			return n
		}
	}
	return 0
}

func numberSize(s string) int {
	s = strings.TrimLeft(s, "+-")
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		s = s[:i]
	}
	s = strings.Trim(strings.Replace(s, ".", "", 1), "0")
	return int(math.Ceil(float64(len(s))/2)) + 1
}
