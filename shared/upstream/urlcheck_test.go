package upstream

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestValidateURL(t *testing.T) {
	tests := []struct {
		url   string
		local bool
		ok    bool
	}{
		{"https://mcp.example.com/mcp", false, true},
		{"https://mcp.example.com:8443/mcp", false, true},
		{"https://10.0.0.5/mcp", false, true}, // private VPC addresses are fine
		{"http://mcp.example.com/mcp", false, false},
		{"http://mcp.example.com/mcp", true, true},
		{"ftp://mcp.example.com/", true, false},
		{"mcp.example.com/mcp", true, false},
		{"https://user:pw@mcp.example.com/mcp", false, false},
		{"https://127.0.0.1/mcp", false, false},
		{"http://127.0.0.1:8080/mcp", true, true},
		{"https://[::1]/mcp", false, false},
		{"http://[::1]:9/mcp", true, true},
		{"https://localhost/mcp", false, false},
		{"http://localhost:3000/mcp", true, true},
		{"https://api.localhost/mcp", false, false},
		{"http://169.254.169.254/latest/meta-data", true, false},
		{"https://169.254.169.254/", false, false},
		{"https://169.254.170.2/v2/credentials", false, false}, // ECS task metadata
		{"https://[fe80::1]/", false, false},
		{"https://[fd00:ec2::254]/", false, false},
		{"https://[::ffff:169.254.169.254]/", false, false},
		{"https://metadata.google.internal/computeMetadata/v1/", false, false},
		{"https://0.0.0.0/", true, false},
		{"https://[::]/", true, false},
		{"https://224.0.0.1/", false, false},
	}
	for _, tc := range tests {
		err := ValidateURL(tc.url, tc.local)
		if (err == nil) != tc.ok {
			t.Errorf("ValidateURL(%q, local=%v) = %v; want ok=%v", tc.url, tc.local, err, tc.ok)
		}
	}
}

func TestControl(t *testing.T) {
	tests := []struct {
		addr  string
		local bool
		ok    bool
	}{
		{"93.184.216.34:443", false, true},
		{"127.0.0.1:80", false, false},
		{"127.0.0.1:80", true, true},
		{"[::1]:80", false, false},
		{"169.254.169.254:80", true, false},
		{"[fd00:ec2::254]:80", true, false},
		{"[::ffff:127.0.0.1]:80", false, false},
		{"0.0.0.0:80", true, false},
	}
	for _, tc := range tests {
		err := Control(tc.local)("tcp", tc.addr, nil)
		if (err == nil) != tc.ok {
			t.Errorf("Control(local=%v)(%q) = %v; want ok=%v", tc.local, tc.addr, err, tc.ok)
		}
	}
}

// TestControlRefusesRebinding: a name that resolves to loopback is refused
// at connect time outside local mode, whatever ValidateURL said about it.
func TestControlRefusesRebinding(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	tr := &http.Transport{DialContext: (&net.Dialer{Timeout: time.Second, Control: Control(false)}).DialContext}
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://localhost:"+port+"/", nil)
	_, err = tr.RoundTrip(req)
	if err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("dial to a name resolving to loopback = %v; want refused", err)
	}
}

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
