package upstream

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestRedirectNotFollowed: a 3xx is an upstream error, never followed to
// another host.
func TestRedirectNotFollowed(t *testing.T) {
	other := 0
	target := http.Server{Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) { other++ })}
	tl, _ := net.Listen("tcp", "127.0.0.1:0")
	go func() { _ = target.Serve(tl) }()
	defer target.Close()
	redir := http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://"+tl.Addr().String()+"/mcp", http.StatusTemporaryRedirect)
	})}
	rl, _ := net.Listen("tcp", "127.0.0.1:0")
	go func() { _ = redir.Serve(rl) }()
	defer redir.Close()
	c := &Client{HTTP: &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}, Timeout: time.Second}
	_, _, err := c.Send(context.Background(), &Exchange{Server: srvAt("http://" + rl.Addr().String() + "/mcp"), ID: []byte("1"), Method: "tools/call", Params: []byte(`{}`)})
	he, ok := err.(*HTTPError)
	if !ok || he.Status != http.StatusTemporaryRedirect {
		t.Fatalf("err = %v; want HTTPError 307", err)
	}
	if other != 0 {
		t.Fatal("redirect was followed")
	}
}
