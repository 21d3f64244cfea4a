package netguard

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
		{"https://10.0.0.5/mcp", false, true},  // private VPC addresses are fine
		{"https://[fd12::5]/mcp", false, true}, // so are unique-local ones
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
		{"https://LocalHost/mcp", false, false},
		{"http://localhost:3000/mcp", true, true},
		{"https://api.localhost/mcp", false, false},
		{"http://169.254.169.254/latest/meta-data", true, false},
		{"https://169.254.169.254/", false, false},
		{"https://169.254.170.2/v2/credentials", false, false}, // ECS task metadata
		{"https://[fe80::1]/", false, false},
		{"https://[fd00:ec2::254]/", false, false},
		{"https://[::ffff:169.254.169.254]/", false, false},
		{"https://metadata.google.internal/computeMetadata/v1/", false, false},
		{"https://Metadata.Google.Internal/", true, false},
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
		{"10.0.0.5:443", false, true},
		{"127.0.0.1:80", false, false},
		{"127.0.0.1:80", true, true},
		{"[::1]:80", false, false},
		{"169.254.169.254:80", true, false},
		{"169.254.170.2:80", true, false},
		{"[fe80::1]:80", true, false},
		{"[fd00:ec2::254]:80", true, false},
		{"[::ffff:127.0.0.1]:80", false, false},
		{"[::ffff:169.254.169.254]:80", true, false},
		{"0.0.0.0:80", true, false},
		{"224.0.0.1:80", true, false},
		{"not-an-address", true, false},
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

// TestEmbeddedIPv4: an IPv6 address that carries an IPv4 address, by a
// form that routes to it (IPv4-mapped, IPv4-compatible, NAT64 well-known
// and local-use, 6to4, Teredo), is judged by the IPv4 rules too: a NAT64
// gateway turns 64:ff9b::a9fe:a9fe into a connection to 169.254.169.254.
// Each case is run through Control, the dial check, and ValidateURL, the
// registration check.
func TestEmbeddedIPv4(t *testing.T) {
	tests := []struct {
		name, addr string
		local, ok  bool
	}{
		{"IPv4-mapped metadata", "::ffff:169.254.169.254", true, false},
		{"IPv4-mapped loopback", "::ffff:127.0.0.1", false, false},
		{"IPv4-compatible metadata", "::169.254.169.254", true, false},
		{"IPv4-compatible metadata, hex", "::a9fe:a9fe", true, false},
		{"IPv4-compatible ECS credentials", "::a9fe:aa02", true, false},
		{"IPv4-compatible loopback", "::127.0.0.1", false, false},
		{"IPv4-compatible multicast", "::224.0.0.1", true, false},
		{"IPv4-compatible public", "::93.184.216.34", false, true},
		{"NAT64 metadata", "64:ff9b::169.254.169.254", true, false},
		{"NAT64 metadata, hex", "64:ff9b::a9fe:a9fe", true, false},
		{"NAT64 ECS credentials", "64:ff9b::a9fe:aa02", true, false},
		{"NAT64 loopback outside local mode", "64:ff9b::7f00:1", false, false},
		{"NAT64 loopback in local mode", "64:ff9b::7f00:1", true, true},
		{"NAT64 unspecified", "64:ff9b::", true, false},
		{"NAT64 multicast", "64:ff9b::e000:1", true, false},
		{"NAT64 public", "64:ff9b::808:808", false, true},
		{"NAT64 private", "64:ff9b::a00:5", false, true},
		{"NAT64 local-use /96 metadata", "64:ff9b:1::a9fe:a9fe", true, false},
		{"NAT64 local-use /48 metadata", "64:ff9b:1:a9fe:a9:fe00::", true, false},
		{"NAT64 local-use /56 metadata", "64:ff9b:1:a9:fe:a9fe::", true, false},
		{"NAT64 local-use /64 metadata", "64:ff9b:1:0:a9:fea9:fe00:0", true, false},
		{"NAT64 local-use public", "64:ff9b:1::808:808", false, true},
		{"6to4 metadata", "2002:a9fe:a9fe::1", true, false},
		{"6to4 loopback", "2002:7f00:1::1", false, false},
		{"6to4 public", "2002:808:808::1", false, true},
		{"Teredo server metadata", "2001:0:a9fe:a9fe::1", true, false},
		{"Teredo client metadata (obfuscated)", "2001:0:808:808::5601:5601", true, false},
		{"Teredo public", "2001:0:808:808::f7f7:f7f7", false, true},
		{"plain global IPv6", "2606:4700::1111", false, true},
		{"unique-local IPv6", "fd12::a9fe:a9fe", false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Control(tc.local)("tcp", "["+tc.addr+"]:443", nil)
			if (err == nil) != tc.ok {
				t.Errorf("Control(local=%v)(%s) = %v; want ok=%v", tc.local, tc.addr, err, tc.ok)
			}
			err = ValidateURL("https://["+tc.addr+"]/mcp", tc.local)
			if (err == nil) != tc.ok {
				t.Errorf("ValidateURL(local=%v)(%s) = %v; want ok=%v", tc.local, tc.addr, err, tc.ok)
			}
		})
	}
}
