package netguard

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
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

// metadataV4 are the IPv4 metadata and credential services of the major
// clouds, each with the word its refusal must carry.
var metadataV4 = []struct{ cloud, addr, word string }{
	{"AWS IMDS, GCP, Azure IMDS, Oracle", "169.254.169.254", "instance metadata"},
	{"AWS ECS", "169.254.170.2", "ECS"},
	{"AWS EKS Pod Identity", "169.254.170.23", "EKS Pod Identity"},
	{"Azure WireServer", "168.63.129.16", "Azure"},
	{"Alibaba", "100.100.100.200", "Alibaba"},
	{"Oracle (older)", "192.0.0.192", "Oracle"},
}

// metadataV6 are the IPv6 ones.
var metadataV6 = []struct{ cloud, addr, word string }{
	{"AWS IMDS", "fd00:ec2::254", "AWS"},
	{"AWS EKS Pod Identity", "fd00:ec2::23", "AWS"},
	{"GCP", "fd20:ce::254", "GCP"},
	{"Oracle", "fd00:c1::a9fe:a9fe", "Oracle"},
}

// v4Forms are the ways a URL can name the IPv4 address a: the IPv6 forms
// that carry it (each parsed as an address and dialed) and the integer
// notations URL parsers and inet_aton accept (never parsed as an address
// by netip: refused as notations).
func v4Forms(a string) (ipv6 map[string]string, notations map[string]string) {
	ip := netip.MustParseAddr(a).As4()
	hi, lo := uint16(ip[0])<<8|uint16(ip[1]), uint16(ip[2])<<8|uint16(ip[3])
	n := uint32(ip[0])<<24 | uint32(ip[1])<<16 | uint32(ip[2])<<8 | uint32(ip[3])
	ipv6 = map[string]string{
		"IPv4-mapped":             "::ffff:" + a,
		"IPv4-mapped, hex":        fmt.Sprintf("::ffff:%x:%x", hi, lo),
		"IPv4-mapped, expanded":   fmt.Sprintf("0:0:0:0:0:FFFF:%X:%X", hi, lo),
		"IPv4-translated":         "::ffff:0:" + a,
		"IPv4-compatible":         "::" + a,
		"IPv4-compatible, hex":    fmt.Sprintf("::%x:%x", hi, lo),
		"NAT64":                   "64:ff9b::" + a,
		"NAT64, hex":              fmt.Sprintf("64:ff9b::%x:%x", hi, lo),
		"NAT64 local-use /96":     fmt.Sprintf("64:ff9b:1::%x:%x", hi, lo),
		"NAT64 local-use /48":     fmt.Sprintf("64:ff9b:1:%x:%x:%x00::", hi, ip[2], ip[3]),
		"6to4":                    fmt.Sprintf("2002:%x:%x::1", hi, lo),
		"Teredo server":           fmt.Sprintf("2001:0:%x:%x::1", hi, lo),
		"Teredo client":           fmt.Sprintf("2001:0:808:808::%x:%x", ^hi, ^lo),
		"IPv4-mapped with a zone": "::ffff:" + a + "%eth0",
	}
	notations = map[string]string{
		"decimal integer":     fmt.Sprint(n),
		"hex integer":         fmt.Sprintf("0x%x", n),
		"hex integer, upper":  fmt.Sprintf("0X%X", n),
		"octal integer":       fmt.Sprintf("0%o", n),
		"octal dotted":        fmt.Sprintf("0%o.0%o.0%o.0%o", ip[0], ip[1], ip[2], ip[3]),
		"hex dotted":          fmt.Sprintf("0x%x.0x%x.0x%x.0x%x", ip[0], ip[1], ip[2], ip[3]),
		"mixed dotted":        fmt.Sprintf("0x%x.%d.0%o.%d", ip[0], ip[1], ip[2], ip[3]),
		"three parts":         fmt.Sprintf("%d.%d.%d", ip[0], ip[1], lo),
		"two parts":           fmt.Sprintf("%d.%d", ip[0], uint32(ip[1])<<16|uint32(lo)),
		"trailing dot":        a + ".",
		"padded with zeros":   fmt.Sprintf("%04d.%d.%d.%d", ip[0], ip[1], ip[2], ip[3]),
		"decimal, trailing .": fmt.Sprint(n) + ".",
	}
	return ipv6, notations
}

