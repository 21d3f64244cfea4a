package connect

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aegis-gw/aegis/shared/netguard"
	"github.com/aegis-gw/aegis/shared/oauth"
)

// Metadata is what discovery learns of a server's authorization: the
// resource to ask tokens for and its authorization server's endpoints.
type Metadata struct {
	// Resource is the protected resource's identifier (RFC 9728
	// resource): the resource parameter of every request (RFC 8707).
	Resource string
	// Scopes the resource metadata says it supports (may be nil).
	Scopes                []string
	Issuer                string
	AuthorizationEndpoint string
	TokenEndpoint         string
	RevocationEndpoint    string
	// RegistrationEndpoint is RFC 7591's, when the server offers it.
	RegistrationEndpoint string
}

// DiscoveryError is a discovery that failed: Step names where ("probe",
// "resource metadata", "authorization server metadata").
type DiscoveryError struct {
	Step string
	Err  error
}

func (e *DiscoveryError) Error() string { return "discovery: " + e.Step + ": " + e.Err.Error() }
func (e *DiscoveryError) Unwrap() error { return e.Err }

// Discoverer finds a server's authorization server the way an MCP client
// does (MCP 2025-11-25, Authorization): it sends the server an
// unauthenticated request and reads the resource_metadata URL of its 401's
// WWW-Authenticate challenge (else the well-known URLs of RFC 9728 §3.1),
// reads the protected resource metadata (its resource must be the server
// URL), then the first authorization server's metadata (OpenID Connect
// discovery, else RFC 8414), whose issuer must be exactly the one the
// resource named, and which must offer PKCE with S256. Every URL fetched
// is checked by netguard (ValidateFetchURL; the client's dialer checks
// each address, netguard.Control). Results are cached per server URL for
// DiscoveryTTL, at most maxDiscovered of them. Safe for concurrent use.
type Discoverer struct {
	HTTP  *http.Client // its dialer must apply netguard.Control
	Local bool         // aegis serve: http and loopback allowed
	Now   func() time.Time

	mu    sync.Mutex
	cache map[string]discovered
}

// DiscoveryTTL is how long a server's discovered metadata is reused.
const DiscoveryTTL = 10 * time.Minute

const (
	maxDiscovered = 1024
	maxEndpoint   = 2048
)

type discovered struct {
	md      Metadata
	expires time.Time
}

// Discover returns serverURL's authorization metadata.
func (d *Discoverer) Discover(ctx context.Context, serverURL string) (Metadata, error) {
	now := d.Now()
	d.mu.Lock()
	if c, ok := d.cache[serverURL]; ok && now.Before(c.expires) {
		d.mu.Unlock()
		return c.md, nil
	}
	d.mu.Unlock()
	md, err := d.discover(ctx, serverURL)
	if err != nil {
		return Metadata{}, err
	}
	d.mu.Lock()
	if d.cache == nil || len(d.cache) >= maxDiscovered {
		d.cache = map[string]discovered{}
	}
	d.cache[serverURL] = discovered{md, now.Add(DiscoveryTTL)}
	d.mu.Unlock()
	return md, nil
}

// Forget drops serverURL's cached metadata (after a token request to its
// endpoints failed, say).
func (d *Discoverer) Forget(serverURL string) {
	d.mu.Lock()
	delete(d.cache, serverURL)
	d.mu.Unlock()
}

