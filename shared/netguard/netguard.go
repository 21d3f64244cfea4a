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
//   - the unspecified addresses 0.0.0.0 and ::;
//   - link-local unicast and multicast addresses (169.254.0.0/16, fe80::/10),
//     which hold the cloud metadata and credential services: EC2's and GCP's
//     169.254.169.254, ECS task credentials at 169.254.170.2;
//   - EC2's IPv6 metadata address fd00:ec2::254, and the host name
//     metadata.google.internal;
//   - multicast addresses.
//
// An IPv6 address that carries an IPv4 address, in a form that routes to
// it, is also judged by the IPv4 rules applied to the address it carries
// (embeddedIPv4): IPv4-mapped (::ffff:169.254.169.254), IPv4-compatible
// (::169.254.169.254, deprecated but still routed by some stacks), NAT64
// (64:ff9b::/96, which a DNS64/NAT64 gateway, as in an IPv6-only VPC
// subnet, turns into a connection to the IPv4 address; and the local-use
// 64:ff9b:1::/48 at every RFC 6052 position), 6to4 (2002::/16) and Teredo
// (2001::/32, server and client). 64:ff9b::a9fe:a9fe is the metadata
// service, refused like 169.254.169.254.
//
// Loopback (127.0.0.0/8, ::1, localhost and *.localhost) and plain http are
// refused except in local mode: `aegis serve` on a developer's machine,
// where the upstream is often a process on the same host. On AWS local is
// always false.
//
// Private addresses (10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, fc00::/7
// other than fd00:ec2::254) are allowed: an upstream in the tenant's own VPC
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
	"strings"
	"syscall"
)

// ec2MetadataV6 is EC2's instance metadata service over IPv6. It sits in
// the unique-local range, which is otherwise allowed.
var ec2MetadataV6 = netip.MustParseAddr("fd00:ec2::254")

// ValidateURL checks a URL aegis will send requests to (an upstream server
// or a webhook) when it is registered. local is true only under aegis serve.
// Host names are not resolved here; Control checks the addresses they
// resolve to at connect time. The error says which rule was broken and is
// fit to show to the operator who registered the URL.
func ValidateURL(raw string, local bool) error {
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
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		if !local {
			return errors.New("loopback hosts are allowed only with aegis serve")
		}
		return nil
	}
	if strings.EqualFold(host, "metadata.google.internal") {
		return errors.New("cloud metadata endpoints are not allowed")
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return checkAddr(ip, local)
	}
	return nil
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
	ip = ip.Unmap()
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
	nat64WellKnown = netip.MustParsePrefix("64:ff9b::/96")   // RFC 6052
	nat64LocalUse  = netip.MustParsePrefix("64:ff9b:1::/48") // RFC 8215
	ipv4Compatible = netip.MustParsePrefix("::/96")          // RFC 4291, deprecated
	sixToFour      = netip.MustParsePrefix("2002::/16")      // RFC 3056
	teredo         = netip.MustParsePrefix("2001::/32")      // RFC 4380
)

// embeddedIPv4 returns the IPv4 addresses the IPv6 address ip (not
// IPv4-mapped: checkAddr unmaps first) carries in a form that routes to
// them:
//
//   - IPv4-compatible ::a.b.c.d and NAT64 64:ff9b::a.b.c.d: the last 32
//     bits;
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
	case nat64WellKnown.Contains(ip), ipv4Compatible.Contains(ip):
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

// checkOne applies the address rules to ip alone.
func checkOne(ip netip.Addr, local bool) error {
	switch {
	case ip.IsUnspecified():
		return fmt.Errorf("address %s is unspecified", ip)
	case ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast():
		return fmt.Errorf("address %s is link-local (cloud metadata lives there)", ip)
	case ip == ec2MetadataV6:
		return fmt.Errorf("address %s is the EC2 metadata service", ip)
	case ip.IsLoopback() && !local:
		return fmt.Errorf("address %s is loopback; allowed only with aegis serve", ip)
	case ip.IsMulticast():
		return fmt.Errorf("address %s is multicast", ip)
	}
	return nil
}
