package dynamotest

import (
	"hash/crc32"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync/atomic"
	"testing"
)

// FaultProxy sits between a client and moto_server. While Down, it drops
// every connection (DynamoDB unreachable); while Silent, it reads each
// request and never answers, holding it until the client gives up (a
// stopped process, SIGSTOP: connections are accepted, nothing comes back);
// while Throttle > 0 it answers ProvisionedThroughputExceededException and
// counts down. Attempts counts the requests it saw, Held the requests it
// holds unanswered now.
type FaultProxy struct {
	URL      string
	Down     atomic.Bool
	Silent   atomic.Bool
	Throttle atomic.Int64
	Attempts atomic.Int64
	Held     atomic.Int64
}

// NewFaultProxy starts a proxy to target (an Env's Endpoint); it stops
// when the test ends.
func NewFaultProxy(t testing.TB, target string) *FaultProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	p := &FaultProxy{}
	quit := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.Attempts.Add(1)
		if p.Silent.Load() {
			_, _ = io.Copy(io.Discard, r.Body)
			p.Held.Add(1)
			select {
			case <-r.Context().Done(): // the client closed the connection
			case <-quit:
			}
			p.Held.Add(-1)
			if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
				conn.Close() // never an answer, not even an empty one
			}
			return
		}
		if p.Down.Load() {
			if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
				conn.Close()
			}
			return
		}
		if p.Throttle.Load() != 0 {
			p.Throttle.Add(-1)
			body := `{"__type":"com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException","message":"throttled"}`
			w.Header().Set("Content-Type", "application/x-amz-json-1.0")
			w.Header().Set("X-Amz-Crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE([]byte(body))), 10))
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, body)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { close(quit); srv.Close() })
	p.URL = srv.URL
	return p
}