func (d *Discoverer) discover(ctx context.Context, serverURL string) (Metadata, error) {
	prmURLs, err := d.probe(ctx, serverURL)
	if err != nil {
		return Metadata{}, &DiscoveryError{"probe", err}
	}
	var prm struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
		ScopesSupported      []string `json:"scopes_supported"`
	}
	for _, u := range prmURLs {
		var status int
		status, err = oauth.GetJSON(ctx, d.HTTP, d.Local, u, &prm)
		if err == nil || status != http.StatusNotFound {
			break
		}
	}
	if err != nil {
		return Metadata{}, &DiscoveryError{"resource metadata", err}
	}
	if !sameResource(prm.Resource, serverURL) {
		return Metadata{}, &DiscoveryError{"resource metadata", fmt.Errorf("it names resource %q, not the server's URL %q", prm.Resource, serverURL)}
	}
	if len(prm.AuthorizationServers) == 0 {
		return Metadata{}, &DiscoveryError{"resource metadata", errors.New("it names no authorization server")}
	}
	issuer := prm.AuthorizationServers[0]
	if err := netguard.ValidateFetchURL(issuer, d.Local); err != nil {
		return Metadata{}, &DiscoveryError{"resource metadata", fmt.Errorf("authorization server %q: %w", issuer, err)}
	}
	var as struct {
		Issuer                string   `json:"issuer"`
		AuthorizationEndpoint string   `json:"authorization_endpoint"`
		TokenEndpoint         string   `json:"token_endpoint"`
		RevocationEndpoint    string   `json:"revocation_endpoint"`
		RegistrationEndpoint  string   `json:"registration_endpoint"`
		CodeChallengeMethods  []string `json:"code_challenge_methods_supported"`
	}
	for _, u := range oauth.DiscoveryURLs(issuer) {
		var status int
		status, err = oauth.GetJSON(ctx, d.HTTP, d.Local, u, &as)
		if err == nil || status != http.StatusNotFound {
			break
		}
	}
	const step = "authorization server metadata"
	if err != nil {
		return Metadata{}, &DiscoveryError{step, err}
	}
	if as.Issuer != issuer {
		return Metadata{}, &DiscoveryError{step, fmt.Errorf("the document names issuer %q, not %q", as.Issuer, issuer)}
	}
	if !slices.Contains(as.CodeChallengeMethods, "S256") {
		return Metadata{}, &DiscoveryError{step, errors.New("the authorization server does not offer PKCE with S256 (code_challenge_methods_supported)")}
	}
	for _, e := range []struct{ name, u string }{{"authorization_endpoint", as.AuthorizationEndpoint}, {"token_endpoint", as.TokenEndpoint}, {"revocation_endpoint", as.RevocationEndpoint}, {"registration_endpoint", as.RegistrationEndpoint}} {
		if e.u == "" && (e.name == "revocation_endpoint" || e.name == "registration_endpoint") {
			continue
		}
		if e.u == "" || len(e.u) > maxEndpoint {
			return Metadata{}, &DiscoveryError{step, fmt.Errorf("%s missing or over %d characters", e.name, maxEndpoint)}
		}
		if err := netguard.ValidateFetchURL(e.u, d.Local); err != nil {
			return Metadata{}, &DiscoveryError{step, fmt.Errorf("%s: %w", e.name, err)}
		}
	}
	return Metadata{Resource: prm.Resource, Scopes: prm.ScopesSupported, Issuer: issuer,
		AuthorizationEndpoint: as.AuthorizationEndpoint, TokenEndpoint: as.TokenEndpoint, RevocationEndpoint: as.RevocationEndpoint,
		RegistrationEndpoint: as.RegistrationEndpoint}, nil
}

// probe sends serverURL an unauthenticated initialize and returns the
// resource metadata URLs to try: the challenge's resource_metadata when
// the 401 names one, else RFC 9728's well-known URLs for the server's
// path, then for its root.
func (d *Discoverer) probe(ctx context.Context, serverURL string) ([]string, error) {
	if err := netguard.ValidateFetchURL(serverURL, d.Local); err != nil {
		return nil, err
	}
	body := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"aegis-gateway","version":"1"}}}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, serverURL, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := d.HTTP.Do(req)
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		return nil, fmt.Errorf("the server answered HTTP %d without credentials, not 401: it does not ask for OAuth", resp.StatusCode)
	}
	if u := challengeParam(resp.Header.Values("Www-Authenticate"), "resource_metadata"); u != "" {
		return []string{u}, nil
	}
	su, err := url.Parse(serverURL)
	if err != nil {
		return nil, err
	}
	root := su.Scheme + "://" + su.Host + "/.well-known/oauth-protected-resource"
	out := []string{}
	if p := strings.TrimSuffix(su.EscapedPath(), "/"); p != "" {
		out = append(out, root+p)
	}
	return append(out, root), nil
}

// challengeParam is the value of the auth-param name of a Bearer
// challenge among the WWW-Authenticate headers hs ("" when none).
func challengeParam(hs []string, name string) string {
	for _, h := range hs {
		scheme, rest, _ := strings.Cut(strings.TrimSpace(h), " ")
		if !strings.EqualFold(scheme, "Bearer") {
			continue
		}
		for rest != "" {
			var part string
			rest = strings.TrimLeft(rest, " ,")
			k, v, ok := strings.Cut(rest, "=")
			if !ok {
				break
			}
			k = strings.TrimSpace(k)
			if strings.HasPrefix(v, `"`) {
				end := strings.IndexByte(v[1:], '"')
				if end < 0 {
					break
				}
				part, rest = v[1:1+end], v[2+end:]
			} else {
				part, rest, _ = strings.Cut(v, ",")
			}
			if strings.EqualFold(k, name) {
				return strings.TrimSpace(part)
			}
		}
	}
	return ""
}

// sameResource: the metadata's resource is the server URL, a trailing
// slash aside.
func sameResource(resource, serverURL string) bool {
	return resource != "" && strings.TrimSuffix(resource, "/") == strings.TrimSuffix(serverURL, "/")
}
