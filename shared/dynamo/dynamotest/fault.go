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
// every connection (DynamoDB unreachable); while Throttle > 0 it answers
// ProvisionedThroughputExceededException and counts down. Attempts counts
// the requests it saw.
type FaultProxy struct {
	URL      string
	Down     atomic.Bool
	Throttle atomic.Int64
	Attempts atomic.Int64
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
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.Attempts.Add(1)
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
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}
