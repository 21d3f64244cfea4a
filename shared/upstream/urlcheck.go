package upstream

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
)

// ValidateURL checks an upstream URL when it is registered. Outside local
// mode it must be https; it may never name a link-local, cloud metadata or
// unspecified address, and a loopback address only in local mode. Host
// names are checked again at connect time by Control (DNS can change).
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
			return errors.New("loopback upstreams are allowed only with aegis serve")
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

// checkAddr refuses addresses an upstream may never have.
func checkAddr(ip netip.Addr, local bool) error {
	ip = ip.Unmap()
	switch {
	case ip.IsUnspecified():
		return fmt.Errorf("address %s is unspecified", ip)
	case ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast():
		return fmt.Errorf("address %s is link-local (cloud metadata lives there)", ip)
	case ip == netip.MustParseAddr("fd00:ec2::254"):
		return fmt.Errorf("address %s is the EC2 metadata service", ip)
	case ip.IsLoopback() && !local:
		return fmt.Errorf("address %s is loopback; allowed only with aegis serve", ip)
	case ip.IsMulticast():
		return fmt.Errorf("address %s is multicast", ip)
	}
	return nil
}

// Control returns a net.Dialer Control function that applies the same rule
// to the address actually dialed, so a name that resolves to a forbidden
// address (DNS rebinding) is refused at connect time.
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