// TestCloudMetadata is the table of every cloud's metadata and credential
// services in every form a URL or a dialed address can take. Each is
// refused at registration (ValidateURL) and, when it is an address, at
// dial (Control), in local mode as well; the refusal names the service.
func TestCloudMetadata(t *testing.T) {
	refused := func(t *testing.T, host, word string) {
		t.Helper()
		u := "https://" + host + "/latest/meta-data"
		if strings.Contains(host, ":") {
			u = "https://[" + strings.Replace(host, "%", "%25", 1) + "]:8443/latest/meta-data"
		}
		for _, local := range []bool{false, true} {
			err := ValidateURL(u, local)
			if err == nil || !strings.Contains(err.Error(), word) {
				t.Errorf("ValidateURL(%q, local=%v) = %v; want refused, naming %q", u, local, err, word)
			}
		}
	}
	dialRefused := func(t *testing.T, addr, word string) {
		t.Helper()
		for _, local := range []bool{false, true} {
			err := Control(local)("tcp", net.JoinHostPort(addr, "80"), nil)
			if err == nil || !strings.Contains(err.Error(), word) {
				t.Errorf("Control(local=%v)(%s) = %v; want refused, naming %q", local, addr, err, word)
			}
		}
	}
	for _, m := range metadataV4 {
		t.Run(m.cloud, func(t *testing.T) {
			refused(t, m.addr, m.word)
			dialRefused(t, m.addr, m.word)
			v6, notations := v4Forms(m.addr)
			for form, h := range v6 {
				t.Run(form, func(t *testing.T) {
					refused(t, h, m.word)
					dialRefused(t, h, m.word)
				})
			}
			for form, h := range notations {
				t.Run(form, func(t *testing.T) {
					if _, err := netip.ParseAddr(h); err == nil {
						t.Fatalf("%s parses as an address; the table wants notations netip refuses", h)
					}
					refused(t, h, `host "`+h+`" is`) // another notation, or (0169 is no octal number) no address at all
				})
			}
		})
	}
	for _, m := range metadataV6 {
		t.Run(m.cloud, func(t *testing.T) {
			ip := netip.MustParseAddr(m.addr)
			for _, h := range []string{m.addr, strings.ToUpper(m.addr), ip.StringExpanded(), m.addr + "%eth0"} {
				refused(t, h, m.word)
				dialRefused(t, h, m.word)
			}
		})
	}
	for _, h := range []string{"metadata.google.internal", "METADATA.Google.Internal", "metadata.google.internal.", "metadata", "Metadata."} {
		refused(t, h, "metadata")
	}
	// Neighbours of the metadata addresses stay allowed: the table is not
	// refusing whole ranges a VPC may use.
	for _, h := range []string{"100.100.100.201", "100.64.0.10", "168.63.129.17", "192.0.0.193", "fd00:c1::1", "fd20:ce::253", "metadata.example.com", "0x.example.com"} {
		u := "https://" + h + "/mcp"
		if strings.Contains(h, ":") {
			u = "https://[" + h + "]/mcp"
		}
		if err := ValidateURL(u, false); err != nil {
			t.Errorf("ValidateURL(%q) = %v; want allowed", u, err)
		}
	}
}

// TestNotation: numeric hosts that are no IPv4 address in any reading
// are refused too; the forms that are one name the address they mean.
func TestNotation(t *testing.T) {
	for host, want := range map[string]string{
		"0x7f000001":      "127.0.0.1",
		"2130706433":      "127.0.0.1",
		"017700000001":    "127.0.0.1",
		"127.1":           "127.0.0.1",
		"0x08.0x08.8.010": "8.8.8.8",
		"1.2.3.4.":        "1.2.3.4",
		"0x":              "0.0.0.0",
		"1.2.3.4.5":       "",
		"256.1.1.1":       "",
		"1.2.3.256":       "",
		"1.2.65536":       "",
		"099":             "",
		"a.b.0x1g":        "", // not numeric: a host name
		"example.08":      "",
		"99999999999":     "",
	} {
		ip, numeric, ok := ipv4Notation(host)
		switch {
		case host == "a.b.0x1g":
			if numeric {
				t.Errorf("%s: read as numeric", host)
			}
		case want == "":
			if !numeric || ok {
				t.Errorf("%s: numeric=%v ok=%v %s; want numeric and no address", host, numeric, ok, ip)
			}
		case !numeric || !ok || ip.String() != want:
			t.Errorf("%s: %s numeric=%v ok=%v; want %s", host, ip, numeric, ok, want)
		}
		if host != "a.b.0x1g" {
			if err := ValidateURL("http://"+host+"/", true); err == nil {
				t.Errorf("ValidateURL(http://%s/) accepted a numeric host", host)
			}
		}
	}
}

