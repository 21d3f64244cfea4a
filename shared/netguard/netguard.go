// Package netguard decides which hosts aegis may send requests to: tenants'
// upstream MCP servers and their approval webhooks. Both are URLs a tenant
// or an operator types, and aegis dials them from inside its own network,
// so each is checked twice: ValidateURL when the URL is registered (config
// file, admin API), and Control on every address actually dialed, because a
// host name can resolve to anything, and resolve differently later (DNS
// rebinding).
//
// Refused always, in every mode:
//
//   - a URL that is not absolute, or whose scheme is not https (or http in
//     local mode);
//   - user:password in the URL (a brokered credential is the way to
//     authenticate to an upstream);
//   - a host that is an IPv4 address written in any form but dotted
//     decimal: 2852039166, 0xa9fea9fe, 0251.0376.0251.0376, 169.254.43518,
//     169.254.169.254. (a trailing dot). URL parsers and resolvers
//     disagree about these (WHATWG and inet_aton read them as addresses,
//     Go's netip does not), so a check could pass a host that a dialer
//     then reads as the metadata address: the form is refused whatever
//     address it means (ipv4Notation);
//   - the unspecified addresses 0.0.0.0 and ::;
//   - link-local unicast and multicast addresses (169.254.0.0/16, fe80::/10),
//     where most clouds put their metadata and credential services;
//   - the cloud metadata and credential services of MetadataServices,
//     those outside link-local included (Azure's 168.63.129.16, Alibaba's
//     100.100.100.200, Oracle's 192.0.0.192, AWS's fd00:ec2::/32, GCP's
//     fd20:ce::254, Oracle's fd00:c1::a9fe:a9fe), and the host names of
//     MetadataHosts;
//   - multicast addresses.
//
// An IPv6 address that carries an IPv4 address, in a form that routes to
// it, is also judged by the IPv4 rules applied to the address it carries
// (embeddedIPv4): IPv4-mapped (::ffff:169.254.169.254), IPv4-translated
// (::ffff:0:169.254.169.254), IPv4-compatible (::169.254.169.254,
// deprecated but still routed by some stacks), NAT64 (64:ff9b::/96, which
// a DNS64/NAT64 gateway, as in an IPv6-only VPC subnet, turns into a
// connection to the IPv4 address; and the local-use 64:ff9b:1::/48 at
// every RFC 6052 position), 6to4 (2002::/16) and Teredo (2001::/32,
// server and client). 64:ff9b::a9fe:a9fe is the metadata service, refused
// like 169.254.169.254. A zone (fe80::1%eth0) is ignored: the address is
// judged without it.
//
// Loopback (127.0.0.0/8, ::1, localhost and *.localhost) and plain http are
// refused except in local mode: `aegis serve` on a developer's machine,
// where the upstream is often a process on the same host. On AWS local is
// always false.
//
// Private addresses (10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, fc00::/7
// other than the metadata addresses in it, and 100.64.0.0/10 other than
// Alibaba's) are allowed: an upstream in the tenant's own VPC
// is the common deployment. Isolating one tenant's network from another is
// the network's job (the gateway's subnets and security groups), not this
// package's.
//
// Redirects are not this package's to check: a client that dials with
// Control must also refuse to follow redirects (gateway.NewHTTPClient and
// approval's webhook client do), so the URL that was validated is the one
// that is requested.
//
// Nor are proxies: a client that dials with Control must not use one
// (http.Transport.Proxy nil, so HTTP_PROXY, HTTPS_PROXY and NO_PROXY are
// ignored), because Control would then see the proxy's address and never
// the target's, and the proxy would connect to 169.254.169.254 on
// aegis's behalf. gateway.NewHTTPClient and approval's webhook client
// use none.
package netguard

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// MetadataService is a cloud's instance metadata or credential service:
// an address (or a range) that hands out the credentials of the machine
// or task it is asked from. Refused as a destination in every mode.
type MetadataService struct {
	Prefix netip.Prefix
	What   string // whose service, and what it serves
}

