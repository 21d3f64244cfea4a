package registry

import (
	"fmt"
	"net/url"
	"strings"
)

// The values of Server.Auth: how a call reaches the server.
const (
	// AuthBrokered ("" too) is the default: the server's brokered
	// Credential, the same for every caller, or none.
	AuthBrokered = "brokered"
	// AuthOAuth: each caller reaches the server with their own OAuth
	// grant, a connection (shared/connect, docs/connections.md). A call by
	// a caller without one is answered with a link to make it.
	AuthOAuth = "oauth"
	// AuthTokenExchange: each caller reaches the server with a token
	// exchanged (RFC 8693) for the OAuth access token the caller came
	// with, at the tenant's token service (shared/connect, exchange.go).
	// The caller's own token is never sent on; an API-key caller, who
	// has no token to exchange, is refused.
	AuthTokenExchange = "token_exchange"
)

// AuthModes are the values Server.Auth takes ("" is AuthBrokered).
var AuthModes = []string{AuthBrokered, AuthOAuth, AuthTokenExchange}

// OAuthClient is the client a tenant registered at a server's
// authorization server, used for its callers' connections (auth: oauth)
// or their token exchanges (auth: token_exchange). The authorization
// server is discovered from the server (RFC 9728, then RFC 8414 or OpenID
// Connect discovery); only token exchange may name its token endpoint
// instead.
type OAuthClient struct {
	// ClientID is the client's id at the authorization server; "" with
	// auth: oauth: aegis registers a client of its own there (RFC 7591
	// dynamic registration) when its metadata has a
	// registration_endpoint, and keeps its secret sealed.
	ClientID string `json:"client_id" yaml:"client_id"`
	// ClientSecretRef names the client's secret, as a credential
	// reference (env:, file:, secretsmanager:, ssm:); "": a public client
	// (PKCE only, token_endpoint_auth_method none).
	ClientSecretRef string `json:"client_secret_ref,omitempty" yaml:"client_secret_ref"`
	// Scopes asked for; nil: the protected resource metadata's
	// scopes_supported, else none.
	Scopes []string `json:"scopes,omitempty" yaml:"scopes"`

	// The fields below are for auth: token_exchange only.

	// TokenEndpoint is the token service's endpoint that exchanges
	// tokens; "": the token_endpoint discovered from the server.
	TokenEndpoint string `json:"token_endpoint,omitempty" yaml:"token_endpoint"`
	// Audience, when set, is sent as the exchange's audience parameter
	// (the resource parameter is always the server's resource).
	Audience string `json:"audience,omitempty" yaml:"audience"`
	// SubjectTokenType is the type the caller's token is sent as:
	// SubjectAccessToken ("" too) or SubjectJWT.
	SubjectTokenType string `json:"subject_token_type,omitempty" yaml:"subject_token_type"`
}

// The values of OAuthClient.SubjectTokenType.
const (
	SubjectAccessToken = "access_token" // urn:ietf:params:oauth:token-type:access_token
	SubjectJWT         = "jwt"          // urn:ietf:params:oauth:token-type:jwt
)

// Bounds of an OAuth client's fields.
const (
	maxClientID = 256
	maxScopes   = 32
	maxEndpoint = 2048
)

// AuthError is a bad field of a server's auth settings: Field is its path
// under the server ("auth", "oauth.client_id", ...).
type AuthError struct {
	Field  string
	Reason string
}

func (e *AuthError) Error() string { return e.Field + ": " + e.Reason }