// dnsServer answers every A query with a and every AAAA query with aaaa
// (no answer when unset), on a loopback UDP port: a name that passed
// ValidateURL resolving, when dialed, to whatever the attacker's DNS
// says (DNS rebinding).
func dnsServer(t *testing.T, a, aaaa netip.Addr) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 512)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			q := buf[:n]
			// The question follows the 12-byte header: a name, then
			// QTYPE and QCLASS.
			end := 12
			for end < n && q[end] != 0 {
				end += int(q[end]) + 1
			}
			end += 5
			if end > n {
				continue
			}
			qtype := uint16(q[end-4])<<8 | uint16(q[end-3])
			var rdata []byte
			switch {
			case qtype == 1 && a.IsValid():
				b := a.As4()
				rdata = b[:]
			case qtype == 28 && aaaa.IsValid():
				b := aaaa.As16()
				rdata = b[:]
			}
			resp := append([]byte{}, q[:end]...)
			resp[2], resp[3] = 0x81, 0x80 // a response, recursion available, no error
			resp[6], resp[7], resp[8], resp[9], resp[10], resp[11] = 0, 0, 0, 0, 0, 0
			if rdata != nil {
				resp[7] = 1
				resp = append(resp, 0xc0, 12, byte(qtype>>8), byte(qtype), 0, 1, 0, 0, 0, 60, 0, byte(len(rdata)))
				resp = append(resp, rdata...)
			}
			_, _ = pc.WriteTo(resp, from)
		}
	}()
	return pc.LocalAddr().String()
}

// TestControlRefusesRebindingToMetadata: a host name ValidateURL accepts
// (it resolves nothing) that resolves, when dialed, to a cloud metadata
// address (IPv4, or IPv6 with or without an IPv4 address in it) is
// refused by Control, in local mode too, before any connection. The same
// dialer reaches a name that resolves to loopback in local mode, so the
// refusals are the guard's, not the resolver's.
func TestControlRefusesRebindingToMetadata(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	get := func(a, aaaa netip.Addr) error {
		dns := dnsServer(t, a, aaaa)
		d := &net.Dialer{Timeout: 2 * time.Second, Control: Control(true), Resolver: &net.Resolver{PreferGo: true,
			Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, "udp", dns)
			}}}
		tr := &http.Transport{DialContext: d.DialContext}
		defer tr.CloseIdleConnections()
		u := "http://rebind.example:" + port + "/"
		if err := ValidateURL(u, true); err != nil {
			t.Fatalf("ValidateURL(%s) = %v; a host name is checked when dialed", u, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		resp, err := tr.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := get(netip.MustParseAddr("127.0.0.1"), netip.Addr{}); err != nil {
		t.Fatalf("a name resolving to loopback in local mode: %v", err)
	}
	type tc struct {
		addr netip.Addr
		word string
	}
	var cases []tc
	for _, m := range metadataV4 {
		for _, a := range []string{m.addr, "64:ff9b::" + m.addr, "::ffff:" + m.addr} {
			cases = append(cases, tc{netip.MustParseAddr(a), m.word})
		}
	}
	for _, m := range metadataV6 {
		cases = append(cases, tc{netip.MustParseAddr(m.addr), m.word})
	}
	for _, c := range cases {
		t.Run(c.addr.String(), func(t *testing.T) {
			var err error
			if c.addr.Is4() {
				err = get(c.addr, netip.Addr{})
			} else {
				err = get(netip.Addr{}, c.addr)
			}
			if err == nil || !strings.Contains(err.Error(), c.word) {
				t.Fatalf("dial of a name resolving to %s = %v; want refused, naming %q", c.addr, err, c.word)
			}
		})
	}
}

// TestMetadataDocumented: docs/security.md lists every metadata service
// and host name this package refuses.
func TestMetadataDocumented(t *testing.T) {
	b, err := os.ReadFile("../../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, m := range MetadataServices {
		want := m.Prefix.String()
		if m.Prefix.IsSingleIP() {
			want = m.Prefix.Addr().String()
		}
		if !strings.Contains(doc, "`"+want+"`") {
			t.Errorf("docs/security.md does not list %s (%s)", want, m.What)
		}
	}
	for _, h := range MetadataHosts {
		if !strings.Contains(doc, "`"+h+"`") {
			t.Errorf("docs/security.md does not list the host name %s", h)
		}
	}
}

// TestValidateFetchURL: a URL about to be fetched is held to every rule
// but loopback, which the dialing client's Control decides.
func TestValidateFetchURL(t *testing.T) {
	for _, tc := range []struct {
		url   string
		local bool
		ok    bool
	}{
		{"https://127.0.0.1:8443/jwks", false, true},
		{"https://localhost/jwks", false, true},
		{"http://127.0.0.1:8443/jwks", false, false}, // http only with aegis serve
		{"http://127.0.0.1:8443/jwks", true, true},
		{"https://100.100.100.200/jwks", false, false},
		{"https://[::ffff:169.254.169.254]/jwks", true, false},
		{"https://2852039166/jwks", true, false},
		{"https://metadata.google.internal./jwks", true, false},
		{"https://u:p@idp.example/jwks", false, false},
		{"https://idp.example/jwks", false, true},
	} {
		if err := ValidateFetchURL(tc.url, tc.local); (err == nil) != tc.ok {
			t.Errorf("ValidateFetchURL(%q, local=%v) = %v; want ok=%v", tc.url, tc.local, err, tc.ok)
		}
	}
}