// MetadataServices are the metadata and credential services of the major
// clouds. The link-local ones are refused with all of 169.254.0.0/16 and
// fe80::/10 too; they are listed so that the refusal names the service.
var MetadataServices = []MetadataService{
	{netip.MustParsePrefix("169.254.169.254/32"), "the instance metadata service of AWS, GCP, Azure, Oracle Cloud and others"},
	{netip.MustParsePrefix("169.254.170.2/32"), "AWS ECS task metadata and credentials"},
	{netip.MustParsePrefix("169.254.170.23/32"), "AWS EKS Pod Identity credentials"},
	{netip.MustParsePrefix("fd00:ec2::/32"), "AWS's IPv6 service range (instance metadata fd00:ec2::254, EKS Pod Identity fd00:ec2::23, DNS, NTP)"},
	{netip.MustParsePrefix("fd20:ce::254/128"), "GCP's metadata server over IPv6"},
	{netip.MustParsePrefix("168.63.129.16/32"), "Azure's WireServer (VM agent, extension settings and secrets)"},
	{netip.MustParsePrefix("100.100.100.200/32"), "Alibaba Cloud's instance metadata service"},
	{netip.MustParsePrefix("192.0.0.192/32"), "Oracle Cloud's instance metadata service (its older address)"},
	{netip.MustParsePrefix("fd00:c1::a9fe:a9fe/128"), "Oracle Cloud's instance metadata service over IPv6"},
}

// MetadataHosts are host names of metadata services, refused by
// ValidateURL (case and a trailing dot aside) before any lookup. Any other
// name that resolves to a metadata address is refused when dialed.
var MetadataHosts = []string{
	"metadata.google.internal", // GCP
	"metadata",                 // GCP's short name, through the VM's search domain
}

// ValidateURL checks a URL aegis will send requests to (an upstream server,
// an issuer, a webhook) when it is registered. local is true only under
// aegis serve. Host names are not
// resolved here; Control checks the addresses they resolve to at connect
// time. The error says which rule was broken and is fit to show to the
// operator who registered the URL.
func ValidateURL(raw string, local bool) error { return validateURL(raw, local, local) }

// ValidateFetchURL checks a URL about to be fetched by a client that
// dials with Control (an issuer's discovery document, the jwks_uri it
// names): every rule of ValidateURL but loopback, which is left to the
// dial, where the client's own Control decides it (the aws-lambda-rie
// harness's client may reach loopback over https; no deployed one may).
func ValidateFetchURL(raw string, local bool) error { return validateURL(raw, local, true) }

// validateURL applies the rules; local allows http, loopback loopback.
func validateURL(raw string, local, loopback bool) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%q is not an absolute URL", raw)
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !local {
			return errors.New("https is required (http only with aegis serve)")
		}
	default:
		return fmt.Errorf("scheme %q: want https", u.Scheme)
	}
	if u.User != nil {
		return errors.New("credentials in the URL are not allowed; use a brokered credential")
	}
	host := u.Hostname()
	if ip, err := netip.ParseAddr(host); err == nil {
		return checkAddr(ip, loopback)
	}
	if ip, numeric, ok := ipv4Notation(host); numeric {
		if !ok {
			return fmt.Errorf("host %q is neither a host name nor an IPv4 address", host)
		}
		return fmt.Errorf("host %q is the IPv4 address %s in another notation; write addresses as a.b.c.d", host, ip)
	}
	name := strings.ToLower(strings.TrimSuffix(host, "."))
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		if !loopback {
			return errors.New("loopback hosts are allowed only with aegis serve")
		}
		return nil
	}
	if slices.Contains(MetadataHosts, name) {
		return fmt.Errorf("host %q is a cloud metadata service", host)
	}
	return nil
}

