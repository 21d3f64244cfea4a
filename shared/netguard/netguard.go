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
// IPv4-mapped IPv6 addresses (::ffff:169.254.169.254) are judged as the
// IPv4 address they carry.
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

// checkAddr refuses the addresses aegis may never send a request to.
func checkAddr(ip netip.Addr, local bool) error {
	ip = ip.Unmap()
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
