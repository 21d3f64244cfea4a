// Command proxy is the benchmark's baseline: a bare Go reverse proxy
// (httputil.ReverseProxy) with a tuned transport, no checks at all. It
// forwards every request to -upstream and streams answers (SSE included).
package main

import (
	"flag"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	target := flag.String("upstream", "", "upstream base URL")
	flag.Parse()
	u, err := url.Parse(*target)
	if err != nil || u.Host == "" {
		log.Fatalf("-upstream %q: want a URL", *target)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   false,
	}
	rp.FlushInterval = -1 // flush SSE events as they come
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("proxy listening on http://%s", ln.Addr())
	srv := &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.Serve(ln))
}