// ipv4Notation reads host as the WHATWG URL standard's IPv4 parser does
// (inet_aton reads the same forms): numeric is true when host's last
// label is a number (decimal, 0x hex or 0-led octal; a trailing dot
// aside), which makes it an IPv4 address or nothing; ok is true when it
// is one, ip. One to four parts, the last filling the bytes left.
func ipv4Notation(host string) (ip netip.Addr, numeric, ok bool) {
	host = strings.TrimSuffix(host, ".")
	parts := strings.Split(host, ".")
	number := func(p string) (uint64, bool) {
		base := 10
		switch {
		case len(p) >= 2 && (p[:2] == "0x" || p[:2] == "0X"):
			p, base = p[2:], 16
			if p == "" {
				return 0, true
			}
		case len(p) >= 2 && p[0] == '0':
			p, base = p[1:], 8
		}
		if p == "" || len(p) > 32 {
			return 0, false
		}
		n, err := strconv.ParseUint(p, base, 64)
		return n, err == nil
	}
	if _, isNum := number(parts[len(parts)-1]); !isNum && !allDigits(parts[len(parts)-1]) {
		return netip.Addr{}, false, false
	}
	if len(parts) > 4 {
		return netip.Addr{}, true, false
	}
	var v uint64
	for i, p := range parts {
		n, good := number(p)
		last := i == len(parts)-1
		if !good || (!last && n > 255) || (last && n >= 1<<(8*(5-len(parts)))) {
			return netip.Addr{}, true, false
		}
		if last {
			v = v<<(8*(5-len(parts))) | n
		} else {
			v = v<<8 | n
		}
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true, true
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// Control returns a net.Dialer Control function that applies the address
// rules to the address actually dialed, so a name that resolves to a
// forbidden address is refused at connect time. It is safe for concurrent
// use.
func Control(local bool) func(network, address string, c syscall.RawConn) error {
	return func(_, address string, _ syscall.RawConn) error {
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			return err
		}
		ip, err := netip.ParseAddr(host)
		if err != nil {
			return err
		}
		return checkAddr(ip, local)
	}
}

// checkAddr refuses the addresses aegis may never send a request to: ip
// itself, and every IPv4 address it carries (embeddedIPv4).
func checkAddr(ip netip.Addr, local bool) error {
	ip = ip.WithZone("").Unmap()
	if err := checkOne(ip, local); err != nil {
		return err
	}
	if !ip.Is6() {
		return nil
	}
	for _, v4 := range embeddedIPv4(ip) {
		if err := checkOne(v4, local); err != nil {
			return fmt.Errorf("address %s carries the IPv4 address %s: %w", ip, v4, err)
		}
	}
	return nil
}

// Prefixes of the IPv6 forms that carry an IPv4 address.
var (
	ipv4Translated = netip.MustParsePrefix("::ffff:0:0:0/96") // RFC 2765 (SIIT)
	nat64WellKnown = netip.MustParsePrefix("64:ff9b::/96")    // RFC 6052
	nat64LocalUse  = netip.MustParsePrefix("64:ff9b:1::/48")  // RFC 8215
	ipv4Compatible = netip.MustParsePrefix("::/96")           // RFC 4291, deprecated
	sixToFour      = netip.MustParsePrefix("2002::/16")       // RFC 3056
	teredo         = netip.MustParsePrefix("2001::/32")       // RFC 4380
)

// embeddedIPv4 returns the IPv4 addresses the IPv6 address ip (not
// IPv4-mapped: checkAddr unmaps first) carries in a form that routes to
// them:
//
//   - IPv4-compatible ::a.b.c.d, IPv4-translated ::ffff:0:a.b.c.d and
//     NAT64 64:ff9b::a.b.c.d: the last 32 bits;
//   - NAT64 local-use 64:ff9b:1::/48: the operator picks the prefix
//     length, so every RFC 6052 position within it (/48, /56, /64, /96);
//     a reading of 0.0.0.0 is skipped there, since it is what the zero
//     padding of any other position reads;
//   - 6to4 2002:AABB:CCDD::/48: bits 16 to 47;
//   - Teredo 2001:0:SSSS:SSSS::CCCC:CCCC: the server (bits 32 to 63) and
//     the client (the last 32 bits, inverted).
func embeddedIPv4(ip netip.Addr) []netip.Addr {
	b := ip.As16()
	v4 := func(i, j, k, l int) netip.Addr { return netip.AddrFrom4([4]byte{b[i], b[j], b[k], b[l]}) }
	switch {
	case nat64WellKnown.Contains(ip), ipv4Compatible.Contains(ip), ipv4Translated.Contains(ip):
		return []netip.Addr{v4(12, 13, 14, 15)}
	case nat64LocalUse.Contains(ip):
		var out []netip.Addr
		for _, a := range []netip.Addr{v4(6, 7, 9, 10), v4(7, 9, 10, 11), v4(9, 10, 11, 12), v4(12, 13, 14, 15)} {
			if !a.IsUnspecified() {
				out = append(out, a)
			}
		}
		return out
	case sixToFour.Contains(ip):
		return []netip.Addr{v4(2, 3, 4, 5)}
	case teredo.Contains(ip):
		client := netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]})
		return []netip.Addr{v4(4, 5, 6, 7), client}
	}
	return nil
}

// metadata is what MetadataServices says ip is; "" when it is none.
func metadata(ip netip.Addr) string {
	for _, m := range MetadataServices {
		if m.Prefix.Contains(ip) {
			return m.What
		}
	}
	return ""
}

// checkOne applies the address rules to ip alone.
func checkOne(ip netip.Addr, local bool) error {
	switch {
	case ip.IsUnspecified():
		return fmt.Errorf("address %s is unspecified", ip)
	case metadata(ip) != "" && ip.IsLinkLocalUnicast():
		return fmt.Errorf("address %s is link-local: %s", ip, metadata(ip))
	case metadata(ip) != "":
		return fmt.Errorf("address %s is %s", ip, metadata(ip))
	case ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast():
		return fmt.Errorf("address %s is link-local (cloud metadata lives there)", ip)
	case ip.IsLoopback() && !local:
		return fmt.Errorf("address %s is loopback; allowed only with aegis serve", ip)
	case ip.IsMulticast():
		return fmt.Errorf("address %s is multicast", ip)
	}
	return nil
}