// ValidateServerAuth checks a server's auth settings with one rule for the
// config file and the admin API: auth is one of AuthModes (or ""); oauth
// settings are given exactly when auth is oauth or token_exchange, with a
// client id and an optional secret reference (ValidateCredentialRef), or,
// with auth oauth only, neither (aegis then registers its own client at
// the server's authorization server, RFC 7591); such
// a server has no brokered credential (the caller's own or exchanged
// token is its only Authorization). token_endpoint, audience and
// subject_token_type are for token_exchange only: the endpoint an
// absolute http(s) URL without fragment (the address checks run when it
// is called), the audience printable without spaces, the type one of
// access_token or jwt. The first bad field is returned as an *AuthError.
func ValidateServerAuth(auth string, o *OAuthClient, cred *Credential) error {
	switch auth {
	case "", AuthBrokered:
		if o != nil {
			return &AuthError{"oauth", "given only with auth: oauth or token_exchange"}
		}
		return nil
	case AuthOAuth, AuthTokenExchange:
	default:
		return &AuthError{"auth", fmt.Sprintf("%q: want one of %s", auth, strings.Join(AuthModes, ", "))}
	}
	if cred != nil {
		return &AuthError{"credential", "a server with auth: " + auth + " is reached with each caller's own token, not a brokered credential"}
	}
	if o == nil {
		return &AuthError{"oauth", "required with auth: " + auth + ": client_id (and client_secret_ref for a confidential client)"}
	}
	switch {
	case o.ClientID == "" && auth == AuthOAuth:
		// aegis registers its own client (RFC 7591): it keeps the secret.
		if o.ClientSecretRef != "" {
			return &AuthError{"oauth.client_secret_ref", "given only with a client_id (without one, aegis registers its own client and keeps its secret)"}
		}
	case o.ClientID == "" || len(o.ClientID) > maxClientID || !plainWord(o.ClientID):
		return &AuthError{"oauth.client_id", fmt.Sprintf("want 1-%d printable characters without spaces", maxClientID)}
	}
	if o.ClientSecretRef != "" {
		if err := ValidateCredentialRef(o.ClientSecretRef); err != nil {
			return &AuthError{"oauth.client_secret_ref", err.Error()}
		}
	}
	if len(o.Scopes) > maxScopes {
		return &AuthError{"oauth.scopes", fmt.Sprintf("at most %d", maxScopes)}
	}
	for i, s := range o.Scopes {
		if !validScope(s) {
			return &AuthError{fmt.Sprintf("oauth.scopes[%d]", i), fmt.Sprintf("%q: want a scope of 1-%d printable characters without spaces", s, maxScopeOrRole)}
		}
	}
	if auth != AuthTokenExchange {
		for _, f := range []struct{ name, v string }{{"token_endpoint", o.TokenEndpoint}, {"audience", o.Audience}, {"subject_token_type", o.SubjectTokenType}} {
			if f.v != "" {
				return &AuthError{"oauth." + f.name, "given only with auth: token_exchange"}
			}
		}
		return nil
	}
	if e := o.TokenEndpoint; e != "" {
		u, err := url.Parse(e)
		if err != nil || len(e) > maxEndpoint || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Fragment != "" || u.User != nil {
			return &AuthError{"oauth.token_endpoint", fmt.Sprintf("want an absolute http(s) URL of at most %d characters, without user or fragment", maxEndpoint)}
		}
	}
	if o.Audience != "" && (len(o.Audience) > maxEndpoint || !plainWord(o.Audience)) {
		return &AuthError{"oauth.audience", fmt.Sprintf("want 1-%d printable characters without spaces", maxEndpoint)}
	}
	switch o.SubjectTokenType {
	case "", SubjectAccessToken, SubjectJWT:
	default:
		return &AuthError{"oauth.subject_token_type", fmt.Sprintf("%q: want %s or %s", o.SubjectTokenType, SubjectAccessToken, SubjectJWT)}
	}
	return nil
}

// NeedsConnection reports whether calls to s use each caller's own
// connection (auth: oauth).
func (s *Server) NeedsConnection() bool { return s.Auth == AuthOAuth }

// ExchangesToken reports whether calls to s carry a token exchanged for
// the caller's own (auth: token_exchange).
func (s *Server) ExchangesToken() bool { return s.Auth == AuthTokenExchange }

// PerCaller reports whether calls to s carry a token of the calling
// caller's (auth: oauth or token_exchange): what is sent and what the
// server lists may differ by caller.
func (s *Server) PerCaller() bool { return s.NeedsConnection() || s.ExchangesToken() }

// refKinds are the kinds of credential reference (Credential.Ref).
var refKinds = []string{"env", "file", "secretsmanager", "ssm"}

// ValidateCredentialRef checks the form of a credential reference
// ("KIND:NAME", KIND one of env, file, secretsmanager, ssm), the one rule
// of the config file and the admin API. It does not resolve it; whether a
// kind may be used where it runs is shared/credentials' rule.
func ValidateCredentialRef(ref string) error {
	kind, rest, ok := strings.Cut(ref, ":")
	if !ok || rest == "" {
		return fmt.Errorf("%q: want env:NAME, file:/path, secretsmanager:ID or ssm:/name (the value itself is never stored)", ref)
	}
	for _, k := range refKinds {
		if k == kind {
			return nil
		}
	}
	return fmt.Errorf("%q: unknown kind %q (env, file, secretsmanager, ssm)", ref, kind)
}
